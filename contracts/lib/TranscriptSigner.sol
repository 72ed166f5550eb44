// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {TranscriptTypes} from "./TranscriptTypes.sol";

/// @title TranscriptSigner
/// @notice The EIP-712 domain of transcript mode (name "verispec", version "2", this chain, this contract: the market
/// that inherits it) and the recovery of who signed a `Draft`, `Verification` or `Settlement` (docs/protocol.md,
/// "Transcript mode (v2): messages and state").
/// @dev Recovery is OpenZeppelin's `ECDSA.recover`: 65-byte `r ‖ s ‖ v` signatures, v ∈ {27, 28}, low s; anything
/// else reverts with ECDSA's own errors, so a malleated copy of a signature never recovers to its signer.
abstract contract TranscriptSigner is EIP712 {
    /// @notice The EIP-712 domain name.
    string internal constant DOMAIN_NAME = "verispec";
    /// @notice The EIP-712 domain version: the protocol version whose messages these are.
    string internal constant DOMAIN_VERSION = "2";

    /// @notice A message was signed by `recovered`, not by `expected`.
    error TranscriptWrongSigner(address expected, address recovered);

    constructor() EIP712(DOMAIN_NAME, DOMAIN_VERSION) {}

    /// @notice The digest a `Draft` is signed as, under this contract's domain.
    function _draftDigest(TranscriptTypes.Draft memory d) internal view returns (bytes32) {
        return _hashTypedDataV4(TranscriptTypes.hashDraft(d));
    }

    /// @notice The digest a `Verification` is signed as, under this contract's domain.
    function _verificationDigest(TranscriptTypes.Verification memory v) internal view returns (bytes32) {
        return _hashTypedDataV4(TranscriptTypes.hashVerification(v));
    }

    /// @notice The digest a `Settlement` is signed as (by both parties), under this contract's domain.
    function _settlementDigest(TranscriptTypes.Settlement memory s) internal view returns (bytes32) {
        return _hashTypedDataV4(TranscriptTypes.hashSettlement(s));
    }

    /// @notice The signer of `digest`; reverts with ECDSA's errors for a malformed or non-canonical signature.
    function _recoverSigner(bytes32 digest, bytes memory signature) internal pure returns (address) {
        return ECDSA.recover(digest, signature);
    }

    /// @notice Reverts {TranscriptWrongSigner} unless `signature` of `digest` is by `expected`.
    function _requireSigner(bytes32 digest, bytes memory signature, address expected) internal pure {
        address recovered = ECDSA.recover(digest, signature);
        if (recovered != expected) revert TranscriptWrongSigner(expected, recovered);
    }
}
