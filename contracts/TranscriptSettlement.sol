// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {IInferenceMarket} from "./interfaces/IInferenceMarket.sol";
import {ITranscriptSettlement} from "./interfaces/ITranscriptSettlement.sol";
import {CycleRecord} from "./lib/CycleRecord.sol";
import {PackedCycles} from "./lib/PackedCycles.sol";
import {SpecMath} from "./lib/SpecMath.sol";
import {TranscriptSigner} from "./lib/TranscriptSigner.sol";
import {TranscriptTypes} from "./lib/TranscriptTypes.sol";

/// @title TranscriptSettlement
/// @notice Ends transcript-mode jobs of the market (docs/protocol.md "Transcript mode (v2)"): one-transaction
/// settlement of a transcript both parties signed, rule challenges that re-run the v1 accept rule on one pulled
/// cycle and slash both signers, pulls that hand a cycle's record to the dispute manager's referee flow, and force
/// moves against a silent party. It is the EIP-712 verifying contract of the transcript messages.
/// @dev Holds no ETH: every payment, slash and refund goes through the market's hooks (`transcriptFinish`,
/// `storeTranscriptRecord`, `transcriptConvict`), which keep v1's pull payments, so `finalize` pays a settled transcript
/// job exactly as a per-cycle job with the same cycles. Loops run over posted cycles (at most maxTokens: each cycle
/// emits a token, and a cycle after the job's end reverts) and over a cycle's γ ≤ 16 proposals. No reentrancy guard:
/// the only contract it calls is the market (views, and the hooks, which are nonReentrant themselves), and every
/// function writes its own state before that call.
contract TranscriptSettlement is ITranscriptSettlement, TranscriptSigner {
    /// @notice The latest state of a running job the chain itself checked (docs/protocol.md, liveness): S(cycles-1),
    /// reached by a force move's pending verification or by the verifier's on-chain answer (the record folded onto
    /// the force's state). A later force builds on it without the counterparty's signature of it.
    struct Attested {
        bytes32 state; // S(cycles-1)
        uint64 at; // when it was attested: the job's idle deadline counts from it too
        uint16 cycles; // zero: nothing attested
        bool ended; // its last cycle ended the job: `completeAnswered` completes it
    }

    /// @dev One cycle's scalars for the accept rule (kept in memory: the legacy code generator's stack is short).
    struct Rule {
        bytes32 draftRoot;
        bytes32 reveal;
        uint256 accepted;
        uint256 outToken;
        uint256 salt;
        uint256 vocab;
    }

    /// @dev The running totals of a fold over posted cycles (what v1 would hold in the job's slot 0).
    struct Tally {
        bytes32 state;
        uint256 emitted;
        uint256 rejected;
        bool finished;
        bool outCut;
    }

    uint256 private constant _BPS = 10_000;
    /// @dev The reveal part of the market's commitment word (bits 255..65): InferenceMarket._HIGH_BITS.
    uint256 private constant _HIGH_BITS = ~((uint256(type(uint64).max) << 1) | 1);

    /// @inheritdoc ITranscriptSettlement
    IInferenceMarket public immutable market;
    /// @inheritdoc ITranscriptSettlement
    uint256 public immutable ruleSlash;
    /// @inheritdoc ITranscriptSettlement
    uint256 public immutable ruleRewardBps;

    // a settled job's cycles root (zero: none) and whether a rule challenge convicted it; its cycle count is the
    // market's (transcriptFinish writes it), so settlement stores one new slot
    mapping(uint256 jobId => bytes32) private _roots;
    mapping(uint256 jobId => bool) private _convicted;
    mapping(uint256 jobId => Force) private _forces;
    // 1 + the cycle count of the last force by `forcer` that was answered: its next force must reach further (an
    // answered party is not made to answer the same move twice)
    mapping(uint256 jobId => mapping(address forcer => uint256)) private _answeredLevel;
    mapping(uint256 jobId => Attested) private _attested;

    /// @param market_ The market (wires this contract with `setTranscriptSettlement`).
    /// @param ruleSlash_ Wei slashed from each signer of a refuted cycle.
    /// @param ruleRewardBps_ The challenger's share of the smaller slash, basis points, below 10,000.
    constructor(address market_, uint256 ruleSlash_, uint256 ruleRewardBps_) {
        if (market_ == address(0) || ruleRewardBps_ >= _BPS) revert TranscriptBadParams();
        market = IInferenceMarket(market_);
        ruleSlash = ruleSlash_;
        ruleRewardBps = ruleRewardBps_;
    }

    // ------------------------------------------------------------------ settlement

    /// @inheritdoc ITranscriptSettlement
    function settle(Signed calldata a, bytes calldata cycles) external {
        TranscriptTypes.Settlement calldata s = a.settlement;
        uint256 jobId = s.jobId;
        IInferenceMarket.JobView memory job = _runningJob(jobId);
        uint256 n = PackedCycles.count(cycles, job.gamma);
        if (n != s.cycles) revert WrongCycles(s.cycles, n);
        {
            bytes32 digest = _settlementDigest(s);
            _requireSigner(digest, a.drafterSig, job.drafter);
            _requireSigner(digest, a.verifierSig, job.verifier);
        }
        bytes32[] memory leaves = new bytes32[](n);
        Tally memory t = _fold(job, TranscriptTypes.genesisState(jobId, a.salt), cycles, leaves, n);
        if (t.state != s.state) revert StateMismatch(s.state, t.state);
        if (t.emitted != s.tokensOut) revert TokensOutMismatch(s.tokensOut, t.emitted);
        bytes32 root = bytes32(0);
        if (n != 0) {
            if (!t.finished) revert TranscriptNotEnded();
            _checkReveal(job, n - 1, a.lastReveal);
            root = TranscriptTypes.cyclesRoot(leaves);
        }
        // deleting a force that does not exist would still pay for five cold zero-to-zero stores
        if (_forces[jobId].silent != address(0)) delete _forces[jobId];
        _roots[jobId] = root;
        emit TranscriptSettled(jobId, s.cycles, s.tokensOut, root, a.lastReveal);
        market.transcriptFinish(jobId, _outcome(n, t, a.salt, IInferenceMarket.FinishReason.Completed));
    }

    // ------------------------------------------------------------------ challenges and pulls

    /// @inheritdoc ITranscriptSettlement
    function challengeRule(uint256 jobId, uint32 cycle, bytes calldata c, bytes32 reveal, bytes32[] calldata proof)
        external
    {
        bytes32 root = _roots[jobId];
        // slither-disable-next-line incorrect-equality (a root, not a balance: zero means nothing was settled)
        if (root == bytes32(0) || _convicted[jobId]) revert NotChallengeable(jobId);
        IInferenceMarket.JobView memory job = market.getJob(jobId);
        PackedCycles.Cycle memory cy = _provenCycle(root, job, cycle, c, proof);
        bytes32 draftRoot = _draftRoot(jobId, cycle, cy, new bytes32[](job.gamma));
        _checkReveal(job, cycle, reveal);
        if (_followsRule(_rule(job, job.salt, draftRoot, reveal, cy.accepted, cy.outToken), cy.tokens, cy.q, cy.p)) {
            revert RecordFollowsRule(jobId, cycle);
        }
        _convicted[jobId] = true;
        emit RuleChallengeWon(jobId, cycle, msg.sender);
        market.transcriptConvict(jobId, msg.sender, ruleSlash, ruleRewardBps);
    }

    /// @inheritdoc ITranscriptSettlement
    function pullCycle(uint256 jobId, uint32 cycle, bytes calldata c, bytes32[] calldata proof) external {
        bytes32 root = _roots[jobId];
        // slither-disable-next-line incorrect-equality (a root, not a balance: zero means nothing was settled)
        if (root == bytes32(0)) revert NotChallengeable(jobId);
        IInferenceMarket.JobView memory job = market.getJob(jobId);
        PackedCycles.Cycle memory cy = _provenCycle(root, job, cycle, c, proof);
        bytes32 recordHash = _recordHash(_draftRoot(jobId, cycle, cy, new bytes32[](job.gamma)), cy);
        emit CyclePulled(jobId, cycle, recordHash);
        market.storeTranscriptRecord(jobId, cycle, recordHash);
    }

    /// @dev The one cycle of packed run `c`, unpacked, once its leaf as cycle `cycle` is proven under `root`.
    function _provenCycle(
        bytes32 root,
        IInferenceMarket.JobView memory job,
        uint32 cycle,
        bytes calldata c,
        bytes32[] calldata proof
    ) private pure returns (PackedCycles.Cycle memory cy) {
        uint256 posted = PackedCycles.count(c, job.gamma);
        if (posted != 1) revert WrongCycles(1, posted);
        if (!MerkleProof.verifyCalldata(proof, root, PackedCycles.leaf(c, job.gamma, 0, cycle))) {
            revert InvalidCycleProof(cycle);
        }
        cy = PackedCycles.alloc(job.gamma);
        PackedCycles.load(c, 0, cy);
    }

    // ------------------------------------------------------------------ force moves

    /// @inheritdoc ITranscriptSettlement
    function forceMove(uint256 jobId, Evidence calldata e, bytes calldata cycles) external {
        IInferenceMarket.JobView memory job = _runningJob(jobId);
        bool byDrafter = msg.sender == job.drafter;
        if (!byDrafter && msg.sender != job.verifier) revert NotParty(msg.sender);
        uint256 k = PackedCycles.count(cycles, job.gamma);
        _checkLevel(jobId, k + (e.pendingSig.length != 0 ? 1 : 0));
        if (!byDrafter && e.draftSig.length == 0) {
            _forceWithoutDraft(jobId, job, k);
            return;
        }
        bool withPending = e.pendingSig.length != 0;
        if (!byDrafter && !withPending) revert NotParty(msg.sender); // a verifier forcing posts its verification
        bytes32[] memory leaves = new bytes32[](k + (withPending ? 1 : 0));
        (Tally memory t, bytes32 reveal) = _coSigned(jobId, job, e, cycles, leaves, k);
        Force memory f = Force(bytes32(0), bytes32(0), bytes32(0), e.draft.salt, 0, 0, 0, 0, false, address(0), true);
        if (withPending) {
            _applyPending(jobId, job, e, t, leaves, k);
            ++k;
            reveal = e.pending.reveal;
            if (!t.finished) _attest(jobId, t.state, k, false); // S(k), the verifier's own, checked by the rule
            // a drafter holding the verifier's verification of its draft has nothing to wait for unless the job ended
            if (byDrafter && !t.finished) revert NothingToForce(k);
        }
        if (byDrafter) {
            f.pendingRoot = e.draft.draftRoot;
            f.silent = job.verifier;
            f.deadline = uint64(block.timestamp + market.verifyTimeout());
        } else {
            f.silent = job.drafter;
            f.deadline = uint64(block.timestamp + market.commitTimeout());
        }
        // the evidence the silent party must answer, in an event (v2.1): nodes read it from logs, never from this
        // transaction's input, which a contract wallet or an EIP-7702 account hides
        emit ForceEvidence(jobId, msg.data);
        f.state = t.state;
        if (k != 0) f.cyclesRoot = TranscriptTypes.cyclesRoot(leaves);
        f.cycles = uint16(k);
        f.emitted = uint16(t.emitted);
        f.rejected = uint16(t.rejected);
        f.outCut = t.outCut;
        _openOrComplete(jobId, f, t.finished, reveal);
    }

    /// @dev Stores the force `f` and its deadline, or, when its pending verification ended the job, settles it.
    function _openOrComplete(uint256 jobId, Force memory f, bool finished, bytes32 reveal) private {
        if (finished) {
            emit ForceCompleted(jobId, f.cycles);
            _finishForce(jobId, f, IInferenceMarket.FinishReason.Completed, address(0));
            return;
        }
        _forces[jobId] = f;
        emit ForceMoved(jobId, msg.sender, f.silent, f.cycles, f.deadline, reveal);
    }

    /// @inheritdoc ITranscriptSettlement
    function answerForce(uint256 jobId, Answer calldata a) external {
        Force memory f = _forces[jobId];
        if (f.silent == address(0)) revert NoForce(jobId);
        if (msg.sender != f.silent) revert NotParty(msg.sender);
        if (block.timestamp > f.deadline) revert ForceDeadline(f.deadline);
        IInferenceMarket.JobView memory job = _runningJob(jobId);
        uint256 k = f.cycles;
        address forcer = f.silent == job.verifier ? job.drafter : job.verifier;
        _answeredLevel[jobId][forcer] = k + 1; // its next force needs more than k cycles
        if (f.silent == job.verifier) {
            bytes32 draftRoot = SpecMath.draftRootCalldata(jobId, uint32(k), a.tokens, a.q);
            if (draftRoot != f.pendingRoot) revert DraftRootMismatch(k);
            _checkReveal(job, k, a.reveal);
            _verifyOnChain(_rule(job, f.salt, draftRoot, a.reveal, a.accepted, a.outToken), k, a.tokens, a.q, a.p);
            delete _forces[jobId];
            emit ForceAnsweredVerification(jobId, uint32(k), a.p, a.reveal, a.accepted, a.outToken);
            _attestAnswer(jobId, job, f, a);
        } else {
            TranscriptTypes.Draft calldata d = a.draft;
            if (f.slash && d.salt != f.salt) revert StateMismatch(bytes32(uint256(f.salt)), bytes32(uint256(d.salt)));
            bytes32 expected = f.slash ? f.state : TranscriptTypes.genesisState(jobId, d.salt);
            _checkDraft(jobId, job, d, a.draftSig, k, expected);
            delete _forces[jobId];
            // the verifier's checked verification the force posted, now signed over by the Draft on it (and the idle
            // clock restarts: the job goes on)
            _attest(jobId, f.slash ? f.state : bytes32(0), k, false);
            emit ForceAnsweredDraft(jobId, d.cycle, d.prevState, d.tokens, d.q, d.salt, a.draftSig);
        }
    }

    /// @inheritdoc ITranscriptSettlement
    function claimForce(uint256 jobId) external {
        Force memory f = _forces[jobId];
        if (f.silent == address(0)) revert NoForce(jobId);
        if (block.timestamp <= f.deadline) revert ForceDeadline(f.deadline);
        IInferenceMarket.JobView memory job = _runningJob(jobId);
        IInferenceMarket.FinishReason reason = f.silent == job.verifier
            ? IInferenceMarket.FinishReason.VerifyTimeout
            : IInferenceMarket.FinishReason.DraftTimeout;
        delete _forces[jobId];
        emit ForceSettled(jobId, f.silent, f.cycles);
        _finishForce(jobId, f, reason, f.silent);
    }

    /// @inheritdoc ITranscriptSettlement
    function completeAnswered(uint256 jobId, uint64 salt, bytes calldata cycles) external {
        IInferenceMarket.JobView memory job = _runningJob(jobId);
        Attested memory att = _attested[jobId];
        uint256 n = PackedCycles.count(cycles, job.gamma);
        if (!att.ended || att.cycles != n) revert NotAttested(jobId, n);
        bytes32[] memory leaves = new bytes32[](n);
        Tally memory t = _fold(job, TranscriptTypes.genesisState(jobId, salt), cycles, leaves, n);
        if (t.state != att.state) revert StateMismatch(att.state, t.state);
        if (_forces[jobId].silent != address(0)) delete _forces[jobId];
        _roots[jobId] = TranscriptTypes.cyclesRoot(leaves);
        emit ForceCompleted(jobId, n);
        market.transcriptFinish(jobId, _outcome(n, t, salt, IInferenceMarket.FinishReason.Completed));
    }

    /// @inheritdoc ITranscriptSettlement
    function claimIdle(uint256 jobId) external {
        _runningJob(jobId);
        uint256 deadline = idleDeadline(jobId);
        if (_forces[jobId].silent != address(0) || block.timestamp <= deadline) revert NotIdle(jobId, deadline);
        emit JobIdled(jobId);
        // as v1's draft timeout at cycle 0: no cycle, nobody slashed (the market settles it at once)
        market.transcriptFinish(
            jobId,
            IInferenceMarket.TranscriptOutcome(0, 0, 0, false, 0, IInferenceMarket.FinishReason.DraftTimeout, address(0), false)
        );
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc ITranscriptSettlement
    function idleDeadline(uint256 jobId) public view returns (uint256) {
        IInferenceMarket.JobView memory job = market.getJob(jobId);
        uint256 phases = market.commitTimeout() + market.verifyTimeout();
        // a running job's market deadline is its acceptance + commitTimeout (transcriptFinish alone moves it)
        uint256 deadline = job.deadline + job.maxTokens * phases;
        uint256 after_ = _attested[jobId].at + phases;
        return after_ > deadline ? after_ : deadline;
    }

    /// @inheritdoc ITranscriptSettlement
    function settled(uint256 jobId) external view returns (Settled memory) {
        return Settled(_roots[jobId], uint32(market.getJob(jobId).cycle), _convicted[jobId]);
    }

    /// @inheritdoc ITranscriptSettlement
    function forceOf(uint256 jobId) external view returns (Force memory) {
        return _forces[jobId];
    }

    /// @inheritdoc ITranscriptSettlement
    function domainSeparator() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    // ------------------------------------------------------------------ internals

    /// @dev A new force reaching `level` cycles: only a later state supersedes a pending force (a stale force is
    /// answered by a force at a later one), and a forcer whose force was answered must reach further than it did.
    function _checkLevel(uint256 jobId, uint256 level) private view {
        Force storage pending = _forces[jobId];
        if (pending.silent != address(0) && pending.cycles >= level) revert ForcePending(jobId, pending.silent);
        uint256 answered = _answeredLevel[jobId][msg.sender];
        if (answered != 0 && level < answered) revert ForceAlreadyAnswered(jobId, answered - 1);
    }

    /// @dev Reverts unless S(k-1) = `state` is the job's attested state after `k` cycles.
    function _requireAttested(uint256 jobId, uint256 k, bytes32 state) private view {
        Attested storage att = _attested[jobId];
        if (att.cycles != k || att.state != state) revert NotAttested(jobId, k);
    }

    /// @dev Only a later state replaces the attested one (a stale force and its answer restart the idle clock only):
    /// else a verifier could force at an older state after its answer ended the job and undo that end.
    function _attest(uint256 jobId, bytes32 state, uint256 cycles, bool ended) private {
        Attested storage att = _attested[jobId];
        if (cycles < att.cycles) {
            att.at = uint64(block.timestamp);
            return;
        }
        _attested[jobId] = Attested(state, uint64(block.timestamp), uint16(cycles), ended);
        emit StateAttested(jobId, cycles, state, ended);
    }

    /// @dev The verifier's on-chain answer to the drafter's force at `f.cycles` = k: S(k) is the force's state S(k-1)
    /// with the answered record, and the answer ends the job when v1's emission rule says so on the force's counts.
    function _attestAnswer(
        uint256 jobId,
        IInferenceMarket.JobView memory job,
        Force memory f,
        Answer calldata a
    ) private {
        bytes32 leaf = PackedCycles.leafOf(f.cycles, a.tokens, a.q, a.p, a.accepted, a.outToken);
        Tally memory t = Tally(TranscriptTypes.nextState(f.state, leaf), f.emitted, f.rejected, false, f.outCut);
        _stepUnpacked(t, job, a.tokens, a.accepted, a.outToken);
        _attest(jobId, t.state, uint256(f.cycles) + 1, t.finished);
    }

    /// @dev The verifier's force when the drafter never sent Draft 0: nothing is co-signed and the drafter never
    /// consented, so it is not slashed if it stays silent (v1: the first commit is the drafter's consent).
    function _forceWithoutDraft(uint256 jobId, IInferenceMarket.JobView memory job, uint256 k) private {
        if (k != 0) revert WrongCycles(0, k);
        uint64 deadline = uint64(block.timestamp + market.commitTimeout());
        _forces[jobId] = Force(bytes32(0), bytes32(0), bytes32(0), 0, deadline, 0, 0, 0, false, job.drafter, false);
        emit ForceMoved(jobId, msg.sender, job.drafter, 0, deadline, bytes32(0));
    }

    /// @dev A force move's co-signed state S(k-1): the k cycles fold to it from the genesis of the Draft's salt, the
    /// drafter's Draft of cycle k is on it, and (k ≥ 1) so is the verifier's Verification of cycle k-1. Returns the
    /// fold and the verifier's latest reveal in the evidence.
    function _coSigned(
        uint256 jobId,
        IInferenceMarket.JobView memory job,
        Evidence calldata e,
        bytes calldata cycles,
        bytes32[] memory leaves,
        uint256 k
    ) private view returns (Tally memory t, bytes32 reveal) {
        t = _fold(job, TranscriptTypes.genesisState(jobId, e.draft.salt), cycles, leaves, k);
        if (t.finished) revert CycleAfterEnd(k); // the job ended at cycle k-1: that is a Settlement
        _checkDraft(jobId, job, e.draft, e.draftSig, k, t.state);
        if (k != 0) {
            if (e.lastSig.length == 0) {
                // no Verification of cycle k-1: S(k-1) must be the state the chain attested (an on-chain answer)
                _requireAttested(jobId, k, t.state);
            } else {
                _checkCoSigned(jobId, job, e.last, e.lastSig, k, t.state);
                reveal = e.last.reveal;
            }
        }
    }

    /// @dev The force mover's pending Verification of cycle k (the verifier's, on the Draft in the evidence): signed
    /// by the verifier, checked by the v1 rule, folded into `t` and `leaves`.
    function _applyPending(
        uint256 jobId,
        IInferenceMarket.JobView memory job,
        Evidence calldata e,
        Tally memory t,
        bytes32[] memory leaves,
        uint256 k
    ) private view {
        TranscriptTypes.Verification calldata v = e.pending;
        if (v.jobId != jobId) revert WrongJob(jobId, v.jobId);
        if (v.cycle != k) revert WrongCycles(k, v.cycle);
        if (v.draftRoot != e.draft.draftRoot) revert DraftRootMismatch(k);
        _requireSigner(_verificationDigest(v), e.pendingSig, job.verifier);
        _checkReveal(job, k, v.reveal);
        uint32[] memory tokens = e.draft.tokens;
        _verifyOnChain(_rule(job, e.draft.salt, v.draftRoot, v.reveal, v.accepted, v.outToken), k, tokens, e.draft.q, v.p);
        bytes32 leaf = PackedCycles.leafOf(k, tokens, e.draft.q, v.p, v.accepted, v.outToken);
        bytes32 next = TranscriptTypes.nextState(t.state, leaf);
        if (next != v.state) revert StateMismatch(v.state, next);
        _stepUnpacked(t, job, tokens, v.accepted, v.outToken);
        t.state = next;
        leaves[k] = leaf;
    }

    function _runningJob(uint256 jobId) private view returns (IInferenceMarket.JobView memory job) {
        job = market.getJob(jobId);
        if (!job.transcript || job.status != IInferenceMarket.JobStatus.Running) revert NotTranscriptJob(jobId);
    }

    /// @dev Folds the first `n` cycles of the packed run `cycles` (its length checked by `PackedCycles.count`) from
    /// `genesis`: per cycle accepted ≤ γ, its cycle leaf (into `leaves`), the state step and v1's emission and α
    /// counts. A cycle after the job's end reverts. `PackedCycles.fold` hashes each cycle once, straight from calldata,
    /// and counts the cycles that end nothing; it stops at one that may end the job, for `_step`. No v1 record is
    /// rebuilt here: a pull or a rule challenge rebuilds the one cycle it needs.
    function _fold(
        IInferenceMarket.JobView memory job,
        bytes32 genesis,
        bytes calldata cycles,
        bytes32[] memory leaves,
        uint256 n
    ) private pure returns (Tally memory t) {
        uint256 gamma = job.gamma;
        uint256 maxTokens = job.maxTokens;
        PackedCycles.Run memory r = PackedCycles.Run(gamma, job.eosToken, 0, n, genesis, maxTokens, 0, 0, 0);
        while (PackedCycles.fold(cycles, r, leaves)) {
            uint256 c = r.next;
            if (r.accepted > gamma) revert BadCycle(c);
            t.emitted = maxTokens - r.room;
            t.rejected = r.rejected;
            uint256 eosAt = PackedCycles.firstEos(cycles, gamma, c, r.accepted, r.eos);
            _step(t, maxTokens, r.eos, gamma, r.accepted, r.outToken, eosAt);
            (r.next, r.room, r.rejected) = (++c, maxTokens - t.emitted, t.rejected);
            if (c == n) break;
            if (t.finished) revert CycleAfterEnd(c);
        }
        t.state = r.state;
        t.emitted = maxTokens - r.room;
        t.rejected = r.rejected;
    }

    /// @dev The draft root of an unpacked cycle (§4: SpecMath's leaf and tree), `nodes` (γ entries) its scratch.
    function _draftRoot(uint256 jobId, uint256 cycle, PackedCycles.Cycle memory cy, bytes32[] memory nodes)
        private
        pure
        returns (bytes32)
    {
        uint256 gamma = nodes.length;
        for (uint256 i; i < gamma; ++i) {
            nodes[i] = SpecMath.leaf(jobId, uint32(cycle), uint32(i), cy.tokens[i], cy.q[i]);
        }
        return SpecMath.root(nodes);
    }

    /// @dev The v1 record hash of an unpacked cycle (accepted ≤ γ and outToken < 2^32 by the packing's widths).
    function _recordHash(bytes32 draftRoot, PackedCycles.Cycle memory cy) private pure returns (bytes32) {
        return CycleRecord.hash(draftRoot, cy.p, uint32(cy.accepted), uint32(cy.outToken));
    }

    /// @dev `_step` of a cycle whose tokens are a memory array (a force move's pending verification).
    function _stepUnpacked(
        Tally memory t,
        IInferenceMarket.JobView memory job,
        uint32[] memory tokens,
        uint256 accepted,
        uint256 outToken
    ) private pure {
        uint256 eosAt = accepted;
        for (uint256 i; i < accepted; ++i) {
            if (tokens[i] == job.eosToken) {
                eosAt = i;
                break;
            }
        }
        _step(t, job.maxTokens, job.eosToken, tokens.length, accepted, outToken, eosAt);
    }

    /// @dev v1's emission of one verified cycle of `gamma` proposals (InferenceMarket._emitOutput and _nextSlot0): the
    /// accepted proposals then outToken, cut after the first EOS (`eosAt`: the first accepted proposal that is EOS, or
    /// `accepted` when none is) and at maxTokens; a rejection counts unless the cut came before the outToken. The
    /// caller has checked that `t` is not finished (a cycle after the end reverts {CycleAfterEnd} there).
    /// @dev One assembly block on `t`'s words (state, emitted, rejected, finished, outCut): it runs once a posted
    /// cycle, and the Solidity version's branches and field accesses cost ~200 gas a cycle more. No overflow: a
    /// running job has emitted < maxTokens (it finishes when it reaches them), so `room` is positive, accepted ≤ γ ≤
    /// 255, and the counts stay below the cycle count times 256.
    function _step(
        Tally memory t,
        uint256 maxTokens,
        uint256 eosToken,
        uint256 gamma,
        uint256 accepted,
        uint256 outToken,
        uint256 eosAt
    ) private pure {
        assembly ("memory-safe") {
            let emitted := mload(add(t, 0x20))
            let room := sub(maxTokens, emitted)
            let count := add(accepted, 1)
            let finished := iszero(lt(count, room))
            if finished { count := room }
            // the position of the first EOS among the emitted (accepted proposals, then outToken at `accepted`)
            let eos := eosAt
            if iszero(lt(eosAt, accepted)) {
                eos := not(0)
                if eq(outToken, eosToken) { eos := accepted }
            }
            if lt(eos, count) {
                count := add(eos, 1)
                finished := 1
            }
            mstore(add(t, 0x20), add(emitted, count))
            let cut := and(finished, iszero(gt(count, accepted)))
            if and(lt(accepted, gamma), iszero(cut)) { mstore(add(t, 0x40), add(mload(add(t, 0x40)), 1)) }
            mstore(add(t, 0x60), finished)
            mstore(add(t, 0x80), cut)
        }
    }

    /// @dev Reverts unless `d` is the drafter's signed Draft of cycle `cycle` of `jobId` on `prevState`, with the job's
    /// γ proposals, every q in 1..WAD and a consistent draft root.
    function _checkDraft(
        uint256 jobId,
        IInferenceMarket.JobView memory job,
        TranscriptTypes.Draft calldata d,
        bytes calldata signature,
        uint256 cycle,
        bytes32 prevState
    ) private view {
        if (d.jobId != jobId) revert WrongJob(jobId, d.jobId);
        if (d.cycle != cycle) revert WrongCycles(cycle, d.cycle);
        if (d.prevState != prevState) revert StateMismatch(d.prevState, prevState);
        if (d.tokens.length != job.gamma) revert BadCycle(cycle);
        // a q outside 1..WAD has no rule-following verification (v1's commitDraft refuses it): a force with one
        // could not be answered on chain, and the silent verifier would be slashed for a draft nobody can verify
        for (uint256 i; i < d.q.length; ++i) {
            if (!SpecMath.isDraftProbability(d.q[i])) revert BadCycle(cycle);
        }
        if (SpecMath.draftRootCalldata(jobId, d.cycle, d.tokens, d.q) != d.draftRoot) revert DraftRootMismatch(cycle);
        _requireSigner(_draftDigest(d), signature, job.drafter);
    }

    /// @dev Reverts unless `v` is the verifier's signed Verification of cycle `k - 1` of `jobId` at `state`.
    function _checkCoSigned(
        uint256 jobId,
        IInferenceMarket.JobView memory job,
        TranscriptTypes.Verification calldata v,
        bytes calldata signature,
        uint256 k,
        bytes32 state
    ) private view {
        if (v.jobId != jobId) revert WrongJob(jobId, v.jobId);
        if (v.cycle + 1 != k) revert WrongCycles(k - 1, v.cycle);
        if (v.state != state) revert StateMismatch(v.state, state);
        _requireSigner(_verificationDigest(v), signature, job.verifier);
        _checkReveal(job, k - 1, v.reveal);
    }

    /// @dev A verification posted on chain (a force move's): the reveal against the head and the v1 rule.
    function _verifyOnChain(
        Rule memory r,
        uint256 cycle,
        uint32[] memory tokens,
        uint64[] memory q,
        uint64[] memory p
    ) private pure {
        if (p.length != tokens.length || r.accepted > tokens.length) revert BadCycle(cycle);
        if (!_followsRule(r, tokens, q, p)) revert RuleViolated(cycle);
    }

    /// @dev `salt`: a settled job's is in the market (getJob.salt); a running job's only in its Drafts.
    function _rule(
        IInferenceMarket.JobView memory job,
        uint64 salt,
        bytes32 draftRoot,
        bytes32 reveal,
        uint256 accepted,
        uint256 outToken
    ) private pure returns (Rule memory) {
        return Rule(draftRoot, reveal, accepted, outToken, salt, job.vocabSize);
    }

    /// @dev Reverts unless H^(cycle+1)(reveal) is the verifier's chain head (its high 191 bits, as the market keeps it).
    function _checkReveal(IInferenceMarket.JobView memory job, uint256 cycle, bytes32 reveal) private pure {
        bytes32 h = reveal;
        // SpecMath.chainHash cycle + 1 times, as one loop in scratch space: settlement runs it once per posted cycle,
        // so four hashes an iteration (the loop's own jumps and counter cost as much as a hash)
        assembly ("memory-safe") {
            mstore(0x00, h)
            let k := add(cycle, 1)
            for {} gt(k, 3) { k := sub(k, 4) } {
                mstore(0x00, keccak256(0x00, 0x20))
                mstore(0x00, keccak256(0x00, 0x20))
                mstore(0x00, keccak256(0x00, 0x20))
                mstore(0x00, keccak256(0x00, 0x20))
            }
            for {} k { k := sub(k, 1) } { mstore(0x00, keccak256(0x00, 0x20)) }
            h := mload(0x00)
        }
        if ((uint256(h) ^ uint256(job.commitment)) & _HIGH_BITS != 0) revert RevealMismatch(cycle);
    }

    /// @dev The v1 accept rule on one cycle (InferenceMarket.submitVerification, docs/protocol.md §4): every q in
    /// 1..WAD and p in 0..WAD, outToken below the vocabulary, and `accepted` equal to the count of the walk with the
    /// job's salt, cut before the first proposal at or above the vocabulary.
    function _followsRule(Rule memory r, uint32[] memory tokens, uint64[] memory q, uint64[] memory p)
        private
        pure
        returns (bool)
    {
        if (p.length != q.length || tokens.length != q.length) return false;
        if (r.outToken >= r.vocab || !_inRange(q, p)) return false;
        // slither-disable-next-line incorrect-equality (an accept count, not a balance)
        return _capAtVocab(tokens, _count(r, q, p), r.vocab) == r.accepted;
    }

    function _count(Rule memory r, uint64[] memory q, uint64[] memory p) private pure returns (uint256) {
        return SpecMath.countAccepted(r.reveal, r.draftRoot, q, p, uint64(r.salt));
    }

    /// @dev Every q in 1..WAD and every p in 0..WAD (v1's commitDraft and submitVerification revert otherwise).
    function _inRange(uint64[] memory q, uint64[] memory p) private pure returns (bool) {
        uint256 k = q.length;
        for (uint256 i; i < k; ++i) {
            if (!SpecMath.isDraftProbability(q[i]) || !SpecMath.isTargetProbability(p[i])) return false;
        }
        return true;
    }

    /// @dev The accept count cut before the first proposal at or above the vocabulary (InferenceMarket._capAtVocab).
    function _capAtVocab(uint32[] memory tokens, uint256 count, uint256 vocab) private pure returns (uint256) {
        for (uint256 i; i < count; ++i) {
            if (tokens[i] >= vocab) return i;
        }
        return count;
    }

    function _outcome(uint256 cycles, Tally memory t, uint64 salt, IInferenceMarket.FinishReason reason)
        private
        pure
        returns (IInferenceMarket.TranscriptOutcome memory o)
    {
        o.cycles = uint16(cycles);
        o.emitted = uint16(t.emitted);
        o.rejected = uint16(t.rejected);
        o.outCut = t.outCut;
        o.salt = salt;
        o.reason = reason;
    }

    /// @dev Ends a force-moved job at `f`'s cycles, slashing `silent` (when it consented) as for a v1 timeout.
    function _finishForce(uint256 jobId, Force memory f, IInferenceMarket.FinishReason reason, address silent) private {
        delete _forces[jobId];
        _roots[jobId] = f.cyclesRoot;
        IInferenceMarket.TranscriptOutcome memory o =
            IInferenceMarket.TranscriptOutcome(f.cycles, f.emitted, f.rejected, f.outCut, f.salt, reason, silent, f.slash);
        market.transcriptFinish(jobId, o);
    }
}
