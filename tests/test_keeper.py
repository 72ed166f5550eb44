"""The keeper (node/probes/keeper.py) with in-process drafter and verifier nodes on anvil, tiny pair: probes are
opened when due, started with the shipped corpus prompt the chain drew, served by the nodes like any job and
finalized, and only their cycles enter the drafter's α window; a regular job publishes AlphaObserved and leaves the
window alone; a probe sent back by a verifier that never accepted it is drawn again and served by another one; a
restarted keeper sends nothing twice (docs/protocol.md "Soundness (v1.2)", docs/node.md "Keeper")."""

from __future__ import annotations

import pytest
import torch

from node import protocol
from node.chain.anvil import running_anvil
from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.enums import FinishReason, JobStatus, Role
from node.chain.keys import dev_account
from node.chain.params import DEFAULT_PARAMS, PROBE_TREASURY
from node.chain.rpc import connect
from node.jobs.models import model_id
from node.probes.corpus import load_corpus
from node.probes.keeper import KeeperNode
from node.roles import DrafterNode, VerifierNode
from tests.test_roles import DRAFT, TARGET, VOCAB, drive

pytestmark = pytest.mark.node_jobs

WAD = protocol.WAD
ETHER = 10**18
# a probe interval longer than the challenge window: the next probe is not due yet once the first is finalized
PARAMS = DEFAULT_PARAMS.with_(
    treasury=PROBE_TREASURY, probe_tokens=16, probe_interval=2 * DEFAULT_PARAMS.challenge_window
)
DRAFTER, VERIFIERS, REQUESTER, KEEPER = 2, (3, 4), 1, 8
# the drafter declines regular jobs below this price per accepted token; a probe pays less (probe_price, the floor)
# and is served all the same (a declined probe would enter its window at α = 0)
MIN_PRICE = 2 * PARAMS.probe_price


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    torch.set_num_threads(1)
    with running_anvil() as node:
        w3 = connect(node.rpc_url)
        start = w3.eth.block_number + 1
        corpus = load_corpus(TARGET)
        draft_id = model_id(DRAFT)
        system = deploy_system(w3, w3.eth.accounts[0], PARAMS, corpora={corpus.target_model: corpus.entry()})
        deployment = Deployment.of_system(w3, system, node.rpc_url, start)
        reg = system.registry.functions
        send(w3, reg.registerDrafter(draft_id, corpus.target_model, WAD // 2, VOCAB), _addr(DRAFTER), 5 * ETHER)
        for i, stake in zip(VERIFIERS, (2 * ETHER, 3 * ETHER)):
            send(w3, reg.register(Role.Verifier, [corpus.target_model], [VOCAB]), _addr(i), stake)
        w3.eth.wait_for_transaction_receipt(
            w3.eth.send_transaction({"from": w3.eth.accounts[0], "to": system.probes.address, "value": ETHER})
        )
        yield {"w3": w3, "system": system, "deployment": deployment, "corpus": corpus, "draft_id": draft_id}


@pytest.fixture
def world(base, tmp_path):
    w3 = base["w3"]
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]
    yield {**base, "tmp": tmp_path}
    assert w3.provider.make_request("evm_revert", [snapshot])["result"]


def _addr(i):
    return dev_account(i).address


def send(w3, fn, sender, value=0):
    receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value}))
    assert receipt.status == 1
    return receipt


def advance(w3, seconds):
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])


def keeper(world, store="keeper"):
    """The keeper (its collect / withdrawTips at every step: collect_interval_s 0)."""
    path = world["tmp"] / f"{store}.db"
    return KeeperNode(world["w3"], world["deployment"], dev_account(KEEPER), path, TARGET, collect_interval_s=0)


def parties(world, verifiers=VERIFIERS):
    w3, deployment, tmp = world["w3"], world["deployment"], world["tmp"]
    drafter = DrafterNode(
        w3, deployment, dev_account(DRAFTER), tmp / "drafter.db", DRAFT, TARGET, device="cpu", min_price_wei=MIN_PRICE
    )
    return [drafter] + [
        VerifierNode(w3, deployment, dev_account(i), tmp / f"verifier{i}.db", TARGET, DRAFT, device="cpu")
        for i in verifiers
    ]


def logs(world, contract, name):
    contract = world["system"].probes if contract == "probes" else world["system"].market
    return contract.events[name]().get_logs(from_block=world["deployment"].start_block)


def events(world, contract, name):
    return [e.args for e in logs(world, contract, name)]


def finalized_by(world, name):
    """The job whose finalize emitted each `name` event of the market (AlphaCyclesRecorded names no job)."""
    jobs = {log.transactionHash: log.args.jobId for log in logs(world, "market", "JobFinalized")}
    return [jobs.get(log.transactionHash) for log in logs(world, "market", name)]


def probe_status(world, probe_id):
    return world["system"].probes.functions.getProbe(probe_id).call()[2]


def window(world):
    return world["system"].market.functions.alphaWindowOf(_addr(DRAFTER)).call()


