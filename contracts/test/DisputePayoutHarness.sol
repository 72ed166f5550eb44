// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IDisputeManager} from "../interfaces/IDisputeManager.sol";
import {DisputePayout} from "../lib/DisputePayout.sol";

/// @title DisputePayoutHarness
/// @notice Exposes the internal `DisputePayout` library as external calls (tests/test_dispute_libraries.py).
contract DisputePayoutHarness {
    /// @notice See {DisputePayout-refereeReward}.
    function refereeReward(uint256 bond) external pure returns (uint256) {
        return DisputePayout.refereeReward(bond);
    }

    /// @notice See {DisputePayout-decide}.
    function decide(uint256 drawn, uint256 faithfulVotes, uint256 cheatedVotes)
        external
        pure
        returns (IDisputeManager.Outcome)
    {
        return DisputePayout.decide(drawn, faithfulVotes, cheatedVotes);
    }

    /// @notice See {DisputePayout-winningVerdict}.
    function winningVerdict(IDisputeManager.Outcome outcome) external pure returns (IDisputeManager.Verdict) {
        return DisputePayout.winningVerdict(outcome);
    }

    /// @notice See {DisputePayout-split}.
    function split(IDisputeManager.Outcome outcome, uint256 bond, uint256 reward, uint256 taken)
        external
        pure
        returns (uint256 toChallenger, uint256 toRequester, uint256 toAccused, uint256 toReferees)
    {
        return DisputePayout.split(outcome, bond, reward, taken);
    }

    /// @notice See {DisputePayout-splitPool}.
    function splitPool(uint256 pool, uint256 majority)
        external
        pure
        returns (uint256 toChallenger, uint256 share, uint256 dust)
    {
        return DisputePayout.splitPool(pool, majority);
    }

    /// @notice See {DisputePayout-penalized}.
    function penalized(IDisputeManager.Outcome finalOutcome, IDisputeManager.Verdict verdict)
        external
        pure
        returns (bool)
    {
        return DisputePayout.penalized(finalOutcome, verdict);
    }

    /// @notice See {DisputePayout-appealRefunded}.
    function appealRefunded(IDisputeManager.Outcome finalOutcome, IDisputeManager.Outcome appealed)
        external
        pure
        returns (bool)
    {
        return DisputePayout.appealRefunded(finalOutcome, appealed);
    }
}
