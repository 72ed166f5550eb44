// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IDisputeManager} from "../interfaces/IDisputeManager.sol";

/// @title DisputePayout
/// @notice Who gets what when a dispute ends: the outcome a panel's votes decide, the split of the bond and of the
/// accused's slash on each outcome, and the split of the referees' pool (docs/disputes.md, "Outcomes and money").
/// @dev All functions are `internal pure`: they are inlined into the dispute manager, which moves the money.
library DisputePayout {
    /// @notice Basis points.
    uint256 internal constant BPS = 10_000;
    /// @notice Share (bps) of the accused's slash, after the referees' reward, that goes to the challenger; the
    /// requester gets the rest.
    uint256 internal constant CHALLENGER_SHARE_BPS = 5_000;
    /// @notice Share (bps) of the bond that the majority referees earn whichever side wins, so that a referee's pay
    /// never depends on which way it votes.
    uint256 internal constant REFEREE_SHARE_BPS = 5_000;

    /// @notice The referees' reward W on a decided dispute: bond × REFEREE_SHARE_BPS / BPS.
    /// @param bond The challenger's bond B.
    /// @return W.
    function refereeReward(uint256 bond) internal pure returns (uint256) {
        return (bond * REFEREE_SHARE_BPS) / BPS;
    }

    /// @notice The outcome of a vote: a strict majority of the drawn panel (more than `drawn / 2` votes) decides;
    /// a tie or too few reveals is Void.
    /// @param drawn Referees drawn, n.
    /// @param faithfulVotes Revealed AccusedFaithful votes.
    /// @param cheatedVotes Revealed AccusedCheated votes.
    /// @return AccusedLost, ChallengerLost or Void.
    function decide(uint256 drawn, uint256 faithfulVotes, uint256 cheatedVotes)
        internal
        pure
        returns (IDisputeManager.Outcome)
    {
        uint256 half = drawn / 2;
        if (cheatedVotes > half) return IDisputeManager.Outcome.AccusedLost;
        if (faithfulVotes > half) return IDisputeManager.Outcome.ChallengerLost;
        return IDisputeManager.Outcome.Void;
    }

    /// @notice The verdict the majority voted for on `outcome` (None on Void: every revealer counts as majority).
    /// @param outcome The decided outcome.
    /// @return The winning verdict.
    function winningVerdict(IDisputeManager.Outcome outcome) internal pure returns (IDisputeManager.Verdict) {
        if (outcome == IDisputeManager.Outcome.AccusedLost) return IDisputeManager.Verdict.AccusedCheated;
        if (outcome == IDisputeManager.Outcome.ChallengerLost) return IDisputeManager.Verdict.AccusedFaithful;
        return IDisputeManager.Verdict.None;
    }

    /// @notice How the bond B and the slash T actually taken from the accused are split on `outcome`:
    /// * AccusedLost: the referees get min(T, W); the challenger B + 50 % of the rest, the requester the other part.
    /// * AccusedSilent: no referee is paid; the challenger B + 50 % of T, the requester the other part.
    /// * ChallengerLost: the referees get W out of the bond, the accused B − W.
    /// * Void: the challenger gets B back.
    /// Referee penalties are not part of it: they join `toReferees` in the referees' pool (see `splitPool`).
    /// Every wei is paid: toChallenger + toRequester + toAccused + toReferees = B + T.
    /// @param outcome How the dispute ended (not None).
    /// @param bond The challenger's bond B.
    /// @param reward The referees' reward W (≤ B).
    /// @param taken The slash T taken from the accused (0 unless AccusedLost or AccusedSilent). B and T are
    /// wei amounts below 2^128.
    /// @return toChallenger Credited to the challenger.
    /// @return toRequester Credited to the job's requester.
    /// @return toAccused Credited to the accused.
    /// @return toReferees The referees' reward pool before penalties.
    function split(IDisputeManager.Outcome outcome, uint256 bond, uint256 reward, uint256 taken)
        internal
        pure
        returns (uint256 toChallenger, uint256 toRequester, uint256 toAccused, uint256 toReferees)
    {
        // Unchecked: every amount is below 2^128 (a slash is capped by a uint128 stake, a bond is a msg.value),
        // so no product or sum overflows, and each subtraction takes away at most what it subtracts from
        // (toReferees ≤ taken, share ≤ rest, reward ≤ bond).
        unchecked {
            if (outcome == IDisputeManager.Outcome.AccusedLost) {
                toReferees = taken < reward ? taken : reward;
                uint256 rest = taken - toReferees;
                uint256 share = (rest * CHALLENGER_SHARE_BPS) / BPS;
                return (bond + share, rest - share, 0, toReferees);
            }
            if (outcome == IDisputeManager.Outcome.AccusedSilent) {
                uint256 share = (taken * CHALLENGER_SHARE_BPS) / BPS;
                return (bond + share, taken - share, 0, 0);
            }
            if (outcome == IDisputeManager.Outcome.ChallengerLost) return (0, 0, bond - reward, reward);
            return (bond, 0, 0, 0);
        }
    }

    /// @notice Splits the referees' pool (reward and penalties) equally among the `majority` referees, the
    /// integer-division dust to the first of them; with no majority referee (Void, nobody revealed) it all goes to
    /// the challenger.
    /// @param pool The pool, wei.
    /// @param majority Referees in the majority (on Void: those who revealed).
    /// @return toChallenger The pool when `majority` is 0, else 0.
    /// @return share What each majority referee gets.
    /// @return dust What the first majority referee gets on top.
    function splitPool(uint256 pool, uint256 majority)
        internal
        pure
        returns (uint256 toChallenger, uint256 share, uint256 dust)
    {
        if (majority == 0) return (pool, 0, 0);
        unchecked {
            // share × majority ≤ pool
            share = pool / majority;
            dust = pool % majority;
        }
    }

    /// @notice Whether a drawn referee with revealed verdict `verdict` (None: did not reveal) is penalized once the
    /// dispute's final verdict is `finalOutcome`: a non-revealer always; a revealer when the final outcome is
    /// decided (AccusedLost / ChallengerLost) and it voted the other way. Applied to the referees of every round.
    /// @param finalOutcome The dispute's final outcome (the last round's result).
    /// @param verdict The referee's revealed verdict.
    /// @return True when it is slashed `refereePenalty`.
    function penalized(IDisputeManager.Outcome finalOutcome, IDisputeManager.Verdict verdict)
        internal
        pure
        returns (bool)
    {
        if (verdict == IDisputeManager.Verdict.None) return true;
        IDisputeManager.Verdict winning = winningVerdict(finalOutcome);
        return winning != IDisputeManager.Verdict.None && verdict != winning;
    }

    /// @notice Whether an appeal bond comes back: when the final outcome differs from the result the appeal
    /// contested (the appeal changed the verdict); otherwise it is forfeited and burnt.
    /// @param finalOutcome The dispute's final outcome.
    /// @param appealed The result of the round the appeal contested.
    /// @return True when the appellant gets its bond back.
    function appealRefunded(IDisputeManager.Outcome finalOutcome, IDisputeManager.Outcome appealed)
        internal
        pure
        returns (bool)
    {
        return finalOutcome != appealed;
    }
}
