"""Log queries that any JSON-RPC provider answers, however long the chain.

Public providers cap eth_getLogs: a block range (often 1,000–10,000 blocks) or a result count. A
history read from a deployment's start block to the head is therefore asked for in ranges of at most
`max_range` blocks, and a range the provider still refuses is halved until it passes (a single block
that is refused is a real error and raised). anvil caps nothing, so locally this is one query.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from web3 import Web3
from web3.exceptions import Web3RPCError

MAX_BLOCK_RANGE = 5_000  # below the caps of the common providers that cap by range

T = TypeVar("T")


def in_ranges(
    fetch: Callable[[int, int], list[T]], from_block: int, to_block: int, max_range: int = MAX_BLOCK_RANGE
) -> list[T]:
    """fetch(low, high) over [from_block, to_block] in consecutive ranges of at most `max_range` blocks.

    A range the provider refuses (Web3RPCError: too many blocks or results) is split in two halves.
    """
    if max_range < 1:
        raise ValueError(f"max_range must be >= 1, got {max_range}")
    out: list[T] = []
    low = from_block
    while low <= to_block:
        high = min(low + max_range - 1, to_block)
        out.extend(fetch_in_halves(fetch, low, high))
        low = high + 1
    return out


def fetch_in_halves(fetch: Callable[[int, int], list[T]], low: int, high: int) -> list[T]:
    """fetch(low, high), or, when the provider refuses it (Web3RPCError), the two halves of the range, recursively."""
    try:
        return list(fetch(low, high))
    except Web3RPCError:
        if low == high:
            raise
        middle = (low + high) // 2
        return fetch_in_halves(fetch, low, middle) + fetch_in_halves(fetch, middle + 1, high)


def _head_if_none(w3: Web3, to_block: int | None) -> int:
    return w3.eth.block_number if to_block is None else to_block


def get_logs(
    w3: Web3, query: dict[str, Any], from_block: int, to_block: int | None = None, max_range: int = MAX_BLOCK_RANGE
) -> list:
    """Raw eth_getLogs of `query` (address, topics) from `from_block` to `to_block` (default: the head)."""
    return in_ranges(
        lambda low, high: w3.eth.get_logs({**query, "fromBlock": low, "toBlock": high}),
        from_block,
        _head_if_none(w3, to_block),
        max_range,
    )


def event_logs(
    event,
    from_block: int,
    to_block: int | None = None,
    argument_filters: dict | None = None,
    max_range: int = MAX_BLOCK_RANGE,
) -> list:
    """Decoded logs of a contract event (`contract.events.Name`), in (block, log index) order."""
    logs = in_ranges(
        lambda low, high: event().get_logs(argument_filters=argument_filters or None, from_block=low, to_block=high),
        from_block,
        _head_if_none(event.w3, to_block),
        max_range,
    )
    return sorted(logs, key=lambda log: (log["blockNumber"], log["logIndex"]))
