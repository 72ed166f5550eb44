"""Security benchmark of protocol v1.1 (issue 10): griefing, honest false slashes, referee capture, gas.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_security.py                 # full run (traces cached)
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_security.py --quick --json  # the tests' short run

(a) Adversarial-prompt griefing: what a requester spends to push an honest drafter's α window into breach
    (fill N cycles of α-eligible jobs at alpha_price_floor per pass, plus submitJob gas at --gas-price-gwei) against
    what the drafter loses (DeploymentParams.alpha_slash(stake) = min(alpha_slash_bps × stake, alpha_slash_cap), as
    AlphaWindow.alphaSlashAmount), for the requester alone and with its own verifier (which hands the passes back
    less the alpha_fee_bps burnt to the treasury), at stakes 1/2/5/10 ETH, with and without gas.
(b) Honest false-slash rate on real traces: the model pair (--pair: smol by default, or tiny) decodes --prompts
    held-out prompts with the engine (node.decoding.SpeculativeDecoder, reference sampling: temperature 1, top-k 0,
    top-p 1, γ = 4), recording every cycle's accept count n of γ; the traces are cached in --traces. Drafter
    histories are then resampled two ways -- by whole jobs (the window slides by whole jobs:
    contracts/AlphaWindow.sol closes a bucket once it holds ≥ M = alpha_bucket_cycles cycles, and a full window is
    the last 8 buckets) and by i.i.d. cycles (one-cycle jobs: windows of exactly N = 8M cycles) -- and every history
    is run through the contract's window for --horizon cycles after its first full window. Window α̂ = Σaccepted /
    Σ(accepted + rejected), a cycle with n < γ counting one rejection; the drafter is in breach when α̂ < α* − τ.
    Reported: the first full window's α̂ over --windows histories (mean, 0.1/1/5 %), the false-slash rate per
    drafter per --horizon cycles for several claims α*, with a 95 % binomial upper bound, beside the geometric model
    (every proposal accepted with probability α, the traces' pooled α, exact window distribution).
(c) Referee capture, exact (node/security_math.py): P(a coalition with stake share s wins against the truth).
(d) Gas of the changed paths (the cycle, the α update at finalize, the dispute with one appeal), measured with
    node/bench/gas.py's functions and chain (scripts/gas_report.py's) (needs anvil; --no-gas skips it).

Held-out prompts (none of this text was trained on; scripts/train_models.py trains on this Python's standard
library minus its test directories, site-packages and every 10th file): a third each from (1) the training
split's own held-out stdlib files, (2) the stdlib's test directories (test/, idle_test/, tests/), (3) the .py
files of site-packages (third-party code in another style). Prompt i draws its source (i mod 3), file, start
line, length (16..256 tokens) and max tokens (--max-tokens, a list) from random.Random(f"{seed}:{i}"), and
decodes as job i with a verifier seed derived from i; jobs stop at EOS as the CLI's do.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

from node.bench.security import (
    ADVERSARIAL_ALPHA,
    DEFAULT_GAS,
    capture_table,
    collect_traces,
    false_slash,
    griefing,
    strict_json,
)
from node.bench.tables import markdown_table as table
from node.chain.params import DEFAULT_PARAMS
from node.decoding.pairs import PAIRS, PairError, get_pair

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the default trace caches go to ROOT/build


# ------------------------------------------------------------------ (d) gas


def gas_figures() -> dict:
    """The changed paths, measured by node/bench/gas.py's functions (scripts/gas_report.py's) on a fresh anvil
    chain: the γ = 4 cycle (and cycle 0, which commits the drafter's salt), the finishing cycle's extra, finalize of
    a counted job beside an uncounted one (v1.1 records α and pays the α fee there), and the dispute without and with
    one appeal."""
    from web3 import Web3

    from node.bench import gas as gr
    from node.chain.anvil import running_anvil

    with running_anvil() as node:
        w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 60}))
        chain = gr.Chain(w3)
        cycles = {row["gamma"]: row for row in gr.cycle_gas(chain)}
        overhead, finalize = gr.job_overhead(chain)
        dispute = gr.dispute_gas(chain)
        appealed = gr.dispute_gas(chain, appeal=True)
    cycle = cycles[gr.GOAL_GAMMA]
    return dict(
        cycle_gamma=gr.GOAL_GAMMA,
        cycle=cycle["total"],
        commit_draft=cycle["commitDraft"],
        submit_verification=cycle["submitVerification"],
        first_cycle=cycle["firstCycle"]["total"],
        first_commit=cycle["firstCycle"]["commitFirstDraft"],
        cycle_limit=gr.GOAL_GAS,
        cycle_met=cycle["total"] <= gr.GOAL_GAS,
        submit_job=overhead["submitJob"],
        finish_extra=overhead["finishExtra"],
        finalize_counted=finalize["counted"],
        finalize_uncounted=finalize["uncounted"],
        alpha_update=finalize["alphaUpdate"],
        dispute_referees=dispute["referees"],
        dispute_total=dispute["total"],
        appeal_referees=appealed["appealReferees"],
        dispute_with_appeal_total=appealed["total"],
        dispute=dispute,
        dispute_with_appeal=appealed,
    )


# ------------------------------------------------------------------ rendering


def rate(x: float) -> str:
    return "0" if x == 0 else f"{x:.2e}" if x < 0.01 else f"{x:.3f}"


def render(r: dict) -> str:
    out = []
    g = r.get("griefing")
    if g:
        out += [
            f"(a) Adversarial-prompt griefing: attacker spend / honest drafter loss (N = {g['window_cycles']}, "
            f"alpha_price_floor {g['alpha_price_floor_wei']:.3g} wei/cycle, alpha_fee_bps {g['alpha_fee_bps']}, "
            f"alpha_slash_bps {g['alpha_slash_bps']} capped at alpha_slash_cap {g['alpha_slash_cap_wei']:.4g} wei, "
            f"treasury {g['treasury']}; submitJob {g['submit_job_gas']:,} gas at {g['gas_price_gwei']:g} gwei)",
            f"    honest α {g['honest_alpha']:.3f}, adversarial α {g['adversarial_alpha']}, claim α* "
            f"{g['claim']:.3f}: the least share of the window that breaches is {g['breach_share']:.2f}; "
            "alone: the requester pays the passes; colluding: with its own verifier, which returns them less the fee",
            table(
                ["scenario", "cycles", "stake ETH", "price ETH", "burnt ETH", "gas ETH", "loss ETH"]
                + ["factor alone", "factor colluding", "no gas: alone", "no gas: colluding"]
                + ["drafter gas ETH", "alone, incl. drafter gas"],
                [
                    [
                        x["scenario"],
                        f"{x['cycles']:.0f}",
                        f"{x['stake_eth']:g}",
                        f"{x['price_eth']:.3g}",
                        f"{x['burnt_eth']:.3g}",
                        f"{x['gas_eth']:.3g}",
                        f"{x['drafter_loss_eth']:.3g}",
                        f"{x['factor']:.3g}",
                        f"{x['factor_colluding']:.3g}",
                        f"{x['factor_no_gas']:.3g}",
                        f"{x['factor_colluding_no_gas']:.3g}",
                        f"{x['drafter_gas_eth']:.3g}",
                        f"{x['factor_with_drafter_gas']:.3g}",
                    ]
                    for x in g["rows"]
                ],
            ),
            f"worst factor over every stake and scenario: alone {g['worst_factor']:.3g}, colluding "
            f"{g['worst_factor_colluding']:.3g} (goal ≥ 1: {'met' if g['goal_met'] else 'NOT met'}); without gas "
            f"alone {g['worst_factor_no_gas']:.3g}, colluding {g['worst_factor_colluding_no_gas']:.3g}; counting the "
            f"honest drafter's commit gas as a loss, alone {g['worst_factor_with_drafter_gas']:.3g}",
            "",
        ]
    b = r.get("false_slash")
    if b:
        t = b["traces"]
        info = r["traces_info"]
        out += [
            f"(b) Honest false-slash rate on real traces: {t['jobs']} jobs ({info['decoded_jobs']} decoded in "
            f"{info['decode_s']:.0f} s, {info['reused_jobs']} from {info['path']}), {t['cycles']} cycles, "
            f"{t['tokens']} tokens, γ = {b['gamma']}, temperature 1, top-k 0, top-p 1",
            f"    pooled α {t['alpha']:.4f}; per-job α P1 / P50 / P99 {t['job_alpha_p1']:.3f} / "
            f"{t['job_alpha_p50']:.3f} / {t['job_alpha_p99']:.3f}; {t['cycles_per_job']:.1f} cycles per job",
            table(
                ["source", "jobs", "cycles", "α"],
                [[s, str(v["jobs"]), str(v["cycles"]), f"{v['alpha']:.4f}"] for s, v in t["by_source"].items()],
            ),
            table(
                ["n accepted of γ"] + [str(n) for n in range(b["gamma"] + 1)],
                [
                    ["cycles (traces)"] + [str(x) for x in t["accept_histogram"]],
                    ["cycles (geometric at pooled α)"] + [f"{x:.0f}" for x in t["accept_histogram_geometric"]],
                ],
            ),
            "",
            f"    Window α̂ (N = {b['window_cycles']} = 8 × {b['bucket_cycles']}; whole-job buckets close at ≥ "
            f"{b['bucket_cycles']} cycles), first full window of each history",
        ]
        geo = b["geometric"]
        rows = []
        for mode, m in b["resampled"].items():
            d = m["distribution"]
            rows.append(
                [
                    f"resampled by {mode}",
                    str(d["windows"]),
                    f"{d['window_cycles_mean']:.0f}",
                    f"{d['mean']:.4f}",
                    f"{d['sd']:.4f}",
                    f"{d['p0_1']:.4f}",
                    f"{d['p1']:.4f}",
                    f"{d['p5']:.4f}",
                    f"{d['min']:.4f}",
                ]
            )
        rows.append(
            [
                "geometric model (exact)",
                "∞",
                str(b["window_cycles"]),
                f"{geo['mean']:.4f}",
                f"{geo['sd']:.4f}",
                f"{geo['p0_1']:.4f}",
                f"{geo['p1']:.4f}",
                f"{geo['p5']:.4f}",
                "",
            ]
        )
        out += [table(["", "windows", "cycles", "mean", "sd", "P0.1", "P1", "P5", "min"], rows), ""]
        out.append(
            f"    False slashes per drafter per {b['horizon']:,} cycles (every window evaluated from the first full "
            f"one on; breach: α̂ < α* − τ, τ = {b['tau']}; goal ≤ {b['goal_rate']:g}; upper = 95 % binomial bound)"
        )
        rows = []
        geo_by_rule = {c["rule"]: c for c in geo["claims"]}
        first_mode = next(iter(b["resampled"]))
        for i, c in enumerate(b["resampled"][first_mode]["claims"]):
            row = [c["rule"], f"{c['claim']:.3f}"]
            for m in b["resampled"].values():
                x = m["claims"][i]
                row += [f"{x['slashed']}/{x['histories']}", rate(x["rate"]), rate(x["rate_upper95"])]
            gc = geo_by_rule[c["rule"]]
            row += [rate(gc["per_window"]), rate(gc["rate_union_bound"])]
            rows.append(row)
        headers = ["claim rule", "α*"]
        for mode in b["resampled"]:
            headers += [f"{mode}: slashed", "rate", "upper"]
        headers += ["geometric: per window", f"per {b['horizon']:,} (union)"]
        out += [table(headers, rows)]
        rec = b["recommended_claim"]
        evals = {m: v["distribution"]["evaluations_per_history"] for m, v in b["resampled"].items()}
        out += [
            "    windows evaluated per history: "
            + ", ".join(
                f"{m} {e:.0f} ({b['resampled'][m]['distribution']['evaluations']:,} in all)" for m, e in evals.items()
            ),
            f"    recommended claim: α* = {rec['claim']:.3f} ({rec['rule']}); the largest claim whose measured "
            f"rate stays at the goal in both resamplings: {rec['largest_claim_at_goal']:.3f}",
            "",
        ]
    c = r.get("capture")
    if c:
        shares = [f"{s:.1f}" for s in c["shares"]]
        rows = [
            [f"{x['panel']}", f"{x['appeals']}", "→".join(map(str, x["seats"]))]
            + [rate(x["capture"][s]) for s in shares]
            for x in c["rows"]
        ]
        out += [
            "(c) Referee capture: P(a coalition with stake share s wins against the truth), exact binomial "
            "(stake-weighted seats, the coalition split over many accounts); every appeal goes to a fresh panel "
            "of 2m + 1 and the final round decides",
            table(["panel", "appeals", "seats"] + [f"s = {int(float(s) * 100)} %" for s in shares], rows),
            "    if nobody honest ever appeals (the coalition wins by capturing any one round):",
            table(
                ["panel", "appeals"] + [f"s = {int(float(s) * 100)} %" for s in shares],
                [[f"{x['panel']}", f"{x['appeals']}"] + [rate(x["unanswered"][s]) for s in shares] for x in c["rows"]],
            ),
            "",
        ]
    d = r.get("gas")
    if d:
        w, a = d["dispute"], d["dispute_with_appeal"]
        out += [
            "(d) Gas of the changed paths (receipt gasUsed, scripts/gas_report.py's measurements)",
            table(
                ["path", "gas"],
                [
                    [f"cycle γ = {d['cycle_gamma']} (commitDraft + submitVerification)", f"{d['cycle']:,}"],
                    ["cycle 0 (commitFirstDraft, with the salt, + submitVerification)", f"{d['first_cycle']:,}"],
                    ["finishing cycle's extra", f"{d['finish_extra']:,}"],
                    ["finalize, counted job (α window update + α fee)", f"{d['finalize_counted']:,}"],
                    ["finalize, uncounted job (pricePerPass below the floor)", f"{d['finalize_uncounted']:,}"],
                    ["α update at finalize (the difference)", f"{d['alpha_update']:,}"],
                    ["submitJob (32-byte prompt)", f"{d['submit_job']:,}"],
                    [
                        f"dispute, DraftReplay, {d['dispute_referees']} referees, no appeal (open, answer + draw, "
                        f"votes, resolve, final resolve)",
                        f"{d['dispute_total']:,}",
                    ],
                    [
                        f"dispute with one appeal ({d['dispute_referees']} then {d['appeal_referees']} referees: "
                        f"+ appeal {a['appeal']:,}, draw {a['drawReferees']:,}, votes "
                        f"{sum(a['appealCommitVotes']) + sum(a['appealRevealVotes']):,}, final resolve "
                        f"{a['finalResolve']:,})",
                        f"{d['dispute_with_appeal_total']:,}",
                    ],
                ],
            ),
            f"cycle ≤ {d['cycle_limit']:,}: {'met' if d['cycle_met'] else 'NOT met'}; the no-appeal dispute's final "
            f"resolve (after appealPeriod) {w['finalResolve']:,}",
            "",
        ]
    elif "gas" in r:
        out += ["(d) Gas: skipped (--no-gas)", ""]
    out.append(f"total {r['elapsed_s']:.0f} s")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=1000, help="held-out prompts to decode (default 1000)")
    parser.add_argument("--max-tokens", default="32,64,128", help="max tokens per job, one drawn per prompt")
    parser.add_argument("--gamma", type=int, default=4, help="proposals per cycle (the CLI's default, 4)")
    parser.add_argument("--windows", type=int, default=20_000, help="resampled drafter histories per resampling")
    parser.add_argument("--horizon", type=int, default=10_000, help="cycles per history after its first full window")
    parser.add_argument(
        "--traces",
        default=None,
        help="trace cache (JSON; default build/security_traces[_quick]-PAIR.json)",
    )
    parser.add_argument("--pair", choices=list(PAIRS), default=None, help="default: $VERISPEC_PAIR, else smol")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--gas-price-gwei", type=float, default=1.0, help="gas price of the griefing arithmetic")
    parser.add_argument(
        "--adversarial-alpha",
        type=float,
        default=ADVERSARIAL_ALPHA,
        help=f"acceptance of the griefer's prompts (default {ADVERSARIAL_ALPHA}, the issue's hill climb)",
    )
    parser.add_argument("--no-gas", action="store_true", help="skip (d), which starts anvil")
    parser.add_argument("--quick", action="store_true", help="a short run for the tests (few prompts and windows)")
    parser.add_argument("--progress", action="store_true", help="print decoding progress on stderr")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    parser.add_argument("--json-out", metavar="PATH", help="also write the JSON object to PATH")
    args = parser.parse_args(argv)
    if args.quick:
        args.prompts, args.windows, args.horizon = min(args.prompts, 9), min(args.windows, 300), min(args.horizon, 2000)
        if args.max_tokens == parser.get_default("max_tokens"):
            args.max_tokens = "16,32"
    try:
        args.pair = get_pair(args.pair)
    except PairError as exc:
        parser.error(str(exc))
    if args.traces is None:  # one cache per pair, and the quick run never overwrites the full run's
        args.traces = str(ROOT / "build" / f"security_traces{'_quick' if args.quick else ''}-{args.pair.name}.json")
    try:
        args.max_tokens = [int(x) for x in args.max_tokens.split(",")]
    except ValueError:
        parser.error("--max-tokens: a comma-separated list of integers")
    if args.prompts < 1 or args.windows < 1 or args.horizon < 1 or not 1 <= args.gamma <= 16:
        parser.error("--prompts, --windows, --horizon must be >= 1 and --gamma in 1..16")
    if not 0 <= args.adversarial_alpha < 1:
        parser.error("--adversarial-alpha must be in [0, 1)")
    params = DEFAULT_PARAMS
    start = time.perf_counter()
    report: dict = dict(quick=args.quick)
    report["gas"] = None if args.no_gas else gas_figures()
    jobs, report["traces_info"] = collect_traces(args)
    report["false_slash"] = false_slash(jobs, args, params)
    b = report["false_slash"]
    report["griefing"] = griefing(
        params,
        b["traces"]["alpha"],
        b["recommended_claim"]["claim"],
        args.gamma,
        args.gas_price_gwei,
        {k: report["gas"][k] for k in DEFAULT_GAS} if report["gas"] else None,
        args.adversarial_alpha,
    )
    report["capture"] = capture_table()
    report["elapsed_s"] = round(time.perf_counter() - start, 1)
    text = json.dumps(strict_json(report), indent=1, allow_nan=False)
    if args.json_out:
        pathlib.Path(args.json_out).write_text(text + "\n")
    print(text if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
