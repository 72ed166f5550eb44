"""Reorgs on a real anvil, for the nodes' reorg tests (tests/test_reorgs.py): `reorg(w3, depth)` replaces the chain's
last `depth` blocks with as many new ones through anvil's `anvil_reorg` (params [depth, [[raw tx, block offset],
...]]), the way a competing chain would win: the transactions of the replaced blocks are gone (anvil puts none back
in its pool) unless `keep` names them for the new blocks, in their old order or reordered (`reverse`).

What a node then sees: the same height, other block hashes, its events and transactions above the fork point gone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eth_utils import to_checksum_address
from web3 import Web3


@dataclass(frozen=True)
class Reorged:
    fork: int  # the highest block both chains share
    dropped: list[str]  # hashes of the replaced blocks' transactions that the new chain does not hold
    kept: list[str]  # those it holds again (in the new blocks)


def block_txs(w3: Web3, number: int) -> list[dict]:
    """(hash, from, raw) of block `number`'s transactions, in block order."""
    block = w3.eth.get_block(number, full_transactions=True)
    out = []
    for tx in block["transactions"]:
        raw = w3.provider.make_request("eth_getRawTransactionByHash", [tx["hash"].to_0x_hex()])["result"]
        out.append({"hash": tx["hash"].to_0x_hex(), "from": to_checksum_address(tx["from"]), "raw": raw})
    return out


def reorg(w3: Web3, depth: int, keep: Callable[[dict], bool] = lambda tx: False, reverse: bool = False) -> Reorged:
    """Replace the last `depth` blocks (1 <= depth <= the head) by `depth` new ones. The replaced blocks'
    transactions for which `keep(tx)` holds ({hash, from, raw}) go into the first new block, in their order (or the
    reverse order: `reverse`); the others are dropped. The head's number stays the same."""
    head = w3.eth.block_number
    if not 1 <= depth <= head:
        raise ValueError(f"depth {depth} is not within 1..{head}")
    replaced = [tx for number in range(head - depth + 1, head + 1) for tx in block_txs(w3, number)]
    kept = [tx for tx in replaced if keep(tx)]
    if reverse:
        kept.reverse()
    answer = w3.provider.make_request("anvil_reorg", [depth, [[tx["raw"], 0] for tx in kept]])
    if "error" in answer:
        raise RuntimeError(f"anvil_reorg: {answer['error']}")
    assert w3.eth.block_number == head, "anvil_reorg keeps the chain's height"
    return Reorged(head - depth, [tx["hash"] for tx in replaced if tx not in kept], [tx["hash"] for tx in kept])
