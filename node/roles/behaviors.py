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
* `shade` verifier (`ShadingVerifySession`): the quiet retaliation. It posts every proposal's p_i scaled by
  `ShadePolicy.factor` (0.6), so that no single value is far off yet the on-chain rule rejects about twice
  as often: 23 % → 45 % of the proposals it tests on the bundled pair (60 jobs, temperature 1, γ = 4), and
  23.5 % → 47.4 % in scripts/bench_watchdog.py (200 honest, 30 shaded jobs); outToken as `retaliate`'s.
* `collude` verifier (`ColludingVerifySession`): covers for its drafter. Its draft replay reports no fault,
  so a verifier node told to dispute draft faults (`dispute_faults`) opens no DraftReplay dispute; its own
  verdict is the honest one (the residual still comes from its replay of the draft model). Paired with a
  `biased` drafter, only a watchdog's draft replay catches the bias.
* `lazy` drafter (`LazyDraftSession`): registers the draft model but serves a cheaper one, the same weights
  fed only the last `LazyPolicy.window` (2) tokens (no KV cache, a constant cost per step). Its q and x are
  honest for that cheaper model; a DraftReplay with the registered model finds q off beyond tolerance.

* A colluding pair for transcript mode, where no contract checks a cycle before settlement: an `overaccept`
  verifier (`OverAcceptingVerifySession`) accepts every proposal of a cycle the rule cuts short (it signs an accept
  count the rule refutes; p, q and the tokens stay honest), and a `cosign` drafter co-signs whatever its verifier
  answers (`cosigning_rule`: its link checks the signatures, the state chain and the reveal, never the accept count).
  The drafter gains the pay of every proposal, the requester gets tokens no verification sampled. Settlement
  accepts it (it does not re-run the rule); a watchdog's rule check of the settled records finds it, and
  `challengeRule` slashes both signers. In per-cycle mode both are honest (the market re-runs the rule on each
  verification, so an over-accepting `submitVerification` would only revert).

* A `signwrong` verifier (transcript mode, against an honest drafter) signs the same over-accepting Verification as
  `overaccept`; the honest drafter refuses to counter-sign it and forces with its Draft, and this verifier answers
  that force on chain with the Verification the rule gives (`rule_answer`: the same p and outToken, the rule's accept
  count), so it is not slashed for that force, then goes silent on the job (`goes_silent`: no link, no more answers).
  The attack it tests: an on-chain answer is not a signature, so the drafter holds no signed state to go on from; it
  goes on from the state the chain attested, forces again, and the verifier is slashed at the claim.

* Withheld messages (transcript mode, v2.1), each against an honest party who must make its move from chain data: a
  `withhold` verifier signs its Verification of cycle 1 (WITHHELD_CYCLE) but never sends it over the link, and its
  node's honest silence watch forces the drafter with it (the Verification is in the force's evidence); a `nosign`
  verifier never signs the Settlement and never forces once the job ended; a `nopost` drafter co-signs the Settlement
  and never posts it. The honest answers: the drafter drafts on the forced Verification and answers on chain, the
  drafter forces with the final Verification, the verifier posts the Settlement it holds both signatures of.

Each overrides only the honest session's one decision (`DraftSession._choose` or the model it computes q with,
`VerifySession._decide` or `_draft_faults`, in node/decoding/proposer.py and scorer.py), so everything else is
the honest code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from node import protocol
from node.decoding import sampler
from node.decoding.messages import Draft, DraftFault
from node.decoding.proposer import DraftSession
from node.decoding.sampler import Decision
from node.decoding.scorer import VerifySession


class _Behavior(StrEnum):
    """Behaviours by name: the value is what `serve --behavior` takes (a StrEnum, so typer offers the choices)."""

    @classmethod
    def parse(cls, behavior: str):
        """The member whose value is `behavior` (or the member itself); ValueError naming the valid ones otherwise."""
        try:
            return cls(behavior)
        except ValueError:
            role = cls.__name__.removesuffix("Behavior").lower()
            raise ValueError(f"unknown {role} behavior {str(behavior)!r}; choose one of {', '.join(cls)}") from None


class DrafterBehavior(_Behavior):
    HONEST = "honest"
    BIASED = "biased"  # BiasedDraftSession
    LAZY = "lazy"  # LazyDraftSession
    COSIGN = "cosign"  # transcript mode: co-signs any Verification (cosigning_rule)
    NOPOST = "nopost"  # transcript mode: co-signs the Settlement, never posts it


