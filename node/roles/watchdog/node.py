"""The watchdog node (`verispec serve watchdog`): audits finished jobs from chain data and disputes proven faults.

It follows every job of the deployment (or the ones named by `jobs`). Once a job is Finished, inside its challenge
window, it audits it (node/roles/watchdog/audit.py `audit_job`, the referees' own rule):

* **draft positions**: the draft model's replay of every cycle's proposals (`draft_rate` 1), or of the cycles a
  uniform draw at `draft_rate` picks (a draft forward per cycle: cheap);
* **target positions**: a fraction `audit_rate` of the binding target positions, drawn by `audit_sampling.select`
  under `weighting` with the node's private seed (made once, kept in its store's `secrets`, never logged or posted:
  no audited party can predict which positions are replayed), one target forward per audited cycle.

A finding becomes a dispute only after the referees' own single-position replay (`referee.judge_position`, exactly
what a referee runs) confirms it, so the watchdog never bonds an honest position; at most one dispute per job and
kind (the first binding fault: a drafter or verifier found cheating once loses its slash; more bonds on the same job
add risk, not proof), none on a position already disputed, none past the challenge window, and none that would lock
more than `bond_budget_wei` in its open disputes (the job waits while the budget is spent; its disputes free it).

Transcript jobs (docs/protocol.md "Transcript mode (v2)") are audited from their settlement's calldata, the same
per-cycle view (node/link/settled.py), with two differences. Settlement does not re-run the accept rule, so every
settled record is checked against it first (pure math, all cycles): a record the rule refutes (only a colluding pair
co-signs one) is answered with `challengeRule` on its first such cycle, no bond and no referees, which slashes both
signers (the replay audit is skipped: that conviction forfeits all the job's pay). Otherwise a confirmed replay
fault is pulled (`pullCycle`, unless pulled already) and disputed like a per-cycle one, within the bond budget.

Exactly once across kill -9: the audit's findings are stored before any dispute is opened; each opening goes through
the node's TxSender under the key `watchdog:open:{job}:{cycle}:{index}:{kind}` (signed and recorded before it is
broadcast), so a restart completes the same transaction instead of sending a second one. As challenger it draws
the panel at once (`DisputeClient.open_dispute`), draws escalated or appealed rounds, claims an accused's silence,
logs the answer, each round's verdict and any appeal (it never appeals itself), and withdraws its credits once a
dispute is resolved (DisputeManager `withdraw`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection

from eth_utils import keccak, to_checksum_address, to_hex
from web3.logs import DISCARD

from node import audit_sampling
from node.chain.enums import DisputeKind, DisputeStatus, JobStatus, Outcome, solidity_name
from node.chain.errors import TransactionReverted
from node.chain.events import ChainEvent
from node.jobs import chaindata
from node.jobs.sessions import JobRefused
from node.link import settled
from node.requester.disputing import DisputeClient
from node.requester.errors import RequesterError
from node.roles.base import NodeBase
from node.roles.schedule import DISPUTE, JOB
from node.roles.watchdog.audit import Audit, audit_job, load_job, target_positions

SEED_NAME = "watchdog-audit-seed"
DEFAULT_WEIGHTING = "uniform"  # docs/watchdog.md: a weighting a cheater knows tells it where audits are rarest
_LOST_RACE = ("PositionUnderDispute", "PositionAlreadyProven", "JobWrongStatus", "ChallengerIsAccused")
_TRANSCRIPT_RECHECK_S = 60  # chain seconds between looks at a transcript job running off chain (JobFinished wakes it)
_LOST_CHALLENGE = ("NotChallengeable", "JobWrongStatus")  # someone else's challenge, or finalize, came first


def parse_rate(value: float, what: str) -> float:
    if not 0 <= value <= 1:  # also refuses nan
        raise ValueError(f"{what} is a fraction in [0, 1], got {value}")
    return float(value)


class WatchdogNode(NodeBase, DisputeClient):
    wake_on_blocks_when_idle = False  # its work waits for jobs to finish and for dispute deadlines
    role = "watchdog"

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
        jobs: Collection[int] | None = None,
        draft_rate: float = 1.0,
        audit_rate: float = 0.1,
        weighting: str = DEFAULT_WEIGHTING,
        bond_budget_wei: int | None = None,
        tolerance_wad: int | None = None,
        **options,
    ):
        from node.decoding.loading import max_positions
        from node.decoding.scorer import default_tolerance_wad

        self.draft_rate = parse_rate(draft_rate, "--draft-rate")
        self.audit_rate = parse_rate(audit_rate, "--audit-rate")
        audit_sampling.weight(audit_sampling.Position(0, 0, 0.0, 1.0, 0.0), weighting)  # a ValueError if unknown
        self.weighting = weighting
        self.load_models(target_model_path, draft_model_path, device)
        self.max_positions = min(max_positions(self.target_model), max_positions(self.draft_model))
        self.tolerance_wad = tolerance_wad if tolerance_wad is not None else default_tolerance_wad(self.dtype)
        super().__init__(w3, deployment, account, store_path, poll_interval, **options)
        if self.disputes is None:
            raise ValueError("this deployment has no DisputeManager: a watchdog has nothing to dispute")
        self.follow = None if jobs is None else {int(j) for j in jobs}
        self.bond = int(self.disputes.functions.bond().call())
        self.bond_budget_wei = bond_budget_wei
        if bond_budget_wei is not None and bond_budget_wei < self.bond:
            raise ValueError(f"a bond budget of {bond_budget_wei} wei is less than one dispute bond ({self.bond} wei)")
        self._seed = self.store.secret(SEED_NAME, audit_sampling.new_seed)  # private: never logged
        self._draft_seed = keccak(b"draft" + self._seed)  # its own draw, independent of the target one
        self._logged: dict[int, tuple] = {}  # dispute -> last state logged
        self._waiting_budget: set[int] = set()  # jobs whose dispute waits for the bond budget (logged once)
        self.audits: dict[int, Audit] = {}  # job -> its audit in this process (tests, diagnostics)
        self.restore(with_jobs=True)

    # ------------------------------------------------------------------ DisputeClient's host

    def job_view(self, job_id: int) -> dict:
        return chaindata.job_view(self.market, job_id)

    def _require_disputes(self):
        return self.disputes

    def _send(self, action: str, function, value: int = 0, key: str | None = None):
        if key is None:  # a draw: harmless to repeat (a second one fails estimation), so any key will do
            key = f"watchdog:{action}:{uuid.uuid4().hex}"
        return None, self.sender.send_call(key, function, value=value)

    # ------------------------------------------------------------------ events

    def on_market_JobSubmitted(self, event: ChainEvent) -> None:
        job_id = int(event.args["jobId"])
        if (self.follow is not None and job_id not in self.follow) or self.store.job(job_id, self.role) is not None:
            return
        self.store.save_job(job_id, self.role, "active", {})
        self.schedule.track(JOB, job_id)

    def on_market_JobFinished(self, event: ChainEvent) -> None:
        self.schedule.mark_dirty(JOB, event.args["jobId"])

    def on_disputes_DisputeOpened(self, event: ChainEvent) -> None:
        a = event.args
        if to_checksum_address(a["challenger"]) != self.address:
            return
        dispute_id = int(a["disputeId"])
        if self.store.dispute(dispute_id, self.role) is None:
            self._save_opened(dispute_id, int(a["jobId"]), int(a["cycle"]), int(a["index"]), int(a["kind"]))
        self.schedule.track(DISPUTE, dispute_id)

    def on_disputes_Answered(self, event: ChainEvent) -> None:
        dispute_id = int(event.args["disputeId"])
        if self.schedule.tracked(DISPUTE, dispute_id):
            self.log.info("dispute %d: the accused answered %d", dispute_id, int(event.args["claimedProb"]))
        self.schedule.mark_dirty(DISPUTE, dispute_id)

    def on_disputes_Appealed(self, event: ChainEvent) -> None:
        dispute_id = int(event.args["disputeId"])
        if self.schedule.tracked(DISPUTE, dispute_id):
            self.log.warning("dispute %d: appealed by %s", dispute_id, event.args.get("appellant", "someone"))
        self.schedule.mark_dirty(DISPUTE, dispute_id)

    def on_disputes_Withdrawn(self, event: ChainEvent) -> None:
        if to_checksum_address(event.args["account"]) == self.address:  # my withdrawal landed: finish the disputes
            for stored in self.store.disputes(role=self.role):
                if stored.status != "done":
                    self.schedule.mark_dirty(DISPUTE, stored.dispute_id)

    def _touch(self, event: ChainEvent) -> None:
        self.schedule.mark_dirty(DISPUTE, event.args["disputeId"])

    on_disputes_RefereesDrawn = _touch
    on_disputes_RoundDecided = _touch
    on_disputes_DisputeResolved = _touch
    on_disputes_DrawEscalated = _touch
    on_disputes_DrawRescheduled = _touch
    on_disputes_DrawScheduled = _touch

    # ------------------------------------------------------------------ jobs: audit, then dispute

    def work_job(self, job_id: int) -> int:
        stored = self.store.job(job_id, self.role)
        if stored is None or stored.status == "done":
            self.schedule.forget(JOB, job_id)
            return 0
        view = self.job_view(job_id)
        status, params = view["status"], dict(stored.params)
        if status in (JobStatus.Open, JobStatus.Running):
            wake = view["deadline"] + 1  # JobFinished wakes it earlier
            if view.get("transcript") and status == JobStatus.Running:  # off chain: its deadline passes unheeded
                wake = max(wake, self.chain_time() + _TRANSCRIPT_RECHECK_S)
            self.schedule.defer_until(JOB, job_id, wake)
            return 0
        if status != JobStatus.Finished:
            pending = [c for c in params.get("candidates", []) if c.get("result") is None]
            name = solidity_name(JobStatus(status))
            if "audit" not in params:
                self.log.warning("job %d: %s before I audited it", job_id, name)
            elif pending:
                self.log.warning("job %d: %s with %d proven fault(s) not disputed yet", job_id, name, len(pending))
            return self._done(job_id, params)
        if "audit" not in params:
            if self.chain_time() > view["deadline"]:
                self.log.warning("job %d: its challenge window ended before I audited it", job_id)
                return self._done(job_id, params)
            params = self._audit(job_id)
            if params is None:
                return self._done(job_id, {"audit": "skipped"})
            self.store.save_job(job_id, self.role, "active", params)  # before any dispute leaves
        did = 0
        for candidate in params["candidates"]:
            if candidate.get("result") is None:
                opened = self._challenge if candidate["kind"] == "rule" else self._dispute
                did += opened(job_id, candidate, view)
                self.store.save_job(job_id, self.role, "active", params)
        if all(c.get("result") is not None for c in params["candidates"]):
            self._done(job_id, params)
        else:
            self.schedule.defer_until(JOB, job_id, view["deadline"] + 1)  # or a dispute resolving frees budget
        return did

    def _done(self, job_id: int, params: dict) -> int:
        self.store.save_job(job_id, self.role, "done", params)
        self.schedule.forget(JOB, job_id)
        return 0

    def _audit(self, job_id: int) -> dict | None:
        """Audit the job (see the module doc); its summary and the dispute candidates, for the store."""
        try:
            data = load_job(self.system, job_id, self.start_block, self.tokenizer, self.max_positions)
        except (JobRefused, chaindata.ChainDataError) as exc:  # e.g. a transcript settled through a contract wallet
            self.log.warning("job %d: not auditable: %s", job_id, exc)
            return None
        record = data.record
        if settled.is_transcript(self.system, job_id):
            broken = settled.rule_faults(self.system, job_id, data.cycles)  # before the models: it needs none
            for _, why in broken:
                self.log.warning("job %d: the co-signed record breaks the rule: %s", job_id, why)
            # the contract's own rule decides: a record it does not refute (or a job convicted already) is audited
            # by replay like any other
            broken = [b for b in broken if settled.refuted_on_chain(self.system, job_id, b[0], self.address)]
            if broken:
                summary = {"cycles": len(data.cycles), "rule_faults": [list(b) for b in broken]}
                return {"audit": summary, "candidates": [{"kind": "rule", "cycle": broken[0][0], "index": 0}]}
        if record.draft_model != self.draft_id or record.target_model != self.target_id:
            self.log.info("job %d: its models are not the ones I hold; not audited", job_id)
            return None
        draft_cycles = self._draft_cycles(data)
        entropies = {} if self.weighting == "entropy" else None
        if entropies is not None:  # the weights need the draft replay of every cycle first
            first = audit_job(data, self.tolerance_wad, draft_model=self.draft_model, entropies=entropies)
        positions = target_positions(data, entropies)
        chosen = audit_sampling.select(positions, self.audit_rate, self.weighting, self._seed, job_id)
        target = [(p.cycle, p.index) for p in chosen]
        audit = audit_job(
            data,
            self.tolerance_wad,
            draft_model=self.draft_model,
            target_model=self.target_model,
            draft_cycles=draft_cycles if entropies is None else (),
            target=target,
        )
        if entropies is not None:
            audit.draft, audit.draft_cycles = first.draft, first.draft_cycles
            audit.draft_forwards += first.draft_forwards
        self.audits[job_id] = audit
        target_cycles = sorted({c for c, _ in audit.target_positions})
        self.log.info(
            "job %d audited: %d cycles; draft: %d cycles replayed (%d draft forwards), %d faults; target: %d of %d "
            "binding positions (rate %.3g, %s) in %d cycles %s (%d target forwards), %d faults",
            job_id,
            len(data.cycles),
            len(audit.draft_cycles),
            audit.draft_forwards,
            len(audit.draft),
            len(audit.target_positions),
            len(positions),
            self.audit_rate,
            self.weighting,
            len(target_cycles),
            target_cycles,
            audit.target_forwards,
            len(audit.target),
        )
        for f in audit.draft:
            self.log.warning(
                "job %d cycle %d index %d: the drafter committed token %d (q %d), the draft model gives token %d "
                "(q %d): %s fault%s",
                job_id,
                f.cycle,
                f.index,
                f.committed_token,
                f.committed_q,
                f.replay_token,
                f.replay_q,
                f.reason,
                "" if f.binding else " (after a rejection: binds nothing)",
            )
        for f in audit.target:
            self.log.warning("job %d cycle %d index %d: %s", job_id, f.cycle, f.index, f.reason)
        candidates = []
        binding = [f for f in audit.draft if f.binding]
        if binding:
            candidates.append({"kind": "draft", "cycle": binding[0].cycle, "index": binding[0].index})
        if audit.target:
            candidates.append({"kind": "target", "cycle": audit.target[0].cycle, "index": audit.target[0].index})
        return {
            "audit": {
                "cycles": len(data.cycles),
                "draft_cycles": len(audit.draft_cycles),
                "target_positions": [list(p) for p in audit.target_positions],
                "draft_forwards": audit.draft_forwards,
                "target_forwards": audit.target_forwards,
                "draft_faults": [[f.cycle, f.index, f.reason] for f in audit.draft],
                "target_faults": [[f.cycle, f.index, f.reason] for f in audit.target],
            },
            "candidates": candidates,
        }

    def _draft_cycles(self, data) -> set[int] | None:
        """The cycles whose draft is replayed: all (None) at draft rate 1, else a uniform draw of proposals."""
        if self.draft_rate >= 1:
            return None
        proposals = [audit_sampling.Position(c.cycle, i, 0.0, 1.0, 0.0) for c in data.cycles for i in range(c.gamma)]
        chosen = audit_sampling.select(proposals, self.draft_rate, "uniform", self._draft_seed, data.record.job_id)
        return {p.cycle for p in chosen}

    # ------------------------------------------------------------------ a rule challenge (transcript jobs)

    def _challenge(self, job_id: int, candidate: dict, view: dict) -> int:
        """`challengeRule` on a settled record the accept rule refutes (no bond); sets the candidate's `result`."""
        cycle = candidate["cycle"]
        key = f"watchdog:challenge:{job_id}:{cycle}"
        if self.store.sent_tx(key) is None:
            if self.chain_time() > view["deadline"]:
                candidate["result"] = "the challenge window ended"
                self.log.warning("job %d cycle %d: not challenged: the challenge window ended", job_id, cycle)
                return 0
            if settled.convicted(self.system, job_id):
                candidate["result"] = "already convicted"
                self.log.info("job %d: a rule challenge convicted it already", job_id)
                return 0
        try:
            call = settled.challenge_call(self.system, job_id, cycle, self.start_block)
            receipt = self.sender.send_call(key, call)
        except TransactionReverted as exc:
            candidate["result"] = f"not sent: {exc.error_name or exc}"
            level = logging.INFO if exc.error_name in _LOST_CHALLENGE else logging.ERROR
            self.log.log(level, "job %d cycle %d: the challenge reverted: %s", job_id, cycle, exc.error_name or exc)
            return 0
        (won,) = self.market.events.TranscriptConvicted().process_receipt(receipt, errors=DISCARD)
        reward = int(won["args"]["reward"])
        candidate["result"] = {"challenge_tx": to_hex(receipt["transactionHash"]), "reward": reward}
        self.log.warning(
            "job %d cycle %d: rule challenge won: drafter slashed %d wei, verifier %d wei; my reward %d wei",
            job_id,
            cycle,
            int(won["args"]["fromDrafter"]),
            int(won["args"]["fromVerifier"]),
            reward,
        )
        if reward and int(self.market.functions.owed(self.address).call()):
            self.sender.send_call(f"watchdog:withdraw-market:{job_id}", self.market.functions.withdraw())
        return 1

    # ------------------------------------------------------------------ opening a dispute

    def locked_wei(self) -> int:
        """The bonds of my disputes not yet resolved (what the bond budget counts)."""
        locked = 0
        for stored in self.store.disputes(role=self.role):
            if stored.status != "done":
                d = chaindata.dispute_view(self.disputes, stored.dispute_id)
                locked += self.bond if d["status"] != DisputeStatus.Resolved else 0
        return locked

    def _dispute(self, job_id: int, candidate: dict, view: dict) -> int:
        """Open the dispute of one candidate (or complete its opening after a restart); sets its `result`."""
        kind = DisputeKind.from_label(candidate["kind"])
        cycle, index = candidate["cycle"], candidate["index"]
        key = f"watchdog:open:{job_id}:{cycle}:{index}:{candidate['kind']}"
        where = f"job {job_id} cycle {cycle} index {index} ({kind.name})"
        if self.store.sent_tx(key) is None:  # not sent yet: decide now (after a restart it is completed, unasked)
            if self.chain_time() > view["deadline"]:
                candidate["result"] = "the challenge window ended"
                self.log.warning("%s: not disputed: the challenge window ended", where)
                return 0
            other = self._disputed(job_id, cycle, index, kind)
            if other is not None:
                candidate["result"] = f"already disputed (dispute {other})"
                self.log.info("%s: already disputed (dispute %d); not opening another", where, other)
                return 0
            locked = self.locked_wei()
            if self.bond_budget_wei is not None and locked + self.bond > self.bond_budget_wei:
                if job_id not in self._waiting_budget:
                    self.log.warning(
                        "%s: waiting: %d wei of the %d wei bond budget are locked in open disputes",
                        where,
                        locked,
                        self.bond_budget_wei,
                    )
                    self._waiting_budget.add(job_id)
                return 0
            judgement = self._confirm(job_id, cycle, index, kind)
            if not judgement.cheated:
                candidate["result"] = f"not confirmed: {judgement.reason}"
                self.log.warning("%s: the referees' replay does not confirm the fault (%s)", where, judgement.reason)
                return 0
        self._waiting_budget.discard(job_id)
        try:
            info = self.open_dispute(job_id, cycle, index, kind, key=key)
        except TransactionReverted as exc:
            candidate["result"] = f"not opened: {exc.error_name or exc}"
            level = logging.INFO if exc.error_name in _LOST_RACE else logging.ERROR
            self.log.log(level, "%s: opening reverted: %s", where, exc.error_name or exc)
            return 0
        except RequesterError as exc:
            candidate["result"] = f"not opened: {exc}"
            self.log.error("%s: cannot open: %s", where, exc)
            return 0
        candidate["result"] = info.dispute_id
        if self.store.dispute(info.dispute_id, self.role) is None:
            self._save_opened(info.dispute_id, job_id, cycle, index, int(kind))
        self.schedule.track(DISPUTE, info.dispute_id)
        self.log.warning(
            "%s: opened dispute %d with a %d wei bond against %s; referees %s",
            where,
            info.dispute_id,
            self.bond,
            info.accused,
            ", ".join(info.referees) or "not drawn yet",
        )
        return 1

    def _disputed(self, job_id: int, cycle: int, index: int, kind: DisputeKind) -> int | None:
        """The id of a dispute already opened (by anyone) on this position and kind, if any."""
        from node.chain import logs as chain_logs

        logs = chain_logs.event_logs(
            self.disputes.events.DisputeOpened, self.start_block, argument_filters={"jobId": job_id}
        )
        for log in logs:
            a = log["args"]
            if (int(a["cycle"]), int(a["index"]), int(a["kind"])) == (cycle, index, int(kind)):
                return int(a["disputeId"])
        return None

    def _confirm(self, job_id: int, cycle: int, index: int, kind: DisputeKind):
        """The referees' own judgement of the position: `judge_position` with one fresh forward, as a referee runs."""
        from node.jobs.sessions import job_from_record
        from node.roles.referee.node import judge_position

        record = chaindata.job_request(self.market, job_id, from_block=self.start_block)
        job = job_from_record(record, self.tokenizer)
        data = settled.job_cycles(self.system, job_id, self.start_block, with_p=False)  # either mode
        prefix = list(job.prompt) + [t for x in data[:cycle] for t in x.output]
        cyc = chaindata.with_p(self.market, data[cycle])
        return judge_position(
            job,
            prefix,
            cyc,
            index,
            kind,
            self.tolerance_wad,
            draft_model=self.draft_model,
            target_model=self.target_model,
        )

    def _save_opened(self, dispute_id: int, job_id: int, cycle: int, index: int, kind: int) -> None:
        self.store.save_dispute(
            dispute_id, self.role, "open", {"job": job_id, "cycle": cycle, "index": index, "kind": kind}
        )

    # ------------------------------------------------------------------ disputes: follow them to the end

    def work_dispute(self, dispute_id: int) -> int:
        d = chaindata.dispute_view(self.disputes, dispute_id)
        fn = self.disputes.functions
        now = self.chain_time()
        status, round_ = d["status"], int(d["round"])
        self._log_state(dispute_id, d)
        if status == DisputeStatus.Resolved:
            return self._finish(dispute_id, d)
        if status in (DisputeStatus.AwaitingAnswer, DisputeStatus.Drawing) and not d["drawn"]:
            if d["drawBlock"] == 0:  # escalated: a fresh seed block once the escalation period is over
                if now < d["drawAfter"]:
                    self.schedule.defer_until(DISPUTE, dispute_id, d["drawAfter"] + 1)
                    return 0
                key = f"dispute:{dispute_id}:schedule:{round_}:{d['escalations']}"
                return self.transact(key, fn.drawReferees(dispute_id))
            if self.w3.eth.block_number >= d["drawBlock"]:
                return self.transact(
                    f"dispute:{dispute_id}:draw:{round_}:{d['drawBlock']}", fn.drawReferees(dispute_id)
                )
            return 0  # the next block draws
        if status == DisputeStatus.AwaitingAnswer:
            if now > d["answerDeadline"]:
                return self.transact(f"dispute:{dispute_id}:answer-timeout", fn.claimAnswerTimeout(dispute_id))
            self.schedule.defer_until(DISPUTE, dispute_id, d["answerDeadline"] + 1)  # `Answered` wakes it earlier
            return 0
        if status == DisputeStatus.Voting:
            if now > d["revealDeadline"] and fn.canResolve(dispute_id).call():  # the referees resolve first
                return self.transact(f"dispute:{dispute_id}:resolve:{round_}", fn.resolve(dispute_id))
            self.schedule.defer_until(DISPUTE, dispute_id, d["revealDeadline"] + 1)
            return 0
        if status == DisputeStatus.Appealable:
            if now > d["appealDeadline"] and fn.canResolve(dispute_id).call():
                return self.transact(f"dispute:{dispute_id}:resolve:{round_}:final", fn.resolve(dispute_id))
            self.schedule.defer_until(DISPUTE, dispute_id, d["appealDeadline"] + 1)  # or `Appealed`
        return 0

    def _log_state(self, dispute_id: int, d: dict) -> None:
        status, round_ = DisputeStatus(d["status"]), int(d["round"])
        state = (status, round_, bool(d["drawn"]))
        if self._logged.get(dispute_id) == state:
            return
        self._logged[dispute_id] = state
        if status == DisputeStatus.Appealable:
            result = Outcome(d["roundResult"])
            self.log.info(
                "dispute %d: round %d decided %s (%d cheated, %d faithful); appealable until %d",
                dispute_id,
                round_,
                solidity_name(result),
                d["cheatedVotes"],
                d["faithfulVotes"],
                d["appealDeadline"],
            )
            if result == Outcome.ChallengerLost:
                self.log.error("dispute %d: the referees found the position faithful; I do not appeal", dispute_id)
        elif status != DisputeStatus.Resolved:
            self.log.info(
                "dispute %d: %s, round %d%s", dispute_id, solidity_name(status), round_, ", drawn" if d["drawn"] else ""
            )

    def _finish(self, dispute_id: int, d: dict) -> int:
        """A resolved dispute of mine: log its outcome, withdraw what it credited me, stop following it."""
        credit = int(self.disputes.functions.credits(self.address).call())
        key = f"dispute:{dispute_id}:withdraw"
        if credit and self.store.sent_tx(key) is None and not self.txs.in_flight(key):
            self.log.info("dispute %d resolved %s: withdrawing %d wei of credits", dispute_id, _outcome(d), credit)
            return self.transact(key, self.disputes.functions.withdraw())
        if self.txs.in_flight(key):
            return 0
        self.log.info("dispute %d resolved: %s; nothing (more) to withdraw", dispute_id, _outcome(d))
        self.store.save_dispute(dispute_id, self.role, "done")
        self.schedule.forget(DISPUTE, dispute_id)
        self._logged.pop(dispute_id, None)
        for job in self.store.jobs(role=self.role, status="active"):  # a job waiting for budget may go on now
            self.schedule.mark_dirty(JOB, job.job_id)
        return 0


def _outcome(d: dict) -> str:
    return solidity_name(Outcome(d["outcome"]))
