"""What drafter and verifier hand each other, one cycle at a time.

A Draft is what the drafter commits (commitDraft) plus, off-chain, its full
quantized distributions; a Verification is what the verifier submits
(submitVerification) plus the cycle's outcome. Both are plain data, so the
two sides can live in different processes: pickle a Draft, ship it, verify.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from node import protocol
from node.decoding.distributions import SamplingParams, top_k


@dataclass(frozen=True)
class DecodingJob:
    """What the engine decodes: prompt tokens, token budget, γ, sampling settings, EOS (node/jobs/sessions.py builds one
    from an on-chain job)."""

    job_id: int
    prompt: tuple[int, ...]
    max_new_tokens: int
    gamma: int  # K, proposals per cycle
    sampling: SamplingParams = SamplingParams()
    eos_token_id: int | None = None

    def __post_init__(self):
        if not self.prompt:
            raise ValueError("the prompt needs at least one token")
        if self.max_new_tokens < 1 or self.gamma < 1:
            raise ValueError(f"need max_new_tokens >= 1 and gamma >= 1, got {self.max_new_tokens}, {self.gamma}")

    @property
    def chain_length(self) -> int:
        return protocol.hash_chain_length(self.max_new_tokens)

    def check_fits(self, max_positions: int | None) -> None:
        """The last target pass scores positions up to len(prompt) + max_new_tokens - 1 + gamma."""
        needed = len(self.prompt) + self.max_new_tokens - 1 + self.gamma
        if max_positions is not None and needed > max_positions:
            raise ValueError(
                f"prompt ({len(self.prompt)}) + max_new_tokens ({self.max_new_tokens}) + gamma ({self.gamma}) - 1 "
                f"= {needed} positions exceed the model's {max_positions}"
            )


@dataclass(frozen=True, eq=False)
class Draft:
    job_id: int
    cycle: int
    tokens: tuple[int, ...]  # x_0 .. x_{K-1}
    q: tuple[int, ...]  # q_i(x_i) in WAD, all > 0
    q_rows: np.ndarray | None  # (K, V) WAD rows; off-chain, lets a verifier without the draft model do the residual

    @cached_property
    def root(self) -> bytes:
        return protocol.draft_root(self.job_id, self.cycle, self.tokens, self.q)

    def top_k(self, k: int) -> list[list[tuple[int, int]]]:
        return top_k(self.q_rows, k)


@dataclass(frozen=True)
class DraftFault:
    """A proposal the verifier's own replay of the draft model disagrees with (grounds for a DraftReplay dispute)."""

    index: int
    kind: str  # "q": q_i is not the draft's probability; "x": x_i is not invcdf(q_i, draft uniform)
    claimed: int
    replayed: int


@dataclass(frozen=True, eq=False)
class Verification:
    cycle: int
    reveal: bytes  # r_c from the verifier's hash chain
    root: bytes
    p: tuple[int, ...]  # p_i(x_i) in WAD, i < K
    accepted: int  # n
    out_token: int
    emitted: tuple[int, ...]  # x_0..x_{n-1}, out_token, truncated at EOS (inclusive) and the token budget
    done: bool  # the job ends with this cycle
    draft_faults: tuple[DraftFault, ...]  # empty unless the verifier replays the draft model
    p_rows: np.ndarray  # (K+1, V) target WAD rows, for disputes

    @property
    def record_hash(self) -> bytes:
        return protocol.cycle_record_hash(self.root, self.p, self.accepted, self.out_token)

    def top_k(self, k: int) -> list[list[tuple[int, int]]]:
        return top_k(self.p_rows, k)
