"""The watchdog's audit: replay a job from chain data alone and list what a dispute would prove.

One implementation for the manual `verispec audit` (`replay_draft`, `replay_target`: every position of one job) and
the watchdog node (node/roles/watchdog/node.py: `audit_job` on the positions it samples). Both decide by the referees'
own rule: the draft side by `protocol.check_proposal` (what `referee.judge_position` applies to a DraftReplay),
the target side by `referee.judge_position` itself, in fp32 on CPU, so an audit flags exactly what the referees
would find.

Cost: a forward over one cycle's committed context (prefix + its K proposals) gives the row of every position of that
cycle (`CycleRows`), so an audit costs one draft forward per draft-audited cycle and one target forward per
target-audited cycle (plus one draft forward for the residual behind an audited outToken after a rejection, shared
with the draft audit of that cycle). Each position is judged in the context the drafter committed (what a referee
replays), not in the context an honest drafter would have drawn.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from node import protocol
from node.audit_sampling import WAD, Position, entropy
from node.chain.enums import DisputeKind
from node.jobs import chaindata
from node.link import settled
from node.requester.checkpoints import ModelInfo, load_model_info, load_tokenizer
from node.requester.client import Requester
from node.requester.errors import RequesterError


@dataclass
class DraftCheck:
    """One committed proposal the honest replay of the draft model disagrees with."""

    cycle: int
    index: int
    committed_token: int
    committed_q: int
    replay_token: int  # what invcdf(replayed q, public uniform) gives
    replay_q: int  # the replayed probability of the committed token
    binding: bool  # index <= accepted: a dispute on it can be opened
    reason: str  # "token" (not the inverse-CDF sample) or "q" (probability off beyond tolerance)


@dataclass
class TargetCheck:
    """One binding position whose posted p_i, or whose outToken (index == γ), the target model's replay contradicts."""

    cycle: int
    index: int  # i < γ: p_i of proposal i; γ: the outToken
    claimed: int  # p_i (WAD) or the outToken
    reason: str  # the referees' own words for it (referee.judge_position)


@dataclass
class AuditJob:
    """A job as chain data alone gives it: its request, the engine's view of it, its verified cycles."""

    record: chaindata.ChainJob
    job: object  # node.decoding.messages.DecodingJob
    cycles: list[chaindata.ChainCycle]  # the verified ones, in order (with p when loaded `with_p`)

    def prefixes(self) -> list[list[int]]:
        """Per cycle, the prompt plus the outputs of every earlier cycle."""
        prefix, found = list(self.job.prompt), []
        for cycle in self.cycles:
            found.append(list(prefix))
            prefix.extend(cycle.output)
        return found


@dataclass
class Audit:
    """What `audit_job` replayed and found."""

    draft: list[DraftCheck] = field(default_factory=list)
    target: list[TargetCheck] = field(default_factory=list)
    draft_cycles: list[int] = field(default_factory=list)  # cycles whose proposals were checked
    target_positions: list[tuple[int, int]] = field(default_factory=list)  # (cycle, index) judged
    draft_forwards: int = 0
    target_forwards: int = 0


def load_job(system, job_id: int, start_block: int, tokenizer, max_positions=None, with_p: bool = True) -> AuditJob:
    """The job's request and verified cycles from chain data (`with_p`: with every cycle's posted p); a transcript
    job's from its settlement (node/link/settled.py), none before it settled."""
    from node.jobs import sessions

    record = chaindata.job_request(system, job_id, from_block=start_block)
    job = sessions.job_from_record(record, tokenizer, max_positions)
    cycles = []
    for cycle in settled.job_cycles(system, job_id, start_block, with_p=with_p):  # either mode
        if not cycle.verified:
            break
        cycles.append(cycle)
    return AuditJob(record, job, cycles)


class CycleRows:
    """`rows(model, context)` for `judge_position` over one cycle: one forward per model over the cycle's committed
    context (prefix + its proposals, cut before the first one outside the vocabulary: no model defines what follows
    it, and the judge never asks past it), every position's row read from that forward."""

    def __init__(self, prefix: list[int], tokens, sampling, vocab: int):
        good = []
        for token in tokens:
            if not 0 <= int(token) < vocab:
                break
            good.append(int(token))
        self.base = len(prefix)
        self.full = list(prefix) + good
        self.sampling = sampling
        self._rows: dict[int, object] = {}

    def context(self, index: int) -> list[int]:
        return self.full[: self.base + index]

    def computed(self, model) -> bool:
        return id(model) in self._rows

    def __call__(self, model, context):
        from node.jobs.models import next_token_rows

        i = len(context) - self.base
        if not 0 <= i <= len(self.full) - self.base or list(context) != self.full[: len(context)]:
            return next_token_rows(model, context, self.sampling)[0]  # not this cycle's context: a fresh forward
        if id(model) not in self._rows:
            self._rows[id(model)] = next_token_rows(
                model, self.full, self.sampling, keep=len(self.full) - self.base + 1
            )
        return self._rows[id(model)][i]


