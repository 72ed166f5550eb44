"""Randomized stateful test of the whole protocol (registry + market + α window + disputes) on a real anvil.

A hypothesis `RuleBasedStateMachine` drives twelve unlocked anvil accounts through random actions —
register, addStake, setAlphaStar, requestUnbond, withdrawUnbonded, submitJob, acceptJob, commitDraft,
submitVerification, time travel, claimTimeout, finalize, openDispute, drawReferees, answer,
claimAnswerTimeout, commitVote, revealVote, resolve, appeal and the three withdrawals — valid ones and
invalid ones (wrong party, wrong cycle, bad parameters, too little stake / escrow / bond, a wrong appeal
bond, too early, too late ...), plus `honest_job`, a small job driven in one action, so that drafters' α
windows fill up and get evaluated. Each action is a method marked `@action(weight, when=precondition,
**argument strategies)`; the machine's one hypothesis rule, `step`, draws an action and its arguments (see
its docstring for why). Time travel jumps to a pending deadline's last allowed second or the first one
after it and probes it there with the action on either side (accept / claimTimeout, commit+verify /
claimTimeout, answer / claimAnswerTimeout, commitVote / revealVote, revealVote / resolve, an appeal with a
wrong bond then one in the last second or a resolve too early + a late appeal + the final resolve, an
escalated draw before / after its escalation period, finalize, withdrawUnbonded).

The machine keeps an independent model of every account, job, dispute and α window (a few dataclasses
below, mirroring docs/contracts.md and docs/disputes.md), and of the registry's referee stake trees (per
model id: the slots in registration order, each referee's active stake as its weight, the block of the
tree's last change). Before every transaction the model predicts the outcome: either success with its
exact effects, or the custom error the contracts must revert with. An expected revert is first checked
with `eth_call` (the error name) and then mined anyway, so the chain really executed it and only the
sender's gas changed. Accept counts, record hashes, proofs, hash chains and vote commitments come from
node/protocol.py.

Disputes follow the v1.1 referee rules with v1.2's frozen draws (docs/disputes.md). The model replays RefereeDraw's
selection itself: the seed from the seed block's hash (read from the chain), the stake point of every try, the
holder of each point in the modelled tree as it stood at the end of the block before the seed block (the model keeps
every weight's history), the eligibility rules (no party, not on an earlier panel, not drawn twice, still staked),
so it predicts the exact panel in draw order (compared with `panelOf`), or an escalation (too few eligible: a fresh
seed after escalationPeriod; after maxEscalations Void with every bond back in round 0, and in an appeal round the
appealed verdict stands with the appellant's bond back), or a reschedule (the seed block left the 256-block window).
A referee's weight is its stake down to a quarter of the registration minimum (the floor). A round is decided by
`resolve` (strict majority of the drawn panel) and is Appealable for appealPeriod (bond × 2^k, a fresh panel of 2n +
1); `resolve` after the period, or on the last round at once, ends the dispute: penalties for every round's
non-revealers and final-verdict dissenters and forfeited appeal bonds are credited to BURN, only the final round's
majority is paid. The deployment here has R = 1, one appeal (3 seats) and one escalation, so that with four to eight
referees both full draws and short ones (escalations, Void) happen in a run. A few behaviours are tied to the
dispute id, like its truth (odd ids are real cheats), so that a run surely reaches them: every fourth dispute's
first panel is captured (votes the lie, so an appeal overturns it: the first-round referee is penalized, the appeal
bond refunded), every third dispute's appellant first sends the first bond again (WrongAppealBond); the losing side
tries a late appeal before an Appealable round's final resolve, a drawer retries an escalated draw at once
(EscalationPending), and `steer_draw` moves a referee's stake between seed and draw (v1.2: the panel is the one the
seed chose anyway).

Invariants, checked after EVERY step against one batched read of the chain:
* ETH conservation: registry balance = Σ stakes; market balance = Σ escrow of unfinalized jobs + Σ owed;
  dispute manager balance = Σ bonds and appeal bonds of unresolved disputes + Σ credits (BURN's included)
  — computed from the model and from the contracts' own views, and both equal to the real balances; and
  the ETH of the actors, the three contracts and the burn address plus all gas paid stays what it was.
* Nobody is paid twice: every account's wallet equals the model's (start − value sent − gas + what it
  was paid), and for each contract: withdrawn + still owed = everything ever credited. Every successful
  withdraw is measured (balance change + gas = the model's amount) and followed by a second withdraw
  that must revert. The burn address never moves: its balance stays, its credits only grow.
* Nobody withdraws locked stake: each account's lock count equals its unfinalized jobs + unresolved
  disputes (as accused or referee of any round) from the model; withdrawUnbonded reverts StakeLocked while
  any is open; stake = deposited − slashed − withdrawn ≥ 0, so a stake only falls by a slash or a withdrawal.
* Referee weights: refereeWeight, refereeStakeTotal, stakeTreeChangedAt and stakeTreeSlot equal the model.
* Everything else the model knows equals the views: accounts, α windows, jobs, disputes (every field of the
  current round), rounds (`roundOf`), positions.

Time is exact: every transaction is mined at (previous block + 1 s) via evm_setNextBlockTimestamp, and
time travel jumps the next block's timestamp (the deterministic form of evm_increaseTime), so deadline
boundaries are hit to the second; the model counts blocks too (one per transaction or time travel), as
draws depend on them. Each hypothesis example starts from a snapshot of the fresh deployment (`evm_snapshot`
in `__init__`, `evm_revert` in `teardown`). The run is seeded (VERISPEC_STATEFUL_SEED) on a chain of its own
whose block hashes are reproducible (fixture `system`), so one run is the same run every time, draws included, alone or
in the whole suite: hypothesis' pool of literals from the imported modules is kept out (`collection_independent_draws`;
it made the file alone and `make test` two different runs, and a new literal in node/ or scripts/ re-dealt them) and
hypothesis is pinned (pyproject.toml). A contract change, or a change to this file, re-deals the draws: the seed is one
that hits every RARE_OUTCOMES entry, and a run that misses one is followed by the next seed's (FALLBACK_RUNS); the model
still replays every draw from the real hash.

Run: .venv/bin/python -m pytest -q tests/test_stateful.py -s   (prints the coverage summary; ~2-3 min)
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest
import requests
from eth_abi import decode as abi_decode
from eth_hash.auto import keccak
from eth_utils.abi import get_abi_output_types
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as pinned_seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from web3 import Web3

from chainutil import VOCAB, decode_error
from node import protocol as P
from node.chain import enums
from node.chain.anvil import running_anvil
from node.chain.deploy import deploy_system
from node.chain.params import BURN_ADDRESS, DEFAULT_PARAMS, ETHER

# hypothesis' stateful campaign against the contracts (minutes): not in `make test-fast`
pytestmark = pytest.mark.campaign

WAD = P.WAD
# α windows fill after 8 jobs. Referee panels of 1 and (after the one appeal) 3 seats: with the four referees of
# the cast (and those that register later) a run draws full panels, panels with a choice, and short draws that
# escalate (once, then Void). Appeal and escalation periods as short as the job timeouts, so that time travel
# probes their boundaries too.
PARAMS = DEFAULT_PARAMS.with_(
    alpha_bucket_cycles=1,
    accused_slash=6 * ETHER // 10,
    referee_count=1,
    max_appeals=1,
    max_escalations=1,
    appeal_period=120,
    escalation_period=120,
)
# 30 examples × 120 steps: ~3,800 steps (hypothesis runs ~32 examples), ~4,900 transactions; a soak run can
# raise them.
EXAMPLES = int(os.environ.get("VERISPEC_STATEFUL_EXAMPLES", 30))
STEPS = int(os.environ.get("VERISPEC_STATEFUL_STEPS", 120))
# Shrinking a failure re-runs the machine many times (up to hypothesis' 5-minute cap); "0" skips it.
SHRINK = os.environ.get("VERISPEC_STATEFUL_SHRINK", "1") != "0"
# The run's seed: with the chain's reproducible block hashes (fixture `system`) and no literals from the imported code
# in hypothesis' draws (`collection_independent_draws`), one seed is one run, the draws and so the rare outcomes
# included, alone or in `make test`; a soak run can try others. Before that pool was kept out, the run changed with
# the collection and with every new literal in node/ or scripts/ (seeds 0, then 1-3, missed "draw schedule (round 1)"
# after changes elsewhere). Measured on this file as it is (2026-12-03): seed 4 reaches "draw schedule (round 1)" twice
# and "outcome Void (escalation)" once; seed 5 reaches them 13 and 10 times, and every other rare outcome (195 s).
# The contracts' interfaces (issue 24) changed their metadata hash, so the chain's block hashes and the draws: seed 5
# then never succeeded at claimAnswerTimeout, seed 7 missed too, and seed 6 alone hits every function and every rare
# outcome (2026-12-03, 202 s). v1.2's frozen draws and standing verdicts (2026-12-04) took away the v1.1 outcomes
# "outcome Void (escalation)" (an unstaffable appeal now stands; round 0 never lacks one seat here) and
# "answer:PanelNotDrawn" (no reschedule on a stake change); seeds 6-8 hit everything else, and seed 7 also hits
# "appeal unstaffed: the verdict stands", so the run starts at 7.
# A run that misses a rare outcome is followed by the next seed's run, up to FALLBACK_RUNS more, and the rare outcomes
# are counted over them all (each run checks every invariant and that every function succeeded).
SEED = int(os.environ.get("VERISPEC_STATEFUL_SEED", 7))
FALLBACK_RUNS = int(os.environ.get("VERISPEC_STATEFUL_FALLBACK_RUNS", 2))
GENESIS_TIME = 1_767_225_600  # 2026-01-01: fixed, so the chain's block hashes are too
N_ACTORS = 12
GAS, GAS_PRICE = 3_000_000, 3 * 10**9
ZERO = bytes(32)
DRAFT, TARGET, OTHER = (keccak(b"verispec.stateful." + n) for n in (b"draft", b"target", b"other"))
EOS = 2
BOND = PARAMS.dispute_bond
BURN = Web3.to_checksum_address(BURN_ADDRESS)  # DisputeManager.BURN (and the market's default treasury)
DEFAULT_CAPACITY = 4  # InferenceMarket.DEFAULT_CAPACITY: no drafter here declares another (v1.2)
MODELS = (DRAFT, TARGET, OTHER)  # every model id a referee can register for (each has a stake tree)
CYCLE_VERIFIED = "0x" + keccak(b"CycleVerified(uint256,uint256,bytes32,uint256,uint32,bytes)").hex()

# the contracts' enums, under the short names this model uses (the values come from node/chain/enums.py)
NONE, DRAFTER, VERIFIER, REFEREE = enums.Role  # registry roles
OPEN, RUNNING, FINISHED, FINALIZED = list(enums.JobStatus)[1:]  # job status
AWAIT_DRAFT, AWAIT_VERIFY = enums.Phase  # job phase
AWAITING, VOTING, RESOLVED, APPEALABLE, DRAWING = list(enums.DisputeStatus)[1:]  # dispute status
LOST, CHALLENGER_LOST, VOID, SILENT = list(enums.Outcome)[1:]  # dispute outcome
DRAFT_REPLAY, TARGET_REPLAY = enums.DisputeKind
FAITHFUL, CHEATED = list(enums.Verdict)[1:]
FREE, OPEN_POS, PROVEN = enums.PositionState  # dispute position state

REFEREE_FLOOR = PARAMS.min_referee_stake // 4  # StakingRegistry.refereeFloor: penalties lower, the floor ejects
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
    registered_block: int = 0  # block of its registration (isActiveSince)
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
class Round:
    """DisputeManager.Round: a round's decided result and votes; for k ≥ 1 the appeal that opened it."""

    result: int = 0
    faithful: int = 0
    cheated: int = 0
    appealed: int = 0  # the result of round k - 1 that the appeal contested
    appellant: str = "0x" + "00" * 20
    bond: int = 0

    def view(self) -> tuple:
        return (self.result, self.faithful, self.cheated, self.appealed, self.appellant.lower(), self.bond)


