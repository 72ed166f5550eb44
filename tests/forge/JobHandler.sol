// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IInferenceMarket} from "../../contracts/interfaces/IInferenceMarket.sol";
import {IStakingRegistry} from "../../contracts/interfaces/IStakingRegistry.sol";
import {CycleRecord} from "../../contracts/lib/CycleRecord.sol";
import {SpecMath} from "../../contracts/lib/SpecMath.sol";
import {DisputeManager} from "../../contracts/DisputeManager.sol";
import {InferenceMarket} from "../../contracts/InferenceMarket.sol";
import {StakingRegistry} from "../../contracts/StakingRegistry.sol";
import {AlphaModel} from "./AlphaModel.sol";
import {HandlerBase} from "./HandlerBase.sol";
import {Ledger} from "./Ledger.sol";

/// @title JobHandler
/// @notice Per-cycle jobs on the market: submit (escrow), accept (a real hash-chain head), commit drafts (real draft
/// roots from SpecMath), verify them (the chain's next reveal, target probabilities that accept, reject or draw at
/// random), time out either party, finalize after the challenge window, and withdraw. Every credit the market makes
/// is predicted here (payout, refund, α fee, timeout slash) into the ledger, which the invariants hold the market's
/// `owed` to; every wei in and out is measured.
contract JobHandler is HandlerBase {
    struct Meta {
        address requester;
        address drafter;
        address verifier;
        bytes32 seed; // the verifier's hash-chain seed: head = H^maxTokens(seed), cycle c reveals H^(maxTokens-1-c)
        uint16 maxTokens;
        uint8 gamma;
        uint64 salt;
        uint256 escrow; // what the requester paid in
    }

    /// @dev A verified cycle as the handler computed it: the record preimage disputes prove against, and the draft.
    struct Record {
        bytes32 root;
        uint64[] p;
        uint32 accepted;
        uint32 outToken;
        uint32[] tokens;
        uint64[] q;
    }

    /// @dev A job to submit.
    struct Order {
        address requester;
        address drafter;
        address verifier;
        uint8 gamma;
        uint16 maxTokens;
        bool eligible; // the reference sampling settings (else greedy): its cycles count toward α
        uint256 pricePerToken;
        uint256 pricePerPass;
        uint256 extra; // escrow above the required, refunded at settlement
    }

    uint256 internal constant MAX_OPEN = 12;

    AlphaModel public immutable alpha;
    address public immutable alphaHandler;
    address public disputeHandler;
    mapping(uint256 => Meta) internal _meta;
    mapping(uint256 => uint32[]) internal _draftTokens;
    mapping(uint256 => uint64[]) internal _draftQ;
    mapping(uint256 => mapping(uint32 => Record)) internal _records;
    uint256[] internal _open; // submitted and not yet finalized

    constructor(
        StakingRegistry registry_,
        InferenceMarket market_,
        DisputeManager disputes_,
        Ledger ledger_,
        AlphaModel alpha_,
        address alphaHandler_
    ) HandlerBase(registry_, market_, disputes_, ledger_) {
        alpha = alpha_;
        alphaHandler = alphaHandler_;
    }

    // ------------------------------------------------------------------ fuzzed entry points

    function submit(uint256 a, uint256 b, uint256 c) external {
        _tick(bound(a, 1, 30));
        if (_open.length >= MAX_OPEN) {
            _endOne(a);
            return;
        }
        (address d, address v) = _parties(b);
        if (d == address(0)) return _count("job:no-party");
        bool eligible = (c >> 8) % 4 != 0;
        uint256 floor = market.alphaPriceFloor();
        Order memory o;
        (o.requester, o.drafter, o.verifier, o.eligible) = (requester(c), d, v, eligible);
        o.gamma = uint8(bound(a >> 8, 1, 4));
        o.maxTokens = uint16(bound(b >> 8, 1, 10));
        o.pricePerToken = bound(a >> 16, 0, 1e13);
        o.pricePerPass = eligible ? bound(b >> 16, floor, 4 * floor) : bound(b >> 16, 0, 2 * floor);
        o.extra = bound(c >> 16, 0, 1e13);
        _submit(o);
    }

    function accept(uint256 a) external {
        _tick(bound(a, 1, 30));
        uint256 id = _find(a, IInferenceMarket.JobStatus.Open, false, IInferenceMarket.Phase.AwaitDraft);
        if (id == 0) return _advanceAny(a);
        IInferenceMarket.JobView memory v = market.getJob(id);
        if (block.timestamp > v.deadline) return _claimTimeout(id);
        _accept(id);
    }

    function commit(uint256 a, uint256 b) external {
        _tick(bound(a, 1, 40));
        uint256 id = _find(a, IInferenceMarket.JobStatus.Running, true, IInferenceMarket.Phase.AwaitDraft);
        if (id == 0) return _advanceAny(b);
        if (block.timestamp > market.getJob(id).deadline) return _claimTimeout(id);
        _commit(id, b);
    }

    function verify(uint256 a, uint256 b) external {
        _tick(bound(a, 1, 40));
        uint256 id = _find(a, IInferenceMarket.JobStatus.Running, true, IInferenceMarket.Phase.AwaitVerify);
        if (id == 0) return _advanceAny(b);
        if (block.timestamp > market.getJob(id).deadline) return _claimTimeout(id);
        _verify(id, b, 4);
    }

    /// @dev Lets the current deadline of an open or running job pass, then claims the timeout.
    function timeout(uint256 a) external {
        _tick(1);
        uint256 id = _find(a, IInferenceMarket.JobStatus.Running, false, IInferenceMarket.Phase.AwaitDraft);
        if (id == 0) id = _find(a, IInferenceMarket.JobStatus.Open, false, IInferenceMarket.Phase.AwaitDraft);
        if (id == 0) return _submitAny(a);
        _warpPast(market.getJob(id).deadline);
        _claimTimeout(id);
    }

    /// @dev Lets a finished job's challenge window pass, then finalizes it (one with a dispute open is left).
    function finalize(uint256 a) external {
        _tick(1);
        uint256 id = _findFinalizable(a);
        if (id == 0) return _submitAny(a);
        _warpPast(market.getJob(id).deadline);
        _finalize(id);
    }

    /// @dev Withdraws what the market owes an actor; a second withdrawal right after must revert.
    function withdraw(uint256 a) external {
        _tick(1);
        for (uint256 k = 0; k < ACTORS; ++k) {
            address who = actor((a % ACTORS + k) % ACTORS);
            uint256 owed = market.owed(who);
            if (owed == 0) continue;
            uint256 before = who.balance;
            vm.prank(who);
            market.withdraw();
            uint256 amount = who.balance - before;
            if (amount != owed) ledger.flagPaidWrong();
            if (ledger.mutant() != 1) ledger.got(who, amount);
            ledger.marketWithdraw(who, amount);
            vm.prank(who);
            try market.withdraw() {
                ledger.flagPaidTwice();
            } catch {}
            return _count("job:withdrawn");
        }
        _advanceAny(a);
    }

    // ------------------------------------------------------------------ the α handler's whole honest job

    /// @notice Runs one α-eligible job from submit to finalize in one action for the α handler: every proposal is
    /// accepted with probability about `rate`/8 (p = q accepts, p = 0 rejects), so drafters' windows fill up.
    function runWhole(uint256 seed, uint256 rate) external returns (bool ran) {
        require(msg.sender == alphaHandler, "only the alpha handler");
        (address d, address v) = _parties(seed);
        if (d == address(0)) return false;
        uint256 floor = market.alphaPriceFloor();
        uint256 id = _submit(Order(requester(seed >> 3), d, v, 4, 8, true, 1e12, floor, 0));
        _tick(1);
        _accept(id);
        for (uint256 c = 0; c < 8; ++c) {
            _tick(1);
            _commit(id, uint256(keccak256(abi.encode(seed, c))));
            _tick(1);
            _verify(id, uint256(keccak256(abi.encode(seed, c, "p"))), rate);
            if (market.jobStatus(id) != IInferenceMarket.JobStatus.Running) break;
        }
        _warpPast(market.getJob(id).deadline);
        _finalize(id);
        return true;
    }

    function setDisputeHandler(address disputeHandler_) external {
        require(disputeHandler == address(0), "wired");
        disputeHandler = disputeHandler_;
    }

    /// @notice For the dispute handler when nothing can be disputed: a fresh job run through 1..3 cycles and left
    /// unfinalized (running, or finished in its challenge window). Returns its id (0 at the cap of open jobs).
    function runCycles(uint256 seed) external returns (uint256 id) {
        require(msg.sender == disputeHandler, "only the dispute handler");
        if (_open.length >= MAX_OPEN) return 0;
        (address d, address v) = _parties(seed);
        if (d == address(0)) return 0;
        uint256 floor = market.alphaPriceFloor();
        id = _submit(Order(requester(seed >> 3), d, v, uint8(bound(seed >> 8, 1, 4)), 10, true, 1e12, floor, 0));
        _tick(1);
        _accept(id);
        uint256 cycles = bound(seed >> 16, 1, 3);
        for (uint256 c = 0; c < cycles && market.jobStatus(id) == IInferenceMarket.JobStatus.Running; ++c) {
            _tick(1);
            _commit(id, uint256(keccak256(abi.encode(seed, c))));
            _tick(1);
            _verify(id, uint256(keccak256(abi.encode(seed, c, "p"))), 8);
        }
    }

    // ------------------------------------------------------------------ views for the other handlers and the test

    function openCount() external view returns (uint256) {
        return _open.length;
    }

    function openAt(uint256 i) external view returns (uint256) {
        return _open[i];
    }

    function metaOf(uint256 id) external view returns (Meta memory) {
        return _meta[id];
    }

    function recordOf(uint256 id, uint32 cycle) external view returns (Record memory) {
        return _records[id][cycle];
    }

    // ------------------------------------------------------------------ actions

    function _submit(Order memory o) internal returns (uint256 id) {
        IInferenceMarket.JobRequest memory req;
        req.draftModel = DRAFT;
        req.targetModel = TARGET;
        req.drafter = o.drafter;
        req.verifier = o.verifier;
        req.gamma = o.gamma;
        req.temperature = o.eligible ? uint64(WAD) : 0;
        req.topP = uint64(WAD);
        req.maxTokens = o.maxTokens;
        req.eosToken = EOS;
        req.pricePerAcceptedToken = uint128(o.pricePerToken);
        req.pricePerPass = uint128(o.pricePerPass);
        uint256 value = uint256(o.maxTokens) * (o.pricePerToken + o.pricePerPass) + o.extra;
        vm.prank(o.requester);
        id = market.submitJob{value: value}(req, "forge invariant campaign");
        ledger.paid(o.requester, value);
        _meta[id] = Meta(
            o.requester, o.drafter, o.verifier, keccak256(abi.encode("chain seed", id)), o.maxTokens, o.gamma, 0, value
        );
        _open.push(id);
        _count("job:submitted");
    }

    function _accept(uint256 id) internal {
        Meta storage m = _meta[id];
        vm.prank(m.verifier);
        market.acceptJob(id, chain(m.seed, m.maxTokens));
        _count("job:accepted");
    }

    function _commit(uint256 id, uint256 seed) internal {
        Meta storage m = _meta[id];
        uint32 cycle = market.getJob(id).cycle;
        uint32[] memory tokens = new uint32[](m.gamma);
        uint64[] memory q = new uint64[](m.gamma);
        bytes32[] memory leaves = new bytes32[](m.gamma);
        for (uint256 i = 0; i < m.gamma; ++i) {
            uint256 w = uint256(keccak256(abi.encode(seed, i)));
            tokens[i] = uint32(w % (VOCAB + 1)); // VOCAB itself: out of range, never accepted (1 in 65)
            q[i] = uint64(bound(w >> 64, 1, WAD));
            leaves[i] = SpecMath.leaf(id, cycle, uint32(i), tokens[i], q[i]);
        }
        bytes32 root = SpecMath.root(leaves);
        vm.prank(m.drafter);
        if (cycle == 0) {
            m.salt = uint64(seed >> 128);
            market.commitFirstDraft(id, root, tokens, q, m.salt);
        } else {
            market.commitDraft(id, cycle, root, tokens, q);
        }
        _draftTokens[id] = tokens;
        _draftQ[id] = q;
        _count("job:drafted");
    }

    /// @dev Verifies the committed draft. `rate` < 8: each p accepts with probability rate/8 (else rejects);
    /// otherwise p is drawn per proposal: accept (p = q), reject (p = 0), p = WAD, or uniform.
    function _verify(uint256 id, uint256 seed, uint256 rate) internal {
        Meta storage m = _meta[id];
        uint32 cycle = market.getJob(id).cycle;
        Record memory rec;
        rec.tokens = _draftTokens[id];
        rec.q = _draftQ[id];
        rec.p = _targetProbs(rec.q, seed, rate);
        rec.outToken = uint32(seed % VOCAB);
        rec.root = _root(id, cycle, rec.tokens, rec.q);
        bytes32 reveal = chain(m.seed, m.maxTokens - 1 - cycle);
        rec.accepted = _accepted(reveal, rec, m.salt);
        vm.prank(m.verifier);
        market.submitVerification(id, cycle, rec.tokens, rec.q, rec.p, reveal, rec.outToken);
        _records[id][cycle] = rec;
        if (market.cycleRecordHash(id, cycle) != CycleRecord.hash(rec.root, rec.p, rec.accepted, rec.outToken)) {
            ledger.flagRecordMismatch();
        }
        _count("job:verified");
        if (market.jobStatus(id) == IInferenceMarket.JobStatus.Finished) _count("job:completed");
    }

    function _targetProbs(uint64[] memory q, uint256 seed, uint256 rate) internal pure returns (uint64[] memory p) {
        p = new uint64[](q.length);
        for (uint256 i = 0; i < q.length; ++i) {
            uint256 w = uint256(keccak256(abi.encode(seed, i)));
            uint256 mode = rate < 8 ? (w % 8 < rate ? 0 : 1) : w % 4;
            p[i] = mode == 0 ? q[i] : mode == 1 ? 0 : mode == 2 ? uint64(WAD) : uint64(bound(w >> 8, 0, WAD));
        }
    }

    function _claimTimeout(uint256 id) internal {
        IInferenceMarket.JobView memory v = market.getJob(id);
        address party = address(0);
        if (v.status == IInferenceMarket.JobStatus.Running) {
            if (v.phase == IInferenceMarket.Phase.AwaitVerify) party = v.verifier;
            else if (v.cycle > 0) party = v.drafter;
        }
        uint256 slash = market.timeoutSlash();
        uint256 taken = 0;
        if (party != address(0)) {
            uint256 stake = registry.stakeOf(party);
            taken = slash < stake ? slash : stake;
        }
        if (v.cycle == 0) _predictSettlement(v); // no cycle verified: it settles at once
        vm.prank(v.requester);
        market.claimTimeout(id);
        if (taken != 0) ledger.marketCredit(BURN, taken); // burnt, never the requester's (v1.2)
        _count(party == address(0) ? "job:timeout" : "job:timeout-slash");
        _prune();
    }

    function _finalize(uint256 id) internal {
        _predictSettlement(market.getJob(id));
        vm.prank(actor(id % ACTORS));
        market.finalize(id);
        _count("job:finalized");
        _prune();
    }

    /// @dev The market's settlement as docs/contracts.md states it, computed here: the drafter gets its accepted
    /// emitted tokens × price, the verifier passes × price less the α fee (when the cycles count), the requester the
    /// rest of the escrow; a convicted party gets nothing. Counted cycles go to the α model, which predicts a breach.
    function _predictSettlement(IInferenceMarket.JobView memory v) internal {
        uint256 drafterPay = v.drafterForfeited ? 0 : v.drafterTokens * v.pricePerAcceptedToken;
        uint256 verifierPay = v.verifierForfeited ? 0 : uint256(v.cycle) * v.pricePerPass;
        uint256 refund = v.escrow - drafterPay - verifierPay;
        bool counts = v.alphaEligible && v.cycle != 0;
        uint256 fee = counts ? verifierPay * market.alphaFeeBps() / 10_000 : 0;
        ledger.marketCredit(v.drafter, drafterPay);
        ledger.marketCredit(v.verifier, verifierPay - fee);
        ledger.marketCredit(v.requester, refund);
        ledger.marketCredit(market.treasury(), fee);
        if (counts) {
            uint256 slashed = alpha.record(v.drafter, v.cycle, v.drafterTokens, v.rejected);
            ledger.marketCredit(market.treasury(), slashed);
            if (slashed != 0) _count("alpha:breach-slash");
        }
    }

    // ------------------------------------------------------------------ helpers

    function _root(uint256 id, uint32 cycle, uint32[] memory tokens, uint64[] memory q)
        internal
        pure
        returns (bytes32)
    {
        bytes32[] memory leaves = new bytes32[](tokens.length);
        for (uint256 i = 0; i < tokens.length; ++i) {
            leaves[i] = SpecMath.leaf(id, cycle, uint32(i), tokens[i], q[i]);
        }
        return SpecMath.root(leaves);
    }

    /// @dev The accept count the market must find: SpecMath's accept walk, cut at the first out-of-vocabulary proposal.
    function _accepted(bytes32 reveal, Record memory rec, uint64 salt) internal pure returns (uint32) {
        uint256 n = SpecMath.countAccepted(reveal, rec.root, rec.q, rec.p, salt);
        for (uint256 i = 0; i < n; ++i) {
            if (rec.tokens[i] >= VOCAB) return uint32(i);
        }
        return uint32(n);
    }

    /// @dev An active drafter and verifier, starting from `seed`'s choice; zeros when either role has none.
    function _parties(uint256 seed) internal view returns (address d, address v) {
        for (uint256 k = 0; k < DRAFTERS; ++k) {
            address c = drafterAt(seed % DRAFTERS + k);
            (uint256 live, uint256 capacity) = market.drafterLoad(c);
            // a requester (the client) never names a drafter at capacity: the market would refuse it (v1.2)
            if (registry.isActiveDrafter(c, DRAFT, TARGET) && live < capacity) {
                d = c;
                break;
            }
        }
        for (uint256 k = 0; k < VERIFIERS; ++k) {
            address c = verifierAt((seed >> 1) % VERIFIERS + k);
            if (registry.isActive(c, IStakingRegistry.Role.Verifier, TARGET)) {
                v = c;
                break;
            }
        }
        if (v == address(0)) d = address(0);
    }

    /// @dev The first open job from `seed` on in `status` (and `phase`, when `byPhase`); 0 when none.
    function _find(uint256 seed, IInferenceMarket.JobStatus status, bool byPhase, IInferenceMarket.Phase phase)
        internal
        view
        returns (uint256)
    {
        uint256 n = _open.length;
        for (uint256 k = 0; k < n; ++k) {
            uint256 id = _open[(seed % n + k) % n];
            if (market.jobStatus(id) != status) continue;
            if (!byPhase || market.getJob(id).phase == phase) return id;
        }
        return 0;
    }

    function _findFinalizable(uint256 seed) internal view returns (uint256) {
        uint256 n = _open.length;
        for (uint256 k = 0; k < n; ++k) {
            uint256 id = _open[(seed % n + k) % n];
            if (market.jobStatus(id) != IInferenceMarket.JobStatus.Finished) continue;
            if (market.getJob(id).openDisputes == 0) return id;
        }
        return 0;
    }

    /// @dev Nothing of the asked kind to do: take the job at `seed` one step on (accept, draft or verify it, or claim
    /// its timeout once late), or submit a fresh one, so that the call still does work.
    function _advanceAny(uint256 seed) internal {
        uint256 n = _open.length;
        for (uint256 k = 0; k < n; ++k) {
            uint256 id = _open[(seed % n + k) % n];
            IInferenceMarket.JobView memory v = market.getJob(id);
            bool running = v.status == IInferenceMarket.JobStatus.Running;
            if (!running && v.status != IInferenceMarket.JobStatus.Open) continue;
            _count("job:fallback-advance");
            if (block.timestamp > v.deadline) return _claimTimeout(id);
            if (!running) return _accept(id);
            if (v.phase == IInferenceMarket.Phase.AwaitDraft) return _commit(id, seed);
            return _verify(id, seed, 8);
        }
        _submitAny(seed);
    }

    /// @dev Submits a fresh job (or, at the cap of open jobs, ends one).
    function _submitAny(uint256 seed) internal {
        _count("job:fallback-submit");
        if (_open.length >= MAX_OPEN) return _endOne(seed);
        (address d, address v) = _parties(seed);
        if (d == address(0)) return _count("job:no-party");
        uint256 floor = market.alphaPriceFloor();
        _submit(
            Order(
                requester(seed),
                d,
                v,
                uint8(bound(seed >> 8, 1, 4)),
                uint16(bound(seed >> 16, 1, 10)),
                true,
                1e12,
                floor,
                0
            )
        );
    }

    /// @dev At the cap of open jobs: move one towards its end (finalize, or a timeout).
    function _endOne(uint256 seed) internal {
        uint256 id = _findFinalizable(seed);
        if (id != 0) {
            _warpPast(market.getJob(id).deadline);
            return _finalize(id);
        }
        id = _find(seed, IInferenceMarket.JobStatus.Running, false, IInferenceMarket.Phase.AwaitDraft);
        if (id == 0) id = _find(seed, IInferenceMarket.JobStatus.Open, false, IInferenceMarket.Phase.AwaitDraft);
        if (id == 0) return _count("job:all-disputed");
        _warpPast(market.getJob(id).deadline);
        _claimTimeout(id);
    }

    /// @dev Drops finalized jobs from the open list.
    function _prune() internal {
        uint256 i = 0;
        while (i < _open.length) {
            if (market.jobStatus(_open[i]) == IInferenceMarket.JobStatus.Finalized) {
                _open[i] = _open[_open.length - 1];
                _open.pop();
            } else {
                ++i;
            }
        }
    }
}
