"""A node's state belongs to one chain and one configuration (issue 15, items 1 and 2), with the real CLI, real anvil
chains started by `verispec chain up` and real `verispec serve` processes:

* `chain down` + `chain up` in the same home: the nodes' stores of the old chain are moved aside, and the new
  chain's job 1 is served (the old stores held "job 1 done" and an event cursor past the new job);
* a second `chain deploy` into a home is refused unless `--force`;
* a verifier started with the wrong models refuses a job; restarted with the right ones, it takes that job; a
  drafter restarted with a lower `--min-price` drafts the job it declined (an in-process node);
* `serve` refuses, with one line and exit 1, a key that is not registered in the role or not with the models it
  loads; it says "serving" once, and its log holds no "Loading weights" progress bars.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from web3 import Web3

from node import processes
from node.chain.deployment import Deployment
from node.chain.enums import Phase
from test_alpha_nodes import steps, world  # noqa: F401 (world: a fixture, a real drafter node's chain)
from test_cli import (
    DRAFT,
    DRAFTER,
    DRAFTER_MODELS,
    REQUESTER,
    TARGET,
    VERIFIER,
    _log_tail,
    _serve,
    _stop,
    address,
    clean_error,
    cli,
    cli_process,
    ok,
    register,
)

OTHER_VERIFIER, UNREGISTERED = 5, 6


def _submit(home: Path, *extra: str) -> dict:
    """`verispec submit` of a short job to the dev drafter and verifier, waiting for it to finish; its JSON report."""
    out = ok(
        cli(
            "submit",
            "--mode",
            "onchain",  # per-cycle: the cycles are chain events
            "def add(a, b):",
            "--max-tokens",
            "8",
            "--gamma",
            "2",
            "--drafter",
            address(DRAFTER),
            "--verifier",
            address(VERIFIER),
            "--dev-account",
            REQUESTER,
            "--accept-timeout",
            "180",
            "--timeout",
            "180",
            "--json",
            *extra,
            home=home,
        )
    )
    return json.loads(out)


def _serve_models(home: Path, role: str, dev: int, *models):
    """`verispec serve ROLE` with the models given (the `_serve` of test_cli takes the right ones)."""
    command = processes.serve_command(
        role, *models, "--dev-account", dev, "--home", home, "--device", "cpu", "--threads", "1"
    )
    return processes.start(command, home / f"{role}-{dev}.log")


def _wait_for(predicate, what: str, home: Path, nodes: list, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for process in nodes:
            assert process.poll() is None, f"a node exited ({process.returncode}) waiting for {what}: {_log_tail(home)}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f}s: {_log_tail(home)}"
        time.sleep(0.5)


def _status(home: Path, job_id: int) -> str:
    return json.loads(ok(cli("status", job_id, "--json", home=home)))["status"]


# ---------------------------------------------------------------- a restarted chain in the same home


@pytest.mark.node_processes
def test_a_chain_restarted_in_the_same_home_serves_its_job_1_with_fresh_stores(tmp_path):
    home = tmp_path / "home"
    nodes: list = []
    try:
        for run in (1, 2):
            ok(cli("chain", "up", home=home))
            ok(register(home, "drafter", "2", DRAFTER, *DRAFTER_MODELS))
            ok(register(home, "verifier", "2", VERIFIER, "--model", TARGET))
            nodes = [_serve(home, "drafter", DRAFTER), _serve(home, "verifier", VERIFIER)]
            report = _submit(home)
            # the old stores said "job 1 done" and held a cursor past the new job 1: it was never accepted
            assert report["job_id"] == 1 and report["status"] == "Finished", (run, report, _log_tail(home))
            codes = [_stop(process) for process in nodes]
            assert codes == [0, 0], f"run {run}: the nodes did not stop cleanly ({codes}): {_log_tail(home)}"
            nodes = []
            ok(cli("chain", "down", home=home))
    finally:
        for process in nodes:
            _stop(process)
        cli("chain", "down", home=home)

    # each node store of the first chain was moved aside, named after that chain, and said so once in the log
    for role, dev in (("drafter", DRAFTER), ("verifier", VERIFIER)):
        store = home / "nodes" / f"{role}-{address(dev).lower()}.db"
        [backup] = list(store.parent.glob(store.name + ".31337-*.bak"))
        log = (home / f"{role}-{dev}.log").read_text(errors="replace")
        assert log.count("started a fresh store") == 1 and backup.name in log, log[-3000:]
        # started twice: "serving" once per start; no progress bars of model loading
        assert log.count("serving") == 2, log[-3000:]
        assert "Loading weights" not in log, log[-3000:]
    # so was the requester CLI's store (its signed transactions belong to the first chain)
    assert list((home / "cli").glob(f"{address(REQUESTER).lower()}.db.31337-*.bak"))


def test_a_second_deploy_into_a_home_is_refused_unless_forced(tmp_path):
    home = tmp_path / "home"
    chain = json.loads(ok(cli("chain", "up", "--json", home=home)))
    try:
        w3 = Web3(Web3.HTTPProvider(chain["rpc_url"]))
        deployer = w3.eth.accounts[0]
        path, nonce = home / "deployment.json", w3.eth.get_transaction_count(deployer)
        before = path.read_text()
        line = clean_error(cli("chain", "deploy", "--rpc", chain["rpc_url"], home=home), "already holds", "--force")
        assert chain["addresses"]["InferenceMarket"] in line
        assert path.read_text() == before and w3.eth.get_transaction_count(deployer) == nonce  # nothing deployed
        forced = json.loads(ok(cli("chain", "deploy", "--rpc", chain["rpc_url"], "--force", "--json", home=home)))
        assert forced["addresses"]["InferenceMarket"] != chain["addresses"]["InferenceMarket"]
        assert Deployment.load(path).addresses == forced["addresses"]
    finally:
        cli("chain", "down", home=home)


# ---------------------------------------------------------------- refusals and registration, on one chain


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """`chain up`; the dev drafter; the dev verifier registered for both bundled models (so that it can be served,
    wrongly, with the draft model as its target); another verifier registered for the target only."""
    home = tmp_path_factory.mktemp("verispec-binding")
    ok(cli("chain", "up", home=home))
    try:
        ok(register(home, "drafter", "2", DRAFTER, *DRAFTER_MODELS))
        ok(register(home, "verifier", "2", VERIFIER, "--model", TARGET, "--model", DRAFT))
        ok(register(home, "verifier", "2", OTHER_VERIFIER, "--model", TARGET))
        yield home
    finally:
        cli("chain", "down", home=home)


@pytest.mark.node_processes
def test_a_verifier_restarted_with_the_right_models_takes_the_job_it_refused(home):
    log = home / f"verifier-{VERIFIER}.log"
    nodes = [
        _serve(home, "drafter", DRAFTER),
        _serve_models(home, "verifier", VERIFIER, "--model", DRAFT, "--draft-model", DRAFT),  # the wrong target
    ]
    try:
        out = ok(
            cli(
                "submit",
                "--mode",
                "onchain",  # per-cycle: the cycles are chain events
                "def add(a, b):",
                "--max-tokens",
                "8",
                "--gamma",
                "2",
                "--drafter",
                address(DRAFTER),
                "--verifier",
                address(VERIFIER),
                "--dev-account",
                REQUESTER,
                "--no-wait",
                "--json",
                home=home,
            )
        )
        job_id = int(json.loads(out)["job_id"])
        _wait_for(lambda: f"job {job_id}: refused" in log.read_text(errors="replace"), "refusal", home, nodes)
        assert _status(home, job_id) == "Open"
        assert _stop(nodes.pop()) == 0
        nodes.append(_serve(home, "verifier", VERIFIER))  # the right models, the same store
        _wait_for(lambda: _status(home, job_id) in ("Finished", "Finalized"), f"job {job_id} served", home, nodes)
        assert "deciding again" in log.read_text(errors="replace")
    finally:
        for process in nodes:
            _stop(process)


@pytest.mark.parametrize(
    "role, dev, models, fragments",
    [
        ("verifier", UNREGISTERED, ("--model", TARGET, "--draft-model", DRAFT), ("not registered",)),
        ("verifier", DRAFTER, ("--model", TARGET, "--draft-model", DRAFT), ("a drafter", "not a verifier")),
        ("referee", OTHER_VERIFIER, ("--model", TARGET, "--draft-model", DRAFT), ("not a referee",)),
        ("verifier", OTHER_VERIFIER, ("--model", DRAFT, "--draft-model", DRAFT), ("loaded target",)),
        ("drafter", DRAFTER, ("--model", DRAFT, "--target-model", DRAFT), ("registered as a drafter", "loaded draft")),
    ],
    ids=["unregistered", "other-role", "other-role-referee", "other-target", "other-drafter-pair"],
)
def test_serve_refuses_a_key_not_registered_in_its_role_with_its_models(home, role, dev, models, fragments):
    args = ("serve", role, *models, "--dev-account", dev, "--device", "cpu")
    # the first case as a user runs it, a process of its own; the others in this process (a fresh process costs
    # ~30 s of torch import and start on the loaded test machine, the refusal itself comes before any model loads)
    result = cli_process(*args, home=home, timeout=180) if dev == UNREGISTERED else _in_process(*args, home=home)
    line = clean_error(result, "cannot serve", address(dev), *fragments)
    assert "serving" not in result.stderr + result.stdout, line


def _in_process(*args, home: Path):
    """The CLI in this process, in a thread: a serve that wrongly starts fails at once (signal handlers install only
    in the main thread) rather than serving forever."""
    results = []
    thread = threading.Thread(target=lambda: results.append(cli(*args, home=home)), daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert results, f"{args} did not return within 120 s"
    return results[0]


def test_a_drafter_restarted_with_a_lower_min_price_drafts_the_job_it_declined(world):
    cheap = world.submit(price_token=10**12)  # before the drafter declared its price (the market refuses it after)
    drafter = world.drafter(min_price_wei=2 * 10**12)
    world.accept(cheap, 12)  # Running: the drafter's turn, cycle 0
    for _ in range(5):
        drafter.step()
    assert drafter.store.job(cheap, "drafter").status == "refused"
    drafter.close()
    again = world.drafter(min_price_wei=2 * 10**12)  # the same configuration: the refusal holds
    for _ in range(5):
        again.step()
    assert again.store.job(cheap, "drafter").status == "refused" and not again.sent
    again.close()
    cheaper = world.drafter(min_price_wei=10**12)  # the store said "refused" forever before
    steps(cheaper, lambda: world.view(cheap)["phase"] == Phase.AwaitVerify)
    assert cheaper.store.job(cheap, "drafter").status == "active" and f"job:{cheap}:cycle:0:commit" in cheaper.sent
    cheaper.close()
