"""Drafter, verifier and referee nodes (node/roles/) on a real anvil with the bundled models.

Nodes run in-process and are driven by calling `step()` in a loop (tests/test_cli.py covers them as real
subprocesses). The module deploys one system on its own anvil and registers a drafter (dev account 2), a
verifier (3) and three referees (4, 5, 6) for the bundled model ids; each test starts from that state (an
evm_snapshot, reverted after it) with fresh node stores. The requester (1) and a challenger (7) send their
transactions directly. Outputs are read from chain events alone (node/jobs/chaindata.py).
"""

from __future__ import annotations

import pathlib
import threading
import time
from dataclasses import dataclass, field

import pytest
import torch
from eth_hash.auto import keccak

from node import protocol
from node.chain.anvil import running_anvil
from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.enums import DisputeKind, DisputeStatus, FinishReason, JobStatus, Outcome, Role, Verdict
from node.chain.keys import dev_account
from node.chain.params import DEFAULT_PARAMS
from node.chain.rpc import connect
from node.decoding import SpeculativeDecoder
from node.decoding.scorer import default_tolerance_wad
from node.jobs import chaindata
from node.jobs.models import load_model, load_tokenizer, model_id, next_token_rows
from node.jobs.sessions import engine_job, prompt_tokens, verifier_seed
from node.requester.client import Requester
from node.roles import DrafterNode, RefereeNode, VerifierNode
from node.roles.schedule import DISPUTE
from node.roles.watchdog.audit import replay_target

# in-process nodes run whole jobs on a chain (models, many blocks): not in `make test-fast`
pytestmark = pytest.mark.node_jobs

ROOT = pathlib.Path(__file__).resolve().parents[1]
TARGET, DRAFT = ROOT / "models" / "target", ROOT / "models" / "draft"
WAD = protocol.WAD
ETHER = 10**18
STAKE = 5 * ETHER
VOCAB = 768  # the bundled pair's vocabulary (registered with both model ids)
PROMPT = "def __init__(self, "
GAMMA = 4


class Killed(BaseException):
    """Stands in for kill -9: escapes every `except Exception` of the node."""


@pytest.fixture(scope="module")
def rpc():
    torch.set_num_threads(1)  # the test machine is shared
    with running_anvil() as node:
        yield node.rpc_url


@pytest.fixture(scope="module")
def ids():
    return {"draft": model_id(DRAFT), "target": model_id(TARGET)}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(TARGET, DRAFT)


@dataclass
class World:
    w3: object
    system: object
    deployment: Deployment
    start: int
    ids: dict
    tmp: pathlib.Path
    accounts: list
    nodes: list = field(default_factory=list)

    @property
    def market(self):
        return self.system.market

    @property
    def dm(self):
        return self.system.disputes

    requester = property(lambda self: self.accounts[1])
    drafter_address = property(lambda self: self.accounts[2])
    verifier_address = property(lambda self: self.accounts[3])
    referee_addresses = property(lambda self: self.accounts[4:7])
    challenger = property(lambda self: self.accounts[7])

    def send(self, fn, sender, value=0):
        receipt = self.w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value}))
        assert receipt.status == 1
        return receipt

    def drafter(self, behavior="honest", store="drafter", account=2, w3=None):
        return DrafterNode(
            w3 or self.w3,
            self.deployment,
            dev_account(account),
            self.tmp / f"{store}.db",
            DRAFT,
            TARGET,
            behavior=behavior,
            device="cpu",
        )

    def verifier(self, behavior="honest", store="verifier", account=3, w3=None, **options):
        return VerifierNode(
            w3 or self.w3,
            self.deployment,
            dev_account(account),
            self.tmp / f"{store}.db",
            TARGET,
            DRAFT,
            behavior=behavior,
            device="cpu",
            **options,
        )

    def referees(self):
        return [
            RefereeNode(
                self.w3, self.deployment, dev_account(i), self.tmp / f"referee{i}.db", TARGET, DRAFT, device="cpu"
            )
            for i in (4, 5, 6)
        ]

    def submit(
        self,
        prompt=PROMPT,
        max_tokens=20,
        temperature=WAD,
        top_k=0,
        top_p=WAD,
        eos=0,
        drafter=None,
        draft_model=None,
        gamma=GAMMA,
    ) -> int:
        request = dict(
            draftModel=draft_model or self.ids["draft"],
            targetModel=self.ids["target"],
            drafter=drafter or self.drafter_address,
            verifier=self.verifier_address,
            gamma=gamma,
            temperature=temperature,
            topK=top_k,
            topP=top_p,
            maxTokens=max_tokens,
            eosToken=eos,
            pricePerAcceptedToken=10**12,
            pricePerPass=3 * 10**12,
        )
        escrow = max_tokens * (request["pricePerAcceptedToken"] + request["pricePerPass"])
        self.send(self.market.functions.submitJob(request, prompt.encode()), self.requester, escrow)
        return self.market.functions.jobCount().call()

    def status(self, job_id):
        return self.market.functions.jobStatus(job_id).call()

    def nonce(self, address):
        return self.w3.eth.get_transaction_count(address)

    def stake(self, address):
        return self.system.registry.functions.stakeOf(address).call()

    def open_dispute(self, job_id, cycle, index, kind) -> int:
        record = chaindata.record_preimage(self.system, job_id, cycle, from_block=self.start)
        proof = chaindata.leaf_proof(self.system, job_id, cycle, index, from_block=self.start)
        fn = self.dm.functions.openDispute(job_id, cycle, index, kind, record, proof)
        self.send(fn, self.challenger, self.system.params.dispute_bond)
        return self.dm.functions.disputeCount().call()

    def dispute(self, dispute_id):
        return chaindata.dispute_view(self.dm, dispute_id)

    def advance(self, seconds):
        self.w3.provider.make_request("evm_increaseTime", [seconds])
        self.w3.provider.make_request("evm_mine", [])


