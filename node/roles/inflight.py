"""A node's transactions in flight: submitted without waiting, settled on later steps.

Each transaction goes out under an idempotency key through the node's `TxSender` (signed and recorded in the store
before it is broadcast, never sent twice) and is then *in flight* until it is known to have landed. Two things
prove that: a log the transaction emitted (the node's event poller sees it: `landed_by`, or `landed` when another
event implies it), or its receipt, polled only for transactions in flight longer than `receipt_grace_s` (a
transaction that reverted emits nothing, so it is found that way). A transaction still not mined after
`resubmit_after` is re-broadcast (the same signed bytes, or a fresh transaction once the old one provably can never
land). A key whose transaction reverted on chain is given up: it is not retried.

A call that would revert is refused at gas estimation and nothing is signed; it may be tried again later.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from eth_abi import encode as abi_encode
from eth_utils import function_abi_to_4byte_selector
from eth_utils.abi import get_abi_input_types

from node.chain.errors import ReceiptTimeout, TransactionRejected, TransactionReverted, TransactionSuperseded
from node.chain.sender import TxSender, signed_call
from node.store import NodeStore


@dataclass
class InflightTx:
    key: str
    to: str
    data: bytes
    value: int
    submitted_at: float  # monotonic
    tx_hash: str | None = None


@dataclass(frozen=True)
class EncodedCall:
    """A contract call as calldata (`Transactions.encode_call`); `submit` takes it like a bound contract function."""

    address: str
    data: bytes


class Transactions:
    """The in-flight transactions of one node (one key, one `TxSender`)."""

    def __init__(
        self,
        sender: TxSender,
        store: NodeStore,
        log: logging.Logger,
        *,
        resubmit_after: float,
        receipt_grace_s: float,
        on_reverted: Callable[[str, TransactionReverted], None],
    ):
        self.sender = sender
        self.store = store
        self.log = log
        self.resubmit_after = resubmit_after
        self.receipt_grace_s = receipt_grace_s
        self.on_reverted = on_reverted  # called with (key, error) when a transaction reverted on chain
        self.sent: list[str] = []  # idempotency keys submitted (tests, diagnostics)
        self._inflight: dict[str, InflightTx] = {}
        self._by_hash: dict[str, str] = {}  # tx hash -> key of in-flight transactions
        self._given_up: set[str] = set()  # keys whose transaction reverted on chain: not retried
        self._selectors: dict[tuple[str, str], tuple[bytes, list[str]]] = {}  # (address, function) -> ABI

    def encode_call(self, contract, function: str, *args) -> EncodedCall:
        """`contract.functions.<function>(*args)` as calldata, encoded with eth_abi directly: the same bytes, without
        web3's argument normalization and validation (used for the calls of every cycle; its cost: docs/node.md,
        "Latency of a cycle")."""
        spec = self._selectors.get((contract.address, function))
        if spec is None:
            entries = [e for e in contract.abi if e.get("type") == "function" and e.get("name") == function]
            if len(entries) != 1:
                raise ValueError(f"{function}: {len(entries)} functions of that name (use contract.functions)")
            spec = (function_abi_to_4byte_selector(entries[0]), get_abi_input_types(entries[0]))
            self._selectors[(contract.address, function)] = spec
        selector, types = spec
        return EncodedCall(contract.address, selector + abi_encode(types, list(args)))

    def submit(self, key: str, call, value: int = 0, *, sure: bool = False) -> int:
        """Submit `call` (a bound contract function, or an `EncodedCall`) once under idempotency `key`; 1 if
        submitted now, else 0 (in flight already, given up, or refused: it would revert, or the chain node
        rejected it). `sure=True`: sign with the gas of an earlier estimate of the same call shape, if any."""
        if key in self._inflight or key in self._given_up:
            return 0
        data = call.data if isinstance(call, EncodedCall) else bytes.fromhex(call._encode_transaction_data()[2:])
        try:
            tx_hash = self.sender.submit(key, call.address, data, value, reuse_estimate=sure)
        except TransactionReverted as exc:
            self.log.info("%s not sent: it would revert (%s)", key, exc.error_name or exc)
            return 0
        except TransactionRejected as exc:
            self.log.error("%s rejected by the chain node: %s", key, exc.reason)
            return 0
        self._inflight[key] = InflightTx(key, call.address, data, value, time.monotonic(), tx_hash.lower())
        self._by_hash[tx_hash.lower()] = key
        self.sent.append(key)
        self.log.info("sent %s: %s", key, tx_hash)
        return 1

    def in_flight(self, key: str) -> bool:
        return key in self._inflight

    def tx_hash_of(self, key: str) -> str | None:
        """The hash of the transaction recorded under `key` (in flight or not), None if there is none."""
        record = self.store.sent_tx(key)
        return record.tx_hash if record is not None else None

    def landed(self, key: str, block_number: int) -> None:
        """An event proves that the key's transaction was mined successfully (e.g. the drafter's commit of cycle c,
        once cycle c is verified): no receipt to fetch for it."""
        if key in self._inflight:
            self._drop(key)
            self.sender.mark_landed(key, block_number)

    def landed_by(self, tx_hash: str, block_number: int) -> None:
        """A log emitted by transaction `tx_hash` was seen: if it is one of ours in flight, it landed and did not
        revert."""
        key = self._by_hash.pop(tx_hash.lower(), None)
        if key is not None and key in self._inflight:
            del self._inflight[key]
            self.sender.mark_landed(key, block_number)

    def reorged(self, rebroadcast: list[str], held: list[str]) -> None:
        """A reorg took back these keys' transactions (`TxSender.reorged`): those re-broadcast are in flight again
        until a log or a receipt shows them landed on the new chain; the held ones go out (the same bytes) when the
        node submits their keys again. Neither stays given up: the revert that gave one up may be gone too."""
        for key in held:
            self._given_up.discard(key)
            self._drop(key)
        for key in rebroadcast:
            record = self.store.sent_tx(key)
            if record is None:
                continue
            self._given_up.discard(key)
            self._drop(key)
            to, data, value = signed_call(record.raw_tx)
            self._inflight[key] = InflightTx(key, to, data, value, time.monotonic(), record.tx_hash.lower())
            self._by_hash[record.tx_hash.lower()] = key

    def poll(self) -> int:
        """Receipts of in-flight transactions older than `receipt_grace_s` (a log the node handles, or `landed`,
        usually proves a transaction landed before that, without a receipt round trip; a transaction that
        reverted emits nothing, so it is found here, at most `receipt_grace_s` later). Returns how many settled."""
        did = 0
        now = time.monotonic()
        for key, item in list(self._inflight.items()):
            if now - item.submitted_at < self.receipt_grace_s:
                continue
            try:
                self.sender.wait_for_receipt(key, timeout=0)
            except ReceiptTimeout:
                if time.monotonic() - item.submitted_at > self.resubmit_after:
                    item.submitted_at = time.monotonic()
                    self._resubmit(item)  # re-broadcasts the same signed bytes if the pool lost them
                continue
            except TransactionSuperseded:
                self._resubmit(item)
                continue
            except TransactionReverted as exc:
                self._drop(key)
                self._given_up.add(key)
                self.log.error("%s reverted on chain: %s", key, exc)
                self.on_reverted(key, exc)
                did += 1
                continue
            self._drop(key)
            did += 1
        return did

    def _drop(self, key: str) -> None:
        item = self._inflight.pop(key, None)
        if item is not None and item.tx_hash is not None:
            self._by_hash.pop(item.tx_hash, None)

    def _resubmit(self, item: InflightTx) -> None:
        try:
            tx_hash = self.sender.submit(item.key, item.to, item.data, item.value)
        except (TransactionReverted, TransactionRejected) as exc:
            self._drop(item.key)
            self.log.warning("%s could not be resubmitted: %s", item.key, exc)
            return
        if item.tx_hash != tx_hash.lower():  # a fresh transaction for the key (the old one was superseded)
            self._by_hash.pop(item.tx_hash, None)
            item.tx_hash = tx_hash.lower()
            self._by_hash[item.tx_hash] = item.key
