"""Poll contract events with a block cursor that survives restarts.

Delivery is at-least-once: the cursor (last fully processed block) is saved only after the consumer
has handled every event of a block range, so a crash mid-range replays that range on restart.
Handlers make this exactly-once by skipping logs the store has `seen` (keyed by tx hash and log index)
and marking them in the same store transaction as their own writes.

`defer_cursor=True` keeps the advanced cursor in memory until `flush()` (a node loop flushes it when it
is idle, in one store transaction with its other deferred writes, so that a busy cycle pays no extra
fsync): a crash then replays the events since the last flush, which at-least-once delivery allows.
`events=` restricts the query to the events the consumer handles (fewer logs fetched and decoded).

`HeadWaker` shortens a node's wait for the next poll: a websocket subscription to new block headers
wakes it when a block arrives. It is a wake-up signal only; events are still read by polling.

`confirmations=N` delivers an event only once N blocks are on top of its block (head - block >= N).

Reorgs: the poller remembers the hashes of the last `keep_blocks` blocks it processed up to (in the store, with the
cursor). When the chain's block at the cursor has another hash (or is gone), it finds the fork point (the highest
remembered block the chain still has), rewinds its cursor there (a saved cursor below it stays), forgets the
processed logs above it, and calls `on_reorg(fork_block, since)` before it delivers anything again (`since`: the
wall time the poller first saw the fork block, or None when no remembered block is left on the chain: the poller
then replays from `start_block`).
The events above the fork point are then delivered again as the new chain has them. A reorg is noticed on the
first poll that reads a new block (a new block's parent must be the block remembered below it, else the cursor
block's hash is compared), and at most `reorg_check_s` after one that kept the chain's height (anvil_reorg). A new
block's hashes come from `headers` (the head waker's announcements: no round trip) when it has them; the periodic
comparison always asks the chain, and a log whose block hash is not the announced one makes the next poll compare.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from eth_abi import decode as abi_decode
from eth_utils import to_checksum_address, to_hex
from eth_utils.abi import event_abi_to_log_topic
from web3 import Web3
from web3.contract import Contract
from web3.types import LogReceipt

from node.chain.logs import fetch_in_halves
from node.chain.rpc import RetryPolicy, rpc_url_of, with_retries
from node.store import NodeStore

log = logging.getLogger("verispec.events")

_PLAIN_TYPE = re.compile(r"^(u?int[0-9]*|bytes[0-9]*|bool|address|string)$")


def fast_decoder(entry: dict) -> Callable[[Any], dict[str, Any]] | None:
    """A decoder of one event's logs into its args (as web3's `process_log` gives them: ints, bytes, str, bool,
    checksummed addresses) straight with eth_abi, for events whose arguments are all plain (no tuples, no
    arrays, no hashed indexed strings or bytes); None for any other event (web3 decodes those). web3's
    decoder sits on every node's reaction to the other party's transaction (its cost: docs/node.md, "Measured
    costs")."""
    inputs = entry.get("inputs", [])
    if entry.get("anonymous") or any(not _PLAIN_TYPE.match(i["type"]) for i in inputs):
        return None
    indexed = [(i["name"], i["type"]) for i in inputs if i.get("indexed")]
    if any(t in ("bytes", "string") for _, t in indexed):
        return None  # the topic holds a hash, not the value
    plain = [(i["name"], i["type"]) for i in inputs if not i.get("indexed")]
    data_types = [t for _, t in plain]
    order = [i["name"] for i in inputs]

    def decode(log) -> dict[str, Any]:
        topics = log["topics"]
        if len(topics) != len(indexed) + 1:
            raise ValueError("topic count does not match the event")
        values: dict[str, Any] = {}
        for (name, typ), topic in zip(indexed, topics[1:]):
            values[name] = abi_decode([typ], bytes(topic))[0]
        for (name, _), value in zip(plain, abi_decode(data_types, bytes(log["data"]))):
            values[name] = value
        for name, typ in indexed + plain:
            if typ == "address":
                values[name] = to_checksum_address(values[name])
        return {name: values[name] for name in order}

    return decode


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

    def __init__(
        self,
        w3: Web3,
        contracts: Mapping[str, Contract],
        store: NodeStore,
        name: str,
        *,
        start_block: int = 0,
        chunk_size: int = 1000,
        confirmations: int = 0,
        retry: RetryPolicy = RetryPolicy(),
        events: Iterable[tuple[str, str]] | None = None,
        defer_cursor: bool = False,
        on_reorg: Callable[[int, float | None], None] | None = None,
        keep_blocks: int = 128,
        reorg_check_s: float = 1.0,
    ):
        """`events`: the (contract name, event name) pairs to deliver; None delivers every event of `contracts`.
        `on_reorg(fork_block, since)`: called when a reorg replaced blocks the poller had processed (module doc)."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        if confirmations < 0:
            raise ValueError("confirmations must be at least 0")
        if keep_blocks < 2:
            raise ValueError("keep_blocks must be at least 2")
        self.w3 = w3
        self.store = store
        self.name = name
        self.start_block = start_block
        self.chunk_size = chunk_size
        self.confirmations = confirmations
        self.retry = retry
        self.defer_cursor = defer_cursor
        self._pending_cursor: int | None = None  # advanced but not yet saved (defer_cursor)
        self.head: int | None = None  # the chain head the last poll saw
        self.on_reorg = on_reorg
        self.keep_blocks = keep_blocks
        self.reorg_check_s = reorg_check_s
        self.reorgs: list[int] = []  # the fork points of the reorgs seen (diagnostics, tests)
        self._blocks = store.poller_blocks(name)  # (number, hash, seen_at), oldest first: saved, then unsaved
        self._unsaved_blocks: list[tuple[int, str, float]] = []  # remembered but not yet saved (defer_cursor)
        self._checked_at = time.monotonic()  # when the cursor block's hash was last compared with the chain's
        self._suspect = False  # something in the last poll hinted at a reorg: compare at the next one
        # number -> (hash, parent hash) of a block announced without a round trip (`HeadWaker.header`), or None
        self.headers: Callable[[int], tuple[str, str] | None] | None = None
        wanted = None if events is None else {tuple(e) for e in events}
        self._url = rpc_url_of(w3)
        # (emitting address, topic0) -> (contract name, web3 event, fast decoder or None) for decoding
        self._decoders: dict[tuple[str, str], tuple[str, Any, Any]] = {}
        for contract_name, contract in contracts.items():
            for entry in contract.abi:
                if (
                    entry.get("type") == "event"
                    and not entry.get("anonymous")
                    and (wanted is None or (contract_name, entry["name"]) in wanted)
                ):
                    topic = to_hex(event_abi_to_log_topic(entry))
                    event = contract.events[entry["name"]]()
                    self._decoders[(contract.address.lower(), topic)] = (contract_name, event, fast_decoder(entry))
        self._addresses = sorted({Web3.to_checksum_address(c.address) for c in contracts.values()})
        self._topics = sorted({topic for _, topic in self._decoders})

    @property
    def cursor(self) -> int:
        """Last block whose events were all handled (saved, or advanced in memory and not yet flushed)."""
        if self._pending_cursor is not None:
            return self._pending_cursor
        saved = self.store.cursor(self.name)
        return self.start_block - 1 if saved is None else saved

    @property
    def unsaved(self) -> bool:
        """Whether the cursor moved since it was last saved (only with defer_cursor)."""
        return self._pending_cursor is not None

    def flush(self) -> bool:
        """Save a cursor kept in memory (defer_cursor); True if something was written."""
        if self._pending_cursor is None:
            return False
        with self.store.transaction():
            self.store.set_cursor(self.name, self._pending_cursor)
            self.store.remember_blocks(self.name, self._unsaved_blocks, self.keep_blocks)
        self._pending_cursor = None
        self._unsaved_blocks = []
        return True

    def _advance(self, high: int, block_hash: str | None = None) -> None:
        remembered = [] if block_hash is None else [(high, block_hash, time.time())]
        # (a cursor a rewind left below its remembered blocks, `BlockMemory.rewind_poller`, passes them again)
        self._blocks = ([b for b in self._blocks if b[0] < high] + remembered)[-self.keep_blocks :]
        if self.defer_cursor:
            self._pending_cursor = high
            self._unsaved_blocks = ([b for b in self._unsaved_blocks if b[0] < high] + remembered)[-self.keep_blocks :]
        else:
            with self.store.transaction():
                self.store.set_cursor(self.name, high)
                self.store.remember_blocks(self.name, remembered, self.keep_blocks)

    def poll(self, head: int | None = None) -> Iterator[ChainEvent]:
        """Every event since the cursor up to the head (minus confirmations). The cursor moves past a
        chunk only once the consumer asks for the event after that chunk's last one, so stopping early
        (an exception in the handler, a `break`) leaves the unfinished chunk to be delivered again.

        `head`: a block number known to be mined (e.g. announced by `HeadWaker`), to save the
        eth_blockNumber round trip; a later head is simply seen by a later poll."""
        if head is None:
            head = with_retries(lambda: self.w3.eth.block_number, self.retry, self._url)
        self.head = head
        head -= self.confirmations
        self._check_reorg(head)
        low = self.cursor + 1
        while low <= head:
            high = min(low + self.chunk_size - 1, head)
            block = (self.headers(high) if self.headers is not None else None) or self._block(high)
            below = self._blocks[-1] if self._blocks else None
            if block is None or (below is not None and below[0] == low - 1 and high == low and block[1] != below[1]):
                self._suspect = True  # gone, or not on top of what was processed: compared on the next poll
                return
            logs = self._fetch(low, high)
            top = [entry for entry in logs if entry["blockNumber"] == high]
            if any(_hex(entry.get("blockHash")) not in (None, block[0]) for entry in top):
                self._suspect = True  # the chain changed between the two reads
                return
            yield from self._decoded(logs)
            self._advance(high, block[0])
            low = high + 1

    # ------------------------------------------------------------------ reorgs

    def _block(self, number: int) -> tuple[str, str] | None:
        """(hash, parent hash) of the chain's block `number`, 0x-hex lower case; None if there is none."""
        response = with_retries(
            lambda: self.w3.provider.make_request("eth_getBlockByNumber", [hex(number), False]), self.retry, self._url
        )
        block = response.get("result") if isinstance(response, dict) else None
        return None if not block else (_hex(block["hash"]), _hex(block["parentHash"]))

    def _check_reorg(self, confirmed_head: int) -> None:
        """Compare the cursor block's remembered hash with the chain's when a new block cannot show it (more than one
        new block, the chain shorter than the cursor, a hint from the last poll) or every `reorg_check_s`; on a
        mismatch, rewind to the fork point (`_rewind`)."""
        if not self._blocks:
            return  # nothing processed yet (or a store from before v6): nothing to compare
        top = self._blocks[-1][0]
        due = time.monotonic() - self._checked_at >= self.reorg_check_s
        if not (self._suspect or confirmed_head < top or confirmed_head > top + 1 or due):
            return
        self._suspect = False
        self._checked_at = time.monotonic()
        block = self._block(top)
        if block is not None and block[0] == self._blocks[-1][1]:
            return
        fork, since = self.start_block - 1, None
        for number, block_hash, seen_at in reversed(self._blocks[:-1]):
            found = self._block(number)
            if found is not None and found[0] == block_hash:
                fork, since = number, seen_at
                break
        self._rewind(fork, since)

    def _rewind(self, fork: int, since: float | None) -> None:
        log.warning("%s: reorg: blocks above %d were replaced; rewinding to %d", self.name, fork, fork)
        self.store.rewind_poller(self.name, fork)
        self._blocks = [b for b in self._blocks if b[0] <= fork]
        self._unsaved_blocks = [b for b in self._unsaved_blocks if b[0] <= fork]
        self.store.remember_blocks(self.name, self._unsaved_blocks, self.keep_blocks)
        self._unsaved_blocks = []
        self._pending_cursor = None
        self.reorgs.append(fork)
        if self.on_reorg is not None:
            self.on_reorg(fork, since)

    def drain(self, handler: Callable[[ChainEvent], None], head: int | None = None) -> int:
        """Hand every new event to `handler`; returns how many were handled."""
        handled = 0
        for event in self.poll(head):
            handler(event)
            handled += 1
        return handled

    def _fetch(self, low: int, high: int) -> list[LogReceipt]:
        if not self._addresses or not self._topics:
            return []

        def one_query(first: int, last: int) -> list[LogReceipt]:
            query = {"fromBlock": first, "toBlock": last, "address": self._addresses, "topics": [self._topics]}
            return list(with_retries(lambda: self.w3.eth.get_logs(query), self.retry, self._url))

        return fetch_in_halves(one_query, low, high)  # providers cap a query's range or result count

    def _decoded(self, logs: list[LogReceipt]) -> list[ChainEvent]:
        events = []
        for log in sorted(logs, key=lambda entry: (entry["blockNumber"], entry["logIndex"])):
            if not log["topics"]:
                continue
            decoder = self._decoders.get((log["address"].lower(), to_hex(log["topics"][0])))
            if decoder is None:
                continue  # another contract's event with a colliding filter match
            contract_name, event, fast = decoder
            if fast is not None:
                name, args = event.event_name, fast(log)
            else:
                data = event.process_log(log)
                name, args = data["event"], dict(data["args"])
            events.append(
                ChainEvent(
                    contract=contract_name,
                    name=name,
                    args=args,
                    address=log["address"],
                    block_number=log["blockNumber"],
                    log_index=log["logIndex"],
                    tx_hash=to_hex(log["transactionHash"]),
                )
            )
        return events


def _hex(value: Any) -> str | None:
    """A hash as 0x-hex lower case (from a JSON answer's string or web3's bytes); None stays None."""
    if value is None:
        return None
    return to_hex(value).lower() if isinstance(value, (bytes, bytearray)) else str(value).lower()


class HeadWaker:
    """Sets `event` whenever the chain node announces a new block (`eth_subscribe("newHeads")` over a
    websocket), so that a node loop sleeping between polls wakes at once instead of at its next poll.

    A wake-up signal only: what happened is still read by the `EventPoller`, so a lost, late or doubled
    notification costs latency (the loop still polls at its own interval), never correctness. Runs in a
    daemon thread and reconnects with backoff; `connected` says whether notifications are flowing. If the
    endpoint never accepts the subscription (no websocket there), it gives up after a few tries.
    """

    def __init__(self, url: str, event: threading.Event | None = None, *, give_up_after: int = 3):
        self.url = url
        self.event = event or threading.Event()
        self.connected = False
        self.head: int | None = None  # the number of the last block announced
        self.timestamps: OrderedDict[int, int] = OrderedDict()  # number -> timestamp of the last blocks announced
        self.hashes: OrderedDict[int, tuple[str, str]] = OrderedDict()  # number -> (hash, parent hash), the same blocks
        self.give_up_after = give_up_after
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def url_for(rpc_url: str) -> str | None:
        """The websocket URL of a local dev chain (anvil and hardhat serve it on their HTTP port) for a loopback
        http(s) RPC URL; None for anything else (a remote node's websocket endpoint, if any, is elsewhere)."""
        parts = urlsplit(rpc_url)
        if parts.scheme not in ("http", "https") or parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            return None
        return urlunsplit(("ws" if parts.scheme == "http" else "wss", parts.netloc, parts.path, parts.query, ""))

    def start(self) -> HeadWaker:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="head-waker", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.event.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def wait(self, timeout: float) -> bool:
        """Sleep until a new block is announced or `timeout` passes; True if woken by a block."""
        return self.event.wait(timeout)

    def block_time(self, number: int | None = None) -> int | None:
        """The timestamp of block `number` (default: the last announced) if it was announced recently, else None."""
        number = self.head if number is None else number
        return None if number is None else self.timestamps.get(number)

    def header(self, number: int) -> tuple[str, str] | None:
        """(hash, parent hash) of block `number`, 0x-hex lower case, if it was announced recently, else None."""
        return self.hashes.get(number) if self.connected else None

    def take(self) -> int | None:
        """The head announced since the last `take` (clearing the signal), or None if none was."""
        if not self.event.is_set():
            return None
        self.event.clear()
        return self.head

    def _run(self) -> None:
        delay, failures, ever = 0.5, 0, False
        while not self._stop.is_set():
            try:
                from websockets.sync.client import connect as ws_connect  # web3 depends on websockets

                with ws_connect(self.url, open_timeout=2, close_timeout=1) as ws:
                    ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]}))
                    if "result" not in json.loads(ws.recv(timeout=2)):
                        raise RuntimeError("eth_subscribe refused")
                    self.connected, ever, failures, delay = True, True, 0, 0.5
                    self.event.set()  # anything may have happened while not subscribed
                    while not self._stop.is_set():
                        try:
                            message = ws.recv(timeout=0.5)
                        except TimeoutError:
                            continue
                        try:
                            header = json.loads(message)["params"]["result"]
                            number = int(header["number"], 16)
                            self.head = number if self.head is None else max(self.head, number)
                            self.timestamps[number] = int(header["timestamp"], 16)
                            self.hashes[number] = (str(header["hash"]).lower(), str(header["parentHash"]).lower())
                            while len(self.timestamps) > 256:
                                self.timestamps.popitem(last=False)
                            while len(self.hashes) > 256:
                                self.hashes.popitem(last=False)
                        except (ValueError, KeyError, TypeError):
                            pass
                        self.event.set()
            except Exception:
                failures += 1
            finally:
                self.connected = False
            if not ever and failures >= self.give_up_after:
                return  # no websocket subscriptions there: the loop just polls
            self._stop.wait(delay)
            delay = min(2 * delay, 30.0)