def check_fast_decoding(world):
    """The poller's own event decoding (node.chain.events.fast_decoder) gives what web3's process_log gives, for
    every log of the market and the dispute manager so far."""
    from eth_utils import event_abi_to_log_topic

    from node.chain.events import fast_decoder

    checked = set()
    for contract in (world.market, world.dm):
        entries = {event_abi_to_log_topic(e): e for e in contract.abi if e.get("type") == "event"}
        for log in world.w3.eth.get_logs({"fromBlock": world.start, "address": contract.address}):
            entry = entries[bytes(log["topics"][0])]
            fast = fast_decoder(entry)
            if fast is None:
                continue
            assert fast(log) == dict(contract.events[entry["name"]]().process_log(log)["args"]), entry["name"]
            checked.add(entry["name"])
    return checked


def drive(nodes, until, timeout=300.0, settle=True):
    """Step every node in turn until `until()` holds, then (`settle`) until the nodes are quiet: a round with
    nothing to do, and no transaction of theirs in flight (each one's log or receipt seen). Only then are the
    blocks behind a view the condition read published: anvil shows a mined block's state to eth_call a moment
    before its logs and receipts (tests/transcript_nodes.py `job_logged`), so a test that reads the logs of the
    transaction that made `until()` hold needs the settling. A round with nothing to do waits a little (anvil
    mines a sent transaction on its own time); `timeout` only bounds a hang."""
    deadline = time.monotonic() + timeout
    while True:  # (a step first: a condition may read what the nodes store at their first step)
        did = sum(node.step() for node in nodes)
        if until():
            break
        if not did:
            time.sleep(0.02)
        assert time.monotonic() < deadline, f"not done within {timeout:.0f}s"
    for _ in range(10 if settle else 0):
        if sum(node.step() for node in nodes) == 0:
            break
    while settle and any(node.txs._inflight for node in nodes):
        if sum(node.step() for node in nodes) == 0:
            time.sleep(0.02)  # a receipt is polled `receipt_grace_s` after its send, if no log came first
        assert time.monotonic() < deadline, f"a transaction still in flight after {timeout:.0f}s"


