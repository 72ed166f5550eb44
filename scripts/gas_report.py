"""Gas report of verispec's contracts, measured on a local anvil chain of its own.

Deploys the system (node.chain.deploy.deploy_system) and reports receipt gasUsed (21000 base + calldata
+ execution) of:
  * one cycle, commitDraft + submitVerification, at γ = 1, 4, 8, 16 (steady state: the third cycle of a
    job, γ-1 of γ proposals accepted, full-width q, p, reveal and token ids), and cycle 0 (commitFirstDraft,
    which also commits the drafter's salt, + submitVerification);
  * gas per generated token at α = 0.6 and 0.8. A cycle emits n + 1 tokens (n accepted proposals, then the
    residual / bonus token). Under the geometric model (each proposal accepted with probability α until the
    first rejection) P(n) = α^n (1 - α) for n < γ, P(γ) = α^γ, and
    E[n + 1] = Ω(α, γ) = (1 - α^(γ+1)) / (1 - α) (node.protocol.expected_tokens_per_pass). Three figures:
      model     steady-state cycle gas / Ω;
      measured  Σ_n P(n)·gas(n) / Ω, with gas(n) measured for every accept count n = 0..γ (exact, no noise);
      sampled   Σ gas / Σ tokens over --cycles cycles with p_i = α·q_i, for which the contract's own accept
                rule (u_i·q_i < p_i·WAD) accepts each proposal iff its hash-chain uniform u_i < α, so that n is
                geometric (checks the model; at 100 cycles its noise is several per cent);
  * a job's fixed overhead: submitJob, acceptJob, the finishing cycle's extra gas (JobFinished; against a steady
    cycle), finalize, and the three withdrawals;
  * finalize's α-window update (v1.1 records α at finalize): finalize of a counted job (reference sampling,
    pricePerPass at the α price floor: the window update, AlphaCyclesRecorded, the treasury's α fee) beside an
    uncounted one (pricePerPass below the floor), both in the steady state (window, treasury and parties' balances
    already non-zero, no bucket closing);
  * the v1.1 dispute (DraftReplay, the accused loses, every referee votes AccusedCheated), with and without one
    appeal. Without: openDispute, answer (which draws the R referees), R commitVote, R revealVote, resolve (decides
    the round: Appealable), and after appealPeriod the finishing resolve (penalties, payouts, the market, unlocks).
    With one appeal: the same round 0, then appeal (bond × 2), drawReferees (2R + 1 fresh seats), their commits and
    reveals, and the final resolve (the last round is final at once). REFEREES referees are registered, enough
    for both panels.
Leaves, roots, proofs, hash-chain reveals, uniforms, accept counts and vote commitments come from node.protocol.

Usage: PYTHONPATH=$PWD python scripts/gas_report.py [--json] [--cycles N]
"""

from __future__ import annotations

import argparse
import json
import sys

from web3 import Web3

from node.bench.gas import (
    GOAL_GAMMA,
    GOAL_GAS,
    REFEREES,
    Chain,
    cycle_gas,
    dispute_gas,
    job_overhead,
    per_token_gas,
)
from node.chain.anvil import running_anvil


def measure(n_cycles: int) -> dict:
    with running_anvil() as node:
        w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 60}))
        chain = Chain(w3)
        cycles = cycle_gas(chain)
        by_gamma = {row["gamma"]: row for row in cycles}
        overhead, finalize = job_overhead(chain)
        report = {
            "cycle": cycles,
            "perToken": per_token_gas(chain, by_gamma, n_cycles),
            "jobOverhead": overhead,
            "finalize": finalize,
            "dispute": dispute_gas(chain),
            "disputeWithAppeal": dispute_gas(chain, appeal=True),
        }
    goal = by_gamma[GOAL_GAMMA]["total"]
    report["goal"] = {"gamma": GOAL_GAMMA, "limit": GOAL_GAS, "total": goal, "met": goal <= GOAL_GAS}
    return report


