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
    scripts/gas_report.py's own functions and chain (needs anvil; --no-gas skips it).

Held-out prompts (none of this text was trained on; scripts/train_models.py trains on this Python's standard
library minus its test directories, site-packages and every 10th file): a third each from (1) the training
split's own held-out stdlib files, (2) the stdlib's test directories (test/, idle_test/, tests/), (3) the .py
files of site-packages (third-party code in another style). Prompt i draws its source (i mod 3), file, start
line, length (16..256 tokens) and max tokens (--max-tokens, a list) from random.Random(f"{seed}:{i}"), and
decodes as job i with a verifier seed derived from i; jobs stop at EOS as the CLI's do.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import math
import pathlib
import random
import sys
import sysconfig
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from node import security_math as sm  # noqa: E402
from node.chain.params import DEFAULT_PARAMS, ETHER, WAD  # noqa: E402
from node.decoding.pairs import PAIRS, PairError, get_pair  # noqa: E402

TRACE_VERSION = 2  # 2: protocol v1.1, the drafter salt enters every accept and residual uniform
SOURCES = ("heldout-stdlib", "stdlib-tests", "site-packages")
PROMPT_TOKENS = (16, 256)
GOAL_RATE = 1e-3  # false slashes per drafter per 10,000 cycles
ADVERSARIAL_ALPHA = 0.11  # acceptance the 20-second hill climb reached at the first position
# v1.1 gas (scripts/gas_report.py: submitJob with a 32-byte prompt, cycle 0's commitFirstDraft, a later
# commitDraft, γ = 4); replaced by the measured figures when (d) runs
DEFAULT_GAS = dict(submit_job=214_585, first_commit=40_126, commit_draft=38_590)


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_security_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ (b) traces


def source_files() -> dict[str, list[pathlib.Path]]:
    """The three held-out sources, each a sorted list of files (see the module docstring)."""
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    train_models = load_script("train_models")
    _train, heldout = train_models.corpus_files()
    tests = sorted(
        p
        for p in stdlib.rglob("*.py")
        if {"test", "tests", "idle_test"} & set(p.relative_to(stdlib).parts)
        and "site-packages" not in p.relative_to(stdlib).parts
    )
    site = pathlib.Path(sysconfig.get_paths()["purelib"])
    packages = sorted(p for p in site.rglob("*.py") if 2_000 < p.stat().st_size < 200_000)
    return {"heldout-stdlib": sorted(heldout), "stdlib-tests": tests, "site-packages": packages}


def make_prompt(i: int, seed: int, files: dict, tokenizer, max_tokens: list[int]) -> dict:
    """Prompt i: deterministic in (seed, i) and the installed files."""
    rng = random.Random(f"{seed}:{i}")
    source = SOURCES[i % len(SOURCES)]
    for _ in range(100):
        path = rng.choice(files[source])
        text = path.read_text(encoding="utf-8", errors="replace")
        starts = [0] + [k + 1 for k, c in enumerate(text) if c == "\n" and k + 1 < len(text)]
        line = rng.randrange(len(starts))
        length = rng.randint(*PROMPT_TOKENS)
        ids = tokenizer(text[starts[line] : starts[line] + 12 * length])["input_ids"][:length]
        if len(ids) >= min(length, 2 * PROMPT_TOKENS[0]) and len(ids) >= PROMPT_TOKENS[0]:
            return dict(source=source, file=str(path), line=line, ids=ids, max_tokens=rng.choice(max_tokens))
    raise RuntimeError(f"no prompt found for index {i} in {source}")


def trace_meta(decoder, args) -> dict:
    return dict(
        version=TRACE_VERSION,
        target_id="0x" + decoder.target_id.hex(),
        draft_id="0x" + decoder.draft_id.hex(),
        gamma=args.gamma,
        sampling=dict(temperature=1.0, top_k=0, top_p=1.0),
        max_tokens=args.max_tokens,
        seed=args.seed,
        prompt_tokens=list(PROMPT_TOKENS),
        sources=list(SOURCES),
    )


