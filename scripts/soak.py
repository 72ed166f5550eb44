"""Soak: a bounded random run of honest and misbehaving jobs, disputes and unbonds, nodes behind a fault proxy.

    PYTHONPATH=$PWD .venv/bin/python scripts/soak.py --pair tiny                  # 30 minutes, seed 0, faults on
    PYTHONPATH=$PWD .venv/bin/python scripts/soak.py --pair tiny --minutes 10 --seed 7 --json
    PYTHONPATH=$PWD .venv/bin/python scripts/soak.py --pair tiny --minutes 1 --no-faults

One fresh anvil with the protocol deployed, and as `verispec serve` OS processes (node.bench.world.World),
every one talking to the chain through node.chain.fault_proxy.FaultProxy (`--faults`, the default; `--no-faults`:
straight to anvil):

  drafters   2 honest, 3 `biased` (node/roles/behaviors.py)
  verifiers  4 honest, 5 `retaliate` (per-cycle jobs), 6 `signwrong` (transcript jobs: signs a wrong Verification,
             answers the drafter's force by the rule, then goes silent)
  referees   7, 8, 9 (honest)          watchdog 10 (audits jobs, opens disputes with its own bonds)
  and, driven by this script: requester 1, a challenger 11 (opens disputes on honest positions: it must lose its
  bond), an unbonder 12 (a registered verifier that serves nothing: requestUnbond, withdrawUnbonded, registers again).

The drafters and the signwrong verifier run with `--link-silence 5` so that a silent peer is forced within seconds.
Warm-up: one job of each non-silent kind, run to its end; then the nodes' RSS is read (/proc/PID/status VmRSS).
Then, until `--minutes` (30) are spent (or `--steps` steps), a step drawn from `random.Random(--seed)`:

  job       a job of a random kind: honest transcript / per cycle, biased drafter (either mode), retaliating verifier
            (per cycle), signwrong verifier (transcript: a silent party), 6..24 tokens
  dispute   the challenger opens a TargetReplay dispute on position (0, 0) of a finished honest per-cycle job
  unbond    the unbonder's next move: requestUnbond, withdrawUnbonded once due, or register again
  faults    a new fault mix on the proxy (each kind at 0..its ceiling), or a proxy restart (1 s down) under load
  advance   when no per-cycle or non-silent job is in flight: the clock past the verify timeout (the signwrong
            jobs' forces come due); when no dispute is waiting for a node either: past the challenge window, the
            appeal period and the unbonding period (jobs finalize, disputes resolve, the unbonder may withdraw)

After every step, ETH conservation: Σ balances of every dev account, every contract and the burn address at one
block, plus every transaction's gasUsed × effectiveGasPrice up to that block (eth_getBlockReceipts), equals what
they held at the start. At the end: the nodes' RSS against the warm-up's (each within `--rss-tolerance`, 10 %);
then every job is driven to its end (the clock past every window, the nodes given time to finalize and resolve),
the nodes stopped, whatever is left finalized and resolved by this script, every account withdraws its market
earnings, dispute credits and, after requestUnbond and the unbonding period, its stake: the contracts must hold
only what the burn address is owed (no key can withdraw it), i.e. nothing stuck. Slashes of honest parties (any
`Slashed`, `AlphaSlashed` or slashing `JobFinished` of an account without a misbehaviour) must be none. One table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import pathlib
import sys
import tempfile
import time
from collections import Counter

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # before transformers is imported (and inherited)
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from node.bench.harness import bench_pair, machine_load, model_ids, use_pair, wait_until
from node.bench.ledger import Ledger
from node.bench.soak import (
    BEHAVIORS,
    BIASED_D,
    COUNTS,
    HONEST_D,
    HONEST_V,
    KINDS,
    SIGNWRONG_V,
    SILENCE_S,
    SOAK_CAPACITY,
    STEPS,
    UNBONDER,
    WATCHDOG,
    Soak,
    print_soak_summary,
    rss_kb,
)
from node.bench.world import World
from node.chain.enums import DisputeStatus, JobStatus, Outcome
from node.decoding.pairs import PairError


def run(args) -> dict:
    from node.chain.anvil import running_anvil
    from node.chain.compile import compile_contracts
    from node.chain.params import BURN_ADDRESS
    from node.jobs import chaindata

    ids = model_ids(bench_pair())  # the soak runs no engine of its own: the ids without loading the models
    artifacts = compile_contracts()
    report: dict = {"config": {**{k: v for k, v in vars(args).items() if k != "json"}}, "steps": Counter()}
    started = time.monotonic()
    with running_anvil(accounts=20) as anvil, tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        # its random schedule can pile up a drafter's jobs (silent verifiers' wait for their forces): room for them
        world = World(anvil.rpc_url, pathlib.Path(tmp), COUNTS, artifacts, ids, bench_pair().vocab, SOAK_CAPACITY)
        world.register_all()
        world.register("verifier", UNBONDER)
        holders = [a.lower() for a in world.accounts] + [BURN_ADDRESS.lower()]
        proxy = None
        if args.faults:
            from node.chain.fault_proxy import FaultProxy

            proxy = FaultProxy(anvil.rpc_url, seed=args.seed).start()
        silence = ("--link-silence", SILENCE_S)
        extra = {HONEST_D: silence, BIASED_D: silence, SIGNWRONG_V: silence, HONEST_V: silence}
        extra[WATCHDOG] = ("--audit-rate", "0.3", "--draft-rate", "0.5", "--bond-budget", "2eth")
        world.start_nodes(proxy.url if proxy else None, BEHAVIORS, extra)
        soak = Soak(world, args, proxy)
        holders += [c.address.lower() for c in soak.contracts().values()]
        ledger = Ledger(world.rpc, sorted(set(holders)))
        report["node_start_s"] = time.monotonic() - started
        log = []
        try:
            # warm-up: one job of each kind but the silent one, to its end, before RSS is read
            warm = [soak.submit(k) for k in KINDS if not k.startswith("signwrong")]
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: all(world.status(j) >= JobStatus.Finished for j in warm), 300, 0.5)
            ledger.check("warm-up")
            if proxy is not None:
                soak.step_faults()
            rss_warm = {name: rss_kb(pid) for name, pid in world.pids().items()}
            t_loop = time.monotonic()
            end = t_loop + 60 * args.minutes
            n = 0
            while (args.steps is None and time.monotonic() < end) or (args.steps is not None and n < args.steps):
                name = soak.rng.choices(list(STEPS), weights=list(STEPS.values()))[0]
                try:
                    what = soak.step(name)
                except Exception as exc:  # a step the chain refused: recorded, the soak goes on
                    what = f"error: {type(exc).__name__}: {exc}"
                    soak.counts[f"{name}:error"] += 1
                report["steps"][name] += 1
                ok = ledger.check(name)
                log.append(
                    {"step": n, "t_s": round(time.monotonic() - t_loop, 1), "block": ledger.block, "action": name}
                )
                log[-1]["what"] = what
                log[-1]["conserved"] = ok
                world.nodes.check()
                n += 1
                time.sleep(args.pause)
            report["loop_s"] = time.monotonic() - t_loop
            rss_end = {name: rss_kb(pid) for name, pid in world.pids().items()}
            report["drain"] = soak.drain(args.drain_timeout)
            ledger.check("drain")
        finally:
            codes = world.stop_nodes()
            if proxy is not None:
                report["proxy"] = dict(proxy.stats)
                proxy.stop()
        report["node_exit_codes"] = codes
        report["settle"] = soak.settle_all()
        ledger.check("settle")
        report["honest_slashes"] = soak.honest_slashes()
        report["all_slashes"] = [{**x, "party": soak.name_of(x["account"])} for x in world.slashes(world.start_block)]
        report["challenger_disputes"] = {
            str(d): {
                "status": DisputeStatus(soak.dispute_status(d)).name,
                "outcome": Outcome(chaindata.dispute_view(soak.dm, d)["outcome"]).name,
            }
            for d in soak.disputes_opened
        }
        report["jobs"] = {str(j): (k, JobStatus(world.status(j)).name) for j, k in soak.jobs.items()}
        report["disputes"] = {}
        for d in range(1, soak.dm.functions.disputeCount().call() + 1):
            view = chaindata.dispute_view(soak.dm, d)
            report["disputes"][str(d)] = DisputeStatus(view["status"]).name
            report.setdefault("dispute_details", {})[str(d)] = {
                "job": view["jobId"],
                "challenger": soak.name_of(view["challenger"]),
                "outcome": Outcome(view["outcome"]).name,
            }
        report["disputes_by_challenger"] = soak.disputes_opened
    report["actions"] = dict(soak.counts)
    report["steps"] = dict(report["steps"])
    report["log"] = log
    report["conservation"] = {
        "checks": ledger.checks,
        "failures": ledger.failures,
        "rereads": ledger.rereads,
        "gas_paid_wei": ledger.fees,
        "txs": ledger.txs,
    }
    report["rss_kb"] = {
        name: {"warm": rss_warm[name], "end": rss_end[name], "ratio": rss_end[name] / max(rss_warm[name], 1)}
        for name in rss_warm
    }
    report["invariants"] = invariants(report, args)
    report["wall_s"] = time.monotonic() - started
    report["machine"] = machine_load()
    return report


def invariants(r: dict, args) -> dict:
    return {
        "eth_conserved_after_every_step": not r["conservation"]["failures"],
        "no_stuck_funds": all(v == 0 for v in r["settle"]["stuck_wei"].values()) and not r["settle"]["errors"],
        "every_job_ended": not r["drain"]["unfinished_jobs"] and all(s == "Finalized" for _, s in r["jobs"].values()),
        "no_honest_slash": not r["honest_slashes"],
        "rss_flat": all(abs(v["ratio"] - 1) <= args.rss_tolerance for v in r["rss_kb"].values()),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long the random loop runs")
    parser.add_argument("--steps", type=int, default=None, help="a number of steps instead of --minutes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--faults", action=argparse.BooleanOptionalAction, default=True, help="nodes via FaultProxy")
    parser.add_argument("--pair", default=None, help="smol | tiny (default: $VERISPEC_PAIR, else smol)")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between two steps")
    parser.add_argument("--rss-tolerance", type=float, default=0.10)
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or (args.steps is not None and args.steps < 1):
        parser.error("--minutes must be positive and --steps at least 1")
    try:
        args.pair = use_pair(args.pair)
    except PairError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.ERROR)
    report = run(args)
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print_soak_summary(report)
    return 0 if all(report["invariants"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
