// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title IInferenceMarket
/// @notice What the dispute manager needs from the inference market.
interface IInferenceMarket {
    enum JobStatus {
        None, // no such job
        Open, // submitted, waiting for the verifier's acceptJob
        Running, // cycles in progress
        Finished, // generation ended (EOS / maxTokens / a timeout); challenge window running
        Finalized // paid out; no dispute can be opened any more
    }

    struct JobParties {
        address requester;
        address drafter;
        address verifier;
        bytes32 draftModel;
        bytes32 targetModel;
    }

    /// @notice Status of `jobId`.
    function jobStatus(uint256 jobId) external view returns (JobStatus);

    /// @notice Who takes part in `jobId` and which models it runs.
    function jobParties(uint256 jobId) external view returns (JobParties memory);

    /// @notice The stored record hash of `cycle` of `jobId` (see CycleRecord.hash); zero if not verified.
    function cycleRecordHash(uint256 jobId, uint32 cycle) external view returns (bytes32);

    /// @notice Marks a dispute open on `jobId`: finalize is blocked until every open dispute is closed.
    /// @dev Only the dispute manager. Reverts unless the job is Running or Finished.
    function disputeOpened(uint256 jobId) external;

    /// @notice Marks a dispute on `jobId` closed. When `accusedLost`, the market stops the job (if still
    /// running) and the losing party's unpaid earnings on the job are forfeited to the requester.
    /// @dev Only the dispute manager.
    function disputeClosed(uint256 jobId, address accused, bool accusedLost) external;
}
