"""Transcript-mode party nodes act on TranscriptSettlement's events as they are mined (docs/node.md "Transcript link",
what a transcript node watches): real anvil, the bundled models, an honest drafter node and a `signwrong` verifier
node in-process (driven by `step()`, their link over a real WebSocket on loopback), two jobs at once, no clock moved
until the claims.

The `signwrong` verifier signs a wrong Verification, answers the drafter's force on chain by the rule and goes
silent: the drafter node's poller delivers ForceAnsweredVerification and it goes on from the attested state (drafts
the next cycle on it, forces again) while the first force's deadline is minutes away. Every event is then handed to
it again (at-least-once delivery after a crash replays them; each job's events are the other job's irrelevant
ones, its own answer a stale one by then): it sends nothing and its ledgers do not move."""

from __future__ import annotations

import time

import pytest
import torch

from node.chain.events import EventPoller
from node.chain.keys import dev_account
from node.cli_transcript import start_link
from node.link.job import Ledger
from node.roles.drafter.node import DrafterNode
from node.roles.transcript_jobs import RECHECK_S, force_of, spec_of
from node.roles.verifier.node import VerifierNode
from node.store import NodeStore
from tests.test_roles import DRAFT, TARGET
from tests.transcript_nodes import job_logs, party_world, submit_party_job

# in-process nodes run whole jobs on a chain (models, many blocks): not in `make test-fast`
pytestmark = pytest.mark.node_jobs

DRAFTER, VERIFIER = 2, 3
TOKENS = 64  # ~16 cycles: the signwrong verifier meets a cycle the rule cuts short early
PROMPTS = ("def fibonacci(n):\n", "import numpy as np\n")


def run(nodes, until, what: str, timeout: float = 240.0) -> None:
    """Step the nodes until `until()` holds (their links run in threads, so this waits on the wall clock)."""
    deadline = time.monotonic() + timeout
    while not until():
        if sum(node.step() for node in nodes) == 0:
            time.sleep(0.02)
        assert time.monotonic() < deadline, f"timed out waiting for {what}"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from node.jobs.models import model_id

    torch.set_num_threads(1)  # the test machine is shared
    ids = {"draft": model_id(DRAFT), "target": model_id(TARGET)}
    with party_world(tmp_path_factory.mktemp("transcript-events"), ids, [DRAFTER], [VERIFIER]) as world:
        yield world


def _drafter_txs(world, node, since: int) -> list[str]:
    """The names of the drafter's calls to TranscriptSettlement in the blocks after `since`."""
    ts = world.system.transcript
    return [
        ts.decode_function_input(tx["input"])[0].fn_name
        for b in range(since + 1, world.w3.eth.block_number + 1)
        for tx in world.w3.eth.get_block(b, full_transactions=True).transactions
        if tx["from"] == node.address and tx["to"] == ts.address
    ]


def test_the_drafter_node_goes_on_from_an_on_chain_answer_as_it_is_mined_and_no_replayed_event_moves_it(world):
    w3, system = world.w3, world.system
    drafter = DrafterNode(
        w3, world.deployment, dev_account(DRAFTER), world.tmp / "d.db", DRAFT, TARGET, device="cpu", link_silence_s=3,
        recheck_interval=1.0,
    )  # fmt: skip
    verifier = VerifierNode(
        w3, world.deployment, dev_account(VERIFIER), world.tmp / "v.db", TARGET, DRAFT, behavior="signwrong",
        device="cpu",
    )  # fmt: skip
    verifier.link_silence_s = 3
    nodes = [drafter, verifier]
    try:
        url = start_link(verifier, ("127.0.0.1", 0))
        run(nodes, lambda: system.registry.functions.endpointOf(verifier.address).call() == url, "the endpoint")
        jobs = [
            submit_party_job(world, drafter.address, verifier.address, prompt, TOKENS, transcript=True)
            for prompt in PROMPTS
        ]
        answered, moved = system.transcript.events.ForceAnsweredVerification(), system.transcript.events.ForceMoved()
        served = verifier.link_server.jobs
        run(nodes, lambda: all(j in served for j in jobs), "both jobs on the verifier's link")
        # the verifier node's loop (which answers forces) waits until the drafter has looked at each of its pending
        # forces and left it to the force's deadline (one block mined as a chain with a block time would, no time
        # travel, lets its periodic look come): from then on only an event tells it of the answer
        run([drafter], lambda: all(job_logs(moved, j) for j in jobs), "each job's first force")
        time.sleep(RECHECK_S + 0.5)
        w3.provider.make_request("evm_mine", [])
        hold = time.monotonic() + 3 * drafter.recheck_interval
        run([drafter], lambda: time.monotonic() > hold, "the drafter's looks at its forces")
        run(nodes, lambda: all(len(job_logs(moved, j)) == 2 for j in jobs), "each job's second force")
        for job_id in jobs:
            (answer,) = job_logs(answered, job_id)
            first, second = job_logs(moved, job_id)
            k = answer.args.cycle
            assert (first.args.forcer, first.args.silent, first.args.cycles) == (drafter.address, verifier.address, k)
            # on its own job's attested S(k) (the contract refuses any other state), long before the first deadline
            assert (second.args.forcer, second.args.cycles) == (drafter.address, k + 1)
            assert w3.eth.get_block(second.blockNumber).timestamp < first.args.deadline
            assert force_of(drafter, job_id)["cycles"] == k + 1

        # every event again, the other job's and the stale answers included: nothing sent, no ledger moved
        def ledger(job_id):
            return Ledger.load(spec_of(drafter, job_id), drafter.store, "drafter")

        before = {j: (ledger(j).next_cycle, sorted(ledger(j).verifications)) for j in jobs}
        sent, block = list(drafter.sent), w3.eth.block_number
        contracts = {"market": system.market, "transcript": system.transcript}
        replay = EventPoller(w3, contracts, NodeStore(world.tmp / "replay.db"), "replay", start_block=world.start)
        assert replay.drain(drafter._dispatch) > 0
        for _ in range(20):  # each job is looked at (dirty), then again
            drafter.step()
            time.sleep(0.05)
        assert drafter.sent == sent and _drafter_txs(world, drafter, block) == []
        assert {j: (ledger(j).next_cycle, sorted(ledger(j).verifications)) for j in jobs} == before

        # the second forces stand unanswered: the drafter claims each after its deadline, the verifier is slashed
        stake = system.registry.functions.stakeOf(verifier.address).call()
        w3.provider.make_request("evm_increaseTime", [system.market.functions.verifyTimeout().call() + 1])
        w3.provider.make_request("evm_mine", [])
        settled = system.transcript.events.ForceSettled()
        run([drafter], lambda: all(job_logs(settled, j) for j in jobs), "the drafter's claims")
        for job_id in jobs:
            (claim,) = job_logs(settled, job_id)
            assert claim.args.silent == verifier.address and claim.args.cycles == job_logs(moved, job_id)[1].args.cycles
        assert system.registry.functions.stakeOf(verifier.address).call() < stake
        assert _drafter_txs(world, drafter, block) == ["claimForce", "claimForce"]
    finally:
        for node in nodes:
            node.close()
