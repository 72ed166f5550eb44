// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {InferenceMarket} from "../../contracts/InferenceMarket.sol";
import {StakingRegistry} from "../../contracts/StakingRegistry.sol";
import {CampaignBase} from "./Base.sol";

/// @title AlphaModel
/// @notice An independent model of every drafter's α window (docs/contracts.md "α window"): the claim α*, the open
/// bucket of M cycles and the ring of 8 closed buckets; a full window with α̂ < α* − τ predicts a breach slash of
/// min(stake × slashBps, 8 M × floor × feeBps) (never more than the stake), after which the window restarts.
contract AlphaModel is CampaignBase {
    uint256 internal constant BUCKETS = 8;

    struct Window {
        uint64 alphaStar;
        uint256 closed;
        uint256 next;
        uint256 openCycles;
        uint256 openAccepted;
        uint256 openRejected;
        uint256[BUCKETS] cycles;
        uint256[BUCKETS] accepted;
        uint256[BUCKETS] rejected;
    }

    InferenceMarket internal immutable market;
    StakingRegistry internal immutable registry;
    mapping(address => Window) internal _w;
    uint256 public breaches;
    uint256 public evaluations;

    constructor(InferenceMarket market_, StakingRegistry registry_) {
        market = market_;
        registry = registry_;
    }

    function setAlphaStar(address drafter, uint64 alphaStar) external {
        _w[drafter].alphaStar = alphaStar;
    }

    function alphaStarOf(address drafter) external view returns (uint64) {
        return _w[drafter].alphaStar;
    }

    /// @notice Whether lowering α* must be refused: the window holds cycles.
    function holdsCycles(address drafter) external view returns (bool) {
        Window storage w = _w[drafter];
        return w.closed != 0 || w.openCycles != 0;
    }

    /// @notice A settled job's counted cycles enter `drafter`'s window; returns the predicted slash (0: no breach).
    function record(address drafter, uint256 cycles, uint256 accepted, uint256 rejected) external returns (uint256) {
        Window storage w = _w[drafter];
        w.openCycles += cycles;
        w.openAccepted += accepted;
        w.openRejected += rejected;
        if (w.openCycles < market.alphaBucketCycles()) return 0;
        w.cycles[w.next] = w.openCycles;
        w.accepted[w.next] = w.openAccepted;
        w.rejected[w.next] = w.openRejected;
        w.next = (w.next + 1) % BUCKETS;
        if (w.closed < BUCKETS) w.closed += 1;
        (w.openCycles, w.openAccepted, w.openRejected) = (0, 0, 0);
        if (w.closed < BUCKETS) return 0;
        evaluations += 1;
        (, uint256 acc, uint256 rej) = _sums(w);
        uint256 tau = market.alphaTolerance();
        if (w.alphaStar <= tau || acc * WAD >= (w.alphaStar - tau) * (acc + rej)) return 0;
        breaches += 1;
        (w.closed, w.next) = (0, 0);
        uint256 stake = registry.stakeOf(drafter);
        uint256 amount = stake * market.alphaSlashBps() / 10_000;
        uint256 cap = BUCKETS * market.alphaBucketCycles() * market.alphaPriceFloor() * market.alphaFeeBps() / 10_000;
        if (amount > cap) amount = cap;
        return amount < stake ? amount : stake;
    }

    /// @notice The window as AlphaWindow.alphaWindowOf reports it.
    function alphaWindowOf(address drafter)
        external
        view
        returns (uint64 alphaStar, uint256 cycles, uint256 accepted, uint256 rejected, uint256 closed)
    {
        Window storage w = _w[drafter];
        (cycles, accepted, rejected) = _sums(w);
        return (w.alphaStar, cycles + w.openCycles, accepted + w.openAccepted, rejected + w.openRejected, w.closed);
    }

    function _sums(Window storage w) internal view returns (uint256 cycles, uint256 accepted, uint256 rejected) {
        for (uint256 i = 0; i < w.closed; ++i) {
            cycles += w.cycles[i];
            accepted += w.accepted[i];
            rejected += w.rejected[i];
        }
    }
}