def _in_vocab(tokens, vocab: int) -> bool:
    return all(0 <= int(t) < vocab for t in tokens)


def check_draft_cycle(rows: CycleRows, draft_model, job_id: int, cycle, tolerance_wad: int) -> DraftCheck | None:
    """The first committed proposal of `cycle` that the draft model's replay in the committed context contradicts
    (`protocol.check_proposal`: the DraftReplay rule), else None. Only the first is reported: one dispute per cycle
    is all a drafter's fault there can cost it."""
    for i, (token, q) in enumerate(zip(cycle.tokens, cycle.q)):
        if len(rows.full) < rows.base + i:
            break  # an earlier proposal is outside the vocabulary (reported at its own index)
        row = rows(draft_model, rows.context(i))
        u = protocol.draft_uniform(job_id, cycle.cycle, i)
        check = protocol.check_proposal(row, token, q, u, tolerance_wad)  # the referees' rule
        if not check.faithful:
            return DraftCheck(
                cycle.cycle,
                i,
                token,
                q,
                protocol.invcdf(row, u),
                check.replayed_q,
                binding=protocol.binds(i, cycle.accepted, cycle.gamma),
                reason="q" if check.token_faithful else "token",
            )
    return None


def target_positions(data: AuditJob, q_entropy: dict[tuple[int, int], float] | None = None) -> list[Position]:
    """Every binding target position of the job (each p_i up to the first rejection, and the outToken), with what
    the sampling weights look at (node/audit_sampling.py); `q_entropy` from the draft replay (0 where absent)."""
    q_entropy = q_entropy or {}
    found = []
    for cycle in data.cycles:
        k = cycle.gamma
        for i in range(k + 1):
            if not protocol.binds(i, cycle.accepted, k):
                continue
            if i == k:
                found.append(Position(cycle.cycle, i, 0.0, 1.0, 0.0, out_token=True))
                continue
            ratio = min(1.0, cycle.p[i] / cycle.q[i]) if cycle.q[i] else 1.0
            u = protocol.accept_uniform(cycle.reveal, cycle.draft_root, i, cycle.salt) / WAD
            found.append(Position(cycle.cycle, i, q_entropy.get((cycle.cycle, i), 0.0), ratio, u))
    return found


def audit_job(
    data: AuditJob,
    tolerance_wad: int,
    *,
    draft_model=None,
    target_model=None,
    draft_cycles: Collection[int] | None = None,
    target: Collection[tuple[int, int]] | None = None,
    entropies: dict[tuple[int, int], float] | None = None,
) -> Audit:
    """Replay the draft-side checks on `draft_cycles` (None: every cycle; needs `draft_model`) and judge the target
    positions `target` ((cycle, index) pairs, binding ones; None: none), cycle by cycle, one forward per model and
    cycle. `entropies`, when given, is filled with the q entropy of every proposal of the draft-audited cycles."""
    from node.decoding.loading import vocab_size
    from node.roles.referee.node import judge_position

    audit = Audit()
    job_id = data.record.job_id
    vocab = vocab_size(draft_model if draft_model is not None else target_model)
    wanted: dict[int, list[int]] = {}
    for c, i in sorted(target or ()):
        wanted.setdefault(c, []).append(i)
    for cycle, prefix in zip(data.cycles, data.prefixes()):
        check_draft = draft_model is not None and (draft_cycles is None or cycle.cycle in draft_cycles)
        if not (check_draft or cycle.cycle in wanted):
            continue
        if not _in_vocab(prefix, vocab):
            break  # an out-of-range token was emitted: nothing after it can be replayed (a TargetReplay shows it)
        rows = CycleRows(prefix, cycle.tokens, data.job.sampling, vocab)
        if check_draft:
            audit.draft_cycles.append(cycle.cycle)
            found = check_draft_cycle(rows, draft_model, job_id, cycle, tolerance_wad)
            if found is not None:
                audit.draft.append(found)
            if entropies is not None:
                for i in range(min(cycle.gamma, len(rows.full) - rows.base + 1)):
                    row = rows(draft_model, rows.context(i))
                    entropies[(cycle.cycle, i)] = entropy([int(x) / WAD for x in row])
        for index in wanted.get(cycle.cycle, []):
            judgement = judge_position(
                data.job,
                prefix,
                cycle,
                index,
                DisputeKind.TargetReplay,
                tolerance_wad,
                draft_model=draft_model,
                target_model=target_model,
                rows=rows,
            )
            audit.target_positions.append((cycle.cycle, index))
            if judgement.cheated:
                claimed = cycle.out_token if index == cycle.gamma else cycle.p[index]
                audit.target.append(TargetCheck(cycle.cycle, index, int(claimed), judgement.reason))
        audit.draft_forwards += rows.computed(draft_model) if draft_model is not None else 0
        audit.target_forwards += rows.computed(target_model) if target_model is not None else 0
    return audit


