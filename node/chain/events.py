"""Poll contract events with a block cursor that survives restarts.

Delivery is at-least-once: the cursor (last fully processed block) is saved only after the consumer
has handled every event of a block range, so a crash mid-range replays that range on restart.
Handlers make this exactly-once by skipping logs the store has `seen` (keyed by tx hash and log index)
and marking them in the same store transaction as their own writes.

Reorgs deeper than `confirmations` blocks are not handled; on anvil none happen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from eth_utils import to_hex
from eth_utils.abi import event_abi_to_log_topic
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import Web3RPCError
from web3.types import LogReceipt

from node.chain.client import RetryPolicy, rpc_url_of, with_retries
from node.store import NodeStore


@dataclass(frozen=True)
class ChainEvent:
    contract: str  # the name the poller was given for the emitting contract
    name: str  # event name, e.g. "DraftCommitted"
    args: dict[str, Any]
    address: str
    block_number: int
    log_index: int
    tx_hash: str  # 0x-hex

    @property
    def position(self) -> tuple[int, int]:
        return self.block_number, self.log_index


class EventPoller:
    """Yields the decoded events of `contracts` (name -> web3 contract) in (block, logIndex) order."""

    def __init__(self, w3: Web3, contracts: Mapping[str, Contract], store: NodeStore, name: str, *,
                 start_block: int = 0, chunk_size: int = 1000, confirmations: int = 0,
                 retry: RetryPolicy = RetryPolicy()):
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        self.w3 = w3
        self.store = store
        self.name = name
        self.start_block = start_block
        self.chunk_size = chunk_size
        self.confirmations = confirmations
        self.retry = retry
        self._url = rpc_url_of(w3)
        # (emitting address, topic0) -> (contract name, web3 event) for decoding
        self._decoders: dict[tuple[str, str], tuple[str, Any]] = {}
        for contract_name, contract in contracts.items():
            for entry in contract.abi:
                if entry.get("type") == "event" and not entry.get("anonymous"):
                    topic = to_hex(event_abi_to_log_topic(entry))
                    event = contract.events[entry["name"]]()
                    self._decoders[(contract.address.lower(), topic)] = (contract_name, event)
        self._addresses = sorted({Web3.to_checksum_address(c.address) for c in contracts.values()})
        self._topics = sorted({topic for _, topic in self._decoders})

    @property
    def cursor(self) -> int:
        """Last block whose events were all handled."""
        saved = self.store.cursor(self.name)
        return self.start_block - 1 if saved is None else saved

    def poll(self) -> Iterator[ChainEvent]:
        """Every event since the cursor up to the head (minus confirmations). The cursor moves past a
        chunk only once the consumer asks for the event after that chunk's last one, so stopping early
        (an exception in the handler, a `break`) leaves the unfinished chunk to be delivered again."""
        head = with_retries(lambda: self.w3.eth.block_number, self.retry, self._url) - self.confirmations
        low = self.cursor + 1
        while low <= head:
            high = min(low + self.chunk_size - 1, head)
            yield from self._decoded(self._fetch(low, high))
            self.store.set_cursor(self.name, high)
            low = high + 1

    def drain(self, handler: Callable[[ChainEvent], None]) -> int:
        """Hand every new event to `handler`; returns how many were handled."""
        handled = 0
        for event in self.poll():
            handler(event)
            handled += 1
        return handled

    def _fetch(self, low: int, high: int) -> list[LogReceipt]:
        if not self._addresses or not self._topics:
            return []
        query = {"fromBlock": low, "toBlock": high, "address": self._addresses, "topics": [self._topics]}
        try:
            return list(with_retries(lambda: self.w3.eth.get_logs(query), self.retry, self._url))
        except Web3RPCError:
            # Providers cap a query's range or result count; halve until it fits.
            if low == high:
                raise
            middle = (low + high) // 2
            return self._fetch(low, middle) + self._fetch(middle + 1, high)

    def _decoded(self, logs: list[LogReceipt]) -> list[ChainEvent]:
        events = []
        for log in sorted(logs, key=lambda entry: (entry["blockNumber"], entry["logIndex"])):
            if not log["topics"]:
                continue
            decoder = self._decoders.get((log["address"].lower(), to_hex(log["topics"][0])))
            if decoder is None:
                continue  # another contract's event with a colliding filter match
            contract_name, event = decoder
            data = event.process_log(log)
            events.append(ChainEvent(
                contract=contract_name, name=data["event"], args=dict(data["args"]), address=log["address"],
                block_number=log["blockNumber"], log_index=log["logIndex"], tx_hash=to_hex(log["transactionHash"]),
            ))
        return events
