"""Shared set-up of the tests that run transcript jobs through real nodes (test_transcript_liveness, _nodes, _link,
_disputes; test_watchdog's module world is the same as `party_world` builds, and can be built by it).

Two kinds of set-up:

* `served_chain` (module) + `fresh_chain` (per test): one `verispec chain up` home per module, with the CLI's drafter
  and verifier registered, and an evm snapshot reverted after every test (`reverted`), so each test sees the chain
  as it was after the registrations (job ids from 1, events from block 0 its own) without paying for a chain of its
  own. Node processes (`serving`) live inside one reverted span: they hold stores and chain positions a revert would
  invalidate. Tests that can share a pair of nodes do so in a class (a class-scoped `serving` in one `reverted`
  span), each following only its own job's events and link messages.
* `party_world`: one anvil with the protocol deployed and drafters, verifiers and referees registered, for tests
  that drive in-process nodes (tests/test_roles.py `World`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from web3 import Web3

from node import processes
from node.chain.anvil import free_port, running_anvil
from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.enums import Role
from node.chain.rpc import connect
from tests.test_cli import (
    DRAFTER,
    REQUESTER,
    VERIFIER,
    _serve,
    address,
    chain_with_drafter_and_verifier,
    cli,
    ok,
)
from tests.test_roles import STAKE, VOCAB, WAD, World

# ------------------------------------------------------------------ waiting on a condition


def wait_for(predicate, timeout: float, what: str, nodes=(), poll: float = 0.1) -> None:
    """Poll `predicate` until it holds; an AssertionError after `timeout` s, or at once when one of `nodes` exits."""
    deadline = time.monotonic() + timeout
    while not predicate():
        for node in nodes:
            assert node.poll() is None, f"a node exited while waiting for {what}"
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


def link_rows(path: Path, kind: str, job_id: int | None = None) -> int:
    """How many signed link messages of `kind` (of job `job_id`, when given) a node's store holds (0 before the
    store exists)."""
    if not path.exists():
        return 0
    query, args = "SELECT count(*) FROM link_messages WHERE kind = ?", (kind,)
    if job_id is not None:
        query, args = query + " AND job_id = ?", (kind, job_id)
    try:
        with sqlite3.connect(path) as db:
            return db.execute(query, args).fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def job_logs(event, job_id: int) -> list:
    """`event`'s logs of job `job_id` (its first indexed argument) from block 0: what a test that shares its chain
    with other tests' jobs reads."""
    return event.get_logs(from_block=0, argument_filters={"jobId": job_id})


def job_logged(event, job_id: int):
    """A wait condition: job `job_id` has an `event` log. A test that goes on to read a transaction's logs (or its
    receipt) waits on them, not on a view the transaction changed: anvil writes a mined block's state before it
    publishes the block (its number, logs and receipts: foundry 1.7 `Backend::do_mine_block` releases the state
    lock, then updates `best_number`), and an eth_call that waited on that lock is answered in between, so a view
    can show a transaction's effect while eth_getLogs does not yet find its block. A loaded machine widens that
    window (a CI run met it). The other way round holds: once a block's logs are found, every view shows its state."""
    return lambda: bool(job_logs(event, job_id))


# ------------------------------------------------------------------ one chain per module, reverted per test


@dataclass
class ServedChain:
    """A `verispec chain up` home with the CLI's drafter and verifier registered."""

    home: Path
    w3: Web3
    system: object


def chain_of(home: Path) -> tuple[Web3, object]:
    deployment = Deployment.load(home / "deployment.json")
    w3 = Web3(Web3.HTTPProvider(deployment.rpc_url))
    return w3, deployment.system(w3)


@pytest.fixture(scope="module")
def served_chain(tmp_path_factory):
    with chain_with_drafter_and_verifier(tmp_path_factory.mktemp("served-chain") / "home") as home:
        yield ServedChain(home, *chain_of(home))


@contextlib.contextmanager
def reverted(chain: ServedChain):
    """`chain` as it is now, again once the block is done: an evm snapshot reverted at the end (time travel
    included); the nodes' logs cleared at the start, so the block reads only its own nodes' lines."""
    snap = chain.w3.provider.make_request("evm_snapshot", [])["result"]
    for role in ("drafter", "verifier"):
        for log in chain.home.glob(f"{role}-*.log"):
            log.unlink()
    try:
        yield chain
    finally:
        assert chain.w3.provider.make_request("evm_revert", [snap])["result"] is True


@pytest.fixture
def fresh_chain(served_chain):
    """The module's chain as it was after the registrations, for this test alone (`reverted`)."""
    with reverted(served_chain) as chain:
        yield chain


# ------------------------------------------------------------------ node processes


def serve_verifier(home: Path, port: int | None, store: Path, *extra: str) -> subprocess.Popen:
    """`serve verifier` for the CLI's verifier, listening on loopback `port` (not listening when None)."""
    listen = ("--listen", f"127.0.0.1:{port}") if port else ()
    return _serve(home, "verifier", VERIFIER, "--store", store, *listen, *extra)