class VerifierBehavior(_Behavior):
    HONEST = "honest"
    RETALIATE = "retaliate"  # RetaliatingVerifySession
    SHADE = "shade"  # ShadingVerifySession
    COLLUDE = "collude"  # ColludingVerifySession
    OVERACCEPT = "overaccept"  # transcript mode: OverAcceptingVerifySession, with a cosign drafter
    SIGNWRONG = "signwrong"  # transcript mode: signs a wrong Verification, answers forces by the rule, goes silent
    WITHHOLD = "withhold"  # transcript mode: withholds its Verification of cycle 1 from the link, forces with it
    NOSIGN = "nosign"  # transcript mode: never signs the Settlement (and never forces once the job ended)


class RefereeBehavior(_Behavior):
    HONEST = "honest"  # a referee has no misbehaviour here (yet): colluding panels are a soundness issue


BEHAVIORS = {"drafter": DrafterBehavior, "verifier": VerifierBehavior, "referee": RefereeBehavior}  # serve --behavior


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

    def _choose(self, cycle: int, index: int, row: np.ndarray, u: int) -> tuple[int, int]:
        records = self.biased.setdefault(cycle, [])
        honest, honest_q = super()._choose(cycle, index, row, u)
        if int(row.max()) >= self.policy.threshold * protocol.WAD:
            return honest, honest_q
        order = np.argsort(-row, kind="stable")
        preferred = int(order[1]) if row[order[1]] > 0 else honest
        if preferred == honest:
            return honest, honest_q
        q = max(1, int(int(row[preferred]) * self.policy.understate_q))
        records.append(BiasRecord(index, honest, preferred, int(row[preferred]), q))
        return preferred, q  # the session's cache follows what was actually proposed


# --------------------------------------------------------------------------- lazy drafter


@dataclass(frozen=True)
class LazyPolicy:
    window: int = 2  # the cheaper model: the draft model fed only the last `window` tokens of the context


class _WindowLM:
    """The draft model on a truncated context, in CachedLM's interface: every step is one forward over the last
    `window` tokens, without a cache (a constant cost per token however long the job)."""

    def __init__(self, model, window: int):
        if window < 1:
            raise ValueError(f"a lazy drafter's window is at least 1 token, got {window}")
        self.model, self.window, self.device = model, window, model.device
        self.tokens: list[int] = []
        self.forward_s, self.forwards = 0.0, 0

    def extend(self, tokens: list[int], keep: int = 1):
        import time

        import torch

        if keep != 1 or not tokens:
            raise ValueError("a lazy drafter feeds at least one token and keeps one row")
        start = time.perf_counter()
        self.tokens.extend(tokens)
        ids = torch.tensor([self.tokens[-self.window :]], dtype=torch.long, device=self.device)
        logits = self.model(input_ids=ids, use_cache=False).logits[0, -1:]
        self.forward_s += time.perf_counter() - start
        self.forwards += 1
        return logits

    def crop(self, length: int) -> None:
        del self.tokens[length:]


class LazyDraftSession(DraftSession):
    def __init__(self, draft_model, job, policy: LazyPolicy = LazyPolicy()):
        super().__init__(draft_model, job)
        self.policy = policy
        self.lm = _WindowLM(draft_model, policy.window)  # the one thing it changes: what computes q


def draft_session(
    behavior: DrafterBehavior | str,
    draft_model,
    job,
    policy: BiasPolicy | None = None,
    *,
    lazy: LazyPolicy | None = None,
) -> DraftSession:
    """A drafter session of `behavior`; `policy` tunes `biased`, `lazy` tunes `lazy` (defaults otherwise)."""
    behavior = DrafterBehavior.parse(behavior)
    if behavior is DrafterBehavior.BIASED:
        return BiasedDraftSession(draft_model, job, policy or BiasPolicy())
    if behavior is DrafterBehavior.LAZY:
        return LazyDraftSession(draft_model, job, lazy or LazyPolicy())
    return DraftSession(draft_model, job)


# --------------------------------------------------------------------------- retaliating verifier


@dataclass(frozen=True)
class RetaliationPolicy:
    every: int = 3  # shade proposal number cycle·K + i when it is a multiple of `every`
    factor: float = 0.5  # posted p = true p × factor