@pytest.fixture(scope="module")
def deployed(rpc, ids, tmp_path_factory):
    """One deployment with the drafter, the verifier and the three referees registered, for the whole module."""
    w3 = connect(rpc)
    start = w3.eth.block_number + 1
    system = deploy_system(w3, w3.eth.accounts[0])
    deployment = Deployment.of_system(w3, system, rpc, start)
    reg = system.registry.functions
    world = World(w3, system, deployment, start, ids, tmp_path_factory.mktemp("roles"), list(w3.eth.accounts))
    world.send(reg.registerDrafter(ids["draft"], ids["target"], WAD // 2, VOCAB), world.drafter_address, STAKE)
    world.send(reg.register(Role.Verifier, [ids["target"]], [VOCAB]), world.verifier_address, STAKE)
    for referee in world.referee_addresses:
        world.send(
            reg.register(Role.Referee, [ids["draft"], ids["target"]], [VOCAB, VOCAB]),
            referee,
            system.params.min_referee_stake,
        )
    return world


@pytest.fixture
def world(deployed, tmp_path):
    """The module's deployment as it was after the registrations (every test's chain changes are reverted), with
    fresh node stores: a test sees no job, dispute or block of another."""
    w3 = deployed.w3
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]
    yield World(w3, deployed.system, deployed.deployment, deployed.start, deployed.ids, tmp_path, deployed.accounts)
    assert w3.provider.make_request("evm_revert", [snapshot])["result"]


def reference(job_id, tokenizer, world, prompt=PROMPT, max_tokens=20, temperature=1.0, top_k=0, top_p=1.0, eos=0):
    """What SpeculativeDecoder.generate gives for the same job id and the verifier node's seed (draft replay on,
    as the verifier node runs it)."""
    target = load_model(TARGET, torch.device("cpu"), torch.float32)
    draft = load_model(DRAFT, torch.device("cpu"), torch.float32)
    decoder = SpeculativeDecoder(
        target, draft, gamma=GAMMA, temperature=temperature, top_k=top_k, top_p=top_p, verify_draft=True
    )
    ids = prompt_tokens(tokenizer, prompt.encode())
    salt = chaindata.job_salt(world.system, job_id, from_block=world.start)  # the drafter's, from chain
    return decoder.generate(
        ids,
        max_tokens,
        job_id=job_id,
        verifier_seed=verifier_seed(dev_account(3).key, job_id),
        eos_token_id=eos,
        salt=salt,
    )


def check_cycles_on_chain(world, job_id, stopped=False):
    """Every verified cycle's record preimage (from chain data) hashes to the stored record; returns the verified
    cycles (all of them, unless the job was `stopped` by a dispute with a draft still unverified)."""
    cycles = chaindata.cycles(world.system, job_id, from_block=world.start)
    if stopped:
        cycles = [c for c in cycles if c.verified]
    for c in cycles:
        assert c.verified
        assert world.market.functions.cycleRecordHash(job_id, c.cycle).call() == protocol.cycle_record_hash(
            *c.record_preimage()
        )
        assert protocol.count_accepted(c.reveal, c.draft_root, c.q, c.p, c.salt) == c.accepted
    return cycles


# ---------------------------------------------------------------- honest jobs


def test_two_interleaved_honest_jobs_equal_generate(world, tokenizer):
    drafter, verifier = world.drafter(), world.verifier()
    nonces = {a: world.nonce(a) for a in (world.drafter_address, world.verifier_address)}
    first = world.submit(max_tokens=20)
    second = world.submit(
        prompt="import os\n\nclass ", max_tokens=16, temperature=7 * WAD // 10, top_k=20, top_p=9 * WAD // 10
    )
    drive([drafter, verifier], lambda: world.status(first) == world.status(second) == JobStatus.Finished)

    expected = {
        first: reference(first, tokenizer, world, max_tokens=20),
        second: reference(
            second, tokenizer, world, prompt="import os\n\nclass ", max_tokens=16, temperature=0.7, top_k=20, top_p=0.9
        ),
    }
    for job_id, result in expected.items():
        assert chaindata.output_tokens(world.system, job_id, from_block=world.start) == result.tokens
        cycles = check_cycles_on_chain(world, job_id)
        assert [(c.tokens, c.q, c.p, c.accepted, c.out_token) for c in cycles] == [
            (r.proposals, r.q, r.p, r.accepted, r.out_token) for r in result.cycles
        ]
        # the nodes' transcripts agree with the chain
        for c in cycles:
            mine = drafter.store.cycle(job_id, "drafter", c.cycle)
            theirs = verifier.store.cycle(job_id, "verifier", c.cycle)
            assert (tuple(mine.proposals), tuple(mine.q), mine.accepted) == (c.tokens, c.q, c.accepted)
            assert (tuple(theirs.p), theirs.accepted, tuple(theirs.emitted_tokens)) == (c.p, c.accepted, c.output)
            assert len(mine.top_k["q_top"]) == GAMMA and len(theirs.top_k["p_top"]) == GAMMA + 1
    assert verifier.accept_mismatches == [] and verifier.draft_faults == []
    # the verifier guessed every draft ahead (the honest drafter's), and took those verifications: the chain's
    # records above equal the engine's all the same
    assert verifier.speculation["hits"] > 0 and verifier.speculation["misses"] == 0
    n_cycles = sum(len(r.cycles) for r in expected.values())
    # exactly one transaction per action: a commit per cycle; an accept per job and a verification per cycle
    assert world.nonce(world.drafter_address) - nonces[world.drafter_address] == n_cycles
    assert world.nonce(world.verifier_address) - nonces[world.verifier_address] == n_cycles + 2
    text = tokenizer.decode(chaindata.output_tokens(world.system, first, from_block=world.start))
    assert text  # the output decodes to text


def test_a_drafter_that_sees_its_turn_before_the_last_cycles_event_advances_its_session(world, tokenizer):
    """Under load a node can find its turn (a view, a recheck) before it has handled the event of the cycle before.
    It must then read that cycle's output and advance its session, not rebuild it with a prefill: a rebuilt session
    differs in the last digits, so its q (and, rarely, its draft) would not be the engine's (a load benchmark's
    concurrent jobs found such a job)."""

    drafter, verifier = world.drafter(), world.verifier()
    handled = drafter.on_market_CycleVerified

    def late(event):  # the event is handled, but its output is not there when the turn is taken
        handled(event)
        dj = drafter.jobs.get(int(event.args["jobId"]))
        if dj is not None:
            dj.outputs.pop(int(event.args["cycle"]), None)

    drafter.on_market_CycleVerified = late
    job_id = world.submit(max_tokens=20)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)
    expected = reference(job_id, tokenizer, world, max_tokens=20)
    cycles = check_cycles_on_chain(world, job_id)
    assert len(cycles) >= 3
    assert [(c.tokens, c.q) for c in cycles] == [(r.proposals, r.q) for r in expected.cycles]  # q to the last digit
    assert chaindata.output_tokens(world.system, job_id, from_block=world.start) == expected.tokens


def test_greedy_job_equals_the_targets_greedy_generate(world, tokenizer):
    drafter, verifier = world.drafter(), world.verifier()
    job_id = world.submit(max_tokens=24, temperature=0)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)
    prompt = prompt_tokens(tokenizer, PROMPT.encode())
    target = load_model(TARGET, torch.device("cpu"), torch.float32)
    with torch.inference_mode():
        greedy = target.generate(
            torch.tensor([prompt]), max_new_tokens=24, do_sample=False, eos_token_id=0, pad_token_id=0
        )[0, len(prompt) :].tolist()
    assert chaindata.output_tokens(world.system, job_id, from_block=world.start) == greedy
    check_cycles_on_chain(world, job_id)
    assert verifier.accept_mismatches == []


