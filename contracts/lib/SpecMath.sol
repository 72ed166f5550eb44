// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Hashes} from "@openzeppelin/contracts/utils/cryptography/Hashes.sol";

/// @title SpecMath
/// @notice The protocol math of PROTOCOL.md §3-§4: draft leaves and root, public and hash-chain
/// uniforms, and the on-chain accept rule. Mirrored bit for bit by `node/protocol.py`; the
/// shared vectors in `tests/vectors/` keep the two from drifting apart.
/// @dev All functions are `internal pure` so contracts inline them without linking.
library SpecMath {
    uint256 internal constant WAD = 1e18;
    bytes32 internal constant DRAFT_TAG = keccak256("verispec.draft");
    bytes32 internal constant ACCEPT_TAG = keccak256("verispec.accept");
    bytes32 internal constant RESIDUAL_TAG = keccak256("verispec.residual");

    /// @dev `countAccepted` got q and p arrays of different lengths.
    error SpecMathLengthMismatch(uint256 qLength, uint256 pLength);
    /// @dev A draft probability was 0 (the draft cannot propose a token it gives no mass).
    error SpecMathZeroDraftProbability(uint256 index);
    /// @dev A probability was above WAD.
    error SpecMathProbabilityAboveWad(uint256 index, uint256 value);
    /// @dev `root` was called with no leaves.
    error SpecMathEmptyTree();

    /// @notice Leaf of draft proposal `index` in `cycle` of `jobId`, double-hashed (OpenZeppelin Merkle convention).
    function leaf(uint256 jobId, uint32 cycle, uint32 index, uint32 token, uint64 qWad)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(bytes.concat(keccak256(abi.encode(jobId, cycle, index, token, qWad))));
    }

    /// @notice Root of the binary tree over `leaves` in index order, pairs hashed commutatively,
    /// an odd last node carried up unchanged. Overwrites `leaves` as scratch space.
    function root(bytes32[] memory leaves) internal pure returns (bytes32) {
        uint256 width = leaves.length;
        if (width == 0) revert SpecMathEmptyTree();
        while (width > 1) {
            uint256 parents = (width + 1) / 2;
            for (uint256 i = 0; i < width / 2; ++i) {
                leaves[i] = Hashes.commutativeKeccak256(leaves[2 * i], leaves[2 * i + 1]);
            }
            if (width % 2 == 1) leaves[parents - 1] = leaves[width - 1];
            width = parents;
        }
        return leaves[0];
    }

    /// @notice A uniform in [0, WAD) from a hash.
    function uniform(bytes32 h) internal pure returns (uint64) {
        return uint64(uint256(h) % WAD);
    }

    /// @notice The public uniform that fixes draft proposal `index` of `cycle`.
    function draftUniform(uint256 jobId, uint32 cycle, uint32 index) internal pure returns (uint64) {
        return uniform(keccak256(abi.encode(DRAFT_TAG, jobId, cycle, index)));
    }

    /// @notice The accept uniform of proposal `index`, unknown to the drafter until the reveal.
    function acceptUniform(bytes32 reveal, bytes32 draftRoot, uint32 index) internal pure returns (uint64) {
        return uniform(keccak256(abi.encode(ACCEPT_TAG, reveal, draftRoot, index)));
    }

    /// @notice The uniform of the residual (after a rejection) or bonus (all accepted) sample.
    function residualUniform(bytes32 reveal, bytes32 draftRoot) internal pure returns (uint64) {
        return uniform(keccak256(abi.encode(RESIDUAL_TAG, reveal, draftRoot)));
    }

    /// @notice Number of proposals accepted before the first rejection: accept i while u_i * q_i < p_i * WAD.
    /// @dev Every q and p is range-checked, also past the first rejection, so bad input never passes silently.
    function countAccepted(bytes32 reveal, bytes32 draftRoot, uint64[] memory q, uint64[] memory p)
        internal
        pure
        returns (uint256)
    {
        uint256 k = q.length;
        if (p.length != k) revert SpecMathLengthMismatch(k, p.length);
        for (uint256 i = 0; i < k; ++i) {
            if (q[i] == 0) revert SpecMathZeroDraftProbability(i);
            if (q[i] > WAD) revert SpecMathProbabilityAboveWad(i, q[i]);
            if (p[i] > WAD) revert SpecMathProbabilityAboveWad(i, p[i]);
        }
        for (uint256 i = 0; i < k; ++i) {
            if (uint256(acceptUniform(reveal, draftRoot, uint32(i))) * q[i] >= uint256(p[i]) * WAD) return i;
        }
        return k;
    }
}
