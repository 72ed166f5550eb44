"""The referee node (`verispec serve referee`): replays disputed positions and votes, commit then reveal.

When `RefereesDrawn` names its address, it waits for the accused's answer (the dispute turns Voting),
replays the position from chain data alone (prompt + the outputs of earlier cycles + the cycle's
proposals before the index) with the disputed model, decides (`judge_position`), stores the verdict and
a random salt in its store *before* sending `commitVote(voteCommitment(id, me, verdict, salt))`
(`dispute:{id}:commit`), reveals once the reveal phase opens (`dispute:{id}:reveal`) and calls
`resolve` when `canResolve` (`dispute:{id}:resolve:{round}:{status}`: once to decide a round, once more
to end the dispute after its appeal period; anyone may, so a race with other referees is harmless: the
loser's call fails gas estimation and nothing is sent). A silent accused is ended with
`claimAnswerTimeout` after the answer deadline.

Appeal rounds (docs/disputes.md, "Appeals"): every referee node watches `Appealed` and `DrawEscalated` and
draws the new round's panel (an escalated draw: schedules a fresh seed block after its escalation period,
then draws); a referee drawn for an appeal round judges and votes exactly as in the first round (a referee
sits on at most one panel of a dispute).

What counts as cheating (docs/protocol.md §6, docs/disputes.md), with tolerance `tol` (WAD):

* DraftReplay, index i < K: |q_replay(x_i) − q_i| > tol, or x_i outside [invcdf(q_replay, u − tol),
  invcdf(q_replay, u + tol)] with u = draftUniform(job, cycle, i);
* TargetReplay, i < K: |p_replay(x_i) − p_i| > tol;
* TargetReplay, i == K (outToken): with n = accepted and v = residualUniform(reveal, root, salt), outToken
  outside the residual samples of norm(max(0, p_n − q_n)) at v ∓ tol (n < K), or outside the samples of
  p_K at v ∓ tol (n == K). Where the replayed residual is empty (p_n == q_n: a lying draft or an out-of-vocabulary
  proposal caused the rejection, not the distributions), the residual sample is p_n's own (`protocol.rejection_sample`,
  what the verifier emits too).

A token outside the vocabulary has probability 0 (a committed proposal, or a claimed outToken: neither raises). A
position whose context (the prompt, earlier outputs, the cycle's proposals before it) holds such a token cannot be
replayed by any model: the verdict there is AccusedFaithful (nothing is proven at that position; the out-of-range
token itself is the position to dispute), never an IndexError.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from eth_utils import to_checksum_address

from node import protocol
from node.chain.enums import DisputeKind, DisputeStatus, Outcome, Verdict, solidity_name
from node.chain.events import ChainEvent
from node.decoding.messages import DecodingJob
from node.jobs import chaindata
from node.jobs.chaindata import ChainCycle
from node.jobs.models import next_token_rows
from node.jobs.sessions import job_from_record
from node.link import settled
from node.roles.base import NodeBase
from node.roles.schedule import DISPUTE


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict  # AccusedFaithful or AccusedCheated
    reason: str

    @property
    def cheated(self) -> bool:
        return self.verdict == Verdict.AccusedCheated


def _verdict(cheated: bool, reason: str) -> Judgement:
    return Judgement(Verdict.AccusedCheated if cheated else Verdict.AccusedFaithful, reason)


def _prob(row, token: int) -> int:
    """A token's WAD probability; 0 for an id outside the vocabulary (a draft may commit any uint32)."""
    return int(row[token]) if 0 <= token < len(row) else 0


def _unreplayable(context: list[int], vocab: int | None, what: str) -> Judgement | None:
    """AccusedFaithful when `context` holds a token outside the vocabulary (no model defines what follows it)."""
    if vocab is None:
        return None
    for j, t in enumerate(context):
        if not 0 <= int(t) < vocab:
            return _verdict(
                False,
                f"{what} follows token {int(t)} (context position {j}), outside the vocabulary ({vocab}): no model "
                "defines it, so nothing is proven here (dispute that token instead)",
            )
    return None


def _vocab(*models) -> int | None:
    from node.decoding.loading import vocab_size

    model = next((m for m in models if m is not None), None)
    return None if model is None else vocab_size(model)


