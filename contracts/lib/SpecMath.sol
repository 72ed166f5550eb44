// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title SpecMath
/// @notice The protocol math of docs/protocol.md §3-§4: draft leaves and root, public and hash-chain
/// uniforms, the hash-chain link and the on-chain accept rule. Mirrored bit for bit by
/// `node/protocol.py`; the shared vectors in `tests/vectors/` keep the two from drifting apart.
/// @dev All functions are `internal pure` so contracts inline them without linking.
///
/// One implementation of each rule, two front doors: the conformance surface of docs/protocol.md §3a takes
/// memory arrays; the calldata variants (`draftRootCalldata`, `countAcceptedCalldata`) are what the market's
/// hot path calls. Both doors run the same private kernels, and the vector tests replay every array vector
/// through both:
///
/// | rule                                 | kernel                                      | doors                      |
/// |--------------------------------------|---------------------------------------------|----------------------------|
/// | leaf: double hash of abi.encode(...) | `_leafPreimage` + `_leafAt`                 | leaf, draftRootCalldata    |
/// | tree: commutative pairs, odd node up | `_root`                                     | root, draftRootCalldata    |
/// | U(h) = h mod WAD                     | `uniform`                                   | every uniform              |
/// | accept uniform                       | `_acceptPreimage` + `_acceptUniformAt`      | acceptUniform, accept walk |
/// | probability ranges                   | `isDraftProbability`, `isTargetProbability` | accept walk, market commit |
/// | accept walk                          | `_countAccepted`                            | countAccepted(Calldata)    |
///
/// A per-element rule is split into a preimage written once (scratch memory past the free memory pointer)
/// and a branch-free step per index, which the optimizer inlines into the loops: sharing costs no call per
/// element. The walk runs over memory words; its calldata door copies q and p there first.
///
/// Calldata doors read each element as the raw 32-byte word the caller sent (ABI validation would cost gas
/// per element). Where a word's range matters the check is on the whole word (a probability with bits above
/// 64 is above WAD); where it is only hashed, a word with bits above its type hashes to a value that no
/// well-formed input produces (see each door).
library SpecMath {
    uint256 internal constant WAD = 1e18;
    bytes32 internal constant DRAFT_TAG = keccak256("verispec.draft");
    bytes32 internal constant ACCEPT_TAG = keccak256("verispec.accept");
    bytes32 internal constant RESIDUAL_TAG = keccak256("verispec.residual");

    /// @dev Two arrays that must hold one entry per proposal have different lengths (`countAccepted`:
    /// q and p; `draftRootCalldata`: tokens and q).
    error SpecMathLengthMismatch(uint256 qLength, uint256 pLength);
    /// @dev A draft probability was 0 (the draft cannot propose a token it gives no mass).
    error SpecMathZeroDraftProbability(uint256 index);
    /// @dev A probability was above WAD.
    error SpecMathProbabilityAboveWad(uint256 index, uint256 value);
    /// @dev `root` (or `draftRootCalldata`) was called with no leaves.
    error SpecMathEmptyTree();

    // ------------------------------------------------------------------ conformance surface (docs/protocol.md §3a)

    /// @notice Leaf of draft proposal `index` in `cycle` of `jobId`, double-hashed (OpenZeppelin Merkle convention):
    /// keccak256(bytes.concat(keccak256(abi.encode(jobId, cycle, index, token, qWad)))).
    /// @param jobId The job.
    /// @param cycle The cycle of the draft.
    /// @param index The proposal's position in the draft, 0..γ-1.
    /// @param token The proposed token x_index.
    /// @param qWad The draft's probability of the token, q_index(x_index), in WAD.
    /// @return h The leaf hash.
    function leaf(uint256 jobId, uint32 cycle, uint32 index, uint32 token, uint64 qWad)
        internal
        pure
        returns (bytes32 h)
    {
        return _leafAt(_leafPreimage(jobId, cycle), index, token, qWad);
    }

    /// @notice Root of the binary tree over `leaves` in index order, pairs hashed with OpenZeppelin's
    /// `Hashes.commutativeKeccak256`, an odd last node carried up unchanged. Overwrites `leaves` as scratch space.
    /// @dev Reverts {SpecMathEmptyTree} for no leaves.
    /// @param leaves The leaves in index order (clobbered).
    /// @return The root; a single leaf is its own root.
    function root(bytes32[] memory leaves) internal pure returns (bytes32) {
        uint256 nodes;
        assembly ("memory-safe") {
            nodes := add(leaves, 0x20)
        }
        return _root(nodes, leaves.length);
    }

    /// @notice A uniform in [0, WAD) from a hash: uint256(h) % WAD.
    /// @param h The hash.
    /// @return u The uniform, in WAD.
    function uniform(bytes32 h) internal pure returns (uint64 u) {
        assembly ("memory-safe") {
            u := mod(h, WAD)
        }
    }

    /// @notice The public uniform that fixes draft proposal `index` of `cycle`:
    /// uniform(keccak256(abi.encode(DRAFT_TAG, jobId, cycle, index))).
    /// @param jobId The job.
    /// @param cycle The cycle.
    /// @param index The proposal's position in the draft.
    /// @return The uniform, in WAD.
    function draftUniform(uint256 jobId, uint32 cycle, uint32 index) internal pure returns (uint64) {
        return uniform(keccak256(abi.encode(DRAFT_TAG, jobId, cycle, index)));
    }

    /// @notice The accept uniform of proposal `index`, unknown to the drafter until the reveal and to the verifier
    /// until the drafter's salt (docs/protocol.md §3, "Randomness nobody can choose"):
    /// uniform(keccak256(abi.encode(ACCEPT_TAG, reveal, draftRoot, index, salt))).
    /// @param reveal The verifier's hash-chain reveal for the cycle.
    /// @param draftRoot The cycle's draft root.
    /// @param index The proposal's position in the draft.
    /// @param salt The drafter's per-job salt, committed with the cycle-0 draft.
    /// @return u The uniform, in WAD.
    function acceptUniform(bytes32 reveal, bytes32 draftRoot, uint32 index, uint64 salt)
        internal
        pure
        returns (uint64 u)
    {
        return _acceptUniformAt(_acceptPreimage(reveal, draftRoot, salt), index);
    }

    /// @notice The uniform of the residual (after a rejection) or bonus (all accepted) sample:
    /// uniform(keccak256(abi.encode(RESIDUAL_TAG, reveal, draftRoot, salt))).
    /// @param reveal The verifier's hash-chain reveal for the cycle.
    /// @param draftRoot The cycle's draft root.
    /// @param salt The drafter's per-job salt, committed with the cycle-0 draft.
    /// @return The uniform, in WAD.
    function residualUniform(bytes32 reveal, bytes32 draftRoot, uint64 salt) internal pure returns (uint64) {
        return uniform(keccak256(abi.encode(RESIDUAL_TAG, reveal, draftRoot, salt)));
    }

    /// @notice Number of proposals accepted before the first rejection: accept i while u_i * q_i < p_i * WAD,
    /// with u_i = acceptUniform(reveal, draftRoot, i, salt).
    /// @dev Every q (1..WAD) and p (0..WAD) is range-checked, also past the first rejection, so bad input never
    /// passes silently. Reverts {SpecMathLengthMismatch}, {SpecMathZeroDraftProbability},
    /// {SpecMathProbabilityAboveWad}.
    /// @param reveal The verifier's hash-chain reveal for the cycle.
    /// @param draftRoot The cycle's draft root.
    /// @param q The draft probabilities q_i(x_i), WAD.
    /// @param p The target probabilities p_i(x_i), WAD.
    /// @param salt The drafter's per-job salt, committed with the cycle-0 draft.
    /// @return The accepted prefix length n, 0..q.length.
    function countAccepted(bytes32 reveal, bytes32 draftRoot, uint64[] memory q, uint64[] memory p, uint64 salt)
        internal
        pure
        returns (uint256)
    {
        uint256 k = q.length;
        if (p.length != k) revert SpecMathLengthMismatch(k, p.length);
        uint256 qWords;
        uint256 pWords;
        assembly ("memory-safe") {
            qWords := add(q, 0x20)
            pWords := add(p, 0x20)
        }
        return _countAccepted(_acceptPreimage(reveal, draftRoot, salt), qWords, pWords, k);
    }

    // ------------------------------------------------------------------ beyond §3a: the hash chain

    /// @notice The verifier's hash-chain link H(value) = keccak256(abi.encodePacked(value)): a reveal r_c is
    /// valid when chainHash(r_c) equals the previous reveal (the committed head for cycle 0).
    /// Mirrored by `node/protocol.py::hash_chain(value, 1)`.
    /// @param value A reveal (or the seed).
    /// @return h Its hash, one step towards the head.
    function chainHash(bytes32 value) internal pure returns (bytes32 h) {
        assembly ("memory-safe") {
            mstore(0x00, value)
            h := keccak256(0x00, 0x20)
        }
    }

    // ------------------------------------------------------------------ beyond §3a: probability ranges

    /// @notice Whether `q` is a valid draft probability: 1..WAD (the whole word, so bits above 64 are out).
    /// @dev Branch-free, so callers' loops inline it. The single definition of the draft range: `countAccepted`
    /// and the market's commit check use it.
    /// @param q A draft probability q_i(x_i), WAD.
    /// @return ok True when 1 <= q <= WAD.
    function isDraftProbability(uint256 q) internal pure returns (bool ok) {
        assembly ("memory-safe") {
            ok := lt(sub(q, 1), WAD) // q = 0 wraps around
        }
    }

    /// @notice Whether `p` is a valid target probability: 0..WAD (the whole word).
    /// @param p A target probability p_i(x_i), WAD.
    /// @return ok True when p <= WAD.
    function isTargetProbability(uint256 p) internal pure returns (bool ok) {
        assembly ("memory-safe") {
            ok := iszero(gt(p, WAD))
        }
    }

    /// @notice Reverts with the error for draft probability `q` of proposal `index` that failed
    /// {isDraftProbability}: {SpecMathZeroDraftProbability} for 0, else {SpecMathProbabilityAboveWad}.
    /// @param index The proposal's position in the draft.
    /// @param q The out-of-range draft probability.
    function revertDraftProbability(uint256 index, uint256 q) internal pure {
        if (q == 0) revert SpecMathZeroDraftProbability(index);
        revert SpecMathProbabilityAboveWad(index, q);
    }

    // ------------------------------------------------------------------ calldata front doors

    /// @notice The draft root over proposals (tokens[i], q[i]) of `cycle` of `jobId`:
    /// root([leaf(jobId, cycle, i, tokens[i], q[i]) for i]), computed from calldata.
    /// @dev Same kernels as `leaf` and `root`, reading calldata directly. Reverts {SpecMathLengthMismatch} when
    /// the lengths differ and {SpecMathEmptyTree} for no proposals. Elements are hashed as the raw calldata
    /// words: for well-formed input this is exactly the root above; a word with bits above its type (uint32 /
    /// uint64) yields a root that no well-formed draft has. So a caller accepting a new draft range-checks it
    /// first (the market's commitDraft does), while a caller comparing with a committed root need not.
    /// @param jobId The job.
    /// @param cycle The cycle of the draft.
    /// @param tokens The proposed tokens x_0..x_{K-1}.
    /// @param q Their draft probabilities, WAD.
    /// @return The draft root.
    function draftRootCalldata(uint256 jobId, uint32 cycle, uint32[] calldata tokens, uint64[] calldata q)
        internal
        pure
        returns (bytes32)
    {
        uint256 k = tokens.length;
        if (q.length != k) revert SpecMathLengthMismatch(k, q.length);
        uint256 nodes;
        assembly ("memory-safe") {
            nodes := mload(0x40)
            mstore(0x40, add(nodes, shl(5, k)))
        }
        uint256 preimage = _leafPreimage(jobId, cycle); // past the nodes
        for (uint256 i; i < k; ++i) {
            (uint256 token, uint256 qWad) = draftWordsAt(tokens, q, i);
            bytes32 node = _leafAt(preimage, i, token, qWad);
            assembly ("memory-safe") {
                mstore(add(nodes, shl(5, i)), node)
            }
        }
        return _root(nodes, k);
    }

    /// @notice Proposal `i` of a calldata draft as the raw words (tokens[i], q[i]), unchecked: neither the index
    /// nor the words' ranges (branch-free, so callers' loops inline it).
    /// @param tokens The proposed tokens.
    /// @param q Their draft probabilities, WAD.
    /// @param i The proposal's position, below both lengths.
    /// @return token The raw calldata word of tokens[i].
    /// @return qWad The raw calldata word of q[i].
    function draftWordsAt(uint32[] calldata tokens, uint64[] calldata q, uint256 i)
        internal
        pure
        returns (uint256 token, uint256 qWad)
    {
        assembly ("memory-safe") {
            token := calldataload(add(tokens.offset, shl(5, i)))
            qWad := calldataload(add(q.offset, shl(5, i)))
        }
    }

    /// @notice `countAccepted` over calldata arrays: the same range checks and the same walk.
    /// @dev The words are copied to memory and go through the kernel of `countAccepted`; a word with bits
    /// above uint64 is above WAD and reverts {SpecMathProbabilityAboveWad}. The salt is a raw word: a caller
    /// passing one above uint64 gets uniforms that no well-formed salt gives (the market passes 64 bits).
    /// @param reveal The verifier's hash-chain reveal for the cycle.
    /// @param draftRoot The cycle's draft root.
    /// @param q The draft probabilities q_i(x_i), WAD.
    /// @param p The target probabilities p_i(x_i), WAD.
    /// @param salt The drafter's per-job salt, committed with the cycle-0 draft.
    /// @return The accepted prefix length n, 0..q.length.
    function countAcceptedCalldata(
        bytes32 reveal,
        bytes32 draftRoot,
        uint64[] calldata q,
        uint64[] calldata p,
        uint256 salt
    ) internal pure returns (uint256) {
        uint256 k = q.length;
        if (p.length != k) revert SpecMathLengthMismatch(k, p.length);
        uint256 qWords;
        uint256 pWords;
        assembly ("memory-safe") {
            qWords := mload(0x40)
            pWords := add(qWords, shl(5, k))
            mstore(0x40, add(pWords, shl(5, k)))
            calldatacopy(qWords, q.offset, shl(5, k))
            calldatacopy(pWords, p.offset, shl(5, k))
        }
        return _countAccepted(_acceptPreimage(reveal, draftRoot, salt), qWords, pWords, k);
    }

    // ------------------------------------------------------------------ kernels

    /// @dev The leaf rule, part 1: the leaf preimage abi.encode(jobId, cycle, index, token, qWad) is built in
    /// scratch memory at the free memory pointer; this writes its fixed words and returns its address.
    function _leafPreimage(uint256 jobId, uint256 cycle) private pure returns (uint256 preimage) {
        assembly ("memory-safe") {
            preimage := mload(0x40)
            mstore(preimage, jobId)
            mstore(add(preimage, 0x20), cycle)
        }
    }

    /// @dev The leaf rule, part 2 (branch-free, inlined): completes the preimage with (index, token, qWad), words
    /// as given, and double-hashes it: keccak256(bytes.concat(keccak256(preimage))).
    function _leafAt(uint256 preimage, uint256 index, uint256 token, uint256 qWad) private pure returns (bytes32 h) {
        assembly ("memory-safe") {
            mstore(add(preimage, 0x40), index)
            mstore(add(preimage, 0x60), token)
            mstore(add(preimage, 0x80), qWad)
            mstore(0x00, keccak256(preimage, 0xa0))
            h := keccak256(0x00, 0x20)
        }
    }

    /// @dev The tree rule over `width` 32-byte nodes at memory `nodes`, reduced in place level by level:
    /// node i of the next level is OpenZeppelin's Hashes.commutativeKeccak256(node 2i, node 2i+1) (keccak of
    /// the sorted pair, inlined here; the vector tests verify every proof with MerkleProof.verify), an odd
    /// last node is carried up unchanged. Reverts {SpecMathEmptyTree} for width 0.
    function _root(uint256 nodes, uint256 width) private pure returns (bytes32 result) {
        if (width == 0) revert SpecMathEmptyTree();
        assembly ("memory-safe") {
            for {} gt(width, 1) {} {
                let half := shr(1, width)
                for { let i := 0 } lt(i, half) { i := add(i, 1) } {
                    let a := mload(add(nodes, shl(6, i)))
                    let b := mload(add(nodes, add(shl(6, i), 0x20)))
                    if gt(a, b) {
                        let t := a
                        a := b
                        b := t
                    }
                    mstore(0x00, a)
                    mstore(0x20, b)
                    mstore(add(nodes, shl(5, i)), keccak256(0x00, 0x40))
                }
                if and(width, 1) { mstore(add(nodes, shl(5, half)), mload(add(nodes, shl(5, sub(width, 1))))) }
                width := sub(width, half)
            }
            result := mload(nodes)
        }
    }

    /// @dev The accept-uniform rule, part 1: the preimage abi.encode(ACCEPT_TAG, reveal, draftRoot, index, salt)
    /// is built in scratch memory at the free memory pointer; this writes its fixed words and returns its address.
    function _acceptPreimage(bytes32 reveal, bytes32 draftRoot, uint256 salt) private pure returns (uint256 preimage) {
        bytes32 tag = ACCEPT_TAG;
        assembly ("memory-safe") {
            preimage := mload(0x40)
            mstore(preimage, tag)
            mstore(add(preimage, 0x20), reveal)
            mstore(add(preimage, 0x40), draftRoot)
            mstore(add(preimage, 0x80), salt)
        }
    }

    /// @dev The accept-uniform rule, part 2 (branch-free, inlined): u_index = uniform(keccak256(preimage)).
    function _acceptUniformAt(uint256 preimage, uint256 index) private pure returns (uint64) {
        bytes32 h;
        assembly ("memory-safe") {
            mstore(add(preimage, 0x60), index)
            h := keccak256(preimage, 0xa0)
        }
        return uniform(h);
    }

    /// @dev The accept rule over k words each of q and p in memory, in one pass, with the accept preimage
    /// (`_acceptPreimage`) already written. Every index is range-checked
    /// (q in 1..WAD, p in 0..WAD, whole words: bits above 64 are above WAD), also past the first rejection: the
    /// first bad index reverts. The walk accepts i while u_i * q_i < p_i * WAD and stops computing uniforms at
    /// the first rejection, whose index it returns (k if none).
    function _countAccepted(uint256 preimage, uint256 qWords, uint256 pWords, uint256 k)
        private
        pure
        returns (uint256 accepted)
    {
        accepted = k;
        for (uint256 i; i < k; ++i) {
            uint256 qi;
            uint256 pi;
            assembly ("memory-safe") {
                qi := mload(add(qWords, shl(5, i)))
                pi := mload(add(pWords, shl(5, i)))
            }
            if (!isDraftProbability(qi)) revertDraftProbability(i, qi);
            if (!isTargetProbability(pi)) revert SpecMathProbabilityAboveWad(i, pi);
            if (accepted == k) {
                unchecked {
                    // u_i < WAD and q_i, p_i ≤ WAD: neither product overflows
                    if (uint256(_acceptUniformAt(preimage, i)) * qi >= pi * WAD) accepted = i;
                }
            }
        }
    }
}
