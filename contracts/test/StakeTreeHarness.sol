// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {StakeTree} from "../lib/StakeTree.sol";

/// @title StakeTreeHarness
/// @notice Exposes one StakeTree for tests (tests/test_stake_tree.py).
contract StakeTreeHarness {
    using StakeTree for StakeTree.Tree;

    StakeTree.Tree private _tree;

    /// @notice See {StakeTree-push}.
    function push(uint256 weight) external returns (uint256) {
        return _tree.push(weight);
    }

    /// @notice See {StakeTree-add}.
    function add(uint256 index, uint256 delta) external {
        _tree.add(index, delta);
    }

    /// @notice See {StakeTree-sub}.
    function sub(uint256 index, uint256 delta) external {
        _tree.sub(index, delta);
    }

    /// @notice See {StakeTree-prefix}.
    function prefix(uint256 index) external view returns (uint256) {
        return _tree.prefix(index);
    }

    /// @notice See {StakeTree-find}.
    function find(uint256 point) external view returns (uint256) {
        return _tree.find(point);
    }

    /// @notice See {StakeTree-findAt}.
    function findAt(uint256 point, uint256 atBlock) external view returns (uint256) {
        return _tree.findAt(point, atBlock);
    }

    /// @notice See {StakeTree-totalWeightAt}.
    function totalAt(uint256 atBlock) external view returns (uint256) {
        return _tree.totalWeightAt(atBlock);
    }

    /// @notice Slots and total weight.
    function sizeAndTotal() external view returns (uint256, uint256) {
        return (_tree.slotCount(), _tree.totalWeight());
    }
}
