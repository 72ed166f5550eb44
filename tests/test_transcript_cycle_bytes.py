"""Transcript mode's state chain over the cycles' packed bytes (docs/protocol.md "Transcript mode (v2)"), attacked
with real transactions: settlement calldata that does not hash to the signed state, pulls and rule challenges with
bytes that are not in the stored cycles root, and co-signed cycles whose fields are outside the rule (a token or
outToken at or above the vocabulary, a probability above WAD) that a colluding pair settles: the rule challenge,
which rebuilds the v1 record from the pulled bytes, still convicts them."""

from __future__ import annotations

import dataclasses

import pytest

from chainutil import STATUS_RUNNING, VOCAB, WAD, env, events, job_view, transact  # noqa: F401  (env is a fixture)
from node import protocol as P
from node.chain import transcript as TX
from node.chain import transcript_messages as T
from test_transcript_settlement import (
    DRAFTER_KEY,
    GAMMA,
    VERIFIER_KEY,
    Transcript,
    _revert,
    _settle_packed,
    transcript_job,
)


def _settled(env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    transact(env.w3, t.settle_call(), env.actors.verifier)
    return job_id, t


def test_reordered_cycles_do_not_settle(chain, env):
    """Each leaf binds its cycle index and the chain its order: two cycles swapped (the same bytes, the same token
    count) fold to another state."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    swapped = [t.cycles[1], t.cycles[0], t.cycles[2]]
    _revert(env, _settle_packed(t, TX.pack_cycles(swapped)), env.actors.verifier, "StateMismatch")
    assert job_view(env, job_id)["status"] == STATUS_RUNNING


def test_a_pull_or_challenge_with_bytes_not_in_the_cycles_root_reverts(chain, env):
    job_id, t = _settled(env)
    ts, who = env.system.transcript.functions, env.actors.outsider
    leaves = TX.cycle_leaves(t.cycles)
    one = TX.pack_cycles(t.cycles[1:2])
    flipped = one[:7] + bytes([one[7] ^ 1]) + one[8:]
    not_in_root = [
        (1, one, P.cycle_proof(leaves, 2)),  # cycle 1's bytes with cycle 2's path
        (2, one, P.cycle_proof(leaves, 1)),  # cycle 1's bytes and path, claimed as cycle 2
        (2, one, P.cycle_proof(leaves, 2)),  # cycle 1's bytes claimed as cycle 2, with cycle 2's path
        (1, flipped, P.cycle_proof(leaves, 1)),  # one bit of q changed
    ]
    for cycle, data, proof in not_in_root:
        _revert(env, ts.pullCycle(job_id, cycle, data, proof), who, "InvalidCycleProof")
        _revert(env, ts.challengeRule(job_id, cycle, data, t.reveals[cycle], proof), who, "InvalidCycleProof")
    malformed = [
        (one[:-1], "PackedLength"),
        (one + b"\x00", "PackedLength"),
        (TX.pack_cycles(t.cycles[1:3]), "WrongCycles"),
        (TX.pack_cycles([], GAMMA), "WrongCycles"),
        (bytes([GAMMA - 1]) + one[1 : 1 + P.cycle_size(GAMMA - 1)], "PackedGamma"),
    ]
    for data, error in malformed:
        _revert(env, ts.pullCycle(job_id, 1, data, P.cycle_proof(leaves, 1)), who, error)
    assert env.market.functions.cycleRecordHash(job_id, 1).call() == bytes(32)
    # the settled bytes pull, and the contract rebuilds the v1 record (draft root and record hash) Python computes
    receipt = transact(env.w3, TX.pull_call(env.system.transcript, job_id, t.cycles, 1), who)
    (pulled,) = events(env.system.transcript, receipt, "CyclePulled")
    assert pulled.args.recordHash == t.verifications[1].record_hash == t.cycles[1].record_hash(job_id, 1)
    assert env.market.functions.cycleRecordHash(job_id, 1).call() == t.verifications[1].record_hash


def _colluding_settlement(env, t, cycle, **changes):
    """Both parties co-sign cycle `cycle` changed by `changes` (fields no honest check lets through) and settle."""
    cycles = list(t.cycles)
    cycles[cycle] = dataclasses.replace(cycles[cycle], **changes)
    state = P.state_chain(P.transcript_genesis(t.job_id, t.salt), TX.cycle_leaves(cycles))[-1]
    job = job_view(env, t.job_id)
    out = TX.SettledTranscript(t.job_id, {}, t.salt, t.reveals[len(cycles) - 1], cycles)
    s = T.Settlement(t.job_id, len(cycles), state, len(out.output(job["eosToken"], job["maxTokens"])))
    call = TX.settle_call(
        env.system.transcript, s, t.sign(s, DRAFTER_KEY), t.sign(s, VERIFIER_KEY), t.salt,
        t.reveals[len(cycles) - 1], cycles,
    )  # fmt: skip
    transact(env.w3, call, env.actors.drafter)  # settlement does not re-run the rule: it settles
    return cycles


@pytest.mark.parametrize(
    "changes",
    [
        lambda c: {"tokens": (VOCAB, *c.tokens[1:])},  # an accepted proposal at the vocabulary
        lambda c: {"out_token": VOCAB},  # an outToken at the vocabulary
        lambda c: {"q": (2**60 - 1, *c.q[1:])},  # the largest q the encoding holds, far above WAD
        lambda c: {"p": (*c.p[:-1], WAD + 1)},  # a p above WAD
    ],
    ids=["token", "outToken", "q", "p"],
)
def test_a_co_signed_cycle_outside_the_rule_is_convicted_by_a_rule_challenge(chain, env, changes):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    assert t.cycles[1].accepted >= 1
    cycles = _colluding_settlement(env, t, 1, **changes(t.cycles[1]))
    challenger = env.actors.spare[0]
    # the honest cycles of the same settlement follow the rule
    good = TX.challenge_call(env.system.transcript, job_id, cycles, 0, t.reveals[0])
    _revert(env, good, challenger, "RecordFollowsRule")
    receipt = transact(env.w3, TX.challenge_call(env.system.transcript, job_id, cycles, 1, t.reveals[1]), challenger)
    (won,) = events(env.system.transcript, receipt, "RuleChallengeWon")
    assert (won.args.jobId, won.args.cycle, won.args.challenger) == (job_id, 1, challenger)
    assert env.system.transcript.functions.settled(job_id).call()[2]  # convicted


def test_accepted_above_gamma_co_signed_cannot_settle(chain, env):
    """accepted > γ fits the byte but no emission rule: a pair that co-signs it cannot settle (BadCycle) nor
    force at it, so nobody is paid for it; the job can only idle out, refunding the requester."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    cycles = list(t.cycles)
    raw = bytearray(TX.pack_cycles(cycles))
    raw[1 + P.cycle_size(GAMMA)] = GAMMA + 1  # cycle 1's accepted byte
    # the state both sign is over these very bytes (Python's pack_cycle refuses them, so hash them as posted)
    size = P.cycle_size(GAMMA)
    leaves = [P.cycle_leaf(c, bytes(raw[1 + c * size : 1 + (c + 1) * size])) for c in range(len(cycles))]
    state = P.state_chain(P.transcript_genesis(job_id, t.salt), leaves)[-1]
    s = T.Settlement(job_id, len(cycles), state, t.tokens_out)
    signed = (s.as_tuple(), t.sign(s, DRAFTER_KEY), t.sign(s, VERIFIER_KEY), t.salt, t.reveals[len(cycles) - 1])
    _revert(env, env.system.transcript.functions.settle(signed, bytes(raw)), env.actors.verifier, "BadCycle")
    assert job_view(env, job_id)["status"] == STATUS_RUNNING


def _unchecked_draft(job_id, cycle, prev_state, tokens, q, salt) -> T.Draft:
    """A Draft with q outside 1..WAD, which T.Draft refuses to build: a malicious drafter's own message."""
    draft = object.__new__(T.Draft)
    fields = dict(job_id=job_id, cycle=cycle, prev_state=prev_state, tokens=tuple(tokens), q=tuple(q), salt=salt)
    for name, value in {**fields, "draft_root": P.draft_root(job_id, cycle, tokens, q)}.items():
        object.__setattr__(draft, name, value)
    return draft


@pytest.mark.parametrize("bad_q", [0, WAD + 1, 2**60])
def test_a_drafter_cannot_force_with_a_draft_no_verification_can_answer(chain, env, bad_q):
    """A Draft with a q outside 1..WAD has no verification that follows the rule, so the verifier could not answer a
    force with it and would be slashed at claimForce (to the requester, who may own the drafter): the force is
    refused."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    d = t.drafts[1]
    draft = _unchecked_draft(job_id, 1, d.prev_state, d.tokens, (bad_q, *d.q[1:]), t.salt)
    ev = TX.evidence(draft, t.sign(draft, DRAFTER_KEY), t.verifications[0], t.sign(t.verifications[0], VERIFIER_KEY))
    force = env.system.transcript.functions.forceMove(job_id, ev, TX.pack_cycles(t.cycles[:1], GAMMA))
    _revert(env, force, env.actors.drafter, "BadCycle")
    assert env.system.transcript.functions.forceOf(job_id).call()[9] == "0x" + "00" * 20
