"""The protocol math of docs/protocol.md §3-§4, mirrored bit for bit by `contracts/lib/SpecMath.sol`.

Everything here takes and returns plain ints and bytes (numpy is used only
to make the vocabulary-wide loops fast; results are identical to the
integer definitions). Shared JSON vectors in `tests/vectors/` pin the two
implementations together.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

try:  # the C keccak (safe-pysha3) is several times faster than pycryptodome's; a cycle hashes ~20 times (docs/node.md)
    from eth_hash.backends import pysha3 as _keccak_backend
    from eth_hash.main import Keccak256

    keccak = Keccak256(_keccak_backend)
except ImportError:  # the same function, slower
    from eth_hash.auto import keccak

WAD = 10**18
UINT64_MAX = 2**64 - 1
UINT32_MAX = 2**32 - 1

DRAFT_TAG = keccak(b"verispec.draft")
ACCEPT_TAG = keccak(b"verispec.accept")
RESIDUAL_TAG = keccak(b"verispec.residual")


def _word(value: int) -> bytes:
    """One ABI-encoded static word (uint256 / uint32 / uint64 all pad to 32 bytes)."""
    if value < 0:
        raise ValueError(f"negative value {value} cannot be ABI-encoded as unsigned")
    return value.to_bytes(32, "big")


def _bytes32(value: bytes) -> bytes:
    if len(value) != 32:
        raise ValueError(f"expected 32 bytes, got {len(value)}")
    return bytes(value)


def _check_range(name: str, value: int, upper: int) -> None:
    if not 0 <= value <= upper:
        raise ValueError(f"{name}={value} out of range 0..{upper}")


# ---------------------------------------------------------------- hashing & leaves


def leaf(job_id: int, cycle: int, index: int, token: int, q_wad: int) -> bytes:
    """keccak256(bytes.concat(keccak256(abi.encode(jobId, cycle, index, token, qWad))))."""
    _check_range("cycle", cycle, UINT32_MAX)
    _check_range("index", index, UINT32_MAX)
    _check_range("token", token, UINT32_MAX)
    _check_range("q_wad", q_wad, UINT64_MAX)
    inner = keccak(b"".join(_word(v) for v in (job_id, cycle, index, token, q_wad)))
    return keccak(inner)


def _hash_pair(a: bytes, b: bytes) -> bytes:
    """OpenZeppelin `Hashes.commutativeKeccak256`: hash of the sorted pair."""
    return keccak(a + b) if a < b else keccak(b + a)


def _tree_levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    if not leaves:
        raise ValueError("a draft root needs at least one leaf")
    level = [_bytes32(x) for x in leaves]
    levels = [level]
    while len(level) > 1:
        parents = [_hash_pair(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            parents.append(level[-1])  # an odd last node is carried up unchanged
        level = parents
        levels.append(level)
    return levels


def root(leaves: Sequence[bytes]) -> bytes:
    """Draft root: binary tree over leaves in index order, commutative pair hashing."""
    return _tree_levels(leaves)[-1][0]


def proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """Merkle proof for leaves[index] that OpenZeppelin `MerkleProof.verify` accepts against `root`."""
    levels = _tree_levels(leaves)
    if not 0 <= index < len(leaves):
        raise ValueError(f"leaf index {index} out of range 0..{len(leaves) - 1}")
    path = []
    for level in levels[:-1]:
        sibling = index ^ 1
        if sibling < len(level):
            path.append(level[sibling])
        index //= 2
    return path


def verify_proof(proof_path: Sequence[bytes], root_hash: bytes, leaf_hash: bytes) -> bool:
    node = _bytes32(leaf_hash)
    for sibling in proof_path:
        node = _hash_pair(node, _bytes32(sibling))
    return node == root_hash


def draft_root(job_id: int, cycle: int, tokens: Sequence[int], q_wads: Sequence[int]) -> bytes:
    if len(tokens) != len(q_wads):
        raise ValueError(f"{len(tokens)} tokens but {len(q_wads)} q values")
    return root([leaf(job_id, cycle, i, t, q) for i, (t, q) in enumerate(zip(tokens, q_wads))])


def cycle_record_hash(draft_root_hash: bytes, p: Sequence[int], accepted: int, out_token: int) -> bytes:
    """keccak256(abi.encode(draftRoot, uint64[] p, uint32 accepted, uint32 outToken)), as `CycleRecord.hash`."""
    for i, value in enumerate(p):
        _check_range(f"p[{i}]", value, UINT64_MAX)
    _check_range("accepted", accepted, UINT32_MAX)
    _check_range("out_token", out_token, UINT32_MAX)
    head = _bytes32(draft_root_hash) + _word(4 * 32) + _word(accepted) + _word(out_token)
    return keccak(head + _word(len(p)) + b"".join(_word(v) for v in p))


# ---------------------------------------------------------------- uniforms


def uniform(h: bytes) -> int:
    return int.from_bytes(_bytes32(h), "big") % WAD


def draft_uniform(job_id: int, cycle: int, index: int) -> int:
    _check_range("cycle", cycle, UINT32_MAX)
    _check_range("index", index, UINT32_MAX)
    return uniform(keccak(DRAFT_TAG + _word(job_id) + _word(cycle) + _word(index)))


def accept_uniform(reveal: bytes, draft_root_hash: bytes, index: int, salt: int) -> int:
    """U(keccak256(abi.encode(ACCEPT_TAG, reveal, draftRoot, uint32 index, uint64 salt))); `salt` is the drafter's
    per-job salt, committed with the cycle-0 draft (docs/protocol.md §3)."""
    _check_range("index", index, UINT32_MAX)
    _check_range("salt", salt, UINT64_MAX)
    return uniform(keccak(ACCEPT_TAG + _bytes32(reveal) + _bytes32(draft_root_hash) + _word(index) + _word(salt)))


def residual_uniform(reveal: bytes, draft_root_hash: bytes, salt: int) -> int:
    """U(keccak256(abi.encode(RESIDUAL_TAG, reveal, draftRoot, uint64 salt)))."""
    _check_range("salt", salt, UINT64_MAX)
    return uniform(keccak(RESIDUAL_TAG + _bytes32(reveal) + _bytes32(draft_root_hash) + _word(salt)))


def new_salt() -> int:
    """A fresh drafter salt: 64 bits from the OS's randomness (docs/protocol.md §3)."""
    return int.from_bytes(os.urandom(8), "big")


