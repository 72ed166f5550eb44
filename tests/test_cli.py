"""The `verispec` CLI against a real anvil (started by `verispec chain up`) and real node processes.

Most commands run in-process through typer's CliRunner (fast); `--help` of the console script,
`chain up/down`, the node processes (`verispec serve ...`) and the requester's `submit` run as real
OS processes. Every bad input must give one clear line on stderr, exit code 1, no traceback, and leave
the chain unchanged.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner
from web3 import Web3

from node import processes
from node.chain.anvil import free_port
from node.chain.deployment import Deployment
from node.chain.keys import dev_account
from node.cli import app
from tests.chainutil import HANG_S

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "models" / "target"
DRAFT = ROOT / "models" / "draft"
REQUESTER, DRAFTER, VERIFIER, REFEREE, BIASED, WATCHDOG, UNBONDER = 1, 2, 3, 4, 7, 8, 9
REFEREES = (10, 11, 12)

runner = CliRunner()


# ---------------------------------------------------------------- helpers


def cli(*args, home: Path | None = None, env: dict | None = None):
    """Run the CLI in-process; returns click's Result (exit_code, stdout, stderr)."""
    full_env = {"VERISPEC_RPC_WAIT": "1", **(env or {})}
    if home is not None:
        full_env["VERISPEC_HOME"] = str(home)
    return runner.invoke(app, [str(a) for a in args], env=full_env, catch_exceptions=True)


def cli_process(*args, home: Path | None = None, timeout: float = 300, env: dict | None = None):
    """Run the CLI as its own OS process (`python -m node.cli ...`)."""
    full_env = dict(os.environ, VERISPEC_RPC_WAIT="1", **(env or {}))
    if home is not None:
        full_env["VERISPEC_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "node.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
    )


def ok(result) -> str:
    code = getattr(result, "exit_code", getattr(result, "returncode", None))
    stderr = result.stderr
    assert code == 0, f"exit {code}: {stderr}\n{result.stdout}"
    return result.stdout


def clean_error(result, *fragments: str) -> str:
    """A failed command: exit code 1, one `error:` line on stderr mentioning every fragment, no traceback."""
    code = getattr(result, "exit_code", getattr(result, "returncode", None))
    stderr = result.stderr.strip()
    assert code == 1, f"expected exit 1, got {code}; stderr: {stderr}; stdout: {result.stdout}"
    assert getattr(result, "exception", None) is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in stderr + result.stdout, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), stderr
    for fragment in fragments:
        assert fragment.lower() in lines[0].lower(), f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


REFEREE_MODELS = ("--model", TARGET, "--model", DRAFT)  # a referee replays with both models
DRAFTER_MODELS = ("--model", DRAFT, "--target-model", TARGET)


def register(home: Path, role: str, stake: str, dev: int, *options):
    """`verispec register --role ROLE --stake STAKE OPTIONS --dev-account DEV` in `home`."""
    return cli("register", "--role", role, "--stake", stake, *options, "--dev-account", dev, home=home)


def chain_state(w3: Web3, deployment: Deployment, accounts: list[str]) -> tuple:
    system = deployment.system(w3)
    market, registry, disputes = system.market, system.registry, system.disputes
    return (
        market.functions.jobCount().call(),
        disputes.functions.disputeCount().call(),
        w3.eth.get_balance(market.address),
        w3.eth.get_balance(registry.address),
        w3.eth.get_balance(disputes.address),
        tuple(w3.eth.get_balance(a) for a in accounts),
        tuple(w3.eth.get_transaction_count(a) for a in accounts),
        tuple(tuple(registry.functions.accountOf(a).call()) for a in accounts),
    )


def advance(w3: Web3, seconds: int) -> None:
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])


def address(index: int) -> str:
    return dev_account(index).address


# ---------------------------------------------------------------- a chain for the module


@contextlib.contextmanager
def chain_with_drafter_and_verifier(home: Path, *chain_up_args: str):
    """`verispec chain up` in `home` (plus `chain_up_args`), a drafter and a verifier registered through the CLI;
    `chain down` at the end."""
    ok(cli("chain", "up", *chain_up_args, home=home))
    try:
        ok(register(home, "drafter", "2", DRAFTER, *DRAFTER_MODELS, "--alpha", "0.5"))
        ok(register(home, "verifier", "2", VERIFIER, "--model", TARGET))
        yield home
    finally:
        cli("chain", "down", home=home)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    with chain_with_drafter_and_verifier(tmp_path_factory.mktemp("verispec-home")) as home:
        yield home


@pytest.fixture(scope="module")
def deployment(home) -> Deployment:
    return Deployment.load(home / "deployment.json")


