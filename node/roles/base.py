"""The loop every node runs: one key, one store, one TxSender, one EventPoller, many jobs at once.

A node is *state-driven*: events only tell it which job or dispute to look at ("dirty"); what to do is
decided from the contract's views (`getJob`: status, phase, cycle, deadline; `getDispute`, `ballotOf`)
and the node's store. That makes a restart trivial: the store lists the jobs and disputes the node
cares about, the contract's cycle counter says what is next, and a cycle already decided is taken from
the store's transcript (never recomputed), so the resent transaction is byte-identical and the
TxSender's idempotency key sees it as the same one. Nothing is ever sent twice.

Transactions are submitted without blocking (`TxSender.submit`) and their receipts polled on later
steps, so one slow chain does not serialize the node's jobs. A transaction that reverted on chain is
logged and not retried under the same key.

`step()` does one round: receipts of in-flight transactions, new events, then due work on dirty items
and (every `recheck_interval` seconds) on every tracked item, which is also how deadlines are noticed.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3 import Web3

from node.chain.client import (
    ChainUnavailable, ReceiptTimeout, RevertDecoder, TransactionRejected, TransactionReverted,
    TransactionSuperseded, TxSender,
)
from node.chain.compile import compile_contracts
from node.chain.deployment import Deployment
from node.chain.events import ChainEvent, EventPoller
from node.roles import chaindata
from node.roles.chaindata import (
    PHASE_DRAFT, PHASE_VERIFY, STATUS_FINISHED, STATUS_OPEN, STATUS_RUNNING,
)
from node.store import NodeStore

# --------------------------------------------------------------------------- models, shared per process

_MODELS: dict[tuple[str, str, str], Any] = {}
_MODEL_IDS: dict[str, bytes] = {}
_LOAD_LOCK = threading.Lock()


def resolve_device(device=None):
    import torch

    from node.decoding import loading

    device = torch.device(device) if device is not None else loading.default_device()
    return device, loading.default_dtype(device)


def load_model(path, device, dtype):
    """Load a checkpoint once per process (nodes in one process, e.g. tests, share the weights read-only)."""
    from node.decoding import loading

    key = (str(Path(path).resolve()), str(device), str(dtype))
    with _LOAD_LOCK:
        if key not in _MODELS:
            _MODELS[key] = loading.load_model(str(path), device, dtype)
        return _MODELS[key]


def model_id(path) -> bytes:
    from node.decoding import model_id as compute

    key = str(Path(path).resolve())
    with _LOAD_LOCK:
        if key not in _MODEL_IDS:
            _MODEL_IDS[key] = compute(path)
        return _MODEL_IDS[key]


def load_tokenizer(path, *others):
    """The shared tokenizer of `path`, checked equal to the tokenizers of `others` (draft and target must share one)."""
    from node.decoding import loading

    tokenizer = loading.load_tokenizer(str(path))
    for other in others:
        loading.check_same_tokenizer(tokenizer, loading.load_tokenizer(str(other)))
    return tokenizer


def max_positions(model) -> int | None:
    config = model.config
    return getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)


def next_token_rows(model, context: list[int], sampling, keep: int = 1):
    """Quantized (WAD) distributions of the tokens following the last `keep` positions of `context`,
    from one fresh forward pass (a replay: no cache is reused)."""
    import torch

    from node.decoding.distributions import quantized
    from node.decoding.kv import CachedLM

    with torch.inference_mode():
        logits = CachedLM(model).extend(list(context), keep=keep)
        return quantized(logits, sampling)


# --------------------------------------------------------------------------- resuming engine sessions


def resume_draft_session(session, context: list[int], cycle: int):
    """Put a fresh DraftSession at `cycle` with `context` = prompt + every token emitted so far.

    Its cache is empty; the next `propose` feeds the whole context (the session feeds
    `context[len(cache):]`), so this is exact up to the last digits of a prefill versus an
    incremental forward. Used after a restart, or when the in-memory session fell out of step.
    """
    session.context = list(context)
    session.cycle = int(cycle)
    return session


def resume_verify_session(session, context: list[int], cycle: int, generated: int):
    """Put a fresh VerifySession at `cycle` (see `resume_draft_session`); `generated` = tokens emitted so far."""
    session.context = list(context)
    session.cycle = int(cycle)
    session.generated = int(generated)
    session.done = False
    return session


# --------------------------------------------------------------------------- the node loop


@dataclass
class Inflight:
    key: str
    to: str
    data: bytes
    value: int
    submitted_at: float


JOB, DISPUTE = "job", "dispute"


class NodeBase:
    """Chain plumbing and the step loop; subclasses implement `work_job`, `work_dispute` and `on_<contract>_<Event>`."""

    role = "node"

    def __init__(self, w3: Web3, deployment: Deployment, account: LocalAccount, store_path, poll_interval: float = 0.2,
                 *, artifacts: dict | None = None, recheck_interval: float = 5.0, resubmit_after: float = 15.0):
        self.w3 = w3
        self.deployment = deployment
        self.account = account
        self.address = to_checksum_address(account.address)
        self.poll_interval = poll_interval
        self.recheck_interval = recheck_interval
        self.resubmit_after = resubmit_after
        self.log = logging.getLogger(f"verispec.{self.role}.{self.address[:10]}")
        artifacts = artifacts or compile_contracts()
        deployment.check_chain(w3)
        self.system = deployment.system(w3, artifacts)
        self.market = self.system.market
        self.disputes = self.system.disputes
        self.start_block = deployment.start_block
        self.store = NodeStore(store_path)
        self.sender = TxSender(w3, account, self.store, errors=RevertDecoder.from_artifacts(artifacts))
        contracts = {"market": self.market}
        if self.disputes is not None:
            contracts["disputes"] = self.disputes
        self.poller = EventPoller(w3, contracts, self.store, name=f"{self.role}-events", start_block=self.start_block)
        self._inflight: dict[str, Inflight] = {}
        self._given_up: set[str] = set()  # keys whose transaction reverted on chain: not retried
        self._dirty: set[tuple[str, int]] = set()
        self._checked: dict[tuple[str, int], float] = {}  # tracked items -> last time their work ran
        self._wake: dict[tuple[str, int], int] = {}  # tracked items -> chain time before which rechecks are skipped
        self._now: int | None = None  # chain time (latest block timestamp) of this step
        self.sent: list[str] = []  # idempotency keys submitted by this object (tests, diagnostics)

    # ------------------------------------------------------------------ tracking

    def track(self, kind: str, item_id: int) -> None:
        """Look at this job / dispute on the next step and then every `recheck_interval` seconds."""
        key = (kind, int(item_id))
        self._checked.setdefault(key, 0.0)
        self._dirty.add(key)

    def forget(self, kind: str, item_id: int) -> None:
        key = (kind, int(item_id))
        self._checked.pop(key, None)
        self._dirty.discard(key)
        self._wake.pop(key, None)

    def defer_until(self, kind: str, item_id: int, chain_timestamp: int) -> None:
        """Skip the periodic rechecks of an item until the chain's clock reaches `chain_timestamp` (a deadline):
        nothing can change for it before then except through an event, and events still mark it dirty."""
        self._wake[(kind, int(item_id))] = int(chain_timestamp)

    def tracked(self, kind: str, item_id: int) -> bool:
        return (kind, int(item_id)) in self._checked

    def mark_dirty(self, kind: str, item_id: int) -> None:
        if self.tracked(kind, item_id):
            self._dirty.add((kind, int(item_id)))

    # ------------------------------------------------------------------ the loop

    def step(self) -> int:
        """Handle new events and due work once; returns how many things it did (receipts, events, actions)."""
        self._now = None
        did = self._poll_inflight()
        did += self.poller.drain(self._dispatch)
        did += self._work()
        return did

    def run(self, stop: threading.Event | None = None) -> None:
        """Loop `step()` until `stop` is set (or Ctrl-C); sleeps `poll_interval` when a step did nothing."""
        stop = stop or threading.Event()
        self.log.info("%s %s serving (store %s)", self.role, self.address, self.store.path)
        try:
            while not stop.is_set():
                try:
                    did = self.step()
                except ChainUnavailable as exc:
                    self.log.warning("chain unavailable, retrying: %s", exc)
                    did = 0
                    stop.wait(min(5.0, 10 * self.poll_interval))
                except Exception:  # a daemon keeps serving its other jobs; the failed step is retried
                    self.log.exception("step failed")
                    did = 0
                    stop.wait(min(5.0, 10 * self.poll_interval))
                if not did:
                    stop.wait(self.poll_interval)
        except KeyboardInterrupt:
            self.log.info("interrupted; state is in %s, start again to resume", self.store.path)

    def close(self) -> None:
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def chain_time(self) -> int:
        if self._now is None:
            self._now = int(self.w3.eth.get_block("latest")["timestamp"])
        return self._now

    def _dispatch(self, event: ChainEvent) -> None:
        handler = getattr(self, f"on_{event.contract}_{event.name}", None)
        if handler is None:
            return
        try:
            handler(event)
        except ChainUnavailable:
            raise  # the poller's cursor stays before this event: it comes again
        except Exception:
            self.log.exception("handling %s %s (block %d) failed", event.contract, event.name, event.block_number)

    def _work(self) -> int:
        now = time.monotonic()
        due = set(self._dirty)
        periodic = [item for item, last in self._checked.items() if now - last >= self.recheck_interval]
        if periodic and self._wake:
            chain_now = self.chain_time()
            periodic = [item for item in periodic if self._wake.get(item, 0) <= chain_now]
        due.update(periodic)
        self._dirty.clear()
        did = 0
        for kind, item_id in sorted(due):
            if (kind, item_id) not in self._checked:
                continue
            self._checked[(kind, item_id)] = now
            self._wake.pop((kind, item_id), None)
            try:
                did += self.work_job(item_id) if kind == JOB else self.work_dispute(item_id)
            except ChainUnavailable:
                self._dirty.add((kind, item_id))
                raise
            except Exception:
                self.log.exception("work on %s %d failed", kind, item_id)
        return did

    def work_job(self, job_id: int) -> int:
        return 0

    def work_dispute(self, dispute_id: int) -> int:
        return 0

    # ------------------------------------------------------------------ transactions

    def transact(self, key: str, call, value: int = 0) -> int:
        """Submit `call` (a bound contract function) once under idempotency `key`; 1 if submitted now, else 0.

        A call that would revert (gas estimation) is logged and nothing is signed; it may be tried again later.
        """
        if key in self._inflight or key in self._given_up:
            return 0
        data = bytes.fromhex(call._encode_transaction_data()[2:])
        try:
            tx_hash = self.sender.submit(key, call.address, data, value)
        except TransactionReverted as exc:
            self.log.info("%s not sent: it would revert (%s)", key, exc.error_name or exc)
            return 0
        except TransactionRejected as exc:
            self.log.error("%s rejected by the chain node: %s", key, exc.reason)
            return 0
        self._inflight[key] = Inflight(key, call.address, data, value, time.monotonic())
        self.sent.append(key)
        self.log.info("sent %s: %s", key, tx_hash)
        return 1

    def _poll_inflight(self) -> int:
        did = 0
        for key, item in list(self._inflight.items()):
            try:
                self.sender.wait_for_receipt(key, timeout=0)
            except ReceiptTimeout:
                if time.monotonic() - item.submitted_at > self.resubmit_after:
                    item.submitted_at = time.monotonic()
                    self._resubmit(item)  # re-broadcasts the same signed bytes if the pool lost them
                continue
            except TransactionSuperseded:
                self._resubmit(item)
                continue
            except TransactionReverted as exc:
                del self._inflight[key]
                self._given_up.add(key)
                self.log.error("%s reverted on chain: %s", key, exc)
                self.on_reverted(key, exc)
                did += 1
                continue
            del self._inflight[key]
            did += 1
        return did

    def _resubmit(self, item: Inflight) -> None:
        try:
            self.sender.submit(item.key, item.to, item.data, item.value)
        except (TransactionReverted, TransactionRejected) as exc:
            self._inflight.pop(item.key, None)
            self.log.warning("%s could not be resubmitted: %s", item.key, exc)

    def on_reverted(self, key: str, exc: TransactionReverted) -> None:
        """Hook: a transaction of ours reverted on chain."""

    def in_flight(self, key: str) -> bool:
        return key in self._inflight

    def tx_hash_of(self, key: str) -> str | None:
        record = self.store.sent_tx(key)
        return record.tx_hash if record is not None else None

    # ------------------------------------------------------------------ jobs of a drafter / verifier

    def job_view(self, job_id: int) -> dict[str, Any]:
        return chaindata.job_view(self.market, job_id)

    def settle(self, job_id: int, view: dict[str, Any]) -> int:
        """Deadlines and settlement for a party of the job: claimTimeout when the other side (or nobody)
        missed its deadline, finalize after the challenge window. Safe to call on every check."""
        status, now = view["status"], self.chain_time()
        if now <= view["deadline"]:
            self.defer_until(JOB, job_id, view["deadline"] + 1)  # until then only the other side's events matter
            return 0
        fn = self.market.functions
        if status == STATUS_OPEN:
            return self.transact(f"job:{job_id}:timeout:accept", fn.claimTimeout(job_id))
        if status == STATUS_RUNNING:
            waiting_for_other = (view["phase"] == PHASE_VERIFY) if self.role == "drafter" else (
                view["phase"] == PHASE_DRAFT)
            if waiting_for_other:
                key = f"job:{job_id}:timeout:{view['cycle']}:{view['phase']}"
                self.log.warning("job %d: the other party missed its deadline (cycle %d); claiming the timeout",
                                 job_id, view["cycle"])
                return self.transact(key, fn.claimTimeout(job_id))
            return 0
        if status == STATUS_FINISHED and view["openDisputes"] == 0:
            return self.transact(f"job:{job_id}:finalize", fn.finalize(job_id))
        return 0

    def restore(self, job_role: str | None, dispute_role: str) -> None:
        """Track what the store says this node was doing before a restart."""
        for job in self.store.jobs(role=job_role, status="active") if job_role else []:
            self.track(JOB, job.job_id)
        for dispute in self.store.jobs(role=dispute_role):
            if dispute.status != "done":
                self.track(DISPUTE, dispute.job_id)


def request_of(event: ChainEvent, market) -> dict[str, Any]:
    """The JobRequest of a JobSubmitted event as a dict by field name."""
    abi = next(e for e in market.abi if e.get("type") == "event" and e["name"] == "JobSubmitted")
    components = next(i for i in abi["inputs"] if i["name"] == "request")["components"]
    return chaindata._struct(event.args["request"], components)


def record_of(event: ChainEvent, market) -> chaindata.JobRecord:
    """A chaindata.JobRecord straight from a JobSubmitted event (no log query)."""
    a = event.args
    return chaindata.JobRecord(job_id=int(a["jobId"]), requester=to_checksum_address(a["requester"]),
                               request=request_of(event, market), prompt=bytes(a["prompt"]), escrow=int(a["escrow"]),
                               block_number=event.block_number, tx_hash=event.tx_hash)
