"""Randomized stateful test of the whole protocol (registry + market + α window + disputes) on a real anvil.

A hypothesis `RuleBasedStateMachine` drives twelve unlocked anvil accounts through random actions —
register, addStake, setAlphaStar, requestUnbond, withdrawUnbonded, submitJob, acceptJob, commitDraft,
submitVerification, time travel, claimTimeout, finalize, openDispute, answer, claimAnswerTimeout,
commitVote, revealVote, resolve and the three withdrawals — valid ones and invalid ones (wrong party,
wrong cycle, bad parameters, too little stake / escrow / bond, too early, too late ...), plus
`honest_job`, a small job driven in one action, so that drafters' α windows fill up and get evaluated.
Each action is a method marked `@action(weight, when=precondition, **argument strategies)`; the machine's
one hypothesis rule, `step`, draws an action and its arguments (see its docstring for why). Time travel
jumps to a pending deadline's last allowed second or the first one after it and probes it there with the
action on either side (accept / claimTimeout, commit+verify / claimTimeout, answer / claimAnswerTimeout,
commitVote / revealVote, revealVote / resolve, finalize, withdrawUnbonded).

The machine keeps an independent model of every account, job, dispute and α window (a few dataclasses
below, mirroring docs/contracts.md and docs/disputes.md). Before every transaction the model predicts
the outcome: either success with its exact effects, or the custom error the contracts must revert with.
An expected revert is first checked with `eth_call` (the error name) and then mined anyway, so the chain
really executed it and only the sender's gas changed. Accept counts, record hashes, proofs, hash chains
and vote commitments come from node/protocol.py.

Invariants, checked after EVERY step against one batched read of the chain:
* ETH conservation: registry balance = Σ stakes; market balance = Σ escrow of unfinalized jobs + Σ owed;
  dispute manager balance = Σ bonds of unresolved disputes + Σ credits — computed from the model and
  from the contracts' own views, and both equal to the real balances.
* Nobody is paid twice: every account's wallet equals the model's (start − value sent − gas + what it
  was paid), and for each contract: withdrawn + still owed = everything ever credited. Every successful
  withdraw is measured (balance change + gas = the model's amount) and followed by a second withdraw
  that must revert.
* Nobody withdraws locked stake: each account's lock count equals its unfinalized jobs + unresolved
  disputes (as accused or referee) from the model; withdrawUnbonded reverts StakeLocked while any is
  open; stake = deposited − slashed − withdrawn ≥ 0, so a stake only falls by a slash or a withdrawal.
* Everything else the model knows equals the views: accounts, α windows, jobs, disputes, positions.

Time is exact: every transaction is mined at (previous block + 1 s) via evm_setNextBlockTimestamp, and
time travel jumps the next block's timestamp (the deterministic form of evm_increaseTime), so deadline
boundaries are hit to the second. Each hypothesis example starts from a snapshot of the fresh deployment
(`evm_snapshot` in `__init__`, `evm_revert` in `teardown`). Runs are derandomized and, as long as no
dispute has more eligible referees than the panel size (the summary's "draws with a choice" = 0), fully
reproducible: the draw's seed is the opening block's hash, and anvil's prevrandao makes it random. A draw
rescheduled because its seed block is over 256 blocks old is not modelled (an example sends far fewer
transactions than that while a dispute awaits its draw); tests/test_disputes.py covers it.

Run: .venv/bin/python -m pytest -q tests/test_stateful.py -s   (prints the coverage summary; ~1-2 min)
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
import requests
from eth_abi import decode as abi_decode
from eth_hash.auto import keccak
from eth_utils.abi import get_abi_output_types
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from web3 import Web3

from chainutil import VOCAB, decode_error
from node import protocol as P
from node.chain import enums
from node.chain.deploy import deploy_system
from node.chain.params import DEFAULT_PARAMS, ETHER

WAD = P.WAD
# α windows fill after 8 jobs; a panel of up to 7 takes every eligible referee (see the module docstring).
PARAMS = DEFAULT_PARAMS.with_(alpha_bucket_cycles=1, accused_slash=6 * ETHER // 10, referee_count=7)
# 30 examples × 120 steps: ~4,600 steps (hypothesis runs ~40 examples), ~5,500 transactions; a soak run can
# raise them.
EXAMPLES = int(os.environ.get("VERISPEC_STATEFUL_EXAMPLES", 30))
STEPS = int(os.environ.get("VERISPEC_STATEFUL_STEPS", 120))
# Shrinking a failure re-runs the machine many times (up to hypothesis' 5-minute cap); "0" skips it.
SHRINK = os.environ.get("VERISPEC_STATEFUL_SHRINK", "1") != "0"
N_ACTORS = 12
GAS, GAS_PRICE = 3_000_000, 3 * 10**9
ZERO = bytes(32)
DRAFT, TARGET, OTHER = (keccak(b"verispec.stateful." + n) for n in (b"draft", b"target", b"other"))
EOS = 2
BOND = PARAMS.dispute_bond
CYCLE_VERIFIED = "0x" + keccak(b"CycleVerified(uint256,uint256,bytes32,uint256,uint32,bytes)").hex()

# the contracts' enums, under the short names this model uses (the values come from node/chain/enums.py)
NONE, DRAFTER, VERIFIER, REFEREE = enums.Role  # registry roles
OPEN, RUNNING, FINISHED, FINALIZED = list(enums.JobStatus)[1:]  # job status
AWAIT_DRAFT, AWAIT_VERIFY = enums.Phase  # job phase
AWAITING, VOTING, RESOLVED = list(enums.DisputeStatus)[1:4]  # dispute status
LOST, CHALLENGER_LOST, VOID, SILENT = list(enums.Outcome)[1:]  # dispute outcome
DRAFT_REPLAY, TARGET_REPLAY = enums.DisputeKind
FAITHFUL, CHEATED = list(enums.Verdict)[1:]
FREE, OPEN_POS, PROVEN = enums.PositionState  # dispute position state

MIN_STAKE = {
    DRAFTER: PARAMS.min_drafter_stake,
    VERIFIER: PARAMS.min_verifier_stake,
    REFEREE: PARAMS.min_referee_stake,
    NONE: PARAMS.min_drafter_stake,
}
DRAFTER_PAIRS = [(DRAFT, TARGET), (DRAFT, TARGET), (OTHER, TARGET), (ZERO, TARGET)]
MODEL_SETS = [[DRAFT, TARGET], [DRAFT, TARGET], [TARGET], [DRAFT, OTHER], [], [TARGET, TARGET], [ZERO]]
ALPHAS = [0, WAD // 2, 95 * WAD // 100, WAD + 1]

STATS: Counter = Counter()  # per-run coverage: steps, transactions, "function:outcome"

pick = st.integers(0, 2**16)  # index into whatever list a rule chooses from
actor = st.integers(0, N_ACTORS - 1).map(lambda i: (i + 8) % N_ACTORS)  # hypothesis' favourite 0: unregistered
seed = st.integers(0, 2**32)


def as_int(value) -> int:
    """A JSON-RPC quantity (anvil sends most as hex strings, a few as numbers)."""
    return int(value, 16) if isinstance(value, str) else int(value)


def first(*checks) -> str | None:
    """The error of the first failing check (listed in the contract's own order), None if all pass."""
    return next((name for failed, name in checks if failed), None)


def some(kind: str, ready: str):
    """An action's precondition: some job / dispute of the model is `ready` (a machine predicate) for it."""
    return lambda machine: any(map(getattr(machine, ready), getattr(machine, kind)))


def action(weight: int, when=None, **strategies):
    """Marks a method as one of the machine's random actions (see `ProtocolMachine.step`): drawn with
    relative `weight` while `when(machine)` holds, its arguments drawn from `strategies`."""

    def mark(method):
        method.weight, method.when, method.strategies = weight, when, strategies
        return method

    return mark


# ---------------------------------------------------------------- the model


@dataclass
class Account:
    addr: str
    wallet: int  # expected ETH balance of the address
    role: int = NONE
    stake: int = 0
    unbonding_since: int = 0
    alpha_star: int = 0
    target: bytes = ZERO
    models: tuple = ()
    registered_at: int = 0  # timestamp (one block per transaction) of its registration
    # ledgers over the whole example, per contract ("market", "disputes", "registry")
    credited: Counter = field(default_factory=Counter)  # owed/credited to it, or stake paid in
    withdrawn: Counter = field(default_factory=Counter)  # measured balance change + gas of its withdrawals
    slashed: int = 0


@dataclass
class Alpha:
    """A drafter's α window (AlphaWindow.sol): ring of 8 closed buckets (cycles, accepted, rejected) + open one."""

    star: int = 0
    ring: list = field(default_factory=lambda: [(0, 0, 0)] * 8)
    next: int = 0
    closed: int = 0
    open: tuple = (0, 0, 0)

    def view(self) -> tuple:
        sums = [sum(b[k] for b in self.ring[: self.closed]) + self.open[k] for k in range(3)]
        return (self.star, *sums, self.closed)

    def record(self, cycles: int, accepted: int, rejected: int) -> bool:
        """Adds a stopped job's counts; True when a full window was in breach (the window restarts)."""
        self.open = tuple(x + y for x, y in zip(self.open, (cycles, accepted, rejected)))
        if self.open[0] < PARAMS.alpha_bucket_cycles:
            return False
        self.ring[self.next], self.open = self.open, (0, 0, 0)
        self.next, self.closed = (self.next + 1) % 8, min(self.closed + 1, 8)
        if self.closed < 8:
            return False
        acc, rej = sum(b[1] for b in self.ring), sum(b[2] for b in self.ring)
        floor = self.star - PARAMS.alpha_tolerance
        breached = self.star > PARAMS.alpha_tolerance and acc * WAD < floor * (acc + rej)
        if breached:
            self.next, self.closed = 0, 0
        STATS["alpha windows breached" if breached else "alpha windows passed"] += 1
        return breached


@dataclass
class Record:
    tokens: list
    q: list
    p: list
    accepted: int
    out_token: int

    def root(self, job_id: int, cycle: int) -> bytes:
        return P.draft_root(job_id, cycle, self.tokens, self.q)


@dataclass
class Job:
    id: int
    requester: str
    drafter: str
    verifier: str
    draft_model: bytes
    gamma: int
    max_tokens: int
    price_token: int
    price_pass: int
    escrow: int
    eligible: bool
    deadline: int
    status: int = OPEN
    phase: int = AWAIT_DRAFT
    cycle: int = 0
    emitted: int = 0
    rejected: int = 0
    accepted_sum: int = 0  # Σ n over verified cycles (the α window's accepted)
    out_cut: bool = False
    open_disputes: int = 0
    drafter_forfeit: bool = False
    verifier_forfeit: bool = False
    draft: tuple | None = None  # committed (tokens, q) awaiting verification
    salt: int = 0  # the drafter's salt, committed with the cycle-0 draft (in every accept uniform)
    records: list = field(default_factory=list)

    @property
    def reveals(self) -> list:
        return P.chain_reveals(keccak(b"seed" + self.id.to_bytes(32, "big")), self.max_tokens)

    @property
    def drafter_tokens(self) -> int:
        return self.emitted + self.out_cut - self.cycle

    def view_deadline(self) -> int:
        verify = self.status == RUNNING and self.phase == AWAIT_VERIFY
        return self.deadline + (PARAMS.verify_timeout if verify else 0)


@dataclass
class Dispute:
    id: int
    job: Job
    cycle: int
    index: int
    kind: int
    challenger: str
    accused: str
    answer_deadline: int
    opened_at: int  # timestamp of the opening block, whose hash seeds the draw
    pool_size: int  # referees listed for the model at opening
    panel: list = field(default_factory=list)  # empty until drawn (drawReferees, or the answer)
    drawn: bool = False
    status: int = AWAITING
    outcome: int = 0
    commit_deadline: int = 0
    reveal_deadline: int = 0
    committed: dict = field(default_factory=dict)  # referee -> verdict sealed
    lazy: set = field(default_factory=set)  # referees that committed but reveal only when a deadline probe asks
    revealed: dict = field(default_factory=dict)  # referee -> verdict revealed

    @property
    def key(self) -> tuple:
        return (self.job.id, self.cycle, self.index, self.kind)

    @property
    def truth(self) -> int:
        """What an honest referee's replay finds: odd disputes are about a real cheat, even ones are not
        (dissenting votes come from commit_vote's "dissent" variant)."""
        return CHEATED if self.id % 2 else FAITHFUL

    def salt(self, referee: str) -> bytes:
        return keccak(b"salt" + self.id.to_bytes(32, "big") + bytes.fromhex(referee[2:]))

    def voting_over(self, t: int) -> bool:
        return (
            t > self.reveal_deadline
            or len(self.revealed) == len(self.panel)
            or (t > self.commit_deadline and len(self.revealed) == len(self.committed))
        )


# ---------------------------------------------------------------- raw JSON-RPC


@dataclass
class Receipt:
    status: int
    fee: int  # gasUsed × effectiveGasPrice
    timestamp: int
    logs: list


class Rpc:
    """Plain JSON-RPC to anvil (web3.py's per-call overhead is 3-4× anvil's own time): transactions, and
    many views and balances read in one batch (calldata and output types cached)."""

    def __init__(self, url: str):
        self.url, self.session, self._cache = url, requests.Session(), {}

    def __call__(self, method: str, *params):
        reply = self.session.post(
            self.url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}, timeout=60
        ).json()
        return reply

    def ok(self, method: str, *params):
        reply = self(method, *params)
        assert "error" not in reply, (method, reply)
        return reply["result"]

    def send(self, tx: dict) -> Receipt:
        tx_hash = self.ok("eth_sendTransaction", tx)
        while (r := self.ok("eth_getTransactionReceipt", tx_hash)) is None:  # automine is asynchronous
            time.sleep(0.001)
        return Receipt(
            as_int(r["status"]),
            as_int(r["gasUsed"]) * as_int(r["effectiveGasPrice"]),
            as_int(r["blockTimestamp"]),
            r["logs"],
        )

    def _prepare(self, contract, name, args):
        key = (contract.address, name, args)
        if key not in self._cache:
            abi = next(e for e in contract.abi if e.get("name") == name and e["type"] == "function")
            self._cache[key] = (contract.encode_abi(name, args=list(args)), get_abi_output_types(abi))
        return self._cache[key]

    def read(self, calls: list) -> list:
        """calls: ("balance", address) or (contract, function name, *args); returns decoded results."""
        payload, decoders = [], []
        for i, call in enumerate(calls):
            if call[0] == "balance":
                payload.append({"jsonrpc": "2.0", "id": i, "method": "eth_getBalance", "params": [call[1], "latest"]})
                decoders.append(None)
            else:
                contract, name, *args = call
                data, types = self._prepare(contract, name, tuple(args))
                payload.append(
                    {
                        "jsonrpc": "2.0",
                        "id": i,
                        "method": "eth_call",
                        "params": [{"to": contract.address, "data": data}, "latest"],
                    }
                )
                decoders.append(types)
        replies = sorted(self.session.post(self.url, json=payload, timeout=60).json(), key=lambda r: r["id"])
        out = []
        for reply, types in zip(replies, decoders):
            assert "error" not in reply, reply
            if types is None:
                out.append(int(reply["result"], 16))
            else:
                values = abi_decode(types, bytes.fromhex(reply["result"][2:]))
                out.append(values[0] if len(values) == 1 else values)
        return out

    def view(self, contract, name, *args):
        return self.read([(contract, name, *args)])[0]

    def balance(self, address: str) -> int:
        return self.read([("balance", address)])[0]


