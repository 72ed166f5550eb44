"""Liveness and faults of transcript jobs through the serving nodes (docs/protocol.md "Transcript mode (v2):
contracts", force moves; docs/node.md "Transcript link"): `verispec chain up` in a tmp home, real `serve drafter` and
`serve verifier --listen` processes (real models, real WebSockets on loopback, real SQLite), on anvil.

A silent party is a SIGSTOPped process (its sockets stay open, it answers nothing); a dead one is kill -9ed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from node import PROJECT_ROOT
from node.chain.anvil import free_port
from node.chain.transcript import read_settlement
from tests.test_cli import (
    DRAFTER,
    REQUESTER,
    VERIFIER,
    _serve,
    _stop,
    address,
    advance,
    chain_with_drafter_and_verifier,
    cli,
    ok,
)
from tests.test_transcript_nodes import _chain, _link_rows, _wait_for

SILENCE = "3"  # --link-silence of the nodes here (s)


def _verifier(home: Path, port: int, store: Path, *extra: str):
    return _serve(home, "verifier", VERIFIER, "--store", store, "--listen", f"127.0.0.1:{port}", *extra)


def _submit_in_background(home: Path, max_tokens: int) -> subprocess.Popen:
    env = dict(os.environ, VERISPEC_HOME=str(home), VERISPEC_RPC_WAIT="1")
    submit = ("submit", "def fibonacci(n):\n", "--max-tokens", str(max_tokens), "--no-eos", "--no-wait")
    return subprocess.Popen(
        [sys.executable, "-m", "node.cli", *submit, "--dev-account", str(REQUESTER)], env=env, cwd=PROJECT_ROOT
    )


@contextlib.contextmanager
def _nodes(tmp_path: Path, verifier_extra=(), drafter_extra=()):
    """A chain, a listening verifier and a drafter (both with --link-silence SILENCE): (home, w3, system, procs),
    where `procs` maps "verifier"/"drafter" to the running processes (a test may replace them). Stopped processes
    are continued and every node is stopped at the end."""
    with chain_with_drafter_and_verifier(tmp_path / "home") as home:
        w3, system = _chain(home)
        port = free_port()
        procs = {
            "verifier": _verifier(home, port, tmp_path / "v.db", "--link-silence", SILENCE, *verifier_extra),
            "drafter": _serve(
                home, "drafter", DRAFTER, "--store", tmp_path / "d.db", "--link-silence", SILENCE, *drafter_extra
            ),
        }
        procs["port"] = port
        try:
            url = f"ws://127.0.0.1:{port}"
            _wait_for(lambda: system.registry.functions.endpointOf(address(VERIFIER)).call() == url, 180, "endpoint")
            yield home, w3, system, procs
        finally:
            for name in ("drafter", "verifier"):
                node = procs[name]
                if node.poll() is None:
                    os.killpg(node.pid, signal.SIGCONT)
                    _stop(node)


def _stop_drafter_mid_job(tmp_path, w3, system, procs, max_tokens=256):
    """Submit a job, let the drafter take 2 cycles in, SIGSTOP it; returns (job id, the verifier's ForceMoved)."""
    submitter = _submit_in_background(tmp_path / "home", max_tokens)
    running = [procs["verifier"], procs["drafter"]]
    _wait_for(lambda: _link_rows(tmp_path / "d.db", "Verification") >= 2, 300, "2 cycles", running)
    os.killpg(procs["drafter"].pid, signal.SIGSTOP)  # the drafter goes silent mid-job (its socket stays open)
    assert submitter.wait(60) == 0
    job_id = system.market.functions.jobCount().call()
    moved = system.transcript.events.ForceMoved()
    _wait_for(lambda: moved.get_logs(from_block=0), 120, "the verifier's force move", [procs["verifier"]])
    (force,) = moved.get_logs(from_block=0)
    assert (force.args.forcer, force.args.silent) == (address(VERIFIER), address(DRAFTER))
    return job_id, force


def _status(home: Path, job_id: int) -> dict:
    return json.loads(ok(cli("status", job_id, "--json", home=home)))


def test_a_silent_drafter_mid_job_is_forced_by_the_verifier_node_and_slashed_at_the_claim(tmp_path):
    with _nodes(tmp_path) as (home, w3, system, procs):
        stake = system.registry.functions.stakeOf(address(DRAFTER)).call()
        job_id, force = _stop_drafter_mid_job(tmp_path, w3, system, procs)
        # the force posts the co-signed state and the verifier's own Verification after it, checked on chain
        assert 2 <= force.args.cycles <= _link_rows(tmp_path / "v.db", "Verification")
        advance(w3, system.market.functions.commitTimeout().call() + 1)
        settled = system.transcript.events.ForceSettled()
        _wait_for(lambda: settled.get_logs(from_block=0), 120, "the verifier's claim", [procs["verifier"]])
        (claim,) = settled.get_logs(from_block=0)
        assert claim.args.silent == address(DRAFTER) and claim.args.cycles == force.args.cycles
        status = _status(home, job_id)
        assert status["status"] == "Finished" and status["finish_reason"] == "DraftTimeout"
        assert system.registry.functions.stakeOf(address(DRAFTER)).call() < stake  # the silent party pays
        # the job ended at the co-signed state plus the verifier's checked Verification: the cycles the force posted
        assert len(status["cycles"]) == force.args.cycles
        assert status["tokens"] == read_settlement(w3, system.transcript, job_id).output(status["eos_token"], 256)
        assert len(status["tokens"]) < 256


def test_a_silent_drafter_that_comes_back_answers_the_force_from_its_store_and_the_job_completes(tmp_path):
    with _nodes(tmp_path) as (home, w3, system, procs):
        stake = system.registry.functions.stakeOf(address(DRAFTER)).call()
        job_id, force = _stop_drafter_mid_job(tmp_path, w3, system, procs)
        os.killpg(procs["drafter"].pid, signal.SIGCONT)  # back before the deadline
        answered = system.transcript.events.ForceAnsweredDraft()
        _wait_for(lambda: answered.get_logs(from_block=0), 120, "the drafter's answer", [procs["drafter"]])
        (answer,) = answered.get_logs(from_block=0)
        finished = system.market.events.JobFinished()
        running = [procs["verifier"], procs["drafter"]]

        def done():
            return bool(finished.get_logs(from_block=0, argument_filters={"jobId": job_id}))

        _wait_for(done, 300, "the settlement", running)
        # the answer is the Draft the drafter signed on the forced state, the one its store (and the link) holds
        assert answer.args.cycle == force.args.cycles
        status = _status(home, job_id)
        assert status["finish_reason"] == "Completed" and len(status["tokens"]) == 256
        assert status["tokens"] == read_settlement(w3, system.transcript, job_id).output(status["eos_token"], 256)
        assert not system.transcript.events.ForceSettled().get_logs(from_block=0)
        assert len(system.transcript.events.TranscriptSettled().get_logs(from_block=0)) == 1
        assert system.registry.functions.stakeOf(address(DRAFTER)).call() == stake  # nobody was slashed
        settled = read_settlement(w3, system.transcript, job_id)
        assert list(settled.cycles[answer.args.cycle].tokens) == list(answer.args.tokens)  # the same Draft settled
