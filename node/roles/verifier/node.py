"""The verifier node (`verispec serve verifier`): the target model (and the draft model, to replay every
draft), one VerifySession per job, acceptJob and submitVerification.

For each job assigned to it whose model ids are the ones it loaded and whose prompt fits, it accepts
(`job:{id}:accept`) with the head of its hash chain (seed per docs/node.md: recomputable from its key
after a restart). On each `DraftCommitted` of its jobs it reads tokens and q from the event, runs
`VerifySession` with the draft model replaying the proposals (residual from its own replay; q_i / x_i
checked, faults logged), and sends `submitVerification` (`job:{id}:cycle:{c}:verify`). The transcript
(proposals, q, posted p, top-k of p, reveal, accepted, emitted, outToken) is saved *before* the
transaction. When `CycleVerified` arrives it asserts the contract's accept count equals the engine's
(and logs loudly if not). It answers TargetReplay disputes against it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from node import protocol
from node.chain.enums import DisputeKind, JobStatus, Phase
from node.chain.events import ChainEvent
from node.decoding import sampler
from node.decoding.loading import max_positions, vocab_size
from node.decoding.messages import DecodingJob, Draft, DraftFault, Verification
from node.decoding.scorer import VerifySession
from node.jobs import chaindata
from node.jobs.models import next_token_rows
from node.jobs.sessions import chain_head, resume_verify_session, verifier_seed
from node.link import settled
from node.roles import behaviors, transcript_jobs
from node.roles.behaviors import DrafterBehavior, VerifierBehavior
from node.roles.party import PartyNode
from node.roles.schedule import JOB

TOP_K = 8
JOB_ROLE = "verifier"  # the node's role, also its rows in the store (jobs, disputes, cycles)
SPECULATION_MISSES = 2  # consecutive wrong guesses after which a job is no longer speculated on
PREDICTOR_CATCH_UP = 8  # a job first speculated on at a later cycle replays the drafter's session up to there


@dataclass
class Speculation:
    """A verification computed ahead for the draft an honest drafter will commit (see `VerifierNode.background`)."""

    cycle: int
    tokens: tuple[int, ...]
    q: tuple[int, ...]
    verification: Verification
    backup: Any  # how to put the session back as it was before the guess (`_snapshot`)


@dataclass
class VerifierJobState:
    job: DecodingJob
    record: chaindata.ChainJob
    seed: bytes
    drafts: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)  # cycle -> (tokens, q)
    outputs: dict[int, tuple[int, ...]] = field(default_factory=dict)
    session: Any = None  # VerifySession (or RetaliatingVerifySession)
    verified_cycle: int | None = None  # the cycle `session` verified and has not advanced past yet
    last: Verification | None = None  # the outcome of `verified_cycle` (what the session advances with)
    # speculation (honest verifiers): the session advanced with its own emitted tokens before the chain's
    # CycleVerified (`assumed`, checked when it arrives); `predictor` replays what an honest drafter proposes
    accepted: bool = False  # my acceptJob sent, or JobAccepted seen
    draft_deadline: int | None = None  # of the draft awaited (from the block of the last JobAccepted/CycleVerified)
    assumed: dict[int, tuple[int, ...]] = field(default_factory=dict)
    predictor: Any = None  # DraftSession
    predicted_cycle: int | None = None  # the cycle `predictor` proposed and has not advanced past yet
    spec: Speculation | None = None
    spec_misses: int = 0
    speculate: bool = True
    salt: int | None = None  # the drafter's salt (SaltCommitted, with the cycle-0 draft); None until known


class VerifierNode(PartyNode):
    role = JOB_ROLE
    own_phase = Phase.AwaitVerify
    link_server = None  # its transcript link (`serve verifier --listen`, node/cli_transcript.py `start_link`)

    def __init__(
        self,
        w3,
        deployment,
        account,
        store_path,
        target_model_path,
        draft_model_path,
        behavior: VerifierBehavior | str = VerifierBehavior.HONEST,
        poll_interval: float = 0.2,
        device=None,
        *,
        retaliation: behaviors.RetaliationPolicy | None = None,
        dispute_faults: bool = False,
        speculate: bool = True,
        **options,
    ):
        self.behavior = VerifierBehavior.parse(behavior)
        self.retaliation = retaliation or behaviors.RetaliationPolicy()
        self.dispute_faults = dispute_faults  # open a DraftReplay dispute (bond) on a binding draft fault
        # verify ahead, while the drafter drafts, the draft an honest drafter will commit (`background`)
        self.speculate = bool(speculate) and self.behavior is VerifierBehavior.HONEST
        self.speculation = {"hits": 0, "misses": 0}
        self.load_models(target_model_path, draft_model_path, device)
        self.vocab_size = vocab_size(self.target_model)
        positions = [p for p in (max_positions(self.target_model), max_positions(self.draft_model)) if p]
        self.max_positions = min(positions) if positions else None
        super().__init__(w3, deployment, account, store_path, poll_interval, **options)
        self.jobs: dict[int, VerifierJobState] = {}
        self.accept_mismatches: list[tuple[int, int, int, int]] = []  # (job, cycle, engine, contract)
        self.draft_faults: list[tuple[int, int, Any]] = []  # (job, cycle, DraftFault) seen by the replay
        self.restore()
        self.log_start("target")

    # ------------------------------------------------------------------ events

    def serve_taken(self, record: chaindata.ChainJob, job: DecodingJob) -> None:
        self.serve_job(record, VerifierJobState(job, record, verifier_seed(self.account.key, record.job_id)))

    def transcript_refusal(self, record: chaindata.ChainJob) -> str | None:
        return None if self.link_server else "a transcript-mode job: I serve them only with --listen HOST:PORT"

    def refusal_config(self) -> dict[str, Any]:  # a restart with --listen decides transcript jobs again
        return {**super().refusal_config(), "link": self.link_server is not None}

    def on_market_JobAccepted(self, event: ChainEvent) -> None:
        vj = self.jobs.get(int(event.args["jobId"]))
        if vj is not None:
            vj.accepted, vj.draft_deadline = True, self.draft_deadline(event)
        self.schedule.mark_dirty(JOB, event.args["jobId"])

    def on_market_SaltCommitted(self, event: ChainEvent) -> None:
        vj = self.jobs.get(int(event.args["jobId"]))
        if vj is not None:
            vj.salt = int(event.args["salt"])

    def on_market_DraftCommitted(self, event: ChainEvent) -> None:
        job_id = int(event.args["jobId"])
        if not self.schedule.tracked(JOB, job_id):
            return
        tokens, q = chaindata.unpack_draft(event.args["draft"])
        vj = self.jobs.get(job_id)
        if vj is not None:
            vj.drafts.setdefault(int(event.args["cycle"]), (tuple(tokens), tuple(q)))
        timeouts = self.timeouts() if vj is not None and vj.draft_deadline is not None else None
        deadline = vj.draft_deadline + timeouts[1] if timeouts is not None else None  # the contract's rule
        # my turn: no getJob needed
        self.schedule.note_turn(job_id, Phase.AwaitVerify, int(event.args["cycle"]), deadline)
        self.schedule.mark_dirty(JOB, job_id)

    def on_market_CycleVerified(self, event: ChainEvent) -> None:
        verified = self.verified_cycle(event)
        if verified is None:
            return
        job_id, c, output, accepted = verified
        vj = self.jobs.get(job_id)
        if vj is not None:
            vj.outputs.setdefault(c, output)
            vj.draft_deadline = self.draft_deadline(event)
            assumed = vj.assumed.pop(c, None)
            if assumed is not None and assumed != output:  # the session ran ahead on a wrong assumption
                self.log.error(
                    "job %d cycle %d: the chain emitted %s, not %s; rebuilding the session",
                    job_id,
                    c,
                    list(output),
                    list(assumed),
                )
                self._stop_speculating(vj)
                vj.session, vj.verified_cycle = None, None
        # the drafter's turn (a JobFinished after this event clears it)
        self.schedule.note_turn(job_id, Phase.AwaitDraft, c + 1)
        transcript = self.store.cycle(job_id, JOB_ROLE, c)
        if transcript is not None and transcript.accepted is not None and transcript.accepted != accepted:
            self.accept_mismatches.append((job_id, c, transcript.accepted, accepted))
            self.log.error(
                "ACCEPT COUNT MISMATCH job %d cycle %d: the engine accepted %d, the contract %d",
                job_id,
                c,
                transcript.accepted,
                accepted,
            )
        if (
            transcript is not None
            and transcript.emitted_tokens is not None
            and tuple(transcript.emitted_tokens) != output
        ):
            self.log.error(
                "job %d cycle %d: the contract emitted %s, the engine %s",
                job_id,
                c,
                list(output),
                transcript.emitted_tokens,
            )
        if transcript is not None:  # its verify hash, at the next flush (a crash replays this event)
            hashes = {"verify": event.tx_hash}
            self.later(lambda: self.store.save_cycle(job_id, JOB_ROLE, c, tx_hashes=hashes))
        if self.dispute_faults and transcript is not None and transcript.top_k and transcript.top_k.get("faults"):
            self._dispute_fault(job_id, c, accepted, transcript)
        self.schedule.mark_dirty(JOB, job_id)

    def _dispute_fault(self, job_id: int, c: int, accepted: int, transcript) -> int:
        """Open a DraftReplay dispute on the cycle's first draft fault, if it binds (index <= accepted).

        At most one per job (`job:{id}:dispute`): a lost dispute stops the job anyway, and a replay that
        disagrees by mistake should not cost more than one bond."""
        key = f"job:{job_id}:dispute"
        index = min(f["index"] for f in transcript.top_k["faults"])
        if (
            not protocol.binds(index, accepted, len(transcript.proposals))
            or self.disputes is None
            or self.txs.in_flight(key)
            or self.store.sent_tx(key) is not None
        ):
            return 0
        root = protocol.draft_root(job_id, c, transcript.proposals, transcript.q)
        record = (root, list(transcript.p), accepted, int(transcript.top_k["out_token"]))
        leaves = [protocol.leaf(job_id, c, i, t, q) for i, (t, q) in enumerate(zip(transcript.proposals, transcript.q))]
        proof = (transcript.proposals[index], transcript.q[index], protocol.proof(leaves, index))
        self.log.warning("job %d cycle %d: disputing the drafter's proposal %d", job_id, c, index)
        call = self.disputes.functions.openDispute(job_id, c, index, DisputeKind.DraftReplay, record, proof)
        return self.transact(key, call, value=self.disputes.functions.bond().call())

    # ------------------------------------------------------------------ work

    def _job(self, job_id: int) -> VerifierJobState:
        vj = self.jobs.get(job_id)
        if vj is None:  # after a restart: rebuild from chain data
            record, job = self.rebuild_job(job_id)
            vj = VerifierJobState(job, record, verifier_seed(self.account.key, job_id))
            self._refresh(vj)
            self.jobs[job_id] = vj
        return vj

    def _refresh(self, vj: VerifierJobState) -> None:
        for data in chaindata.cycles(self.market, vj.job.job_id, from_block=self.start_block, with_p=False):
            vj.drafts.setdefault(data.cycle, (data.tokens, data.q))
            if data.verified:
                vj.outputs.setdefault(data.cycle, data.output)

    def work_job(self, job_id: int) -> int:
        if self.is_transcript(job_id):
            return transcript_jobs.verifier_work(self, job_id)
        sent = self.act_on_announced_turn(job_id, lambda c, sure: self._verify(job_id, c, sure=sure))
        if sent is not None:
            return sent
        view = self.job_view(job_id)
        status = view["status"]
        self.schedule.set_active(
            job_id, status == JobStatus.Running or (status == JobStatus.Open and self.chain_time() <= view["deadline"])
        )
        if status == JobStatus.Open and self.chain_time() <= view["deadline"]:
            if int(view["vocabSize"]) != self.vocab_size:  # its tokens would not be my model's
                self.refuse(job_id, f"its vocabulary is {int(view['vocabSize'])}, my target model's {self.vocab_size}")
                return 0
            vj = self._job(job_id)
            head = chain_head(self.account.key, job_id, vj.job.max_new_tokens)
            sent = self.transact(f"job:{job_id}:accept", self.market.functions.acceptJob(job_id, head))
            if sent:  # guess cycle 0's draft at once (the drafter commits it as soon as it sees the acceptance)
                vj.accepted = True
                self._try_speculate(vj)
            return sent
        sent = self.take_own_turn(view, lambda c: self._verify(job_id, c))
        if sent is not None:
            return sent
        if status != JobStatus.Running and job_id in self.jobs:
            self._stop_speculating(self.jobs[job_id])
            self.jobs[job_id].session = None
        if status in (JobStatus.Finalized, JobStatus.None_):
            return self.retire_job(job_id)
        if status == JobStatus.Open:  # past the accept deadline: the requester (or the drafter) cancels it
            self.schedule.defer_until(JOB, job_id, self.chain_time() + 3600)
            return 0
        return self.settle(job_id, view)

    def _verify(self, job_id: int, c: int, sure: bool = False) -> int:
        key = f"job:{job_id}:cycle:{c}:verify"
        if self.txs.in_flight(key):
            return 0
        t = self.store.cycle(job_id, JOB_ROLE, c)
        if t is not None and t.p is not None and t.top_k and "out_token" in t.top_k:
            tokens, q, p, reveal, out_token = t.proposals, t.q, t.p, t.reveal, int(t.top_k["out_token"])
        else:
            vj = self._job(job_id)
            if c not in vj.drafts:
                self._refresh(vj)
                if c not in vj.drafts:
                    return 0  # its DraftCommitted is not visible yet
            tokens, q = vj.drafts[c]
            if self._salt(vj) is None:
                return 0
            v = self._speculated(vj, c, tokens, q)
            invalid = next((i for i, tok in enumerate(tokens) if tok >= self.vocab_size), None)
            if v is not None:
                session = vj.session
            elif invalid is not None:
                v = self._verify_invalid_draft(vj, c, tokens, q, invalid)
                if v is None:
                    return 0
                session = None
            else:
                session = self._session_at(vj, c)
                if session is None:
                    return 0
                v = session.verify(c, Draft(job_id=job_id, cycle=c, tokens=tuple(tokens), q=tuple(q), q_rows=None))
                vj.verified_cycle, vj.last = c, v
            for fault in v.draft_faults:
                self.draft_faults.append((job_id, c, fault))
                self.log.warning(
                    "job %d cycle %d: draft fault at %d (%s): claimed %d, my replay %d",
                    job_id,
                    c,
                    fault.index,
                    fault.kind,
                    fault.claimed,
                    fault.replayed,
                )
            p, reveal, out_token = list(v.p), v.reveal, v.out_token
            info: dict[str, Any] = {
                "p_top": [[[tok, w] for tok, w in row] for row in v.top_k(TOP_K)],
                "out_token": out_token,
                "out_prob": int(v.p_rows[v.accepted, out_token]),
                "faults": [vars(f) for f in v.draft_faults],
            }
            true_p = getattr(session, "true_p", {}).get(c)
            if true_p is not None:
                info["true_p"] = list(true_p)
            self.store.save_cycle(
                job_id,
                JOB_ROLE,
                c,
                proposals=list(tokens),
                q=list(q),
                p=p,
                top_k=info,
                reveal=reveal,
                accepted=v.accepted,
                emitted_tokens=list(v.emitted),
            )
        call = self.txs.encode_call(
            self.market, "submitVerification", job_id, c, list(tokens), list(q), list(p), reveal, out_token
        )
        sent = self.transact(key, call, sure=sure)
        if sent:  # the hash is in the sent-transaction record already; the transcript gets it at the next flush
            hashes = {"verify": self.txs.tx_hash_of(key)}
            self.later(lambda: self.store.save_cycle(job_id, JOB_ROLE, c, tx_hashes=hashes))
            if job_id in self.jobs:
                # guess the next draft at once: the drafter needs its notice and a draft (γ forwards) before it
                # commits, which is the time this takes; the bookkeeping of this cycle's events can wait
                self._try_speculate(self.jobs[job_id])
        return sent

    # ------------------------------------------------------------------ speculation

    def background(self) -> int:
        """While the drafter drafts cycle c, verify ahead the draft an honest drafter commits: the draft is a
        deterministic function of public data (the job, the outputs so far, the public uniforms) and the draft
        model, which the verifier holds (it replays every draft anyway). So after sending cycle c-1's
        verification, the verifier advances its session with its own emitted tokens (checked against the
        chain's `CycleVerified`), proposes cycle c with a `DraftSession` of its own that mirrors the drafter's,
        and verifies that guess. When the `DraftCommitted` arrives, a draft equal to the guess (tokens and q,
        exactly) takes the verification computed ahead, which is what verifying it then would compute (same
        session state, same input); any other draft restores the session as it was before the guess and is
        verified as usual. Nothing is stored or sent ahead: the transcript is written, and the transaction
        signed, only once the draft is on chain. After `SPECULATION_MISSES` wrong guesses in a row (a drafter
        that is not honest, or computes on other hardware) the job is no longer speculated on."""
        if not self.speculate:
            return 0
        return sum(self._try_speculate(vj) for vj in list(self.jobs.values()))

    def _try_speculate(self, vj: VerifierJobState) -> int:
        if not self.speculate or not vj.speculate or vj.spec is not None:
            return 0
        try:
            return self._speculate(vj)
        except Exception:
            self.log.exception("job %d: speculation failed; verifying as usual", vj.job.job_id)
            self._stop_speculating(vj)
            vj.session, vj.verified_cycle = None, None  # rebuilt from chain data when the draft comes
            return 0

    def _speculate(self, vj: VerifierJobState) -> int:
        if vj.salt is None:
            return 0  # cycle 0: the salt comes with the draft, so its uniforms cannot be known ahead
        s = vj.session
        if s is None:
            if not (vj.accepted and not vj.drafts and not vj.outputs):
                return 0  # speculation starts with a job, at cycle 0 (a mirror of the drafter's session)
            s = self._session_at(vj, 0)
            if s is None:
                return 0
        if vj.verified_cycle is not None:  # verified (and sent): advance, with my own emitted tokens if the
            v = vj.last  # chain's are not known yet (checked when its CycleVerified comes)
            if v is None or v.cycle != vj.verified_cycle or v.done:
                return 0
            chain = vj.outputs.get(v.cycle)
            s.advance(chain if chain is not None else v.emitted)  # (a chain output that differs raises)
            if chain is None:
                vj.assumed[v.cycle] = tuple(v.emitted)
            vj.verified_cycle = None
        c = s.cycle
        if s.done or c in vj.drafts:
            return 0  # nothing to guess: done, or the real draft is here (the usual path verifies it)
        p = self._predictor_at(vj, c)
        if p is None:
            return 0
        guess = p.propose(c)
        vj.predicted_cycle = c
        backup = self._snapshot(s)
        tokens, q = tuple(int(t) for t in guess.tokens), tuple(int(x) for x in guess.q)
        v = s.verify(c, Draft(job_id=vj.job.job_id, cycle=c, tokens=tokens, q=q, q_rows=None))
        vj.spec = Speculation(c, tokens, q, v, backup)
        vj.verified_cycle = c
        return 1

    def _predictor_at(self, vj: VerifierJobState, c: int):
        """The job's mirror of an honest drafter's DraftSession, ready to propose cycle c: a session started at
        cycle 0 and taken through every cycle as the drafter's is (propose, then advance with the cycle's output),
        so that its proposals are the drafter's bit for bit; None if that cannot be done now."""
        p = vj.predictor
        if p is None:
            if c > PREDICTOR_CATCH_UP:
                vj.speculate = False  # (e.g. after a restart) replaying that far is not worth it
                return None
            p = vj.predictor = behaviors.draft_session(DrafterBehavior.HONEST, self.draft_model, vj.job)
            vj.predicted_cycle = None
        while p.cycle < c:
            k = p.cycle
            emitted = vj.assumed.get(k, vj.outputs.get(k))
            if emitted is None:
                return None
            if vj.predicted_cycle != k:
                p.propose(k)  # a cycle it did not guess (the draft came first): propose as the drafter did
            p.advance(emitted)
            vj.predicted_cycle = None
        if p.cycle != c or vj.predicted_cycle is not None:
            vj.speculate = False
            return None
        return p

    def _speculated(self, vj: VerifierJobState, c: int, tokens, q) -> Verification | None:
        """The verification computed ahead for cycle c if the committed draft is the one guessed, else None (the
        session is then put back as it was before the guess)."""
        spec, vj.spec = vj.spec, None
        if spec is None:
            return None
        if spec.cycle == c and tuple(tokens) == spec.tokens and tuple(q) == spec.q:
            vj.spec_misses = 0
            self.speculation["hits"] += 1
            vj.last = spec.verification
            return spec.verification
        self.speculation["misses"] += 1
        vj.spec_misses += 1
        if vj.spec_misses >= SPECULATION_MISSES:
            vj.speculate = False
        self.log.info("job %d cycle %d: the draft is not the one guessed; verifying it now", vj.job.job_id, c)
        vj.session, vj.verified_cycle = self._restore(vj.session, spec.backup), None
        return None

    def _snapshot(self, s):
        """What `_restore` needs to undo a `verify` on session `s`: the lengths of its two caches (a verify only
        appends to them, and records its outcome until `advance`), or a deep copy of the session when it is not
        built that way (the models themselves are shared, never copied)."""
        if type(s) is VerifySession and getattr(s, "_last", 0) is None and getattr(s, "replay", None) is not None:
            return ("lengths", len(s.target.tokens), len(s.replay.tokens))
        shared = {id(self.target_model): self.target_model, id(self.draft_model): self.draft_model}
        return ("copy", copy.deepcopy(s, shared))

    def _restore(self, s, backup):
        """The session as it was when `backup` was taken (cropping the caches rolls the KV entries back exactly:
        the entries kept are the very tensors computed before)."""
        if backup[0] == "lengths":
            s.target.crop(backup[1])
            s.replay.crop(backup[2])
            s._last = None
            return s
        return backup[1]

    def _stop_speculating(self, vj: VerifierJobState) -> None:
        if vj.spec is not None:  # the guess is dropped: the session goes back to before it
            vj.session, vj.verified_cycle = self._restore(vj.session, vj.spec.backup), None
        vj.spec, vj.predictor, vj.predicted_cycle, vj.speculate = None, None, None, False
        vj.assumed.clear()

    def _verify_invalid_draft(self, vj: VerifierJobState, c: int, tokens, q, invalid: int) -> Verification | None:
        """Verify a draft whose proposal `invalid` is not a token of the vocabulary (the contract takes any uint32).

        Such a token has probability 0 under the target, so p_invalid = 0 (truthfully) and the rule rejects
        there at the latest; p after it binds nothing (0): `sampler.decide` with the job's vocabulary. The rows up
        to it come from one fresh forward over the valid prefix, the residual's q from the draft model at the
        rejected position. The engine session cannot hold the invalid id, so it is rebuilt from chain data next cycle.
        """
        self.log.warning(
            "job %d cycle %d: proposal %d is token %d, outside the vocabulary (%d)",
            vj.job.job_id,
            c,
            invalid,
            tokens[invalid],
            self.vocab_size,
        )
        if any(k not in vj.outputs for k in range(c)):
            self._refresh(vj)
            if any(k not in vj.outputs for k in range(c)):
                return None
        job, k = vj.job, len(tokens)
        emitted_before = [t for i in range(c) for t in vj.outputs[i]]
        context = list(job.prompt) + emitted_before
        p_rows = next_token_rows(self.target_model, context + list(tokens[:invalid]), job.sampling, keep=invalid + 1)
        reveal = protocol.chain_reveal(vj.seed, job.chain_length, c)

        def q_row(n: int):  # the residual's q: the draft model at the rejected position, computed once n is known
            return next_token_rows(self.draft_model, context + list(tokens[:n]), job.sampling)[0]

        d = sampler.decide(job.job_id, c, reveal, tokens, q, p_rows, q_row, salt=vj.salt, vocab_size=self.vocab_size)
        n = d.accepted  # <= invalid
        emitted = protocol.truncate_emitted(
            list(tokens[:n]) + [d.out_token], job.eos_token_id, job.max_new_tokens - len(emitted_before)
        )
        done = (job.eos_token_id is not None and job.eos_token_id in emitted) or (
            len(emitted_before) + len(emitted) >= job.max_new_tokens
        )
        vj.session, vj.verified_cycle = None, None
        padding = np.zeros((k + 1 - len(p_rows), p_rows.shape[1]), dtype=np.int64)  # rows past it: unknown
        return Verification(
            cycle=c,
            reveal=reveal,
            root=d.root,
            p=d.p,
            accepted=n,
            out_token=d.out_token,
            emitted=tuple(emitted),
            done=done,
            p_rows=np.vstack([p_rows, padding]),
            draft_faults=(DraftFault(invalid, "x", tokens[invalid], -1),),
        )

    def _salt(self, vj: VerifierJobState) -> int | None:
        """The job's salt: from its SaltCommitted event, else from the view (once a draft is committed it is final)."""
        if vj.salt is None:
            view = self.job_view(vj.job.job_id)
            if view["cycle"] > 0 or view["phase"] == Phase.AwaitVerify:
                vj.salt = int(view["salt"])
        return vj.salt

    def _session_at(self, vj: VerifierJobState, c: int):
        """The job's VerifySession ready to verify cycle c: advanced from cycle c-1, or rebuilt from chain data; built
        with the job's salt, so None while that is not known (it comes with the cycle-0 draft)."""
        if vj.salt is None:
            return None
        s = vj.session if vj.session is None or vj.session.salt == vj.salt else None  # a reorg may change the salt
        if s is not None and s.cycle == c and vj.verified_cycle is None:
            return s
        if any(k not in vj.outputs for k in range(c)):  # first, so that a session one cycle behind advances (drafter's)
            self._refresh(vj)
            if any(k not in vj.outputs for k in range(c)):
                return None
        if s is not None and s.cycle == c - 1 and vj.verified_cycle == c - 1:
            try:
                s.advance(vj.outputs[c - 1])
                vj.verified_cycle = None
                return s
            except ValueError as exc:  # the chain recorded something else than this session decided
                self.log.error("job %d cycle %d: %s; rebuilding the session from chain data", vj.job.job_id, c - 1, exc)
        emitted = [t for k in range(c) for t in vj.outputs[k]]
        s = behaviors.verify_session(
            self.behavior,
            self.target_model,
            vj.job,
            vj.seed,
            draft_model=self.draft_model,
            policy=self.retaliation,
            salt=vj.salt,
        )
        vj.session = resume_verify_session(s, list(vj.job.prompt) + emitted, c, len(emitted))
        vj.verified_cycle = None
        return s

    # ------------------------------------------------------------------ disputes against me

    def answer_values(self, job_id: int, c: int, index: int) -> tuple[int, list[tuple[int, int]]]:
        """(claimed p of the disputed token, top-k of p there): the posted p_i for a proposal, the p of outToken
        at the position it was sampled for index == K. From the transcript, or replayed from chain data."""
        t = self.store.cycle(job_id, JOB_ROLE, c)
        if t is not None and t.p is not None and t.top_k and "p_top" in t.top_k:
            k = len(t.p)
            position = index if index < k else t.accepted
            top = [(int(tok), int(w)) for tok, w in t.top_k["p_top"][position]]
            return (int(t.p[index]) if index < k else int(t.top_k["out_prob"])), top
        vj = self._job(job_id)
        data = settled.job_cycles(self.system, job_id, self.start_block, with_p=False)  # either mode
        cyc = chaindata.with_p(self.market, data[c])
        position = index if index < cyc.gamma else cyc.accepted
        context = list(vj.job.prompt) + [t for x in data[:c] for t in x.output] + list(cyc.tokens[:position])
        row = next_token_rows(self.target_model, context, vj.job.sampling)[0]
        order = sorted(range(len(row)), key=lambda t: (-int(row[t]), t))[:TOP_K]
        claimed = int(cyc.p[index]) if index < cyc.gamma else int(row[cyc.out_token]) if cyc.out_token < len(row) else 0
        return claimed, [(t, int(row[t])) for t in order]