def judge_position(
    job: DecodingJob,
    prefix: list[int],
    cyc: ChainCycle,
    index: int,
    kind: int,
    tolerance_wad: int,
    draft_model=None,
    target_model=None,
    rows=None,
) -> Judgement:
    """Replay position `index` of verified cycle `cyc` and decide whether the accused was faithful.

    `prefix` is the prompt plus the outputs of every earlier cycle; `cyc` comes from chain data (with p).
    DraftReplay needs the draft model; TargetReplay the target model (and for index == K with a
    rejection, the draft model too, for the residual). `rows(model, context)`: the WAD row after `context`
    (default: one fresh forward per call, as a referee replays; a watchdog auditing a whole cycle passes rows of
    one forward over the cycle, node/roles/watchdog/audit.py `CycleRows`).
    """
    if rows is None:

        def rows(model, context):
            return next_token_rows(model, context, job.sampling)[0]

    k, tol = cyc.gamma, tolerance_wad
    vocab = _vocab(draft_model if kind == DisputeKind.DraftReplay else target_model, draft_model, target_model)
    if index < k:
        context, x = list(prefix) + list(cyc.tokens[:index]), cyc.tokens[index]
        blocked = _unreplayable(context, vocab, f"position {index}")
        if blocked is not None:
            return blocked
        if kind == DisputeKind.DraftReplay:
            row = rows(draft_model, context)
            u = protocol.draft_uniform(job.job_id, cyc.cycle, index)
            check = protocol.check_proposal(row, x, cyc.q[index], u, tol)
            if not check.q_faithful:
                return _verdict(True, f"q_{index} = {cyc.q[index]} but the draft model gives {check.replayed_q}")
            if not check.token_faithful:
                return _verdict(
                    True,
                    f"x_{index} = {x} is not the inverse-CDF sample "
                    f"{protocol.invcdf(row, u)} of the public draft uniform",
                )
            return _verdict(False, f"q_{index} and x_{index} replay within {tol}")
        row = rows(target_model, context)
        replayed, claimed = _prob(row, x), cyc.p[index]
        if abs(replayed - claimed) > tol:
            return _verdict(True, f"p_{index} = {claimed} but the target model gives {replayed}")
        return _verdict(False, f"p_{index} replays within {tol}")
    if index != k or kind != DisputeKind.TargetReplay:
        raise ValueError(f"index {index} of a {k}-proposal cycle cannot be disputed as kind {kind}")
    n = cyc.accepted
    context = list(prefix) + list(cyc.tokens[:n])
    blocked = _unreplayable(context, vocab, "the outToken")
    if blocked is not None:
        return blocked
    p_row = rows(target_model, context)
    v = protocol.residual_uniform(cyc.reveal, cyc.draft_root, cyc.salt)
    if n < k:
        q_row = rows(draft_model, context)
        low, high = protocol.sample_window(lambda w: protocol.rejection_sample(p_row, q_row, w), v, tol)
        what = f"the rejection sample at {n}"
    else:
        low, high = protocol.sample_window(lambda w: protocol.invcdf(p_row, w), v, tol)
        what = "the bonus sample"
    if not low <= cyc.out_token <= high:
        return _verdict(True, f"outToken {cyc.out_token} is not {what} (replay gives {low}..{high})")
    return _verdict(False, f"outToken {cyc.out_token} is {what}")