class RetaliatingVerifySession(VerifySession):
    def __init__(
        self,
        target_model,
        job,
        verifier_seed: bytes,
        draft_model=None,
        tolerance_wad: int | None = None,
        policy: RetaliationPolicy = RetaliationPolicy(),
        salt: int | None = 0,
    ):
        super().__init__(
            target_model, job, verifier_seed, draft_model=draft_model, tolerance_wad=tolerance_wad, salt=salt
        )
        self.policy = policy
        self.true_p: dict[int, tuple[int, ...]] = {}  # cycle -> the target's real p at the proposals

    def shaded(self, cycle: int, index: int) -> bool:
        return (cycle * self.job.gamma + index) % self.policy.every == 0

    def _decide(self, cycle: int, reveal: bytes, draft: Draft, p_rows: np.ndarray, q_rows: np.ndarray) -> Decision:
        true_p = tuple(int(p_rows[i, t]) for i, t in enumerate(draft.tokens))
        p = tuple(int(v * self.policy.factor) if self.shaded(cycle, i) else v for i, v in enumerate(true_p))
        self.true_p[cycle] = true_p
        # the rule on the shaded p: what the contract will decide, and the faithful residual/bonus sample at its n
        job_id = self.job.job_id
        return sampler.decide(job_id, cycle, reveal, draft.tokens, draft.q, p_rows, q_rows, salt=self.salt, p=p)


# --------------------------------------------------------------------------- shading verifier


@dataclass(frozen=True)
class ShadePolicy:
    factor: float = 0.6  # posted p = true p × factor on every proposal: rejections ~2× on the bundled pair


class ShadingVerifySession(RetaliatingVerifySession):
    def __init__(
        self, target_model, job, verifier_seed: bytes, draft_model=None, tolerance_wad=None, policy=None, salt=0
    ):
        policy = policy or ShadePolicy()
        super().__init__(
            target_model,
            job,
            verifier_seed,
            draft_model=draft_model,
            tolerance_wad=tolerance_wad,
            policy=RetaliationPolicy(every=1, factor=policy.factor),
            salt=salt,
        )
        self.shade = policy


# --------------------------------------------------------------------------- colluding verifier


class ColludingVerifySession(VerifySession):
    """Replays the draft like an honest verifier (its residual needs the draft's distributions) but reports no
    fault, so its node never disputes its drafter."""

    def _draft_faults(self, draft: Draft, q_rows: np.ndarray) -> tuple[DraftFault, ...]:
        return ()


# --------------------------------------------------------------------------- transcript mode: a colluding pair


class OverAcceptingVerifySession(VerifySession):
    """Accepts all γ proposals of any cycle whose honest verdict rejects one (every proposal inside the vocabulary),
    keeping the honest p and outToken: a record whose `accepted` the rule refutes."""

    def _decide(self, cycle: int, reveal: bytes, draft: Draft, p_rows: np.ndarray, q_rows: np.ndarray) -> Decision:
        honest = super()._decide(cycle, reveal, draft, p_rows, q_rows)
        k = len(draft.tokens)
        if honest.accepted >= k or any(not 0 <= int(t) < p_rows.shape[1] for t in draft.tokens):
            return honest
        return Decision(root=honest.root, p=honest.p, accepted=k, out_token=honest.out_token)


def cosigning_rule(spec, draft, v, prev_reveal: bytes, generated: int) -> tuple[int, ...]:
    """`link.job.check_cycle` without the accept count: the tokens the Verification says the cycle emits. The reveal
    is still checked (settlement reverts on a wrong one, and a colluder wants its pay)."""
    from node.link.job import RuleViolation

    if protocol.hash_chain(v.reveal, 1) != prev_reveal:
        raise RuleViolation(f"Verification of cycle {draft.cycle}: the reveal is not the next link of the chain")
    job = spec.job
    emitted = [*draft.tokens[: v.accepted], v.out_token]
    return tuple(protocol.truncate_emitted(emitted, job.eos_token_id, job.max_new_tokens - generated))


def link_drafter_options(behavior: DrafterBehavior | str, draft_model, policy: BiasPolicy | None = None) -> dict:
    """`DrafterLink`'s keyword arguments for a transcript job drafted with `behavior` (none when honest)."""
    behavior = DrafterBehavior.parse(behavior)
    if behavior is DrafterBehavior.COSIGN:
        return {"rule": cosigning_rule}
    if behavior is DrafterBehavior.HONEST:
        return {}
    return {"new_session": lambda job: draft_session(behavior, draft_model, job, policy)}


