"""The rejection sampler: pure, the on-chain accept rule plus the verifier's outToken.

Given one cycle's proposals and the quantized distributions of both models,
it decides exactly what the contract decides (protocol.count_accepted over
the draft root, the hash-chain reveal and the drafter's salt) and then draws the cycle's last
token from the residual norm(max(0, p_n - q_n)) at the first rejection, or
from p_K when all K were accepted, with the public residual uniform. It owns
no model, no cache and no state, so it is tested on its own.

Why this is exact: x_i ~ q_i, accepted with probability min(1, p_i/q_i),
and the residual puts back exactly the mass of p that acceptance missed, so
every emitted token is distributed as p (in WAD units, exactly).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from node import protocol


@dataclass(frozen=True)
class Decision:
    root: bytes  # the draft root the contract recomputes from (tokens, q)
    p: tuple[int, ...]  # p_i(x_i) in WAD for i < K: what submitVerification posts
    accepted: int  # n, the accepted prefix length
    out_token: int  # residual sample at n (n < K) or bonus sample from p_K (n == K)


def decide(
    job_id: int,
    cycle: int,
    reveal: bytes,
    tokens: Sequence[int],
    q: Sequence[int],
    p_rows: np.ndarray,
    q_rows: np.ndarray,
    *,
    salt: int,
) -> Decision:
    """One cycle's verdict.

    salt: the job's drafter salt (committed with the cycle-0 draft), in every accept and residual uniform.

    tokens, q: the K proposals and the drafter's claimed q_i(x_i) (as committed).
    p_rows: (K+1, V) target WAD rows at the K proposal positions and the bonus position.
    q_rows: (K, V) draft WAD rows at the proposal positions; only row n is read, for the residual.
    """
    k = len(tokens)
    if p_rows.shape[0] != k + 1 or q_rows.shape[0] != k:
        raise ValueError(f"need {k + 1} p rows and {k} q rows, got {p_rows.shape[0]} and {q_rows.shape[0]}")
    root = protocol.draft_root(job_id, cycle, tokens, q)
    p = tuple(int(p_rows[i, t]) for i, t in enumerate(tokens))
    accepted = protocol.count_accepted(reveal, root, q, p, salt)
    v = protocol.residual_uniform(reveal, root, salt)
    q_next = q_rows[accepted] if accepted < k else None
    out_token = protocol.emitted_token(p_rows[accepted], q_next, v)
    return Decision(root=root, p=p, accepted=accepted, out_token=out_token)
