"""Misbehaving sessions, for tests and the demo: what a dispute is there to catch.

* `biased` drafter (`BiasedDraftSession`): on an *ambiguous* position (the draft model's top
  probability below `BiasPolicy.threshold`) it proposes a token it prefers (the draft's second most
  likely token) instead of the inverse-CDF sample of the public draft uniform, and optionally
  understates that token's q. Honest elsewhere. Its commits stay valid (q > 0, the right root), and its
  own cache follows what it actually proposed. The contract cannot tell; a DraftReplay dispute on such
  a position shows that x_i is not `invcdf(q_i, draft_uniform)`.
* `retaliate` verifier (`RetaliatingVerifySession`): posts p_i scaled by `factor` (0.5) on every
  `every`-th proposal of the job (counting cycle·K + i from 0, so position 0 of cycle 0 is one), so the
  on-chain rule rejects more; its outToken is the faithful residual/bonus sample at the contract's n.
  Everything else is honest. A TargetReplay dispute on a shaded position shows p_i is not the target's.

Both mirror the honest session's method step for step (node/decoding/proposer.py, scorer.py) with one
decision changed, so they stay exact everywhere else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from node import protocol
from node.decoding.distributions import quantized
from node.decoding.messages import Draft, Verification
from node.decoding.proposer import DraftSession
from node.decoding.scorer import VerifySession

DRAFTER_BEHAVIORS = ("honest", "biased")
VERIFIER_BEHAVIORS = ("honest", "retaliate")


def check_behavior(role: str, behavior: str) -> str:
    allowed = DRAFTER_BEHAVIORS if role == "drafter" else VERIFIER_BEHAVIORS
    if behavior not in allowed:
        raise ValueError(f"unknown {role} behavior {behavior!r}; choose one of {', '.join(allowed)}")
    return behavior


# --------------------------------------------------------------------------- biased drafter


@dataclass(frozen=True)
class BiasPolicy:
    threshold: float = 0.5  # a position is ambiguous when the draft's largest probability is below this
    understate_q: float = 1.0  # the committed q of a biased proposal is its true q times this (1.0: true q)


@dataclass
class BiasRecord:
    index: int
    honest_token: int  # invcdf(q_i, draft uniform): what an honest drafter proposes
    token: int  # what this drafter proposed
    true_q: int  # the draft's probability of `token`
    q: int  # what it committed


class BiasedDraftSession(DraftSession):
    def __init__(self, draft_model, job, policy: BiasPolicy = BiasPolicy()):
        super().__init__(draft_model, job)
        self.policy = policy
        self.biased: dict[int, list[BiasRecord]] = {}  # cycle -> the positions it biased

    def _choose(self, row: np.ndarray, u: int) -> tuple[int, int, bool]:
        honest = protocol.invcdf(row, u)
        if int(row.max()) >= self.policy.threshold * protocol.WAD:
            return honest, int(row[honest]), False
        order = np.argsort(-row, kind="stable")
        preferred = int(order[1]) if row[order[1]] > 0 else honest
        if preferred == honest:
            return honest, int(row[honest]), False
        q = max(1, int(int(row[preferred]) * self.policy.understate_q))
        return preferred, q, True

    @torch.inference_mode()
    def propose(self, cycle: int) -> Draft:
        if cycle != self.cycle or self._proposed is not None:
            raise RuntimeError(f"expected to propose cycle {self.cycle} (after advance), got cycle {cycle}")
        job, k = self.job, self.job.gamma
        uniforms = [protocol.draft_uniform(job.job_id, cycle, i) for i in range(k)]
        logits = self.lm.extend(self.context[len(self.lm.tokens):])
        rows = np.empty((k, logits.shape[-1]), dtype=np.int64)
        tokens, q, biased = [], [], []
        for i in range(k):
            start = time.perf_counter()
            rows[i] = quantized(logits, job.sampling)[0]
            x, q_i, is_biased = self._choose(rows[i], uniforms[i])
            if is_biased:
                biased.append(BiasRecord(i, protocol.invcdf(rows[i], uniforms[i]), x, int(rows[i, x]), q_i))
            tokens.append(x)
            q.append(q_i)
            self.protocol_s += time.perf_counter() - start
            if i + 1 < k:
                logits = self.lm.extend([x])  # the cache follows what was actually proposed
        self._proposed = tuple(tokens)
        self.biased[cycle] = biased
        return Draft(job_id=job.job_id, cycle=cycle, tokens=self._proposed, q=tuple(q), q_rows=rows)


def draft_session(behavior: str, draft_model, job, policy: BiasPolicy | None = None) -> DraftSession:
    if check_behavior("drafter", behavior) == "biased":
        return BiasedDraftSession(draft_model, job, policy or BiasPolicy())
    return DraftSession(draft_model, job)


# --------------------------------------------------------------------------- retaliating verifier


@dataclass(frozen=True)
class RetaliationPolicy:
    every: int = 3  # shade proposal number cycle·K + i when it is a multiple of `every`
    factor: float = 0.5  # posted p = true p × factor


class RetaliatingVerifySession(VerifySession):
    def __init__(self, target_model, job, verifier_seed: bytes, draft_model=None, tolerance_wad: int | None = None,
                 policy: RetaliationPolicy = RetaliationPolicy()):
        super().__init__(target_model, job, verifier_seed, draft_model=draft_model, tolerance_wad=tolerance_wad)
        self.policy = policy
        self.true_p: dict[int, tuple[int, ...]] = {}  # cycle -> the target's real p at the proposals

    def shaded(self, cycle: int, index: int) -> bool:
        return (cycle * self.job.gamma + index) % self.policy.every == 0

    @torch.inference_mode()
    def verify(self, cycle: int, draft: Draft) -> Verification:
        job, k = self.job, len(draft.tokens)
        if self.done or cycle != self.cycle or self._last is not None:
            raise RuntimeError(f"expected to verify cycle {self.cycle} (after advance, before done), got cycle {cycle}")
        if draft.job_id != job.job_id or draft.cycle != cycle or k != job.gamma:
            raise ValueError(f"draft for job {draft.job_id} cycle {draft.cycle} with {k} tokens does not fit "
                             "this cycle")
        logits = self.target.extend(self.context[len(self.target.tokens):] + list(draft.tokens), keep=k + 1)
        faults = ()
        if self.replay is not None:
            q_logits = self.replay.extend(self.context[len(self.replay.tokens):] + list(draft.tokens[:-1]), keep=k)
        p_rows = quantized(logits, job.sampling)
        if self.replay is not None:
            q_rows = quantized(q_logits, job.sampling)
            faults = self._draft_faults(draft, q_rows)
        elif draft.q_rows is not None:
            q_rows = draft.q_rows
        else:
            raise ValueError("this verifier holds no draft model, so the draft must carry its distributions (q_rows)")

        reveal = self.reveals[cycle]
        root = protocol.draft_root(job.job_id, cycle, draft.tokens, draft.q)
        true_p = tuple(int(p_rows[i, t]) for i, t in enumerate(draft.tokens))
        p = tuple(int(v * self.policy.factor) if self.shaded(cycle, i) else v for i, v in enumerate(true_p))
        accepted = protocol.count_accepted(reveal, root, draft.q, p)  # what the contract will decide
        v = protocol.residual_uniform(reveal, root)
        try:
            out_token = protocol.emitted_token(p_rows[accepted], q_rows[accepted] if accepted < k else None, v)
        except ValueError:  # p row == q row: a rejection only the shading caused; sample p itself
            out_token = protocol.invcdf(p_rows[accepted], v)
        proposed = list(draft.tokens[:accepted]) + [out_token]
        emitted = protocol.truncate_emitted(proposed, job.eos_token_id, job.max_new_tokens - self.generated)
        done = (job.eos_token_id is not None and job.eos_token_id in emitted) or (
            self.generated + len(emitted) >= job.max_new_tokens)
        verification = Verification(cycle=cycle, reveal=reveal, root=root, p=p, accepted=accepted, out_token=out_token,
                                    emitted=tuple(emitted), done=done, draft_faults=faults, p_rows=p_rows)
        self.true_p[cycle] = true_p
        self._last = (draft, verification)
        return verification


def verify_session(behavior: str, target_model, job, seed: bytes, draft_model=None,
                   policy: RetaliationPolicy | None = None) -> VerifySession:
    if check_behavior("verifier", behavior) == "retaliate":
        return RetaliatingVerifySession(target_model, job, seed, draft_model=draft_model,
                                        policy=policy or RetaliationPolicy())
    return VerifySession(target_model, job, seed, draft_model=draft_model)


__all__ = ["BiasPolicy", "BiasRecord", "BiasedDraftSession", "RetaliationPolicy", "RetaliatingVerifySession",
           "DRAFTER_BEHAVIORS", "VERIFIER_BEHAVIORS", "check_behavior", "draft_session", "verify_session"]
