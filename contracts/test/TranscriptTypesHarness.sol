// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {PackedCycles} from "../lib/PackedCycles.sol";
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
    /// @param cycleLeaf The cycle leaf of cycle c.
    /// @return S(c).
    function nextState(bytes32 prevState, bytes32 cycleLeaf) external pure returns (bytes32) {
        return TranscriptTypes.nextState(prevState, cycleLeaf);
    }

    /// @notice See {TranscriptTypes-finalState}.
    /// @param genesis S(-1).
    /// @param leaves The cycle leaves in cycle order.
    /// @return S(n-1).
    function finalState(bytes32 genesis, bytes32[] memory leaves) external pure returns (bytes32) {
        return TranscriptTypes.finalState(genesis, leaves);
    }

    /// @notice See {PackedCycles-leaf}: the leaf of the one record of `run` (a packed run) as cycle `cycle`.
    /// @param cycle The cycle.
    /// @param run A packed run of one record.
    /// @return The leaf.
    function cycleLeaf(uint32 cycle, bytes calldata run) external pure returns (bytes32) {
        uint256 gamma = uint8(run[0]);
        uint256 n = PackedCycles.count(run, gamma);
        if (n != 1) revert PackedCycles.PackedLength(run.length, PackedCycles.recordSize(gamma));
        return PackedCycles.leaf(run, gamma, 0, cycle);
    }

    /// @notice See {PackedCycles-leafOf}.
    /// @param cycle The cycle.
    /// @param tokens The Draft's tokens.
    /// @param q The Draft's q.
    /// @param p The Verification's p.
    /// @param accepted The Verification's accepted.
    /// @param outToken The Verification's outToken.
    /// @return The leaf.
    function cycleLeafOf(
        uint32 cycle,
        uint32[] memory tokens,
        uint64[] memory q,
        uint64[] memory p,
        uint32 accepted,
        uint32 outToken
    ) external pure returns (bytes32) {
        return PackedCycles.leafOf(cycle, tokens, q, p, accepted, outToken);
    }

    /// @notice A packed run's state after its cycles from `genesis` and its cycles root, as settlement folds it.
    /// @param genesis S(-1).
    /// @param run The packed run.
    /// @return state S(n-1).
    /// @return root The cycles root.
    function foldRun(bytes32 genesis, bytes calldata run) external pure returns (bytes32 state, bytes32 root) {
        uint256 gamma = uint8(run[0]);
        uint256 n = PackedCycles.count(run, gamma);
        bytes32[] memory leaves = new bytes32[](n);
        for (uint256 c; c < n; ++c) {
            leaves[c] = PackedCycles.leaf(run, gamma, c, c);
        }
        return (TranscriptTypes.finalState(genesis, leaves), TranscriptTypes.cyclesRoot(leaves));
    }

    /// @notice See {TranscriptTypes-cyclesRoot}.
    /// @param leaves The cycle leaves in cycle order.
    /// @return The cycles root.
    function cyclesRoot(bytes32[] memory leaves) external pure returns (bytes32) {
        return TranscriptTypes.cyclesRoot(leaves);
    }

    /// @notice Whether `proof` shows that cycle `cycle` had leaf `cycleLeaf` under `root`.
    /// @param proof The sibling path (`protocol.cycle_proof`).
    /// @param root The cycles root.
    /// @param cycleLeaf The cycle's leaf (it binds the cycle index).
    /// @return Whether OpenZeppelin's `MerkleProof.verify` accepts it.
    function verifyCycle(bytes32[] memory proof, bytes32 root, bytes32 cycleLeaf) external pure returns (bool) {
        return MerkleProof.verify(proof, root, cycleLeaf);
    }
}
