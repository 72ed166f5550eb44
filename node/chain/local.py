"""A local chain that outlives the command that started it: `verispec chain up` / `chain down`.

`chain_up` starts a dev chain from node_modules, anvil (the default) or Hardhat's node (`client="hardhat"`,
node/chain/hardhat.py; what differs: docs/clients.md), as a detached background process (its own session, so a
Ctrl-C in the shell that ran `chain up` does not reach it), records its pid in `<home>/anvil.pid` (the name kept
for either client), deploys the protocol with `deploy_system` and writes `<home>/deployment.json`. `chain_down`
stops the process recorded in the pid file (after checking that the pid still runs one of the two clients) and
removes the pid file and the deployment file, whose contracts lived only in that chain's memory.

`deploy_to` deploys onto a chain that is already running (any dev node with an unlocked account 0,
e.g. an anvil or hardhat node started by hand) and writes the deployment file the same way; it refuses a home
that has a deployment file already unless forced (`chain deploy --force`), since that home's nodes may be serving it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from node.chain.anvil import ANVIL_BINARY, _rpc_ready, anvil_command, check_block_time, free_port, set_block_time
from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.hardhat import HARDHAT_BINARY, HARDHAT_CONFIG, hardhat_command, hardhat_env
from node.chain.params import DEFAULT_PARAMS, ETHER, PROBE_TREASURY, DeploymentParams
from node.chain.rpc import connect

PID_FILE = "anvil.pid"
STATE_CACHE_DIR = "anvil-states"  # the chain's persisted old states: useless once it stopped, so chain down deletes it
LOG_FILE = "anvil.log"  # hardhat's: hardhat.log
CLIENTS = ("anvil", "hardhat")
DEPLOYMENT_FILE = "deployment.json"
DEV_ACCOUNTS = 20
DEV_BALANCE_ETH = 100_000
PROBE_FUNDING_WEI = 10 * ETHER  # what `chain up --probes` sends the probe scheduler (~50,000 probes at the defaults)


class LocalChainError(RuntimeError):
    """The local chain could not be started or stopped; the message says why."""


@dataclass(frozen=True)
class LocalChain:
    rpc_url: str
    pid: int | None  # None when deployed onto a chain this module did not start
    deployment: Deployment
    deployment_path: Path
    log_path: Path | None
    client: str = "anvil"
    block_time: int = 0  # seconds between blocks; 0: a block per transaction


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


def _is_dev_chain(pid: int) -> bool:
    """Whether `pid` runs anvil or Hardhat's node (so a stale pid file never makes us signal an unrelated process)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return _alive(pid)  # no /proc (macOS): trust the pid file
    names = [Path(arg.decode(errors="replace")).name for arg in cmdline[:2]]
    # anvil runs as itself; hardhat as `node …/node_modules/.bin/hardhat --config … node …`
    return bool(names) and (names[0] == "anvil" or (len(names) == 2 and names[1] == "hardhat" and b"node" in cmdline))


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
    if _alive(pid) and _is_dev_chain(pid):
        return pid
    path.unlink(missing_ok=True)
    return None


def log_path(home: Path, client: str = "anvil") -> Path:
    return Path(home) / (LOG_FILE if client == "anvil" else f"{client}.log")


def _popen_args(client: str, port: int, home: Path) -> dict:
    """How to start `client` on `port`: its command line, environment and working directory."""
    if client == "anvil":
        if not ANVIL_BINARY.exists():
            raise LocalChainError(f"{ANVIL_BINARY} is missing: run `make setup` (npm install) first")
        return {"args": anvil_command(port, DEV_ACCOUNTS, DEV_BALANCE_ETH, home / STATE_CACHE_DIR)}
    if client == "hardhat":
        if not HARDHAT_BINARY.exists():
            raise LocalChainError(f"{HARDHAT_BINARY} is missing: run `make setup` (npm ci) first")
        return {
            "args": hardhat_command(port),
            "env": hardhat_env(DEV_ACCOUNTS, DEV_BALANCE_ETH),
            "cwd": HARDHAT_CONFIG.parent,
        }
    raise LocalChainError(f"--client must be one of {', '.join(CLIENTS)}, got {client!r}")


