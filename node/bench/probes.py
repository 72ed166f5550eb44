"""Timing probes: wall-time intervals of what each node thread does, by category, with no change of behaviour.

The probes wrap methods of web3, eth-account, the store, the engine sessions and NodeBase (timing only), once per
process (`install_probes`); a node thread that has bound a `Probe` records into it, any other thread runs the
plain methods.
"""

from __future__ import annotations

import threading
import time


class Probe:
    """Wall-time intervals of what one node thread does: (start, end, category) with monotonic clocks
    (CLOCK_MONOTONIC is system-wide, so intervals from node processes line up with this process's).

    Categories are groups: `rpc:<method>` (HTTP round trip incl. anvil), `web3:<method>` (web3's whole
    request, incl. the round trip), `store-write:<op>`, `store-read`, `sign`, `engine`, `idle`, `step`.
    Within a group only the outermost call counts (a store write that reads first is one write).
    Marks: (time, kind, detail) for events dispatched and transactions submitted.
    """

    _local = threading.local()

    def __init__(self, name: str):
        self.name = name
        self.intervals: list[tuple[float, float, str]] = []
        self.marks: list[tuple[float, str, list]] = []
        self.active: set[str] = set()
        self.started = self.stopped = None

    def bind(self) -> None:
        Probe._local.probe = self

    @staticmethod
    def current() -> Probe | None:
        return getattr(Probe._local, "probe", None)

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "intervals": self.intervals,
            "marks": self.marks,
            "started": self.started,
            "stopped": self.stopped,
        }


def _timed(function, category, group=None):
    """Wrap `function` so that calls from a probed thread add an interval under `category(args)`."""
    group_of = group or (lambda c: c)

    def wrapper(*args, **kwargs):
        probe = Probe.current()
        if probe is None:
            return function(*args, **kwargs)
        cat = category(*args, **kwargs) if callable(category) else category
        g = group_of(cat)
        if g in probe.active:
            return function(*args, **kwargs)
        probe.active.add(g)
        start = time.monotonic()
        try:
            return function(*args, **kwargs)
        finally:
            probe.intervals.append((start, time.monotonic(), cat))
            probe.active.discard(g)

    wrapper.__wrapped__ = function
    return wrapper


_INSTALLED = False


def install_probes() -> None:
    """Patch, once per process, the classes whose time we account (timing wrappers, nothing else)."""
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    from eth_account.signers.local import LocalAccount
    from web3.manager import RequestManager
    from web3.providers.rpc import HTTPProvider

    from node.decoding.proposer import DraftSession
    from node.decoding.scorer import VerifySession
    from node.roles.base import NodeBase
    from node.store import NodeStore

    rpc_group, web3_group = (lambda c: "rpc"), (lambda c: "web3")
    # the HTTP round trip itself (answers from web3's request cache never get here)
    from node.chain import rpc, sender

    for cls in (HTTPProvider, rpc.KeepAliveHTTPProvider):
        cls._make_request = _timed(cls._make_request, lambda self, method, data: f"rpc:{method}", rpc_group)
    if hasattr(HTTPProvider, "make_batch_request"):
        HTTPProvider.make_batch_request = _timed(HTTPProvider.make_batch_request, "rpc:batch", rpc_group)
    RequestManager.request_blocking = _timed(
        RequestManager.request_blocking, lambda self, method, *a, **k: f"web3:{method}", web3_group
    )
    if hasattr(RequestManager, "_make_batch_request"):
        RequestManager._make_batch_request = _timed(RequestManager._make_batch_request, "web3:batch", web3_group)
    LocalAccount.sign_transaction = _timed(LocalAccount.sign_transaction, "sign")
    sender.sign_transaction = _timed(sender.sign_transaction, "sign")  # the TxSender's EIP-1559 signing (coincurve)
    for name in ("record_tx", "set_tx_status", "set_cursor", "save_cycle", "save_job", "mark_seen"):
        setattr(NodeStore, name, _timed(getattr(NodeStore, name), f"store-write:{name}", lambda c: "store"))
    for name in ("sent_tx", "cycle", "job", "cursor", "outstanding_txs", "jobs", "cycles", "seen"):
        setattr(NodeStore, name, _timed(getattr(NodeStore, name), "store-read", lambda c: "store"))
    for cls, names in ((DraftSession, ("propose", "advance")), (VerifySession, ("verify", "advance"))):
        for name in names:
            setattr(cls, name, _timed(getattr(cls, name), "engine"))
    NodeBase.step = _timed(NodeBase.step, "step")
    if hasattr(NodeBase, "flush"):  # one store transaction (one fsync) for the deferred writes
        NodeBase.flush = _timed(NodeBase.flush, "store-write:flush", lambda c: "store")

    dispatch, transact = NodeBase._dispatch, NodeBase.transact

    def probed_dispatch(self, event):
        probe = Probe.current()
        if probe is not None:
            a = event.args
            probe.marks.append(
                (
                    time.monotonic(),
                    "event",
                    [event.name, int(a.get("jobId", a.get("disputeId", -1))), int(a.get("cycle", -1))],
                )
            )
        return dispatch(self, event)

    def probed_transact(self, key, call, value=0, **options):
        start = time.monotonic()
        sent = transact(self, key, call, value, **options)
        probe = Probe.current()
        if probe is not None and sent:
            probe.marks.append((time.monotonic(), "sent", [key, start]))
        return sent

    NodeBase._dispatch = probed_dispatch
    NodeBase.transact = probed_transact
    from node.chain import events

    if hasattr(events, "HeadWaker"):  # the loop's sleeps when a new-head subscription can end them
        events.HeadWaker.wait = _timed(events.HeadWaker.wait, "idle")


class ProbedStop(threading.Event):
    """The stop event handed to `node.run`: its waits (the loop's idle sleeps) are accounted as `idle`."""

    def wait(self, timeout=None):
        probe = Probe.current()
        start = time.monotonic()
        try:
            return super().wait(timeout)
        finally:
            if probe is not None:
                probe.intervals.append((start, time.monotonic(), "idle"))


def run_probed(node, stop: threading.Event, probe: Probe, profile_path: str | None = None) -> None:
    probe.bind()
    probe.started = time.monotonic()
    profiler = None
    if profile_path:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        node.run(stop)
    finally:
        probe.stopped = time.monotonic()
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile_path)
