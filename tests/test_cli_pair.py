"""`--pair NAME` on the CLI (issue 12): a command given no model paths runs the named pair's models (the real one,
smol, by default; $VERISPEC_PAIR, which tests/conftest.py sets to tiny, in between); a path given on its own option
wins; a bad name or a missing folder of the pair is one line, before anything is sent.

One `verispec chain up` for the module; the operators register through the CLI with `--pair tiny` and no `--model`.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from web3 import Web3

from node.chain.deployment import Deployment
from node.decoding import model_id, pairs
from tests.test_cli import DRAFT, TARGET, address, chain_state, clean_error, cli, ok, register

REQUESTER, DRAFTER, VERIFIER, REFEREE = 1, 2, 3, 4
IDS = {"draft": "0x" + model_id(DRAFT).hex(), "target": "0x" + model_id(TARGET).hex()}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("verispec-pair")
    ok(cli("chain", "up", home=home))
    try:
        yield home
    finally:
        cli("chain", "down", home=home)


@pytest.fixture(scope="module")
def w3(home) -> Web3:
    return Web3(Web3.HTTPProvider(Deployment.load(home / "deployment.json").rpc_url))


def test_the_real_pair_is_the_default_and_the_environment_names_another():
    assert pairs.DEFAULT_PAIR == "smol"
    assert pairs.get_pair(check=False).name == "tiny"  # tests/conftest.py: VERISPEC_PAIR=tiny
    assert cli("submit", "x", "--help").stdout.count("VERISPEC_PAIR") == 1


def test_operators_register_the_pairs_models(home):
    for role, dev, stake, ids in (
        ("drafter", DRAFTER, "2", [IDS["draft"], IDS["target"]]),
        ("verifier", VERIFIER, "2", [IDS["target"]]),
        ("referee", REFEREE, "1", [IDS["target"], IDS["draft"]]),
    ):
        out = json.loads(ok(register(home, role, stake, dev, "--pair", "tiny", "--json")))
        assert sorted(out["model_ids"]) == sorted(ids), role


def test_submit_names_the_pairs_models_and_paths_win(home):
    base = ("submit", "def f(x):", "--max-tokens", "4", "--dev-account", REQUESTER, "--no-wait", "--json")
    for options in (("--pair", "tiny"), ("--pair", "smol", "--draft-model", DRAFT, "--target-model", TARGET)):
        job = json.loads(ok(cli(*base, *options, home=home)))["job_id"]
        shown = json.loads(ok(cli("status", job, "--json", home=home)))
        assert (shown["draft_model"], shown["target_model"]) == (IDS["draft"], IDS["target"]), options


def test_a_bad_pair_or_a_missing_folder_is_one_line_and_sends_nothing(home, w3, tmp_path, monkeypatch):
    deployment = Deployment.load(home / "deployment.json")
    who = [address(REQUESTER), address(5)]
    before = chain_state(w3, deployment, who)
    submit = ("submit", "def f(x):", "--dev-account", REQUESTER, "--no-wait")
    clean_error(cli(*submit, "--pair", "large", home=home), "unknown model pair 'large': choose one of tiny, smol")
    clean_error(cli(*submit, home=home, env={"VERISPEC_PAIR": "huge"}), "unknown model pair 'huge'")
    clean_error(register(home, "verifier", "2", 5, "--pair", "x"), "unknown model pair 'x'")
    clean_error(cli("audit", "1", "--pair", "x", home=home), "unknown model pair 'x'")
    clean_error(cli("serve", "verifier", "--pair", "x", "--dev-account", 5, home=home), "unknown model pair 'x'")
    # a pair whose folder is missing (a clone without `make setup`): the command to run, not a traceback
    gone = dataclasses.replace(pairs.PAIRS["smol"], target=tmp_path / "absent")
    monkeypatch.setitem(pairs.PAIRS, "smol", gone)
    clean_error(cli(*submit, "--pair", "smol", home=home), "smol pair's model folder", "absent", "make setup")
    clean_error(cli("serve", "referee", "--pair", "smol", "--dev-account", 5, home=home), "make setup")
    # its draft folder exists: a draft audit needs only that one
    clean_error(cli("audit", "99", "--pair", "smol", home=home), "no job 99")
    assert chain_state(w3, deployment, who) == before
