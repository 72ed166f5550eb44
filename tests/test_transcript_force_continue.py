"""A transcript job never ends with funds stuck after a force move (docs/protocol.md "Transcript mode (v2):
contracts", force moves and the attested state), on anvil with real transactions.

Each test is an attack or a silence that left the drafter's pay and the requester's escrow stuck before the chain
attested the states it checks: a verifier that answers a force on chain (so signs no state) and goes silent, an
answer that ends the job with no Settlement signed, both parties silent after the acceptance."""

from __future__ import annotations

import pytest

from chainutil import (  # noqa: F401  (env is a fixture)
    SALT,
    STATUS_FINALIZED,
    STATUS_FINISHED,
    STATUS_RUNNING,
    advance,
    env,
    events,
    job_view,
    now,
    transact,
)
from node import protocol as P
from node.chain import transcript as TX
from test_transcript_settlement import (
    DRAFTER_KEY,
    GAMMA,
    MAX_TOKENS,
    VERIFIER_KEY,
    Transcript,
    _evidence_of_verifier,
    _force_by_drafter,
    _revert,
    finalize,
    owed,
    transcript_job,
)

PRICE_ACCEPTED, PRICE_PASS = 10**12, 3 * 10**12  # chainutil's job_request prices


def _force_on_attested(env, t, k):
    """The drafter's force at S(k-1) with no Verification of k-1: only its Draft k and the k cycles (the state the
    chain attested when the verifier answered its last force on chain)."""
    ev = TX.evidence(t.drafts[k], t.sign(t.drafts[k], DRAFTER_KEY))
    return env.system.transcript.functions.forceMove(t.job_id, ev, TX.pack_cycles(t.cycles[:k], GAMMA))


def _answer(env, t, k):
    ts = env.system.transcript.functions
    return transact(
        env.w3, ts.answerForce(t.job_id, TX.verification_answer(t.cycles[k], t.reveals[k])), env.actors.verifier
    )


def _stakes(env):
    return [env.registry.functions.stakeOf(x).call() for x in (env.actors.drafter, env.actors.verifier)]


def _attested(env, job_id):
    """The job's latest attested state (StateAttested): (state, cycles, ended)."""
    logs = env.system.transcript.events.StateAttested().get_logs(from_block=0, argument_filters={"jobId": job_id})
    return bytes(logs[-1].args.state), logs[-1].args.cycles, logs[-1].args.ended