def collect_traces(args) -> tuple[list[dict], dict]:
    """Decode the prompts (or reuse the cached traces that match); returns (jobs, info)."""
    import torch
    import transformers
    from eth_hash.auto import keccak

    from node import protocol
    from node.decoding import SpeculativeDecoder

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()  # the tokenizer warns about files longer than the context
    transformers.utils.logging.disable_progress_bar()
    decoder = SpeculativeDecoder.from_pretrained(
        str(args.pair.target),
        str(args.pair.draft),
        device=args.device,
        dtype=torch.float32,  # nodes compute in fp32 (docs: precision decides disputes)
        gamma=args.gamma,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
    )
    meta = trace_meta(decoder, args)
    path = pathlib.Path(args.traces)
    jobs: list[dict] = []
    if path.exists():
        cached = json.loads(path.read_text())
        if cached.get("meta") == meta:
            jobs = cached["jobs"]
    reused = min(len(jobs), args.prompts)
    jobs = jobs[: args.prompts] if len(jobs) >= args.prompts else jobs
    files = source_files() if len(jobs) < args.prompts else None
    takes_salt = "salt" in inspect.signature(decoder.generate).parameters  # protocol v1.1's drafter salt
    eos = decoder.tokenizer.eos_token_id
    start = time.perf_counter()
    for i in range(len(jobs), args.prompts):
        prompt = make_prompt(i, args.seed, files, decoder.tokenizer, args.max_tokens)
        job_id = 1 + i
        seed = protocol.hash_chain(keccak(b"verispec.bench-security" + job_id.to_bytes(32, "big")), 1)
        extra = dict(salt=int.from_bytes(seed[:8], "big")) if takes_salt else {}
        result = decoder.generate(
            prompt["ids"], prompt["max_tokens"], job_id=job_id, verifier_seed=seed, eos_token_id=eos, **extra
        )
        jobs.append(
            dict(
                source=prompt["source"],
                file=str(pathlib.Path(prompt["file"]).name),
                line=prompt["line"],
                prompt_tokens=len(prompt["ids"]),
                max_tokens=prompt["max_tokens"],
                tokens=len(result.tokens),
                accepted=[c.accepted for c in result.cycles],
                proposed=sorted({len(c.proposals) for c in result.cycles}),
            )
        )
        if args.progress and (i + 1) % 50 == 0:
            print(f"  {i + 1}/{args.prompts} prompts decoded", file=sys.stderr, flush=True)
    decode_s = time.perf_counter() - start
    if len(jobs) > reused:  # only ever extends the cache: fewer prompts reuse its first jobs
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(meta=meta, jobs=jobs)) + "\n")
    info = dict(
        path=str(path),
        reused_jobs=reused,
        decoded_jobs=len(jobs) - reused,
        decode_s=round(decode_s, 2),
        s_per_prompt=round(decode_s / (len(jobs) - reused), 4) if len(jobs) > reused else None,
        threads=torch.get_num_threads(),
        device=str(decoder.target.device),
        pair=args.pair.name,
        **meta,
    )
    return jobs, info


def job_sums(jobs: list[dict], gamma: int) -> np.ndarray:
    """Per job (cycles, accepted, rejected), as the market accrues them."""
    return np.array([(len(j["accepted"]), sum(j["accepted"]), sum(n < gamma for n in j["accepted"])) for j in jobs])


def cycle_sums(jobs: list[dict], gamma: int) -> np.ndarray:
    """Per cycle (1, n, n < γ): the pool of the i.i.d.-cycle resampling."""
    n = np.array([a for j in jobs for a in j["accepted"]])
    return np.stack([np.ones_like(n), n, (n < gamma).astype(n.dtype)], axis=1)


def simulate_windows(pool: np.ndarray, histories: int, horizon: int, bucket: int, rng) -> dict:
    """Run `histories` drafter histories, each a sequence of jobs drawn with replacement from `pool` (rows of
    (cycles, accepted, rejected)), through AlphaWindow's ring of 8 buckets. Returns per history the α̂ of its
    first full window, the smallest α̂ of every window evaluated up to `horizon` cycles after the first full
    one (a breach at claim α* happens iff that minimum < α* − τ; the restart after a breach does not change
    whether one happens), and how many windows were evaluated."""
    h = histories
    ring = np.zeros((h, 8, 3), dtype=np.int64)
    open_ = np.zeros((h, 3), dtype=np.int64)
    nxt = np.zeros(h, dtype=np.int64)
    closed = np.zeros(h, dtype=np.int64)
    total = np.zeros(h, dtype=np.int64)
    first = np.full(h, np.nan)
    start = np.full(h, -1, dtype=np.int64)
    low = np.full(h, np.inf)
    evaluated = np.zeros(h, dtype=np.int64)
    window_cycles = np.zeros(h, dtype=np.int64)
    rows = np.arange(h)
    active = np.ones(h, dtype=bool)
    while active.any():
        draw = pool[rng.integers(len(pool), size=h)]
        open_ += draw
        total += draw[:, 0]
        close = open_[:, 0] >= bucket
        if close.any():
            idx = rows[close]
            ring[idx, nxt[idx]] = open_[idx]
            open_[idx] = 0
            nxt[idx] = (nxt[idx] + 1) % 8
            closed[idx] = np.minimum(closed[idx] + 1, 8)
            full = idx[closed[idx] == 8]
            if len(full):
                sums = ring[full].sum(axis=1)
                alpha = sums[:, 1] / (sums[:, 1] + sums[:, 2])
                new = start[full] < 0
                first[full[new]] = alpha[new]
                window_cycles[full[new]] = sums[new, 0]
                start[full[new]] = total[full[new]]
                inside = total[full] - start[full] <= horizon
                low[full[inside]] = np.minimum(low[full[inside]], alpha[inside])
                evaluated[full[inside]] += 1
        active = (start < 0) | (total - start <= horizon)
    return dict(first=first, low=low, evaluated=evaluated, window_cycles=window_cycles)