@pytest.fixture(scope="module")
def w3(deployment) -> Web3:
    return Web3(Web3.HTTPProvider(deployment.rpc_url))


@pytest.fixture
def snapshot(w3):
    """Revert chain changes (time travel included) after the test."""
    snap = w3.provider.make_request("evm_snapshot", [])["result"]
    yield
    w3.provider.make_request("evm_revert", [snap])


# ---------------------------------------------------------------- help


def test_help_texts():
    script = Path(sys.executable).parent / "verispec"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "node.cli"]
    top = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert top.returncode == 0, top.stderr
    text = " ".join(top.stdout.split())
    assert "verifiable speculative decoding" in text and "accept rule" in text
    for command_name in (
        "chain",
        "register",
        "unbond",
        "withdraw",
        "submit",
        "status",
        "audit",
        "dispute",
        "finalize",
        "serve",
        "demo",
    ):
        assert command_name in text
    expected = {
        ("submit",): [
            "--max-tokens",
            "--gamma",
            "--temperature",
            "--top-k",
            "--top-p",
            "--drafter",
            "--verifier",
            "--price-token",
            "--price-pass",
            "--json",
            "--key",
            "--dev-account",
            "--rpc",
        ],
        ("register",): ["--role", "--stake", "--alpha", "--model", "--target-model", "--key-file"],
        ("dispute",): ["--cycle", "--index", "--kind"],
        ("audit",): ["--draft-model", "--json"],
        ("serve",): ["--model", "--draft-model", "--target-model", "--behavior", "--store", "--min-price"],
        ("chain", "up"): ["--port", "--home"],
        ("chain", "down"): ["--home"],
        ("status",): ["--json"],
        ("finalize",): ["--rpc"],
        ("unbond",): ["--key"],
        ("withdraw",): ["--key"],
        ("demo",): ["--home", "--block-time"],
    }
    for path, options in expected.items():
        result = cli(*path, "--help")
        out = ok(result)
        for option in options:
            assert option in out, (path, option)


BROKEN_PIPE_COMMAND = """
import sys, typer
from node.cli_context import CommandGroup
app = typer.Typer(cls=CommandGroup)
@app.command()
def long_output():
    sys.stdout.write("x" * 200_000)
    sys.stdout.flush()
@app.command()
def other():
    pass
app()
"""


def test_a_reader_that_stops_reading_is_not_a_lost_chain():
    """`verispec … | head`: the pipe closes under a command's output; that is no error to report. It once printed
    "lost the chain RPC: BrokenPipeError" (a broken pipe reads as a dropped connection); now it exits 141 (as a
    process killed by SIGPIPE would), silently. Every command runs under this CommandGroup."""
    read, write = os.pipe()
    os.close(read)  # nobody reads: the command's first flush breaks the pipe
    try:
        proc = subprocess.run(
            [sys.executable, "-c", BROKEN_PIPE_COMMAND, "long-output"],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=60, cwd=ROOT,
        )  # fmt: skip
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == "", (proc.returncode, proc.stderr)


# ---------------------------------------------------------------- chain up / down


def test_chain_up_and_down_with_a_pid_file(tmp_path):
    home = tmp_path / "chain"
    port = free_port()
    up = cli_process("chain", "up", "--port", port, "--json", home=home, timeout=120)
    info = json.loads(ok(up))
    pid = int((home / "anvil.pid").read_text())
    assert info["pid"] == pid and info["rpc_url"] == f"http://127.0.0.1:{port}"
    try:
        # the chain outlives the command that started it, and is deployed
        w3 = Web3(Web3.HTTPProvider(info["rpc_url"]))
        deployment = Deployment.load(home / "deployment.json")
        assert deployment.anvil_pid == pid and w3.eth.get_code(deployment.addresses["InferenceMarket"])
        assert set(deployment.addresses) == {
            "StakingRegistry",
            "InferenceMarket",
            "DisputeManager",
            "TranscriptSettlement",
        }
        # a second chain for the same home is refused, and the first keeps running
        clean_error(cli("chain", "up", home=home), "already running", str(pid))
        os.kill(pid, 0)
        # reads work over the recorded RPC
        clean_error(cli("status", "1", home=home), "no job 1")
    finally:
        down = cli("chain", "down", home=home)
    assert f"pid {pid}" in ok(down)
    with pytest.raises(ProcessLookupError):
        for _ in range(50):  # the pid may linger a moment as a zombie of the test process? it is not our child
            os.kill(pid, 0)
            time.sleep(0.1)
    assert not (home / "anvil.pid").exists() and not (home / "deployment.json").exists()
    assert "no chain" in ok(cli("chain", "down", home=home))
    clean_error(cli("status", "1", home=home), "no deployment file", "chain up")


