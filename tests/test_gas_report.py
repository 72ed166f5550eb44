"""scripts/gas_report.py end to end: its own anvil, the deployed system, one JSON object on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gas_report.py"


def test_gas_report_json():
    # PYTHONPATH: the script measures this checkout's contracts, not an editable install's (docs/TEAM_NOTES.md)
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1])}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", "--cycles", "4"], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert set(report) == {"cycle", "perToken", "jobOverhead", "dispute", "goal"}

    cycles = {row["gamma"]: row for row in report["cycle"]}
    assert list(cycles) == [1, 4, 8, 16]
    for row in cycles.values():
        assert row["total"] == row["commitDraft"] + row["submitVerification"] > 21_000 * 2
        # cycle 0 commits the drafter's salt too (commitFirstDraft): a little more than a later cycle
        assert row["total"] < row["firstCycle"]["total"] < row["total"] + 3_000
    assert cycles[1]["total"] < cycles[4]["total"] < cycles[8]["total"] < cycles[16]["total"]
    assert cycles[4]["total"] <= 110_000
    assert report["goal"] == {"gamma": 4, "limit": 110_000, "total": cycles[4]["total"], "met": True}

    assert {(t["gamma"], t["alpha"]) for t in report["perToken"]} == {(g, a) for g in cycles for a in (0.6, 0.8)}
    for t in report["perToken"]:
        assert t["sampledCycles"] == 4 and 1 <= t["tokensPerCycleSampled"] <= t["gamma"] + 1
        assert 1 < t["tokensPerCycleModel"] <= t["gamma"] + 1
        # the per-n measurement is exact (no sampling), so it stays close to the steady-state model
        assert abs(t["gasPerTokenMeasured"] / t["gasPerTokenModel"] - 1) < 0.1
        assert t["gasPerTokenSampled"] > 0

    job = report["jobOverhead"]
    assert set(job) == {"submitJob", "acceptJob", "finishExtra", "finalize", "withdraw", "total"}
    assert set(job["withdraw"]) == {"requester", "drafter", "verifier"}
    steps = [job["submitJob"], job["acceptJob"], job["finishExtra"], job["finalize"], *job["withdraw"].values()]
    assert all(g > 0 for g in steps) and job["total"] == sum(steps)

    dispute = report["dispute"]
    r = dispute["referees"]
    assert r == 3 and len(dispute["commitVotes"]) == len(dispute["revealVotes"]) == r
    assert dispute["total"] == (
        dispute["openDispute"]
        + dispute["answer"]
        + sum(dispute["commitVotes"])
        + sum(dispute["revealVotes"])
        + dispute["resolve"]
    )
