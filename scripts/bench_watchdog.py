"""Watchdog benchmark (issue 13): how often a sampled audit catches a cheating job, and what it costs.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_watchdog.py --plot docs/watchdog_detection.png  # full run
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_watchdog.py --quick --json                     # the test's

Offline, with the engine (no chain): the model pair (--pair: smol by default, or tiny) decodes held-out prompts
(node/bench/prompts.py's `make_prompt`, as scripts/bench_security.py does; reference sampling, γ = 4) once honestly
and once per misbehaviour of node/roles/behaviors.py:

* `biased+collude`: a drafter biased on ambiguous positions (top draft probability < 0.5: ~97 % of positions on this
  pair), with a verifier whose draft check reports nothing; `sparse-biased+collude` biases only where it is < 0.05
  (~8 % of positions);
* `shade`: an honest drafter, a verifier posting every p_i × 0.6 (rejections ~2×);
* `lazy`: a drafter serving the draft model on a 2-token window, with the colluding verifier (an honest verifier's
  own draft check would dispute it; the chain values are the same either way).

Every binding position of every job (docs/protocol.md §4: a proposal up to the first rejection, and the outToken) is
then judged the way the referees judge it (`node.roles.referee.node.judge_position`, which decides by
`protocol.check_proposal` for DraftReplay), so "faulty" means "a dispute there wins". Draft positions (x_i, q_i: the
draft model only) and target positions (p_i, outToken: one target forward per cycle) are sampled separately, each at
the audit rate f with node/audit_sampling.py's inclusion probabilities under each weighting. Per job:

* exact P(caught) = `detection_probability` over the faulty positions' π (independent draws);
* empirical P(caught) over --seeds private audit seeds (the module's `draw_uniform`; the first seed's draw is checked
  against `select` itself), with its binomial standard error;
* cost: expected target forwards per job (cycles with at least one audited target position) and draft forwards.

Break-even (proof-of-sampling style): a cheater that gains G per job when missed and loses L when caught (the
accused slash) makes no profit in expectation once P(caught) ≥ G / (G + L); with k faulty positions audited
uniformly at rate f, P = 1 − (1 − f)^k, so f* = 1 − (L / (G + L))^(1/k) (`audit_sampling.break_even_rate`). It is
checked against the measured detection: the smallest f at which the measured mean expected profit is ≤ 0.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

from node import audit_sampling as A
from node.bench.audits import KINDS, JobAudit, fault_stats, summarize
from node.bench.prompts import make_prompt, source_files
from node.bench.tables import markdown_table as table
from node.chain.params import DEFAULT_PARAMS, ETHER
from node.decoding.pairs import PAIRS, PairError, get_pair

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the default trace caches go to ROOT/build

TRACE_VERSION = 2  # 2: runs keyed by their behaviours
MISBEHAVIOURS = {  # name: (drafter behaviour, verifier behaviour, the biased drafter's ambiguity threshold)
    "biased+collude": ("biased", "collude", 0.5),
    "sparse-biased+collude": ("biased", "collude", 0.05),  # the ~8 % most ambiguous positions: where weights matter
    "shade": ("honest", "shade", None),
    "lazy": ("lazy", "collude", None),
}
CHEATER = {"biased+collude": "drafter", "sparse-biased+collude": "drafter", "shade": "verifier", "lazy": "drafter"}
RATES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
PRICE_TOKEN, PRICE_PASS = 10**12, 3 * 10**12  # the requester's defaults (node/requester/client.py, `submit`)


# ------------------------------------------------------------------ traces: decode, then judge every binding position


def decode(decoder, ids, max_tokens: int, job_id: int, drafter: str, verifier: str, threshold: float | None = None):
    """One job with the named behaviours, as the chain would hold it: (job, [ChainCycle])."""
    from eth_hash.auto import keccak

    from node import protocol
    from node.jobs.chaindata import ChainCycle
    from node.roles import behaviors

    job = decoder.job(ids, max_tokens, job_id=job_id, eos_token_id=decoder.tokenizer.eos_token_id)
    seed = protocol.hash_chain(keccak(b"verispec.bench-watchdog" + job_id.to_bytes(32, "big")), 1)
    salt = int.from_bytes(seed[:8], "big")
    bias = behaviors.BiasPolicy(threshold=threshold) if threshold is not None else None
    d = behaviors.draft_session(drafter, decoder.draft, job, bias)
    v = behaviors.verify_session(verifier, decoder.target, job, seed, draft_model=decoder.draft, salt=salt)
    cycles = []
    while not v.done:
        c = v.cycle
        draft = d.propose(c)
        out = v.verify(c, draft)
        v.advance(out.emitted)
        d.advance(out.emitted)
        cycles.append(
            ChainCycle(
                job_id, c, out.root, draft.tokens, draft.q, "", out.reveal, out.accepted, out.out_token, out.emitted,
                out.p, salt=salt,
            )
        )  # fmt: skip
    return job, cycles


def judge(job, cycles, draft_model, target_model, tolerance: int) -> list[dict]:
    """Every binding position of the job, judged by the referees' rule, with the features the weights read."""
    from node import protocol
    from node.chain.enums import DisputeKind
    from node.jobs.models import next_token_rows
    from node.roles.referee.node import judge_position

    prefix, out = list(job.prompt), []
    for cyc in cycles:
        k = cyc.gamma
        q_rows = next_token_rows(draft_model, prefix + list(cyc.tokens), job.sampling, keep=k + 1)  # the draft replay
        for i in range(k + 1):
            if not protocol.binds(i, cyc.accepted, k):
                continue
            row = q_rows[i if i < k else cyc.accepted]
            features = dict(cycle=cyc.cycle, index=i, q_entropy=A.entropy(row / A.WAD))
            if i < k:
                u = protocol.accept_uniform(cyc.reveal, cyc.draft_root, i, cyc.salt) / A.WAD
                features.update(ratio=min(1.0, cyc.p[i] / cyc.q[i]), uniform=u)
            else:
                features.update(ratio=1.0, uniform=0.0)
            for kind, dispute in (("draft", DisputeKind.DraftReplay), ("target", DisputeKind.TargetReplay)):
                if kind == "draft" and i == k:
                    continue  # the outToken is the verifier's
                verdict = judge_position(
                    job, prefix, cyc, i, dispute, tolerance, draft_model=draft_model, target_model=target_model
                )
                out.append(dict(features, kind=kind, faulty=verdict.cheated, reason=verdict.reason))
        prefix.extend(cyc.output)
    return out


