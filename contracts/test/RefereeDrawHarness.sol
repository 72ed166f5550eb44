// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {RefereeDraw} from "../lib/RefereeDraw.sol";

/// @title RefereeDrawHarness
/// @notice Exposes the RefereeDraw library for tests (tests/test_dispute_libraries.py).
contract RefereeDrawHarness {
    /// @notice See {RefereeDraw-seed}.
    function seed(bytes32 seedBlockHash, uint256 disputeId, uint256 round) external pure returns (uint256) {
        return RefereeDraw.seed(seedBlockHash, disputeId, round);
    }

    /// @notice See {RefereeDraw-tries}.
    function tries(uint256 panelSize) external pure returns (uint256) {
        return RefereeDraw.tries(panelSize);
    }

    /// @notice See {RefereeDraw-point}.
    function point(uint256 seed_, uint256 j, uint256 total) external pure returns (uint256) {
        return RefereeDraw.point(seed_, j, total);
    }

    /// @notice See {RefereeDraw-panelSize}.
    function panelSize(uint256 firstPanel, uint256 round) external pure returns (uint256) {
        return RefereeDraw.panelSize(firstPanel, round);
    }
}
