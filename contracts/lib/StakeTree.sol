// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title StakeTree
/// @notice A Fenwick (binary indexed) tree of non-negative weights over slots 1..size: point updates, prefix sums
/// and "which slot holds point t of the cumulative weight" in O(log size), every loop bounded by MAX_SLOTS. The
/// staking registry keeps one per model id over its referees' active stake, so that the dispute manager draws a
/// referee with probability proportional to its stake (docs/disputes.md, "Referee draw").
/// @dev Node i holds the sum of the weights of slots (i - lowbit(i), i]. A new slot is appended with its node
/// initialised from the existing nodes (O(log size) reads, one write), so the tree grows without a fixed capacity.
library StakeTree {
    /// @notice Most slots a tree may hold (so every loop runs at most 17 times).
    uint256 internal constant MAX_SLOTS = 1 << 16;

    /// @notice A tree: `size` slots, their `total` weight and the Fenwick nodes (1-based).
    struct Tree {
        uint256 size;
        uint256 total;
        mapping(uint256 index => uint256) node;
    }

    /// @notice The tree already holds MAX_SLOTS slots.
    error StakeTreeFull();
    /// @notice A slot index outside 1..size.
    error StakeTreeBadSlot(uint256 index, uint256 size);
    /// @notice A point at or beyond the total weight.
    error StakeTreePointOutOfRange(uint256 point, uint256 total);

    /// @notice Appends a slot of weight `weight`; returns its index (1-based).
    function push(Tree storage t, uint256 weight) internal returns (uint256 index) {
        index = t.size + 1;
        if (index > MAX_SLOTS) revert StakeTreeFull();
        uint256 value = weight;
        uint256 stop = index - (index & (~index + 1));
        // node[index] covers (stop, index]: the new weight plus the slots (stop, index - 1], which the Fenwick walk
        // down from index - 1 reaches exactly (≤ 16 steps)
        for (uint256 j = index - 1; j > stop; j -= j & (~j + 1)) {
            value += t.node[j];
        }
        t.node[index] = value;
        t.size = index;
        t.total += weight;
    }

    /// @notice Adds `delta` to the weight of slot `index`.
    function add(Tree storage t, uint256 index, uint256 delta) internal {
        uint256 size = t.size;
        if (index == 0 || index > size) revert StakeTreeBadSlot(index, size);
        for (uint256 i = index; i <= size; i += i & (~i + 1)) {
            t.node[i] += delta;
        }
        t.total += delta;
    }

    /// @notice Takes `delta` off the weight of slot `index` (reverts on underflow: it never exceeds the weight).
    function sub(Tree storage t, uint256 index, uint256 delta) internal {
        uint256 size = t.size;
        if (index == 0 || index > size) revert StakeTreeBadSlot(index, size);
        for (uint256 i = index; i <= size; i += i & (~i + 1)) {
            t.node[i] -= delta;
        }
        t.total -= delta;
    }

    /// @notice The summed weight of slots 1..index (index ≤ size).
    function prefix(Tree storage t, uint256 index) internal view returns (uint256 sum) {
        uint256 size = t.size;
        if (index > size) revert StakeTreeBadSlot(index, size);
        for (uint256 i = index; i > 0; i -= i & (~i + 1)) {
            sum += t.node[i];
        }
    }

    /// @notice The slot holding point `point` of the cumulative weight: the smallest index with
    /// prefix(index) > point, for 0 ≤ point < total. Slot i is hit by exactly weight(i) of the points 0..total-1.
    function find(Tree storage t, uint256 point) internal view returns (uint256 index) {
        uint256 total = t.total;
        if (point >= total) revert StakeTreePointOutOfRange(point, total);
        uint256 size = t.size;
        uint256 step = 1;
        while (step <= size >> 1) step <<= 1; // the largest power of two ≤ size (≤ 16 doublings)
        uint256 pos = 0;
        uint256 rest = point;
        for (; step != 0; step >>= 1) {
            uint256 next = pos + step;
            if (next <= size) {
                uint256 value = t.node[next];
                if (value <= rest) {
                    pos = next;
                    rest -= value;
                }
            }
        }
        return pos + 1;
    }
}
