// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title CycleRecord
/// @notice The per-cycle record that the market stores (as a hash) and disputes prove against:
/// keccak256(abi.encode(draftRoot, uint64[] p, uint32 accepted, uint32 outToken)).
/// Mirrored by `node/protocol.py::cycle_record_hash`.
/// @dev One kernel (`_hash`: the encoding's head and length word, then keccak) with two front doors that
/// only place p's words after it: `hash` (memory) and `hashCalldata` (the market's hot path). Nothing is
/// allocated: the encoding is built in scratch memory past the free memory pointer.
library CycleRecord {
    /// @notice keccak256(abi.encode(draftRoot, p, accepted, outToken)).
    /// @param draftRoot The cycle's draft root.
    /// @param p The target probabilities the verifier posted, WAD.
    /// @param accepted The accepted prefix length n.
    /// @param outToken The residual / bonus sample.
    /// @return The record hash.
    function hash(bytes32 draftRoot, uint64[] memory p, uint32 accepted, uint32 outToken)
        internal
        pure
        returns (bytes32)
    {
        uint256 buffer;
        assembly ("memory-safe") {
            buffer := mload(0x40)
            mcopy(add(buffer, 0xa0), add(p, 0x20), shl(5, mload(p)))
        }
        return _hash(buffer, draftRoot, p.length, accepted, outToken);
    }

    /// @notice `hash` of a calldata `p`, encoded in place from calldata.
    /// @dev p's elements are hashed as the raw calldata words: for well-formed input this is exactly `hash`; a
    /// word with bits above uint64 yields a hash that no ABI-encoded preimage matches, so callers range-check p
    /// first (the market's verification does, through SpecMath.countAcceptedCalldata).
    /// @param draftRoot The cycle's draft root.
    /// @param p The target probabilities the verifier posted, WAD.
    /// @param accepted The accepted prefix length n.
    /// @param outToken The residual / bonus sample.
    /// @return The record hash.
    function hashCalldata(bytes32 draftRoot, uint64[] calldata p, uint32 accepted, uint32 outToken)
        internal
        pure
        returns (bytes32)
    {
        uint256 buffer;
        assembly ("memory-safe") {
            buffer := mload(0x40)
            calldatacopy(add(buffer, 0xa0), p.offset, shl(5, p.length))
        }
        return _hash(buffer, draftRoot, p.length, accepted, outToken);
    }

    /// @dev The encoding rule. abi.encode(draftRoot, p, accepted, outToken) is the head (draftRoot, the offset
    /// of p = 0x80, accepted, outToken), then p's length and its `length` words, which the caller has put at
    /// buffer + 0xa0. Writes the five head words at `buffer` and hashes the whole encoding.
    function _hash(uint256 buffer, bytes32 draftRoot, uint256 length, uint256 accepted, uint256 outToken)
        private
        pure
        returns (bytes32 h)
    {
        assembly ("memory-safe") {
            mstore(buffer, draftRoot)
            mstore(add(buffer, 0x20), 0x80)
            mstore(add(buffer, 0x40), accepted)
            mstore(add(buffer, 0x60), outToken)
            mstore(add(buffer, 0x80), length)
            h := keccak256(buffer, add(0xa0, shl(5, length)))
        }
    }
}