def test_nodes_refuse_jobs_for_other_models_and_prompts_that_do_not_fit(world, tokenizer):
    other = keccak(b"some other draft model")
    stranger = world.accounts[8]
    world.send(
        world.system.registry.functions.registerDrafter(other, world.ids["target"], WAD // 2, VOCAB), stranger, STAKE
    )
    verifier = world.verifier()
    foreign_drafter = world.drafter(store="stranger", account=8)  # holds the bundled draft, not `other`
    foreign = world.submit(drafter=stranger, draft_model=other)
    too_long = world.submit(prompt="x = 1\n" * 400, max_tokens=20)
    for _ in range(3):
        verifier.step()
        foreign_drafter.step()
    assert world.status(foreign) == world.status(too_long) == JobStatus.Open  # never accepted
    assert verifier.sent == [] and foreign_drafter.sent == []
    assert verifier.store.job(foreign, "verifier").status == "refused"
    assert "not mine" in verifier.store.job(foreign, "verifier").params["reason"]
    assert "does not fit" in verifier.store.job(too_long, "verifier").params["reason"]
    assert foreign_drafter.store.job(foreign, "drafter").status == "refused"


def test_nodes_run_in_their_own_threads_until_stopped(world, rpc):
    nodes = [world.drafter(w3=connect(rpc)), world.verifier(w3=connect(rpc))]
    stop = threading.Event()
    threads = [threading.Thread(target=node.run, args=(stop,), daemon=True) for node in nodes]
    for thread in threads:
        thread.start()
    try:
        job_id = world.submit(max_tokens=12)
        deadline = time.monotonic() + 120
        while world.status(job_id) != JobStatus.Finished:
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.1)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert len(chaindata.output_tokens(world.system, job_id, from_block=world.start)) in range(1, 13)


# ---------------------------------------------------------------- restart safety


def test_killed_nodes_restart_from_their_stores_without_sending_anything_twice(world):
    drafter, verifier = world.drafter(), world.verifier()
    nonces = {a: world.nonce(a) for a in (world.drafter_address, world.verifier_address)}
    job_id = world.submit(max_tokens=24)
    drive([drafter, verifier], lambda: chaindata.job_view(world.market, job_id)["cycle"] >= 2, settle=False)
    cycle = chaindata.job_view(world.market, job_id)["cycle"]

    # the drafter dies after deciding its draft (transcript saved), before the transaction leaves
    def killed(*args, **kwargs):
        raise Killed()

    drafter.sender.submit = killed
    with pytest.raises(Killed):
        drafter.step()
    decided = drafter.store.cycle(job_id, "drafter", cycle)
    assert decided.proposals is not None and world.status(job_id) == JobStatus.Running
    del drafter
    drafter = world.drafter()  # same store: it sends the draft it had decided, not a new one
    drive(
        [drafter],
        lambda: len(chaindata.cycles(world.system, job_id, from_block=world.start, with_p=False)) > cycle,
        settle=False,
    )
    committed = chaindata.cycles(world.system, job_id, from_block=world.start, with_p=False)[cycle]
    assert list(committed.tokens) == decided.proposals and list(committed.q) == decided.q

    # the verifier dies after signing and recording its verification, before broadcasting it
    verifier.sender._broadcast = killed
    with pytest.raises(Killed):
        verifier.step()
    assert verifier.store.sent_tx(f"job:{job_id}:cycle:{cycle}:verify") is not None
    del verifier
    verifier = world.verifier()  # its TxSender pushes the recorded transaction out at start
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)

    cycles = check_cycles_on_chain(world, job_id)
    assert sum(len(c.output) for c in cycles) == 24 or cycles[-1].output[-1] == 0
    assert world.nonce(world.drafter_address) - nonces[world.drafter_address] == len(cycles)
    assert world.nonce(world.verifier_address) - nonces[world.verifier_address] == len(cycles) + 1
    assert verifier.accept_mismatches == []


def test_drafter_claims_the_timeout_of_a_silent_verifier(world):
    drafter, verifier = world.drafter(), world.verifier()
    job_id = world.submit(max_tokens=12)
    drive([drafter, verifier], lambda: chaindata.job_view(world.market, job_id)["cycle"] >= 1, settle=False)
    drive([drafter], lambda: chaindata.job_view(world.market, job_id)["phase"] == 1)  # drafted; verifier now silent
    stake = world.stake(world.verifier_address)
    drafter.recheck_interval = 0  # look at the job on every step (deadlines are noticed by rechecks)
    world.advance(DEFAULT_PARAMS.commit_timeout + DEFAULT_PARAMS.verify_timeout + 5)
    # it claims at its next look (within 5 steps); the claim is mined on anvil's own time
    cycle = chaindata.job_view(world.market, job_id)["cycle"]
    claim = f"job:{job_id}:timeout:{cycle}:1"  # (phase 1: awaiting the verification)
    for _ in range(5):
        drafter.step()
    assert drafter.store.sent_tx(claim) is not None, "the drafter did not claim the timeout within 5 steps"
    drive([drafter], lambda: world.status(job_id) == JobStatus.Finished)  # (settled: the claim's log is readable)
    [finished] = world.market.events.JobFinished().get_logs(argument_filters={"jobId": job_id}, from_block=world.start)
    assert (finished["args"]["reason"], finished["args"]["party"]) == (
        FinishReason.VerifyTimeout,
        world.verifier_address,
    )
    assert world.stake(world.verifier_address) == stake - DEFAULT_PARAMS.timeout_slash


# ---------------------------------------------------------------- disputes


