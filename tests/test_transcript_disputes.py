"""Audits, rule challenges and replay disputes of transcript jobs (docs/watchdog.md, docs/protocol.md "Transcript mode
(v2)"): a real anvil, the bundled models, real drafter and verifier nodes running their jobs over real WebSockets on
loopback, real referee nodes and the watchdog node, in-process and driven by `step()` while the links run in their
threads; `verispec audit | dispute | status | finalize` through the CLI on the same chain."""

from __future__ import annotations

import json
import time

import pytest
import torch
from eth_utils import keccak
from web3.exceptions import ContractLogicError

from node import protocol
from node.chain.enums import DisputeKind, JobStatus, Outcome
from node.chain.keys import dev_account
from node.cli_transcript import start_link
from node.jobs import chaindata
from node.link import settled
from node.requester.client import Requester
from node.roles.drafter.node import DrafterNode
from node.roles.verifier.node import VerifierNode
from node.roles.watchdog.audit import replay_draft
from node.roles.watchdog.node import WatchdogNode
from tests.test_cli import clean_error, cli, ok
from tests.test_roles import DRAFT, TARGET, resolve_all
from tests.transcript_nodes import job_logged, party_world, submit_party_job

# in-process nodes run whole jobs on a chain (models, many blocks): not in `make test-fast`
pytestmark = pytest.mark.node_jobs

WATCHDOG = 7
DRAFTERS = {"honest": 2, "biased": 8, "cosign": 9}
VERIFIERS = {"honest": 3, "overaccept": 10}
PROMPTS = ("def fibonacci(n):\n", "import numpy as np\n", "class Stack:\n    def push(self, item):\n")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from node.jobs.models import model_id

    torch.set_num_threads(1)  # the test machine is shared
    ids = {"draft": model_id(DRAFT), "target": model_id(TARGET)}
    tmp = tmp_path_factory.mktemp("transcript-disputes")
    with party_world(tmp, ids, DRAFTERS.values(), VERIFIERS.values()) as world:
        world.deployment.save(tmp / "home" / "deployment.json")  # the CLI's home on the same chain
        yield world


@pytest.fixture(scope="module")
def nodes(world):
    """Every party node, each verifier serving its link on a loopback port it publishes in the registry."""
    made = {}
    for name, account in DRAFTERS.items():
        made[f"d-{name}"] = DrafterNode(
            world.w3, world.deployment, dev_account(account), world.tmp / f"d-{name}.db", DRAFT, TARGET,
            behavior=name, device="cpu", link_silence_s=60,
        )  # fmt: skip
    for name, account in VERIFIERS.items():
        verifier = VerifierNode(
            world.w3, world.deployment, dev_account(account), world.tmp / f"v-{name}.db", TARGET, DRAFT,
            behavior=name, device="cpu",
        )  # fmt: skip
        url = start_link(verifier, ("127.0.0.1", 0))
        made[f"v-{name}"] = verifier
        run(
            list(made.values()),
            lambda v=verifier, u=url: world.system.registry.functions.endpointOf(v.address).call() == u,
        )
    yield made
    for node in made.values():
        node.close()


@pytest.fixture(scope="module")
def referees(world):
    made = world.referees()
    yield made
    for node in made:
        node.close()


def run(nodes, until, timeout: float = 120.0):
    """Step the nodes until `until()` holds: their transcript links run in threads, so this waits on the clock."""
    deadline = time.monotonic() + timeout
    while not until():
        if sum(node.step() for node in nodes) == 0:
            time.sleep(0.02)
        if time.monotonic() > deadline:
            raise AssertionError(f"not done within {timeout:.0f}s")


def submit(world, drafter: str, verifier: str, prompt: str = PROMPTS[0], max_tokens: int = 24) -> int:
    drafter, verifier = world.accounts[DRAFTERS[drafter]], world.accounts[VERIFIERS[verifier]]
    return submit_party_job(world, drafter, verifier, prompt, max_tokens, transcript=True)


def contract_refutes(world, job_id: int, cycle: int) -> bool:
    """Whether the contract's own rule refutes the settled record of `cycle` (challengeRule as an eth_call), checking
    that a refusal is the rule's (RecordFollowsRule), not some other revert."""
    try:
        settled.challenge_call(world.system, job_id, cycle, world.start).call({"from": world.accounts[WATCHDOG]})
    except ContractLogicError as exc:
        assert exc.data[:10] == "0x" + keccak(text="RecordFollowsRule(uint256,uint256)")[:4].hex(), exc
        assert not settled.refuted_on_chain(world.system, job_id, cycle, world.accounts[WATCHDOG], world.start)
        return False
    assert settled.refuted_on_chain(world.system, job_id, cycle, world.accounts[WATCHDOG], world.start)
    return True


