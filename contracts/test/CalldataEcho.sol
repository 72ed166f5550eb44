// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ITranscriptSettlement} from "../interfaces/ITranscriptSettlement.sol";

/// @title CalldataEcho
/// @notice The fuzz oracle of the node's calldata reader (node/chain/calldata.py, tests/test_transcript_calldata.py):
/// TranscriptSettlement's entry points by the same signatures (so the same selectors), each returning what Solidity's
/// own calldata decoder read from the call, re-encoded canonically. Any calldata, canonical or not, sent here gives
/// the values TranscriptSettlement acts on when it accepts that calldata.
contract CalldataEcho {
    /// @notice What `TranscriptSettlement.settle` reads from this calldata.
    /// @param a The Settlement and its signatures.
    /// @param cycles The packed cycles.
    /// @return The arguments, ABI-encoded canonically.
    function settle(ITranscriptSettlement.Signed calldata a, bytes calldata cycles) external pure returns (bytes memory) {
        return abi.encode(a, cycles);
    }

    /// @notice What `TranscriptSettlement.forceMove` reads from this calldata.
    /// @param jobId The job.
    /// @param e The evidence.
    /// @param cycles The packed cycles.
    /// @return The arguments, ABI-encoded canonically.
    function forceMove(uint256 jobId, ITranscriptSettlement.Evidence calldata e, bytes calldata cycles)
        external
        pure
        returns (bytes memory)
    {
        return abi.encode(jobId, e, cycles);
    }

    /// @notice What `TranscriptSettlement.answerForce` reads from this calldata.
    /// @param jobId The job.
    /// @param a The answer.
    /// @return The arguments, ABI-encoded canonically.
    function answerForce(uint256 jobId, ITranscriptSettlement.Answer calldata a) external pure returns (bytes memory) {
        return abi.encode(jobId, a);
    }
}
