"""The chain client against real anvil: exactly-once sends, nonces, outages, revert decoding, event polling."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.exceptions import Web3RPCError

from node.chain.anvil import LOWEST_PORT, free_port, lowest_ephemeral_port, start_anvil
from node.chain.contracts import deploy_contract
from node.chain.errors import ChainUnavailable, TransactionRejected, TransactionReverted
from node.chain.events import ChainEvent, EventPoller
from node.chain.revert_decoder import RevertDecoder
from node.chain.rpc import RetryPolicy, connect
from node.chain.sender import TxSender
from node.store import TX_MINED, TX_SIGNED, IdempotencyConflict, NodeStore

FAST_RETRY = RetryPolicy(attempts=4, first_delay=0.05, max_delay=0.2)
# anvil's first dev account: funded in every fresh anvil, so usable on a chain we restart
DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"


class Crash(BaseException):
    """Stands in for the process dying: a BaseException, so no `except Exception` swallows it."""


@pytest.fixture
def store(tmp_path):
    with NodeStore(tmp_path / "node.db") as node_store:
        yield node_store


@pytest.fixture
def account(chain) -> LocalAccount:
    """A fresh funded key, so nonces start at 0 and balances are easy to check."""
    fresh = Account.create()
    chain.eth.send_transaction({"from": chain.eth.accounts[0], "to": fresh.address, "value": 10**19})
    return fresh


@pytest.fixture
def recipient() -> str:
    return Account.create().address


@pytest.fixture
def decoder(artifacts) -> RevertDecoder:
    return RevertDecoder.from_artifacts(artifacts)


@pytest.fixture
def new_sender(chain, account, store, decoder):
    """Builds a sender over the test's store; calling it twice models a node restart."""

    def build(**options) -> TxSender:
        return TxSender(chain, account, store, errors=decoder, retry=FAST_RETRY, **options)

    return build


@pytest.fixture
def counter(chain, artifacts):
    return deploy_contract(chain, "Counter", artifacts=artifacts)


@contextlib.contextmanager
def automine_off(w3: Web3):
    w3.provider.make_request("evm_setAutomine", [False])
    try:
        yield
    finally:
        w3.provider.make_request("evm_setAutomine", [True])


def mine(w3: Web3) -> None:
    w3.provider.make_request("evm_mine", [])


# --- sending ---------------------------------------------------------------------------------------


def test_sends_a_transfer_and_a_contract_call(chain, new_sender, store, recipient, counter):
    sender = new_sender()
    transfer = sender.send("pay:1", recipient, value=12345)
    call = sender.send_call("count:1", counter.functions.increment(7))

    assert transfer["status"] == call["status"] == 1
    assert chain.eth.get_balance(recipient) == 12345
    assert counter.functions.count().call() == 7
    assert store.sent_tx("pay:1").status == TX_MINED
    assert chain.eth.get_transaction(call["transactionHash"])["type"] == 2  # EIP-1559 fees


def test_many_quick_sends_get_consecutive_nonces(chain, new_sender, account, recipient):
    sender = new_sender()
    with automine_off(chain):
        hashes = [sender.submit(f"pay:{i}", recipient, value=i + 1) for i in range(25)]
        mine(chain)
    receipts = [sender.wait_for_receipt(f"pay:{i}") for i in range(25)]

    nonces = [chain.eth.get_transaction(h)["nonce"] for h in hashes]
    assert nonces == list(range(25))
    assert all(r["status"] == 1 for r in receipts)
    assert chain.eth.get_transaction_count(account.address) == 25
    assert chain.eth.get_balance(recipient) == sum(range(1, 26))


def test_same_key_sent_twice_lands_once(chain, new_sender, account, recipient):
    sender = new_sender()
    first = sender.send("pay:once", recipient, value=10)
    second = sender.send("pay:once", recipient, value=10)

    assert first["transactionHash"] == second["transactionHash"]
    assert chain.eth.get_transaction_count(account.address) == 1
    assert chain.eth.get_balance(recipient) == 10


