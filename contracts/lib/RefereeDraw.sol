// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title RefereeDraw
/// @notice The selection math of the dispute manager's stake-weighted referee draw (docs/disputes.md, "Referee
/// draw"): the seed, how many tries a draw may make, the stake point each try looks up in the registry's stake
/// tree, and the panel size of each appeal round. Which referee holds a point (StakingRegistry.refereeByStake) and
/// whether it may sit (not a party, not on an earlier panel, active since the seed block) stay in the manager.
/// @dev All functions are `internal pure`: they are inlined into the manager.
library RefereeDraw {
    /// @notice A draw for a panel of n seats makes at most 4n + TRIES_EXTRA tries.
    uint256 internal constant TRIES_EXTRA = 8;

    /// @notice The draw's seed: keccak256(abi.encode(blockhash(drawBlock), disputeId, round)). The dispute id makes
    /// two disputes opened in one block draw independently, the round two rounds of one dispute.
    /// @param seedBlockHash The hash of the draw's seed block.
    /// @param disputeId The dispute.
    /// @param round The round (0 = first panel).
    /// @return The seed.
    function seed(bytes32 seedBlockHash, uint256 disputeId, uint256 round) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(seedBlockHash, disputeId, round)));
    }

    /// @notice How many tries a draw for `seats` seats may make: 4 × seats + TRIES_EXTRA.
    /// @param seats The seats.
    /// @return The tries.
    function tries(uint256 seats) internal pure returns (uint256) {
        return 4 * seats + TRIES_EXTRA;
    }

    /// @notice The stake point of try `j`: keccak256(abi.encode(seed, j)) % total, uniform over 0..total-1, so the
    /// referee holding it is drawn with probability stake / total.
    /// @param seed_ The draw's seed.
    /// @param j The try, 0-based.
    /// @param total The model's active referee stake; > 0 (0 yields point 0).
    /// @return stakePoint The point, below `total`.
    function point(uint256 seed_, uint256 j, uint256 total) internal pure returns (uint256 stakePoint) {
        // keccak256(abi.encode(seed_, j)) hashed in the scratch space (no allocation per try), and the modulo
        // without Solidity's division-by-zero check; total > 0.
        assembly ("memory-safe") {
            mstore(0x00, seed_)
            mstore(0x20, j)
            stakePoint := mod(keccak256(0x00, 0x40), total)
        }
    }

    /// @notice Seats of appeal round `round` for a first panel of `firstPanel` seats: n_0 = R, n_k = 2 n_{k-1} + 1
    /// (= 2^k (R + 1) − 1).
    /// @param firstPanel R.
    /// @param round The round.
    /// @return The seats.
    function panelSize(uint256 firstPanel, uint256 round) internal pure returns (uint256) {
        return ((firstPanel + 1) << round) - 1;
    }
}
