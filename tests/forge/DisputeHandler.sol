// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Hashes} from "@openzeppelin/contracts/utils/cryptography/Hashes.sol";
import {IDisputeManager} from "../../contracts/interfaces/IDisputeManager.sol";
import {IInferenceMarket} from "../../contracts/interfaces/IInferenceMarket.sol";
import {SpecMath} from "../../contracts/lib/SpecMath.sol";
import {DisputeManager} from "../../contracts/DisputeManager.sol";
import {InferenceMarket} from "../../contracts/InferenceMarket.sol";
import {StakingRegistry} from "../../contracts/StakingRegistry.sol";
import {HandlerBase} from "./HandlerBase.sol";
import {JobHandler} from "./JobHandler.sol";
import {Ledger} from "./Ledger.sol";

/// @title DisputeHandler
/// @notice Disputes over verified cycles: open one (a real record preimage and draft-leaf Merkle proof, on a drafted
/// proposal or the outToken), draw the panel (block rolls; reschedules and escalations included), the accused's
/// answer or its timeout, referee commit / reveal (some referees never reveal), resolve, appeal (bond × 2^k, a fresh
/// panel) and withdraw credits. Even dispute ids lean towards AccusedFaithful votes, odd ones towards AccusedCheated.
contract DisputeHandler is HandlerBase {
    uint256 internal constant MAX_OPEN = 8;

    JobHandler public immutable jobs;
    uint256[] internal _open; // opened and not yet resolved
    mapping(uint256 => mapping(address => IDisputeManager.Verdict)) internal _votes;

    constructor(
        StakingRegistry registry_,
        InferenceMarket market_,
        DisputeManager disputes_,
        Ledger ledger_,
        JobHandler jobs_
    ) HandlerBase(registry_, market_, disputes_, ledger_) {
        jobs = jobs_;
    }

    // ------------------------------------------------------------------ fuzzed entry points

    function open(uint256 a, uint256 b, uint256 c) external {
        _tick(bound(a, 1, 30));
        if (_open.length >= MAX_OPEN || !_open_(a, b, c)) _progress(a);
    }

    function draw(uint256 a) external {
        _tick(1);
        uint256 id = _find(a, _DRAW);
        if (id == 0) return _progress(a);
        _draw(id);
    }

    function answer(uint256 a, uint256 b) external {
        _tick(bound(b, 1, 600));
        uint256 id = _find(a, _ANSWER);
        if (id == 0) return _progress(a);
        _answer(id, b);
    }

    function answerTimeout(uint256 a) external {
        _tick(1);
        uint256 id = _find(a, _ANSWER);
        if (id == 0) return _progress(a);
        _warpPast(disputes.getDispute(id).answerDeadline);
        _answerTimeout(id);
    }

    function commitVote(uint256 a, uint256 b) external {
        _tick(bound(b, 1, 300));
        uint256 id = _find(a, _VOTE);
        if (id == 0) return _progress(a);
        _vote(id, b);
    }

    function revealVote(uint256 a, uint256 b) external {
        _tick(bound(b, 1, 300));
        uint256 id = _find(a, _VOTE);
        if (id == 0) return _progress(a);
        _reveal(id, b);
    }

    function resolve(uint256 a) external {
        _tick(1);
        uint256 id = _find(a, _RESOLVE);
        if (id == 0) return _progress(a);
        _resolve(id);
    }

    function appeal(uint256 a, uint256 b) external {
        _tick(bound(b, 1, 60));
        uint256 id = _find(a, _APPEAL);
        if (id == 0) return _progress(a);
        _appeal(id, b);
    }

    function withdraw(uint256 a) external {
        _tick(1);
        for (uint256 k = 0; k < ACTORS; ++k) {
            address who = actor((a % ACTORS + k) % ACTORS);
            uint256 credit = disputes.credits(who);
            if (credit == 0) continue;
            uint256 before = who.balance;
            vm.prank(who);
            disputes.withdraw();
            uint256 amount = who.balance - before;
            if (amount != credit) ledger.flagPaidWrong();
            ledger.got(who, amount);
            vm.prank(who);
            try disputes.withdraw() {
                ledger.flagPaidTwice();
            } catch {}
            return _count("dispute:withdrawn");
        }
        _progress(a);
    }

    // ------------------------------------------------------------------ views for the test

    function openCount() external view returns (uint256) {
        return _open.length;
    }

    function openAt(uint256 i) external view returns (uint256) {
        return _open[i];
    }

    // ------------------------------------------------------------------ actions

    /// @dev A disputable position: a verified cycle of an unfinalized job, its outToken (index K, TargetReplay) or a
    /// proposal up to the first rejection (either kind), free, with referees staked for the model.
    struct Position {
        uint256 jobId;
        uint32 cycle;
        uint32 index;
        IDisputeManager.Kind kind;
    }

    /// @dev Opens a dispute on a position picked from the seeds; false when no position can be disputed.
    function _open_(uint256 a, uint256 b, uint256 c) internal returns (bool) {
        uint256 n = jobs.openCount();
        for (uint256 k = 0; k < n; ++k) {
            (bool ok, Position memory pos) = _position(jobs.openAt((a % n + k) % n), b, c);
            if (ok) {
                _openAt(pos, requester(c >> 16));
                return true;
            }
        }
        return false;
    }

    function _position(uint256 jobId, uint256 b, uint256 c) internal view returns (bool, Position memory pos) {
        IInferenceMarket.JobView memory v = market.getJob(jobId);
        bool live = v.status == IInferenceMarket.JobStatus.Running || v.status == IInferenceMarket.JobStatus.Finished;
        if (!live || v.cycle == 0) return (false, pos);
        pos.jobId = jobId;
        pos.cycle = uint32(b % v.cycle);
        JobHandler.Record memory rec = jobs.recordOf(jobId, pos.cycle);
        uint256 kk = rec.p.length;
        uint256 mode = c % 3;
        pos.index = mode == 0 ? uint32(kk) : uint32(bound(c >> 8, 0, rec.accepted < kk ? rec.accepted : kk - 1));
        pos.kind = mode == 1 ? IDisputeManager.Kind.DraftReplay : IDisputeManager.Kind.TargetReplay;
        if (disputes.positionState(jobId, pos.cycle, pos.index, pos.kind) != IDisputeManager.PositionState.Free) {
            return (false, pos);
        }
        bytes32 model = pos.kind == IDisputeManager.Kind.DraftReplay ? DRAFT : TARGET;
        return (registry.refereeStakeTotal(model) != 0, pos);
    }

    function _openAt(Position memory pos, address challenger) internal {
        JobHandler.Record memory rec = jobs.recordOf(pos.jobId, pos.cycle);
        IDisputeManager.LeafProof memory leaf;
        bool outToken = pos.index == rec.p.length;
        if (!outToken) {
            leaf.token = rec.tokens[pos.index];
            leaf.q = rec.q[pos.index];
            leaf.proof = _proof(pos.jobId, pos.cycle, rec, pos.index);
        }
        IDisputeManager.CycleRecordPreimage memory pre =
            IDisputeManager.CycleRecordPreimage(rec.root, rec.p, rec.accepted, rec.outToken);
        uint256 bond = disputes.bond();
        vm.prank(challenger);
        uint256 id = disputes.openDispute{value: bond}(pos.jobId, pos.cycle, pos.index, pos.kind, pre, leaf);
        ledger.paid(challenger, bond);
        _open.push(id);
        _count(outToken ? "dispute:opened-outtoken" : "dispute:opened-proposal");
    }

    function _draw(uint256 id) internal {
        IDisputeManager.Dispute memory d = disputes.getDispute(id);
        if (d.drawBlock == 0) ledger.warpTo(d.drawAfter);
        disputes.drawReferees(id);
        d = disputes.getDispute(id);
        if (d.status == IDisputeManager.Status.Resolved) _count("dispute:void-unrefereed");
        else if (d.drawn != 0) _count(d.round == 0 ? "dispute:panel-drawn" : "dispute:appeal-panel-drawn");
        else if (d.drawBlock == 0) _count("dispute:escalated");
        else _count("dispute:draw-scheduled");
        _prune();
    }

    function _answer(uint256 id, uint256 b) internal {
        IDisputeManager.Dispute memory d = disputes.getDispute(id);
        if (block.timestamp > d.answerDeadline) return _answerTimeout(id);
        uint32[] memory top = new uint32[](1);
        uint64[] memory probs = new uint64[](1);
        top[0] = uint32(b % VOCAB);
        probs[0] = uint64(bound(b >> 8, 0, WAD));
        vm.prank(d.accused);
        disputes.answer(id, uint64(bound(b >> 72, 0, WAD)), top, probs);
        _count("dispute:answered");
    }

    function _answerTimeout(uint256 id) internal {
        disputes.claimAnswerTimeout(id);
        _count("dispute:accused-silent");
        _prune();
    }

    /// @dev The next drawn referee without a commitment commits (before the commit deadline), else a reveal.
    function _vote(uint256 id, uint256 b) internal {
        IDisputeManager.Dispute memory d = disputes.getDispute(id);
        if (block.timestamp > d.commitDeadline) return _reveal(id, b);
        address[] memory panel = disputes.refereesOf(id);
        for (uint256 k = 0; k < panel.length; ++k) {
            address ref = panel[(b % panel.length + k) % panel.length];
            if (disputes.ballotOf(id, ref).commitment != bytes32(0)) continue;
            // mostly the side the dispute id leans to; one in five the other
            return _commit(id, ref, (id % 2 == 1) != ((b >> 8) % 5 == 0));
        }
        _reveal(id, b);
    }

    function _commit(uint256 id, address ref, bool cheated) internal {
        IDisputeManager.Verdict verdict =
            cheated ? IDisputeManager.Verdict.AccusedCheated : IDisputeManager.Verdict.AccusedFaithful;
        _votes[id][ref] = verdict;
        bytes32 commitment = disputes.voteCommitment(id, ref, verdict, _salt(id, ref));
        vm.prank(ref);
        disputes.commitVote(id, commitment);
        _count("dispute:vote-committed");
    }

    /// @dev A committed referee reveals (waiting for the commit deadline when not everyone committed), else resolve.
    function _reveal(uint256 id, uint256 b) internal {
        IDisputeManager.Dispute memory d = disputes.getDispute(id);
        address[] memory panel = disputes.refereesOf(id);
        for (uint256 k = 0; k < panel.length; ++k) {
            address ref = panel[(b % panel.length + k) % panel.length];
            IDisputeManager.Ballot memory ballot = disputes.ballotOf(id, ref);
            if (ballot.commitment == bytes32(0) || ballot.verdict != IDisputeManager.Verdict.None) continue;
            if (block.timestamp <= d.commitDeadline && d.commits < d.drawn) _warpPast(d.commitDeadline);
            if (block.timestamp > d.revealDeadline) break;
            vm.prank(ref);
            disputes.revealVote(id, _votes[id][ref], _salt(id, ref));
            return _count("dispute:vote-revealed");
        }
        _resolve(id);
    }

    /// @dev Resolves a voted round (waiting out the vote) or an appealable one (waiting out the appeal period).
    function _resolve(uint256 id) internal {
        IDisputeManager.Dispute memory d = disputes.getDispute(id);
        if (d.status == IDisputeManager.Status.Appealable) _warpPast(d.appealDeadline);
        else if (!disputes.canResolve(id)) _warpPast(d.revealDeadline);
        disputes.resolve(id);
        d = disputes.getDispute(id);
        if (d.status == IDisputeManager.Status.Appealable) {
            _count("dispute:round-decided");
        } else if (d.outcome == IDisputeManager.Outcome.AccusedLost) {
            _count("dispute:accused-lost");
        } else if (d.outcome == IDisputeManager.Outcome.ChallengerLost) {
            _count("dispute:challenger-lost");
        } else {
            _count("dispute:void");
        }
        _prune();
    }

    /// @dev The challenger, the accused or a requester appeals with bond × 2^(round + 1).
    function _appeal(uint256 id, uint256 b) internal {
        IDisputeManager.Dispute memory d = disputes.getDispute(id);
        if (block.timestamp > d.appealDeadline) return _resolve(id);
        uint256 pick = b % 3;
        address who = pick == 0 ? d.challenger : pick == 1 ? d.accused : requester(b >> 8);
        uint256 value = disputes.appealBond(d.round + 1);
        vm.prank(who);
        disputes.appeal{value: value}(id);
        ledger.paid(who, value);
        _count("dispute:appealed");
    }

    /// @dev Nothing of the asked kind: advance the dispute at `seed` by whatever its state allows, or open one.
    function _progress(uint256 seed) internal {
        uint256 n = _open.length;
        if (n == 0) {
            if (_open_(seed, seed >> 32, seed >> 64)) return;
            // no verified cycle to dispute: run a fresh job a few cycles, then dispute one of them
            if (jobs.runCycles(seed) != 0 && _open_(seed, seed >> 32, seed >> 64)) return;
            return _count("dispute:nothing-to-do");
        }
        uint256 id = _open[seed % n];
        IDisputeManager.Dispute memory d = disputes.getDispute(id);
        if (
            d.status == IDisputeManager.Status.Drawing
                || (d.status == IDisputeManager.Status.AwaitingAnswer && d.drawn == 0)
        ) {
            _draw(id);
        } else if (d.status == IDisputeManager.Status.AwaitingAnswer) {
            _answer(id, seed);
        } else if (d.status == IDisputeManager.Status.Voting) {
            _vote(id, seed);
        } else {
            _resolve(id);
        }
    }

    // ------------------------------------------------------------------ helpers

    uint256 internal constant _DRAW = 0;
    uint256 internal constant _ANSWER = 1;
    uint256 internal constant _VOTE = 2;
    uint256 internal constant _RESOLVE = 3;
    uint256 internal constant _APPEAL = 4;

    /// @dev The first open dispute from `seed` on that the action `what` applies to; 0 when none.
    function _find(uint256 seed, uint256 what) internal view returns (uint256) {
        uint256 n = _open.length;
        for (uint256 k = 0; k < n; ++k) {
            uint256 id = _open[(seed % n + k) % n];
            IDisputeManager.Dispute memory d = disputes.getDispute(id);
            IDisputeManager.Status s = d.status;
            bool awaiting = s == IDisputeManager.Status.AwaitingAnswer;
            if (what == _DRAW && (s == IDisputeManager.Status.Drawing || (awaiting && d.drawn == 0))) return id;
            if (what == _ANSWER && awaiting && d.drawn != 0) return id;
            if (what == _VOTE && s == IDisputeManager.Status.Voting) return id;
            if (what == _RESOLVE && (s == IDisputeManager.Status.Voting || s == IDisputeManager.Status.Appealable)) {
                return id;
            }
            if (what == _APPEAL && s == IDisputeManager.Status.Appealable && block.timestamp <= d.appealDeadline) {
                return id;
            }
        }
        return 0;
    }

    function _salt(uint256 id, address ref) internal pure returns (bytes32) {
        return keccak256(abi.encode("vote salt", id, ref));
    }

    /// @dev The Merkle proof of proposal `index` in the cycle's draft tree (SpecMath's tree: sorted pairs, an odd
    /// last node carried up), checked by the dispute manager with OpenZeppelin's MerkleProof.
    function _proof(uint256 jobId, uint32 cycle, JobHandler.Record memory rec, uint256 index)
        internal
        pure
        returns (bytes32[] memory proof)
    {
        uint256 width = rec.tokens.length;
        bytes32[] memory level = new bytes32[](width);
        for (uint256 i = 0; i < width; ++i) {
            level[i] = SpecMath.leaf(jobId, cycle, uint32(i), rec.tokens[i], rec.q[i]);
        }
        proof = new bytes32[](8);
        uint256 len = 0;
        while (width > 1) {
            uint256 sibling = index ^ 1;
            if (sibling < width) proof[len++] = level[sibling];
            uint256 half = width / 2;
            for (uint256 i = 0; i < half; ++i) {
                level[i] = Hashes.commutativeKeccak256(level[2 * i], level[2 * i + 1]);
            }
            if (width % 2 == 1) level[half] = level[width - 1];
            width -= half;
            index /= 2;
        }
        assembly ("memory-safe") {
            mstore(proof, len)
        }
    }

    /// @dev Drops resolved disputes from the open list.
    function _prune() internal {
        uint256 i = 0;
        while (i < _open.length) {
            if (disputes.getDispute(_open[i]).status == IDisputeManager.Status.Resolved) {
                _open[i] = _open[_open.length - 1];
                _open.pop();
            } else {
                ++i;
            }
        }
    }
}
