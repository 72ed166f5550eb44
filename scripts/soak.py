"""Soak: a bounded random run of honest and misbehaving jobs, disputes and unbonds, nodes behind a fault proxy.

    PYTHONPATH=$PWD .venv/bin/python scripts/soak.py --pair tiny                  # 30 minutes, seed 0, faults on
    PYTHONPATH=$PWD .venv/bin/python scripts/soak.py --pair tiny --minutes 10 --seed 7 --json
    PYTHONPATH=$PWD .venv/bin/python scripts/soak.py --pair tiny --minutes 1 --no-faults

One fresh anvil with the protocol deployed, and as `verispec serve` OS processes (scripts/bench_load.py `World`),
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
import os
import pathlib
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import bench_e2e as e2e  # noqa: E402
import bench_load as load  # noqa: E402

from node.chain.enums import DisputeKind, DisputeStatus, JobStatus, Outcome  # noqa: E402

COUNTS = {"drafter": 2, "verifier": 3, "referee": 3, "watchdog": 1}  # dev accounts 2..10 (bench_load.World)
HONEST_D, BIASED_D = 2, 3
HONEST_V, RETALIATE_V, SIGNWRONG_V = 4, 5, 6
WATCHDOG, CHALLENGER, UNBONDER = 10, 11, 12
BEHAVIORS = {BIASED_D: "biased", RETALIATE_V: "retaliate", SIGNWRONG_V: "signwrong"}
MISBEHAVING = {BIASED_D, RETALIATE_V, SIGNWRONG_V, CHALLENGER}
SILENCE_S = "5"
KINDS = {  # name: (mode, drafter, verifier)
    "honest-transcript": ("transcript", HONEST_D, HONEST_V),
    "honest-onchain": ("onchain", HONEST_D, HONEST_V),
    "biased-transcript": ("transcript", BIASED_D, HONEST_V),
    "biased-onchain": ("onchain", BIASED_D, HONEST_V),
    "retaliate-onchain": ("onchain", HONEST_D, RETALIATE_V),
    "signwrong-transcript": ("transcript", HONEST_D, SIGNWRONG_V),
}
STEPS = {"job": 5, "dispute": 1, "unbond": 1, "faults": 2, "advance": 2}
FAULT_CEILING = dict(drop=0.01, delay=0.05, rpc_error=0.03, http_429=0.03, http_5xx=0.03, cut=0.01)
PROMPTS = ["def fibonacci(n):\n", "import os\nimport sys\n\n\ndef main(argv=None):\n", "class Stack:\n    def "]


# ====================================================================== the money


class Ledger:
    """ETH conservation over `holders`: their balances at a block plus the gas every transaction up to that block
    paid equal their balances at the start (the block's fee recipient is no holder: what it earns is gas paid)."""

    def __init__(self, rpc: e2e.Rpc, holders: list[str]):
        self.rpc, self.holders = rpc, holders
        self.block = int(rpc("eth_blockNumber"), 16)
        self.start = self.balances(self.block)
        self.fees = 0
        self.txs = 0
        self.checks = 0
        self.failures: list[dict] = []
        self.rereads: list[dict] = []

    def balances(self, block: int) -> int:
        return sum(int(self.rpc("eth_getBalance", a, hex(block)), 16) for a in self.holders)

    def check(self, step: str) -> bool:
        head = int(self.rpc("eth_blockNumber"), 16)
        for number in range(self.block + 1, head + 1):
            block = self.rpc("eth_getBlockByNumber", hex(number), False)
            if block["miner"].lower() in self.holders:
                raise RuntimeError(f"the fee recipient {block['miner']} is a holder: conservation would count it")
            for receipt in self.rpc("eth_getBlockReceipts", hex(number)):
                self.fees += int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
                self.txs += 1
        self.block = head
        held = self.balances(head)
        self.checks += 1
        if held + self.fees != self.start:
            # read again at the same block: under load anvil has answered a balance at block N with a state that
            # already held block N + 1's transaction (the difference was one transaction's fee, and the next
            # check balanced); a real leak stays whatever the read
            first = held + self.fees - self.start
            time.sleep(0.5)
            held = self.balances(head)
            if held + self.fees == self.start:
                self.rereads.append({"step": step, "block": head, "first_read_difference_wei": first})
                return True
            self.failures.append({"step": step, "block": head, "difference_wei": held + self.fees - self.start})
            return False
        return True


# ====================================================================== the soak


class Soak:
    def __init__(self, world: load.World, args, proxy):
        from node.chain.keys import dev_account
        from node.requester.client import Requester

        self.world, self.args, self.proxy = world, args, proxy
        self.rng = random.Random(args.seed)
        self.w3, self.rpc, self.acc = world.w3, world.rpc, world.accounts
        self.market, self.dm, self.registry = world.market, world.system.disputes, world.system.registry
        self.params = world.params
        self.jobs: dict[int, str] = {}  # job id -> kind
        self.counts: Counter = Counter()
        self.disputes_opened: list[int] = []
        self.unbond_state = "staked"
        self.challenger = Requester(
            self.w3, world.deployment, dev_account(CHALLENGER), store_path=world.tmp / "challenger.db"
        )
        self.fault_thread: threading.Thread | None = None

    # ------------------------------------------------------------ steps

    def submit(self, kind: str) -> int:
        mode, drafter, verifier = KINDS[kind]
        tokens = self.rng.randint(6, 24)
        request = self.world.request(drafter, verifier, gamma=self.rng.choice([2, 3, 4]), tokens=tokens)
        [(job_id, _, _)] = self.world.submit_many(mode, [request], self.rng.choice(PROMPTS))
        self.jobs[job_id] = kind
        self.counts[f"job:{kind}"] += 1
        return job_id

    def in_flight(self, silent_too: bool = False) -> list[int]:
        return [
            j
            for j, kind in self.jobs.items()
            if (silent_too or not kind.startswith("signwrong")) and self.world.status(j) < JobStatus.Finished
        ]

    def open_disputes(self) -> list[int]:
        """Disputes a node still has to act on (answer, votes): a clock jump now could cost an honest party."""
        waiting = (DisputeStatus.AwaitingAnswer, DisputeStatus.Voting, DisputeStatus.Drawing)
        count = self.dm.functions.disputeCount().call()
        return [d for d in range(1, count + 1) if self.dispute_status(d) in waiting]

    def dispute_status(self, dispute_id: int) -> int:
        from node.jobs import chaindata

        return chaindata.dispute_view(self.dm, dispute_id)["status"]

    def step_dispute(self) -> str:
        from node.requester.errors import RequesterError

        candidates = [
            j
            for j, kind in self.jobs.items()
            if kind == "honest-onchain" and self.world.status(j) == JobStatus.Finished
        ]
        disputed = {self.dm.functions.getDispute(d).call()[0] for d in self.disputes_opened}
        candidates = [j for j in candidates if j not in disputed]
        if not candidates:
            return "no finished honest per-cycle job"
        job_id = self.rng.choice(candidates)
        try:
            info = self.challenger.open_dispute(job_id, 0, 0, DisputeKind.TargetReplay)
        except RequesterError as exc:
            self.counts["dispute:refused"] += 1
            return f"refused: {exc}"
        self.disputes_opened.append(info.dispute_id)
        self.counts["dispute:opened"] += 1
        return f"dispute {info.dispute_id} on job {job_id}"

    def step_unbond(self) -> str:
        reg = self.registry.functions
        who = self.acc[UNBONDER]
        account = reg.accountOf(who).call()
        since = account[3] if len(account) > 3 else 0
        if self.unbond_state == "staked":
            self.rpc.send(reg.requestUnbond(), who)
            self.unbond_state = "unbonding"
        elif self.unbond_state == "unbonding":
            period = reg.unbondingPeriod().call()
            if self.w3.eth.get_block("latest")["timestamp"] < since + period:
                return "unbonding, not due"
            self.rpc.send(reg.withdrawUnbonded(), who)
            self.unbond_state = "withdrawn"
        else:
            self.world.register("verifier", UNBONDER)
            self.unbond_state = "staked"
        self.counts[f"unbond:{self.unbond_state}"] += 1
        return self.unbond_state

    def step_faults(self) -> str:
        if self.proxy is None:
            return "no proxy"
        if self.rng.random() < 0.2 and (self.fault_thread is None or not self.fault_thread.is_alive()):
            self.fault_thread = threading.Thread(target=self.proxy.restart, args=(1.0,), daemon=True)
            self.fault_thread.start()
            self.counts["faults:restart"] += 1
            return "proxy restart (1 s down)"
        mix = {k: round(self.rng.uniform(0, v), 4) for k, v in FAULT_CEILING.items()}
        self.proxy.set_faults(**mix, max_delay_s=1.0)
        self.counts["faults:mix"] += 1
        return f"faults {mix}"

    def step_advance(self) -> str:
        busy = self.in_flight()
        if busy:
            return f"{len(busy)} jobs in flight: no clock jump"
        if self.rng.random() < 0.5:
            with self.disputes_held():  # no dispute may open between the look and the jump
                if not self.open_disputes():
                    self.world.pass_windows(self.big_jump())
                    self.counts["advance:windows"] += 1
                    return "past every window"
        self.world.pass_windows(self.params.verify_timeout + 1)
        self.counts["advance:verify-timeout"] += 1
        return "past the verify timeout"

    @contextlib.contextmanager
    def disputes_held(self):
        """The watchdog (the one node that opens disputes; the challenger is this script) stopped (SIGSTOP) for the
        span: a dispute it opened between the look at the open disputes and a clock jump past every window would
        be decided with no time for an answer or a vote, and its referees penalized for the jump, not for anything
        they did."""
        proc = self.world.nodes.procs[f"watchdog{WATCHDOG}"][0]
        os.killpg(proc.pid, signal.SIGSTOP)
        try:
            time.sleep(1.0)  # a transaction it had already sent is mined by now (instant mining)
            yield
        finally:
            os.killpg(proc.pid, signal.SIGCONT)

    def big_jump(self) -> int:
        p = self.params
        return max(p.challenge_window + p.appeal_period, p.unbonding_period) + 1

    def step(self, name: str) -> str:
        if name == "job":
            return f"job {self.submit(self.rng.choice(list(KINDS)))}"
        return getattr(self, f"step_{name}")()

    # ------------------------------------------------------------ the end: every window passed, everything out

    def drain(self, timeout: float) -> dict:
        """Every job to its end and every dispute decided, the nodes still running (faults off); what is left."""
        if self.proxy is not None:
            self.proxy.set_faults()
        deadline = time.monotonic() + timeout
        with contextlib.suppress(TimeoutError):
            e2e.wait_until(lambda: not self.in_flight(), max(1, deadline - time.monotonic()), 0.5)
        for _ in range(6):  # the silent parties' forces and claims come due one verify timeout at a time
            if not self.in_flight(silent_too=True) and not self.open_disputes():
                break
            self.world.pass_windows(self.params.verify_timeout + 1)
            time.sleep(8)
        for _ in range(5):  # the disputes decided with every node running (the watchdog draws its own panels)...
            with contextlib.suppress(TimeoutError):
                e2e.wait_until(lambda: not self.open_disputes(), max(1, deadline - time.monotonic()), 0.5)
            with self.disputes_held():  # ...and none opened since: then the jump
                if not self.open_disputes() or time.monotonic() > deadline:
                    self.world.pass_windows(self.big_jump())
                    break
        finals = lambda: all(self.world.status(j) == JobStatus.Finalized for j in self.jobs)  # noqa: E731
        with contextlib.suppress(TimeoutError):
            e2e.wait_until(finals, max(5, deadline - time.monotonic()), 0.5)
        return {
            "unfinished_jobs": [j for j in self.jobs if self.world.status(j) < JobStatus.Finished],
            "finalized_by_nodes": sum(self.world.status(j) == JobStatus.Finalized for j in self.jobs),
            "disputes_left": {
                d: DisputeStatus(self.dispute_status(d)).name
                for d in range(1, self.dm.functions.disputeCount().call() + 1)
                if self.dispute_status(d) != DisputeStatus.Resolved
            },
        }

    def settle_all(self) -> dict:
        """With the nodes stopped: finalize and resolve what is left, every account withdraws everything, every
        registered party unbonds and withdraws its stake. What each contract still holds."""
        from node.chain.params import BURN_ADDRESS

        out: Counter = Counter()
        errors: list[str] = []

        def send(what: str, fn, who: str) -> None:
            try:
                self.rpc.send(fn, who)
                out[what] += 1
            except Exception as exc:  # reported (the invariants then fail), the rest still settled
                errors.append(f"{what} {fn.fn_name}{tuple(fn.args)}: {type(exc).__name__}: {exc}"[:300])

        me = self.acc[load.REQUESTER]
        for d in range(1, self.dm.functions.disputeCount().call() + 1):  # first: a dispute holds its job's finalize
            if self.dispute_status(d) not in (DisputeStatus.Resolved, DisputeStatus.None_):
                send("resolved_here", self.dm.functions.resolve(d), me)
        for j in self.jobs:
            if self.world.status(j) == JobStatus.Finished:
                send("finalized_here", self.market.functions.finalize(j), me)
        reg = self.registry.functions
        for who in self.acc:
            if reg.stakeOf(who).call() and reg.accountOf(who).call()[3] == 0:
                send("unbond_requests", reg.requestUnbond(), who)
        self.world.pass_windows(self.params.unbonding_period + 1)
        for who in self.acc:
            if self.market.functions.owed(who).call():
                send("market_withdrawals", self.market.functions.withdraw(), who)
            if self.dm.functions.credits(who).call():
                send("dispute_withdrawals", self.dm.functions.withdraw(), who)
            if reg.stakeOf(who).call():
                send("stake_withdrawals", reg.withdrawUnbonded(), who)
        burn = self.w3.to_checksum_address(BURN_ADDRESS)
        owed_to_burn = {
            "market": self.market.functions.owed(burn).call(),
            "disputes": self.dm.functions.credits(burn).call(),
        }
        held = {name: self.w3.eth.get_balance(c.address) for name, c in self.contracts().items()}
        stuck = {name: held[name] - owed_to_burn.get(name, 0) for name in held}
        return {**out, "errors": errors, "held_wei": held, "owed_to_burn_wei": owed_to_burn, "stuck_wei": stuck}

    def contracts(self) -> dict:
        system = self.world.system
        found = {
            "registry": system.registry,
            "market": system.market,
            "disputes": system.disputes,
            "transcript": system.transcript,
            "alpha_window": system.alpha_window,
        }
        seen, out = set(), {}
        for name, c in found.items():  # the α window is the market's own code (inherited): one address, once
            if c is not None and c.address not in seen:
                seen.add(c.address)
                out[name] = c
        return out

    def name_of(self, address: str) -> str:
        roles = {i: role for role, devs in self.world.parties.items() for i in devs}
        roles |= {CHALLENGER: "challenger", UNBONDER: "unbonder", load.REQUESTER: "requester"}
        for i, a in enumerate(self.acc):
            if a.lower() == str(address).lower():
                why = BEHAVIORS.get(i, "false disputes")
                return f"{roles.get(i, 'account')}{i}" + (f" ({why})" if i in MISBEHAVING else "")
        return str(address)

    def honest_slashes(self) -> list[dict]:
        honest = {self.acc[i].lower() for i in range(len(self.acc)) if i not in MISBEHAVING}
        return [s for s in self.world.slashes(self.world.start_block) if str(s["account"]).lower() in honest]


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def run(args) -> dict:
    from node.chain.anvil import running_anvil
    from node.chain.compile import compile_contracts
    from node.chain.params import BURN_ADDRESS
    from node.jobs import chaindata

    _, _, _, ids, _ = engine_free_ids(args)
    artifacts = compile_contracts()
    report: dict = {"config": {**{k: v for k, v in vars(args).items() if k != "json"}}, "steps": Counter()}
    started = time.monotonic()
    with running_anvil(accounts=20) as anvil, tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        world = load.World(anvil.rpc_url, pathlib.Path(tmp), COUNTS, artifacts, ids, e2e.VOCAB)
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
                e2e.wait_until(lambda: all(world.status(j) >= JobStatus.Finished for j in warm), 300, 0.5)
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
    report["machine"] = e2e.machine_load()
    return report


def invariants(r: dict, args) -> dict:
    return {
        "eth_conserved_after_every_step": not r["conservation"]["failures"],
        "no_stuck_funds": all(v == 0 for v in r["settle"]["stuck_wei"].values()) and not r["settle"]["errors"],
        "every_job_ended": not r["drain"]["unfinished_jobs"] and all(s == "Finalized" for _, s in r["jobs"].values()),
        "no_honest_slash": not r["honest_slashes"],
        "rss_flat": all(abs(v["ratio"] - 1) <= args.rss_tolerance for v in r["rss_kb"].values()),
    }


def engine_free_ids(args):
    """The pair's model ids without loading the models (the soak runs no engine of its own)."""
    from node.jobs.models import model_id

    return None, None, None, {"draft": model_id(e2e.DRAFT), "target": model_id(e2e.TARGET)}, None


def print_summary(r: dict) -> None:
    c = r["config"]
    print(
        f"soak: {c['minutes'] if c['steps'] is None else str(c['steps']) + ' steps'}"
        f"{' min' if c['steps'] is None else ''}, seed {c['seed']}, pair {c['pair']}, faults "
        f"{'on' if c['faults'] else 'off'}; loop {r['loop_s']:.0f} s, wall {r['wall_s']:.0f} s (nodes started in "
        f"{r['node_start_s']:.0f} s); load average {r['machine']['loadavg_1_5_15']} on {r['machine']['cpus']} CPUs"
    )
    print("\n| | |\n|---|---|")
    kinds = Counter(k for k, _ in r["jobs"].values())
    print(f"| steps | {sum(r['steps'].values())}: {', '.join(f'{k} {v}' for k, v in sorted(r['steps'].items()))} |")
    print(f"| jobs | {len(r['jobs'])}: {', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))} |")
    ended = Counter(s for _, s in r["jobs"].values())
    print(f"| job states at the end | {', '.join(f'{k} {v}' for k, v in sorted(ended.items()))} |")
    disputes = Counter(r["disputes"].values())
    print(
        f"| disputes | {len(r['disputes'])} ({len(r['disputes_by_challenger'])} by the challenger): "
        f"{', '.join(f'{k} {v}' for k, v in sorted(disputes.items())) or 'none'} |"
    )
    actions = {k: v for k, v in r["actions"].items() if not k.startswith("job:")}
    print(f"| other actions | {', '.join(f'{k} {v}' for k, v in sorted(actions.items())) or 'none'} |")
    if "proxy" in r:
        p = {k: v for k, v in r["proxy"].items() if v}
        print(f"| fault proxy | {', '.join(f'{k} {v}' for k, v in p.items())} |")
    slashed = Counter(f"{s['party']} {s['event']}" for s in r["all_slashes"])
    print(f"| slashes (all) | {', '.join(f'{k} ×{v}' for k, v in sorted(slashed.items())) or 'none'} |")
    cons = r["conservation"]
    print(
        f"| ETH conservation checks | {cons['checks']}, failed {len(cons['failures'])} ({cons['txs']} txs; "
        f"{len(cons['rereads'])} balanced on a second read of the same block) |"
    )
    s = r["settle"]
    print(f"| held at the end (wei) | {s['held_wei']}; owed to the burn address {s['owed_to_burn_wei']} |")
    ratios = [v["ratio"] for v in r["rss_kb"].values()]
    print(f"| node RSS end / warm-up | {min(ratios):.3f} .. {max(ratios):.3f} ({len(ratios)} nodes) |")
    for name, ok in r["invariants"].items():
        print(f"| {name.replace('_', ' ')} | {'yes' if ok else 'NO'} |")


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
    from node.decoding.pairs import PairError

    try:
        args.pair = e2e.use_pair(args.pair)
    except PairError as exc:
        parser.error(str(exc))
    import logging

    logging.basicConfig(level=logging.ERROR)
    report = run(args)
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print_summary(report)
    return 0 if all(report["invariants"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
