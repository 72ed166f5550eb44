"""The security benchmark's figures (scripts/bench_security.py): (b) honest false slashes on real traces, run through
AlphaWindow's bucketed window; (a) what griefing an honest drafter into breach costs against what it loses; (c)
referee capture (node/security_math.py)."""

from __future__ import annotations

import inspect
import json
import math
import pathlib
import sys
import time

import numpy as np

from node import security_math as sm
from node.bench.prompts import PROMPT_TOKENS, SOURCES, make_prompt, source_files
from node.chain.params import ETHER, WAD

TRACE_VERSION = 2  # 2: protocol v1.1, the drafter salt enters every accept and residual uniform
GOAL_RATE = 1e-3  # false slashes per drafter per 10,000 cycles
ADVERSARIAL_ALPHA = 0.11  # acceptance the 20-second hill climb reached at the first position
# v1.1 gas (node/bench/gas.py: submitJob with a 32-byte prompt, cycle 0's commitFirstDraft, a later
# commitDraft, γ = 4); replaced by the measured figures when (d) runs
DEFAULT_GAS = dict(submit_job=214_585, first_commit=40_126, commit_draft=38_590)


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


def strict_json(x):
    """The report with ∞ / NaN as null, so that --json is strict JSON."""
    if isinstance(x, dict):
        return {k: strict_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [strict_json(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