def test_key_reused_for_another_request_is_refused(new_sender, recipient):
    sender = new_sender()
    sender.send("pay:x", recipient, value=1)
    with pytest.raises(IdempotencyConflict):
        sender.send("pay:x", recipient, value=2)


def test_crash_after_recording_before_broadcast_sends_the_recorded_tx(
    chain, new_sender, store, account, recipient, monkeypatch
):
    def crash(self, record):
        raise Crash

    monkeypatch.setattr(TxSender, "_broadcast", crash)
    with pytest.raises(Crash):
        new_sender().submit("pay:crash", recipient, value=99)
    monkeypatch.undo()
    recorded = store.sent_tx("pay:crash")
    assert recorded.status == TX_SIGNED
    assert chain.eth.get_transaction_count(account.address) == 0  # it never left the process

    receipt = new_sender().send("pay:crash", recipient, value=99)  # the restarted node

    assert receipt["transactionHash"].to_0x_hex() == recorded.tx_hash
    assert chain.eth.get_transaction_count(account.address) == 1
    assert chain.eth.get_balance(recipient) == 99


def test_crash_before_receipt_does_not_send_again(chain, new_sender, store, account, recipient):
    with automine_off(chain):
        tx_hash = new_sender().submit("pay:pending", recipient, value=5)
        # the node dies here; its replacement starts while the tx is still pending
        restarted = new_sender()
        mine(chain)
    receipt = restarted.send("pay:pending", recipient, value=5)
    again = new_sender().send("pay:pending", recipient, value=5)

    assert receipt["transactionHash"].to_0x_hex() == again["transactionHash"].to_0x_hex() == tx_hash
    assert chain.eth.get_transaction_count(account.address) == 1
    assert chain.eth.get_balance(recipient) == 5


def test_dropped_tx_is_rebroadcast_with_the_same_hash(chain, new_sender, account, recipient):
    sender = new_sender()
    with automine_off(chain):
        tx_hash = sender.submit("pay:dropped", recipient, value=3)
        chain.provider.make_request("anvil_dropTransaction", [tx_hash])
        assert chain.eth.get_transaction_count(account.address, "pending") == 0
    receipt = sender.send("pay:dropped", recipient, value=3)

    assert receipt["transactionHash"].to_0x_hex() == tx_hash
    assert chain.eth.get_transaction_count(account.address) == 1
    assert chain.eth.get_balance(recipient) == 3


def test_restart_rebroadcasts_dropped_txs_before_using_their_nonces(chain, new_sender, account, recipient):
    with automine_off(chain):
        first = new_sender().submit("pay:a", recipient, value=1)
        chain.provider.make_request("anvil_dropTransaction", [first])
        restarted = new_sender()  # must put "pay:a" back, or "pay:b" would take nonce 0
        second = restarted.submit("pay:b", recipient, value=2)
        mine(chain)

    assert chain.eth.get_transaction(first)["nonce"] == 0
    assert chain.eth.get_transaction(second)["nonce"] == 1
    assert restarted.wait_for_receipt("pay:a")["status"] == 1
    assert chain.eth.get_balance(recipient) == 3


def test_tx_whose_nonce_was_taken_elsewhere_is_rebuilt_once(chain, new_sender, store, account, recipient):
    sender = new_sender()
    with automine_off(chain):
        dropped = sender.submit("pay:lost", recipient, value=4)
        chain.provider.make_request("anvil_dropTransaction", [dropped])
    # Another signer with the same key uses nonce 0 for something else.
    other = account.sign_transaction(
        {
            "to": account.address,
            "value": 0,
            "gas": 21000,
            "nonce": 0,
            "maxFeePerGas": 10**10,
            "maxPriorityFeePerGas": 10**9,
            "chainId": 31337,
        }
    )
    chain.eth.send_raw_transaction(other.raw_transaction)

    receipt = sender.send("pay:lost", recipient, value=4)

    assert receipt["transactionHash"].to_0x_hex() != dropped
    assert chain.eth.get_transaction(receipt["transactionHash"])["nonce"] == 1
    assert chain.eth.get_transaction_count(account.address) == 2
    assert chain.eth.get_balance(recipient) == 4
    assert store.sent_tx("pay:lost").status == TX_MINED


