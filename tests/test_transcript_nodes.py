"""Transcript jobs through the serving nodes and the CLI: one `verispec chain up` home for the module, reverted to its
registrations after each test or class (tests/transcript_nodes.py), real `serve drafter` and `serve verifier --listen`
processes (real models, real WebSockets on loopback, real SQLite), `submit` in its default mode (transcript), the job
settled and finalized on anvil."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from node import BUNDLED_TARGET, processes
from node.chain.anvil import free_port
from node.chain.transcript import read_settlement
from node.jobs import chaindata
from node.requester.checkpoints import load_tokenizer
from tests.test_cli import DRAFTER, REQUESTER, VERIFIER, _serve, _stop, address, advance, cli, cli_process, ok
from tests.transcript_nodes import (  # noqa: F401  (served_chain, fresh_chain: fixtures)
    endpoint_published,
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


def _log(home: Path, role: str, dev: int) -> str:
    path = home / f"{role}-{dev}.log"
    return path.read_text() if path.exists() else ""


def _submit(home: Path, *extra: str, max_tokens: int = 24):
    return cli_process(
        "submit",
        "def fibonacci(n):\n",
        "--max-tokens",
        str(max_tokens),
        "--dev-account",
        REQUESTER,
        "--accept-timeout",
        "120",
        "--timeout",
        "400",
        *extra,
        home=home,
        timeout=500,
    )


TOKENS = 64  # a job's maxTokens where it only has to outlast a node stopped after a few cycles (~16 cycles)


@pytest.fixture(scope="class")
def pair(served_chain, tmp_path_factory):
    """TestOnePairOfNodes's nodes: one reverted span of the module's chain, one pair of nodes for the class's tests."""
    with reverted(served_chain) as chain:
        tmp = tmp_path_factory.mktemp("one-pair")
        with serving(chain, tmp) as procs:
            yield chain, tmp, procs


class TestOnePairOfNodes:
    """Both tests on one listening verifier and one drafter in one reverted span of the module's chain: the drafter
    killed and restarted on its store first, then an honest job through the same pair (which stops them). Each
    follows only its own job."""

    def test_kill_9_of_the_drafter_mid_job_the_restarted_node_settles_it(self, pair):
        chain, tmp_path, procs = pair
        home, w3, system = chain.home, chain.w3, chain.system
        job_id = system.market.functions.jobCount().call() + 1  # the next job: this test's
        submit_no_wait(home, TOKENS)
        running = [procs["verifier"], procs["drafter"]]
        wait_for(lambda: link_rows(tmp_path / "d.db", "Verification", job_id) >= 3, 300, "3 cycles", running)
        os.killpg(procs["drafter"].pid, signal.SIGKILL)  # the drafter dies mid-job
        procs["drafter"].wait()
        assert system.market.functions.jobCount().call() == job_id
        assert not job_logs(system.transcript.events.TranscriptSettled(), job_id)
        procs["drafter"] = _serve(home, "drafter", DRAFTER, "--store", tmp_path / "d.db")
        finished = system.market.events.JobFinished()
        wait_for(lambda: job_logs(finished, job_id), 400, "the settlement", [procs["verifier"], procs["drafter"]])
        status = json.loads(ok(cli("status", job_id, "--json", home=home)))
        assert status["finish_reason"] == "Completed" and len(status["tokens"]) == TOKENS
        assert status["tokens"] == read_settlement(w3, system.transcript, job_id).output(status["eos_token"], TOKENS)
        assert len(job_logs(system.transcript.events.TranscriptSettled(), job_id)) == 1  # settled once

    def test_submit_runs_a_transcript_job_through_the_nodes_streamed_equals_settled_in_four_transactions(self, pair):
        chain, _, procs = pair
        home, w3, system = chain.home, chain.w3, chain.system
        first = w3.eth.block_number
        submitted = _submit(home)  # the default mode: transcript
        out = ok(submitted)
        job_id = system.market.functions.jobCount().call()
        assert chaindata.job_view(system.market, job_id)["transcript"]
        assert "streamed, equal to the" in submitted.stderr, submitted.stderr[-2000:]
        # (stopped first: a node would finalize the job itself, a fifth transaction)
        assert processes.stop_all([procs["drafter"], procs["verifier"]]) == [0, 0]
        # what settled on chain, rebuilt from the settle transaction's calldata alone, is what streamed
        status = json.loads(ok(cli("status", job_id, "--json", home=home)))
        assert status["status"] == "Finished" and status["finish_reason"] == "Completed"
        settled = read_settlement(w3, system.transcript, job_id).output(status["eos_token"], 24)
        assert status["tokens"] == settled and len(settled) >= 1
        text = load_tokenizer(BUNDLED_TARGET).decode(settled)
        assert out.startswith(text), (out[:300], text)
        assert [t for c in status["cycles"] for t in c["output"]] == settled
        # finalize pays as per-cycle mode does: the drafter its accepted proposals, the verifier its passes
        advance(w3, system.market.functions.challengeWindow().call() + 1)
        paid = json.loads(ok(cli("finalize", job_id, "--dev-account", REQUESTER, "--json", home=home)))["payments"]
        accepted = sum(min(c["accepted"], len(c["output"])) for c in status["cycles"])
        assert paid["drafter"] == accepted * status["price_token_wei"]
        assert paid["verifier"] + paid["alpha_fee"] == len(status["cycles"]) * status["price_pass_wei"]
        assert paid["drafter"] + paid["verifier"] + paid["alpha_fee"] + paid["refund"] == status["escrow_wei"]
        # the job's transactions: submit, accept, settle, finalize, whatever its length
        sent = [tx for b in range(first + 1, w3.eth.block_number + 1) for tx in w3.eth.get_block(b).transactions]
        assert len(sent) == 4, len(sent)