# ---------------------------------------------------------------- verifier hash chain


def hash_chain(seed: bytes, steps: int) -> bytes:
    """H^steps(seed) with H = keccak256."""
    value = _bytes32(seed)
    for _ in range(steps):
        value = keccak(value)
    return value


def chain_reveal(seed: bytes, length: int, cycle: int) -> bytes:
    """Reveal of cycle c for a chain whose committed head is H^length(seed): H^(length-1-c)(seed)."""
    if not 0 <= cycle < length:
        raise ValueError(f"cycle {cycle} is beyond the hash chain of length {length}")
    return hash_chain(seed, length - 1 - cycle)


# ---------------------------------------------------------------- accept rule


def _check_probability(name: str, value: int, allow_zero: bool) -> None:
    if value < 0 or value > WAD or (value == 0 and not allow_zero):
        bound = "0..WAD" if allow_zero else "1..WAD"
        raise ValueError(f"{name}={value} out of range {bound}")


def count_accepted(reveal: bytes, draft_root_hash: bytes, q: Sequence[int], p: Sequence[int], salt: int) -> int:
    """Accepted prefix length: accept proposal i while u_i * q_i < p_i * WAD, u_i = accept_uniform(..., i, salt)."""
    if len(q) != len(p):
        raise ValueError(f"{len(q)} q values but {len(p)} p values")
    for i, (q_i, p_i) in enumerate(zip(q, p)):
        _check_probability(f"q[{i}]", q_i, allow_zero=False)
        _check_probability(f"p[{i}]", p_i, allow_zero=True)
    _check_range("salt", salt, UINT64_MAX)
    for i, (q_i, p_i) in enumerate(zip(q, p)):
        if accept_uniform(reveal, draft_root_hash, i, salt) * q_i >= p_i * WAD:
            return i
    return len(q)


