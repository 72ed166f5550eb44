// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IInferenceMarket} from "./interfaces/IInferenceMarket.sol";
import {IStakingRegistry} from "./interfaces/IStakingRegistry.sol";
import {CycleRecord} from "./lib/CycleRecord.sol";
import {SpecMath} from "./lib/SpecMath.sol";

/// @title DisputeManager
/// @notice Optimistic, replay-refereed disputes of PROTOCOL.md §6 (see docs/disputes.md).
///
/// Life of a dispute:
///  1. `openDispute` (challenger, with `bond`): proves the disputed position against the market's cycle record and
///     locks the accused. The referee draw is seeded by the hash of the block that holds this transaction, which
///     nobody knows when sending it, so the challenger cannot pick a block whose draw suits it.
///  2. `drawReferees` (anyone, from the next block on; `answer` does it when nobody did): draws up to
///     `refereesPerDispute` referees for the disputed model among those registered by then, and locks them.
///  3. `answer` (accused, within `answerPeriod`): its replayed probability of the disputed token and its top-k.
///     Silence: after the deadline anyone calls `claimAnswerTimeout` and the accused loses.
///  4. `commitVote` (drawn referees, within `commitPeriod` after the answer), then `revealVote` (within
///     `revealPeriod` after the commit deadline; it opens early once every drawn referee has committed).
///  5. `resolve` (anyone, after the reveal deadline, or early once no further reveal is possible): a strict
///     majority of the *drawn* referees decides; anything else is Void (bond back, accused untouched).
/// Money only ever moves by `withdraw` of credited balances (pull payments).
contract DisputeManager is ReentrancyGuard {
    // ------------------------------------------------------------------ types

    /// @notice What the challenger claims. DraftReplay accuses the job's drafter (x_i is not invcdf(q, s), or q_i is
    /// not the draft model's probability); TargetReplay accuses the job's verifier (p_i, or outToken, is not what
    /// the target model gives).
    enum Kind {
        DraftReplay,
        TargetReplay
    }

    /// @notice Phase of a dispute. Commit and reveal sub-phases of `Voting` are told apart by the deadlines.
    enum Status {
        None,
        AwaitingAnswer,
        Voting,
        Resolved
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
        Void, // no strict majority (tie, too few reveals), or nobody left to draw: bond back, accused untouched
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

    /// @notice Stored state of a dispute.
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
        uint64 drawBlock; // the block whose hash seeds the referee draw
        uint32 poolSize; // referees registered for modelId at opening: the draw ranges over these list slots
    }

    /// @notice A drawn referee's ballot (`drawn` and `verdict` share a slot, so a reveal rewrites a warm slot).
    struct Ballot {
        bytes32 commitment;
        bool drawn;
        Verdict verdict;
    }

    // ------------------------------------------------------------------ constants and parameters

    /// @notice Largest referee panel.
    uint256 public constant MAX_REFEREES = 15;
    /// @notice Largest top-k an answer may carry.
    uint256 public constant MAX_TOP_K = 16;
    /// @notice The referee draw looks at no more than 4R + SCAN_EXTRA registered referees.
    uint256 public constant SCAN_EXTRA = 8;
    /// @notice Longest allowed phase, so deadlines fit in uint64.
    uint256 public constant MAX_PERIOD = 365 days;
    /// @notice Basis points.
    uint256 public constant BPS = 10_000;
    /// @notice Share (bps) of the accused's slash left after the referee reward that goes to the challenger; the
    /// rest goes to the requester.
    uint256 public constant CHALLENGER_SHARE_BPS = 5_000;
    /// @notice Share (bps) of the bond that the majority referees earn whichever side wins (paid from the bond when
    /// the challenger loses, from the accused's slash when the accused loses), so a referee's pay never depends on
    /// which way it votes.
    uint256 public constant REFEREE_SHARE_BPS = 5_000;

    /// @notice The staking registry (locks, slashes, referee lists).
    IStakingRegistry public immutable registry;
    /// @notice The inference market (job parties, cycle records, dispute bookkeeping).
    IInferenceMarket public immutable market;
    /// @notice Exact bond (wei) a challenger posts.
    uint256 public immutable bond;
    /// @notice Seconds the accused has to answer after the dispute opens.
    uint256 public immutable answerPeriod;
    /// @notice Seconds the referees have to commit after the answer.
    uint256 public immutable commitPeriod;
    /// @notice Seconds the referees have to reveal after the commit deadline.
    uint256 public immutable revealPeriod;
    /// @notice Referees drawn per dispute (fewer when fewer are eligible).
    uint256 public immutable refereesPerDispute;
    /// @notice Stake (wei) slashed from an accused that loses.
    uint256 public immutable accusedSlash;
    /// @notice Stake (wei) slashed from a drawn referee that does not reveal or votes with the minority.
    uint256 public immutable refereePenalty;
    /// @notice Majority referees' reward pool (wei) on a decided dispute: bond * REFEREE_SHARE_BPS / BPS.
    uint256 public immutable refereeReward;

    // ------------------------------------------------------------------ state

    /// @notice Number of disputes ever opened; ids run 1..disputeCount.
    uint256 public disputeCount;
    /// @notice Withdrawable balance (wei) of each account.
    mapping(address account => uint256) public credits;

    mapping(uint256 disputeId => Dispute) private _disputes;
    mapping(uint256 disputeId => address[]) private _referees;
    mapping(uint256 disputeId => mapping(address referee => Ballot)) private _ballots;
    mapping(bytes32 positionKey => PositionState) private _positions;

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
    /// @notice The referee panel of `disputeId`.
    event RefereesDrawn(uint256 indexed disputeId, address[] referees);
    /// @notice The seed block's hash was no longer available (over 256 blocks old): the draw now waits for the
    /// hash of `drawBlock`, the block of this call.
    event DrawRescheduled(uint256 indexed disputeId, uint64 drawBlock);
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
    error ZeroAddress();
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
    /// @notice The answer needs a drawn panel, and the seed block `drawBlock` is too old to draw from in this call:
    /// call `drawReferees` (it reschedules the draw) and answer once it has drawn.
    error PanelNotDrawn(uint64 drawBlock);
    /// @notice No such dispute, or it is in another phase.
    error WrongStatus(uint256 disputeId, Status status);
    /// @notice Only the accused may answer.
    error NotAccused();
    /// @notice The answer came after the answer deadline.
    error AnswerPeriodOver(uint64 deadline);
    /// @notice The answer deadline has not passed yet.
    error AnswerPeriodNotOver(uint64 deadline);
    /// @notice top-k must have 1..MAX_TOP_K entries.
    error BadTopK(uint256 k);
    /// @notice topTokens and topProbs differ in length.
    error LengthMismatch(uint256 tokens, uint256 probs);
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
    /// @notice Sending ETH failed.
    error TransferFailed();
    /// @notice Only the registry (paying out slashes) may send ETH outside openDispute.
    error OnlyRegistry();

    // ------------------------------------------------------------------ construction

    /// @notice Deploys the dispute manager over `registry_` and `market_` with the given bond, phase lengths
    /// (seconds), panel size and slash amounts (wei).
    /// @param registry_ The staking registry (must wire this contract as its dispute manager).
    /// @param market_ The inference market (must wire this contract as its dispute manager).
    /// @param bond_ Exact bond (wei) of a challenger; > 0.
    /// @param answerPeriod_ Seconds the accused has to answer; 1..MAX_PERIOD.
    /// @param commitPeriod_ Seconds the referees have to commit after the answer; 1..MAX_PERIOD.
    /// @param revealPeriod_ Seconds the referees have to reveal after the commit deadline; 1..MAX_PERIOD.
    /// @param refereeCount_ Referees drawn per dispute; 1..MAX_REFEREES (odd recommended).
    /// @param accusedSlash_ Stake (wei) slashed from an accused that loses.
    /// @param refereePenalty_ Stake (wei) slashed from a referee that does not reveal or votes with the minority.
    constructor(
        address registry_,
        address market_,
        uint256 bond_,
        uint256 answerPeriod_,
        uint256 commitPeriod_,
        uint256 revealPeriod_,
        uint256 refereeCount_,
        uint256 accusedSlash_,
        uint256 refereePenalty_
    ) {
        if (registry_ == address(0) || market_ == address(0)) revert ZeroAddress();
        if (bond_ == 0) revert InvalidParameter("bond", bond_);
        if (answerPeriod_ == 0 || answerPeriod_ > MAX_PERIOD) revert InvalidParameter("answerPeriod", answerPeriod_);
        if (commitPeriod_ == 0 || commitPeriod_ > MAX_PERIOD) revert InvalidParameter("commitPeriod", commitPeriod_);
        if (revealPeriod_ == 0 || revealPeriod_ > MAX_PERIOD) revert InvalidParameter("revealPeriod", revealPeriod_);
        if (refereeCount_ == 0 || refereeCount_ > MAX_REFEREES) revert InvalidParameter("refereeCount", refereeCount_);
        registry = IStakingRegistry(registry_);
        market = IInferenceMarket(market_);
        bond = bond_;
        answerPeriod = answerPeriod_;
        commitPeriod = commitPeriod_;
        revealPeriod = revealPeriod_;
        refereesPerDispute = refereeCount_;
        accusedSlash = accusedSlash_;
        refereePenalty = refereePenalty_;
        refereeReward = (bond_ * REFEREE_SHARE_BPS) / BPS;
    }

    /// @notice Accepts slash proceeds from the registry only.
    receive() external payable {
        if (msg.sender != address(registry)) revert OnlyRegistry();
    }

    // ------------------------------------------------------------------ open

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
    ) external payable nonReentrant returns (uint256 disputeId) {
        if (msg.value != bond) revert WrongBond(msg.value, bond);
        IInferenceMarket.JobStatus status = market.jobStatus(jobId);
        if (status != IInferenceMarket.JobStatus.Running && status != IInferenceMarket.JobStatus.Finished) {
            revert JobNotDisputable(jobId, status);
        }
        (uint32 token, uint64 claimedValue) = _checkPosition(jobId, cycle, index, kind, record, leafProof);
        disputeId = _create(jobId, cycle, index, kind);
        Dispute storage d = _disputes[disputeId];
        _emitOpened(disputeId, d, token, claimedValue);

        // Interactions: bookkeeping in the market and the registry (trusted protocol contracts).
        market.disputeOpened(jobId);
        registry.lock(d.accused);
    }

    // ------------------------------------------------------------------ draw

    /// @notice Draws the referees of `disputeId` from the hash of its seed block (the block that opened it), among
    /// the referees for the disputed model that registered no later than that block, and locks them. Anyone may
    /// call it from the block after the seed block on; `answer` calls it when nobody has. When the seed block is
    /// more than 256 blocks old its hash is gone: the draw is rescheduled to this call's block (`DrawRescheduled`)
    /// and a later call draws. When none of those referees is still eligible the dispute ends Void.
    /// @param disputeId The dispute; it must await its answer and have no panel yet.
    function drawReferees(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.AwaitingAnswer) revert WrongStatus(disputeId, d.status);
        if (d.drawn != 0) revert AlreadyDrawn(disputeId);
        _drawPanel(disputeId, d);
    }

    // ------------------------------------------------------------------ answer

    /// @notice The accused answers with its replay of the disputed position: its probability of the disputed token
    /// and its top-k (tokens with probabilities, 1 <= k <= MAX_TOP_K). Only a hash is stored; the values are emitted.
    /// Draws the referees first when nobody has (see `drawReferees`); voting starts now.
    /// @param disputeId The dispute.
    /// @param claimedProb Replayed probability (WAD) of the disputed token.
    /// @param topTokens Top-k token ids at the position.
    /// @param topProbs Their probabilities (WAD), summing to at most WAD.
    function answer(uint256 disputeId, uint64 claimedProb, uint32[] calldata topTokens, uint64[] calldata topProbs)
        external
        nonReentrant
    {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.AwaitingAnswer) revert WrongStatus(disputeId, d.status);
        if (msg.sender != d.accused) revert NotAccused();
        if (block.timestamp > d.answerDeadline) revert AnswerPeriodOver(d.answerDeadline);
        uint256 k = topTokens.length;
        if (k == 0 || k > MAX_TOP_K) revert BadTopK(k);
        if (topProbs.length != k) revert LengthMismatch(k, topProbs.length);
        if (claimedProb > SpecMath.WAD) revert ProbabilityAboveWad(claimedProb);
        uint256 sum;
        for (uint256 i = 0; i < k; ++i) {
            sum += topProbs[i];
        }
        if (sum > SpecMath.WAD) revert ProbabilityAboveWad(sum);
        if (d.drawn == 0) {
            if (block.number > d.drawBlock && blockhash(d.drawBlock) == bytes32(0)) revert PanelNotDrawn(d.drawBlock);
            if (!_drawPanel(disputeId, d)) return; // nobody eligible: the dispute ended Void
        }

        bytes32 answerHash = keccak256(abi.encode(claimedProb, topTokens, topProbs));
        uint64 commitDeadline = uint64(block.timestamp + commitPeriod);
        uint64 revealDeadline = uint64(commitDeadline + revealPeriod);
        d.answerHash = answerHash;
        d.status = Status.Voting;
        d.commitDeadline = commitDeadline;
        d.revealDeadline = revealDeadline;
        emit Answered(disputeId, claimedProb, topTokens, topProbs, answerHash, commitDeadline, revealDeadline);
    }

    /// @notice After the answer deadline passed in silence, anyone ends the dispute: the accused loses
    /// (slashed `accusedSlash`; challenger gets its bond back plus CHALLENGER_SHARE_BPS of the slash, the requester
    /// the rest). Referees are released without reward or penalty.
    /// @param disputeId The dispute.
    function claimAnswerTimeout(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.AwaitingAnswer) revert WrongStatus(disputeId, d.status);
        if (block.timestamp <= d.answerDeadline) revert AnswerPeriodNotOver(d.answerDeadline);
        d.status = Status.Resolved;
        d.outcome = Outcome.AccusedSilent;
        _positions[_positionKey(d.jobId, d.cycle, d.index, d.kind)] = PositionState.Proven;

        uint256 taken = accusedSlash == 0 ? 0 : registry.slash(d.accused, accusedSlash);
        uint256 toChallenger = (taken * CHALLENGER_SHARE_BPS) / BPS;
        _credit(disputeId, d.challenger, bond + toChallenger);
        _credit(disputeId, d.requester, taken - toChallenger);
        emit DisputeResolved(disputeId, Outcome.AccusedSilent, 0, 0, taken);
        _release(disputeId, d, true);
    }

    // ------------------------------------------------------------------ votes

    /// @notice A drawn referee commits its sealed vote `voteCommitment(disputeId, msg.sender, verdict, salt)`
    /// before the commit deadline.
    /// @param disputeId The dispute.
    /// @param commitment The sealed vote (non-zero).
    function commitVote(uint256 disputeId, bytes32 commitment) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.Voting) revert WrongStatus(disputeId, d.status);
        Ballot storage b = _ballots[disputeId][msg.sender];
        if (!b.drawn) revert NotDrawnReferee();
        if (block.timestamp > d.commitDeadline) revert CommitPeriodOver(d.commitDeadline);
        if (b.commitment != bytes32(0)) revert AlreadyCommitted();
        if (commitment == bytes32(0)) revert EmptyCommitment();
        b.commitment = commitment;
        d.commits += 1;
        emit VoteCommitted(disputeId, msg.sender, commitment);
    }

    /// @notice A referee reveals the vote it committed. Open after the commit deadline, or as soon as every drawn
    /// referee has committed; closes at the reveal deadline.
    /// @param disputeId The dispute.
    /// @param verdict AccusedFaithful or AccusedCheated.
    /// @param salt The salt sealed in the commitment.
    function revealVote(uint256 disputeId, Verdict verdict, bytes32 salt) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.Voting) revert WrongStatus(disputeId, d.status);
        Ballot storage b = _ballots[disputeId][msg.sender];
        if (!b.drawn) revert NotDrawnReferee();
        if (b.commitment == bytes32(0)) revert NotCommitted();
        if (b.verdict != Verdict.None) revert AlreadyRevealed();
        if (block.timestamp <= d.commitDeadline && d.commits < d.drawn) revert RevealPeriodNotOpen(d.commitDeadline);
        if (block.timestamp > d.revealDeadline) revert RevealPeriodOver(d.revealDeadline);
        if (verdict == Verdict.None) revert InvalidVerdict();
        if (voteCommitment(disputeId, msg.sender, verdict, salt) != b.commitment) revert WrongReveal();
        b.verdict = verdict;
        d.reveals += 1;
        if (verdict == Verdict.AccusedCheated) d.cheatedVotes += 1;
        else d.faithfulVotes += 1;
        emit VoteRevealed(disputeId, msg.sender, verdict);
    }

    // ------------------------------------------------------------------ resolve

    /// @notice Ends a dispute whose votes are in: after the reveal deadline, or early once every drawn referee has
    /// revealed, or once the commit deadline passed and everyone who committed has revealed. A strict majority of
    /// the drawn referees decides (AccusedLost / ChallengerLost); otherwise the dispute is Void. Referees that did
    /// not reveal, or voted against a decided outcome, are slashed `refereePenalty`.
    /// @param disputeId The dispute.
    function resolve(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.Voting) revert WrongStatus(disputeId, d.status);
        if (!_votingOver(d)) revert TooEarlyToResolve(d.revealDeadline);

        uint256 half = uint256(d.drawn) / 2;
        Outcome outcome = d.cheatedVotes > half
            ? Outcome.AccusedLost
            : (d.faithfulVotes > half ? Outcome.ChallengerLost : Outcome.Void);
        d.status = Status.Resolved;
        d.outcome = outcome;
        _positions[_positionKey(d.jobId, d.cycle, d.index, d.kind)] =
            outcome == Outcome.AccusedLost ? PositionState.Proven : PositionState.Free;
        Verdict winning = outcome == Outcome.AccusedLost
            ? Verdict.AccusedCheated
            : (outcome == Outcome.ChallengerLost ? Verdict.AccusedFaithful : Verdict.None);

        // Referee penalties (slash proceeds arrive through receive()) and the majority's reward pool.
        (uint256 pool, uint256 majority) = _penalize(disputeId, winning);
        uint256 taken;
        if (outcome == Outcome.AccusedLost) {
            taken = accusedSlash == 0 ? 0 : registry.slash(d.accused, accusedSlash);
            uint256 reward = taken < refereeReward ? taken : refereeReward;
            uint256 rest = taken - reward;
            uint256 toChallenger = (rest * CHALLENGER_SHARE_BPS) / BPS;
            pool += reward;
            _credit(disputeId, d.challenger, bond + toChallenger);
            _credit(disputeId, d.requester, rest - toChallenger);
        } else if (outcome == Outcome.ChallengerLost) {
            pool += refereeReward;
            _credit(disputeId, d.accused, bond - refereeReward);
        } else {
            _credit(disputeId, d.challenger, bond);
        }
        if (majority == 0) {
            // Only when Void with no reveals: the no-shows' penalties go to the challenger.
            _credit(disputeId, d.challenger, pool);
        } else {
            _payMajority(disputeId, winning, pool, majority);
        }
        emit DisputeResolved(disputeId, outcome, d.faithfulVotes, d.cheatedVotes, taken);
        _release(disputeId, d, outcome == Outcome.AccusedLost);
    }

    // ------------------------------------------------------------------ withdraw

    /// @notice Sends the caller everything credited to it.
    function withdraw() external nonReentrant {
        uint256 amount = credits[msg.sender];
        if (amount == 0) revert NothingToWithdraw();
        credits[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        (bool ok,) = msg.sender.call{value: amount}("");
        if (!ok) revert TransferFailed();
    }

    // ------------------------------------------------------------------ views

    /// @notice The sealed vote a referee commits: keccak256(abi.encode(disputeId, referee, verdict, salt)).
    /// Binding the dispute and the referee stops one referee from copying another's commitment and reveal.
    /// Mirrored by `node/protocol.py::vote_commitment`.
    /// @param disputeId The dispute.
    /// @param referee The committing referee.
    /// @param verdict The vote.
    /// @param salt A secret random salt.
    /// @return The commitment.
    function voteCommitment(uint256 disputeId, address referee, Verdict verdict, bytes32 salt)
        public
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(disputeId, referee, verdict, salt));
    }

    /// @notice Stored state of `disputeId` (all zero for an unknown id).
    /// @param disputeId The dispute.
    /// @return The dispute.
    function getDispute(uint256 disputeId) external view returns (Dispute memory) {
        return _disputes[disputeId];
    }

    /// @notice The referees drawn for `disputeId`, in draw order.
    /// @param disputeId The dispute.
    /// @return The panel.
    function refereesOf(uint256 disputeId) external view returns (address[] memory) {
        return _referees[disputeId];
    }

    /// @notice `referee`'s ballot in `disputeId`.
    /// @param disputeId The dispute.
    /// @param referee The referee.
    /// @return The ballot (drawn = false for anyone not on the panel).
    function ballotOf(uint256 disputeId, address referee) external view returns (Ballot memory) {
        return _ballots[disputeId][referee];
    }

    /// @notice Whether a (job, cycle, index, kind) position is free, under dispute, or already proven.
    /// @param jobId The job.
    /// @param cycle The cycle.
    /// @param index The position.
    /// @param kind The dispute kind.
    /// @return The state.
    function positionState(uint256 jobId, uint32 cycle, uint32 index, Kind kind)
        external
        view
        returns (PositionState)
    {
        return _positions[_positionKey(jobId, cycle, index, kind)];
    }

    /// @notice Whether `resolve(disputeId)` would be accepted now.
    /// @param disputeId The dispute.
    /// @return True when the dispute is voting and voting is over.
    function canResolve(uint256 disputeId) external view returns (bool) {
        Dispute storage d = _disputes[disputeId];
        return d.status == Status.Voting && _votingOver(d);
    }

    // ------------------------------------------------------------------ internals

    function _positionKey(uint256 jobId, uint32 cycle, uint32 index, Kind kind) private pure returns (bytes32) {
        return keccak256(abi.encode(jobId, cycle, index, kind));
    }

    /// @dev Checks the record preimage and the disputed position; returns the disputed token and posted value.
    function _checkPosition(
        uint256 jobId,
        uint32 cycle,
        uint32 index,
        Kind kind,
        CycleRecordPreimage calldata record,
        LeafProof calldata leafProof
    ) private view returns (uint32 token, uint64 claimedValue) {
        bytes32 stored = market.cycleRecordHash(jobId, cycle);
        if (stored == bytes32(0)) revert CycleNotVerified(jobId, cycle);
        bytes32 supplied = CycleRecord.hash(record.draftRoot, record.p, record.accepted, record.outToken);
        if (supplied != stored) revert RecordMismatch(stored, supplied);
        uint256 k = record.p.length;
        if (index > k) revert IndexOutOfRange(index, k);
        if (index == k) {
            if (kind != Kind.TargetReplay) revert OutTokenNeedsTargetReplay();
            return (record.outToken, 0);
        }
        if (index > record.accepted) revert PositionDoesNotBind(index, record.accepted);
        bytes32 leafHash = SpecMath.leaf(jobId, cycle, index, leafProof.token, leafProof.q);
        if (!MerkleProof.verifyCalldata(leafProof.proof, record.draftRoot, leafHash)) revert InvalidProof();
        return (leafProof.token, kind == Kind.DraftReplay ? leafProof.q : record.p[index]);
    }

    /// @dev Effects of openDispute: the dispute record and the position state (view calls only).
    function _create(uint256 jobId, uint32 cycle, uint32 index, Kind kind) private returns (uint256 disputeId) {
        IInferenceMarket.JobParties memory parties = market.jobParties(jobId);
        address accused = kind == Kind.DraftReplay ? parties.drafter : parties.verifier;
        if (msg.sender == accused) revert ChallengerIsAccused();
        bytes32 key = _positionKey(jobId, cycle, index, kind);
        PositionState state = _positions[key];
        if (state == PositionState.Open) revert PositionUnderDispute(jobId, cycle, index, kind);
        if (state == PositionState.Proven) revert PositionAlreadyProven(jobId, cycle, index, kind);

        disputeId = ++disputeCount;
        _positions[key] = PositionState.Open;
        Dispute storage d = _disputes[disputeId];
        d.jobId = jobId;
        d.challenger = msg.sender;
        d.cycle = cycle;
        d.index = index;
        d.kind = kind;
        d.status = Status.AwaitingAnswer;
        d.accused = accused;
        d.requester = parties.requester;
        d.modelId = kind == Kind.DraftReplay ? parties.draftModel : parties.targetModel;
        d.answerDeadline = uint64(block.timestamp + answerPeriod);
        uint256 poolSize = registry.refereeCount(d.modelId);
        if (poolSize == 0) revert NoEligibleReferees(d.modelId);
        d.drawBlock = uint64(block.number);
        d.poolSize = SafeCast.toUint32(poolSize); // reverts rather than draw from a truncated pool
    }

    function _emitOpened(uint256 disputeId, Dispute storage d, uint32 token, uint64 claimedValue) private {
        emit DisputeOpened(
            disputeId,
            d.jobId,
            d.challenger,
            d.cycle,
            d.index,
            d.kind,
            d.accused,
            d.modelId,
            token,
            claimedValue,
            d.answerDeadline
        );
    }

    /// @dev The draw of `drawReferees`: false when it was rescheduled or the dispute ended Void for lack of
    /// referees, true when the panel is drawn and locked.
    function _drawPanel(uint256 disputeId, Dispute storage d) private returns (bool) {
        uint64 drawBlock = d.drawBlock;
        if (block.number <= drawBlock) revert DrawTooEarly(drawBlock);
        bytes32 seedHash = blockhash(drawBlock);
        if (seedHash == bytes32(0)) {
            d.drawBlock = uint64(block.number);
            emit DrawRescheduled(disputeId, uint64(block.number));
            return false;
        }
        address[] storage panel = _referees[disputeId];
        _draw(disputeId, d, uint256(keccak256(abi.encode(seedHash, disputeId))), panel);
        uint256 drawn = panel.length;
        if (drawn == 0) {
            _voidUnrefereed(disputeId, d);
            return false;
        }
        d.drawn = uint8(drawn);
        emit RefereesDrawn(disputeId, panel);
        for (uint256 i = 0; i < drawn; ++i) {
            registry.lock(panel[i]);
        }
        return true;
    }

    /// @dev Picks up to `refereesPerDispute` eligible referees among the first `poolSize` slots of the model's
    /// referee list (registrations after the opening land beyond them). When there are at most 4R + SCAN_EXTRA slots
    /// they are scanned completely from a pseudo-random start; otherwise that many slots are sampled pseudo-randomly.
    /// The modulus is the pool size at opening, so leaving the list cannot re-roll the draw; a slot left empty is
    /// skipped.
    function _draw(uint256 disputeId, Dispute storage d, uint256 seed, address[] storage panel) private {
        IInferenceMarket.JobParties memory parties = market.jobParties(d.jobId);
        address[4] memory excluded = [parties.requester, parties.drafter, parties.verifier, d.challenger];
        uint256 pool = d.poolSize;
        uint256 count = registry.refereeCount(d.modelId);
        uint256 tries = 4 * refereesPerDispute + SCAN_EXTRA;
        bool fullScan = pool <= tries;
        if (fullScan) tries = pool;
        for (uint256 j = 0; j < tries && panel.length < refereesPerDispute; ++j) {
            uint256 at = fullScan ? (seed % pool + j) % pool : uint256(keccak256(abi.encode(seed, j))) % pool;
            if (at >= count) continue;
            address candidate = registry.refereeAt(d.modelId, at);
            if (_eligible(disputeId, candidate, excluded, d)) {
                _ballots[disputeId][candidate].drawn = true;
                panel.push(candidate);
            }
        }
    }

    /// @dev Not zero, not yet drawn, not a party, and an active referee for the disputed model registered no later
    /// than the seed block.
    function _eligible(uint256 disputeId, address candidate, address[4] memory parties, Dispute storage d)
        private
        view
        returns (bool)
    {
        if (candidate == address(0) || _ballots[disputeId][candidate].drawn) return false;
        for (uint256 i = 0; i < 4; ++i) {
            if (candidate == parties[i]) return false;
        }
        return registry.isActiveSince(candidate, IStakingRegistry.Role.Referee, d.modelId, d.drawBlock);
    }

    /// @dev Ends a dispute nobody can referee: Void, bond back, the position free again, the accused released.
    function _voidUnrefereed(uint256 disputeId, Dispute storage d) private {
        d.status = Status.Resolved;
        d.outcome = Outcome.Void;
        _positions[_positionKey(d.jobId, d.cycle, d.index, d.kind)] = PositionState.Free;
        _credit(disputeId, d.challenger, bond);
        emit DisputeResolved(disputeId, Outcome.Void, 0, 0, 0);
        _release(disputeId, d, false);
    }

    function _votingOver(Dispute storage d) private view returns (bool) {
        if (block.timestamp > d.revealDeadline) return true;
        if (d.reveals == d.drawn) return true;
        return block.timestamp > d.commitDeadline && d.reveals == d.commits;
    }

    /// @dev Slashes every drawn referee that did not reveal, or (when `winning` is set) revealed another verdict.
    /// Returns the total taken and how many referees are in the majority (revealed `winning`, or revealed at all
    /// when the dispute is Void).
    function _penalize(uint256 disputeId, Verdict winning) private returns (uint256 taken, uint256 majority) {
        address[] storage panel = _referees[disputeId];
        uint256 n = panel.length;
        for (uint256 i = 0; i < n; ++i) {
            address referee = panel[i];
            Verdict v = _ballots[disputeId][referee].verdict;
            bool good = v != Verdict.None && (winning == Verdict.None || v == winning);
            if (good) {
                ++majority;
            } else if (refereePenalty != 0) {
                uint256 t = registry.slash(referee, refereePenalty);
                taken += t;
                emit RefereePenalized(disputeId, referee, t);
            } else {
                emit RefereePenalized(disputeId, referee, 0);
            }
        }
    }

    /// @dev Splits `pool` equally among the majority referees; the first of them (in draw order) gets the dust.
    function _payMajority(uint256 disputeId, Verdict winning, uint256 pool, uint256 majority) private {
        address[] storage panel = _referees[disputeId];
        uint256 share = pool / majority;
        uint256 dust = pool - share * majority;
        uint256 n = panel.length;
        for (uint256 i = 0; i < n; ++i) {
            address referee = panel[i];
            Verdict v = _ballots[disputeId][referee].verdict;
            if (v != Verdict.None && (winning == Verdict.None || v == winning)) {
                _credit(disputeId, referee, share + dust);
                dust = 0;
            }
        }
    }

    /// @dev Tells the market the dispute closed and unlocks the accused and the panel.
    function _release(uint256 disputeId, Dispute storage d, bool accusedLost) private {
        market.disputeClosed(d.jobId, d.accused, accusedLost);
        registry.unlock(d.accused);
        address[] storage panel = _referees[disputeId];
        uint256 n = panel.length;
        for (uint256 i = 0; i < n; ++i) {
            registry.unlock(panel[i]);
        }
    }

    function _credit(uint256 disputeId, address account, uint256 amount) private {
        if (amount == 0) return;
        credits[account] += amount;
        emit Credited(disputeId, account, amount);
    }
}
