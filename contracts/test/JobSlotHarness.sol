// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {JobSlot} from "../lib/JobSlot.sol";

/// @title JobSlotHarness
/// @notice Exposes the internal `JobSlot` library as external calls, so the tests can pin the bit layout of the
/// market's job words (tests/test_job_slot.py).
contract JobSlotHarness {
    /// @notice See {JobSlot-pack}.
    function pack(
        address drafter,
        uint256 state,
        uint256 gamma,
        uint256 cycle,
        uint256 emitted,
        uint256 rejected,
        uint256 deadline
    ) external pure returns (uint256) {
        return JobSlot.pack(drafter, state, gamma, cycle, emitted, rejected, deadline);
    }

    /// @notice See {JobSlot-nextCycle}.
    function nextCycle(uint256 word, uint256 state, uint256 count, uint256 rejection, uint256 deadline)
        external
        pure
        returns (uint256)
    {
        return JobSlot.nextCycle(word, state, count, rejection, deadline);
    }

    /// @notice Every slot 0 field reader of {JobSlot} applied to `word` (the status is {status}).
    function unpack(uint256 word)
        external
        pure
        returns (
            address drafter,
            uint256 state,
            uint256 gamma,
            uint256 cycle,
            uint256 emitted,
            uint256 rejected,
            uint256 deadline
        )
    {
        return (
            JobSlot.drafter(word),
            JobSlot.state(word),
            JobSlot.gamma(word),
            JobSlot.cycle(word),
            JobSlot.emitted(word),
            JobSlot.rejected(word),
            JobSlot.deadline(word)
        );
    }

    /// @notice See {JobSlot-status}.
    function status(uint256 word) external pure returns (uint256) {
        return JobSlot.status(word);
    }

    /// @notice Every slot 1 reader of {JobSlot} applied to `info`.
    function unpackInfo(uint256 info)
        external
        pure
        returns (address verifier, uint256 maxTokens, uint256 eosToken, uint256 openDisputes, uint256 vocabSize)
    {
        return (
            JobSlot.verifier(info),
            JobSlot.maxTokens(info),
            JobSlot.eosToken(info),
            JobSlot.openDisputes(info),
            JobSlot.vocabSize(info)
        );
    }
}
