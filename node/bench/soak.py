"""The soak (scripts/soak.py): a bounded random run of honest and misbehaving jobs, disputes and unbonds on a World
(node.bench.world) whose nodes talk to the chain through a fault proxy; its parties, steps and summary table."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections import Counter

from node.bench.harness import REQUESTER, wait_until
from node.bench.world import World
from node.chain.enums import DisputeKind, DisputeStatus, JobStatus

COUNTS = {"drafter": 2, "verifier": 3, "referee": 3, "watchdog": 1}  # dev accounts 2..10 (node.bench.world.World)
SOAK_CAPACITY = 8  # each drafter's `serve --capacity`: a job step that finds its drafter full is skipped
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


class Soak:
    """The soak's random steps on a World (jobs, disputes, unbonds, faults, clock jumps), and its end: every job
    driven to its end, everything settled and withdrawn."""

    def __init__(self, world: World, args, proxy):
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
            kind = self.rng.choice(list(KINDS))
            live, capacity = self.market.functions.drafterLoad(self.acc[KINDS[kind][1]]).call()
            if live >= capacity:  # as a requester's client does: never submit to a full drafter (DrafterAtCapacity)
                self.counts["job:drafter-full"] += 1
                return f"job {kind}: its drafter is at capacity ({live}/{capacity}), skipped"
            return f"job {self.submit(kind)}"
        return getattr(self, f"step_{name}")()

    # ------------------------------------------------------------ the end: every window passed, everything out

    def drain(self, timeout: float) -> dict:
        """Every job to its end and every dispute decided, the nodes still running (faults off); what is left."""
        if self.proxy is not None:
            self.proxy.set_faults()
        deadline = time.monotonic() + timeout
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: not self.in_flight(), max(1, deadline - time.monotonic()), 0.5)
        for _ in range(6):  # the silent parties' forces and claims come due one verify timeout at a time
            if not self.in_flight(silent_too=True) and not self.open_disputes():
                break
            self.world.pass_windows(self.params.verify_timeout + 1)
            time.sleep(8)
        for _ in range(5):  # the disputes decided with every node running (the watchdog draws its own panels)...
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: not self.open_disputes(), max(1, deadline - time.monotonic()), 0.5)
            with self.disputes_held():  # ...and none opened since: then the jump
                if not self.open_disputes() or time.monotonic() > deadline:
                    self.world.pass_windows(self.big_jump())
                    break
        finals = lambda: all(self.world.status(j) == JobStatus.Finalized for j in self.jobs)  # noqa: E731
        with contextlib.suppress(TimeoutError):
            wait_until(finals, max(5, deadline - time.monotonic()), 0.5)
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

        me = self.acc[REQUESTER]
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
        roles |= {CHALLENGER: "challenger", UNBONDER: "unbonder", REQUESTER: "requester"}
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


def print_soak_summary(r: dict) -> None:
    """The soak's one table: what ran, what it left, and every invariant."""
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