def _skip_appeal_period(world, dispute_ids, nodes):
    """Advance past the appeal period and have the nodes look at the disputes now (they would at their next
    periodic recheck, `recheck_interval` seconds later)."""
    world.advance(world.system.params.appeal_period + 1)
    for node in nodes:
        for d in dispute_ids:
            node.schedule.mark_dirty(DISPUTE, d)


def _provable_token_fault(world, drafter, job_id, cycles, c, index):
    """Whether a fresh replay of the draft model finds committed token x_i of cycle c outside the tolerance window
    of its public draft uniform (the rule a DraftReplay dispute applies, `protocol.check_proposal`)."""
    job = drafter.jobs[job_id].job
    context = list(job.prompt) + [t for x in cycles[:c] for t in x.output] + list(cycles[c].tokens[:index])
    row = next_token_rows(drafter.draft_model, context, job.sampling)[0]
    u = protocol.draft_uniform(job_id, c, index)
    tolerance = default_tolerance_wad(drafter.draft_model.dtype)
    return not protocol.check_proposal(row, cycles[c].tokens[index], cycles[c].q[index], u, tolerance).token_faithful


def resolve_all(world, dispute_ids, nodes):
    """Drives the nodes until every dispute's round is decided, lets the appeal period pass unappealed (the
    referee nodes then end each dispute), and returns the final views."""
    done = (DisputeStatus.Resolved, DisputeStatus.Appealable)
    drive(nodes, lambda: all(world.dispute(d)["status"] in done for d in dispute_ids))
    if any(world.dispute(d)["status"] == DisputeStatus.Appealable for d in dispute_ids):
        _skip_appeal_period(world, dispute_ids, nodes)
    drive(nodes, lambda: all(world.dispute(d)["status"] == DisputeStatus.Resolved for d in dispute_ids))
    return [world.dispute(d) for d in dispute_ids]


def test_biased_drafter_loses_the_draft_replay_dispute_its_verifier_opens(world):
    drafter, verifier = world.drafter(behavior="biased"), world.verifier(dispute_faults=True)
    referees = world.referees()
    stake = world.stake(world.drafter_address)
    job_id = world.submit(max_tokens=64)
    # the verifier's replay flags the first biased proposal and disputes it, and draws the referees at once (the
    # drafter holds its answer back here, so the draw is the verifier's own: an accused that waited for the seed
    # block's hash to age out would get a second draw otherwise)
    answer_later, drafter.work_dispute = drafter.work_dispute, lambda dispute_id: 0
    drive([drafter, verifier], lambda: world.dm.functions.disputeCount().call() == 1)
    drive([verifier], lambda: world.dispute(1)["drawn"] > 0)
    [drawn] = world.dm.events.RefereesDrawn().get_logs(from_block=world.start)
    assert world.w3.eth.get_transaction(drawn["transactionHash"])["from"] == world.verifier_address
    assert world.dispute(1)["status"] == DisputeStatus.AwaitingAnswer
    drafter.work_dispute = answer_later
    drafter.schedule.mark_dirty(DISPUTE, 1)
    # the job stops when the drafter loses: once the round's verdict can no longer be appealed
    decided = (DisputeStatus.Appealable, DisputeStatus.Resolved)
    drive([drafter, verifier, *referees], lambda: world.dispute(1)["status"] in decided)
    _skip_appeal_period(world, [1], [drafter, verifier, *referees])
    drive([drafter, verifier, *referees], lambda: world.status(job_id) == JobStatus.Finished)
    cycles = check_cycles_on_chain(world, job_id, stopped=True)
    # the positions it biased, as its own transcript records them; the verifier's replay flagged each one
    records = [
        (c.cycle, b)
        for c in cycles
        for b in (drafter.store.cycle(job_id, "drafter", c.cycle).top_k.get("biased") or [])
    ]
    biased = [(c, b["index"]) for c, b in records]
    # each one replaced the honest proposal by another token (how many positions are ambiguous, the draft's top
    # probability below the policy's threshold, is the tiny draft's and the run's: a CI run found all 84 of them)
    assert all(b["token"] != b["honest_token"] for _, b in records)
    assert biased, "the biased drafter found no ambiguous position to bias"
    flagged = {(c, f.index) for _, c, f in verifier.draft_faults if f.kind == "x"}
    # the replay flags exactly the biased tokens the rule proves: not one that a uniform within the tolerance of the
    # public one also draws (a CI run met one, at a CDF boundary)
    provable = {(c, i) for c, i in biased if _provable_token_fault(world, drafter, job_id, cycles, c, i)}
    assert provable and provable == set(biased) & flagged
    binding = [(c, i) for c, i in biased if i <= cycles[c].accepted]
    assert binding
    cycle, index = binding[0]

    [opened] = world.dm.events.DisputeOpened().get_logs(from_block=world.start)  # the first one decided it
    dispute_id = opened["args"]["disputeId"]
    assert opened["args"]["challenger"] == world.verifier_address
    assert (opened["args"]["cycle"], opened["args"]["index"], opened["args"]["kind"]) == (
        cycle,
        index,
        DisputeKind.DraftReplay,
    )
    [d] = resolve_all(world, [dispute_id], [drafter, verifier, *referees])
    assert (d["outcome"], d["cheatedVotes"], d["faithfulVotes"]) == (Outcome.AccusedLost, 3, 0)
    [finished] = world.market.events.JobFinished().get_logs(argument_filters={"jobId": job_id}, from_block=world.start)
    [resolved] = world.dm.events.DisputeResolved().get_logs(
        argument_filters={"disputeId": dispute_id}, from_block=world.start
    )
    # the lost dispute stops the job mid-job, unless the job's last cycle came first (how far the nodes got while
    # the dispute ran depends on the machine's speed: a CI run finished all 64 tokens before the verdict)
    stopped_by_it = finished["blockNumber"] >= resolved["blockNumber"]
    assert finished["args"]["reason"] == (FinishReason.DisputeLost if stopped_by_it else FinishReason.Completed)
    assert world.stake(world.drafter_address) == stake - world.system.params.accused_slash
    [answered] = world.dm.events.Answered().get_logs(argument_filters={"disputeId": dispute_id}, from_block=world.start)
    assert answered["args"]["claimedProb"] == cycles[cycle].q[index]  # the drafter answered by itself
    assert all(r.judgements[dispute_id].cheated for r in referees)
    assert "inverse-CDF" in referees[0].judgements[dispute_id].reason
    assert chaindata.job_view(world.market, job_id)["drafterForfeited"]
    assert verifier.speculation["misses"] >= 1  # a biased draft is not the one an honest drafter commits
    assert {
        "JobAccepted",
        "DraftCommitted",
        "CycleVerified",
        "JobFinished",
        "DisputeOpened",
        "DisputeResolved",
        "DisputeClosed",
        "VoteCommitted",
        "VoteRevealed",
    } <= check_fast_decoding(world)


