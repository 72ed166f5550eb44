"""node/chain/logs.py on anvil: ranged log queries return exactly what one unbounded query returns.

anvil caps nothing, so a provider's cap is modelled by a fetch that refuses ranges wider than a limit
(the error a capped provider returns); the logs themselves always come from the real chain.
"""

from __future__ import annotations

import pytest
from web3.exceptions import Web3RPCError

from node.chain import logs
from node.chain.contracts import deploy_contract


@pytest.fixture
def counter_history(chain, artifacts):
    """A Counter with 7 increments by two accounts, one block each; returns (counter, first block)."""
    counter = deploy_contract(chain, "Counter", artifacts=artifacts)
    first = chain.eth.block_number
    accounts = chain.eth.accounts[:2]
    for i in range(7):
        tx = counter.functions.increment(i + 1).transact({"from": accounts[i % 2]})
        chain.eth.wait_for_transaction_receipt(tx)
    return counter, first


def amounts(entries) -> list[int]:
    return [entry["args"]["amount"] for entry in entries]


@pytest.mark.parametrize("max_range", [1, 2, 3, 5_000])
def test_event_logs_in_ranges_equal_one_query(counter_history, max_range):
    counter, first = counter_history
    whole = counter.events.Incremented().get_logs(from_block=first)
    assert amounts(whole) == [1, 2, 3, 4, 5, 6, 7]
    assert logs.event_logs(counter.events.Incremented, first, max_range=max_range) == whole


def test_argument_filters_and_an_explicit_end_block(chain, counter_history):
    counter, first = counter_history
    second = chain.eth.accounts[1]
    assert amounts(
        logs.event_logs(counter.events.Incremented, first, argument_filters={"by": second}, max_range=2)
    ) == [2, 4, 6]
    end = first + 3  # the deployment block's successor holds increment 1, and so on
    assert amounts(logs.event_logs(counter.events.Incremented, first, to_block=end, max_range=1)) == [1, 2, 3]


def test_raw_get_logs_in_ranges(chain, counter_history):
    counter, first = counter_history
    query = {"address": counter.address}
    assert logs.get_logs(chain, query, first, max_range=2) == chain.eth.get_logs({**query, "fromBlock": first})


def test_a_range_the_provider_refuses_is_halved_until_it_passes(chain, counter_history):
    counter, first = counter_history
    asked = []

    def capped(low, high):  # a provider that answers at most 2 blocks per query
        asked.append((low, high))
        if high - low + 1 > 2:
            raise Web3RPCError("query exceeds max block range 2")
        return counter.events.Incremented().get_logs(from_block=low, to_block=high)

    head = chain.eth.block_number
    found = logs.in_ranges(capped, first, head, max_range=1_000)
    assert amounts(found) == [1, 2, 3, 4, 5, 6, 7]
    answered = [(low, high) for low, high in asked if high - low + 1 <= 2]
    covered = sorted(block for low, high in answered for block in range(low, high + 1))
    assert covered == list(range(first, head + 1))  # every block exactly once


def test_a_single_block_the_provider_refuses_is_an_error(chain, counter_history):
    _, first = counter_history

    def refusing(low, high):
        raise Web3RPCError("too many results")

    with pytest.raises(Web3RPCError, match="too many results"):
        logs.in_ranges(refusing, first, first + 3)
    with pytest.raises(ValueError, match="max_range"):
        logs.in_ranges(refusing, first, first + 3, max_range=0)
