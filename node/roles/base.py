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

`step()` does one round: new events, receipts of in-flight transactions, then due work on dirty items
and (every `recheck_interval` seconds) on every tracked item, which is also how deadlines are noticed.

Latency (a cycle is two transactions, one per node, so each node's reaction time is on the critical
path; see scripts/bench_e2e.py):

* while the node waits on the other party of a job in progress (`_active`), `run` polls every
  `active_poll_interval` (default 5 ms) instead of `poll_interval`; an idle poll is one eth_blockNumber.
  On a local dev chain (a loopback RPC URL: anvil, hardhat) a websocket subscription to new heads
  (`HeadWaker`) ends the sleep as soon as a block is mined, and the loop then polls only every
  `woken_poll_interval` as a safety net (`wake_url=None` switches it off);
* writes that a restart can re-derive (the event cursor, tx status sent/mined, a cycle's outcome and tx
  hashes) are deferred (`later`) and flushed in one store transaction when a step finds nothing to do,
  i.e. while the other party works. The writes the exactly-once rules need are never deferred: a cycle's
  transcript is saved before its transaction is signed, the signed transaction is recorded before it is
  broadcast. After a crash, the events since the last flush are delivered again and their handlers are
  idempotent (they rewrite what was lost);
* the poller asks only for the events this node handles; a log emitted by one of the node's own in-flight
  transactions proves it landed successfully, so its receipt is not fetched;
* fees are cached for a second (and refreshed from the block `chain_time` reads anyway); the provider
  caches eth_chainId, which web3 otherwise asks before every eth_call / eth_estimateGas;
* the event that opens a node's turn says the phase and cycle (`note_turn`), so the turn needs no getJob,
  and with a known deadline far enough ahead no eth_estimateGas either (`sure`); `background` lets a node work
  ahead while it waits (the verifier verifies the draft it expects; docs/node.md, "Latency of a cycle");
* the store does not fsync each commit (`store_durability`, DURABILITY_PROCESS: a commit survives kill -9, not a
  power cut; why that cannot make anything happen twice: docs/node.md, "Store durability").
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from eth_abi import encode as abi_encode
from eth_account.signers.local import LocalAccount
from eth_utils import function_abi_to_4byte_selector, to_checksum_address
from eth_utils.abi import get_abi_input_types
from web3 import Web3

from node.chain.client import (
    ChainUnavailable, ReceiptTimeout, RevertDecoder, TransactionRejected, TransactionReverted,
    TransactionSuperseded, TxSender, cache_chain_id, rpc_url_of,
)
from node.chain.compile import compile_contracts
from node.chain.deployment import Deployment
from node.chain.enums import DisputeStatus, JobStatus, Outcome, Phase, solidity_name
from node.chain.events import ChainEvent, EventPoller, HeadWaker
from node.roles import chaindata
from node.roles.jobs import JobRefused, job_from_record
from node.store import DURABILITY_PROCESS, NodeStore

# --------------------------------------------------------------------------- models, shared per process

_MODELS: dict[tuple[str, str, str], Any] = {}
_MODEL_IDS: dict[str, bytes] = {}
_LOAD_LOCK = threading.Lock()


def resolve_device(device=None):
    """The device a node computes on, and the dtype: float32 on every device, the protocol's precision.

    Committed values (q, p) are judged by referees and watchdogs replaying on
    other hardware within the fp32 tolerance (1e-4 WAD). A bf16 replay of the
    bundled pair differs from fp32 by up to 1.2e-2 (scripts/precision_gap.py),
    so an honest bf16 node would be out of tolerance: nodes never use the
    engine's bf16 GPU default.
    """
    import torch

    from node.decoding import loading

    return loading.resolve_device(device), torch.float32


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
    tx_hash: str | None = None


@dataclass(frozen=True)
class EncodedCall:
    """A contract call as calldata (`NodeBase.encode_call`); `transact` takes it like a bound contract function."""

    address: str
    data: bytes


JOB, DISPUTE = "job", "dispute"


