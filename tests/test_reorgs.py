"""Nodes across reorgs (docs/node.md, "Confirmations and reorgs"): anvil's `anvil_reorg` replaces the last 1-3 blocks
(tests/reorgs.py) in the middle of a per-cycle job, of a dispute, at finalization, and of a transcript job's
settlement, with the nodes' transactions of those blocks gone. Each time the nodes notice it, rewind their event
cursors, re-broadcast their vanished transactions (the same signed bytes) or hold them until their turn comes again,
and the job ends as the engine says: the same output, no honest node slashed, one transaction per action, the stores
consistent with the new chain. And `--confirmations 2`: a node acts on nothing until it has 2 confirmations.

In-process nodes on tests/test_roles.py's module deployment, stepped in turn (`drive`). Their pollers compare the
cursor block's hash every 50 ms here (`reorg_check_s`; 1 s by default): anvil_reorg keeps the chain's height, so
only that periodic look can see it before the next block.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from eth_utils import to_checksum_address

from node.chain.enums import DisputeKind, JobStatus, Outcome, Verdict
from node.chain.events import EventPoller
from node.chain.keys import dev_account
from node.chain.sender import request_digest, signed_call
from node.jobs import chaindata
from node.roles import DrafterNode
from node.roles.schedule import JOB
from node.store import NodeStore
from tests.reorgs import reorg
from tests.test_roles import (  # noqa: F401 (fixtures)
    DRAFT,
    TARGET,
    deployed,
    drive,
    ids,
    reference,
    resolve_all,
    rpc,
    tokenizer,
    world,
)

# in-process nodes run whole jobs on a chain (models, many blocks): not in `make test-fast`
pytestmark = pytest.mark.node_jobs

MAX_TOKENS = 16


def quick(*nodes):
    for node in nodes:
        node.poller.reorg_check_s = 0.05
    return nodes


def nodes(world, **options):
    return quick(world.drafter(**options), world.verifier(**options))


def verified(world, job_id) -> int:
    return len(world.market.events.CycleVerified().get_logs(argument_filters={"jobId": job_id}, from_block=world.start))


def cut_chain(world, nodes, depth):
    """Reorg away the last `depth` blocks with the nodes' transactions in them (the test's own are kept), once every
    node has processed the head (so that each has something to rewind)."""
    w3 = world.w3
    caught_up(w3, nodes)
    ours = {node.address for node in nodes}
    return reorg(w3, depth, keep=lambda tx: tx["from"] not in ours)


def caught_up(w3, nodes, timeout: float = 60.0):
    """Step each node until its poller has processed the chain's head. After a reorg this is also the moment it has
    rewound: a poller that has not seen the fork yet flags the new block (its parent is not the block it remembers)
    and compares on its next poll, so a condition on chain state alone (the job is settled again) can hold a step
    before the other node has looked; waiting on the cursor, not on the clock, keeps that race out of the test."""
    deadline = time.monotonic() + timeout
    while not all(node.poller.cursor >= w3.eth.block_number for node in nodes):
        if not sum(node.step() for node in nodes if node.poller.cursor < w3.eth.block_number):
            time.sleep(0.02)
        assert time.monotonic() < deadline, f"a node still behind the head after {timeout:.0f}s"


def check_after_reorg(world, nodes, fork, first_block):
    """Every node saw the reorg, and its store agrees with the new chain: each transaction of its address on chain is
    (from `first_block` on) the one its store recorded for that action (same hash, calldata matching the key's
    recorded request), at most one per key; every record kept mined has its receipt; the blocks its poller remembers
    are the chain's."""
    w3 = world.w3
    caught_up(w3, nodes)
    for node in nodes:
        node.flush()
        # at the fork point or below it (a poller remembers the blocks it processed up to, not every block)
        assert node.poller.reorgs and all(f <= fork for f in node.poller.reorgs), f"{node.role} missed the reorg"
        rows = node.store._query("SELECT idempotency_key, tx_hash, raw_tx, request_digest, status FROM sent_txs")
        by_hash = {h.lower(): (key, raw, digest, status) for key, h, raw, digest, status in rows}
        for key, _h, raw, digest, _s in rows:
            assert request_digest(*signed_call(raw)) == digest, f"{key}: its signed bytes are not its request"
        on_chain = []
        for number in range(first_block, w3.eth.block_number + 1):
            for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]:
                if to_checksum_address(tx["from"]) == node.address:
                    on_chain.append(tx["hash"].to_0x_hex().lower())
        keys = [by_hash[h][0] for h in on_chain if h in by_hash]
        assert len(keys) == len(on_chain), f"{node.role} has a transaction on chain it never recorded"
        assert len(set(keys)) == len(keys), f"{node.role} landed one action twice"
        for key, tx_hash, _r, _d, status in rows:
            if status == "mined":
                assert w3.eth.get_transaction_receipt(tx_hash) is not None, key
        for number, block_hash, _ in node.store.poller_blocks(node.poller.name):
            assert w3.eth.get_block(number)["hash"].to_0x_hex().lower() == block_hash


