// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IInferenceMarket} from "./IInferenceMarket.sol";

/// @title IDisputeManager
/// @notice The dispute manager's types, events, errors and external functions: optimistic, replay-refereed
/// disputes of docs/protocol.md §6 over one position of one verified cycle (docs/disputes.md).
interface IDisputeManager {
    // ------------------------------------------------------------------ types

    /// @notice What the challenger claims. DraftReplay accuses the job's drafter (x_i is not invcdf(q, s), or q_i is
    /// not the draft model's probability); TargetReplay accuses the job's verifier (p_i, or outToken, is not what
    /// the target model gives).
    enum Kind {
        DraftReplay,
        TargetReplay
    }

    /// @notice Phase of a dispute. Commit and reveal sub-phases of `Voting` are told apart by the deadlines.
    /// `Appealable`: a round's vote is decided and may be appealed until `appealDeadline`; `Drawing`: an appeal
    /// round waits for its panel.
    enum Status {
        None,
        AwaitingAnswer,
        Voting,
        Resolved,
        Appealable,
        Drawing
    }

    /// @notice A referee's vote.
    enum Verdict {
        None,
        AccusedFaithful,
        AccusedCheated
    }

    /// @notice How a dispute ended.
    enum Outcome {
        None,
        AccusedLost, // a strict majority of the drawn referees voted AccusedCheated
        ChallengerLost, // a strict majority of the drawn referees voted AccusedFaithful
        Void, // no strict majority (tie, too few reveals), or too few referees after every escalation: bonds back
        AccusedSilent // the accused did not answer in time: it loses, referees are released unpaid and unpunished
    }

    /// @notice Whether a (job, cycle, index, kind) position may be disputed.
    enum PositionState {
        Free,
        Open, // a dispute on it is running
        Proven // a dispute on it ended with the accused losing; it cannot be punished twice
    }

    /// @notice Preimage of the market's cycle record hash (see CycleRecord.hash).
    struct CycleRecordPreimage {
        bytes32 draftRoot;
        uint64[] p;
        uint32 accepted;
        uint32 outToken;
    }

    /// @notice The disputed draft leaf (token x_i, q_i) and its Merkle proof against the draft root.
    /// Ignored (pass zeros and an empty proof) for the outToken position `index == K`.
    struct LeafProof {
        uint32 token;
        uint64 q;
        bytes32[] proof;
    }

    /// @notice Deployment parameters (the constructor's third argument; node/chain/params.py `disputes_args`).
    struct Config {
        uint256 bond; // exact bond (wei) of a challenger; > 0 and < 2^120; an appeal into round k posts bond × 2^k
        uint256 answerPeriod; // seconds the accused has to answer once the first panel is drawn; 1..MAX_PERIOD
        uint256 commitPeriod; // seconds the referees have to commit; 1..MAX_PERIOD
        uint256 revealPeriod; // seconds the referees have to reveal after the commit deadline; 1..MAX_PERIOD
        uint256 refereeCount; // seats R of the first panel (odd); the last appeal's 2^A (R + 1) − 1 ≤ MAX_REFEREES
        uint256 accusedSlash; // stake (wei) slashed from an accused that loses
        uint256 refereePenalty; // stake (wei) slashed (burnt) from a no-show or a referee against the final verdict
        uint256 appealPeriod; // seconds a decided round may be appealed; 1..MAX_PERIOD
        uint256 escalationPeriod; // seconds an escalated draw waits for a fresh seed; 1..MAX_PERIOD
        uint256 maxAppeals; // appeal rounds A; 1..MAX_APPEALS
        uint256 maxEscalations; // escalations per round before the dispute ends Void; 0..MAX_ESCALATIONS
    }

    /// @notice Stored state of a dispute. The deadlines, the draw and the vote counts are those of the current
    /// round `round` (0 = the first panel, k = the k-th appeal); earlier rounds are in `roundOf`.
    struct Dispute {
        uint256 jobId;
        address challenger;
        uint32 cycle;
        uint32 index;
        Kind kind;
        Status status;
        Outcome outcome;
        address accused;
        uint64 answerDeadline;
        address requester;
        uint64 commitDeadline;
        bytes32 modelId;
        bytes32 answerHash;
        uint64 revealDeadline;
        uint8 drawn;
        uint8 commits;
        uint8 reveals;
        uint8 faithfulVotes;
        uint8 cheatedVotes;
        uint64 drawBlock; // the block whose hash seeds the current draw; 0 while an escalation waits for drawAfter
        uint8 round; // 0 = first panel; k = k-th appeal
        uint8 panelSize; // seats of the current round: R, then 2R+1, ...
        uint8 escalations; // draws of the current round that found too few referees
        uint64 drawAfter; // an escalated draw may be scheduled from this time on
        uint64 appealDeadline; // Appealable until this time
        Outcome roundResult; // the decided result of the latest voted round (what an appeal contests)
    }