def floor_claim(x: float) -> float:
    """A claim rounded down to 0.001 (lower is safer for the drafter)."""
    return math.floor(x * 1000 + 1e-9) / 1000


def resampled_rows(sim: dict, tau: float, claims: dict[str, float]) -> tuple[dict, list[dict]]:
    first, low = sim["first"], sim["low"]
    dist = dict(
        windows=len(first),
        window_cycles_mean=float(sim["window_cycles"].mean()),
        mean=float(first.mean()),
        sd=float(first.std()),
        p0_1=float(np.percentile(first, 0.1)),
        p1=float(np.percentile(first, 1)),
        p5=float(np.percentile(first, 5)),
        min=float(first.min()),
        evaluations_per_history=float(sim["evaluated"].mean()),
        evaluations=int(sim["evaluated"].sum()),
        # the largest claim whose measured false-slash rate stays at the goal: the GOAL_RATE quantile of the
        # histories' lowest window, plus τ
        max_safe_claim=floor_claim(float(np.quantile(low, GOAL_RATE)) + tau),
    )
    rows = []
    for rule, claim in claims.items():
        slashed = int((low < claim - tau).sum())
        window_breach = int((first < claim - tau).sum())
        rows.append(
            dict(
                rule=rule,
                claim=claim,
                histories=len(low),
                slashed=slashed,
                rate=slashed / len(low),
                rate_upper95=sm.binomial_upper_bound(slashed, len(low)),
                per_window=window_breach / len(first),
                goal_met=sm.binomial_upper_bound(slashed, len(low)) <= GOAL_RATE
                if slashed == 0
                else slashed / len(low) <= GOAL_RATE,
            )
        )
    return dist, rows


