"""scripts/gas_report.py end to end: its own anvil, the deployed system, one JSON object on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chainutil import HANG_S

# its own chains or scripts in OS processes, waited on (tens of seconds): not in `make test-fast`
pytestmark = pytest.mark.long_run

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gas_report.py"


def test_gas_report_json():
    # PYTHONPATH: the script measures this checkout's contracts, not an editable install's (CONTRIBUTING.md)
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1])}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", "--cycles", "4"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert set(report) == {"cycle", "perToken", "jobOverhead", "finalize", "dispute", "disputeWithAppeal", "goal"}

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

    # finalize's α update: the counted job's finalize records α and pays the α fee, the uncounted one does neither
    fin = report["finalize"]
    assert fin["counted"] == job["finalize"] and fin["alphaUpdate"] == fin["counted"] - fin["uncounted"] > 0
    assert fin["pricePerPassUncounted"] < fin["pricePerPassCounted"] == 3 * 10**12  # the default α price floor

    rounds0 = ("openDispute", "answer", "commitVotes", "revealVotes", "resolve", "finalResolve")
    appeal = ("appeal", "drawReferees", "appealCommitVotes", "appealRevealVotes")

    def total(d, keys):
        return sum(d[k] if isinstance(d[k], int) else sum(d[k]) for k in keys)

    plain, appealed = report["dispute"], report["disputeWithAppeal"]
    assert set(plain) == {*rounds0, "referees", "total"}
    assert set(appealed) == {*rounds0, *appeal, "referees", "appealReferees", "total"}
    # R = 3 seats in round 0, an appeal draws 2R + 1 = 7 fresh ones
    assert plain["referees"] == appealed["referees"] == 3 and appealed["appealReferees"] == 7
    assert len(plain["commitVotes"]) == len(plain["revealVotes"]) == 3
    assert len(appealed["appealCommitVotes"]) == len(appealed["appealRevealVotes"]) == 7
    assert plain["total"] == total(plain, rounds0)
    assert appealed["total"] == total(appealed, rounds0 + appeal)
    assert all(plain[k] > 21_000 for k in ("openDispute", "answer", "resolve", "finalResolve"))
    assert appealed["total"] > plain["total"] and appealed["drawReferees"] > 21_000