# ---------------------------------------------------------------- `verispec audit`: every position of one job


def _job_model(path: Path, want: bytes, job_id: int, what: str) -> ModelInfo:
    """The checkpoint at `path`, refused unless its model id is the job's `what` ("draft"/"target") model."""
    info = load_model_info(path)
    if info.model_id != want:
        raise RequesterError(f"{path} is not job {job_id}'s {what} model 0x{want.hex()}")
    return info


def _load(requester: Requester, job_id: int, tokenizer, max_positions: int, with_p: bool) -> AuditJob:
    try:
        return load_job(requester.system, job_id, requester.deployment.start_block, tokenizer, max_positions, with_p)
    except chaindata.ChainDataError as exc:  # e.g. a transcript job that has not settled
        raise RequesterError(f"cannot audit job {job_id}: {exc}") from None


def _tolerance(tolerance_wad: int | None) -> int:
    import torch

    from node.decoding.scorer import default_tolerance_wad

    return default_tolerance_wad(torch.float32) if tolerance_wad is None else tolerance_wad


def replay_draft(
    requester: Requester, job_id: int, draft_model_path: Path, tolerance_wad: int | None = None, device: str = "cpu"
) -> list[DraftCheck]:
    """Replay the job's draft model over chain data (prompt + every cycle's output) with the public draft uniforms,
    and list, per verified cycle, the first committed proposal an honest drafter could not have made (the proposal
    is not the inverse-CDF sample within tolerance, or its q is off beyond tolerance). A committed token outside the
    vocabulary has probability 0 (reported, never an IndexError); once a cycle's output holds one, no model defines
    what follows, so the replay stops there."""
    import torch

    from node.jobs.models import load_model

    requester.job_view(job_id)
    start = requester.deployment.start_block
    record = chaindata.job_request(requester.system, job_id, from_block=start)
    info = _job_model(draft_model_path, record.draft_model, job_id, "draft")
    model = load_model(draft_model_path, torch.device(device), torch.float32)
    data = _load(requester, job_id, load_tokenizer(draft_model_path), info.max_positions, False)
    return audit_job(data, _tolerance(tolerance_wad), draft_model=model).draft


def replay_target(
    requester: Requester, job_id: int, target_model_path: Path, draft_model_path: Path, tolerance_wad: int | None = None
) -> list[TargetCheck]:
    """Replay every binding position of the job's verifier (each p_i up to the first rejection, and the outToken)
    from chain data, with the referees' rule (`referee.judge_position`, fp32 on CPU), and list those a TargetReplay
    dispute would prove. The draft model is needed for the residual behind an outToken after a rejection. An
    out-of-range outToken is reported (probability 0); positions after one get the referees' verdict for an
    unreplayable context (faithful: nothing is proven there), never an IndexError."""
    import torch

    from node.jobs.models import load_model

    start = requester.deployment.start_block
    requester.job_view(job_id)
    record = chaindata.job_request(requester.system, job_id, from_block=start)
    target_info = _job_model(target_model_path, record.target_model, job_id, "target")
    _job_model(draft_model_path, record.draft_model, job_id, "draft")
    cpu = torch.device("cpu")
    target = load_model(target_model_path, cpu, torch.float32)
    draft = load_model(draft_model_path, cpu, torch.float32)
    data = _load(requester, job_id, load_tokenizer(target_model_path), target_info.max_positions, True)
    positions = [(p.cycle, p.index) for p in target_positions(data)]
    return audit_job(
        data, _tolerance(tolerance_wad), draft_model=draft, target_model=target, draft_cycles=(), target=positions
    ).target


def rule_faults(requester: Requester, job_id: int) -> list[tuple[int, str]] | None:
    """For a settled transcript job, every (cycle, why) whose record breaks the accept rule itself (settlement does
    not re-run it; `verispec challenge` refutes such a cycle with no bond and no model); None for a per-cycle job,
    whose every cycle the market checked by the rule when it was verified."""
    system = requester.system
    if not settled.is_transcript(system, job_id):
        return None
    try:
        cycles = settled.job_cycles(system, job_id, requester.deployment.start_block)
    except chaindata.ChainDataError as exc:
        raise RequesterError(f"cannot audit job {job_id}: {exc}") from None
    return settled.rule_faults(system, job_id, cycles)
