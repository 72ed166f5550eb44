"""The drafter: the draft model, its KV cache, and K proposals per cycle.

Proposal i of cycle c is x_i = invcdf(q_i, draft_uniform(job, c, i)) over the
quantized draft distribution q_i, so anyone holding the draft model can
replay it: the drafter has no freedom (docs/protocol.md §3).

The cache always holds a prefix of the context that is at least one token
short: the token the verifier emitted last is fed first at the next cycle,
so the draft sees it before proposing what follows.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from node import protocol
from node.decoding.distributions import quantized
from node.decoding.kv import CachedLM
from node.decoding.loading import max_positions
from node.decoding.messages import DecodingJob, Draft


class DraftSession:
    def __init__(self, draft_model, job: DecodingJob):
        self.lm = CachedLM(draft_model)
        job.check_fits(max_positions(draft_model))
        self.job = job
        self.context = list(job.prompt)  # prompt + every token emitted so far
        self.cycle = 0
        self._proposed: tuple[int, ...] | None = None  # this cycle's proposals, until advance()
        self.protocol_s = 0.0  # time in quantization, inverse CDF and uniforms

    @torch.inference_mode()
    def propose(self, cycle: int) -> Draft:
        if cycle != self.cycle or self._proposed is not None:
            raise RuntimeError(f"expected to propose cycle {self.cycle} (after advance), got cycle {cycle}")
        job, k = self.job, self.job.gamma
        start = time.perf_counter()
        # all K public uniforms in one burst: cheaper than one between every two forwards (warm caches)
        uniforms = [protocol.draft_uniform(job.job_id, cycle, i) for i in range(k)]
        self.protocol_s += time.perf_counter() - start
        logits = self.lm.extend(self.context[len(self.lm.tokens) :])
        rows = np.empty((k, logits.shape[-1]), dtype=np.int64)
        tokens, q = [], []
        for i in range(k):
            start = time.perf_counter()
            rows[i] = quantized(logits, job.sampling)[0]
            x, q_i = self._choose(cycle, i, rows[i], uniforms[i])
            tokens.append(x)
            q.append(q_i)
            self.protocol_s += time.perf_counter() - start
            if i + 1 < k:  # x_{K-1}'s own successor distribution is never needed
                logits = self.lm.extend([x])
        self._proposed = tuple(tokens)
        return Draft(job_id=job.job_id, cycle=cycle, tokens=self._proposed, q=tuple(q), q_rows=rows)

    def _choose(self, cycle: int, index: int, row: np.ndarray, u: int) -> tuple[int, int]:
        """Proposal `index` and the q committed for it: the inverse-CDF sample of the public uniform.

        The one decision a drafter makes; node/roles/behaviors.py overrides it to misbehave.
        """
        x = protocol.invcdf(row, u)
        return x, int(row[x])  # q > 0: invcdf never lands on a token without mass

    def advance(self, emitted) -> None:
        """Take in the tokens the cycle emitted and roll the cache back to the accepted proposals."""
        if self._proposed is None:
            raise RuntimeError("advance() before propose()")
        # the cache holds context + x_0..x_{K-2}: proposals that were emitted stay, the rest goes, and
        # the last emitted token always stays out, to be fed first next cycle (its logits are q_0's)
        kept = min(_common_prefix(self._proposed, emitted), len(self._proposed) - 1, len(emitted) - 1)
        self.lm.crop(len(self.context) + kept)
        self.context.extend(emitted)
        self.cycle += 1
        self._proposed = None


def _common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
