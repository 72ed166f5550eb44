"""scripts/bench_decode.py runs and reports figures that agree with the protocol's closed forms.

The benchmark's speed figures are not asserted here (they belong to docs/benchmarks.md's tables, measured on a quiet
machine); what is asserted is that one short run completes and that its derived columns are computed from
its measured ones by the one implementation of each formula (node/protocol.py).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from node import protocol
from tests.chainutil import HANG_S

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "bench_decode.py"

# a benchmark script run end to end (its own chain, nodes or decoding runs): not in `make test-fast`
pytestmark = [
    pytest.mark.bench,
    pytest.mark.skipif(
        not (ROOT / "models" / "target" / "model.safetensors").exists(), reason="bundled models are missing"
    ),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    """One short run that prints the table and writes the JSON object (--json-out, as the device check does)."""
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--json-out",
            str(out),
            "--gammas",
            "1,3",
            "--tokens",
            "24",
            "--threads",
            "1",
            "--temperature",
            "0.9",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    header, _rule, *rows = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    assert "S pred" in header and "S meas" in header and len(rows) == len(report["rows"]) == 2
    return report


def test_every_gamma_has_a_row_with_positive_rates(report):
    assert [row["gamma"] for row in report["rows"]] == [1, 3]
    for row in report["rows"]:
        assert row["ar_tok_s"] > 0 and row["engine_tok_s"] > 0 and row["assisted_tok_s"] > 0
        assert 0 < row["alpha"] <= 1
        assert 1 <= row["omega_measured"] <= row["gamma"] + 1
        assert row["cost_ratio"] > 0 and row["pass_over_step"] > 0


def test_derived_columns_come_from_the_protocol_formulas(report):
    for row in report["rows"]:
        alpha, gamma, c = row["alpha"], row["gamma"], row["cost_ratio"]
        assert row["omega_closed_form"] == pytest.approx(protocol.expected_tokens_per_pass(alpha, gamma))
        assert row["speedup_predicted"] == pytest.approx(protocol.predicted_speedup(alpha, gamma, c))
        assert row["speedup_measured"] == pytest.approx(row["engine_tok_s"] / row["ar_tok_s"])
        assert row["engine_over_assisted"] == pytest.approx(row["engine_tok_s"] / row["assisted_tok_s"])
        # c prices one run of each model: a draft forward against a one-token target forward
        assert c == pytest.approx(row["draft_step_ms"] / row["target_step_ms"])
        assert row["pass_over_step"] == pytest.approx(row["target_pass_ms"] / row["target_step_ms"])


def test_the_summary_is_consistent_with_the_rows(report):
    rows = report["rows"]
    assert report["best_gamma"] == max(rows, key=lambda r: r["engine_tok_s"])["gamma"]
    assert report["engine_not_slower_than_assisted_at_every_gamma"] == all(
        r["engine_tok_s"] >= r["assisted_tok_s"] for r in rows
    )
    assert report["peak_rss_mb"] < 1024