def check_output(world, tokenizer, job_id):
    expected = reference(job_id, tokenizer, world, max_tokens=MAX_TOKENS)
    assert chaindata.output_tokens(world.system, job_id, from_block=world.start) == expected.tokens
    return expected


def stakes(world):
    return {a: world.stake(a) for a in (world.drafter_address, world.verifier_address)}


def window_passes(world, nodes, job_id):
    """Let the job's challenge window pass, and have the nodes look at it now (not at their next recheck)."""
    world.advance(world.market.functions.challengeWindow().call() + 1)
    for node in nodes:
        node.schedule.mark_dirty(JOB, job_id)


# ---------------------------------------------------------------- the poller


def test_the_poller_rewinds_to_the_fork_point_and_delivers_the_new_chains_events(world, tmp_path):
    store = NodeStore(tmp_path / "poller.db")
    forks = []
    poller = EventPoller(
        world.w3,
        {"market": world.market},
        store,
        "test",
        start_block=world.start,
        events=[("market", "JobSubmitted")],
        on_reorg=lambda fork, since: forks.append((fork, since)),
        reorg_check_s=0,
    )

    def deliver():
        got = []
        for event in poller.poll():
            store.mark_seen(event, "test")
            got.append((event.args["jobId"], event.tx_hash, event.log_index))
        return got

    deliver()
    first, old = [], []
    for i in range(3):  # one block each, each one processed (so the poller remembers every one)
        first.append(world.submit(prompt=f"job {i}: "))
        old += deliver()
    assert [job for job, _, _ in old] == first
    cut = reorg(world.w3, 2)  # the last two submissions go
    assert len(cut.dropped) == 2 and world.market.functions.jobCount().call() == first[0]
    again = world.submit(prompt="another job: ")  # the new chain's job 2 (another prompt, another transaction)
    new = deliver()
    assert [fork for fork, _ in forks] == [cut.fork] and forks[0][1] is not None
    assert [job for job, _, _ in new] == [again] and new[0][1] != old[1][1]
    assert poller.cursor == world.w3.eth.block_number
    # the logs of the replaced blocks are forgotten, the one below the fork is not
    assert store.seen(SimpleNamespace(tx_hash=old[0][1], log_index=old[0][2]), "test")
    assert not any(store.seen(SimpleNamespace(tx_hash=h, log_index=i), "test") for _, h, i in old[1:])
    # a restarted poller over the same store has the same cursor and block hashes: no second reorg, nothing again
    restarted = EventPoller(world.w3, {"market": world.market}, store, "test", start_block=world.start, reorg_check_s=0)
    assert list(restarted.poll()) == [] and restarted.reorgs == []
    store.close()


# ---------------------------------------------------------------- per-cycle jobs


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_reorg_in_the_middle_of_a_job_ends_in_the_engines_output(world, tokenizer, depth):
    drafter, verifier = nodes(world)
    first = world.w3.eth.block_number + 1
    before, nonces = stakes(world), {a: world.nonce(a) for a in (world.drafter_address, world.verifier_address)}
    job_id = world.submit(max_tokens=MAX_TOKENS)
    drive([drafter, verifier], lambda: verified(world, job_id) >= 2, settle=False)
    cut = cut_chain(world, [drafter, verifier], depth)
    assert cut.dropped  # the nodes' last transactions are gone
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)

    expected = check_output(world, tokenizer, job_id)
    check_after_reorg(world, [drafter, verifier], cut.fork, first)
    assert stakes(world) == before
    # one transaction per action on the new chain: a commit per cycle; the accept and a verification per cycle
    assert world.nonce(world.drafter_address) - nonces[world.drafter_address] == len(expected.cycles)
    assert world.nonce(world.verifier_address) - nonces[world.verifier_address] == len(expected.cycles) + 1


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_reorg_that_takes_back_the_finalization_is_finalized_again_once(world, depth):
    drafter, verifier = nodes(world)
    first = world.w3.eth.block_number + 1
    before = stakes(world)
    job_id = world.submit(max_tokens=8)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)
    window_passes(world, [drafter, verifier], job_id)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finalized)
    assert all(node.store.job(job_id, node.role).status == "done" for node in (drafter, verifier))  # both retired it
    cut = cut_chain(world, [drafter, verifier], depth)
    assert world.status(job_id) != JobStatus.Finalized  # the finalization is gone (depth 3: the last cycle too)
    drive([drafter, verifier], lambda: world.status(job_id) in (JobStatus.Finished, JobStatus.Finalized))
    if (
        world.status(job_id) == JobStatus.Finished
        and world.w3.eth.get_block("latest")["timestamp"] <= chaindata.job_view(world.market, job_id)["deadline"]
    ):
        # the block that passed the challenge window went too: on the new chain it has not passed yet, and the
        # finalization (held by its sender: it would revert) waits for it, as the protocol says
        for _ in range(20):
            for node in (drafter, verifier):
                node.step()
        assert world.status(job_id) == JobStatus.Finished
        window_passes(world, [drafter, verifier], job_id)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finalized)
    drive(
        [drafter, verifier],
        lambda: all(node.store.job(job_id, node.role).status == "done" for node in (drafter, verifier)),
    )

    finalized = world.market.events.JobFinalized().get_logs(argument_filters={"jobId": job_id}, from_block=first)
    assert len(finalized) == 1
    check_after_reorg(world, [drafter, verifier], cut.fork, first)
    assert stakes(world) == before