def test_rpc_down_at_start_is_a_clear_error(home, tmp_path):
    dead = tmp_path / "dead"
    dead.mkdir()
    deployment = Deployment.load(home / "deployment.json")
    deployment.rpc_url = f"http://127.0.0.1:{free_port()}"
    deployment.save(dead / "deployment.json")
    clean_error(cli("status", "1", home=dead), "unavailable", deployment.rpc_url)
    clean_error(cli("submit", "hello", "--dev-account", REQUESTER, home=dead), "unavailable")
    # the global --rpc overrides the file's URL, also to a dead endpoint
    clean_error(cli("--rpc", deployment.rpc_url, "status", "1", home=home), "unavailable")
    clean_error(cli("status", "1", "--rpc", deployment.rpc_url, home=home), "unavailable")


def test_missing_deployment_file(tmp_path):
    clean_error(cli("status", "1", home=tmp_path / "nowhere"), "no deployment file")
    clean_error(cli("submit", "x", "--dev-account", 1, home=tmp_path / "nowhere"), "no deployment file")


# ---------------------------------------------------------------- bad inputs leave the chain unchanged


def test_bad_keys(home, w3, deployment, tmp_path):
    before = chain_state(w3, deployment, [address(REQUESTER)])
    clean_error(cli("submit", "x", "--key", "0x1234", home=home), "bad key", "32-byte")
    clean_error(cli("submit", "x", "--key-file", tmp_path / "missing.key", home=home), "bad key", "cannot read")
    clean_error(
        cli("submit", "x", "--key", "0x" + "11" * 32, "--dev-account", "1", home=home), "bad key", "exactly one"
    )
    clean_error(cli("submit", "x", home=home, env={"VERISPEC_KEY": ""}), "bad key")
    clean_error(
        cli(
            "register",
            "--role",
            "referee",
            "--stake",
            "1",
            "--model",
            TARGET,
            home=home,
            env={"VERISPEC_KEY": "not-a-key"},
        ),
        "bad key",
    )
    assert chain_state(w3, deployment, [address(REQUESTER)]) == before


def test_submit_bad_inputs(home, w3, deployment):
    who = [address(REQUESTER), address(DRAFTER), address(VERIFIER)]
    before = chain_state(w3, deployment, who)
    base = ["submit", "def f(x):", "--dev-account", REQUESTER, "--no-wait"]
    # unknown model id: no registered node serves the target model as a draft model
    clean_error(cli(*base, "--draft-model", TARGET, home=home), "no registered active drafter", "0x")
    # a drafter that is not registered for the pair
    clean_error(cli(*base, "--drafter", address(7), home=home), "not an active drafter")
    # too little escrow
    clean_error(cli(*base, "--escrow", "1000", home=home), "too little", "256000000000000")
    # a prompt beyond the context window (512 positions)
    long_prompt = "x = 1\n" * 200
    clean_error(
        cli("submit", long_prompt, "--dev-account", REQUESTER, "--no-wait", home=home),
        "does not fit the context window",
        "512",
    )
    clean_error(cli(*base, "--max-tokens", "600", home=home), "does not fit")
    # out-of-range settings
    clean_error(cli(*base, "--gamma", "17", home=home), "gamma")
    clean_error(cli(*base, "--top-p", "0", home=home), "top-p")
    # v1 printed "unexpected MismatchedABI …" (19: the uint64 WAD overflows) and "unexpected OverflowError" (inf)
    for temperature in ("19", "inf", "nan"):
        clean_error(cli(*base, "--temperature", temperature, home=home), "--temperature must be in", "uint64 WAD")
    clean_error(cli(*base, "--top-k", str(2**32), home=home), "--top-k must be in", "uint32")
    clean_error(cli("submit", "", "--dev-account", REQUESTER, "--no-wait", home=home), "empty")
    clean_error(cli(*base, "--price-token", "lots", home=home), "not an amount")
    # the requester cannot be its own drafter
    clean_error(cli("submit", "x", "--dev-account", DRAFTER, "--no-wait", home=home), "three different accounts")
    assert chain_state(w3, deployment, who) == before