def collect(args) -> tuple[dict, dict]:
    """{behaviour: [job record]} (decoded and judged, or reused from the cache), and info."""
    import torch
    import transformers

    from node.decoding import SpeculativeDecoder
    from node.decoding.scorer import default_tolerance_wad

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    decoder = SpeculativeDecoder.from_pretrained(
        str(args.pair.target), str(args.pair.draft), device="cpu", dtype=torch.float32,
        gamma=4, temperature=1.0, top_k=0, top_p=1.0,
    )  # fmt: skip
    tolerance = default_tolerance_wad(torch.float32)
    meta = dict(
        version=TRACE_VERSION, target_id="0x" + decoder.target_id.hex(), draft_id="0x" + decoder.draft_id.hex(),
        seed=args.seed, max_tokens=args.max_tokens, tolerance=tolerance,
    )  # fmt: skip
    path = pathlib.Path(args.traces)
    cached = json.loads(path.read_text()) if path.exists() else {}
    runs = cached.get("runs", {}) if cached.get("meta") == meta else {}
    files, prompts = None, {}
    want = {"honest": args.honest_jobs, **dict.fromkeys(MISBEHAVIOURS, args.cheating_jobs)}
    start, decoded = time.perf_counter(), 0
    for name, count in want.items():
        drafter, verifier, threshold = MISBEHAVIOURS.get(name, ("honest", "honest", None))
        spec = [drafter, verifier, threshold]
        if runs.get(name, {}).get("spec") != spec:  # a run is reused only for the behaviours it was made with
            runs[name] = dict(spec=spec, jobs=[])
        jobs = runs[name]["jobs"]
        for i in range(len(jobs), count):
            if i not in prompts:  # prompt i is the same for every behaviour: job lengths and gains compare
                files = files or source_files()
                prompts[i] = make_prompt(i, args.seed, files, decoder.tokenizer, args.max_tokens)
            prompt = prompts[i]
            job, cycles = decode(decoder, prompt["ids"], prompt["max_tokens"], 1 + i, drafter, verifier, threshold)
            positions = judge(job, cycles, decoder.draft, decoder.target, tolerance)
            jobs.append(
                dict(
                    prompt=i, max_tokens=prompt["max_tokens"], cycles=len(cycles),
                    tokens=sum(len(c.output) for c in cycles),
                    drafter_tokens=sum(min(c.accepted, len(c.output)) for c in cycles),
                    tested=sum(min(c.accepted + 1, c.gamma) for c in cycles),
                    rejected=sum(c.accepted < c.gamma for c in cycles), positions=positions,
                )
            )  # fmt: skip
            decoded += 1
            if args.progress and decoded % 20 == 0:
                print(f"  {decoded} jobs decoded and judged", file=sys.stderr, flush=True)
    if decoded:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(meta=meta, runs=runs)) + "\n")
    runs = {name: runs[name]["jobs"][:count] for name, count in want.items()}
    info = dict(
        path=str(path),
        pair=args.pair.name,
        decoded_jobs=decoded,
        decode_judge_s=round(time.perf_counter() - start, 1),
        **meta,
    )
    return runs, info


