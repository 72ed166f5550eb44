"""Hardhat's node (npm `hardhat`, pinned in package.json) as a second dev chain beside anvil.

The nodes and the CLI must speak standard JSON-RPC, not one client's dialect (docs/clients.md). Here, against a
real `hardhat node`: a reverted transaction is decoded the same from either client's answer (anvil mines it and
says so in the receipt; Hardhat answers eth_sendRawTransaction with an error, and mines it too), and the whole
flow runs through the CLI and real node processes: `chain up --client hardhat`, register, serve, submit, a
dispute with `--wait` (the accused's answer draws the panel before the CLI's own draw), finalize after a serving
node did, SIGTERM, `chain down`.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from eth_account import Account
from web3 import Web3

from node import processes
from node import protocol as P
from node.chain.anvil import running_anvil
from node.chain.compile import compile_contracts
from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.enums import JobStatus
from node.chain.errors import TransactionReverted
from node.chain.hardhat import HARDHAT_BINARY, running_hardhat
from node.chain.keys import dev_account
from node.chain.revert_decoder import RevertDecoder
from node.chain.rpc import connect, rpc_url_of
from node.chain.sender import TxSender
from node.requester.client import Requester
from node.requester.errors import RequesterError
from node.store import TX_MINED, NodeStore
from tests.test_cli import (
    DRAFT,
    DRAFTER_MODELS,
    REFEREE_MODELS,
    TARGET,
    _serve,
    address,
    advance,
    clean_error,
    cli,
    cli_process,
    ok,
)
from tests.test_cli import register as cli_register
from tests.test_disputes import DRAFT_MODEL, ROLE_VERIFIER, STAKE, TARGET_MODEL, VOCAB, WAD, run_cycle, send, submit_job

# Never skipped: package.json pins hardhat and `make setup` installs it, so a missing binary is a broken set-up.
assert HARDHAT_BINARY.exists(), f"{HARDHAT_BINARY} is missing (package.json pins hardhat: `npm ci` installs it)"

REQUESTER, DRAFTER, VERIFIER, WATCHDOG, SENDER = 1, 2, 3, 8, 5
REFEREES = (10, 11, 12, 13)  # a panel of 3 drawn from 4, so the draw does not need every one of them


# ---------------------------------------------------------------- reverts, from either client's answer


@pytest.fixture(scope="module", params=["anvil", "hardhat"])
def dev_chain(request):
    """(client name, web3, deployed system) on a fresh chain of each client."""
    start = running_anvil if request.param == "anvil" else running_hardhat
    with start() as node:
        w3 = connect(node.rpc_url)
        yield request.param, w3, deploy_system(w3, w3.eth.accounts[0])


def _sender(w3, tmp_path: Path) -> TxSender:
    errors = RevertDecoder.from_artifacts(compile_contracts())
    return TxSender(w3, dev_account(SENDER), NodeStore(tmp_path / "sender.db"), errors=errors)


def _finalize_call(system, job_id: int) -> bytes:
    return bytes.fromhex(system.market.functions.finalize(job_id)._encode_transaction_data()[2:])


def test_a_call_that_would_revert_is_decoded_and_nothing_is_sent(dev_chain, tmp_path):
    client, w3, system = dev_chain
    sender = _sender(w3, tmp_path)
    nonce = w3.eth.get_transaction_count(sender.address)
    with pytest.raises(TransactionReverted) as caught:
        sender.send("finalize-missing", system.market.address, _finalize_call(system, 99))
    exc = caught.value
    assert (exc.error_name, exc.error_args, exc.tx_hash) == ("JobWrongStatus", {"jobId": 99, "status": 0}, None)
    assert w3.eth.get_transaction_count(sender.address) == nonce, client


def test_a_mined_revert_is_decoded_from_either_answer(dev_chain, tmp_path):
    """With the gas given, nothing estimates first: the transaction is mined and reverts. anvil answers the
    broadcast with its hash; Hardhat answers it with an error that carries the revert data. Either way the sender
    reports the same TransactionReverted, with the mined transaction's hash, and never sends the key again."""
    client, w3, system = dev_chain
    sender = _sender(w3, tmp_path)
    nonce = w3.eth.get_transaction_count(sender.address)
    with pytest.raises(TransactionReverted) as caught:
        sender.send("finalize-missing-mined", system.market.address, _finalize_call(system, 77), gas=200_000)
    exc = caught.value
    assert (exc.error_name, exc.error_args) == ("JobWrongStatus", {"jobId": 77, "status": 0}), client
    assert exc.tx_hash is not None
    receipt = w3.eth.get_transaction_receipt(exc.tx_hash)
    assert receipt["status"] == 0 and receipt["from"] == sender.address
    assert w3.eth.get_transaction_count(sender.address) == nonce + 1
    assert sender.store.sent_tx("finalize-missing-mined").status == TX_MINED
    # the key holds that mined transaction: asked again, the same answer and nothing new on chain
    with pytest.raises(TransactionReverted) as again:
        sender.send("finalize-missing-mined", system.market.address, _finalize_call(system, 77), gas=200_000)
    assert (again.value.error_name, again.value.tx_hash) == ("JobWrongStatus", exc.tx_hash)
    assert w3.eth.get_transaction_count(sender.address) == nonce + 1


