// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title CycleRecord
/// @notice The per-cycle record that the market stores (as a hash) and disputes prove against.
/// Mirrored by `node/protocol.py::cycle_record_hash`.
library CycleRecord {
    /// @notice keccak256(abi.encode(draftRoot, p, accepted, outToken)).
    function hash(bytes32 draftRoot, uint64[] memory p, uint32 accepted, uint32 outToken)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(draftRoot, p, accepted, outToken));
    }
}