def test_nodes_compute_in_fp32_where_the_engine_would_default_to_bf16(monkeypatch):
    """Committed q and p are judged against fp32 replays; a bf16 node would be out of tolerance
    (scripts/precision_gap.py). Runs without a GPU: the device resolution is what a CUDA machine answers."""
    from node.decoding import loading
    from node.jobs.models import node_device

    cuda = torch.device("cuda")
    monkeypatch.setattr(loading, "resolve_device", lambda device=None: cuda)
    assert loading.default_dtype(cuda) == torch.bfloat16  # the engine's own GPU default
    assert node_device("cuda") == (cuda, torch.float32)
    assert node_device(None) == (cuda, torch.float32)


def test_a_wrong_guess_of_the_verifier_is_undone_exactly(tokenizer):
    """The verifier's speculation (VerifierNode.background) verifies a guessed draft, and on a different draft puts
    the session back (`_snapshot` / `_restore`): what it then computes is bit for bit what a session that never
    guessed computes, for the honest session (cache cropping) and any other (a copy)."""
    from types import SimpleNamespace

    import numpy as np

    from node.decoding.messages import DecodingJob, Draft
    from node.decoding.proposer import DraftSession
    from node.roles import behaviors

    target = load_model(TARGET, torch.device("cpu"), torch.float32)
    draft = load_model(DRAFT, torch.device("cpu"), torch.float32)
    node = SimpleNamespace(target_model=target, draft_model=draft)
    job = DecodingJob(job_id=3, prompt=tuple(prompt_tokens(tokenizer, PROMPT.encode())), max_new_tokens=40, gamma=GAMMA)
    seed = bytes(range(32))
    for behavior, kind in (("honest", "lengths"), ("retaliate", "copy")):
        plain = behaviors.verify_session(behavior, target, job, seed, draft_model=draft, salt=0)
        guessing = behaviors.verify_session(behavior, target, job, seed, draft_model=draft, salt=0)
        drafter = DraftSession(draft, job)
        for c in range(6):
            proposed = drafter.propose(c)
            actual = Draft(job_id=3, cycle=c, tokens=tuple(proposed.tokens), q=tuple(proposed.q), q_rows=None)
            wrong = Draft(
                job_id=3,
                cycle=c,
                tokens=tuple((t + 1 + c) % 700 for t in proposed.tokens),
                q=tuple(proposed.q),
                q_rows=None,
            )
            backup = VerifierNode._snapshot(node, guessing)
            assert backup[0] == kind
            guessing.verify(c, wrong)
            guessing = VerifierNode._restore(node, guessing, backup)
            got, want = guessing.verify(c, actual), plain.verify(c, actual)
            assert (got.p, got.accepted, got.out_token, got.emitted, got.reveal) == (
                want.p,
                want.accepted,
                want.out_token,
                want.emitted,
                want.reveal,
            )
            assert np.array_equal(got.p_rows, want.p_rows)
            for session in (plain, guessing):
                session.advance(want.emitted)
            drafter.advance(want.emitted)
            if want.done:
                break


