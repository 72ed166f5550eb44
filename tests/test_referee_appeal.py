"""Referee nodes in an appeal round (node/roles/referee/node.py): with the real nodes and models on anvil.

An honest position is disputed before thirteen referee nodes; the three drawn find it faithful; someone appeals
anyway; the referee nodes draw the fresh panel of seven (none of the first three) themselves, replay and vote;
the last round is final at once, the failed appeal's bond is burnt, nobody honest loses anything.
"""

from __future__ import annotations

import pytest

from node.chain.enums import DisputeKind, DisputeStatus, JobStatus, Outcome, Role
from node.chain.keys import dev_account
from node.decoding.loading import vocab_size
from node.roles.referee.node import RefereeNode
from tests.test_roles import DRAFT, TARGET, deployed, drive, ids, resolve_all, rpc, world  # noqa: F401  (fixtures)

# in-process nodes run whole jobs on a chain (models, many blocks): not in `make test-fast`
pytestmark = pytest.mark.node_jobs

BURN = "0x000000000000000000000000000000000000dEaD"


def test_referee_nodes_draw_and_vote_an_appeal_round(world):
    drafter, verifier = world.drafter(), world.verifier()
    job_id = world.submit(max_tokens=12)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)
    first = world.referees()
    params = world.system.params
    reg = world.system.registry.functions
    vocab = vocab_size(TARGET)
    extra_accounts = [world.accounts[i] for i in range(10, 20)]
    for account in extra_accounts:
        world.send(
            reg.register(Role.Referee, [world.ids["draft"], world.ids["target"]], [vocab, vocab]),
            account,
            params.min_referee_stake,
        )
    extra = [
        RefereeNode(
            world.w3, world.deployment, dev_account(i), world.tmp / f"referee{i}.db", TARGET, DRAFT, device="cpu"
        )
        for i in range(10, 20)
    ]
    dispute_id = world.open_dispute(job_id, 0, 0, DisputeKind.DraftReplay)
    nodes = [drafter, verifier, *first, *extra]
    decided = (DisputeStatus.Appealable, DisputeStatus.Resolved)
    drive(nodes, lambda: world.dispute(dispute_id)["status"] in decided)
    d = world.dispute(dispute_id)
    assert (d["status"], d["roundResult"], d["faithfulVotes"]) == (DisputeStatus.Appealable, Outcome.ChallengerLost, 3)
    world.send(world.dm.functions.appeal(dispute_id), world.challenger, 2 * params.dispute_bond)
    [d] = resolve_all(world, [dispute_id], nodes)  # the referee nodes draw round 1 themselves, then vote
    assert (d["round"], d["outcome"], d["faithfulVotes"], d["cheatedVotes"]) == (1, Outcome.ChallengerLost, 7, 0)
    panel = world.dm.functions.panelOf(dispute_id, 1).call()
    everyone = set(extra_accounts) | set(world.referee_addresses)
    assert len(panel) == 7 and set(panel) <= everyone
    assert not set(panel) & set(world.dm.functions.panelOf(dispute_id, 0).call())  # a fresh panel
    [drawn] = world.dm.events.RefereesDrawn().get_logs(
        argument_filters={"disputeId": dispute_id}, from_block=d["drawBlock"]
    )
    assert world.w3.eth.get_transaction(drawn["transactionHash"])["from"] in everyone  # a referee node drew it
    assert world.dm.functions.credits(BURN).call() == 2 * params.dispute_bond  # the failed appeal pays nobody
    assert all(r.store.dispute(dispute_id, "referee").status == "done" for r in [*first, *extra] if r.address in panel)