def test_a_verifier_without_listen_refuses_a_transcript_job_then_takes_it_after_a_restart_with_listen(
    fresh_chain, tmp_path
):
    home, system = fresh_chain.home, fresh_chain.system
    verifier = serve_verifier(home, None, tmp_path / "v.db")
    drafter = _serve(home, "drafter", DRAFTER, "--store", tmp_path / "d.db")
    try:
        wait_for(lambda: "serving on" in _log(home, "verifier", VERIFIER), 180, "the verifier", [verifier])
        ok(_submit(home, "--no-wait", max_tokens=8))
        job_id = system.market.functions.jobCount().call()
        wait_for(lambda: "only with --listen" in _log(home, "verifier", VERIFIER), 60, "the refusal", [verifier])
        assert not system.market.events.JobAccepted().get_logs(from_block=0)
        assert _stop(verifier) == 0
        verifier = serve_verifier(home, free_port(), tmp_path / "v.db")  # the same store, now listening

        def finished():
            logs = system.market.events.JobFinished().get_logs(from_block=0, argument_filters={"jobId": job_id})
            return bool(logs)

        wait_for(finished, 300, "the job to settle", [verifier, drafter])
    finally:
        processes.stop_all([node for node in (drafter, verifier) if node.poll() is None])
    status = json.loads(ok(cli("status", job_id, "--json", home=home)))
    assert status["finish_reason"] == "Completed" and 1 <= len(status["tokens"]) <= 8


def test_a_silent_verifier_mid_job_is_forced_by_the_drafter_node_and_slashed_at_the_claim(fresh_chain, tmp_path):
    home, w3, system = fresh_chain.home, fresh_chain.w3, fresh_chain.system
    with serving(fresh_chain, tmp_path, drafter_silence="3") as procs:
        verifier, drafter = procs["verifier"], procs["drafter"]
        stake = system.registry.functions.stakeOf(address(VERIFIER)).call()
        submit_no_wait(home, TOKENS)
        wait_for(lambda: link_rows(tmp_path / "v.db", "Verification") >= 2, 300, "2 cycles", [verifier, drafter])
        os.killpg(verifier.pid, signal.SIGSTOP)  # the verifier goes silent mid-job (its socket stays open)
        job_id = system.market.functions.jobCount().call()
        moved = system.transcript.events.ForceMoved()
        wait_for(lambda: moved.get_logs(from_block=0), 120, "the drafter's force move", [drafter])
        (force,) = moved.get_logs(from_block=0)
        assert (force.args.forcer, force.args.silent) == (address(DRAFTER), address(VERIFIER))
        assert force.args.cycles >= 2
        advance(w3, system.market.functions.verifyTimeout().call() + 1)
        settled = system.transcript.events.ForceSettled()
        wait_for(lambda: settled.get_logs(from_block=0), 120, "the drafter's claim", [drafter])
    status = json.loads(ok(cli("status", job_id, "--json", home=home)))
    assert status["status"] == "Finished" and status["finish_reason"] == "VerifyTimeout"
    assert system.registry.functions.stakeOf(address(VERIFIER)).call() < stake  # the silent party pays
    # the job settled at the co-signed state: the cycles the force posted, rebuilt from its calldata
    assert len(status["cycles"]) == force.args.cycles
    assert status["tokens"] == read_settlement(w3, system.transcript, job_id).output(status["eos_token"], TOKENS)


class _Stop(Exception):
    """Raised from the drafter's cycle callback: the drafter stops as if it died after taking cycle `STOP_AT`."""


STOP_AT = 3