# ------------------------------------------------------------------ detection, exact and empirical


# ------------------------------------------------------------------ break-even


def cheater_gain(name: str, record: dict, honest: dict) -> dict:
    """What the cheater earns on the job (an upper bound on what cheating gains it: honest work earns it too), and
    for the shading verifier the extra pay its extra rejections buy (cycles beyond the honest run's, same prompt)."""
    if CHEATER[name] == "verifier":
        pay = record["cycles"] * PRICE_PASS
        return dict(pay=pay, extra=max(0, record["cycles"] - honest["cycles"]) * PRICE_PASS)
    return dict(pay=record["drafter_tokens"] * PRICE_TOKEN, extra=None)


def measured_break_even(audits: list[JobAudit], gains: list[float], loss: float, weighting: str, full_draft: bool):
    """Smallest rate f (bisection) at which the cheaters' mean expected profit E[(1 − P)·G − P·L] is ≤ 0, from the
    exact per-job detection; None when even f = 1 leaves a profit (jobs with no fault are never caught)."""

    def profit(f: float) -> float:
        rates = {"draft": 1.0 if full_draft else f, "target": f}
        ps = [a.exact(rates, weighting) for a in audits]
        return float(np.mean([(1 - p) * g - p * loss for p, g in zip(ps, gains)]))

    if profit(1.0) > 0:
        return None
    if profit(0.0) <= 0:
        return 0.0
    low, high = 0.0, 1.0
    for _ in range(30):
        mid = (low + high) / 2
        low, high = (low, mid) if profit(mid) <= 0 else (mid, high)
    return high


def break_even(name: str, audits: list[JobAudit], honest: dict, params) -> dict:
    loss = params.accused_slash
    gains = [cheater_gain(name, a.record, honest[a.record["prompt"]]) for a in audits]
    pay = [g["pay"] for g in gains]
    k = [int(sum(a.faulty[kind].sum() for kind in KINDS)) for a in audits]
    worst = max(pay)
    out = dict(
        loss_wei=loss, gain_pay_mean_wei=float(np.mean(pay)), gain_pay_max_wei=worst,
        required_detection=worst / (worst + loss),
        formula_k1=A.break_even_rate(worst, loss, 1),  # a cheat on one position, the cheater's whole pay at stake
        formula_median_k=A.break_even_rate(worst, loss, max(1, int(np.median(k)))), median_k=int(np.median(k)),
    )  # fmt: skip
    if gains[0]["extra"] is not None:
        out["gain_extra_mean_wei"] = float(np.mean([g["extra"] for g in gains]))
    out["measured"] = {w: measured_break_even(audits, pay, loss, w, False) for w in A.WEIGHTINGS}
    # what if the cheat gains as much as the slash (an outside gain: steering the output, say)?
    same = [loss] * len(audits)
    out["measured_gain_eq_slash"] = {w: measured_break_even(audits, same, loss, w, False) for w in A.WEIGHTINGS}
    # the watchdog replays every draft position (draft model only) and samples the target positions
    out["measured_gain_eq_slash_full_draft"] = {
        w: measured_break_even(audits, same, loss, w, True) for w in A.WEIGHTINGS
    }
    out["formula_gain_eq_slash_median_k"] = A.break_even_rate(loss, loss, max(1, int(np.median(k))))
    return out


# ------------------------------------------------------------------ the report