    /// @notice One finished round of a dispute: its vote result and, for k ≥ 1, who appealed into it and with what.
    struct Round {
        Outcome result; // AccusedLost, ChallengerLost or Void (no strict majority); None while running
        uint8 faithfulVotes;
        uint8 cheatedVotes;
        Outcome appealed; // k ≥ 1: the result of round k - 1 that this round's appeal contested
        address appellant; // k ≥ 1: who posted the appeal bond
        uint256 appealBond; // k ≥ 1: bond << k
    }

    /// @notice A drawn referee's ballot (`drawn`, `verdict` and `round` share a slot). A referee sits on at most one
    /// panel of a dispute: later rounds exclude earlier panels.
    struct Ballot {
        bytes32 commitment;
        bool drawn;
        Verdict verdict;
        uint8 round;
    }

    // ------------------------------------------------------------------ events

    /// @notice A dispute was opened. `token` is the disputed token (x_i, or outToken when index == K) and
    /// `claimedValue` the value the accused posted for it (q_i for DraftReplay, p_i for TargetReplay, 0 for outToken).
    event DisputeOpened(
        uint256 indexed disputeId,
        uint256 indexed jobId,
        address indexed challenger,
        uint32 cycle,
        uint32 index,
        Kind kind,
        address accused,
        bytes32 modelId,
        uint32 token,
        uint64 claimedValue,
        uint64 answerDeadline
    );
    /// @notice The referee panel of round `round` of `disputeId`.
    event RefereesDrawn(uint256 indexed disputeId, uint8 round, address[] referees);
    /// @notice The seed block's hash was no longer available (over 256 blocks old): the draw now waits for the hash
    /// of `drawBlock`, the block of this call. (A stake tree changed after the seed does not reschedule: draws read
    /// the tree of the block before their seed.)
    event DrawRescheduled(uint256 indexed disputeId, uint64 drawBlock);
    /// @notice The draw of round `round` found fewer eligible referees than seats: escalation number `escalations`;
    /// a fresh draw may be scheduled from `drawAfter` on (the answer deadline moves with it).
    event DrawEscalated(uint256 indexed disputeId, uint8 round, uint8 escalations, uint64 drawAfter);
    /// @notice Appeal round `round` could not be staffed after its last escalation: the appeal is undone, `appellant`
    /// gets its `refund` (credited), and the dispute ends with the verdict of round `round` - 1.
    event AppealUnstaffed(uint256 indexed disputeId, uint8 round, address indexed appellant, uint256 refund);
    /// @notice An escalated draw was scheduled: it is seeded by the hash of `drawBlock`, the block of this call.
    event DrawScheduled(uint256 indexed disputeId, uint8 round, uint64 drawBlock);
    /// @notice Round `round` was voted: `result` stands unless appealed by `appealDeadline` (0 when it is final).
    event RoundDecided(
        uint256 indexed disputeId,
        uint8 round,
        Outcome result,
        uint256 faithfulVotes,
        uint256 cheatedVotes,
        uint64 appealDeadline
    );
    /// @notice `appellant` appealed round `round - 1` (result `appealed`) with `amount` wei: round `round`, a fresh
    /// panel of `panelSize`, is drawn from the hash of `drawBlock`.
    event Appealed(
        uint256 indexed disputeId,
        uint8 round,
        address indexed appellant,
        Outcome appealed,
        uint256 amount,
        uint8 panelSize,
        uint64 drawBlock
    );
    /// @notice The accused answered with its replay; only `answerHash` = keccak256(abi.encode(claimedProb,
    /// topTokens, topProbs)) is stored.
    event Answered(
        uint256 indexed disputeId,
        uint64 claimedProb,
        uint32[] topTokens,
        uint64[] topProbs,
        bytes32 answerHash,
        uint64 commitDeadline,
        uint64 revealDeadline
    );
    /// @notice A referee committed its sealed vote.
    event VoteCommitted(uint256 indexed disputeId, address indexed referee, bytes32 commitment);
    /// @notice A referee revealed its vote.
    event VoteRevealed(uint256 indexed disputeId, address indexed referee, Verdict verdict);
    /// @notice A referee that did not reveal, or voted with the minority, was slashed `taken` wei.
    event RefereePenalized(uint256 indexed disputeId, address indexed referee, uint256 taken);
    /// @notice The dispute ended; `accusedSlashed` is what was actually taken from the accused's stake.
    event DisputeResolved(
        uint256 indexed disputeId, Outcome outcome, uint256 faithfulVotes, uint256 cheatedVotes, uint256 accusedSlashed
    );
    /// @notice `amount` wei became withdrawable by `account` from `disputeId`.
    event Credited(uint256 indexed disputeId, address indexed account, uint256 amount);
    /// @notice `account` withdrew `amount` wei.
    event Withdrawn(address indexed account, uint256 amount);

