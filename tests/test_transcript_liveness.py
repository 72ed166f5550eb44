"""Liveness and faults of transcript jobs through the serving nodes (docs/protocol.md "Transcript mode (v2):
contracts", force moves; docs/node.md "Transcript link"): one `verispec chain up` home for the module, reverted to its
registrations after each test or class (tests/transcript_nodes.py), real `serve drafter` and `serve verifier --listen`
processes (real models, real WebSockets on loopback, real SQLite), on anvil.

A silent party is a SIGSTOPped process (its sockets stay open, it answers nothing); a dead one is kill -9ed."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from web3.exceptions import ContractCustomError, ContractLogicError

from node import processes
from node.chain.transcript import read_settlement
from tests.test_cli import DRAFTER, REQUESTER, VERIFIER, _serve, _stop, address, advance, cli, ok
from tests.transcript_nodes import (  # noqa: F401  (served_chain, fresh_chain: fixtures)
    fresh_chain,
    job_logs,
    link_rows,
    reverted,
    serve_verifier,
    served_chain,
    serving,
    submit_no_wait,
    wait_for,
)

# `verispec serve` node processes (20-40 s a start on a busy machine): not in `make test-fast`
pytestmark = pytest.mark.node_processes

SILENCE = "3"  # --link-silence of the nodes here (s)
RECHECK = 1.0  # wall-clock seconds in which a node's loop looks at a job again (a few polls)
TOKENS = 64  # a job's maxTokens: ~16 cycles, so a node stopped after 2 or 3 of them is stopped mid-job


def _stop_drafter_mid_job(chain, tmp_path, procs):
    """Submit a job, let the drafter take 2 cycles in, SIGSTOP it; returns (job id, the verifier's ForceMoved)."""
    job_id = chain.system.market.functions.jobCount().call() + 1  # the next job: this test's
    submit_no_wait(chain.home, TOKENS)
    running = [procs["verifier"], procs["drafter"]]
    wait_for(lambda: link_rows(tmp_path / "d.db", "Verification", job_id) >= 2, 300, "2 cycles", running)
    os.killpg(procs["drafter"].pid, signal.SIGSTOP)  # the drafter goes silent mid-job (its socket stays open)
    assert chain.system.market.functions.jobCount().call() == job_id
    moved = chain.system.transcript.events.ForceMoved()
    wait_for(lambda: job_logs(moved, job_id), 120, "the verifier's force move", [procs["verifier"]])
    (force,) = job_logs(moved, job_id)
    assert (force.args.forcer, force.args.silent) == (address(VERIFIER), address(DRAFTER))
    return job_id, force


def _status(home: Path, job_id: int) -> dict:
    return json.loads(ok(cli("status", job_id, "--json", home=home)))


@pytest.fixture(scope="class")
def pair(served_chain, tmp_path_factory):
    """TestASilentDrafterMidJob's nodes: one reverted span of the module's chain, one pair of nodes (silence 3)."""
    with reverted(served_chain) as chain:
        tmp = tmp_path_factory.mktemp("silent-drafter")
        with serving(chain, tmp, SILENCE) as procs:
            yield chain, tmp, procs


class TestASilentDrafterMidJob:
    """Both tests on one pair of nodes (--link-silence 3 each) in one reverted span of the module's chain: the drafter
    that comes back first, then the one that stays silent and is slashed. Each follows only its own job."""

    def test_a_silent_drafter_that_comes_back_answers_the_force_from_its_store_and_the_job_completes(self, pair):
        chain, tmp, procs = pair
        home, w3, system = chain.home, chain.w3, chain.system
        stake = system.registry.functions.stakeOf(address(DRAFTER)).call()
        job_id, force = _stop_drafter_mid_job(chain, tmp, procs)
        os.killpg(procs["drafter"].pid, signal.SIGCONT)  # back before the deadline
        answered = system.transcript.events.ForceAnsweredDraft()
        wait_for(lambda: job_logs(answered, job_id), 120, "the drafter's answer", [procs["drafter"]])
        (answer,) = job_logs(answered, job_id)
        finished = system.market.events.JobFinished()
        wait_for(lambda: job_logs(finished, job_id), 300, "the settlement", [procs["verifier"], procs["drafter"]])
        # the answer is the Draft the drafter signed on the forced state, the one its store (and the link) holds
        assert answer.args.cycle == force.args.cycles
        status = _status(home, job_id)
        assert status["finish_reason"] == "Completed" and len(status["tokens"]) == TOKENS
        assert status["tokens"] == read_settlement(w3, system.transcript, job_id).output(status["eos_token"], TOKENS)
        assert not job_logs(system.transcript.events.ForceSettled(), job_id)
        # the drafter's on-chain answer reached the verifier node as a sign of life (ForceAnsweredDraft): it went on
        # over the link and was not forced again
        assert len(job_logs(system.transcript.events.ForceMoved(), job_id)) == 1
        assert len(job_logs(system.transcript.events.TranscriptSettled(), job_id)) == 1
        assert system.registry.functions.stakeOf(address(DRAFTER)).call() == stake  # nobody was slashed
        settled = read_settlement(w3, system.transcript, job_id)
        assert list(settled.cycles[answer.args.cycle].tokens) == list(answer.args.tokens)  # the same Draft settled

    def test_a_silent_drafter_mid_job_is_forced_by_the_verifier_node_and_slashed_at_the_claim(self, pair):
        chain, tmp, procs = pair
        home, w3, system = chain.home, chain.w3, chain.system
        stake = system.registry.functions.stakeOf(address(DRAFTER)).call()
        job_id, force = _stop_drafter_mid_job(chain, tmp, procs)
        # the force posts the co-signed state and the verifier's own Verification after it, checked on chain
        assert 2 <= force.args.cycles <= link_rows(tmp / "v.db", "Verification", job_id)
        advance(w3, system.market.functions.commitTimeout().call() + 1)
        settled = system.transcript.events.ForceSettled()
        wait_for(lambda: job_logs(settled, job_id), 120, "the verifier's claim", [procs["verifier"]])
        (claim,) = job_logs(settled, job_id)
        assert claim.args.silent == address(DRAFTER) and claim.args.cycles == force.args.cycles
        status = _status(home, job_id)
        assert status["status"] == "Finished" and status["finish_reason"] == "DraftTimeout"
        assert system.registry.functions.stakeOf(address(DRAFTER)).call() < stake  # the silent party pays
        # the job ended at the co-signed state plus the verifier's checked Verification: the cycles the force posted
        assert len(status["cycles"]) == force.args.cycles
        assert status["tokens"] == read_settlement(w3, system.transcript, job_id).output(status["eos_token"], TOKENS)
        assert len(status["tokens"]) < TOKENS


# ------------------------------------------------------------------ kill -9 of the verifier node


def _rows(path: Path) -> set[tuple]:
    from node.store import NodeStore

    return {(r.job_id, r.kind, r.position, r.signer, r.signature) for r in NodeStore(path).link_messages(1, "verifier")}


def test_kill_9_of_the_verifier_node_mid_job_resumes_from_its_store_and_nothing_is_paid_twice(fresh_chain, tmp_path):
    home, w3, system = fresh_chain.home, fresh_chain.w3, fresh_chain.system
    with serving(fresh_chain, tmp_path, "120") as procs:  # (the drafter waits out the restart)
        submit_no_wait(home, TOKENS)
        running = [procs["verifier"], procs["drafter"]]
        wait_for(lambda: link_rows(tmp_path / "v.db", "Verification") >= 3, 300, "3 cycles", running)
        os.killpg(procs["verifier"].pid, signal.SIGKILL)  # the verifier dies mid-job
        procs["verifier"].wait()
        before = _rows(tmp_path / "v.db")
        job_id = system.market.functions.jobCount().call()
        assert not system.market.events.JobFinished().get_logs(from_block=0)
        procs["verifier"] = serve_verifier(home, procs["port"], tmp_path / "v.db", "--link-silence", "120")
        finished = system.market.events.JobFinished()

        def done():
            return bool(finished.get_logs(from_block=0, argument_filters={"jobId": job_id}))

        wait_for(done, 300, "the settlement", [procs["verifier"], procs["drafter"]])
        status = _status(home, job_id)
        assert status["finish_reason"] == "Completed" and len(status["tokens"]) == TOKENS
        assert status["tokens"] == read_settlement(w3, system.transcript, job_id).output(status["eos_token"], TOKENS)
        # it resumed from its store: what it had signed before the kill is what the job settled on, once each
        after = _rows(tmp_path / "v.db")
        assert before <= after
        assert len({(r[1], r[2], r[3]) for r in after}) == len(after)  # one message per position and signer
        assert len(system.transcript.events.TranscriptSettled().get_logs(from_block=0)) == 1
        assert len(system.market.events.JobAccepted().get_logs(from_block=0)) == 1  # accepted once
        # (stopped first: a node would finalize the job itself)
        assert processes.stop_all([procs["drafter"], procs["verifier"]]) == [0, 0]
        advance(w3, system.market.functions.challengeWindow().call() + 1)
        paid = json.loads(ok(cli("finalize", job_id, "--dev-account", REQUESTER, "--json", home=home)))["payments"]
        accepted = sum(min(c["accepted"], len(c["output"])) for c in status["cycles"])
        assert paid["drafter"] == accepted * status["price_token_wei"]
        assert paid["verifier"] + paid["alpha_fee"] == len(status["cycles"]) * status["price_pass_wei"]
        assert paid["drafter"] + paid["verifier"] + paid["alpha_fee"] + paid["refund"] == status["escrow_wei"]
        assert len(system.market.events.JobFinalized().get_logs(from_block=0)) == 1


# ------------------------------------------------------------------ a wrong verification mid-job

WRONG_AT = 2  # the cycle whose Verification the lying verifier signs with a wrong accept count


def _lying_server(models, store: Path, key):
    """A LinkServer that verifies honestly, then signs, for cycle WRONG_AT, a Verification whose accept count the
    rule refutes (its state chains from it, so only the rule check catches it)."""
    from eth_account import Account

    from node.chain import transcript_messages as tm
    from node.link.verifier import LinkServer
    from node.store import NodeStore

    class Lying(LinkServer):
        def answer(self, served, v):
            if v.cycle != WRONG_AT:
                return v
            accepted = (v.accepted + 1) % (len(v.p) + 1)
            draft = served.ledger.drafts[v.cycle][0]
            return tm.Verification.build(draft, v.p, v.reveal, accepted, v.out_token)

    target, draft = models
    return Lying(Account.from_key(key), NodeStore(store), target, draft, ahead=False)


def test_a_wrong_verification_mid_job_is_forced_once_the_wrong_answer_reverts_and_the_verifier_is_slashed(
    fresh_chain, tmp_path
):
    """The verifier here is the test itself (a lying LinkServer in process, accepting on chain by hand) against a real
    `serve drafter`: the drafter refuses to counter-sign Verification WRONG_AT, forces at the last good state, and
    the verifier's answer from its store (the wrong Verification) reverts on chain; the drafter claims after the
    deadline, once: one forceMove, one claimForce, nothing after."""
    import torch

    from node import BUNDLED_DRAFT, BUNDLED_TARGET
    from node.chain import transcript as TX
    from node.chain.keys import dev_account
    from node.jobs.models import load_model
    from node.jobs.sessions import chain_head, verifier_seed
    from node.link.chain import transcript_spec
    from node.requester.checkpoints import load_tokenizer
    from tests.chainutil import decode_error, transact

    key = dev_account(VERIFIER).key
    torch.set_num_threads(1)
    models = tuple(load_model(m, torch.device("cpu"), torch.float32) for m in (BUNDLED_TARGET, BUNDLED_DRAFT))
    server = _lying_server(models, tmp_path / "v.db", key)
    home, w3, system = fresh_chain.home, fresh_chain.w3, fresh_chain.system
    host, port = server.run_in_thread("127.0.0.1", 0)
    transact(w3, system.registry.functions.setEndpoint(f"ws://{host}:{port}"), address(VERIFIER))
    drafter = _serve(home, "drafter", DRAFTER, "--store", tmp_path / "d.db", "--link-silence", SILENCE)
    try:
        submit_no_wait(home, 64)
        job_id = system.market.functions.jobCount().call()
        transact(w3, system.market.functions.acceptJob(job_id, chain_head(key, job_id, 64)), address(VERIFIER))
        spec = transcript_spec(w3, system, job_id, load_tokenizer(BUNDLED_TARGET))
        server.open_job(spec, verifier_seed(key, job_id))  # (the jobs dict is the server loop's; nothing runs yet)
        stake = system.registry.functions.stakeOf(address(VERIFIER)).call()
        moved = system.transcript.events.ForceMoved()
        wait_for(lambda: moved.get_logs(from_block=0), 180, "the drafter's force move", [drafter])
        (force,) = moved.get_logs(from_block=0)
        assert (force.args.forcer, force.args.silent, force.args.cycles) == (
            address(DRAFTER),
            address(VERIFIER),
            WRONG_AT,
        )
        # the refused Verification is in the drafter's store as evidence, and no Draft was signed after it
        assert link_rows(tmp_path / "d.db", "Verification") == WRONG_AT + 1
        assert link_rows(tmp_path / "d.db", "Draft") == WRONG_AT + 1
        # the verifier "answers" with what it signed: the chain re-runs the rule and refuses it
        ledger = server.jobs[job_id].ledger
        wrong, _ = ledger.verifications[WRONG_AT]
        answer = TX.verification_answer(TX.Cycle.of(ledger.drafts[WRONG_AT][0], wrong), wrong.reveal)
        with pytest.raises((ContractCustomError, ContractLogicError)) as info:
            system.transcript.functions.answerForce(job_id, answer).call({"from": address(VERIFIER)})
        assert decode_error(info.value.data, system.transcript, system.market)[0] == "RuleViolated"
        advance(w3, system.market.functions.verifyTimeout().call() + 1)
        settled = system.transcript.events.ForceSettled()
        wait_for(lambda: settled.get_logs(from_block=0), 120, "the drafter's claim", [drafter])
        time.sleep(3 * RECHECK)  # the drafter's loop runs on: it must not post anything more
        advance(w3, 5)
        time.sleep(2 * RECHECK)
        assert drafter.poll() is None
    finally:
        _stop(drafter)
    status = _status(home, job_id)
    assert status["status"] == "Finished" and status["finish_reason"] == "VerifyTimeout"
    assert system.registry.functions.stakeOf(address(VERIFIER)).call() < stake  # the lying verifier pays
    # settled at the last good state: the cycles before the wrong one, as both signed them
    assert len(status["cycles"]) == WRONG_AT
    assert status["tokens"] == [t for c in range(WRONG_AT) for t in ledger.outputs[c]]
    # the drafter's transactions to the settlement contract: one force, one claim
    sent = [
        tx
        for b in range(1, w3.eth.block_number + 1)
        for tx in w3.eth.get_block(b, full_transactions=True).transactions
        if tx["from"] == address(DRAFTER) and tx["to"] == system.transcript.address
    ]
    names = [system.transcript.decode_function_input(tx["input"])[0].fn_name for tx in sent]
    assert names == ["forceMove", "claimForce"], names