def analyse(runs: dict, args, params) -> dict:
    seeds = args.seeds
    audits = {name: [JobAudit(1 + r["prompt"], r, seeds) for r in jobs] for name, jobs in runs.items()}
    honest_by_prompt = {r["prompt"]: r for r in runs["honest"]}
    report = dict(faults={name: fault_stats(a) for name, a in audits.items()})
    for a in audits["honest"][:3] + [x[0] for n, x in audits.items() if n != "honest"]:
        for kind in KINDS:
            for w in A.WEIGHTINGS:
                a.check_select(kind, 0.1, w)
    # a cheating job is one with a fault to find (a biased drafter may meet no ambiguous position): the others
    # are counted in report["faults"] and left out of the detection rates
    cheats = {name: [a for a in audits[name] if any(a.faulty[k].any() for k in KINDS)] for name in MISBEHAVIOURS}
    cheats = {name: jobs for name, jobs in cheats.items() if jobs}
    detection = {}
    for name in cheats:
        cheating = cheats[name]
        detection[name] = {
            w: {
                str(f): dict(
                    sampled=summarize(cheating, {"draft": f, "target": f}, w),
                    full_draft=summarize(cheating, {"draft": 1.0, "target": f}, w),
                )
                for f in args.rates
            }
            for w in A.WEIGHTINGS
        }
    report["detection"] = detection
    lengths = sorted({r["max_tokens"] for jobs in runs.values() for r in jobs})
    report["by_length"] = {
        name: {
            str(n): dict(
                jobs=len(group),
                cycles=float(np.mean([a.record["cycles"] for a in group])),
                faulty=float(np.mean([sum(a.faulty[k].sum() for k in KINDS) for a in group])),
                **{w: {str(f): float(np.mean([a.exact({"draft": f, "target": f}, w) for a in group]))
                       for f in args.length_rates} for w in A.WEIGHTINGS},
            )
            for n in lengths
            if (group := [a for a in cheats[name] if a.record["max_tokens"] == n])
        }
        for name in cheats
    }  # fmt: skip
    honest = audits["honest"]
    report["honest"] = dict(
        jobs=len(honest),
        faulty_positions=int(sum(a.faulty[k].sum() for a in honest for k in KINDS)),
        disputes_at_full_audit=sum(1 for a in honest if any(a.faulty[k].any() for k in KINDS)),
        target_forwards_full_audit=float(np.mean([a.record["cycles"] for a in honest])),
    )
    report["break_even"] = {name: break_even(name, cheats[name], honest_by_prompt, params) for name in cheats}
    report["params"] = dict(
        accused_slash_wei=params.accused_slash, dispute_bond_wei=params.dispute_bond,
        price_per_pass_wei=PRICE_PASS, price_per_token_wei=PRICE_TOKEN,
    )  # fmt: skip
    report["evasion"] = {
        w: {kind: float(np.mean([a.pi(kind, 0.05, w).min() / 0.05 for a in honest if a.pos[kind]])) for kind in KINDS}
        for w in A.WEIGHTINGS
    }  # a cheater who knows the weighting cheats where π is least: π_min / f, per job (mean over honest jobs)
    report["headline"] = headline(report, honest)
    return report


def headline(report: dict, honest: list[JobAudit]) -> dict:
    """The rate the deployment needs against the hardest misbehaviour, under the best weighting, and its cost: the
    target forwards per job a watchdog spends at that rate, on the honest jobs (most jobs are)."""
    best = {}
    for name, b in report["break_even"].items():
        rates = {w: f for w, f in b["measured_gain_eq_slash_full_draft"].items() if f is not None}
        if rates:
            w = min(rates, key=rates.get)
            best[name] = (w, rates[w])
    name = max(best, key=lambda n: best[n][1]) if best else None
    if name is None:
        return {}
    w, f = best[name]
    forwards = float(np.mean([a.evaluate({"draft": f, "target": f}, w)["forwards"]["target"] for a in honest]))
    measured = [x for b in report["break_even"].values() for x in b["measured"].values() if x is not None]
    return dict(
        hardest=name,
        weighting=w,
        rate_gain_eq_slash=f,
        target_forwards_per_job=forwards,
        draft_forwards_per_job=float(np.mean([a.record["cycles"] for a in honest])),
        full_audit_forwards=report["honest"]["target_forwards_full_audit"],
        rate_deployment_gain=max(measured, default=None),
    )


