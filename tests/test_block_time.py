"""`verispec chain up --block-time N`: interval mining on a real anvil (and Hardhat's node), instant mining by default.

With N > 0 blocks come on their own, about every N s, and a transaction waits in the mempool for the next one; with
N = 0 (the default) nothing is mined without a transaction and each transaction is mined as it arrives. A bad N is
one error line and starts nothing.
"""

from __future__ import annotations

import itertools
import json
import time

import pytest
from web3 import Web3

from node.chain.anvil import free_port
from tests.test_cli import clean_error, cli, cli_process, ok

# its own chains or scripts in OS processes, waited on (tens of seconds): not in `make test-fast`
pytestmark = pytest.mark.long_run


def up(home, *args):
    info = json.loads(ok(cli_process("chain", "up", "--port", free_port(), "--json", *args, home=home, timeout=120)))
    return info, Web3(Web3.HTTPProvider(info["rpc_url"]))


def blocks_over(w3: Web3, seconds: float) -> int:
    start = w3.eth.block_number
    time.sleep(seconds)
    return w3.eth.block_number - start


def assert_a_block_a_second(w3: Web3, seconds: float) -> None:
    """Over a wait of about `seconds`, with no transaction sent, about one block a second came: the count is judged
    against the time that passed (a loaded machine oversleeps), within 1.5 blocks for the two eth_blockNumber round
    trips and the phase of the block timer."""
    before = time.monotonic()
    start = w3.eth.block_number
    after_first = time.monotonic()
    time.sleep(seconds)
    before_last = time.monotonic()
    blocks = w3.eth.block_number - start
    shortest, longest = before_last - after_first, time.monotonic() - before
    assert shortest - 1.5 <= blocks <= longest + 1.5, (blocks, shortest, longest)


def send_and_time(w3: Web3) -> tuple[float, int]:
    """Seconds from sending a plain transfer to its receipt, and how many blocks later than the head before the send
    it was mined (1: the next block). Blocks, not seconds, say how mining went: a loaded machine stretches seconds."""
    accounts = w3.eth.accounts
    head, start = w3.eth.block_number, time.monotonic()
    tx = w3.eth.send_transaction({"from": accounts[1], "to": accounts[2], "value": 1})
    receipt = w3.eth.wait_for_transaction_receipt(tx, timeout=120, poll_latency=0.02)
    return time.monotonic() - start, receipt["blockNumber"] - head


@pytest.mark.parametrize("client", ["anvil", "hardhat"])
def test_blocks_advance_on_their_own_every_n_seconds(tmp_path, client):
    home = tmp_path / client
    info, w3 = up(home, "--client", client, "--block-time", "1")
    try:
        assert info["block_time_s"] == 1 and info["client"] == client
        assert w3.eth.get_code(info["addresses"]["InferenceMarket"])  # deployed before interval mining began
        assert_a_block_a_second(w3, 4.2)  # 3 to 5 blocks on an idle machine
        # a transaction waits for the next block mined after it arrives: it is not mined at once (on average half a
        # block time), and it lands within the blocks that the time it took allows (a block a second, and the next one)
        sent = [send_and_time(w3) for _ in range(3)]
        assert sum(s for s, _ in sent) / len(sent) > 0.1, sent
        assert all(1 <= blocks <= seconds + 2 for seconds, blocks in sent), sent
        stamps = [w3.eth.get_block(n)["timestamp"] for n in range(w3.eth.block_number - 3, w3.eth.block_number + 1)]
        assert all(b - a in (0, 1, 2) for a, b in itertools.pairwise(stamps)) and stamps[-1] - stamps[0] >= 2, stamps
    finally:
        ok(cli("chain", "down", home=home))


def test_instant_mining_is_the_default(tmp_path):
    home = tmp_path / "instant"
    info, w3 = up(home)
    try:
        assert info["block_time_s"] == 0
        assert blocks_over(w3, 1.5) == 0  # no block without a transaction
        before = w3.eth.block_number
        sent = [send_and_time(w3) for _ in range(3)]
        # one block per transaction, mined as it arrives: each in the very next block, and no timer's block between
        assert w3.eth.block_number == before + 3 and all(blocks == 1 for _, blocks in sent), sent
    finally:
        ok(cli("chain", "down", home=home))


@pytest.mark.parametrize("bad", ["-1", "abc", "1.5", "", "3601", "1e9", "99999999999999999999"])
def test_a_bad_block_time_is_one_line_and_starts_nothing(tmp_path, bad):
    home = tmp_path / "bad"
    port = free_port()
    clean_error(cli("chain", "up", "--port", port, "--block-time", bad, home=home), "--block-time", "seconds")
    assert not (home / "anvil.pid").exists() and not (home / "deployment.json").exists()
    assert not Web3(Web3.HTTPProvider(f"http://127.0.0.1:{port}")).is_connected()


@pytest.mark.parametrize("client", ["anvil", "hardhat"])
def test_set_block_time_switches_a_running_chain_both_ways(client):
    from node.chain.anvil import running_anvil, set_block_time
    from node.chain.hardhat import running_hardhat

    with (running_anvil if client == "anvil" else running_hardhat)() as chain:
        w3 = Web3(Web3.HTTPProvider(chain.rpc_url))
        set_block_time(chain.rpc_url, 1)
        assert_a_block_a_second(w3, 2.2)  # 1 to 3 blocks on an idle machine
        set_block_time(chain.rpc_url, 0)  # back to a block per transaction: none on their own, each tx at once
        assert blocks_over(w3, 1.2) == 0
        before = w3.eth.block_number
        assert all(send_and_time(w3)[1] == 1 for _ in range(2)) and w3.eth.block_number == before + 2
        with pytest.raises(ValueError, match="whole seconds"):
            set_block_time(chain.rpc_url, -1)