def submit_no_wait(home: Path, max_tokens: int) -> None:
    """`submit --no-wait --no-eos` of a transcript job, in-process: it returns once the job is on chain (a few polls
    before the nodes see it, so a test watching them run it misses no cycle), without the seconds an OS process
    spends importing the CLI."""
    submit = ("submit", "def fibonacci(n):\n", "--max-tokens", max_tokens, "--no-eos", "--no-wait")
    ok(cli(*submit, "--dev-account", REQUESTER, home=home))


def endpoint_published(system, port: int):
    url = f"ws://127.0.0.1:{port}"
    return lambda: system.registry.functions.endpointOf(address(VERIFIER)).call() == url


@contextlib.contextmanager
def serving(
    chain: ServedChain,
    tmp_path: Path,
    silence: str | None = None,
    drafter_silence: str | None = None,
    drafter=True,
    verifier_args: tuple = (),
    drafter_args: tuple = (),
):
    """A listening verifier and (`drafter`) a drafter on `chain`, with --link-silence `silence` when given (the
    drafter's: `drafter_silence` when given) and each node's extra `serve` arguments (e.g. a `--behavior`), stores in
    `tmp_path` (v.db, d.db): a dict of the processes ("verifier", "drafter") and the verifier's "port", once its
    endpoint is on chain. A test may replace a process in it; stopped processes are continued and every node still
    running is stopped at the end."""
    drafter_silence = drafter_silence or silence
    port = free_port()
    extra = (("--link-silence", silence) if silence else ()) + tuple(verifier_args)
    procs = {"port": port, "verifier": serve_verifier(chain.home, port, tmp_path / "v.db", *extra)}
    if drafter:
        extra = (("--link-silence", drafter_silence) if drafter_silence else ()) + tuple(drafter_args)
        procs["drafter"] = _serve(chain.home, "drafter", DRAFTER, "--store", tmp_path / "d.db", *extra)
    try:
        wait_for(endpoint_published(chain.system, port), 180, "the endpoint", [procs["verifier"]])
        yield procs
    finally:
        running = [node for node in (procs.get("drafter"), procs["verifier"]) if node and node.poll() is None]
        for node in running:
            os.killpg(node.pid, signal.SIGCONT)
        processes.stop_all(running)  # (in parallel: a node slow to stop costs its wait once, not once per node)


# ------------------------------------------------------------------ in-process party nodes on one anvil


@contextlib.contextmanager
def party_world(tmp: Path, ids: dict, drafters, verifiers, accounts: int = 20):
    """An anvil with `accounts` dev accounts, the protocol deployed, the drafters (dev account numbers, α* = 0.5)
    and verifiers registered with STAKE, and tests/test_roles.py's three referees: a `World` (tmp: `tmp`)."""
    with running_anvil(accounts=accounts) as node:
        w3 = connect(node.rpc_url)
        start = w3.eth.block_number + 1
        system = deploy_system(w3, w3.eth.accounts[0])
        deployment = Deployment.of_system(w3, system, node.rpc_url, start)
        world = World(w3, system, deployment, start, ids, tmp, list(w3.eth.accounts))
        reg = system.registry.functions
        for account in drafters:
            world.send(
                reg.registerDrafter(ids["draft"], ids["target"], WAD // 2, VOCAB), world.accounts[account], STAKE
            )
        for account in verifiers:
            world.send(reg.register(Role.Verifier, [ids["target"]], [VOCAB]), world.accounts[account], STAKE)
        for referee in world.referee_addresses:
            world.send(
                reg.register(Role.Referee, [ids["draft"], ids["target"]], [VOCAB, VOCAB]),
                referee,
                system.params.min_referee_stake,
            )
        yield world


def submit_party_job(world: World, drafter: str, verifier: str, prompt: str, max_tokens: int, transcript: bool) -> int:
    """Submit a no-EOS job (γ = 4, T = 1) from the world's requester to `drafter` and `verifier` (addresses),
    escrowing its maximum price; a transcript-mode job when `transcript`. Its job id."""
    request = dict(
        draftModel=world.ids["draft"],
        targetModel=world.ids["target"],
        drafter=drafter,
        verifier=verifier,
        gamma=4,
        temperature=WAD,
        topK=0,
        topP=WAD,
        maxTokens=max_tokens,
        eosToken=2**32 - 1,
        pricePerAcceptedToken=10**12,
        pricePerPass=3 * 10**12,
    )
    escrow = max_tokens * (request["pricePerAcceptedToken"] + request["pricePerPass"])
    submit = world.market.functions.submitTranscriptJob if transcript else world.market.functions.submitJob
    world.send(submit(request, prompt.encode()), world.requester, escrow)
    return world.market.functions.jobCount().call()
