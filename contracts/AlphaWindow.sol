// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IAlphaWindow} from "./interfaces/IAlphaWindow.sol";

/// @title AlphaWindow
/// @notice The α stake of docs/protocol.md §5. Each drafter's verified cycles feed a sliding window made of a
/// ring of 8 buckets; a bucket closes once it holds at least `alphaBucketCycles` (M) cycles, so the
/// window covers the drafter's most recent N ≥ 8·M verified cycles and slides one bucket at a time.
/// Each time a bucket closes with 8 closed buckets in the ring (the window is full),
/// α̂ = Σaccepted / Σ(accepted + rejected) is compared with the claim α*: when α̂ < α* − τ the drafter
/// is in breach, its window restarts, and the inheriting contract slashes `alphaSlashAmount` of its stake,
/// credited to the `treasury` (never to a party of a job: docs/protocol.md §10).
/// A cycle with n accepted of K proposals contributes n accepted, and 1 rejected if n < K (0 if n == K).
/// A window belongs to the drafter's address for good: registering again keeps it (docs/contracts.md).
/// @dev The market accrues a job's (cycles, accepted, rejected) in the job's own hot storage slot and
/// records them here once, when the job is settled (finalize), so a cycle pays no extra storage for α and a
/// job whose party was convicted, or that ended by a verifier fault, is left out. The window therefore
/// slides by whole jobs: a bucket holds whole jobs.
abstract contract AlphaWindow is IAlphaWindow {
    uint256 internal constant ALPHA_WAD = 1e18;
    /// @notice Buckets in a full window.
    uint256 public constant ALPHA_BUCKETS = 8;

    /// @dev Per drafter: the claim and the open (not yet closed) bucket, in one slot.
    struct AlphaState {
        uint64 alphaStar;
        uint8 next; // ring index the next closed bucket is written to
        uint8 closed; // closed buckets in the ring (0..8); entries 0..closed-1 are valid while < 8
        uint32 openCycles;
        uint32 openAccepted;
        uint32 openRejected;
    }

    /// @notice Cycles a bucket needs to close, M; a full window holds at least 8·M cycles.
    uint256 public immutable alphaBucketCycles;
    /// @notice Tolerance τ (WAD): a drafter is in breach when α̂ < α* − τ.
    uint256 public immutable alphaTolerance;
    /// @notice Share of the stake slashed on a breach, in basis points (capped: `alphaSlashAmount`).
    uint256 public immutable alphaSlashBps;
    /// @notice Wei per verified cycle (pricePerPass) a job must pay for its cycles to count toward α.
    uint256 public immutable alphaPriceFloor;
    /// @notice Share of pricePerPass, in basis points, of every cycle that enters a window, paid to the treasury.
    uint256 public immutable alphaFeeBps;
    /// @notice Where α slashes and α fees go (never a party of the job); the burn address by default.
    address public immutable treasury;

    mapping(address drafter => AlphaState) private _alphaStates;
    /// @dev Closed buckets: cycles | accepted << 64 | rejected << 128.
    mapping(address drafter => uint256[ALPHA_BUCKETS]) private _alphaRing;

    /// @param bucketCycles Cycles a bucket needs to close, M (1..2^24).
    /// @param tolerance τ in WAD (≤ WAD).
    /// @param slashBps Share of the stake slashed on a breach, in basis points (≤ 10000).
    /// @param priceFloor Least pricePerPass (wei) of a job whose cycles count toward α (< 2^128).
    /// @param feeBps Share of pricePerPass of each counted cycle paid to the treasury, in basis points (≤ 10000).
    /// @param treasury_ Receives α slashes and fees; non-zero (the burn address 0x…dEaD to burn them).
    constructor(
        uint256 bucketCycles,
        uint256 tolerance,
        uint256 slashBps,
        uint256 priceFloor,
        uint256 feeBps,
        address treasury_
    ) {
        if (
            bucketCycles == 0 || bucketCycles > 1 << 24 || tolerance > ALPHA_WAD || slashBps > 10_000
                || priceFloor > type(uint128).max || feeBps > 10_000
        ) {
            revert BadAlphaParams();
        }
        if (treasury_ == address(0)) revert ZeroTreasury();
        alphaBucketCycles = bucketCycles;
        alphaTolerance = tolerance;
        alphaSlashBps = slashBps;
        alphaPriceFloor = priceFloor;
        alphaFeeBps = feeBps;
        treasury = treasury_;
    }

    /// @dev The address allowed to call `alphaClaimSet` (the staking registry).
    function _alphaAuthority() internal view virtual returns (address);

    /// @inheritdoc IAlphaWindow
    function alphaClaimSet(address drafter, uint64 alphaStar) external {
        if (msg.sender != _alphaAuthority()) revert NotAlphaAuthority(msg.sender);
        AlphaState storage s = _alphaStates[drafter];
        if (alphaStar < s.alphaStar && (s.closed != 0 || s.openCycles != 0)) {
            revert AlphaWindowOpen(drafter, s.alphaStar, alphaStar);
        }
        s.alphaStar = alphaStar;
        emit AlphaClaimSet(drafter, alphaStar);
    }

    /// @inheritdoc IAlphaWindow
    function alphaSlashAmount(uint256 stake) public view returns (uint256) {
        uint256 share = stake * alphaSlashBps / 10_000;
        uint256 cap = ALPHA_BUCKETS * alphaBucketCycles * alphaPriceFloor * alphaFeeBps / 10_000;
        return share < cap ? share : cap;
    }

    /// @inheritdoc IAlphaWindow
    function alphaWindowOf(address drafter)
        external
        view
        returns (uint64 alphaStar, uint256 cycles, uint256 accepted, uint256 rejected, uint256 closedBuckets)
    {
        AlphaState storage s = _alphaStates[drafter];
        (cycles, accepted, rejected) = _closedSums(drafter, s.closed);
        return (s.alphaStar, cycles + s.openCycles, accepted + s.openAccepted, rejected + s.openRejected, s.closed);
    }

    /// @dev Adds a job's verified `cycles` with their `accepted` and `rejected` sums to `drafter`'s window.
    /// Returns true when a full window was in breach; the window has then restarted.
    function _recordCycles(address drafter, uint256 cycles, uint256 accepted, uint256 rejected)
        internal
        returns (bool breached)
    {
        emit AlphaCyclesRecorded(drafter, cycles, accepted, rejected);
        AlphaState storage s = _alphaStates[drafter];
        uint256 openCycles = s.openCycles + cycles;
        uint256 openAccepted = s.openAccepted + accepted;
        uint256 openRejected = s.openRejected + rejected;
        if (openCycles < alphaBucketCycles) {
            s.openCycles = uint32(openCycles);
            s.openAccepted = uint32(openAccepted);
            s.openRejected = uint32(openRejected);
            return false;
        }
        // The open bucket closes into the ring, replacing the oldest one once the ring is full.
        uint256 next = s.next;
        _alphaRing[drafter][next] = openCycles | (openAccepted << 64) | (openRejected << 128);
        uint256 closed = s.closed < ALPHA_BUCKETS ? s.closed + 1 : ALPHA_BUCKETS;
        s.next = uint8((next + 1) % ALPHA_BUCKETS);
        s.closed = uint8(closed);
        s.openCycles = 0;
        s.openAccepted = 0;
        s.openRejected = 0;
        if (closed < ALPHA_BUCKETS) return false;

        (uint256 n, uint256 acc, uint256 rej) = _closedSums(drafter, ALPHA_BUCKETS);
        uint256 alphaStar = s.alphaStar;
        // α̂ < α* − τ  ⇔  acc·WAD < (α* − τ)·(acc + rej); acc + rej ≥ n > 0.
        breached = alphaStar > alphaTolerance && acc * ALPHA_WAD < (alphaStar - alphaTolerance) * (acc + rej);
        emit AlphaWindowEvaluated(drafter, n, acc, rej, breached);
        if (breached) {
            s.next = 0;
            s.closed = 0;
        }
    }

    function _closedSums(address drafter, uint256 closed)
        private
        view
        returns (uint256 cycles, uint256 accepted, uint256 rejected)
    {
        uint256[ALPHA_BUCKETS] storage ring = _alphaRing[drafter];
        for (uint256 i = 0; i < closed; ++i) {
            uint256 bucket = ring[i];
            cycles += uint64(bucket);
            accepted += uint64(bucket >> 64);
            rejected += uint64(bucket >> 128);
        }
    }
}