def finished(world, job_id: int):
    """The job ended: its JobFinished log is found (a wait on its status alone may end before the block's logs,
    the settlement's included, can be read: tests/transcript_nodes.py `job_logged`)."""
    return job_logged(world.market.events.JobFinished, job_id)


def watchdog(world, job_ids, **options) -> WatchdogNode:
    return WatchdogNode(
        world.w3, world.deployment, dev_account(WATCHDOG), world.tmp / f"watchdog-{job_ids[0]}.db", TARGET, DRAFT,
        device="cpu", jobs=job_ids, **options,
    )  # fmt: skip


def audited(dog, job_id: int):
    def done() -> bool:
        stored = dog.store.job(job_id, "watchdog")
        return stored is not None and stored.status == "done"

    return done


def home(world):
    return world.tmp / "home"


def watchdog_sent(world) -> int:
    return world.nonce(world.accounts[WATCHDOG])


# ---------------------------------------------------------------- (c) an honest transcript job


def test_an_honest_transcript_job_is_audited_clean_and_status_and_finalize_work(world, nodes):
    parties = [nodes["d-honest"], nodes["v-honest"]]
    job_id = submit(world, "honest", "honest")
    run(parties, finished(world, job_id))
    cycles = settled.job_cycles(world.system, job_id, world.start)
    assert cycles and all(c.p is not None for c in cycles)
    assert settled.rule_faults(world.system, job_id, cycles) == []
    assert not any(contract_refutes(world, job_id, c.cycle) for c in cycles)  # the contract's rule agrees
    # the watchdog replays every draft and every binding target position: nothing to challenge or dispute
    dog = watchdog(world, [job_id], audit_rate=1.0)
    sent = watchdog_sent(world)
    run([*parties, dog], audited(dog, job_id))
    params = dog.store.job(job_id, "watchdog").params
    assert params["candidates"] == [] and params["audit"]["cycles"] == len(cycles)
    binding = sum(1 for c in cycles for i in range(c.gamma + 1) if protocol.binds(i, c.accepted, c.gamma))
    assert len(params["audit"]["target_positions"]) == binding and params["audit"]["draft_cycles"] == len(cycles)
    assert watchdog_sent(world) == sent and world.dm.functions.disputeCount().call() == 0
    dog.close()
    # the CLI's audit of both kinds finds nothing; status shows the settled cycles
    for kind in ("draft", "target"):
        out = json.loads(ok(cli("audit", job_id, "--kind", kind, "--json", home=home(world))))
        assert out["faults"] == [] and out["rule_faults"] == [], kind
    status = json.loads(ok(cli("status", job_id, "--json", home=home(world))))
    assert status["status"] == "Finished" and len(status["cycles"]) == len(cycles)
    assert [t for c in cycles for t in c.output] == status["tokens"]
    # a dispute on a cycle the job does not have: one line, nothing sent
    dispute = ("dispute", job_id, "--index", 0, "--kind", "target", "--dev-account", WATCHDOG)
    clean_error(cli(*dispute[:2], "--cycle", len(cycles), *dispute[2:], home=home(world)), "cycle", str(len(cycles)))
    clean_error(cli(*dispute[:2], "--cycle", 0, "--index", 9, *dispute[4:], home=home(world)), "--index", "0..4")
    # nor is there a rule challenge to send
    challenge = ("challenge", job_id, "--dev-account", WATCHDOG)
    clean_error(cli(*challenge, home=home(world)), "follows the accept rule", "nothing to challenge")
    clean_error(cli(*challenge, "--cycle", 0, home=home(world)), "cycle 0", "follows the accept rule")
    clean_error(cli(*challenge, "--cycle", len(cycles), home=home(world)), "--cycle", f"0..{len(cycles) - 1}")
    assert watchdog_sent(world) == sent and world.dm.functions.disputeCount().call() == 0
    # finalize after the window pays as per-cycle mode does
    world.advance(world.market.functions.challengeWindow().call() + 1)
    paid = json.loads(ok(cli("finalize", job_id, "--dev-account", 1, "--json", home=home(world))))["payments"]
    view = status
    assert paid["drafter"] == sum(min(c.accepted, len(c.output)) for c in cycles) * view["price_token_wei"]
    assert paid["verifier"] + paid["alpha_fee"] == len(cycles) * view["price_pass_wei"]
    assert sum(paid[k] for k in ("drafter", "verifier", "alpha_fee", "refund")) == view["escrow_wei"]


# ---------------------------------------------------------------- (a) a co-signed wrong cycle


