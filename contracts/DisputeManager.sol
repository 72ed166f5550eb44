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
/// @notice Optimistic, replay-refereed disputes of docs/protocol.md §6 (see docs/disputes.md).
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
contract DisputeManager is IDisputeManager, ReentrancyGuard {
    // ------------------------------------------------------------------ constants and parameters

    /// @notice Largest referee panel.
    uint256 public constant MAX_REFEREES = 15;
    /// @notice Largest top-k an answer may carry.
    uint256 public constant MAX_TOP_K = 16;
    /// @notice The referee draw looks at no more than 4R + SCAN_EXTRA registered referees.
    uint256 public constant SCAN_EXTRA = RefereeDraw.SCAN_EXTRA;
    /// @notice Longest allowed phase, so deadlines fit in uint64.
    uint256 public constant MAX_PERIOD = 365 days;
    /// @notice Basis points.
    uint256 public constant BPS = DisputePayout.BPS;
    /// @notice Share (bps) of the accused's slash left after the referee reward that goes to the challenger; the
    /// rest goes to the requester.
    uint256 public constant CHALLENGER_SHARE_BPS = DisputePayout.CHALLENGER_SHARE_BPS;
    /// @notice Share (bps) of the bond that the majority referees earn whichever side wins (paid from the bond when
    /// the challenger loses, from the accused's slash when the accused loses), so a referee's pay never depends on
    /// which way it votes.
    uint256 public constant REFEREE_SHARE_BPS = DisputePayout.REFEREE_SHARE_BPS;

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
    // slither-disable-next-line uninitialized-state (false positive: _draw fills each panel through a storage pointer)
    mapping(uint256 disputeId => address[]) private _referees;
    mapping(uint256 disputeId => mapping(address referee => Ballot)) private _ballots;
    mapping(bytes32 positionKey => PositionState) private _positions;

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
        if (registry_ == address(0) || market_ == address(0)) revert DisputeZeroAddress();
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
        refereeReward = DisputePayout.refereeReward(bond_);
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
        if (d.status != Status.AwaitingAnswer) revert DisputeWrongStatus(disputeId, d.status);
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
            if (block.number > d.drawBlock && blockhash(d.drawBlock) == bytes32(0)) revert PanelNotDrawn(d.drawBlock);
            // slither-disable-next-line reentrancy-no-eth (nonReentrant; calls only the protocol's registry, market)
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

    /// @inheritdoc IDisputeManager
    function claimAnswerTimeout(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.AwaitingAnswer) revert DisputeWrongStatus(disputeId, d.status);
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
        if (!b.drawn) revert NotDrawnReferee();
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

    /// @inheritdoc IDisputeManager
    function resolve(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.status != Status.Voting) revert DisputeWrongStatus(disputeId, d.status);
        if (!_votingOver(d)) revert TooEarlyToResolve(d.revealDeadline);

        Outcome outcome = DisputePayout.decide(d.drawn, d.faithfulVotes, d.cheatedVotes);
        d.status = Status.Resolved;
        d.outcome = outcome;
        _positions[_positionKey(d.jobId, d.cycle, d.index, d.kind)] =
            outcome == Outcome.AccusedLost ? PositionState.Proven : PositionState.Free;
        Verdict winning = DisputePayout.winningVerdict(outcome);

        // Referee penalties (slash proceeds arrive through receive()) join the majority's reward in one pool.
        (uint256 pool, uint256 majority) = _penalize(disputeId, winning);
        uint256 taken = 0;
        // slither-disable-next-line reentrancy-benign (nonReentrant; the protocol's registry pays in)
        if (outcome == Outcome.AccusedLost && accusedSlash != 0) taken = registry.slash(d.accused, accusedSlash);
        {
            (uint256 toChallenger, uint256 toRequester, uint256 toAccused, uint256 toReferees) =
                DisputePayout.split(outcome, bond, refereeReward, taken);
            // (a zero share reads no address: _credit would skip it anyway)
            if (toChallenger != 0) _credit(disputeId, d.challenger, toChallenger);
            if (toRequester != 0) _credit(disputeId, d.requester, toRequester);
            if (toAccused != 0) _credit(disputeId, d.accused, toAccused);
            pool += toReferees;
        }
        // With no majority referee (Void, nobody revealed) the no-shows' penalties go to the challenger.
        (uint256 poolToChallenger, uint256 share, uint256 dust) = DisputePayout.splitPool(pool, majority);
        if (poolToChallenger != 0) _credit(disputeId, d.challenger, poolToChallenger);
        if (majority != 0) _payMajority(disputeId, winning, share, dust);
        emit DisputeResolved(disputeId, outcome, d.faithfulVotes, d.cheatedVotes, taken);
        _release(disputeId, d, outcome == Outcome.AccusedLost);
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
        return _referees[disputeId];
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
        // slither-disable-next-line incorrect-equality (a count of listed referees, not a balance)
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
        _draw(disputeId, d, RefereeDraw.seed(seedHash, disputeId), panel);
        uint256 drawn = panel.length;
        if (drawn == 0) {
            _voidUnrefereed(disputeId, d);
            return false;
        }
        d.drawn = uint8(drawn);
        emit RefereesDrawn(disputeId, panel);
        for (uint256 i = 0; i < drawn; ++i) {
            // slither-disable-next-line calls-loop (the protocol's registry; ≤ MAX_REFEREES or 4R + 8 times)
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
        (uint256 tries, bool fullScan) = RefereeDraw.scanPlan(pool, refereesPerDispute);
        for (uint256 j = 0; j < tries && panel.length < refereesPerDispute; ++j) {
            uint256 at = fullScan ? RefereeDraw.scanSlot(seed, j, pool) : RefereeDraw.sampledSlot(seed, j, pool);
            if (at >= count) continue;
            // slither-disable-next-line calls-loop (the protocol's registry; ≤ MAX_REFEREES or 4R + 8 times)
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
        // slither-disable-next-line calls-loop (the protocol's registry; ≤ MAX_REFEREES or 4R + 8 times)
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
                // slither-disable-next-line calls-loop (the protocol's registry; ≤ MAX_REFEREES or 4R + 8 times)
                uint256 t = registry.slash(referee, refereePenalty);
                taken += t;
                emit RefereePenalized(disputeId, referee, t);
            } else {
                emit RefereePenalized(disputeId, referee, 0);
            }
        }
    }

    /// @dev Credits `share` to each majority referee (DisputePayout.splitPool), and `dust` on top to the first of
    /// them in draw order.
    function _payMajority(uint256 disputeId, Verdict winning, uint256 share, uint256 dust) private {
        address[] storage panel = _referees[disputeId];
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
            // slither-disable-next-line calls-loop (the protocol's registry; ≤ MAX_REFEREES or 4R + 8 times)
            registry.unlock(panel[i]);
        }
    }

    function _credit(uint256 disputeId, address account, uint256 amount) private {
        if (amount == 0) return;
        credits[account] += amount;
        emit Credited(disputeId, account, amount);
    }
}
