"""The verifier: the target model, its KV cache, the hash chain, and one verdict per cycle.

One target forward over [tokens not yet cached] + the K proposals yields p
at all K+1 positions. The rejection sampler then applies the on-chain accept
rule and draws the cycle's last token. The residual needs the draft's whole
distribution at the first rejected position, which the chain does not carry:

* holding no draft model, the session takes it from the Draft (a co-located
  or trusted drafter; this is what SpeculativeDecoder.generate does by default);
* holding the draft model, it replays the draft over the K proposals by
  teacher forcing (about one draft step), checks every q_i and x_i against
  that replay, and uses its own replay for the residual (docs/protocol.md §4).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from node import protocol
from node.decoding import sampler
from node.decoding.distributions import quantized
from node.decoding.kv import CachedLM
from node.decoding.loading import max_positions
from node.decoding.messages import DecodingJob, Draft, DraftFault, Verification


def default_tolerance_wad(dtype: torch.dtype) -> int:
    """How far (in WAD) a replayed probability or CDF point may sit from the claim and still count as faithful.

    docs/protocol.md §6: replays differ in the last digits (here: one token at a time
    versus teacher-forced in one pass). 1e-4 (fp32) and 1e-2 (bf16) leave wide
    margins over the gaps measured on the bundled pair (docs/engine.md, "Design": the untrusting verifier).
    """
    return 10**14 if dtype in (torch.float32, torch.float64) else 10**16


class VerifySession:
    def __init__(
        self,
        target_model,
        job: DecodingJob,
        verifier_seed: bytes,
        draft_model=None,
        tolerance_wad: int | None = None,
        salt: int | None = 0,
    ):
        self.target = CachedLM(target_model)
        self.replay = CachedLM(draft_model) if draft_model is not None else None  # the draft model, teacher-forced
        job.check_fits(max_positions(target_model))
        self.job = job
        self.tolerance_wad = (
            tolerance_wad
            if tolerance_wad is not None
            else (default_tolerance_wad(draft_model.dtype) if draft_model is not None else 0)
        )
        self.reveals = protocol.chain_reveals(verifier_seed, job.chain_length)
        self.chain_head = protocol.hash_chain(self.reveals[0], 1)  # committed at acceptJob
        # the drafter's salt (docs/protocol.md §3): on chain it comes with the cycle-0 draft, after the head; a
        # node sets it before the first verify (None: not known yet, verify refuses)
        self.salt = salt
        self.context = list(job.prompt)
        self.generated = 0
        self.done = False
        self.cycle = 0
        self._last: tuple[Draft, Verification] | None = None  # this cycle's outcome, until advance()
        self.protocol_s = 0.0  # time in quantization, hashing and sampling

    @torch.inference_mode()
    def verify(self, cycle: int, draft: Draft) -> Verification:
        job, k = self.job, len(draft.tokens)
        if self.salt is None:
            raise RuntimeError("the drafter's salt is not known yet (it comes with the cycle-0 draft)")
        if self.done or cycle != self.cycle or self._last is not None:
            raise RuntimeError(f"expected to verify cycle {self.cycle} (after advance, before done), got cycle {cycle}")
        if draft.job_id != job.job_id or draft.cycle != cycle or k != job.gamma:
            raise ValueError(
                f"draft for job {draft.job_id} cycle {draft.cycle} with {k} tokens does not fit this cycle"
            )

        # ONE target pass for K+1 positions: p_0..p_{K-1} at the proposals, p_K for the bonus token
        logits = self.target.extend(self.context[len(self.target.tokens) :] + list(draft.tokens), keep=k + 1)
        faults: tuple[DraftFault, ...] = ()
        if self.replay is not None:
            # teacher forcing: the draft's distributions at the same K positions, in one pass
            q_logits = self.replay.extend(self.context[len(self.replay.tokens) :] + list(draft.tokens[:-1]), keep=k)
        start = time.perf_counter()
        p_rows = quantized(logits, job.sampling)
        if self.replay is not None:
            q_rows = quantized(q_logits, job.sampling)
            faults = self._draft_faults(draft, q_rows)
        elif draft.q_rows is not None:
            q_rows = draft.q_rows
        else:
            raise ValueError("this verifier holds no draft model, so the draft must carry its distributions (q_rows)")

        reveal = self.reveals[cycle]
        decision = self._decide(cycle, reveal, draft, p_rows, q_rows)
        proposed = list(draft.tokens[: decision.accepted]) + [decision.out_token]
        emitted = protocol.truncate_emitted(proposed, job.eos_token_id, job.max_new_tokens - self.generated)
        done = (job.eos_token_id is not None and job.eos_token_id in emitted) or (
            self.generated + len(emitted) >= job.max_new_tokens
        )
        verification = Verification(
            cycle=cycle,
            reveal=reveal,
            root=decision.root,
            p=decision.p,
            accepted=decision.accepted,
            out_token=decision.out_token,
            emitted=tuple(emitted),
            done=done,
            draft_faults=faults,
            p_rows=p_rows,
        )
        self._last = (draft, verification)
        self.protocol_s += time.perf_counter() - start
        return verification

    def _decide(
        self, cycle: int, reveal: bytes, draft: Draft, p_rows: np.ndarray, q_rows: np.ndarray
    ) -> sampler.Decision:
        """The cycle's verdict: the p values to post, n and outToken, by the pure rejection sampler.

        The one decision a verifier makes; node/roles/behaviors.py overrides it to misbehave.
        """
        return sampler.decide(self.job.job_id, cycle, reveal, draft.tokens, draft.q, p_rows, q_rows, salt=self.salt)

    def advance(self, emitted) -> None:
        """Take in the cycle's emitted tokens (as the chain recorded them) and roll the caches back."""
        if self._last is None:
            raise RuntimeError("advance() before verify()")
        draft, verification = self._last
        if tuple(emitted) != verification.emitted:
            raise ValueError(f"emitted {list(emitted)} differ from this verifier's {list(verification.emitted)}")
        # keep the accepted proposals; the last emitted token stays out, to be fed first next cycle
        kept = min(verification.accepted, len(emitted) - 1)
        self.target.crop(len(self.context) + kept)  # it holds context + all K proposals
        if self.replay is not None:
            self.replay.crop(len(self.context) + min(kept, len(draft.tokens) - 1))  # it holds context + K-1
        self.context.extend(emitted)
        self.generated += len(emitted)
        self.done = verification.done
        self.cycle += 1
        self._last = None

    def _draft_faults(self, draft: Draft, q_rows: np.ndarray) -> tuple[DraftFault, ...]:
        """Every q_i and x_i that the replay contradicts beyond the tolerance (`protocol.check_proposal`)."""
        faults = []
        for i, (x, q) in enumerate(zip(draft.tokens, draft.q)):
            u = protocol.draft_uniform(draft.job_id, draft.cycle, i)
            check = protocol.check_proposal(q_rows[i], x, q, u, self.tolerance_wad)
            if not check.q_faithful:
                faults.append(DraftFault(i, "q", q, check.replayed_q))
            if not check.token_faithful:
                faults.append(DraftFault(i, "x", x, protocol.invcdf(q_rows[i], u)))
        return tuple(faults)
