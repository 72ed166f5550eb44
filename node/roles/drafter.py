"""The drafter node (`verispec serve drafter`): the draft model, one DraftSession per job, commitDraft per cycle.

For each job assigned to it (`JobSubmitted.request.drafter` is its address) whose model ids are the
ones it loaded, it proposes cycle c whenever the contract says the job is Running and awaits the draft
of cycle c (after the verifier's `JobAccepted`, then after each `CycleVerified`), and sends
`commitDraft` under the key `job:{id}:cycle:{c}:commit` (cycle 0: `commitFirstDraft`, with a fresh random
salt that enters every accept and residual uniform of the job, docs/protocol.md §3). The cycle's transcript
(proposals, q, the top-k of its distributions, cycle 0's salt) is saved in the store *before* the transaction,
so a restart resends the very same draft instead of computing another. It answers DraftReplay disputes
against it with its claimed q and its top-k at the disputed position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from node import protocol
from node.chain.enums import JobStatus, Phase
from node.chain.events import ChainEvent
from node.decoding.loading import max_positions
from node.decoding.messages import DecodingJob
from node.roles import behaviors, chaindata
from node.roles.behaviors import DrafterBehavior
from node.roles.jobs import resume_draft_session
from node.roles.models import next_token_rows
from node.roles.party import PartyNode
from node.roles.schedule import JOB

TOP_K = 8  # top-k of each distribution kept in transcripts and posted in dispute answers (contract max: 16)
JOB_ROLE = "drafter"  # the node's role, also its rows in the store (jobs, disputes, cycles)


@dataclass
class DrafterJobState:
    job: DecodingJob
    record: chaindata.ChainJob
    outputs: dict[int, tuple[int, ...]] = field(default_factory=dict)  # verified cycle -> emitted tokens
    session: Any = None  # DraftSession (or BiasedDraftSession)
    proposed_cycle: int | None = None  # the cycle `session` proposed and has not advanced past yet
    accepted: bool = False  # JobAccepted seen (before it, `background` decides the draft of cycle 0)


class DrafterNode(PartyNode):
    role = JOB_ROLE
    own_phase = Phase.AwaitDraft

    def __init__(
        self,
        w3,
        deployment,
        account,
        store_path,
        draft_model_path,
        target_model_path,
        behavior: DrafterBehavior | str = DrafterBehavior.HONEST,
        poll_interval: float = 0.2,
        device=None,
        *,
        bias_policy: behaviors.BiasPolicy | None = None,
        **options,
    ):
        self.behavior = DrafterBehavior.parse(behavior)
        self.bias_policy = bias_policy or behaviors.BiasPolicy()
        self.load_models(target_model_path, draft_model_path, device, with_target=False)
        self.max_positions = max_positions(self.draft_model)
        super().__init__(w3, deployment, account, store_path, poll_interval, **options)
        self.jobs: dict[int, DrafterJobState] = {}
        self.restore()
        self.log_start("draft")

    # ------------------------------------------------------------------ events

    def on_market_JobSubmitted(self, event: ChainEvent) -> None:
        taken = self.take_submitted_job(event)
        if taken is None:
            return
        record, job = taken
        self.serve_job(record, DrafterJobState(job, record))
        self.log.info("job %d: assigned (γ=%d, maxTokens=%d)", record.job_id, job.gamma, job.max_new_tokens)

    def on_market_JobAccepted(self, event: ChainEvent) -> None:
        if int(event.args["jobId"]) in self.jobs:
            self.jobs[int(event.args["jobId"])].accepted = True
        if self.schedule.tracked(JOB, event.args["jobId"]):
            # my turn: cycle 0
            self.schedule.note_turn(event.args["jobId"], Phase.AwaitDraft, 0, self.draft_deadline(event))
        self.schedule.mark_dirty(JOB, event.args["jobId"])

    def on_market_CycleVerified(self, event: ChainEvent) -> None:
        verified = self.verified_cycle(event)
        if verified is None:
            return
        job_id, c, output, accepted = verified
        dj = self.jobs.get(job_id)
        if dj is not None:
            dj.outputs.setdefault(c, output)
        transcript = self.store.cycle(job_id, JOB_ROLE, c)
        if transcript is not None and transcript.proposals is not None:
            kept = min(accepted, len(output))
            if list(output[:kept]) != list(transcript.proposals[:kept]):
                self.log.error(
                    "job %d cycle %d: the emitted tokens %s are not my accepted proposals %s",
                    job_id,
                    c,
                    list(output),
                    transcript.proposals[:accepted],
                )
        hashes = {"verify": event.tx_hash}
        commit = self.txs.tx_hash_of(f"job:{job_id}:cycle:{c}:commit")
        if commit is not None:
            hashes["commit"] = commit
        self.txs.landed(f"job:{job_id}:cycle:{c}:commit", event.block_number)  # verified: my commit landed
        # my turn again (a JobFinished after this event clears it)
        self.schedule.note_turn(job_id, Phase.AwaitDraft, c + 1, self.draft_deadline(event))
        # the cycle's outcome is on chain: written at the next flush (a crash replays this event)
        self.later(
            lambda: self.store.save_cycle(
                job_id, JOB_ROLE, c, accepted=accepted, emitted_tokens=list(output), tx_hashes=hashes
            )
        )
        self.schedule.mark_dirty(JOB, job_id)

    # ------------------------------------------------------------------ work

    def _job(self, job_id: int) -> DrafterJobState:
        dj = self.jobs.get(job_id)
        if dj is None:  # after a restart: rebuild from chain data
            record, job = self.rebuild_job(job_id)
            dj = DrafterJobState(job, record)
            self._refresh_outputs(dj)
            self.jobs[job_id] = dj
        return dj

    def _refresh_outputs(self, dj: DrafterJobState) -> None:
        for data in chaindata.cycles(self.market, dj.job.job_id, from_block=self.start_block, with_p=False):
            if data.verified:
                dj.outputs.setdefault(data.cycle, data.output)

    def work_job(self, job_id: int) -> int:
        sent = self.act_on_announced_turn(job_id, lambda c, sure: self._draft(job_id, c, sure=sure))
        if sent is not None:
            return sent
        view = self.job_view(job_id)
        status = view["status"]
        self.schedule.set_active(job_id, status in (JobStatus.Open, JobStatus.Running))
        sent = self.take_own_turn(view, lambda c: self._draft(job_id, c))
        if sent is not None:
            return sent
        if status != JobStatus.Running and job_id in self.jobs:
            self.jobs[job_id].session = None  # generation is over: free the cache
        if status in (JobStatus.Finalized, JobStatus.None_):
            return self.retire_job(job_id)
        return self.settle(job_id, view)

    def background(self) -> int:
        """The draft of a job's cycle 0 depends on nothing the verifier does (the prompt, the public uniforms,
        the draft model): decide it (transcript saved, nothing sent) while the verifier accepts the job, so that
        the `JobAccepted` finds it ready. Only for jobs whose acceptance has not been seen yet."""
        did = 0
        for job_id, dj in list(self.jobs.items()):
            if dj.session is None and not dj.outputs and not dj.accepted and self.schedule.tracked(JOB, job_id):
                did += self._decide(job_id, 0) is not None
        return did

    def _decide(self, job_id: int, c: int) -> tuple[list[int], list[int]] | None:
        """Cycle c's draft (tokens, q): the transcript's if decided before (maybe sent before a restart), else
        proposed now and saved in the transcript before anything is signed; None if it cannot be proposed yet."""
        transcript = self.store.cycle(job_id, JOB_ROLE, c)
        if transcript is not None and transcript.proposals is not None:
            return transcript.proposals, transcript.q
        dj = self._job(job_id)
        session = self._session_at(dj, c)
        if session is None:
            return None
        draft = session.propose(c)
        dj.proposed_cycle = c
        tokens, q = list(draft.tokens), list(draft.q)
        extra: dict[str, Any] = {"q_top": [[[t, w] for t, w in row] for row in draft.top_k(TOP_K)]}
        if c == 0:  # the job's salt: secret until commitFirstDraft, which the contract takes only after the head
            extra["salt"] = protocol.new_salt()
        biased = getattr(session, "biased", {}).get(c)
        if biased:
            extra["biased"] = [vars(b) for b in biased]
            self.log.info("job %d cycle %d: biased positions %s", job_id, c, [b.index for b in biased])
        self.store.save_cycle(job_id, JOB_ROLE, c, proposals=tokens, q=q, top_k=extra)
        return tokens, q

    def _draft(self, job_id: int, c: int, sure: bool = False) -> int:
        key = f"job:{job_id}:cycle:{c}:commit"
        if self.txs.in_flight(key):
            return 0
        decided = self._decide(job_id, c)
        if decided is None:
            return 0
        tokens, q = decided
        root = protocol.draft_root(job_id, c, tokens, q)
        if c == 0:
            salt = self._salt(job_id)
            call = self.txs.encode_call(self.market, "commitFirstDraft", job_id, root, list(tokens), list(q), salt)
        else:
            call = self.txs.encode_call(self.market, "commitDraft", job_id, c, root, list(tokens), list(q))
        sent = self.transact(key, call, sure=sure)
        if sent:  # the hash is in the sent-transaction record already; the transcript gets it at the next flush
            hashes = {"commit": self.txs.tx_hash_of(key)}
            self.later(lambda: self.store.save_cycle(job_id, JOB_ROLE, c, tx_hashes=hashes))
        return sent

    def _salt(self, job_id: int) -> int:
        """The job's salt, from cycle 0's transcript (stored before the first send, so a resend carries the same)."""
        transcript = self.store.cycle(job_id, JOB_ROLE, 0)
        extra = dict(transcript.top_k or {}) if transcript is not None else {}
        if "salt" not in extra:  # a transcript written without one
            extra["salt"] = protocol.new_salt()
            self.store.save_cycle(job_id, JOB_ROLE, 0, top_k=extra)
        return int(extra["salt"])

    def _session_at(self, dj: DrafterJobState, c: int):
        """The job's DraftSession ready to propose cycle c: advanced from cycle c-1, or rebuilt from chain data."""
        s = dj.session
        if s is not None and s.cycle == c and dj.proposed_cycle is None:
            return s
        if s is not None and s.cycle == c - 1 and dj.proposed_cycle == c - 1 and (c - 1) in dj.outputs:
            s.advance(dj.outputs[c - 1])
            dj.proposed_cycle = None
            return s
        if any(k not in dj.outputs for k in range(c)):
            self._refresh_outputs(dj)
            if any(k not in dj.outputs for k in range(c)):
                return None  # an output is not visible yet; its event will bring the job back
        context = list(dj.job.prompt) + [t for k in range(c) for t in dj.outputs[k]]
        s = behaviors.draft_session(self.behavior, self.draft_model, dj.job, self.bias_policy)
        dj.session = resume_draft_session(s, context, c)
        dj.proposed_cycle = None
        return s

    # ------------------------------------------------------------------ disputes against me

    def answer_values(self, job_id: int, c: int, index: int) -> tuple[int, list[tuple[int, int]]]:
        """(claimed q of the disputed proposal, top-k of my distribution there): from my transcript, or replayed."""
        transcript = self.store.cycle(job_id, JOB_ROLE, c)
        if transcript is not None and transcript.q is not None and transcript.top_k:
            top = [(int(t), int(w)) for t, w in transcript.top_k["q_top"][index]]
            return int(transcript.q[index]), top
        dj = self._job(job_id)
        data = chaindata.cycles(self.market, job_id, from_block=self.start_block, with_p=False)
        context = list(dj.job.prompt) + [t for x in data[:c] for t in x.output] + list(data[c].tokens[:index])
        row = next_token_rows(self.draft_model, context, dj.job.sampling)[0]
        order = sorted(range(len(row)), key=lambda t: (-int(row[t]), t))[:TOP_K]
        x = data[c].tokens[index]
        return (int(row[x]) if x < len(row) else 0), [(t, int(row[t])) for t in order]