class NodeBase:
    """Chain plumbing and the step loop; subclasses implement `work_job`, `work_dispute` and `on_<contract>_<Event>`."""

    role = "node"
    # Whether a new block ends the idle sleep even while no job is in progress (`_sleep`): a drafter or verifier
    # wants to see a new job at once; a referee's work has deadlines minutes away, and waking it on every block
    # of every job would take CPU from the nodes that serve them.
    wake_on_blocks_when_idle = True

    def __init__(self, w3: Web3, deployment: Deployment, account: LocalAccount, store_path, poll_interval: float = 0.2,
                 *, artifacts: dict | None = None, recheck_interval: float = 5.0, resubmit_after: float = 15.0,
                 active_poll_interval: float = 0.005, active_linger_s: float = 10.0, fee_cache_s: float = 1.0,
                 max_defer_s: float = 2.0, wake_url: str | None = "auto", woken_poll_interval: float = 0.05,
                 store_durability: str = DURABILITY_PROCESS, receipt_grace_s: float = 0.5,
                 sure_margin_s: float = 10.0):
        self.w3 = cache_chain_id(w3)
        self.deployment = deployment
        self.account = account
        self.address = to_checksum_address(account.address)
        self.poll_interval = poll_interval
        self.active_poll_interval = min(active_poll_interval, poll_interval)
        self.woken_poll_interval = woken_poll_interval
        self.wake_url = HeadWaker.url_for(rpc_url_of(w3)) if wake_url == "auto" else wake_url
        self.waker: HeadWaker | None = None
        self.active_linger_s = active_linger_s
        self.max_defer_s = max_defer_s
        self._busy_at = float("-inf")  # monotonic time of the last step that did something
        self._jitter = random.Random()
        self._stretch: dict[tuple[str, int], float] = {}  # tracked items -> factor on recheck_interval (jitter)
        self._woken_at: dict[tuple[str, int], float] = {}  # deferred items past their wake-up -> when to recheck
        self.recheck_interval = recheck_interval
        self.resubmit_after = resubmit_after
        self.log = logging.getLogger(f"verispec.{self.role}.{self.address[:10]}")
        artifacts = artifacts or compile_contracts()
        deployment.check_chain(w3)
        self.system = deployment.system(w3, artifacts)
        self.market = self.system.market
        self.disputes = self.system.disputes
        self.start_block = deployment.start_block
        self.store = NodeStore(store_path, durability=store_durability)
        self.receipt_grace_s = receipt_grace_s
        self.sure_margin_s = sure_margin_s
        self._later: list[Callable[[], None]] = []  # deferred store writes (see the module doc)
        self._flushed_at = time.monotonic()
        self.sender = TxSender(w3, account, self.store, errors=RevertDecoder.from_artifacts(artifacts),
                               fee_cache_s=fee_cache_s, defer_writes=self.later)
        contracts = {"market": self.market}
        if self.disputes is not None:
            contracts["disputes"] = self.disputes
        handled = [(name, entry["name"]) for name, contract in contracts.items() for entry in contract.abi
                   if entry.get("type") == "event" and hasattr(self, f"on_{name}_{entry['name']}")]
        self.poller = EventPoller(w3, contracts, self.store, name=f"{self.role}-events", start_block=self.start_block,
                                  events=handled, defer_cursor=True)
        self._inflight: dict[str, Inflight] = {}
        self._inflight_by_hash: dict[str, str] = {}  # tx hash -> key of in-flight transactions
        self._active: set[int] = set()  # jobs in progress whose next move may be the other party's: poll fast
        self._turns: dict[int, tuple[int, int, int | None]] = {}  # job -> (phase, cycle, deadline): note_turn
        self._timeouts: tuple[int, int] | None = None  # the market's (commitTimeout, verifyTimeout), read once
        self._given_up: set[str] = set()  # keys whose transaction reverted on chain: not retried
        self._dirty: set[tuple[str, int]] = set()
        self._checked: dict[tuple[str, int], float] = {}  # tracked items -> last time their work ran
        self._wake: dict[tuple[str, int], int] = {}  # tracked items -> chain time before which rechecks are skipped
        self._now: int | None = None  # chain time (latest block timestamp) of this step
        self._seen_time: tuple[float, int, int] | None = None  # (monotonic time, number, timestamp): last block read
        self.sent: list[str] = []  # idempotency keys submitted by this object (tests, diagnostics)
        self._selectors: dict[tuple[str, str], tuple[bytes, list[str]]] = {}  # (address, function) -> ABI

    def load_models(self, target_path, draft_path, device=None, *, with_target: bool = True) -> None:
        """The pair a node serves: device and dtype, the shared tokenizer, both model ids, the draft model and
        (unless `with_target` is False: a drafter holds only its draft) the target model. Called by a node's
        constructor before `NodeBase.__init__`."""
        self.device, self.dtype = resolve_device(device)
        self.tokenizer = load_tokenizer(target_path, draft_path)
        self.target_model = load_model(target_path, self.device, self.dtype) if with_target else None
        self.draft_model = load_model(draft_path, self.device, self.dtype)
        self.target_id = model_id(target_path)
        self.draft_id = model_id(draft_path)

    # ------------------------------------------------------------------ tracking

    def track(self, kind: str, item_id: int) -> None:
        """Look at this job / dispute on the next step and then every `recheck_interval` seconds."""
        key = (kind, int(item_id))
        self._checked.setdefault(key, 0.0)
        self._dirty.add(key)

    def forget(self, kind: str, item_id: int) -> None:
        key = (kind, int(item_id))
        self._checked.pop(key, None)
        self._stretch.pop(key, None)
        self._woken_at.pop(key, None)
        self._dirty.discard(key)
        self._wake.pop(key, None)
        if kind == JOB:
            self._active.discard(int(item_id))
            self._turns.pop(int(item_id), None)

    def set_active(self, job_id: int, active: bool) -> None:
        """Whether job `job_id` is in progress (poll every `active_poll_interval` while any is)."""
        if active:
            self._active.add(int(job_id))
        else:
            self._active.discard(int(job_id))

    def note_turn(self, job_id: int, phase: int | None, cycle: int = 0, deadline: int | None = None) -> None:
        """An event just said job `job_id` is Running in `phase` (Phase.AwaitDraft / Phase.AwaitVerify) of `cycle`
        (None: it may have stopped), with the phase's `deadline` (chain time) when known. The next `take_turn`
        returns it, so that the node can act on its turn without reading `getJob` first (one eth_call less on the
        critical path). Only a hint: the contract is still the judge, since a call that would revert fails gas
        estimation and nothing is signed (e.g. a later event the hint missed); the work then falls back to
        reading the job's view. See `sure` for when the estimation itself is skipped."""
        if phase is None:
            self._turns.pop(int(job_id), None)
        else:
            self._turns[int(job_id)] = (int(phase), int(cycle), None if deadline is None else int(deadline))

    def take_turn(self, job_id: int) -> tuple[int, int, int | None] | None:
        """The (phase, cycle, deadline) the last event announced for the job, once (see `note_turn`), or None."""
        return self._turns.pop(int(job_id), None)

    def timeouts(self) -> tuple[int, int] | None:
        """The market's (commitTimeout, verifyTimeout) in seconds (immutable: read once), None if unreadable."""
        if self._timeouts is None:
            try:
                fn = self.market.functions
                self._timeouts = (int(fn.commitTimeout().call()), int(fn.verifyTimeout().call()))
            except ChainUnavailable:
                raise
            except Exception:
                return None
        return self._timeouts

    def block_time(self, number: int) -> int | None:
        """The timestamp of block `number` as the head waker announced it (no round trip), else None."""
        waker = self.waker
        return waker.block_time(number) if waker is not None and waker.connected else None

    def draft_deadline(self, event: ChainEvent) -> int | None:
        """The deadline of the next draft that `event` (a JobAccepted or CycleVerified) starts: its block's timestamp
        + commitTimeout (as the contract sets it), when the head waker announced that block; else None."""
        when = self.block_time(event.block_number)
        timeouts = self.timeouts() if when is not None else None
        return None if timeouts is None else when + timeouts[0]

    def sure(self, deadline: int | None) -> bool:
        """Whether a call on the node's turn may be signed without eth_estimateGas first (`transact(sure=True)`):
        the turn comes from the event that opened it (exact phase and cycle), and its deadline is known and at
        least `sure_margin_s` after the latest block's timestamp. Estimation would then only confirm what the
        node knows; its gas comes from an earlier estimate of the same call shape (TxSender `reuse_estimate`).
        A race the estimation could not prevent either (the other party claiming a timeout in the same block)
        is the only way such a call reverts on chain."""
        if deadline is None or self.waker is None or not self.waker.connected:
            return False
        latest = self.waker.block_time()
        return latest is not None and latest + self.sure_margin_s <= deadline

    # ------------------------------------------------------------------ deferred writes

    def later(self, write: Callable[[], None]) -> None:
        """Run a store write that a restart can re-derive at the next flush (when a step finds nothing to do,
        or after `max_defer_s`), in one store transaction with the others and the event cursor."""
        self._later.append(write)

    def flush(self) -> int:
        """Write what was deferred, then the event cursor, in one store transaction; returns the writes done."""
        self._flushed_at = time.monotonic()
        if not self._later and not self.poller.unsaved:
            return 0
        writes, self._later = self._later, []
        with self.store.transaction():
            for write in writes:
                try:
                    write()
                except Exception:
                    self.log.exception("a deferred store write failed")
            self.poller.flush()
        return len(writes) + 1

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

    def step(self, head: int | None = None) -> int:
        """Handle new events and due work once; returns how many things it did (events, receipts, actions).
        `head`: a block number known to be mined (announced by the head waker): no eth_blockNumber needed.

        A step that did nothing flushes the deferred writes (the node is waiting: the write costs no latency)."""
        self._now = None
        did = self.poller.drain(self._dispatch, head)
        did += self._poll_inflight()
        did += self._work()
        now = time.monotonic()
        if did:
            self._busy_at = now
        # Write what was deferred when idle and no job is in progress; while one is, an idle step is the node
        # waiting for the other party (a good time), but once per `max_defer_s` is enough; and never wait
        # longer than 5 x `max_defer_s` (a node that is never idle).
        stale = now - self._flushed_at
        if (not did and (not self._active or stale > self.max_defer_s)) or stale > 5 * self.max_defer_s:
            self.flush()
        if not did:
            did = self.background()
        return did

    def background(self) -> int:
        """Hook: work to do ahead while the node waits for the other party (nothing on chain, nothing stored),
        e.g. the verifier's speculative verification of the draft it expects; returns how much it did."""
        return 0

    def idle_interval(self) -> float:
        """How long `run` sleeps after a step that did nothing: `active_poll_interval` while a job is in progress
        (and for `active_linger_s` after the node last did something, so back-to-back jobs start fast), else
        `poll_interval`. While the head waker is connected a new block ends the sleep early, so the loop only
        polls every `woken_poll_interval` (a safety net) instead of `active_poll_interval`."""
        if self._active or time.monotonic() - self._busy_at < self.active_linger_s:
            if self.waker is not None and self.waker.connected:
                return max(self.active_poll_interval, min(self.woken_poll_interval, self.poll_interval))
            return self.active_poll_interval
        return self.poll_interval

    def _sleep(self, stop: threading.Event, timeout: float) -> None:
        busy = self._active or time.monotonic() - self._busy_at < self.active_linger_s
        if self.waker is not None and self.waker.connected and (busy or self.wake_on_blocks_when_idle):
            self.waker.wait(timeout)  # a new block (or stop) ends it early
        else:
            stop.wait(timeout)

    def run(self, stop: threading.Event | None = None) -> None:
        """Loop `step()` until `stop` is set (or Ctrl-C); after a step that did nothing it sleeps
        (`idle_interval`), or less when a new block is announced (`HeadWaker`, on local dev chains)."""
        stop = stop or threading.Event()
        self.log.info("%s %s serving (store %s)", self.role, self.address, self.store.path)
        if self.wake_url and self.waker is None:
            self.waker = HeadWaker(self.wake_url).start()
            try:
                self.timeouts()  # read now rather than on a job's first turn
            except ChainUnavailable:
                pass
        try:
            while not stop.is_set():
                # a block announced while not subscribed, or after this, is seen by this or the next poll
                head = self.waker.take() if self.waker is not None and self.waker.connected else None
                try:
                    did = self.step(head)
                except ChainUnavailable as exc:
                    self.log.warning("chain unavailable, retrying: %s", exc)
                    did = 0
                    stop.wait(min(5.0, 10 * self.poll_interval))
                except Exception:  # a daemon keeps serving its other jobs; the failed step is retried
                    self.log.exception("step failed")
                    did = 0
                    stop.wait(min(5.0, 10 * self.poll_interval))
                if not did:
                    self._sleep(stop, self.idle_interval())
        except KeyboardInterrupt:
            self.log.info("interrupted; state is in %s, start again to resume", self.store.path)
        finally:
            if self.waker is not None:
                self.waker.stop()
                self.waker = None

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def chain_time(self, max_age: float = 0.0) -> int:
        """The latest block's timestamp, read at most once per step, and not at all while the chain head this
        step's poll saw is the block it was last read from (the latest block's timestamp only changes with a
        new block). `max_age` > 0: a timestamp read up to that many seconds ago will do. Such a value can only
        be *earlier* than the latest block's, so use it only to decide "too late, skip": a deadline it misses
        makes the call fail gas estimation (nothing is signed), exactly as a deadline passing between the
        check and the transaction would."""
        if self._now is None:
            if self._seen_time is not None:
                read_at, number, timestamp = self._seen_time
                if number == self.poller.head or (max_age > 0 and time.monotonic() - read_at <= max_age):
                    return timestamp
            block = self.w3.eth.get_block("latest")
            self.sender.note_block(block)  # its base fee serves the next transaction's fees
            self._now = int(block["timestamp"])
            self._seen_time = (time.monotonic(), int(block["number"]), self._now)
        return self._now

    def _dispatch(self, event: ChainEvent) -> None:
        key = self._inflight_by_hash.pop(event.tx_hash.lower(), None)
        if key is not None and key in self._inflight:  # our transaction emitted it: it landed, and did not revert
            del self._inflight[key]
            self.sender.mark_landed(key, event.block_number)
        handler = getattr(self, f"on_{event.contract}_{event.name}", None)
        if handler is None:
            return
        try:
            handler(event)
        except ChainUnavailable:
            raise  # the poller's cursor stays before this event: it comes again
        except Exception:
            self.log.exception("handling %s %s (block %d) failed", event.contract, event.name, event.block_number)

    def _woken(self, item: tuple[str, int], chain_now: int, now: float) -> bool:
        """Whether a deferred item's chain-time wake-up has come. Every party of a job defers to the same
        deadline and sees the block that passes it at the same moment, so each waits a random 0-0.2 x
        `recheck_interval` more (wall clock): otherwise both would, e.g., call finalize at once and the
        loser's transaction would revert and burn gas."""
        wake = self._wake.get(item)
        if wake is None:
            return True
        if wake > chain_now:
            self._woken_at.pop(item, None)
            return False
        due = self._woken_at.setdefault(item, now + self._jitter.uniform(0.0, 0.2) * self.recheck_interval)
        return now >= due

    def _work(self) -> int:
        now = time.monotonic()
        due = set(self._dirty)
        periodic = [item for item, last in self._checked.items()
                    if now - last >= self.recheck_interval * self._stretch.get(item, 1.0)]
        if periodic and self._wake:
            chain_now = self.chain_time()
            periodic = [item for item in periodic if self._woken(item, chain_now, now)]
        due.update(periodic)
        self._dirty.clear()
        did = 0
        for kind, item_id in sorted(due):
            if (kind, item_id) not in self._checked:
                continue
            self._checked[(kind, item_id)] = now
            self._woken_at.pop((kind, item_id), None)
            # the next periodic recheck in 1.0-1.2 x recheck_interval: nodes that saw the same event in the same
            # few milliseconds (fast polling) would otherwise recheck in lockstep and race for the same call
            # (e.g. both parties' finalize: the loser's transaction reverts and burns gas)
            self._stretch[(kind, item_id)] = 1.0 + self._jitter.uniform(0.0, 0.2)
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

    def encode_call(self, contract, function: str, *args) -> EncodedCall:
        """`contract.functions.<function>(*args)` as calldata, encoded with eth_abi directly: the same bytes, without
        web3's argument normalization and validation (~0.6 ms a call; used for the calls of every cycle)."""
        spec = self._selectors.get((contract.address, function))
        if spec is None:
            entries = [e for e in contract.abi if e.get("type") == "function" and e.get("name") == function]
            if len(entries) != 1:
                raise ValueError(f"{function}: {len(entries)} functions of that name (use contract.functions)")
            spec = (function_abi_to_4byte_selector(entries[0]), get_abi_input_types(entries[0]))
            self._selectors[(contract.address, function)] = spec
        selector, types = spec
        return EncodedCall(contract.address, selector + abi_encode(types, list(args)))

    def transact(self, key: str, call, value: int = 0, *, sure: bool = False) -> int:
        """Submit `call` (a bound contract function, or an `EncodedCall`) once under idempotency `key`; 1 if
        submitted now, else 0.

        A call that would revert (gas estimation) is logged and nothing is signed; it may be tried again later.
        `sure=True` (see `sure`): sign with the gas of an earlier estimate of the same call shape, if any.
        """
        if key in self._inflight or key in self._given_up:
            return 0
        data = call.data if isinstance(call, EncodedCall) else bytes.fromhex(call._encode_transaction_data()[2:])
        try:
            tx_hash = self.sender.submit(key, call.address, data, value, reuse_estimate=sure)
        except TransactionReverted as exc:
            self.log.info("%s not sent: it would revert (%s)", key, exc.error_name or exc)
            return 0
        except TransactionRejected as exc:
            self.log.error("%s rejected by the chain node: %s", key, exc.reason)
            return 0
        self._inflight[key] = Inflight(key, call.address, data, value, time.monotonic(), tx_hash.lower())
        self._inflight_by_hash[tx_hash.lower()] = key
        self.sent.append(key)
        self.log.info("sent %s: %s", key, tx_hash)
        return 1

    def landed(self, key: str, block_number: int) -> None:
        """An event proves that the key's transaction was mined successfully (e.g. the drafter's commit of cycle c,
        once cycle c is verified): no receipt to fetch for it."""
        item = self._inflight.get(key)
        if item is not None:
            self._drop_inflight(key)
            self.sender.mark_landed(key, block_number)

    def _poll_inflight(self) -> int:
        """Receipts of in-flight transactions older than `receipt_grace_s` (a log the node handles, or `landed`,
        usually proves a transaction landed before that, without a receipt round trip; a transaction that
        reverted emits nothing, so it is found here, at most `receipt_grace_s` later)."""
        did = 0
        now = time.monotonic()
        for key, item in list(self._inflight.items()):
            if now - item.submitted_at < self.receipt_grace_s:
                continue
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
                self._drop_inflight(key)
                self._given_up.add(key)
                self.log.error("%s reverted on chain: %s", key, exc)
                self.on_reverted(key, exc)
                did += 1
                continue
            self._drop_inflight(key)
            did += 1
        return did

    def _drop_inflight(self, key: str) -> None:
        item = self._inflight.pop(key, None)
        if item is not None and item.tx_hash is not None:
            self._inflight_by_hash.pop(item.tx_hash, None)

    def _resubmit(self, item: Inflight) -> None:
        try:
            tx_hash = self.sender.submit(item.key, item.to, item.data, item.value)
        except (TransactionReverted, TransactionRejected) as exc:
            self._drop_inflight(item.key)
            self.log.warning("%s could not be resubmitted: %s", item.key, exc)
            return
        if item.tx_hash != tx_hash.lower():  # a fresh transaction for the key (the old one was superseded)
            self._inflight_by_hash.pop(item.tx_hash, None)
            item.tx_hash = tx_hash.lower()
            self._inflight_by_hash[item.tx_hash] = item.key

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
        if status == JobStatus.Open:
            return self.transact(f"job:{job_id}:timeout:accept", fn.claimTimeout(job_id))
        if status == JobStatus.Running:
            waiting_for_other = view["phase"] != self.own_phase
            if waiting_for_other:
                key = f"job:{job_id}:timeout:{view['cycle']}:{view['phase']}"
                self.log.warning("job %d: the other party missed its deadline (cycle %d); claiming the timeout",
                                 job_id, view["cycle"])
                return self.transact(key, fn.claimTimeout(job_id))
            return 0
        if status == JobStatus.Finished and view["openDisputes"] == 0:
            return self.transact(f"job:{job_id}:finalize", fn.finalize(job_id))
        return 0

    def restore(self, job_role: str | None, dispute_role: str) -> None:
        """Track what the store says this node was doing before a restart."""
        for job in self.store.jobs(role=job_role, status="active") if job_role else []:
            self.track(JOB, job.job_id)
        for dispute in self.store.jobs(role=dispute_role):
            if dispute.status != "done":
                self.track(DISPUTE, dispute.job_id)