    // ------------------------------------------------------------------ errors

    /// @notice A constructor address was zero.
    error DisputeZeroAddress();
    /// @notice A constructor parameter was out of range.
    error InvalidParameter(string name, uint256 value);
    /// @notice `msg.value` was not the bond.
    error WrongBond(uint256 sent, uint256 required);
    /// @notice The job is not Running or Finished (not started, unknown, or already finalized).
    error JobNotDisputable(uint256 jobId, IInferenceMarket.JobStatus status);
    /// @notice The cycle has no stored record (not verified).
    error CycleNotVerified(uint256 jobId, uint32 cycle);
    /// @notice The supplied preimage does not hash to the stored cycle record.
    error RecordMismatch(bytes32 stored, bytes32 supplied);
    /// @notice `index` is beyond the outToken position K.
    error IndexOutOfRange(uint32 index, uint256 k);
    /// @notice The position is after the first rejection, where nothing binds.
    error PositionDoesNotBind(uint32 index, uint32 accepted);
    /// @notice The outToken position (index == K) is the verifier's: only TargetReplay can dispute it.
    error OutTokenNeedsTargetReplay();
    /// @notice The leaf (token, q) with its proof does not verify against the draft root.
    error InvalidProof();
    /// @notice The challenger is the party it accuses.
    error ChallengerIsAccused();
    /// @notice A dispute on this position is already running.
    error PositionUnderDispute(uint256 jobId, uint32 cycle, uint32 index, Kind kind);
    /// @notice The accused already lost a dispute on this position.
    error PositionAlreadyProven(uint256 jobId, uint32 cycle, uint32 index, Kind kind);
    /// @notice Nobody could referee: no referee is registered for the model.
    error NoEligibleReferees(bytes32 modelId);
    /// @notice The draw needs the hash of `drawBlock`, which exists only from the next block on.
    error DrawTooEarly(uint64 drawBlock);
    /// @notice The referees of this dispute are already drawn.
    error AlreadyDrawn(uint256 disputeId);
    /// @notice The answer needs a drawn panel and cannot draw it in this call (the seed block `drawBlock` is too old,
    /// the stake tree changed after it, the draw escalated, or it waits for its escalation period): call
    /// `drawReferees` (it reschedules, escalates or schedules the draw) and answer once it has drawn.
    error PanelNotDrawn(uint64 drawBlock);
    /// @notice No such dispute, or it is in another phase.
    error DisputeWrongStatus(uint256 disputeId, Status status);
    /// @notice Only the accused may answer.
    error NotAccused();
    /// @notice The answer came after the answer deadline.
    error AnswerPeriodOver(uint64 deadline);
    /// @notice The answer deadline has not passed yet.
    error AnswerPeriodNotOver(uint64 deadline);
    /// @notice top-k must have 1..MAX_TOP_K entries.
    error BadTopK(uint256 k);
    /// @notice topTokens and topProbs differ in length.
    error TopKLengthMismatch(uint256 tokens, uint256 probs);
    /// @notice A probability (or the sum of the top-k) exceeds WAD.
    error ProbabilityAboveWad(uint256 value);
    /// @notice The caller is not a referee drawn for this dispute.
    error NotDrawnReferee();
    /// @notice The commit deadline has passed.
    error CommitPeriodOver(uint64 deadline);
    /// @notice A commitment must be non-zero.
    error EmptyCommitment();
    /// @notice The referee already committed.
    error AlreadyCommitted();
    /// @notice The referee did not commit, so it cannot reveal.
    error NotCommitted();
    /// @notice The referee already revealed.
    error AlreadyRevealed();
    /// @notice Reveals open after the commit deadline (or once every drawn referee has committed).
    error RevealPeriodNotOpen(uint64 commitDeadline);
    /// @notice The reveal deadline has passed.
    error RevealPeriodOver(uint64 deadline);
    /// @notice A revealed verdict must be AccusedFaithful or AccusedCheated.
    error InvalidVerdict();
    /// @notice (verdict, salt) does not match the commitment.
    error WrongReveal();
    /// @notice The dispute cannot be resolved yet: reveals are still possible before `revealDeadline`.
    error TooEarlyToResolve(uint64 revealDeadline);
    /// @notice Nothing credited to the caller.
    error NothingToWithdraw();
    /// @notice Sending ETH to a withdrawing account failed.
    error DisputeTransferFailed();
    /// @notice Only the registry (paying out slashes) may send ETH outside openDispute.
    error OnlyRegistry();
    /// @notice An escalated draw cannot be scheduled before `drawAfter`.
    error EscalationPending(uint64 drawAfter);
    /// @notice The appeal period ended at `deadline`.
    error AppealPeriodOver(uint64 deadline);
    /// @notice The appeal period has not ended yet: it does at `deadline`.
    error AppealPeriodNotOver(uint64 deadline);
    /// @notice `msg.value` was not the appeal bond of the next round.
    error WrongAppealBond(uint256 sent, uint256 required);