def test_dropped_while_waiting_is_rebroadcast_by_the_waiter(chain, new_sender, recipient):
    sender = new_sender(rebroadcast_every=0.1)
    with automine_off(chain):
        tx_hash = sender.submit("pay:evicted", recipient, value=6)
        chain.provider.make_request("anvil_dropTransaction", [tx_hash])
    receipt = sender.wait_for_receipt("pay:evicted", timeout=5)
    assert receipt["transactionHash"].to_0x_hex() == tx_hash
    assert chain.eth.get_balance(recipient) == 6


def test_node_refusal_is_a_clear_error_and_frees_the_nonce(chain, new_sender, store, account, recipient):
    sender = new_sender()
    with pytest.raises(TransactionRejected, match="pay:estimate"):
        sender.send("pay:estimate", recipient, value=10**30)  # refused while estimating gas
    with pytest.raises(TransactionRejected, match=r"(?i)insufficient funds"):
        sender.send("pay:broadcast", recipient, value=10**30, gas=21_000)  # refused at broadcast
    assert store.sent_tx("pay:broadcast").dead

    ok = sender.send("pay:ok", recipient, value=1)
    assert chain.eth.get_transaction(ok["transactionHash"])["nonce"] == 0  # the refused tx's nonce was reused
    assert chain.eth.get_transaction_count(account.address) == 1


# --- reverts ---------------------------------------------------------------------------------------


def test_own_signing_equals_eth_account():
    import random

    from eth_utils import to_checksum_address

    from node.chain.sender import sign_transaction

    key = Account.create()
    rng = random.Random(7)
    for _ in range(100):
        tx = {
            "to": to_checksum_address("0x" + rng.randbytes(20).hex()),
            "value": rng.choice([0, 1, rng.getrandbits(90)]),
            "data": rng.randbytes(rng.choice([0, 1, 55, 56, 700])),
            "chainId": rng.choice([1, 31337, 2**40]),
            "gas": rng.randint(21_000, 30_000_000),
            "maxFeePerGas": rng.getrandbits(45),
            "maxPriorityFeePerGas": rng.getrandbits(35),
            "nonce": rng.choice([0, 127, 128, 2**32]),
            "type": 2,
        }
        signed = key.sign_transaction(tx)
        assert sign_transaction(key, tx) == (bytes(signed.raw_transaction), bytes(signed.hash))
    legacy = {"to": tx["to"], "value": 1, "data": b"", "gas": 21_000, "gasPrice": 10**9, "nonce": 3, "chainId": 1}
    signed = key.sign_transaction(legacy)  # not EIP-1559: eth-account signs it
    assert sign_transaction(key, legacy) == (bytes(signed.raw_transaction), bytes(signed.hash))


def test_reused_estimate_skips_estimation_for_calls_of_a_known_shape(chain, new_sender, counter, monkeypatch):
    sender = new_sender()
    estimates = []
    estimate = TxSender._estimate_gas
    monkeypatch.setattr(
        TxSender, "_estimate_gas", lambda self, key, tx: estimates.append(key) or estimate(self, key, tx)
    )
    data = bytes.fromhex(counter.functions.increment(3)._encode_transaction_data()[2:])
    sender.submit("inc:0", counter.address, data, reuse_estimate=True)  # first of its shape: estimated
    sender.submit("inc:1", counter.address, data, reuse_estimate=True)  # same shape: the estimate is reused
    sender.submit("inc:2", counter.address, data)  # not asked for: estimated
    assert estimates == ["inc:0", "inc:2"]
    for key in ("inc:0", "inc:1", "inc:2"):
        assert sender.wait_for_receipt(key, timeout=10)["status"] == 1
    assert counter.functions.count().call() == 9