def render(r: dict) -> str:
    out = ["## Jobs and faults (every binding position judged by the referees' rule)", ""]
    rows = []
    for name, s in r["faults"].items():
        rows.append([name, str(s["jobs"]), f"{s['cycles']:.1f}", f"{s['rejection_rate']:.3f}",
                     f"{s['draft_positions']:.1f}", f"{s['target_positions']:.1f}",
                     f"{s['faulty_draft_positions']:.1f}", f"{s['faulty_target_positions']:.1f}",
                     f"{s['jobs_with_fault']}/{s['jobs']}"])  # fmt: skip
    out.append(table(["run", "jobs", "cycles/job", "rejection rate", "draft pos/job", "target pos/job",
                      "faulty draft/job", "faulty target/job", "jobs with a fault"], rows))  # fmt: skip
    h = r["honest"]
    out += [
        "",
        f"Honest: {h['faulty_positions']} faulty positions over {h['jobs']} jobs, so a watchdog auditing everything "
        f"opens {h['disputes_at_full_audit']} disputes. Full audit: {h['target_forwards_full_audit']:.1f} target "
        "forwards per job.",
        "",
    ]
    for name, by_w in r["detection"].items():
        out += [f"## P(caught) for `{name}` (exact | empirical ± s.e.; target forwards per job)", ""]
        rows = []
        for w, by_f in by_w.items():
            for f, x in by_f.items():
                s, d = x["sampled"], x["full_draft"]
                rows.append([w, f, f"{s['exact']:.3f}", f"{s['empirical']:.3f} ± {s['stderr']:.3f}",
                             f"{s['target_forwards']:.2f}", f"{s['target_forwards_empirical']:.2f}",
                             f"{s['draft_forwards']:.2f}", f"{d['exact']:.3f}"])  # fmt: skip
        out.append(table(["weighting", "f", "exact", "empirical", "target fwd", "(empirical)", "draft fwd",
                          "exact, full draft replay"], rows))  # fmt: skip
        out.append("")
    out += ["## P(caught) against job length (exact; draft and target positions both at f)", ""]
    rows = []
    for name, by_n in r["by_length"].items():
        for n, x in by_n.items():
            rows.append([name, n, str(x["jobs"]), f"{x['cycles']:.1f}", f"{x['faulty']:.1f}"]
                        + [f"{x[w][f]:.3f}" for f in map(str, r["length_rates"]) for w in A.WEIGHTINGS])  # fmt: skip
    out.append(table(["run", "max tokens", "jobs", "cycles", "faulty/job"]
                     + [f"{w[:4]} f={f}" for f in r["length_rates"] for w in A.WEIGHTINGS], rows))  # fmt: skip
    out += ["", "## Break-even audit rate (cheating unprofitable in expectation)", ""]
    rows = []
    for name, b in r["break_even"].items():
        m, e = b["measured"], b["measured_gain_eq_slash"]
        rows.append([name, f"{b['gain_pay_max_wei'] / ETHER:.2e}", f"{b['loss_wei'] / ETHER:.2f}",
                     f"{b['formula_k1']:.2e}", f"{b['formula_median_k']:.2e} (k={b['median_k']})",
                     " / ".join("-" if m[w] is None else f"{m[w]:.2e}" for w in A.WEIGHTINGS),
                     f"{b['formula_gain_eq_slash_median_k']:.3f}",
                     " / ".join("-" if e[w] is None else f"{e[w]:.3f}" for w in A.WEIGHTINGS)])  # fmt: skip
    out.append(table(["run", "G (ETH, its pay)", "L (ETH)", "f* k=1", "f* median k",
                      "measured (" + "/".join(w[:4] for w in A.WEIGHTINGS) + ")", "G=L: f* median k",
                      "G=L measured"], rows))  # fmt: skip
    out += ["", "Evasion: a cheater who knows the weighting cheats where π is least; mean over honest jobs of "
            "π_min / f at f = 0.05 (uniform: 1):", ""]  # fmt: skip
    out.append(table(["weighting", "draft positions", "target positions"],
                     [[w, f"{e['draft']:.2e}", f"{e['target']:.2e}"] for w, e in r["evasion"].items()]))  # fmt: skip
    full = {n: b["measured_gain_eq_slash_full_draft"] for n, b in r["break_even"].items()}
    out += ["", "G=L with every draft position replayed, measured f (" + "/".join(w[:4] for w in A.WEIGHTINGS) + "): "
            + "; ".join(f"{n} " + " / ".join("-" if x[w] is None else f"{x[w]:.3f}" for w in A.WEIGHTINGS)
                        for n, x in full.items())]  # fmt: skip
    hl = r["headline"]
    if hl:
        out += [
            "",
            f"Headline: replaying every draft position ({hl['draft_forwards_per_job']:.1f} draft forwards per job) and "
            f"sampling target positions, the hardest misbehaviour ({hl['hardest']}) gaining as much as the slash is "
            f"unprofitable at f = {hl['rate_gain_eq_slash']:.3f} ({hl['weighting']} weighting): "
            f"{hl['target_forwards_per_job']:.2f} target forwards per job (full audit: "
            f"{hl['full_audit_forwards']:.1f}); at the deployment's own gains (the cheater's pay) "
            f"f = {hl['rate_deployment_gain']:.2e} suffices.",
        ]
    out.append(
        f"\n({r['elapsed_s']} s; traces {r['traces_info']['path']}, {r['traces_info']['decoded_jobs']} decoded now)"
    )
    return "\n".join(out)