    // ------------------------------------------------------------------ open, draw, answer

    /// @notice Opens a dispute on position `index` of `cycle` of `jobId`, posting exactly `bond` wei.
    /// @param jobId The job; it must be Running or Finished.
    /// @param cycle The verified cycle.
    /// @param index 0..K-1 disputes proposal `index` (DraftReplay: x_i / q_i; TargetReplay: p_i) and must satisfy
    /// `index <= accepted` (later positions bind nothing); `index == K` disputes outToken (TargetReplay only).
    /// @param kind DraftReplay (accuses the drafter, panel for the draft model) or TargetReplay (accuses the
    /// verifier, panel for the target model).
    /// @param record Preimage of `market.cycleRecordHash(jobId, cycle)`; K = record.p.length.
    /// @param leafProof The disputed leaf (token, q) and its proof against record.draftRoot (unused when index == K).
    /// @return disputeId Id of the new dispute. Its referees are drawn from the next block on (`drawReferees`).
    function openDispute(
        uint256 jobId,
        uint32 cycle,
        uint32 index,
        Kind kind,
        CycleRecordPreimage calldata record,
        LeafProof calldata leafProof
    ) external payable returns (uint256 disputeId);

    /// @notice Draws the referees of `disputeId` from the hash of its seed block (the block that opened it), among
    /// the referees for the disputed model that registered no later than that block, and locks them. Anyone may
    /// call it from the block after the seed block on; `answer` calls it when nobody has. When the seed block is
    /// more than 256 blocks old its hash is gone: the draw is rescheduled to this call's block (`DrawRescheduled`)
    /// and a later call draws. When none of those referees is still eligible the dispute ends Void.
    /// @param disputeId The dispute; it must await its answer and have no panel yet.
    function drawReferees(uint256 disputeId) external;

    /// @notice The accused answers with its replay of the disputed position: its probability of the disputed token
    /// and its top-k (tokens with probabilities, 1 <= k <= MAX_TOP_K). Only a hash is stored; the values are emitted.
    /// Draws the referees first when nobody has (see `drawReferees`); voting starts now.
    /// @param disputeId The dispute.
    /// @param claimedProb Replayed probability (WAD) of the disputed token.
    /// @param topTokens Top-k token ids at the position.
    /// @param topProbs Their probabilities (WAD), summing to at most WAD.
    function answer(uint256 disputeId, uint64 claimedProb, uint32[] calldata topTokens, uint64[] calldata topProbs)
        external;

    /// @notice After the answer deadline passed in silence, anyone ends the dispute: the accused loses
    /// (slashed `accusedSlash`; challenger gets its bond back plus CHALLENGER_SHARE_BPS of the slash, the requester
    /// the rest). Referees are released without reward or penalty.
    /// @param disputeId The dispute.
    function claimAnswerTimeout(uint256 disputeId) external;

    /// @notice A drawn referee commits its sealed vote `voteCommitment(disputeId, msg.sender, verdict, salt)`
    /// before the commit deadline.
    /// @param disputeId The dispute.
    /// @param commitment The sealed vote (non-zero).
    function commitVote(uint256 disputeId, bytes32 commitment) external;

