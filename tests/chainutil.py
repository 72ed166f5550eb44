"""Shared helpers for the contract tests: actors, a deployed system, job driving, revert decoding, gas.

Draft data (leaves, roots, uniforms, accept counts, hash chains) always comes from `node.protocol`;
nothing here re-derives the protocol math.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from eth_abi import decode as abi_decode
from eth_hash.auto import keccak
from eth_utils import function_signature_to_4byte_selector
from web3 import Web3
from web3.exceptions import ContractCustomError, ContractLogicError
from web3.logs import DISCARD

from node import protocol as P
from node.chain.deploy import System, deploy_system
from node.chain.enums import FinishReason, JobStatus, Phase, Role
from node.chain.params import DEFAULT_PARAMS, ETHER, WAD, DeploymentParams
from node.jobs.chaindata import unpack_draft, unpack_output  # noqa: F401 (the packed event bytes, shared with the nodes)

# How long a test lets a script or node process run before it calls it hung: it bounds a hang and never decides a
# pass (a loaded 2-core machine stretched a 90 s benchmark run past 90 s; none needs minutes idle).
HANG_S = 900
DRAFT_MODEL = keccak(b"verispec.test.draft-model")
TARGET_MODEL = keccak(b"verispec.test.target-model")
OTHER_MODEL = keccak(b"verispec.test.other-model")
ZERO_ADDRESS = "0x" + "00" * 20
ALPHA_STAR = WAD * 6 // 10
PRICE_ACCEPTED = 10**12
PRICE_PASS = 3 * 10**12
EOS = 2
SEED = keccak(b"verispec.test.verifier-seed")
SALT = 0x5A17_C0FF_EE15_0B0E  # the drafter salt the test runner commits with the cycle-0 draft
VOCAB = 2**24  # both models' registered vocabulary in the test deployment (make_draft's tokens stay below it)

# the contracts' enums, under the short names these tests use (the values come from node/chain/enums.py)
ROLE_NONE, ROLE_DRAFTER, ROLE_VERIFIER, ROLE_REFEREE = Role
STATUS_NONE, STATUS_OPEN, STATUS_RUNNING, STATUS_FINISHED, STATUS_FINALIZED = JobStatus
PHASE_DRAFT, PHASE_VERIFY = Phase
REASON_COMPLETED, REASON_ACCEPT_TIMEOUT, REASON_DRAFT_TIMEOUT, REASON_VERIFY_TIMEOUT, REASON_DISPUTE = FinishReason


# ---------------------------------------------------------------- actors and the deployed system


@dataclass
class Actors:
    deployer: str
    requester: str
    drafter: str
    verifier: str
    referees: list[str]
    outsider: str
    spare: list[str]

    @classmethod
    def of(cls, w3: Web3) -> Actors:
        a = w3.eth.accounts
        return cls(
            deployer=a[0], requester=a[1], drafter=a[2], verifier=a[3], referees=a[4:7], outsider=a[7], spare=a[8:16]
        )


@dataclass
class Env:
    """A deployed system with a registered drafter (α* = ALPHA_STAR), verifier and three referees."""

    w3: Web3
    system: System
    actors: Actors
    params: DeploymentParams = field(default_factory=lambda: DEFAULT_PARAMS)

    @property
    def registry(self):
        return self.system.registry

    @property
    def market(self):
        return self.system.market


def transact(w3: Web3, fn, sender: str, value: int = 0):
    """Send `fn` from `sender`; return the receipt (asserting success)."""
    receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value}))
    assert receipt.status == 1
    return receipt


def build_env(
    w3: Web3, params: DeploymentParams | None = None, register: bool = True, with_disputes: bool = True
) -> Env:
    actors = Actors.of(w3)
    system = deploy_system(w3, actors.deployer, params, with_disputes=with_disputes)
    env = Env(w3, system, actors, system.params)
    if register:
        reg = system.registry.functions
        transact(
            w3,
            reg.registerDrafter(DRAFT_MODEL, TARGET_MODEL, ALPHA_STAR, VOCAB),
            actors.drafter,
            env.params.min_drafter_stake,
        )
        transact(
            w3, reg.register(ROLE_VERIFIER, [TARGET_MODEL], [VOCAB]), actors.verifier, env.params.min_verifier_stake
        )
        for referee in actors.referees:
            transact(
                w3,
                reg.register(ROLE_REFEREE, [DRAFT_MODEL, TARGET_MODEL], [VOCAB, VOCAB]),
                referee,
                env.params.min_referee_stake,
            )
    return env


@pytest.fixture(scope="module")
def env(w3) -> Env:
    """One deployment per test module; every test that changes state also takes `chain` for isolation."""
    return build_env(w3)


# ---------------------------------------------------------------- reverts


def _error_table(*contracts) -> dict[bytes, tuple[str, list[str]]]:
    table = {}
    for contract in contracts:
        for item in contract.abi:
            if item["type"] == "error":
                types = [i["type"] for i in item["inputs"]]
                selector = function_signature_to_4byte_selector(f"{item['name']}({','.join(types)})")
                table[selector] = (item["name"], types)
    return table


def decode_error(data, *contracts) -> tuple[str, tuple]:
    raw = bytes.fromhex(data[2:] if isinstance(data, str) else data.hex())
    table = _error_table(*contracts)
    if raw[:4] not in table:
        raise AssertionError(f"unknown revert data {raw.hex()}")
    name, types = table[raw[:4]]
    values = abi_decode(types, raw[4:])
    return name, tuple(Web3.to_checksum_address(v) if t == "address" else v for t, v in zip(types, values))


def expect_revert(env: Env, fn, sender: str, error: str, args: tuple | None = None, value: int = 0, state=None):
    """Assert that sending `fn` from `sender` reverts with custom error `error` (and `args`, when given),
    and that `state()` (a snapshot of views, default: balances and job counters) is unchanged."""
    state = state or (lambda: default_state(env))
    before = state()
    with pytest.raises((ContractCustomError, ContractLogicError)) as info:
        fn.transact({"from": sender, "value": value})
    data = info.value.data
    extra = [env.system.disputes] if env.system.disputes else []
    name, decoded = decode_error(data, env.market, env.registry, *extra)
    assert name == error, f"expected {error}, got {name}{decoded}"
    if args is not None:
        assert decoded == tuple(args), f"{error}: expected args {args}, got {decoded}"
    assert state() == before, "state changed although the call reverted"
    return decoded


def default_state(env: Env) -> tuple:
    w3, a = env.w3, env.actors
    people = [a.requester, a.drafter, a.verifier, a.outsider]
    count = env.market.functions.jobCount().call()
    jobs = tuple(tuple(env.market.functions.getJob(i).call()) for i in range(1, count + 1))
    return (
        w3.eth.get_balance(env.market.address),
        w3.eth.get_balance(env.registry.address),
        tuple(env.market.functions.owed(p).call() for p in people),
        tuple(tuple(env.registry.functions.accountOf(p).call()) for p in people),
        count,
        jobs,
    )


def impersonate(w3: Web3, address: str, balance: int = 10 * ETHER) -> str:
    """Let tests send transactions as a contract (e.g. the market calling registry.lock)."""
    w3.provider.make_request("anvil_impersonateAccount", [address])
    w3.provider.make_request("anvil_setBalance", [address, hex(balance)])
    return address


def send_eth(w3: Web3, sender: str, to: str, value: int):
    """A plain ETH transfer (gas given explicitly, so a revert is mined rather than raised)."""
    tx = w3.eth.send_transaction({"from": sender, "to": to, "value": value, "gas": 100_000})
    return w3.eth.wait_for_transaction_receipt(tx)


def paid_gas(w3: Web3, receipt) -> int:
    return receipt.gasUsed * receipt.effectiveGasPrice


# ---------------------------------------------------------------- time


def advance(w3: Web3, seconds: int) -> None:
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])


def now(w3: Web3) -> int:
    return w3.eth.get_block("latest")["timestamp"]


# ---------------------------------------------------------------- jobs


def job_request(env: Env, **overrides) -> dict:
    req = dict(
        draftModel=DRAFT_MODEL,
        targetModel=TARGET_MODEL,
        drafter=env.actors.drafter,
        verifier=env.actors.verifier,
        gamma=4,
        temperature=WAD,
        topK=0,
        topP=WAD,
        maxTokens=32,
        eosToken=EOS,
        pricePerAcceptedToken=PRICE_ACCEPTED,
        pricePerPass=PRICE_PASS,
    )
    req.update(overrides)
    return req


def escrow_for(req: dict) -> int:
    return req["maxTokens"] * (req["pricePerAcceptedToken"] + req["pricePerPass"])


def submit_job(
    env: Env, prompt: bytes = b"\x00\x01\x00\x07", value: int | None = None, sender: str | None = None, **overrides
) -> int:
    req = job_request(env, **overrides)
    transact(
        env.w3,
        env.market.functions.submitJob(req, prompt),
        sender or env.actors.requester,
        escrow_for(req) if value is None else value,
    )
    return env.market.functions.jobCount().call()


@dataclass
class Draft:
    job_id: int
    cycle: int
    tokens: list[int]
    q: list[int]

    @property
    def root(self) -> bytes:
        return P.draft_root(self.job_id, self.cycle, self.tokens, self.q)


def make_draft(job_id: int, cycle: int, gamma: int, base_token: int = 1000) -> Draft:
    """γ proposals with realistic draft probabilities (never the EOS token)."""
    tokens = [base_token + 3701 * cycle + 1187 * i for i in range(gamma)]
    q = [WAD * (30 + 7 * ((cycle + i) % 9)) // 100 + 123456789 * (i + 1) for i in range(gamma)]
    return Draft(job_id, cycle, tokens, q)


def forcing_p(gamma: int, accept: int) -> list[int]:
    """p values that force exactly `accept` acceptances: p = WAD always accepts (u·q < WAD² as u < WAD),
    p = 0 always rejects (u·q ≥ 0)."""
    return [WAD] * accept + [0] * (gamma - accept)


def realistic_p(reveal: bytes, draft: Draft, accept: int, salt: int = SALT) -> list[int]:
    """Non-trivial p values (all non-zero, full-width) that still force exactly `accept` acceptances:
    p_i ≥ q_i accepts for sure; the first rejected position gets p = ⌊u·q/WAD⌋, which rejects."""
    root = draft.root
    p = []
    for i, q_i in enumerate(draft.q):
        if i < accept:
            p.append(min(WAD, q_i + WAD // 7 + 12345))
        elif i == accept:
            p.append(P.accept_uniform(reveal, root, i, salt) * q_i // WAD)
        else:
            p.append(WAD // 3 + 987654321 * i)
    assert P.count_accepted(reveal, root, draft.q, p, salt) == accept
    return p


class JobRunner:
    """Drives one accepted job cycle by cycle with a real verifier hash chain."""

    def __init__(self, env: Env, job_id: int, chain_length: int | None = None, seed: bytes = SEED, salt: int = SALT):
        self.env, self.job_id, self.seed, self.salt = env, job_id, seed, salt
        job = job_view(env, job_id)
        self.gamma = job["gamma"]
        self.length = chain_length or job["maxTokens"]

    def accept(self):
        head = P.hash_chain(self.seed, self.length)
        return transact(self.env.w3, self.env.market.functions.acceptJob(self.job_id, head), self.env.actors.verifier)

    def reveal(self, cycle: int) -> bytes:
        return P.chain_reveal(self.seed, self.length, cycle)

    def commit_fn(self, draft: Draft):
        """commitFirstDraft (with the runner's salt) for cycle 0, commitDraft after."""
        m = self.env.market.functions
        if draft.cycle == 0:
            return m.commitFirstDraft(self.job_id, draft.root, draft.tokens, draft.q, self.salt)
        return m.commitDraft(self.job_id, draft.cycle, draft.root, draft.tokens, draft.q)

    def commit(self, draft: Draft):
        return transact(self.env.w3, self.commit_fn(draft), self.env.actors.drafter)

    def verify_fn(self, draft: Draft, p: list[int], out_token: int, reveal: bytes | None = None):
        reveal = self.reveal(draft.cycle) if reveal is None else reveal
        return self.env.market.functions.submitVerification(
            self.job_id, draft.cycle, draft.tokens, draft.q, p, reveal, out_token
        )

    def verify(self, draft: Draft, p: list[int], out_token: int = 777):
        return transact(self.env.w3, self.verify_fn(draft, p, out_token), self.env.actors.verifier)

    def cycle(self, cycle: int, accept: int, out_token: int = 777, draft: Draft | None = None, realistic: bool = False):
        """Commit and verify one cycle with exactly `accept` acceptances; returns both receipts and the draft."""
        draft = draft or make_draft(self.job_id, cycle, self.gamma)
        p = realistic_p(self.reveal(cycle), draft, accept, self.salt) if realistic else forcing_p(self.gamma, accept)
        assert P.count_accepted(self.reveal(cycle), draft.root, draft.q, p, self.salt) == accept
        return self.commit(draft), self.verify(draft, p, out_token), draft


def job_view(env: Env, job_id: int) -> dict:
    """`market.getJob(job_id)` as a dict keyed by the JobView field names."""
    abi = next(f for f in env.market.abi if f.get("name") == "getJob")
    names = [c["name"] for c in abi["outputs"][0]["components"]]
    return dict(zip(names, env.market.functions.getJob(job_id).call()))


def events(contract, receipt, name: str) -> list:
    """The `name` events that `contract` itself emitted in `receipt`."""
    decoded = getattr(contract.events, name)().process_receipt(receipt, errors=DISCARD)
    return [e for e in decoded if e.address == contract.address]


def measure_cycle_gas(w3: Web3, gamma: int, cycles: int = 3, eligible: bool = True, env: Env | None = None) -> dict:
    """Gas (receipt gasUsed: 21000 base + calldata + execution) of commitDraft + submitVerification for a
    steady-state cycle (the last of `cycles`; all proposals but one accepted; full-width realistic q, p,
    token ids and reveal) of an α-eligible job."""
    env = env or build_env(w3)
    req = {} if eligible else {"temperature": 7 * WAD // 10}
    job_id = submit_job(env, gamma=gamma, maxTokens=(gamma + 1) * (cycles + 1), **req)
    runner = JobRunner(env, job_id)
    runner.accept()
    result = {}
    for c in range(cycles):
        commit, verify, _ = runner.cycle(c, accept=max(gamma - 1, 0), realistic=True)
        result = {
            "commitDraft": commit.gasUsed,
            "submitVerification": verify.gasUsed,
            "total": commit.gasUsed + verify.gasUsed,
        }
    return result
