"""A dispute and a timeout through faulty JSON-RPC endpoints (issue 14), on real nodes, a real anvil and real stores.

* A biased drafter, the verifier that disputes it and the three referees each read and write the chain through a
  `FaultProxy` that drops, delays, rate-limits, fails and cuts a mix of requests: the dispute is drawn, answered,
  voted and resolved as without faults (the drafter convicted 3-0 and slashed, the referees paid, nobody else
  slashed) and every transaction a node sent is the one its store recorded, at its nonce.
* Only the drafter's endpoint goes down (its proxy stops listening) after it signed and recorded a draft whose
  broadcast never arrived, for longer than its commit timeout: the verifier claims the draft timeout (docs/protocol.md
  "Deadlines": the drafter committed before, so it is slashed `timeoutSlash`, credited to the requester) and
  finalizes after the challenge window (the verified cycles paid, the rest refunded). When the endpoint returns, the
  drafter (and a restart of it on the same store) sees the job ended, signs nothing new, and its recorded draft is
  never re-signed: the chain holds exactly its records' transactions, each at its recorded nonce and hash.
* A transcript job's drafter whose settlement broadcast never arrived, its endpoint then down past every per-cycle
  timeout: nothing is forced or claimed (a settlement has no deadline while the job runs), and the same signed
  settlement lands when the endpoint returns: Completed, nobody slashed.

Each node has its own provider (`connect`, `tests/test_rpc_faults.py`'s patient policy); the test itself talks to
anvil directly (submitting, moving the clock). The nodes are stepped in-process.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from web3.exceptions import TransactionNotFound

from node.chain.enums import DisputeStatus, FinishReason, JobStatus, Outcome
from node.chain.errors import ChainUnavailable
from node.chain.fault_proxy import KINDS, FaultProxy
from node.chain.keys import dev_account
from node.chain.params import DEFAULT_PARAMS
from node.chain.rpc import connect, rpc_url_of
from node.cli_transcript import start_link
from node.jobs import chaindata
from node.link import settled
from node.roles import RefereeNode
from node.roles.drafter.node import DrafterNode
from node.roles.schedule import DISPUTE
from node.roles.verifier.node import VerifierNode
from node.store import TX_MINED
from tests.chainutil import HANG_S
from tests.test_roles import DRAFT, TARGET
from tests.test_rpc_faults import PATIENT, REQUEST_TIMEOUT, fresh, sent_records, world  # noqa: F401 (fixtures)
from tests.transcript_nodes import job_logged, job_logs, submit_party_job

# in-process nodes run whole jobs on a chain (models, many blocks): not in `make test-fast`
pytestmark = pytest.mark.node_jobs

DRAFTER, VERIFIER, REFEREES = 2, 3, (4, 5, 6)
# Every fault class at once, ~30% of requests in all.
MIX = dict(drop=0.03, delay=0.05, max_delay_s=2.0, rpc_error=0.06, http_429=0.06, http_5xx=0.05, cut=0.05)


def node_w3(proxy: FaultProxy):
    return connect(proxy.url, request_timeout=REQUEST_TIMEOUT, retry=PATIENT)


def step_until(nodes, until, timeout: float, down=()) -> int:
    """Step the nodes until `until()` holds. A node in `down` (its endpoint is down) may run out of retries: its
    `ChainUnavailable` is what a node's loop logs and waits out; counted and returned. Any other node's fails."""
    deadline, unavailable = time.monotonic() + timeout, 0
    while not until():
        did = 0
        for node in nodes:
            try:
                did += node.step()
            except ChainUnavailable as exc:
                if node not in down:
                    raise AssertionError(f"a node ran out of retries: {exc}") from exc
                unavailable += 1
        if not did:
            time.sleep(0.01)
        if time.monotonic() > deadline:
            raise AssertionError(f"not done within {timeout:.0f}s")
    return unavailable


def quiet(nodes, timeout: float = 60) -> None:
    step_until(nodes, lambda: not any(node.txs._inflight for node in nodes), timeout)
    for node in nodes:
        node.flush()


def check_sent(world, node, address: str, nonce_before: int, records_before: int, may_revert=lambda key: False):
    """What the node sent since: the chain holds exactly its store's new records, one per nonce from `nonce_before`,
    each the recorded transaction (hash, sender) and mined; a record whose key `may_revert` may have reverted (a
    race lost to another party), every other one succeeded. The keys that reverted."""
    records, reverted = sent_records(node)[records_before:], []
    assert world.nonce(address) - nonce_before == len(records), [(r.key, r.status) for r in records]
    assert sorted(r.nonce for r in records) == list(range(nonce_before, nonce_before + len(records)))
    for r in records:
        assert r.status == TX_MINED, (r.key, r.status)
        tx = world.w3.eth.get_transaction(r.tx_hash)
        assert (tx["nonce"], tx["from"]) == (r.nonce, address)
        if world.w3.eth.get_transaction_receipt(r.tx_hash)["status"] != 1:
            assert may_revert(r.key), r.key
            reverted.append(r.key)
    return reverted


def test_a_biased_drafter_is_convicted_through_faulty_endpoints(fresh):
    world = fresh
    addresses = [world.accounts[i] for i in (DRAFTER, VERIFIER, *REFEREES)]
    with FaultProxy(rpc_url_of(world.w3), seed=141) as proxy:
        drafter = world.drafter(behavior="biased", account=DRAFTER, w3=node_w3(proxy))
        verifier = world.verifier(account=VERIFIER, w3=node_w3(proxy), dispute_faults=True)
        referees = [
            RefereeNode(node_w3(proxy), world.deployment, dev_account(i), world.tmp / f"r{i}.db", TARGET, DRAFT,
                        device="cpu")
            for i in REFEREES
        ]  # fmt: skip
        nodes = [drafter, verifier, *referees]
        try:
            stakes = {a: world.stake(a) for a in addresses}
            nonces = {a: world.nonce(a) for a in addresses}
            credits = {a: world.dm.functions.credits(a).call() for a in addresses}
            proxy.set_faults(**MIX)
            job_id = world.submit(max_tokens=64)
            # the drafter holds its answer back until the verifier has drawn the panel (as tests/test_roles.py's
            # dispute test: one draw, the challenger's)
            answer_later, drafter.work_dispute = drafter.work_dispute, lambda dispute_id: 0
            step_until([drafter, verifier], lambda: world.dm.functions.disputeCount().call() == 1, HANG_S)
            step_until([drafter, verifier], lambda: world.dispute(1)["drawn"] > 0, HANG_S)
            drafter.work_dispute = answer_later
            drafter.schedule.mark_dirty(DISPUTE, 1)
            decided = (DisputeStatus.Appealable, DisputeStatus.Resolved)
            step_until(nodes, lambda: world.dispute(1)["status"] in decided, HANG_S)
            world.advance(world.system.params.appeal_period + 1)  # nobody appeals
            for node in nodes:
                node.schedule.mark_dirty(DISPUTE, 1)

            def done():
                resolved = world.dispute(1)["status"] == DisputeStatus.Resolved
                return resolved and world.status(job_id) != JobStatus.Running

            step_until(nodes, done, HANG_S)
            proxy.set_faults()

            def stored_done():  # the accused's and every referee's store closed the dispute
                return all(getattr(n.store.dispute(1, n.role), "status", None) == "done" for n in (drafter, *referees))

            step_until(nodes, stored_done, HANG_S)
            quiet(nodes)

            d = world.dispute(1)
            assert (d["outcome"], d["cheatedVotes"], d["faithfulVotes"]) == (Outcome.AccusedLost, 3, 0)
            [opened] = world.dm.events.DisputeOpened().get_logs(from_block=world.start)
            assert (opened["args"]["challenger"], opened["args"]["accused"]) == (addresses[1], addresses[0])
            assert world.dm.functions.disputeCount().call() == 1
            # the biased drafter alone is slashed; the referees of the majority share W
            assert world.stake(addresses[0]) == stakes[addresses[0]] - world.system.params.accused_slash
            assert {a: world.stake(a) for a in addresses[1:]} == {a: stakes[a] for a in addresses[1:]}
            pay = [world.dm.functions.credits(a).call() - credits[a] for a in addresses[2:]]
            w = world.system.params.dispute_bond // 2  # W, split equally (the dust to the first drawn)
            assert sum(pay) == w and min(pay) == w // 3, pay
            assert chaindata.job_view(world.market, job_id)["drafterForfeited"]
            assert not chaindata.job_view(world.market, job_id)["verifierForfeited"]
            [finished] = job_logs(world.market.events.JobFinished, job_id)
            assert finished["args"]["reason"] in (FinishReason.DisputeLost, FinishReason.Completed)

            # every node's transactions are its store's records, one per nonce, mined; a draft or verification may
            # lose the race with the verdict that stops the job, a referee's resolve another referee's; nothing else
            def may_revert(key):
                return key.startswith(f"job:{job_id}:cycle:") or key == "dispute:1:resolve"

            reverted = [k for n, a in zip(nodes, addresses) for k in check_sent(world, n, a, nonces[a], 0, may_revert)]
            # the faults bit and were ridden out
            assert sum(proxy.stats[k] for k in KINDS) >= 20, proxy.stats
            retried = sum((node.w3.provider.retried for node in nodes), start=Counter())
            assert retried.total() > 0
            print(f"\ndispute through faults: {proxy.stats['requests']} requests, faults "
                  f"{ {k: proxy.stats[k] for k in KINDS} }, retried {dict(retried)}, reverted {reverted}")  # fmt: skip
        finally:
            proxy.set_faults()
            for node in nodes:
                node.close()


def test_a_drafter_down_past_its_commit_deadline_is_timed_out_and_sends_nothing_new_when_back(fresh):
    world = fresh
    params = DEFAULT_PARAMS
    d_addr, v_addr, requester = world.accounts[DRAFTER], world.accounts[VERIFIER], world.requester
    url = rpc_url_of(world.w3)
    with FaultProxy(url, seed=142) as d_proxy, FaultProxy(url, seed=143) as v_proxy:
        drafter = world.drafter(account=DRAFTER, w3=node_w3(d_proxy))
        verifier = world.verifier(account=VERIFIER, w3=node_w3(v_proxy))
        verifier.recheck_interval = 0  # deadlines are noticed by rechecks: look at the job on every step
        nodes = [drafter, verifier]
        try:
            stakes = {a: world.stake(a) for a in (d_addr, v_addr)}
            nonces = {a: world.nonce(a) for a in (d_addr, v_addr)}
            owed = world.market.functions.owed(requester).call()
            job_id = world.submit(max_tokens=48)
            view = lambda: chaindata.job_view(world.market, job_id)  # noqa: E731
            step_until(nodes, lambda: view()["cycle"] >= 2, HANG_S)

            # the drafter's broadcasts stop arriving (429, not forwarded): it signs and records its next draft, then
            # its endpoint goes down altogether
            d_proxy.set_faults(http_429=1.0, methods={"eth_sendRawTransaction"})

            def stranded():
                return [r for r in sent_records(drafter) if r.key.endswith(":commit") and not on_chain(world, r)]

            step_until(nodes, lambda: stranded() and view()["phase"] == 0, HANG_S, down=[drafter])
            [record] = stranded()
            cycle = view()["cycle"]
            assert record.key == f"job:{job_id}:cycle:{cycle}:commit"
            d_proxy.stop()
            with pytest.raises(ChainUnavailable):
                drafter.step()

            # past the deadline the verifier claims the draft timeout: the drafter, who committed before, is slashed
            world.advance(params.commit_timeout + 5)
            # (waiting on the log, not on the job's status: a view may show the claim before its log can be read)
            step_until([verifier], job_logged(world.market.events.JobFinished, job_id), HANG_S)
            assert world.status(job_id) == JobStatus.Finished
            [finished] = job_logs(world.market.events.JobFinished, job_id)
            args = finished["args"]
            assert (args["reason"], args["party"], args["slashed"]) == (
                FinishReason.DraftTimeout,
                d_addr,
                params.timeout_slash,
            )
            claim = world.w3.eth.get_transaction(finished["transactionHash"])
            assert claim["from"] == v_addr
            assert world.stake(d_addr) == stakes[d_addr] - params.timeout_slash
            assert world.stake(v_addr) == stakes[v_addr]
            # after the challenge window the verifier finalizes: the verified cycles paid, the rest refunded
            world.advance(params.challenge_window + 1)
            step_until([verifier], job_logged(world.market.events.JobFinalized, job_id), HANG_S)
            [final] = job_logs(world.market.events.JobFinalized, job_id)
            job = chaindata.job_view(world.market, job_id)
            cycles = [c for c in chaindata.cycles(world.system, job_id, from_block=world.start) if c.verified]
            assert len(cycles) == cycle
            drafter_tokens = sum(c.accepted for c in cycles)  # no cycle was cut: the job did not reach its end
            escrow = 48 * (10**12 + 3 * 10**12)
            assert final["args"]["drafterPay"] == drafter_tokens * 10**12
            fee = sum(e["args"]["amount"] for e in job_logs(world.market.events.AlphaFeePaid, job_id))
            assert final["args"]["verifierPay"] + fee == cycle * 3 * 10**12
            assert final["args"]["refund"] == escrow - drafter_tokens * 10**12 - cycle * 3 * 10**12
            credited = world.market.functions.owed(requester).call() - owed
            assert credited == final["args"]["refund"]  # the slash is burnt, never the requester's (v1.2)
            assert job["status"] == JobStatus.Finalized

            # the endpoint returns: the drafter sees the job ended and signs nothing new; restarted on its store,
            # likewise; its draft of the ended cycle is never re-signed (the same record, the same hash)
            d_proxy.set_faults()
            d_proxy.start()
            drafter.step()
            quiet(nodes)
            drafter.close()
            drafter = world.drafter(account=DRAFTER, w3=node_w3(d_proxy))
            nodes = [drafter, verifier]
            ended = lambda: getattr(drafter.store.job(job_id, "drafter"), "status", None) == "done"  # noqa: E731
            step_until([drafter], ended, HANG_S)  # it saw the job finalized and retired it
            for _ in range(10):
                drafter.step()
            quiet(nodes)
            records = sent_records(drafter)
            assert [r for r in records if r.key == record.key] == [drafter.store.sent_tx(record.key)]
            assert drafter.store.sent_tx(record.key).tx_hash == record.tx_hash
            assert {r.key for r in records} == {f"job:{job_id}:cycle:{c}:commit" for c in range(cycle + 1)}
            # the chain holds the records that arrived, at their nonces: the stranded one arrived after the
            # outage (its same bytes, reverted: the job had ended) or never, leaving no gap behind it
            landed = [r for r in records if on_chain(world, r)]
            assert world.nonce(d_addr) - nonces[d_addr] == len(landed)
            assert sorted(r.nonce for r in landed) == list(range(nonces[d_addr], nonces[d_addr] + len(landed)))
            for r in landed:
                tx = world.w3.eth.get_transaction(r.tx_hash)
                assert (tx["nonce"], tx["from"]) == (r.nonce, d_addr)
                ok = world.w3.eth.get_transaction_receipt(r.tx_hash)["status"]
                assert ok == (0 if r.key == record.key else 1), r.key
            check_sent(world, verifier, v_addr, nonces[v_addr], 0)
            keys = {r.key for r in sent_records(verifier)}
            assert f"job:{job_id}:timeout:{cycle}:0" in keys and f"job:{job_id}:finalize" in keys
            print(f"\ndrafter down: {d_proxy.stats['requests']} requests to its endpoint; stranded draft "
                  f"{'landed reverted' if on_chain(world, record) else 'never arrived'}")  # fmt: skip
        finally:
            for node in nodes:
                node.close()


def on_chain(world, record) -> bool:
    try:
        world.w3.eth.get_transaction(record.tx_hash)
        return True
    except TransactionNotFound:
        return False


def test_a_transcript_drafter_down_at_its_settlement_past_the_timeouts_is_settled_by_its_verifier(fresh):
    """A transcript job's cycles travel over the link, and a settlement has no deadline while the job runs (only the
    idle claim, docs/protocol.md "Idle jobs", which comes far later): a drafter whose broadcast of the settlement
    never arrived and whose endpoint then stays down past every per-cycle timeout is not waited for. The verifier,
    which holds both signatures, posts the same co-signed settlement once the drafter has been silent for its
    --link-silence (v2.1: the last message withheld, or lost, pays both), and forces nothing; the drafter, back,
    sends nothing more."""
    world = fresh
    params = DEFAULT_PARAMS
    d_addr, v_addr = world.accounts[DRAFTER], world.accounts[VERIFIER]
    url = rpc_url_of(world.w3)
    with FaultProxy(url, seed=144) as d_proxy, FaultProxy(url, seed=145) as v_proxy:
        drafter = DrafterNode(
            node_w3(d_proxy), world.deployment, dev_account(DRAFTER), world.tmp / "d.db", DRAFT, TARGET, device="cpu",
            link_silence_s=5,
        )  # fmt: skip
        verifier = VerifierNode(
            node_w3(v_proxy), world.deployment, dev_account(VERIFIER), world.tmp / "v.db", TARGET, DRAFT,
            device="cpu",
        )  # fmt: skip
        verifier.link_silence_s = 5  # as `serve verifier --link-silence 5`
        nodes = [drafter, verifier]
        try:
            link = start_link(verifier, ("127.0.0.1", 0))
            step_until(nodes, lambda: world.system.registry.functions.endpointOf(v_addr).call() == link, HANG_S)
            quiet(nodes)
            stakes = {a: world.stake(a) for a in (d_addr, v_addr)}
            nonces = {a: world.nonce(a) for a in (d_addr, v_addr)}
            d_proxy.set_faults(http_429=1.0, methods={"eth_sendRawTransaction"})
            job_id = submit_party_job(world, d_addr, v_addr, "import numpy as np\n", 12, transcript=True)
            key = f"job:{job_id}:settle"

            def stranded():
                record = drafter.store.sent_tx(key)
                return record is not None and not on_chain(world, record)

            step_until(nodes, stranded, HANG_S, down=[drafter])
            record = drafter.store.sent_tx(key)
            d_proxy.stop()
            world.advance(params.commit_timeout + params.verify_timeout + 5)
            verifier.recheck_interval = 0
            step_until([verifier], lambda: world.status(job_id) == JobStatus.Finished, HANG_S)
            [done] = job_logs(world.market.events.JobFinished, job_id)
            assert (done["args"]["reason"], done["args"]["slashed"]) == (FinishReason.Completed, 0)
            settle_tx = world.w3.eth.get_transaction(done["transactionHash"])
            assert settle_tx["from"] == v_addr  # the verifier posted it
            d_proxy.set_faults()
            d_proxy.start()
            quiet(nodes)

            settlement = settled.read(world.system, job_id, world.start)
            assert sum(len(c.output) for c in settlement.cycles) == 12
            assert drafter.store.sent_tx(key).tx_hash == record.tx_hash  # the bytes it signed before the outage
            assert not on_chain(world, drafter.store.sent_tx(key))  # its own broadcast never landed, and is not needed
            assert world.system.transcript.events.ForceMoved().get_logs(from_block=world.start) == []
            assert {a: world.stake(a) for a in (d_addr, v_addr)} == stakes
            # the drafter's stranded settle never reached the chain and no longer needs to: nothing of it landed, and
            # its nonce is free for its next transaction (TxSender takes nonces from the pending count)
            [stranded] = sent_records(drafter)[-1:]
            assert (stranded.key, stranded.status, stranded.nonce) == (key, "signed", nonces[d_addr])
            assert world.nonce(d_addr) == nonces[d_addr]
            check_sent(world, verifier, v_addr, nonces[v_addr], len(sent_records(verifier)) - 2)  # accept, settle
        finally:
            for node in nodes:
                node.close()
            server = getattr(verifier, "link_server", None)
            if server is not None:
                asyncio.run_coroutine_threadsafe(server.stop(), server.loop).result(10)
