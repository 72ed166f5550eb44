"""scripts/bench_security.py: node/security_math.py against hand-computed values, and one --quick run whose every
table is checked for structure and sanity (not timings)."""

from __future__ import annotations

import itertools
import json
import math
import os
import pathlib
import subprocess
import sys
from fractions import Fraction as F

import numpy as np
import pytest

from node import security_math as sm
from node.chain.params import DEFAULT_PARAMS, WAD
from tests.chainutil import HANG_S

# a benchmark script run end to end (its own chain and nodes): not in `make test-fast`
pytestmark = pytest.mark.bench

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "bench_security.py"
# PYTHONPATH: the script imports this checkout's node (node.bench), not an editable install's (git worktrees)
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
HAVE_MODELS = (ROOT / "models" / "target" / "model.safetensors").exists()

# ------------------------------------------------------------------ capture math, by hand


def test_panel_sizes_double_plus_one():
    assert sm.panel_sizes(3, 0) == [3]
    assert sm.panel_sizes(3, 2) == [3, 7, 15]
    assert sm.panel_sizes(5, 1) == [5, 11]
    with pytest.raises(ValueError):
        sm.panel_sizes(4, 0)
    with pytest.raises(ValueError):
        sm.panel_sizes(3, -1)


def test_capture_without_appeal_by_hand():
    # 3 seats, s = 1/10: P(2 or 3 seats) = 3·(1/10)²·(9/10) + (1/10)³ = 27/1000 + 1/1000
    assert sm.capture_probability(F(1, 10), 3) == F(28, 1000)
    # 5 seats, s = 1/5: 10·s³(1−s)² + 5·s⁴(1−s) + s⁵ = 0.0512 + 0.0064 + 0.00032
    assert sm.capture_probability(F(1, 5), 5) == F(5792, 100_000)
    # 7 seats, s = 3/10: Σ_{k≥4} C(7,k) s^k (1−s)^(7−k)
    by_hand = 35 * F(3, 10) ** 4 * F(7, 10) ** 3 + 21 * F(3, 10) ** 5 * F(7, 10) ** 2
    by_hand += 7 * F(3, 10) ** 6 * F(7, 10) + F(3, 10) ** 7
    assert (
        sm.capture_probability(F(3, 10), 7) == by_hand == F(126_036, 1_000_000)
    )  # 0.0972405 + 0.0250047 + 0.0035721 + 0.0002187
    # a half share always wins half the time; nobody wins with no stake; everyone with all of it
    for panel in (3, 5, 7):
        assert sm.capture_probability(F(1, 2), panel, 2) == F(1, 2)
        assert sm.capture_probability(0, panel) == 0 and sm.capture_probability(1, panel, 1) == 1


def test_capture_with_appeals_is_the_final_panel():
    # one appeal from 3 goes to 7 seats: P(≥ 4 of 7) at s = 1/10 = 35e-4·0.729 + 21e-5·0.81 + 7e-6·0.9 + 1e-7
    assert sm.capture_probability(F(1, 10), 3, 1) == F(2_728, 1_000_000)
    assert sm.capture_probability(F(1, 10), 3, 1) == sm.capture_probability(F(1, 10), 7, 0)
    assert sm.capture_probability(0.2, 5, 2) == pytest.approx(sm.majority_probability(0.2, 23))
    # below half, every appeal helps the truth; above half it helps the coalition
    for s in (0.1, 0.2, 0.3, 0.4):
        for panel in (3, 5, 7):
            p = [sm.capture_probability(s, panel, a) for a in (0, 1, 2)]
            assert p[0] > p[1] > p[2]


def test_capture_unanswered_by_hand():
    # nobody honest appeals: the coalition wins round 0 (28/1000) or, losing it, round 1 (2728/10^6)
    p = sm.capture_probability_unanswered(F(1, 10), 3, 1)
    assert p == 1 - (1 - F(28, 1000)) * (1 - F(2_728, 1_000_000))
    assert sm.capture_probability_unanswered(F(1, 10), 3, 0) == F(28, 1000)


# ------------------------------------------------------------------ window model and bounds


def test_geometric_window_distribution():
    pn = sm.geometric_cycle(0.7, 4)
    assert pn.sum() == pytest.approx(1) and pn[4] == pytest.approx(0.7**4)
    # one cycle: α̂ = n/(n+1) for n < γ, 1 for n = γ
    values, probs = sm.window_alpha_distribution(0.7, 4, 1)
    assert probs.sum() == pytest.approx(1)
    assert dict(zip(np.round(values, 6), probs)) == pytest.approx(
        {0.0: 0.3, 0.5: 0.21, round(2 / 3, 6): 0.147, 0.75: 0.1029, 1.0: 0.2401}
    )
    # a long window concentrates on α (the ratio estimator is consistent)
    values, probs = sm.window_alpha_distribution(0.7, 4, 512)
    assert probs.sum() == pytest.approx(1)
    mean = float((values * probs).sum())
    assert mean == pytest.approx(0.7, abs=2e-3)
    assert sm.distribution_quantile(values, probs, 0.01) < mean < sm.distribution_quantile(values, probs, 0.99)
    assert sm.probability_below(values, probs, 0.6) < 1e-6