# ---------------------------------------------------------------- disputes


@pytest.mark.parametrize(("phase", "depth"), [("commit", 1), ("commit", 3), ("reveal", 2)])
def test_a_reorg_in_a_dispute_keeps_every_referees_vote_and_the_honest_accused_wins(world, phase, depth):
    drafter, verifier = nodes(world)
    referees = quick(*world.referees())
    everyone = [drafter, verifier, *referees]
    job_id = world.submit(max_tokens=8)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)
    before = stakes(world)
    first = world.w3.eth.block_number + 1
    dispute_id = world.open_dispute(job_id, 0, 0, DisputeKind.TargetReplay)  # the honest verifier's p, disputed
    world.w3.provider.make_request("evm_mine", [])  # the draw's seed block
    world.send(world.dm.functions.drawReferees(dispute_id), world.challenger)
    event = world.dm.events.VoteCommitted if phase == "commit" else world.dm.events.VoteRevealed
    drive(everyone, lambda: len(event().get_logs(from_block=first)) >= 2, settle=False)
    cut = cut_chain(world, everyone, depth)
    assert cut.dropped

    [d] = resolve_all(world, [dispute_id], everyone)
    assert (d["outcome"], d["faithfulVotes"], d["cheatedVotes"]) == (Outcome.ChallengerLost, 3, 0)
    # each referee revealed the verdict it committed, once: one commitment and one reveal each on the new chain
    for kind in (world.dm.events.VoteCommitted, world.dm.events.VoteRevealed):
        voters = [log["args"]["referee"] for log in kind().get_logs(from_block=first)]
        assert sorted(voters) == sorted(r.address for r in referees)
    for referee in referees:
        assert referee.store.dispute(dispute_id, "referee").params["verdict"] == Verdict.AccusedFaithful
    check_after_reorg(world, [n for n in everyone if n.poller.reorgs], cut.fork, first)
    assert stakes(world) == before  # the honest accused keeps its stake


# ---------------------------------------------------------------- confirmations


def test_with_2_confirmations_a_node_acts_on_nothing_younger_and_a_shallower_reorg_never_reaches_it(world, tokenizer):
    w3 = world.w3
    verifier = world.verifier(confirmations=2)
    drafter = DrafterNode(
        w3, world.deployment, dev_account(2), world.tmp / "drafter.db", DRAFT, TARGET, device="cpu", confirmations=2
    )
    quick(drafter, verifier)
    accepts = lambda: len(world.market.events.JobAccepted().get_logs(from_block=world.start))  # noqa: E731

    def mine_one_and_step():
        w3.provider.make_request("evm_mine", [])
        for _ in range(3):
            for node in (drafter, verifier):
                node.step()

    # a job whose submission a depth-1 reorg takes back before it has 2 confirmations: the nodes never see it
    job_id = world.submit(max_tokens=MAX_TOKENS)
    for _ in range(3):
        verifier.step()
    assert accepts() == 0
    cut = reorg(w3, 1)
    assert cut.dropped and world.market.functions.jobCount().call() == job_id - 1
    mine_one_and_step()
    mine_one_and_step()
    assert accepts() == 0 and verifier.poller.reorgs == [] and drafter.poller.reorgs == []
    assert verifier.store.job(job_id, "verifier") is None

    # the same job submitted again: the verifier accepts it only at 2 confirmations of its submission
    assert world.submit(max_tokens=MAX_TOKENS) == job_id
    submitted = w3.eth.block_number
    for _ in range(3):
        verifier.step()
    assert accepts() == 0  # 0 confirmations
    mine_one_and_step()
    assert accepts() == 0  # 1
    mine_one_and_step()
    assert accepts() == 1  # 2: accepted (in the next block)
    [accepted] = world.market.events.JobAccepted().get_logs(from_block=world.start)
    assert accepted["blockNumber"] == submitted + 3
    # the drafter's first draft waits for 2 confirmations of the acceptance; the verifier's accept stays in flight
    # (its receipt not counted as landed) until then too
    commits = lambda: len(world.market.events.DraftCommitted().get_logs(from_block=world.start))  # noqa: E731
    assert commits() == 0 and verifier.txs.in_flight(f"job:{job_id}:accept")
    mine_one_and_step()
    assert commits() == 0 and verifier.txs.in_flight(f"job:{job_id}:accept")
    mine_one_and_step()
    assert commits() == 1 and not verifier.txs.in_flight(f"job:{job_id}:accept")
    [committed] = world.market.events.DraftCommitted().get_logs(from_block=world.start)
    assert committed["blockNumber"] == accepted["blockNumber"] + 3

    # blocks keep coming (as on a chain with a block time): the job completes as the engine says
    for _ in range(400):
        if world.status(job_id) == JobStatus.Finished:
            break
        mine_one_and_step()
    assert world.status(job_id) == JobStatus.Finished
    check_output(world, tokenizer, job_id)