def test_an_account_without_funds_is_one_clear_line_on_either_client(market_parties, tmp_path):
    """anvil says "insufficient funds", Hardhat "Sender doesn't have enough funds": the same line either way."""
    client, w3, _, deployment, _ = market_parties
    broke = Requester(w3, deployment, Account.create(), store_path=tmp_path / "broke.db")
    with pytest.raises(RequesterError, match=r"cannot pay for this transaction") as caught:
        broke.register("referee", [TARGET, DRAFT], deployment.deployment_params.min_referee_stake)
    assert "\n" not in str(caught.value), client
    broke.close()


# ---------------------------------------------------------------- the requester's progress


@pytest.fixture(scope="module")
def market_parties(dev_chain):
    """A drafter and a verifier registered (without models: the transactions are sent from dev accounts), and the
    deployment file's view of the chain: (client, w3, system, deployment, (requester, drafter, verifier))."""
    client, w3, system = dev_chain
    requester, drafter, verifier = w3.eth.accounts[1:4]
    registry = system.registry
    start_block = w3.eth.block_number
    send(w3, registry.functions.registerDrafter(DRAFT_MODEL, TARGET_MODEL, WAD // 2, VOCAB), drafter, value=STAKE)
    send(w3, registry.functions.register(ROLE_VERIFIER, [TARGET_MODEL], [VOCAB]), verifier, value=STAKE)
    deployment = Deployment.of_system(w3, system, rpc_url_of(w3), start_block)
    return client, w3, system, deployment, (requester, drafter, verifier)


def _accepted_job(w3, market, parties, max_tokens: int, seed: bytes) -> tuple[int, int]:
    requester, drafter, verifier = parties
    job_id = submit_job(w3, market, requester, drafter, verifier, max_tokens)
    length = P.hash_chain_length(max_tokens)
    send(w3, market.functions.acceptJob(job_id, P.hash_chain(seed, length)), verifier)
    return job_id, length


def test_a_finalize_that_loses_the_race_reports_the_winner(market_parties, tmp_path):
    """The job is Finished when the requester looks, but another account's finalize is already pending: the
    requester's estimate (against the pending block) reverts JobWrongStatus(Finalized), which is the race lost,
    not an error. It waits for the winner's transaction and reports its payments and sender; nothing is sent."""
    client, w3, system, deployment, parties = market_parties
    _, drafter, verifier = parties
    market, seed = system.market, b"\x06" * 32
    job_id, length = _accepted_job(w3, market, parties, 3, seed)
    run_cycle(w3, market, drafter, verifier, job_id, seed, length)  # 3 tokens: the job is Finished
    advance(w3, deployment.deployment_params.challenge_window + 1)
    requester = Requester(w3, deployment, dev_account(SENDER), store_path=tmp_path / "requester.db")
    winner = w3.eth.accounts[6]
    nonce = w3.eth.get_transaction_count(requester.address)
    w3.provider.make_request("evm_setAutomine", [False])
    try:
        winning = market.functions.finalize(job_id).transact({"from": winner, "gas": 300_000})
        timer = threading.Timer(1.0, lambda: w3.provider.make_request("evm_mine", []))
        timer.start()
        tx, payments = requester.finalize(job_id)
        timer.join()
    finally:
        w3.provider.make_request("evm_setAutomine", [True])
    assert payments["already_finalized"] and payments["finalized_by"] == winner, (client, payments)
    assert tx.tx_hash == Web3.to_hex(winning)
    assert payments["drafter"] + payments["verifier"] + payments["alpha_fee"] > 0
    assert w3.eth.get_transaction_count(requester.address) == nonce
    requester.close()


def test_a_cycle_mined_while_the_wait_polls_is_counted_once(market_parties):
    """`Requester.wait` reads the head, then the job's logs: a cycle mined in between was counted twice (once up to
    the newer head, once more from the older head + 1), so the progress bar showed 33/33 tokens for 32. The cycle
    is mined here, for real, at that moment of the first poll."""
    client, w3, system, deployment, parties = market_parties
    _, drafter, verifier = parties
    market, seed = system.market, b"\x05" * 32
    job_id, length = _accepted_job(w3, market, parties, 64, seed)
    mined = []

    class HeadMovesMidPoll(Requester):
        def job_logs(self, *args, **kwargs):
            if not mined:  # the first poll: a cycle lands after its eth_blockNumber, before its eth_getLogs
                mined.append(run_cycle(w3, market, drafter, verifier, job_id, seed, length))
            return super().job_logs(*args, **kwargs)

    counts = []
    with pytest.raises(RequesterError, match="did not finish"):
        HeadMovesMidPoll(w3, deployment).wait(
            job_id, on_cycle=lambda cycle, tokens: counts.append(len(tokens)), timeout=1.5, poll=0.05
        )
    assert counts == [mined[0].accepted + 1], client  # the accepted proposals and the outToken, once


# ---------------------------------------------------------------- the whole flow on a hardhat chain


def test_chain_up_refuses_an_unknown_client(tmp_path):
    clean_error(cli("chain", "up", "--client", "ganache", home=tmp_path), "--client", "anvil", "hardhat")
    assert not (tmp_path / "anvil.pid").exists() and not (tmp_path / "deployment.json").exists()


def _wait_for(predicate, timeout: float, what: str, logs: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            tail = "\n".join(f"{p.name}: {p.read_text(errors='replace')[-1200:]}" for p in sorted(logs.glob("*.log")))
            raise AssertionError(f"{what} within {timeout:.0f}s\n{tail}")
        time.sleep(0.25)


def _txs_from(w3, sender: str, from_block: int) -> list:
    return [
        tx
        for number in range(from_block, w3.eth.block_number + 1)
        for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]
        if tx["from"] == sender
    ]


@pytest.mark.node_processes
def test_job_and_dispute_end_to_end_on_hardhat(tmp_path):
    """chain up --client hardhat → register → serve (6 processes) → submit → dispute --wait → resolve →
    finalize (a serving node finalized first) → SIGTERM → chain down."""
    home = tmp_path / "home"
    up = json.loads(ok(cli("chain", "up", "--client", "hardhat", "--json", home=home)))
    assert up["client"] == "hardhat" and up["chain_id"] == 31337
    pid = up["pid"]
    assert b"hardhat" in Path(f"/proc/{pid}/cmdline").read_bytes()
    nodes = {}
    try:
        deployment = Deployment.load(home / "deployment.json")
        w3 = connect(deployment.rpc_url)
        assert w3.client_version.lower().startswith("hardhat")
        ok(cli_register(home, "drafter", "2", DRAFTER, *DRAFTER_MODELS, "--alpha", "0.5"))
        ok(cli_register(home, "verifier", "2", VERIFIER, "--model", TARGET))
        for dev in REFEREES:
            ok(cli_register(home, "referee", "1", dev, *REFEREE_MODELS))
        nodes = {"drafter": _serve(home, "drafter", DRAFTER), "verifier": _serve(home, "verifier", VERIFIER)}
        nodes.update({f"referee-{dev}": _serve(home, "referee", dev) for dev in REFEREES})

        submitted = cli_process(
            "submit",
            "--mode",
            "onchain",  # per-cycle: the cycles are chain events
            "def fibonacci(n):\n",
            "--max-tokens",
            "16",
            "--gamma",
            "4",
            "--drafter",
            address(DRAFTER),
            "--dev-account",
            REQUESTER,
            "--json",
            "--accept-timeout",
            "120",
            "--timeout",
            "240",
            home=home,
            timeout=300,
        )
        job = json.loads(ok(submitted))
        job_id = job["job_id"]
        assert job["status"] == "Finished" and job["finish_reason"] == "Completed", job
        assert 1 <= len(job["tokens"]) <= 16 and [t for c in job["cycles"] for t in c["output"]] == job["tokens"]

        # a dispute on a binding position of the honest draft: the drafter's node answers (and draws the panel),
        # the referee nodes vote; --wait ends with the round's verdict, exit 0, whoever drew first. The watchdog's
        # draw is sent only while the panel is undrawn; one that still lost the race (the answer landed between
        # its estimate and its broadcast) is mined and reverts, which is no error
        start = w3.eth.block_number
        dispute = ("dispute", job_id, "--cycle", 0, "--index", 0, "--kind", "draft", "--wait", "--timeout", 180)
        info = json.loads(ok(cli(*dispute, "--json", "--dev-account", WATCHDOG, home=home)))
        assert info["status"] == "Appealable" and info["round_result"] == "ChallengerLost", info
        assert info["answer"] is not None and len(info["referees"]) == 3
        disputes = deployment.system(w3).disputes
        open_tx, *draws = _txs_from(w3, address(WATCHDOG), start + 1)
        assert w3.eth.get_transaction_receipt(open_tx["hash"])["status"] == 1 and len(draws) <= 1
        assert all(disputes.decode_function_input(tx["input"])[0].fn_name == "drawReferees" for tx in draws)
        # asked to draw again now, the watchdog's client looks first and sends nothing
        watchdog = Requester(w3, deployment, dev_account(WATCHDOG), store_path=home / "watchdog.db")
        nonce = w3.eth.get_transaction_count(address(WATCHDOG))
        assert watchdog.draw_referees(info["dispute_id"]) is False
        assert w3.eth.get_transaction_count(address(WATCHDOG)) == nonce
        advance(w3, deployment.deployment_params.appeal_period + 1)
        requester = Requester(w3, deployment)
        final = requester.wait_dispute(info["dispute_id"], timeout=120, until_appealable=False)
        assert (final.status, final.outcome, final.faithful_votes) == ("Resolved", "ChallengerLost", 3)

        # after the challenge window a serving node finalizes by itself; the requester's finalize says so, exit 0
        advance(w3, deployment.deployment_params.challenge_window + 1)
        _wait_for(
            lambda: requester.job_view(job_id)["status"] == JobStatus.Finalized,
            60,
            "no node finalized the job",
            home,
        )
        out = ok(cli("finalize", job_id, "--dev-account", REQUESTER, home=home))
        assert f"job {job_id} already finalized (by " in out
        finalizer = out.split("already finalized (by ", 1)[1].split(")")[0]
        assert finalizer in (address(DRAFTER), address(VERIFIER)), out
        for name, process in nodes.items():
            assert process.poll() is None, f"{name} exited early"
    finally:
        stopped_at = time.monotonic()
        codes = processes.stop_all(list(nodes.values()), timeout=20)
        took = time.monotonic() - stopped_at
        down = cli("chain", "down", home=home)
    # SIGKILL after 20 s would show as -9
    assert set(codes) <= {0}, f"nodes did not stop cleanly on SIGTERM within 20 s ({took:.1f} s): {codes}"
    assert f"pid {pid}" in ok(down)
    assert not (home / "anvil.pid").exists() and not (home / "deployment.json").exists()
