"""A fault-injecting HTTP reverse proxy for a JSON-RPC endpoint (anvil), on loopback, for tests and soak runs.

Nodes pointed at `FaultProxy(upstream).start().url` talk to the chain through it. With no faults set it forwards
every request unchanged; `set_faults` gives each fault kind a per-request probability:

    drop       the request gets no answer: held until the client gives up (its timeout), or the connection is
               closed without a response, before the request is forwarded or after (the answer is lost: the
               chain did act on it)
    delay      forwarded after a pause of up to `max_delay_s` (uniform): slow, or past the client's timeout
    rpc_error  a JSON-RPC error answer: -32005 "rate limit exceeded" instead of forwarding, or -32603 "internal
               error" in place of the real answer (forwarded: the chain acted on it)
    http_429   HTTP 429 Too Many Requests, not forwarded
    http_5xx   HTTP 500/502/503/504, before forwarding or after (a gateway that lost the upstream's answer)
    cut        forwarded, then the answer's headers (with its full Content-Length) and part of its body are sent
               and the connection is closed

`methods=` limits the faults to requests that name one of those methods (a batch: any of its calls). `restart`
closes the listener and every connection and reopens the same port after `down_for` seconds (it blocks for
that long: call it from another thread to restart under load).

Seeded: the n-th request (in arrival order) gets the n-th draw of a `random.Random(seed)`, three numbers per
request whatever the outcome, so a run's fault sequence is reproducible for the same order of requests.
`stats` counts requests, forwards and faults by kind; `injected` lists each fault (request number, method, kind,
variant). A websocket upgrade (a node's `HeadWaker` subscribing to new heads) is tunnelled to the upstream as
raw bytes, without faults; a restart cuts it like any other connection.

Runs an asyncio loop in a daemon thread; stdlib only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

KINDS = ("drop", "delay", "rpc_error", "http_429", "http_5xx", "cut")
_REASONS = {200: "OK", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway"}
_REASONS |= {503: "Service Unavailable", 504: "Gateway Timeout", 400: "Bad Request", 411: "Length Required"}
_MAX_BODY = 64 * 1024 * 1024
_HOLD_S = 300.0  # a held ("dropped") request is let go after this long at the latest


@dataclass(frozen=True)
class Faults:
    drop: float = 0.0
    delay: float = 0.0
    max_delay_s: float = 3.0
    rpc_error: float = 0.0
    http_429: float = 0.0
    http_5xx: float = 0.0
    cut: float = 0.0
    methods: frozenset[str] | None = None

    def kind(self, u: float, methods: list[str]) -> str | None:
        if self.methods is not None and not any(m in self.methods for m in methods):
            return None
        edge = 0.0
        for kind in KINDS:
            edge += getattr(self, kind)
            if u < edge:
                return kind
        return None


@dataclass(frozen=True)
class Injected:
    """One fault: the request's number (from 0, in arrival order), its method(s), the kind and the variant
    ("hold", "lost", "refused"; "before" / "after" forwarding; an error code; the delay in ms)."""

    n: int
    method: str
    kind: str
    variant: str


class FaultProxy:
    def __init__(self, upstream: str, *, seed: int = 0, host: str = "127.0.0.1", port: int = 0):
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"FaultProxy forwards to an http:// URL, not {upstream!r}")
        self.upstream = upstream
        self._up_host, self._up_port = parts.hostname, parts.port or 80
        self._up_path = parts.path or "/"
        self.host, self.port = host, port
        self.url = ""
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._faults = Faults()
        self.stats: dict[str, int] = dict.fromkeys(
            ("requests", "forwarded", *KINDS, "restarts", "websockets", "upstream_errors"), 0
        )
        self.injected: list[Injected] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    # ------------------------------------------------------------------ control (any thread)

    def start(self) -> FaultProxy:
        if self._loop is not None:
            return self
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        self._call(self._listen())
        self.url = f"http://[{self.host}]:{self.port}" if ":" in self.host else f"http://{self.host}:{self.port}"
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()
        self._loop = self._thread = None

    def restart(self, down_for: float = 1.0) -> None:
        """Close the listener and every connection (held, tunnelled or mid-request), wait `down_for` seconds
        (connections are refused meanwhile), listen on the same port again."""
        if self._loop is None:
            raise RuntimeError("the proxy is not running")
        self._call(self._close())
        with self._lock:
            self.stats["restarts"] += 1
        time.sleep(down_for)
        self._call(self._listen())

    def set_faults(
        self,
        *,
        drop: float = 0.0,
        delay: float = 0.0,
        max_delay_s: float = 3.0,
        rpc_error: float = 0.0,
        http_429: float = 0.0,
        http_5xx: float = 0.0,
        cut: float = 0.0,
        methods=None,
    ) -> None:
        """Per-request probabilities of each fault (all 0: transparent); `methods`: only requests naming one."""
        faults = Faults(drop, delay, max_delay_s, rpc_error, http_429, http_5xx, cut, None)
        rates = [getattr(faults, k) for k in KINDS]
        if any(not 0.0 <= r <= 1.0 for r in rates) or sum(rates) > 1.0 + 1e-9:
            raise ValueError(f"fault probabilities must lie in [0, 1] and sum to at most 1, got {rates}")
        if max_delay_s < 0:
            raise ValueError("max_delay_s must be >= 0")
        if methods is not None:
            faults = Faults(*rates[:2], max_delay_s, *rates[2:], frozenset(methods))
        with self._lock:
            self._faults = faults

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _call(self, coro) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    # ------------------------------------------------------------------ the loop's side

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        tasks, self._tasks = self._tasks, set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _draw(self, methods: list[str]) -> tuple[int, str | None, float, float]:
        with self._lock:
            n = self.stats["requests"]
            self.stats["requests"] += 1
            u, a, b = self._rng.random(), self._rng.random(), self._rng.random()
            return n, self._faults.kind(u, methods), a, b

    def _note(self, n: int, methods: list[str], kind: str, variant: str) -> None:
        with self._lock:
            self.stats[kind] += 1
            self.injected.append(Injected(n, ",".join(methods) or "?", kind, variant))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        upstream = _Upstream(self._up_host, self._up_port)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                line, headers = _parse_head(head)
                if headers.get("upgrade", "").lower() == "websocket":
                    with self._lock:
                        self.stats["websockets"] += 1
                    await self._tunnel(head, reader, writer)
                    return
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    await _respond(writer, 411, b"")
                    return
                length = int(headers.get("content-length", "0") or 0)
                if length > _MAX_BODY:
                    await _respond(writer, 400, b"")
                    return
                body = await reader.readexactly(length)
                if not await self._answer(line, headers, body, reader, writer, upstream):
                    return
                if headers.get("connection", "").lower() == "close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return
        except asyncio.CancelledError:  # a restart or stop: the connection ends here, quietly
            return
        finally:
            self._tasks.discard(task)
            upstream.close()
            writer.transport.abort()

    async def _answer(self, line, headers, body, reader, writer, upstream) -> bool:
        """Answer one request, faulty or not; False when the connection is to be closed."""
        methods, ids = _methods_of(body)
        n, kind, a, b = self._draw(methods)
        path = line.split(" ")[1] if line.count(" ") >= 2 else "/"
        if kind == "drop":
            variant = "hold" if b < 1 / 3 else "lost" if b < 2 / 3 else "refused"
            self._note(n, methods, kind, variant)
            if variant == "lost":
                await self._forward(path, headers, body, upstream)
            if variant == "hold":  # until the client gives up on it and closes, or a restart
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(reader.read(), _HOLD_S)
            return False
        if kind == "delay":
            pause = a * self._faults.max_delay_s
            self._note(n, methods, kind, f"{pause * 1000:.0f}ms")
            await asyncio.sleep(pause)
        if kind == "http_429":
            self._note(n, methods, kind, "before")
            await _respond(writer, 429, b"Too Many Requests", {"Retry-After": "0"})
            return True
        if kind == "rpc_error" and a < 0.5:
            self._note(n, methods, kind, "-32005")
            await _respond(writer, 200, _errors(ids, -32005, "rate limit exceeded"))
            return True
        if kind == "http_5xx" and b < 0.5:
            status = (500, 502, 503, 504)[int(a * 4)]
            self._note(n, methods, kind, f"{status} before")
            await _respond(writer, status, b"")
            return True
        answer = await self._forward(path, headers, body, upstream)
        if answer is None:
            await _respond(writer, 502, b"upstream unavailable")
            return True
        status, payload = answer
        if kind == "rpc_error":
            self._note(n, methods, kind, "-32603")
            await _respond(writer, 200, _errors(ids, -32603, "internal error"))
            return True
        if kind == "http_5xx":
            status = (500, 502, 503, 504)[int(a * 4)]
            self._note(n, methods, kind, f"{status} after")
            await _respond(writer, status, b"")
            return True
        if kind == "cut":
            keep = int(a * len(payload)) if len(payload) > 1 else 0
            self._note(n, methods, kind, f"{keep}/{len(payload)}")
            writer.write(_head(status, len(payload)) + payload[:keep])
            await writer.drain()
            return False
        await _respond(writer, status, payload)
        return True

    async def _forward(self, path, headers, body, upstream: _Upstream) -> tuple[int, bytes] | None:
        answer = await upstream.post(self._up_path if path == "/" else path, headers, body)
        with self._lock:
            self.stats["forwarded" if answer is not None else "upstream_errors"] += 1
        return answer

    async def _tunnel(self, head: bytes, reader, writer) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self._up_host, self._up_port)
        except OSError:
            return
        up_writer.write(head)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError, asyncio.IncompleteReadError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()

        try:
            pipes = [asyncio.ensure_future(pipe(reader, up_writer)), asyncio.ensure_future(pipe(up_reader, writer))]
            try:
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for p in pipes:
                    p.cancel()
                await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            up_writer.transport.abort()


class _Upstream:
    """One kept-alive connection to the upstream per client connection (opened again when the upstream closed it)."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, headers: dict, body: bytes) -> tuple[int, bytes] | None:
        request = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: {headers.get('content-type', 'application/json')}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        for attempt in range(2):
            reused = self._conn is not None
            try:
                if self._conn is None:
                    self._conn = await asyncio.open_connection(self.host, self.port)
                reader, writer = self._conn
                writer.write(request)
                await writer.drain()
                return await _read_response(reader)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                self.close()
                if not reused or attempt:
                    return None  # the upstream is down: a real failure, not an injected one
        return None

    def close(self) -> None:
        if self._conn is not None:
            self._conn[1].transport.abort()
            self._conn = None


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for raw in lines[1:]:
        name, sep, value = raw.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    line, headers = _parse_head(await reader.readuntil(b"\r\n\r\n"))
    status = int(line.split(" ")[1])
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
        return status, body
    if "content-length" in headers:
        return status, await reader.readexactly(int(headers["content-length"]))
    raise ValueError("an upstream answer without a length")  # anvil always sends one


def _head(status: int, length: int, extra: dict | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", "Content-Type: application/json"]
    lines += [f"Content-Length: {length}", "Connection: keep-alive"]
    lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _respond(writer: asyncio.StreamWriter, status: int, body: bytes, extra: dict | None = None) -> None:
    writer.write(_head(status, len(body), extra) + body)
    await writer.drain()


def _methods_of(body: bytes) -> tuple[list[str], list | None]:
    """The JSON-RPC methods a request body names and the ids to answer it with: a list of them for a batch,
    else the one id; None when the body is not JSON-RPC."""
    try:
        message = json.loads(body)
    except ValueError:
        return [], None
    if isinstance(message, dict):
        return [str(message.get("method"))], message.get("id")
    if isinstance(message, list):
        calls = [c for c in message if isinstance(c, dict)]
        return [str(c.get("method")) for c in calls], [c.get("id") for c in calls]
    return [], None


def _errors(ids, code: int, message: str) -> bytes:
    def one(i):
        return {"jsonrpc": "2.0", "id": i, "error": {"code": code, "message": message}}

    return json.dumps([one(i) for i in ids] if isinstance(ids, list) else one(ids)).encode()