class PartyNode(NodeBase):
    """What a job's two parties (drafter and verifier) share: noticing the end of their jobs (finished, a dispute
    closed, finalized), retiring them, and answering the disputes opened against them (`answer_values`: the
    claimed value and top-k at the disputed position) until they are resolved. `job_role` / `dispute_role` name
    their rows in the store."""

    job_role = "party"
    dispute_role = "party-dispute"
    own_phase: Phase  # the job phase in which this party acts: AwaitDraft (drafter) or AwaitVerify (verifier)

    jobs: dict[int, Any]  # job id -> the subclass's in-memory state of the job

    def take_submitted_job(self, event: ChainEvent):
        """A `JobSubmitted` that names this node as its `role`: (record, engine Job) to serve, or None when the
        job is not this node's, already known, or refused (other models, a prompt that does not fit: the
        reason is logged and recorded in the store, and the node never acts on the job)."""
        record = record_of(event, self.market)
        if getattr(record, self.role) != self.address or self.store.job(record.job_id, self.job_role) is not None:
            return None
        reason = None
        if record.draft_model != self.draft_id or record.target_model != self.target_id:
            reason = (f"models (draft {record.draft_model.hex()[:16]}, target {record.target_model.hex()[:16]}) are "
                      f"not mine (draft {self.draft_id.hex()[:16]}, target {self.target_id.hex()[:16]})")
        else:
            try:
                return record, job_from_record(record, self.tokenizer, self.max_positions)
            except JobRefused as exc:
                reason = str(exc)
        self.log.warning("job %d: refused: %s", record.job_id, reason)
        self.store.save_job(record.job_id, self.job_role, "refused", {"reason": reason})
        return None

    def act_on_announced_turn(self, job_id: int, act: Callable[[int, bool], int]) -> int | None:
        """Take the turn an event announced for the job (`note_turn`) without reading its view: on this party's
        own phase `act(cycle, sure)` (see `sure`); on the other party's, nothing (the periodic recheck reads the
        view and watches the deadline). None when there is no announced turn or acting sent nothing (e.g. the
        call would revert, or the session is not ready): the caller then decides from the job's view."""
        turn = self.take_turn(job_id)
        if turn is None:
            return None
        phase, cycle, deadline = turn
        self.set_active(job_id, True)
        if phase != self.own_phase:
            return 0
        return act(cycle, self.sure(deadline)) or None

    # ------------------------------------------------------------------ events

    def on_market_JobFinished(self, event: ChainEvent) -> None:
        self.note_turn(event.args["jobId"], None)
        self.mark_dirty(JOB, event.args["jobId"])

    def on_market_DisputeClosed(self, event: ChainEvent) -> None:
        self.note_turn(event.args["jobId"], None)
        self.mark_dirty(JOB, event.args["jobId"])  # maybe finalizable now

    def on_market_JobFinalized(self, event: ChainEvent) -> None:
        self.note_turn(event.args["jobId"], None)
        self.mark_dirty(JOB, event.args["jobId"])

    def on_disputes_DisputeOpened(self, event: ChainEvent) -> None:
        a = event.args
        if a["challenger"] == self.address:  # mine (a verifier disputing a draft): draw its referees at once
            self.track(DISPUTE, int(a["disputeId"]))
        if a["accused"] != self.address:
            return
        dispute_id = int(a["disputeId"])
        if self.store.job(dispute_id, self.dispute_role) is None:
            self.log.warning("dispute %d opened against me: job %d cycle %d index %d", dispute_id, a["jobId"],
                             a["cycle"], a["index"])
            self.store.save_job(dispute_id, self.dispute_role, "open",
                                {"job": int(a["jobId"]), "cycle": int(a["cycle"]), "index": int(a["index"]),
                                 "kind": int(a["kind"]), "token": int(a["token"])})
        self.track(DISPUTE, dispute_id)

    def on_disputes_DisputeResolved(self, event: ChainEvent) -> None:
        self.mark_dirty(DISPUTE, event.args["disputeId"])

    on_disputes_DrawRescheduled = on_disputes_DisputeResolved  # an accused answers once the rescheduled draw can run

    # ------------------------------------------------------------------ work

    def retire_job(self, job_id: int) -> int:
        """The job is finalized (or gone): mark it done in the store and stop tracking it."""
        self.store.save_job(job_id, self.job_role, "done")
        self.jobs.pop(job_id, None)
        self.forget(JOB, job_id)
        return 0

    def work_dispute(self, dispute_id: int) -> int:
        d = chaindata.dispute_view(self.disputes, dispute_id)
        if d["status"] == DisputeStatus.Resolved:
            self.store.save_job(dispute_id, self.dispute_role, "done")
            self.forget(DISPUTE, dispute_id)
            self.log.info("dispute %d resolved: %s", dispute_id, solidity_name(Outcome(d["outcome"])))
            return 0
        if d["status"] != DisputeStatus.AwaitingAnswer or self.chain_time() > d["answerDeadline"]:
            # answered (or too late): what is left happens through events (DisputeResolved wakes it)
            self.defer_until(DISPUTE, dispute_id, max(d["revealDeadline"], d["answerDeadline"]) + 1)
            return 0
        if not d["drawn"] and (d["challenger"] == self.address or self._draw_seed_gone(d)):
            # The challenger draws at once, so that an accused cannot wait for the seed block's hash to leave
            # the 256-block window and get a second draw; an accused whose answer comes that late must have
            # the draw rescheduled first (its answer would revert PanelNotDrawn).
            return self.transact(f"dispute:{dispute_id}:draw:{d['drawBlock']}",
                                 self.disputes.functions.drawReferees(dispute_id))
        if d["accused"] != self.address:
            self.defer_until(DISPUTE, dispute_id, d["answerDeadline"] + 1)  # DisputeResolved wakes it earlier
            return 0
        claimed, top = self.answer_values(int(d["jobId"]), int(d["cycle"]), int(d["index"]))
        call = self.disputes.functions.answer(dispute_id, claimed, [t for t, _ in top], [w for _, w in top])
        return self.transact(f"dispute:{dispute_id}:answer", call)

    def _draw_seed_gone(self, d: dict) -> bool:
        """Whether the next block can no longer see the hash of the dispute's seed block (EVM: last 256 only)."""
        return self.w3.eth.block_number + 1 - int(d["drawBlock"]) > 256

    def answer_values(self, job_id: int, c: int, index: int) -> tuple[int, list[tuple[int, int]]]:
        """(claimed value of the disputed position, top-k of my distribution there): each party's own."""
        raise NotImplementedError(f"{type(self).__name__} must define answer_values (drafter: q, verifier: p)")


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