def false_slash(jobs: list[dict], args, params) -> dict:
    gamma, bucket, tau = args.gamma, params.alpha_bucket_cycles, params.alpha_tolerance / WAD
    n_window = params.alpha_window_cycles
    per_job = job_sums(jobs, gamma)
    per_cycle = cycle_sums(jobs, gamma)
    pooled = float(per_job[:, 1].sum() / (per_job[:, 1].sum() + per_job[:, 2].sum()))
    job_alpha = per_job[:, 1] / np.maximum(per_job[:, 1] + per_job[:, 2], 1)
    by_source = {}
    for source in SOURCES:
        sel = np.array([j["source"] == source for j in jobs])
        if sel.any():
            s = per_job[sel]
            by_source[source] = dict(
                jobs=int(sel.sum()), cycles=int(s[:, 0].sum()), alpha=float(s[:, 1].sum() / s[:, 1:].sum())
            )
    traces = dict(
        jobs=len(jobs),
        cycles=int(per_job[:, 0].sum()),
        tokens=int(sum(j["tokens"] for j in jobs)),
        cycles_per_job=float(per_job[:, 0].mean()),
        alpha=pooled,
        job_alpha_p1=float(np.percentile(job_alpha, 1)),
        job_alpha_p50=float(np.percentile(job_alpha, 50)),
        job_alpha_p99=float(np.percentile(job_alpha, 99)),
        accept_histogram=np.bincount(per_cycle[:, 1], minlength=gamma + 1).tolist(),
        by_source=by_source,
    )
    # geometric model at the pooled α: exact distribution of a window of exactly N i.i.d. cycles
    values, probs = sm.window_alpha_distribution(pooled, gamma, n_window)
    geo = dict(
        alpha=pooled,
        mean=float((values * probs).sum()),
        sd=float(math.sqrt(max(0.0, (values**2 * probs).sum() - (values * probs).sum() ** 2))),
        p0_1=sm.distribution_quantile(values, probs, 0.001),
        p1=sm.distribution_quantile(values, probs, 0.01),
        p5=sm.distribution_quantile(values, probs, 0.05),
        evaluations_per_history=args.horizon / bucket + 1,
    )
    geo_hist = sm.geometric_cycle(pooled, gamma) * len(per_cycle)
    traces["accept_histogram_geometric"] = [round(float(x), 1) for x in geo_hist]

    rng = np.random.default_rng(args.seed)
    sims = {
        "jobs": simulate_windows(per_job, args.windows, args.horizon, bucket, rng),
        "iid-cycles": simulate_windows(per_cycle, args.windows, args.horizon, bucket, rng),
    }
    p1_jobs = float(np.percentile(sims["jobs"]["first"], 1))
    claims = {
        "pooled α (the drafter's true α)": floor_claim(pooled),
        "P1 of window α̂ (by jobs)": floor_claim(p1_jobs),
        "P1 of window α̂ + τ (by jobs)": floor_claim(p1_jobs + tau),
    }
    modes = {}
    for mode, sim in sims.items():
        dist, rows = resampled_rows(sim, tau, claims)
        modes[mode] = dict(distribution=dist, claims=rows)
    safe = min(m["distribution"]["max_safe_claim"] for m in modes.values())
    claims["largest claim at the goal (both resamplings)"] = safe
    for mode, sim in sims.items():
        modes[mode]["claims"] = resampled_rows(sim, tau, claims)[1]
    geo["claims"] = []
    for rule, claim in claims.items():
        p = sm.probability_below(values, probs, claim - tau)
        geo["claims"].append(
            dict(rule=rule, claim=claim, per_window=p, rate_union_bound=min(1.0, p * geo["evaluations_per_history"]))
        )
    recommended = floor_claim(p1_jobs)
    return dict(
        gamma=gamma,
        window_cycles=n_window,
        bucket_cycles=bucket,
        tau=tau,
        horizon=args.horizon,
        goal_rate=GOAL_RATE,
        traces=traces,
        resampled=modes,
        geometric=geo,
        recommended_claim=dict(
            rule="1st percentile of window α̂ (whole-job resampling), rounded down to 0.001; breach needs α̂ < α* − τ",
            claim=recommended,
            largest_claim_at_goal=safe,
        ),
    )


# ------------------------------------------------------------------ (a) griefing


def expected_cycle(alpha: float, gamma: int) -> tuple[float, float]:
    """Geometric model: E[accepted], E[rejected] of one cycle."""
    pn = sm.geometric_cycle(alpha, gamma)
    return float((np.arange(gamma + 1) * pn).sum()), float(1 - pn[gamma])


def fraction_to_breach(honest: float, adversarial: float, threshold: float, gamma: int) -> float:
    """Share f of a window's cycles at acceptance `adversarial` (the rest honest) that brings the expected window
    α̂ = Σacc / Σ(acc + rej) down to `threshold`; 1.0 when even a full window cannot (then ∞ is reported)."""
    ah, rh = expected_cycle(honest, gamma)
    aa, ra = expected_cycle(adversarial, gamma)
    mixed = lambda f: ((1 - f) * ah + f * aa) / ((1 - f) * (ah + rh) + f * (aa + ra))  # noqa: E731
    if mixed(1.0) >= threshold:
        return math.inf
    if mixed(0.0) < threshold:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mixed(mid) >= threshold else (lo, mid)
    return hi


