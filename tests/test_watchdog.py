"""The watchdog node (node/roles/watchdog/node.py) on a real anvil with the bundled models, real party and referee
nodes.

Nodes run in-process, driven by `step()` (tests/test_roles.py `drive`); one module chain for the in-process tests,
each test following only its own jobs. The last test runs `verispec serve watchdog` as an OS process, kills it with
SIGKILL right after its dispute lands and starts it again on the same store: it must not open a second one.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import time

import pytest
import torch

from node import audit_sampling, protocol
from node.chain.anvil import running_anvil
from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.enums import DisputeKind, DisputeStatus, JobStatus, Outcome, Role
from node.chain.keys import dev_account
from node.chain.rpc import connect
from node.jobs import chaindata
from node.jobs.models import model_id
from node.requester.client import Requester
from node.roles.referee.node import RefereeNode
from node.roles.watchdog.audit import load_job, replay_draft, target_positions
from node.roles.watchdog.node import SEED_NAME, WatchdogNode
from node.store import NodeStore
from tests.test_cli import (
    DRAFTER,
    REFEREES,
    _log_tail,
    _serve,
    _stop,
    address,
    chain_with_drafter_and_verifier,
    clean_error,
    cli,
    ok,
    register,
)
from tests.test_roles import DRAFT, STAKE, TARGET, VOCAB, WAD, World, drive, resolve_all
from tests.transcript_nodes import submit_party_job

# in-process nodes run whole jobs on a chain (models, many blocks): not in `make test-fast`
pytestmark = pytest.mark.node_jobs

WATCHDOG = 7
DRAFTERS = {"honest": 2, "biased": 8, "lazy": 9}
VERIFIERS = {"honest": 3, "collude": 10, "shade": 11, "retaliate": 12}
PROMPTS = ("def fibonacci(n):\n", "import numpy as np\n", "class Stack:\n    def push(self, item):\n")


@pytest.fixture(scope="module")
def world(tmp_path_factory, ids):
    torch.set_num_threads(1)  # the test machine is shared
    with running_anvil(accounts=40) as node:  # room for the appeal test's fresh referees
        w3 = connect(node.rpc_url)
        start = w3.eth.block_number + 1
        system = deploy_system(w3, w3.eth.accounts[0])
        deployment = Deployment.of_system(w3, system, node.rpc_url, start)
        world = World(w3, system, deployment, start, ids, tmp_path_factory.mktemp("watchdog"), list(w3.eth.accounts))
        reg = system.registry.functions
        for account in DRAFTERS.values():
            world.send(
                reg.registerDrafter(ids["draft"], ids["target"], WAD // 2, VOCAB), world.accounts[account], STAKE
            )
        for account in VERIFIERS.values():
            world.send(reg.register(Role.Verifier, [ids["target"]], [VOCAB]), world.accounts[account], STAKE)
        for referee in world.referee_addresses:
            world.send(
                reg.register(Role.Referee, [ids["draft"], ids["target"]], [VOCAB, VOCAB]),
                referee,
                system.params.min_referee_stake,
            )
        yield world


@pytest.fixture(scope="module")
def ids():
    return {"draft": model_id(DRAFT), "target": model_id(TARGET)}


def submit(world, drafter: str, verifier: str, prompt: str, max_tokens: int) -> int:
    drafter, verifier = world.accounts[DRAFTERS[drafter]], world.accounts[VERIFIERS[verifier]]
    return submit_party_job(world, drafter, verifier, prompt, max_tokens, transcript=False)


def watchdog(world, store="watchdog", **options) -> WatchdogNode:
    return WatchdogNode(
        world.w3,
        world.deployment,
        dev_account(WATCHDOG),
        world.tmp / f"{store}.db",
        TARGET,
        DRAFT,
        device="cpu",
        **options,
    )


def binding_positions(world, job_id) -> list[tuple[int, int]]:
    cycles = chaindata.cycles(world.system, job_id, from_block=world.start, with_p=False)
    return [(c.cycle, i) for c in cycles for i in range(c.gamma + 1) if protocol.binds(i, c.accepted, c.gamma)]


def my_disputes(world) -> list[dict]:
    opened = world.dm.events.DisputeOpened().get_logs(from_block=world.start)
    return [dict(e["args"]) for e in opened if e["args"]["challenger"] == world.accounts[WATCHDOG]]


# ---------------------------------------------------------------- the store's secret


def test_the_audit_seed_is_made_once_kept_across_restarts_and_a_v3_store_migrates(tmp_path):
    path = tmp_path / "node.db"
    with NodeStore(path) as store:
        seed = store.secret(SEED_NAME, lambda: os.urandom(32))
        assert len(seed) == 32 and store.secret(SEED_NAME, lambda: b"other") == seed
    with NodeStore(path) as store:
        assert store.secret(SEED_NAME, lambda: b"other") == seed
    raw = sqlite3.connect(path)  # a store of schema v3 (before secrets) is migrated when opened
    raw.execute("DROP TABLE job_salts")
    raw.execute("DROP TABLE secrets")
    raw.execute("DROP TABLE link_messages")
    raw.execute("DROP TABLE poller_blocks")
    raw.execute("ALTER TABLE processed_logs DROP COLUMN block_number")
    raw.execute("PRAGMA user_version=3")
    raw.commit()
    raw.close()
    with NodeStore(path) as store:
        assert store.secret(SEED_NAME, lambda: b"x" * 32) == b"x" * 32


# ---------------------------------------------------------------- honest jobs


def test_honest_jobs_are_audited_in_full_at_rate_1_and_nothing_is_disputed(world, caplog):
    drafter, verifier = world.drafter(), world.verifier()
    jobs = [submit(world, "honest", "honest", prompt, 12) for prompt in PROMPTS]
    drive([drafter, verifier], lambda: all(world.status(j) == JobStatus.Finished for j in jobs))
    caplog.set_level(logging.INFO, logger="verispec")
    dog = watchdog(world, audit_rate=1.0)  # follows every job (the first ones of this chain)
    drive([dog], lambda: all(dog.store.job(j, "watchdog").status == "done" for j in jobs))
    assert world.dm.functions.disputeCount().call() == 0
    for job_id in jobs:
        audit, positions = dog.audits[job_id], binding_positions(world, job_id)
        cycles = len({c for c, _ in positions})
        assert sorted(audit.target_positions) == positions  # every binding position, p and outToken
        assert audit.target_forwards == cycles and audit.draft_forwards == cycles  # one forward per cycle and model
        assert len(audit.draft_cycles) == cycles and audit.draft == [] and audit.target == []
        assert dog.store.job(job_id, "watchdog").params["candidates"] == []
        assert f"job {job_id} audited" in caplog.text
    seed = dog.store.secret(SEED_NAME, lambda: b"")
    assert seed.hex() not in caplog.text and str(seed) not in caplog.text  # never logged
    dog.close()

    # a sampling watchdog audits exactly what its private seed draws, one target forward per audited cycle
    sampler = watchdog(world, "sampler", jobs=jobs, audit_rate=0.3, draft_rate=0.5, weighting="threshold")
    drive([sampler], lambda: all(sampler.store.job(j, "watchdog").status == "done" for j in jobs))
    seed = sampler.store.secret(SEED_NAME, lambda: b"")
    assert len(seed) == 32
    audited = 0
    for job_id in jobs:
        audit = sampler.audits[job_id]
        data = load_job(world.system, job_id, world.start, sampler.tokenizer)
        drawn = audit_sampling.select(target_positions(data), 0.3, "threshold", seed, job_id)
        assert sorted(audit.target_positions) == sorted((p.cycle, p.index) for p in drawn)
        assert audit.target_forwards == len({c for c, _ in audit.target_positions})
        assert audit.draft_forwards >= len(audit.draft_cycles) and len(audit.draft_cycles) <= len(data.cycles)
        audited += len(audit.target_positions)
    total = sum(len(binding_positions(world, j)) for j in jobs)
    assert 0 < audited < total  # a sample, not everything
    assert world.dm.functions.disputeCount().call() == 0
    sampler.close()


# ---------------------------------------------------------------- cheaters


def _biased_job(world, drafter, verifier) -> int:
    """A job of the biased drafter whose draft holds a binding biased proposal (a short job may hold none)."""
    for prompt in PROMPTS:
        job_id = submit(world, "biased", "collude", prompt, 40)
        drive([drafter, verifier], lambda job_id=job_id: world.status(job_id) == JobStatus.Finished)
        if any(c.binding for c in replay_draft(Requester(world.w3, world.deployment), job_id, DRAFT)):
            return job_id
    raise AssertionError("the biased drafter never deviated on a binding position")


def test_the_watchdog_catches_each_misbehaviour_within_its_bond_budget_and_withdraws(world):
    honest = world.drafter()
    biased, lazy = (
        world.drafter("biased", "biased", DRAFTERS["biased"]),
        world.drafter("lazy", "lazy", DRAFTERS["lazy"]),
    )
    collude = world.verifier("collude", "collude", VERIFIERS["collude"], dispute_faults=True)
    shade = world.verifier("shade", "shade", VERIFIERS["shade"])
    retaliate = world.verifier("retaliate", "retaliate", VERIFIERS["retaliate"])
    parties = [honest, biased, lazy, collude, shade, retaliate]
    cheats = {
        _biased_job(world, biased, collude): ("biased", DisputeKind.DraftReplay),  # its verifier covers for it
        submit(world, "lazy", "collude", PROMPTS[0], 12): ("lazy", DisputeKind.DraftReplay),
        submit(world, "honest", "shade", PROMPTS[1], 12): ("shade", DisputeKind.TargetReplay),
        submit(world, "honest", "retaliate", PROMPTS[2], 12): ("retaliate", DisputeKind.TargetReplay),
    }
    drive(parties, lambda: all(world.status(j) == JobStatus.Finished for j in cheats))
    assert world.dm.functions.disputeCount().call() == 0  # the colluding verifier disputed nothing
    bond = world.system.params.dispute_bond
    dog = watchdog(world, jobs=list(cheats), audit_rate=1.0, bond_budget_wei=2 * bond)
    referees = world.referees()
    nodes = [*parties, *referees, dog]
    stakes = {a: world.stake(a) for a in world.accounts[2:13]}
    balance = world.w3.eth.get_balance(world.accounts[WATCHDOG])
    most_open = 0

    def open_now() -> int:
        nonlocal most_open
        running = [d for d in my_disputes(world) if world.dispute(d["disputeId"])["status"] != DisputeStatus.Resolved]
        most_open = max(most_open, len(running))
        return len(running)

    # two bonds of budget: two disputes open, the other two jobs wait
    drive(nodes, lambda: open_now() == 2)
    for _ in range(20):
        dog.step()
    assert len(my_disputes(world)) == 2 and open_now() == 2
    waiting = [j for j in cheats if dog.store.job(j, "watchdog").status == "active"]
    assert len(waiting) == 2
    resolve_all(world, [d["disputeId"] for d in my_disputes(world)], nodes)
    drive(nodes, lambda: len(my_disputes(world)) == 4)  # the freed budget opens the other two
    resolve_all(world, [d["disputeId"] for d in my_disputes(world)], nodes)
    drive(nodes, lambda: all(d.status == "done" for d in dog.store.disputes(role="watchdog")) and open_now() == 0)
    assert most_open == 2

    disputes = my_disputes(world)
    assert sorted(d["jobId"] for d in disputes) == sorted(cheats)
    params = world.system.params
    for d in disputes:
        who, kind = cheats[d["jobId"]]
        role = "drafter" if kind == DisputeKind.DraftReplay else "verifier"
        accused = world.accounts[(DRAFTERS if role == "drafter" else VERIFIERS)[who]]
        view = world.dispute(d["disputeId"])
        assert (d["kind"], d["accused"]) == (kind, accused), who
        assert (view["outcome"], view["cheatedVotes"]) == (Outcome.AccusedLost, 3), who
        assert (d["cycle"], d["index"]) in binding_positions(world, d["jobId"])
        assert dog.store.dispute(d["disputeId"], "watchdog").status == "done"
        if who in ("shade", "retaliate"):
            audit = dog.audits[d["jobId"]]
            assert "target model gives" in audit.target[0].reason and audit.draft == []
    for who, account in (("biased", 8), ("lazy", 9), ("shade", 11), ("retaliate", 12)):
        assert world.stake(world.accounts[account]) == stakes[world.accounts[account]] - params.accused_slash, who
    for account in (2, 3, 10):  # the honest drafter and verifier, and the colluder (never accused here)
        assert world.stake(world.accounts[account]) == stakes[world.accounts[account]]
    assert world.dm.functions.credits(world.accounts[WATCHDOG]).call() == 0  # withdrawn
    assert world.w3.eth.get_balance(world.accounts[WATCHDOG]) > balance  # four won bonds and rewards, minus gas
    dog.close()


def test_an_appeal_by_the_convicted_verifier_is_followed_to_its_final_round_and_logged(world, caplog):
    """Runs after the other in-process tests: the referees it registers would be drawn for their disputes too."""
    drafter, verifier = world.drafter(), world.verifier("retaliate", "retaliate", VERIFIERS["retaliate"])
    job_id = submit(world, "honest", "retaliate", PROMPTS[0], 8)
    drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)
    params, reg = world.system.params, world.system.registry.functions
    fresh = list(range(20, 32))  # twelve more referees: an appeal panel of 7 that cannot escalate by chance
    for i in fresh:
        world.send(
            reg.register(Role.Referee, [world.ids["draft"], world.ids["target"]], [VOCAB, VOCAB]),
            world.accounts[i],
            params.min_referee_stake,
        )
    referees = world.referees() + [
        RefereeNode(
            world.w3, world.deployment, dev_account(i), world.tmp / f"referee{i}.db", TARGET, DRAFT, device="cpu"
        )
        for i in fresh
    ]
    caplog.set_level(logging.INFO, logger="verispec")
    dog = watchdog(world, "appeal-watchdog", jobs=[job_id], audit_rate=1.0)
    nodes = [drafter, verifier, *referees, dog]
    drive(nodes, lambda: len([d for d in my_disputes(world) if d["jobId"] == job_id]) == 1)
    [opened] = [d for d in my_disputes(world) if d["jobId"] == job_id]
    dispute_id = opened["disputeId"]
    drive(nodes, lambda: world.dispute(dispute_id)["status"] == DisputeStatus.Appealable)
    assert world.dispute(dispute_id)["roundResult"] == Outcome.AccusedLost
    world.send(world.dm.functions.appeal(dispute_id), world.accounts[VERIFIERS["retaliate"]], 2 * params.dispute_bond)
    [d] = resolve_all(world, [dispute_id], nodes)  # the nodes draw round 1's panel of 7, which votes; final at once
    assert (d["round"], d["outcome"], d["cheatedVotes"]) == (1, Outcome.AccusedLost, 7)
    drive(nodes, lambda: dog.store.dispute(dispute_id, "watchdog").status == "done")
    assert f"dispute {dispute_id}: appealed by {world.accounts[VERIFIERS['retaliate']]}" in caplog.text
    assert f"dispute {dispute_id}: round 0 decided AccusedLost" in caplog.text
    assert world.dm.functions.credits(world.accounts[WATCHDOG]).call() == 0  # its share of the failed appeal too
    dog.close()


# ---------------------------------------------------------------- `verispec serve watchdog`


def test_serve_watchdog_refuses_bad_options_in_one_line(tmp_path):
    serve = ("serve", "watchdog", "--model", TARGET, "--draft-model", DRAFT, "--dev-account", WATCHDOG)
    for option, value, words in (
        ("--audit-rate", "1.5", "--audit-rate must be a fraction in [0, 1]"),
        ("--audit-rate", "nan", "--audit-rate must be a fraction"),
        ("--draft-rate", "-0.1", "--draft-rate must be a fraction"),
        ("--weighting", "loudest", "--weighting must be uniform, entropy, threshold"),
        ("--bond-budget", "lots", "--bond-budget"),
        ("--behavior", "biased", "a watchdog has one way of working"),
    ):
        clean_error(cli(*serve, option, value, home=tmp_path), words)
    verifier = ("serve", "verifier", "--model", TARGET, "--draft-model", DRAFT, "--dev-account", 3)
    clean_error(cli(*verifier, "--audit-rate", "0.5", home=tmp_path), "--audit-rate is a watchdog's option")
    clean_error(cli(*verifier, "--job", "4", home=tmp_path), "--job is a watchdog's option")


@pytest.mark.node_processes
def test_serve_watchdog_survives_kill_9_without_a_second_dispute_and_stops_on_sigterm(tmp_path_factory):
    biased_dev, verifier_dev = 8, 3
    with chain_with_drafter_and_verifier(tmp_path_factory.mktemp("watchdog-kill")) as home:
        ok(register(home, "drafter", "2", biased_dev, "--model", DRAFT, "--target-model", TARGET))
        deployment = Deployment.load(home / "deployment.json")
        w3 = connect(deployment.rpc_url)
        system = deployment.system(w3)
        world = World(w3, system, deployment, deployment.start_block, {}, home, list(w3.eth.accounts))
        referee_models = [model_id(TARGET), model_id(DRAFT)]
        for dev in REFEREES:  # by transaction (the register command is tests/test_cli.py's), 1 ETH each
            register_referee = system.registry.functions.register(Role.Referee, referee_models, [VOCAB, VOCAB])
            world.send(register_referee, address(dev), 10**18)
        drafter = world.drafter("lazy", "lazy", biased_dev)  # in-process: a cheat on every position
        verifier = world.verifier("collude", "collude", verifier_dev)
        world.ids = {"draft": model_id(DRAFT), "target": model_id(TARGET)}
        request = dict(
            draftModel=world.ids["draft"],
            targetModel=world.ids["target"],
            drafter=address(biased_dev),
            verifier=address(verifier_dev),
            gamma=4,
            temperature=WAD,
            topK=0,
            topP=WAD,
            maxTokens=12,
            eosToken=2**32 - 1,
            pricePerAcceptedToken=10**12,
            pricePerPass=3 * 10**12,
        )
        world.send(system.market.functions.submitJob(request, PROMPTS[0].encode()), address(1), 12 * 4 * 10**12)
        job_id = system.market.functions.jobCount().call()
        drive([drafter, verifier], lambda: world.status(job_id) == JobStatus.Finished)
        assert biased_dev != DRAFTER
        clean_error(  # checked against the deployment's bond, before the node serves
            cli("serve", "watchdog", "--model", TARGET, "--draft-model", DRAFT, "--dev-account", WATCHDOG,
                "--bond-budget", "0.01eth", home=home),
            "less than one dispute bond",
        )  # fmt: skip
        options = ("--audit-rate", "0", "--job", str(job_id), "--poll-interval", "0.05")
        process = _serve(home, "watchdog", WATCHDOG, *options)
        try:
            deadline = time.monotonic() + 240
            while not system.disputes.events.DisputeOpened().get_logs(from_block=deployment.start_block):
                assert process.poll() is None, _log_tail(home)
                assert time.monotonic() < deadline, _log_tail(home)
                time.sleep(0.01)
            os.kill(process.pid, signal.SIGKILL)  # at once: its store may not have recorded the dispute yet
            assert process.wait(timeout=60) == -signal.SIGKILL
            process = _serve(home, "watchdog", WATCHDOG, *options)
            store = home / "nodes" / f"watchdog-{address(WATCHDOG).lower()}.db"

            def followed() -> bool:
                if not store.exists():
                    return False
                with sqlite3.connect(store) as db:
                    rows = db.execute("SELECT status, params FROM jobs WHERE role = 'watchdog'").fetchall()
                return bool(rows) and rows[0][0] == "done"

            deadline = time.monotonic() + 240
            while not (followed() and chaindata.dispute_view(system.disputes, 1)["drawn"]):
                assert process.poll() is None, _log_tail(home)
                assert time.monotonic() < deadline, _log_tail(home)
                time.sleep(0.1)
            time.sleep(2)  # a second opening would land now
            opened = system.disputes.events.DisputeOpened().get_logs(from_block=deployment.start_block)
            assert len(opened) == 1 and opened[0]["args"]["challenger"] == address(WATCHDOG)
            assert opened[0]["args"]["kind"] == DisputeKind.DraftReplay
            with sqlite3.connect(store) as db:
                [(params,)] = db.execute("SELECT params FROM jobs WHERE role = 'watchdog'").fetchall()
                keys = [
                    k for (k,) in db.execute("SELECT idempotency_key FROM sent_txs") if k.startswith("watchdog:open")
                ]
            assert [c["result"] for c in json.loads(params)["candidates"]] == [1]
            assert len(keys) == 1
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0, _log_tail(home)
            assert "watchdog node" in _log_tail(home) and "stopped" in _log_tail(home)
        finally:
            if process.poll() is None:
                _stop(process)
