"""Talking to an EVM JSON-RPC endpoint: connecting, retrying transient failures, and a kept-alive HTTP provider.

`connect(url)` gives a Web3 whose provider retries, under one `RetryPolicy`, every request that is safe to send
again (`retry_safe`: the reads, and eth_sendRawTransaction, whose signed bytes mean the same however often they
arrive) when it fails transiently (`is_transient`: the endpoint is down, slow, overloaded, restarting, cut the
answer off, or answered a JSON-RPC "not now" error); a request that is not safe to repeat (eth_sendTransaction,
evm_mine, ...) is sent once. Every request has a timeout. The `TxSender` and `EventPoller` wrap their calls in
`with_retries` too, which covers a provider that does not retry; behind `connect`'s provider a call that ran out
of retries is already a `ChainUnavailable`, which is not retried again. The chain id is answered from the
provider's cache after the first call (`cache_chain_id`); requests go over one persistent connection per thread
(`KeepAliveHTTPProvider`) unless a proxy or .netrc entry applies to the URL. What these save per request is
measured in docs/node.md ("Latency of a cycle"); what is retried and how: docs/node.md ("Retries").
"""

from __future__ import annotations

import base64
import http.client
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import requests
from web3 import Web3
from web3.exceptions import ProviderConnectionError, RequestTimedOut, Web3RPCError
from web3.types import RPCEndpoint

from node.chain.errors import ChainUnavailable

T = TypeVar("T")


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


# JSON-RPC error answers that mean "not now" rather than "no". -32005 is "limit exceeded": a rate limit (Infura,
# Alchemy, QuickNode), unless it is about the query's size (Infura: "query returned more than 10000 results"),
# which `node.chain.logs` answers by halving the range; -32603 is the server failing to answer ("internal
# error"), except Hardhat's spelling of a revert; some gateways answer code 429 inside the JSON.
_QUERY_TOO_LARGE = ("result", "range", "block", "size")
_NOT_NOW = ("rate limit", "too many requests", "try again later", "request limit")


