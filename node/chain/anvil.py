"""Start and stop a local anvil chain (from node_modules) on a free port."""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ANVIL_BINARY = PROJECT_ROOT / "node_modules" / ".bin" / "anvil"
ANVIL_CHAIN_ID = 31337
MAX_BLOCK_TIME_S = 3600  # more than an hour between blocks is a typo (milliseconds for seconds), not a dev chain


class AnvilError(RuntimeError):
    """anvil is missing or did not come up."""


@dataclass
class Anvil:
    process: subprocess.Popen
    port: int
    state_cache: Path | None = None  # where this anvil persists old states; deleted with it

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.state_cache is not None:
            shutil.rmtree(self.state_cache, ignore_errors=True)


LOWEST_PORT = 10_000


def lowest_ephemeral_port() -> int:
    """Where the kernel's range for the local ports of outgoing connections starts (Linux; else the IANA range)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 49152


def free_port() -> int:
    """A loopback port that is free now, for a server that binds it later (anvil, a node's `--listen`). Drawn at
    random below the kernel's ephemeral range: a port the kernel picks (`bind(0)`) lies inside it, where any
    outgoing connection of a busy machine (an RPC call, a websocket) can take it before the server binds it,
    which failed a fresh-clone suite run beside CPU hogs ("address already in use" at a verifier's --listen)."""
    low = lowest_ephemeral_port()
    if low - LOWEST_PORT >= 1_000:
        rnd = random.SystemRandom()
        for _ in range(64):
            port = rnd.randrange(LOWEST_PORT, low)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rpc_ready(url: str) -> bool:
    try:
        reply = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}, timeout=1)
        return reply.ok
    except requests.RequestException:
        return False


def anvil_command(port: int, accounts: int, balance_eth: int, state_cache: Path, *extra_args: str) -> list[str]:
    """The anvil command line: on 127.0.0.1:`port`, `accounts` dev accounts of `balance_eth` each, our chain id.

    anvil writes the historical states it cannot keep in memory under `state_cache` and leaves them behind when it
    stops (by default in ~/.foundry/anvil/tmp, where 67 GB had piled up): the caller owns the folder and deletes it
    once the chain is gone."""
    return [
        str(ANVIL_BINARY),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--accounts",
        str(accounts),
        "--balance",
        str(balance_eth),
        "--chain-id",
        str(ANVIL_CHAIN_ID),
        "--cache-path",
        str(state_cache),
        *extra_args,
    ]


def check_block_time(value) -> int:
    """Seconds between blocks for interval mining (`chain up --block-time N`; 0: a block per transaction). A whole
    number 0..MAX_BLOCK_TIME_S (anvil's evm_setIntervalMining takes whole seconds), else ValueError (one line)."""
    text = str(value).strip()
    if not text.isdigit() or int(text) > MAX_BLOCK_TIME_S:
        raise ValueError(
            f"--block-time wants whole seconds from 0 (a block per transaction) to {MAX_BLOCK_TIME_S}, got {value!r}"
        )
    return int(text)


def set_block_time(rpc_url: str, seconds: int) -> None:
    """Switch a running dev chain (anvil or hardhat) to a block every `seconds` s, or back to a block per transaction
    (0). Done after deployment, so that deploying takes no block waits. Hardhat counts the interval in ms, anvil in
    s; both need automine off for interval mining to take over."""
    seconds = check_block_time(seconds)
    version = _rpc(rpc_url, "web3_clientVersion")
    interval = seconds * 1000 if "hardhat" in str(version).lower() else seconds
    if seconds:
        _rpc(rpc_url, "evm_setAutomine", False)
        _rpc(rpc_url, "evm_setIntervalMining", interval)
    else:  # this order: on anvil, setIntervalMining(0) after setAutomine(true) leaves it mining nothing
        _rpc(rpc_url, "evm_setIntervalMining", 0)
        _rpc(rpc_url, "evm_setAutomine", True)


def _rpc(url: str, method: str, *params):
    reply = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}, timeout=10)
    body = reply.json()
    if "error" in body:
        raise AnvilError(f"{url} refused {method}: {body['error'].get('message', body['error'])}")
    return body.get("result")


def block_time_args(block_time: int) -> tuple[str, ...]:
    seconds = check_block_time(block_time)
    return ("--block-time", str(seconds)) if seconds else ()


def start_anvil(
    port: int | None = None,
    accounts: int = 20,
    balance_eth: int = 100_000,
    extra_args: tuple[str, ...] = (),
    startup_timeout: float = 30.0,
    block_time: int = 0,
) -> Anvil:
    """An anvil on `port` (a free one by default); `block_time` > 0: a block every that many s, from the start (for
    a chain that is deployed first, call `set_block_time` after deploying instead)."""
    if not ANVIL_BINARY.exists():
        raise AnvilError(f"{ANVIL_BINARY} is missing: run `make setup` (npm install) first")
    port = port or free_port()
    state_cache = Path(tempfile.mkdtemp(prefix="verispec-anvil-states-"))
    try:
        process = subprocess.Popen(
            anvil_command(port, accounts, balance_eth, state_cache, *extra_args, *block_time_args(block_time)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except BaseException:
        shutil.rmtree(state_cache, ignore_errors=True)
        raise
    node = Anvil(process, port, state_cache)
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            node.stop()
            raise AnvilError(f"anvil exited with {process.returncode}: {process.stderr.read().decode()[-2000:]}")
        if _rpc_ready(node.rpc_url):
            return node
        time.sleep(0.1)
    node.stop()
    raise AnvilError(f"anvil did not answer on port {port} within {startup_timeout}s")


@contextlib.contextmanager
def running_anvil(**kwargs) -> Iterator[Anvil]:
    node = start_anvil(**kwargs)
    try:
        yield node
    finally:
        node.stop()