def test_register_bad_inputs(home, w3, deployment):
    who = [address(REFEREE), address(DRAFTER)]
    before = chain_state(w3, deployment, who)
    clean_error(
        cli("register", "--role", "referee", "--stake", "0.1", "--model", TARGET, "--dev-account", REFEREE, home=home),
        "at least 0.5 ETH",
    )
    clean_error(
        cli("register", "--role", "drafter", "--stake", "2", "--model", DRAFT, "--dev-account", REFEREE, home=home),
        "--target-model",
    )
    clean_error(
        cli("register", "--role", "oracle", "--stake", "2", "--model", DRAFT, "--dev-account", REFEREE, home=home),
        "--role",
    )
    clean_error(
        register(home, "verifier", "2", REFEREE, "--model", ROOT / "nope"),
        "does not exist",
    )
    clean_error(
        register(home, "drafter", "2", DRAFTER, *DRAFTER_MODELS),
        "already registered",
    )
    assert chain_state(w3, deployment, who) == before


def test_serve_refuses_a_device_torch_cannot_use(tmp_path):
    serve = ("serve", "drafter", "--model", DRAFT, "--target-model", TARGET, "--dev-account", DRAFTER)
    clean_error(cli(*serve, "--device", "tpu9", home=tmp_path), "--device: unknown device 'tpu9'")
    if not torch.cuda.is_available():  # refused before any chain or model is touched
        clean_error(cli(*serve, "--device", "cuda", home=tmp_path), "sees no CUDA device")


def test_serve_checks_min_price(tmp_path):
    serve = ("serve", "drafter", "--model", DRAFT, "--target-model", TARGET, "--dev-account", DRAFTER)
    clean_error(cli(*serve, "--min-price", "1.5wei", home=tmp_path), "--min-price: '1.5wei' is not a whole number")
    verifier = ("serve", "verifier", "--model", TARGET, "--draft-model", DRAFT, "--dev-account", VERIFIER)
    clean_error(cli(*verifier, "--min-price", "1gwei", home=tmp_path), "--min-price is a drafter's option")


@pytest.mark.node_processes
def test_a_second_node_on_one_key_refuses_to_start_whatever_its_store(home, tmp_path):
    """Issue 27: with separate stores two drafters on one key both committed every cycle (reverted transactions,
    burnt gas, no warning). The second `serve` now stops before it sends or signs anything, with one line."""
    first = _serve(home, "drafter", DRAFTER, "--store", tmp_path / "first.db")
    try:
        deadline = time.monotonic() + HANG_S  # bounds a hang only
        while "serving on" not in (home / f"drafter-{DRAFTER}.log").read_text(errors="replace"):
            assert first.poll() is None and time.monotonic() < deadline, _log_tail(home)
            time.sleep(0.2)
        serve = ("serve", "drafter", "--model", DRAFT, "--target-model", TARGET, "--dev-account", DRAFTER)
        line = clean_error(cli(*serve, "--store", tmp_path / "second.db", home=home), "already serves account")
        assert f"a drafter node (pid {first.pid})" in line and address(DRAFTER) in line, line
        assert not (tmp_path / "second.db").exists()  # refused before its store was opened
    finally:
        assert _stop(first) == 0


def test_status_and_finalize_of_unknown_jobs(home):
    clean_error(cli("status", "99", home=home), "no job 99")
    clean_error(cli("finalize", "99", "--dev-account", REQUESTER, home=home), "no job 99")
    clean_error(
        cli("dispute", "99", "--cycle", "0", "--index", "0", "--kind", "draft", "--dev-account", REQUESTER, home=home),
        "no job 99",
    )
    clean_error(
        cli(
            "dispute", "1", "--cycle", "0", "--index", "0", "--kind", "sideways", "--dev-account", REQUESTER, home=home
        ),
        "--kind",
    )
    clean_error(cli("audit", "99", home=home), "no job 99")


def test_unbond_and_withdraw(home, w3, deployment, snapshot):
    who = address(UNBONDER)
    ok(register(home, "referee", "1", UNBONDER, *REFEREE_MODELS))
    registry = deployment.system(w3).registry
    assert registry.functions.stakeOf(who).call() == 10**18
    out = json.loads(ok(cli("unbond", "--dev-account", UNBONDER, "--json", home=home)))
    assert out["action"] == "requested" and out["withdrawable_at"] > 0
    assert json.loads(ok(cli("unbond", "--dev-account", UNBONDER, "--json", home=home)))["action"] == "waiting"
    before = chain_state(w3, deployment, [who])
    clean_error(cli("withdraw", "--dev-account", UNBONDER, home=home), "nothing to withdraw", "unbonding until")
    assert chain_state(w3, deployment, [who]) == before
    advance(w3, deployment.deployment_params.unbonding_period + 1)
    balance = w3.eth.get_balance(who)
    out = json.loads(ok(cli("withdraw", "--dev-account", UNBONDER, "--json", home=home)))
    assert out["stake_wei"] == 10**18 and out["total_wei"] == 10**18
    assert w3.eth.get_balance(who) > balance + 10**18 - 10**16  # minus gas
    assert registry.functions.accountOf(who).call()[1] == 0  # role None: may register again
    clean_error(cli("unbond", "--dev-account", UNBONDER, home=home), "not registered")