@dataclass
class Dispute:
    id: int
    job: Job
    cycle: int
    index: int
    kind: int
    challenger: str
    accused: str
    model: bytes  # the disputed model id (its stake tree draws the panels)
    answer_deadline: int
    draw_block: int  # the block whose hash seeds the current round's draw; 0 while an escalation waits
    status: int = AWAITING
    outcome: int = 0
    round: int = 0
    panel_size: int = PARAMS.referee_count
    panels: list = field(default_factory=list)  # one per drawn round, in draw order (the current one last)
    escalations: int = 0  # short draws of the current round
    draw_after: int = 0  # an escalated draw may take a fresh seed from this time on
    appeal_deadline: int = 0
    round_result: int = 0  # the latest decided round's result (what an appeal contests)
    rounds: list = field(default_factory=lambda: [Round()])
    commit_deadline: int = 0
    reveal_deadline: int = 0
    # the current round's ballots (earlier rounds' revealed verdicts move to `past` when the round is appealed)
    committed: dict = field(default_factory=dict)  # referee -> verdict sealed
    lazy: set = field(default_factory=set)  # referees that committed but reveal only when a deadline probe asks
    revealed: dict = field(default_factory=dict)  # referee -> verdict revealed
    past: dict = field(default_factory=dict)  # referee -> verdict revealed in an earlier round

    @property
    def key(self) -> tuple:
        return (self.job.id, self.cycle, self.index, self.kind)

    @property
    def drawn(self) -> bool:
        """The current round's panel is drawn."""
        return len(self.panels) > self.round

    @property
    def panel(self) -> list:
        return self.panels[self.round] if self.drawn else []

    @property
    def bonds(self) -> int:
        """What the dispute manager holds for this dispute while it is unresolved: the bond and the appeal bonds."""
        return BOND + sum(r.bond for r in self.rounds)

    @property
    def truth(self) -> int:
        """What an honest referee's replay finds: odd disputes are about a real cheat, even ones are not
        (dissenting votes come from commit_vote's "dissent" variant, and from captured first panels)."""
        return CHEATED if self.id % 2 else FAITHFUL

    @property
    def captured(self) -> bool:
        """Every fourth dispute's first panel is captured by the cheater (attack 6): its referees vote the lie, so
        the round acquits a cheat, and only an appeal to a fresh panel convicts it."""
        return self.id % 4 == 3 and self.round == 0

    def salt(self, referee: str) -> bytes:
        return keccak(b"salt" + self.id.to_bytes(32, "big") + bytes.fromhex(referee[2:]))

    def voting_over(self, t: int) -> bool:
        return (
            t > self.reveal_deadline
            or len(self.revealed) == len(self.panel)
            or (t > self.commit_deadline and len(self.revealed) == len(self.committed))
        )


