"""The rejection sampler: pure, the on-chain accept rule plus the verifier's outToken.

Given one cycle's proposals and the quantized distributions of both models,
it decides exactly what the contract decides (protocol.count_accepted over
the draft root, the hash-chain reveal and the drafter's salt, capped at the
first proposal outside the job's vocabulary) and then draws the cycle's last
token from the residual norm(max(0, p_n - q_n)) at the first rejection, or
from p_K when all K were accepted, with the public residual uniform. It owns
no model, no cache and no state, so it is tested on its own.

Every verifier path decides here, and nowhere else: the engine's session
(node/decoding/scorer.py), a draft holding a token outside the vocabulary
(node/roles/verifier/node.py, node/link/verifier.py) and the misbehaving sessions
(node/roles/behaviors.py); a drafter's check of a signed Verification re-runs
`accepted_count` (node/link/job.py).

Why this is exact: x_i ~ q_i, accepted with probability min(1, p_i/q_i),
and the residual puts back exactly the mass of p that acceptance missed, so
every emitted token is distributed as p (in WAD units, exactly).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from node import protocol


@dataclass(frozen=True)
class Decision:
    root: bytes  # the draft root the contract recomputes from (tokens, q)
    p: tuple[int, ...]  # p_i(x_i) in WAD for i < K: what submitVerification posts
    accepted: int  # n, the accepted prefix length
    out_token: int  # residual sample at n (n < K) or bonus sample from p_K (n == K)


def accepted_count(
    reveal: bytes, root: bytes, tokens: Sequence[int], q: Sequence[int], p: Sequence[int], *, salt: int, vocab_size: int
) -> int:
    """The `accepted` the contract records for posted p (docs/protocol.md §4): `count_accepted`, capped at the
    first proposal at or above the job's registered vocabulary ("Token ranges"), whatever p says there."""
    return protocol.cap_at_vocab(tokens, protocol.count_accepted(reveal, root, q, p, salt), vocab_size)


def decide(
    job_id: int,
    cycle: int,
    reveal: bytes,
    tokens: Sequence[int],
    q: Sequence[int],
    p_rows: np.ndarray,
    q_rows: np.ndarray | Callable[[int], np.ndarray],
    *,
    salt: int,
    vocab_size: int | None = None,
    p: Sequence[int] | None = None,
) -> Decision:
    """One cycle's verdict.

    salt: the job's drafter salt (committed with the cycle-0 draft), in every accept and residual uniform.
    tokens, q: the K proposals and the drafter's claimed q_i(x_i) (as committed).
    vocab_size: the job's registered vocabulary (None: the rows' width, the target model's, which a verifier checks
      is the registered one). From the first proposal at or above it, the cap, the target's probability is 0: p is
      posted 0 there and after it (binding nothing), and the rule rejects there at the latest.
    p_rows: target WAD rows at the proposal positions up to the cap and the position after (K+1 rows without a
      cap; cap+1 with one, rows past it are never read).
    q_rows: draft WAD rows at the proposal positions (K without a cap; cap+1 at least with one), or a function
      giving row n: only row n is read, for the residual, so a caller may compute it once n is known.
    p: the values to post when they are not the rows' own (a misbehaving verifier's, node/roles/behaviors.py);
      the accept count and outToken then follow the rule on them.
    """
    k = len(tokens)
    if p_rows.ndim != 2:
        raise ValueError(f"p_rows must be a 2-D array of WAD rows, got {p_rows.ndim} dimensions")
    vocab = p_rows.shape[1] if vocab_size is None else int(vocab_size)
    if not 0 < vocab <= p_rows.shape[1]:
        raise ValueError(f"vocabulary {vocab} does not fit the rows' {p_rows.shape[1]} entries")
    cap = protocol.cap_at_vocab(tokens, k, vocab)
    if not cap + 1 <= p_rows.shape[0] <= k + 1:
        raise ValueError(f"need {cap + 1}..{k + 1} p rows for {k} proposals capped at {cap}, got {p_rows.shape[0]}")
    if not callable(q_rows) and not min(cap + 1, k) <= q_rows.shape[0] <= k:
        raise ValueError(f"need {min(cap + 1, k)}..{k} q rows for {k} proposals capped at {cap}, got {q_rows.shape[0]}")
    root = protocol.draft_root(job_id, cycle, tokens, q)
    if p is None:
        p = tuple(int(p_rows[i, t]) for i, t in enumerate(tokens[:cap])) + (0,) * (k - cap)
    elif len(p) != k:
        raise ValueError(f"{len(p)} p values to post for {k} proposals")
    p = tuple(int(x) for x in p)
    accepted = accepted_count(reveal, root, tokens, q, p, salt=salt, vocab_size=vocab)
    v = protocol.residual_uniform(reveal, root, salt)
    p_next = p_rows[accepted]
    q_next = None if accepted == k else q_rows(accepted) if callable(q_rows) else q_rows[accepted]
    out_token = protocol.emitted_token(p_next, q_next, v)  # an empty residual emits p's own sample (rejection_sample)
    return Decision(root=root, p=p, accepted=accepted, out_token=out_token)