def test_unaccepted_job_times_out_and_is_refunded(home, w3, deployment, snapshot):
    """No verifier node runs: `submit` gives up waiting with a clear line; `claim-timeout` refunds the escrow."""
    result = cli(
        "submit",
        "--mode",
        "onchain",  # per-cycle: the cycles are chain events
        "def f(x):",
        "--max-tokens",
        "8",
        "--dev-account",
        REQUESTER,
        "--accept-timeout",
        "1",
        "--json",
        home=home,
    )
    line = clean_error(result, "was not accepted within 1s", "verispec status")
    job_id = int(line.split("job ", 1)[1].split()[0])
    assert json.loads(ok(cli("status", job_id, "--json", home=home)))["status"] == "Open"
    clean_error(cli("claim-timeout", job_id, "--dev-account", WATCHDOG, home=home), "DeadlineNotPassed")
    advance(w3, deployment.deployment_params.accept_timeout + 1)
    out = json.loads(ok(cli("claim-timeout", job_id, "--dev-account", WATCHDOG, "--json", home=home)))
    assert (out["reason"], out["slashed"]) == ("AcceptTimeout", 0)
    report = json.loads(ok(cli("status", job_id, "--json", home=home)))
    assert report["status"] == "Finalized" and report["payments"]["refund"] == report["escrow_wei"]
    assert deployment.system(w3).market.functions.owed(address(REQUESTER)).call() == report["escrow_wei"]


# ---------------------------------------------------------------- real node processes


def _serve(home: Path, role: str, dev: int, *extra: str) -> subprocess.Popen:
    """`verispec serve ROLE` for dev account `dev` as an OS process (its own process group), log in the home."""
    if role == "drafter":
        models = ["--model", DRAFT, "--target-model", TARGET]
    else:
        models = ["--model", TARGET, "--draft-model", DRAFT]
    command = processes.serve_command(
        role, *models, "--dev-account", dev, "--home", home, "--device", "cpu", "--threads", "1", *extra
    )
    return processes.start(command, home / f"{role}-{dev}.log")


def _stop(process: subprocess.Popen) -> int:
    return processes.stop(process, timeout=20)


def _start_nodes(home: Path) -> dict[str, subprocess.Popen]:
    """Real node processes: an honest and a biased drafter, a verifier and three referees (`verispec serve`)."""
    ok(register(home, "drafter", "2", BIASED, *DRAFTER_MODELS))
    for dev in REFEREES:
        ok(register(home, "referee", "1", dev, *REFEREE_MODELS))
    processes = {
        "drafter": _serve(home, "drafter", DRAFTER),
        "verifier": _serve(home, "verifier", VERIFIER),
        "biased": _serve(home, "drafter", BIASED, "--behavior", "biased"),
    }
    processes.update({f"referee-{dev}": _serve(home, "referee", dev) for dev in REFEREES})
    return processes


def _alive(processes: dict, home: Path) -> None:
    for name, process in processes.items():
        assert process.poll() is None, f"{name} exited: {_log_tail(home)}"


def _log_tail(home: Path) -> str:
    return "\n".join(f"{log.name}: {log.read_text(errors='replace')[-1500:]}" for log in sorted(home.glob("*.log")))


def _dispute_draft(home: Path, job_id: int, check, *options: str):
    """`verispec dispute JOB` of the audit finding `check` as a DraftReplay, sent by the watchdog."""
    return cli(
        "dispute",
        job_id,
        "--cycle",
        check.cycle,
        "--index",
        check.index,
        "--kind",
        "draft",
        *options,
        "--dev-account",
        WATCHDOG,
        home=home,
    )


