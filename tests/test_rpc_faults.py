"""Real nodes behind a faulty JSON-RPC endpoint (issue 14): a drafter and a verifier, in-process, talk to a real anvil
only through `node.chain.fault_proxy.FaultProxy`, which drops, delays, rate-limits, fails, cuts and restarts. For
each fault class one per-cycle (`onchain`) job and one `transcript` job run to completion at once, and:

* each job's output equals the engine's (SpeculativeDecoder.generate with the job's id, seed and salt);
* every transaction a node sent is one its store recorded before broadcasting, mined once: the nodes' on-chain
  nonce deltas equal their stores' records, every record is mined (none superseded, rejected or re-signed), each
  record's hash is the one on chain at its nonce, and the keys are exactly one per protocol action;
* no dispute, no conviction, no timeout claim, and every stake as it was;
* the faults did bite (the proxy's counts) and the nodes' providers retried them (their counts).

The nodes read the chain through the proxy; the test reads and submits jobs straight to anvil. The transcript link
(a WebSocket between the two nodes) does not go through the proxy; the nodes are stepped, so no HeadWaker runs.
The chain and the registrations are built once (tests/transcript_nodes.py `party_world`), and each test's chain
changes are reverted (an evm snapshot).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import requests
import torch
from eth_account import Account
from web3.exceptions import ContractLogicError

from node.chain.compile import compile_contracts
from node.chain.contracts import deploy_contract
from node.chain.enums import FinishReason, JobStatus
from node.chain.errors import ChainUnavailable
from node.chain.fault_proxy import KINDS, FaultProxy
from node.chain.keys import dev_account
from node.chain.rpc import RetryPolicy, connect, is_transient_answer, retry_safe, rpc_url_of
from node.chain.sender import TxSender
from node.cli_transcript import start_link
from node.decoding import SpeculativeDecoder
from node.jobs import chaindata
from node.jobs.models import load_model, load_tokenizer, model_id
from node.jobs.sessions import prompt_tokens, verifier_seed
from node.link import settled
from node.roles.drafter.node import DrafterNode
from node.roles.verifier.node import VerifierNode
from node.store import TX_MINED, NodeStore
from tests.chainutil import HANG_S
from tests.test_roles import DRAFT, TARGET
from tests.transcript_nodes import job_logs, party_world, submit_party_job

DRAFTER, VERIFIER = 2, 3
PROMPTS = {"onchain": "def fibonacci(n):\n", "transcript": "import numpy as np\n"}
MAX_TOKENS = 12
NO_EOS = 2**32 - 1
# A node's patience in this file: a request gets 1.5 s (a dropped one costs that), a failure is asked again up to 10
# times with backoff from 50 ms to 1 s (about 6 s in all: longer than a proxy restart's 1.5 s down time).
REQUEST_TIMEOUT = 1.5
PATIENT = RetryPolicy(attempts=10, first_delay=0.05, max_delay=1.0)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    torch.set_num_threads(1)  # the test machine is shared
    ids = {"draft": model_id(DRAFT), "target": model_id(TARGET)}
    with party_world(tmp_path_factory.mktemp("rpc-faults"), ids, [DRAFTER], [VERIFIER]) as world:
        yield world


@pytest.fixture
def fresh(world, tmp_path):
    """The module's chain as registered, for this test alone; node stores in the test's own directory."""
    snapshot = world.w3.provider.make_request("evm_snapshot", [])["result"]
    world.tmp = tmp_path
    yield world
    assert world.w3.provider.make_request("evm_revert", [snapshot])["result"]


# ---------------------------------------------------------------- the client alone: what is retried, what is not

FAST = RetryPolicy(attempts=4, first_delay=0.02, max_delay=0.1)


def funded_key(world):
    key = Account.create()
    world.w3.eth.send_transaction({"from": world.accounts[0], "to": key.address, "value": 10**18})
    return key


def test_answers_that_mean_not_now_are_transient_and_refusals_and_reverts_are_not():
    def answer(code, message):
        return {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": message}}

    assert is_transient_answer(answer(-32005, "rate limit exceeded"))
    assert is_transient_answer(answer(-32603, "internal error"))
    assert is_transient_answer(answer(429, "Too Many Requests"))
    assert is_transient_answer(answer(-32000, "daily request limit reached, try again later"))
    assert not is_transient_answer(answer(-32005, "query returned more than 10000 results"))  # halved, not retried
    assert not is_transient_answer(answer(3, "execution reverted"))
    assert not is_transient_answer(answer(-32603, "VM Exception while processing transaction: reverted with ..."))
    assert not is_transient_answer(answer(-32003, "nonce too low"))
    assert not is_transient_answer({"jsonrpc": "2.0", "id": 1, "result": "0x1"})
    assert retry_safe("eth_call") and retry_safe("eth_sendRawTransaction") and retry_safe("eth_getLogs")
    assert not any(map(retry_safe, ("eth_sendTransaction", "evm_mine", "evm_increaseTime", "eth_getFilterChanges")))


def test_a_broadcast_whose_answers_are_all_cut_is_sent_again_as_the_same_bytes_and_lands_once(fresh, proxy):
    w3 = connect(proxy.url, request_timeout=REQUEST_TIMEOUT, retry=FAST)
    key, recipient = funded_key(fresh), Account.create().address
    with NodeStore(fresh.tmp / "node.db") as store:
        sender = TxSender(w3, key, store, retry=FAST)
        proxy.set_faults(cut=1.0, methods={"eth_sendRawTransaction"})
        with pytest.raises(ChainUnavailable):  # anvil mined it at the first copy; every answer was cut off
            sender.submit("pay:1", recipient, value=5)
        [record] = [store.sent_tx("pay:1")]
        assert proxy.stats["cut"] == FAST.attempts == w3.provider.retried["ConnectionError"] + 1
        assert {i.method for i in proxy.injected} == {"eth_sendRawTransaction"}
        assert fresh.w3.eth.get_transaction(record.tx_hash)["nonce"] == record.nonce == 0
        proxy.set_faults()
        receipt = sender.send("pay:1", recipient, value=5)  # the same key: the record's tx, found mined
        assert receipt["transactionHash"].to_0x_hex() == record.tx_hash
        receipt = sender.send("pay:2", recipient, value=7)  # the next action gets the next nonce
    assert fresh.w3.eth.get_transaction(receipt["transactionHash"])["nonce"] == 1
    assert fresh.w3.eth.get_transaction_count(key.address) == 2
    assert fresh.w3.eth.get_balance(recipient) == 12


def test_a_revert_is_not_retried_a_rate_limit_is_until_the_policy_gives_up_and_a_write_is_sent_once(fresh, proxy):
    w3 = connect(proxy.url, request_timeout=REQUEST_TIMEOUT, retry=FAST)
    counter = deploy_contract(fresh.w3, "Counter", artifacts=compile_contracts())
    mine = w3.eth.contract(address=counter.address, abi=counter.abi)
    proxy.set_faults(rpc_error=0.5)
    with pytest.raises(ContractLogicError):  # ZeroAmount(): raised at once, whatever else the proxy does
        for _ in range(20):
            mine.functions.increment(0).call()
    assert "rpc 3" not in w3.provider.retried
    proxy.set_faults(http_429=1.0)
    seen = proxy.stats["requests"]
    with pytest.raises(ChainUnavailable):
        _ = w3.eth.block_number
    assert proxy.stats["requests"] - seen == FAST.attempts  # bounded: one try, then attempts - 1 retries
    proxy.set_faults(http_5xx=1.0)
    seen, count = proxy.stats["requests"], fresh.w3.eth.get_transaction_count(fresh.accounts[0])
    with pytest.raises(requests.HTTPError):  # not safe to repeat: anvil signs a new transaction for each copy
        w3.provider.make_request("eth_sendTransaction", [{"from": fresh.accounts[0], "to": fresh.accounts[1]}])
    assert proxy.stats["requests"] - seen == 1
    assert fresh.w3.eth.get_transaction_count(fresh.accounts[0]) - count <= 1


# ---------------------------------------------------------------- real nodes, a job of each mode per fault class


def engine_tokens(world, job_id: int, prompt: str, salt: int) -> list[int]:
    """What the engine gives for the job: its id, the verifier node's seed, the drafter's salt."""
    target = load_model(TARGET, torch.device("cpu"), torch.float32)
    draft = load_model(DRAFT, torch.device("cpu"), torch.float32)
    decoder = SpeculativeDecoder(target, draft, gamma=4, temperature=1.0, top_k=0, top_p=1.0, verify_draft=True)
    ids = prompt_tokens(load_tokenizer(TARGET, DRAFT), prompt.encode())
    seed = verifier_seed(dev_account(VERIFIER).key, job_id)
    return decoder.generate(ids, MAX_TOKENS, job_id=job_id, verifier_seed=seed, eos_token_id=NO_EOS, salt=salt).tokens


def run_jobs(world, proxy: FaultProxy, faults: dict, during=None, timeout: float = 150.0) -> dict:
    """A drafter and a verifier behind `proxy`; one job of each mode submitted with `faults` set and run to the end
    (`during(proxy)`, if given, runs in a thread meanwhile); then every check of the module doc. Returns what the
    report needs: the proxy's counts and the retries of both nodes' providers."""
    w3 = {role: connect(proxy.url, request_timeout=REQUEST_TIMEOUT, retry=PATIENT) for role in ("d", "v")}
    drafter = DrafterNode(
        w3["d"], world.deployment, dev_account(DRAFTER), world.tmp / "d.db", DRAFT, TARGET, device="cpu",
        link_silence_s=60,
    )  # fmt: skip
    verifier = VerifierNode(
        w3["v"], world.deployment, dev_account(VERIFIER), world.tmp / "v.db", TARGET, DRAFT, device="cpu"
    )
    nodes = [drafter, verifier]
    parties = {"d": world.accounts[DRAFTER], "v": world.accounts[VERIFIER]}
    try:
        url = start_link(verifier, ("127.0.0.1", 0))
        step_until(nodes, lambda: world.system.registry.functions.endpointOf(parties["v"]).call() == url, HANG_S)
        step_until(nodes, lambda: not any(node.txs._inflight for node in nodes), HANG_S)
        nonces = {role: world.nonce(a) for role, a in parties.items()}
        stakes = {role: world.stake(a) for role, a in parties.items()}
        records_before = {role: len(sent_records(node)) for role, node in zip(parties, nodes)}
        proxy.set_faults(**faults)
        jobs = {
            mode: submit_party_job(
                world, parties["d"], parties["v"], PROMPTS[mode], MAX_TOKENS, transcript=mode == "transcript"
            )
            for mode in ("onchain", "transcript")
        }
        thread = threading.Thread(target=during, args=(proxy,), daemon=True) if during else None
        if thread:
            thread.start()
        finished = lambda: all(world.status(j) == JobStatus.Finished for j in jobs.values())  # noqa: E731
        step_until(nodes, finished, timeout)
        if thread:
            thread.join(timeout=HANG_S)
        proxy.set_faults()
        step_until(nodes, lambda: not any(node.txs._inflight for node in nodes), HANG_S)  # every receipt is in
        for node in nodes:
            node.flush()

        # the outputs: the engine's, token for token
        onchain, transcript = jobs["onchain"], jobs["transcript"]
        got = chaindata.output_tokens(world.system, onchain, from_block=world.start)
        salt = chaindata.job_salt(world.system, onchain, from_block=world.start)
        assert got == engine_tokens(world, onchain, PROMPTS["onchain"], salt)
        settlement = settled.read(world.system, transcript, world.start)
        got = [t for c in settlement.cycles for t in c.output]
        assert got == engine_tokens(world, transcript, PROMPTS["transcript"], int(settlement.raw.salt))
        cycles = len(chaindata.cycles(world.system, onchain, from_block=world.start))

        # every transaction sent was recorded first and landed once; one per protocol action
        keys = {}
        for role, node in zip(parties, nodes):
            records = sent_records(node)[records_before[role] :]
            assert world.nonce(parties[role]) - nonces[role] == len(records), role
            assert all(r.status == TX_MINED for r in records), [(r.key, r.status) for r in records]
            assert sorted(r.nonce for r in records) == list(range(nonces[role], nonces[role] + len(records)))
            for r in records:
                tx = world.w3.eth.get_transaction(r.tx_hash)
                assert (tx["nonce"], tx["from"]) == (r.nonce, parties[role])
                assert world.w3.eth.get_transaction_receipt(r.tx_hash)["status"] == 1, r.key
            keys[role] = sorted(r.key for r in records)
        settle = f"job:{transcript}:settle"
        assert [k for r in keys for k in keys[r]].count(settle) == 1  # by one party, once
        assert [k for k in keys["d"] if k != settle] == sorted(f"job:{onchain}:cycle:{c}:commit" for c in range(cycles))
        verifier_keys = [k for k in keys["v"] if k != settle]
        assert len(verifier_keys) == cycles + 2, keys["v"]  # an accept per job, a verification per per-cycle cycle
        assert sum(k.startswith(f"job:{onchain}:") for k in verifier_keys) == cycles + 1, keys["v"]

        # nobody was slashed, nothing was disputed or timed out
        assert {role: world.stake(a) for role, a in parties.items()} == stakes
        assert world.dm.functions.disputeCount().call() == 0
        assert world.market.events.TranscriptConvicted().get_logs(from_block=world.start) == []
        for job_id in jobs.values():
            [done] = job_logs(world.market.events.JobFinished, job_id)
            assert (done["args"]["reason"], done["args"]["slashed"]) == (FinishReason.Completed, 0)
            view = chaindata.job_view(world.market, job_id)
            assert view["drafterForfeited"] == view["verifierForfeited"] == 0

        # the stores agree with the chain: the per-cycle job's transcript, the transcript job's signed messages
        for node, role in ((drafter, "drafter"), (verifier, "verifier")):
            stored = [node.store.cycle(onchain, role, c) for c in range(cycles)]
            assert all(s is not None for s in stored), role
        assert len(drafter.store.link_messages(transcript, "drafter")) > 0
        assert len(verifier.store.link_messages(transcript, "verifier")) > 0
        retried = w3["d"].provider.retried + w3["v"].provider.retried
        return {"stats": dict(proxy.stats), "retried": retried, "injected": list(proxy.injected)}
    finally:
        proxy.set_faults()
        for node in nodes:
            node.close()
        server = getattr(verifier, "link_server", None)
        if server is not None:
            asyncio.run_coroutine_threadsafe(server.stop(), server.loop).result(10)


def sent_records(node):
    rows = node.store._db.execute("SELECT idempotency_key FROM sent_txs ORDER BY nonce").fetchall()
    return [node.store.sent_tx(key) for (key,) in rows]


def step_until(nodes, until, timeout: float) -> None:
    """Step the nodes until `until()` holds (their links run in threads, so this also waits on the clock). A step
    that ran out of retries would raise ChainUnavailable: with these faults and this policy none may."""
    deadline = time.monotonic() + timeout
    while not until():
        did = 0
        for node in nodes:
            try:
                did += node.step()
            except ChainUnavailable as exc:
                raise AssertionError(f"a node ran out of retries: {exc}") from exc
        if not did:
            time.sleep(0.01)
        if time.monotonic() > deadline:
            raise AssertionError(f"not done within {timeout:.0f}s")


@pytest.fixture
def proxy(world):
    with FaultProxy(rpc_url_of(world.w3), seed=14) as running:
        yield running


def report(name: str, outcome: dict) -> None:
    """One line for the log (pytest -s): the requests, the faults injected (those that hit a broadcast, and those
    whose request reached anvil, so that its answer was lost), and the retries by cause."""
    stats, injected = outcome["stats"], outcome["injected"]
    faults = {k: stats[k] for k in (*KINDS, "restarts") if stats[k]}
    broadcasts = [i for i in injected if i.method == "eth_sendRawTransaction"]
    print(
        f"\n{name}: {stats['requests']} requests, faults {faults} ({len(broadcasts)} on a broadcast), "
        f"retried {outcome['retried'].total()} {dict(outcome['retried'])}"
    )


@pytest.mark.node_jobs
def test_clean(fresh, proxy):
    outcome = run_jobs(fresh, proxy, {})
    report("clean", outcome)
    assert outcome["retried"].total() == 0 and outcome["injected"] == []


# The faults of each class, at rates that bite a job of ~150 requests many times and still let it finish.
FAULTS = {
    "drop": dict(drop=0.1),
    "delay": dict(delay=0.15, max_delay_s=2.5),  # past the 1.5 s request timeout 40% of the time
    "rpc_error": dict(rpc_error=0.25),
    "http_429": dict(http_429=0.25),
    "http_5xx": dict(http_5xx=0.25),
    "cut": dict(cut=0.25),
}


@pytest.mark.parametrize("kind", list(FAULTS))
@pytest.mark.node_jobs
def test_nodes_ride_out(fresh, proxy, kind):
    outcome = run_jobs(fresh, proxy, FAULTS[kind])
    report(kind, outcome)
    assert outcome["stats"][kind] >= 5
    assert outcome["retried"].total() > 0


@pytest.mark.node_jobs
def test_nodes_ride_out_restarts(fresh, proxy):
    def restarts(p):
        # each restart once the nodes' requests flow (on a loaded machine a fixed delay may fall in a stretch where
        # both nodes compute and ask the chain nothing: a CI run under load met one, and no request met the gap)
        for down in (1.5, 1.0):
            seen, deadline = p.stats["requests"], time.monotonic() + 60
            while p.stats["requests"] < seen + 5 and time.monotonic() < deadline:
                time.sleep(0.05)
            p.restart(down_for=down)

    outcome = run_jobs(fresh, proxy, {}, during=restarts)
    report("restart", outcome)
    assert outcome["stats"]["restarts"] == 2
    assert outcome["retried"].total() > 0
