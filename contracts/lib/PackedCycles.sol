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

    /// @notice A fold over a packed run in progress (`fold` reads and writes it once a call, not once a cycle).
    struct Run {
        uint256 gamma;
        uint256 eos; // the job's EOS token
        uint256 next; // the next cycle to fold
        uint256 n; // the run's record count (`count`)
        bytes32 state; // S(next - 1)
        uint256 room; // maxTokens - the tokens emitted so far
        uint256 rejected; // cycles with a counted rejection so far
        uint256 accepted; // of the cycle `fold` stopped at
        uint256 outToken; // of the cycle `fold` stopped at
    }

    /// @dev A cycle's field does not fit the encoding (a probability of 2^60 or more, accepted above 255).
    error PackedField(uint256 cycle);

    /// @notice Folds records `r.next`… of `data` (a run of `r.gamma` whose length `count` checked) into `r`: per
    /// record its cycle leaf (`leaf`: the record's bytes hashed once, straight from calldata) into `leaves` (c below
    /// its length), the state step S(c) = keccak256(S(c-1) ‖ leaf_c) and v1's emission of a cycle that does not end
    /// the job (accepted + 1 tokens, a rejection counted when accepted < γ). It stops at the first record that may
    /// end the job or is malformed (accepted + 1 reaching `room`, outToken EOS, any proposal EOS, accepted > γ):
    /// that record's leaf and state step are done, and `ended` returns true with `r.next` at it and its accepted and
    /// outToken in `r`, for the caller's emission rule (TranscriptSettlement._step, which also cuts). Otherwise it
    /// folds the whole run.
    /// @dev Settlement's hot path: one assembly block, nothing allocated, nothing called per record. The leaf
    /// preimage (the cycle's 4 bytes, then the record) is built past the free memory pointer and left there
    /// unallocated (nothing else runs meanwhile). It restates `leaf`, TranscriptTypes.nextState and _step's case
    /// where nothing is cut; tests/test_transcript_settlement.py checks all three against node/protocol.py.
    function fold(bytes calldata data, Run memory r, bytes32[] memory leaves) internal pure returns (bool ended) {
        uint256 rec;
        uint256 end;
        assembly ("memory-safe") {
            let size := add(FIXED, mul(PROPOSAL, mload(r)))
            rec := add(add(data.offset, HEADER), mul(mload(add(r, 0x40)), size))
            end := add(add(data.offset, HEADER), mul(mload(add(r, 0x60)), size))
        }
        return _fold(rec, end, r, leaves);
    }

    /// @dev `fold` over the records at calldata [rec, end), record r.next first.
    function _fold(uint256 rec, uint256 end, Run memory r, bytes32[] memory leaves) private pure returns (bool ended) {
        assembly ("memory-safe") {
            // whether any proposal of the record at calldata `record` (ending at `limit`) has token `eos`
            function anyEos(record, limit, eos) -> m {
                for { let src := add(record, FIXED) } lt(src, limit) { src := add(src, PROPOSAL) } {
                    m := or(m, eq(shr(224, calldataload(src)), eos))
                }
            }
            let size := add(FIXED, mul(PROPOSAL, mload(r)))
            let c := mload(add(r, 0x40))
            let state := mload(add(r, 0x80))
            let room := mload(add(r, 0xa0))
            let rejected := mload(add(r, 0xc0))
            for {} lt(rec, end) {} {
                let buf := mload(0x40)
                mstore(buf, shl(224, c)) // c < 2^32: a calldata run cannot hold more records
                calldatacopy(add(buf, 4), rec, size)
                let at := add(leaves, shl(5, add(c, 1)))
                mstore(at, keccak256(buf, add(4, size)))
                mstore(0x00, state)
                mstore(0x20, mload(at))
                state := keccak256(0x00, 0x40)
                let w := shr(216, calldataload(rec)) // accepted (8 bits), outToken (32 bits)
                let accepted := shr(32, w)
                // maxTokens reached, accepted > γ, the outToken or a proposal EOS: the caller's to count
                if or(
                    or(iszero(lt(add(accepted, 1), room)), gt(accepted, mload(r))),
                    or(eq(and(w, 0xffffffff), mload(add(r, 0x20))), anyEos(rec, add(rec, size), mload(add(r, 0x20))))
                ) {
                    ended := 1
                    mstore(add(r, 0xe0), accepted)
                    mstore(add(r, 0x100), and(w, 0xffffffff))
                    break
                }
                room := sub(room, add(accepted, 1))
                rejected := add(rejected, lt(accepted, mload(r)))
                c := add(c, 1)
                rec := add(rec, size)
            }
            mstore(add(r, 0x40), c)
            mstore(add(r, 0x80), state)
            mstore(add(r, 0xa0), room)
            mstore(add(r, 0xc0), rejected)
        }
    }

    /// @notice The cycle leaf of record `c` of `data` (a run whose length `count` checked) as cycle `cycle` of its
    /// job: keccak256(abi.encodePacked(uint32 cycle, record bytes)). What the state chain steps on and the cycles root
    /// holds; its preimage (4 + 5 + 19γ bytes) is never 64 bytes long, so no inner node of that tree passes for one.
    function leaf(bytes calldata data, uint256 gamma, uint256 c, uint256 cycle) internal pure returns (bytes32 h) {
        uint256 record = recordAt(data, gamma, c);
        assembly ("memory-safe") {
            let size := add(FIXED, mul(PROPOSAL, gamma))
            let buf := mload(0x40)
            mstore(buf, shl(224, cycle))
            calldatacopy(add(buf, 4), record, size)
            h := keccak256(buf, add(4, size))
        }
    }

    /// @notice `leaf` of a cycle given as fields (a force move's Draft and Verification, or an on-chain answer):
    /// it encodes them as a record in scratch memory and hashes that. Reverts {PackedField} when one does not fit
    /// (callers have checked the rule first, which bounds q and p by WAD and accepted by γ).
    function leafOf(
        uint256 cycle,
        uint32[] memory tokens,
        uint64[] memory q,
        uint64[] memory p,
        uint256 accepted,
        uint256 outToken
    ) internal pure returns (bytes32 h) {
        uint256 gamma = tokens.length;
        bool bad = q.length != gamma || p.length != gamma || accepted > 0xff || outToken > 0xffffffff;
        assembly ("memory-safe") {
            let buf := mload(0x40)
            mstore(buf, or(or(shl(224, cycle), shl(216, accepted)), shl(184, outToken)))
            let at := add(buf, add(4, FIXED))
            for { let i := 0 } and(lt(i, gamma), iszero(bad)) { i := add(i, 1) } {
                let qi := mload(add(q, shl(5, add(i, 1))))
                let pi := mload(add(p, shl(5, add(i, 1))))
                bad := or(bad, or(gt(qi, _MASK60), gt(pi, _MASK60)))
                let word := or(or(shl(120, mload(add(tokens, shl(5, add(i, 1))))), shl(60, qi)), pi)
                mstore(at, shl(104, word))
                at := add(at, PROPOSAL)
            }
            h := keccak256(buf, sub(at, buf))
        }
        if (bad) revert PackedField(cycle);
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