@pytest.mark.node_processes
def test_end_to_end_through_the_cli_with_node_processes(home, w3, deployment):
    """register → serve (6 processes) → submit → status → dispute → (nodes stopped) finalize → withdraw."""
    from node.requester.client import Requester
    from node.roles.watchdog.audit import replay_draft

    nodes = _start_nodes(home)
    try:
        # an honest job, submitted by a real `verispec submit` process
        submitted = cli_process(
            "submit",
            "--mode",
            "onchain",  # per-cycle: the cycles are chain events
            "def fibonacci(n):\n",
            "--max-tokens",
            "24",
            "--gamma",
            "4",
            "--drafter",
            address(DRAFTER),
            "--dev-account",
            REQUESTER,
            "--json",
            "--accept-timeout",
            "120",
            "--timeout",
            "240",
            home=home,
            timeout=300,
        )
        _alive(nodes, home)
        job = json.loads(ok(submitted))
        job_id = job["job_id"]
        assert job["status"] == "Finished" and job["finish_reason"] == "Completed"
        assert job["drafter"] == address(DRAFTER) and job["verifier"] == address(VERIFIER)
        assert 1 <= len(job["tokens"]) <= 24 and job["text"] and job["cycle_count"] == len(job["cycles"]) >= 1
        assert all(0 <= c["accepted"] <= 4 for c in job["cycles"])
        assert job["acceptance_per_cycle"] == [c["accepted"] / 4 for c in job["cycles"]]
        accepted = sum(c["accepted"] for c in job["cycles"])
        rejected = sum(c["accepted"] < 4 for c in job["cycles"])
        assert job["alpha"] == pytest.approx(accepted / (accepted + rejected))
        assert job["gas_used"] > 100_000 * job["cycle_count"] and job["cost_wei"] > 0
        assert [t for c in job["cycles"] for t in c["output"]] == job["tokens"]

        status = json.loads(ok(cli("status", job_id, "--json", home=home)))
        assert (status["text"], status["tokens"], status["alpha"]) == (job["text"], job["tokens"], job["alpha"])
        assert "cycle" in ok(cli("status", job_id, home=home))

        # finalize before the challenge window ends: the contract's error, decoded, and nothing changes
        who = [address(REQUESTER), address(DRAFTER), address(VERIFIER), address(WATCHDOG)]
        before = chain_state(w3, deployment, who)
        clean_error(cli("finalize", job_id, "--dev-account", REQUESTER, home=home), "DeadlineNotPassed")
        assert chain_state(w3, deployment, who)[:6] == before[:6]

        # a biased drafter's job; a watchdog replays the draft over chain data and disputes through the CLI
        submitted = cli_process(
            "submit",
            "--mode",
            "onchain",  # per-cycle: the cycles are chain events
            "class Stack:\n",
            "--max-tokens",
            "24",
            "--drafter",
            address(BIASED),
            "--dev-account",
            REQUESTER,
            "--json",
            home=home,
            timeout=300,
        )
        _alive(nodes, home)
        biased = json.loads(ok(submitted))
        audit = json.loads(ok(cli("audit", biased["job_id"], "--draft-model", DRAFT, "--json", home=home)))
        assert audit["faults"] == [asdict(c) for c in replay_draft(Requester(w3, deployment), biased["job_id"], DRAFT)]
        checks = [c for c in replay_draft(Requester(w3, deployment), biased["job_id"], DRAFT) if c.binding]
        assert checks, "the biased drafter made no binding biased proposal"
        check = checks[0]
        text = ok(cli("audit", biased["job_id"], home=home))  # the bundled draft by default
        assert f"verispec dispute {biased['job_id']} --cycle {check.cycle} --index {check.index} --kind draft" in text
        # the honest job's draft is what an honest drafter commits; the wrong model or job is refused
        assert json.loads(ok(cli("audit", job_id, "--json", home=home)))["faults"] == []
        assert json.loads(ok(cli("audit", job_id, "--kind", "target", "--json", home=home)))["faults"] == []
        assert "agrees with everything the verifier posted" in ok(cli("audit", job_id, "--kind", "target", home=home))
        clean_error(cli("audit", job_id, "--kind", "sideways", home=home), "--kind")
        clean_error(cli("audit", job_id, "--draft-model", TARGET, home=home), "is not job", "draft model")
        clean_error(cli("audit", job_id, "--draft-model", home / "nowhere", home=home), "does not exist")
        registry = deployment.system(w3).registry
        stake = registry.functions.stakeOf(address(BIASED)).call()
        info = json.loads(ok(_dispute_draft(home, biased["job_id"], check, "--wait", "--timeout", "180", "--json")))
        # --wait returns with the round's verdict; it is final once the appeal period passed unappealed, and the
        # referee node processes then end the dispute
        assert info["round_result"] == "AccusedLost" and info["status"] == "Appealable", info
        advance(w3, deployment.deployment_params.appeal_period + 1)
        requester = Requester(w3, deployment)
        info = asdict(requester.wait_dispute(info["dispute_id"], timeout=120, until_appealable=False))
        assert info["outcome"] == "AccusedLost" and info["status"] == "Resolved", info
        assert info["accused"] == address(BIASED) and info["cheated_votes"] == 3
        assert sorted(v["referee"] for v in info["votes"]) == sorted(address(d) for d in REFEREES)
        slash = deployment.deployment_params.accused_slash
        assert info["accused_slashed_wei"] == slash
        assert registry.functions.stakeOf(address(BIASED)).call() == stake - slash
        status = json.loads(ok(cli("status", biased["job_id"], "--json", home=home)))
        assert [d["outcome"] for d in status["disputes"]] == ["AccusedLost"]
        # the same position cannot be punished twice: the contract's error, decoded
        clean_error(
            _dispute_draft(home, biased["job_id"], check),
            "PositionAlreadyProven",
        )
        _alive(nodes, home)
    finally:
        codes = {name: _stop(process) for name, process in nodes.items()}
    assert set(codes.values()) == {0}, f"nodes did not stop cleanly on SIGTERM: {codes}"

    # settlement, with the nodes stopped (they would finalize by themselves otherwise)
    advance(w3, deployment.deployment_params.challenge_window + 1)
    out = json.loads(ok(cli("finalize", job_id, "--dev-account", REQUESTER, "--json", home=home)))
    paid = out["payments"]
    assert paid["drafter"] + paid["verifier"] + paid["alpha_fee"] == job["cost_wei"]  # the fee: to the treasury
    assert json.loads(ok(cli("status", job_id, "--json", home=home)))["status"] == "Finalized"
    out = json.loads(ok(cli("finalize", biased["job_id"], "--dev-account", REQUESTER, "--json", home=home)))
    assert out["payments"]["drafter"] == 0  # the convicted drafter forfeits its pay

    # a dispute on a finalized job: the DisputeManager's custom error, decoded; no bond leaves the wallet
    before = chain_state(w3, deployment, who)
    clean_error(
        cli(
            "dispute", job_id, "--cycle", "0", "--index", "0", "--kind", "draft", "--dev-account", REQUESTER, home=home
        ),
        "JobNotDisputable",
        "Finalized",
    )
    # finalized already (by the requester, above): said so, exit 0, and nothing is sent
    out = ok(cli("finalize", job_id, "--dev-account", WATCHDOG, home=home))
    assert f"job {job_id} already finalized (by {address(REQUESTER)})" in out
    assert chain_state(w3, deployment, who) == before

    market = deployment.system(w3).market
    owed = market.functions.owed(address(REQUESTER)).call()
    credits = deployment.system(w3).disputes.functions.credits(address(REQUESTER)).call()
    assert owed > 0 and credits > 0  # refunds, and the requester's share of the slash
    out = json.loads(ok(cli("withdraw", "--dev-account", REQUESTER, "--json", home=home)))
    assert (out["market_wei"], out["disputes_wei"]) == (owed, credits)


