"""`verispec dispute-appeal ID`: appeal a decided round through the CLI, on a `verispec chain up` deployment.

The cycle and the votes are sent straight from anvil's unlocked dev accounts (no model nodes), so the test is
about the command: it posts bond × 2^(round+1), draws the fresh panel of 2R + 1 at once, prints or emits the
dispute, and refuses (one clean error line) what the contract would refuse.
"""

from __future__ import annotations

import json

import pytest
from web3 import Web3

from node import protocol as P
from node.chain.deployment import Deployment
from node.chain.enums import Role
from node.decoding.loading import vocab_size
from node.decoding.model_id import model_id
from tests.test_cli import DRAFT, TARGET, address, advance, clean_error, cli, ok, register
from tests.test_disputes import EOS, GAMMA, OUT_TOKEN, PVALS, SALT, TOKENS, Q

REQUESTER, DRAFTER, VERIFIER = 1, 2, 3
REFEREES = tuple(range(4, 20))  # 16 referees: a first panel of 3, then 13 for a fresh appeal panel of 7
# (with only 7 left the draw needs every one of them within its 36 tries, and escalates ~15 % of the time)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("verispec-appeal")
    ok(cli("chain", "up", home=home))
    try:
        ok(register(home, "drafter", "2", DRAFTER, "--model", DRAFT, "--target-model", TARGET, "--alpha", "0.5"))
        ok(register(home, "verifier", "2", VERIFIER, "--model", TARGET))
        _register_referees(home)
        yield home
    finally:
        cli("chain", "down", home=home)


def _register_referees(home):
    """The 16 referees, 1 ETH each for both models, sent straight from their dev accounts: 16 `register` commands
    took ~40 s on the loaded test machine, and the command itself is tests/test_cli.py's."""
    deployment = Deployment.load(home / "deployment.json")
    w3 = Web3(Web3.HTTPProvider(deployment.rpc_url))
    registry = deployment.system(w3).registry
    models = [model_id(TARGET), model_id(DRAFT)]
    vocabs = [vocab_size(TARGET), vocab_size(DRAFT)]
    for dev in REFEREES:
        _send(w3, registry.functions.register(Role.Referee, models, vocabs), address(dev), value=10**18)
        assert registry.functions.isActive(address(dev), Role.Referee, models[1]).call()


def _send(w3, fn, sender, value=0):
    gas = int(fn.estimate_gas({"from": sender, "value": value}, block_identifier="pending") * 1.2)
    receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value, "gas": gas}))
    assert receipt.status == 1
    return receipt


def _verified_job(w3, system) -> int:
    market = system.market
    draft, target = model_id(DRAFT), model_id(TARGET)
    requester, drafter, verifier = address(REQUESTER), address(DRAFTER), address(VERIFIER)
    request = (draft, target, drafter, verifier, GAMMA, 0, 0, P.WAD, 8, EOS, 10**12, 3 * 10**12)
    _send(w3, market.functions.submitJob(request, b"\x01\x02"), requester, value=8 * 4 * 10**12)
    job_id = market.functions.jobCount().call()
    seed, length = b"\x07" * 32, P.hash_chain_length(8)
    _send(w3, market.functions.acceptJob(job_id, P.hash_chain(seed, length)), verifier)
    root = P.draft_root(job_id, 0, TOKENS, Q)
    _send(w3, market.functions.commitFirstDraft(job_id, root, TOKENS, Q, SALT), drafter)
    reveal = P.chain_reveal(seed, length, 0)
    _send(w3, market.functions.submitVerification(job_id, 0, TOKENS, Q, PVALS, reveal, OUT_TOKEN), verifier)
    return job_id


def _deployment_with_a_verified_job(home):
    deployment = Deployment.load(home / "deployment.json")
    w3 = Web3(Web3.HTTPProvider(deployment.rpc_url))
    system = deployment.system(w3)
    return deployment, w3, system.disputes, _verified_job(w3, system)


def _open(home, job_id, index):
    args = ("dispute", job_id, "--cycle", 0, "--index", index, "--kind", "draft", "--json")
    return json.loads(ok(cli(*args, "--dev-account", REQUESTER, home=home)))


def _vote(w3, dm, dispute_id, verdict):
    panel = dm.functions.refereesOf(dispute_id).call()
    for r in panel:
        _send(w3, dm.functions.commitVote(dispute_id, P.vote_commitment(dispute_id, r, verdict, b"\x01" * 32)), r)
    for r in panel:
        _send(w3, dm.functions.revealVote(dispute_id, verdict, b"\x01" * 32), r)
    _send(w3, dm.functions.resolve(dispute_id), address(REQUESTER))
    return panel


def test_dispute_appeal_command(home):
    deployment, w3, dm, job_id = _deployment_with_a_verified_job(home)
    out = _open(home, job_id, 1)
    dispute_id = out["dispute_id"]
    assert out["status"] == "AwaitingAnswer" and len(out["referees"]) == 3
    clean_error(cli("dispute-appeal", dispute_id, "--dev-account", REQUESTER, home=home), "only a decided round")
    clean_error(cli("dispute-appeal", 99, "--dev-account", REQUESTER, home=home), "no dispute 99")
    _send(w3, dm.functions.answer(dispute_id, Q[1], [TOKENS[1]], [Q[1]]), address(DRAFTER))
    first = _vote(w3, dm, dispute_id, 2)  # AccusedCheated: the drafter appeals
    balance = w3.eth.get_balance(address(DRAFTER))
    out = ok(cli("dispute-appeal", dispute_id, "--dev-account", DRAFTER, home=home))
    assert f"dispute {dispute_id} appealed" in out and "round 1" in out
    info = json.loads(ok(cli("status", job_id, "--json", home=home)))["disputes"][0]
    assert (info["status"], info["round"], len(info["referees"])) == ("Voting", 1, 7)
    assert not set(info["referees"]) & set(first)
    bond = deployment.deployment_params.dispute_bond
    assert w3.eth.get_balance(address(DRAFTER)) < balance - 2 * bond + 1  # bond × 2 (plus gas)
    # the fresh panel confirms; the last round is final at once, and cannot be appealed
    _vote(w3, dm, dispute_id, 2)
    clean_error(cli("dispute-appeal", dispute_id, "--dev-account", DRAFTER, home=home), "Resolved")
    assert dm.functions.getDispute(dispute_id).call()[6] == 1  # Outcome.AccusedLost


def test_dispute_appeal_after_the_appeal_period_is_refused(home):
    deployment, w3, dm, job_id = _deployment_with_a_verified_job(home)
    out = _open(home, job_id, 0)
    dispute_id = out["dispute_id"]
    _send(w3, dm.functions.answer(dispute_id, Q[0], [TOKENS[0]], [Q[0]]), address(DRAFTER))
    _vote(w3, dm, dispute_id, 1)
    advance(w3, deployment.deployment_params.appeal_period + 1)
    clean_error(cli("dispute-appeal", dispute_id, "--dev-account", REQUESTER, home=home), "appeal period")