def start_detached_anvil(
    home: Path, port: int | None = None, startup_timeout: float = 60.0, client: str = "anvil"
) -> tuple[int, str]:
    """Start the dev chain `client` (anvil or hardhat) in its own session with output to its log in the home;
    returns (pid, rpc url)."""
    port = port or free_port()
    popen_args = _popen_args(client, port, Path(home))
    url = f"http://127.0.0.1:{port}"
    if _rpc_ready(url):
        raise LocalChainError(f"port {port} is already serving an RPC: pick another --port (or `chain down`)")
    home.mkdir(parents=True, exist_ok=True)
    log_file = log_path(home, client)
    with open(log_file, "ab") as log:
        process = subprocess.Popen(
            **popen_args,
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
            tail = log_file.read_text(errors="replace")[-800:].strip()
            raise LocalChainError(f"{client} exited with code {process.returncode} on port {port}: {tail}")
        if _rpc_ready(url):
            return process.pid, url
        time.sleep(0.1)
    _terminate_group(process.pid)
    pid_path(home).unlink(missing_ok=True)
    raise LocalChainError(f"{client} did not answer on port {port} within {startup_timeout:.0f}s (log: {log_file})")


def deploy_to(
    rpc_url: str,
    home: Path,
    params: DeploymentParams | None = None,
    pid: int | None = None,
    force: bool = False,
    corpora: dict | None = None,
    probe_funding: int = PROBE_FUNDING_WEI,
) -> Deployment:
    """Deploy the protocol from the node's first unlocked account and write <home>/deployment.json.

    `corpora` (target model id -> (root, size, eos), `chain up --probes`: node/probes/corpus.py `pair_corpora`):
    deploy with probes, the ProbeScheduler as the treasury, funded with `probe_funding` wei from that account.
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
    if corpora:
        params = (params or DEFAULT_PARAMS).with_(treasury=PROBE_TREASURY)
    system = deploy_system(w3, accounts[0], params, corpora=corpora)
    if corpora and probe_funding:  # the treasury pays probes and keeper tips until α fees come in
        tx = w3.eth.send_transaction({"from": accounts[0], "to": system.probes.address, "value": int(probe_funding)})
        if w3.eth.wait_for_transaction_receipt(tx).status != 1:
            raise LocalChainError("funding the probe scheduler failed")
    deployment = Deployment.of_system(w3, system, rpc_url, start_block, anvil_pid=pid)
    deployment.save(Path(home) / DEPLOYMENT_FILE)
    return deployment


def chain_up(
    home: Path,
    port: int | None = None,
    params: DeploymentParams | None = None,
    client: str = "anvil",
    block_time: int = 0,
    corpora: dict | None = None,
    probe_funding: int = PROBE_FUNDING_WEI,
) -> LocalChain:
    """Start a detached dev chain (`client`: anvil or hardhat) for `home`, deploy, write the deployment file.
    `block_time` > 0: then a block every `block_time` s (interval mining, switched on once deployed, so deploying
    waits for no block). `corpora`: deploy with probes (`deploy_to`). Refuses a second chain per home."""
    home = Path(home)
    try:
        block_time = check_block_time(block_time)
    except ValueError as exc:
        raise LocalChainError(str(exc)) from None
    running = read_pid(home)
    if running is not None:
        raise LocalChainError(
            f"a chain started for {home} is already running (pid {running}): "
            "`verispec chain down` first, or use another --home"
        )
    if params is not None:
        params.validate()
    shutil.rmtree(home / STATE_CACHE_DIR, ignore_errors=True)  # a crashed chain's old states
    if client not in CLIENTS:
        raise LocalChainError(f"--client must be one of {', '.join(CLIENTS)}, got {client!r}")
    pid, url = start_detached_anvil(home, port, client=client)
    try:
        # no chain of this home runs (checked above): a deployment file left there names contracts that are gone
        deployment = deploy_to(url, home, params, pid=pid, force=True, corpora=corpora, probe_funding=probe_funding)
        if block_time:
            set_block_time(url, block_time)
    except BaseException:
        stop_pid(pid)
        pid_path(home).unlink(missing_ok=True)
        raise
    return LocalChain(url, pid, deployment, home / DEPLOYMENT_FILE, log_path(home, client), client, block_time)


def _terminate_group(pid: int, timeout: float = 10.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)  # the chain leads its own session: pid == process group id
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
    """Stop the chain (anvil or hardhat) `chain up` started for `home`; returns its pid (None if none was running).

    The deployment file goes too when it names that anvil: its contracts are gone with the process.
    """
    home = Path(home)
    pid = read_pid(home)
    if pid is not None:
        _terminate_group(pid)
        if _alive(pid):
            raise LocalChainError(f"the chain (pid {pid}) did not stop")
    pid_path(home).unlink(missing_ok=True)
    shutil.rmtree(home / STATE_CACHE_DIR, ignore_errors=True)
    deployment_path = home / DEPLOYMENT_FILE
    if deployment_path.exists():
        try:
            recorded = Deployment.load(deployment_path).anvil_pid
        except Exception:
            recorded = None
        if recorded is not None and (recorded == pid or not _alive(recorded)):
            deployment_path.unlink()
    return pid