# ---------------------------------------------------------------- the state machine


class ProtocolMachine(RuleBasedStateMachine):
    def __init__(self, w3, system):
        super().__init__()
        self.w3 = w3
        self.registry, self.market, self.dm = system.registry, system.market, system.disputes
        self.rpc = Rpc(w3.provider.endpoint_uri)
        self.snapshot = self.rpc.ok("evm_snapshot")
        self.now = int(self.rpc.ok("eth_getBlockByNumber", "latest", False)["timestamp"], 16)
        addrs = w3.eth.accounts[1 : 1 + N_ACTORS]
        self.accts = {a: Account(a, b) for a, b in zip(addrs, self.rpc.read([("balance", a) for a in addrs]))}
        self.alpha: dict[str, Alpha] = {a: Alpha() for a in addrs}
        self.owed: Counter = Counter()  # market.owed
        self.credits: Counter = Counter()  # disputes.credits
        self.jobs: list[Job] = []
        self.disputes: list[Dispute] = []
        self.positions: dict[tuple, int] = {}
        self.last_stakes = dict.fromkeys(addrs, (0, 0, 0))  # (stake, slashed, withdrawn) at the last check
        STATS["examples"] += 1

    def teardown(self):
        self.rpc.ok("evm_revert", self.snapshot)

    # ------------------------------------------------------------ chain plumbing

    @property
    def t(self) -> int:
        """block.timestamp of the next transaction."""
        return self.now + 1

    def act(self, fn, sender: str, err: str | None = None, value: int = 0) -> Receipt:
        """Mines `fn` from `sender` at time self.t. With `err`, it must revert with that custom error and change
        nothing but the sender's gas; otherwise it must succeed. (The outcome is first read with eth_call at
        the same timestamp, which names the error; then the transaction is mined.)"""
        self.rpc.ok("evm_setNextBlockTimestamp", self.t)
        tx = {
            "from": sender,
            "to": fn.address,
            "data": fn._encode_transaction_data(),
            "value": hex(value),
            "gas": hex(GAS),
            "gasPrice": hex(GAS_PRICE),
        }
        reply = self.rpc("eth_call", tx, "pending")
        got = decode_error(reply["error"]["data"], self.market, self.registry, self.dm) if "error" in reply else None
        assert (got and got[0]) == err, f"{fn.fn_name}{fn.args} from {sender}: expected {err or 'success'}, got {got}"
        receipt = self.rpc.send(tx)
        assert receipt.status == (0 if err else 1), f"{fn.fn_name}: eth_call and transaction disagree"
        self.now += 1
        assert receipt.timestamp == self.now
        self.accts[sender].wallet -= receipt.fee + (0 if err else value)
        STATS["transactions"] += 1
        STATS[f"{fn.fn_name}:{err or 'ok'}"] += 1
        return receipt

    def withdraw_all(self, contract, owed: Counter, who: str, ledger: str, nothing: str):
        """withdraw(): pays exactly what the model says was owed (balance change + gas), and only once."""
        amount = owed[who]
        before = self.rpc.balance(who)
        receipt = self.act(contract.functions.withdraw(), who, None if amount else nothing)
        if amount:
            received = self.rpc.balance(who) - before + receipt.fee
            assert received == amount, f"{ledger} paid {received}, model says {amount}"
            owed[who] = 0
            self.accts[who].wallet += received
            self.accts[who].withdrawn[ledger] += received
            self.act(contract.functions.withdraw(), who, nothing)  # a second withdraw has nothing left

    # ------------------------------------------------------------ model helpers (mirror the contracts)

    def acct(self, i: int) -> Account:
        return list(self.accts.values())[i]

    def someone(self, i: int, relevant) -> Account:
        return self.choose(list(self.accts.values()), relevant, i)

    @staticmethod
    def choose(items: list, relevant, i):
        """For hypothesis' index i: mostly an item for which `relevant` holds (if any), sometimes any item.
        (Drivers like honest_job and the deadline probes pass the item itself.)"""
        if not isinstance(i, int):
            return i
        pool = [x for x in items if relevant(x)] if i % 4 != 3 else items
        pool = pool or items
        return pool[(i // 4) % len(pool)]

    # which job / dispute is ready for which action (at the next transaction's time self.t)
    def can_accept(self, j: Job) -> bool:
        return j.status == OPEN and self.t <= j.deadline

    def can_commit(self, j: Job) -> bool:
        return j.status == RUNNING and j.phase == AWAIT_DRAFT and self.t <= j.deadline

    def can_verify(self, j: Job) -> bool:
        return j.status == RUNNING and j.phase == AWAIT_VERIFY and self.t <= j.view_deadline()

    def overdue(self, j: Job) -> bool:
        return j.status in (OPEN, RUNNING) and self.t > j.view_deadline()

    def can_finalize(self, j: Job) -> bool:
        return j.status == FINISHED and self.t > j.deadline and not j.open_disputes

    def disputable(self, j: Job) -> bool:
        return j.status in (RUNNING, FINISHED) and bool(self.free_positions(j))

    def can_answer(self, d: Dispute) -> bool:
        return d.status == AWAITING and self.t <= d.answer_deadline

    def undrawn(self, d: Dispute) -> bool:
        return d.status == AWAITING and not d.drawn

    def silent(self, d: Dispute) -> bool:
        return d.status == AWAITING and self.t > d.answer_deadline

    def can_commit_vote(self, d: Dispute) -> bool:
        return d.status == VOTING and self.t <= d.commit_deadline and len(d.committed) < len(d.panel)

    def can_reveal(self, d: Dispute) -> bool:
        reveal_open = self.t > d.commit_deadline or len(d.committed) == len(d.panel)
        return (
            d.status == VOTING
            and len(d.revealed) + len(d.lazy - d.revealed.keys()) < len(d.committed)
            and reveal_open
            and self.t <= d.reveal_deadline
        )

    def can_resolve(self, d: Dispute) -> bool:
        return d.status == VOTING and d.voting_over(self.t)

    def deadlines(self) -> list:
        """Pending deadlines as (x, before, after): x is the last second of the earlier state (x + 1 the first of
        the later one), `before` / `after` the actions that belong to either side, for boundary probes."""
        out = []
        for j in self.jobs:
            if j.status == OPEN:
                out.append((j.deadline, lambda j=j: self.accept_job(j, "ok", 0), lambda j=j: self.claim_timeout(j, 0)))
            elif j.status == RUNNING and j.phase == AWAIT_DRAFT:  # a last-second draft, verified after its deadline
                out.append(
                    (
                        j.deadline,
                        lambda j=j: (self.commit_draft(j, "ok", j.cycle), self.submit_verification(j, "ok", j.cycle)),
                        lambda j=j: self.claim_timeout(j, 0),
                    )
                )
            elif j.status == RUNNING:
                out.append(
                    (
                        j.view_deadline(),
                        lambda j=j: self.submit_verification(j, "ok", j.cycle),
                        lambda j=j: self.claim_timeout(j, 0),
                    )
                )
            elif j.status == FINISHED:
                out.append((j.deadline, lambda j=j: self.finalize(j, 0), lambda j=j: self.finalize(j, 0)))
        for d in self.disputes:
            if d.status == AWAITING:
                out.append(
                    (
                        d.answer_deadline,
                        lambda d=d: self.answer(d, "ok", 0),
                        lambda d=d: self.claim_answer_timeout(d, 0),
                    )
                )
            elif d.status == VOTING:
                unrevealed = [r for r in sorted(d.committed) if r not in d.revealed] or [0]  # lazy ones too
                out.append(
                    (
                        d.commit_deadline,
                        lambda d=d: self.commit_vote(d, 0, "ok", 0),
                        lambda d=d, r=unrevealed[0]: self.reveal_vote(d, r, "ok", 0),
                    )
                )
                out.append(
                    (
                        d.reveal_deadline,
                        lambda d=d, r=unrevealed[0]: self.reveal_vote(d, r, "ok", 0),
                        lambda d=d: self.resolve(d, 0),
                    )
                )
        for a in self.accts.values():
            if a.unbonding_since:
                x, withdraw = a.unbonding_since + PARAMS.unbonding_period - 1, lambda a=a: self.withdraw_unbonded(a)
                out.append((x, withdraw, withdraw))
        return sorted(out, key=lambda entry: entry[0])

    def active(self, a: Account, role: int, model: bytes) -> bool:
        return a.role == role and a.unbonding_since == 0 and model in a.models and a.stake >= MIN_STAKE[role]

    def credit_market(self, who: str, amount: int):
        self.owed[who] += amount
        self.accts[who].credited["market"] += amount

    def credit_disputes(self, who: str, amount: int):
        self.credits[who] += amount
        self.accts[who].credited["disputes"] += amount

    def slash(self, who: str, amount: int) -> int:
        acct = self.accts[who]
        taken = min(amount, acct.stake)
        acct.stake -= taken
        acct.slashed += taken
        return taken

    def record_alpha(self, job: Job):
        """At settlement: the job's cycles (accepted proposals emitted, rejections observed) enter the window; a
        breach slashes min(bps of the stake, N × floor) to the treasury (never a party of the job)."""
        if self.alpha[job.drafter].record(job.cycle, job.drafter_tokens, job.rejected):
            taken = self.slash(job.drafter, PARAMS.alpha_slash(self.accts[job.drafter].stake))
            self.owed[PARAMS.treasury] += taken

    def stop(self, job: Job):
        """InferenceMarket._stop: Finished, challenge window from now (α waits for the settlement)."""
        job.status, job.deadline = FINISHED, self.now + PARAMS.challenge_window

    def settle(self, job: Job):
        drafter_pay = 0 if job.drafter_forfeit else job.drafter_tokens * job.price_token
        verifier_pay = 0 if job.verifier_forfeit else job.cycle * job.price_pass
        counts = job.eligible and job.cycle > 0  # eligible is cleared by a conviction or a verifier timeout
        fee = verifier_pay * PARAMS.alpha_fee_bps // 10_000 if counts else 0
        job.status = FINALIZED
        self.credit_market(job.drafter, drafter_pay)
        self.credit_market(job.verifier, verifier_pay - fee)
        self.credit_market(job.requester, job.escrow - drafter_pay - verifier_pay)
        self.owed[PARAMS.treasury] += fee
        if counts:
            self.record_alpha(job)

    def locks(self, addr: str) -> int:
        jobs = sum(j.status != FINALIZED and addr in (j.drafter, j.verifier) for j in self.jobs)
        disputes = sum(d.status != RESOLVED and (addr == d.accused) + d.panel.count(addr) for d in self.disputes)
        return jobs + disputes

    def free_positions(self, j: Job) -> list:
        """(cycle, index, kind) that can be disputed: binding (proposals 0..accepted, or the outToken K for
        TargetReplay) and neither under dispute nor proven."""
        out = []
        for c, rec in enumerate(j.records):
            binding = [
                (i, kind) for i in range(min(rec.accepted, j.gamma - 1) + 1) for kind in (DRAFT_REPLAY, TARGET_REPLAY)
            ] + [(j.gamma, TARGET_REPLAY)]
            out += [(c, i, kind) for i, kind in binding if self.positions.get((j.id, c, i, kind), FREE) == FREE]
        return out

    def listed_referees(self, job: Job, kind: int) -> int:
        """registry.refereeCount: referees registered for the model and not unbonding (active or not)."""
        model = job.draft_model if kind == DRAFT_REPLAY else TARGET
        return sum(a.role == REFEREE and model in a.models and not a.unbonding_since for a in self.accts.values())

    def eligible_referees(self, d: Dispute) -> set:
        """Who the draw may pick: active referees for the model, registered before the opening block, no party."""
        j = d.job
        model = j.draft_model if d.kind == DRAFT_REPLAY else TARGET
        parties = {j.requester, j.drafter, j.verifier, d.challenger}
        return {
            a.addr
            for a in self.accts.values()
            if a.addr not in parties and self.active(a, REFEREE, model) and a.registered_at < d.opened_at
        }

    # ------------------------------------------------------------ setup

    @initialize(stakes=seed)
    def cast(self, stakes):
        """Two drafters, two verifiers and four referees; the other four accounts start unregistered."""
        rnd = random.Random(stakes)
        reg = self.registry.functions
        for i in range(8):
            a = self.acct(i)
            role = DRAFTER if i < 2 else VERIFIER if i < 4 else REFEREE
            stake = MIN_STAKE[role] * rnd.choice([2, 3, 4, 6])  # 2-6 × the minimum: survives a few slashes
            if role == DRAFTER:
                a.alpha_star = WAD // 2 if i == 0 else rnd.choice(ALPHAS[:3])  # drafter 0: near its α̂ (~0.5 here)
                self.act(reg.registerDrafter(DRAFT, TARGET, a.alpha_star, VOCAB), a.addr, value=stake)
                a.target, a.models, self.alpha[a.addr] = TARGET, (DRAFT,), Alpha(star=a.alpha_star)
            else:
                a.models = (TARGET,) if role == VERIFIER else (DRAFT, TARGET)
                self.act(reg.register(role, list(a.models), [VOCAB] * len(a.models)), a.addr, value=stake)
            a.role, a.stake = role, stake
            a.credited["registry"] += stake

    # ------------------------------------------------------------ the one hypothesis rule

    @rule(data=st.data())
    def step(self, data):
        """One random action, drawn by weight among those whose precondition holds, with its arguments.

        A single dispatching rule rather than one hypothesis rule per action: hypothesis' swarm testing
        disables a random half of a machine's rules in each example, and a job or dispute only gets far
        when all of its lifecycle's actions are live together."""
        actions = [name for name, weight, when in ACTIONS if when is None or when(self) for _ in range(weight)]
        name = data.draw(st.sampled_from(actions), label="action")
        method = getattr(self, name)
        STATS["steps"] += 1
        STATS[f"action {name}"] += 1
        method(**{arg: data.draw(strategy, label=arg) for arg, strategy in method.strategies.items()})

    # ------------------------------------------------------------ registry actions

    @action(
        2,
        who=actor,
        role=st.sampled_from([REFEREE, DRAFTER, VERIFIER, REFEREE, NONE]),
        stake=st.sampled_from([2, 3, 6, 0, 1]),
        variant=pick,
    )
    def register(self, who, role, stake, variant):
        a, reg = self.acct(who), self.registry.functions
        value = {0: 0, 1: MIN_STAKE[role] - 1}.get(stake, MIN_STAKE[role] * stake // 2)
        already = a.role != NONE
        low = value < MIN_STAKE[role] or value == 0
        if role == DRAFTER:
            (draft, target), alpha = DRAFTER_PAIRS[variant % 4], ALPHAS[(variant // 4) % 4]
            err = first(
                (ZERO in (draft, target), "ZeroModel"),
                (alpha > WAD, "AlphaAboveWad"),
                (already, "AlreadyRegistered"),
                (low, "StakeBelowMinimum"),
            )
            self.act(reg.registerDrafter(draft, target, alpha, VOCAB), a.addr, err, value)
            if not err:
                a.alpha_star, a.target, a.models, self.alpha[a.addr] = alpha, target, (draft,), Alpha(star=alpha)
        else:
            models = MODEL_SETS[variant % len(MODEL_SETS)]
            err = first(
                (role == NONE, "InvalidRole"),
                (not models, "BadModelCount"),
                (already, "AlreadyRegistered"),
                (low, "StakeBelowMinimum"),
                (ZERO in models, "ZeroModel"),
                (len(set(models)) < len(models), "DuplicateModel"),
            )
            self.act(reg.register(role, models, [VOCAB] * len(models)), a.addr, err, value)
            a.models = a.models if err else tuple(models)
        if not err:
            a.role, a.stake, a.unbonding_since, a.registered_at = role, value, 0, self.now
            a.credited["registry"] += value

    @action(1, who=pick, amount=st.sampled_from([ETHER // 3, ETHER, 1, 0]))
    def add_stake(self, who, amount):
        a = self.someone(who, lambda a: a.role != NONE and not a.unbonding_since)
        err = first(
            (a.role == NONE, "NotRegistered"), (a.unbonding_since != 0, "AlreadyUnbonding"), (amount == 0, "ZeroValue")
        )
        self.act(self.registry.functions.addStake(), a.addr, err, amount)
        if not err:
            a.stake += amount
            a.credited["registry"] += amount

    @action(1, who=pick, alpha=st.sampled_from(ALPHAS))
    def set_alpha_star(self, who, alpha):
        a = self.someone(who, lambda a: a.role == DRAFTER)
        window = self.alpha[a.addr]
        err = first(
            (a.role != DRAFTER, "NotDrafter"),
            (alpha > WAD, "AlphaAboveWad"),
            (alpha < window.star and (window.closed or window.open[0]), "AlphaWindowOpen"),
        )
        self.act(self.registry.functions.setAlphaStar(alpha), a.addr, err)
        if not err:
            a.alpha_star = window.star = alpha

    @action(1, who=actor)
    def request_unbond(self, who):
        a = self.acct(who)
        err = first((a.role == NONE, "NotRegistered"), (a.unbonding_since != 0, "AlreadyUnbonding"))
        self.act(self.registry.functions.requestUnbond(), a.addr, err)
        if not err:
            a.unbonding_since = self.now

    @action(1, who=pick)
    def withdraw_unbonded(self, who):
        a = self.someone(who, lambda a: a.unbonding_since)
        err = first(
            (a.unbonding_since == 0, "NotUnbonding"),
            (self.t < a.unbonding_since + PARAMS.unbonding_period, "UnbondingNotElapsed"),
            (self.locks(a.addr) != 0, "StakeLocked"),
        )
        before = self.rpc.balance(a.addr)
        receipt = self.act(self.registry.functions.withdrawUnbonded(), a.addr, err)
        if not err:
            received = self.rpc.balance(a.addr) - before + receipt.fee
            assert received == a.stake, f"withdrawUnbonded paid {received}, stake was {a.stake}"
            a.wallet += received
            a.withdrawn["registry"] += received
            a.role, a.stake, a.unbonding_since, a.alpha_star, a.target, a.models = NONE, 0, 0, 0, ZERO, ()

    # ------------------------------------------------------------ market actions

    @action(
        2,
        requester=pick,
        drafter=pick,
        verifier=pick,
        gamma=st.sampled_from([1, 2, 3, 4, 4, 8, 16, 0, 17]),
        max_tokens=st.sampled_from([1, 2, 3, 5, 8, 13, 0]),
        escrow=st.sampled_from([0, 0, 1, 10**15, -1]),
        prices=st.sampled_from([(10**12, 3 * 10**12), (7, 10**15), (0, 0)]),
        variant=st.sampled_from(["ok"] * 4 + ["cold", "topP", "pair", "same"]),
    )
    def submit_job(self, requester, drafter, verifier, gamma, max_tokens, prices, escrow, variant):
        req = self.someone(requester, lambda a: a.role == NONE)
        d = self.someone(drafter, lambda a: a.role == DRAFTER and self.active(a, DRAFTER, a.models[0]))
        v = self.someone(verifier, lambda a: self.active(a, VERIFIER, TARGET))
        if variant == "same":
            d = req
        draft_model = d.models[0] if d.role == DRAFTER else DRAFT
        target = OTHER if variant == "pair" else TARGET
        temperature, top_p = (7 * WAD // 10 if variant == "cold" else WAD), (0 if variant == "topP" else WAD)
        required = max_tokens * sum(prices)
        value = max(required + escrow, 0)
        drafter_ok = self.active(d, DRAFTER, draft_model) and d.target == target
        err = first(
            (not 1 <= gamma <= 16, "BadGamma"),
            (max_tokens == 0, "BadMaxTokens"),
            (top_p == 0, "BadTopP"),
            (len({req.addr, d.addr, v.addr}) < 3, "PartiesNotDistinct"),
            (not drafter_ok, "DrafterNotActive"),
            (not self.active(v, VERIFIER, target), "VerifierNotActive"),
            (value < required, "InsufficientEscrow"),
        )
        request = (draft_model, target, d.addr, v.addr, gamma, temperature, 0, top_p, max_tokens, EOS, *prices)
        self.act(self.market.functions.submitJob(request, b"\x01\x02"), req.addr, err, value)
        if not err:
            self.jobs.append(
                Job(
                    len(self.jobs) + 1,
                    req.addr,
                    d.addr,
                    v.addr,
                    draft_model,
                    gamma,
                    max_tokens,
                    *prices,
                    value,
                    variant != "cold" and prices[1] >= PARAMS.alpha_price_floor,
                    self.now + PARAMS.accept_timeout,
                )
            )

    @action(
        4,
        when=some("jobs", "can_accept"),
        job=pick,
        stranger=actor,
        variant=st.sampled_from(["ok"] * 4 + ["party", "zero"]),
    )
    def accept_job(self, job, variant, stranger):
        j = self.choose(self.jobs, self.can_accept, job)
        sender = self.acct(stranger).addr if variant == "party" else j.verifier
        head = ZERO if variant == "zero" else P.hash_chain(j.reveals[0], 1)
        err = first(
            (j.status != OPEN, "JobWrongStatus"),
            (sender != j.verifier, "NotJobVerifier"),
            (self.t > j.deadline, "DeadlinePassed"),
            (head == ZERO, "ZeroChainHead"),
        )
        self.act(self.market.functions.acceptJob(j.id, head), sender, err)
        if not err:
            j.status, j.deadline, j.phase = RUNNING, self.now + PARAMS.commit_timeout, AWAIT_DRAFT

    @action(
        6,
        when=some("jobs", "can_commit"),
        job=pick,
        draws=seed,
        variant=st.sampled_from(["ok"] * 5 + ["cycle", "party", "root", "length"]),
    )
    def commit_draft(self, job, variant, draws):
        j = self.choose(self.jobs, self.can_commit, job)
        rnd = random.Random(draws)
        cycle = j.cycle + (1 if variant == "cycle" else 0)
        k = j.gamma + (1 if variant == "length" else 0)
        # now and then a token outside the vocabulary (VOCAB): the contract caps the accept count before it
        tokens = [2**32 - 1 if rnd.random() < 0.04 else rnd.choice([EOS, 5, 7, 11, 100_000]) for _ in range(k)]
        q = [rnd.choice([1, WAD, rnd.randint(1, WAD)]) for _ in range(k)]
        root = keccak(b"wrong") if variant == "root" else P.draft_root(j.id, cycle, tokens, q)
        sender = j.verifier if variant == "party" else j.drafter
        err = first(
            (j.status != RUNNING, "JobWrongStatus"),
            (sender != j.drafter, "NotJobDrafter"),
            (j.phase != AWAIT_DRAFT, "WrongPhase"),
            (self.t > j.deadline, "DeadlinePassed"),
            (cycle != j.cycle, "WrongCycle"),
            (k != j.gamma, "GammaLengthMismatch"),
            (variant == "root", "RootMismatch"),
        )
        salt = rnd.choice([0, 2**64 - 1, rnd.getrandbits(64)])
        m = self.market.functions
        fn = (
            m.commitFirstDraft(j.id, root, tokens, q, salt)
            if cycle == 0
            else m.commitDraft(j.id, cycle, root, tokens, q)
        )
        self.act(fn, sender, err)
        if not err:
            j.phase, j.draft = AWAIT_VERIFY, (tokens, q)
            if cycle == 0:
                j.salt = salt

    @action(
        6,
        when=some("jobs", "can_verify"),
        job=pick,
        draws=seed,
        variant=st.sampled_from(["ok"] * 5 + ["cycle", "party", "reveal", "draft", "length"]),
    )
    def submit_verification(self, job, variant, draws):
        j = self.choose(self.jobs, self.can_verify, job)
        rnd = random.Random(draws)
        tokens, q = j.draft or ([5] * j.gamma, [WAD] * j.gamma)
        if variant == "draft":
            q = [q[0] % WAD + 1, *q[1:]]
        cycle = j.cycle + (1 if variant == "cycle" else 0)
        reveal = j.reveals[min(j.cycle + (1 if variant == "reveal" else 0), j.max_tokens - 1)]
        if variant == "reveal" and j.cycle + 1 >= j.max_tokens:
            reveal = keccak(b"not the reveal")
        # A random accept pattern: p_i from {1, 0, q_i, q_i / 2, uniform}; n comes from node/protocol.py.
        p = [rnd.choice([WAD, 0, qi, qi // 2, rnd.randint(0, WAD)]) for qi in q]
        p += [WAD] if variant == "length" else []
        out_token = 2**32 - 1 if rnd.random() < 0.04 else rnd.choice([EOS, 3, 9, VOCAB - 1])  # 2^32 - 1: out of range
        sender = j.drafter if variant == "party" else j.verifier
        err = first(
            (j.status != RUNNING, "JobWrongStatus"),
            (sender != j.verifier, "NotJobVerifier"),
            (j.phase != AWAIT_VERIFY, "WrongPhase"),
            (self.t > j.deadline + PARAMS.verify_timeout, "DeadlinePassed"),
            (cycle != j.cycle, "WrongCycle"),
            (len(p) != j.gamma, "GammaLengthMismatch"),
            (variant in ("reveal", "draft"), "CommitmentMismatch"),
            (out_token >= VOCAB, "TokenOutOfRange"),
        )
        fn = self.market.functions.submitVerification(j.id, cycle, tokens, q, p, reveal, out_token)
        receipt = self.act(fn, sender, err)
        if not err:
            self.verified(j, receipt, Record(tokens, q, p, 0, out_token))

    @action(
        4,
        requester=pick,
        verifier=pick,
        gamma=st.sampled_from([4, 1, 2, 8]),
        max_tokens=st.sampled_from([2, 1, 3]),
        upto=st.sampled_from(["end", "end", "end", "accept", "draft"]),
        draws=seed,
    )
    def honest_job(self, requester, verifier, gamma, max_tokens, upto, draws):
        """A small honest job of the busiest active drafter, driven in one action — submit, accept, then draft and
        verify until it finishes (upto="end"), or left after its acceptance / first draft for the other actions
        to continue — so that α windows (8 jobs with M = 1) fill up and get evaluated within one example."""
        drafters = [a for a in self.accts.values() if a.role == DRAFTER and self.active(a, DRAFTER, a.models[0])]
        drafter = max(drafters, key=lambda a: self.alpha[a.addr].view()[1], default=0)
        count = len(self.jobs)
        self.submit_job(
            requester, drafter, verifier, gamma, max_tokens, prices=(10**12, 3 * 10**12), escrow=0, variant="ok"
        )
        if len(self.jobs) == count:
            return
        j, rnd = self.jobs[-1], random.Random(draws)
        self.accept_job(j, "ok", stranger=0)
        while j.status == RUNNING and upto != "accept":  # every cycle emits at least one token
            self.commit_draft(j, "ok", rnd.getrandbits(32))
            if upto == "draft":
                break
            self.submit_verification(j, "ok", rnd.getrandbits(32))
        if upto == "end" and j.status == FINISHED and not j.open_disputes:
            # settled at once (its α counts enter the window at finalize), so windows fill within one example
            self.now = max(self.now, j.deadline)
            self.act(self.market.functions.finalize(j.id), j.requester)
            self.settle(j)

    def verified(self, j: Job, receipt, rec: Record):
        """Effects of a valid verification: accept rule, output (cut at EOS / maxTokens), record, α counts."""
        root = rec.root(j.id, j.cycle)
        # the accept rule under the job's salt, cut before a proposal outside the vocabulary (docs/protocol.md §4)
        n = P.count_accepted(j.reveals[j.cycle], root, rec.q, rec.p, j.salt)
        rec.accepted = n = P.cap_at_vocab(rec.tokens, n, VOCAB)
        room = j.max_tokens - j.emitted
        out = (rec.tokens[:n] + [rec.out_token])[:room]
        if EOS in out:
            out = out[: out.index(EOS) + 1]
        finished = n + 1 >= room or EOS in out
        (log,) = [x for x in receipt.logs if x["topics"][0] == CYCLE_VERIFIED]
        cycle, _, accepted, _, output = abi_decode(
            ["uint256", "bytes32", "uint256", "uint32", "bytes"], bytes.fromhex(log["data"][2:])
        )
        assert (cycle, accepted, output) == (j.cycle, n, b"".join(t.to_bytes(4, "big") for t in out))
        assert self.rpc.view(self.market, "cycleRecordHash", j.id, j.cycle) == P.cycle_record_hash(
            root, rec.p, n, rec.out_token
        )
        j.records.append(rec)
        j.cycle, j.emitted, j.draft, j.phase = j.cycle + 1, j.emitted + len(out), None, AWAIT_DRAFT
        # a last cycle cut before its outToken: its rejection (after the cut) is not counted
        j.rejected += n < j.gamma and not (finished and len(out) <= n)
        j.accepted_sum += n
        if finished:
            j.out_cut = len(out) <= n
            j.status, j.deadline = FINISHED, self.now + PARAMS.challenge_window
        else:
            j.deadline = self.now + PARAMS.commit_timeout

    @action(
        4,
        nearest=st.integers(0, 3),
        offset=st.sampled_from([0, 1]),
        then=st.sampled_from([1, 2]),
        dt=st.sampled_from([0, 0, 0, 0, 30, 86_400]),
    )
    def time_travel(self, nearest, offset, then, dt):
        """Moves the clock so that the next transaction runs exactly at one of the nearest pending deadlines
        (offset 0: the last second of the earlier state, 1: the first second of the later one) and there
        probes the boundary with the earlier state's action (then=1) or the later one's (then=2); or just
        moves dt seconds on."""
        future = [entry for entry in self.deadlines() if entry[0] + offset > self.t]
        if dt or not future:
            self.now += dt or 60
        else:
            x, *probes = future[min(nearest, len(future) - 1)]
            self.now = x + offset - 1
        self.rpc.ok("evm_setNextBlockTimestamp", self.now)
        self.rpc.ok("evm_mine")
        if not dt and future:
            STATS["boundary probes"] += 1
            probes[then - 1]()

    @action(2, when=some("jobs", "overdue"), job=pick, caller=actor)
    def claim_timeout(self, job, caller):
        j = self.choose(self.jobs, self.overdue, job)
        party = None
        if j.status == RUNNING and j.phase == AWAIT_DRAFT:
            party = j.drafter if j.cycle > 0 else None
        elif j.status == RUNNING:
            party = j.verifier  # a verifier fault: the job's cycles never count toward α
        err = first(
            (j.status not in (OPEN, RUNNING), "JobWrongStatus"), (self.t <= j.view_deadline(), "DeadlineNotPassed")
        )
        self.act(self.market.functions.claimTimeout(j.id), self.acct(caller).addr, err)
        if not err:
            self.stop(j)
            if party is not None and party == j.verifier:
                j.eligible = False
            if party and PARAMS.timeout_slash:
                self.credit_market(j.requester, self.slash(party, PARAMS.timeout_slash))
            if j.cycle == 0:
                self.settle(j)

    @action(3, when=some("jobs", "can_finalize"), job=pick, caller=actor)
    def finalize(self, job, caller):
        j = self.choose(self.jobs, self.can_finalize, job)
        err = first(
            (j.status != FINISHED, "JobWrongStatus"),
            (self.t <= j.deadline, "DeadlineNotPassed"),
            (j.open_disputes != 0, "DisputesOpen"),
        )
        self.act(self.market.functions.finalize(j.id), self.acct(caller).addr, err)
        if not err:
            self.settle(j)

    @action(1, who=pick)
    def withdraw_market(self, who):
        who = self.someone(who, lambda a: self.owed[a.addr]).addr
        self.withdraw_all(self.market, self.owed, who, "market", "NothingOwed")

    # ------------------------------------------------------------ dispute actions

    @action(
        4,
        when=some("jobs", "disputable"),
        job=pick,
        position=pick,
        challenger=actor,
        variant=st.sampled_from(["ok"] * 5 + ["bond", "record", "proof"]),
    )
    def open_dispute(self, job, position, challenger, variant):
        j = self.choose(self.jobs, self.disputable, job)
        k = j.gamma
        free = self.free_positions(j)
        if free and position % 4 != 3:
            c, index, kind = free[(position // 4) % len(free)]
        else:  # any position: maybe one that binds nothing, is taken, or a cycle not verified (yet)
            c, index, kind = position % (len(j.records) + 1), (position // 8) % (k + 1), (position // 2) % 2
        rec = j.records[c] if c < len(j.records) else None
        root = rec.root(j.id, c) if rec else ZERO
        p = list(rec.p) if rec else [0] * k
        if variant == "record":
            p[0] ^= 1
        record = (root, p, rec.accepted if rec else 0, rec.out_token if rec else 0)
        leaf_proof = (0, 0, [])
        if rec and index < k:
            leaves = [P.leaf(j.id, c, i, t, qi) for i, (t, qi) in enumerate(zip(rec.tokens, rec.q))]
            q = rec.q[index] ^ (1 if variant == "proof" else 0)
            leaf_proof = (rec.tokens[index], q, P.proof(leaves, index))
        who = self.acct(challenger).addr
        accused = j.drafter if kind == DRAFT_REPLAY else j.verifier
        listed = self.listed_referees(j, kind)
        pos = self.positions.get((j.id, c, index, kind), FREE)
        value = BOND - 1 if variant == "bond" else BOND
        err = first(
            (value != BOND, "WrongBond"),
            (j.status not in (RUNNING, FINISHED), "JobNotDisputable"),
            (rec is None, "CycleNotVerified"),
            (variant == "record", "RecordMismatch"),
            (index == k and kind == DRAFT_REPLAY, "OutTokenNeedsTargetReplay"),
            (rec is not None and k > index > rec.accepted, "PositionDoesNotBind"),
            (index < k and variant == "proof", "InvalidProof"),
            (who == accused, "ChallengerIsAccused"),
            (pos == OPEN_POS, "PositionUnderDispute"),
            (pos == PROVEN, "PositionAlreadyProven"),
            (not listed, "NoEligibleReferees"),
        )
        self.act(self.dm.functions.openDispute(j.id, c, index, kind, record, leaf_proof), who, err, value)
        if not err:
            d = Dispute(
                len(self.disputes) + 1,
                j,
                c,
                index,
                kind,
                who,
                accused,
                self.now + PARAMS.answer_period,
                opened_at=self.now,
                pool_size=listed,
            )
            self.disputes.append(d)
            self.positions[d.key] = OPEN_POS
            j.open_disputes += 1

    @action(
        3,
        when=some("disputes", "can_answer"),
        dispute=pick,
        stranger=actor,
        variant=st.sampled_from(["ok"] * 4 + ["party", "topk", "prob"]),
    )
    def answer(self, dispute, variant, stranger):
        d = self.choose(self.disputes, self.can_answer, dispute)
        sender = self.acct(stranger).addr if variant == "party" else d.accused
        top = ([], []) if variant == "topk" else ([3, 9], [WAD // 3, WAD // 4])
        claimed = WAD + 1 if variant == "prob" else WAD // 3
        err = first(
            (d.status != AWAITING, "DisputeWrongStatus"),
            (sender != d.accused, "NotAccused"),
            (self.t > d.answer_deadline, "AnswerPeriodOver"),
            (not top[0], "BadTopK"),
            (claimed > WAD, "ProbabilityAboveWad"),
        )
        self.act(self.dm.functions.answer(d.id, claimed, *top), sender, err)
        if not err and not d.drawn and not self.drawn(d):  # the answer drew the referees; nobody was eligible
            return
        if not err:
            d.status, d.commit_deadline = VOTING, self.now + PARAMS.vote_commit_period
            d.reveal_deadline = d.commit_deadline + PARAMS.vote_reveal_period

    @action(2, when=some("disputes", "undrawn"), dispute=pick, caller=actor)
    def draw_referees(self, dispute, caller):
        d = self.choose(self.disputes, self.undrawn, dispute)
        err = first((d.status != AWAITING, "DisputeWrongStatus"), (d.drawn, "AlreadyDrawn"))
        self.act(self.dm.functions.drawReferees(d.id), self.acct(caller).addr, err)
        if not err:
            self.drawn(d)

    def drawn(self, d: Dispute) -> bool:
        """DisputeManager's draw (just mined, by drawReferees or the answer): every eligible referee, as the
        panel of 7 exceeds the pool; with nobody eligible the dispute ends Void. Returns whether a panel exists."""
        eligible = self.eligible_referees(d)
        d.panel = [Web3.to_checksum_address(r) for r in self.rpc.view(self.dm, "refereesOf", d.id)]
        STATS["draws with a choice"] += len(eligible) > PARAMS.referee_count  # see the module docstring
        assert set(d.panel) <= eligible and len(set(d.panel)) == len(d.panel) == min(
            PARAMS.referee_count, len(eligible)
        )
        if not d.panel:
            d.status, d.outcome = RESOLVED, VOID
            self.positions[d.key] = FREE
            self.credit_disputes(d.challenger, BOND)
            STATS["outcome void (nobody to draw)"] += 1
            self.closed(d, accused_lost=False)
            return False
        d.drawn = True
        return True

    @action(2, when=some("disputes", "silent"), dispute=pick, caller=actor)
    def claim_answer_timeout(self, dispute, caller):
        d = self.choose(self.disputes, self.silent, dispute)
        err = first((d.status != AWAITING, "DisputeWrongStatus"), (self.t <= d.answer_deadline, "AnswerPeriodNotOver"))
        self.act(self.dm.functions.claimAnswerTimeout(d.id), self.acct(caller).addr, err)
        if not err:
            d.status, d.outcome = RESOLVED, SILENT
            self.positions[d.key] = PROVEN
            taken = self.slash(d.accused, PARAMS.accused_slash)
            self.credit_disputes(d.challenger, BOND + taken // 2)
            self.credit_disputes(d.job.requester, taken - taken // 2)
            self.closed(d, accused_lost=True)

    @action(
        5,
        when=some("disputes", "can_commit_vote"),
        dispute=pick,
        referee=pick,
        stranger=actor,
        variant=st.sampled_from(["ok"] * 4 + ["dissent", "lazy", "outsider", "empty"]),
    )
    def commit_vote(self, dispute, referee, variant, stranger):
        d = self.choose(self.disputes, self.can_commit_vote, dispute)
        verdict = 3 - d.truth if variant == "dissent" else d.truth  # a dissenter votes against the replay
        sender = self.choose(sorted(d.panel) or [d.challenger], lambda r: r not in d.committed, referee)
        sender = self.acct(stranger).addr if variant == "outsider" else sender
        sealed = ZERO if variant == "empty" else P.vote_commitment(d.id, sender, verdict, d.salt(sender))
        err = first(
            (d.status != VOTING, "DisputeWrongStatus"),
            (sender not in d.panel, "NotDrawnReferee"),
            (self.t > d.commit_deadline, "CommitPeriodOver"),
            (sender in d.committed, "AlreadyCommitted"),
            (sealed == ZERO, "EmptyCommitment"),
        )
        self.act(self.dm.functions.commitVote(d.id, sealed), sender, err)
        if not err:
            d.committed[sender] = verdict
            if variant == "lazy":
                d.lazy.add(sender)

    @action(
        5,
        when=some("disputes", "can_reveal"),
        dispute=pick,
        referee=pick,
        stranger=actor,
        variant=st.sampled_from(["ok"] * 5 + ["flip", "none", "outsider"]),
    )
    def reveal_vote(self, dispute, referee, variant, stranger):
        d = self.choose(self.disputes, self.can_reveal, dispute)
        sender = self.choose(
            sorted(d.panel) or [d.challenger],
            lambda r: r in d.committed and r not in d.revealed and r not in d.lazy,
            referee,
        )
        sender = self.acct(stranger).addr if variant == "outsider" else sender
        sealed = d.committed.get(sender, FAITHFUL)
        verdict = {"flip": 3 - sealed, "none": 0}.get(variant, sealed)
        t = self.t
        err = first(
            (d.status != VOTING, "DisputeWrongStatus"),
            (sender not in d.panel, "NotDrawnReferee"),
            (sender not in d.committed, "NotCommitted"),
            (sender in d.revealed, "AlreadyRevealed"),
            (t <= d.commit_deadline and len(d.committed) < len(d.panel), "RevealPeriodNotOpen"),
            (t > d.reveal_deadline, "RevealPeriodOver"),
            (verdict == 0, "InvalidVerdict"),
            (verdict != sealed, "WrongReveal"),
        )
        self.act(self.dm.functions.revealVote(d.id, verdict, d.salt(sender)), sender, err)
        if not err:
            d.revealed[sender] = verdict

    @action(3, when=some("disputes", "can_resolve"), dispute=pick, caller=actor)
    def resolve(self, dispute, caller):
        d = self.choose(self.disputes, self.can_resolve, dispute)
        err = first((d.status != VOTING, "DisputeWrongStatus"), (not d.voting_over(self.t), "TooEarlyToResolve"))
        self.act(self.dm.functions.resolve(d.id), self.acct(caller).addr, err)
        if not err:
            self.resolved(d)

    def resolved(self, d: Dispute):
        """DisputeManager.resolve: strict majority of the drawn panel, penalties, rewards, release."""
        votes = Counter(d.revealed.values())
        half = len(d.panel) // 2
        d.outcome = LOST if votes[CHEATED] > half else CHALLENGER_LOST if votes[FAITHFUL] > half else VOID
        d.status = RESOLVED
        self.positions[d.key] = PROVEN if d.outcome == LOST else FREE
        winning = {LOST: CHEATED, CHALLENGER_LOST: FAITHFUL}.get(d.outcome)
        majority = [r for r in d.panel if r in d.revealed and winning in (None, d.revealed[r])]
        pool = sum(self.slash(r, PARAMS.referee_penalty) for r in d.panel if r not in majority)
        reward = BOND // 2
        if d.outcome == LOST:
            taken = self.slash(d.accused, PARAMS.accused_slash)
            rest = taken - min(taken, reward)
            pool += min(taken, reward)
            self.credit_disputes(d.challenger, BOND + rest // 2)
            self.credit_disputes(d.job.requester, rest - rest // 2)
        elif d.outcome == CHALLENGER_LOST:
            pool += reward
            self.credit_disputes(d.accused, BOND - reward)
        else:
            self.credit_disputes(d.challenger, BOND)
        if not majority:
            self.credit_disputes(d.challenger, pool)
        else:
            share = pool // len(majority)
            for i, r in enumerate(majority):
                self.credit_disputes(r, share + (pool - share * len(majority) if i == 0 else 0))
        STATS[f"outcome {enums.Outcome(d.outcome).name}"] += 1
        self.closed(d, accused_lost=d.outcome == LOST)

    def closed(self, d: Dispute, accused_lost: bool):
        """InferenceMarket.disputeClosed: a lost dispute forfeits the accused's pay and stops a running job."""
        j = d.job
        j.open_disputes -= 1
        if accused_lost:
            if d.accused == j.drafter:
                j.drafter_forfeit, j.eligible = True, False
            elif d.accused == j.verifier:
                j.verifier_forfeit, j.eligible = True, False
            if j.status == RUNNING:
                self.stop(j)

    @action(1, who=pick)
    def withdraw_disputes(self, who):
        who = self.someone(who, lambda a: self.credits[a.addr]).addr
        self.withdraw_all(self.dm, self.credits, who, "disputes", "NothingToWithdraw")

    # ------------------------------------------------------------ invariants

    @invariant()
    def chain_matches_model(self):
        STATS["invariant checks"] += 1
        accts = list(self.accts.values())
        contracts = [self.registry.address, self.market.address, self.dm.address]
        calls = [("balance", c) for c in contracts]
        for a in accts:
            calls += [
                ("balance", a.addr),
                (self.registry, "accountOf", a.addr),
                (self.registry, "stakeOf", a.addr),
                (self.market, "owed", a.addr),
                (self.dm, "credits", a.addr),
                (self.market, "alphaWindowOf", a.addr),
            ]
        calls += [(self.market, "getJob", j.id) for j in self.jobs]
        calls += [(self.dm, "getDispute", d.id) for d in self.disputes]
        calls += [(self.dm, "positionState", *key) for key in self.positions]
        calls.append((self.market, "owed", PARAMS.treasury))  # α slashes and fees (not an actor)
        out = iter(self.rpc.read(calls))
        balances = dict(zip(contracts, (next(out) for _ in contracts)))
        stakes = owed = credits = 0
        for a in accts:
            wallet, account, stake_of, chain_owed, chain_credits, window = (next(out) for _ in range(6))
            stake, role, locks, since, alpha_star, target = account
            assert stake_of == stake
            # nobody is paid twice: the wallet is exactly what the model says; per contract,
            # withdrawn + still owed == everything ever credited
            assert wallet == a.wallet, f"{a.addr} wallet {wallet} != model {a.wallet}"
            model = (self.owed[a.addr], self.credits[a.addr])
            assert (chain_owed, chain_credits) == model, f"{a.addr} (owed, credits) {chain_owed, chain_credits}"
            assert a.withdrawn["market"] + chain_owed == a.credited["market"]
            assert a.withdrawn["disputes"] + chain_credits == a.credited["disputes"]
            # stake: only deposits raise it, only slashes and withdrawals lower it, never below zero
            assert stake == a.stake == a.credited["registry"] - a.slashed - a.withdrawn["registry"] >= 0, (
                f"{a.addr} stake {stake} != model {a.stake}"
            )
            last_stake, last_slashed, last_withdrawn = self.last_stakes[a.addr]
            assert stake >= last_stake or a.slashed > last_slashed or a.withdrawn["registry"] > last_withdrawn
            self.last_stakes[a.addr] = (stake, a.slashed, a.withdrawn["registry"])
            # locks = open jobs + open disputes (as accused or referee), derived from the model
            assert locks == self.locks(a.addr), f"{a.addr} locks {locks} != {self.locks(a.addr)}"
            assert (role, since, alpha_star, target) == (a.role, a.unbonding_since, a.alpha_star, a.target)
            assert tuple(window) == self.alpha[a.addr].view(), f"α window of {a.addr}"
            stakes, owed, credits = stakes + stake, owed + chain_owed, credits + chain_credits
        escrow = 0
        for j in self.jobs:
            v = next(out)
            # JobView: (requester, drafter, verifier, draftModel, targetModel, status, phase, gamma, alphaEligible,
            # cycle, emitted, rejected, maxTokens, eosToken, deadline, openDisputes, escrow, prices x2,
            # drafterTokens, drafterForfeited, verifierForfeited, commitment, salt, vocabSize)
            got = (v[5], v[6], v[9], v[10], v[11], v[14], v[15], v[16], v[19], v[20], v[21], v[8], v[23], v[24])
            want = (
                j.status,
                j.phase,
                j.cycle,
                j.emitted,
                j.rejected,
                j.view_deadline(),
                j.open_disputes,
                j.escrow,
                j.drafter_tokens,
                j.drafter_forfeit,
                j.verifier_forfeit,
                j.eligible,
                j.salt,
                VOCAB,
            )
            assert got == want, f"job {j.id}: chain {got} != model {want}"
            escrow += v[16] if v[5] != FINALIZED else 0
        bonds = 0
        for d in self.disputes:
            v = next(out)
            # Dispute: (jobId, challenger, cycle, index, kind, status, outcome, accused, answerDeadline, requester,
            # commitDeadline, modelId, answerHash, revealDeadline, drawn, commits, reveals, faithful, cheated,
            # drawBlock, poolSize)
            votes = Counter(d.revealed.values())
            got = (v[0], v[1].lower(), v[7].lower(), v[5], v[6], v[8], v[10], v[13], *v[14:19], v[20])
            want = (
                d.job.id,
                d.challenger.lower(),
                d.accused.lower(),
                d.status,
                d.outcome,
                d.answer_deadline,
                d.commit_deadline,
                d.reveal_deadline,
                len(d.panel),
                len(d.committed),
                len(d.revealed),
                votes[FAITHFUL],
                votes[CHEATED],
                d.pool_size,
            )
            assert got == want, f"dispute {d.id}: chain {got} != model {want}"
            bonds += BOND if v[5] != RESOLVED else 0
        for key, state in self.positions.items():
            assert next(out) == state, f"position {key}"
        treasury = next(out)
        assert treasury == self.owed[PARAMS.treasury], f"treasury owed {treasury}"
        owed += treasury
        # ETH conservation: each contract holds exactly what it owes (per its own views, and per the model)
        model_escrow = sum(j.escrow for j in self.jobs if j.status != FINALIZED)
        model_bonds = BOND * sum(d.status != RESOLVED for d in self.disputes)
        assert balances[self.registry.address] == stakes == sum(a.stake for a in accts)
        assert balances[self.market.address] == escrow + owed == model_escrow + sum(self.owed.values())
        assert balances[self.dm.address] == bonds + credits == model_bonds + sum(self.credits.values())


# Later lifecycle steps first: hypothesis draws the first choices of a list more often than the others.
ORDER = [
    "resolve",
    "reveal_vote",
    "commit_vote",
    "answer",
    "draw_referees",
    "claim_answer_timeout",
    "open_dispute",
    "finalize",
    "submit_verification",
    "commit_draft",
    "accept_job",
    "claim_timeout",
    "submit_job",
    "honest_job",
    "time_travel",
    "withdraw_market",
    "withdraw_disputes",
    "register",
    "add_stake",
    "set_alpha_star",
    "request_unbond",
    "withdraw_unbonded",
]
ACTIONS = [(name, getattr(ProtocolMachine, name).weight, getattr(ProtocolMachine, name).when) for name in ORDER]
assert set(ORDER) == {n for n, f in vars(ProtocolMachine).items() if hasattr(f, "strategies")}


# ---------------------------------------------------------------- the test


@pytest.fixture(scope="module")
def system(w3):
    """A fresh deployment for this module; the whole module's chain changes are reverted at its end."""
    before = w3.provider.make_request("evm_snapshot", [])["result"]
    yield deploy_system(w3, w3.eth.accounts[0], PARAMS)
    w3.provider.make_request("evm_revert", [before])


def test_random_protocol_runs_keep_every_invariant(w3, system):
    STATS.clear()
    run_state_machine_as_test(
        lambda: ProtocolMachine(w3, system),
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            derandomize=True,
            database=None,
            deadline=None,
            print_blob=True,
            phases=list(Phase) if SHRINK else [Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )
    summary = ", ".join(f"{k}={v}" for k, v in sorted(STATS.items()))
    print(f"\nstateful run: {summary}")
    # The run must really have exercised the protocol, not just bounced off reverts.
    assert STATS["steps"] >= 3_000, summary
    for fn in (
        "registerDrafter",
        "register",
        "addStake",
        "setAlphaStar",
        "requestUnbond",
        "withdrawUnbonded",
        "submitJob",
        "acceptJob",
        "commitFirstDraft",
        "commitDraft",
        "submitVerification",
        "claimTimeout",
        "finalize",
        "withdraw",
        "openDispute",
        "answer",
        "claimAnswerTimeout",
        "commitVote",
        "revealVote",
        "resolve",
    ):
        assert STATS[f"{fn}:ok"] > 0, f"{fn} never succeeded: {summary}"
    for outcome in (
        "withdrawUnbonded:StakeLocked",
        "withdraw:NothingOwed",
        "withdraw:NothingToWithdraw",
        "outcome AccusedLost",
        "outcome ChallengerLost",
        "outcome Void",
        "alpha windows breached",
        "alpha windows passed",
        "boundary probes",
    ):
        assert STATS[outcome] > 0, f"{outcome} never happened: {summary}"
