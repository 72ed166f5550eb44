// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title IStakingRegistry
/// @notice What the protocol's other contracts (market, alpha window, disputes) need from the staking registry.
interface IStakingRegistry {
    enum Role {
        None,
        Drafter,
        Verifier,
        Referee
    }

    /// @notice True when `account` is registered as `role`, serves `modelId`, holds at least the role's
    /// minimum stake and is not unbonding.
    function isActive(address account, Role role, bytes32 modelId) external view returns (bool);

    /// @notice `isActive`, and registered in block `atBlock` or earlier: the referee draw counts only stakers
    /// who registered before its seed could be known.
    function isActiveSince(address account, Role role, bytes32 modelId, uint256 atBlock) external view returns (bool);

    /// @notice Current stake of `account` (wei), slashes already deducted.
    function stakeOf(address account) external view returns (uint256);

    /// @notice Adds one open obligation (job or dispute) to `account`; while any is open its stake cannot leave.
    /// @dev Only the protocol's own contracts.
    function lock(address account) external;

    /// @notice Removes one open obligation from `account`.
    /// @dev Only the protocol's own contracts.
    function unlock(address account) external;

    /// @notice Takes up to `amount` of `account`'s stake and sends it to the calling protocol contract,
    /// which credits the beneficiaries. Returns the amount actually taken (capped at the stake).
    /// @dev Only the protocol's own contracts. Must work also while the account is unbonding.
    function slash(address account, uint256 amount) external returns (uint256 taken);

    /// @notice Number of referees registered for `modelId` (active or not); with {refereeAt} it lets the
    /// dispute manager draw referees without an unbounded loop.
    function refereeCount(bytes32 modelId) external view returns (uint256);

    /// @notice The `index`-th referee registered for `modelId`.
    function refereeAt(bytes32 modelId, uint256 index) external view returns (address);
}
