"""Load benchmark: many concurrent jobs on one anvil, served by several drafters, verifiers and referees.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_load.py --pair tiny --jobs 20 --tokens 32   # transcript mode
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_load.py --pair tiny --jobs 20 --mode onchain
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_load.py --pair tiny --jobs 20 --mode both   # one after the other
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_load.py --pair tiny --jobs 20 --block-time 1 --json

One fresh anvil (node.chain.anvil.running_anvil: deployed and registered with instant mining, then `--block-time`
b s between blocks when b > 0), `--drafters` (3) drafters (dev accounts 2, 3, 4), `--verifiers` (3) verifiers (5,
6, 7; each with its transcript link on loopback, `serve verifier --listen`) and `--referees` (5) referees (8...12),
every one a real `verispec serve` OS process (node.processes: its own interpreter, torch, models, store and RPC
connection, `--threads 1`). A requester in this process (dev account 1) then runs two phases on the same nodes (for
`--mode both`: the transcript mode's two, then the per-cycle mode's):

  * alone: one job, nothing else running;
  * concurrent: `--jobs` (20) jobs submitted at once (all transactions sent before any receipt is read), job k
    served by drafter k mod D and verifier (k + k div D) mod V, so that every drafter meets every verifier.

Each job runs to the end of its life: decoding, its settlement (transcript) or last cycle (per cycle), the
challenge window passed (evm_increaseTime) and its finalization by the nodes. The requester sees a job's progress
as a user would: in transcript mode (the default) through each verifier's token stream (node.link.requester,
bench_e2e.follow_streams), in per-cycle mode (`--mode onchain`) as `CycleVerified` logs arriving (eth_getLogs every
50 ms). One table, both phases side by side:

  jobs/min (jobs ÷ the phase's wall time, first submit sent -> last token), tokens/s in total (all tokens ÷ that
  wall time) and per job (a job's tokens ÷ its submit sent -> its last token; p50 and min), cycle latency p50 /
  p99 (the gap between two consecutive cycles of a job as the requester sees them), TTFT p50 (submit sent ->
  first cycle), stalls (a job with a gap of more than `--stall-s` s without progress, or unfinished at
  `--job-timeout`), reverted node transactions (every node's store, receipts read back: lost races), and slashes
  of honest parties (every party here is honest: any `Slashed` or `AlphaSlashed` event is one).

Outputs are spot-checked: the first and the last job of each phase are re-run by the engine in this process
(SpeculativeDecoder with the job's id, verifier seed and the drafter's salt from chain data) and must equal what
the chain recorded token for token. `--json` prints the report as one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import pathlib
import re
import statistics
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import bench_e2e as e2e  # noqa: E402  (the end-to-end benchmark's chain helpers, engine set-up and stream follower)

from node.chain.enums import NO_EOS, JobStatus, Role  # noqa: E402

REQUESTER = 1
FIRST_NODE_ACCOUNT = 2  # drafters, then verifiers, then referees, in dev-account order
WAD, STAKE = 10**18, 5 * 10**18
PRICE_ACCEPTED, PRICE_PASS = 10**12, 3 * 10**12
ROLE_ORDER = ("drafter", "verifier", "referee", "watchdog")  # a watchdog stakes nothing: it bonds each dispute


# ====================================================================== the world: anvil, contracts, serve processes


class World:
    """A deployed anvil with registered parties served by `verispec serve` processes (`rpc_for` lets a caller put
    something between the nodes and the chain, e.g. the soak's fault proxy)."""

    def __init__(self, anvil_url: str, tmp: pathlib.Path, counts: dict[str, int], artifacts, ids, vocab: int):
        from node.chain.deploy import deploy_system
        from node.chain.deployment import Deployment
        from node.chain.rpc import connect

        self.url, self.tmp, self.ids, self.vocab = anvil_url, tmp, ids, vocab
        self.w3, self.rpc = connect(anvil_url), e2e.Rpc(anvil_url)
        self.accounts = self.w3.eth.accounts
        self.start_block = self.w3.eth.block_number + 1
        self.system = deploy_system(self.w3, self.accounts[0], artifacts=artifacts)
        self.market, self.params = self.system.market, self.system.params
        self.parties: dict[str, list[int]] = {}
        index = FIRST_NODE_ACCOUNT
        for role in ROLE_ORDER:
            self.parties[role] = list(range(index, index + counts.get(role, 0)))
            index += counts.get(role, 0)
        if index > len(self.accounts):
            raise SystemExit(f"error: {index} dev accounts needed, the anvil has {len(self.accounts)}")
        self.home = tmp / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.deployment = Deployment.of_system(self.w3, self.system, anvil_url, self.start_block)
        self.deployment.save(self.home / "deployment.json")
        self.nodes = None
        self.endpoints: dict[int, str] = {}

    def register(self, role: str, dev: int) -> None:
        reg = self.system.registry.functions
        who = self.accounts[dev]
        if role == "drafter":
            self.rpc.send(reg.registerDrafter(self.ids["draft"], self.ids["target"], WAD // 2, self.vocab), who, STAKE)
        elif role == "verifier":
            self.rpc.send(reg.register(Role.Verifier, [self.ids["target"]], [self.vocab]), who, STAKE)
        else:
            models = [self.ids["draft"], self.ids["target"]]
            self.rpc.send(reg.register(Role.Referee, models, [self.vocab] * 2), who, self.params.min_referee_stake)

    def register_all(self) -> None:
        for role in ROLE_ORDER[:3]:
            for dev in self.parties[role]:
                self.register(role, dev)

    def serve_args(self, role: str, dev: int, rpc_url: str | None = None, behavior: str | None = None) -> list:
        """`serve ROLE`'s options for dev account `dev`: its store in the run's folder, one torch thread, a 0.2 s
        poll; a verifier listens on a free loopback port."""
        from node.chain.anvil import free_port

        args = ["--dev-account", dev, "--home", self.home, "--store", self.tmp / f"{role}{dev}.db"]
        args += ["--device", "cpu", "--threads", "1", "--poll-interval", "0.2"]
        if rpc_url:
            args += ["--rpc", rpc_url]
        if role == "verifier":
            args += ["--listen", f"127.0.0.1:{free_port()}"]
        if behavior and behavior != "honest":
            args += ["--behavior", behavior]
        return args

    def start_nodes(
        self, rpc_url: str | None = None, behaviors: dict | None = None, extra: dict | None = None, timeout=600
    ):
        """Every party as a `serve` process (`behaviors`, `extra`: a dev account's --behavior and further options);
        waits until each serves and every verifier's endpoint is on chain."""
        from node import processes

        behaviors, extra = behaviors or {}, extra or {}
        self.nodes = processes.NodeProcesses(self.tmp / "logs")
        for role in ROLE_ORDER:
            for dev in self.parties[role]:
                args = [*self.serve_args(role, dev, rpc_url, behaviors.get(dev)), *extra.get(dev, ())]
                self.nodes.start(f"{role}{dev}", processes.serve_command(role, *args))
        self.nodes.wait_ready(timeout=timeout, marker="serving on")
        self.wait_endpoints(timeout)

    def wait_endpoints(self, timeout: float = 120) -> None:
        from node.link.chain import EndpointError, endpoint_of

        def published(dev):
            try:
                return endpoint_of(self.system.registry, self.accounts[dev])
            except EndpointError:
                return None

        for dev in self.parties["verifier"]:
            self.endpoints[dev] = e2e.wait_until(lambda dev=dev: published(dev), timeout, what=f"verifier {dev} link")

    def stop_nodes(self) -> dict[str, int]:
        return self.nodes.stop_all(timeout=30) if self.nodes else {}

    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, (proc, _, _) in self.nodes.procs.items()}

    def request(self, drafter: int, verifier: int, gamma: int, tokens: int, temperature: float = 1.0) -> dict:
        return dict(
            draftModel=self.ids["draft"],
            targetModel=self.ids["target"],
            drafter=self.accounts[drafter],
            verifier=self.accounts[verifier],
            gamma=gamma,
            temperature=round(temperature * WAD),
            topK=0,
            topP=WAD,
            maxTokens=tokens,
            eosToken=NO_EOS,
            pricePerAcceptedToken=PRICE_ACCEPTED,
            pricePerPass=PRICE_PASS,
        )

    def submit_many(self, mode: str, requests: list[dict], prompt: str, sender: int = REQUESTER) -> list[tuple]:
        """Send every job's submit transaction before reading any receipt: [(job id, send time, receipt)].

        A job's clock starts when its transaction is sent, as the requester's would: reading the receipts takes
        RPC round trips, and under load a short job's cycles were seen before its receipt was (a negative tok/s)."""
        market = self.market.functions
        submit = market.submitTranscriptJob if mode == "transcript" else market.submitJob
        frm = self.accounts[sender]
        sent = []
        for r in requests:
            at = time.monotonic()
            value = r["maxTokens"] * (PRICE_ACCEPTED + PRICE_PASS)
            sent.append((at, submit(r, prompt.encode()).transact({"from": frm, "value": value})))
        out = []
        for at, tx in sent:
            receipt = self.rpc.receipt("0x" + bytes(tx).hex())
            if int(receipt["status"], 16) != 1:
                raise RuntimeError("a submit reverted")
            out.append((self.job_of(receipt), at, receipt))
        return out

    def job_of(self, receipt: dict) -> int:
        """The job id a submit receipt created (its JobSubmitted log)."""
        from web3.logs import DISCARD

        formatted = self.w3.eth.get_transaction_receipt(receipt["transactionHash"])
        return self.market.events.JobSubmitted().process_receipt(formatted, errors=DISCARD)[0]["args"]["jobId"]

    def status(self, job_id: int) -> int:
        return self.market.functions.jobStatus(job_id).call()

    def pass_windows(self, seconds: int | None = None) -> None:
        seconds = seconds if seconds is not None else self.params.challenge_window + 1
        self.rpc("evm_increaseTime", seconds)
        self.rpc("evm_mine")

    def slashes(self, from_block: int, to_block="latest") -> list[dict]:
        """Every `Slashed` (registry), `AlphaSlashed` (market) event and `JobFinished` with a slash in the range."""
        out = []
        for log in self.market.events.JobFinished().get_logs(from_block=from_block, to_block=to_block):
            if log["args"]["slashed"]:
                who, amount = log["args"]["party"], log["args"]["slashed"]
                out.append({"event": "JobFinished", "account": who, "amount": amount, "block": log["blockNumber"]})
        for event in (self.system.registry.events.Slashed, self.market.events.AlphaSlashed):
            for log in event().get_logs(from_block=from_block, to_block=to_block):
                args = dict(log["args"])
                who = args.get("account") or args.get("drafter")
                out.append(
                    {"event": log["event"], "account": who, "amount": int(args["amount"]), "block": log["blockNumber"]}
                )
                if "by" in args:
                    out[-1]["by"] = args["by"]
        return out


# ====================================================================== following progress


class CycleWatch(threading.Thread):
    """Per-cycle mode: when each `CycleVerified` log is first seen (eth_getLogs every `interval` s), by job."""

    def __init__(self, world: World, interval: float = 0.05):
        super().__init__(daemon=True, name="cycle-watch")
        from node.chain.rpc import connect

        self.w3 = connect(world.url)
        self.event = world.deployment.system(self.w3).market.events.CycleVerified
        self.next_block, self.interval = world.w3.eth.block_number, interval
        self.frames: dict[int, list] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.poll()
            self.stopped.wait(self.interval)

    def poll(self) -> None:
        head = self.w3.eth.block_number
        if head >= self.next_block:
            logs = self.event().get_logs(from_block=self.next_block, to_block=head)
            now = time.monotonic()
            for log in sorted(logs, key=lambda x: (x["blockNumber"], x["logIndex"])):
                self.frames.setdefault(log["args"]["jobId"], []).append((now, log["args"]["cycle"]))
            self.next_block = head + 1

    def stop(self) -> None:
        """Stop, then read the blocks mined since the last poll: a job's last cycles can land between the thread's
        last poll and the moment its status reads Finished (a job then showed fewer cycles than it ran)."""
        self.stopped.set()
        self.join(timeout=10)
        if not self.is_alive():
            self.poll()


def follow_transcripts(world: World, jobs: dict[int, int], timeout: float) -> dict[int, list]:
    """Transcript mode: each job's token stream from its verifier's link; {job: [(arrival time, cycle)]}."""

    async def all_streams():
        by_verifier: dict[int, list[int]] = {}
        for job_id, verifier in jobs.items():
            by_verifier.setdefault(verifier, []).append(job_id)
        results = await asyncio.gather(
            *(e2e.follow_streams(world.endpoints[v], ids, timeout) for v, ids in by_verifier.items()),
            return_exceptions=True,
        )
        frames = {}
        for result in results:
            if isinstance(result, BaseException):
                continue  # a stream that failed: those jobs show as stalled (no frames)
            for job_id, stream in result.items():
                frames[job_id] = [(t, cycle) for t, cycle, _ in stream["frames"]]
        return frames

    return asyncio.run(all_streams())


# ====================================================================== one phase


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank: an observed latency, not an interpolation)."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q / 100 * len(values) + 0.5) - 1))]


def output_of(world: World, mode: str, job_id: int, tokens: int) -> tuple[list[int], int]:
    """(the job's output tokens, the drafter's salt), from chain data."""
    from node.chain.transcript import read_settlement
    from node.jobs import chaindata

    if mode == "transcript":
        settled = read_settlement(world.w3, world.system.transcript, job_id, world.start_block)
        return settled.output(NO_EOS, tokens), settled.salt
    system = world.system
    return (
        chaindata.output_tokens(system, job_id, from_block=world.start_block),
        chaindata.job_salt(system, job_id, from_block=world.start_block),
    )


def run_phase(world: World, args, mode: str, n_jobs: int, decoder, prompt_ids) -> dict:
    """`n_jobs` jobs of `mode` submitted at once, followed to their finalization; the phase's row."""
    from node.chain.keys import dev_account
    from node.jobs.sessions import verifier_seed

    drafters, verifiers = world.parties["drafter"], world.parties["verifier"]
    assign = [
        (drafters[k % len(drafters)], verifiers[(k + k // len(drafters)) % len(verifiers)]) for k in range(n_jobs)
    ]
    requests = [world.request(d, v, args.gamma, args.tokens) for d, v in assign]
    phase_block = world.w3.eth.block_number + 1
    watch = CycleWatch(world) if mode == "onchain" else None
    if watch:
        watch.start()
    submitted = world.submit_many(mode, requests, args.prompt)
    t_submit = {job_id: t for job_id, t, _ in submitted}
    job_ids = [job_id for job_id, _, _ in submitted]
    verifier_of = {job_id: v for job_id, (_, v) in zip(job_ids, assign)}
    deadline = time.monotonic() + args.job_timeout
    if mode == "transcript":
        frames = follow_transcripts(world, verifier_of, args.job_timeout)
    with contextlib.suppress(TimeoutError):
        e2e.wait_until(
            lambda: all(world.status(j) >= JobStatus.Finished for j in job_ids),
            max(1.0, deadline - time.monotonic()),
            interval=0.1,
        )
    if watch:
        watch.stop()
        frames = {j: watch.frames.get(j, []) for j in job_ids}
    if args.block_time:  # decoding measured: the rest of the jobs' lives on instant mining
        e2e.set_mining(world.url, 0)
    world.pass_windows()
    finalized_by_nodes = True
    try:
        e2e.wait_until(lambda: all(world.status(j) == JobStatus.Finalized for j in job_ids), args.finalize_timeout, 0.2)
    except TimeoutError:
        finalized_by_nodes = False
    if args.block_time:
        e2e.set_mining(world.url, args.block_time)
    jobs, gaps = [], []
    for j in job_ids:
        times = [t for t, _ in sorted(frames.get(j, []), key=lambda f: f[1])]
        output, _ = output_of(world, mode, j, args.tokens) if world.status(j) >= JobStatus.Finished else ([], 0)
        job_gaps = [b - a for a, b in itertools.pairwise(times)]
        gaps += job_gaps
        end = times[-1] if times else float("nan")
        longest = max([times[0] - t_submit[j], *job_gaps]) if times else float("inf")
        jobs.append(
            {
                "job_id": j,
                "cycles": len(times),
                "tokens": len(output),
                "status": JobStatus(world.status(j)).name,
                "tok_s": len(output) / (end - t_submit[j]) if times else 0.0,
                "ttft_s": times[0] - t_submit[j] if times else None,
                "longest_wait_s": longest,
                "stalled": longest > args.stall_s or len(output) != args.tokens,
                "t_end": end,
            }
        )
    first = min(t_submit.values())
    last = max((j["t_end"] for j in jobs if j["cycles"]), default=first)
    wall = max(last - first, 1e-9)
    spot = job_ids if args.check_all else sorted({job_ids[0], job_ids[-1]})
    checks, mismatches = {}, {}
    for j in spot:
        output, salt = output_of(world, mode, j, args.tokens)
        seed = verifier_seed(dev_account(verifier_of[j]).key, j)
        engine = decoder.generate(prompt_ids, args.tokens, job_id=j, verifier_seed=seed, eos_token_id=None, salt=salt)
        checks[j] = output == engine.tokens
        if not checks[j]:
            at = next((i for i, (x, y) in enumerate(zip(output, engine.tokens)) if x != y), min(len(output), 10**9))
            mismatches[j] = {
                "first_difference": at,
                "chain": output,
                "engine": engine.tokens,
                "pair": assign[job_ids.index(j)],
            }
    reverted = [
        r for r in e2e.reverted_node_txs(world.rpc, world.tmp) if _job_of(r["key"]) in set(job_ids)
    ]  # this phase's jobs (the stores hold both phases)
    per_job = [j["tok_s"] for j in jobs]
    return {
        "jobs": n_jobs,
        "wall_s": wall,
        "jobs_per_min": 60 * sum(j["status"] == "Finalized" for j in jobs) / wall,
        "total_tok_s": sum(j["tokens"] for j in jobs) / wall,
        "per_job_tok_s_p50": statistics.median(per_job),
        "per_job_tok_s_min": min(per_job),
        "cycle_latency_p50_s": percentile(gaps, 50),
        "cycle_latency_p99_s": percentile(gaps, 99),
        "ttft_p50_s": statistics.median([j["ttft_s"] for j in jobs if j["ttft_s"] is not None] or [float("nan")]),
        "cycles": len(gaps) + sum(1 for j in jobs if j["cycles"]),
        "stalled": [j["job_id"] for j in jobs if j["stalled"]],
        "all_finalized": all(j["status"] == "Finalized" for j in jobs),
        "finalized_by_nodes": finalized_by_nodes,
        "reverted_node_txs": reverted,
        "honest_slashes": world.slashes(phase_block),
        "outputs_equal_engine": checks,
        "engine_mismatches": mismatches,
        "per_job": jobs,
    }


def _job_of(key: str) -> int | None:
    match = re.search(r"job:(\d+)", key)
    return int(match.group(1)) if match else None


# ====================================================================== the run


def run(args) -> dict:
    from node.chain.anvil import running_anvil
    from node.chain.compile import compile_contracts

    device, _, prompt_ids, ids, decoder = e2e._engine(args)
    artifacts = compile_contracts()
    counts = {"drafter": args.drafters, "verifier": args.verifiers, "referee": args.referees}
    report = {
        "config": {
            "modes": args.modes,
            "pair": args.pair,
            "tokens": args.tokens,
            "gamma": args.gamma,
            "jobs": args.jobs,
            "block_time_s": args.block_time,
            "nodes": {**counts, "as": "verispec serve processes, --threads 1 each"},
            "stall_s": args.stall_s,
            "device": str(device),
        },
        "machine_before": e2e.machine_load(),
    }
    accounts = FIRST_NODE_ACCOUNT + sum(counts.values())
    with running_anvil(accounts=max(20, accounts)) as anvil, tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        world = World(anvil.rpc_url, pathlib.Path(tmp), counts, artifacts, ids, e2e.VOCAB)
        world.register_all()
        decoder.generate(prompt_ids, min(args.tokens, 8), job_id=10**9, verifier_seed=bytes(32))  # warm-up
        started = time.monotonic()
        world.start_nodes()
        report["config"]["node_start_s"] = time.monotonic() - started
        try:
            if args.block_time:
                e2e.set_mining(anvil.rpc_url, args.block_time)
            for mode in args.modes:  # the same nodes serve both modes, one after the other
                report[mode] = {
                    "alone": run_phase(world, args, mode, 1, decoder, prompt_ids),
                    "concurrent": run_phase(world, args, mode, args.jobs, decoder, prompt_ids),
                }
        finally:
            codes = world.stop_nodes()
        report["node_exit_codes"] = codes
    report["machine_after"] = e2e.machine_load()
    return report


def print_table(r: dict) -> None:
    c = r["config"]
    n = c["nodes"]
    print(
        f"load: pair {c['pair']}, {c['tokens']} tokens a job, γ = {c['gamma']}, {c['block_time_s']} s blocks; "
        f"{n['drafter']} drafters, {n['verifier']} verifiers, {n['referee']} referees ({n['as']}; started in "
        f"{c['node_start_s']:.0f} s); load average {fmt_load(r['machine_before'])} -> {fmt_load(r['machine_after'])} "
        f"on {r['machine_after']['cpus']} CPUs"
    )
    rows = [
        ("jobs", "{:d}", "jobs"),
        ("jobs/min", "{:.1f}", "jobs_per_min"),
        ("tokens/s in total", "{:.1f}", "total_tok_s"),
        ("tokens/s per job, p50", "{:.1f}", "per_job_tok_s_p50"),
        ("tokens/s per job, min", "{:.1f}", "per_job_tok_s_min"),
        ("cycle latency p50 (s)", "{:.3f}", "cycle_latency_p50_s"),
        ("cycle latency p99 (s)", "{:.3f}", "cycle_latency_p99_s"),
        ("TTFT p50 (s)", "{:.2f}", "ttft_p50_s"),
        ("wall (s)", "{:.1f}", "wall_s"),
    ]
    phases = [(m, p, r[m][p]) for m in c["modes"] for p in ("alone", "concurrent")]
    names = {"transcript": "transcript", "onchain": "per cycle"}
    head = [f"{names[m]}: {'alone' if p == 'alone' else str(x['jobs']) + ' concurrent'}" for m, p, x in phases]
    print(f"\n| | {' | '.join(head)} |\n|---|{'---:|' * len(head)}")
    for label, fmt, key in rows:
        print(f"| {label} | {' | '.join(fmt.format(x[key]) for _, _, x in phases)} |")
    for label, fn in (
        (f"stalls (> {c['stall_s']:g} s without progress)", lambda p: len(p["stalled"])),
        ("reverted node txs", lambda p: len(p["reverted_node_txs"])),
        ("slashes of honest parties", lambda p: len(p["honest_slashes"])),
        ("all finalized (by the nodes)", lambda p: "yes" if p["all_finalized"] and p["finalized_by_nodes"] else "NO"),
        ("outputs = engine (spot check)", lambda p: "yes" if all(p["outputs_equal_engine"].values()) else "NO"),
    ):
        print(f"| {label} | {' | '.join(str(fn(x)) for _, _, x in phases)} |")


def fmt_load(machine: dict) -> str:
    return " / ".join(f"{x:.1f}" for x in machine["loadavg_1_5_15"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument(
        "--mode", choices=["transcript", "onchain", "both"], default="transcript", help="both: one after the other"
    )
    parser.add_argument("--jobs", type=int, default=20, help="concurrent jobs of the second phase")
    parser.add_argument("--tokens", type=int, default=32, help="maxTokens of each job (no EOS: exactly this many)")
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--pair", default=None, help="smol | tiny (default: $VERISPEC_PAIR, else smol)")
    parser.add_argument("--drafters", type=int, default=3)
    parser.add_argument("--verifiers", type=int, default=3)
    parser.add_argument("--referees", type=int, default=5)
    parser.add_argument("--block-time", type=int, default=0, help="seconds between blocks (0: a block per tx)")
    parser.add_argument("--stall-s", type=float, default=30.0, help="a job this long without progress stalled")
    parser.add_argument("--job-timeout", type=float, default=900.0)
    parser.add_argument("--finalize-timeout", type=float, default=120.0)
    parser.add_argument("--prompt", default=e2e.DEFAULT_PROMPT)
    parser.add_argument("--check-all", action="store_true", help="re-run every job on the engine, not two a phase")
    args = parser.parse_args(argv)
    args.modes = ["transcript", "onchain"] if args.mode == "both" else [args.mode]
    if args.jobs < 1 or args.tokens < 1 or min(args.drafters, args.verifiers) < 1 or args.referees < 0:
        parser.error("--jobs, --tokens, --drafters and --verifiers must be positive, --referees not negative")
    from node.chain.anvil import check_block_time
    from node.decoding.pairs import PairError

    try:
        args.block_time = check_block_time(str(args.block_time))
        args.pair = e2e.use_pair(args.pair)
    except (ValueError, PairError) as exc:
        parser.error(str(exc))
    # the engine's settings bench_e2e._engine reads
    args.threads, args.device, args.temperature, args.top_k, args.top_p = 1, "cpu", 1.0, 0, 1.0
    import logging

    logging.basicConfig(level=logging.ERROR)
    report = run(args)
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print_table(report)
    phases = [report[m][p] for m in args.modes for p in ("alone", "concurrent")]
    ok = all(not p["stalled"] and not p["honest_slashes"] and p["all_finalized"] for p in phases)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
