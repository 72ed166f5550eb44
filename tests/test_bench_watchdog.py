"""scripts/bench_watchdog.py: one --quick run (real models, fresh traces) whose report is checked for structure and
for the invariants of a sampled audit (not timings)."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import subprocess
import sys

import pytest

from node import audit_sampling as A
from tests.chainutil import HANG_S

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "bench_watchdog.py"
# PYTHONPATH: the script imports this checkout's node (node.bench), not an editable install's (git worktrees)
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
MISBEHAVIOURS = ("biased+collude", "sparse-biased+collude", "shade", "lazy")

# a benchmark script run end to end (its own chain, nodes or decoding runs): not in `make test-fast`
pytestmark = [
    pytest.mark.bench,
    pytest.mark.skipif(
        not (ROOT / "models" / "target" / "model.safetensors").exists(), reason="bundled models are missing"
    ),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("watchdog")
    png = tmp / "curve.png"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--json", "--traces", str(tmp / "traces.json"), "--plot", str(png)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_S, cwd=str(ROOT), env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return json.loads(proc.stdout)


def test_honest_jobs_have_no_fault_so_a_watchdog_opens_nothing(report):
    honest = report["honest"]
    assert honest["jobs"] >= 4
    assert honest["faulty_positions"] == 0 and honest["disputes_at_full_audit"] == 0
    assert report["faults"]["honest"]["jobs_with_fault"] == 0


def test_it_runs_the_pair_the_environment_names(report):
    """--pair resolves as every command's does: conftest's VERISPEC_PAIR=tiny, and the traces are that pair's."""
    from node.decoding.pairs import get_pair
    from node.requester.checkpoints import load_model_info

    assert report["traces_info"]["pair"] == "tiny"
    assert report["traces_info"]["target_id"] == "0x" + load_model_info(get_pair("tiny").target).model_id.hex()


def test_each_misbehaviour_is_faulty_where_it_cheats(report):
    faults = report["faults"]
    for name in ("biased+collude", "lazy"):  # drafters: only draft positions are wrong
        assert faults[name]["faulty_draft_positions"] > 0 and faults[name]["faulty_target_positions"] == 0
    assert faults["shade"]["faulty_target_positions"] > 0 and faults["shade"]["faulty_draft_positions"] == 0
    assert all(r.startswith("x_") for r in faults["biased+collude"]["reasons"])  # not the sample; q is its true q
    assert all(r.startswith("p_") for r in faults["shade"]["reasons"])
    assert any(r.startswith("q_") for r in faults["lazy"]["reasons"])
    assert faults["shade"]["rejection_rate"] > 1.2 * faults["honest"]["rejection_rate"]


def test_detection_exact_and_empirical_agree_rise_with_f_and_f1_catches_all(report):
    rates = [str(f) for f in report["rates"]]
    assert rates[0] == "0.01" and rates[-1] == "1.0"
    for name in MISBEHAVIOURS:
        if name not in report["detection"]:  # no job of it met a position to cheat on (a sparse bias, a short run)
            assert report["faults"][name]["jobs_with_fault"] == 0
            continue
        for w in A.WEIGHTINGS:
            grid = report["detection"][name][w]
            exact = [grid[f]["sampled"]["exact"] for f in rates]
            assert all(a <= b + 1e-12 for a, b in itertools.pairwise(exact)), (name, w, exact)
            assert exact[0] < exact[-1] == pytest.approx(1.0)
            assert grid["1.0"]["sampled"]["empirical"] == 1.0
            for f in rates:
                s, full = grid[f]["sampled"], grid[f]["full_draft"]
                assert abs(s["exact"] - s["empirical"]) <= 4 * s["stderr"] + 0.03, (name, w, f, s)
                assert full["exact"] >= s["exact"] - 1e-12  # replaying every draft position never catches less
                assert abs(s["target_forwards"] - s["target_forwards_empirical"]) <= 0.15 * s["target_forwards"] + 0.1
            # at f = 1 every cycle is replayed once: one target forward per cycle
            assert grid["1.0"]["sampled"]["target_forwards"] == pytest.approx(grid["1.0"]["sampled"]["cycles"])
    for name in ("biased+collude", "lazy"):  # their faults are draft positions: a full draft replay finds them all
        assert report["detection"][name]["uniform"]["0.01"]["full_draft"]["exact"] == pytest.approx(1.0)


def test_break_even_formula_against_the_measured_rate(report):
    for name in MISBEHAVIOURS:
        if name not in report["break_even"]:
            continue
        b = report["break_even"][name]
        g, loss = b["gain_pay_max_wei"], b["loss_wei"]
        assert loss == report["params"]["accused_slash_wei"]
        assert b["required_detection"] == pytest.approx(g / (g + loss))
        assert b["formula_k1"] == pytest.approx(A.break_even_rate(g, loss, 1))
        # jobs with k ≥ 1 faults: the measured rate never needs more than a one-position cheat's f*
        assert 0 < b["measured"]["uniform"] <= b["formula_k1"] * 1.0001
        # gain = slash: P must reach 1/2, which k ≥ 1 faulty positions audited uniformly do by 1 − 2^(−1/k) ≤ 1/2
        assert 0 < b["measured_gain_eq_slash"]["uniform"] <= 0.5 + 1e-6
    headline = report["headline"]
    assert headline["rate_gain_eq_slash"] > 0 and headline["target_forwards_per_job"] > 0
    assert headline["target_forwards_per_job"] < headline["full_audit_forwards"]
