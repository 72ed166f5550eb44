// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {TranscriptSigner} from "../lib/TranscriptSigner.sol";
import {TranscriptTypes} from "../lib/TranscriptTypes.sol";

/// @title TranscriptTypesHarness
/// @notice Exposes `TranscriptTypes` and `TranscriptSigner` as external calls, so the tests can check that Python's
/// typed data, signatures and state chain agree with the contracts'. Its own address is the verifying contract.
contract TranscriptTypesHarness is TranscriptSigner {
    /// @notice The three type strings, as the contracts hash them.
    /// @return draft The Draft type.
    /// @return verification The Verification type.
    /// @return settlement The Settlement type.
    function typeStrings()
        external
        pure
        returns (string memory draft, string memory verification, string memory settlement)
    {
        return (TranscriptTypes.DRAFT_TYPE, TranscriptTypes.VERIFICATION_TYPE, TranscriptTypes.SETTLEMENT_TYPE);
    }

    /// @notice This contract's EIP-712 domain separator.
    /// @return The separator.
    function domainSeparator() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    /// @notice See {TranscriptTypes-hashDraft}.
    /// @param d The draft.
    /// @return The struct hash.
    function hashDraft(TranscriptTypes.Draft memory d) external pure returns (bytes32) {
        return TranscriptTypes.hashDraft(d);
    }

    /// @notice See {TranscriptTypes-hashVerification}.
    /// @param v The verification.
    /// @return The struct hash.
    function hashVerification(TranscriptTypes.Verification memory v) external pure returns (bytes32) {
        return TranscriptTypes.hashVerification(v);
    }

    /// @notice See {TranscriptTypes-hashSettlement}.
    /// @param s The settlement.
    /// @return The struct hash.
    function hashSettlement(TranscriptTypes.Settlement memory s) external pure returns (bytes32) {
        return TranscriptTypes.hashSettlement(s);
    }

    /// @notice The `_hashTypedDataV4` digest of a Draft.
    /// @param d The draft.
    /// @return The digest.
    function draftDigest(TranscriptTypes.Draft memory d) external view returns (bytes32) {
        return _draftDigest(d);
    }

    /// @notice The `_hashTypedDataV4` digest of a Verification.
    /// @param v The verification.
    /// @return The digest.
    function verificationDigest(TranscriptTypes.Verification memory v) external view returns (bytes32) {
        return _verificationDigest(v);
    }

    /// @notice The `_hashTypedDataV4` digest of a Settlement.
    /// @param s The settlement.
    /// @return The digest.
    function settlementDigest(TranscriptTypes.Settlement memory s) external view returns (bytes32) {
        return _settlementDigest(s);
    }

    /// @notice Who signed a Draft.
    /// @param d The draft.
    /// @param signature 65 bytes r ‖ s ‖ v.
    /// @return The signer.
    function recoverDraft(TranscriptTypes.Draft memory d, bytes memory signature) external view returns (address) {
        return _recoverSigner(_draftDigest(d), signature);
    }

    /// @notice Who signed a Verification.
    /// @param v The verification.
    /// @param signature 65 bytes r ‖ s ‖ v.
    /// @return The signer.
    function recoverVerification(TranscriptTypes.Verification memory v, bytes memory signature)
        external
        view
        returns (address)
    {
        return _recoverSigner(_verificationDigest(v), signature);
    }

    /// @notice Who signed a Settlement.
    /// @param s The settlement.
    /// @param signature 65 bytes r ‖ s ‖ v.
    /// @return The signer.
    function recoverSettlement(TranscriptTypes.Settlement memory s, bytes memory signature)
        external
        view
        returns (address)
    {
        return _recoverSigner(_settlementDigest(s), signature);
    }

    /// @notice Reverts {TranscriptWrongSigner} unless the Draft was signed by `drafter`.
    /// @param d The draft.
    /// @param signature 65 bytes r ‖ s ‖ v.
    /// @param drafter The job's drafter.
    function requireDraftSigner(TranscriptTypes.Draft memory d, bytes memory signature, address drafter)
        external
        view
    {
        _requireSigner(_draftDigest(d), signature, drafter);
    }

    /// @notice Reverts unless the Settlement was signed by both `drafter` and `verifier`.
    /// @param s The settlement.
    /// @param drafterSignature The drafter's signature.
    /// @param verifierSignature The verifier's signature.
    /// @param drafter The job's drafter.
    /// @param verifier The job's verifier.
    function requireSettlementSigners(
        TranscriptTypes.Settlement memory s,
        bytes memory drafterSignature,
        bytes memory verifierSignature,
        address drafter,
        address verifier
    ) external view {
        bytes32 digest = _settlementDigest(s);
        _requireSigner(digest, drafterSignature, drafter);
        _requireSigner(digest, verifierSignature, verifier);
    }

    /// @notice See {TranscriptTypes-genesisState}.
    /// @param jobId The job.
    /// @param salt The drafter's salt.
    /// @return S(-1).
    function genesisState(uint256 jobId, uint64 salt) external pure returns (bytes32) {
        return TranscriptTypes.genesisState(jobId, salt);
    }

    /// @notice See {TranscriptTypes-nextState}.
    /// @param prevState S(c-1).
    /// @param recordHash The record hash of cycle c.
    /// @return S(c).
    function nextState(bytes32 prevState, bytes32 recordHash) external pure returns (bytes32) {
        return TranscriptTypes.nextState(prevState, recordHash);
    }

    /// @notice See {TranscriptTypes-finalState}.
    /// @param genesis S(-1).
    /// @param recordHashes The record hashes in cycle order.
    /// @return S(n-1).
    function finalState(bytes32 genesis, bytes32[] memory recordHashes) external pure returns (bytes32) {
        return TranscriptTypes.finalState(genesis, recordHashes);
    }

    /// @notice See {TranscriptTypes-recordLeaf}.
    /// @param cycle The cycle.
    /// @param recordHash Its record hash.
    /// @return The leaf.
    function recordLeaf(uint32 cycle, bytes32 recordHash) external pure returns (bytes32) {
        return TranscriptTypes.recordLeaf(cycle, recordHash);
    }

    /// @notice See {TranscriptTypes-recordsRoot}.
    /// @param recordHashes The record hashes in cycle order.
    /// @return The records root.
    function recordsRoot(bytes32[] memory recordHashes) external pure returns (bytes32) {
        return TranscriptTypes.recordsRoot(recordHashes);
    }

    /// @notice See {TranscriptTypes-foldRecords}.
    /// @param genesis S(-1).
    /// @param records The records of cycles 0..n-1.
    /// @return state S(n-1).
    /// @return root The records root.
    function foldRecords(bytes32 genesis, TranscriptTypes.Record[] calldata records)
        external
        pure
        returns (bytes32 state, bytes32 root)
    {
        return TranscriptTypes.foldRecords(genesis, records);
    }

    /// @notice Whether `proof` shows that cycle `cycle` had record hash `recordHash` under `root`.
    /// @param proof The sibling path (`protocol.record_proof`).
    /// @param root The records root.
    /// @param cycle The cycle.
    /// @param recordHash Its record hash.
    /// @return Whether OpenZeppelin's `MerkleProof.verify` accepts it.
    function verifyRecord(bytes32[] memory proof, bytes32 root, uint32 cycle, bytes32 recordHash)
        external
        pure
        returns (bool)
    {
        return MerkleProof.verify(proof, root, TranscriptTypes.recordLeaf(cycle, recordHash));
    }
}
