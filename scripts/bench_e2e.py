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
submit to finalize; withdrawals apart) and gas per token. The per-cycle mode is the report below
(node.bench.onchain); the transcript mode (node.bench.transcript, protocol v2) has the verifier serve its link on
loopback (`serve verifier --listen`: node.cli_transcript.start_link, endpoint published in the registry), the
drafter node run the job over it and settle it, and a requester in this process follow the token stream
(node.link.requester.stream_tokens). At b > 0 what the requester sees is timed when the block holding it arrives
(node.bench.harness.HeadWatch, eth_blockNumber every 10 ms); once the decoding is measured the chain goes back to
instant mining, so settlement, finalize and withdrawals are
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
import json
import logging
import os
import sys

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # before transformers is imported (and inherited)
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from node.bench.harness import BENCH_SALT, DEFAULT_PROMPT, NO_SPECULATE_ENV, SALT_ENV, use_pair
from node.bench.matrix import ONCHAIN_BLOCKS_BUDGET, run_matrix
from node.bench.onchain import run_onchain
from node.chain.anvil import check_block_time
from node.decoding.pairs import PairError


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
    args = parser.parse_args(argv)
    try:
        block_times = [check_block_time(x) for x in args.block_time.split(",")]
    except ValueError as exc:
        parser.error(str(exc))
    if args.concurrent and args.concurrent < 2:
        parser.error("--concurrent K wants K >= 2 jobs")
    try:
        args.pair = use_pair(args.pair)
    except PairError as exc:
        parser.error(str(exc))
    os.environ.setdefault(SALT_ENV, str(BENCH_SALT))  # the node processes inherit it
    if args.no_speculate:
        os.environ[NO_SPECULATE_ENV] = "1"
    logging.basicConfig(level=logging.ERROR)
    modes = ["transcript", "onchain"] if args.mode == "both" else [args.mode]
    if modes == ["onchain"] and block_times == [0] and not args.concurrent:  # the per-cycle report, in detail
        args.block_time_s = 0
        report = run_onchain(args)
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