# ---------------------------------------------------------------- transcript mode


@pytest.fixture(scope="module")
def transcript_world(ids, tmp_path_factory):
    """Its own anvil with the drafter (2) and verifier (3) registered, the verifier serving its link."""
    from node.cli_transcript import start_link
    from tests.test_transcript_disputes import run
    from tests.transcript_nodes import party_world

    with party_world(tmp_path_factory.mktemp("transcript-reorgs"), ids, [2], [3]) as tw:
        drafter, verifier = quick(tw.drafter(), tw.verifier())
        url = start_link(verifier, ("127.0.0.1", 0))
        run([drafter, verifier], lambda: tw.system.registry.functions.endpointOf(verifier.address).call() == url)
        yield tw, drafter, verifier
        for node in (drafter, verifier):
            node.close()


@pytest.mark.parametrize("depth", [1, 3])
def test_a_reorg_that_takes_back_a_transcript_settlement_settles_it_again_with_the_engines_output(
    transcript_world, depth
):
    from node.decoding import SpeculativeDecoder
    from node.jobs.sessions import prompt_tokens, verifier_seed
    from node.link import settled
    from tests.test_roles import PROMPT
    from tests.test_transcript_disputes import run
    from tests.transcript_nodes import submit_party_job

    tw, drafter, verifier = transcript_world
    parties = [drafter, verifier]
    first = tw.w3.eth.block_number + 1
    before = stakes(tw)
    job_id = submit_party_job(tw, tw.drafter_address, tw.verifier_address, PROMPT, MAX_TOKENS, transcript=True)
    run(parties, lambda: tw.status(job_id) == JobStatus.Finished)  # settled on chain by the drafter
    cut = cut_chain(tw, parties, depth)  # depth 3: the verifier's acceptance goes too
    assert tw.status(job_id) != JobStatus.Finished
    run(parties, lambda: tw.status(job_id) == JobStatus.Finished)

    settlements = tw.system.transcript.events.TranscriptSettled().get_logs(from_block=first)
    assert [log["args"]["jobId"] for log in settlements] == [job_id]
    cycles = settled.job_cycles(tw.system, job_id, first)
    decoder = SpeculativeDecoder(verifier.target_model, verifier.draft_model, gamma=4, verify_draft=True)
    salt = int(chaindata.job_view(tw.market, job_id)["salt"])
    prompt = prompt_tokens(drafter.tokenizer, PROMPT.encode())
    seed = verifier_seed(dev_account(3).key, job_id)
    expected = decoder.generate(
        prompt, MAX_TOKENS, job_id=job_id, verifier_seed=seed, eos_token_id=2**32 - 1, salt=salt
    )
    assert [t for c in cycles for t in c.output] == expected.tokens
    check_after_reorg(tw, parties, cut.fork, first)
    assert stakes(tw) == before


def test_serve_refuses_a_negative_or_non_integer_confirmations_in_one_line(tmp_path):
    from tests.test_cli import cli

    for bad, why in (("-1", "greater than or equal to 0"), ("two", "valid integer")):
        result = cli("serve", "drafter", "--confirmations", bad, home=tmp_path)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, result.stderr  # a usage error: nothing started
        assert lines[0].startswith("error:") and "--confirmations" in lines[0] and why in lines[0]
