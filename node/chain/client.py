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

import base64
import hashlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, TypeVar
from urllib.parse import unquote, urlsplit

import requests
import rlp as _rlp
from eth_abi import decode as abi_decode
from eth_hash.auto import keccak
from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address, to_hex
from eth_utils.abi import function_abi_to_4byte_selector, get_abi_input_names, get_abi_input_types
from web3 import Web3
from web3.contract.contract import ContractFunction
from web3.exceptions import (
    ContractLogicError,
    ProviderConnectionError,
    RequestTimedOut,
    TimeExhausted,
    TooManyRequests,
    TransactionNotFound,
    Web3RPCError,
)
from web3.types import RPCEndpoint, TxReceipt

from node.store import (
    TX_MINED, TX_REJECTED, TX_SENT, TX_SIGNED, TX_SUPERSEDED, IdempotencyConflict, NodeStore, SentTx,
)

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


class ChainError(RuntimeError):
    """Base of everything the chain client raises on purpose."""


class ChainUnavailable(ChainError):
    """The RPC endpoint did not answer within the retry budget."""

    def __init__(self, url: str, reason: str = ""):
        super().__init__(f"chain RPC at {url} is unavailable" + (f": {reason}" if reason else ""))
        self.url = url
        self.reason = reason


class TransactionRejected(ChainError):
    """The node refused the transaction outright (not a revert): e.g. insufficient funds."""

    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: transaction rejected by the node: {reason}")
        self.key = key
        self.reason = reason


class TransactionReverted(ChainError):
    """The call reverts (at gas estimation) or a mined transaction reverted; carries the decoded error."""

    def __init__(self, key: str, error_name: str | None, error_args: dict[str, Any], data: bytes,
                 tx_hash: str | None = None):
        shown = error_name or (f"unknown error 0x{data[:4].hex()}" if data else "no revert data")
        args = ", ".join(f"{name}={value!r}" for name, value in error_args.items())
        where = f" in {tx_hash}" if tx_hash else ""
        super().__init__(f"{key}: reverted{where} with {shown}({args})")
        self.key = key
        self.error_name = error_name
        self.error_args = error_args
        self.data = data
        self.tx_hash = tx_hash


class ReceiptTimeout(ChainError):
    """No receipt within the timeout; the transaction is recorded, so a later send with the key resumes it."""

    def __init__(self, key: str, tx_hash: str, timeout: float):
        super().__init__(f"{key}: no receipt for {tx_hash} after {timeout:.1f}s "
                         "(it stays recorded: send the key again to resume)")
        self.key = key
        self.tx_hash = tx_hash


class TransactionSuperseded(ChainError):
    """The key's transaction can never land (its nonce went to another transaction); submit the key again."""

    def __init__(self, key: str, tx_hash: str):
        super().__init__(f"{key}: {tx_hash} was superseded by another transaction with its nonce")
        self.key = key
        self.tx_hash = tx_hash


class IdempotencyError(ChainError):
    """The key's transaction kept losing its nonce to other transactions: another signer uses this key."""