    /// @notice A referee reveals the vote it committed. Open after the commit deadline, or as soon as every drawn
    /// referee has committed; closes at the reveal deadline.
    /// @param disputeId The dispute.
    /// @param verdict AccusedFaithful or AccusedCheated.
    /// @param salt The salt sealed in the commitment.
    function revealVote(uint256 disputeId, Verdict verdict, bytes32 salt) external;

    /// @notice Decides the current round once its votes are in (after the reveal deadline, or early once every
    /// drawn referee has revealed, or once the commit deadline passed and everyone who committed has revealed): a
    /// strict majority of the drawn panel decides (AccusedLost / ChallengerLost), otherwise no majority (Void).
    /// While appeals remain the dispute turns Appealable for `appealPeriod`; called again after that period with
    /// no appeal, or on the last round at once, it ends the dispute with that final verdict: payouts, penalties
    /// (every round's referees that did not reveal, or revealed against a decided final verdict, are slashed
    /// `refereePenalty`, burnt) and the market's `disputeClosed` happen only then (docs/disputes.md).
    /// @param disputeId The dispute.
    function resolve(uint256 disputeId) external;

    /// @notice Appeals the latest decided round of `disputeId` (any result, including a vote without a strict
    /// majority) while it is Appealable, posting exactly `appealBond(round + 1)` = bond × 2^(round+1) wei. Anyone
    /// may appeal. The next round draws a fresh panel of 2n + 1 seats (n = the last panel's seats) from the hash of
    /// this transaction's block, excluding every earlier panel; `drawReferees` draws it from the next block on.
    /// @param disputeId The dispute.
    function appeal(uint256 disputeId) external payable;

    /// @notice The bond of an appeal into round `round` (≥ 1): bond × 2^round.
    /// @param round The appeal round.
    /// @return The bond (wei).
    function appealBond(uint256 round) external view returns (uint256);

    /// @notice The referees drawn for round `round` of `disputeId`, in draw order.
    /// @param disputeId The dispute.
    /// @param round The round.
    /// @return The panel.
    function panelOf(uint256 disputeId, uint256 round) external view returns (address[] memory);

    /// @notice Round `round` of `disputeId`: its result and votes once voted, its appeal for round ≥ 1.
    /// @param disputeId The dispute.
    /// @param round The round.
    /// @return The round.
    function roundOf(uint256 disputeId, uint256 round) external view returns (Round memory);

    /// @notice Sends the caller everything credited to it.
    function withdraw() external;

    /// @notice The sealed vote a referee commits: keccak256(abi.encode(disputeId, referee, verdict, salt)).
    /// Binding the dispute and the referee stops one referee from copying another's commitment and reveal.
    /// Mirrored by `node/protocol.py::vote_commitment`.
    /// @param disputeId The dispute.
    /// @param referee The committing referee.
    /// @param verdict The vote.
    /// @param salt A secret random salt.
    /// @return The commitment.
    function voteCommitment(uint256 disputeId, address referee, Verdict verdict, bytes32 salt)
        external
        pure
        returns (bytes32);

    /// @notice Stored state of `disputeId` (all zero for an unknown id).
    /// @param disputeId The dispute.
    /// @return The dispute.
    function getDispute(uint256 disputeId) external view returns (Dispute memory);

    /// @notice The referees drawn for `disputeId`, in draw order.
    /// @param disputeId The dispute.
    /// @return The panel.
    function refereesOf(uint256 disputeId) external view returns (address[] memory);

    /// @notice `referee`'s ballot in `disputeId`.
    /// @param disputeId The dispute.
    /// @param referee The referee.
    /// @return The ballot (drawn = false for anyone not on the panel).
    function ballotOf(uint256 disputeId, address referee) external view returns (Ballot memory);

    /// @notice Whether a (job, cycle, index, kind) position is free, under dispute, or already proven.
    /// @param jobId The job.
    /// @param cycle The cycle.
    /// @param index The position.
    /// @param kind The dispute kind.
    /// @return The state.
    function positionState(uint256 jobId, uint32 cycle, uint32 index, Kind kind)
        external
        view
        returns (PositionState);

    /// @notice Whether `resolve(disputeId)` would be accepted now.
    /// @param disputeId The dispute.
    /// @return True when the dispute is voting and voting is over.
    function canResolve(uint256 disputeId) external view returns (bool);
}
