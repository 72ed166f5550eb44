// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IStakingRegistry} from "../../contracts/interfaces/IStakingRegistry.sol";
import {DisputeManager} from "../../contracts/DisputeManager.sol";
import {InferenceMarket} from "../../contracts/InferenceMarket.sol";
import {StakingRegistry} from "../../contracts/StakingRegistry.sol";
import {AlphaModel} from "./AlphaModel.sol";
import {HandlerBase} from "./HandlerBase.sol";
import {JobHandler} from "./JobHandler.sol";
import {Ledger} from "./Ledger.sol";

/// @title AlphaHandler
/// @notice The α window: whole honest jobs at chosen acceptance rates fill the drafters' windows (so full windows
/// are evaluated, and some breach and are slashed to the treasury), and drafters raise or lower their claim α*
/// (lowering while the window holds cycles must revert).
contract AlphaHandler is HandlerBase {
    AlphaModel public immutable model;
    JobHandler public jobs;

    constructor(
        StakingRegistry registry_,
        InferenceMarket market_,
        DisputeManager disputes_,
        Ledger ledger_,
        AlphaModel model_
    ) HandlerBase(registry_, market_, disputes_, ledger_) {
        model = model_;
    }

    function setJobs(JobHandler jobs_) external {
        require(address(jobs) == address(0), "wired");
        jobs = jobs_;
    }

    /// @dev Two α-eligible jobs of one drafter run whole, accepting each proposal with probability `rate`/8 (two, so
    /// that a run fills 8-bucket windows often enough to evaluate them).
    function honestJob(uint256 seed, uint256 rate) external {
        _tick(bound(seed, 1, 30));
        rate = bound(rate, 0, 8);
        if (!jobs.runWhole(seed, rate)) return _count("alpha:no-party");
        jobs.runWhole(seed ^ (1 << 200), rate); // the same drafter: seed's low bits pick it
        _count("alpha:honest-job");
    }

    function raiseAlpha(uint256 seed, uint256 a) external {
        _tick(1);
        address d = _drafter(seed);
        if (d == address(0)) return _count("alpha:no-drafter");
        uint64 cur = model.alphaStarOf(d);
        uint64 next = uint64(bound(a, cur, WAD));
        vm.prank(d);
        registry.setAlphaStar(next);
        model.setAlphaStar(d, next);
        _count("alpha:raised");
    }

    /// @dev Lowers α*: refused while the window holds cycles (the handler checks it reverts), else done.
    function lowerAlpha(uint256 seed, uint256 a) external {
        _tick(1);
        address d = _drafter(seed);
        if (d == address(0)) return _count("alpha:no-drafter");
        uint64 cur = model.alphaStarOf(d);
        if (cur == 0) return _count("alpha:at-zero");
        uint64 next = uint64(bound(a, 0, cur - 1));
        if (model.holdsCycles(d)) {
            vm.prank(d);
            try registry.setAlphaStar(next) {
                ledger.flagAlphaLowered();
            } catch {}
            return _count("alpha:lower-refused");
        }
        vm.prank(d);
        registry.setAlphaStar(next);
        model.setAlphaStar(d, next);
        _count("alpha:lowered");
    }

    function _drafter(uint256 seed) internal view returns (address) {
        for (uint256 k = 0; k < DRAFTERS; ++k) {
            address d = drafterAt(seed % DRAFTERS + k);
            if (_role(d) == IStakingRegistry.Role.Drafter) return d;
        }
        return address(0);
    }
}
