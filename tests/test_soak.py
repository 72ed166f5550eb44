"""scripts/soak.py: its ETH ledger catches what leaves the holders, and a short soak (half a minute of random steps,
the nodes behind the fault proxy, on the tiny pair) keeps every invariant and reports it in its summary."""

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
SCRIPT = ROOT / "scripts" / "soak.py"
# PYTHONPATH: the script imports this checkout's node (node.bench), not an editable install's (git worktrees)
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

# the soak: many nodes and jobs for minutes: not in `make test-fast`
pytestmark = [
    pytest.mark.campaign,
    pytest.mark.skipif(
        not (ROOT / "models" / "target" / "model.safetensors").exists(), reason="bundled models are missing"
    ),
]


def test_the_ledger_counts_gas_and_catches_eth_that_leaves_the_holders():
    from node.bench.harness import Rpc
    from node.bench.ledger import Ledger
    from node.chain.anvil import running_anvil

    with running_anvil(accounts=4) as anvil:
        rpc = Rpc(anvil.rpc_url)
        accounts = rpc("eth_accounts")
        ledger = Ledger(rpc, [a.lower() for a in accounts[:3]])

        def send(to, value):
            rpc.receipt(rpc("eth_sendTransaction", {"from": accounts[0], "to": to, "value": hex(value)}))

        send(accounts[1], 10**18)  # between holders: only the gas leaves them, and it is counted
        assert ledger.check("inside") and ledger.fees > 0 and ledger.txs == 1
        send(accounts[3], 1)  # one wei to an account that is no holder
        assert not ledger.check("outside")
        assert ledger.failures == [{"step": "outside", "block": 2, "difference_wei": -1}]


def test_bad_input_is_one_line():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--minutes", "0"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        cwd=str(ROOT),
        env=ENV,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith("--minutes must be positive and --steps at least 1")


@pytest.fixture(scope="module")
def report() -> dict:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--pair", "tiny", "--minutes", "0.5", "--seed", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        cwd=str(ROOT),
        env=ENV,
    )
    assert proc.stdout, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    # what a failed invariant needs to be understood: which jobs did not end, what settling left or could not do
    keys = ("invariants", "drain", "jobs", "node_exit_codes", "honest_slashes")
    assert proc.returncode == 0, ({k: report.get(k) for k in keys}, report.get("settle"), proc.stderr[-2000:])
    return report


def test_every_invariant_held(report):
    assert report["invariants"] == {
        "eth_conserved_after_every_step": True,
        "no_stuck_funds": True,
        "every_job_ended": True,
        "no_honest_slash": True,
        "rss_flat": True,
    }
    steps = sum(report["steps"].values())
    assert steps >= 5 and len(report["log"]) == steps
    # checked after every step, the warm-up, the drain and the final settlement
    assert report["conservation"]["checks"] == steps + 3 and report["conservation"]["failures"] == []
    assert report["conservation"]["gas_paid_wei"] > 0
    settle = report["settle"]
    assert settle["stuck_wei"] == dict.fromkeys(settle["held_wei"], 0)
    assert settle["held_wei"]["registry"] == 0  # every stake unbonded and withdrawn
    assert all(0.9 <= v["ratio"] <= 1.1 for v in report["rss_kb"].values()) and len(report["rss_kb"]) == 9


def test_the_nodes_ran_behind_injected_faults_and_the_misbehaving_jobs_ran(report):
    proxy = report["proxy"]
    assert proxy["forwarded"] > 0 and sum(proxy[k] for k in ("drop", "delay", "rpc_error", "http_429", "cut")) > 0
    kinds = {kind for kind, _ in report["jobs"].values()}
    # the warm-up ran one job of every kind but the silent one
    assert {"honest-transcript", "honest-onchain", "biased-onchain", "retaliate-onchain"} <= kinds
    assert all(state == "Finalized" for _, state in report["jobs"].values())
    honest = [s for s in report["all_slashes"] if "(" not in s["party"]]  # a misbehaving party's name says which
    assert honest == [] == report["honest_slashes"]


def test_the_summary_reports_the_invariants(report):
    from node.bench.soak import print_soak_summary

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_soak_summary(report)
    text = out.getvalue()
    for line in (
        "| eth conserved after every step | yes |",
        "| no stuck funds | yes |",
        "| no honest slash | yes |",
        "| rss flat | yes |",
        "| every job ended | yes |",
    ):
        assert line in text.splitlines(), text
    assert "| ETH conservation checks |" in text and "| fault proxy |" in text
