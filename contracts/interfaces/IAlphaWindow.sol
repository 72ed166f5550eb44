// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title IAlphaWindow
/// @notice The α window's events and errors, how the staking registry tells it a drafter's claimed acceptance
/// rate α*, and the window's view (docs/protocol.md §5, docs/contracts.md "α window").
interface IAlphaWindow {
    /// @notice The drafter's claim changed (and its window restarted when `restarted`).
    event AlphaClaimSet(address indexed drafter, uint64 alphaStar, bool restarted);
    /// @notice A job's `cycles` (with `accepted` and `rejected`) entered `drafter`'s window.
    event AlphaCyclesRecorded(address indexed drafter, uint256 cycles, uint256 accepted, uint256 rejected);
    /// @notice A full window of `drafter` was evaluated over `cycles` cycles; on a breach it restarted.
    event AlphaWindowEvaluated(
        address indexed drafter, uint256 cycles, uint256 accepted, uint256 rejected, bool breached
    );

    /// @dev A window parameter is out of range.
    error BadAlphaParams();
    /// @dev Only the staking registry may set claims.
    error NotAlphaAuthority(address caller);
    /// @dev α* cannot be lowered while the drafter's window holds cycles.
    error AlphaWindowOpen(address drafter, uint64 current, uint64 requested);

    /// @notice Drafter `drafter` now claims `alphaStar` (WAD). `fresh` (a new registration) restarts its
    /// window; otherwise lowering the claim reverts while the window holds any cycle.
    /// @dev Only the staking registry.
    function alphaClaimSet(address drafter, uint64 alphaStar, bool fresh) external;

    /// @notice `drafter`'s claim α* and the cycles in its window (closed buckets and the open one), with
    /// their accepted and rejected sums; `closedBuckets` of 8 are closed (8: the window is full).
    function alphaWindowOf(address drafter)
        external
        view
        returns (uint64 alphaStar, uint256 cycles, uint256 accepted, uint256 rejected, uint256 closedBuckets);
}