def plot(r: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(r["detection"])
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(4.2 * (len(names) + 1), 3.8))
    styles = dict(uniform="-", entropy="--", threshold=":")
    for ax, name in zip(axes, names):
        for w, by_f in r["detection"][name].items():
            fs = [float(f) for f in by_f]
            ax.plot(fs, [x["sampled"]["exact"] for x in by_f.values()], styles[w], marker="o", ms=3, label=f"{w}")
            ax.plot(fs, [x["sampled"]["empirical"] for x in by_f.values()], "x", color=ax.lines[-1].get_color(), ms=5)
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_title(name)
        ax.set_xlabel("audit rate f")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("P(cheating job caught)  (line: exact, x: empirical)")
    axes[0].legend(fontsize=8)
    ax = axes[-1]
    for name in names:
        by_f = r["detection"][name]["uniform"]
        ax.plot([float(f) for f in by_f], [x["sampled"]["target_forwards"] for x in by_f.values()], marker="o", ms=3,
                label=name)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title("audit cost")
    ax.set_xlabel("audit rate f")
    ax.set_ylabel("target forwards per job")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def strip(report: dict) -> dict:
    """The report without the per-job lists (kept out of --json's size)."""
    if isinstance(report, dict):
        return {k: strip(v) for k, v in report.items() if k != "per_job"}
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--honest-jobs", type=int, default=200, help="honest jobs (default 200)")
    parser.add_argument("--cheating-jobs", type=int, default=30, help="jobs per misbehaviour (default 30)")
    parser.add_argument("--max-tokens", default="16,32,64", help="max tokens per job, one drawn per prompt")
    parser.add_argument("--seeds", type=int, default=200, help="private audit seeds for the empirical rates")
    parser.add_argument("--seed", type=int, default=2026, help="the prompts' seed")
    parser.add_argument("--traces", default=None, help="trace cache (JSON)")
    parser.add_argument("--pair", choices=list(PAIRS), default=None, help="default: $VERISPEC_PAIR, else smol")
    parser.add_argument("--quick", action="store_true", help="a short run for the tests")
    parser.add_argument("--progress", action="store_true", help="print decoding progress on stderr")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    parser.add_argument("--plot", metavar="PATH", help="write the detection curves (PNG) to PATH")
    args = parser.parse_args(argv)
    if args.quick:
        args.honest_jobs, args.cheating_jobs, args.seeds = min(args.honest_jobs, 5), min(args.cheating_jobs, 3), 60
        if args.max_tokens == parser.get_default("max_tokens"):
            args.max_tokens = "12,20"
    try:
        args.pair = get_pair(args.pair)
    except PairError as exc:
        parser.error(str(exc))
    if args.traces is None:  # one cache per pair, and the quick run never overwrites the full run's
        args.traces = str(ROOT / "build" / f"watchdog_traces{'_quick' if args.quick else ''}-{args.pair.name}.json")
    try:
        args.max_tokens = [int(x) for x in args.max_tokens.split(",")]
    except ValueError:
        parser.error("--max-tokens: a comma-separated list of integers")
    if args.honest_jobs < 1 or args.cheating_jobs < 1 or args.seeds < 1 or min(args.max_tokens) < 1:
        parser.error("--honest-jobs, --cheating-jobs, --seeds and --max-tokens must be >= 1")
    args.cheating_jobs = min(args.cheating_jobs, args.honest_jobs)  # every cheating prompt has its honest run
    args.rates, args.length_rates = RATES, (0.05, 0.2)
    start = time.perf_counter()
    runs, info = collect(args)
    report = analyse(runs, args, DEFAULT_PARAMS)
    report.update(quick=args.quick, traces_info=info, rates=list(args.rates), length_rates=list(args.length_rates))
    report["elapsed_s"] = round(time.perf_counter() - start, 1)
    if args.plot:
        plot(report, pathlib.Path(args.plot))
    print(json.dumps(strip(report), indent=1) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