class RefereeNode(NodeBase):
    wake_on_blocks_when_idle = False  # polls every poll_interval while not judging (see NodeBase)
    role = "referee"  # also its rows in the store

    def __init__(
        self,
        w3,
        deployment,
        account,
        store_path,
        target_model_path,
        draft_model_path,
        poll_interval: float = 0.2,
        device=None,
        *,
        tolerance_wad: int | None = None,
        resolve_stagger_s: float = 1.0,
        **options,
    ):
        from node.decoding.scorer import default_tolerance_wad

        self.load_models(target_model_path, draft_model_path, device)
        self.tolerance_wad = tolerance_wad if tolerance_wad is not None else default_tolerance_wad(self.dtype)
        super().__init__(w3, deployment, account, store_path, poll_interval, **options)
        if self.disputes is None:
            raise ValueError("this deployment has no DisputeManager: there is nothing to referee")
        self.judgements: dict[int, Judgement] = {}
        self.resolve_stagger_s = resolve_stagger_s
        self._panel: dict[int, list[str]] = {}  # dispute -> drawn referees (from RefereesDrawn, else refereesOf)
        self._resolvable_since: dict[tuple, float] = {}  # (dispute, round, phase) -> first seen resolvable
        self.restore(with_jobs=False)

    # ------------------------------------------------------------------ events

    def on_disputes_RefereesDrawn(self, event: ChainEvent) -> None:
        dispute_id = int(event.args["disputeId"])
        panel = [to_checksum_address(r) for r in event.args["referees"]]
        if self.address not in panel:
            if dispute_id in self._panel:
                self._panel[dispute_id] = panel  # an appeal round of a dispute I sat on: its resolve turns
                self.schedule.mark_dirty(DISPUTE, dispute_id)
            return
        self._panel[dispute_id] = panel
        if self.store.dispute(dispute_id, self.role) is None:
            self.log.info("drawn for dispute %d (round %d)", dispute_id, int(event.args.get("round", 0)))
            self.store.save_dispute(dispute_id, self.role, "drawn", {})
        self.schedule.track(DISPUTE, dispute_id)

    def _touch(self, event: ChainEvent) -> None:
        self.schedule.mark_dirty(DISPUTE, event.args["disputeId"])

    def _keep(self, event: ChainEvent) -> None:
        """An appealed or escalated round needs its panel drawn: any referee node draws it."""
        self.schedule.track(DISPUTE, int(event.args["disputeId"]))
        self.schedule.mark_dirty(DISPUTE, event.args["disputeId"])

    on_disputes_Answered = _touch
    on_disputes_VoteCommitted = _touch
    on_disputes_VoteRevealed = _touch
    on_disputes_DisputeResolved = _touch
    on_disputes_RoundDecided = _touch
    on_disputes_DrawScheduled = _touch
    on_disputes_Appealed = _keep
    on_disputes_DrawEscalated = _keep

    # ------------------------------------------------------------------ work

    def work_dispute(self, dispute_id: int) -> int:
        d = chaindata.dispute_view(self.disputes, dispute_id)
        fn = self.disputes.functions
        now = self.chain_time()
        status, round_ = d["status"], int(d["round"])
        if status == DisputeStatus.Resolved:
            self.store.save_dispute(dispute_id, self.role, "done")
            self.schedule.forget(DISPUTE, dispute_id)
            self._panel.pop(dispute_id, None)
            for key in [k for k in self._resolvable_since if k[0] == dispute_id]:
                self._resolvable_since.pop(key)
            self.log.info("dispute %d resolved: %s", dispute_id, solidity_name(Outcome(d["outcome"])))
            return 0
        if status in (DisputeStatus.AwaitingAnswer, DisputeStatus.Drawing) and not d["drawn"]:
            if d["drawBlock"] == 0:  # escalated: a fresh seed block once the escalation period is over
                if now < d["drawAfter"]:
                    self.schedule.defer_until(DISPUTE, dispute_id, d["drawAfter"] + 1)
                    return 0
                key = f"dispute:{dispute_id}:schedule:{round_}:{d['escalations']}"
                return self.transact(key, fn.drawReferees(dispute_id))
            if status == DisputeStatus.Drawing and self.w3.eth.block_number >= d["drawBlock"]:
                return self.transact(
                    f"dispute:{dispute_id}:draw:{round_}:{d['drawBlock']}", fn.drawReferees(dispute_id)
                )
            if status == DisputeStatus.Drawing:
                return 0  # the next block draws
        if status == DisputeStatus.AwaitingAnswer:
            if d["drawn"] and now > d["answerDeadline"]:
                return self.transact(f"dispute:{dispute_id}:answer-timeout", fn.claimAnswerTimeout(dispute_id))
            self.schedule.defer_until(DISPUTE, dispute_id, d["answerDeadline"] + 1)  # `Answered` wakes it earlier
            return 0
        if status == DisputeStatus.Appealable:
            if fn.canResolve(dispute_id).call() and self._resolve_turn(dispute_id, (round_, "final")):
                return self.transact(f"dispute:{dispute_id}:resolve:{round_}:final", fn.resolve(dispute_id))
            self.schedule.defer_until(DISPUTE, dispute_id, max(d["appealDeadline"], now) + 1)  # or `Appealed`
            return 0
        if status != DisputeStatus.Voting:
            return 0
        did = 0
        ballot = chaindata.ballot_view(self.disputes, dispute_id, self.address)
        if ballot["drawn"] and int(ballot["round"]) == round_:
            did += self._vote(dispute_id, d, ballot, now)
        if fn.canResolve(dispute_id).call():
            if self._resolve_turn(dispute_id, (round_, "vote")):  # else: the periodic recheck comes back to it
                did += self.transact(f"dispute:{dispute_id}:resolve:{round_}", fn.resolve(dispute_id))
        elif not did:
            # votes arrive as events; otherwise the next thing is a phase deadline
            upcoming = [t for t in (d["commitDeadline"], d["revealDeadline"]) if t >= now]
            self.schedule.defer_until(DISPUTE, dispute_id, (min(upcoming) if upcoming else now) + 1)
        return did

    def _vote(self, dispute_id: int, d: dict, ballot: dict, now: int) -> int:
        """Commit (after judging), or reveal, this referee's vote in the dispute's current round."""
        fn = self.disputes.functions
        saved = self.store.dispute(dispute_id, self.role)
        params = dict(saved.params) if saved else {}
        if ballot["commitment"] == bytes(32):
            if now > d["commitDeadline"]:
                self.log.warning("dispute %d: the commit phase ended before I voted", dispute_id)
                return 0
            if "verdict" not in params:
                judgement = self.judge(dispute_id, d)
                if judgement is None:
                    return 0
                params = {
                    "verdict": judgement.verdict,
                    "reason": judgement.reason,
                    "salt": "0x" + os.urandom(32).hex(),
                }
                self.store.save_dispute(dispute_id, self.role, "judged", params)  # before the commitment leaves
            commitment = protocol.vote_commitment(dispute_id, self.address, params["verdict"], _salt(params))
            return self.transact(f"dispute:{dispute_id}:commit", fn.commitVote(dispute_id, commitment))
        if ballot["verdict"] == 0:
            if "verdict" not in params:
                self.log.error("dispute %d: committed but the store has no verdict and salt: cannot reveal", dispute_id)
            elif (now > d["commitDeadline"] or d["commits"] == d["drawn"]) and now <= d["revealDeadline"]:
                return self.transact(
                    f"dispute:{dispute_id}:reveal", fn.revealVote(dispute_id, params["verdict"], _salt(params))
                )
        return 0

    def _resolve_turn(self, dispute_id: int, phase: tuple = ()) -> bool:
        """Whether to call `resolve` now. Every drawn referee sees the last reveal in the same block; if all
        called resolve at once, all but one transaction would revert (and burn gas). So the referees take
        turns: rank r (its place in the panel, rotated by the dispute id) waits r x `resolve_stagger_s`
        after it first saw the dispute resolvable; by then a lower rank has usually resolved it (and
        canResolve is false); the others come back with the periodic recheck. Anyone may resolve, so a silent
        referee only delays it by one recheck."""
        first = self._resolvable_since.setdefault((dispute_id, *phase), time.monotonic())
        panel = self._panel.get(dispute_id)
        if panel is None:
            panel = [to_checksum_address(r) for r in self.disputes.functions.refereesOf(dispute_id).call()]
            self._panel[dispute_id] = panel
        rank = (panel.index(self.address) + dispute_id) % len(panel) if self.address in panel else len(panel)
        return time.monotonic() - first >= rank * self.resolve_stagger_s

    def judge(self, dispute_id: int, d: dict) -> Judgement | None:
        """Replay the disputed position of dispute `dispute_id` (its view `d`) from chain data; None if this
        node cannot judge it (it does not hold the job's models)."""
        job_id, c, index, kind = int(d["jobId"]), int(d["cycle"]), int(d["index"]), int(d["kind"])
        record = chaindata.job_request(self.market, job_id, from_block=self.start_block)
        needs_draft = kind == DisputeKind.DraftReplay or index == record.gamma
        if (kind == DisputeKind.TargetReplay and record.target_model != self.target_id) or (
            needs_draft and record.draft_model != self.draft_id
        ):
            self.log.error("dispute on job %d: its models are not the ones I hold; cannot judge", job_id)
            return None
        job = job_from_record(record, self.tokenizer)
        data = settled.job_cycles(self.system, job_id, self.start_block, with_p=False)  # either mode
        prefix = list(job.prompt) + [t for x in data[:c] for t in x.output]
        cyc = chaindata.with_p(self.market, data[c])
        judgement = judge_position(
            job,
            prefix,
            cyc,
            index,
            kind,
            self.tolerance_wad,
            draft_model=self.draft_model,
            target_model=self.target_model,
        )
        self.judgements[dispute_id] = judgement
        self.log.info(
            "dispute %d, job %d cycle %d index %d (%s): %s — %s",
            dispute_id,
            job_id,
            c,
            index,
            DisputeKind(kind).name,
            "CHEATED" if judgement.cheated else "faithful",
            judgement.reason,
        )
        return judgement


def _salt(params: dict) -> bytes:
    return bytes.fromhex(params["salt"][2:])