def test_a_cosigned_wrong_cycle_is_rule_challenged_by_the_watchdog_both_slashed_the_requester_whole(world, nodes):
    parties = [nodes["d-cosign"], nodes["v-overaccept"]]
    drafter, verifier = world.accounts[DRAFTERS["cosign"]], world.accounts[VERIFIERS["overaccept"]]
    # the watchdog follows the job from its submission, while it runs off chain
    balance = world.w3.eth.get_balance(world.accounts[WATCHDOG])
    dog = watchdog(world, [world.market.functions.jobCount().call() + 1], audit_rate=1.0)
    job_id = submit(world, "cosign", "overaccept")
    run([*parties, dog], lambda: world.status(job_id) == JobStatus.Running)
    assert dog.store.job(job_id, "watchdog").status == "active"
    run(parties, finished(world, job_id))  # settlement does not re-run the rule: the pair's transcript settles
    cycles = settled.job_cycles(world.system, job_id, world.start)
    broken = settled.rule_faults(world.system, job_id, cycles)
    assert broken and all(cycles[c].accepted == 4 for c, _ in broken)
    assert [c.cycle for c in cycles if contract_refutes(world, job_id, c.cycle)] == [c for c, _ in broken]
    # `verispec audit` lists the same records first, with the challenge to send (no model needed for them)
    printed = ok(cli("audit", job_id, home=home(world)))
    assert f"{len(broken)} settled record(s) break the accept rule" in printed
    assert all(f"cycle {c}: {why}" in " ".join(printed.split()) for c, why in broken)
    assert f"verispec challenge {job_id} --cycle {broken[0][0]}" in printed
    stakes = {a: world.stake(a) for a in (drafter, verifier)}
    good = [c.cycle for c in cycles if c.cycle not in dict(broken)]
    if good:  # the CLI refuses to challenge a record that follows the rule, before sending anything
        refused = cli("challenge", job_id, "--cycle", good[0], "--dev-account", WATCHDOG, home=home(world))
        clean_error(refused, f"cycle {good[0]}", "follows the accept rule")
    assert world.w3.eth.get_balance(world.accounts[WATCHDOG]) == balance
    run([*parties, dog], audited(dog, job_id))
    [candidate] = dog.store.job(job_id, "watchdog").params["candidates"]
    assert (candidate["kind"], candidate["cycle"]) == ("rule", broken[0][0])
    [won] = world.market.events.TranscriptConvicted().get_logs(from_block=world.start)
    a = won["args"]
    rule_slash, bps = world.system.params.rule_slash, world.system.params.rule_reward_bps
    assert (a["jobId"], a["challenger"]) == (job_id, world.accounts[WATCHDOG])
    assert a["fromDrafter"] == a["fromVerifier"] == rule_slash
    assert a["reward"] == rule_slash * bps // 10_000 == candidate["result"]["reward"]
    for account in (drafter, verifier):
        assert world.stake(account) == stakes[account] - rule_slash
    assert world.dm.functions.disputeCount().call() == 0  # no bond, no referees
    # the reward was withdrawn from the market: the watchdog is up by it, less its gas
    assert world.market.functions.owed(world.accounts[WATCHDOG]).call() == 0
    gas = sum(
        r["gasUsed"] * r["effectiveGasPrice"]
        for b in range(world.start, world.w3.eth.block_number + 1)
        for tx in world.w3.eth.get_block(b, full_transactions=True).transactions
        if tx["from"] == world.accounts[WATCHDOG]
        for r in [world.w3.eth.get_transaction_receipt(tx["hash"])]
    )
    assert world.w3.eth.get_balance(world.accounts[WATCHDOG]) == balance + a["reward"] - gas
    dog.close()
    clean_error(cli("challenge", job_id, "--dev-account", 1, home=home(world)), "already")  # once per job
    # the requester is made whole at finalize: neither signer is paid
    world.advance(world.market.functions.challengeWindow().call() + 1)
    escrow = chaindata.job_view(world.market, job_id)["escrow"]
    paid = json.loads(ok(cli("finalize", job_id, "--dev-account", 1, "--json", home=home(world))))["payments"]
    assert (paid["drafter"], paid["verifier"], paid["alpha_fee"], paid["refund"]) == (0, 0, 0, escrow)


# ---------------------------------------------------------------- (b) a replay dispute on a pulled cycle


