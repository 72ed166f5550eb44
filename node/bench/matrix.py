"""scripts/bench_e2e.py's table: each mode (per cycle, transcript) at each block time on a fresh anvil, one row
each; and, with --concurrent K, K transcript jobs at once on one verifier."""

from __future__ import annotations

import argparse
import sys

from node.bench.harness import machine_load
from node.bench.onchain import run_onchain
from node.bench.transcript import run_transcript

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
                report = run_onchain(a)
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
