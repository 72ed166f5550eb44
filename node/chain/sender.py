"""Send transactions from one key, exactly once, over any EVM JSON-RPC endpoint (anvil or a real chain).

The rule that makes this safe: a transaction is signed and *recorded in the node store under an
idempotency key before it is broadcast*. Whatever happens next (RPC down, process killed, tx dropped
from the pool), a later send under the same key finds the record and either returns its receipt or
re-broadcasts the very same signed bytes (same nonce, same hash). A fresh transaction is built for a
key only when the recorded one provably can never land: the node refused it, or its nonce was
consumed by another transaction. Two transactions with one nonce cannot both land, so nothing is
ever sent twice.

One `TxSender` per key and process: the nonce is tracked locally (resynced from the node's pending
count at start and after any nonce error), so a second process signing with the same key would fight it.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import rlp as _rlp
from eth_account.signers.local import LocalAccount
from eth_hash.auto import keccak
from eth_utils import to_checksum_address, to_hex
from web3 import Web3
from web3.contract.contract import ContractFunction
from web3.exceptions import ContractLogicError, TimeExhausted, TransactionNotFound, Web3RPCError
from web3.types import RPCEndpoint, TxReceipt

from node.chain.errors import (
    ChainUnavailable,
    IdempotencyError,
    ReceiptTimeout,
    TransactionRejected,
    TransactionReverted,
    TransactionSuperseded,
)
from node.chain.revert_decoder import RevertDecoder, revert_data
from node.chain.rpc import RetryPolicy, rpc_url_of, with_retries
from node.store import TX_MINED, TX_REJECTED, TX_SENT, TX_SIGNED, TX_SUPERSEDED, IdempotencyConflict, NodeStore, SentTx

T = TypeVar("T")

try:  # eth-keys' fast backend (a dependency); without it, signing goes through eth-account
    import coincurve as _coincurve
except ImportError:  # pragma: no cover
    _coincurve = None
_SIGNING_KEYS: dict[bytes, Any] = {}  # private key -> coincurve.PrivateKey

GWEI = 10**9
DEFAULT_PRIORITY_FEE = 1 * GWEI  # when the node has no eth_maxPriorityFeePerGas

# Substrings of node error messages (geth, anvil, erigon, nethermind, besu spell these differently).
_ALREADY_KNOWN = ("already known", "already imported", "known transaction", "alreadyknown")
_NONCE_TOO_LOW = ("nonce too low", "oldnonce", "nonce has already been used", "nonce is too low")
_NONCE_CONFLICT = ("replacement transaction underpriced", "nonce too high", "replacement fee too low")


def sign_transaction(account: LocalAccount, tx: dict[str, Any]) -> tuple[bytes, bytes]:
    """(raw signed transaction, its hash). An EIP-1559 transaction (type 2, no access list) is encoded and signed
    here with coincurve (libsecp256k1, what eth-keys uses when installed): the same bytes as
    `account.sign_transaction` (RFC 6979 nonces, low s), without its dict validation and formatting (its cost:
    docs/node.md, "Measured costs").
    Anything else, or without coincurve, goes through eth-account."""
    fields = ("chainId", "nonce", "maxPriorityFeePerGas", "maxFeePerGas", "gas", "to", "value", "data")
    if (
        _coincurve is None
        or tx.get("type") not in (2, "0x2")
        or set(tx) - set(fields) - {"type"}
        or any(f not in tx for f in fields)
    ):
        signed = account.sign_transaction(tx)
        return bytes(signed.raw_transaction), bytes(signed.hash)
    to = bytes.fromhex(to_checksum_address(tx["to"])[2:])
    payload = [
        int(tx["chainId"]),
        int(tx["nonce"]),
        int(tx["maxPriorityFeePerGas"]),
        int(tx["maxFeePerGas"]),
        int(tx["gas"]),
        to,
        int(tx["value"]),
        bytes(tx["data"]),
        [],
    ]
    unsigned = b"\x02" + _rlp.encode(payload)
    key = _SIGNING_KEYS.get(bytes(account.key))
    if key is None:
        key = _SIGNING_KEYS.setdefault(bytes(account.key), _coincurve.PrivateKey(bytes(account.key)))
    signature = key.sign_recoverable(keccak(unsigned), hasher=None)  # r (32) ‖ s (32) ‖ recovery id (1)
    r, s, v = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:64], "big"), signature[64]
    raw = b"\x02" + _rlp.encode(payload + [v, r, s])
    return raw, keccak(raw)


def request_digest(to: str, data: bytes, value: int) -> str:
    """Fingerprint of what a key asks for, so a key reused for a different action is caught."""
    return hashlib.sha256(f"{to.lower()}|{value}|{bytes(data).hex()}".encode()).hexdigest()


# --- the sender --------------------------------------------------------------------------------------

_LANDED, _PENDING, _DEAD = "landed", "pending", "dead"
# Gas added to a reused estimate (`TxSender.submit(reuse_estimate=True)`): calls of one shape differ in gas by
# their storage writes and logs (e.g. a job's last verification also finishes the job: ~11k more); a limit
# above what is used costs nothing (only gas used is paid).
REUSE_HEADROOM = 50_000


class TxSender:
    """Signs with one local key and sends each idempotency key's transaction at most once."""

    def __init__(
        self,
        w3: Web3,
        account: LocalAccount,
        store: NodeStore,
        *,
        errors: RevertDecoder | None = None,
        retry: RetryPolicy = RetryPolicy(),
        gas_margin: float = 1.2,
        receipt_timeout: float = 120.0,
        poll_interval: float = 0.05,
        rebroadcast_every: float = 5.0,
        fee_cache_s: float = 0.0,
        defer_writes: Callable[[Callable[[], None]], None] | None = None,
        confirmations: int = 0,
    ):
        """`fee_cache_s` > 0: reuse the base fee and priority fee read within that many seconds (or given by
        `note_block`) instead of asking for them before every transaction; the fee rule is unchanged
        (max fee = 2 x base fee + tip, which stays includable through ~6 full blocks of base-fee growth, so
        a base fee up to a second old is safe). `defer_writes`: a callable that takes a store write and runs
        it later (the node loop flushes them when idle); used for the *informational* status changes
        signed -> sent and -> mined, which a restart re-derives from the chain (`resume_outstanding`
        settles every signed/sent record by its receipt). The record itself (`record_tx`, before the
        broadcast) and the dead states (superseded, rejected) are always written at once.
        `confirmations`: a receipt counts as landed (`wait_for_receipt`) only once that many blocks are on top of
        its block (a reorg shallower than that cannot take it back).
        """
        if confirmations < 0:
            raise ValueError("confirmations must be at least 0")
        self.confirmations = confirmations
        self.w3 = w3
        self.account = account
        self.address = to_checksum_address(account.address)
        self.store = store
        self.errors = errors or RevertDecoder()
        self.retry = retry
        self.gas_margin = gas_margin
        self.receipt_timeout = receipt_timeout
        self.poll_interval = poll_interval
        self.rebroadcast_every = rebroadcast_every
        self.fee_cache_s = fee_cache_s
        self.defer_writes = defer_writes
        self._base_fee: tuple[float, int | None] | None = None  # (monotonic time read, base fee or None pre-London)
        self._tip: tuple[float, int] | None = None
        self._broadcast_reverts: dict[str, bytes] = {}  # tx hash -> revert data a broadcast's answer carried
        self._estimates: dict[tuple[str, bytes, int], int] = {}  # (to, selector, calldata length) -> largest estimate
        self.url = rpc_url_of(w3)
        self._lock = threading.RLock()
        # Set when a broadcast ended in an exception: the node may or may not hold that tx, so before the
        # next new tx we re-push outstanding records (a nonce gap would otherwise stall every later tx).
        self._unsure_of_pool = False
        self.chain_id: int = self._rpc(lambda: w3.eth.chain_id)
        self.resume_outstanding()

    def _rpc(self, call: Callable[[], T]) -> T:
        return with_retries(call, self.retry, self.url)

    def _request(self, method: str, params: list) -> Any:
        """One JSON-RPC request straight to the provider, for the two calls of every transaction (eth_estimateGas,
        eth_sendRawTransaction): web3's request pipeline (formatters, validation middleware) costs several local
        round trips of Python around each (docs/node.md, "Measured costs"). An error answer raises Web3RPCError
        carrying the response, as web3 does (the revert data and message are read from it the same way)."""

        def once() -> Any:
            response = self.w3.provider.make_request(RPCEndpoint(method), params)
            error = response.get("error") if isinstance(response, dict) else None
            if error:  # inside the retried call: a rate-limit or internal-error answer is asked again
                message = error.get("message", "") if isinstance(error, dict) else str(error)
                raise Web3RPCError(str(message), rpc_response=response)
            return response["result"]

        return self._rpc(once)

    # --- nonces ----------------------------------------------------------------------------------

    def resync_nonce(self) -> int:
        """Take the next nonce from the node's pending count (at start and after any nonce error)."""
        with self._lock:
            self._next_nonce = self._rpc(lambda: self.w3.eth.get_transaction_count(self.address, "pending"))
            return self._next_nonce

    def resume_outstanding(self) -> None:
        """Push every recorded-but-unconfirmed transaction of this key back into the pool, lowest nonce
        first, so a restart neither leaves a nonce gap nor hands a recorded nonce to a new transaction."""
        with self._lock:
            for record in self.store.outstanding_txs(self.address):
                with contextlib.suppress(TransactionRejected):  # marked rejected; its key gets a fresh tx if sent again
                    self._settle(record)
            self.resync_nonce()
            self._unsure_of_pool = False

    # --- public API ------------------------------------------------------------------------------

    def submit(
        self,
        key: str,
        to: str,
        data: bytes = b"",
        value: int = 0,
        gas: int | None = None,
        *,
        reuse_estimate: bool = False,
    ) -> str:
        """Ensure the transaction for `key` is signed, recorded and in the pool (or mined); returns its hash.

        Reverts found by gas estimation raise TransactionReverted before anything is signed.
        `reuse_estimate`: when a call of the same shape (same contract, function and calldata length) was estimated
        before, sign with that estimate x `gas_margin` + `REUSE_HEADROOM` instead of asking eth_estimateGas (one
        round trip less); only for calls the caller knows will not revert (nothing then checks it before signing).
        """
        to = to_checksum_address(to)
        digest = request_digest(to, data, value)
        with self._lock:
            if self._unsure_of_pool:
                self.resume_outstanding()
            for _ in range(3):
                record = self.store.sent_tx(key)
                if record is not None and not record.dead:
                    if record.request_digest != digest:
                        raise IdempotencyConflict(f"key {key!r} was used before for a different transaction")
                    if self._settle(record) != _DEAD:
                        return record.tx_hash
                    continue
                record = self._sign_and_record(key, digest, to, bytes(data), value, gas, reuse_estimate)
                if self._broadcast(record) != _DEAD:
                    return record.tx_hash
            raise self._nonce_fight(key)

    def send(
        self, key: str, to: str, data: bytes = b"", value: int = 0, gas: int | None = None, timeout: float | None = None
    ) -> TxReceipt:
        """Submit and wait for the receipt; a reverted transaction raises TransactionReverted."""
        for _ in range(3):
            self.submit(key, to, data, value, gas)
            try:
                return self.wait_for_receipt(key, timeout)
            except TransactionSuperseded:
                continue  # provably dead: the next submit builds a fresh transaction for the key
        raise self._nonce_fight(key)

    def send_call(
        self, key: str, function: ContractFunction, value: int = 0, gas: int | None = None, timeout: float | None = None
    ) -> TxReceipt:
        """`send` for a bound contract call, e.g. `contract.functions.commitDraft(...)`."""
        # web3 has no public "calldata of this bound call"; this private helper is stable across v6-v8.
        data = bytes.fromhex(function._encode_transaction_data()[2:])
        return self.send(key, function.address, data, value, gas, timeout)

    def wait_for_receipt(self, key: str, timeout: float | None = None) -> TxReceipt:
        """Wait for the key's transaction to be mined, re-broadcasting it now and then in case a node
        restarted or evicted it. Raises TransactionSuperseded if its nonce went to another transaction."""
        timeout = self.receipt_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        next_rebroadcast = time.monotonic() + self.rebroadcast_every
        record = self._record(key)
        while True:
            receipt = self._receipt_or_none(record.tx_hash)
            if receipt is not None and self._confirmed(receipt):
                return self._landed(record, receipt)
            now = time.monotonic()
            if now >= deadline:
                raise ReceiptTimeout(key, record.tx_hash, timeout)
            if now >= next_rebroadcast:
                with self._lock:
                    if self._settle(self._record(key)) == _DEAD:
                        raise TransactionSuperseded(key, record.tx_hash)
                next_rebroadcast = now + self.rebroadcast_every
            time.sleep(self.poll_interval)

    def reorged(self) -> tuple[list[str], list[str]]:
        """After a reorg: the transactions of this key recorded mined whose nonce the chain's latest state has not used
        (their blocks are gone) go back to "sent", lowest nonce first, and each is re-broadcast, the very same signed
        bytes, while the chain's state lets it succeed now (gas estimation); from the first that would revert on, they
        are *held*: not broadcast, their records kept (so the same bytes go out when the owner submits the key again,
        e.g. a verification whose draft the other party has not re-sent yet; or, if the chain's state made the call
        moot for good, their nonces go to later transactions and the records end superseded, keys released).
        Returns (keys re-broadcast, keys held). A key is never given a transaction with another meaning: a fresh one
        is signed only for a record that provably cannot land, with the same calldata."""
        with self._lock:
            mined = self._rpc(lambda: self.w3.eth.get_transaction_count(self.address, "latest"))
            sent: list[str] = []
            held: list[str] = []
            for row in self.store.mined_txs_from(self.address, mined):
                record = SentTx(*row)
                self.store.set_tx_status(record.key, TX_SENT)
                if held or not self._would_succeed(record):
                    held.append(record.key)
                    continue
                sent.append(record.key)
                with contextlib.suppress(TransactionRejected, TransactionReverted):
                    self._broadcast(self._record(record.key))
            self.resync_nonce()
            return sent, held

    def _would_succeed(self, record: SentTx) -> bool:
        to, data, value = signed_call(record.raw_tx)
        call = {"from": self.address, "to": to, "value": hex(value), "data": to_hex(data)}
        try:
            self._request("eth_estimateGas", [call, "pending"])
        except (ContractLogicError, Web3RPCError):
            return False
        return True

    def _confirmed(self, receipt: TxReceipt) -> bool:
        if self.confirmations == 0:
            return True
        head = self._rpc(lambda: self.w3.eth.block_number)
        return head - int(receipt["blockNumber"]) >= self.confirmations

    # --- internals -------------------------------------------------------------------------------

    def _nonce_fight(self, key: str) -> IdempotencyError:
        return IdempotencyError(
            f"{key}: its nonce was taken by other transactions three times; "
            f"is another process signing for {self.address}?"
        )

    def _record(self, key: str) -> SentTx:
        record = self.store.sent_tx(key)
        if record is None:
            raise KeyError(f"no transaction recorded under {key!r}")
        return record

    def _sign_and_record(
        self, key: str, digest: str, to: str, data: bytes, value: int, gas: int | None, reuse_estimate: bool = False
    ) -> SentTx:
        tx: dict[str, Any] = {"from": self.address, "to": to, "value": value, "data": data, "chainId": self.chain_id}
        shape = (to, bytes(data[:4]), len(data))
        # the fees first: the estimate is the last look at the state before the broadcast, so a race lost to
        # another sender (say, an accused's answer that draws the panel before our draw) ends in a refused
        # estimate, which costs nothing, more often than in a mined revert, which costs its gas
        fees = self._fees()
        if gas is None and reuse_estimate and shape in self._estimates:
            gas = int(self._estimates[shape] * self.gas_margin) + REUSE_HEADROOM
        if gas is None:
            gas = self._estimate_gas(key, tx)
            self._estimates[shape] = max(self._estimates.get(shape, 0), int(gas / self.gas_margin))
        tx["gas"] = gas
        tx.update(fees)
        tx["nonce"] = self._next_nonce
        del tx["from"]
        raw, tx_hash = sign_transaction(self.account, tx)
        record = self.store.record_tx(key, self.address, digest, to_hex(tx_hash), raw, tx["nonce"])
        self._next_nonce += 1
        return record

    def _estimate_gas(self, key: str, tx: dict[str, Any]) -> int:
        try:
            call = {"from": tx["from"], "to": tx["to"], "value": hex(int(tx["value"])), "data": to_hex(tx["data"])}
            # against the pending block: the transaction runs in the next block, and what it may do can depend
            # on that (DisputeManager draws from the hash of a block that is the latest one until then)
            estimate = int(self._request("eth_estimateGas", [call, "pending"]), 16)
        except ContractLogicError as exc:
            raise self._reverted(key, exc) from None
        except Web3RPCError as exc:
            if is_revert(exc):
                raise self._reverted(key, exc) from None
            raise TransactionRejected(key, _message(exc)) from None
        return int(estimate * self.gas_margin)

    def note_block(self, block: Any) -> None:
        """A latest block the caller fetched anyway: its base fee refreshes the fee cache (`fee_cache_s`)."""
        if self.fee_cache_s > 0 and block is not None:
            self._base_fee = (time.monotonic(), block.get("baseFeePerGas"))

    def _fresh(self, cached: tuple[float, Any] | None) -> bool:
        return cached is not None and time.monotonic() - cached[0] <= self.fee_cache_s

    def _fees(self) -> dict[str, int]:
        if self._fresh(self._base_fee):
            base_fee = self._base_fee[1]
        else:
            block = self._rpc(lambda: self.w3.eth.get_block("latest"))
            base_fee = block.get("baseFeePerGas")
            if self.fee_cache_s > 0:
                self._base_fee = (time.monotonic(), base_fee)
        if base_fee is None:  # pre-London chain
            return {"gasPrice": self._rpc(lambda: self.w3.eth.gas_price)}
        if self._fresh(self._tip):
            tip = self._tip[1]
        else:
            try:
                tip = self._rpc(lambda: self.w3.eth.max_priority_fee)
            except Web3RPCError:
                tip = DEFAULT_PRIORITY_FEE
            if self.fee_cache_s > 0:
                self._tip = (time.monotonic(), tip)
        # Twice the base fee keeps the tx includable through several full blocks of base-fee growth.
        return {"maxFeePerGas": 2 * base_fee + tip, "maxPriorityFeePerGas": tip, "type": 2}

    def _set_status(self, record: SentTx, status: str, block_number: int | None = None) -> None:
        """Status changes that a restart can re-derive from the chain (sent, mined): deferred when the owner
        asked for it (`defer_writes`); every other status is written at once. A deferred change applies only
        if the key still holds the same transaction in a state it may move on from (signed -> sent,
        signed/sent -> mined), so it never overrides a later dead state or a newer record."""
        if self.defer_writes is None or status not in (TX_SENT, TX_MINED):
            self.store.set_tx_status(record.key, status, block_number)
            return
        before = (TX_SIGNED,) if status == TX_SENT else (TX_SIGNED, TX_SENT)
        key, tx_hash = record.key, record.tx_hash

        def write() -> None:
            current = self.store.sent_tx(key)
            if current is not None and current.tx_hash == tx_hash and current.status in before:
                self.store.set_tx_status(key, status, block_number)

        self.defer_writes(write)

    def mark_landed(self, key: str, block_number: int) -> None:
        """The key's transaction is known to be mined *successfully* (the caller saw a log it emitted: reverted
        transactions emit none), so its receipt need not be fetched."""
        record = self.store.sent_tx(key)
        if record is not None and not record.dead:
            self._set_status(record, TX_MINED, block_number)

    def _settle(self, record: SentTx) -> str:
        """Decide what became of a recorded transaction, re-broadcasting it if it may still land."""
        if self._receipt_or_none(record.tx_hash) is not None:
            self.store.set_tx_status(record.key, TX_MINED)
            return _LANDED
        if record.dead:
            return _DEAD
        mined_count = self._rpc(lambda: self.w3.eth.get_transaction_count(self.address, "latest"))
        if mined_count > record.nonce:
            return self._nonce_taken(record)
        return self._broadcast(record)

    def _nonce_taken(self, record: SentTx) -> str:
        # Ask for the receipt again: it may have been mined between our two questions.
        if self._receipt_or_none(record.tx_hash) is not None:
            self.store.set_tx_status(record.key, TX_MINED)
            return _LANDED
        self.store.set_tx_status(record.key, TX_SUPERSEDED)
        self.resync_nonce()
        return _DEAD

    def _broadcast(self, record: SentTx) -> str:
        try:
            self._request("eth_sendRawTransaction", [to_hex(record.raw_tx)])
        except ChainUnavailable:
            self._unsure_of_pool = True
            raise
        except Web3RPCError as exc:
            if is_revert(exc):
                return self._reverted_at_broadcast(record, exc)
            message = _message(exc).lower()
            if any(s in message for s in _NONCE_TOO_LOW):
                return self._nonce_taken(record)
            if any(s in message for s in _NONCE_CONFLICT):
                self.store.set_tx_status(record.key, TX_REJECTED)
                self.resync_nonce()
                return _DEAD
            if not any(s in message for s in _ALREADY_KNOWN):
                self.store.set_tx_status(record.key, TX_REJECTED)
                self.resync_nonce()
                raise TransactionRejected(record.key, _message(exc)) from None
        if record.status == TX_SIGNED:
            self._set_status(record, TX_SENT)
        return _PENDING

    def _reverted_at_broadcast(self, record: SentTx, exc: Web3RPCError) -> str:
        """eth_sendRawTransaction answered with a revert. Hardhat (automine) runs the transaction before it answers
        and reports a revert as this error, although the transaction is mined (and its gas spent), where anvil
        answers with the hash and the receipt says status 0. Either way the caller then sees the same thing: a
        mined transaction whose receipt raises TransactionReverted, with the error decoded from this answer's data
        (exact, unlike a replay). Not mined: the node refused it, and nothing was spent."""
        receipt = self._receipt_or_none(record.tx_hash)
        if receipt is not None:
            self._broadcast_reverts[record.tx_hash.lower()] = revert_data(exc)
            self.store.set_tx_status(record.key, TX_MINED, receipt["blockNumber"])
            return _LANDED
        self.store.set_tx_status(record.key, TX_REJECTED)
        self.resync_nonce()
        raise self._reverted(record.key, exc) from None

    def _receipt_or_none(self, tx_hash: str) -> TxReceipt | None:
        try:
            return self._rpc(lambda: self.w3.eth.get_transaction_receipt(tx_hash))
        except (TransactionNotFound, TimeExhausted):
            return None

    def _landed(self, record: SentTx, receipt: TxReceipt) -> TxReceipt:
        self._set_status(record, TX_MINED, receipt["blockNumber"])
        if receipt["status"] != 1:
            raise self._replay_revert(record, receipt)
        return receipt

    def _replay_revert(self, record: SentTx, receipt: TxReceipt) -> TransactionReverted:
        """Recover the custom error of a mined, reverted tx by replaying it on the parent block's state
        (exact when it was alone in its block, best effort otherwise), unless the broadcast's answer carried it."""
        data = self._broadcast_reverts.get(record.tx_hash.lower())
        if data is not None:
            decoded = self.errors.decode(data)
            return TransactionReverted(record.key, decoded.name, decoded.args, decoded.data, record.tx_hash)
        tx = self._rpc(lambda: self.w3.eth.get_transaction(record.tx_hash))
        call = {"from": tx["from"], "to": tx["to"], "data": tx["input"], "value": tx["value"], "gas": tx["gas"]}
        try:
            self._rpc(lambda: self.w3.eth.call(call, block_identifier=receipt["blockNumber"] - 1))
        except ContractLogicError as exc:
            return self._reverted(record.key, exc, record.tx_hash)
        except Web3RPCError as exc:
            if not is_revert(exc):
                raise
            return self._reverted(record.key, exc, record.tx_hash)
        return TransactionReverted(record.key, None, {}, b"", record.tx_hash)

    def _reverted(self, key: str, exc: BaseException, tx_hash: str | None = None) -> TransactionReverted:
        decoded = self.errors.decode(revert_data(exc))
        return TransactionReverted(key, decoded.name, decoded.args, decoded.data, tx_hash)