def render(r: dict) -> str:
    n = "{:,}".format
    lines = [
        "Gas per cycle (commitDraft + submitVerification; receipt gasUsed, 21000 base and calldata included;",
        "steady state, γ-1 of γ proposals accepted)",
        "",
        "| γ | commitDraft | submitVerification | cycle total | cycle 0: commitFirstDraft | cycle 0 total |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {c['gamma']} | {n(c['commitDraft'])} | {n(c['submitVerification'])} | {n(c['total'])} "
        f"| {n(c['firstCycle']['commitFirstDraft'])} | {n(c['firstCycle']['total'])} |"
        for c in r["cycle"]
    ]
    lines += [
        "",
        "Gas per generated token (a cycle emits n + 1 tokens, n geometric: E[n + 1] = Ω(α,γ) = "
        "(1 - α^(γ+1)) / (1 - α);",
        "model = cycle gas / Ω; measured = Σ P(n)·gas(n) / Ω with gas(n) measured for each n; "
        f"sampled = Σ gas / Σ tokens over {r['perToken'][0]['sampledCycles']} cycles of the contract's "
        "own geometric draws)",
        "",
        "| γ | α | Ω | tokens/cycle sampled | gas/token model | gas/token measured | gas/token sampled |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {t['gamma']} | {t['alpha']} | {t['tokensPerCycleModel']:.2f} | {t['tokensPerCycleSampled']:.2f} "
        f"| {n(t['gasPerTokenModel'])} | {n(t['gasPerTokenMeasured'])} | {n(t['gasPerTokenSampled'])} |"
        for t in r["perToken"]
    ]
    j = r["jobOverhead"]
    lines += [
        "",
        "Fixed overhead of a job (γ = 4)",
        "",
        "| step | gas |",
        "|---|---:|",
        f"| submitJob (32-byte prompt) | {n(j['submitJob'])} |",
        f"| acceptJob | {n(j['acceptJob'])} |",
        f"| finishing cycle's extra (JobFinished; α is recorded at finalize) | {n(j['finishExtra'])} |",
        f"| finalize (a counted job: α window update, α fee) | {n(j['finalize'])} |",
    ]
    lines += [f"| withdraw ({who}) | {n(g)} |" for who, g in j["withdraw"].items()]
    lines += [f"| **total** | **{n(j['total'])}** |"]
    f = r["finalize"]
    lines += [
        "",
        f"finalize's α-window update (γ = 4, {f['cycles']} cycles; counted: pricePerPass = the α price floor "
        f"{f['pricePerPassCounted']:,} wei; uncounted: {f['pricePerPassUncounted']:,} wei, below it; steady state)",
        "",
        "| finalize of a counted job | finalize of an uncounted job | α update (window, α fee) |",
        "|---:|---:|---:|",
        f"| {n(f['counted'])} | {n(f['uncounted'])} | {n(f['alphaUpdate'])} |",
    ]
    d, a = r["dispute"], r["disputeWithAppeal"]
    rows = [
        ("openDispute", "openDispute"),
        ("answer (incl. the round-0 draw)", "answer"),
        (f"commitVote × {d['referees']}", "commitVotes"),
        (f"revealVote × {d['referees']}", "revealVotes"),
        ("resolve (decides round 0: Appealable)", "resolve"),
        ("appeal (bond × 2)", "appeal"),
        (f"drawReferees ({a['appealReferees']} fresh seats)", "drawReferees"),
        (f"commitVote × {a['appealReferees']}", "appealCommitVotes"),
        (f"revealVote × {a['appealReferees']}", "appealRevealVotes"),
        ("final resolve (penalties, payouts, market, unlocks)", "finalResolve"),
    ]

    def cell(x: dict, key: str) -> str:
        v = x.get(key)
        return "–" if v is None else n(v if isinstance(v, int) else sum(v))

    lines += [
        "",
        f"A full dispute (DraftReplay, R = {d['referees']} referees, the accused loses; {REFEREES} referees registered;"
        " without appeal the final resolve comes after appealPeriod)",
        "",
        "| step | no appeal | one appeal |",
        "|---|---:|---:|",
    ]
    lines += [f"| {label} | {cell(d, key)} | {cell(a, key)} |" for label, key in rows]
    lines += [f"| **total** | **{n(d['total'])}** | **{n(a['total'])}** |"]
    g = r["goal"]
    lines += [
        "",
        f"Goal: γ={g['gamma']} cycle ≤ {g['limit'] // 1000}k: {'met' if g['met'] else 'not met'} ({n(g['total'])} gas)",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--cycles", type=int, default=100, help="sampled cycles per (γ, α) (default 100)")
    args = parser.parse_args()
    if args.cycles < 1:
        parser.error("--cycles must be at least 1")
    report = measure(args.cycles)
    print(json.dumps(report, indent=1) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
