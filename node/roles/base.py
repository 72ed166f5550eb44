"""The loop every node runs: one key, one store, one TxSender, one EventPoller, many jobs at once.

A node is *state-driven*: events only tell it which job or dispute to look at ("dirty"); what to do is
decided from the contract's views (`getJob`: status, phase, cycle, deadline; `getDispute`, `ballotOf`)
and the node's store. That makes a restart trivial: the store lists the jobs and disputes the node
cares about, the contract's cycle counter says what is next, and a cycle already decided is taken from
the store's transcript (never recomputed), so the resent transaction is byte-identical and the
TxSender's idempotency key sees it as the same one. Nothing is ever sent twice.

`NodeBase` composes the pieces, each in its own module:

    schedule.Schedule        which tracked jobs / disputes are due (dirty, periodic rechecks, deferrals), which
                             jobs are in progress, the turns events announced
    inflight.Transactions    transactions submitted without waiting, settled on later steps (a log they emitted,
                             or a receipt), re-broadcast when stuck, given up once reverted on chain
    models                   the models, loaded once per process in the protocol's precision (`load_models`)

`step()` does one round: drain new events (`_dispatch`: a log of one of our transactions settles it, then the
handler `on_<contract>_<Event>` marks items dirty), poll the receipts of transactions still in flight, then
work on the due items (`work_job`, `work_dispute`: the subclasses' part). A step that did nothing flushes
the deferred store writes and lets the node work ahead (`background`).

Latency (a cycle is two transactions, one per node, so each node's reaction time is on the critical
path; see scripts/bench_e2e.py and docs/node.md, "Latency of a cycle"):

* while the node waits on the other party of a job in progress (`schedule.active`), `run` polls every
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
* the event that opens a node's turn says the phase and cycle (`Schedule.note_turn`), so the turn needs no
  getJob, and with a known deadline far enough ahead no eth_estimateGas either (`sure`); `background` lets a node
  work ahead while it waits (the verifier verifies the draft it expects);
* the store does not fsync each commit (`store_durability`, DURABILITY_PROCESS: a commit survives kill -9, not a
  power cut; why that cannot make anything happen twice: docs/node.md, "Store durability").
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import ClassVar

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3 import Web3

from node.chain.compile import compile_contracts
from node.chain.deployment import Deployment
from node.chain.errors import ChainUnavailable, TransactionReverted
from node.chain.events import ChainEvent, EventPoller, HeadWaker
from node.chain.identity import store_binding
from node.chain.revert_decoder import RevertDecoder
from node.chain.rpc import cache_chain_id, rpc_url_of
from node.chain.sender import TxSender
from node.jobs.models import load_model, load_tokenizer, model_id, node_device
from node.roles.inflight import Transactions
from node.roles.schedule import DISPUTE, JOB, Schedule
from node.store import DURABILITY_PROCESS, NodeStore


class NodeBase:
    """Chain plumbing and the step loop; subclasses implement `work_job`, `work_dispute` and `on_<contract>_<Event>`."""

    role = "node"
    # Whether a new block ends the idle sleep even while no job is in progress (`_sleep`): a drafter or verifier
    # wants to see a new job at once; a referee's work has deadlines minutes away, and waking it on every block
    # of every job would take CPU from the nodes that serve them.
    wake_on_blocks_when_idle = True

    def __init__(
        self,
        w3: Web3,
        deployment: Deployment,
        account: LocalAccount,
        store_path,
        poll_interval: float = 0.2,
        *,
        artifacts: dict | None = None,
        recheck_interval: float = 5.0,
        resubmit_after: float = 15.0,
        active_poll_interval: float = 0.005,
        active_linger_s: float = 10.0,
        fee_cache_s: float = 1.0,
        max_defer_s: float = 2.0,
        wake_url: str | None = "auto",
        woken_poll_interval: float = 0.05,
        store_durability: str = DURABILITY_PROCESS,
        receipt_grace_s: float = 0.5,
        sure_margin_s: float = 10.0,
        confirmations: int = 0,
    ):
        if confirmations < 0:
            raise ValueError("confirmations must be at least 0")
        self.confirmations = confirmations
        if confirmations > 0:  # its reads are pinned to its confirmed head (`step`): a Web3 of its own
            w3 = Web3(w3.provider)
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
        self.recheck_interval = recheck_interval
        self.log = logging.getLogger(f"verispec.{self.role}.{self.address[:10]}")
        artifacts = artifacts or compile_contracts()
        deployment.check_chain(w3)
        self.system = deployment.system(w3, artifacts)
        self.market = self.system.market
        self.disputes = self.system.disputes
        self.start_block = deployment.start_block
        # bound to this chain and deployment: one of another chain is moved aside, never reused (node/store.py)
        self.store = NodeStore(store_path, durability=store_durability, binding=store_binding(w3, deployment))
        self.sure_margin_s = sure_margin_s
        self._later: list[Callable[[], None]] = []  # deferred store writes (see the module doc)
        self._flushed_at = time.monotonic()
        self.sender = TxSender(
            w3,
            account,
            self.store,
            errors=RevertDecoder.from_artifacts(artifacts),
            fee_cache_s=fee_cache_s,
            defer_writes=self.later,
            confirmations=confirmations,
        )
        contracts = self.event_contracts()
        handled = [
            (name, entry["name"])
            for name, contract in contracts.items()
            for entry in contract.abi
            if entry.get("type") == "event" and hasattr(self, f"on_{name}_{entry['name']}")
        ]
        self.poller = EventPoller(
            w3,
            contracts,
            self.store,
            name=f"{self.role}-events",
            start_block=self.start_block,
            events=handled,
            defer_cursor=True,
            confirmations=confirmations,
            on_reorg=self.on_reorg,
        )
        self.txs = Transactions(
            self.sender,
            self.store,
            self.log,
            resubmit_after=resubmit_after,
            receipt_grace_s=receipt_grace_s,
            on_reverted=self.on_reverted,
        )
        self.sent = self.txs.sent  # idempotency keys submitted by this node (tests, diagnostics)
        self.schedule = Schedule()
        self._timeouts: tuple[int, int] | None = None  # the market's (commitTimeout, verifyTimeout), read once
        self._now: int | None = None  # chain time (latest block timestamp) of this step
        self._seen_time: tuple[float, int, int] | None = None  # (monotonic time, number, timestamp): last block read

    def event_contracts(self) -> dict:
        """The contracts whose events the poller delivers to the node's `on_<name>_<Event>` handlers, by name."""
        contracts = {"market": self.market}
        if self.disputes is not None:
            contracts["disputes"] = self.disputes
        if self.system.transcript is not None:  # transcript mode's force moves and answers (node/roles/party.py)
            contracts["transcript"] = self.system.transcript
        return contracts

    def load_models(self, target_path, draft_path, device=None, *, with_target: bool = True) -> None:
        """The pair a node serves: device and dtype, the shared tokenizer, both model ids, the draft model and
        (unless `with_target` is False: a drafter holds only its draft) the target model. Called by a node's
        constructor before `NodeBase.__init__`."""
        self.device, self.dtype = node_device(device)
        self.tokenizer = load_tokenizer(target_path, draft_path)
        self.target_model = load_model(target_path, self.device, self.dtype) if with_target else None
        self.draft_model = load_model(draft_path, self.device, self.dtype)
        self.target_id = model_id(target_path)
        self.draft_id = model_id(draft_path)

    # ------------------------------------------------------------------ deadlines of turns

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

    # ------------------------------------------------------------------ the loop

    def step(self, head: int | None = None) -> int:
        """Handle new events and due work once; returns how many things it did (events, receipts, actions).
        `head`: a block number known to be mined (announced by the head waker): no eth_blockNumber needed.

        A step that did nothing flushes the deferred writes (the node is waiting: the write costs no latency)."""
        self._now = None
        if self.confirmations:
            if head is None:
                head = self.w3.eth.block_number
            # every view the node reads this step (contract calls without a block) sees its confirmed head only
            self.w3.eth.default_block = max(head - self.confirmations, 0)
        did = self.poller.drain(self._dispatch, head)
        did += self.txs.poll()
        did += self._work()
        now = time.monotonic()
        if did:
            self._busy_at = now
        # Write what was deferred when idle and no job is in progress; while one is, an idle step is the node
        # waiting for the other party (a good time), but once per `max_defer_s` is enough; and never wait
        # longer than 5 x `max_defer_s` (a node that is never idle).
        stale = now - self._flushed_at
        if (not did and (not self.schedule.active or stale > self.max_defer_s)) or stale > 5 * self.max_defer_s:
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
        if self.schedule.active or time.monotonic() - self._busy_at < self.active_linger_s:
            if self.waker is not None and self.waker.connected:
                return max(self.active_poll_interval, min(self.woken_poll_interval, self.poll_interval))
            return self.active_poll_interval
        return self.poll_interval

    def _sleep(self, stop: threading.Event, timeout: float) -> None:
        busy = self.schedule.active or time.monotonic() - self._busy_at < self.active_linger_s
        if self.waker is not None and self.waker.connected and (busy or self.wake_on_blocks_when_idle):
            self.waker.wait(timeout)  # a new block (or stop) ends it early
        else:
            stop.wait(timeout)

    def run(self, stop: threading.Event | None = None) -> None:
        """Loop `step()` until `stop` is set (or Ctrl-C); after a step that did nothing it sleeps
        (`idle_interval`), or less when a new block is announced (`HeadWaker`, on local dev chains)."""
        stop = stop or threading.Event()
        if self.wake_url and self.waker is None:
            self.waker = HeadWaker(self.wake_url).start()
            self.poller.headers = self.waker.header  # a new block's hashes without a round trip (reorg detection)
            with contextlib.suppress(ChainUnavailable):
                self.timeouts()  # read now rather than on a job's first turn
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
                self.poller.headers = None

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
        self.txs.landed_by(event.tx_hash, event.block_number)  # if ours: it landed, and did not revert
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
        did = 0
        for kind, item_id in self.schedule.due(time.monotonic(), self.chain_time, self.recheck_interval):
            try:
                did += self.work_job(item_id) if kind == JOB else self.work_dispute(item_id)
            except ChainUnavailable:
                self.schedule.mark_dirty(kind, item_id)
                raise
            except Exception:
                self.log.exception("work on %s %d failed", kind, item_id)
        return did

    def work_job(self, job_id: int) -> int:
        return 0

    def work_dispute(self, dispute_id: int) -> int:
        return 0

    # ------------------------------------------------------------------ transactions

    def transact(self, key: str, call, value: int = 0, *, sure: bool = False) -> int:
        """Submit `call` (a bound contract function, or an `EncodedCall` from `txs.encode_call`) once under
        idempotency `key` without waiting (node/roles/inflight.py); 1 if submitted now, else 0.

        A call that would revert (gas estimation) is logged and nothing is signed; it may be tried again later.
        `sure=True` (see `sure`): sign with the gas of an earlier estimate of the same call shape, if any.
        """
        return self.txs.submit(key, call, value, sure=sure)

    def on_reverted(self, key: str, exc: TransactionReverted) -> None:
        """Hook: a transaction of ours reverted on chain."""

    # ------------------------------------------------------------------ reorgs

    def on_reorg(self, fork_block: int, since: float | None) -> None:
        """The poller found that blocks above `fork_block` it had processed were replaced (docs/node.md,
        "Confirmations and reorgs"). Our transactions they held are re-broadcast, the same signed bytes, and in
        flight again, or held until the node submits them again (`TxSender.reorged`). Every tracked item is looked
        at afresh (turns and deferrals the old blocks announced are forgotten), and so is every job and dispute
        whose store row changed since the poller first saw the fork block (`since`; None: all of them), a retired
        one included: its state is re-derived from the chain and the store, as after a restart. The events above
        the fork come again as the new chain has them."""
        self.log.warning("reorg: blocks above %d were replaced; re-deriving from the chain and the store", fork_block)
        self.flush()  # the writes deferred so far go first: what follows rewrites what the new chain changes
        self.txs.reorged(*self.sender.reorged())
        self.schedule.reset()
        self.rederive(since)

    # what a retired ("done") row becomes after a reorg
    reopened_status: ClassVar[dict[str, str]] = {"jobs": "active", "disputes": "open"}

    def rederive(self, since: float | None) -> None:
        """Track again each job and dispute of this role whose store row changed at or after wall time `since`
        (None: all), except refused ones; a retired one is marked as before its retirement (`reopened_status`),
        so that a restart tracks it too. Its work then decides from the chain's views what is left to do."""
        for kind, table in ((JOB, "jobs"), (DISPUTE, "disputes")):
            for item_id, status in self.store.changed_since(table, self.role, since):
                if status == "refused":
                    continue
                if status == "done":
                    save = self.store.save_job if table == "jobs" else self.store.save_dispute
                    save(item_id, self.role, self.reopened_status[table])
                self.schedule.track(kind, item_id)

    # ------------------------------------------------------------------ restarts

    def restore(self, with_jobs: bool = True) -> None:
        """Track what the store says this node was doing before a restart: its active jobs (`with_jobs`: a
        referee has none) and its disputes not done, both under its `role`."""
        for job in self.store.jobs(role=self.role, status="active") if with_jobs else []:
            self.schedule.track(JOB, job.job_id)
        for dispute in self.store.disputes(role=self.role):
            if dispute.status != "done":
                self.schedule.track(DISPUTE, dispute.dispute_id)
