"""End-to-end benchmark: a drafter node and a verifier node serving jobs on a local anvil chain.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_e2e.py --threads 1   # both modes × 0, 1, 12 s blocks, one table
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_e2e.py --mode transcript --block-time 0,12 --concurrent 4
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_e2e.py --mode onchain --block-time 0   # per cycle, in detail:
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_e2e.py --mode onchain --block-time 0 --json --tokens 16 --repeats 1
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_e2e.py --mode onchain --block-time 0 --gamma 2 --temperature 0

Modes × block times (`--mode transcript|onchain|both`, default both; `--block-time 0,1,12`, the default): for each
block time and mode a fresh anvil (deployed and registered with instant mining, then switched to a block every b s:
node.chain.anvil.set_block_time), the same prompt, γ, sampling, job id, verifier seed and drafter salt (fixed by
SALT_ENV in every node, so both modes emit the same tokens), and one row of the table: decoding tokens/s from the
job's acceptance to its last token at the requester, the engine's tokens/s on the same job in the same run, their
ratio, the time to first token (from the submit transaction's receipt), the job's transactions (every party's,
submit to finalize; withdrawals apart) and gas per token. The per-cycle mode is the report below (`run`); the
transcript mode (`run_transcript`, protocol v2) has the verifier serve its link on loopback (`serve verifier
--listen`: node.cli_transcript.start_link, endpoint published in the registry), the drafter node run the job over it
and settle it, and a requester in this process follow the token stream (node.link.requester.stream_tokens). At
b > 0 what the requester sees is timed when the block holding it arrives (`HeadWatch`, eth_blockNumber every 10 ms);
once the decoding is measured the chain goes back to instant mining, so settlement, finalize and withdrawals are
counted but not waited for. `--concurrent K`: K transcript jobs submitted at once, one verifier serving all, their
tokens/s per job and in total, and whether any stalled (a gap of STALL_S between two streamed cycles, or no end).
`--mode onchain --block-time 0` alone prints the per-cycle report in detail:

In one run, on a fresh anvil it starts (node.chain.anvil.running_anvil) with `deploy_system`, it
registers a drafter (dev account 2), a verifier (3) and three referees (4, 5, 6) for the pair (`--pair smol`, the
real one, by default; `--pair tiny`: models/target, models/draft), starts the nodes -- as separate OS
processes (`--nodes processes`, the default and the realistic set-up: each process imports torch, loads its
models and talks to anvil over HTTP) or as threads of this process (`--nodes threads`, faster to start, one
GIL) -- and measures:

  * end-to-end tokens/s of jobs submitted on chain by a requester (dev account 1), one job at a time,
    from the `submitJob` transaction mined to the last `CycleVerified` mined (the end of the verifier's
    last `submitVerification` call: anvil mines each transaction as it arrives), beside the engine
    alone (SpeculativeDecoder(verify_draft=True).generate with the same prompt, pair, γ, sampling, job
    id and verifier seed, run in this process right before and after each job while the nodes idle)
    -> the chain overhead ratio; the chain's output must equal the engine's token for token;
  * transactions and gas per generated token, from the receipts;
  * what a job costs (gas and wei at the anvil's gas price): submit, accept, commits, verifications,
    finalize, withdrawals; and what a dispute costs: one full TargetReplay dispute on an honest position
    (challenger dev account 7), answered by the verifier node and judged by three referee nodes
    (commit, reveal, resolve), and the withdrawals of its credits;
  * the time from submission to finalization: wall time to the last cycle, plus the protocol's
    challenge window (anvil's clock is advanced past it with evm_increaseTime; the nodes then
    finalize by themselves);
  * where a cycle's wall time goes: per cycle, the four legs of the critical path (verifier notices
    the draft, verifier's turn, drafter notices the verification, drafter's turn), and per node the
    time in engine compute, JSON-RPC round trips (by method), web3's Python around them, signing,
    store (SQLite) reads and writes, idle waits between polls, and the rest (Python).

The node code is measured as it is: the probes wrap methods (timing only) and change no behaviour.
Engine runs bracket each job (right before it is submitted and right after it finished, the nodes idle
meanwhile) and medians are reported.
It also lists every node transaction that reverted on chain (lost races, e.g. two parties finalizing
at once). `--profile DIR` writes a cProfile of each node process; `--active-poll-interval` and
`--poll-interval` override the nodes' defaults. On a shared machine run it several times: the figures
move with the load (the e2e/engine ratio moves less, engine and nodes being measured in the same run).

Signing: the nodes sign EIP-1559 transactions with coincurve (a dependency; node.chain.sender.sign_transaction,
~0.15 ms; eth-keys' pure-Python backend took ~6 ms). `--no-speculate` turns the verifier's speculation off
(VerifierNode(speculate=False): it then verifies each draft only once it is on chain), to measure what it brings.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import pathlib
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from node.chain.enums import NO_EOS, DisputeKind, DisputeStatus, JobStatus, Outcome, Role, solidity_name  # noqa: E402

# the pair every node and the engine run: --pair's (node/decoding/pairs.py), set once by use_pair before anything
# loads; node processes get it through $VERISPEC_PAIR
TARGET, DRAFT = ROOT / "models" / "target", ROOT / "models" / "draft"
VOCAB = 768  # the pair's vocabulary (registered with both model ids)
WAD = 10**18
ETHER = 10**18
STAKE = 5 * ETHER
REQUESTER, DRAFTER, VERIFIER, REFEREES, CHALLENGER = 1, 2, 3, (4, 5, 6), 7
PRICE_ACCEPTED, PRICE_PASS = 10**12, 3 * 10**12
DEFAULT_PROMPT = "import os\nimport sys\n\n\ndef main(argv=None):\n"
NO_SPECULATE_ENV = "VERISPEC_BENCH_NO_SPECULATE"
# the drafter's salt, fixed so that both modes run the same randomness (same job id, verifier seed and salt: the
# same tokens); read by every node (process) the benchmark starts. Its value changes no cost.
SALT_ENV = "VERISPEC_BENCH_SALT"
BENCH_SALT = 0x5EED_0F_BE4C4


# ====================================================================== probes (timing only)


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


# ====================================================================== nodes


def make_node(
    role: str,
    index: int,
    rpc_url: str,
    deployment,
    store_dir: pathlib.Path,
    poll_interval,
    artifacts,
    device,
    active_poll_interval=None,
    listen: bool = False,
):
    from node import protocol
    from node.chain.keys import dev_account
    from node.chain.rpc import connect
    from node.roles import DrafterNode, RefereeNode, VerifierNode

    if os.environ.get(SALT_ENV):
        fixed = int(os.environ[SALT_ENV])
        protocol.new_salt = lambda: fixed  # the drafter's choice, fixed across modes (SALT_ENV)

    options = {"artifacts": artifacts}
    if poll_interval is not None:
        options["poll_interval"] = poll_interval
    if active_poll_interval is not None:
        options["active_poll_interval"] = active_poll_interval
    w3, account, store = connect(rpc_url), dev_account(index), store_dir / f"{role}{index}.db"
    if role == "drafter":
        return DrafterNode(w3, deployment, account, store, DRAFT, TARGET, device=device, **options)
    if role == "verifier":
        speculate = os.environ.get(NO_SPECULATE_ENV) != "1"  # --no-speculate (inherited by node processes)
        node = VerifierNode(
            w3, deployment, account, store, TARGET, DRAFT, device=device, speculate=speculate, **options
        )
        if listen:  # transcript jobs: its link on a free loopback port, published in the registry (serve --listen)
            from node.cli_transcript import start_link

            start_link(node, ("127.0.0.1", 0))
        return node
    return RefereeNode(w3, deployment, account, store, TARGET, DRAFT, device=device, **options)


class ThreadNodes:
    """Nodes as threads of this process (one GIL, shared model weights)."""

    mode = "threads"

    def __init__(
        self,
        specs,
        rpc_url,
        deployment,
        store_dir,
        poll_interval,
        artifacts,
        device,
        active_poll_interval,
        listen=False,
    ):
        install_probes()
        self.nodes = [
            (
                role,
                make_node(
                    role,
                    i,
                    rpc_url,
                    deployment,
                    store_dir,
                    poll_interval,
                    artifacts,
                    device,
                    active_poll_interval,
                    listen,
                ),
            )
            for role, i in specs
        ]
        self.stop_event = ProbedStop()
        self.probes = [Probe(f"{role}{node.address[:8]}") for role, node in self.nodes]
        self.threads = [
            threading.Thread(target=run_probed, args=(node, self.stop_event, probe), daemon=True)
            for (_, node), probe in zip(self.nodes, self.probes)
        ]
        for thread in self.threads:
            thread.start()

    def stop(self) -> dict[str, list[dict]]:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=60)
        for _, node in self.nodes:
            node.close()
        out = defaultdict(list)
        for (role, _), probe in zip(self.nodes, self.probes):
            out[role].append(probe.as_json())
        return dict(out)


class ProcessNodes:
    """Nodes as separate OS processes: `scripts/bench_e2e.py --_serve ROLE ...` (one per role; the three
    referees share one process). Each imports torch, loads its models and holds its own RPC connection; it runs
    in its own process group with its log in `store_dir/logs` (node.processes), and on SIGTERM stops its
    loop and writes its probes."""

    mode = "processes"

    def __init__(
        self,
        groups,
        rpc_url,
        deployment_path,
        store_dir,
        poll_interval,
        device,
        threads,
        profile=None,
        active_poll_interval=None,
        listen=False,
    ):
        from node.processes import NodeProcesses

        self.nodes = NodeProcesses(store_dir / "logs")
        self.stats = {role: store_dir / f"{role}.stats.json" for role, _ in groups}
        for role, indices in groups:
            cmd = [
                sys.executable,
                str(pathlib.Path(__file__).resolve()),
                "--_serve",
                role,
                "--_indices",
                ",".join(map(str, indices)),
                "--_rpc",
                rpc_url,
                "--_deployment",
                str(deployment_path),
                "--_store",
                str(store_dir),
                "--_stats",
                str(self.stats[role]),
                "--threads",
                str(threads),
            ]
            if poll_interval is not None:
                cmd += ["--poll-interval", str(poll_interval)]
            if active_poll_interval is not None:
                cmd += ["--active-poll-interval", str(active_poll_interval)]
            if device:
                cmd += ["--device", device]
            if profile:
                cmd += ["--profile", str(profile)]
            if listen:
                cmd += ["--_listen", "1"]
            self.nodes.start(role, cmd, threads=threads)
        try:
            self.nodes.wait_ready(timeout=300, marker="READY")
        except Exception:
            self.nodes.stop_all()
            raise

    def stop(self) -> dict[str, list[dict]]:
        self.nodes.stop_all(timeout=60)
        return {role: json.loads(path.read_text()) for role, path in self.stats.items() if path.exists()}


def serve(args) -> None:
    """Entry point of a node process (`--_serve`): run the node(s) until SIGTERM (or until the benchmark that started
    this process is gone), then dump probes."""
    import torch

    from node.chain.deployment import Deployment
    from node.processes import stop_on_signals

    torch.set_num_threads(args.threads)
    install_probes()
    deployment = Deployment.load(pathlib.Path(args._deployment))
    store_dir = pathlib.Path(args._store)
    indices = [int(i) for i in args._indices.split(",")]
    nodes = [
        make_node(
            args._serve,
            i,
            args._rpc,
            deployment,
            store_dir,
            args.poll_interval,
            None,
            args.device,
            args.active_poll_interval,
            bool(args._listen),
        )
        for i in indices
    ]
    stop = stop_on_signals(ProbedStop())
    probes = [Probe(f"{args._serve}{i}") for i in indices]

    def profile(i):
        return str(pathlib.Path(args.profile) / f"{args._serve}{i}.prof") if args.profile else None

    threads = [
        threading.Thread(target=run_probed, args=(n, stop, p, profile(i)), daemon=True)
        for n, p, i in zip(nodes, probes, indices)
    ]
    for thread in threads:
        thread.start()
    print("READY", flush=True)
    parent = os.getppid()
    while not stop.wait(0.5):
        if os.getppid() != parent:  # a benchmark killed without its finally must not leave nodes polling
            break
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    for node in nodes:
        node.close()
    pathlib.Path(args._stats).write_text(json.dumps([p.as_json() for p in probes]))


# ====================================================================== chain helpers


class Rpc:
    """Minimal JSON-RPC (no web3 formatting) for the bench's own waits, so that they cost the nodes little."""

    def __init__(self, url: str):
        import requests

        self.url, self.session, self.id = url, requests.Session(), 0

    def __call__(self, method: str, *params):
        self.id += 1
        reply = self.session.post(
            self.url, json={"jsonrpc": "2.0", "id": self.id, "method": method, "params": list(params)}, timeout=30
        ).json()
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def send(self, fn, sender: str, value: int = 0) -> dict:
        """Send a bound contract call from an unlocked dev account and return its receipt (asserting success)."""
        tx_hash = "0x" + bytes(fn.transact({"from": sender, "value": value})).hex()
        receipt = self.receipt(tx_hash)
        if int(receipt["status"], 16) != 1:
            raise RuntimeError(f"{fn.fn_name} reverted")
        return receipt

    def receipt(self, tx_hash: str, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            receipt = self("eth_getTransactionReceipt", tx_hash)
            if receipt is not None:
                return receipt
            if time.monotonic() > deadline:
                raise TimeoutError(f"no receipt for {tx_hash}")
            time.sleep(0.002)


class HeadWatch(threading.Thread):
    """The requester's view of an interval-mined chain: when each block was first seen (eth_blockNumber every
    `interval` s, as a client following new heads would). On such a chain a transaction's effect is visible from
    its block's arrival, not from its sending."""

    def __init__(self, url: str, interval: float = 0.01):
        super().__init__(daemon=True, name="head-watch")
        self.rpc, self.interval, self.seen = Rpc(url), interval, {}
        self.stopped = threading.Event()

    def run(self) -> None:
        last = -1
        while not self.stopped.is_set():
            number = int(self.rpc("eth_blockNumber"), 16)
            if number > last:
                self.seen[number], last = time.monotonic(), number
            self.stopped.wait(self.interval)

    def seen_at(self, block: int) -> float:
        """When the first block >= `block` was seen (blocks mined between two polls are seen together)."""
        return min(t for n, t in self.seen.items() if n >= block)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


def block_of(rpc: Rpc, tx_hash) -> int:
    return int(rpc.receipt(tx_hash if isinstance(tx_hash, str) else "0x" + bytes(tx_hash).hex())["blockNumber"], 16)


def set_mining(rpc_url: str, block_time: int) -> None:
    """Interval mining every `block_time` s, or back to a block per transaction (0; what waits in the mempool is
    mined at once)."""
    from node.chain.anvil import set_block_time

    set_block_time(rpc_url, block_time)
    if not block_time:
        Rpc(rpc_url)("evm_mine")


def gas_of(rpc: Rpc, tx_hashes) -> dict:
    """Transactions, gas and wei (gasUsed x effectiveGasPrice) of the given transactions."""
    gas = wei = n = 0
    for tx_hash in tx_hashes:
        receipt = rpc.receipt(tx_hash if isinstance(tx_hash, str) else "0x" + bytes(tx_hash).hex())
        used = int(receipt["gasUsed"], 16)
        gas, wei, n = gas + used, wei + used * int(receipt["effectiveGasPrice"], 16), n + 1
    return {"txs": n, "gas": gas, "wei": wei}


def tx_hashes(event, from_block: int, **filters) -> list[str]:
    logs = event().get_logs(argument_filters=filters or None, from_block=from_block, to_block="latest")
    seen, out = set(), []
    for log in sorted(logs, key=lambda entry: (entry["blockNumber"], entry["logIndex"])):
        h = "0x" + bytes(log["transactionHash"]).hex()
        if h not in seen:
            seen.add(h)
            out.append(h)
    return out


def wait_until(condition, timeout: float, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout:.0f}s")
        time.sleep(interval)


# ====================================================================== the engine alone


def engine_runs(decoder, prompt_ids, tokens, job_id, seed, runs, salt: int = 0) -> list[tuple[float, object]]:
    """`runs` timed SpeculativeDecoder.generate calls for one job: [(seconds, GenerationResult)]. `salt`: the
    drafter's (known only once the job's first draft is on chain; before it, 0: the same work, other uniforms)."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        result = decoder.generate(prompt_ids, tokens, job_id=job_id, verifier_seed=seed, eos_token_id=None, salt=salt)
        out.append((time.perf_counter() - start, result))
    return out


# ====================================================================== the breakdown


def clip_sum(intervals, lo: float, hi: float) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for start, end, cat in intervals:
        s, e = max(start, lo), min(end, hi)
        if e > s:
            out[cat] += e - s
    return out


def exclusive(probe: dict, windows: list[tuple[float, float]]) -> tuple[dict[str, float], dict[str, float], float]:
    """Seconds by exclusive category inside `windows`: (parts, rpc by method, total wall)."""
    totals: dict[str, float] = defaultdict(float)
    wall = 0.0
    for lo, hi in windows:
        wall += hi - lo
        for cat, t in clip_sum(probe["intervals"], lo, hi).items():
            totals[cat] += t
    rpc = {c[4:]: t for c, t in totals.items() if c.startswith("rpc:")}
    web3 = sum(t for c, t in totals.items() if c.startswith("web3:"))
    store_w = sum(t for c, t in totals.items() if c.startswith("store-write:"))
    parts = {
        "engine": totals["engine"],
        "rpc round trips": sum(rpc.values()),
        "web3 python": max(0.0, web3 - sum(rpc.values())),
        "sign": totals["sign"],
        "store writes": store_w,
        "store reads": totals["store-read"],
        "idle wait": totals["idle"],
    }
    parts["other python"] = max(0.0, wall - sum(parts.values()))
    return parts, rpc, wall


def count_in(probe: dict, windows, prefix: str) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for start, _, cat in probe["intervals"]:
        if cat.startswith(prefix) and any(lo <= start < hi for lo, hi in windows):
            out[cat[len(prefix) :]] += 1
    return out


def node_breakdown(
    probe: dict, windows: list[tuple[float, float]], cycles: int, turns: list[tuple[float, float]]
) -> dict:
    """ms per cycle by exclusive category over the jobs' windows, and ms per turn over the node's own turns
    (from noticing the other party's transaction to having sent its own: its share of the critical path)."""
    parts, rpc, _ = exclusive(probe, windows)
    tparts, trpc, _ = exclusive(probe, turns)
    per = lambda t: 1e3 * t / cycles  # noqa: E731
    per_turn = lambda t: 1e3 * t / max(1, len(turns))  # noqa: E731
    return {
        "ms_per_cycle": {k: per(v) for k, v in parts.items()},
        "rpc_ms_per_cycle": {k: per(v) for k, v in sorted(rpc.items(), key=lambda kv: -kv[1])},
        "rpc_calls_per_cycle": {k: v / cycles for k, v in count_in(probe, windows, "rpc:").items()},
        "store_writes_per_cycle": {k: v / cycles for k, v in count_in(probe, windows, "store-write:").items()},
        "turns": len(turns),
        "ms_per_turn": {k: per_turn(v) for k, v in tparts.items()},
        "rpc_ms_per_turn": {k: per_turn(v) for k, v in sorted(trpc.items(), key=lambda kv: -kv[1])},
        "rpc_calls_per_turn": {k: v / max(1, len(turns)) for k, v in count_in(probe, turns, "rpc:").items()},
        "store_writes_per_turn": {k: v / max(1, len(turns)) for k, v in count_in(probe, turns, "store-write:").items()},
    }


def cycle_legs(drafter: dict, verifier: dict, job_id: int, n_cycles: int, t0: float):
    """Per cycle: the four legs of the critical path, in ms, from the nodes' marks; and each node's turns
    (noticed the other's transaction -> sent its own) as (start, end) windows."""

    def sent(probe, suffix):
        return {
            m[2][0]: m[0]
            for m in probe["marks"]
            if m[1] == "sent" and m[2][0].startswith(f"job:{job_id}:") and m[2][0].endswith(suffix)
        }

    def seen(probe, name):
        out = {}
        for t, kind, detail in probe["marks"]:
            if kind == "event" and detail[0] == name and detail[1] == job_id:
                out.setdefault(detail[2], t)
        return out

    commits, verifies = sent(drafter, ":commit"), sent(verifier, ":verify")
    v_saw, d_saw = seen(verifier, "DraftCommitted"), seen(drafter, "CycleVerified")
    accept = sent(verifier, ":accept").get(f"job:{job_id}:accept")
    legs = defaultdict(list)
    turns = {"drafter": [], "verifier": []}
    for c in range(n_cycles):
        commit = commits.get(f"job:{job_id}:cycle:{c}:commit")
        verify = verifies.get(f"job:{job_id}:cycle:{c}:verify")
        if None in (commit, verify) or c not in v_saw:
            continue
        legs["verifier notices the draft"].append(1e3 * (v_saw[c] - commit))
        legs["verifier's turn (verify + send)"].append(1e3 * (verify - v_saw[c]))
        turns["verifier"].append((v_saw[c], verify))
        nxt = commits.get(f"job:{job_id}:cycle:{c + 1}:commit")
        if c in d_saw and nxt is not None:
            legs["drafter notices the verification"].append(1e3 * (d_saw[c] - verify))
            legs["drafter's turn (draft + send)"].append(1e3 * (nxt - d_saw[c]))
            turns["drafter"].append((d_saw[c], nxt))
    first = commits.get(f"job:{job_id}:cycle:0:commit")
    if accept is not None and first is not None:
        legs["start: submit -> accept sent"].append(1e3 * (accept - t0))
        legs["start: accept -> first commit sent"].append(1e3 * (first - accept))
    return dict(legs), turns


# ====================================================================== the run


def median(values):
    values = list(values)
    return statistics.median(values) if values else float("nan")


def use_pair(name: str | None) -> str:
    """Make the pair `name` (--pair; $VERISPEC_PAIR or the default when None) the one this run and its node
    processes use; its name."""
    global TARGET, DRAFT, VOCAB
    from node.decoding.loading import vocab_size
    from node.decoding.pairs import PAIR_ENV, get_pair

    pair = get_pair(name)
    TARGET, DRAFT, VOCAB = pair.target, pair.draft, vocab_size(pair.target)
    os.environ[PAIR_ENV] = pair.name  # the node processes inherit it
    return pair.name


def _engine(args):
    """What both modes set up first: (device, dtype, prompt ids, model ids, the engine on the pair in this process:
    SpeculativeDecoder(verify_draft=True) with the job's γ and sampling)."""
    import torch

    from node.decoding import SpeculativeDecoder
    from node.jobs.models import load_model, load_tokenizer, model_id, node_device
    from node.jobs.sessions import prompt_tokens

    torch.set_num_threads(args.threads)
    device, dtype = node_device(args.device)
    prompt_ids = prompt_tokens(load_tokenizer(TARGET, DRAFT), args.prompt.encode())
    ids = {"draft": model_id(DRAFT), "target": model_id(TARGET)}
    decoder = SpeculativeDecoder(
        load_model(TARGET, device, dtype),
        load_model(DRAFT, device, dtype),
        gamma=args.gamma,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        verify_draft=True,
    )
    return device, dtype, prompt_ids, ids, decoder


def run(args) -> dict:
    from node import protocol
    from node.chain.anvil import running_anvil
    from node.chain.compile import compile_contracts
    from node.chain.deploy import deploy_system
    from node.chain.deployment import Deployment
    from node.chain.keys import dev_account
    from node.chain.rpc import connect
    from node.jobs import chaindata
    from node.jobs.sessions import verifier_seed

    device, dtype, prompt_ids, ids, decoder = _engine(args)
    artifacts = compile_contracts()
    report: dict = {
        "config": {
            "tokens": args.tokens,
            "gamma": args.gamma,
            "prompt": args.prompt,
            "prompt_tokens": len(prompt_ids),
            "pair": args.pair,
            "sampling": {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p},
            "repeats": args.repeats,
            "nodes": args.nodes,
            "poll_interval": args.poll_interval,
            "active_poll_interval": args.active_poll_interval,
            "speculate": not args.no_speculate,
            "device": str(device),
            "dtype": str(dtype).replace("torch.", ""),
            "torch_threads": args.threads,
            "engine_runs_per_job": 2 * args.engine_runs,
            "dispute": not args.no_dispute,
        }
    }

    with running_anvil() as anvil, tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        tmp = pathlib.Path(tmp)
        rpc_url = anvil.rpc_url
        w3 = connect(rpc_url)
        rpc = Rpc(rpc_url)
        accounts = w3.eth.accounts
        start_block = w3.eth.block_number + 1
        system = deploy_system(w3, accounts[0], artifacts=artifacts)
        market, dm, params = system.market, system.disputes, system.params
        reg = system.registry.functions
        rpc.send(reg.registerDrafter(ids["draft"], ids["target"], WAD // 2, VOCAB), accounts[DRAFTER], STAKE)
        rpc.send(reg.register(Role.Verifier, [ids["target"]], [VOCAB]), accounts[VERIFIER], STAKE)
        for i in REFEREES:
            rpc.send(
                reg.register(Role.Referee, [ids["draft"], ids["target"]], [VOCAB, VOCAB]),
                accounts[i],
                params.min_referee_stake,
            )
        deployment = Deployment.of_system(w3, system, rpc_url, start_block)
        deployment_path = deployment.save(tmp / "deployment.json")

        first_job = market.functions.jobCount().call() + 1
        job_ids = list(range(first_job, first_job + args.repeats))
        verifier_key = dev_account(VERIFIER).key
        seeds = {j: verifier_seed(verifier_key, j) for j in job_ids}

        decoder.generate(prompt_ids, min(args.tokens, 16), job_id=10**9, verifier_seed=bytes(32))  # warm-up
        engine: dict[int, list] = {j: [] for j in job_ids}
        n_engine = args.engine_runs

        groups = [("drafter", [DRAFTER]), ("verifier", [VERIFIER])]
        if not args.no_dispute:
            groups.append(("referee", list(REFEREES)))
        started = time.monotonic()
        if args.nodes == "threads":
            specs = [(role, i) for role, indices in groups for i in indices]
            nodes = ThreadNodes(
                specs, rpc_url, deployment, tmp, args.poll_interval, artifacts, args.device, args.active_poll_interval
            )
        else:
            nodes = ProcessNodes(
                groups,
                rpc_url,
                deployment_path,
                tmp,
                args.poll_interval,
                args.device,
                args.threads,
                args.profile,
                args.active_poll_interval,
            )
        report["config"]["node_start_s"] = time.monotonic() - started
        block_time = getattr(args, "block_time_s", 0)
        report["config"]["block_time_s"] = block_time
        watch = HeadWatch(rpc_url)
        if block_time:  # from here the chain mines a block every block_time s, as a public chain would
            set_mining(rpc_url, block_time)
            watch.start()

        jobs = []
        try:
            request = dict(
                draftModel=ids["draft"],
                targetModel=ids["target"],
                drafter=accounts[DRAFTER],
                verifier=accounts[VERIFIER],
                gamma=args.gamma,
                temperature=round(args.temperature * WAD),
                topK=args.top_k,
                topP=round(args.top_p * WAD),
                maxTokens=args.tokens,
                eosToken=NO_EOS,
                pricePerAcceptedToken=PRICE_ACCEPTED,
                pricePerPass=PRICE_PASS,
            )
            escrow = args.tokens * (PRICE_ACCEPTED + PRICE_PASS)
            for job_id in job_ids:
                # the engine alone right before and right after the job (the nodes idle meanwhile), so that
                # both see the same machine load
                engine[job_id] += engine_runs(decoder, prompt_ids, args.tokens, job_id, seeds[job_id], n_engine)
                receipt = rpc.send(
                    market.functions.submitJob(request, args.prompt.encode()), accounts[REQUESTER], escrow
                )
                t0 = time.monotonic()  # submitJob mined (anvil mines on arrival; the receipt is there)
                wait_until(
                    lambda job_id=job_id: market.functions.jobStatus(job_id).call() >= JobStatus.Finished,
                    timeout=args.job_timeout,
                    interval=0.05,
                    what=f"job {job_id} finished",
                )
                jobs.append({"job_id": job_id, "t0": t0, "submit_tx": receipt["transactionHash"]})
                salt = chaindata.job_salt(system, job_id, from_block=start_block)
                engine[job_id] += engine_runs(decoder, prompt_ids, args.tokens, job_id, seeds[job_id], n_engine, salt)

            if block_time:  # the decoding is measured: the rest (counted, not timed) waits for no block
                watch.stop()
                set_mining(rpc_url, 0)
            dispute = None
            if not args.no_dispute:
                dispute = run_dispute(rpc, system, job_ids[0], start_block, accounts, args.job_timeout)

            # past the challenge window: the nodes finalize their jobs by themselves
            window = params.challenge_window
            w3.provider.make_request("evm_increaseTime", [window + 1])
            w3.provider.make_request("evm_mine", [])
            t_window = time.monotonic()
            finalized_by_nodes = True
            try:
                wait_until(
                    lambda: all(market.functions.jobStatus(j).call() == JobStatus.Finalized for j in job_ids),
                    timeout=args.finalize_timeout,
                    interval=0.1,
                    what="finalization by the nodes",
                )
            except TimeoutError:
                finalized_by_nodes = False
                for j in job_ids:
                    if market.functions.jobStatus(j).call() != JobStatus.Finalized:
                        rpc.send(market.functions.finalize(j), accounts[REQUESTER])
            finalize_wall = time.monotonic() - t_window
        finally:
            probes = nodes.stop()

        report["reverted_node_txs"] = reverted_node_txs(rpc, tmp)

        # withdrawals (after the nodes stopped, so no nonce of theirs is touched)
        withdrawals = []
        for i in (DRAFTER, VERIFIER, REQUESTER):
            if market.functions.owed(accounts[i]).call() > 0:
                withdrawals.append(rpc.send(market.functions.withdraw(), accounts[i])["transactionHash"])
        dispute_withdrawals = []
        if dm is not None and dispute is not None:
            for i in (VERIFIER, DRAFTER, *REFEREES, CHALLENGER):
                if dm.functions.credits(accounts[i]).call() > 0:
                    dispute_withdrawals.append(rpc.send(dm.functions.withdraw(), accounts[i])["transactionHash"])

        # ------------------------------------------------------------------ per job
        drafter_probe = probes["drafter"][0]
        verifier_probe = probes["verifier"][0]
        all_legs = defaultdict(list)
        all_turns = {"drafter": [], "verifier": []}
        windows = []
        cost = defaultdict(lambda: {"txs": 0, "gas": 0, "wei": 0})

        def add(kind, g):
            for k in ("txs", "gas", "wei"):
                cost[kind][k] += g[k]

        for job in jobs:
            j = job["job_id"]
            chain_tokens = chaindata.output_tokens(system, j, from_block=start_block)
            cycles = chaindata.cycles(system, j, from_block=start_block, with_p=False)
            runs = engine[j]
            salted = runs[len(runs) // 2 :]  # the runs after the job, with its salt (the first half: timing only)
            engine_tokens = salted[0][1].tokens
            identical = chain_tokens == engine_tokens and all(r.tokens == engine_tokens for _, r in salted)
            same_cycles = [(c.tokens, c.q, c.accepted, c.out_token) for c in cycles] == [
                (r.proposals, r.q, r.accepted, r.out_token) for r in salted[0][1].cycles
            ]
            verified = tx_hashes(market.events.CycleVerified, start_block, jobId=j)
            accepted = tx_hashes(market.events.JobAccepted, start_block, jobId=j)
            if block_time:  # seen by the requester when the blocks holding them arrive
                t_end, t_first, t_accept = (
                    watch.seen_at(block_of(rpc, h)) for h in (verified[-1], verified[0], accepted[0])
                )
            else:  # mined as sent (a block per transaction): the verifier's marks
                sent_at = {m[2][0]: m[0] for m in verifier_probe["marks"] if m[1] == "sent"}
                t_end = sent_at[f"job:{j}:cycle:{len(cycles) - 1}:verify"]
                t_first, t_accept = sent_at[f"job:{j}:cycle:0:verify"], sent_at[f"job:{j}:accept"]
            e2e_s = t_end - job["t0"]
            windows.append((job["t0"], t_end))
            engine_s = median(t for t, _ in runs)
            submit = gas_of(rpc, [job["submit_tx"]])
            accept = gas_of(rpc, tx_hashes(market.events.JobAccepted, start_block, jobId=j))
            commits = gas_of(rpc, tx_hashes(market.events.DraftCommitted, start_block, jobId=j))
            verifies = gas_of(rpc, verified)
            finalize = gas_of(rpc, tx_hashes(market.events.JobFinalized, start_block, jobId=j))
            for kind, g in (
                ("submit", submit),
                ("accept", accept),
                ("commits", commits),
                ("verifications", verifies),
                ("finalize", finalize),
            ):
                add(kind, g)
            legs, turns = cycle_legs(drafter_probe, verifier_probe, j, len(cycles), job["t0"])
            for k, v in legs.items():
                all_legs[k].extend(v)
            for k, v in turns.items():
                all_turns[k].extend(v)
            job.update(
                tokens=len(chain_tokens),
                cycles=len(cycles),
                accepted=sum(c.accepted for c in cycles),
                identical_to_engine=identical,
                same_cycles_as_engine=same_cycles,
                e2e_s=e2e_s,
                e2e_tok_s=len(chain_tokens) / e2e_s,
                decode_tok_s=len(chain_tokens) / (t_end - t_accept),
                ttft_s=t_first - job["t0"],
                output=chain_tokens,
                engine_s=engine_s,
                engine_tok_s=len(engine_tokens) / engine_s,
                engine_runs_s=[t for t, _ in runs],
                ms_per_cycle_e2e=1e3 * e2e_s / len(cycles),
                ms_per_cycle_engine=1e3 * engine_s / len(cycles),
                gas={
                    "submit": submit,
                    "accept": accept,
                    "commits": commits,
                    "verifications": verifies,
                    "finalize": finalize,
                },
            )
            job.pop("t0")
        add("withdrawals", gas_of(rpc, withdrawals))

        n_jobs = len(jobs)
        total_tokens = sum(j["tokens"] for j in jobs)
        total_cycles = sum(j["cycles"] for j in jobs)
        cycle_gas = cost["commits"]["gas"] + cost["verifications"]["gas"]
        cycle_txs = cost["commits"]["txs"] + cost["verifications"]["txs"]
        job_txs = sum(cost[k]["txs"] for k in ("submit", "accept", "commits", "verifications", "finalize"))
        job_gas = sum(cost[k]["gas"] for k in ("submit", "accept", "commits", "verifications", "finalize"))
        e2e = median(j["e2e_tok_s"] for j in jobs)
        eng = median(j["engine_tok_s"] for j in jobs)
        report["jobs"] = jobs
        report["summary"] = {
            "e2e_tok_s": e2e,
            "decode_tok_s": median(j["decode_tok_s"] for j in jobs),
            "ttft_s": median(j["ttft_s"] for j in jobs),
            "engine_tok_s": eng,
            "e2e_over_engine": e2e / eng,
            "chain_overhead": eng / e2e,
            "goal_e2e_over_engine": 0.5,
            "goal_met": e2e / eng >= 0.5,
            "ms_per_cycle_e2e": median(j["ms_per_cycle_e2e"] for j in jobs),
            "ms_per_cycle_engine": median(j["ms_per_cycle_engine"] for j in jobs),
            "tokens_per_cycle": total_tokens / total_cycles,
            "all_identical_to_engine": all(j["identical_to_engine"] for j in jobs),
        }
        gas_price = int(rpc("eth_gasPrice"), 16)
        per_job = {
            k: {kk: v / n_jobs for kk, v in cost[k].items()}
            for k in ("submit", "accept", "commits", "verifications", "finalize", "withdrawals")
        }
        per_job["total"] = {k: sum(per_job[x][k] for x in per_job) for k in ("txs", "gas", "wei")}
        report["gas"] = {
            "cycle_txs_per_token": cycle_txs / total_tokens,
            "cycle_gas_per_token": cycle_gas / total_tokens,
            "job_txs_per_token": job_txs / total_tokens,
            "job_gas_per_token": job_gas / total_tokens,
            "gas_per_cycle": cycle_gas / total_cycles,
            "anvil_gas_price_wei": gas_price,
            "job_cost": per_job,
        }
        if dispute is not None:
            dispute["cost"]["withdrawals"] = gas_of(rpc, dispute_withdrawals)
            dispute["cost"]["total"] = {k: sum(v[k] for v in dispute["cost"].values()) for k in ("txs", "gas", "wei")}
        report["dispute"] = dispute
        mean_e2e = sum(j["e2e_s"] for j in jobs) / n_jobs
        report["time"] = {
            "submission_to_last_cycle_s": mean_e2e,
            "challenge_window_s": params.challenge_window,
            "submission_to_finalizable_s": mean_e2e + params.challenge_window,
            "finalized_by": "nodes" if finalized_by_nodes else "requester",
            "finalize_wall_after_window_s": finalize_wall,
            "dispute_wall_s": dispute["wall_s"] if dispute else None,
        }
        report["breakdown"] = {
            "cycle_legs_ms": {k: median(v) for k, v in all_legs.items()},
            "drafter": node_breakdown(drafter_probe, windows, total_cycles, all_turns["drafter"]),
            "verifier": node_breakdown(verifier_probe, windows, total_cycles, all_turns["verifier"]),
        }
        report["config"]["protocol_hash_chain_length"] = protocol.hash_chain_length(args.tokens)
        # the nodes read views through chaindata's direct ABI decoding: it must equal web3's generic path
        abi = next(e for e in market.abi if e.get("type") == "function" and e["name"] == "getJob")
        report["checks"] = {
            "view_decoding_equals_web3": all(
                chaindata.job_view(market, j)
                == chaindata._struct(market.functions.getJob(j).call(), abi["outputs"][0]["components"])
                for j in job_ids
            ),
            "outputs_equal_engine": report["summary"]["all_identical_to_engine"],
        }
    return report


def run_dispute(rpc: Rpc, system, job_id: int, start_block: int, accounts, timeout: float) -> dict:
    """A TargetReplay dispute on an honest position (cycle 0, proposal 0): the verifier node answers, the three
    referee nodes commit and reveal, one decides the round; past the appeal period the dispute is finished (resolve
    again) and the challenger loses its bond."""
    from node.jobs import chaindata

    dm = system.disputes
    record = chaindata.record_preimage(system, job_id, 0, from_block=start_block)
    proof = chaindata.leaf_proof(system, job_id, 0, 0, from_block=start_block)
    t0 = time.monotonic()
    opened = rpc.send(
        dm.functions.openDispute(job_id, 0, 0, DisputeKind.TargetReplay, record, proof),
        accounts[CHALLENGER],
        system.params.dispute_bond,
    )
    dispute_id = dm.functions.disputeCount().call()
    decided = (DisputeStatus.Appealable, DisputeStatus.Resolved)
    wait_until(
        lambda: chaindata.dispute_view(dm, dispute_id)["status"] in decided,
        timeout,
        interval=0.05,
        what=f"dispute {dispute_id} decided",
    )
    wall = time.monotonic() - t0  # open to a decided round (the appeal period is a wait, not work)
    if chaindata.dispute_view(dm, dispute_id)["status"] == DisputeStatus.Appealable:
        # nobody appeals the (right) verdict: past the appeal period, anyone finishes the dispute and it pays out
        rpc("evm_increaseTime", system.params.appeal_period + 1)
        rpc("evm_mine")
        try:
            rpc.send(dm.functions.resolve(dispute_id), accounts[CHALLENGER])
        except Exception:  # a referee node finished it first (DisputeWrongStatus): that is the same end state
            if chaindata.dispute_view(dm, dispute_id)["status"] != DisputeStatus.Resolved:
                raise
    view = chaindata.dispute_view(dm, dispute_id)
    f = {"disputeId": dispute_id}
    cost = {
        "open": gas_of(rpc, [opened["transactionHash"]]),
        "answer": gas_of(rpc, tx_hashes(dm.events.Answered, start_block, **f)),
        "commit votes": gas_of(rpc, tx_hashes(dm.events.VoteCommitted, start_block, **f)),
        "reveal votes": gas_of(rpc, tx_hashes(dm.events.VoteRevealed, start_block, **f)),
        "decide round": gas_of(rpc, tx_hashes(dm.events.RoundDecided, start_block, **f)),
        "resolve": gas_of(rpc, tx_hashes(dm.events.DisputeResolved, start_block, **f)),
    }
    return {
        "dispute_id": dispute_id,
        "job_id": job_id,
        "kind": DisputeKind.TargetReplay.name,
        "position": [0, 0],
        "outcome": solidity_name(Outcome(view["outcome"])),
        "wall_s": wall,
        "cost": cost,
    }


# ====================================================================== transcript mode (protocol v2)

STALL_S = 2.0  # a gap this long between two streamed cycles of a job (or no end at all): the job stalled


def start_nodes(args, groups, rpc_url, deployment, deployment_path, tmp, artifacts, listen=False):
    if args.nodes == "threads":
        specs = [(role, i) for role, indices in groups for i in indices]
        return ThreadNodes(
            specs,
            rpc_url,
            deployment,
            tmp,
            args.poll_interval,
            artifacts,
            args.device,
            args.active_poll_interval,
            listen,
        )
    return ProcessNodes(
        groups,
        rpc_url,
        deployment_path,
        tmp,
        args.poll_interval,
        args.device,
        args.threads,
        args.profile,
        args.active_poll_interval,
        listen,
    )


async def follow_streams(uri: str, job_ids: list[int], timeout: float) -> dict[int, dict]:
    """The requester's side: subscribe to every job's token stream (retrying until the verifier serves it) and record
    when each cycle's tokens arrive: {job: {"tokens": [...], "frames": [(time, cycle, n tokens)]}}."""
    import asyncio

    from node.link.requester import stream_tokens
    from node.link.wire import LinkRefused

    deadline = time.monotonic() + timeout

    async def follow(job_id):
        while True:
            frames: list = []

            def arrived(cycle, tokens, frames=frames):
                frames.append((time.monotonic(), cycle, len(tokens)))

            try:
                tokens = await stream_tokens(uri, job_id, arrived, timeout_s=timeout)
                return {"tokens": tokens, "frames": frames}
            except LinkRefused as exc:  # not served yet: the verifier opens it once its acceptance is mined
                if "not served" not in str(exc) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.01)

    results = await asyncio.gather(*(follow(j) for j in job_ids))
    return dict(zip(job_ids, results))


def run_transcript(args, concurrent: int = 0) -> dict:
    """Transcript-mode jobs (`submitTranscriptJob`) served by a drafter and a verifier node (`serve verifier --listen`:
    its link on loopback, published in the registry) on a fresh anvil; a requester in this process follows each
    job's token stream. `concurrent` > 0: that many jobs submitted at once, served by the one verifier."""
    import asyncio

    from node.chain.anvil import running_anvil
    from node.chain.compile import compile_contracts
    from node.chain.deploy import deploy_system
    from node.chain.deployment import Deployment
    from node.chain.keys import dev_account
    from node.chain.rpc import connect
    from node.chain.transcript import read_settlement
    from node.jobs.sessions import verifier_seed
    from node.link.chain import EndpointError, endpoint_of

    device, _, prompt_ids, ids, decoder = _engine(args)
    artifacts = compile_contracts()
    block_time = args.block_time_s
    n_jobs = concurrent or args.repeats
    report: dict = {
        "config": {
            "mode": "transcript",
            "pair": args.pair,
            "tokens": args.tokens,
            "gamma": args.gamma,
            "block_time_s": block_time,
            "jobs": n_jobs,
            "concurrent": bool(concurrent),
            "nodes": args.nodes,
            "torch_threads": args.threads,
            "device": str(device),
        }
    }
    with running_anvil() as anvil, tempfile.TemporaryDirectory(prefix="bench-e2e-v2-") as tmp:
        tmp = pathlib.Path(tmp)
        rpc_url = anvil.rpc_url
        w3, rpc = connect(rpc_url), Rpc(rpc_url)
        accounts = w3.eth.accounts
        start_block = w3.eth.block_number + 1
        system = deploy_system(w3, accounts[0], artifacts=artifacts)
        market, params = system.market, system.params
        reg = system.registry.functions
        rpc.send(reg.registerDrafter(ids["draft"], ids["target"], WAD // 2, VOCAB), accounts[DRAFTER], STAKE)
        rpc.send(reg.register(Role.Verifier, [ids["target"]], [VOCAB]), accounts[VERIFIER], STAKE)
        deployment = Deployment.of_system(w3, system, rpc_url, start_block)
        deployment_path = deployment.save(tmp / "deployment.json")
        first_job = market.functions.jobCount().call() + 1
        job_ids = list(range(first_job, first_job + n_jobs))
        verifier_key = dev_account(VERIFIER).key
        seeds = {j: verifier_seed(verifier_key, j) for j in job_ids}
        decoder.generate(prompt_ids, min(args.tokens, 16), job_id=10**9, verifier_seed=bytes(32))  # warm-up
        engine: dict[int, list] = {j: [] for j in job_ids}
        n_engine = args.engine_runs

        groups = [("drafter", [DRAFTER]), ("verifier", [VERIFIER])]
        nodes = start_nodes(args, groups, rpc_url, deployment, deployment_path, tmp, artifacts, listen=True)
        watch = HeadWatch(rpc_url)
        jobs, streams = [], {}
        try:

            def published():
                try:
                    return endpoint_of(system.registry, accounts[VERIFIER])
                except EndpointError:
                    return None

            uri = wait_until(published, 60, what="the verifier's endpoint in the registry")
            if block_time:
                set_mining(rpc_url, block_time)
                watch.start()
            request = dict(
                draftModel=ids["draft"],
                targetModel=ids["target"],
                drafter=accounts[DRAFTER],
                verifier=accounts[VERIFIER],
                gamma=args.gamma,
                temperature=round(args.temperature * WAD),
                topK=args.top_k,
                topP=round(args.top_p * WAD),
                maxTokens=args.tokens,
                eosToken=NO_EOS,
                pricePerAcceptedToken=PRICE_ACCEPTED,
                pricePerPass=PRICE_PASS,
            )
            escrow = args.tokens * (PRICE_ACCEPTED + PRICE_PASS)
            batches = [job_ids] if concurrent else [[j] for j in job_ids]
            for batch in batches:
                for j in batch:  # the engine alone right before (the nodes idle), with the job's randomness
                    engine[j] += engine_runs(decoder, prompt_ids, args.tokens, j, seeds[j], n_engine, BENCH_SALT)
                sent = [
                    market.functions.submitTranscriptJob(request, args.prompt.encode()).transact(
                        {"from": accounts[REQUESTER], "value": escrow}
                    )
                    for _ in batch
                ]  # all of a batch before any receipt: concurrent jobs share their blocks
                for j, tx in zip(batch, sent):
                    receipt = rpc.receipt("0x" + bytes(tx).hex())
                    jobs.append({"job_id": j, "t0": time.monotonic(), "submit_tx": receipt["transactionHash"]})
                streams.update(asyncio.run(follow_streams(uri, batch, args.job_timeout)))
                for j in batch:
                    engine[j] += engine_runs(decoder, prompt_ids, args.tokens, j, seeds[j], n_engine, BENCH_SALT)
            if block_time:  # the decoding is measured: settle, finalize and withdrawals are counted, not timed
                watch.stop()
                set_mining(rpc_url, 0)
            wait_until(
                lambda: all(market.functions.jobStatus(j).call() >= JobStatus.Finished for j in job_ids),
                args.job_timeout,
                what="the drafter node's settlements",
            )
            w3.provider.make_request("evm_increaseTime", [params.challenge_window + 1])
            w3.provider.make_request("evm_mine", [])
            try:
                wait_until(
                    lambda: all(market.functions.jobStatus(j).call() == JobStatus.Finalized for j in job_ids),
                    args.finalize_timeout,
                    interval=0.1,
                    what="finalization by the nodes",
                )
            except TimeoutError:
                for j in job_ids:
                    if market.functions.jobStatus(j).call() != JobStatus.Finalized:
                        rpc.send(market.functions.finalize(j), accounts[REQUESTER])
        finally:
            watch.stop() if watch.is_alive() else None
            probes = nodes.stop()
        report["reverted_node_txs"] = reverted_node_txs(rpc, tmp)
        withdrawals = [
            rpc.send(market.functions.withdraw(), accounts[i])["transactionHash"]
            for i in (DRAFTER, VERIFIER, REQUESTER)
            if market.functions.owed(accounts[i]).call() > 0
        ]
        accept_marks = {m[2][0]: m[0] for m in probes["verifier"][0]["marks"] if m[1] == "sent"}
        kinds = ("submit", "accept", "settle", "finalize")
        for job in jobs:
            j = job["job_id"]
            stream = streams[j]
            settled = read_settlement(w3, system.transcript, j, start_block)
            runs = engine[j]
            engine_tokens = runs[-1][1].tokens
            accept_tx = tx_hashes(market.events.JobAccepted, start_block, jobId=j)[0]
            t_accept = watch.seen_at(block_of(rpc, accept_tx)) if block_time else accept_marks[f"job:{j}:accept"]
            times = [t for t, _, _ in stream["frames"]]
            t_first, t_end = stream["frames"][0][0], stream["frames"][-1][0]
            tokens = stream["tokens"]
            gas = {
                "submit": gas_of(rpc, [job["submit_tx"]]),
                "accept": gas_of(rpc, [accept_tx]),
                "settle": gas_of(rpc, tx_hashes(system.transcript.events.TranscriptSettled, start_block, jobId=j)),
                "finalize": gas_of(rpc, tx_hashes(market.events.JobFinalized, start_block, jobId=j)),
            }
            job.update(
                tokens=len(tokens),
                cycles=len(settled.cycles),
                identical_to_engine=tokens == settled.output(NO_EOS, args.tokens) == engine_tokens
                and all(r.tokens == engine_tokens for _, r in runs),
                decode_s=t_end - t_accept,
                decode_tok_s=len(tokens) / (t_end - t_accept),
                engine_s=median(t for t, _ in runs),
                engine_tok_s=len(engine_tokens) / median(t for t, _ in runs),
                ttft_s=t_first - job["t0"],
                accept_to_first_token_s=t_first - t_accept,
                steady_tok_s=(len(tokens) - stream["frames"][0][2]) / max(t_end - t_first, 1e-9),
                max_gap_s=max((b - a for a, b in itertools.pairwise(times)), default=0.0),  # between two cycles
                gas=gas,
                output=tokens,
                t_accept=t_accept,
                t_end=t_end,
            )
            job.pop("t0")
        cost = {k: {x: sum(jb["gas"][k][x] for jb in jobs) / len(jobs) for x in ("txs", "gas", "wei")} for k in kinds}
        cost["withdrawals"] = {k: v / len(jobs) for k, v in gas_of(rpc, withdrawals).items()}
        report["jobs"] = jobs
        first, last = min(j["t_accept"] for j in jobs), max(j["t_end"] for j in jobs)
        report["summary"] = {
            "decode_tok_s": median(j["decode_tok_s"] for j in jobs),
            "engine_tok_s": median(j["engine_tok_s"] for j in jobs),
            "ttft_s": median(j["ttft_s"] for j in jobs),
            # the link's own pace, start-up left out: the tokens after the first cycle over the time after it
            "accept_to_first_token_s": median(j["accept_to_first_token_s"] for j in jobs),
            "steady_tok_s": median(j["steady_tok_s"] for j in jobs),
            "all_identical_to_engine": all(j["identical_to_engine"] for j in jobs),
            "total_tok_s": sum(j["tokens"] for j in jobs) / (last - first),
            "stalled": [j["job_id"] for j in jobs if j["max_gap_s"] > STALL_S or j["tokens"] != args.tokens],
        }
        report["gas"] = {"job_cost": cost}
    return report


def reverted_node_txs(rpc: Rpc, store_dir: pathlib.Path) -> list[dict]:
    """Every transaction the nodes sent (their stores) that reverted on chain (lost races)."""
    import sqlite3

    reverted = []
    for db in sorted(store_dir.glob("*.db")):
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            for key, tx_hash in conn.execute("SELECT idempotency_key, tx_hash FROM sent_txs"):
                receipt = rpc("eth_getTransactionReceipt", tx_hash)
                if receipt is not None and int(receipt["status"], 16) == 0:
                    reverted.append({"node": db.stem, "key": key, "gas": int(receipt["gasUsed"], 16)})
    return reverted


# ====================================================================== modes × block times

ONCHAIN_BLOCKS_BUDGET = 64  # per-cycle rows at b s blocks decode min(N, max(--slow-tokens, 64 / b)) tokens: ~2 b s a
# cycle of ~2.5 tokens, so a row takes about a minute instead of an hour
JOB_KINDS = {
    "onchain": ("submit", "accept", "commits", "verifications", "finalize"),
    "transcript": ("submit", "accept", "settle", "finalize"),
}


def row_of(mode: str, report: dict) -> dict:
    """One line of the mode × block-time table from a run's report."""
    s, cost = report["summary"], report["gas"]["job_cost"]
    kinds = JOB_KINDS[mode]
    job_gas = sum(cost[k]["gas"] for k in kinds)
    tokens = report["jobs"][0]["tokens"]
    return {
        "mode": mode,
        "block_time_s": report["config"]["block_time_s"],
        "tokens": tokens,
        "jobs": len(report["jobs"]),
        "decode_tok_s": s["decode_tok_s"],
        "engine_tok_s": s["engine_tok_s"],
        "e2e_over_engine": s["decode_tok_s"] / s["engine_tok_s"],
        "ttft_s": s["ttft_s"],
        "txs_per_job": sum(cost[k]["txs"] for k in kinds),
        "txs_by_kind": {k: cost[k]["txs"] for k in kinds},
        "withdrawal_txs_per_job": cost["withdrawals"]["txs"],
        "gas_per_job": job_gas,
        "gas_per_token": job_gas / tokens,
        "identical_to_engine": s["all_identical_to_engine"],
        "output": report["jobs"][0]["output"],
        "accept_to_first_token_s": s.get("accept_to_first_token_s"),
        "steady_tok_s": s.get("steady_tok_s"),
    }


def onchain_tokens(args, block_time: int) -> int:
    return min(args.tokens, max(args.slow_tokens, ONCHAIN_BLOCKS_BUDGET // block_time)) if block_time else args.tokens


def run_matrix(args, block_times: list[int], modes: list[str]) -> dict:
    rows, reports = [], {}
    for bt in block_times:
        for mode in modes:
            a = argparse.Namespace(**vars(args))
            a.block_time_s = bt
            if mode == "onchain":
                if bt:
                    a.tokens = onchain_tokens(args, bt)
                if bt:  # minutes a job: one, and no dispute (measured at 0 s blocks)
                    a.repeats, a.no_dispute, a.engine_runs = 1, True, 1
                    a.job_timeout = max(args.job_timeout, 60 + 30 * bt * a.tokens)
                report = run(a)
            else:
                report = run_transcript(a)
            reports[f"{mode}@{bt}"] = report
            rows.append(row_of(mode, report))
            print(f"  {mode} at {bt} s blocks: {rows[-1]['decode_tok_s']:.1f} tok/s", file=sys.stderr, flush=True)
    out: dict = {"rows": rows, "reports": reports}
    # the same job id, verifier seed and salt: both modes emit the same tokens (at the same maxTokens only: the
    # verifier's hash chain, and so every reveal, depends on it)
    for bt in block_times:
        got = [r["output"] for r in rows if r["block_time_s"] == bt]
        if len(got) == 2 and len(got[0]) == len(got[1]):
            for r in rows:
                if r["block_time_s"] == bt:
                    r["same_output_across_modes"] = got[0] == got[1]
    if args.concurrent:
        a = argparse.Namespace(**vars(args))
        a.block_time_s = block_times[0]
        report = run_transcript(a, concurrent=args.concurrent)
        s = report["summary"]
        out["concurrent"] = {
            "jobs": args.concurrent,
            "block_time_s": a.block_time_s,
            "tokens_per_job": args.tokens,
            "per_job_tok_s": [j["decode_tok_s"] for j in report["jobs"]],
            "max_gap_s": [j["max_gap_s"] for j in report["jobs"]],
            "accept_to_first_token_s": [j["accept_to_first_token_s"] for j in report["jobs"]],
            "total_tok_s": s["total_tok_s"],
            "engine_tok_s": s["engine_tok_s"],
            "stalled": s["stalled"],
            "all_identical_to_engine": s["all_identical_to_engine"],
        }
        reports["concurrent"] = report
    out["load"] = machine_load()
    return out


def machine_load() -> dict:
    one, five, fifteen = os.getloadavg()
    return {"loadavg_1_5_15": [one, five, fifteen], "cpus": os.cpu_count()}


def print_matrix(m: dict, args) -> None:
    print(
        f"bench_e2e: modes × block times, γ={args.gamma}, T={args.temperature:g}, nodes as {args.nodes}, "
        f"{args.threads} torch thread(s); load {', '.join(f'{x:.2f}' for x in m['load']['loadavg_1_5_15'])} "
        f"on {m['load']['cpus']} CPUs"
    )
    print()
    head = (
        "mode",
        "block s",
        "tokens",
        "decode tok/s",
        "engine tok/s",
        "e2e/engine",
        "TTFT s",
        "txs/job",
        "gas/token",
        "= engine",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" if i < 1 else "---:" for i in range(len(head))) + "|")
    for r in m["rows"]:
        same = r["identical_to_engine"] and r.get("same_output_across_modes", True)
        cells = (
            r["mode"],
            str(r["block_time_s"]),
            str(r["tokens"]),
            f"{r['decode_tok_s']:.1f}",
            f"{r['engine_tok_s']:.1f}",
            f"{r['e2e_over_engine']:.2f}",
            f"{r['ttft_s']:.2f}",
            f"{r['txs_per_job']:.0f}",
            f"{r['gas_per_token']:,.0f}",
            str(same),
        )
        print("| " + " | ".join(cells) + " |")
    print()
    print(
        "decode tok/s: tokens / (the job's acceptance -> its last token at the requester); acceptance and tokens are "
        "seen as a requester sees them (at 0 s blocks a transaction is mined as sent; otherwise when its block "
        "arrives). engine tok/s: SpeculativeDecoder alone on the same job (id, verifier seed, salt), in the same run. "
        "TTFT: from the submit transaction's receipt to the first token the requester sees (per cycle: the first "
        "CycleVerified's block; transcript: the first streamed cycle). txs/job: every party's transactions of the job, "
        "submit to finalize (per cycle: submit, accept, a commit and a verification a cycle, finalize; transcript: "
        "submit, accept, settle, finalize); withdrawals apart: "
        + ", ".join(f"{r['mode']}@{r['block_time_s']} {r['withdrawal_txs_per_job']:.3g}" for r in m["rows"])
        + ". gas/token: those transactions' gas / tokens. Per-cycle rows at b > 0 s blocks decode min(N, max("
        f"{args.slow_tokens}, {ONCHAIN_BLOCKS_BUDGET}/b)) tokens (two blocks a cycle, ~2b s), the others N = "
        f"{args.tokens}; = engine: the output equals the engine's, and the other mode's at the same token count."
    )
    steady = [r for r in m["rows"] if r["steady_tok_s"] is not None]
    if steady:
        print()
        print(
            "transcript start-up and pace: "
            + "; ".join(
                f"{r['block_time_s']} s blocks: acceptance -> first token {r['accept_to_first_token_s']:.3f} s, then "
                f"{r['steady_tok_s']:.1f} tok/s ({r['steady_tok_s'] / r['engine_tok_s']:.2f} × engine)"
                for r in steady
            )
        )
    c = m.get("concurrent")
    if c:
        print()
        per_job = ", ".join(f"{x:.1f}" for x in c["per_job_tok_s"])
        print(
            f"{c['jobs']} concurrent transcript jobs × {c['tokens_per_job']} tokens, one verifier, "
            f"{c['block_time_s']} s blocks: per job {per_job} tok/s; in total {c['total_tok_s']:.1f} tok/s (engine "
            f"alone {c['engine_tok_s']:.1f}); acceptance -> first token "
            f"{min(c['accept_to_first_token_s']):.2f}-{max(c['accept_to_first_token_s']):.2f} s; longest gap between "
            f"two cycles {max(c['max_gap_s']):.2f} s; stalled: "
            f"{c['stalled'] or 'none'}; outputs = engine: {c['all_identical_to_engine']}"
        )


# ====================================================================== output


def fmt_gas(g: dict) -> str:
    return f"{g['txs']:>5.1f} txs {g['gas']:>11,.0f} gas {g['wei'] / 1e9:>12,.0f} gwei"


def print_table(r: dict) -> None:
    c, s = r["config"], r["summary"]
    print(
        f"bench_e2e: {c['tokens']} tokens, γ={c['gamma']}, sampling {c['sampling']}, {c['repeats']} job(s), "
        f"nodes as {c['nodes']}, {c['device']} {c['dtype']}, {c['torch_threads']} torch thread(s), "
        f"poll interval {c['poll_interval'] or 'node default'}"
        f"{'' if c.get('speculate', True) else ', verifier speculation off'}"
    )
    print()
    print(
        "| job | tokens | cycles | accepted | e2e s | e2e tok/s | engine tok/s | e2e/engine | ms/cycle e2e | "
        "ms/cycle engine | output = engine |"
    )
    print(
        "|-----|--------|--------|----------|-------|-----------|--------------|------------|--------------|"
        "-----------------|-----------------|"
    )
    for j in r["jobs"]:
        print(
            f"| {j['job_id']:>3} | {j['tokens']:>6} | {j['cycles']:>6} | {j['accepted']:>8} | {j['e2e_s']:>5.2f} | "
            f"{j['e2e_tok_s']:>9.1f} | {j['engine_tok_s']:>12.0f} | {j['e2e_tok_s'] / j['engine_tok_s']:>10.3f} | "
            f"{j['ms_per_cycle_e2e']:>12.1f} | {j['ms_per_cycle_engine']:>15.2f} | "
            f"{j['identical_to_engine'] and j['same_cycles_as_engine']!s:>15} |"
        )
    print()
    print(
        f"median: e2e {s['e2e_tok_s']:.1f} tok/s, engine alone {s['engine_tok_s']:.0f} tok/s -> "
        f"e2e/engine {s['e2e_over_engine']:.3f} (chain overhead ×{s['chain_overhead']:.1f}); goal ≥ 0.5: "
        f"{'met' if s['goal_met'] else 'NOT met'}; {s['ms_per_cycle_e2e']:.1f} ms per cycle on chain vs "
        f"{s['ms_per_cycle_engine']:.2f} ms in the engine; {s['tokens_per_cycle']:.2f} tokens per cycle"
    )
    g = r["gas"]
    print(
        f"per generated token: {g['cycle_txs_per_token']:.3f} cycle txs, {g['cycle_gas_per_token']:,.0f} cycle gas; "
        f"whole job {g['job_txs_per_token']:.3f} txs, {g['job_gas_per_token']:,.0f} gas; "
        f"{g['gas_per_cycle']:,.0f} gas per cycle (commit + verify)"
    )
    print()
    print(
        f"what a job costs (mean per job, anvil gas price {g['anvil_gas_price_wei'] / 1e9:.3f} gwei, "
        "wei = gasUsed × "
        "effectiveGasPrice):"
    )
    for k, v in g["job_cost"].items():
        note = f"  (one per party for all {c['repeats']} jobs, divided among them)" if k == "withdrawals" else ""
        print(f"  {k:<14} {fmt_gas(v)}{note}")
    d = r["dispute"]
    if d:
        print(
            f"what a dispute costs ({d['kind']} on job {d['job_id']} cycle/index {d['position']}, outcome "
            f"{d['outcome']}, {d['wall_s']:.1f} s wall):"
        )
        for k, v in d["cost"].items():
            print(f"  {k:<14} {fmt_gas(v)}")
    t = r["time"]
    rv = r.get("reverted_node_txs") or []
    print(
        f"node transactions that reverted on chain (lost races): {len(rv)}"
        + (f" ({', '.join(x['node'] + ' ' + x['key'] for x in rv)}; {sum(x['gas'] for x in rv):,} gas)" if rv else "")
    )
    print(
        f"submission -> last cycle {t['submission_to_last_cycle_s']:.2f} s wall; + challenge window "
        f"{t['challenge_window_s']} s ({t['challenge_window_s'] / 3600:.0f} h) -> finalizable after "
        f"{t['submission_to_finalizable_s']:.0f} s; finalized by the {t['finalized_by']} "
        f"{t['finalize_wall_after_window_s']:.1f} s (wall) after anvil's clock passed the window"
    )
    b = r["breakdown"]
    print()
    print("critical path per cycle (median ms): " + "; ".join(f"{k} {v:.1f}" for k, v in b["cycle_legs_ms"].items()))
    print()
    cats = list(b["drafter"]["ms_per_cycle"])
    print("| ms | " + " | ".join(cats) + " | sum |")
    print("|---" * (len(cats) + 2) + "|")
    for role in ("drafter", "verifier"):
        for unit, key in (("per cycle", "ms_per_cycle"), ("per own turn", "ms_per_turn")):
            row = b[role][key]
            print(f"| {role} {unit} | " + " | ".join(f"{row[k]:.2f}" for k in cats) + f" | {sum(row.values()):.2f} |")
    for role in ("drafter", "verifier"):
        for unit in ("turn", "cycle"):
            calls, ms = b[role][f"rpc_calls_per_{unit}"], b[role][f"rpc_ms_per_{unit}"]
            print(
                f"{role} RPCs per {unit}: "
                + ", ".join(f"{k} {calls.get(k, 0):.1f} ({v:.2f} ms)" for k, v in ms.items())
            )
        print(
            f"{role} store writes per turn: "
            + ", ".join(f"{k} {v:.1f}" for k, v in b[role]["store_writes_per_turn"].items())
            + "; per cycle: "
            + ", ".join(f"{k} {v:.1f}" for k, v in b[role]["store_writes_per_cycle"].items())
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--tokens", type=int, default=64, help="maxTokens of each job (no EOS: exactly this many)")
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument(
        "--pair",
        default=None,
        help="model pair: smol | tiny (node/decoding/pairs.py; default: $VERISPEC_PAIR, else smol)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="jobs, one after another (medians are reported)")
    parser.add_argument("--engine-runs", type=int, default=3, help="engine runs right before and after each job")
    parser.add_argument("--nodes", choices=["processes", "threads"], default="processes")
    parser.add_argument("--poll-interval", type=float, default=None, help="the nodes' poll interval (node default)")
    parser.add_argument(
        "--active-poll-interval",
        type=float,
        default=None,
        help="the nodes' poll interval while a job is in progress (node default)",
    )
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per process")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--no-dispute", action="store_true", help="skip the dispute (and the referee nodes)")
    parser.add_argument(
        "--no-speculate",
        action="store_true",
        help="the verifier does not verify the expected draft ahead (VerifierNode(speculate=False))",
    )
    parser.add_argument(
        "--profile",
        default=None,
        metavar="DIR",
        help="(--nodes processes) write a cProfile of each node process's loop to DIR/<role><n>.prof",
    )
    parser.add_argument(
        "--mode",
        choices=["transcript", "onchain", "both"],
        default="both",
        help="transcript (v2: cycles over the link), onchain (per cycle), or both side by side",
    )
    parser.add_argument(
        "--block-time",
        default="0,1,12",
        help="comma-separated block times in s (0: a block per transaction); each mode runs at each",
    )
    parser.add_argument(
        "--slow-tokens",
        type=int,
        default=8,
        help=f"per-cycle rows at b > 0 s blocks decode min(--tokens, max(this, {ONCHAIN_BLOCKS_BUDGET}/b)) tokens",
    )
    parser.add_argument(
        "--concurrent",
        type=int,
        default=0,
        metavar="K",
        help="also: K transcript jobs at once, one verifier (at the first block time); tokens/s per job and in total",
    )
    parser.add_argument("--job-timeout", type=float, default=300.0)
    parser.add_argument("--finalize-timeout", type=float, default=20.0)
    for hidden in ("--_serve", "--_indices", "--_rpc", "--_deployment", "--_store", "--_stats", "--_listen"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        from node.chain.anvil import check_block_time

        block_times = [check_block_time(x) for x in args.block_time.split(",")]
    except ValueError as exc:
        parser.error(str(exc))
    if args.concurrent and args.concurrent < 2:
        parser.error("--concurrent K wants K >= 2 jobs")
    from node.decoding.pairs import PairError

    try:
        args.pair = use_pair(args.pair)
    except PairError as exc:
        parser.error(str(exc))
    os.environ.setdefault(SALT_ENV, str(BENCH_SALT))  # the node processes inherit it
    if args.no_speculate:
        os.environ[NO_SPECULATE_ENV] = "1"
    if args._serve:
        serve(args)
        return 0
    import logging

    logging.basicConfig(level=logging.ERROR)
    modes = ["transcript", "onchain"] if args.mode == "both" else [args.mode]
    if modes == ["onchain"] and block_times == [0] and not args.concurrent:  # the per-cycle report, in detail
        args.block_time_s = 0
        report = run(args)
        if args.json:
            print(json.dumps(report, indent=1, default=str))
        else:
            print_table(report)
        return 0
    matrix = run_matrix(args, block_times, modes)
    if args.json:
        print(json.dumps(matrix, indent=1, default=str))
    else:
        print_matrix(matrix, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
