// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeManager} from "../../contracts/DisputeManager.sol";
import {InferenceMarket} from "../../contracts/InferenceMarket.sol";
import {StakingRegistry} from "../../contracts/StakingRegistry.sol";
import {CampaignBase} from "./Base.sol";
import {Ledger} from "./Ledger.sol";

/// @dev What every handler holds: the deployed protocol and the shared ledger. A handler's entry points take raw
/// fuzzed words and `bound` them onto valid actions (a valid party, a valid deadline side, a valid commitment), so
/// that the calls do real work; a call the handler meant to be valid and that reverts is counted by forge as a revert.
abstract contract HandlerBase is CampaignBase {
    StakingRegistry internal immutable registry;
    InferenceMarket internal immutable market;
    DisputeManager internal immutable disputes;
    Ledger internal immutable ledger;

    constructor(StakingRegistry registry_, InferenceMarket market_, DisputeManager disputes_, Ledger ledger_) {
        registry = registry_;
        market = market_;
        disputes = disputes_;
        ledger = ledger_;
    }

    /// @dev The clock moves `dt` seconds and one block on before each action.
    function _tick(uint256 dt) internal {
        ledger.tick(dt);
    }

    function _warpPast(uint256 deadline) internal {
        ledger.warpTo(deadline + 1);
    }

    function _count(string memory name) internal {
        ledger.bump(bytes32(bytes(name)));
    }

    function _role(address who) internal view returns (StakingRegistry.Role) {
        return registry.accountOf(who).role;
    }
}
