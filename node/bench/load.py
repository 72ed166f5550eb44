"""The load run (scripts/bench_load.py): many concurrent jobs on one anvil served by several drafters, verifiers and
referees (node.bench.world), in two phases per mode (one job alone, then `--jobs` at once), and its table."""

from __future__ import annotations

import contextlib
import itertools
import pathlib
import re
import statistics
import tempfile
import time

from node.bench.harness import bench_pair, build_engine, machine_load, reverted_node_txs, set_mining, wait_until
from node.bench.world import FIRST_NODE_ACCOUNT, CycleWatch, World, follow_transcripts
from node.chain.enums import NO_EOS, JobStatus


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
        wait_until(
            lambda: all(world.status(j) >= JobStatus.Finished for j in job_ids),
            max(1.0, deadline - time.monotonic()),
            interval=0.1,
        )
    if watch:
        watch.stop()
        frames = {j: watch.frames.get(j, []) for j in job_ids}
    if args.block_time:  # decoding measured: the rest of the jobs' lives on instant mining
        set_mining(world.url, 0)
    world.pass_windows()
    finalized_by_nodes = True
    try:
        wait_until(lambda: all(world.status(j) == JobStatus.Finalized for j in job_ids), args.finalize_timeout, 0.2)
    except TimeoutError:
        finalized_by_nodes = False
    if args.block_time:
        set_mining(world.url, args.block_time)
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
        r for r in reverted_node_txs(world.rpc, world.tmp) if job_in_key(r["key"]) in set(job_ids)
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


def job_in_key(key: str) -> int | None:
    """The job a node transaction's idempotency key names (`job:<id>:...`), None for another key."""
    match = re.search(r"job:(\d+)", key)
    return int(match.group(1)) if match else None


def run_load(args) -> dict:
    """The load run: one anvil, the nodes, then each of `args.modes`' two phases (one job alone, then `args.jobs`
    at once)."""
    from node.chain.anvil import running_anvil
    from node.chain.compile import compile_contracts

    device, _, prompt_ids, ids, decoder = build_engine(args)
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
        "machine_before": machine_load(),
    }
    accounts = FIRST_NODE_ACCOUNT + sum(counts.values())
    with running_anvil(accounts=max(20, accounts)) as anvil, tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        per_drafter = -(-max(args.jobs, 1) // max(counts["drafter"], 1))  # run_phase deals the jobs round robin
        world = World(anvil.rpc_url, pathlib.Path(tmp), counts, artifacts, ids, bench_pair().vocab, per_drafter)
        world.register_all()
        decoder.generate(prompt_ids, min(args.tokens, 8), job_id=10**9, verifier_seed=bytes(32))  # warm-up
        started = time.monotonic()
        world.start_nodes()
        report["config"]["node_start_s"] = time.monotonic() - started
        try:
            if args.block_time:
                set_mining(anvil.rpc_url, args.block_time)
            for mode in args.modes:  # the same nodes serve both modes, one after the other
                report[mode] = {
                    "alone": run_phase(world, args, mode, 1, decoder, prompt_ids),
                    "concurrent": run_phase(world, args, mode, args.jobs, decoder, prompt_ids),
                }
        finally:
            codes = world.stop_nodes()
        report["node_exit_codes"] = codes
    report["machine_after"] = machine_load()
    return report


def print_load_table(r: dict) -> None:
    """The load run's table: both phases of every mode side by side."""
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