def test_binomial_upper_bound():
    assert sm.binomial_upper_bound(0, 10_000) == pytest.approx(2.9955e-4, rel=1e-3)  # the "rule of three"
    assert sm.binomial_upper_bound(5, 100) > 0.05 and sm.binomial_upper_bound(5, 100) == pytest.approx(0.1023, 1e-2)
    assert sm.binomial_upper_bound(3, 3) == 1.0


# ------------------------------------------------------------------ the script, --quick


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    assert HAVE_MODELS, "the bundled models (models/draft, models/target) are part of the repository"
    tmp = tmp_path_factory.mktemp("security")
    out, traces = tmp / "report.json", tmp / "traces.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--traces", str(traces), "--json-out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_S, cwd=str(ROOT), env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    # a second run reuses the cached traces and decodes nothing
    again = subprocess.run(
        cmd + ["--json", "--no-gas"], capture_output=True, text=True, timeout=HANG_S, cwd=str(ROOT), env=ENV
    )
    assert again.returncode == 0, again.stderr[-3000:]
    return report, proc.stdout, json.loads(again.stdout), json.loads(traces.read_text())


def test_every_table_is_printed(run):
    _report, text, _again, _traces = run
    for heading in ("(a) Adversarial-prompt griefing", "(b) Honest false-slash rate", "(c) Referee capture", "(d) Gas"):
        assert heading in text
    # (a) 1 table, (b) sources, histogram, window α̂, false slashes, (c) 2, (d) 1
    assert sum(line.startswith("|-") for line in text.splitlines()) == 8
    assert "dispute with one appeal" in text and "α update at finalize" in text


def test_traces_are_real_and_cached(run):
    report, _text, again, traces = run
    info, t = report["traces_info"], report["false_slash"]["traces"]
    assert info["decoded_jobs"] == t["jobs"] == len(traces["jobs"]) == 9
    assert info["sampling"] == {"temperature": 1.0, "top_k": 0, "top_p": 1.0} and info["gamma"] == 4
    assert info["pair"] == "tiny"  # --pair resolves as every command's does: conftest's VERISPEC_PAIR
    assert again["traces_info"]["decoded_jobs"] == 0 and again["traces_info"]["reused_jobs"] == 9
    assert again["false_slash"]["traces"] == t  # the same traces give the same figures
    assert set(t["by_source"]) == {"heldout-stdlib", "stdlib-tests", "site-packages"}
    for job in traces["jobs"]:
        assert job["proposed"] == [4] and all(0 <= n <= 4 for n in job["accepted"])
        assert 1 <= job["tokens"] <= job["max_tokens"] and len(job["accepted"]) >= 1
    assert sum(t["accept_histogram"]) == t["cycles"] == sum(len(j["accepted"]) for j in traces["jobs"])
    assert sum(t["accept_histogram_geometric"]) == pytest.approx(t["cycles"], abs=0.1 * len(t["accept_histogram"]))
    assert 0.3 < t["alpha"] < 0.99


def test_false_slash_table(run):
    report = run[0]
    b = report["false_slash"]
    p = DEFAULT_PARAMS
    assert b["window_cycles"] == p.alpha_window_cycles == 8 * b["bucket_cycles"]
    assert b["tau"] == p.alpha_tolerance / WAD
    assert set(b["resampled"]) == {"jobs", "iid-cycles"}
    for mode, m in b["resampled"].items():
        d = m["distribution"]
        assert d["windows"] == 300
        # whole-job buckets close at ≥ M cycles, so a window holds ≥ N; one-cycle jobs give exactly N
        assert d["window_cycles_mean"] >= b["window_cycles"]
        if mode == "iid-cycles":
            assert d["window_cycles_mean"] == b["window_cycles"]
        assert d["min"] <= d["p0_1"] <= d["p1"] <= d["p5"] <= d["mean"] <= 1
        assert abs(d["mean"] - b["traces"]["alpha"]) < 0.05
        assert d["evaluations_per_history"] >= 2 and d["evaluations"] == round(d["evaluations_per_history"] * 300)
        rules = [c["rule"] for c in m["claims"]]
        assert len(rules) == 4 and len(set(rules)) == 4
        for c in m["claims"]:
            assert 0 <= c["slashed"] <= c["histories"] == 300
            assert c["rate"] == c["slashed"] / 300 and c["rate"] <= c["rate_upper95"] <= 1
        # a higher claim is never slashed less
        ordered = sorted(m["claims"], key=lambda c: c["claim"])
        assert all(a["slashed"] <= z["slashed"] for a, z in itertools.pairwise(ordered))
    g = b["geometric"]
    assert g["p0_1"] <= g["p1"] <= g["p5"] <= g["mean"] and abs(g["mean"] - g["alpha"]) < 0.01
    for c in g["claims"]:
        assert 0 <= c["per_window"] <= c["rate_union_bound"] <= 1
    rec = b["recommended_claim"]
    assert rec["claim"] == math.floor(b["resampled"]["jobs"]["distribution"]["p1"] * 1000 + 1e-9) / 1000
    assert rec["claim"] <= b["resampled"]["jobs"]["distribution"]["p1"] + 1e-9


