"""Hardhat's dev chain (npm `hardhat`, pinned in package.json) as a second local client beside anvil.

`hardhat_command` is the command line of `hardhat node` with node/chain/hardhat.config.js (chain id 31337, the
dev mnemonic's accounts, like `anvil_command`); `start_hardhat` / `running_hardhat` start one on a free port the
way `start_anvil` / `running_anvil` do. What differs between the two clients is in docs/clients.md.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator

from node.chain.anvil import ANVIL_CHAIN_ID, PROJECT_ROOT, Anvil, _rpc_ready, free_port

HARDHAT_BINARY = PROJECT_ROOT / "node_modules" / ".bin" / "hardhat"
HARDHAT_CONFIG = PROJECT_ROOT / "node" / "chain" / "hardhat.config.js"
HARDHAT_CHAIN_ID = ANVIL_CHAIN_ID  # both configs use 31337, so deployments and dev keys look the same


class HardhatError(RuntimeError):
    """hardhat is missing or its node did not come up."""


def hardhat_env(accounts: int, balance_eth: int) -> dict[str, str]:
    """The environment `hardhat node` reads its config from (accounts, balance) with its prompts switched off."""
    return {
        **os.environ,
        "VERISPEC_HARDHAT_ACCOUNTS": str(accounts),
        "VERISPEC_HARDHAT_BALANCE_WEI": str(balance_eth * 10**18),
        # no telemetry question on a terminal, no update check: the node must start unattended
        "HARDHAT_DISABLE_TELEMETRY_PROMPT": "true",
        "HARDHAT_DISABLE_SENTRY": "true",
    }


def hardhat_command(port: int) -> list[str]:
    """`hardhat node` on 127.0.0.1:`port` with the project's config (the accounts come from `hardhat_env`)."""
    return [
        str(HARDHAT_BINARY),
        "--config",
        str(HARDHAT_CONFIG),
        "node",
        "--hostname",
        "127.0.0.1",
        "--port",
        str(port),
    ]


def start_hardhat(
    port: int | None = None, accounts: int = 20, balance_eth: int = 100_000, startup_timeout: float = 60.0
) -> Anvil:
    """A `hardhat node` on `port` (a free one by default), answering RPC; the returned handle stops it."""
    if not HARDHAT_BINARY.exists():
        raise HardhatError(f"{HARDHAT_BINARY} is missing: run `make setup` (npm ci) first")
    port = port or free_port()
    process = subprocess.Popen(
        hardhat_command(port),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=hardhat_env(accounts, balance_eth),
        cwd=HARDHAT_CONFIG.parent,
    )
    node = Anvil(process, port)
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise HardhatError(f"hardhat exited with {process.returncode}: {process.stderr.read().decode()[-2000:]}")
        if _rpc_ready(node.rpc_url):
            return node
        time.sleep(0.1)
    node.stop()
    raise HardhatError(f"hardhat did not answer on port {port} within {startup_timeout}s")


@contextlib.contextmanager
def running_hardhat(**kwargs) -> Iterator[Anvil]:
    node = start_hardhat(**kwargs)
    try:
        yield node
    finally:
        node.stop()