def is_transient_answer(response: Any) -> bool:
    """Whether a JSON-RPC response is an error worth asking again for (a rate limit, an internal error)."""
    error = response.get("error") if isinstance(response, dict) else None
    if not isinstance(error, dict):
        return False
    code, message = error.get("code"), str(error.get("message", "")).lower()
    if "revert" in message:
        return False
    if code == -32005:
        return not any(s in message for s in _QUERY_TOO_LARGE)
    return code in (-32603, 429) or any(s in message for s in _NOT_NOW)


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying: the endpoint is down, slow, overloaded or restarting, cut its answer off, or answered
    a rate-limit or internal error. A revert, a refusal (nonce too low, underpriced) or a malformed request is not."""
    if isinstance(
        exc,
        (
            requests.ConnectionError,
            requests.Timeout,
            requests.exceptions.ChunkedEncodingError,  # requests' name for an answer cut off mid-body
            ConnectionError,
            TimeoutError,
            ProviderConnectionError,
            RequestTimedOut,
        ),
    ):
        return True
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return exc.response.status_code >= 500 or exc.response.status_code in (408, 429)
    if isinstance(exc, Web3RPCError):
        return is_transient_answer(getattr(exc, "rpc_response", None))
    return False


# Methods a lost answer cannot make harmful to send again: reads (eth_getFilterChanges is not one: it moves a
# server-side cursor) and eth_sendRawTransaction (the same signed bytes: the node answers "already known" or
# "nonce too low", which TxSender reads as what they are). eth_sendTransaction, evm_mine, evm_increaseTime and the
# like are sent once: a second copy would be a second action.
_RETRY_SAFE = frozenset(
    {
        "eth_sendRawTransaction",
        "eth_call",
        "eth_estimateGas",
        "eth_blockNumber",
        "eth_chainId",
        "eth_gasPrice",
        "eth_maxPriorityFeePerGas",
        "eth_feeHistory",
        "eth_syncing",
        "eth_accounts",
        "net_version",
        "web3_clientVersion",
    }
)


def retry_safe(method: str) -> bool:
    return method in _RETRY_SAFE or (method.startswith("eth_get") and method != "eth_getFilterChanges")


def with_retries(
    call: Callable[[], T], policy: RetryPolicy, url: str, on_retry: Callable[[BaseException], None] | None = None
) -> T:
    """`call()`, again after each transient failure (`is_transient`) with the policy's backoff; ChainUnavailable
    once its attempts are spent. Anything else (a revert, a ChainUnavailable from a provider that retried) at once."""
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
            if on_retry is not None:
                on_retry(exc)
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


class TruncatedAnswer(requests.ConnectionError):
    """An HTTP 200 answer whose body is not JSON: cut off mid-body by a connection that closed (no length
    was sent to tell), or mangled on the way. Transient: the request is asked again."""


class RetryingHTTPProvider(Web3.HTTPProvider):
    """web3's HTTPProvider with its own retry loop off and `RetryPolicy` in its place: a request that is safe to
    send again (`retry_safe`) is, after a transient failure (`is_transient`, a JSON-RPC "not now" answer
    included), until the policy's attempts are spent (then ChainUnavailable); any other request is sent once.
    `retried` counts the retries by what caused them (the exception's type, or "rpc <code>")."""

    def __init__(
        self,
        endpoint_uri: str,
        request_kwargs: dict | None = None,
        *,
        retry: RetryPolicy | None = None,
        **kwargs: Any,
    ):
        kwargs.setdefault("exception_retry_configuration", None)
        super().__init__(endpoint_uri, request_kwargs=request_kwargs, **kwargs)
        self.retry = retry
        self.retried: Counter[str] = Counter()

    def _note_retry(self, exc: BaseException) -> None:
        if isinstance(exc, Web3RPCError):
            error = exc.rpc_response.get("error") if isinstance(exc.rpc_response, dict) else None
            self.retried[f"rpc {error.get('code') if isinstance(error, dict) else '?'}"] += 1
        else:
            self.retried[type(exc).__name__] += 1

    def _once(self, method: RPCEndpoint, params: Any) -> Any:
        try:
            response = super().make_request(method, params)
        except ValueError as exc:  # the body did not decode as JSON
            if isinstance(exc, Web3RPCError):
                raise
            raise TruncatedAnswer(f"{self.endpoint_uri}: {method} answered with a body that is not JSON") from exc
        if is_transient_answer(response):
            raise Web3RPCError(str(response["error"].get("message", "")), rpc_response=response)
        return response

    def make_request(self, method: RPCEndpoint, params: Any) -> Any:
        if self.retry is None or not retry_safe(method):
            return super().make_request(method, params)
        return with_retries(lambda: self._once(method, params), self.retry, str(self.endpoint_uri), self._note_retry)


class KeepAliveHTTPProvider(RetryingHTTPProvider):
    """web3's HTTPProvider, but each JSON-RPC request goes over one persistent `http.client` connection per
    thread instead of through requests/urllib3, whose per-request work (session merging, environment and
    proxy lookups, pool bookkeeping) costs more than a local round trip itself (docs/node.md, "Measured costs");
    a node makes thousands.

    Errors keep requests' types, so callers and `is_transient` see what they saw before: a refused, reset
    or timed-out connection raises `requests.ConnectionError` / `requests.Timeout`, an HTTP error status
    `requests.HTTPError` (with the status code). A kept-alive connection that the server closed while idle
    is reopened and the request sent once more (nothing was processed: no response had started). Used by
    `connect` only for http(s) URLs that no proxy or .netrc entry applies to; batches go the usual way.
    """

    def __init__(self, endpoint_uri: str, request_kwargs: dict | None = None, **kwargs: Any):
        super().__init__(endpoint_uri, request_kwargs=request_kwargs, **kwargs)
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
            conn = http.client.HTTPSConnection(
                self._host, self._port, timeout=self._timeout, context=ssl.create_default_context()
            )
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
            except (
                http.client.RemoteDisconnected,
                BrokenPipeError,
                ConnectionResetError,
                ConnectionAbortedError,
            ) as exc:
                self._drop_connection()
                if reused:
                    continue  # the server closed the idle kept-alive connection: reopen, send again
                raise requests.ConnectionError(f"{type(exc).__name__}: {exc}") from exc
            except TimeoutError as exc:
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
                raise requests.HTTPError(f"{response.status} {response.reason} for {self.endpoint_uri}", response=error)
            return body
        raise requests.ConnectionError(f"{self.endpoint_uri} closed the connection twice")


def connect(
    url: str, *, wait: float = 10.0, request_timeout: float = 10.0, retry: RetryPolicy | None = RetryPolicy()
) -> Web3:
    """A Web3 over HTTP(S) `url` that answered eth_chainId within `wait` seconds, else ChainUnavailable.

    Every request times out after `request_timeout` seconds; the provider retries what is safe to send again
    under `retry` (`RetryingHTTPProvider`; None: no retries); the chain id is cached (`cache_chain_id`);
    requests go over a kept-alive connection (`KeepAliveHTTPProvider`) unless a proxy or .netrc entry applies
    to the URL.
    """
    kind = KeepAliveHTTPProvider if KeepAliveHTTPProvider.usable_for(url) else RetryingHTTPProvider
    provider = kind(url, request_kwargs={"timeout": request_timeout})
    w3 = cache_chain_id(Web3(provider))
    deadline = time.monotonic() + wait
    while True:  # the first request, under `wait` rather than the retry policy: it answers once the node is up
        try:
            _ = w3.eth.chain_id
            provider.retry = retry
            return w3
        except Exception as exc:
            if not is_transient(exc):
                raise ChainUnavailable(url, f"{type(exc).__name__}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise ChainUnavailable(url, f"no answer within {wait:.1f}s ({type(exc).__name__})") from None
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