def test_the_keeper_runs_a_probe_that_alone_enters_the_window(world):
    w3, market, probes, corpus = world["w3"], world["system"].market, world["system"].probes, world["corpus"]
    k = keeper(world)
    nodes = [k, *parties(world)]
    # opened when due (at once: never probed), started from the next block with the drawn prompt, served
    drive(nodes, lambda: any(e.probeId == 1 for e in events(world, "probes", "ProbeStarted")))
    (started,) = events(world, "probes", "ProbeStarted")
    (opened,) = events(world, "probes", "ProbeOpened")
    assert opened.keeper == k.address and opened.drafter == _addr(DRAFTER)
    job_id = started.jobId
    submitted = next(e for e in events(world, "market", "JobSubmitted") if e.jobId == job_id)
    assert bytes(submitted.prompt) == corpus.prompts[started.promptIndex]
    assert submitted.request["maxTokens"] == PARAMS.probe_tokens and submitted.request["drafter"] == _addr(DRAFTER)
    drive(nodes, lambda: market.functions.jobStatus(job_id).call() == JobStatus.Finished)
    assert window(world)[1] == 0  # a probe's cycles enter at finalize
    # a regular job at the reference settings and the floor, served by the same nodes: observed, never windowed
    request = (
        world["draft_id"],
        corpus.target_model,
        _addr(DRAFTER),
        _addr(VERIFIERS[0]),
        4,
        WAD,
        0,
        WAD,
        8,
        corpus.eos_token,
        MIN_PRICE,
        PARAMS.alpha_price_floor,
    )
    escrow = 8 * (MIN_PRICE + PARAMS.alpha_price_floor)
    send(w3, market.functions.submitJob(request, b"Tell me about the moon."), _addr(REQUESTER), escrow)
    regular = market.functions.jobCount().call()
    drive(nodes, lambda: market.functions.jobStatus(regular).call() == JobStatus.Finished)
    advance(w3, PARAMS.challenge_window + k.grace_s + 2)
    drive(nodes, lambda: all(market.functions.jobStatus(j).call() == JobStatus.Finalized for j in (job_id, regular)))
    recorded = events(world, "market", "AlphaCyclesRecorded")
    observed = events(world, "market", "AlphaObserved")
    assert finalized_by(world, "AlphaCyclesRecorded") == [job_id] and [e.jobId for e in observed] == [regular]
    assert window(world)[1] == recorded[0].cycles > 0
    assert market.functions.alphaObservedOf(_addr(DRAFTER)).call()[0] == observed[0].cycles > 0
    # housekeeping withdrew the keeper's tip and pulled the treasury's market balance (the probe's refund, the α
    # fees) into the scheduler
    treasury_owed = market.functions.owed(probes.address)
    drive(nodes, lambda: probes.functions.tips(k.address).call() == 0 and treasury_owed.call() == 0)
    assert [(e.account, e.amount) for e in events(world, "probes", "TipWithdrawn")] == [(k.address, PARAMS.keeper_tip)]
    assert any(e.account == probes.address for e in events(world, "market", "Withdrawn"))
    # a second probe is due only after the interval; a restarted keeper sends nothing before that, then opens it
    k.close()
    again = keeper(world)
    nodes[0] = again
    for _ in range(5):
        for node in nodes:
            node.step()
    assert again.sent == [] and probes.functions.probeCount().call() == 1
    due = probes.functions.nextDueOf(_addr(DRAFTER)).call()
    advance(w3, PARAMS.probe_interval)
    drive(nodes, lambda: probes.functions.probeCount().call() == 2)
    assert [key for key in again.sent if key.startswith("probe:open:")] == [f"probe:open:{_addr(DRAFTER)}:1:{due}"]


def test_a_probe_its_verifier_never_accepts_is_drawn_again_and_served_by_another(world):
    """The selective abort at its earliest: the drawn verifier lets the probe's accept deadline pass. The timeout is
    claimed (by the drafter or the keeper), the probe goes back to Seeding with that verifier excluded, and the
    keeper starts it again from a fresh seed; the other verifier serves it."""
    w3, market = world["w3"], world["system"].market
    k = keeper(world)
    drive([k], lambda: any(e.probeId == 1 for e in events(world, "probes", "ProbeStarted")))
    (started,) = events(world, "probes", "ProbeStarted")
    silent = started.verifier
    other = [i for i in VERIFIERS if _addr(i) != silent]
    nodes = [k, *parties(world, verifiers=other)]
    advance(w3, PARAMS.accept_timeout + k.grace_s + 2)
    drive(nodes, lambda: len(events(world, "probes", "ProbeStarted")) == 2)
    (redrawn,) = events(world, "probes", "ProbeRedrawn")
    assert redrawn.abortedVerifier == silent
    finished = [e for e in events(world, "market", "JobFinished") if e.jobId == started.jobId]
    assert finished[0].reason == FinishReason.AcceptTimeout
    second = events(world, "probes", "ProbeStarted")[1]
    assert second.probeId == 1 and second.verifier == _addr(other[0]) and second.jobId != started.jobId
    drive(nodes, lambda: market.functions.jobStatus(second.jobId).call() == JobStatus.Finished)
    assert probe_status(world, 1) == 2 and window(world)[1] == 0  # Running (ended in the market), not yet final
    receipt_logs = market.events.JobFinished().get_logs(from_block=world["deployment"].start_block)
    assert receipt_logs[-1].args.reason == FinishReason.Completed
