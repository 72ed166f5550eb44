"""What a first user hits (issue 15, items 3, 5 and 6): broken checkpoints, `verispec chain advance`, countdowns in
chain time, an Open job's escrow and `claim-timeout`, unfunded dev accounts, a file given as a model directory,
labelled model ids, and what a lost dispute costs the challenger.

One `verispec chain up` deployment for the module (a drafter, a verifier and three referees registered through the
CLI, no node processes: the cycles and votes of the dispute are sent from anvil's unlocked dev accounts, as in
tests/test_dispute_cli.py). Every refusal is one clean error line and leaves the chain unchanged.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import pytest
import torch
from web3 import Web3

from node.chain.anvil import ANVIL_BINARY, free_port
from node.chain.deployment import Deployment
from node.decoding import loading
from node.decoding.model_id import CheckpointError, model_id
from tests.test_cli import (
    DRAFT,
    REFEREE_MODELS,
    TARGET,
    address,
    advance,
    chain_state,
    clean_error,
    cli,
    cli_process,
    ok,
    register,
)
from tests.test_dispute_cli import _open, _send, _verified_job, _vote
from tests.test_disputes import TOKENS, Q

REQUESTER, DRAFTER, VERIFIER, WATCHDOG = 1, 2, 3, 8
REFEREES = (4, 5, 6)
ACCOUNTS = [address(i) for i in (REQUESTER, DRAFTER, VERIFIER, WATCHDOG, *REFEREES)]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("verispec-first-user")
    ok(cli("chain", "up", home=home))
    try:
        ok(register(home, "drafter", "2", DRAFTER, "--model", DRAFT, "--target-model", TARGET, "--alpha", "0.5"))
        ok(register(home, "verifier", "2", VERIFIER, "--model", TARGET))
        for dev in REFEREES:
            ok(register(home, "referee", "1", dev, *REFEREE_MODELS))
        yield home
    finally:
        cli("chain", "down", home=home)


@pytest.fixture(scope="module")
def deployment(home) -> Deployment:
    return Deployment.load(home / "deployment.json")


@pytest.fixture(scope="module")
def w3(deployment) -> Web3:
    return Web3(Web3.HTTPProvider(deployment.rpc_url))


def _now(w3) -> int:
    return w3.eth.get_block("latest")["timestamp"]


def _seconds(text: str) -> int:
    """The countdown "in 2m55s" / "in 1h05m" of an output line, in seconds."""
    match = re.search(r"in (\d+)([hm])(\d+)([ms])", text)
    assert match, text
    big, small = int(match[1]), int(match[3])
    return big * 3600 + small * 60 if match[2] == "h" else big * 60 + small


# ---------------------------------------------------------------- broken checkpoints (item 3)


@pytest.fixture(scope="module")
def broken_models(tmp_path_factory) -> dict[str, object]:
    """Copies of the bundled draft whose model.safetensors is empty, not safetensors at all, or cut in half."""
    root = tmp_path_factory.mktemp("broken-models")
    models = {}
    for name in ("empty", "garbage", "truncated"):
        path = root / name
        shutil.copytree(DRAFT, path)
        weights = path / "model.safetensors"
        data = weights.read_bytes()
        weights.write_bytes({"empty": b"", "garbage": b"\x93NUMPY" * 20, "truncated": data[: len(data) // 2]}[name])
        models[name] = path
    return models


EXPECTED = {
    "empty": "is empty (0 bytes)",
    "garbage": "is not a valid safetensors file",
    "truncated": "is not a valid safetensors file",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_engine_names_a_broken_weight_file(broken_models, name):
    weights = str(broken_models[name] / "model.safetensors")
    cpu = torch.device("cpu")
    for load in (model_id, lambda path: loading.load_model(path, cpu, torch.float32)):
        with pytest.raises(CheckpointError) as caught:
            load(broken_models[name])
        assert weights in str(caught.value) and EXPECTED[name] in str(caught.value)
    assert isinstance(caught.value, ValueError)  # callers that refuse bad checkpoints as ValueError keep working
    loading.load_model(DRAFT, cpu, torch.float32)  # an intact checkpoint still loads


def test_every_command_taking_a_model_path_names_the_broken_file(home, w3, deployment, broken_models):
    job = _verified_job(w3, deployment.system(w3))  # something to audit
    before = chain_state(w3, deployment, ACCOUNTS)
    # each command with another kind of break: every kind's own message is the engine's (the test above), and a
    # command passes any of them on the same way
    empty, garbage, truncated = (broken_models[name] for name in ("empty", "garbage", "truncated"))
    weights = str(empty / "model.safetensors")
    clean_error(register(home, "referee", "1", 9, "--model", empty), weights, EXPECTED["empty"])
    submit = cli("submit", "hi", "--draft-model", garbage, "--dev-account", REQUESTER, home=home)
    clean_error(submit, EXPECTED["garbage"])
    clean_error(cli("audit", job, "--draft-model", truncated, home=home), EXPECTED["truncated"])
    # a fresh process, as a user runs it: the engine's error type is loaded lazily and still reported in one line
    clean_error(cli_process("register", "--role", "referee", "--stake", "1", "--model", broken_models["empty"],
                            "--dev-account", 9, home=home), "is empty (0 bytes)")  # fmt: skip
    assert chain_state(w3, deployment, ACCOUNTS) == before


def test_a_file_given_as_a_model_directory(home, w3, deployment):
    before = chain_state(w3, deployment, ACCOUNTS)
    config = TARGET / "config.json"
    clean_error(cli("status", 1, "--target-model", config, home=home), str(config), "is a file, not a model directory")
    clean_error(register(home, "referee", "1", 9, "--model", config), "is a file, not a model directory")
    clean_error(cli("submit", "hi", "--draft-model", config, "--dev-account", 1, home=home), "is a file")
    clean_error(cli("status", 1, "--target-model", TARGET / "nope", home=home), "does not exist")
    serve = ("serve", "verifier", "--model", config, "--draft-model", DRAFT, "--dev-account", VERIFIER)
    clean_error(cli(*serve, home=home), "target model path", "is a file, not a model directory")
    assert chain_state(w3, deployment, ACCOUNTS) == before


# ---------------------------------------------------------------- keys and registration


def test_a_dev_account_the_chain_did_not_fund_is_refused(home, w3, deployment):
    before = chain_state(w3, deployment, ACCOUNTS)
    clean_error(cli("withdraw", "--dev-account", 20, home=home), "--dev-account 20", "not funded", "0..19")
    clean_error(register(home, "referee", "1", 25, *REFEREE_MODELS), "--dev-account 25", "not funded")
    assert chain_state(w3, deployment, ACCOUNTS) == before
    assert "nothing to withdraw" in clean_error(cli("withdraw", "--dev-account", 19, home=home))  # funded: it runs


def test_register_says_which_model_id_is_which(home):
    draft, target = "0x" + model_id(DRAFT).hex(), "0x" + model_id(TARGET).hex()
    out = ok(register(home, "drafter", "1", 13, "--model", DRAFT, "--target-model", TARGET))
    lines = {line.split()[0] + " " + line.split()[1]: line for line in out.splitlines() if "model" in line}
    assert draft in lines["draft model"] and target in lines["target model"], out
    out = ok(register(home, "referee", "1", 14, "--model", TARGET, "--model", DRAFT))
    (target_line,) = [line for line in out.splitlines() if target in line]
    (draft_line,) = [line for line in out.splitlines() if draft in line]
    assert str(TARGET) in target_line and str(DRAFT) in draft_line, out


# ---------------------------------------------------------------- chain time (items 5 and 6)


def test_unbonding_counts_down_in_chain_time(home, w3):
    ok(register(home, "referee", "1", 15, *REFEREE_MODELS))
    ok(cli("chain", "advance", "1d", home=home))  # the wall clock is now a day behind the chain's
    out = ok(cli("unbond", "--dev-account", 15, home=home))
    assert "in 72h00m by chain time" in out, out  # the unbonding period: 3 days from the chain's now
    ok(cli("chain", "advance", "3d1m", home=home))
    assert "withdrew" in ok(cli("unbond", "--dev-account", 15, home=home))


def test_chain_advance_moves_a_dev_chain_and_refuses_the_rest(home, w3, tmp_path):
    start = _now(w3)
    out = ok(cli_process("chain", "advance", "25h", home=home))
    assert _now(w3) >= start + 25 * 3600 and "90,000 s" in out, out
    data = json.loads(ok(cli("chain", "advance", "1d2h30m", "--json", home=home)))
    assert data["timestamp"] - data["before"] >= 26 * 3600 + 1800
    for bad in ("25x", "0s", "h", "1.5h", "5 m h", ""):
        clean_error(cli("chain", "advance", bad, home=home), "not a duration")
    clean_error(cli("chain", "advance", "99999999d", home=home), "too far")
    moved = _now(w3)
    # a chain with another chain id: not a dev chain whose clock may be moved
    port = free_port()
    command = [str(ANVIL_BINARY), "--port", str(port), "--chain-id", "5"]
    other = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        ok_before = Web3(Web3.HTTPProvider(url))
        for _ in range(100):
            if ok_before.is_connected():
                break
            time.sleep(0.1)
        when = ok_before.eth.get_block("latest")["timestamp"]
        clean_error(cli("chain", "advance", "1h", "--rpc", url, home=tmp_path), "chain 5", "not a local dev chain")
        assert ok_before.eth.get_block("latest")["timestamp"] == when and ok_before.eth.block_number == 0
    finally:
        other.terminate()
        other.wait(timeout=10)
    clean_error(cli("chain", "advance", "1h", home=tmp_path), "deployment")  # no chain named at all
    assert _now(w3) == moved


def test_an_open_job_its_countdowns_in_chain_time_and_claim_timeout(home, w3, deployment):
    """Nobody serves the verifier: the job stays Open. Its countdowns follow the chain's clock after `chain advance`,
    `status` says what happens to the escrow, and `claim-timeout` refunds it after the accept deadline."""
    out = ok(cli("submit", "def f(x):", "--max-tokens", 4, "--no-wait", "--json", "--dev-account", 1, home=home))
    job = json.loads(out)["job_id"]
    # the requester's own wait says where the escrow is and how to get it back
    waited = cli("submit", "def g(x):", "--max-tokens", 4, "--accept-timeout", 1, "--dev-account", 1, home=home)
    line = waited.stderr.strip().splitlines()[-1]  # after the progress bar
    assert waited.exit_code == 1 and line.startswith("error:"), waited.stderr
    assert "was not accepted within 1s" in line and "holds the escrow" in line and "claim-timeout" in line, line
    ok(cli("chain", "advance", "7m", home=home))  # the accept timeout is 10 minutes: ~3 minutes are left
    status = ok(cli("status", job, home=home))
    assert "settles at finalize" not in status and f"claim-timeout {job}" in status, status
    (deadline_line,) = [line for line in status.splitlines() if line.startswith("accept deadline")]
    assert 120 < _seconds(deadline_line) <= 180 and "by chain time" in deadline_line, deadline_line
    before = chain_state(w3, deployment, ACCOUNTS)
    early = clean_error(cli("claim-timeout", job, "--dev-account", WATCHDOG, home=home), "DeadlineNotPassed")
    assert 120 < _seconds(early) <= 180, early  # against wall clock it would read ~10 minutes
    assert chain_state(w3, deployment, ACCOUNTS) == before
    advance(w3, 200)
    status = ok(cli("status", job, home=home))
    assert "passed by chain time" in status, status
    out = ok(cli("claim-timeout", job, "--dev-account", WATCHDOG, home=home))
    assert "AcceptTimeout" in out and "refunded to the requester" in out and "verispec withdraw" in out, out
    status = json.loads(ok(cli("status", job, "--json", home=home)))
    assert status["status"] == "Finalized" and status["payments"]["refund"] == status["escrow_wei"]


# ---------------------------------------------------------------- disputes


def test_the_challenger_is_told_its_bond_is_lost(home, w3, deployment):
    system = deployment.system(w3)
    dm = system.disputes
    job = _verified_job(w3, system)
    dispute_id = _open(home, job, 0)["dispute_id"]  # from the requester's account: the challenger
    _send(w3, dm.functions.answer(dispute_id, Q[0], [TOKENS[0]], [Q[0]]), address(DRAFTER))
    _vote(w3, dm, dispute_id, 1)  # every referee: AccusedFaithful; round 0 decided, Appealable
    status = ok(cli("status", job, home=home))
    assert "if this stands" in status and "loses its bond" in status, status
    advance(w3, deployment.deployment_params.appeal_period + 1)
    _send(w3, dm.functions.resolve(dispute_id), address(WATCHDOG))
    status = ok(cli("status", job, home=home))
    (line,) = [line for line in status.splitlines() if "challenger" in line]
    assert "lost" in line and "bond is forfeited" in line and "nothing comes back" in line, status
    assert dm.functions.credits(address(REQUESTER)).call() == 0  # what the line says: nothing came back