def test_revert_at_estimation_names_the_custom_error(chain, new_sender, store, account, counter):
    sender = new_sender()
    with pytest.raises(TransactionReverted) as too_large:
        sender.send_call("count:big", counter.functions.increment(500))
    with pytest.raises(TransactionReverted) as zero:
        sender.send_call("count:zero", counter.functions.increment(0))
    with pytest.raises(TransactionReverted) as not_owner:
        sender.send_call("count:reset", counter.functions.reset())

    assert too_large.value.error_name == "TooLarge"
    assert too_large.value.error_args == {"amount": 500, "limit": 100}
    assert "TooLarge(amount=500, limit=100)" in str(too_large.value)
    assert (zero.value.error_name, zero.value.error_args) == ("ZeroAmount", {})
    assert not_owner.value.error_args == {"caller": account.address}
    assert store.sent_tx("count:big") is None  # nothing signed, no nonce used
    assert chain.eth.get_transaction_count(account.address) == 0


def test_mined_revert_is_decoded_by_replay(chain, new_sender, counter):
    sender = new_sender()
    with pytest.raises(TransactionReverted) as reverted:
        sender.send_call("count:big", counter.functions.increment(500), gas=100_000)  # skips estimation
    assert reverted.value.error_name == "TooLarge"
    assert reverted.value.tx_hash is not None
    assert chain.eth.get_transaction_receipt(reverted.value.tx_hash)["status"] == 0


def test_decoder_reports_unknown_selectors_and_string_reverts(decoder):
    assert decoder.decode(bytes.fromhex("deadbeef")).name is None
    error_string = Web3.keccak(text="Error(string)")[:4] + bytes.fromhex(
        "0000000000000000000000000000000000000000000000000000000000000020"
        "0000000000000000000000000000000000000000000000000000000000000002"
        "6869000000000000000000000000000000000000000000000000000000000000"
    )
    assert decoder.decode(error_string).args == {"message": "hi"}


# --- outages ---------------------------------------------------------------------------------------


@pytest.fixture
def spare_anvil():
    """A chain of its own that a test may stop and restart; `nodes` holds every incarnation."""
    nodes = [start_anvil()]
    yield nodes
    for node in nodes:
        node.stop()


def test_send_rides_out_a_temporary_outage(spare_anvil, tmp_path):
    node = spare_anvil[0]
    w3 = connect(node.rpc_url)
    patient = RetryPolicy(attempts=12, first_delay=0.1, max_delay=0.5)
    recipient = Account.create().address
    with NodeStore(tmp_path / "node.db") as store:
        sender = TxSender(w3, Account.from_key(DEV_KEY), store, retry=patient)
        node.stop()
        restart = threading.Timer(0.7, lambda: spare_anvil.append(start_anvil(port=node.port)))
        restart.start()
        started = time.monotonic()
        receipt = sender.send("pay:outage", recipient, value=77)
        restart.join()

    assert receipt["status"] == 1
    assert time.monotonic() - started >= 0.5  # it really waited for the restart
    assert w3.eth.get_balance(recipient) == 77


def test_tx_lost_with_the_node_is_rebroadcast_after_it_returns(spare_anvil, tmp_path):
    node = spare_anvil[0]
    w3 = connect(node.rpc_url, retry=FAST_RETRY)  # the provider gives up as fast as the sender
    account = Account.from_key(DEV_KEY)
    recipient = Account.create().address
    with NodeStore(tmp_path / "node.db") as store:
        sender = TxSender(w3, account, store, retry=FAST_RETRY)
        w3.provider.make_request("evm_setAutomine", [False])
        tx_hash = sender.submit("pay:lost", recipient, value=8)
        node.stop()

        with pytest.raises(ChainUnavailable) as down:
            sender.wait_for_receipt("pay:lost", timeout=5)
        assert node.rpc_url in str(down.value)

        spare_anvil.append(start_anvil(port=node.port))  # a fresh chain: the pending tx is gone
        receipt = sender.send("pay:lost", recipient, value=8)

    assert receipt["transactionHash"].to_0x_hex() == tx_hash
    assert w3.eth.get_transaction_count(account.address) == 1
    assert w3.eth.get_balance(recipient) == 8


def test_a_free_port_lies_below_the_kernels_outgoing_port_range_and_binds():
    """free_port's ports are bound later (anvil, --listen): one inside the ephemeral range could be taken by any
    outgoing connection first (a fresh-clone run beside CPU hogs failed a verifier's --listen so)."""
    low = lowest_ephemeral_port()
    ports = {free_port() for _ in range(20)}
    assert len(ports) > 1 and all(LOWEST_PORT <= port < low for port in ports)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", ports.pop()))