def griefing(
    params,
    honest_alpha: float,
    claim: float,
    gamma: int,
    gas_price_gwei: float,
    gas: dict | None = None,
    adversarial_alpha: float = ADVERSARIAL_ALPHA,
) -> dict:
    """Attacker spend against the honest drafter's loss, from the deployment's α rules: only jobs paying
    pricePerPass ≥ alpha_price_floor count, alpha_fee_bps of it goes to the treasury, a breach slashes
    params.alpha_slash(stake) = min(alpha_slash_bps × stake, alpha_slash_cap) (AlphaWindow.alphaSlashAmount), to the
    treasury. `gas`: submitJob, commitFirstDraft and commitDraft gas (measured in (d), else the constants)."""
    gas = {**DEFAULT_GAS, **(gas or {})}
    floor, fee_bps, n_window = params.alpha_price_floor, params.alpha_fee_bps, params.alpha_window_cycles
    tau = params.alpha_tolerance / WAD
    gas_price = gas_price_gwei * 1e9
    f = fraction_to_breach(honest_alpha, adversarial_alpha, claim - tau, gamma)
    stakes = sorted({params.min_drafter_stake, 2 * ETHER, 5 * ETHER, 10 * ETHER})
    rows = []
    for scenario, share, per_job in (
        ("fill the window, one-cycle jobs (the issue's attack)", 1.0, 1),
        ("fill the window, 16-cycle jobs (all at the adversarial α)", 1.0, 16),
        ("least share that breaches, one-cycle jobs", f, 1),
    ):
        cycles = share * n_window if math.isfinite(share) else math.inf
        # the requester pays the passes at the floor (0 per accepted token) and one submitJob per job
        price = cycles * floor
        burnt = price * fee_bps / 10_000
        submit = cycles / per_job * gas["submit_job"] * gas_price
        # the honest drafter pays its commits' gas, which a zero price per accepted token does not repay
        drafter_gas = cycles / per_job * (gas["first_commit"] + (per_job - 1) * gas["commit_draft"]) * gas_price
        for stake in stakes:
            loss = params.alpha_slash(stake)
            rows.append(
                dict(
                    scenario=scenario,
                    cycles=cycles,
                    jobs=cycles / per_job,
                    stake_eth=stake / ETHER,
                    price_eth=price / ETHER,
                    burnt_eth=burnt / ETHER,
                    gas_eth=submit / ETHER,
                    spend_eth=(price + submit) / ETHER,
                    drafter_loss_eth=loss / ETHER,
                    cap_binds=loss == params.alpha_slash_cap,
                    # requester alone: the passes go to the honest verifier, so the whole price is spent
                    factor=(price + submit) / loss if loss else math.inf,
                    # with its own (truthful) verifier the pass price comes back less the α fee
                    factor_colluding=(burnt + submit) / loss if loss else math.inf,
                    factor_no_gas=price / loss if loss else math.inf,
                    factor_colluding_no_gas=burnt / loss if loss else math.inf,
                    drafter_gas_eth=drafter_gas / ETHER,
                    factor_with_drafter_gas=(price + submit) / (loss + drafter_gas) if loss + drafter_gas else math.inf,
                )
            )

    def worst(key):
        return min(r[key] for r in rows)

    return dict(
        alpha_price_floor_wei=floor,
        alpha_fee_bps=fee_bps,
        treasury=params.treasury,
        alpha_slash_bps=params.alpha_slash_bps,
        alpha_slash_cap_wei=params.alpha_slash_cap,
        window_cycles=n_window,
        stakes_eth=[s / ETHER for s in stakes],
        gas_price_gwei=gas_price_gwei,
        submit_job_gas=gas["submit_job"],
        commit_first_draft_gas=gas["first_commit"],
        commit_draft_gas=gas["commit_draft"],
        honest_alpha=honest_alpha,
        adversarial_alpha=adversarial_alpha,
        claim=claim,
        breach_share=f,
        rows=rows,
        worst_factor=worst("factor"),
        worst_factor_colluding=worst("factor_colluding"),
        worst_factor_no_gas=worst("factor_no_gas"),
        worst_factor_colluding_no_gas=worst("factor_colluding_no_gas"),
        worst_factor_with_drafter_gas=worst("factor_with_drafter_gas"),
        goal_met=worst("factor") >= 1 and worst("factor_colluding") >= 1,
    )


# ------------------------------------------------------------------ (c) capture


def capture_table(shares=(0.1, 0.2, 0.3, 0.4, 0.5), panels=(3, 5, 7), appeals=(0, 1, 2)) -> dict:
    rows = []
    for panel in panels:
        for a in appeals:
            rows.append(
                dict(
                    panel=panel,
                    appeals=a,
                    seats=sm.panel_sizes(panel, a),
                    capture={f"{s:.1f}": float(sm.capture_probability(s, panel, a)) for s in shares},
                    unanswered={f"{s:.1f}": float(sm.capture_probability_unanswered(s, panel, a)) for s in shares},
                )
            )
    return dict(shares=list(shares), rows=rows)


# ------------------------------------------------------------------ (d) gas


def gas_figures() -> dict:
    """The changed paths, measured by scripts/gas_report.py's own functions on a fresh anvil chain: the γ = 4
    cycle (and cycle 0, which commits the drafter's salt), the finishing cycle's extra, finalize of a counted job
    beside an uncounted one (v1.1 records α and pays the α fee there), and the dispute without and with one
    appeal."""
    from web3 import Web3

    from node.chain.anvil import running_anvil

    gr = load_script("gas_report")
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


def table(headers: list[str], rows: list[list[str]]) -> str:
    cells = [headers] + rows
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


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


def strict_json(x):
    """The report with ∞ / NaN as null, so that --json is strict JSON."""
    if isinstance(x, dict):
        return {k: strict_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [strict_json(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


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
