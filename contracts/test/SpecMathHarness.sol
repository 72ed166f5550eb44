// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {CycleRecord} from "../lib/CycleRecord.sol";
import {SpecMath} from "../lib/SpecMath.sol";

/// @title SpecMathHarness
/// @notice Exposes the internal `SpecMath` and `CycleRecord` libraries (and OpenZeppelin's Merkle proof check
/// that draft roots must satisfy) as external calls, for replaying the shared vectors. Every function that
/// takes arrays has a memory door (the conformance surface) and a calldata door (what the market calls);
/// the vector tests replay each array vector through both.
contract SpecMathHarness {
    /// @notice See {SpecMath-leaf}.
    function leaf(uint256 jobId, uint32 cycle, uint32 index, uint32 token, uint64 qWad)
        external
        pure
        returns (bytes32)
    {
        return SpecMath.leaf(jobId, cycle, index, token, qWad);
    }

    /// @notice See {SpecMath-root} (memory door).
    function root(bytes32[] memory leaves) external pure returns (bytes32) {
        return SpecMath.root(leaves);
    }

    /// @notice See {SpecMath-draftRootCalldata} (calldata door of `leaf` and `root`).
    function draftRootCalldata(uint256 jobId, uint32 cycle, uint32[] calldata tokens, uint64[] calldata q)
        external
        pure
        returns (bytes32)
    {
        return SpecMath.draftRootCalldata(jobId, cycle, tokens, q);
    }

    /// @notice See {SpecMath-uniform}.
    function uniform(bytes32 h) external pure returns (uint64) {
        return SpecMath.uniform(h);
    }

    /// @notice See {SpecMath-draftUniform}.
    function draftUniform(uint256 jobId, uint32 cycle, uint32 index) external pure returns (uint64) {
        return SpecMath.draftUniform(jobId, cycle, index);
    }

    /// @notice See {SpecMath-acceptUniform}.
    function acceptUniform(bytes32 reveal, bytes32 draftRoot, uint32 index, uint64 salt)
        external
        pure
        returns (uint64)
    {
        return SpecMath.acceptUniform(reveal, draftRoot, index, salt);
    }

    /// @notice See {SpecMath-residualUniform}.
    function residualUniform(bytes32 reveal, bytes32 draftRoot, uint64 salt) external pure returns (uint64) {
        return SpecMath.residualUniform(reveal, draftRoot, salt);
    }

    /// @notice See {SpecMath-countAccepted} (memory door).
    function countAccepted(bytes32 reveal, bytes32 draftRoot, uint64[] memory q, uint64[] memory p, uint64 salt)
        external
        pure
        returns (uint256)
    {
        return SpecMath.countAccepted(reveal, draftRoot, q, p, salt);
    }

    /// @notice See {SpecMath-countAcceptedCalldata} (calldata door).
    function countAcceptedCalldata(
        bytes32 reveal,
        bytes32 draftRoot,
        uint64[] calldata q,
        uint64[] calldata p,
        uint64 salt
    ) external pure returns (uint256) {
        return SpecMath.countAcceptedCalldata(reveal, draftRoot, q, p, salt);
    }

    /// @notice See {SpecMath-isDraftProbability}.
    function isDraftProbability(uint256 q) external pure returns (bool) {
        return SpecMath.isDraftProbability(q);
    }

    /// @notice See {SpecMath-isTargetProbability}.
    function isTargetProbability(uint256 p) external pure returns (bool) {
        return SpecMath.isTargetProbability(p);
    }

    /// @notice See {SpecMath-chainHash}.
    function chainHash(bytes32 value) external pure returns (bytes32) {
        return SpecMath.chainHash(value);
    }

    /// @notice See {CycleRecord-hash} (memory door).
    function cycleRecordHash(bytes32 draftRoot, uint64[] memory p, uint32 accepted, uint32 outToken)
        external
        pure
        returns (bytes32)
    {
        return CycleRecord.hash(draftRoot, p, accepted, outToken);
    }

    /// @notice See {CycleRecord-hashCalldata} (calldata door).
    function cycleRecordHashCalldata(bytes32 draftRoot, uint64[] calldata p, uint32 accepted, uint32 outToken)
        external
        pure
        returns (bytes32)
    {
        return CycleRecord.hashCalldata(draftRoot, p, accepted, outToken);
    }

    /// @notice OpenZeppelin `MerkleProof.verify`, the check single-leaf dispute proofs go through.
    function verifyProof(bytes32[] memory proof, bytes32 draftRoot, bytes32 leafHash) external pure returns (bool) {
        return MerkleProof.verify(proof, draftRoot, leafHash);
    }
}
