// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Checkpoints} from "@openzeppelin/contracts/utils/structs/Checkpoints.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

/// @title StakeTree
/// @notice A Fenwick (binary indexed) tree of non-negative weights over slots 1..size, with its history: point
/// updates, prefix sums and "which slot holds point t of the cumulative weight" in O(log size), now or as the tree
/// stood at the end of any past block, every loop bounded by MAX_SLOTS. The staking registry keeps one per model
/// id over its referees' active stake, and the dispute manager draws a referee with probability proportional to
/// its stake as the tree stood before the draw's seed block, so nothing done after the seed moves the panel
/// (docs/disputes.md, "Referee draw").
/// @dev Node i holds the sum of the weights of slots (i - lowbit(i), i]. Every node, the size and the total are
/// OpenZeppelin `Checkpoints.Trace208` keyed by block number: a write appends a checkpoint (or overwrites the one of
/// its own block), a past read is a binary search over the recent checkpoints. A new slot is appended with its node
/// initialised from the existing nodes (O(log size) reads, one write), so the tree grows without a fixed capacity.
library StakeTree {
    using Checkpoints for Checkpoints.Trace208;

    /// @notice Most slots a tree may hold (so every loop runs at most 17 times).
    uint256 internal constant MAX_SLOTS = 1 << 16;

    /// @notice A tree: `size` slots, their `total` weight and the Fenwick nodes (1-based), each with its history.
    struct Tree {
        Checkpoints.Trace208 size;
        Checkpoints.Trace208 total;
        mapping(uint256 index => Checkpoints.Trace208) node;
    }

    /// @notice The tree already holds MAX_SLOTS slots.
    error StakeTreeFull();
    /// @notice A slot index outside 1..size.
    error StakeTreeBadSlot(uint256 index, uint256 size);
    /// @notice A point at or beyond the total weight.
    error StakeTreePointOutOfRange(uint256 point, uint256 total);
    /// @notice A read "as of" a block that has not ended yet (the current block or later).
    error StakeTreeFutureLookup(uint256 atBlock, uint256 currentBlock);

    /// @notice Appends a slot of weight `weight`; returns its index (1-based).
    function push(Tree storage t, uint256 weight) internal returns (uint256 index) {
        index = t.size.latest() + 1;
        if (index > MAX_SLOTS) revert StakeTreeFull();
        uint256 value = weight;
        uint256 stop = index - (index & (~index + 1));
        // node[index] covers (stop, index]: the new weight plus the slots (stop, index - 1], which the Fenwick walk
        // down from index - 1 reaches exactly (≤ 16 steps)
        for (uint256 j = index - 1; j > stop; j -= j & (~j + 1)) {
            value += t.node[j].latest();
        }
        _write(t.node[index], value);
        _write(t.size, index);
        _write(t.total, t.total.latest() + weight);
    }

    /// @notice Adds `delta` to the weight of slot `index`.
    function add(Tree storage t, uint256 index, uint256 delta) internal {
        uint256 size = t.size.latest();
        if (index == 0 || index > size) revert StakeTreeBadSlot(index, size);
        for (uint256 i = index; i <= size; i += i & (~i + 1)) {
            _write(t.node[i], t.node[i].latest() + delta);
        }
        _write(t.total, t.total.latest() + delta);
    }

    /// @notice Takes `delta` off the weight of slot `index` (reverts on underflow: it never exceeds the weight).
    function sub(Tree storage t, uint256 index, uint256 delta) internal {
        uint256 size = t.size.latest();
        if (index == 0 || index > size) revert StakeTreeBadSlot(index, size);
        for (uint256 i = index; i <= size; i += i & (~i + 1)) {
            _write(t.node[i], t.node[i].latest() - delta);
        }
        _write(t.total, t.total.latest() - delta);
    }

    /// @notice The number of slots now.
    function slotCount(Tree storage t) internal view returns (uint256) {
        return t.size.latest();
    }

    /// @notice The total weight now.
    function totalWeight(Tree storage t) internal view returns (uint256) {
        return t.total.latest();
    }

    /// @notice The total weight as it stood at the end of block `atBlock` (< the current block).
    function totalWeightAt(Tree storage t, uint256 atBlock) internal view returns (uint256) {
        return t.total.upperLookupRecent(_pastKey(atBlock));
    }

    /// @notice The summed weight of slots 1..index (index ≤ size) now.
    function prefix(Tree storage t, uint256 index) internal view returns (uint256 sum) {
        uint256 size_ = t.size.latest();
        if (index > size_) revert StakeTreeBadSlot(index, size_);
        for (uint256 i = index; i > 0; i -= i & (~i + 1)) {
            sum += t.node[i].latest();
        }
    }

    /// @notice The slot holding point `point` of the cumulative weight now: the smallest index with
    /// prefix(index) > point, for 0 ≤ point < total. Slot i is hit by exactly weight(i) of the points 0..total-1.
    function find(Tree storage t, uint256 point) internal view returns (uint256) {
        return _find(t, point, t.size.latest(), t.total.latest(), type(uint48).max);
    }

    /// @notice `find` on the tree as it stood at the end of block `atBlock` (< the current block).
    function findAt(Tree storage t, uint256 point, uint256 atBlock) internal view returns (uint256) {
        uint48 key = _pastKey(atBlock);
        return _find(t, point, t.size.upperLookupRecent(key), t.total.upperLookupRecent(key), key);
    }

    /// @dev The Fenwick descent over the nodes as of `key` (type(uint48).max: the latest values).
    function _find(Tree storage t, uint256 point, uint256 size_, uint256 total_, uint48 key)
        private
        view
        returns (uint256)
    {
        if (point >= total_) revert StakeTreePointOutOfRange(point, total_);
        uint256 step = 1;
        while (step <= size_ >> 1) step <<= 1; // the largest power of two ≤ size (≤ 16 doublings)
        uint256 pos = 0;
        uint256 rest = point;
        for (; step != 0; step >>= 1) {
            uint256 next = pos + step;
            if (next <= size_) {
                uint256 value = key == type(uint48).max ? t.node[next].latest() : t.node[next].upperLookupRecent(key);
                if (value <= rest) {
                    pos = next;
                    rest -= value;
                }
            }
        }
        return pos + 1;
    }

    function _write(Checkpoints.Trace208 storage trace, uint256 value) private {
        // slither-disable-next-line unused-return (the previous and new values are not needed)
        trace.push(SafeCast.toUint48(block.number), SafeCast.toUint208(value));
    }

    function _pastKey(uint256 atBlock) private view returns (uint48) {
        if (atBlock >= block.number) revert StakeTreeFutureLookup(atBlock, block.number);
        return SafeCast.toUint48(atBlock);
    }
}