def test_disputes_on_honest_positions_lose(world):
    drafter, verifier = world.drafter(), world.verifier()
    job_id = world.submit(max_tokens=16)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)
    stakes = {a: world.stake(a) for a in (world.drafter_address, world.verifier_address)}
    # both nodes lose their stores: the new ones (same keys) find their job and the disputes from chain data
    # alone and answer with replayed values
    del drafter, verifier
    drafter, verifier = world.drafter(store="drafter-new"), world.verifier(store="verifier-new")
    referees = world.referees()
    # three disputes at once: a proposal's x/q, a proposal's p, and the cycle's outToken
    dispute_ids = [
        world.open_dispute(job_id, 0, 0, DisputeKind.DraftReplay),
        world.open_dispute(job_id, 0, 0, DisputeKind.TargetReplay),
        world.open_dispute(job_id, 0, GAMMA, DisputeKind.TargetReplay),
    ]
    # nobody draws until the opening blocks' hashes have left the EVM's 256-block window: each accused node has
    # its draw rescheduled first, then answers (and its answer draws)
    world.w3.provider.make_request("anvil_mine", [hex(300)])
    for d in resolve_all(world, dispute_ids, [drafter, verifier, *referees]):
        assert (d["outcome"], d["faithfulVotes"], d["cheatedVotes"]) == (Outcome.ChallengerLost, 3, 0)
    for d in dispute_ids:
        [rescheduled] = world.dm.events.DrawRescheduled().get_logs(
            argument_filters={"disputeId": d}, from_block=world.start
        )
        [drawn] = world.dm.events.RefereesDrawn().get_logs(argument_filters={"disputeId": d}, from_block=world.start)
        assert drawn["blockNumber"] > rescheduled["args"]["drawBlock"] == rescheduled["blockNumber"]
        assert world.w3.eth.get_transaction(rescheduled["transactionHash"])["from"] == world.dispute(d)["accused"]
    assert {a: world.stake(a) for a in stakes} == stakes
    bond, reward = world.system.params.dispute_bond, world.dm.functions.refereeReward().call()
    assert world.dm.functions.credits(world.drafter_address).call() == bond - reward
    assert world.dm.functions.credits(world.verifier_address).call() == 2 * (bond - reward)
    assert all(not r.judgements[d].cheated for r in referees for d in dispute_ids)
    cycle0 = chaindata.cycles(world.system, job_id, from_block=world.start)[0]
    answers = [
        world.dm.events.Answered().get_logs(argument_filters={"disputeId": d}, from_block=world.start)[0]["args"]
        for d in dispute_ids
    ]
    assert abs(answers[0]["claimedProb"] - cycle0.q[0]) <= 10**14  # replayed, so equal up to the last digits
    assert answers[1]["claimedProb"] == cycle0.p[0]  # the posted p (from calldata)
    assert answers[2]["claimedProb"] > 0 and len(answers[2]["topTokens"]) == 8
    # every referee kept its verdict and salt in its store, and revealed exactly what it committed
    for referee in referees:
        for d in dispute_ids:
            saved = referee.store.dispute(d, "referee")
            assert saved.status == "done" and saved.params["verdict"] == Verdict.AccusedFaithful


def test_retaliating_verifier_loses_a_target_replay_dispute(world):
    drafter, verifier = world.drafter(), world.verifier(behavior="retaliate")
    # 48 tokens: ~20 shaded binding positions, so that at least one shading flips an accept to a reject whatever
    # the drafter's random salt (with 20 tokens none did in ~3 % of runs)
    job_id = world.submit(max_tokens=48)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)
    cycles = check_cycles_on_chain(world, job_id)
    tolerance = 10**14
    shaded, beyond_tolerance, lost = [], [], 0
    for c in cycles:
        true_p = verifier.store.cycle(job_id, "verifier", c.cycle).top_k["true_p"]
        for i in range(c.accepted + 1 if c.accepted < GAMMA else GAMMA):
            if true_p[i] - c.p[i] > 10 * tolerance:
                shaded.append((c.cycle, i))
            if abs(true_p[i] - c.p[i]) > tolerance:
                beyond_tolerance.append((c.cycle, i))
        # the shading only ever lowers acceptance; the contract applied the rule to the shaded p
        honest = protocol.count_accepted(c.reveal, c.draft_root, c.q, true_p, c.salt)
        assert honest >= c.accepted
        lost += honest - c.accepted
    assert shaded  # e.g. position 0 of cycle 0: shaded, and position 0 always binds
    assert lost > 0  # drafts the rule would have accepted under the true p were rejected
    cycle, index = shaded[0]
    # a watchdog's audit (the referees' rule, from chain data alone) finds exactly the binding positions shaded
    # beyond the tolerance (and no outToken: the retaliating verifier samples those faithfully)
    audit = replay_target(Requester(world.w3, world.deployment), job_id, TARGET, DRAFT)
    assert [(f.cycle, f.index) for f in audit] == beyond_tolerance and set(shaded) <= set(beyond_tolerance)
    assert all(f.claimed == cycles[f.cycle].p[f.index] and "target model gives" in f.reason for f in audit)

    stake = world.stake(world.verifier_address)
    referees = world.referees()
    dispute_id = world.open_dispute(job_id, cycle, index, DisputeKind.TargetReplay)

    # every referee commits; then one dies before revealing and comes back on its store (verdict and salt in it)
    def committed():
        return all(chaindata.ballot_view(world.dm, dispute_id, r.address)["commitment"] != bytes(32) for r in referees)

    drive([drafter, verifier, *referees], committed, settle=False)
    assert chaindata.ballot_view(world.dm, dispute_id, referees[0].address)["verdict"] == 0
    referees[0] = RefereeNode(
        world.w3, world.deployment, dev_account(4), world.tmp / "referee4.db", TARGET, DRAFT, device="cpu"
    )
    [d] = resolve_all(world, [dispute_id], [drafter, verifier, *referees])
    assert referees[0].sent[0] == f"dispute:{dispute_id}:reveal"  # it revealed what it had committed
    assert chaindata.ballot_view(world.dm, dispute_id, referees[0].address)["verdict"] == Verdict.AccusedCheated
    assert (d["outcome"], d["cheatedVotes"]) == (Outcome.AccusedLost, 3)
    assert world.stake(world.verifier_address) == stake - world.system.params.accused_slash
    assert chaindata.job_view(world.market, job_id)["verifierForfeited"]
    assert all(world.stake(r.address) == world.system.params.min_referee_stake for r in referees)  # none penalized
    assert "target model gives" in referees[1].judgements[dispute_id].reason


