// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title Counter
/// @notice A tiny stateful contract for the node's chain-client tests: state-changing calls, events to poll,
/// and custom errors (with and without arguments) to decode from reverts.
contract Counter {
    /// @notice The account allowed to reset the counter.
    address public immutable owner;
    /// @notice The current count.
    uint256 public count;

    /// @notice `by` added `amount`, bringing the count to `newCount`.
    event Incremented(address indexed by, uint256 amount, uint256 newCount);
    /// @notice The owner set the count back to zero.
    event Reset(address indexed by);

    /// @notice An increment of `amount` is above the per-call `limit`.
    error TooLarge(uint256 amount, uint256 limit);
    /// @notice `caller` is not the owner.
    error NotOwner(address caller);
    /// @notice An increment of zero was requested.
    error ZeroAmount();

    /// @notice The largest increment one call may make.
    uint256 public constant MAX_INCREMENT = 100;

    constructor() {
        owner = msg.sender;
    }

    /// @notice Adds `amount` (1..MAX_INCREMENT) to the count.
    function increment(uint256 amount) external {
        if (amount == 0) revert ZeroAmount();
        if (amount > MAX_INCREMENT) revert TooLarge(amount, MAX_INCREMENT);
        count += amount;
        emit Incremented(msg.sender, amount, count);
    }

    /// @notice Sets the count to zero; owner only.
    function reset() external {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        count = 0;
        emit Reset(msg.sender);
    }
}