def test_a_biased_drafters_transcript_cycle_is_pulled_disputed_and_convicted_by_the_referees(world, nodes, referees):
    parties = [nodes["d-biased"], nodes["v-honest"]]
    requester = Requester(world.w3, world.deployment)
    for prompt in PROMPTS:
        job_id = submit(world, "biased", "honest", prompt, 40)
        run(parties, finished(world, job_id))
        faults = [f for f in replay_draft(requester, job_id, DRAFT) if f.binding]  # `verispec audit` on it
        if faults:
            break
    else:
        raise AssertionError("the biased drafter never deviated on a binding position")
    stake = world.stake(world.accounts[DRAFTERS["biased"]])
    dog = watchdog(world, [job_id], audit_rate=0.0, bond_budget_wei=world.system.params.dispute_bond)
    everyone = [*parties, *referees, dog]
    assert not settled.pulled(world.system, job_id, faults[0].cycle)
    run(everyone, lambda: world.dm.functions.disputeCount().call() == 1)
    [opened] = world.dm.events.DisputeOpened().get_logs(from_block=world.start)
    a = opened["args"]
    assert (a["jobId"], a["cycle"], a["index"], a["kind"]) == (job_id, faults[0].cycle, faults[0].index, 0)
    assert a["kind"] == DisputeKind.DraftReplay and a["accused"] == world.accounts[DRAFTERS["biased"]]
    [pulled] = world.system.transcript.events.CyclePulled().get_logs(from_block=world.start)
    assert pulled["args"]["cycle"] == faults[0].cycle and settled.pulled(world.system, job_id, faults[0].cycle)
    [view] = resolve_all(world, [a["disputeId"]], everyone)
    assert (view["outcome"], view["cheatedVotes"]) == (Outcome.AccusedLost, 3)
    assert world.stake(world.accounts[DRAFTERS["biased"]]) == stake - world.system.params.accused_slash
    dog.close()


def test_a_cli_dispute_on_an_honest_transcript_cycle_pulls_it_once_and_the_honest_verifier_wins(world, nodes, referees):
    parties = [nodes["d-honest"], nodes["v-honest"]]
    verifier = world.accounts[VERIFIERS["honest"]]
    job_id = submit(world, "honest", "honest", PROMPTS[1])
    run(parties, finished(world, job_id))
    stake = world.stake(verifier)
    args = ("dispute", job_id, "--cycle", 0, "--index", 0, "--kind", "target", "--dev-account", WATCHDOG, "--json")
    info = json.loads(ok(cli(*args, home=home(world))))
    assert (info["job_id"], info["cycle"], info["index"], info["accused"]) == (job_id, 0, 0, verifier)
    mine = {"jobId": job_id}
    pulls = world.system.transcript.events.CyclePulled().get_logs(from_block=world.start, argument_filters=mine)
    assert [p["args"]["cycle"] for p in pulls] == [0]
    cycle = settled.job_cycle(world.system, job_id, 0, world.start)
    assert pulls[0]["args"]["recordHash"] == protocol.cycle_record_hash(*cycle.record_preimage())

    def refuse(*_args, **_kwargs):
        raise AssertionError("a pulled cycle is not pulled again")

    assert settled.pull(world.system, refuse, job_id, 0, world.start) is None
    # the honest verifier answers from chain data (its link kept no per-cycle transcript) and the referees agree
    [view] = resolve_all(world, [info["dispute_id"]], [*parties, *referees])
    assert view["outcome"] == Outcome.ChallengerLost and world.stake(verifier) == stake
    answered = world.dm.events.Answered().get_logs(from_block=world.start)
    assert info["dispute_id"] in [a["args"]["disputeId"] for a in answered]


# ---------------------------------------------------------------- (d) a transcript job not settled yet


def test_audit_and_dispute_of_an_unsettled_transcript_job_are_one_line_and_send_nothing(world, nodes):
    job_id = submit(world, "honest", "honest")  # the last test: no node steps again, so it stays Open
    before = (watchdog_sent(world), world.dm.functions.disputeCount().call())
    args = ("--cycle", 0, "--index", 0, "--kind", "draft", "--dev-account", WATCHDOG)
    clean_error(cli("dispute", job_id, *args, home=home(world)), f"job {job_id}", "not settled")
    clean_error(cli("audit", job_id, home=home(world)), f"job {job_id}", "not settled")
    clean_error(cli("challenge", job_id, "--dev-account", WATCHDOG, home=home(world)), f"job {job_id}", "not settled")
    assert (watchdog_sent(world), world.dm.functions.disputeCount().call()) == before
    # the colluding pair is selectable by `serve`, each half for its own role only
    serve = ("serve", "drafter", "--model", DRAFT, "--target-model", TARGET, "--dev-account", 2, "--behavior")
    clean_error(cli(*serve, "overaccept", home=home(world)), "--behavior", "unknown drafter behavior", "cosign")