def test_rpc_that_stays_down_is_a_clear_error(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(ChainUnavailable, match=r"127\.0\.0\.1"):
        connect(url, wait=0.5)
    assert time.monotonic() - started < 3

    dead = Web3(Web3.HTTPProvider(url, exception_retry_configuration=None))
    with NodeStore(tmp_path / "node.db") as store, pytest.raises(ChainUnavailable) as down:
        TxSender(dead, Account.from_key(DEV_KEY), store, retry=FAST_RETRY)
    assert down.value.url == url


# --- events ----------------------------------------------------------------------------------------


def increment_many(sender: TxSender, counter, count: int, prefix: str) -> None:
    for i in range(count):
        sender.send_call(f"{prefix}:{i}", counter.functions.increment(i + 1))


def test_poller_yields_every_event_in_order_across_chunks(chain, new_sender, store, counter):
    start = chain.eth.block_number
    sender = new_sender()
    increment_many(sender, counter, 11, "inc")
    poller = EventPoller(chain, {"counter": counter}, store, "counter", start_block=start, chunk_size=3)

    events = list(poller.poll())

    assert [e.args["amount"] for e in events] == list(range(1, 12))
    assert [e.position for e in events] == sorted(e.position for e in events)
    assert events[-1].args["newCount"] == sum(range(1, 12))
    assert all(isinstance(e, ChainEvent) and e.contract == "counter" and e.name == "Incremented" for e in events)
    assert poller.cursor == chain.eth.block_number
    assert list(poller.poll()) == []  # nothing new


def test_poller_delivers_each_event_once_across_a_restart(chain, new_sender, store, counter):
    start = chain.eth.block_number
    sender = new_sender()
    increment_many(sender, counter, 10, "inc")
    handled: list[tuple[int, int]] = []
    deliveries: list[tuple[int, int]] = []

    def handler(crash_after: int | None = None):
        def handle(event: ChainEvent) -> None:
            deliveries.append(event.position)
            if store.seen(event, "test"):
                return
            if crash_after is not None and len(handled) == crash_after:
                raise Crash
            with store.transaction():
                store.mark_seen(event, "test")
                handled.append(event.position)

        return handle

    def new_poller() -> EventPoller:
        return EventPoller(chain, {"counter": counter}, store, "counter", start_block=start, chunk_size=4)

    with pytest.raises(Crash):
        new_poller().drain(handler(crash_after=6))
    new_poller().drain(handler())
    increment_many(sender, counter, 3, "more")
    assert new_poller().drain(handler()) == 3

    assert len(handled) == len(set(handled)) == 13
    assert handled == sorted(handled)
    assert len(deliveries) > 13  # the interrupted chunk was delivered again (at-least-once)...
    assert len(deliveries) - 13 <= 4 + 1  # ...but only that chunk (plus the event that crashed)


def test_poller_waits_for_confirmations(chain, new_sender, store, counter):
    start = chain.eth.block_number
    increment_many(new_sender(), counter, 5, "inc")
    poller = EventPoller(chain, {"counter": counter}, store, "confirmed", start_block=start, confirmations=2)
    assert len(list(poller.poll())) == 3
    mine(chain)
    mine(chain)
    assert len(list(poller.poll())) == 2


def test_poller_splits_ranges_the_rpc_refuses(chain, new_sender, store, counter, monkeypatch):
    start = chain.eth.block_number
    increment_many(new_sender(), counter, 9, "inc")
    real_get_logs = chain.eth.get_logs

    def capped_get_logs(query):
        if query["toBlock"] - query["fromBlock"] >= 2:
            raise Web3RPCError("query exceeds max block range 2")
        return real_get_logs(query)

    monkeypatch.setattr(chain.eth, "get_logs", capped_get_logs)
    poller = EventPoller(chain, {"counter": counter}, store, "capped", start_block=start, chunk_size=100)
    assert [e.args["amount"] for e in poller.poll()] == list(range(1, 10))