# ---------------------------------------------------------------- the demo


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if text in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def _run_demo(home: Path, stop_after: str | None = None, timeout: float = 600):
    """Run scripts/demo.py; with `stop_after`, send it SIGINT once that text appears in its output."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="160")
    process = subprocess.Popen(
        # the tiny pair, named: the demo's default is the real pair (minutes longer)
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "--home", home, "--max-tokens", "24", "--pair", "tiny"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    lines = []
    # a demo that hangs without printing is killed too: the test's runtime is bounded either way
    killer = threading.Timer(timeout, lambda: os.killpg(process.pid, signal.SIGKILL))
    killer.start()
    try:
        for line in process.stdout:
            lines.append(line)
            if stop_after and stop_after in line:
                process.send_signal(signal.SIGINT)
                stop_after = None
        process.wait(timeout=60)
    finally:
        killer.cancel()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for pid in _processes_mentioning(str(home)):  # never leak a node or an anvil into other tests
            os.kill(pid, signal.SIGKILL)
    return process.returncode, "".join(lines)


def _assert_all_stopped(home: Path, output: str) -> None:
    assert not _processes_mentioning(str(home)), "node processes outlived the demo"
    anvil_pid = int(output.split("anvil pid ", 1)[1].split()[0])
    stat = Path(f"/proc/{anvil_pid}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", "anvil outlived the demo"
    assert not (home / "anvil.pid").exists()


def test_demo_refuses_a_bad_block_time_before_it_starts_anything(tmp_path):
    for bad in ("x", "-1", "1.5", "100000"):
        clean_error(cli("demo", "--home", tmp_path / "demo", "--block-time", bad), "--block-time", repr(bad))
    clean_error(cli("demo", "--home", tmp_path / "demo", "--pair", "large"), "unknown model pair 'large'", "tiny, smol")
    clean_error(cli("demo", "--home", tmp_path / "demo", env={"VERISPEC_PAIR": "huge"}), "unknown model pair 'huge'")
    assert not (tmp_path / "demo").exists()


@pytest.mark.node_processes
def test_demo_stops_everything_on_ctrl_c(tmp_path):
    home = tmp_path / "demo"
    code, output = _run_demo(home, stop_after="node processes up", timeout=300)
    assert code == 130 and "interrupted" in output, output[-3000:]
    _assert_all_stopped(home, output)


@pytest.mark.node_processes
def test_demo_end_to_end(tmp_path):
    """The demo on 1 s blocks shows what it claims: the honest job's stream is its settlement, the watchdog's rule
    challenge slashed both colluders and refunded the requester, the pulled cycle's dispute convicted the biased
    drafter. The chain is gone afterwards: what the demo read from it is in demo.json, checked against the
    deployment's parameters and the watchdog node's own store (which the demo only reads)."""
    from node.chain.params import DeploymentParams
    from node.store import NodeStore

    home = tmp_path / "demo"
    code, output = _run_demo(home, timeout=540)
    assert code == 0, output[-5000:]
    for expected in ("a block every 1 s", "stream", "challengeRule", "pullCycle", "AccusedLost", "gas / token"):
        assert expected in output, expected
    summary = json.loads((home / "demo.json").read_text())
    assert summary["models"] == {"draft": str(DRAFT), "target": str(TARGET)}
    honest = summary["honest"]
    assert honest["streamed"] and honest["streamed"] == honest["settled"]
    assert f"{len(honest['settled'])} tokens streamed = the {len(honest['settled'])} settled" in output
    params = DeploymentParams()
    rule = summary["rule_challenge"]
    assert rule["from_drafter"] == rule["from_verifier"] == params.rule_slash
    assert [a - b for a, b in zip(rule["stakes_before"], rule["stakes_after"])] == [params.rule_slash] * 2
    assert rule["reward"] == params.rule_slash * params.rule_reward_bps // 10_000 == rule["withdrawn"]
    refund = summary["colluding_refund"]
    assert refund["refund"] == refund["escrow"] > 0
    dispute = summary["dispute"]
    assert (dispute["kind"], dispute["status"], dispute["outcome"]) == ("draft", "Resolved", "AccusedLost")
    assert dispute["accused"] == dispute["biased_drafter"] and dispute["cheated_votes"] == 3
    assert dispute["stake_before"] - dispute["stake_after"] == params.accused_slash == dispute["slashed"]
    assert (dispute["pull"]["job"], dispute["pull"]["cycle"]) == (dispute["job"], dispute["cycle"])
    # the watchdog node's store: it sent the challenge and opened the dispute itself
    [store_path] = (home / "nodes").glob("watchdog-*.db")
    with NodeStore(store_path) as store:
        [challenged] = store.job(rule["job"], "watchdog").params["candidates"]
        [disputed] = store.job(dispute["job"], "watchdog").params["candidates"][:1]
    assert challenged["kind"] == "rule" and challenged["result"]["challenge_tx"] == rule["tx"]
    assert (disputed["kind"], disputed["result"]) == ("draft", dispute["id"])
    gas = {(row["job"], row["what"]): row for row in summary["gas"]}
    assert {(rule["job"], "rule challenge"), (dispute["job"], "dispute"), (honest["job"], "job")} <= set(gas)
    assert gas[(honest["job"], "job")]["tokens"] == len(honest["settled"])
    assert (home / "acceptance.png").stat().st_size > 10_000
    _assert_all_stopped(home, output)


def test_chain_deploy_onto_a_running_chain(tmp_path):
    from node.chain.anvil import running_anvil

    with running_anvil() as node:
        out = json.loads(
            ok(
                cli(
                    "chain", "deploy", "--rpc", node.rpc_url, "--param", "challenge_window=600", "--json", home=tmp_path
                )
            )
        )
        deployment = Deployment.load(tmp_path / "deployment.json")
        assert deployment.rpc_url == node.rpc_url and deployment.anvil_pid is None
        assert deployment.addresses == out["addresses"] and deployment.params["challenge_window"] == 600
        clean_error(cli("status", "1", home=tmp_path), "no job 1")
        # chain down never touches a chain it did not start
        assert "no chain" in ok(cli("chain", "down", home=tmp_path))
        assert (tmp_path / "deployment.json").exists() and node.process.poll() is None
    clean_error(cli("chain", "deploy", home=tmp_path / "x"), "--rpc")
    clean_error(
        cli("chain", "up", "--param", "challenge_window=999999999", home=tmp_path / "y"), "bad deployment parameters"
    )
    clean_error(cli("chain", "up", "--param", "nonsense=1", home=tmp_path / "y"), "NAME=VALUE")
