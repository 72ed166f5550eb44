"""The foundry invariant campaign over the contracts (tests/forge; docs/contracts.md, "Invariant campaign").

forge runs `ProtocolInvariants.invariant_money` (profile `invariant` of foundry.toml: 40 runs × 256 calls, a fixed
seed) against the real contracts: handlers over the registry, the market's per-cycle jobs, the α window and the
disputes drive a fixed cast of eleven actors, and after every call the money invariants of tests/test_stateful.py
must hold (each contract's balance is what it owes, ETH conservation and every wallet against a ghost ledger, the
market's credits against the handlers' predictions, locks against open jobs and disputes, α windows against a
model). The first test asserts from forge's JSON report that the campaign passed, made at least 10,000 calls, called
every handler entry point, and that almost none of them reverted (fail_on_revert is off, so a handler that stopped
doing valid work would show up here, not as a pass that checked nothing). The second runs a broken harness
(VERISPEC_FORGE_MUTANT=1: the market's withdraw handler skips its ghost update) and asserts forge reports the
conservation invariant broken, so the campaign is one that can fail.

Run: .venv/bin/python -m pytest -q tests/test_forge_invariants.py -s   (prints the per-handler table)
Longer campaign: `make invariants`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

# forge's invariant campaign (40 x 256 calls): not in `make test-fast`
pytestmark = pytest.mark.campaign

ROOT = Path(__file__).resolve().parents[1]
FORGE = ROOT / "node_modules" / ".bin" / "forge"
SOLC = ROOT / "scripts" / "solc"
SUITE = "tests/forge/Invariants.t.sol:ProtocolInvariants"
TEST = "invariant_money()"
HANDLERS = ("RegistryHandler", "JobHandler", "AlphaHandler", "DisputeHandler")
# every fuzzed entry point the test contract's targetSelectors() lists
ENTRY_POINTS = {
    "RegistryHandler": {"register", "addStake", "requestUnbond", "withdrawUnbonded"},
    "JobHandler": {"submit", "accept", "commit", "verify", "timeout", "finalize", "withdraw"},
    "AlphaHandler": {"honestJob", "raiseAlpha", "lowerAlpha"},
    "DisputeHandler": {
        "open",
        "draw",
        "answer",
        "answerTimeout",
        "commitVote",
        "revealVote",
        "resolve",
        "appeal",
        "withdraw",
    },
}
MIN_CALLS = 10_000
MAX_REVERT_RATE = 0.01


def run_campaign(**env: str) -> tuple[dict, float]:
    """Runs the campaign with forge (`--json`; `-vv` keeps afterInvariant's logs); returns the invariant test's
    result and the wall time."""
    started = time.monotonic()
    done = subprocess.run(
        [str(FORGE), "test", "--use", str(SOLC), "--offline", "--json", "-vv", "--match-contract", SUITE.split(":")[1]],
        cwd=ROOT,
        env={**os.environ, "FOUNDRY_PROFILE": "invariant", **env},
        capture_output=True,
        text=True,
        timeout=1500,
    )
    wall = time.monotonic() - started
    start = done.stdout.find("{")
    assert start >= 0, f"no JSON report (rc {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    report = json.loads(done.stdout[start:])
    return report[SUITE]["test_results"][TEST], wall


def summary(result: dict) -> Counter:
    """The campaign counters afterInvariant logs for the last run ("campaign <name> <n>")."""
    counts: Counter = Counter()
    for line in result.get("decoded_logs", []):
        if line.startswith("campaign "):
            name, _, n = line[len("campaign ") :].rpartition(" ")
            counts[name] = int(n)
    return counts


def test_the_campaign_holds_every_money_invariant_over_10k_calls():
    result, wall = run_campaign()
    assert result["status"] == "Success", f"an invariant broke: {result['reason']}\n{result.get('counterexample')}"
    inv = result["kind"]["Invariant"]
    calls, reverts, metrics = inv["calls"], inv["reverts"], inv["metrics"]

    by_handler: dict[str, Counter] = {h: Counter() for h in HANDLERS}
    print(f"\nforge invariant campaign: {inv['runs']} runs, {calls} calls, {reverts} reverts, {wall:.0f} s wall")
    for key, m in sorted(metrics.items()):
        handler, _, selector = key.rpartition(":")[2].partition(".")
        by_handler[handler][selector] = m["calls"]
        print(f"  {handler:16} {selector:17} {m['calls']:6} calls {m['reverts']:4} reverts")
    print("  last run:", ", ".join(f"{k} {v}" for k, v in sorted(summary(result).items())))

    assert calls >= MIN_CALLS, f"only {calls} calls (runs × depth in foundry.toml's [profile.invariant.invariant])"
    assert sum(m["calls"] for m in metrics.values()) == calls
    for handler, selectors in ENTRY_POINTS.items():
        missing = selectors - {s for s, n in by_handler[handler].items() if n > 0}
        assert not missing, f"{handler} was never called through {sorted(missing)}"
    assert reverts <= MAX_REVERT_RATE * calls, f"{reverts} of {calls} calls reverted: handlers stopped doing valid work"
    # the work reached every corner the invariants are about (the last run alone, same seed every time)
    done = summary(result)
    for what in ("job:verified", "job:finalized", "job:withdrawn", "alpha:honest-job", "dispute:panel-drawn"):
        assert done[what] > 0, f"the last run never did {what}: {dict(done)}"


def test_a_broken_ghost_ledger_makes_the_campaign_fail(tmp_path):
    # a short campaign, its failure kept out of the real one's replay folder
    result, _ = run_campaign(
        VERISPEC_FORGE_MUTANT="1",
        FOUNDRY_INVARIANT_RUNS="4",
        FOUNDRY_INVARIANT_DEPTH="128",
        FOUNDRY_INVARIANT_FAILURE_PERSIST_DIR=str(tmp_path),
    )
    assert result["status"] == "Failure", "the campaign passed with a handler that skips its ghost update"
    assert "contracts hold != ghost in - out" in result["reason"] or "a wallet left its ledger" in result["reason"], (
        result["reason"]
    )
