// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IDisputeManager} from "./interfaces/IDisputeManager.sol";
import {IInferenceMarket} from "./interfaces/IInferenceMarket.sol";
import {IStakingRegistry} from "./interfaces/IStakingRegistry.sol";
import {CycleRecord} from "./lib/CycleRecord.sol";
import {DisputePayout} from "./lib/DisputePayout.sol";
import {RefereeDraw} from "./lib/RefereeDraw.sol";
import {SpecMath} from "./lib/SpecMath.sol";

/// @title DisputeManager
/// @notice Optimistic, replay-refereed disputes of docs/protocol.md §6 with the v1.1 referee rules (docs/disputes.md):
/// stake-weighted panels, appeals to larger fresh panels, escalation when too few referees are eligible.
///
/// Life of a dispute:
///  1. `openDispute` (challenger, with `bond`): proves the disputed position against the market's cycle record and
///     locks the accused. The first draw is seeded by the hash of the block that holds this transaction.
///  2. `drawReferees` (anyone, from the next block on; `answer` does it when nobody did): draws R seats with
///     probability proportional to active referee stake (distinct accounts, no party), and locks them. Too few
///     eligible referees: the draw escalates (a fresh seed after `escalationPeriod`); after `maxEscalations` the
///     dispute ends Void (bonds back, nobody penalized).
///  3. `answer` (accused, within `answerPeriod` of the draw): its replayed probability and top-k. Silence loses.
///  4. `commitVote` / `revealVote` (drawn referees), then `resolve`: the round's result (strict majority of the
///     drawn panel, else no majority).
///  5. While appeals remain, the result may be appealed within `appealPeriod` by anyone with bond × 2^k: a fresh
///     panel of 2n + 1 seats excluding every earlier panel votes again (steps 2 and 4). `resolve` after the period
///     (or on the last round) ends the dispute with the last result: only then money moves and the market is told.
/// Money only ever moves by `withdraw` of credited balances (pull payments).
contract DisputeManager is IDisputeManager, ReentrancyGuard {
    // ------------------------------------------------------------------ constants and parameters

    /// @notice Largest referee panel of any round.
    uint256 public constant MAX_REFEREES = 31;
    /// @notice Most appeal rounds a deployment may allow.
    uint256 public constant MAX_APPEALS = 3;
    /// @notice Most escalations a deployment may allow per round.
    uint256 public constant MAX_ESCALATIONS = 8;
    /// @notice Largest top-k an answer may carry.
    uint256 public constant MAX_TOP_K = 16;
    /// @notice A draw for n seats makes at most 4n + TRIES_EXTRA tries.
    uint256 public constant TRIES_EXTRA = RefereeDraw.TRIES_EXTRA;
    /// @notice Longest allowed phase, so deadlines fit in uint64.
    uint256 public constant MAX_PERIOD = 365 days;
    /// @notice Basis points.
    uint256 public constant BPS = DisputePayout.BPS;
    /// @notice Share (bps) of the accused's slash left after the referee reward that goes to the challenger; the
    /// rest goes to the requester.
    uint256 public constant CHALLENGER_SHARE_BPS = DisputePayout.CHALLENGER_SHARE_BPS;
    /// @notice Share (bps) of the bond that the final round's majority referees earn whichever side wins.
    uint256 public constant REFEREE_SHARE_BPS = DisputePayout.REFEREE_SHARE_BPS;
    /// @notice Where referee penalties and forfeited appeal bonds are credited: nobody holds its key, so no party
    /// who could provoke a penalty or a failed appeal is paid by it.
    address public constant BURN = 0x000000000000000000000000000000000000dEaD;

    /// @notice The staking registry (locks, slashes, referee stake trees).
    IStakingRegistry public immutable registry;
    /// @notice The inference market (job parties, cycle records, dispute bookkeeping).
    IInferenceMarket public immutable market;
    /// @notice Exact bond (wei) a challenger posts; an appeal into round k posts bond × 2^k.
    uint256 public immutable bond;
    /// @notice Seconds the accused has to answer once the first panel is drawn.
    uint256 public immutable answerPeriod;
    /// @notice Seconds the referees have to commit after the answer (round 0) or the draw (appeal rounds).
    uint256 public immutable commitPeriod;
    /// @notice Seconds the referees have to reveal after the commit deadline.
    uint256 public immutable revealPeriod;
    /// @notice Seats of the first panel, R; round k has 2^k (R + 1) − 1.
    uint256 public immutable refereesPerDispute;
    /// @notice Stake (wei) slashed from an accused that loses.
    uint256 public immutable accusedSlash;
    /// @notice Stake (wei) slashed (and burnt) from a referee that does not reveal or votes against the final verdict.
    uint256 public immutable refereePenalty;
    /// @notice Final majority referees' reward pool (wei) on a decided dispute: bond * REFEREE_SHARE_BPS / BPS.
    uint256 public immutable refereeReward;
    /// @notice Seconds a decided round may be appealed.
    uint256 public immutable appealPeriod;
    /// @notice Seconds an escalated draw waits before a fresh seed may be scheduled.
    uint256 public immutable escalationPeriod;
    /// @notice Appeal rounds allowed (≥ 1).
    uint256 public immutable maxAppeals;
    /// @notice Escalations allowed per round before the dispute ends Void.
    uint256 public immutable maxEscalations;

    // ------------------------------------------------------------------ state

    /// @notice Number of disputes ever opened; ids run 1..disputeCount.
    uint256 public disputeCount;
    /// @notice Withdrawable balance (wei) of each account.
    mapping(address account => uint256) public credits;

    mapping(uint256 disputeId => Dispute) private _disputes;
    // slither-disable-next-line uninitialized-state (false positive: the draw fills each panel through a storage pointer)
    mapping(uint256 disputeId => mapping(uint256 round => address[])) private _panels;
    mapping(uint256 disputeId => mapping(uint256 round => Round)) private _rounds;
    mapping(uint256 disputeId => mapping(address referee => Ballot)) private _ballots;
    mapping(bytes32 positionKey => PositionState) private _positions;

    // ------------------------------------------------------------------ construction

    /// @notice Deploys the dispute manager over `registry_` and `market_` with the parameters `config` (periods in
    /// seconds, amounts in wei; see IDisputeManager.Config for each field's range).
    /// @param registry_ The staking registry (must wire this contract as its dispute manager).
    /// @param market_ The inference market (must wire this contract as its dispute manager).
    /// @param config The deployment parameters.
    constructor(address registry_, address market_, Config memory config) {
        if (registry_ == address(0) || market_ == address(0)) revert DisputeZeroAddress();
        if (config.bond == 0 || config.bond >= 1 << 120) revert InvalidParameter("bond", config.bond);
        _checkPeriod("answerPeriod", config.answerPeriod);
        _checkPeriod("commitPeriod", config.commitPeriod);
        _checkPeriod("revealPeriod", config.revealPeriod);
        _checkPeriod("appealPeriod", config.appealPeriod);
        _checkPeriod("escalationPeriod", config.escalationPeriod);
        if (config.maxAppeals == 0 || config.maxAppeals > MAX_APPEALS) {
            revert InvalidParameter("maxAppeals", config.maxAppeals);
        }
        if (config.maxEscalations > MAX_ESCALATIONS) revert InvalidParameter("maxEscalations", config.maxEscalations);
        if (config.refereeCount == 0 || RefereeDraw.panelSize(config.refereeCount, config.maxAppeals) > MAX_REFEREES) {
            revert InvalidParameter("refereeCount", config.refereeCount);
        }
        registry = IStakingRegistry(registry_);
        market = IInferenceMarket(market_);
        bond = config.bond;
        answerPeriod = config.answerPeriod;
        commitPeriod = config.commitPeriod;
        revealPeriod = config.revealPeriod;
        refereesPerDispute = config.refereeCount;
        accusedSlash = config.accusedSlash;
        refereePenalty = config.refereePenalty;
        refereeReward = DisputePayout.refereeReward(config.bond);
        appealPeriod = config.appealPeriod;
        escalationPeriod = config.escalationPeriod;
        maxAppeals = config.maxAppeals;
        maxEscalations = config.maxEscalations;
    }

    /// @notice Accepts slash proceeds from the registry only.
    receive() external payable {
        if (msg.sender != address(registry)) revert OnlyRegistry();
    }

    // ------------------------------------------------------------------ open

    /// @inheritdoc IDisputeManager
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

    /// @inheritdoc IDisputeManager
    function drawReferees(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.AwaitingAnswer && d.status != Status.Drawing) {
            revert DisputeWrongStatus(disputeId, d.status);
        }
        if (d.drawn != 0) revert AlreadyDrawn(disputeId);
        _drawPanel(disputeId, d);
    }

    // ------------------------------------------------------------------ answer

    /// @inheritdoc IDisputeManager
    function answer(uint256 disputeId, uint64 claimedProb, uint32[] calldata topTokens, uint64[] calldata topProbs)
        external
        nonReentrant
    {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.AwaitingAnswer) revert DisputeWrongStatus(disputeId, d.status);
        if (msg.sender != d.accused) revert NotAccused();
        if (block.timestamp > d.answerDeadline) revert AnswerPeriodOver(d.answerDeadline);
        uint256 k = topTokens.length;
        if (k == 0 || k > MAX_TOP_K) revert BadTopK(k);
        if (topProbs.length != k) revert TopKLengthMismatch(k, topProbs.length);
        if (claimedProb > SpecMath.WAD) revert ProbabilityAboveWad(claimedProb);
        uint256 sum = 0;
        for (uint256 i = 0; i < k; ++i) {
            sum += topProbs[i];
        }
        if (sum > SpecMath.WAD) revert ProbabilityAboveWad(sum);
        if (d.drawn == 0) {
            // An answer draws the panel when it can, and otherwise reverts (so an accused's node never mistakes a
            // rescheduled or escalated draw for its answer): `drawReferees` reschedules, escalates or voids.
            uint64 drawBlock = d.drawBlock;
            // slither-disable-next-line reentrancy-no-eth (nonReentrant; calls only the protocol's registry, market)
            if (drawBlock == 0 || !_drawPanel(disputeId, d)) revert PanelNotDrawn(drawBlock);
        }

        bytes32 answerHash = keccak256(abi.encode(claimedProb, topTokens, topProbs));
        d.answerHash = answerHash;
        (uint64 commitDeadline, uint64 revealDeadline) = _startVoting(d);
        emit Answered(disputeId, claimedProb, topTokens, topProbs, answerHash, commitDeadline, revealDeadline);
    }

    /// @inheritdoc IDisputeManager
    function claimAnswerTimeout(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.AwaitingAnswer) revert DisputeWrongStatus(disputeId, d.status);
        if (d.drawn == 0) revert PanelNotDrawn(d.drawBlock); // the answer period runs only once a panel exists
        if (block.timestamp <= d.answerDeadline) revert AnswerPeriodNotOver(d.answerDeadline);
        d.status = Status.Resolved;
        d.outcome = Outcome.AccusedSilent;
        _positions[_positionKey(d.jobId, d.cycle, d.index, d.kind)] = PositionState.Proven;

        // slither-disable-next-line reentrancy-benign (nonReentrant; the protocol's registry pays in)
        uint256 taken = accusedSlash == 0 ? 0 : registry.slash(d.accused, accusedSlash);
        // slither-disable-next-line unused-return (AccusedSilent pays neither the accused nor the referees: both are 0)
        (uint256 toChallenger, uint256 toRequester,,) =
            DisputePayout.split(Outcome.AccusedSilent, bond, refereeReward, taken);
        _credit(disputeId, d.challenger, toChallenger);
        _credit(disputeId, d.requester, toRequester);
        emit DisputeResolved(disputeId, Outcome.AccusedSilent, 0, 0, taken);
        _release(disputeId, d, true);
    }

    // ------------------------------------------------------------------ votes

    /// @inheritdoc IDisputeManager
    function commitVote(uint256 disputeId, bytes32 commitment) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.Voting) revert DisputeWrongStatus(disputeId, d.status);
        Ballot storage b = _ballots[disputeId][msg.sender];
        if (!b.drawn || b.round != d.round) revert NotDrawnReferee();
        if (block.timestamp > d.commitDeadline) revert CommitPeriodOver(d.commitDeadline);
        if (b.commitment != bytes32(0)) revert AlreadyCommitted();
        if (commitment == bytes32(0)) revert EmptyCommitment();
        b.commitment = commitment;
        d.commits += 1;
        emit VoteCommitted(disputeId, msg.sender, commitment);
    }

    /// @inheritdoc IDisputeManager
    function revealVote(uint256 disputeId, Verdict verdict, bytes32 salt) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.Voting) revert DisputeWrongStatus(disputeId, d.status);
        Ballot storage b = _ballots[disputeId][msg.sender];
        if (!b.drawn || b.round != d.round) revert NotDrawnReferee();
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

    // ------------------------------------------------------------------ resolve and appeal

    /// @inheritdoc IDisputeManager
    function resolve(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status == Status.Appealable) {
            if (block.timestamp <= d.appealDeadline) revert AppealPeriodNotOver(d.appealDeadline);
            _finish(disputeId, d, d.roundResult);
            return;
        }
        if (d.status != Status.Voting) revert DisputeWrongStatus(disputeId, d.status);
        if (!_votingOver(d)) revert TooEarlyToResolve(d.revealDeadline);

        Outcome result = _recordRound(disputeId, d);
        if (d.round < maxAppeals) {
            d.status = Status.Appealable;
            d.appealDeadline = uint64(block.timestamp + appealPeriod);
            return;
        }
        _finish(disputeId, d, result);
    }

    /// @dev The current round's result (DisputePayout.decide), stored with its votes in `_rounds`.
    function _recordRound(uint256 disputeId, Dispute storage d) private returns (Outcome result) {
        result = DisputePayout.decide(d.drawn, d.faithfulVotes, d.cheatedVotes);
        Round storage r = _rounds[disputeId][d.round];
        r.result = result;
        r.faithfulVotes = d.faithfulVotes;
        r.cheatedVotes = d.cheatedVotes;
        d.roundResult = result;
        uint64 deadline = d.round < maxAppeals ? uint64(block.timestamp + appealPeriod) : 0;
        emit RoundDecided(disputeId, d.round, result, r.faithfulVotes, r.cheatedVotes, deadline);
    }

    /// @inheritdoc IDisputeManager
    function appeal(uint256 disputeId) external payable nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.Appealable) revert DisputeWrongStatus(disputeId, d.status);
        if (block.timestamp > d.appealDeadline) revert AppealPeriodOver(d.appealDeadline);
        uint8 round = d.round + 1; // ≤ maxAppeals: the last round is never Appealable
        uint256 required = bond << round;
        if (msg.value != required) revert WrongAppealBond(msg.value, required);
        Round storage r = _rounds[disputeId][round];
        r.appealed = d.roundResult;
        r.appellant = msg.sender;
        r.appealBond = required;
        d.round = round;
        d.panelSize = uint8(RefereeDraw.panelSize(refereesPerDispute, round));
        d.status = Status.Drawing;
        d.drawBlock = uint64(block.number);
        d.drawn = 0;
        d.commits = 0;
        d.reveals = 0;
        d.faithfulVotes = 0;
        d.cheatedVotes = 0;
        d.escalations = 0;
        d.appealDeadline = 0;
        _emitAppealed(disputeId, d, r);
    }

    function _emitAppealed(uint256 disputeId, Dispute storage d, Round storage r) private {
        emit Appealed(disputeId, d.round, r.appellant, r.appealed, r.appealBond, d.panelSize, d.drawBlock);
    }

    // ------------------------------------------------------------------ withdraw

    /// @inheritdoc IDisputeManager
    function withdraw() external nonReentrant {
        uint256 amount = credits[msg.sender];
        if (amount == 0) revert NothingToWithdraw();
        credits[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        // slither-disable-next-line low-level-calls (pull payment of the caller's credit, zeroed first)
        (bool ok,) = msg.sender.call{value: amount}("");
        if (!ok) revert DisputeTransferFailed();
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IDisputeManager
    function voteCommitment(uint256 disputeId, address referee, Verdict verdict, bytes32 salt)
        public
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(disputeId, referee, verdict, salt));
    }

    /// @inheritdoc IDisputeManager
    function getDispute(uint256 disputeId) external view returns (Dispute memory) {
        return _disputes[disputeId];
    }

    /// @inheritdoc IDisputeManager
    function refereesOf(uint256 disputeId) external view returns (address[] memory) {
        return _panels[disputeId][_disputes[disputeId].round];
    }

    /// @inheritdoc IDisputeManager
    function panelOf(uint256 disputeId, uint256 round) external view returns (address[] memory) {
        return _panels[disputeId][round];
    }

    /// @inheritdoc IDisputeManager
    function roundOf(uint256 disputeId, uint256 round) external view returns (Round memory) {
        return _rounds[disputeId][round];
    }

    /// @inheritdoc IDisputeManager
    function appealBond(uint256 round) external view returns (uint256) {
        return bond << round;
    }

    /// @inheritdoc IDisputeManager
    function ballotOf(uint256 disputeId, address referee) external view returns (Ballot memory) {
        return _ballots[disputeId][referee];
    }

    /// @inheritdoc IDisputeManager
    function positionState(uint256 jobId, uint32 cycle, uint32 index, Kind kind)
        external
        view
        returns (PositionState)
    {
        return _positions[_positionKey(jobId, cycle, index, kind)];
    }

    /// @inheritdoc IDisputeManager
    function canResolve(uint256 disputeId) external view returns (bool) {
        Dispute storage d = _disputes[disputeId];
        if (d.status == Status.Appealable) return block.timestamp > d.appealDeadline;
        return d.status == Status.Voting && _votingOver(d);
    }

    // ------------------------------------------------------------------ internals

    function _checkPeriod(string memory name, uint256 value) private pure {
        if (value == 0 || value > MAX_PERIOD) revert InvalidParameter(name, value);
    }

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
        // slither-disable-next-line incorrect-equality (nobody staked as a referee for the model)
        if (registry.refereeStakeTotal(d.modelId) == 0) revert NoEligibleReferees(d.modelId);
        d.drawBlock = uint64(block.number);
        d.panelSize = uint8(refereesPerDispute);
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

    /// @dev The draw of the current round: true when the panel is drawn and locked; false when the draw was
    /// scheduled, rescheduled, escalated, or the dispute ended Void after its last escalation.
    function _drawPanel(uint256 disputeId, Dispute storage d) private returns (bool) {
        uint64 drawBlock = d.drawBlock;
        if (drawBlock == 0) {
            // an escalated draw: a fresh seed block, once the escalation period is over
            if (block.timestamp < d.drawAfter) revert EscalationPending(d.drawAfter);
            d.drawBlock = uint64(block.number);
            emit DrawScheduled(disputeId, d.round, uint64(block.number));
            return false;
        }
        if (block.number <= drawBlock) revert DrawTooEarly(drawBlock);
        bytes32 seedHash = blockhash(drawBlock);
        // The seed is public from the seed block on, so the draw reads the stake tree as it stood at the end of the
        // block before it: no stake added, unbond or slash after the seed was known moves a point (a re-scheduled
        // draw would hand whoever can move the tree a free re-roll). Only a seed too old to read takes a fresh one.
        if (seedHash == bytes32(0)) {
            d.drawBlock = uint64(block.number);
            emit DrawRescheduled(disputeId, uint64(block.number));
            return false;
        }
        uint256 seats = d.panelSize;
        address[] memory chosen = _draw(disputeId, d, RefereeDraw.seed(seedHash, disputeId, d.round), seats);
        if (chosen.length < seats) {
            _escalate(disputeId, d);
            return false;
        }
        uint8 round = d.round;
        address[] storage panel = _panels[disputeId][round];
        for (uint256 i = 0; i < seats; ++i) {
            address referee = chosen[i];
            Ballot storage b = _ballots[disputeId][referee];
            b.drawn = true;
            b.round = round;
            panel.push(referee);
        }
        d.drawn = uint8(seats);
        emit RefereesDrawn(disputeId, round, chosen);
        if (round == 0) {
            // the accused has a full answer period with a panel in place
            uint64 answerBy = uint64(block.timestamp + answerPeriod);
            if (answerBy > d.answerDeadline) d.answerDeadline = answerBy;
        } else {
            _startVoting(d); // an appeal round votes on the first round's answer
        }
        for (uint256 i = 0; i < seats; ++i) {
            // slither-disable-next-line calls-loop (the protocol's registry; ≤ MAX_REFEREES times)
            registry.lock(chosen[i]);
        }
        return true;
    }

    /// @dev Up to `seats` distinct eligible referees, each try drawing the holder of a uniform point of the model's
    /// active referee stake (probability ∝ stake); at most 4 × seats + TRIES_EXTRA tries. Returns fewer when the
    /// tries run out.
    function _draw(uint256 disputeId, Dispute storage d, uint256 seed, uint256 seats)
        private
        view
        returns (address[] memory chosen)
    {
        address[4] memory excluded = _parties(d);
        uint256 snapshot = d.drawBlock - 1; // the tree before the seed block
        uint256 total = registry.refereeStakeTotalAt(d.modelId, snapshot);
        chosen = new address[](seats);
        uint256 found = 0;
        if (total != 0) {
            uint256 tries = RefereeDraw.tries(seats);
            for (uint256 j = 0; j < tries && found < seats; ++j) {
                address candidate = _holder(d.modelId, RefereeDraw.point(seed, j, total), snapshot);
                if (_eligible(disputeId, candidate, excluded, chosen, found)) chosen[found++] = candidate;
            }
        }
        // slither-disable-next-line assembly (shortens the memory array to the referees found)
        assembly ("memory-safe") {
            mstore(chosen, found)
        }
    }

    /// @dev The job's parties and the challenger, whom no draw may seat.
    function _parties(Dispute storage d) private view returns (address[4] memory) {
        IInferenceMarket.JobParties memory parties = market.jobParties(d.jobId);
        return [parties.requester, parties.drafter, parties.verifier, d.challenger];
    }

    /// @dev The referee holding stake point `point` of `modelId`'s tree as it stood at the end of block `snapshot`.
    function _holder(bytes32 modelId, uint256 point, uint256 snapshot) private view returns (address) {
        // slither-disable-next-line calls-loop (the protocol's registry; ≤ 4 × MAX_REFEREES + 8 times)
        return registry.refereeByStakeAt(modelId, point, snapshot);
    }

    /// @dev Not zero, not on a panel of this dispute (earlier rounds, or this draw so far), not a party, and still
    /// staked. Its weight in the tree before the seed block (> 0, or the point would not have found it) made it an
    /// active referee of the model then; nothing it did since counts, so a drawn referee cannot leave the panel by
    /// unbonding after it saw the seed (it is locked like any other, its stake is still there: withdrawing takes an
    /// unbonding period longer than a dispute).
    function _eligible(
        uint256 disputeId,
        address candidate,
        address[4] memory parties,
        address[] memory chosen,
        uint256 found
    ) private view returns (bool) {
        if (candidate == address(0) || _ballots[disputeId][candidate].drawn) return false;
        for (uint256 i = 0; i < 4; ++i) {
            if (candidate == parties[i]) return false;
        }
        for (uint256 i = 0; i < found; ++i) {
            if (candidate == chosen[i]) return false;
        }
        // slither-disable-next-line calls-loop (the protocol's registry; ≤ 4 × MAX_REFEREES + 8 times)
        return registry.stakeOf(candidate) != 0;
    }

    /// @dev Too few eligible referees: a fresh draw after `escalationPeriod` (the answer deadline moves with it).
    /// After `maxEscalations`: an appeal round that cannot be staffed leaves the verdict it appealed in force (its
    /// appellant's bond back: `_standUnstaffedAppeal`); a first round, which nobody ever decided, ends Void with every
    /// bond back and nobody penalized.
    function _escalate(uint256 disputeId, Dispute storage d) private {
        uint8 escalations = d.escalations + 1;
        d.escalations = escalations;
        if (escalations > maxEscalations) {
            if (d.round == 0) _voidUnrefereed(disputeId, d);
            else _standUnstaffedAppeal(disputeId, d);
            return;
        }
        uint64 drawAfter = uint64(block.timestamp + escalationPeriod);
        d.drawBlock = 0;
        d.drawAfter = drawAfter;
        // slither-disable-next-line incorrect-equality (a round counter, not a balance)
        if (d.round == 0) d.answerDeadline = uint64(drawAfter + answerPeriod);
        emit DrawEscalated(disputeId, d.round, escalations, drawAfter);
    }

    function _startVoting(Dispute storage d) private returns (uint64 commitDeadline, uint64 revealDeadline) {
        commitDeadline = uint64(block.timestamp + commitPeriod);
        revealDeadline = uint64(commitDeadline + revealPeriod);
        d.status = Status.Voting;
        d.commitDeadline = commitDeadline;
        d.revealDeadline = revealDeadline;
    }

    /// @dev Ends a dispute nobody can referee: Void, the challenger's bond and every appeal bond back, nobody
    /// penalized, the position free again, the accused and every earlier panel released.
    function _voidUnrefereed(uint256 disputeId, Dispute storage d) private {
        d.status = Status.Resolved;
        d.outcome = Outcome.Void;
        _positions[_positionKey(d.jobId, d.cycle, d.index, d.kind)] = PositionState.Free;
        _credit(disputeId, d.challenger, bond);
        uint256 last = d.round;
        for (uint256 k = 1; k <= last; ++k) {
            Round storage r = _rounds[disputeId][k];
            _credit(disputeId, r.appellant, r.appealBond);
        }
        emit DisputeResolved(disputeId, Outcome.Void, 0, 0, 0);
        _release(disputeId, d, false);
    }

    /// @dev An appeal whose panel could not be staffed: as if it had not been filed. Its appellant's bond comes back,
    /// the round is forgotten, and the dispute ends with the last decided round's result, its referees paid and
    /// penalized as on a final round. (Void here would hand a convicted party that can appeal into a pool too small
    /// for the larger panel its bond back and its conviction undone.)
    function _standUnstaffedAppeal(uint256 disputeId, Dispute storage d) private {
        uint8 round = d.round;
        Round storage r = _rounds[disputeId][round];
        address appellant = r.appellant;
        uint256 refund = r.appealBond;
        delete _rounds[disputeId][round];
        d.round = round - 1;
        d.panelSize = uint8(_panels[disputeId][round - 1].length);
        Round storage decided = _rounds[disputeId][round - 1];
        d.drawn = d.panelSize;
        d.faithfulVotes = decided.faithfulVotes;
        d.cheatedVotes = decided.cheatedVotes;
        // the decided round's reveals (each one counted a vote); its commit count is not kept, so commits = reveals
        d.reveals = decided.faithfulVotes + decided.cheatedVotes;
        d.commits = d.reveals;
        emit AppealUnstaffed(disputeId, round, appellant, refund);
        _credit(disputeId, appellant, refund);
        _finish(disputeId, d, d.roundResult);
    }

    function _votingOver(Dispute storage d) private view returns (bool) {
        if (block.timestamp > d.revealDeadline) return true;
        if (d.reveals == d.drawn) return true;
        return block.timestamp > d.commitDeadline && d.reveals == d.commits;
    }

    /// @dev Ends the dispute with final outcome `outcome` (the last round's result; docs/disputes.md, "Outcomes and
    /// money"): penalties of every round (burnt), appeal bonds back or burnt, the bond and the slash split, the
    /// final round's majority paid, the market told and everyone unlocked.
    function _finish(uint256 disputeId, Dispute storage d, Outcome outcome) private {
        d.status = Status.Resolved;
        d.outcome = outcome;
        _positions[_positionKey(d.jobId, d.cycle, d.index, d.kind)] =
            outcome == Outcome.AccusedLost ? PositionState.Proven : PositionState.Free;
        uint256 last = d.round;
        // slither-disable-next-line reentrancy-no-eth,reentrancy-benign (callers are nonReentrant; the calls go only to the protocol's registry, whose slash pays into receive())
        uint256 burnt = _penalizeAll(disputeId, outcome, last);
        for (uint256 k = 1; k <= last; ++k) {
            Round storage r = _rounds[disputeId][k];
            if (DisputePayout.appealRefunded(outcome, r.appealed)) _credit(disputeId, r.appellant, r.appealBond);
            else burnt += r.appealBond;
        }
        uint256 taken = 0;
        // slither-disable-next-line reentrancy-benign (nonReentrant; the protocol's registry pays in)
        if (outcome == Outcome.AccusedLost && accusedSlash != 0) taken = registry.slash(d.accused, accusedSlash);
        (uint256 toChallenger, uint256 toRequester, uint256 toAccused, uint256 toReferees) =
            DisputePayout.split(outcome, bond, refereeReward, taken);
        if (toChallenger != 0) _credit(disputeId, d.challenger, toChallenger);
        if (toRequester != 0) _credit(disputeId, d.requester, toRequester);
        if (toAccused != 0) _credit(disputeId, d.accused, toAccused);
        if (toReferees != 0) _payMajority(disputeId, last, DisputePayout.winningVerdict(outcome), toReferees);
        if (burnt != 0) _credit(disputeId, BURN, burnt);
        emit DisputeResolved(disputeId, outcome, d.faithfulVotes, d.cheatedVotes, taken);
        _release(disputeId, d, outcome == Outcome.AccusedLost);
    }

    /// @dev Slashes every referee of rounds 0..last that did not reveal, or revealed against a decided final
    /// verdict (DisputePayout.penalized); returns the total taken (credited to BURN by the caller).
    function _penalizeAll(uint256 disputeId, Outcome outcome, uint256 last) private returns (uint256 taken) {
        for (uint256 k = 0; k <= last; ++k) {
            address[] storage panel = _panels[disputeId][k];
            uint256 n = panel.length;
            for (uint256 i = 0; i < n; ++i) {
                address referee = panel[i];
                if (!DisputePayout.penalized(outcome, _ballots[disputeId][referee].verdict)) continue;
                uint256 t = 0;
                // slither-disable-next-line calls-loop (the protocol's registry; ≤ MAX_APPEALS + 1 panels)
                if (refereePenalty != 0) t = registry.slash(referee, refereePenalty);
                taken += t;
                emit RefereePenalized(disputeId, referee, t);
            }
        }
    }

    /// @dev Splits `pool` equally among the final round's referees that revealed `winning` (a decided outcome has at
    /// least one), the integer-division dust to the first of them in draw order.
    function _payMajority(uint256 disputeId, uint256 round, Verdict winning, uint256 pool) private {
        address[] storage panel = _panels[disputeId][round];
        uint256 n = panel.length;
        uint256 majority = 0;
        for (uint256 i = 0; i < n; ++i) {
            if (_ballots[disputeId][panel[i]].verdict == winning) ++majority;
        }
        // slither-disable-next-line unused-return (a decided outcome has a majority: nothing goes to the challenger)
        (, uint256 share, uint256 dust) = DisputePayout.splitPool(pool, majority);
        for (uint256 i = 0; i < n; ++i) {
            address referee = panel[i];
            if (_ballots[disputeId][referee].verdict == winning) {
                _credit(disputeId, referee, share + dust);
                dust = 0;
            }
        }
    }

    /// @dev Tells the market the dispute closed and unlocks the accused and every panel.
    function _release(uint256 disputeId, Dispute storage d, bool accusedLost) private {
        market.disputeClosed(d.jobId, d.accused, accusedLost);
        registry.unlock(d.accused);
        uint256 last = d.round;
        for (uint256 k = 0; k <= last; ++k) {
            address[] storage panel = _panels[disputeId][k];
            uint256 n = panel.length;
            for (uint256 i = 0; i < n; ++i) {
                // slither-disable-next-line calls-loop (the protocol's registry; ≤ MAX_APPEALS + 1 panels)
                registry.unlock(panel[i]);
            }
        }
    }

    function _credit(uint256 disputeId, address account, uint256 amount) private {
        if (amount == 0) return;
        credits[account] += amount;
        emit Credited(disputeId, account, amount);
    }
}