def test_a_verifier_that_answers_on_chain_then_goes_silent_is_forced_again_and_slashed(chain, env):
    """The verifier signed a wrong Verification of cycle 1; the drafter refused it and forced with its Draft 1; the
    verifier answered with the right one on chain (no signature of S(1)) and went silent. Before: the drafter had
    no verifier-signed S(1), so no force at 2 could be posted and the job could never end."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a, p = env.actors, env.params
    ts = env.system.transcript.functions
    transact(env.w3, _force_by_drafter(env, t, 1), a.drafter)
    receipt = _answer(env, t, 1)
    (att,) = events(env.system.transcript, receipt, "StateAttested")
    assert (att.args.cycles, bytes(att.args.state), att.args.ended) == (2, t.verifications[1].state, False)
    assert _attested(env, job_id) == (t.verifications[1].state, 2, False)
    # the drafter's Draft 2 is on the attested S(1): it forces with it and no Verification of cycle 1
    stakes = _stakes(env)
    receipt = transact(env.w3, _force_on_attested(env, t, 2), a.drafter)
    (moved,) = events(env.system.transcript, receipt, "ForceMoved")
    assert (moved.args.silent, moved.args.cycles) == (a.verifier, 2)
    advance(env.w3, p.verify_timeout + 1)
    transact(env.w3, ts.claimForce(job_id), a.outsider)
    assert _stakes(env) == [stakes[0], stakes[1] - p.timeout_slash]  # the silent verifier pays, as a v1 timeout
    view = job_view(env, job_id)
    assert (view["cycle"], view["emitted"], view["status"]) == (2, 8, STATUS_FINISHED)
    assert ts.settled(job_id).call()[0] == P.cycles_root(TX.cycle_leaves(t.cycles[:2]))
    read = TX.read_settlement(env.w3, env.system.transcript, job_id)
    assert read.cycles == t.cycles[:2] and read.reveals() == t.reveals[:2]
    (drafter_pay, verifier_pay, refund, _), _ = finalize(env, job_id)
    # the drafter is paid for both cycles, the answered one included; the requester gets the rest, the slash is burnt
    assert drafter_pay == (4 + 2) * PRICE_ACCEPTED and verifier_pay == 2 * PRICE_PASS
    assert refund == view["escrow"] - drafter_pay - verifier_pay and owed(env, a.requester) == refund


def test_only_the_attested_state_stands_in_for_the_verifiers_signature(chain, env):
    """A force with no Verification of k-1 must post exactly the attested cycles: not a state the chain never
    checked, not another record of the attested count."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a = env.actors
    _revert(env, _force_on_attested(env, t, 1), a.drafter, "NotAttested")  # nothing attested yet
    transact(env.w3, _force_by_drafter(env, t, 1), a.drafter)
    _answer(env, t, 1)
    _revert(env, _force_on_attested(env, t, 1), a.drafter, "ForceAlreadyAnswered")
    # cycle 1 posted with one proposal's p changed: the same count of cycles, a state nobody attested
    c1 = t.cycles[1]
    other = TX.Cycle(c1.tokens, c1.q, (c1.p[0] ^ 1, *c1.p[1:]), c1.accepted, c1.out_token)
    forged = Transcript(env, job_id)
    forged.cycles[1] = other
    _revert(env, _force_on_attested(env, forged, 2), a.drafter, "StateMismatch")  # Draft 2 is on the real S(1)
    # and the verifier's own force builds on the attested state too (its pending Verification of cycle 2 ends it)
    ev = TX.evidence(t.drafts[2], t.sign(t.drafts[2], DRAFTER_KEY), None, b"", t.verifications[2],
                     t.sign(t.verifications[2], VERIFIER_KEY))  # fmt: skip
    ts = env.system.transcript.functions
    receipt = transact(env.w3, ts.forceMove(job_id, ev, TX.pack_cycles(t.cycles[:2], GAMMA)), a.verifier)
    assert events(env.system.transcript, receipt, "ForceCompleted")[0].args.cycles == 3


