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

    /// @notice The v1 record hash of the packed record at calldata offset `record` of cycle `cycle` of `jobId`, with
    /// its accepted, its outToken and the first accepted proposal whose token is `eos` (`accepted` when none is): keccak256(abi.encode(draftRoot, uint64[] p, uint32 accepted, uint32 outToken)) with
    /// draftRoot = SpecMath's draft root over (tokens, q).
    /// @dev Settlement's hot path, so one assembly block over calldata with nothing allocated: it restates three
    /// rules that have their reference doors elsewhere, the leaf (SpecMath._leafPreimage/_leafAt: the double hash
    /// of abi.encode(jobId, cycle, index, token, q)), the tree (SpecMath._root: commutative pairs, odd node carried
    /// up) and the record encoding (CycleRecord._hash). Through SpecMath.leaf/root and CycleRecord.hash the same
    /// work cost ~5,500 gas a cycle of Solidity glue (array bounds checks, internal calls, memory structs) against
    /// ~1,500 here. The challenge path (`load`, then SpecMath and CycleRecord) recomputes every record it proves
    /// against the root this builds, and tests/test_transcript_settlement.py checks both against node/protocol.py.
    /// Scratch past the free memory pointer: the leaf preimage (5 words), the tree's ⌈γ/2⌉ first-level nodes (γ words
    /// reserved), the record encoding.
    function recordHash(uint256 jobId, uint256 cycle, uint256 record, uint256 gamma, uint256 eos)
        internal
        pure
        returns (bytes32 h, uint256 accepted, uint256 outToken, uint256 eosAt)
    {
        assembly ("memory-safe") {
            let pre := mload(0x40)
            let nodes := add(pre, 0xa0)
            let enc := add(nodes, shl(5, gamma))
            mstore(pre, jobId)
            mstore(add(pre, 0x20), cycle)
            let w := calldataload(record)
            accepted := shr(248, w)
            outToken := and(shr(216, w), 0xffffffff)
            eosAt := accepted
            // leaves and p, by pointers: the proposal's calldata, its p word after the 5 head words; two leaves an
            // iteration, each pair hashed (sorted) into its first-level node on the way, so no leaf goes to memory
            // (unrolled by hand: one leaf an iteration with a switch on its parity cost ~250 gas a cycle more at γ = 4)
            let src := add(record, FIXED)
            let node := nodes
            let pWord := add(enc, 0xa0)
            let i := 0
            for {} lt(add(i, 1), gamma) { i := add(i, 2) } {
                w := calldataload(src)
                mstore(add(pre, 0x40), i)
                let token := shr(224, w)
                if and(eq(token, eos), lt(i, eosAt)) { eosAt := i }
                mstore(add(pre, 0x60), token)
                mstore(add(pre, 0x80), and(shr(164, w), _MASK60)) // q
                mstore(0x00, keccak256(pre, 0xa0))
                let a := keccak256(0x00, 0x20) // leaf i
                mstore(pWord, and(shr(104, w), _MASK60)) // p_i
                // the same for proposal i + 1
                w := calldataload(add(src, PROPOSAL))
                mstore(add(pre, 0x40), add(i, 1))
                token := shr(224, w)
                if and(eq(token, eos), lt(add(i, 1), eosAt)) { eosAt := add(i, 1) }
                mstore(add(pre, 0x60), token)
                mstore(add(pre, 0x80), and(shr(164, w), _MASK60))
                mstore(0x00, keccak256(pre, 0xa0))
                let b := keccak256(0x00, 0x20)
                mstore(add(pWord, 0x20), and(shr(104, w), _MASK60))
                let lo := xor(b, mul(xor(a, b), lt(a, b))) // min(a, b), branch-free
                mstore(0x00, lo)
                mstore(0x20, xor(xor(a, b), lo)) // max(a, b)
                mstore(node, keccak256(0x00, 0x40))
                src := add(src, mul(2, PROPOSAL))
                node := add(node, 0x20)
                pWord := add(pWord, 0x40)
            }
            if lt(i, gamma) {
                // an odd last leaf moves up
                w := calldataload(src)
                mstore(add(pre, 0x40), i)
                let token := shr(224, w)
                if and(eq(token, eos), lt(i, eosAt)) { eosAt := i }
                mstore(add(pre, 0x60), token)
                mstore(add(pre, 0x80), and(shr(164, w), _MASK60))
                mstore(0x00, keccak256(pre, 0xa0))
                mstore(node, keccak256(0x00, 0x20))
                mstore(pWord, and(shr(104, w), _MASK60))
            }
            // the middle levels, in place: pair (2i, 2i+1) sorted and hashed into i, an odd last node moved up
            let width := shr(1, add(gamma, 1))
            for {} gt(width, 2) {} {
                let end := add(nodes, shl(6, shr(1, width)))
                let dst := nodes
                for { let at := nodes } lt(at, end) { at := add(at, 0x40) } {
                    let a := mload(at)
                    let b := mload(add(at, 0x20))
                    let lo := xor(b, mul(xor(a, b), lt(a, b))) // min(a, b), branch-free
                    mstore(0x00, lo)
                    mstore(0x20, xor(xor(a, b), lo)) // max(a, b)
                    mstore(dst, keccak256(0x00, 0x40))
                    dst := add(dst, 0x20)
                }
                if and(width, 1) { mstore(dst, mload(end)) }
                width := sub(width, shr(1, width))
            }
            // the top: one node is the draft root, two are its last pair (hashed straight into the encoding)
            switch width
            case 1 { mstore(enc, mload(nodes)) }
            default {
                let a := mload(nodes)
                let b := mload(add(nodes, 0x20))
                let lo := xor(b, mul(xor(a, b), lt(a, b)))
                mstore(0x00, lo)
                mstore(0x20, xor(xor(a, b), lo))
                mstore(enc, keccak256(0x00, 0x40)) // the draft root
            }
            mstore(add(enc, 0x20), 0x80) // the offset of p
            mstore(add(enc, 0x40), accepted)
            mstore(add(enc, 0x60), outToken)
            mstore(add(enc, 0x80), gamma) // p's length
            h := keccak256(enc, add(0xa0, shl(5, gamma)))
        }
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
