// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {CycleRecord} from "./CycleRecord.sol";
import {SpecMath} from "./SpecMath.sol";

/// @title TranscriptTypes
/// @notice The typed data of transcript mode (docs/protocol.md, "Transcript mode (v2): messages and state"): the
/// EIP-712 struct hashes of `Draft`, `Verification` and `Settlement`, the state chain over v1 cycle records and
/// the records root that challenges prove against. Mirrored by `node/protocol.py` (state chain, records root) and
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

    /// @notice One v1 cycle record (docs/protocol.md "Project decisions": Cycle record), as posted at settlement.
    struct Record {
        bytes32 draftRoot;
        uint64[] p;
        uint32 accepted;
        uint32 outToken;
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

    /// @notice A records root was asked of no records.
    error TranscriptNoRecords();

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

    /// @notice One step of the state chain, S(c) = keccak256(abi.encodePacked(S(c-1), recordHash_c)).
    /// @param prevState S(c-1).
    /// @param recordHash The record hash of cycle c (`CycleRecord.hash`).
    /// @return next S(c).
    function nextState(bytes32 prevState, bytes32 recordHash) internal pure returns (bytes32 next) {
        assembly ("memory-safe") {
            mstore(0x00, prevState)
            mstore(0x20, recordHash)
            next := keccak256(0x00, 0x40)
        }
    }

    /// @notice The leaf of cycle `cycle`'s record in the records root:
    /// keccak256(bytes.concat(keccak256(abi.encode(cycle, recordHash)))).
    /// @param cycle The cycle (the leaf binds it: commutative pair hashing does not bind a leaf's position).
    /// @param recordHash The record hash of that cycle.
    /// @return leaf The leaf.
    function recordLeaf(uint32 cycle, bytes32 recordHash) internal pure returns (bytes32 leaf) {
        assembly ("memory-safe") {
            mstore(0x00, and(cycle, 0xffffffff)) // a uint32's bits above 32 are not guaranteed clean here
            mstore(0x20, recordHash)
            mstore(0x00, keccak256(0x00, 0x40))
            leaf := keccak256(0x00, 0x20)
        }
    }

    /// @notice The state after the records whose hashes are `recordHashes`, folded from `genesis`.
    /// @param genesis S(-1).
    /// @param recordHashes The record hashes of cycles 0, 1, ... in order.
    /// @return state S(n-1) (the genesis for no records).
    function finalState(bytes32 genesis, bytes32[] memory recordHashes) internal pure returns (bytes32 state) {
        state = genesis;
        uint256 n = recordHashes.length;
        for (uint256 c; c < n; ++c) {
            state = nextState(state, recordHashes[c]);
        }
    }

    /// @notice The records root over the record hashes of cycles 0..n-1 (`SpecMath.root` over `recordLeaf`s).
    /// @dev Reverts {TranscriptNoRecords} for no records.
    /// @param recordHashes The record hashes in cycle order.
    /// @return The root.
    function recordsRoot(bytes32[] memory recordHashes) internal pure returns (bytes32) {
        uint256 n = recordHashes.length;
        if (n == 0) revert TranscriptNoRecords();
        bytes32[] memory leaves = new bytes32[](n);
        for (uint256 c; c < n; ++c) {
            leaves[c] = recordLeaf(uint32(c), recordHashes[c]);
        }
        return SpecMath.root(leaves);
    }

    /// @notice Settlement's one pass over posted records: the state they fold to from `genesis` and their root.
    /// @dev Each record is hashed from calldata (`CycleRecord.hashCalldata`): a p word with bits above uint64 gives a
    /// hash no well-formed record has, so the state matches nothing signed. Reverts {TranscriptNoRecords} for none.
    /// A calldata array cannot hold 2^32 records at any gas limit, so the cycle index fits uint32.
    /// @param genesis S(-1) of the job.
    /// @param records The records of cycles 0..n-1 in order.
    /// @return state S(n-1).
    /// @return root The records root.
    function foldRecords(bytes32 genesis, Record[] calldata records)
        internal
        pure
        returns (bytes32 state, bytes32 root)
    {
        uint256 n = records.length;
        if (n == 0) revert TranscriptNoRecords();
        bytes32[] memory leaves = new bytes32[](n);
        state = genesis;
        for (uint256 c; c < n; ++c) {
            Record calldata r = records[c];
            bytes32 recordHash = CycleRecord.hashCalldata(r.draftRoot, r.p, r.accepted, r.outToken);
            state = nextState(state, recordHash);
            leaves[c] = recordLeaf(uint32(c), recordHash);
        }
        root = SpecMath.root(leaves);
    }
}
