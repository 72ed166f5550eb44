"""The keeper node (`verispec serve keeper`): runs the probes of every drafter whose target model has a shipped
corpus on chain (docs/protocol.md "Soundness (v1.2)", contracts/ProbeScheduler.sol).

Every move comes from chain data and the shipped corpus (node/probes/corpus.py), so anyone may run a keeper, any
number of keepers may run at once, and a restart needs nothing but the chain:

* **drafters**: every `DrafterPairSet` of the registry (scanned from the deployment's start block at start, then
  from the event poller) whose target model's corpus on chain (`corpusOf`) is the shipped one; a drafter not
  active now is looked at again later;
* **open** a drafter's probe when it is due (`nextDueOf` passed, its last probe ended): `openProbe`, under the key
  `probe:open:{drafter}:{last probe}:{due}` (one opening per due time, never twice across restarts); the keeper's
  tip is credited in the scheduler;
* **start** a probe waiting for its draw (status Seeding: just opened, reseeded, or sent back by a verifier's
  abort) with the corpus prompt at `promptIndexOf` and its Merkle proof: `startProbe`, under
  `probe:start:{probe}:{attempts}:{seed block}`. The seed block's hash exists only from the next block on, so the
  index is read, and the transaction estimated (TxSender), against the pending block: it runs in a later block,
  whose draw from that hash is the same. A seed whose hash has left the 256-block window is renewed by the same
  call with any prompt (the contract reseeds before it checks the prompt);
* **follow** each probe job: claim its timeout (`claimTimeout`: a verifier's abort sends the probe back, a drafter's
  silence enters its window at α = 0) and finalize it after the challenge window (its cycles enter the α window
  then), each only `grace_s` of chain time after the deadline, so that the job's own parties, which do both, go
  first;
* now and then (`collect_interval_s` of chain time) pull the treasury's market balance into the scheduler
  (`collect`) and withdraw its own tips (`withdrawTips`).

A call that would revert (ProbeNotDue, ProbePending, TreasuryShort, a race with another keeper) fails gas
estimation: nothing is signed, it is one log line (node/roles/inflight.py), and the next look decides again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from eth_utils import to_checksum_address
from web3.exceptions import ContractLogicError

from node.chain import logs as chain_logs
from node.chain.enums import JobStatus, ProbeStatus
from node.chain.errors import ChainUnavailable
from node.chain.events import ChainEvent
from node.jobs import chaindata
from node.probes.corpus import Corpus, load_corpus
from node.roles.base import NodeBase
from node.roles.schedule import JOB

SEEDING, RUNNING, DONE = ProbeStatus.Seeding, ProbeStatus.Running, ProbeStatus.Done
ENDED = (JobStatus.Finished, JobStatus.Finalized)


class KeeperNode(NodeBase):
    role = "keeper"

    def __init__(
        self,
        w3,
        deployment,
        account,
        store_path,
        target_model_path=None,
        draft_model_path=None,
        poll_interval: float = 0.2,
        device=None,
        *,
        corpora: Sequence[Corpus] | None = None,
        grace_s: int = 30,
        collect_interval_s: int = 3600,
        inactive_recheck_s: int = 600,
        **options,
    ):
        """`corpora`: the corpora it probes with (default: the shipped one rendered for `target_model_path`);
        `draft_model_path` and `device` are taken for `serve`'s sake: a keeper computes with no model."""
        if corpora is None:
            if target_model_path is None:
                raise ValueError("a keeper needs a target model (its corpus) or corpora")
            corpora = [load_corpus(target_model_path)]
        self.grace_s = int(grace_s)
        self.collect_interval_s = int(collect_interval_s)
        self.inactive_recheck_s = int(inactive_recheck_s)
        if deployment.system(w3).probes is None:
            raise ValueError("the deployment has no probe scheduler wired: deploy with `verispec chain up --probes`")
        super().__init__(w3, deployment, account, store_path, poll_interval, **options)
        self.probes = self.system.probes
        self.registry = self.system.registry
        self.corpora: dict[bytes, Corpus] = {}
        for corpus in corpora:
            on_chain = self.probes.functions.corpusOf(corpus.target_model).call()
            if corpus.matches(on_chain):
                self.corpora[corpus.target_model] = corpus
            else:
                self.log.warning(
                    "target model %s: the scheduler's corpus (root %s, %d prompts) is not the shipped one: not probed",
                    corpus.target_model.hex()[:16],
                    bytes(on_chain[0]).hex()[:16],
                    int(on_chain[1]),
                )
        if not self.corpora:
            raise ValueError("no shipped probe corpus matches a corpus on chain: nothing to probe")
        self.drafters: dict[str, bytes] = {}  # drafter -> its target model (one with a corpus)
        self._dirty: set[str] = set()
        self._checked: dict[str, float] = {}  # drafter -> monotonic time it was last looked at
        self._wake: dict[str, int] = {}  # drafter -> chain time before which only an event changes anything
        self._next_collect = 0  # chain time of the next collect / withdrawTips
        self.restore()  # its probe jobs not finalized yet
        for log in chain_logs.event_logs(self.registry.events.DrafterPairSet, self.start_block):
            self._drafter_pair_set(log["args"])
        self.log.info(
            "keeper %s: probing %d drafter(s) of %d target model(s)",
            self.address,
            len(self.drafters),
            len(self.corpora),
        )

    def event_contracts(self) -> dict:
        return {**super().event_contracts(), "registry": self.system.registry, "probes": self.system.probes}

    # ------------------------------------------------------------------ events

    def _drafter_pair_set(self, args) -> None:
        target = bytes(args["targetModel"])
        if target in self.corpora:
            drafter = to_checksum_address(args["account"])
            self.drafters[drafter] = target
            self._dirty.add(drafter)

    def on_registry_DrafterPairSet(self, event: ChainEvent) -> None:
        self._drafter_pair_set(event.args)

    def on_probes_ProbeOpened(self, event: ChainEvent) -> None:
        self._mark(to_checksum_address(event.args["drafter"]))

    def on_probes_ProbeStarted(self, event: ChainEvent) -> None:
        self.track_probe_job(int(event.args["jobId"]), int(event.args["probeId"]))
        self._mark(self._probe(int(event.args["probeId"]))["drafter"])

    def on_probes_ProbeRedrawn(self, event: ChainEvent) -> None:  # a verifier's abort: draw again
        self._mark(self._probe(int(event.args["probeId"]))["drafter"])

    # (ProbeReseeded marks nothing: the periodic look starts the renewed seed, so that a deployment with no eligible
    # verifier is not reseeded in every block)

    def on_market_JobFinished(self, event: ChainEvent) -> None:
        self._job_moved(int(event.args["jobId"]))

    def on_market_JobFinalized(self, event: ChainEvent) -> None:
        self._job_moved(int(event.args["jobId"]))

    def _job_moved(self, job_id: int) -> None:
        if self.schedule.tracked(JOB, job_id):
            self.schedule.mark_dirty(JOB, job_id)
            drafter = self.store.job(job_id, self.role).params.get("drafter")
            if drafter:
                self._mark(drafter)  # its probe ended: the next one may be due

    def _mark(self, drafter: str) -> None:
        if drafter in self.drafters:
            self._dirty.add(drafter)

    def track_probe_job(self, job_id: int, probe_id: int) -> None:
        """Follow probe job `job_id` to its finalization (stored: a restart follows it too)."""
        if self.store.job(job_id, self.role) is None:
            drafter = self._probe(probe_id)["drafter"]
            self.store.save_job(job_id, self.role, "active", {"probe": probe_id, "drafter": drafter})
        if not self.schedule.tracked(JOB, job_id) and self.store.job(job_id, self.role).status == "active":
            self.schedule.track(JOB, job_id)

    # ------------------------------------------------------------------ views

    def _probe(self, probe_id: int) -> dict[str, Any]:
        drafter, seed_block, status, attempts, excluded, job_id = self.probes.functions.getProbe(probe_id).call()
        return {
            "drafter": to_checksum_address(drafter),
            "seedBlock": int(seed_block),
            "status": int(status),
            "attempts": int(attempts),
            "excluded": excluded,
            "jobId": int(job_id),
        }

    # ------------------------------------------------------------------ work

    def _work(self) -> int:
        did = super()._work()  # the probe jobs it follows (`work_job`)
        now = time.monotonic()
        due = [d for d in self.drafters if d in self._dirty or now - self._checked.get(d, 0.0) >= self.recheck_interval]
        if due:
            chain_now = self.chain_time()
            for drafter in due:
                if drafter not in self._dirty and self._wake.get(drafter, 0) > chain_now:
                    continue
                self._dirty.discard(drafter)
                self._checked[drafter] = now
                self._wake.pop(drafter, None)
                try:
                    did += self.work_drafter(drafter)
                except ChainUnavailable:
                    self._dirty.add(drafter)
                    raise
                except Exception:
                    self.log.exception("work on drafter %s failed", drafter)
        return did + self._housekeeping()

    def work_drafter(self, drafter: str) -> int:
        """The next move for `drafter`'s probes: start the one waiting for its draw, or open the next one when due."""
        fn = self.probes.functions
        last = int(fn.lastProbeOf(drafter).call())
        if last:
            probe = self._probe(last)
            if probe["status"] == SEEDING:
                return self.start(last, probe)
            if probe["status"] == RUNNING:
                self.track_probe_job(probe["jobId"], last)
                if self.market.functions.jobStatus(probe["jobId"]).call() not in ENDED:
                    return 0  # its end (JobFinished) or its abort (ProbeRedrawn) marks the drafter again
        due = int(fn.nextDueOf(drafter).call())
        now = self.chain_time()
        if now < due:
            self._wake[drafter] = due
            return 0
        draft, target = self.registry.functions.drafterPairOf(drafter).call()
        if not self.registry.functions.isActiveDrafter(drafter, draft, target).call():
            self._wake[drafter] = now + self.inactive_recheck_s  # unbonding, or not staked enough: look again later
            return 0
        return self.transact(f"probe:open:{drafter}:{last}:{due}", fn.openProbe(drafter))

    def start(self, probe_id: int, probe: dict[str, Any]) -> int:
        """`startProbe` with the drawn corpus prompt and its proof (see the module doc: the pending block)."""
        corpus = self.corpora.get(self.drafters.get(probe["drafter"], b""))
        if corpus is None:
            return 0
        fn = self.probes.functions
        try:
            index = int(fn.promptIndexOf(probe_id).call(block_identifier="pending"))
        except ContractLogicError:  # the seed's hash is gone: any prompt, and the call draws a fresh seed
            index = 0
        if not 0 <= index < corpus.size:
            self.log.error("probe %d: drawn prompt %d is outside the corpus (%d prompts)", probe_id, index, corpus.size)
            return 0
        key = f"probe:start:{probe_id}:{probe['attempts']}:{probe['seedBlock']}"
        return self.transact(key, fn.startProbe(probe_id, corpus.prompts[index], corpus.proof(index)))

    def work_job(self, job_id: int) -> int:
        """A probe job's timeout claim or finalization, `grace_s` after its deadline (its parties go first)."""
        view = chaindata.job_view(self.market, job_id)
        status = view["status"]
        if status in (JobStatus.Finalized, JobStatus.None_):
            stored = self.store.job(job_id, self.role)
            self.store.save_job(job_id, self.role, "done", stored.params if stored else {})
            self.schedule.forget(JOB, job_id)
            return 0
        if self.chain_time() <= view["deadline"] + self.grace_s:
            self.schedule.defer_until(JOB, job_id, view["deadline"] + self.grace_s + 1)
            return 0
        fn = self.market.functions
        if status == JobStatus.Open:
            return self.transact(f"probe:job:{job_id}:timeout:accept", fn.claimTimeout(job_id))
        if status == JobStatus.Running:
            key = f"probe:job:{job_id}:timeout:{view['cycle']}:{view['phase']}"
            return self.transact(key, fn.claimTimeout(job_id))
        if status == JobStatus.Finished and view["openDisputes"] == 0:
            return self.transact(f"probe:job:{job_id}:finalize", fn.finalize(job_id))
        return 0

    def _housekeeping(self) -> int:
        """`collect` the treasury's market balance and `withdrawTips`, once per `collect_interval_s` of chain time."""
        now = self.chain_time(max_age=1.0)
        if now < self._next_collect:
            return 0
        self._next_collect = now + self.collect_interval_s
        did = 0
        head = self.poller.head if self.poller.head is not None else self.w3.eth.block_number
        if self.market.functions.owed(self.probes.address).call() > 0:
            did += self.transact(f"probe:collect:{head}", self.probes.functions.collect())
        if self.probes.functions.tips(self.address).call() > 0:
            did += self.transact(f"probe:tips:{head}", self.probes.functions.withdrawTips())
        return did