# --- retries -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for transient RPC errors: `attempts` tries in all, delays doubling up to a cap."""

    attempts: int = 8
    first_delay: float = 0.2
    max_delay: float = 5.0

    def delays(self) -> Iterator[float]:
        delay = self.first_delay
        for _ in range(self.attempts - 1):
            yield delay
            delay = min(delay * 2, self.max_delay)


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying: the endpoint is down, slow, overloaded or restarting."""
    if isinstance(exc, (requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError,
                        ProviderConnectionError, TooManyRequests, RequestTimedOut)):
        return True
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return exc.response.status_code >= 500 or exc.response.status_code == 429
    return False


def with_retries(call: Callable[[], T], policy: RetryPolicy, url: str) -> T:
    delays = policy.delays()
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            delay = next(delays, None)
            if delay is None:
                raise ChainUnavailable(url, f"{type(exc).__name__}: {exc}") from exc
            time.sleep(delay)


def rpc_url_of(w3: Web3) -> str:
    return str(getattr(w3.provider, "endpoint_uri", None) or w3.provider)


def cache_chain_id(w3: Web3) -> Web3:
    """Let the provider answer eth_chainId from its cache after the first call.

    web3's validation middleware asks the node for its chain id before *every* eth_call and
    eth_estimateGas (to check a transaction's chainId), which doubles those round trips. An endpoint's
    chain id does not change (nodes check it against the deployment at start), so it is cached; no
    other request is (a provider that already caches keeps its own settings, plus this one).
    """
    provider = w3.provider
    if not hasattr(provider, "cacheable_requests"):
        return w3
    if getattr(provider, "cache_allowed_requests", False):
        provider.cacheable_requests = set(provider.cacheable_requests) | {RPCEndpoint("eth_chainId")}
    else:
        provider.cacheable_requests = {RPCEndpoint("eth_chainId")}
        provider.cache_allowed_requests = True
    return w3


class KeepAliveHTTPProvider(Web3.HTTPProvider):
    """web3's HTTPProvider, but each JSON-RPC request goes over one persistent `http.client` connection per
    thread instead of through requests/urllib3, whose per-request work (session merging, environment and
    proxy lookups, pool bookkeeping) costs ~0.5 ms, five times a local round trip; a node makes thousands.

    Errors keep requests' types, so callers and `is_transient` see what they saw before: a refused, reset
    or timed-out connection raises `requests.ConnectionError` / `requests.Timeout`, an HTTP error status
    `requests.HTTPError` (with the status code). A kept-alive connection that the server closed while idle
    is reopened and the request sent once more (nothing was processed: no response had started). Used by
    `connect` only for http(s) URLs that no proxy or .netrc entry applies to; batches go the usual way.
    """

    def __init__(self, endpoint_uri: str, request_kwargs: dict | None = None, **kwargs: Any):
        super().__init__(endpoint_uri, request_kwargs=request_kwargs, exception_retry_configuration=None, **kwargs)
        parts = urlsplit(str(endpoint_uri))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {endpoint_uri}")
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._timeout = float((request_kwargs or {}).get("timeout", 10.0))
        headers = dict((request_kwargs or {}).get("headers") or self.get_request_headers())
        if parts.username is not None:  # credentials in the URL, as requests sends them
            userinfo = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode("latin-1")
            headers["Authorization"] = "Basic " + base64.b64encode(userinfo).decode()
        self._headers = headers
        self._local = threading.local()

    @staticmethod
    def usable_for(url: str) -> bool:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        return not requests.utils.get_environ_proxies(url) and requests.utils.get_netrc_auth(url) is None

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn, True
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        self._local.conn = conn
        return conn, False

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def _make_request(self, method: RPCEndpoint, request_data: bytes) -> bytes:
        for _ in range(2):
            conn, reused = self._connection()
            try:
                conn.request("POST", self._path, body=request_data, headers=self._headers)
                response = conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
                    ConnectionAbortedError) as exc:
                self._drop_connection()
                if reused:
                    continue  # the server closed the idle kept-alive connection: reopen, send again
                raise requests.ConnectionError(f"{type(exc).__name__}: {exc}") from exc
            except (TimeoutError, socket.timeout) as exc:
                self._drop_connection()
                raise requests.Timeout(f"{self.endpoint_uri}: no answer within {self._timeout}s") from exc
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                raise requests.ConnectionError(f"{type(exc).__name__}: {exc}") from exc
            try:
                body = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                raise requests.ConnectionError(f"{type(exc).__name__}: {exc}") from exc
            if response.will_close:
                self._drop_connection()
            if response.status >= 400:
                error = requests.Response()
                error.status_code, error.reason, error._content = response.status, response.reason, body
                error.url = str(self.endpoint_uri)
                raise requests.HTTPError(f"{response.status} {response.reason} for {self.endpoint_uri}",
                                         response=error)
            return body
        raise requests.ConnectionError(f"{self.endpoint_uri} closed the connection twice")


def connect(url: str, *, wait: float = 10.0, request_timeout: float = 10.0) -> Web3:
    """A Web3 over HTTP(S) `url` that answered eth_chainId within `wait` seconds, else ChainUnavailable.

    The provider's own retry loop is switched off, so `RetryPolicy` is the one place retries happen;
    the chain id is cached (`cache_chain_id`); requests go over a kept-alive connection
    (`KeepAliveHTTPProvider`) unless a proxy or .netrc entry applies to the URL.
    """
    if KeepAliveHTTPProvider.usable_for(url):
        provider = KeepAliveHTTPProvider(url, request_kwargs={"timeout": request_timeout})
    else:
        provider = Web3.HTTPProvider(url, request_kwargs={"timeout": request_timeout},
                                     exception_retry_configuration=None)
    w3 = cache_chain_id(Web3(provider))
    deadline = time.monotonic() + wait
    while True:
        try:
            w3.eth.chain_id
            return w3
        except Exception as exc:
            if not is_transient(exc):
                raise ChainUnavailable(url, f"{type(exc).__name__}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise ChainUnavailable(url, f"no answer within {wait:.1f}s ({type(exc).__name__})") from None
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))


# --- revert decoding ---------------------------------------------------------------------------------

_BUILTIN_ERRORS = [
    {"type": "error", "name": "Error", "inputs": [{"name": "message", "type": "string"}]},
    {"type": "error", "name": "Panic", "inputs": [{"name": "code", "type": "uint256"}]},
]


@dataclass(frozen=True)
class DecodedError:
    name: str | None  # None when no ABI knows the selector
    args: dict[str, Any]
    data: bytes


class RevertDecoder:
    """Maps a revert's 4-byte selector to the custom error (name, args) declared in the given ABIs."""

    def __init__(self, abis: Iterable[list[dict]] = ()):
        self._errors: dict[bytes, dict] = {}
        for entry in _BUILTIN_ERRORS + [e for abi in abis for e in abi if e.get("type") == "error"]:
            self._errors[function_abi_to_4byte_selector(entry)] = entry

    @classmethod
    def from_artifacts(cls, artifacts: dict[str, dict]) -> RevertDecoder:
        return cls(artifact["abi"] for artifact in artifacts.values())

    def decode(self, data: bytes) -> DecodedError:
        entry = self._errors.get(data[:4]) if len(data) >= 4 else None
        if entry is None:
            return DecodedError(None, {}, data)
        try:
            values = abi_decode(get_abi_input_types(entry), data[4:])
        except Exception:  # malformed payload: report the name we know, without args
            return DecodedError(entry["name"], {}, data)
        names = [name or f"arg{i}" for i, name in enumerate(get_abi_input_names(entry))]
        types = get_abi_input_types(entry)
        # eth_abi gives lowercase addresses; web3 gives checksummed ones everywhere else
        values = [to_checksum_address(v) if t == "address" else v for t, v in zip(types, values)]
        return DecodedError(entry["name"], dict(zip(names, values)), data)


def revert_data(exc: BaseException) -> bytes:
    """The raw revert bytes web3 attached to a ContractLogicError (or an RPC error), b"" if none."""
    data: Any = getattr(exc, "data", None)
    if data is None and isinstance(exc, Web3RPCError) and isinstance(exc.rpc_response, dict):
        data = (exc.rpc_response.get("error") or {}).get("data")
    if isinstance(data, dict):
        data = data.get("data") or data.get("result")
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    if isinstance(data, str):
        data = data.removeprefix("Reverted ").strip()
        if data.startswith("0x"):
            try:
                return bytes.fromhex(data[2:])
            except ValueError:
                return b""
    return b""


def sign_transaction(account: LocalAccount, tx: dict[str, Any]) -> tuple[bytes, bytes]:
    """(raw signed transaction, its hash). An EIP-1559 transaction (type 2, no access list) is encoded and signed
    here with coincurve (libsecp256k1, what eth-keys uses when installed): the same bytes as
    `account.sign_transaction` (RFC 6979 nonces, low s), without its ~0.7 ms of dict validation and formatting.
    Anything else, or without coincurve, goes through eth-account."""
    fields = ("chainId", "nonce", "maxPriorityFeePerGas", "maxFeePerGas", "gas", "to", "value", "data")
    if _coincurve is None or tx.get("type") not in (2, "0x2") or set(tx) - set(fields) - {"type"} or \
            any(f not in tx for f in fields):
        signed = account.sign_transaction(tx)
        return bytes(signed.raw_transaction), bytes(signed.hash)
    to = bytes.fromhex(to_checksum_address(tx["to"])[2:])
    payload = [int(tx["chainId"]), int(tx["nonce"]), int(tx["maxPriorityFeePerGas"]), int(tx["maxFeePerGas"]),
               int(tx["gas"]), to, int(tx["value"]), bytes(tx["data"]), []]
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

    def __init__(self, w3: Web3, account: LocalAccount, store: NodeStore, *,
                 errors: RevertDecoder | None = None, retry: RetryPolicy = RetryPolicy(),
                 gas_margin: float = 1.2, receipt_timeout: float = 120.0, poll_interval: float = 0.05,
                 rebroadcast_every: float = 5.0, fee_cache_s: float = 0.0,
                 defer_writes: Callable[[Callable[[], None]], None] | None = None):
        """`fee_cache_s` > 0: reuse the base fee and priority fee read within that many seconds (or given by
        `note_block`) instead of asking for them before every transaction; the fee rule is unchanged
        (max fee = 2 x base fee + tip, which stays includable through ~6 full blocks of base-fee growth, so
        a base fee up to a second old is safe). `defer_writes`: a callable that takes a store write and runs
        it later (the node loop flushes them when idle); used for the *informational* status changes
        signed -> sent and -> mined, which a restart re-derives from the chain (`resume_outstanding`
        settles every signed/sent record by its receipt). The record itself (`record_tx`, before the
        broadcast) and the dead states (superseded, rejected) are always written at once.
        """
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
        eth_sendRawTransaction): web3's request pipeline (formatters, validation middleware) costs ~1 ms of Python
        around an eth_estimateGas, four times a local round trip. An error answer raises Web3RPCError carrying
        the response, as web3 does (the revert data and message are read from it the same way)."""
        response = self._rpc(lambda: self.w3.provider.make_request(RPCEndpoint(method), params))
        error = response.get("error") if isinstance(response, dict) else None
        if error:
            message = error.get("message", "") if isinstance(error, dict) else str(error)
            raise Web3RPCError(str(message), rpc_response=response)
        return response["result"]

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
                try:
                    self._settle(record)
                except TransactionRejected:
                    pass  # marked rejected; its key will get a fresh transaction if sent again
            self.resync_nonce()
            self._unsure_of_pool = False

    # --- public API ------------------------------------------------------------------------------

    def submit(self, key: str, to: str, data: bytes = b"", value: int = 0, gas: int | None = None, *,
               reuse_estimate: bool = False) -> str:
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

    def send(self, key: str, to: str, data: bytes = b"", value: int = 0, gas: int | None = None,
             timeout: float | None = None) -> TxReceipt:
        """Submit and wait for the receipt; a reverted transaction raises TransactionReverted."""
        for _ in range(3):
            self.submit(key, to, data, value, gas)
            try:
                return self.wait_for_receipt(key, timeout)
            except TransactionSuperseded:
                continue  # provably dead: the next submit builds a fresh transaction for the key
        raise self._nonce_fight(key)

    def send_call(self, key: str, function: ContractFunction, value: int = 0, gas: int | None = None,
                  timeout: float | None = None) -> TxReceipt:
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
            if receipt is not None:
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

    # --- internals -------------------------------------------------------------------------------

    def _nonce_fight(self, key: str) -> IdempotencyError:
        return IdempotencyError(f"{key}: its nonce was taken by other transactions three times; "
                                f"is another process signing for {self.address}?")

    def _record(self, key: str) -> SentTx:
        record = self.store.sent_tx(key)
        if record is None:
            raise KeyError(f"no transaction recorded under {key!r}")
        return record

    def _sign_and_record(self, key: str, digest: str, to: str, data: bytes, value: int, gas: int | None,
                         reuse_estimate: bool = False) -> SentTx:
        tx: dict[str, Any] = {"from": self.address, "to": to, "value": value, "data": data, "chainId": self.chain_id}
        shape = (to, bytes(data[:4]), len(data))
        if gas is None and reuse_estimate and shape in self._estimates:
            gas = int(self._estimates[shape] * self.gas_margin) + REUSE_HEADROOM
        if gas is None:
            gas = self._estimate_gas(key, tx)
            self._estimates[shape] = max(self._estimates.get(shape, 0), int(gas / self.gas_margin))
        tx["gas"] = gas
        tx.update(self._fees())
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
            if "revert" in _message(exc).lower() or _code(exc) == 3:  # code 3: a revert (with its data)
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
        (exact when it was alone in its block, best effort otherwise)."""
        tx = self._rpc(lambda: self.w3.eth.get_transaction(record.tx_hash))
        call = {"from": tx["from"], "to": tx["to"], "data": tx["input"], "value": tx["value"], "gas": tx["gas"]}
        try:
            self._rpc(lambda: self.w3.eth.call(call, block_identifier=receipt["blockNumber"] - 1))
        except ContractLogicError as exc:
            return self._reverted(record.key, exc, record.tx_hash)
        return TransactionReverted(record.key, None, {}, b"", record.tx_hash)

    def _reverted(self, key: str, exc: BaseException, tx_hash: str | None = None) -> TransactionReverted:
        decoded = self.errors.decode(revert_data(exc))
        return TransactionReverted(key, decoded.name, decoded.args, decoded.data, tx_hash)


def _code(exc: Web3RPCError) -> int | None:
    error = exc.rpc_response.get("error") if isinstance(exc.rpc_response, dict) else None
    return error.get("code") if isinstance(error, dict) else None


def _message(exc: Web3RPCError) -> str:
    error = exc.rpc_response.get("error") if isinstance(exc.rpc_response, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return str(exc.message)
