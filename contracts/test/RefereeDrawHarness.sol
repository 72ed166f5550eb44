// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {RefereeDraw} from "../lib/RefereeDraw.sol";

/// @title RefereeDrawHarness
/// @notice Exposes the internal `RefereeDraw` library as external calls (tests/test_dispute_libraries.py).
contract RefereeDrawHarness {
    /// @notice See {RefereeDraw-seed}.
    function seed(bytes32 seedBlockHash, uint256 disputeId) external pure returns (uint256) {
        return RefereeDraw.seed(seedBlockHash, disputeId);
    }

    /// @notice See {RefereeDraw-scanPlan}.
    function scanPlan(uint256 poolSize, uint256 panelSize) external pure returns (uint256 tries, bool fullScan) {
        return RefereeDraw.scanPlan(poolSize, panelSize);
    }

    /// @notice See {RefereeDraw-scanSlot}.
    function scanSlot(uint256 seed_, uint256 j, uint256 poolSize) external pure returns (uint256) {
        return RefereeDraw.scanSlot(seed_, j, poolSize);
    }

    /// @notice See {RefereeDraw-sampledSlot}.
    function sampledSlot(uint256 seed_, uint256 j, uint256 poolSize) external pure returns (uint256) {
        return RefereeDraw.sampledSlot(seed_, j, poolSize);
    }

    /// @notice The slots a whole draw over `poolSize` list slots tries for a panel of `panelSize`, in order, as
    /// the dispute manager's loop computes them (it stops early once its panel is full).
    function slots(uint256 seed_, uint256 poolSize, uint256 panelSize)
        external
        pure
        returns (uint256[] memory tried)
    {
        (uint256 tries, bool fullScan) = RefereeDraw.scanPlan(poolSize, panelSize);
        tried = new uint256[](tries);
        for (uint256 j = 0; j < tries; ++j) {
            tried[j] =
                fullScan ? RefereeDraw.scanSlot(seed_, j, poolSize) : RefereeDraw.sampledSlot(seed_, j, poolSize);
        }
    }
}
