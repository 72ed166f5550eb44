// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title IAlphaWindow
/// @notice The α window's events and errors, how the staking registry tells it a drafter's claimed acceptance
/// rate α*, and the window's views (docs/protocol.md §5, §10; docs/contracts.md "α window").
interface IAlphaWindow {
    /// @notice The drafter's claim is now `alphaStar` (its window is kept, also across registrations).
    event AlphaClaimSet(address indexed drafter, uint64 alphaStar);
    /// @notice A settled job's `cycles` (with `accepted` and `rejected`) entered `drafter`'s window.
    event AlphaCyclesRecorded(address indexed drafter, uint256 cycles, uint256 accepted, uint256 rejected);
    /// @notice A full window of `drafter` was evaluated over `cycles` cycles; on a breach it restarted.
    event AlphaWindowEvaluated(
        address indexed drafter, uint256 cycles, uint256 accepted, uint256 rejected, bool breached
    );
    /// @notice Settling `jobId` paid the α fee `amount` (alphaFeeBps of pricePerPass per counted cycle, out of
    /// the verifier's pay) to `treasury`.
    event AlphaFeePaid(uint256 indexed jobId, address indexed treasury, uint256 amount);

    /// @dev A window parameter is out of range.
    error BadAlphaParams();
    /// @dev The treasury must not be the zero address (use the burn address 0x…dEaD to burn).
    error ZeroTreasury();
    /// @dev The treasury cannot be a party of a job (it receives the α slashes and fees).
    error TreasuryIsParty(address party);
    /// @dev Only the staking registry may set claims.
    error NotAlphaAuthority(address caller);
    /// @dev α* cannot be lowered while the drafter's window holds cycles (also not by registering again).
    error AlphaWindowOpen(address drafter, uint64 current, uint64 requested);

    /// @notice Drafter `drafter` now claims `alphaStar` (WAD), at registration or later. Lowering the claim
    /// reverts while the window holds any cycle; the window itself is never restarted by a claim.
    /// @dev Only the staking registry.
    function alphaClaimSet(address drafter, uint64 alphaStar) external;

    /// @notice `drafter`'s claim α* and the cycles in its window (closed buckets and the open one), with
    /// their accepted and rejected sums; `closedBuckets` of 8 are closed (8: the window is full).
    function alphaWindowOf(address drafter)
        external
        view
        returns (uint64 alphaStar, uint256 cycles, uint256 accepted, uint256 rejected, uint256 closedBuckets);

    /// @notice What a breach slashes from a drafter with `stake`: alphaSlashBps of it, at most
    /// 8 · alphaBucketCycles · alphaPriceFloor · alphaFeeBps / 10000, the α fees that filling a whole window at
    /// the floor burns: whoever fills a window (even a requester with its own verifier) loses at least what the
    /// drafter loses, and a requester alone 10000 / alphaFeeBps times it (docs/contracts.md "Griefing").
    function alphaSlashAmount(uint256 stake) external view returns (uint256);
}