def signed_call(raw: bytes) -> tuple[str, bytes, int]:
    """(to, calldata, value) of a signed transaction's raw bytes (legacy, EIP-2930 or EIP-1559)."""
    if raw[0] >= 0xC0:  # legacy: [nonce, gasPrice, gas, to, value, data, v, r, s]
        fields, at = _rlp.decode(raw), 3
    elif raw[0] == 1:  # [chainId, nonce, gasPrice, gas, to, value, data, ...]
        fields, at = _rlp.decode(raw[1:]), 4
    elif raw[0] == 2:  # [chainId, nonce, tip, maxFee, gas, to, value, data, ...]
        fields, at = _rlp.decode(raw[1:]), 5
    else:
        raise ValueError(f"transaction type {raw[0]} is not one this node signs")
    to, value, data = fields[at], fields[at + 1], fields[at + 2]
    return to_checksum_address(to), bytes(data), int.from_bytes(value, "big")


def is_revert(exc: Web3RPCError) -> bool:
    """Whether an RPC error answer reports a revert, in either client's shape: anvil (and geth) answer code 3,
    "execution reverted", with the data as a hex string; Hardhat answers -32603, "VM Exception while processing
    transaction: reverted with ...", with the data inside an object ({message, data, txHash})."""
    return _code(exc) == 3 or "revert" in _message(exc).lower()


def _code(exc: Web3RPCError) -> int | None:
    error = exc.rpc_response.get("error") if isinstance(exc.rpc_response, dict) else None
    return error.get("code") if isinstance(error, dict) else None


def _message(exc: Web3RPCError) -> str:
    error = exc.rpc_response.get("error") if isinstance(exc.rpc_response, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return str(exc.message)