def test_an_answer_that_ends_the_job_completes_it_with_no_settlement_signed(chain, env):
    """The verifier withholds its last Verification, answers the drafter's force with it on chain (it ends the job)
    and refuses to sign the Settlement. Before: the job stayed Running for ever. Now anyone completes it."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a = env.actors
    ts = env.system.transcript.functions
    stakes = _stakes(env)
    transact(env.w3, _force_by_drafter(env, t, 2), a.drafter)
    _answer(env, t, 2)
    assert _attested(env, job_id) == (t.state, 3, True)
    assert job_view(env, job_id)["status"] == STATUS_RUNNING
    _revert(env, ts.completeAnswered(job_id, SALT, TX.pack_cycles(t.cycles[:2], GAMMA)), a.outsider, "NotAttested")
    c2 = t.cycles[2]
    wrong = [*t.cycles[:2], TX.Cycle(c2.tokens, c2.q, c2.p, c2.accepted, c2.out_token + 1)]
    _revert(env, ts.completeAnswered(job_id, SALT, TX.pack_cycles(wrong, GAMMA)), a.outsider, "StateMismatch")
    _revert(env, _force_on_attested(env, t, 2), a.drafter, "ForceAlreadyAnswered")
    # the requester (anyone) posts the cycles, the ones on chain already: the force's and the answered one
    receipt = transact(env.w3, ts.completeAnswered(job_id, SALT, TX.pack_cycles(t.cycles, GAMMA)), a.requester)
    assert events(env.system.transcript, receipt, "ForceCompleted")[0].args.cycles == 3
    view = job_view(env, job_id)
    assert (view["cycle"], view["emitted"], view["status"]) == (3, MAX_TOKENS, STATUS_FINISHED)
    assert _stakes(env) == stakes
    read = TX.read_settlement(env.w3, env.system.transcript, job_id)  # rebuilt from chain data alone
    assert read.cycles == t.cycles and read.salt == SALT and read.reveals() == t.reveals[:3]
    transact(env.w3, TX.pull_call(env.system.transcript, job_id, t.cycles, 2), a.outsider)  # challengeable as settled
    (drafter_pay, verifier_pay, _, fees), _ = finalize(env, job_id)
    # paid as a settled job of the same cycles: every accepted token, every pass (less the α fee)
    assert drafter_pay == sum((4, 2, 3)) * PRICE_ACCEPTED and verifier_pay + sum(fees) == 3 * PRICE_PASS


def test_a_stale_force_after_an_ended_answer_cannot_undo_the_end(chain, env):
    """The verifier's answer ended the job; it then forces the drafter at an older co-signed state (its own pending
    Verification of cycle 1). That force is answered (the drafter's stored Draft 2), but the attested end stands:
    the job still completes with every cycle."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a = env.actors
    ts = env.system.transcript.functions
    transact(env.w3, _force_by_drafter(env, t, 2), a.drafter)
    _answer(env, t, 2)
    receipt = transact(
        env.w3, ts.forceMove(job_id, _evidence_of_verifier(t, 1), TX.pack_cycles(t.cycles[:1], GAMMA)), a.verifier
    )
    assert events(env.system.transcript, receipt, "ForceMoved")[0].args.cycles == 2
    assert _attested(env, job_id) == (t.state, 3, True)  # not replaced by the older S(1)
    transact(env.w3, ts.answerForce(job_id, TX.draft_answer(t.drafts[2], t.sign(t.drafts[2], DRAFTER_KEY))), a.drafter)
    transact(env.w3, ts.completeAnswered(job_id, SALT, TX.pack_cycles(t.cycles, GAMMA)), a.drafter)
    view = job_view(env, job_id)
    assert (view["cycle"], view["emitted"], view["status"]) == (3, MAX_TOKENS, STATUS_FINISHED)


def test_a_verifier_that_answers_every_force_on_chain_still_pays_out_the_whole_job(chain, env):
    """Repeated forces: a verifier that never answers over the link, only on chain, turns the job into per-cycle
    mode from the attested states (docs/protocol.md, "Transcript mode (v2): contracts", force moves: "continuing it in
    per-cycle mode from the posted state is allowed and recommended")."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a = env.actors
    ts = env.system.transcript.functions
    transact(env.w3, _force_by_drafter(env, t, 0), a.drafter)
    for k in (0, 1):
        _answer(env, t, k)
        transact(env.w3, _force_on_attested(env, t, k + 1), a.drafter)
    _answer(env, t, 2)
    transact(env.w3, ts.completeAnswered(job_id, SALT, TX.pack_cycles(t.cycles, GAMMA)), a.drafter)
    view = job_view(env, job_id)
    assert (view["cycle"], view["emitted"], view["status"]) == (3, MAX_TOKENS, STATUS_FINISHED)
    (drafter_pay, _, _, _), _ = finalize(env, job_id)
    assert drafter_pay == 9 * PRICE_ACCEPTED


def test_a_drafter_that_answered_the_verifiers_force_can_force_it_back_without_its_verification(chain, env):
    """The verifier forced with its own Verification of cycle 1 (which it never sent over the link), the drafter
    answered with Draft 2, and the verifier went silent: the drafter forces at 2 on the state the chain checked."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a, p = env.actors, env.params
    ts = env.system.transcript.functions
    transact(env.w3, ts.forceMove(job_id, _evidence_of_verifier(t, 1), TX.pack_cycles(t.cycles[:1], GAMMA)), a.verifier)
    assert _attested(env, job_id) == (t.verifications[1].state, 2, False)
    answer = TX.draft_answer(t.drafts[2], t.sign(t.drafts[2], DRAFTER_KEY))
    transact(env.w3, ts.answerForce(job_id, answer), a.drafter)
    stakes = _stakes(env)
    transact(env.w3, _force_on_attested(env, t, 2), a.drafter)
    advance(env.w3, p.verify_timeout + 1)
    transact(env.w3, ts.claimForce(job_id), a.outsider)
    assert _stakes(env) == [stakes[0], stakes[1] - p.timeout_slash]
    assert job_view(env, job_id)["cycle"] == 2


def test_both_parties_silent_after_the_acceptance_the_requester_gets_its_escrow_back(chain, env):
    """Nobody drafts, nobody forces. Before: claimTimeout refuses a running transcript job, so the escrow was stuck
    for ever. Now the job ends at its idle deadline (v1's longest job) with nothing paid and nobody slashed."""
    job_id = transcript_job(env)
    a, p = env.actors, env.params
    ts = env.system.transcript.functions
    stakes = _stakes(env)
    deadline = ts.idleDeadline(job_id).call()
    assert deadline == job_view(env, job_id)["deadline"] + MAX_TOKENS * (p.commit_timeout + p.verify_timeout)
    _revert(env, ts.claimIdle(job_id), a.requester, "NotIdle")
    advance(env.w3, deadline - now(env.w3) + 1)
    receipt = transact(env.w3, ts.claimIdle(job_id), a.requester)
    assert events(env.system.transcript, receipt, "JobIdled")
    view = job_view(env, job_id)
    assert view["status"] == STATUS_FINALIZED and view["cycle"] == 0
    assert owed(env, a.requester) == view["escrow"]
    assert _stakes(env) == stakes
    _revert(env, ts.claimIdle(job_id), a.requester, "NotTranscriptJob")


def test_the_idle_deadline_waits_for_a_pending_force_and_after_an_answer(chain, env):
    """An idle claim never cuts a job that is being forced: not while a force is pending, and not sooner than a
    phase pair after an answer (the forcer's time to force again)."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a, p = env.actors, env.params
    ts = env.system.transcript.functions
    advance(env.w3, ts.idleDeadline(job_id).call() - now(env.w3) - 10)  # just before the idle deadline
    transact(env.w3, _force_by_drafter(env, t, 1), a.drafter)
    advance(env.w3, 20)
    _revert(env, ts.claimIdle(job_id), a.requester, "NotIdle")  # a force is pending
    _answer(env, t, 1)
    assert ts.idleDeadline(job_id).call() >= now(env.w3) + p.commit_timeout + p.verify_timeout - 1
    _revert(env, ts.claimIdle(job_id), a.requester, "NotIdle")
    transact(env.w3, _force_on_attested(env, t, 2), a.drafter)
    advance(env.w3, p.verify_timeout + 1)
    transact(env.w3, ts.claimForce(job_id), a.outsider)
    assert job_view(env, job_id)["cycle"] == 2


def test_a_verifier_forces_again_with_the_draft_the_drafter_answered_on_chain(chain, env):
    """The drafter answered the verifier's force with its Draft on chain only and went silent: the verifier rebuilds
    that Draft from ForceAnsweredDraft (the node's reader, `answered_draft`) and forces past the answered level."""
    import logging
    from types import SimpleNamespace

    from node.roles.transcript_answers import answered_draft

    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a = env.actors
    ts = env.system.transcript.functions
    transact(env.w3, ts.forceMove(job_id, _evidence_of_verifier(t, 0), TX.pack_cycles([], GAMMA)), a.verifier)
    answer = TX.draft_answer(t.drafts[1], t.sign(t.drafts[1], DRAFTER_KEY))
    transact(env.w3, ts.answerForce(job_id, answer), a.drafter)
    node = SimpleNamespace(system=env.system, start_block=0, log=logging.getLogger("test"))
    assert answered_draft(node, job_id, 2) is None
    draft, sig = answered_draft(node, job_id, 1)
    assert draft == t.drafts[1]
    # the same level again is refused; one cycle further (its Verification of the answered Draft) is a new move
    again = TX.evidence(t.drafts[0], t.sign(t.drafts[0], DRAFTER_KEY), None, b"", t.verifications[0],
                        t.sign(t.verifications[0], VERIFIER_KEY))  # fmt: skip
    _revert(env, ts.forceMove(job_id, again, TX.pack_cycles([], GAMMA)), a.verifier, "ForceAlreadyAnswered")
    ev = TX.evidence(draft, sig, None, b"", t.verifications[1], t.sign(t.verifications[1], VERIFIER_KEY))
    receipt = transact(env.w3, ts.forceMove(job_id, ev, TX.pack_cycles(t.cycles[:1], GAMMA)), a.verifier)
    (moved,) = events(env.system.transcript, receipt, "ForceMoved")
    assert (moved.args.silent, moved.args.cycles) == (a.drafter, 2)


def _drafter_ledger(env, t, tmp_path, cycles, draft2=None):
    """The drafter node's ledger of `t` (node/link/job.py, a real SQLite store): every Draft, the Verifications of
    `cycles` cycles taken in over the link (signed)."""
    from chainutil import EOS, SEED, VOCAB
    from node.decoding.messages import DecodingJob
    from node.link.job import Ledger, TranscriptJob
    from node.store import NodeStore

    job = DecodingJob(t.job_id, (1,), MAX_TOKENS, GAMMA, eos_token_id=EOS)
    a = env.actors
    spec = TranscriptJob(job, t.domain, a.drafter, a.verifier, P.hash_chain(SEED, MAX_TOKENS), VOCAB)
    ledger = Ledger(spec, NodeStore(tmp_path / "d.db"), "drafter")
    for c, d in enumerate(t.drafts):
        d = draft2 if c == 2 and draft2 is not None else d
        ledger.drafts[c] = (d, t.sign(d, DRAFTER_KEY))
    for c in range(cycles):
        ledger.verifications[c] = (t.verifications[c], t.sign(t.verifications[c], VERIFIER_KEY))
        ledger.outputs[c] = ledger.checked_output(c, t.verifications[c])
    return ledger


def _drafter_node(env):
    import logging
    from types import SimpleNamespace

    def send(key, call):
        return transact(env.w3, call, env.actors.drafter)

    return SimpleNamespace(system=env.system, start_block=0, log=logging.getLogger("drafter"), transact=send)


def test_the_drafter_node_takes_an_ending_answer_in_and_completes_the_job(chain, env, tmp_path):
    """The node side of an ended answer: `take_answers` rebuilds the Verification of cycle 2 from the event on the
    ledger's own Draft and state, checks it by the rule, and `complete_answered` posts every cycle."""
    from node.roles.transcript_answers import complete_answered, ended_by_answer, is_attested, take_answers

    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    transact(env.w3, _force_by_drafter(env, t, 2), env.actors.drafter)
    _answer(env, t, 2)
    node, ledger = _drafter_node(env), _drafter_ledger(env, t, tmp_path, 2)
    assert take_answers(node, ledger) == 1 and take_answers(node, ledger) == 0  # once
    assert is_attested(ledger, 2) and ledger.verifications[2][0] == t.verifications[2] and ledger.done
    assert ended_by_answer(ledger)
    complete_answered(node, ledger)
    view = job_view(env, job_id)
    assert (view["cycle"], view["emitted"], view["status"]) == (3, MAX_TOKENS, STATUS_FINISHED)


def test_the_drafter_node_refuses_an_answer_that_its_own_draft_does_not_bear_out(chain, env, tmp_path):
    """Hostile input: an answer read from chain is checked against the node's own Draft and rule, not trusted. A
    ledger whose Draft 2 differs (its first proposal outside the vocabulary, so the rule accepts none of it) finds
    the answered accept count (3) wrong for it and takes nothing in."""
    from chainutil import VOCAB
    from node.roles.transcript_answers import take_answers

    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    transact(env.w3, _force_by_drafter(env, t, 2), env.actors.drafter)
    _answer(env, t, 2)
    d = t.drafts[2]
    from node.chain import transcript_messages as T

    other = T.Draft.build(job_id, 2, d.prev_state, (VOCAB, *d.tokens[1:]), d.q, d.salt)
    ledger = _drafter_ledger(env, t, tmp_path, 2, draft2=other)
    assert take_answers(_drafter_node(env), ledger) == 0
    assert 2 not in ledger.outputs and 2 not in ledger.verifications


# ---------------------------------------------------------------- the serving nodes (real processes, models, link)


@pytest.mark.node_processes
def test_a_signwrong_verifier_node_is_forced_again_by_the_drafter_node_on_the_attested_state(tmp_path):
    """`serve verifier --behavior signwrong`: it signs a wrong Verification, the honest drafter node refuses it and
    forces, the verifier answers on chain by the rule and goes silent. The drafter node takes the answer in from
    ForceAnsweredVerification, drafts the next cycle on the attested state, forces again and claims: the verifier is
    slashed and the drafter paid for every cycle up to the answered one (before: it waited for ever, escrow stuck)."""
    import inspect
    import os
    import signal
    import time

    from node.chain.anvil import free_port
    from node.roles.base import NodeBase
    from node.roles.transcript_jobs import RECHECK_S
    from tests.test_cli import DRAFTER, VERIFIER, _serve, _stop, address, chain_with_drafter_and_verifier
    from tests.test_cli import advance as advance_home
    from tests.test_transcript_liveness import SILENCE, _status
    from tests.transcript_nodes import chain_of, serve_verifier, submit_no_wait, wait_for

    with chain_with_drafter_and_verifier(tmp_path / "home") as home:
        w3, system = chain_of(home)
        port = free_port()
        procs = [
            serve_verifier(home, port, tmp_path / "v.db", "--link-silence", SILENCE, "--behavior", "signwrong"),
            _serve(home, "drafter", DRAFTER, "--store", tmp_path / "d.db", "--link-silence", SILENCE),
        ]
        try:
            url = f"ws://127.0.0.1:{port}"
            wait_for(lambda: system.registry.functions.endpointOf(address(VERIFIER)).call() == url, 180, "endpoint")
            stake = system.registry.functions.stakeOf(address(VERIFIER)).call()
            submit_no_wait(home, 64)
            moved = system.transcript.events.ForceMoved()
            wait_for(lambda: moved.get_logs(from_block=0), 300, "the drafter's force", procs)
            # the verifier held (if it has not answered yet) until the drafter node has looked at its pending force
            # and left it to the deadline (a block mined as a chain with a block time would, no time travel, lets its
            # periodic look come): from then on only the answer's event can make it go on before that deadline
            os.killpg(procs[0].pid, signal.SIGSTOP)
            time.sleep(RECHECK_S + 0.5)
            w3.provider.make_request("evm_mine", [])
            time.sleep(1.5 * inspect.signature(NodeBase).parameters["recheck_interval"].default)  # its recheck
            os.killpg(procs[0].pid, signal.SIGCONT)
            answered = system.transcript.events.ForceAnsweredVerification()
            wait_for(lambda: answered.get_logs(from_block=0), 300, "the verifier's on-chain answer", procs)
            (answer,) = answered.get_logs(from_block=0)
            job_id, k = answer.args.jobId, answer.args.cycle
            verify_timeout = system.market.functions.verifyTimeout().call()
            # no clock moved: the drafter node's poller delivers the answer (ForceAnsweredVerification) as it is mined,
            # and the node goes on at once, not at its force's deadline (verifyTimeout, minutes away)
            wait_for(lambda: len(moved.get_logs(from_block=0)) == 2, 180, "the drafter's second force", procs)
            first, second = moved.get_logs(from_block=0)
            assert (first.args.forcer, first.args.silent, first.args.cycles) == (address(DRAFTER), address(VERIFIER), k)
            assert (second.args.forcer, second.args.cycles) == (address(DRAFTER), k + 1)  # on the attested S(k)
            assert w3.eth.get_block(second.blockNumber).timestamp < first.args.deadline  # well before it
            advance_home(w3, verify_timeout + 1)
            settled = system.transcript.events.ForceSettled()
            wait_for(lambda: settled.get_logs(from_block=0), 120, "the drafter's claim", procs)
            (claim,) = settled.get_logs(from_block=0)
            assert claim.args.silent == address(VERIFIER) and claim.args.cycles == k + 1
            assert system.registry.functions.stakeOf(address(VERIFIER)).call() < stake  # the liar pays
            status = _status(home, job_id)
            assert status["status"] == "Finished" and status["finish_reason"] == "VerifyTimeout"
            # every cycle up to the answered one is settled (and paid at finalize), the answered one as the chain said
            assert len(status["cycles"]) == k + 1
            read = TX.read_settlement(w3, system.transcript, job_id)
            assert read.cycles[k].accepted == answer.args.accepted and list(read.cycles[k].p) == list(answer.args.p)
            assert status["tokens"] == read.output(status["eos_token"], 64)
        finally:
            for node in procs:
                if node.poll() is None:
                    os.killpg(node.pid, signal.SIGCONT)
                    _stop(node)
