// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title RefereeDraw
/// @notice The selection math of the dispute manager's referee draw (docs/disputes.md, "Referee draw"): the seed,
/// how many list slots a draw may look at, and which slot it looks at on each try. Which candidate in a slot is
/// taken (not a party, not drawn yet, active since the seed block) needs the registry and stays in the manager.
/// @dev All functions are `internal pure`: they are inlined into the manager, so the draw costs what it did.
library RefereeDraw {
    /// @notice A draw looks at no more than 4R + SCAN_EXTRA list slots (R = the panel size).
    uint256 internal constant SCAN_EXTRA = 8;

    /// @notice The draw's seed: keccak256(abi.encode(blockhash(drawBlock), disputeId)). The dispute id makes two
    /// disputes opened in one block draw independently.
    /// @param seedBlockHash The hash of the dispute's seed block.
    /// @param disputeId The dispute.
    /// @return The seed.
    function seed(bytes32 seedBlockHash, uint256 disputeId) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(seedBlockHash, disputeId)));
    }

    /// @notice How many slots a draw over the first `poolSize` slots of a referee list tries for a panel of
    /// `panelSize`: all of them when there are at most 4R + SCAN_EXTRA (a full scan, which finds every eligible
    /// referee), else 4R + SCAN_EXTRA sampled ones. The caller stops early once the panel is full.
    /// @param poolSize Referees listed for the model when the dispute opened.
    /// @param panelSize R, the referees wanted.
    /// @return tries Slots to try.
    /// @return fullScan Whether those are all `poolSize` slots, in order from a random start.
    function scanPlan(uint256 poolSize, uint256 panelSize) internal pure returns (uint256 tries, bool fullScan) {
        tries = 4 * panelSize + SCAN_EXTRA;
        fullScan = poolSize <= tries;
        if (fullScan) tries = poolSize;
    }

    /// @notice The list slot of try `j` of a full scan: (seed % poolSize + j) % poolSize, every slot once for
    /// j = 0..poolSize-1, from a random start.
    /// @param seed_ The draw's seed.
    /// @param j The try, 0-based.
    /// @param poolSize Referees listed for the model when the dispute opened; > 0 (0 yields slot 0).
    /// @return slot The slot, below `poolSize`.
    function scanSlot(uint256 seed_, uint256 j, uint256 poolSize) internal pure returns (uint256 slot) {
        // Assembly: without Solidity's division-by-zero check the function is one basic block, which the
        // optimizer inlines into the draw loop. poolSize > 0 (a dispute opens only with a listed referee); the
        // sum cannot overflow (both terms are below 2^255 for any list and try count).
        assembly ("memory-safe") {
            slot := mod(add(mod(seed_, poolSize), j), poolSize)
        }
    }

    /// @notice The list slot of try `j` of a sampled draw: keccak256(abi.encode(seed, j)) % poolSize.
    /// @dev Both kinds of slot are taken modulo the pool size at opening, so referees leaving the list afterwards
    /// cannot re-roll the draw; a slot beyond the list's current length is skipped by the caller.
    /// @param seed_ The draw's seed.
    /// @param j The try, 0-based.
    /// @param poolSize Referees listed for the model when the dispute opened; > 0 (0 yields slot 0).
    /// @return slot The slot, below `poolSize`.
    function sampledSlot(uint256 seed_, uint256 j, uint256 poolSize) internal pure returns (uint256 slot) {
        // keccak256(abi.encode(seed_, j)) hashed in the scratch space (no allocation per try), and the modulo
        // without Solidity's division-by-zero check, so that the optimizer inlines it; poolSize > 0.
        assembly ("memory-safe") {
            mstore(0x00, seed_)
            mstore(0x20, j)
            slot := mod(keccak256(0x00, 0x40), poolSize)
        }
    }
}
