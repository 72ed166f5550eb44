// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IStakingRegistry} from "../../contracts/interfaces/IStakingRegistry.sol";
import {DisputeManager} from "../../contracts/DisputeManager.sol";
import {InferenceMarket} from "../../contracts/InferenceMarket.sol";
import {StakingRegistry} from "../../contracts/StakingRegistry.sol";
import {AlphaModel} from "./AlphaModel.sol";
import {HandlerBase} from "./HandlerBase.sol";
import {Ledger} from "./Ledger.sol";

/// @title RegistryHandler
/// @notice Stakes: register (each address in its fixed role), add stake, request an unbond, and withdraw after the
/// unbonding period, which must revert while any job or dispute locks the stake. Every deposit and payout is
/// measured into the ledger.
contract RegistryHandler is HandlerBase {
    AlphaModel public immutable alpha;

    constructor(
        StakingRegistry registry_,
        InferenceMarket market_,
        DisputeManager disputes_,
        Ledger ledger_,
        AlphaModel alpha_
    ) HandlerBase(registry_, market_, disputes_, ledger_) {
        alpha = alpha_;
    }

    /// @dev Registers `who` in its role with `stake` (called by the test's setUp too).
    function registerAs(address who, uint256 stake) public {
        IStakingRegistry.Role role = roleOf(who);
        bytes32[] memory models;
        uint256[] memory vocab;
        uint64 alphaStar = alpha.alphaStarOf(who); // (before the prank: it applies to the next call)
        if (role == IStakingRegistry.Role.Drafter) {
            vm.prank(who);
            registry.registerDrafter{value: stake}(DRAFT, TARGET, alphaStar, VOCAB);
        } else {
            uint256 n = role == IStakingRegistry.Role.Verifier ? 1 : 2; // a referee replays both models
            models = new bytes32[](n);
            vocab = new uint256[](n);
            (models[0], vocab[0]) = (TARGET, VOCAB);
            if (n == 2) (models[1], vocab[1]) = (DRAFT, VOCAB);
            vm.prank(who);
            registry.register{value: stake}(role, models, vocab);
        }
        ledger.paid(who, stake);
        ledger.deposit(who, stake);
    }

    function register(uint256 a, uint256 b) external {
        _tick(bound(a, 1, 60));
        for (uint256 k = 0; k < ACTORS - REQUESTERS; ++k) {
            address who = actor(REQUESTERS + (a % (ACTORS - REQUESTERS) + k) % (ACTORS - REQUESTERS));
            if (_role(who) != IStakingRegistry.Role.None) continue;
            registerAs(who, bound(b, registry.minStake(roleOf(who)), registry.minStake(roleOf(who)) + 3 ether));
            return _count("registry:registered");
        }
        _addStake(a, b);
    }

    function addStake(uint256 a, uint256 b) external {
        _tick(bound(a, 1, 60));
        _addStake(a, b);
    }

    /// @dev Starts an unbond, keeping at least one other active drafter / verifier and two other active referees.
    function requestUnbond(uint256 a) external {
        _tick(bound(a, 1, 60));
        for (uint256 k = 0; k < ACTORS - REQUESTERS; ++k) {
            address who = actor(REQUESTERS + (a % (ACTORS - REQUESTERS) + k) % (ACTORS - REQUESTERS));
            StakingRegistry.Account memory acct = registry.accountOf(who);
            if (acct.role == IStakingRegistry.Role.None || acct.unbondingSince != 0) continue;
            if (_activeOthers(who) < (acct.role == IStakingRegistry.Role.Referee ? 2 : 1)) continue;
            vm.prank(who);
            registry.requestUnbond();
            return _count("registry:unbond-requested");
        }
        _addStake(a, a >> 64);
    }

    /// @dev After the unbonding period: pays the whole stake when nothing locks it; with a lock it must revert.
    function withdrawUnbonded(uint256 a) external {
        _tick(1);
        for (uint256 k = 0; k < ACTORS - REQUESTERS; ++k) {
            address who = actor(REQUESTERS + (a % (ACTORS - REQUESTERS) + k) % (ACTORS - REQUESTERS));
            StakingRegistry.Account memory acct = registry.accountOf(who);
            if (acct.unbondingSince == 0) continue;
            ledger.warpTo(acct.unbondingSince + registry.unbondingPeriod());
            if (acct.locks != 0) {
                vm.prank(who);
                try registry.withdrawUnbonded() {
                    ledger.flagLockedStakeLeft();
                } catch {}
                return _count("registry:locked-refused");
            }
            uint256 before = who.balance;
            vm.prank(who);
            registry.withdrawUnbonded();
            uint256 amount = who.balance - before;
            if (amount != acct.stake) ledger.flagPaidWrong();
            ledger.got(who, amount);
            ledger.resetDeposit(who);
            return _count("registry:unbonded");
        }
        _addStake(a, a >> 64);
    }

    function _addStake(uint256 a, uint256 b) internal {
        for (uint256 k = 0; k < ACTORS - REQUESTERS; ++k) {
            address who = actor(REQUESTERS + (a % (ACTORS - REQUESTERS) + k) % (ACTORS - REQUESTERS));
            StakingRegistry.Account memory acct = registry.accountOf(who);
            if (acct.role == IStakingRegistry.Role.None || acct.unbondingSince != 0) continue;
            uint256 amount = bound(b, 1, 2 ether);
            vm.prank(who);
            registry.addStake{value: amount}();
            ledger.paid(who, amount);
            ledger.deposit(who, amount);
            return _count("registry:stake-added");
        }
        _count("registry:nobody-staked");
    }

    /// @dev Active (registered, not unbonding) accounts of `who`'s role other than `who`.
    function _activeOthers(address who) internal view returns (uint256 n) {
        IStakingRegistry.Role role = roleOf(who);
        for (uint256 i = REQUESTERS; i < ACTORS; ++i) {
            address other = actor(i);
            if (other == who) continue;
            StakingRegistry.Account memory acct = registry.accountOf(other);
            if (acct.role == role && acct.unbondingSince == 0) ++n;
        }
    }

    function roleOf(address who) public pure returns (IStakingRegistry.Role) {
        uint256 i = uint160(who) - uint160(actor(0));
        if (i < REQUESTERS) return IStakingRegistry.Role.None;
        if (i < REQUESTERS + DRAFTERS) return IStakingRegistry.Role.Drafter;
        if (i < REQUESTERS + DRAFTERS + VERIFIERS) return IStakingRegistry.Role.Verifier;
        return IStakingRegistry.Role.Referee;
    }
}
