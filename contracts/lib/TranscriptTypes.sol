// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {SpecMath} from "./SpecMath.sol";

/// @title TranscriptTypes
/// @notice The typed data of transcript mode (docs/protocol.md, "Transcript mode (v2): messages and state"): the
/// EIP-712 struct hashes of `Draft`, `Verification` and `Settlement`, the state chain over the cycles' packed bytes
/// (their cycle leaves, `PackedCycles.leaf`) and the cycles root that pulls and challenges prove against. Mirrored by `node/protocol.py` (state chain, cycles root) and
/// `node/chain/transcript_messages.py` (typed data, through eth-account); `tests/vectors/transcript.json` pins them.
/// @dev All functions are `internal pure`: the domain, and so the digest, belongs to `TranscriptSigner`.
library TranscriptTypes {
    /// @notice A drafter's message for one cycle: its commitment and its counter-signature of `prevState`.
    struct Draft {
        uint256 jobId;
        uint32 cycle;
        bytes32 prevState;
        bytes32 draftRoot;
        uint32[] tokens;
        uint64[] q;
        uint64 salt;
    }

    /// @notice A verifier's message for one cycle: what v1 would post and record, and the state after it.
    struct Verification {
        uint256 jobId;
        uint32 cycle;
        bytes32 draftRoot;
        uint64[] p;
        bytes32 reveal;
        uint32 accepted;
        uint32 outToken;
        bytes32 state;
    }

    /// @notice The end of a job, signed by both parties with one digest.
    struct Settlement {
        uint256 jobId;
        uint32 cycles;
        bytes32 state;
        uint32 tokensOut;
    }

    string internal constant DRAFT_TYPE =
        "Draft(uint256 jobId,uint32 cycle,bytes32 prevState,bytes32 draftRoot,uint32[] tokens,uint64[] q,uint64 salt)";
    string internal constant VERIFICATION_TYPE =
        "Verification(uint256 jobId,uint32 cycle,bytes32 draftRoot,uint64[] p,bytes32 reveal,uint32 accepted,uint32 outToken,bytes32 state)";
    string internal constant SETTLEMENT_TYPE =
        "Settlement(uint256 jobId,uint32 cycles,bytes32 state,uint32 tokensOut)";

    bytes32 internal constant DRAFT_TYPEHASH = keccak256(bytes(DRAFT_TYPE));
    bytes32 internal constant VERIFICATION_TYPEHASH = keccak256(bytes(VERIFICATION_TYPE));
    bytes32 internal constant SETTLEMENT_TYPEHASH = keccak256(bytes(SETTLEMENT_TYPE));

    /// @notice Domain tag of the genesis state: keccak256("verispec.transcript").
    bytes32 internal constant TRANSCRIPT_TAG = keccak256("verispec.transcript");

    /// @notice A cycles root was asked of no cycles.
    error TranscriptNoCycles();

    /// @notice EIP-712 hashStruct of a Draft.
    /// @param d The draft.
    /// @return The struct hash.
    function hashDraft(Draft memory d) internal pure returns (bytes32) {
        return keccak256(
            abi.encode(
                DRAFT_TYPEHASH,
                d.jobId,
                d.cycle,
                d.prevState,
                d.draftRoot,
                keccak256(abi.encodePacked(d.tokens)),
                keccak256(abi.encodePacked(d.q)),
                d.salt
            )
        );
    }

    /// @notice EIP-712 hashStruct of a Verification.
    /// @param v The verification.
    /// @return The struct hash.
    function hashVerification(Verification memory v) internal pure returns (bytes32) {
        // two halves: nine words in one abi.encode is past the legacy code generator's stack
        bytes memory head = abi.encode(VERIFICATION_TYPEHASH, v.jobId, v.cycle, v.draftRoot, keccak256(abi.encodePacked(v.p)));
        return keccak256(bytes.concat(head, abi.encode(v.reveal, v.accepted, v.outToken, v.state)));
    }

    /// @notice EIP-712 hashStruct of a Settlement.
    /// @param s The settlement.
    /// @return The struct hash.
    function hashSettlement(Settlement memory s) internal pure returns (bytes32) {
        return keccak256(abi.encode(SETTLEMENT_TYPEHASH, s.jobId, s.cycles, s.state, s.tokensOut));
    }

    /// @notice The state before cycle 0, S(-1) = keccak256(abi.encode(TRANSCRIPT_TAG, jobId, salt)).
    /// @param jobId The job.
    /// @param salt The drafter's salt, fixed by its Draft of cycle 0.
    /// @return The genesis state.
    function genesisState(uint256 jobId, uint64 salt) internal pure returns (bytes32) {
        return keccak256(abi.encode(TRANSCRIPT_TAG, jobId, salt));
    }

    /// @notice One step of the state chain, S(c) = keccak256(abi.encodePacked(S(c-1), leaf_c)), leaf_c the cycle
    /// leaf of cycle c (`PackedCycles.leaf`: its packed bytes, hashed once).
    /// @param prevState S(c-1).
    /// @param cycleLeaf The cycle leaf of cycle c.
    /// @return next S(c).
    function nextState(bytes32 prevState, bytes32 cycleLeaf) internal pure returns (bytes32 next) {
        assembly ("memory-safe") {
            mstore(0x00, prevState)
            mstore(0x20, cycleLeaf)
            next := keccak256(0x00, 0x40)
        }
    }

    /// @notice The state after the cycles whose leaves are `leaves`, folded from `genesis`.
    /// @param genesis S(-1).
    /// @param leaves The cycle leaves of cycles 0, 1, ... in order.
    /// @return state S(n-1) (the genesis for no cycles).
    function finalState(bytes32 genesis, bytes32[] memory leaves) internal pure returns (bytes32 state) {
        state = genesis;
        uint256 n = leaves.length;
        for (uint256 c; c < n; ++c) {
            state = nextState(state, leaves[c]);
        }
    }

    /// @notice The cycles root over the cycle leaves of cycles 0..n-1 (`SpecMath.root`), what settlement stores and
    /// pulls and rule challenges prove against. Reverts {TranscriptNoCycles} for no cycles.
    /// @param leaves The cycle leaves in cycle order (the leaves bind their cycle index).
    /// @return The root.
    function cyclesRoot(bytes32[] memory leaves) internal pure returns (bytes32) {
        if (leaves.length == 0) revert TranscriptNoCycles();
        return SpecMath.root(leaves);
    }
}