def link_verifier_options(behavior: VerifierBehavior | str) -> dict:
    """`LinkServer.open_job`'s keyword arguments for a transcript job verified with `behavior` (none when honest)."""
    behavior = VerifierBehavior.parse(behavior)
    if behavior in (VerifierBehavior.OVERACCEPT, VerifierBehavior.SIGNWRONG):
        return {"session_class": OverAcceptingVerifySession, "rule": cosigning_rule}
    if behavior is VerifierBehavior.COLLUDE:
        return {"session_class": ColludingVerifySession}
    if behavior is VerifierBehavior.WITHHOLD:
        return {"withhold_from": WITHHELD_CYCLE}
    if behavior is VerifierBehavior.NOSIGN:
        return {"signs_settlement": False}
    return {}


WITHHELD_CYCLE = 1  # `withhold`: the cycle whose Verification (and every later one) never goes over the link


def stalls_at_end(behavior: VerifierBehavior | str) -> bool:
    """Whether a verifier of `behavior` does nothing once the job ended (`nosign`: no Settlement, no force)."""
    return VerifierBehavior.parse(behavior) is VerifierBehavior.NOSIGN


def posts_settlement(behavior: DrafterBehavior | str) -> bool:
    """Whether a drafter of `behavior` posts the Settlement both signed (not `nopost`)."""
    return DrafterBehavior.parse(behavior) is not DrafterBehavior.NOPOST


def goes_silent(behavior: VerifierBehavior | str) -> bool:
    """Whether a verifier of `behavior` stops serving a job once it answered a force on it (`signwrong`)."""
    return VerifierBehavior.parse(behavior) is VerifierBehavior.SIGNWRONG


def rule_answer(behavior: VerifierBehavior | str, spec, draft, v):
    """What a verifier of `behavior` posts on chain for a force at its Verification `v` of `draft`: `v` itself, but
    for `signwrong` the rule's accept count (the on-chain answer must follow the rule, or it is no answer)."""
    from node.chain.transcript import Cycle

    cycle = Cycle.of(draft, v)
    if not goes_silent(behavior):
        return cycle
    n = sampler.accepted_count(
        v.reveal, draft.draft_root, draft.tokens, draft.q, v.p, salt=draft.salt, vocab_size=spec.vocab_size
    )
    return Cycle(cycle.tokens, cycle.q, cycle.p, n, cycle.out_token)


def verify_session(
    behavior: VerifierBehavior | str,
    target_model,
    job,
    seed: bytes,
    draft_model=None,
    policy: RetaliationPolicy | None = None,
    *,
    salt: int | None,
    shade: ShadePolicy | None = None,
) -> VerifySession:
    """A verifier session of `behavior`, built with the job's drafter salt, which every caller names (0: the local
    engine's; None: not known, its verify refuses): a forgotten salt would give wrong uniforms, not an error;
    `policy` tunes `retaliate`, `shade` tunes `shade` (defaults otherwise)."""
    behavior = VerifierBehavior.parse(behavior)
    if behavior is VerifierBehavior.RETALIATE:
        return RetaliatingVerifySession(
            target_model, job, seed, draft_model=draft_model, policy=policy or RetaliationPolicy(), salt=salt
        )
    if behavior is VerifierBehavior.SHADE:
        return ShadingVerifySession(target_model, job, seed, draft_model=draft_model, policy=shade, salt=salt)
    if behavior is VerifierBehavior.COLLUDE:
        return ColludingVerifySession(target_model, job, seed, draft_model=draft_model, salt=salt)
    return VerifySession(target_model, job, seed, draft_model=draft_model, salt=salt)


__all__ = [
    "BiasPolicy",
    "BiasRecord",
    "BiasedDraftSession",
    "ColludingVerifySession",
    "DrafterBehavior",
    "LazyDraftSession",
    "LazyPolicy",
    "OverAcceptingVerifySession",
    "RetaliatingVerifySession",
    "RetaliationPolicy",
    "ShadePolicy",
    "ShadingVerifySession",
    "VerifierBehavior",
    "cosigning_rule",
    "draft_session",
    "goes_silent",
    "link_drafter_options",
    "link_verifier_options",
    "posts_settlement",
    "rule_answer",
    "stalls_at_end",
    "verify_session",
]
