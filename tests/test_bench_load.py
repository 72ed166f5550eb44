"""scripts/bench_load.py at a small size: 6 concurrent jobs (and one alone) in both modes on 2 drafters, 2 verifiers
and a referee, every one a `verispec serve` process, on the tiny pair.

One run of the script (`--mode both --json`, the same nodes serving both modes one after the other); the table's
invariants are checked on its report: every job ran to its finalization without a stall, no honest party was slashed,
the spot-checked outputs equal the engine's, and the figures are consistent with each other.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.chainutil import HANG_S

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "bench_load.py"
# PYTHONPATH: the script imports this checkout's node (node.bench), not an editable install's (git worktrees)
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TOKENS, JOBS = 12, 6

# a benchmark script run end to end (its own chain, nodes or decoding runs): not in `make test-fast`
pytestmark = [
    pytest.mark.bench,
    pytest.mark.skipif(
        not (ROOT / "models" / "target" / "model.safetensors").exists(), reason="bundled models are missing"
    ),
]


def bench(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd=str(ROOT), env=ENV
    )


def test_bad_input_is_one_line_before_anything_starts():
    proc = bench("--jobs", "0", "--pair", "tiny", timeout=HANG_S)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith("--referees not negative"), proc.stderr
    proc = bench("--pair", "large", timeout=HANG_S)
    assert proc.returncode == 2 and "unknown model pair 'large'" in proc.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def report() -> dict:
    proc = bench(
        "--json", "--pair", "tiny", "--mode", "both", "--jobs", str(JOBS), "--tokens", str(TOKENS),
        "--drafters", "2", "--verifiers", "2", "--referees", "1", timeout=HANG_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("mode", ["transcript", "onchain"])
def test_every_job_completes_without_a_stall_or_an_honest_slash(report, mode):
    for phase, n in (("alone", 1), ("concurrent", JOBS)):
        p = report[mode][phase]
        assert p["jobs"] == n == len(p["per_job"])
        assert p["stalled"] == [] and p["honest_slashes"] == [], (mode, phase, p["stalled"], p["honest_slashes"])
        assert p["all_finalized"] and p["finalized_by_nodes"]
        assert all(j["tokens"] == TOKENS and j["status"] == "Finalized" for j in p["per_job"])
        assert all(j["longest_wait_s"] <= report["config"]["stall_s"] for j in p["per_job"])
        # every reverted node transaction is one of this phase's jobs' (lost races are reported, not hidden)
        ids = {j["job_id"] for j in p["per_job"]}
        assert all(int(r["key"].split("job:")[1].split(":")[0]) in ids for r in p["reverted_node_txs"])


@pytest.mark.parametrize("mode", ["transcript", "onchain"])
def test_spot_checked_outputs_equal_the_engine(report, mode):
    alone, concurrent = report[mode]["alone"], report[mode]["concurrent"]
    assert len(alone["outputs_equal_engine"]) == 1 and len(concurrent["outputs_equal_engine"]) == 2
    assert all(alone["outputs_equal_engine"].values()) and all(concurrent["outputs_equal_engine"].values())


@pytest.mark.parametrize("mode", ["transcript", "onchain"])
def test_the_figures_agree_with_each_other(report, mode):
    for phase in ("alone", "concurrent"):
        p = report[mode][phase]
        assert p["total_tok_s"] == pytest.approx(p["jobs"] * TOKENS / p["wall_s"])
        assert p["jobs_per_min"] == pytest.approx(60 * p["jobs"] / p["wall_s"])
        assert 0 < p["per_job_tok_s_min"] <= p["per_job_tok_s_p50"]
        # two cycles' events seen in one poll are 0 s apart: under load more than half of them may be
        assert 0 <= p["cycle_latency_p50_s"] <= p["cycle_latency_p99_s"] and p["cycle_latency_p99_s"] > 0
        # a job's cycles as the requester saw them: at most one per token, at least tokens / (γ + 1)
        cycles = [j["cycles"] for j in p["per_job"]]
        assert all(TOKENS / 5 <= c <= TOKENS for c in cycles), (mode, phase, cycles)


def test_the_table_shows_both_phases_of_both_modes(report):
    from node.bench.load import print_load_table

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_load_table(report)
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if line.startswith("| |"))
    assert header.count("alone") == 2 and header.count(f"{JOBS} concurrent") == 2
    assert "| stalls (> 30 s without progress) | 0 | 0 | 0 | 0 |" in lines
    assert "| slashes of honest parties | 0 | 0 | 0 | 0 |" in lines
    assert "| outputs = engine (spot check) | yes | yes | yes | yes |" in lines
