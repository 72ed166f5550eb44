"""The watchdog's audit: replay a job from chain data alone and list what a dispute would prove.

`replay_draft` replays the drafter's proposals with the draft model and the public draft uniforms; `replay_target`
replays every binding p_i and outToken of the verifier with the referees' own rule (`referee.judge_position`). Both
decide by the protocol's one rule (`protocol.check_proposal`, `protocol.binds`), in fp32 on CPU, so an audit flags
exactly what the referees would find.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from node import protocol
from node.chain.enums import DisputeKind
from node.roles import chaindata
from node.roles.checkpoints import ModelInfo, load_model_info, load_tokenizer
from node.roles.errors import RequesterError
from node.roles.requester import Requester


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


def _job_model(path: Path, want: bytes, job_id: int, what: str) -> ModelInfo:
    """The checkpoint at `path`, refused unless its model id is the job's `what` ("draft"/"target") model."""
    info = load_model_info(path)
    if info.model_id != want:
        raise RequesterError(f"{path} is not job {job_id}'s {what} model 0x{want.hex()}")
    return info


def replay_draft(
    requester: Requester, job_id: int, draft_model_path: Path, tolerance_wad: int | None = None, device: str = "cpu"
) -> list[DraftCheck]:
    """Replay the job's draft model over chain data (prompt + every cycle's output) with the public draft
    uniforms, and list, per cycle, the first committed proposal an honest drafter could not have made
    (the proposal is not the inverse-CDF sample within tolerance, or its q is off beyond tolerance).

    Only the first disagreement per cycle is reported: after it, the committed proposals condition on a
    token the honest replay did not draw, so later positions of that cycle say nothing more. A committed token
    outside the vocabulary has probability 0 (reported, never an IndexError); once a cycle's output holds one, no
    model defines what follows, so the replay stops there.
    """
    import torch

    from node.decoding import DraftSession, loading
    from node.decoding.loading import vocab_size
    from node.decoding.scorer import default_tolerance_wad
    from node.roles import jobs

    requester.job_view(job_id)
    record = chaindata.job_request(requester.system, job_id, from_block=requester.deployment.start_block)
    info = _job_model(draft_model_path, record.draft_model, job_id, "draft")
    dtype = torch.float32
    tolerance = default_tolerance_wad(dtype) if tolerance_wad is None else tolerance_wad
    model = loading.load_model(str(draft_model_path), torch.device(device), dtype)
    job = jobs.job_from_record(record, load_tokenizer(draft_model_path), info.max_positions)
    session = DraftSession(model, job)
    vocab = vocab_size(model)
    found = []
    for cycle in chaindata.cycles(requester.system, job_id, from_block=requester.deployment.start_block, with_p=False):
        if not cycle.verified:
            break
        draft = session.propose(cycle.cycle)
        for i, (token, q) in enumerate(zip(cycle.tokens, cycle.q)):
            u = protocol.draft_uniform(job_id, cycle.cycle, i)
            check = protocol.check_proposal(draft.q_rows[i], token, q, u, tolerance)  # the referees' rule
            if not check.faithful:
                found.append(
                    DraftCheck(
                        cycle.cycle,
                        i,
                        token,
                        q,
                        draft.tokens[i],
                        check.replayed_q,
                        binding=protocol.binds(i, cycle.accepted, cycle.gamma),
                        reason="q" if check.token_faithful else "token",
                    )
                )
                break
            if token != draft.tokens[i]:
                break  # within tolerance, but the contexts diverge from here on
        if any(not 0 <= t < vocab for t in cycle.output):
            break  # an out-of-range token was emitted: nothing after it can be replayed (a TargetReplay shows it)
        session.advance(list(cycle.output))
    return found


@dataclass
class TargetCheck:
    """One binding position whose posted p_i, or whose outToken (index == γ), the target model's replay contradicts."""

    cycle: int
    index: int  # i < γ: p_i of proposal i; γ: the outToken
    claimed: int  # p_i (WAD) or the outToken
    reason: str  # the referees' own words for it (referee.judge_position)


def replay_target(
    requester: Requester, job_id: int, target_model_path: Path, draft_model_path: Path, tolerance_wad: int | None = None
) -> list[TargetCheck]:
    """Replay every binding position of the job's verifier (each p_i up to the first rejection, and the outToken)
    from chain data, with the referees' rule (`referee.judge_position`, fp32 on CPU), and list those a TargetReplay
    dispute would prove. The draft model is needed for the residual behind an outToken after a rejection. An
    out-of-range outToken is reported (probability 0); positions after one get the referees' verdict for an
    unreplayable context (faithful: nothing is proven there), never an IndexError."""
    import torch

    from node.decoding import loading
    from node.decoding.scorer import default_tolerance_wad
    from node.roles import jobs
    from node.roles.referee import judge_position

    start = requester.deployment.start_block
    requester.job_view(job_id)
    record = chaindata.job_request(requester.system, job_id, from_block=start)
    target_info = _job_model(target_model_path, record.target_model, job_id, "target")
    _job_model(draft_model_path, record.draft_model, job_id, "draft")
    cpu, dtype = torch.device("cpu"), torch.float32
    tolerance = default_tolerance_wad(dtype) if tolerance_wad is None else tolerance_wad
    target = loading.load_model(str(target_model_path), cpu, dtype)
    draft = loading.load_model(str(draft_model_path), cpu, dtype)
    job = jobs.job_from_record(record, load_tokenizer(target_model_path), target_info.max_positions)
    prefix, found = list(job.prompt), []
    for cycle in chaindata.cycles(requester.system, job_id, from_block=start):
        if not cycle.verified:
            break
        k = cycle.gamma
        # p binds up to the first rejection; the outToken always
        for index in [i for i in range(k + 1) if protocol.binds(i, cycle.accepted, k)]:
            judgement = judge_position(
                job, prefix, cycle, index, DisputeKind.TargetReplay, tolerance, draft_model=draft, target_model=target
            )
            if judgement.cheated:
                claimed = cycle.out_token if index == k else cycle.p[index]
                found.append(TargetCheck(cycle.cycle, index, int(claimed), judgement.reason))
        prefix.extend(cycle.output)
    return found
