"""Talking to an EVM JSON-RPC endpoint: connecting, retrying transient failures, and a kept-alive HTTP provider.

`connect(url)` gives a Web3 whose provider does not retry on its own, so `RetryPolicy` / `with_retries` is the one
place retries happen (a node's `TxSender` and `EventPoller` wrap their calls in it); the chain id is answered from
the provider's cache after the first call (`cache_chain_id`); and requests go over one persistent connection per
thread (`KeepAliveHTTPProvider`) unless a proxy or .netrc entry applies to the URL. What these save per request
is measured in docs/node.md ("Latency of a cycle").
"""

from __future__ import annotations

import base64
import http.client
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import requests
from web3 import Web3
from web3.exceptions import ProviderConnectionError, RequestTimedOut, TooManyRequests
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


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying: the endpoint is down, slow, overloaded or restarting."""
    if isinstance(
        exc,
        (
            requests.ConnectionError,
            requests.Timeout,
            ConnectionError,
            TimeoutError,
            ProviderConnectionError,
            TooManyRequests,
            RequestTimedOut,
        ),
    ):
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
    proxy lookups, pool bookkeeping) costs more than a local round trip itself (docs/node.md, "Measured costs");
    a node makes thousands.

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


def connect(url: str, *, wait: float = 10.0, request_timeout: float = 10.0) -> Web3:
    """A Web3 over HTTP(S) `url` that answered eth_chainId within `wait` seconds, else ChainUnavailable.

    The provider's own retry loop is switched off, so `RetryPolicy` is the one place retries happen;
    the chain id is cached (`cache_chain_id`); requests go over a kept-alive connection
    (`KeepAliveHTTPProvider`) unless a proxy or .netrc entry applies to the URL.
    """
    if KeepAliveHTTPProvider.usable_for(url):
        provider = KeepAliveHTTPProvider(url, request_kwargs={"timeout": request_timeout})
    else:
        provider = Web3.HTTPProvider(
            url, request_kwargs={"timeout": request_timeout}, exception_retry_configuration=None
        )
    w3 = cache_chain_id(Web3(provider))
    deadline = time.monotonic() + wait
    while True:
        try:
            _ = w3.eth.chain_id  # the first request: answers once the node is up
            return w3
        except Exception as exc:
            if not is_transient(exc):
                raise ChainUnavailable(url, f"{type(exc).__name__}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise ChainUnavailable(url, f"no answer within {wait:.1f}s ({type(exc).__name__})") from None
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
