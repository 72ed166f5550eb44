"""A local chain that outlives the command that started it: `verispec chain up` / `chain down`.

`chain_up` starts anvil (from node_modules) as a detached background process (its own session, so a
Ctrl-C in the shell that ran `chain up` does not reach it), records its pid in `<home>/anvil.pid`,
deploys the protocol with `deploy_system` and writes `<home>/deployment.json`. `chain_down` stops the
process recorded in the pid file (after checking that the pid still belongs to an anvil) and removes
the pid file and the deployment file, whose contracts lived only in that anvil's memory.

`deploy_to` deploys onto a chain that is already running (any dev node with an unlocked account 0,
e.g. an anvil or hardhat node started by hand) and writes the deployment file the same way; it refuses a home
that has a deployment file already unless forced (`chain deploy --force`), since that home's nodes may be serving it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from node.chain.anvil import ANVIL_BINARY, _rpc_ready, anvil_command, free_port
from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.params import DeploymentParams
from node.chain.rpc import connect

PID_FILE = "anvil.pid"
LOG_FILE = "anvil.log"
DEPLOYMENT_FILE = "deployment.json"
DEV_ACCOUNTS = 20
DEV_BALANCE_ETH = 100_000


class LocalChainError(RuntimeError):
    """The local chain could not be started or stopped; the message says why."""


@dataclass(frozen=True)
class LocalChain:
    rpc_url: str
    pid: int | None  # None when deployed onto a chain this module did not start
    deployment: Deployment
    deployment_path: Path
    log_path: Path | None


def pid_path(home: Path) -> Path:
    return Path(home) / PID_FILE


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) is not alive for our purposes
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _is_anvil(pid: int) -> bool:
    """Whether `pid` runs anvil (so a stale pid file never makes us signal an unrelated process)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return _alive(pid)  # no /proc (macOS): trust the pid file
    return bool(cmdline) and Path(cmdline[0].decode(errors="replace")).name == "anvil"


def read_pid(home: Path) -> int | None:
    """The pid of the anvil `chain up` started for `home`, if it is still running (a stale file is removed)."""
    path = pid_path(home)
    if not path.exists():
        return None
    try:
        pid = int(path.read_text().split()[0])
    except (ValueError, IndexError, OSError):
        path.unlink(missing_ok=True)
        return None
    if _alive(pid) and _is_anvil(pid):
        return pid
    path.unlink(missing_ok=True)
    return None


def start_detached_anvil(home: Path, port: int | None = None, startup_timeout: float = 30.0) -> tuple[int, str]:
    """Start anvil in its own session with output to <home>/anvil.log; returns (pid, rpc url)."""
    if not ANVIL_BINARY.exists():
        raise LocalChainError(f"{ANVIL_BINARY} is missing: run `make setup` (npm install) first")
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    if _rpc_ready(url):
        raise LocalChainError(f"port {port} is already serving an RPC: pick another --port (or `chain down`)")
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / LOG_FILE
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            anvil_command(port, DEV_ACCOUNTS, DEV_BALANCE_ETH),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pid_path(home).write_text(f"{process.pid}\n")
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pid_path(home).unlink(missing_ok=True)
            tail = log_path.read_text(errors="replace")[-800:].strip()
            raise LocalChainError(f"anvil exited with code {process.returncode} on port {port}: {tail}")
        if _rpc_ready(url):
            return process.pid, url
        time.sleep(0.1)
    _terminate_group(process.pid)
    pid_path(home).unlink(missing_ok=True)
    raise LocalChainError(f"anvil did not answer on port {port} within {startup_timeout:.0f}s (log: {log_path})")


def deploy_to(
    rpc_url: str, home: Path, params: DeploymentParams | None = None, pid: int | None = None, force: bool = False
) -> Deployment:
    """Deploy the protocol from the node's first unlocked account and write <home>/deployment.json.

    Refuses (before deploying anything) when the home holds a deployment file already, unless `force`: nodes and
    CLI commands of that home may be serving its contracts, and would silently move to the new ones."""
    path = Path(home) / DEPLOYMENT_FILE
    if path.exists() and not force:
        try:
            old = Deployment.load(path)
            what = f"chain {old.chain_id} at {old.rpc_url}, market {old.addresses.get('InferenceMarket')}"
        except Exception:
            what = "unreadable"
        raise LocalChainError(
            f"{path} already holds a deployment ({what}): pass --force to replace it, or use another --home"
        )
    w3 = connect(rpc_url)
    accounts = w3.eth.accounts
    if not accounts:
        raise LocalChainError(f"{rpc_url} has no unlocked account to deploy from (a local dev node is needed)")
    start_block = w3.eth.block_number
    system = deploy_system(w3, accounts[0], params)
    deployment = Deployment.of_system(w3, system, rpc_url, start_block, anvil_pid=pid)
    deployment.save(Path(home) / DEPLOYMENT_FILE)
    return deployment


def chain_up(home: Path, port: int | None = None, params: DeploymentParams | None = None) -> LocalChain:
    """Start a detached anvil for `home`, deploy, write the deployment file. Refuses a second chain per home."""
    home = Path(home)
    running = read_pid(home)
    if running is not None:
        raise LocalChainError(
            f"a chain started for {home} is already running (pid {running}): "
            "`verispec chain down` first, or use another --home"
        )
    if params is not None:
        params.validate()
    pid, url = start_detached_anvil(home, port)
    try:
        # no chain of this home runs (checked above): a deployment file left there names contracts that are gone
        deployment = deploy_to(url, home, params, pid=pid, force=True)
    except BaseException:
        stop_pid(pid)
        pid_path(home).unlink(missing_ok=True)
        raise
    return LocalChain(url, pid, deployment, home / DEPLOYMENT_FILE, home / LOG_FILE)


def _terminate_group(pid: int, timeout: float = 10.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)  # anvil leads its own session: pid == process group id
        except ProcessLookupError:
            return
        except PermissionError:
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:  # reap it if it is our child (chain_up in this process); otherwise just poll
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                pass
            if not _alive(pid):
                return
            time.sleep(0.05)


def stop_pid(pid: int) -> None:
    _terminate_group(pid)


def chain_down(home: Path) -> int | None:
    """Stop the anvil `chain up` started for `home`; returns its pid (None if none was running).

    The deployment file goes too when it names that anvil: its contracts are gone with the process.
    """
    home = Path(home)
    pid = read_pid(home)
    if pid is not None:
        _terminate_group(pid)
        if _alive(pid):
            raise LocalChainError(f"anvil (pid {pid}) did not stop")
    pid_path(home).unlink(missing_ok=True)
    deployment_path = home / DEPLOYMENT_FILE
    if deployment_path.exists():
        try:
            recorded = Deployment.load(deployment_path).anvil_pid
        except Exception:
            recorded = None
        if recorded is not None and (recorded == pid or not _alive(recorded)):
            deployment_path.unlink()
    return pid