def draw_points(seed_block_hash: bytes, dispute_id: int, round_: int, total: int, tries: int) -> list:
    """RefereeDraw: seed = keccak256(abi.encode(blockhash, disputeId, round)); try j looks up the stake point
    keccak256(abi.encode(seed, j)) % total."""
    word = seed_block_hash + dispute_id.to_bytes(32, "big") + round_.to_bytes(32, "big")
    seed_ = keccak(word)
    return [int.from_bytes(keccak(seed_ + j.to_bytes(32, "big")), "big") % total for j in range(tries)]


# ---------------------------------------------------------------- raw JSON-RPC


@dataclass
class Receipt:
    status: int
    fee: int  # gasUsed × effectiveGasPrice
    timestamp: int
    block: int
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
            as_int(r["blockNumber"]),
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
        latest = self.rpc.ok("eth_getBlockByNumber", "latest", False)
        self.now, self.block = int(latest["timestamp"], 16), int(latest["number"], 16)
        addrs = w3.eth.accounts[1 : 1 + N_ACTORS]
        self.accts = {a: Account(a, b) for a, b in zip(addrs, self.rpc.read([("balance", a) for a in addrs]))}
        # the registry's referee stake trees: slots in registration order, weights, block of the last change
        self.slots: dict[bytes, list] = {m: [] for m in MODELS}
        self.weights: Counter = Counter()  # refereeWeight
        self.tree_changed: Counter = Counter()  # stakeTreeChangedAt
        self.weight_log: dict = defaultdict(lambda: defaultdict(list))  # model -> referee -> [(block, weight)]
        # ETH conservation: the actors, the contracts and the burn address hold what they held, less all gas paid
        self.fees = 0
        self.holders = [*addrs, self.registry.address, self.market.address, self.dm.address, BURN]
        self.burn_balance = self.rpc.balance(BURN)
        self.total_eth = sum(self.rpc.read([("balance", a) for a in self.holders]))
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
        self.block += 1
        assert (receipt.timestamp, receipt.block) == (self.now, self.block)
        self.accts[sender].wallet -= receipt.fee + (0 if err else value)
        self.fees += receipt.fee
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
        return d.status in (AWAITING, DRAWING) and not d.drawn and (d.draw_block or self.t >= d.draw_after)

    def seeded(self, d: Dispute) -> bool:
        return d.status in (AWAITING, DRAWING) and not d.drawn and bool(d.draw_block)

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
        """A voted round can be decided; an Appealable one is tried any time (AppealPeriodNotOver before the end)."""
        return (d.status == VOTING and d.voting_over(self.t)) or d.status == APPEALABLE

    def can_appeal(self, d: Dispute) -> bool:
        """Appealable: tried any time, also after the appeal period (AppealPeriodOver) until someone resolves."""
        return d.status == APPEALABLE

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
            if d.status in (AWAITING, DRAWING) and not d.draw_block:  # an escalated draw waits for a fresh seed
                draw = lambda d=d: self.draw_referees(d, 0)  # noqa: E731
                out.append((d.draw_after - 1, draw, draw))
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
            elif d.status == APPEALABLE:
                probe = lambda d=d: self.probe_appeal(d)  # noqa: E731
                out.append((d.appeal_deadline - 1, probe, probe))
        for a in self.accts.values():
            if a.unbonding_since:
                x, withdraw = a.unbonding_since + PARAMS.unbonding_period - 1, lambda a=a: self.withdraw_unbonded(a)
                out.append((x, withdraw, withdraw))
        return sorted(out, key=lambda entry: entry[0])

    def probe_appeal(self, d: Dispute):
        """From the second before the appeal deadline on: an appeal with the first bond again (WrongAppealBond);
        then on even disputes an appeal in the last second, on odd ones a resolve that is too early
        (AppealPeriodNotOver), an appeal that is too late (AppealPeriodOver) and the resolve that ends it."""
        self.appeal(d, 0, "bond")
        if d.id % 2 == 0:
            self.appeal(d, 0, "loser")
        else:
            self.resolve(d, 0)
            self.appeal(d, 0, "loser")
            self.resolve(d, 0)

    def active(self, a: Account, role: int, model: bytes) -> bool:
        minimum = REFEREE_FLOOR if role == REFEREE else MIN_STAKE[role]
        return a.role == role and a.unbonding_since == 0 and model in a.models and a.stake >= minimum

    def credit_market(self, who: str, amount: int):
        self.owed[who] += amount
        if who != BURN:  # timeout slashes (v1.2) and, as the default treasury, α slashes and fees: nobody withdraws
            self.accts[who].credited["market"] += amount

    def credit_disputes(self, who: str, amount: int):
        self.credits[who] += amount
        if who != BURN:  # nobody withdraws for the burn address
            self.accts[who].credited["disputes"] += amount

    def slash(self, who: str, amount: int) -> int:
        acct = self.accts[who]
        taken = min(amount, acct.stake)
        acct.stake -= taken
        acct.slashed += taken
        self.reweigh(acct)
        return taken

    # the registry's referee stake trees (StakingRegistry._syncRefereeWeight)

    def weight(self, a: Account) -> int:
        """refereeWeight: a referee's active stake (its stake while not unbonding and at or above the floor) or a
        verifier's (while active: the probe draw's tree, v1.2); 0 otherwise."""
        minimum = {REFEREE: REFEREE_FLOOR, VERIFIER: MIN_STAKE[VERIFIER]}.get(a.role)
        active = minimum is not None and not a.unbonding_since and a.stake >= minimum
        return a.stake if active else 0

    def reweigh(self, a: Account):
        """After a (just mined) registration, stake change or unbond of `a`: its weight in the trees of every
        model it serves follows its active stake, and a changed weight marks those trees changed in this block."""
        if a.role == REFEREE:
            for m in a.models:
                if a.addr not in self.slots[m]:
                    self.slots[m].append(a.addr)  # a slot for good, reused on re-registration
        w = self.weight(a)
        if w != self.weights[a.addr]:
            self.weights[a.addr] = w
            for m in a.models if a.role == REFEREE else ():  # a verifier's weight is in trees of its own
                self.tree_changed[m] = self.block
                self.weight_log[m][a.addr].append((self.block, w))

    def tree(self, m: bytes) -> list:
        """The stake tree of model `m` as (referee, weight) per slot (a slot of a model it no longer serves is 0)."""
        a = self.accts
        return [(r, self.weights[r] if m in a[r].models and a[r].role == REFEREE else 0) for r in self.slots[m]]

    def tree_at(self, m: bytes, block: int) -> list:
        """The stake tree of model `m` as it stood at the end of `block` (refereeByStakeAt's): each slot's last
        weight written in that tree at or before it."""

        def weight(r: str) -> int:
            return next((w for b, w in reversed(self.weight_log[m][r]) if b <= block), 0)

        return [(r, weight(r)) for r in self.slots[m]]

    def holder(self, tree: list, point: int) -> str:
        """refereeByStake: the slot whose cumulative weight first exceeds `point` (StakeTree.find)."""
        for r, w in tree:
            if point < w:
                return r
            point -= w
        raise AssertionError("point beyond the total")

    def plan_draw(self, d: Dispute) -> tuple[str, list, int]:
        """What DisputeManager._drawPanel does in the next block: "pending" (EscalationPending), "schedule" (a fresh
        seed after an escalation), "reschedule" (the tree changed after the seed block, or its hash is gone),
        "short" (fewer eligible than seats: escalate, or Void after the last escalation) or "panel" (drawn), with
        the referees found in draw order and how many referees of the tree were eligible."""
        block = self.block + 1
        if not d.draw_block:
            return ("pending" if self.t < d.draw_after else "schedule"), [], 0
        assert block > d.draw_block  # one transaction a block: DrawTooEarly cannot happen here
        if d.draw_block < block - 256:
            return "reschedule", [], 0
        tree = self.tree_at(d.model, d.draw_block - 1)  # frozen: nothing done after the seed moves a point
        total = sum(w for _, w in tree)
        j = d.job
        parties = {j.requester, j.drafter, j.verifier, d.challenger}
        earlier = {r for panel in d.panels for r in panel}

        def eligible(r: str) -> bool:  # its weight before the seed made it active then; it must still be staked
            return r not in parties and r not in earlier and self.accts[r].stake > 0

        chosen = []
        if total:
            seed_hash = bytes.fromhex(self.rpc.ok("eth_getBlockByNumber", hex(d.draw_block), False)["hash"][2:])
            for point in draw_points(seed_hash, d.id, d.round, total, 4 * d.panel_size + 8):
                r = self.holder(tree, point)
                if eligible(r) and r not in chosen:
                    chosen.append(r)
                    if len(chosen) == d.panel_size:
                        break
        return ("panel" if len(chosen) == d.panel_size else "short"), chosen, sum(eligible(r) for r, w in tree if w)

    def apply_draw(self, d: Dispute, plan: tuple[str, list, int]):
        """The effects of a mined draw (drawReferees, or the answer's), as planned by plan_draw."""
        kind, chosen, eligible = plan
        STATS[f"draw {kind} (round {d.round})"] += 1
        STATS["draws with a choice"] += eligible > d.panel_size
        if kind in ("schedule", "reschedule"):
            d.draw_block = self.block
        elif kind == "short":
            d.escalations += 1
            if d.escalations > PARAMS.max_escalations:
                if d.round == 0:
                    self.void_unrefereed(d)
                else:
                    self.stand_unstaffed_appeal(d)
                return
            d.draw_block, d.draw_after = 0, self.now + PARAMS.escalation_period
            if d.round == 0:
                d.answer_deadline = d.draw_after + PARAMS.answer_period
        else:
            panel = [Web3.to_checksum_address(r) for r in self.rpc.view(self.dm, "panelOf", d.id, d.round)]
            assert panel == chosen, f"dispute {d.id} round {d.round}: panel {panel} != model {chosen}"
            d.panels.append(chosen)
            if d.round == 0:  # the accused has a full answer period with a panel in place
                d.answer_deadline = max(d.answer_deadline, self.now + PARAMS.answer_period)
            else:  # an appeal round votes on the first round's answer
                self.start_voting(d)

    def start_voting(self, d: Dispute):
        d.status, d.commit_deadline = VOTING, self.now + PARAMS.vote_commit_period
        d.reveal_deadline = d.commit_deadline + PARAMS.vote_reveal_period

    def void_unrefereed(self, d: Dispute):
        """Too few referees after the last escalation: Void, the bond and every appeal bond back, nobody
        penalized, the position free again."""
        d.status, d.outcome = RESOLVED, VOID
        self.positions[d.key] = FREE
        self.credit_disputes(d.challenger, BOND)
        for r in d.rounds[1:]:
            self.credit_disputes(r.appellant, r.bond)
        STATS["outcome Void (escalation)"] += 1
        STATS[f"void by escalation in round {d.round}"] += 1
        self.closed(d, accused_lost=False)

    def stand_unstaffed_appeal(self, d: Dispute):
        """An appeal round nobody could staff: undone (its appellant's bond back), and the dispute ends with the
        appealed round's result as a final one (DisputeManager._standUnstaffedAppeal)."""
        unstaffed = d.rounds.pop()
        self.credit_disputes(unstaffed.appellant, unstaffed.bond)
        d.round -= 1
        d.panel_size = len(d.panels[d.round])
        d.revealed = {r: d.past[r] for r in d.panels[d.round] if r in d.past}
        d.committed = dict(d.revealed)  # the chain keeps no commit count of a past round: commits = reveals
        STATS["appeal unstaffed: the verdict stands"] += 1
        self.finish(d, d.round_result)

    def finish(self, d: Dispute, outcome: int):
        """DisputeManager._finish with the final outcome (the last round's result): every round's non-revealers and
        (decided outcome) dissenters of the final verdict penalized, penalties and forfeited appeal bonds burnt,
        the bond and the slash split, the final round's majority paid (dust to the first in draw order)."""
        d.status, d.outcome = RESOLVED, outcome
        self.positions[d.key] = PROVEN if outcome == LOST else FREE
        winning = {LOST: CHEATED, CHALLENGER_LOST: FAITHFUL}.get(outcome)
        votes = {**d.past, **d.revealed}
        burnt = 0
        for panel in d.panels:
            for r in panel:
                if r not in votes or (winning and votes[r] != winning):
                    burnt += self.slash(r, PARAMS.referee_penalty)
                    STATS["referee penalties (burnt)"] += 1
        for r in d.rounds[1:]:
            if outcome != r.appealed:  # the appeal changed the verdict
                self.credit_disputes(r.appellant, r.bond)
                STATS["appeal bonds refunded"] += 1
            else:
                burnt += r.bond
                STATS["appeal bonds burnt"] += 1
        reward, to_referees = PARAMS.dispute_bond // 2, 0
        if outcome == LOST:
            taken = self.slash(d.accused, PARAMS.accused_slash)
            to_referees = min(taken, reward)
            rest = taken - to_referees
            self.credit_disputes(d.challenger, BOND + rest // 2)
            self.credit_disputes(d.job.requester, rest - rest // 2)
        elif outcome == CHALLENGER_LOST:
            to_referees = reward
            self.credit_disputes(d.accused, BOND - reward)
        else:
            self.credit_disputes(d.challenger, BOND)
        if to_referees:
            majority = [r for r in d.panels[d.round] if d.revealed.get(r) == winning]
            share = to_referees // len(majority)
            for i, r in enumerate(majority):
                self.credit_disputes(r, share + (to_referees - share * len(majority) if i == 0 else 0))
        self.credit_disputes(BURN, burnt)
        STATS[f"outcome {enums.Outcome(outcome).name}"] += 1
        STATS[f"final after {d.round} appeal(s)"] += 1
        self.closed(d, accused_lost=outcome == LOST)

    def record_alpha(self, job: Job):
        """At settlement: the job's cycles (accepted proposals emitted, rejections observed) enter the window; a
        breach slashes min(bps of the stake, N × floor) to the treasury (never a party of the job)."""
        if self.alpha[job.drafter].record(job.cycle, job.drafter_tokens, job.rejected):
            taken = self.slash(job.drafter, PARAMS.alpha_slash(self.accts[job.drafter].stake))
            self.owed[PARAMS.treasury] += taken

    def live_jobs(self, drafter: str) -> int:
        """The drafter's Open or Running jobs: what InferenceMarket.drafterLoad counts (v1.2)."""
        return sum(1 for j in self.jobs if j.drafter == drafter and j.status in (OPEN, RUNNING))

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
        disputes = sum(
            d.status != RESOLVED and (addr == d.accused) + sum(p.count(addr) for p in d.panels) for d in self.disputes
        )
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
            a.role, a.stake, a.registered_block = role, stake, self.block
            a.credited["registry"] += stake
            self.reweigh(a)

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
            a.role, a.stake, a.unbonding_since, a.registered_block = role, value, 0, self.block
            a.credited["registry"] += value
            self.reweigh(a)

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
            self.reweigh(a)

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
            self.reweigh(a)  # a referee's weight drops to 0 at once

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
            assert self.weights[a.addr] == 0  # an unbonding account holds no weight already
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
            (self.live_jobs(d.addr) >= DEFAULT_CAPACITY, "DrafterAtCapacity"),  # v1.2: nobody declares another
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
        self.block += 1
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
                self.credit_market(BURN, self.slash(party, PARAMS.timeout_slash))  # burnt (v1.2)
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
        model = j.draft_model if kind == DRAFT_REPLAY else TARGET
        staked = sum(w for _, w in self.tree(model))  # refereeStakeTotal
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
            (not staked, "NoEligibleReferees"),
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
                model,
                answer_deadline=self.now + PARAMS.answer_period,
                draw_block=self.block,  # the opening block seeds round 0
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
        plan = self.plan_draw(d) if d.status == AWAITING and not d.drawn else None  # the answer draws round 0
        err = first(
            (d.status != AWAITING, "DisputeWrongStatus"),
            (sender != d.accused, "NotAccused"),
            (self.t > d.answer_deadline, "AnswerPeriodOver"),
            (not top[0], "BadTopK"),
            (claimed > WAD, "ProbabilityAboveWad"),
            # no seed yet (an escalation waits), or the draw would reschedule / escalate: reverted, not answered
            (plan is not None and plan[0] != "panel", "PanelNotDrawn"),
        )
        self.act(self.dm.functions.answer(d.id, claimed, *top), sender, err)
        if not err:
            if plan:
                self.apply_draw(d, plan)
            self.start_voting(d)

    @action(3, when=some("disputes", "undrawn"), dispute=pick, caller=actor)
    def draw_referees(self, dispute, caller):
        d = self.choose(self.disputes, self.undrawn, dispute)
        plan = self.plan_draw(d) if d.status in (AWAITING, DRAWING) and not d.drawn else None
        err = first(
            (d.status not in (AWAITING, DRAWING), "DisputeWrongStatus"),
            (d.drawn, "AlreadyDrawn"),
            (plan is not None and plan[0] == "pending", "EscalationPending"),
        )
        self.act(self.dm.functions.drawReferees(d.id), self.acct(caller).addr, err)
        if not err:
            self.apply_draw(d, plan)
            if plan[0] == "short" and d.status != RESOLVED:  # escalated: a retry at once is too early
                self.draw_referees(d, caller)

    @action(2, when=some("disputes", "seeded"), dispute=pick, who=pick)
    def steer_draw(self, dispute, who):
        """A referee of the disputed model moves its stake (1 wei) once the draw's seed block is public, as if to
        steer the draw (v1.1 rescheduled it: a free re-roll): the draw reads the tree before the seed block, so the
        panel is the one the seed chose anyway (docs/disputes.md, "Referee draw")."""
        d = self.choose(self.disputes, self.seeded, dispute)
        self.add_stake(
            self.someone(who, lambda a: a.role == REFEREE and self.weights[a.addr] and d.model in a.models), 1
        )
        STATS["steered draws (a stake moved after the seed)"] += 1

    @action(2, when=some("disputes", "silent"), dispute=pick, caller=actor)
    def claim_answer_timeout(self, dispute, caller):
        d = self.choose(self.disputes, self.silent, dispute)
        err = first(
            (d.status != AWAITING, "DisputeWrongStatus"),
            (not d.drawn, "PanelNotDrawn"),  # the answer period runs against the accused only with a panel
            (self.t <= d.answer_deadline, "AnswerPeriodNotOver"),
        )
        self.act(self.dm.functions.claimAnswerTimeout(d.id), self.acct(caller).addr, err)
        if not err:
            d.status, d.outcome = RESOLVED, SILENT
            self.positions[d.key] = PROVEN
            taken = self.slash(d.accused, PARAMS.accused_slash)
            self.credit_disputes(d.challenger, BOND + taken // 2)
            self.credit_disputes(d.job.requester, taken - taken // 2)
            STATS["outcome AccusedSilent"] += 1
            self.closed(d, accused_lost=True)

    @action(
        5,
        when=some("disputes", "can_commit_vote"),
        dispute=pick,
        referee=pick,
        stranger=actor,
        variant=pick.map(lambda i: (["ok"] * 4 + ["dissent", "lazy", "outsider", "earlier", "empty"])[i % 9]),
    )
    def commit_vote(self, dispute, referee, variant, stranger):
        d = self.choose(self.disputes, self.can_commit_vote, dispute)
        lie = variant == "dissent" or d.captured  # a dissenter (or a captured panel) votes against the replay
        verdict = 3 - d.truth if lie else d.truth
        sender = self.choose(sorted(d.panel) or [d.challenger], lambda r: r not in d.committed, referee)
        earlier = [r for panel in d.panels[: d.round] for r in panel]  # drawn, but for an earlier round
        sender = self.acct(stranger).addr if variant == "outsider" else sender
        sender = earlier[referee % len(earlier)] if variant == "earlier" and earlier else sender
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
        """Decides a voted round (strict majority of the drawn panel, else Void): Appealable while appeals remain,
        final on the last round; an Appealable round becomes final after its appeal period (after the losing side's
        late appeal has reverted)."""
        d = self.choose(self.disputes, self.can_resolve, dispute)
        if d.status == APPEALABLE and self.t > d.appeal_deadline:
            self.appeal(d, 0, "loser")  # the losing side comes too late (AppealPeriodOver)
        err = first(
            (d.status == APPEALABLE and self.t <= d.appeal_deadline, "AppealPeriodNotOver"),
            (d.status not in (VOTING, APPEALABLE), "DisputeWrongStatus"),
            (d.status == VOTING and not d.voting_over(self.t), "TooEarlyToResolve"),
        )
        self.act(self.dm.functions.resolve(d.id), self.acct(caller).addr, err)
        if err:
            return
        if d.status == APPEALABLE:
            STATS["final after the appeal period"] += 1
            self.finish(d, d.round_result)
            return
        votes = Counter(d.revealed.values())
        half = len(d.panel) // 2
        result = LOST if votes[CHEATED] > half else CHALLENGER_LOST if votes[FAITHFUL] > half else VOID
        r = d.rounds[d.round]
        r.result, r.faithful, r.cheated, d.round_result = result, votes[FAITHFUL], votes[CHEATED], result
        STATS[f"round {d.round} decided {enums.Outcome(result).name}"] += 1
        if d.round < PARAMS.max_appeals:
            d.status, d.appeal_deadline = APPEALABLE, self.now + PARAMS.appeal_period
        else:
            STATS["final at once (last round)"] += 1
            self.finish(d, result)

    @action(
        2,
        when=some("disputes", "can_appeal"),
        dispute=pick,
        stranger=actor,
        variant=pick.map(lambda i: (["loser"] * 4 + ["anyone", "short", "bond"])[i % 7]),
    )
    def appeal(self, dispute, stranger, variant):
        """An appeal of the decided round, by its losing side (either on a round without majority) or anyone, with
        bond × 2^(round + 1) (or one wei short, or the first bond again); also after the appeal period."""
        d = self.choose(self.disputes, self.can_appeal, dispute)
        if variant == "loser" and d.id % 3 == 0 and d.status == APPEALABLE:
            self.appeal(d, stranger, "bond")  # every third dispute's appellant first sends the first bond again
        loser = {LOST: d.accused, CHALLENGER_LOST: d.challenger}.get(d.round_result, d.challenger)
        sender = self.acct(stranger).addr if variant == "anyone" else loser
        required = BOND << (d.round + 1)
        value = {"short": required - 1, "bond": BOND}.get(variant, required)
        err = first(
            (d.status != APPEALABLE, "DisputeWrongStatus"),
            (self.t > d.appeal_deadline, "AppealPeriodOver"),
            (value != required, "WrongAppealBond"),
        )
        self.act(self.dm.functions.appeal(d.id), sender, err, value)
        if not err:
            STATS[f"appealed round {d.round} ({enums.Outcome(d.round_result).name})"] += 1
            decided = d.round_result in (LOST, CHALLENGER_LOST)
            STATS["appeals of a decided round" if decided else "appeals of a round without majority"] += 1
            d.past.update(d.revealed)
            d.committed, d.revealed, d.lazy = {}, {}, set()
            d.round += 1
            d.rounds.append(Round(appealed=d.round_result, appellant=sender, bond=value))
            d.panel_size = ((PARAMS.referee_count + 1) << d.round) - 1  # RefereeDraw.panelSize
            d.status, d.draw_block, d.escalations, d.appeal_deadline = DRAWING, self.block, 0, 0

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
        calls += [(self.dm, "roundOf", d.id, k) for d in self.disputes for k in range(d.round + 1)]
        calls += [(self.dm, "positionState", *key) for key in self.positions]
        calls.append((self.market, "owed", PARAMS.treasury))  # α slashes and fees (not an actor)
        # the referee stake trees
        calls += [(self.registry, "refereeWeight", a.addr) for a in accts]
        calls += [(self.registry, f, m) for m in MODELS for f in ("refereeStakeTotal", "stakeTreeChangedAt")]
        calls += [(self.registry, "stakeTreeSlot", m, a.addr) for m in MODELS for a in accts]
        # the burn address: never paid out (its credits only grow), its own balance never moves
        calls += [(self.dm, "credits", BURN)] + [("balance", h) for h in self.holders]
        calls += [(self.market, "drafterLoad", a.addr) for a in accts]  # v1.2: Open or Running jobs, capacity
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
        views = [next(out) for _ in self.disputes]
        bonds = 0
        for d, v in zip(self.disputes, views):
            # Dispute: (jobId, challenger, cycle, index, kind, status, outcome, accused, answerDeadline, requester,
            # commitDeadline, modelId, answerHash, revealDeadline, drawn, commits, reveals, faithful, cheated,
            # drawBlock, round, panelSize, escalations, drawAfter, appealDeadline, roundResult)
            votes = Counter(d.revealed.values())
            got = (v[0], v[1].lower(), v[7].lower(), v[11], v[5], v[6], v[8], v[10], v[13], *v[14:26])
            want = (
                d.job.id,
                d.challenger.lower(),
                d.accused.lower(),
                d.model,
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
                d.draw_block,
                d.round,
                d.panel_size,
                d.escalations,
                d.draw_after,
                d.appeal_deadline,
                d.round_result,
            )
            assert got == want, f"dispute {d.id}: chain {got} != model {want}"
        for d, v in zip(self.disputes, views):
            rounds = [next(out) for _ in range(d.round + 1)]
            got = [(*r[:4], r[4].lower(), r[5]) for r in rounds]
            assert got == [r.view() for r in d.rounds], f"dispute {d.id} rounds: chain {got}"
            bonds += BOND + sum(r[5] for r in rounds) if v[5] != RESOLVED else 0
        for key, state in self.positions.items():
            assert next(out) == state, f"position {key}"
        treasury = next(out)
        assert treasury == self.owed[PARAMS.treasury], f"treasury owed {treasury}"
        owed += treasury
        # referee weights: each account's active stake, per model the trees' totals, last change and slots
        for a in accts:
            weight = next(out)
            assert weight == self.weights[a.addr] == self.weight(a), f"{a.addr} weight {weight}"
        for m in MODELS:
            total, changed = next(out), next(out)
            assert (total, changed) == (sum(w for _, w in self.tree(m)), self.tree_changed[m]), f"tree {m.hex()}"
        for m in MODELS:
            slots = [r.lower() for r in self.slots[m]]
            for a in accts:
                want = (slots.index(a.addr.lower()) + 1 if a.addr.lower() in slots else 0, len(slots))
                assert tuple(next(out)) == want, f"tree slot of {a.addr} for {m.hex()}"
        burnt = next(out)
        assert burnt == self.credits[BURN], f"burnt {burnt} != model {self.credits[BURN]}"
        credits += burnt
        holdings = dict(zip(self.holders, (next(out) for _ in self.holders)))
        assert holdings[BURN] == self.burn_balance, "the burn address's balance moved"
        for a in accts:
            load = tuple(next(out))
            assert load == (self.live_jobs(a.addr), DEFAULT_CAPACITY), f"{a.addr} drafter load {load}"
        # ETH conservation: each contract holds exactly what it owes (per its own views, and per the model) ...
        model_escrow = sum(j.escrow for j in self.jobs if j.status != FINALIZED)
        model_bonds = sum(d.bonds for d in self.disputes if d.status != RESOLVED)
        assert balances[self.registry.address] == stakes == sum(a.stake for a in accts)
        assert balances[self.market.address] == escrow + owed == model_escrow + sum(self.owed.values())
        assert balances[self.dm.address] == bonds + credits == model_bonds + sum(self.credits.values())
        # ... and no ETH appears or vanishes: actors + contracts + burn address + all gas paid is what it was
        assert sum(holdings.values()) + self.fees == self.total_eth, "ETH was created or destroyed"


# Later lifecycle steps first: hypothesis draws the first choices of a list more often than the others.
ORDER = [
    "appeal",
    "resolve",
    "reveal_vote",
    "commit_vote",
    "answer",
    "draw_referees",
    "steer_draw",
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


FUNCTIONS = (
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
    "drawReferees",
    "answer",
    "claimAnswerTimeout",
    "commitVote",
    "revealVote",
    "resolve",
    "appeal",
)  # every one of them must succeed in every run

RARE_OUTCOMES = (
    "withdrawUnbonded:StakeLocked",
    "withdraw:NothingOwed",
    "withdraw:NothingToWithdraw",
    "outcome AccusedLost",
    "outcome ChallengerLost",
    "outcome Void",
    "outcome AccusedSilent",
    # v1.1 referee rules: weighted draws with a choice, reschedules, escalations and their Void, appeals with a
    # wrong bond or too late, rounds decided then appealed, final verdicts after the appeal period and on the
    # last round, penalties and forfeited appeal bonds burnt
    "draws with a choice",
    "draw panel (round 0)",
    "draw panel (round 1)",
    "steered draws (a stake moved after the seed)",
    "draw short (round 1)",
    "draw schedule (round 1)",
    "appeal unstaffed: the verdict stands",
    "drawReferees:EscalationPending",
    "claimAnswerTimeout:PanelNotDrawn",
    "appeal:WrongAppealBond",
    "appeal:AppealPeriodOver",
    "resolve:AppealPeriodNotOver",
    "round 0 decided AccusedLost",
    "round 0 decided ChallengerLost",
    "round 1 decided AccusedLost",
    "round 1 decided ChallengerLost",
    "appeals of a decided round",
    "final after the appeal period",
    "final at once (last round)",
    "final after 1 appeal(s)",
    "referee penalties (burnt)",
    "appeal bonds burnt",
    "appeal bonds refunded",
    "alpha windows breached",
    "alpha windows passed",
    "boundary probes",
)


@contextlib.contextmanager
def reproducible_chain():
    """An anvil of its own whose every block hash is reproducible, so the referee draws are too.

    anvil derives each block's prevrandao (mixHash) from the chain itself, so a block's hash is fixed by the genesis
    timestamp, the blocks' timestamps and what they hold. The suite's session anvil has neither: its genesis is the
    wall-clock time and earlier tests mined into it. Here the genesis time is fixed and blocks are 1 s apart
    (anvil_setBlockTimestampInterval; the machine sets every block's time itself anyway)."""
    with running_anvil(extra_args=("--timestamp", str(GENESIS_TIME))) as node:
        w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 60}))
        w3.provider.make_request("anvil_setBlockTimestampInterval", [1])
        yield w3


@pytest.fixture(scope="module")
def system():
    """The deployment on a reproducible chain: one seeded run is the same run every time, draws included."""
    with reproducible_chain() as w3:
        yield w3, deploy_system(w3, w3.eth.accounts[0], PARAMS)


def test_the_chain_of_the_stateful_run_is_reproducible():
    """What the one seeded run stands on: two fresh chains given the same transactions have the same block hashes
    (prevrandao included), also after an evm_revert. A client whose prevrandao is random fails here, not as a
    missed rare outcome."""
    hashes = []
    for _ in range(2):
        with reproducible_chain() as w3:
            sender, to = w3.eth.accounts[:2]
            w3.eth.wait_for_transaction_receipt(w3.eth.send_transaction({"from": sender, "to": to, "value": 1}))
            snapshot = w3.provider.make_request("evm_snapshot", [])["result"]
            w3.provider.make_request("evm_mine", [])
            w3.provider.make_request("evm_revert", [snapshot])
            w3.provider.make_request("evm_setNextBlockTimestamp", [GENESIS_TIME + 100])
            w3.provider.make_request("evm_mine", [])
            blocks = [w3.eth.get_block(n) for n in range(w3.eth.block_number + 1)]
            hashes.append([(b["hash"], b["mixHash"]) for b in blocks])
    assert len(hashes[0]) == 3 and hashes[0] == hashes[1]
    assert len({mix for _, mix in hashes[0][1:]}) == 2  # a prevrandao per block, not one constant


@contextlib.contextmanager
def collection_independent_draws():
    """Hypothesis draws 5 % of its integers, bytes and strings from a pool of the literals in the source of every
    imported non-test module (`_get_local_constants`, hypothesis >= 6.131): which modules `make test`'s collection
    imports, and any literal added to node/ or scripts/, re-dealt the seeded run (measured: the run alone and in the
    suite differed; last session's new literals in node/ and scripts/ are the likely reason seeds 1-3 came to miss rare
    outcomes). The run takes its constants from hypothesis' own global pool only, so one seed is one run whatever else
    is imported."""
    from hypothesis.internal.conjecture import providers  # no public switch for the local pool

    patch = pytest.MonkeyPatch()
    patch.setattr(providers, "_get_local_constants", providers.Constants)  # an empty pool
    providers.CONSTANTS_CACHE.cache.clear()  # it caches permitted local constants per draw's bounds
    try:
        yield
    finally:
        patch.undo()
        providers.CONSTANTS_CACHE.cache.clear()


def test_the_stateful_run_draws_no_literals_of_the_imported_code():
    """What keeps one seed one run in any collection: inside the run, hypothesis' pool of the imported modules'
    literals is empty (node/ is imported, so outside it is not)."""
    from hypothesis.internal.conjecture import providers

    assert providers._get_local_constants().integers
    with collection_independent_draws():
        pool = providers._get_local_constants()
        assert not (pool.integers or pool.floats or pool.bytes or pool.strings)
    assert providers._get_local_constants().integers


def _run_machine(w3, system, seed: int) -> None:
    with collection_independent_draws():
        run_state_machine_as_test(
            pinned_seed(seed)(lambda: ProtocolMachine(w3, system)),
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                database=None,
                deadline=None,
                print_blob=True,
                phases=list(Phase) if SHRINK else [Phase.explicit, Phase.reuse, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            ),
        )


def test_random_protocol_runs_keep_every_invariant(system):
    w3, deployment = system
    coverage: Counter = Counter()  # the rare outcomes, over every run made
    seeds = []
    for seed in range(SEED, SEED + 1 + FALLBACK_RUNS):
        STATS.clear()
        _run_machine(w3, deployment, seed)
        seeds.append(seed)
        summary = ", ".join(f"{k}={v}" for k, v in sorted(STATS.items()))
        print(f"\nstateful run (seed {seed}): {summary}")
        # Each run must really have exercised the protocol, not just bounced off reverts.
        assert STATS["steps"] >= 3_000, summary
        for fn in FUNCTIONS:
            assert STATS[f"{fn}:ok"] > 0, f"{fn} never succeeded (seed {seed}): {summary}"
        coverage.update(STATS)
        missed = [outcome for outcome in RARE_OUTCOMES if coverage[outcome] == 0]
        if not missed:
            break
        print(f"seed {seed} missed {missed}: the next seed runs too")
    # The draws hang on the block hashes, so on the contracts' bytecode too: a contract change can re-deal them. A run
    # stays the same run until then; the seeds that were needed are printed above, so the first can be moved on.
    assert not missed, f"{missed} never happened in the runs of seeds {seeds}"