def test_a_draft_with_a_token_outside_the_vocabulary_is_verified_and_disputable(world):
    verifier, referees = world.verifier(), world.referees()
    job_id = world.submit(max_tokens=12)
    drive([verifier], lambda: world.status(job_id) == JobStatus.Running)
    tokens, q = [100_000, 5, 6, 7], [WAD // 2] * GAMMA  # a drafter (no node) commits garbage: any uint32 goes
    world.send(
        world.market.functions.commitFirstDraft(job_id, protocol.draft_root(job_id, 0, tokens, q), tokens, q, 77),
        world.drafter_address,
    )
    drive([verifier], lambda: chaindata.job_view(world.market, job_id)["cycle"] == 1)  # no timeout for the verifier
    [c0] = check_cycles_on_chain(world, job_id)
    assert (c0.accepted, c0.p) == (0, (0, 0, 0, 0)) and c0.output == (c0.out_token,) and c0.out_token < 768
    draft_dispute = world.open_dispute(job_id, 0, 0, DisputeKind.DraftReplay)
    target_dispute = world.open_dispute(job_id, 0, 0, DisputeKind.TargetReplay)
    world.send(world.dm.functions.answer(draft_dispute, q[0], [5], [WAD // 2]), world.drafter_address)
    drafter_dispute, verifier_dispute = resolve_all(world, [draft_dispute, target_dispute], [verifier, *referees])
    assert drafter_dispute["outcome"] == Outcome.AccusedLost  # q_0 claims mass for a token that has none
    assert verifier_dispute["outcome"] == Outcome.ChallengerLost  # p_0 = 0 is the truth


def test_an_honest_verifier_posts_p_0_at_an_out_of_range_proposal_and_keeps_its_deadline(world):
    """Issue 10, attack 5 from the verifier's side (docs/protocol.md §4): proposal 2 is outside the registered
    vocabulary (768). The honest verifier node runs its target over the in-range prefix only, posts the true p
    before it and p = 0 from it on, and verifies within its deadline; the contract caps the accept count there,
    so nothing out of range is emitted, and the job goes on."""
    verifier = world.verifier()
    job_id = world.submit(max_tokens=12)
    drive([verifier], lambda: world.status(job_id) == JobStatus.Running)
    assert chaindata.job_view(world.market, job_id)["vocabSize"] == VOCAB
    tokens, q = [5, 6, 2**32 - 1, 7], [WAD // 2] * GAMMA
    world.send(
        world.market.functions.commitFirstDraft(job_id, protocol.draft_root(job_id, 0, tokens, q), tokens, q, 2**63),
        world.drafter_address,
    )
    drive([verifier], lambda: chaindata.job_view(world.market, job_id)["cycle"] == 1)
    view = chaindata.job_view(world.market, job_id)
    assert view["status"] == JobStatus.Running and view["salt"] == 2**63  # verified in time, the job goes on
    [c0] = check_cycles_on_chain(world, job_id)
    assert c0.p[2:] == (0, 0)  # the truth: no mass outside the vocabulary (and binds nothing after it)
    assert c0.accepted <= 2 and all(t < VOCAB for t in c0.output)
    assert verifier.accept_mismatches == []


# ---------------------------------------------------------------- chain data readers


def test_chaindata_readers_rebuild_a_job_from_chain_data_alone(world, tokenizer):
    drafter, verifier = world.drafter(), world.verifier()
    job_id = world.submit(max_tokens=12, temperature=9 * WAD // 10, top_k=50)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)
    record = chaindata.job_request(world.system, job_id, from_block=world.start)
    assert (record.requester, record.prompt, record.gamma, record.max_tokens) == (
        world.requester,
        PROMPT.encode(),
        GAMMA,
        12,
    )
    job = engine_job(job_id, record.request, record.prompt, tokenizer)
    assert (job.sampling.temperature, job.sampling.top_k, job.eos_token_id) == (0.9, 50, 0)
    cycles = check_cycles_on_chain(world, job_id)
    for c in cycles:
        for index in range(GAMMA):
            token, q, proof = chaindata.leaf_proof(world.system, job_id, c.cycle, index, from_block=world.start)
            assert (token, q) == (c.tokens[index], c.q[index])
            assert protocol.verify_proof(proof, c.draft_root, protocol.leaf(job_id, c.cycle, index, token, q))
        assert chaindata.leaf_proof(world.system, job_id, c.cycle, GAMMA, from_block=world.start) == (0, 0, [])
    # the legacy (w3, market, ...) calling form reads the same
    assert (
        chaindata.record_preimage(world.w3, world.market, job_id, 0, from_block=world.start)
        == cycles[0].record_preimage()
    )
    with pytest.raises(chaindata.ChainDataError):
        chaindata.job_request(world.system, 999, from_block=world.start)