def test_griefing_table(run):
    g = run[0]["griefing"]
    p = DEFAULT_PARAMS
    # the deployment's v1.1 α rules, read from DeploymentParams
    assert g["window_cycles"] == p.alpha_window_cycles
    assert (g["alpha_price_floor_wei"], g["alpha_fee_bps"], g["treasury"]) == (
        p.alpha_price_floor,
        p.alpha_fee_bps,
        p.treasury,
    )
    assert g["alpha_slash_cap_wei"] == p.alpha_slash_cap > 0
    assert g["stakes_eth"] == [1, 2, 5, 10]
    assert 0 < g["breach_share"] <= 1
    assert len(g["rows"]) == 3 * 4
    gas_price = g["gas_price_gwei"] * 1e9
    for row in g["rows"]:
        stake = round(row["stake_eth"] * 10**18)
        assert row["drafter_loss_eth"] == pytest.approx(p.alpha_slash(stake) / 10**18)
        assert row["cap_binds"] == (p.alpha_slash(stake) == p.alpha_slash_cap)
        assert row["price_eth"] == pytest.approx(row["cycles"] * p.alpha_price_floor / 10**18)
        assert row["burnt_eth"] == pytest.approx(row["price_eth"] * p.alpha_fee_bps / 10_000)
        assert row["gas_eth"] == pytest.approx(row["jobs"] * g["submit_job_gas"] * gas_price / 10**18)
        assert row["spend_eth"] == pytest.approx(row["price_eth"] + row["gas_eth"])
        loss = row["drafter_loss_eth"]
        assert row["factor"] == pytest.approx(row["spend_eth"] / loss)
        assert row["factor_colluding"] == pytest.approx((row["burnt_eth"] + row["gas_eth"]) / loss)
        assert row["factor_no_gas"] == pytest.approx(row["price_eth"] / loss)
        assert row["factor_colluding_no_gas"] == pytest.approx(row["burnt_eth"] / loss)
        assert row["factor_colluding"] <= row["factor"] and row["factor_colluding_no_gas"] <= row["factor_no_gas"]
        assert row["factor_with_drafter_gas"] == pytest.approx(row["spend_eth"] / (loss + row["drafter_gas_eth"]))
    # at the defaults the cap binds from 1 ETH on, so the factor does not depend on the stake
    assert all(row["cap_binds"] for row in g["rows"])
    fill = [r for r in g["rows"] if r["cycles"] == p.alpha_window_cycles]
    assert all(r["factor_no_gas"] == pytest.approx(10_000 / p.alpha_fee_bps) for r in fill)
    assert all(r["factor_colluding_no_gas"] == pytest.approx(1) for r in fill)
    assert g["worst_factor"] == min(r["factor"] for r in g["rows"])
    assert g["goal_met"] == (g["worst_factor"] >= 1 and g["worst_factor_colluding"] >= 1)
    assert g["goal_met"]  # the goal of issue 10 (at the benchmark's 1 gwei)


def test_capture_table(run):
    c = run[0]["capture"]
    assert c["shares"] == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert {(r["panel"], r["appeals"]) for r in c["rows"]} == {(p, a) for p in (3, 5, 7) for a in (0, 1, 2)}
    for row in c["rows"]:
        assert row["capture"]["0.1"] < row["capture"]["0.3"] < row["capture"]["0.5"] == pytest.approx(0.5)
        assert row["capture"]["0.1"] <= row["unanswered"]["0.1"] + 1e-12
    three = {r["appeals"]: r for r in c["rows"] if r["panel"] == 3}
    assert three[0]["capture"]["0.1"] == pytest.approx(0.028) and three[1]["capture"]["0.1"] == pytest.approx(0.002728)


def test_gas_table(run):
    d = run[0]["gas"]
    assert d["cycle"] == d["commit_draft"] + d["submit_verification"] > 42_000
    assert d["cycle_met"] == (d["cycle"] <= d["cycle_limit"] == 110_000) and d["cycle_met"]
    assert d["cycle"] < d["first_cycle"]  # cycle 0 also commits the drafter's salt
    assert d["finalize_counted"] > d["finalize_uncounted"] > 21_000
    assert d["alpha_update"] == d["finalize_counted"] - d["finalize_uncounted"]
    assert d["submit_job"] > 21_000 and d["dispute_total"] > d["finalize_counted"]
    assert (d["dispute_referees"], d["appeal_referees"]) == (3, 7)
    assert d["dispute_with_appeal_total"] > d["dispute_total"]
    assert d["dispute_total"] == d["dispute"]["total"]
    assert d["dispute_with_appeal_total"] == d["dispute_with_appeal"]["total"]
    g = run[0]["griefing"]
    assert (g["submit_job_gas"], g["commit_first_draft_gas"], g["commit_draft_gas"]) == (
        d["submit_job"],
        d["first_commit"],
        d["commit_draft"],
    )
    assert run[2]["gas"] is None  # --no-gas