def test_the_verifier_node_answers_a_force_from_its_store(fresh_chain, tmp_path):
    """The drafter here is the test itself (node/link's DrafterLink, in process) against a real `serve verifier
    --listen` process; it stops after cycle 3, then forces with Draft 3 as if Verification 3 never reached it."""
    import asyncio

    import torch
    from eth_account import Account

    from node import BUNDLED_DRAFT
    from node.chain import transcript as TX
    from node.chain.keys import dev_account
    from node.jobs.models import load_model
    from node.link.chain import endpoint_of, transcript_spec
    from node.link.drafter import DrafterLink
    from node.store import NodeStore
    from tests.chainutil import transact

    home, w3, system = fresh_chain.home, fresh_chain.w3, fresh_chain.system
    with serving(fresh_chain, tmp_path, drafter=False) as procs:
        verifier, url = procs["verifier"], f"ws://127.0.0.1:{procs['port']}"
        ok(_submit(home, "--no-wait", "--no-eos", max_tokens=32))
        job_id = system.market.functions.jobCount().call()
        accepted = system.market.events.JobAccepted()
        wait_for(lambda: accepted.get_logs(from_block=0), 120, "the acceptance", [verifier])
        spec = transcript_spec(w3, system, job_id, load_tokenizer(BUNDLED_TARGET))
        draft_model = load_model(BUNDLED_DRAFT, torch.device("cpu"), torch.float32)
        key = dev_account(DRAFTER).key
        link = DrafterLink(Account.from_key(key), NodeStore(tmp_path / "d.db"), draft_model, spec, url)

        def stop(cycle, tokens):
            if cycle == STOP_AT:
                raise _Stop

        link.on_cycle = stop
        with pytest.raises(_Stop):
            asyncio.run(link.run())
        ledger = link.ledger
        assert STOP_AT in ledger.verifications and not ledger.done
        k = STOP_AT
        ev = TX.evidence(*ledger.drafts[k], *ledger.verifications[k - 1])
        cycles = [TX.Cycle.of(ledger.drafts[c][0], ledger.verifications[c][0]) for c in range(k)]
        transact(w3, TX.force_call(system.transcript, job_id, ev, cycles), address(DRAFTER))
        advance(w3, 3)  # a later block: the node's periodic recheck of the job
        answered = system.transcript.events.ForceAnsweredVerification()
        wait_for(lambda: answered.get_logs(from_block=0), 120, "the verifier's answer", [verifier])
        (answer,) = answered.get_logs(from_block=0)
        v = ledger.verifications[k][0]  # what the verifier had signed and stored for Draft 3
        assert (answer.args.cycle, answer.args.accepted, answer.args.outToken) == (k, v.accepted, v.out_token)
        assert list(answer.args.p) == list(v.p) and bytes(answer.args.reveal) == v.reveal
        assert system.transcript.functions.forceOf(job_id).call()[-2] == "0x" + "00" * 20  # no force pending
        assert endpoint_of(system.registry, address(VERIFIER)) == url
        # a second force, with a Draft 4 that never went over the link and proposes a token outside the
        # vocabulary: the verifier reads it from the calldata, verifies it as per cycle and answers on chain
        from node import protocol as P
        from node.chain import transcript_messages as tm

        gamma = spec.job.gamma
        tokens = [spec.vocab_size + 7] + list(range(1, gamma))
        d4 = tm.Draft.build(job_id, k + 1, v.state, tokens, [P.WAD // 2] * gamma, ledger.salt)
        sig4 = tm.sign(spec.domain, d4, key)
        ev = TX.evidence(d4, sig4, *ledger.verifications[k])
        cycles.append(TX.Cycle.of(ledger.drafts[k][0], v))
        transact(w3, TX.force_call(system.transcript, job_id, ev, cycles), address(DRAFTER))
        advance(w3, 3)
        wait_for(lambda: len(answered.get_logs(from_block=0)) == 2, 120, "the second answer", [verifier])
        second = answered.get_logs(from_block=0)[1]
        assert second.args.cycle == k + 1 and second.args.accepted == 0 and second.args.p[0] == 0
        assert second.args.outToken < spec.vocab_size
        # the drafter goes on over the link (Draft 4 kept as sent; the welcome brings Verification 4), stops
        # after cycle 5, then forces with a second, different Draft 5: the verifier, which verified the first,
        # forces back at the later state (the first Draft 5 and its Verification), and the drafter is the
        # party that must answer
        ledger.save(d4, sig4, "drafter", "sent")
        link = DrafterLink(Account.from_key(key), NodeStore(tmp_path / "d.db"), draft_model, spec, url)

        def stop_after_5(cycle, tokens):
            if cycle == k + 2:
                raise _Stop

        link.on_cycle = stop_after_5
        with pytest.raises(_Stop):
            asyncio.run(link.run())
        ledger = link.ledger
        v4, d5 = ledger.verifications[k + 1][0], ledger.drafts[k + 2][0]
        other = [t + 1 for t in d5.tokens]
        d5x = tm.Draft.build(job_id, k + 2, v4.state, other, list(d5.q), ledger.salt)
        ev = TX.evidence(d5x, tm.sign(spec.domain, d5x, key), *ledger.verifications[k + 1])
        cycles.append(TX.Cycle.of(d4, v4))
        transact(w3, TX.force_call(system.transcript, job_id, ev, cycles), address(DRAFTER))
        advance(w3, 3)
        moved = system.transcript.events.ForceMoved()
        wait_for(
            lambda: [e for e in moved.get_logs(from_block=0) if e.args.forcer == address(VERIFIER)],
            120,
            "the verifier's force back",
            [verifier],
        )
        (back,) = [e for e in moved.get_logs(from_block=0) if e.args.forcer == address(VERIFIER)]
        assert back.args.silent == address(DRAFTER) and back.args.cycles == k + 3
        assert system.transcript.functions.forceOf(job_id).call()[-2] == address(DRAFTER)
