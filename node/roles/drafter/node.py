"""The drafter node (`verispec serve drafter`): the draft model, one DraftSession per job, commitDraft per cycle.

For each job assigned to it (`JobSubmitted.request.drafter` is its address) whose model ids are the
ones it loaded, it proposes cycle c whenever the contract says the job is Running and awaits the draft
of cycle c (after the verifier's `JobAccepted`, then after each `CycleVerified`), and sends
`commitDraft` under the key `job:{id}:cycle:{c}:commit` (cycle 0: `commitFirstDraft`, with a fresh random
salt that enters every accept and residual uniform of the job, docs/protocol.md §3). The cycle's transcript
(proposals, q, the top-k of its distributions) and the job's salt (`jobs.drafter_salt`) are saved in the store
*before* the transaction, so a restart resends the very same draft instead of computing another. It answers
DraftReplay disputes against it with its claimed q and its top-k at the disputed position.

Its `min_price_wei` (`serve drafter --min-price`) is declared on chain at start (`setMinPrice`) when the market holds
another, so the market refuses a cheaper job at submit and nobody can fill the node's capacity with jobs it would
not serve (threat-model row 118). Everything it reads from chain is hostile input (node/roles/drafter/chain_checks.py):
it still declines a job whose price per accepted token is below `min_price_wei` (one submitted before the
declaration), whose γ is out of range or whose vocabulary
is not its model's, saying why in the log and the store; a verified cycle's output that does not decode, is not
its accepted proposals then outToken, or holds a token outside the vocabulary is logged and rebuilt or sanitized,
and the node keeps drafting: it never crashes on it and never misses a deadline because of it.

Capacity (docs/protocol.md "Soundness (v1.2)"): the node serves at most `capacity` jobs at once (Open or Running on
chain). `capacity` given (`serve drafter --capacity N`) is declared on chain at start (`setCapacity`) when the
market holds another; none given: the market's (its declaration, or DEFAULT_CAPACITY). The market refuses a job
past it, and the node declines one it would have to serve beside `capacity` others of its own anyway (a lower
capacity given, a declaration that came after the job): it never commits to it, so its silence is no timeout of
its (the first commit is the drafter's consent). A probe (docs/protocol.md "Soundness (v1.2)") is served whatever
its price and the node's load: declining one would only enter the drafter's window at α = 0.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from web3.exceptions import BadFunctionCallOutput, ContractLogicError

from node import protocol
from node.chain.enums import JobStatus, Phase
from node.chain.events import ChainEvent
from node.decoding.loading import max_positions, vocab_size
from node.decoding.messages import DecodingJob
from node.jobs import chaindata
from node.jobs.models import next_token_rows
from node.jobs.sessions import drafter_salt, resume_draft_session
from node.link import settled
from node.roles import behaviors, transcript_jobs
from node.roles.behaviors import DrafterBehavior
from node.roles.drafter import chain_checks
from node.roles.party import PartyNode
from node.roles.schedule import JOB

TOP_K = 8  # top-k of each distribution kept in transcripts and posted in dispute answers (contract max: 16)
JOB_ROLE = "drafter"  # the node's role, also its rows in the store (jobs, disputes, cycles, job_salts)


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
        min_price_wei: int = 0,
        link_silence_s: float = 120.0,
        capacity: int | None = None,
        **options,
    ):
        self.behavior = DrafterBehavior.parse(behavior)
        if int(min_price_wei) < 0:
            raise ValueError(f"min_price_wei must be >= 0, got {min_price_wei}")
        self.min_price_wei = int(min_price_wei)  # least pricePerAcceptedToken (wei) of a job it serves
        if capacity is not None and not 1 <= int(capacity) < 2**32:
            raise ValueError(f"capacity must be in 1..{2**32 - 1}, got {capacity}")
        self.link_silence_s = float(link_silence_s)  # a transcript job's verifier silent that long is forced
        self.bias_policy = bias_policy or behaviors.BiasPolicy()
        self.load_models(target_model_path, draft_model_path, device, with_target=False)
        self.max_positions = max_positions(self.draft_model)
        self.vocab_size = vocab_size(self.draft_model)
        super().__init__(w3, deployment, account, store_path, poll_interval, **options)
        self.jobs: dict[int, DrafterJobState] = {}
        self._probe_scheduler: str | None = None  # the market's probe scheduler (`is_probe`), read once
        self._ended: set[int] = set()  # jobs of mine seen past Running: they hold no capacity any more
        self.capacity = self._declare_capacity(None if capacity is None else int(capacity))
        self._declare_min_price()
        self.restore()
        self.log_start("draft")

    # ------------------------------------------------------------------ events

    def serve_taken(self, record: chaindata.ChainJob, job: DecodingJob) -> None:
        reason = self._refusal(record)
        if reason is not None:
            self.refuse(record.job_id, reason, "declined")
            return
        self.serve_job(record, DrafterJobState(job, record))
        self.log.info("job %d: assigned (γ=%d, maxTokens=%d)", record.job_id, job.gamma, job.max_new_tokens)

    def transcript_refusal(self, record: chaindata.ChainJob) -> str | None:
        return self._refusal(record)

    def _refusal(self, record: chaindata.ChainJob) -> str | None:
        """Why the node declines `record` (None: it serves it). A probe (requested by the market's probe scheduler)
        is never declined for its price or for capacity: it pays the floor, the market never refuses one for
        capacity, and a declined probe would enter the window at α = 0 (docs/protocol.md "Soundness (v1.2)")."""
        probe = self.is_probe(record)
        min_price = 0 if probe else self.min_price_wei
        reason = chain_checks.job_refusal(record.request, min_price, self.vocab_size, self._chain_vocab(record))
        return reason or (None if probe else self._capacity_refusal(record.job_id))

    def is_probe(self, record: chaindata.ChainJob) -> bool:
        """Whether the job's requester is the market's probe scheduler (read once; none: no job is a probe)."""
        if self._probe_scheduler is None:
            try:
                self._probe_scheduler = self.market.functions.probeScheduler().call()
            except Exception:  # a market without probes (an older deployment): no job is a probe
                self._probe_scheduler = ""
        return (
            bool(self._probe_scheduler)
            and int(self._probe_scheduler, 16) != 0
            and (record.requester.lower() == self._probe_scheduler.lower())
        )

    def refusal_config(self) -> dict[str, Any]:
        return {
            **super().refusal_config(),
            "min_price_wei": self.min_price_wei,
            "max_gamma": chain_checks.MAX_GAMMA,
            "capacity": self.capacity,
        }

    # ------------------------------------------------------------------ capacity

    def _declare_capacity(self, capacity: int | None) -> int:
        """The capacity the node serves with: `capacity`, declared on chain first when the market holds another
        (`setCapacity`, sent and waited for), or the market's when None."""
        _, held = (int(x) for x in self.market.functions.drafterLoad(self.address).call())
        if capacity is None or capacity == held:
            return held
        key = f"drafter:capacity:{capacity}:{uuid.uuid4().hex}"  # a declaration per start that changes it
        self.sender.send_call(key, self.market.functions.setCapacity(capacity))
        self.log.info("declared capacity %d on chain (was %d)", capacity, held)
        return capacity

    def _declare_min_price(self) -> None:
        """Declares `min_price_wei` on chain (`setMinPrice`, sent and waited for) when the market holds another, so
        that the market refuses the jobs the node would decline: a declined job would hold one of its capacity's
        slots until someone claims its timeout (threat-model row 118). A market without it (an older deployment)
        is left alone: the node still declines such jobs itself."""
        try:
            held = int(self.market.functions.minPriceOf(self.address).call())
        except (BadFunctionCallOutput, ContractLogicError):  # an older market has no minPriceOf: nothing to declare
            return
        if held == self.min_price_wei:
            return
        key = f"drafter:min-price:{self.min_price_wei}:{uuid.uuid4().hex}"  # a declaration per start that changes it
        self.sender.send_call(key, self.market.functions.setMinPrice(self.min_price_wei))
        self.log.info("declared min price %d wei per accepted token on chain (was %d)", self.min_price_wei, held)

    def _capacity_refusal(self, job_id: int) -> str | None:
        """Why the node declines job `job_id` for capacity: it already serves `capacity` other jobs that are Open or
        Running (None: it has room)."""
        live = [j.job_id for j in self.store.jobs(role=JOB_ROLE, status="active") if j.job_id != job_id]
        live = [j for j in live if self._holds_capacity(j)]
        if len(live) < self.capacity:
            return None
        return f"at capacity: {len(live)} job(s) of mine Open or Running ({sorted(live)}), my capacity {self.capacity}"

    def _holds_capacity(self, job_id: int) -> bool:
        if job_id in self._ended:
            return False
        if self.market.functions.jobStatus(job_id).call() in (JobStatus.Open, JobStatus.Running):
            return True
        self._ended.add(job_id)  # a job never returns to Open or Running
        return False

    def _chain_vocab(self, record: chaindata.ChainJob) -> int | None:
        """The job's vocabulary as the market records it (`getJob().vocabSize`), where the market has one."""
        if not any(c["name"] == "vocabSize" for c in self._job_view_fields()):
            return None
        try:
            return int(self.job_view(record.job_id)["vocabSize"])
        except Exception:  # unreadable now: the check is skipped, not the job (the contract checks it too)
            return None

    def _job_view_fields(self) -> list[dict]:
        abi = next((e for e in self.market.abi if e.get("type") == "function" and e["name"] == "getJob"), None)
        return abi["outputs"][0]["components"] if abi else []

    def on_market_JobAccepted(self, event: ChainEvent) -> None:
        if int(event.args["jobId"]) in self.jobs:
            self.jobs[int(event.args["jobId"])].accepted = True
        if self.schedule.tracked(JOB, event.args["jobId"]):
            # my turn: cycle 0
            self.schedule.note_turn(event.args["jobId"], Phase.AwaitDraft, 0, self.draft_deadline(event))
        self.schedule.mark_dirty(JOB, event.args["jobId"])

    def on_market_CycleVerified(self, event: ChainEvent) -> None:
        job_id, c = int(event.args["jobId"]), int(event.args["cycle"])
        if not self.schedule.tracked(JOB, job_id):
            return
        transcript = self.store.cycle(job_id, JOB_ROLE, c)
        proposals = transcript.proposals if transcript is not None else None
        args = event.args
        output, accepted = self._checked_output(
            job_id, c, args["output"], args["accepted"], args["outToken"], proposals
        )
        dj = self.jobs.get(job_id)
        if dj is not None:
            dj.outputs.setdefault(c, output)
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
        try:
            found = chaindata.cycles(self.market, dj.job.job_id, from_block=self.start_block, with_p=False)
        except (chaindata.ChainDataError, ValueError) as exc:  # malformed logs: the events' outputs must do
            self.log.error("job %d: the chain's cycles cannot be read: %s", dj.job.job_id, exc)
            return
        for data in found:
            if data.verified and data.cycle not in dj.outputs:
                transcript = self.store.cycle(dj.job.job_id, JOB_ROLE, data.cycle)
                proposals = transcript.proposals if transcript is not None else data.tokens
                output, _ = self._checked_output(
                    dj.job.job_id, data.cycle, list(data.output), data.accepted, data.out_token, proposals
                )
                dj.outputs[data.cycle] = output

    def _checked_output(self, job_id: int, c: int, raw, accepted, out_token, proposals) -> tuple[tuple[int, ...], int]:
        """(the output of verified cycle c the node continues from, accepted), checked as hostile input
        (chain_checks.checked_output); problems are logged, never raised."""
        dj = self.jobs.get(job_id)
        gamma = dj.job.gamma if dj is not None else chain_checks.MAX_GAMMA
        remaining = eos = None
        if dj is not None:
            eos = dj.job.eos_token_id
            if all(k in dj.outputs for k in range(c)):
                remaining = dj.job.max_new_tokens - sum(len(dj.outputs[k]) for k in range(c))
        output, problems = chain_checks.checked_output(
            raw,
            accepted,
            out_token,
            gamma=gamma,
            vocab_size=self.vocab_size,
            proposals=proposals,
            eos_token=eos,
            remaining=remaining,
        )
        for problem in problems:
            self.log.error("job %d cycle %d: hostile chain data: %s (I keep drafting)", job_id, c, problem)
        try:
            n = min(max(int(accepted), 0), gamma)
        except (TypeError, ValueError):
            n = 0
        return output, n

    def work_job(self, job_id: int) -> int:
        if self.is_transcript(job_id):
            return transcript_jobs.drafter_work(self, job_id)
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
        if c == 0:  # the job's salt: secret until commitFirstDraft, which the contract takes only after the head
            salt = drafter_salt(self.store, job_id, JOB_ROLE)  # stored before the transaction is signed
            call = self.txs.encode_call(self.market, "commitFirstDraft", job_id, root, list(tokens), list(q), salt)
        else:
            call = self.txs.encode_call(self.market, "commitDraft", job_id, c, root, list(tokens), list(q))
        sent = self.transact(key, call, sure=sure)
        if sent:  # the hash is in the sent-transaction record already; the transcript gets it at the next flush
            hashes = {"commit": self.txs.tx_hash_of(key)}
            self.later(lambda: self.store.save_cycle(job_id, JOB_ROLE, c, tx_hashes=hashes))
        return sent

    def _session_at(self, dj: DrafterJobState, c: int):
        """The job's DraftSession ready to propose cycle c: advanced from cycle c-1, or rebuilt from chain data."""
        s = dj.session
        if s is not None and s.cycle == c and dj.proposed_cycle is None:
            return s
        # the outputs first: a turn seen before the last cycle's event must still advance the session, since a
        # rebuilt one (a prefill) differs from it in the last digits, and so may sample another draft
        if any(k not in dj.outputs for k in range(c)):
            self._refresh_outputs(dj)
            if any(k not in dj.outputs for k in range(c)):
                return None  # an output is not visible yet; its event will bring the job back
        if s is not None and s.cycle == c - 1 and dj.proposed_cycle == c - 1:
            s.advance(dj.outputs[c - 1])
            dj.proposed_cycle = None
            return s
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
        data = settled.job_cycles(self.system, job_id, self.start_block, with_p=False)  # either mode
        context = list(dj.job.prompt) + [t for x in data[:c] for t in x.output] + list(data[c].tokens[:index])
        context = list(chain_checks.sanitized(context, self.vocab_size))  # a model takes no out-of-range token
        row = next_token_rows(self.draft_model, context, dj.job.sampling)[0]
        order = sorted(range(len(row)), key=lambda t: (-int(row[t]), t))[:TOP_K]
        x = data[c].tokens[index]
        return (int(row[x]) if x < len(row) else 0), [(t, int(row[t])) for t in order]