def cap_at_vocab(tokens: Sequence[int], accepted: int, vocab_size: int) -> int:
    """The accept count the contract records (docs/protocol.md §4, "Token ranges"): a proposal at or above the job's
    vocabulary has target probability 0, so `accepted` stops before the first such proposal whatever p says."""
    for i in range(accepted):
        if tokens[i] >= vocab_size:
            return i
    return accepted


# ---------------------------------------------------------------- distributions


def quantize(probs: Sequence[float]) -> list[int]:
    """w[t] = floor(v[t] * WAD); the remainder WAD - sum(w) goes to the largest w (lowest id on ties)."""
    v = np.asarray(probs, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ValueError("quantize expects a non-empty 1-D probability vector")
    return quantize_rows(v[None, :])[0].tolist()


def quantize_rows(probs) -> np.ndarray:
    """`quantize` of every row of a 2-D array at once, as an int64 array (the engine's fast path).

    This is the one implementation of the rule; `quantize` is its one-row case.
    Every WAD value (and every row sum, about WAD) fits in int64, so no step overflows.
    """
    v = np.asarray(probs, dtype=np.float64)
    if v.ndim != 2 or v.size == 0:
        raise ValueError("quantize_rows expects a non-empty 2-D array of probability rows")
    totals = v.sum(axis=1)
    # one comparison each for the common case: NaN fails both, an inf entry makes its row sum inf
    if not (v.min() >= 0 and np.abs(totals - 1.0).max() <= 1e-3):
        if not (v >= 0).all() or not np.isfinite(totals).all():
            raise ValueError("probabilities must be finite and non-negative")
        off = np.abs(totals - 1.0) > 1e-3
        raise ValueError(f"probabilities sum to {float(totals[off][0])}, not 1")
    w = (v * WAD).astype(np.int64)  # truncation is floor here: every entry is finite and >= 0
    rows = np.arange(len(w))
    top = w.argmax(axis=1)  # argmax returns the lowest index on ties
    w[rows, top] += WAD - w.sum(axis=1)
    if w[rows, top].min() < 0:
        raise ValueError("probabilities exceed 1 by more than the largest entry")
    return w


def _wad_cumsum(name: str, w: Sequence[int]) -> np.ndarray:
    """cumsum(w), once w is checked to be a non-empty vector of non-negative WAD values summing to WAD."""
    arr = np.asarray(w, dtype=np.int64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty vector of non-negative WAD values summing to WAD")
    cumulative = np.cumsum(arr)
    # with no negative entry a partial sum can only go negative by wrapping around int64
    if cumulative[-1] != WAD or arr.min() < 0 or cumulative.min() < 0:
        raise ValueError(f"{name} must be a non-empty vector of non-negative WAD values summing to WAD")
    return cumulative


def _check_wad_vector(name: str, w: Sequence[int]) -> np.ndarray:
    arr = np.asarray(w, dtype=np.int64)
    _wad_cumsum(name, arr)
    return arr


def invcdf(wad_vector: Sequence[int], u: int) -> int:
    """Smallest token id t with cumsum(w)[t] > u."""
    _check_range("u", u, WAD - 1)
    return int(np.searchsorted(_wad_cumsum("wad_vector", wad_vector), u, side="right"))


def residual_sample(p_wad: Sequence[int], q_wad: Sequence[int], u: int) -> int:
    """Sample norm(max(0, p - q)) with uniform u: smallest t with cumsum(r)[t] > u * Z // WAD."""
    _check_range("u", u, WAD - 1)
    p_arr = _check_wad_vector("p_wad", p_wad)
    q_arr = _check_wad_vector("q_wad", q_wad)
    if p_arr.shape != q_arr.shape:
        raise ValueError(f"p has {p_arr.size} entries but q has {q_arr.size}")
    cumulative = np.cumsum(np.maximum(p_arr - q_arr, 0))
    mass = int(cumulative[-1])
    if mass == 0:
        raise ValueError("residual is empty: p equals q, so no rejection can have happened")
    return int(np.searchsorted(cumulative, u * mass // WAD, side="right"))


def sample_window(sample, u: int, tolerance_wad: int) -> tuple[int, int]:
    """The tokens a uniform within `tolerance_wad` of u can draw: (sample(u - tol), sample(u + tol)), clamped to
    [0, WAD). `sample` maps a uniform to a token (invcdf or residual_sample over replayed rows); a claimed
    token is faithful when it lies in this window (docs/protocol.md §6). Referees, the verifier's draft check and the
    watchdog's audit all judge a sampled token by this one rule."""
    if tolerance_wad < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance_wad}")
    return sample(max(u - tolerance_wad, 0)), sample(min(u + tolerance_wad, WAD - 1))


class ProposalCheck(NamedTuple):
    """A committed proposal (token x_i, claimed q_i) against a replay of the draft model at its position."""

    replayed_q: int  # the replayed probability of x_i (0 for an id outside the vocabulary: a draft may commit any)
    q_faithful: bool  # |replayed_q - q_i| <= tolerance
    token_faithful: bool  # x_i lies in sample_window(invcdf(replayed row, .), draft uniform, tolerance)

    @property
    def faithful(self) -> bool:
        return self.q_faithful and self.token_faithful


def check_proposal(row: Sequence[int], token: int, q: int, u: int, tolerance_wad: int) -> ProposalCheck:
    """The DraftReplay rule for one proposal (docs/protocol.md §6): with `row` the replayed WAD distribution at the
    position and `u` its public draft uniform, q_i is faithful when within `tolerance_wad` of row[x_i], and x_i when
    a uniform within `tolerance_wad` of u draws it (`sample_window`). The verifier's draft check, the referees'
    vote and the watchdog's audit all decide by this one function, so an audit flags exactly what a dispute proves."""
    replayed = int(row[token]) if 0 <= token < len(row) else 0
    low, high = sample_window(lambda w: invcdf(row, w), u, tolerance_wad)
    return ProposalCheck(replayed, abs(replayed - q) <= tolerance_wad, low <= token <= high)


def binds(index: int, accepted: int, gamma: int) -> bool:
    """Whether position `index` of a cycle of `gamma` proposals that accepted `accepted` decides anything, so that a
    dispute on it can be opened: a proposal up to and including the first rejection (index <= accepted), and the
    outToken (index == gamma). p and q after the first rejection bind nothing (docs/protocol.md §4 step 2, and
    "Project decisions": Disputes)."""
    return index <= accepted or index == gamma


def rejection_sample(p_wad: Sequence[int], q_wad: Sequence[int], u: int) -> int:
    """The outToken after a rejection: the residual sample, or p's own sample where the residual is empty.

    An empty residual (p <= q everywhere: p equals q) means the two distributions did not reject there; a proposal
    outside the vocabulary, a q claimed above the draft's or a p posted below the target's did. The token still owed
    is then a sample of p itself (what the target would emit: the output stays distributed as p). The verifier emits
    it and the referees judge it by this one function (docs/protocol.md §6 "Residual with no mass")."""
    try:
        return residual_sample(p_wad, q_wad, u)
    except ValueError:
        if len(p_wad) != len(q_wad) or int(np.maximum(np.asarray(p_wad) - np.asarray(q_wad), 0).sum()) != 0:
            raise  # a malformed row, not an empty residual
        return invcdf(p_wad, u)


def emitted_token(p_next: Sequence[int], q_next: Sequence[int] | None, u: int) -> int:
    """The verifier's outToken: the rejection sample (`rejection_sample`) after a rejection, else the bonus sample
    from p."""
    return invcdf(p_next, u) if q_next is None else rejection_sample(p_next, q_next, u)


# ---------------------------------------------------------------- speedup model


def expected_tokens_per_pass(alpha: float, gamma: int) -> float:
    """Ω(α, γ) = (1 - α^(γ+1)) / (1 - α): tokens emitted per target pass under a geometric model."""
    if not 0 <= alpha <= 1 or gamma < 0:
        raise ValueError(f"need 0 <= alpha <= 1 and gamma >= 0, got alpha={alpha}, gamma={gamma}")
    return float(gamma + 1) if alpha == 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


def predicted_speedup(alpha: float, gamma: int, cost_ratio: float) -> float:
    """S = Ω / (1 + γc), c = draft-step cost / target-step cost (one single-token forward of each).

    It assumes the target's verification pass over γ+1 positions costs one target step.
    """
    return expected_tokens_per_pass(alpha, gamma) / (1 + gamma * cost_ratio)


# ---------------------------------------------------------------- job conventions shared by engine and chain


def hash_chain_length(max_tokens: int) -> int:
    """N, the length of a job's verifier hash chain: N = maxTokens.

    Every cycle emits at least one token, so a job has at most maxTokens
    cycles and needs at most maxTokens reveals (docs/protocol.md §3: N >= maxTokens).
    The verifier commits head = hash_chain(seed, N) at job acceptance.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    return max_tokens


def chain_reveals(seed: bytes, length: int) -> list[bytes]:
    """[chain_reveal(seed, length, c) for c in range(length)] with `length` hashes instead of length²/2."""
    if length < 1:
        raise ValueError(f"a hash chain needs length >= 1, got {length}")
    backwards = [_bytes32(seed)]  # H^0, H^1, ... H^(length-1) of the seed
    for _ in range(length - 1):
        backwards.append(hash_chain(backwards[-1], 1))
    return backwards[::-1]


def truncate_emitted(tokens: Sequence[int], eos_token: int | None, remaining: int) -> list[int]:
    """What a cycle emits: its n accepted proposals + outToken, cut after the first EOS and to the remaining budget.

    The EOS token itself is emitted (inclusive); eos_token None means the job has no EOS.
    """
    out = list(tokens[: max(remaining, 0)])
    if eos_token is not None and eos_token in out:
        out = out[: out.index(eos_token) + 1]
    return out


# ---------------------------------------------------------- disputes (contracts/DisputeManager.sol, docs/disputes.md)


def _address_word(address: str | bytes) -> bytes:
    raw = bytes.fromhex(address[2:] if address.startswith("0x") else address) if isinstance(address, str) else address
    if len(raw) != 20:
        raise ValueError(f"expected a 20-byte address, got {len(raw)} bytes")
    return bytes(12) + raw


def vote_commitment(dispute_id: int, referee: str | bytes, verdict: int, salt: bytes) -> bytes:
    """A referee's sealed vote: keccak256(abi.encode(uint256 disputeId, address referee, uint8 verdict, bytes32 salt)).

    Mirrors `DisputeManager.voteCommitment`; binding the dispute and the referee stops a referee from
    copying another's commitment and replaying its reveal.
    """
    if verdict not in (1, 2):  # DisputeManager.Verdict (node/chain/enums.py): AccusedFaithful, AccusedCheated
        raise ValueError(f"verdict must be 1 (AccusedFaithful) or 2 (AccusedCheated), got {verdict}")
    return keccak(_word(dispute_id) + _address_word(referee) + _word(verdict) + _bytes32(salt))


def answer_hash(claimed_prob: int, top_tokens: Sequence[int], top_probs: Sequence[int]) -> bytes:
    """keccak256(abi.encode(uint64 claimedProb, uint32[] topTokens, uint64[] topProbs)), as stored by `answer`."""
    _check_range("claimed_prob", claimed_prob, UINT64_MAX)
    for t in top_tokens:
        _check_range("top token", t, UINT32_MAX)
    for q in top_probs:
        _check_range("top prob", q, UINT64_MAX)
    first = 3 * 32
    second = first + 32 * (1 + len(top_tokens))
    tail = _word(len(top_tokens)) + b"".join(_word(t) for t in top_tokens)
    tail += _word(len(top_probs)) + b"".join(_word(q) for q in top_probs)
    return keccak(_word(claimed_prob) + _word(first) + _word(second) + tail)


# ------------------------------------------ transcript mode (v2): the state chain (docs/protocol.md, "Transcript mode")

MAX_GAMMA = 16  # InferenceMarket.MAX_GAMMA: proposals per cycle
TRANSCRIPT_TAG = keccak(b"verispec.transcript")


def transcript_genesis(job_id: int, salt: int) -> bytes:
    """S(-1) = keccak256(abi.encode(TRANSCRIPT_TAG, uint256 jobId, uint64 salt)), as `TranscriptTypes.genesisState`."""
    _check_range("job_id", job_id, 2**256 - 1)
    _check_range("salt", salt, UINT64_MAX)
    return keccak(TRANSCRIPT_TAG + _word(job_id) + _word(salt))


# The cycle encoding (contracts/lib/PackedCycles.sol, docs/protocol.md "Settlement encoding"): accepted (1 byte),
# outToken (4), then per proposal token (32 bits), q (60 bits), p (60 bits), big-endian. It is what settlement posts
# and what the state chain hashes, so a cycle is hashed once, straight from the bytes that carry it.
CYCLE_FIXED, PROPOSAL_BYTES, PROB_BITS = 5, 19, 60


def cycle_size(gamma: int) -> int:
    """The bytes of one packed cycle of γ proposals."""
    return CYCLE_FIXED + PROPOSAL_BYTES * gamma


def _field(value: int, bits: int, name: str) -> int:
    if isinstance(value, bool) or not 0 <= int(value) < 1 << bits:
        raise ValueError(f"{name} {value} does not fit the cycle encoding's {bits} bits")
    return int(value)


def pack_cycle(tokens: Sequence[int], q: Sequence[int], p: Sequence[int], accepted: int, out_token: int) -> bytes:
    """One cycle in the cycle encoding (no γ byte): ValueError when a field does not fit it (a valid message's
    always do: q, p ≤ WAD < 2^60, accepted ≤ γ ≤ 16)."""
    gamma = len(tokens)
    if not 1 <= gamma <= MAX_GAMMA or not len(q) == len(p) == gamma or not 0 <= accepted <= gamma:
        raise ValueError(f"a cycle of {gamma} tokens, {len(q)} q, {len(p)} p, accepted {accepted}")
    out = bytearray([accepted]) + _field(out_token, 32, "outToken").to_bytes(4, "big")
    for t, qi, pi in zip(tokens, q, p):
        word = _field(t, 32, "token") << 2 * PROB_BITS | _field(qi, PROB_BITS, "q") << PROB_BITS
        out += (word | _field(pi, PROB_BITS, "p")).to_bytes(PROPOSAL_BYTES, "big")
    return bytes(out)


def unpack_cycle(packed: bytes) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], int, int]:
    """(tokens, q, p, accepted, outToken) of one packed cycle, read as hostile data: ValueError unless its length is
    a whole cycle of 1..16 proposals (the fields' values are the rule's to judge, not the encoding's)."""
    packed = bytes(packed)
    gamma, rest = divmod(len(packed) - CYCLE_FIXED, PROPOSAL_BYTES)
    if rest or not 1 <= gamma <= MAX_GAMMA:
        raise ValueError(f"{len(packed)} bytes are not one packed cycle of 1..{MAX_GAMMA} proposals")
    mask = (1 << PROB_BITS) - 1
    words = [
        int.from_bytes(packed[o : o + PROPOSAL_BYTES], "big") for o in range(CYCLE_FIXED, len(packed), PROPOSAL_BYTES)
    ]
    tokens = tuple(w >> 2 * PROB_BITS for w in words)
    return (
        tokens,
        tuple(w >> PROB_BITS & mask for w in words),
        tuple(w & mask for w in words),
        packed[0],
        int.from_bytes(packed[1:5], "big"),
    )


def cycle_leaf(cycle: int, packed: bytes) -> bytes:
    """keccak256(abi.encodePacked(uint32 cycle, packed cycle)), as `PackedCycles.leaf`: what the state chain
    steps on and the cycles root is built over. It binds the cycle index (a cycle's bytes do not name it, and
    commutative pair hashing does not bind a leaf's position); its preimage is never 64 bytes (4 + 5 + 19γ), so no
    inner node of the tree passes for a leaf."""
    _check_range("cycle", cycle, UINT32_MAX)
    return keccak(cycle.to_bytes(4, "big") + bytes(packed))


def transcript_leaf(cycle: int, tokens, q, p, accepted: int, out_token: int) -> bytes:
    """The cycle leaf of a cycle's fields (a Draft's tokens and q, its Verification's p, accepted, outToken)."""
    return cycle_leaf(cycle, pack_cycle(tokens, q, p, accepted, out_token))


def next_state(prev_state: bytes, leaf_hash: bytes) -> bytes:
    """S(c) = keccak256(S(c-1) ‖ cycleLeaf_c), as `TranscriptTypes.nextState`."""
    return keccak(_bytes32(prev_state) + _bytes32(leaf_hash))


def state_chain(genesis: bytes, leaves: Sequence[bytes]) -> list[bytes]:
    """[S(0), ..., S(n-1)] from S(-1) = genesis over the cycle leaves; the last is `TranscriptTypes.finalState`."""
    states, state = [], _bytes32(genesis)
    for leaf_hash in leaves:
        state = next_state(state, leaf_hash)
        states.append(state)
    return states


def cycles_root(leaves: Sequence[bytes]) -> bytes:
    """The cycles root that settlement stores: `root` over the cycle leaves of cycles 0..n-1."""
    if not leaves:
        raise ValueError("a cycles root needs at least one cycle")
    return root(leaves)


def cycle_proof(leaves: Sequence[bytes], cycle: int) -> list[bytes]:
    """Proof of cycle `cycle`'s leaf against `cycles_root(leaves)`, for `MerkleProof.verify`."""
    if not 0 <= cycle < len(leaves):
        raise ValueError(f"cycle {cycle} out of range 0..{len(leaves) - 1}")
    return proof(leaves, cycle)


# ------------------------------------------------------------------ probes (v1.2): the corpus commitment


def probe_leaf(index: int, prompt: bytes) -> bytes:
    """ProbeScheduler's corpus leaf of prompt `index`: keccak256(bytes.concat(keccak256(abi.encode(index,
    keccak256(prompt))))), double-hashed as OpenZeppelin's MerkleProof expects of a leaf."""
    _check_range("index", index, UINT32_MAX)
    return keccak(keccak(_word(index) + keccak(bytes(prompt))))


def probe_corpus_root(prompts: Sequence[bytes]) -> bytes:
    """The corpus root a deployment commits per target model (`ProbeScheduler.setCorpus`)."""
    if not prompts:
        raise ValueError("a probe corpus needs at least one prompt")
    return root([probe_leaf(i, p) for i, p in enumerate(prompts)])


def probe_proof(prompts: Sequence[bytes], index: int) -> list[bytes]:
    """Proof of prompt `index` against `probe_corpus_root(prompts)`, for `startProbe`."""
    if not 0 <= index < len(prompts):
        raise ValueError(f"prompt {index} out of range 0..{len(prompts) - 1}")
    return proof([probe_leaf(i, p) for i, p in enumerate(prompts)], index)
