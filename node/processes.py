"""Node processes: `verispec serve …` (or another node entry point) as OS processes, for the demo, the tests and
the end-to-end benchmark.

Each process runs in its own process group, so a Ctrl-C in the terminal reaches only the parent, which then
stops its nodes itself (SIGTERM to each group, SIGKILL to any still running after a grace period). Output
goes to one log file per process, appended, so a node restarted on the same log keeps its history.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from node import PROJECT_ROOT


def stop_on_signals(stop: threading.Event | None = None) -> threading.Event:
    """Let SIGTERM and SIGINT set `stop` (a new event by default), so that a node loop given it finishes its step
    and the process exits 0."""
    stop = stop if stop is not None else threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    return stop


class NodeLockError(RuntimeError):
    """Another node process serves the same account on the same deployment."""


@contextlib.contextmanager
def node_lock(chain: str, market: str, account: str, role: str, lock_dir: Path | None = None):
    """Hold the machine-wide lock of (chain, market, account) for the life of a node: two nodes on one key send
    conflicting transactions (reverted commits, burnt gas) and, in transcript mode, could sign conflicting states.
    `chain` names the chain as this machine reaches it (the caller's RPC URL and chain id: two local dev chains
    share chain id and contract addresses). The lock lives outside any home or store (the temp directory), so it
    holds whichever store each node uses; the kernel releases it when the process dies, so a crash leaves nothing
    to clean up. Not covered: one chain reached through two different URLs, or nodes on two machines."""
    import fcntl
    import hashlib
    import tempfile

    folder = lock_dir or Path(tempfile.gettempdir()) / "verispec-locks"
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(f"{chain}|{market.lower()}|{account.lower()}".encode()).hexdigest()[:32]
    path = folder / f"{key}.lock"
    handle = open(path, "a+")  # noqa: SIM115 (held open for the node's life)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise NodeLockError(
                f"{holder} already serves account {account} on {chain} (market {market}): two nodes on one key "
                "send conflicting transactions; stop it first"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"a {role} node (pid {os.getpid()})")
        handle.flush()
        yield path
    finally:
        handle.close()


class NodeProcessError(RuntimeError):
    """A node process exited early or did not get ready in time."""


def serve_command(*args) -> list[str]:
    """`python -m node.cli serve ARGS…`: the same program as `verispec serve ARGS…`."""
    return [sys.executable, "-m", "node.cli", "serve", *map(str, args)]


def start(command: list[str], log_path: Path, threads: int = 1) -> subprocess.Popen:
    """Start `command` in its own process group with stdout and stderr appended to `log_path`; `threads` caps the
    BLAS/OpenMP threads (several nodes share the machine's cores)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
    )
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=str(PROJECT_ROOT),
        )


def stop(process: subprocess.Popen, timeout: float = 20.0) -> int:
    """Stop one node process (see `stop_all`); its exit code."""
    return stop_all([process], timeout)[0]


def stop_all(processes: list[subprocess.Popen], timeout: float = 20.0) -> list[int]:
    """SIGTERM to every process group at once (they shut down in parallel), SIGKILL to those still running after
    `timeout` seconds; their exit codes (-9 for a killed one)."""
    for process in processes:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    codes = []
    for process in processes:
        try:
            codes.append(process.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            codes.append(process.wait())
    return codes


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def tail(log_path: Path, lines: int = 3) -> str:
    """The last lines of a log, joined on one line (for an error message)."""
    try:
        text = log_path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"


class NodeProcesses:
    """Named node processes with their logs in `log_dir`, watched and stopped together."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.procs: dict[str, tuple[subprocess.Popen, Path, int]] = {}  # name -> (process, log, log size at start)

    def start(self, name: str, command: list[str], threads: int = 1) -> subprocess.Popen:
        log_path = self.log_dir / f"{name}.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        process = start(command, log_path, threads)
        self.procs[name] = (process, log_path, offset)
        return process

    def check(self) -> None:
        """Raise NodeProcessError if a node exited."""
        for name, (process, log_path, _) in self.procs.items():
            if process.poll() is not None:
                raise NodeProcessError(f"the {name} node exited with code {process.returncode}: {tail(log_path)}")

    def wait_ready(self, timeout: float = 180.0, marker: str = "serving on") -> None:
        """Wait until every node has written `marker` to its log since it started."""
        deadline = time.monotonic() + timeout
        pending = {name: (path, offset) for name, (_, path, offset) in self.procs.items()}
        while pending:
            self.check()
            for name, (path, offset) in list(pending.items()):
                with open(path, "rb") as log:
                    log.seek(offset)
                    if marker.encode() in log.read():
                        del pending[name]
            if time.monotonic() > deadline:
                raise NodeProcessError(f"nodes not ready within {timeout:.0f}s: {', '.join(pending)}")
            time.sleep(0.2)

    def stop_all(self, timeout: float = 15.0) -> dict[str, int]:
        """Stop every node (SIGTERM, then SIGKILL after `timeout` s); their exit codes by name."""
        names = list(self.procs)
        codes = stop_all([self.procs[name][0] for name in names], timeout)
        self.procs.clear()
        return dict(zip(names, codes))
