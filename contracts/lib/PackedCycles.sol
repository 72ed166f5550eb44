// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title PackedCycles
/// @notice The settlement encoding of a run of transcript cycles (docs/protocol.md "Settlement encoding"): what
/// `settle`, `forceMove` and `challengeRule` take instead of ABI-encoded structs. Mirrored by
/// `node/chain/transcript.py` (`pack_cycles`, `unpack_cycles`).
///
///   run      = gamma (1 byte) ‖ record_0 ‖ … ‖ record_{n-1}
///   record   = accepted (1 byte) ‖ outToken (4 bytes) ‖ proposal_0 ‖ … ‖ proposal_{γ-1}      (5 + 19γ bytes)
///   proposal = token (32 bits) ‖ q (60 bits) ‖ p (60 bits)                                 (19 bytes)
///
/// Big-endian, no padding. Why 60-bit probabilities: a valid q or p is at most WAD = 1e18 < 2^60, so the four top
/// bits of a uint64 WAD are always zero; dropping them saves a nonzero calldata byte per probability (40 gas under
/// EIP-7623's floor, which prices this transaction). A record with a probability of 2^60 or more breaks the
/// rule, which no honest party signs, and cannot be posted at all. Why fixed widths: the run's length alone says
/// how many records it holds, record c sits at a computed offset (a challenge reads one cycle of it), and no field
/// can carry bits above its type, so there is nothing to mis-parse: the only malformed run is one of the wrong
/// length or for another γ, and `count` refuses both.
/// @dev `accepted` is one byte (the contracts require accepted ≤ γ ≤ 16) and hashes as the uint32 of the record.
library PackedCycles {
    uint256 internal constant HEADER = 1; // the γ byte
    uint256 internal constant FIXED = 5; // accepted, outToken
    uint256 internal constant PROPOSAL = 19; // token, q, p
    uint256 private constant _MASK60 = (1 << 60) - 1;
    // `_fold`'s borrowed memory: the tree's first-level nodes from _NODES (past a γ = 16 record encoding at 0xe0),
    // the region's end after 8 of them
    uint256 private constant _NODES = 0x380;
    uint256 private constant _END = 0x480;

    /// @notice One cycle unpacked into memory: the draft, p and the record fields.
    struct Cycle {
        uint32[] tokens;
        uint64[] q;
        uint64[] p;
        uint256 accepted;
        uint256 outToken;
    }

    /// @dev The run was packed for γ `got`, the job's is `expected`.
    error PackedGamma(uint256 expected, uint256 got);
    /// @dev A run of `length` bytes is not the γ byte and whole records of `recordSize` bytes (truncated, trailing
    /// bytes, or empty).
    error PackedLength(uint256 length, uint256 recordSize);

    /// @notice The bytes of one record at `gamma`.
    function recordSize(uint256 gamma) internal pure returns (uint256) {
        return FIXED + PROPOSAL * gamma;
    }

    /// @notice The number of records in `data`, a run packed for `gamma`; reverts {PackedLength} / {PackedGamma}.
    function count(bytes calldata data, uint256 gamma) internal pure returns (uint256) {
        uint256 size = recordSize(gamma);
        if (data.length < HEADER) revert PackedLength(data.length, size);
        uint256 got = uint8(data[0]);
        if (got != gamma) revert PackedGamma(gamma, got);
        uint256 body = data.length - HEADER;
        if (body % size != 0) revert PackedLength(data.length, size);
        return body / size;
    }

    /// @notice A Cycle with arrays of `gamma` entries, for `load` to fill again and again (one allocation a run).
    function alloc(uint256 gamma) internal pure returns (Cycle memory c) {
        c.tokens = new uint32[](gamma);
        c.q = new uint64[](gamma);
        c.p = new uint64[](gamma);
    }

    /// @notice The calldata offset of record `c` of `data`, a run packed for `gamma` (its length checked by `count`).
    function recordAt(bytes calldata data, uint256 gamma, uint256 c) internal pure returns (uint256 offset) {
        assembly ("memory-safe") {
            offset := add(add(data.offset, HEADER), mul(c, add(FIXED, mul(PROPOSAL, gamma))))
        }
    }

    /// @notice The record fields at calldata offset `record`: accepted and outToken.
    /// @dev Branch-free (callers' loops inline it), as are the readers below; they read no length: `count` did.
    function head(uint256 record) internal pure returns (uint256 accepted, uint256 outToken) {
        assembly ("memory-safe") {
            let w := calldataload(record)
            accepted := shr(248, w)
            outToken := and(shr(216, w), 0xffffffff)
        }
    }

    /// @notice Proposal `i` of the record at calldata offset `record`: its token, q and p.
    /// @dev One calldataload: the proposal's 19 bytes are the word's top 152 bits. The last proposal's word runs past
    /// the record (into the next one, or calldata's zero padding); those low bits are shifted out.
    function proposal(uint256 record, uint256 i) internal pure returns (uint256 token, uint256 q, uint256 p) {
        assembly ("memory-safe") {
            let w := calldataload(add(add(record, FIXED), mul(i, PROPOSAL)))
            token := shr(224, w)
            q := and(shr(164, w), _MASK60)
            p := and(shr(104, w), _MASK60)
        }
    }

    /// @notice A fold over a packed run in progress (`fold` reads and writes it once a call, not once a cycle).
    struct Run {
        uint256 jobId;
        uint256 gamma;
        uint256 eos; // the job's EOS token
        uint256 next; // the next cycle to fold
        uint256 n; // the run's record count (`count`)
        bytes32 state; // S(next - 1)
        uint256 room; // maxTokens - the tokens emitted so far
        uint256 rejected; // cycles with a counted rejection so far
        uint256 accepted; // of the cycle `fold` stopped at
        uint256 outToken; // of the cycle `fold` stopped at
        uint256 leaf; // (fold's own) the memory address of leaves[next]
    }

    /// @notice Folds records `r.next`… of `data` (a run of `r.gamma` whose length `count` checked) into `r`: per
    /// record its v1 record hash, the state step S(c) = keccak256(S(c-1) ‖ recordHash), its record leaf (into
    /// `leaves`, c below its length) and v1's emission of a cycle that does not end the job (accepted + 1 tokens, a
    /// rejection counted when accepted < γ). It stops at the first record that may end the job or is malformed
    /// (accepted + 1 reaching `room`, outToken EOS, any proposal EOS, accepted > γ): that record's hash, state
    /// step and leaf are done, and `ended` returns true with `r.next` at it and its accepted and outToken in `r`, for
    /// the caller's emission rule (TranscriptSettlement._step, which also cuts). Otherwise it folds the whole run.
    /// @dev Settlement's hot path, so one assembly block over calldata with nothing allocated and nothing called per
    /// record: it restates rules that have their reference doors elsewhere, the leaf (SpecMath._leafPreimage/_leafAt:
    /// the double hash of abi.encode(jobId, cycle, index, token, q)), the tree (SpecMath._root: commutative pairs, odd
    /// node carried up), the record encoding (CycleRecord._hash: keccak256(abi.encode(draftRoot, uint64[] p, uint32
    /// accepted, uint32 outToken))), TranscriptTypes.nextState and recordLeaf, and _step's case where nothing is cut.
    /// The challenge path (`load`, then SpecMath and CycleRecord) recomputes every record it proves against the root
    /// built from these leaves, and tests/test_transcript_settlement.py checks both against node/protocol.py.
    /// Scratch past the free memory pointer: the leaf preimage (5 words, jobId written once), the tree's first-level
    /// nodes (γ words reserved), the record encoding (its offset and length words written once).
    function fold(bytes calldata data, Run memory r, bytes32[] memory leaves) internal pure returns (bool ended) {
        uint256 start;
        assembly ("memory-safe") {
            start := add(add(data.offset, HEADER), mul(mload(add(r, 0x60)), add(FIXED, mul(PROPOSAL, mload(add(r, 0x20))))))
            mstore(add(r, 0x140), add(leaves, shl(5, add(mload(add(r, 0x60)), 1))))
        }
        return _fold(start, r);
    }

    /// @dev `fold` from calldata offset `rec` (record r.next), the leaf of r.next at memory r.leaf.
    /// @dev Every scratch word sits at a constant address (a PUSH, where an offset from the free memory pointer costs
    /// a DUP, a PUSH and an ADD: ~150 gas a cycle at γ = 4), so the kernel borrows memory [0x40, _END): it copies
    /// that region past the free memory pointer, uses it, and copies it back (the free memory pointer, the zero slot
    /// and whatever Solidity had allocated there come back unchanged; nothing else runs meanwhile: no call, no
    /// revert). The leaves, which may lie in that region, are written to a buffer past the copy and moved into
    /// `leaves` once the region is restored. Hence not "memory-safe".
    ///   0x00, 0x20   a leaf's second hash, a sorted pair, the state and record-leaf steps
    ///   0x40..0xdf   the leaf preimage: jobId, cycle, index, token, q
    ///   0xe0..       the record encoding: draftRoot, 0x80 (p's offset), accepted, outToken, γ, p_0 … p_{γ-1}
    ///   0x380..      the tree's first-level nodes (⌈γ/2⌉ ≤ 8 words), up to _END
    function _fold(uint256 rec, Run memory r) private pure returns (bool ended) {
        assembly {
            // the draft root of the record at calldata `record` into 0xe0 and its p from 0x180; returns nonzero when
            // a proposal's token is `eos` (any of them: the caller's _step finds the first accepted one). Two leaves
            // an iteration, built in the scratch words 0x00 and 0x20 and hashed there as a sorted pair into their
            // first-level node, so no leaf is held on the stack.
            function draft(record, gamma, eos) -> m {
                let src := add(record, FIXED)
                let pw := 0x180
                let node := _NODES
                let i := 0
                for {} lt(add(i, 1), gamma) { i := add(i, 2) } {
                    let w := calldataload(src)
                    mstore(0x80, i)
                    mstore(0xa0, shr(224, w)) // token
                    mstore(0xc0, and(shr(164, w), _MASK60)) // q
                    mstore(pw, and(shr(104, w), _MASK60)) // p
                    m := or(m, eq(shr(224, w), eos))
                    mstore(0x00, keccak256(0x40, 0xa0))
                    mstore(0x00, keccak256(0x00, 0x20)) // leaf i
                    w := calldataload(add(src, PROPOSAL))
                    mstore(0x80, add(i, 1))
                    mstore(0xa0, shr(224, w))
                    mstore(0xc0, and(shr(164, w), _MASK60))
                    mstore(add(pw, 0x20), and(shr(104, w), _MASK60))
                    m := or(m, eq(shr(224, w), eos))
                    mstore(0x20, keccak256(0x40, 0xa0))
                    mstore(0x20, keccak256(0x20, 0x20)) // leaf i + 1
                    w := mload(0x00)
                    if lt(mload(0x20), w) {
                        mstore(0x00, mload(0x20))
                        mstore(0x20, w)
                    }
                    mstore(node, keccak256(0x00, 0x40))
                    src := add(src, mul(2, PROPOSAL))
                    node := add(node, 0x20)
                    pw := add(pw, 0x40)
                }
                if lt(i, gamma) {
                    // an odd last leaf moves up
                    let w := calldataload(src)
                    mstore(0x80, i)
                    mstore(0xa0, shr(224, w))
                    mstore(0xc0, and(shr(164, w), _MASK60))
                    mstore(pw, and(shr(104, w), _MASK60))
                    m := or(m, eq(shr(224, w), eos))
                    mstore(0x00, keccak256(0x40, 0xa0))
                    mstore(node, keccak256(0x00, 0x20))
                }
                // the middle levels, in place: pair (2i, 2i+1) sorted and hashed into i, an odd last node moved up
                let width := shr(1, add(gamma, 1))
                for {} gt(width, 2) {} {
                    let end := add(_NODES, shl(6, shr(1, width)))
                    let dst := _NODES
                    for { let at := _NODES } lt(at, end) { at := add(at, 0x40) } {
                        let a := mload(at)
                        let b := mload(add(at, 0x20))
                        let lo := xor(b, mul(xor(a, b), lt(a, b)))
                        mstore(0x00, lo)
                        mstore(0x20, xor(xor(a, b), lo))
                        mstore(dst, keccak256(0x00, 0x40))
                        dst := add(dst, 0x20)
                    }
                    if and(width, 1) { mstore(dst, mload(end)) }
                    width := sub(width, shr(1, width))
                }
                // the top: one node is the draft root, two are its last pair (hashed straight into the encoding)
                switch width
                case 1 { mstore(0xe0, mload(_NODES)) }
                default {
                    let a := mload(_NODES)
                    let b := mload(add(_NODES, 0x20))
                    switch lt(a, b)
                    case 1 {
                        mstore(0x00, a)
                        mstore(0x20, b)
                    }
                    default {
                        mstore(0x00, b)
                        mstore(0x20, a)
                    }
                    mstore(0xe0, keccak256(0x00, 0x40))
                }
            }

            let gamma := mload(add(r, 0x20))
            let eos := mload(add(r, 0x40))
            let size := add(FIXED, mul(PROPOSAL, gamma))
            let end := add(rec, mul(sub(mload(add(r, 0x80)), mload(add(r, 0x60))), size))
            let state := mload(add(r, 0xa0))
            let room := mload(add(r, 0xc0))
            let rejected := mload(add(r, 0xe0))
            let buf := add(mload(0x40), sub(_END, 0x40)) // the leaves' buffer, past the borrowed region's copy
            let leaf := buf
            {
                let jobId := mload(r)
                let c := mload(add(r, 0x60))
                mcopy(mload(0x40), 0x40, sub(_END, 0x40))
                mstore(0x40, jobId)
                mstore(0x60, c)
            }
            mstore(0x100, 0x80) // the offset of p
            mstore(0x160, gamma) // p's length
            for {} lt(rec, end) {} {
                let m := draft(rec, gamma, eos)
                let w := calldataload(rec) // accepted (8 bits), outToken (32 bits)
                mstore(0x120, shr(248, w))
                mstore(0x140, and(shr(216, w), 0xffffffff))
                mstore(0x20, keccak256(0xe0, add(0xa0, shl(5, gamma)))) // the record hash
                mstore(0x00, state)
                state := keccak256(0x00, 0x40)
                mstore(0x00, mload(0x60)) // c < 2^32: a calldata run cannot hold more records
                mstore(0x00, keccak256(0x00, 0x40))
                mstore(leaf, keccak256(0x00, 0x20))
                leaf := add(leaf, 0x20)
                w := shr(216, w)
                // maxTokens reached, accepted > γ, the outToken or a proposal EOS: the caller's to count
                if or(
                    or(iszero(lt(add(shr(32, w), 1), room)), gt(shr(32, w), gamma)),
                    or(eq(and(w, 0xffffffff), eos), m)
                ) {
                    ended := 1
                    mstore(add(r, 0x100), shr(32, w))
                    mstore(add(r, 0x120), and(w, 0xffffffff))
                    break
                }
                room := sub(room, add(shr(32, w), 1))
                rejected := add(rejected, lt(shr(32, w), gamma))
                mstore(0x60, add(mload(0x60), 1))
                rec := add(rec, size)
            }
            {
                let c := mload(0x60)
                let saved := sub(buf, sub(_END, 0x40))
                mcopy(0x40, saved, sub(_END, 0x40)) // the free memory pointer and the zero slot among them
                mcopy(mload(add(r, 0x140)), buf, sub(leaf, buf))
                mstore(add(r, 0x60), c)
            }
            mstore(add(r, 0xa0), state)
            mstore(add(r, 0xc0), room)
            mstore(add(r, 0xe0), rejected)
        }
    }

    /// @notice The first of the `accepted` first proposals of record `c` whose token is `eos` (`accepted` when none
    /// is): where v1's emission cuts the cycle.
    function firstEos(bytes calldata data, uint256 gamma, uint256 c, uint256 accepted, uint256 eos)
        internal
        pure
        returns (uint256)
    {
        uint256 record = recordAt(data, gamma, c);
        for (uint256 i; i < accepted; ++i) {
            (uint256 token,,) = proposal(record, i);
            if (token == eos) return i;
        }
        return accepted;
    }

    /// @notice Unpacks record `c` of `data` (a run whose length `count` checked, for the γ of `out`'s arrays) into
    /// `out` (a challenge re-runs the rule on memory arrays).
    function load(bytes calldata data, uint256 c, Cycle memory out) internal pure {
        uint256 gamma = out.tokens.length;
        uint256 record = recordAt(data, gamma, c);
        (out.accepted, out.outToken) = head(record);
        for (uint256 i; i < gamma; ++i) {
            (uint256 token, uint256 q, uint256 p) = proposal(record, i);
            out.tokens[i] = uint32(token);
            out.q[i] = uint64(q);
            out.p[i] = uint64(p);
        }
    }
}
