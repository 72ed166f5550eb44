"""What a job's two parties, the drafter and the verifier nodes, share on top of the node loop (`NodeBase`).

Each party serves the jobs that name it and whose models are the ones it loaded (`take_submitted_job`; any other
job is recorded refused, with the reason and the node's configuration, and never touched while that configuration
holds: a node restarted with other models or limits decides its refused jobs again, `reconsider_refusals`), acts
on the turns events announce to it (`act_on_announced_turn`), claims the other side's timeout or finalizes after
the challenge window (`settle`), notices the end of its jobs (finished, a dispute closed, finalized) and retires
them, and answers the disputes opened against it with its claimed value and top-k at the disputed position
(`answer_values`) until they are resolved. The challenger of a dispute draws its referees at once; an accused whose
answer comes when the seed block's hash has left the EVM's 256-block window has the draw rescheduled first.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from typing import Any

from node.chain.enums import DisputeStatus, JobStatus, Outcome, Phase, solidity_name
from node.chain.events import ChainEvent
from node.jobs import chaindata
from node.jobs.sessions import JobRefused, job_from_record
from node.roles import transcript_jobs
from node.roles.base import NodeBase
from node.roles.schedule import DISPUTE, JOB


class PartyNode(NodeBase, metaclass=ABCMeta):
    """The drafter's and the verifier's common part (see the module doc); their store rows (jobs, disputes, cycles)
    are under their `role`, `own_phase` is the phase in which they act."""

    own_phase: Phase  # the job phase in which this party acts: AwaitDraft (drafter) or AwaitVerify (verifier)

    jobs: dict[int, Any]  # job id -> the subclass's in-memory state of the job (per-cycle jobs)

    def __init__(self, *args, **kwargs):
        self.transcript_ids: dict[int, bool] = {}  # job id -> whether it is a transcript-mode job (read once)
        self.link_runs: dict[int, Any] = {}  # a drafter's transcript jobs running over the link
        super().__init__(*args, **kwargs)

    def on_market_JobSubmitted(self, event: ChainEvent) -> None:
        taken = self.take_submitted_job(event)
        if taken is not None:
            self.serve_any(*taken)

    def is_transcript(self, job_id: int) -> bool:
        return transcript_jobs.is_transcript(self, job_id)

    def serve_any(self, record: chaindata.ChainJob, job: Any) -> None:
        """A taken job: a transcript-mode one runs over the link (node/roles/transcript_jobs.py), unless the
        subclass refuses it (`transcript_refusal`); any other job per cycle (`serve_taken`)."""
        if not self.is_transcript(record.job_id):
            self.serve_taken(record, job)
            return
        reason = self.transcript_refusal(record)
        if reason is not None:
            self.refuse(record.job_id, reason)
            return
        transcript_jobs.serve(self, record)

    def transcript_refusal(self, record: chaindata.ChainJob) -> str | None:
        """Why this node does not run the transcript job `record` (None: it does)."""
        return None

    @abstractmethod
    def serve_taken(self, record: chaindata.ChainJob, job: Any) -> None:
        """Serve a job `take_job` took (`serve_job`), or refuse it on the subclass's own conditions (`refuse`)."""

    def take_submitted_job(self, event: ChainEvent):
        """A `JobSubmitted` that names this node as its `role`: (record, engine DecodingJob) to serve, or None when the
        job is not this node's, already known, or refused (`take_job`)."""
        record = chaindata.job_from_event(event, self.market)
        if getattr(record, self.role) != self.address or self.store.job(record.job_id, self.role) is not None:
            return None
        return self.take_job(record)

    def take_job(self, record: chaindata.ChainJob):
        """(record, engine DecodingJob) when the job's models are the ones this node loaded and its prompt fits, else
        None (refused: other models, a prompt that does not fit; the reason is logged and recorded in the store)."""
        if record.draft_model != self.draft_id or record.target_model != self.target_id:
            reason = (
                f"models (draft {record.draft_model.hex()[:16]}, target {record.target_model.hex()[:16]}) are "
                f"not mine (draft {self.draft_id.hex()[:16]}, target {self.target_id.hex()[:16]})"
            )
        else:
            try:
                return record, job_from_record(record, self.tokenizer, self.max_positions)
            except JobRefused as exc:
                reason = str(exc)
        self.refuse(record.job_id, reason)
        return None

    # ------------------------------------------------------------------ refusals

    def refusal_config(self) -> dict[str, Any]:
        """What a refusal of this node depends on besides the job (extended by subclasses: a drafter's minimum
        price, γ limits): a refusal recorded under other values is decided again at start (`reconsider_refusals`)."""
        return {
            "draft": self.draft_id.hex(),
            "target": self.target_id.hex(),
            "vocab": self.vocab_size,
            "positions": self.max_positions,
        }

    def config_fingerprint(self) -> str:
        text = json.dumps(self.refusal_config(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def refuse(self, job_id: int, reason: str, word: str = "refused") -> None:
        """Record that this node does not serve the job, with why and under which configuration (the node never
        acts on it while that configuration holds); `word` is what the log line calls it."""
        self.log.warning("job %d: %s: %s", job_id, word, reason)
        self.store.save_job(job_id, self.role, "refused", {"reason": reason, "config": self.config_fingerprint()})
        self.jobs.pop(job_id, None)
        self.schedule.forget(JOB, job_id)

    def reconsider_refusals(self) -> None:
        """Decide again, from chain data, every job refused under another configuration (a node restarted with other
        models, a lower minimum price...) that can still be served (Open or Running); one that cannot keeps its
        refusal, recorded under this configuration so that it is not read again."""
        fingerprint = self.config_fingerprint()
        for stored in self.store.jobs(role=self.role, status="refused"):
            if stored.params.get("config") == fingerprint:
                continue
            job_id = stored.job_id
            if self.job_view(job_id)["status"] not in (JobStatus.Open, JobStatus.Running):
                self.store.save_job(job_id, self.role, "refused", {**stored.params, "config": fingerprint})
                continue
            self.log.info("job %d: refused under another configuration (%s): deciding again", job_id, stored.params)
            record = chaindata.job_request(self.market, job_id, from_block=self.start_block)
            taken = self.take_job(record)
            if taken is not None:
                self.serve_any(*taken)

    def restore(self, with_jobs: bool = True) -> None:
        super().restore(with_jobs)
        self.reconsider_refusals()

    def serve_job(self, record: chaindata.ChainJob, state: Any) -> None:
        """Serve a taken job: recorded active in the store (with the other party's address), `state` kept in
        `jobs`, the job tracked."""
        other = "verifier" if self.role == "drafter" else "drafter"
        self.store.save_job(record.job_id, self.role, "active", {other: getattr(record, other)})
        self.jobs[record.job_id] = state
        self.schedule.track(JOB, record.job_id)

    def rebuild_job(self, job_id: int):
        """(record, engine DecodingJob) of a job this party serves, from chain data (after a restart)."""
        record = chaindata.job_request(self.market, job_id, from_block=self.start_block)
        return record, job_from_record(record, self.tokenizer, self.max_positions)

    def verified_cycle(self, event: ChainEvent) -> tuple[int, int, tuple[int, ...], int] | None:
        """(job id, cycle, emitted tokens, accepted count) of a tracked job's `CycleVerified`; None for another job."""
        job_id, c = int(event.args["jobId"]), int(event.args["cycle"])
        if not self.schedule.tracked(JOB, job_id):
            return None
        return job_id, c, tuple(chaindata.unpack_output(event.args["output"])), int(event.args["accepted"])

    def log_start(self, own_model: str) -> None:
        """The start-up line: address, the model this party decides with (`own_model`: draft or target), the
        other one, behavior."""
        ids = {"draft": self.draft_id, "target": self.target_id}
        other = "target" if own_model == "draft" else "draft"
        self.log.info(
            "%s %s: %s model %s, %s %s, behavior %s",
            self.role,
            self.address,
            own_model,
            ids[own_model].hex()[:16],
            other,
            ids[other].hex()[:16],
            self.behavior,
        )

    def act_on_announced_turn(self, job_id: int, act: Callable[[int, bool], int]) -> int | None:
        """Take the turn an event announced for the job (`note_turn`) without reading its view: on this party's
        own phase `act(cycle, sure)` (see `sure`); on the other party's, nothing (the periodic recheck reads the
        view and watches the deadline). None when there is no announced turn or acting sent nothing (e.g. the
        call would revert, or the session is not ready): the caller then decides from the job's view."""
        turn = self.schedule.take_turn(job_id)
        if turn is None:
            return None
        phase, cycle, deadline = turn
        self.schedule.set_active(job_id, True)
        if phase != self.own_phase:
            return 0
        return act(cycle, self.sure(deadline)) or None

    def take_own_turn(self, view: dict[str, Any], act: Callable[[int], int]) -> int | None:
        """The job's view shows this party's turn: `act(cycle)` unless its deadline has passed (then 0: the contract
        would refuse it; anyone may claim the timeout). None when the view shows no turn of this party."""
        if view["status"] != JobStatus.Running or view["phase"] != self.own_phase:
            return None
        if self.chain_time(max_age=1.0) > view["deadline"]:
            return 0
        return act(int(view["cycle"]))

    # ------------------------------------------------------------------ the job's view

    def job_view(self, job_id: int) -> dict[str, Any]:
        return chaindata.job_view(self.market, job_id)

    def settle(self, job_id: int, view: dict[str, Any]) -> int:
        """Deadlines and settlement for a party of the job: claimTimeout when the other side (or nobody)
        missed its deadline, finalize after the challenge window. Safe to call on every check."""
        status, now = view["status"], self.chain_time()
        if now <= view["deadline"]:
            # until then only the other side's events matter
            self.schedule.defer_until(JOB, job_id, view["deadline"] + 1)
            return 0
        fn = self.market.functions
        if status == JobStatus.Open:
            return self.transact(f"job:{job_id}:timeout:accept", fn.claimTimeout(job_id))
        if status == JobStatus.Running:
            waiting_for_other = view["phase"] != self.own_phase
            if waiting_for_other:
                key = f"job:{job_id}:timeout:{view['cycle']}:{view['phase']}"
                self.log.warning(
                    "job %d: the other party missed its deadline (cycle %d); claiming the timeout",
                    job_id,
                    view["cycle"],
                )
                return self.transact(key, fn.claimTimeout(job_id))
            return 0
        if status == JobStatus.Finished and view["openDisputes"] == 0:
            return self.transact(f"job:{job_id}:finalize", fn.finalize(job_id))
        return 0

    # ------------------------------------------------------------------ events

    def on_market_JobFinished(self, event: ChainEvent) -> None:
        self.schedule.note_turn(event.args["jobId"], None)
        self.schedule.mark_dirty(JOB, event.args["jobId"])

    def on_market_DisputeClosed(self, event: ChainEvent) -> None:
        self.schedule.note_turn(event.args["jobId"], None)
        self.schedule.mark_dirty(JOB, event.args["jobId"])  # maybe finalizable now

    def on_market_JobFinalized(self, event: ChainEvent) -> None:
        self.schedule.note_turn(event.args["jobId"], None)
        self.schedule.mark_dirty(JOB, event.args["jobId"])

    def on_transcript_ForceMoved(self, event: ChainEvent) -> None:
        transcript_jobs.on_force_moved(self, event)

    def on_transcript_ForceAnsweredVerification(self, event: ChainEvent) -> None:
        transcript_jobs.on_verification_answer(self, event)

    def on_transcript_ForceAnsweredDraft(self, event: ChainEvent) -> None:
        transcript_jobs.on_draft_answer(self, event)

    def on_disputes_DisputeOpened(self, event: ChainEvent) -> None:
        a = event.args
        if a["challenger"] == self.address:  # mine (a verifier disputing a draft): draw its referees at once
            self.schedule.track(DISPUTE, int(a["disputeId"]))
        if a["accused"] != self.address:
            return
        dispute_id = int(a["disputeId"])
        if self.store.dispute(dispute_id, self.role) is None:
            self.log.warning(
                "dispute %d opened against me: job %d cycle %d index %d", dispute_id, a["jobId"], a["cycle"], a["index"]
            )
            self.store.save_dispute(
                dispute_id,
                self.role,
                "open",
                {
                    "job": int(a["jobId"]),
                    "cycle": int(a["cycle"]),
                    "index": int(a["index"]),
                    "kind": int(a["kind"]),
                    "token": int(a["token"]),
                },
            )
        self.schedule.track(DISPUTE, dispute_id)

    def on_disputes_DisputeResolved(self, event: ChainEvent) -> None:
        self.schedule.mark_dirty(DISPUTE, event.args["disputeId"])

    on_disputes_DrawRescheduled = on_disputes_DisputeResolved  # an accused answers once the rescheduled draw can run

    # ------------------------------------------------------------------ work

    def retire_job(self, job_id: int) -> int:
        """The job is finalized (or gone): mark it done in the store and stop tracking it."""
        self.store.save_job(job_id, self.role, "done")
        self.jobs.pop(job_id, None)
        self.schedule.forget(JOB, job_id)
        return 0

    def work_dispute(self, dispute_id: int) -> int:
        d = chaindata.dispute_view(self.disputes, dispute_id)
        if d["status"] == DisputeStatus.Resolved:
            self.store.save_dispute(dispute_id, self.role, "done")
            self.schedule.forget(DISPUTE, dispute_id)
            self.log.info("dispute %d resolved: %s", dispute_id, solidity_name(Outcome(d["outcome"])))
            return 0
        if d["status"] != DisputeStatus.AwaitingAnswer or self.chain_time() > d["answerDeadline"]:
            # answered (or too late): what is left happens through events (DisputeResolved wakes it)
            self.schedule.defer_until(DISPUTE, dispute_id, max(d["revealDeadline"], d["answerDeadline"]) + 1)
            return 0
        if not d["drawn"] and (d["challenger"] == self.address or self._draw_seed_gone(d)):
            # The challenger draws at once, so that an accused cannot wait for the seed block's hash to leave
            # the 256-block window and get a second draw; an accused whose answer comes that late must have
            # the draw rescheduled first (its answer would revert PanelNotDrawn).
            return self.transact(
                f"dispute:{dispute_id}:draw:{d['drawBlock']}", self.disputes.functions.drawReferees(dispute_id)
            )
        if d["accused"] != self.address:
            self.schedule.defer_until(DISPUTE, dispute_id, d["answerDeadline"] + 1)  # DisputeResolved wakes it earlier
            return 0
        claimed, top = self.answer_values(int(d["jobId"]), int(d["cycle"]), int(d["index"]))
        call = self.disputes.functions.answer(dispute_id, claimed, [t for t, _ in top], [w for _, w in top])
        return self.transact(f"dispute:{dispute_id}:answer", call)

    def _draw_seed_gone(self, d: dict) -> bool:
        """Whether the next block can no longer see the hash of the dispute's seed block (EVM: last 256 only)."""
        return self.w3.eth.block_number + 1 - int(d["drawBlock"]) > 256

    @abstractmethod
    def answer_values(self, job_id: int, c: int, index: int) -> tuple[int, list[tuple[int, int]]]:
        """(claimed value of the disputed position, top-k of my distribution there): each party's own (drafter: q,
        verifier: p)."""
