"""Transcript mode's contracts on anvil (docs/protocol.md "Transcript mode (v2)"): settlement, rule challenges, pulls
into the v1 dispute flow, force moves. Signed transcripts come from node/chain/transcript_messages.py, the cycle math
from node/protocol.py, and every payment is compared with a per-cycle job of the same cycles run beside it."""

from __future__ import annotations

import pytest
from eth_hash.auto import keccak

from chainutil import (  # noqa: F401  (env is a fixture)
    DRAFT_MODEL,
    EOS,
    ROLE_REFEREE,
    SALT,
    SEED,
    STATUS_FINALIZED,
    STATUS_FINISHED,
    STATUS_RUNNING,
    TARGET_MODEL,
    VOCAB,
    JobRunner,
    advance,
    env,
    escrow_for,
    events,
    expect_revert,
    forcing_p,
    job_request,
    job_view,
    make_draft,
    realistic_p,
    submit_job,
    transact,
    unpack_output,
)
from node import protocol as P
from node.chain import transcript as TX
from node.chain import transcript_messages as T
from node.chain.enums import Verdict
from node.chain.keys import dev_account
from node.chain.params import BURN_ADDRESS, WAD

DRAFTER_KEY, VERIFIER_KEY, OUTSIDER_KEY = dev_account(2).key, dev_account(3).key, dev_account(7).key
OUT = 777
ACCEPTS = [4, 2, 3]  # γ = 4: 5 + 3 + 4 = 12 tokens, the job's maxTokens, so the last cycle ends it
MAX_TOKENS = 12
GAMMA = 4  # job_request's default
CHEATED = Verdict.AccusedCheated


class Transcript:
    """A job's signed transcript, built as the two nodes would: Drafts on the co-signed state, Verifications with
    the v1 rule's accept count (`lie`: cycles whose signed count is one more than the rule's)."""

    def __init__(
        self, env, job_id, accepts=ACCEPTS, lie=(), salt=SALT, seed=SEED, realistic=True, eos_at=None, outs=None
    ):
        self.env, self.job_id, self.salt = env, job_id, salt
        self.domain = T.Domain(env.w3.eth.chain_id, env.system.transcript.address)
        job = job_view(env, job_id)
        self.reveals = P.chain_reveals(seed, job["maxTokens"])
        self.drafts, self.verifications, self.cycles = [], [], []
        state = P.transcript_genesis(job_id, salt)
        for c, a in enumerate(accepts):
            d = eos_draft(job_id, c, job["gamma"], (eos_at or {}).get(c))
            out_token = (outs or {}).get(c, OUT)
            draft = T.Draft.build(job_id, c, state, d.tokens, d.q, salt)
            # full-width p whose accept count depends on the uniforms (so on the reveal and the salt)
            p = realistic_p(self.reveals[c], d, a, salt) if realistic else forcing_p(job["gamma"], a)
            accepted = P.count_accepted(self.reveals[c], draft.draft_root, d.q, p, salt)
            assert accepted == a
            claimed = accepted + 1 if c in lie else accepted  # the lie pays the drafter one more token
            v = T.Verification.build(draft, p, self.reveals[c], claimed, out_token)
            state = v.state
            self.drafts.append(draft)
            self.verifications.append(v)
            self.cycles.append(TX.Cycle.of(draft, v))
        self.state = state
        out = TX.SettledTranscript(job_id, {}, salt, self.reveals[len(accepts) - 1], self.cycles)
        self.tokens_out = len(out.output(job["eosToken"], job["maxTokens"]))

    def sign(self, msg, key):
        return T.sign(self.domain, msg, key)

    def settlement(self, cycles=None):
        n = len(self.cycles) if cycles is None else cycles
        return T.Settlement(self.job_id, n, self.state, self.tokens_out)

    def settle_call(self, settlement=None, drafter_key=DRAFTER_KEY, verifier_key=VERIFIER_KEY, cycles=None):
        s = settlement or self.settlement()
        return TX.settle_call(
            self.env.system.transcript,
            s,
            self.sign(s, drafter_key),
            self.sign(s, verifier_key),
            self.salt,
            self.reveals[len(self.cycles) - 1],
            self.cycles if cycles is None else cycles,
        )


def eos_draft(job_id, cycle, gamma, eos_index=None):
    """make_draft's proposals, with EOS proposed at `eos_index` (None: nowhere)."""
    d = make_draft(job_id, cycle, gamma)
    if eos_index is not None:
        d.tokens[eos_index] = EOS
    return d


def transcript_job(env, **overrides) -> int:
    req = job_request(env, maxTokens=MAX_TOKENS, **overrides)
    transact(env.w3, env.market.functions.submitTranscriptJob(req, b"\x00\x01"), env.actors.requester, escrow_for(req))
    job_id = env.market.functions.jobCount().call()
    transact(env.w3, env.market.functions.acceptJob(job_id, P.hash_chain(SEED, MAX_TOKENS)), env.actors.verifier)
    return job_id


def window(env):
    return env.market.functions.alphaWindowOf(env.actors.drafter).call()[1:4]


def finalize(env, job_id):
    before = window(env)
    advance(env.w3, env.params.challenge_window + 1)
    receipt = transact(env.w3, env.market.functions.finalize(job_id), env.actors.outsider)
    (paid,) = events(env.market, receipt, "JobFinalized")
    fees = [e.args.amount for e in events(env.market, receipt, "AlphaFeePaid")]
    return (paid.args.drafterPay, paid.args.verifierPay, paid.args.refund, fees), [
        a - b for a, b in zip(window(env), before)
    ]


def owed(env, who):
    return env.market.functions.owed(who).call()


# ---------------------------------------------------------------- settlement


@pytest.mark.parametrize(
    "accepts, eos_at, outs",
    [
        (ACCEPTS, None, None),  # ends at maxTokens with the last outToken
        ([4, 4, 4], None, None),  # maxTokens cuts the last cycle inside its accepted proposals (out cut)
        ([4, 3], {1: 1}, None),  # an accepted EOS ends it, the rest of the cycle cut
        ([4, 2], None, {1: EOS}),  # the outToken is EOS
        # EOS proposed but rejected ends nothing: the fold kernel hands such a cycle to _step, which goes on
        ([2, 3, 4], {0: 3, 1: 3}, None),
    ],
    ids=["max-tokens", "max-tokens-cut", "eos-accepted", "eos-out-token", "eos-rejected"],
)
def test_honest_settlement_pays_exactly_what_per_cycle_mode_pays(chain, env, accepts, eos_at, outs):
    # the per-cycle job: the same drafts, p, accept counts and outTokens, on chain cycle by cycle
    v1 = submit_job(env, maxTokens=MAX_TOKENS)
    runner = JobRunner(env, v1)
    runner.accept()
    v1_output = []
    for c, a in enumerate(accepts):
        draft = eos_draft(v1, c, GAMMA, (eos_at or {}).get(c))
        out = (outs or {}).get(c, OUT)
        _, verify, _ = runner.cycle(c, accept=a, out_token=out, draft=draft, realistic=True)
        v1_output += unpack_output(events(env.market, verify, "CycleVerified")[0].args.output)
    assert job_view(env, v1)["status"] == STATUS_FINISHED
    v1_pay, v1_alpha = finalize(env, v1)

    job_id = transcript_job(env)
    assert job_view(env, job_id)["transcript"] and job_view(env, job_id)["status"] == STATUS_RUNNING
    t = Transcript(env, job_id, accepts=accepts, eos_at=eos_at, outs=outs)
    receipt = transact(env.w3, t.settle_call(), env.actors.verifier)
    (ev,) = events(env.system.transcript, receipt, "TranscriptSettled")
    leaves = TX.cycle_leaves(t.cycles)
    assert (ev.args.cycles, ev.args.tokensOut, ev.args.cyclesRoot) == (
        len(accepts),
        len(v1_output),
        P.cycles_root(leaves),
    )
    assert tuple(env.system.transcript.functions.settled(job_id).call()) == (
        P.cycles_root(leaves),
        len(accepts),
        False,
    )
    view = job_view(env, job_id)
    v1_view = job_view(env, v1)
    for field in ("cycle", "emitted", "rejected", "drafterTokens"):
        assert view[field] == v1_view[field], field
    assert view["status"] == STATUS_FINISHED and view["salt"] == SALT
    # chain data alone rebuilds the transcript and its output: the packed calldata decodes to exactly the records
    read = TX.read_settlement(env.w3, env.system.transcript, job_id)
    assert read.cycles == t.cycles and read.reveals() == t.reveals[: len(accepts)]
    assert read.output(view["eosToken"], MAX_TOKENS) == v1_output
    pay, alpha = finalize(env, job_id)
    assert pay == v1_pay and alpha == v1_alpha and alpha[0] == len(accepts)
    assert job_view(env, job_id)["status"] == STATUS_FINALIZED


def test_per_cycle_entries_and_claim_timeout_refuse_a_transcript_job(chain, env):
    job_id = transcript_job(env)
    d = make_draft(job_id, 0, 4)
    m, a = env.market.functions, env.actors
    expect_revert(env, m.commitFirstDraft(job_id, d.root, d.tokens, d.q, SALT), a.drafter, "TranscriptJob", (job_id,))
    expect_revert(env, m.claimTimeout(job_id), a.outsider, "TranscriptJob", (job_id,))


def _revert(env, fn, sender, name):
    with pytest.raises(Exception) as info:
        fn.transact({"from": sender})
    from chainutil import decode_error

    got, _ = decode_error(info.value.data, env.system.transcript, env.market)
    assert got == name, got


def test_forged_replayed_and_stale_signatures_are_refused(chain, env):
    job_id = transcript_job(env)
    other = transcript_job(env)
    t = Transcript(env, job_id)
    s = t.settlement()
    a = env.actors.verifier
    # forged: the verifier's signature made by someone else
    _revert(env, t.settle_call(verifier_key=OUTSIDER_KEY), a, "TranscriptWrongSigner")
    _revert(env, t.settle_call(drafter_key=VERIFIER_KEY), a, "TranscriptWrongSigner")
    # replayed from another job: signatures of job `other`'s Settlement on this job's call
    t_other = Transcript(env, other)
    s_other = t_other.settlement()
    call = TX.settle_call(
        env.system.transcript,
        s,
        t_other.sign(s_other, DRAFTER_KEY),
        t_other.sign(s_other, VERIFIER_KEY),
        SALT,
        t.reveals[2],
        t.cycles,
    )
    _revert(env, call, a, "TranscriptWrongSigner")
    # replayed from another chain id or another contract (the market instead of TranscriptSettlement)
    for domain in (
        T.Domain(env.w3.eth.chain_id + 1, t.domain.verifying_contract),
        T.Domain(t.domain.chain_id, env.market.address),
    ):
        sigs = [T.sign(domain, s, k) for k in (DRAFTER_KEY, VERIFIER_KEY)]
        call = TX.settle_call(env.system.transcript, s, *sigs, SALT, t.reveals[2], t.cycles)
        _revert(env, call, a, "TranscriptWrongSigner")
    # stale: a co-signed settlement of fewer cycles than posted, or records that do not fold to the signed state
    stale = T.Settlement(job_id, 2, P.state_chain(P.transcript_genesis(job_id, SALT), TX.cycle_leaves(t.cycles))[1], 8)
    _revert(env, t.settle_call(stale), a, "WrongCycles")
    _revert(env, t.settle_call(stale, cycles=t.cycles[:2]), a, "TranscriptNotEnded")
    forged_cycle = TX.Cycle(t.cycles[1].tokens, t.cycles[1].q, t.cycles[1].p, 1, OUT)  # pays the drafter less
    _revert(env, t.settle_call(cycles=[t.cycles[0], forged_cycle, t.cycles[2]]), a, "StateMismatch")
    # an unsigned cycle appended: the job had already ended
    extra = TX.Cycle(t.cycles[2].tokens, t.cycles[2].q, t.cycles[2].p, 4, OUT)
    s4 = T.Settlement(job_id, 4, t.state, MAX_TOKENS)
    _revert(env, t.settle_call(s4, cycles=[*t.cycles, extra]), a, "CycleAfterEnd")
    # the signed tokensOut must be what the records emit
    _revert(env, t.settle_call(T.Settlement(job_id, 3, t.state, MAX_TOKENS - 1)), a, "TokensOutMismatch")
    assert job_view(env, job_id)["status"] == STATUS_RUNNING
    transact(env.w3, t.settle_call(), a)
    _revert(env, t.settle_call(), a, "NotTranscriptJob")  # settled once


# ---------------------------------------------------------------- rule challenges


def _settled_liar(env, lie=(1,)):
    job_id = transcript_job(env)
    t = Transcript(env, job_id, lie=lie)
    transact(env.w3, t.settle_call(), env.actors.drafter)
    return job_id, t


def test_a_rule_challenge_on_a_bad_record_slashes_both_and_makes_the_requester_whole(chain, env):
    job_id, t = _settled_liar(env)
    reg, a, p = env.registry.functions, env.actors, env.params
    stakes = [reg.stakeOf(x).call() for x in (a.drafter, a.verifier)]
    challenger = a.spare[0]
    # a good record of the same job cannot be challenged
    _revert(
        env,
        TX.challenge_call(env.system.transcript, job_id, t.cycles, 0, t.reveals[0]),
        challenger,
        "RecordFollowsRule",
    )
    _revert(
        env, TX.challenge_call(env.system.transcript, job_id, t.cycles, 1, t.reveals[0]), challenger, "RevealMismatch"
    )
    receipt = transact(env.w3, TX.challenge_call(env.system.transcript, job_id, t.cycles, 1, t.reveals[1]), challenger)
    (conv,) = events(env.market, receipt, "TranscriptConvicted")
    assert (conv.args.fromDrafter, conv.args.fromVerifier) == (p.rule_slash, p.rule_slash)
    reward = p.rule_slash * p.rule_reward_bps // 10_000
    assert conv.args.reward == reward and owed(env, challenger) == reward
    assert [reg.stakeOf(x).call() for x in (a.drafter, a.verifier)] == [s - p.rule_slash for s in stakes]
    assert owed(env, p.treasury) >= 2 * p.rule_slash - reward
    _revert(
        env, TX.challenge_call(env.system.transcript, job_id, t.cycles, 1, t.reveals[1]), challenger, "NotChallengeable"
    )
    before = owed(env, a.requester)
    (drafter_pay, verifier_pay, refund, fees), alpha = finalize(env, job_id)
    escrow = job_view(env, job_id)["escrow"]
    assert (drafter_pay, verifier_pay, refund, fees) == (0, 0, escrow, []) and alpha == [0, 0, 0]
    assert owed(env, a.requester) - before == escrow


def test_the_challenge_reward_never_pays_a_coalition_that_provokes_it(chain, env):
    """The drafter, the verifier and the challenger are one owner (the requester chose both signers): challenging
    their own bad record must cost them, and so must a challenger allied with only one signer."""
    job_id, t = _settled_liar(env)
    reg, a, p = env.registry.functions, env.actors, env.params
    colluder = a.spare[1]
    wealth = lambda: reg.stakeOf(a.drafter).call() + reg.stakeOf(a.verifier).call() + owed(env, colluder)  # noqa: E731
    before = wealth()
    transact(env.w3, TX.challenge_call(env.system.transcript, job_id, t.cycles, 1, t.reveals[1]), colluder)
    lost_by_coalition = before - wealth()
    assert lost_by_coalition == 2 * p.rule_slash - p.rule_slash * p.rule_reward_bps // 10_000 > 0
    # with either signer alone: the reward is a share of the smaller slash, below what that signer lost
    reward = owed(env, colluder)
    assert reward < p.rule_slash
    # the requester gets only its own escrow back: no share of the slash it could steer
    assert owed(env, a.requester) == 0


# ---------------------------------------------------------------- pulls and replay disputes


def test_a_pulled_cycle_is_disputable_through_the_referee_flow(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    transact(env.w3, t.settle_call(), env.actors.verifier)
    dm, m = env.system.disputes, env.market.functions
    assert m.cycleRecordHash(job_id, 1).call() == bytes(32)
    receipt = transact(env.w3, TX.pull_call(env.system.transcript, job_id, t.cycles, 1), env.actors.outsider)
    assert events(env.system.transcript, receipt, "CyclePulled")[0].args.recordHash == t.cycles[1].record_hash(
        job_id, 1
    )
    assert m.cycleRecordHash(job_id, 1).call() == t.cycles[1].record_hash(job_id, 1)
    # a record that is not the settled one is refused
    bad = TX.Cycle(t.cycles[1].tokens, t.cycles[1].q, t.cycles[1].p, 1, OUT)
    _revert(
        env,
        TX.pull_call(env.system.transcript, job_id, [t.cycles[0], bad, t.cycles[2]], 1),
        env.actors.outsider,
        "InvalidCycleProof",
    )
    # DraftReplay on proposal 1 of cycle 1, through the unchanged dispute manager and its referees (enough of them
    # that a panel of 3 is never short: the draw is by stake and skips repeats)
    for extra in env.actors.spare[2:7]:
        reg = env.registry.functions.register(ROLE_REFEREE, [DRAFT_MODEL, TARGET_MODEL], [VOCAB, VOCAB])
        transact(env.w3, reg, extra, env.params.min_referee_stake)
    draft = t.drafts[1]
    leaves = [P.leaf(job_id, 1, i, tok, q) for i, (tok, q) in enumerate(zip(draft.tokens, draft.q))]
    record = t.cycles[1].record(job_id, 1)
    challenger = env.actors.outsider
    leaf = (draft.tokens[1], draft.q[1], P.proof(leaves, 1))
    _send(env, dm.functions.openDispute(job_id, 1, 1, 0, record, leaf), challenger, env.params.dispute_bond)
    dispute_id = dm.functions.disputeCount().call()
    assert job_view(env, job_id)["openDisputes"] == 1
    _send(env, dm.functions.drawReferees(dispute_id), challenger)
    panel = dm.functions.refereesOf(dispute_id).call()
    assert len(panel) == 3
    _send(env, dm.functions.answer(dispute_id, WAD // 3, [12, 40], [WAD // 3, WAD // 4]), env.actors.drafter)
    for referee in panel:
        salt = keccak(b"salt" + bytes.fromhex(referee[2:]))
        _send(env, dm.functions.commitVote(dispute_id, P.vote_commitment(dispute_id, referee, CHEATED, salt)), referee)
    for referee in panel:
        _send(env, dm.functions.revealVote(dispute_id, CHEATED, keccak(b"salt" + bytes.fromhex(referee[2:]))), referee)
    _send(env, dm.functions.resolve(dispute_id), challenger)
    advance(env.w3, env.params.appeal_period + 1)
    _send(env, dm.functions.resolve(dispute_id), challenger)
    stake = env.registry.functions.stakeOf(env.actors.drafter).call()
    assert stake == env.params.min_drafter_stake - env.params.accused_slash
    view = job_view(env, job_id)
    assert view["drafterForfeited"] and view["openDisputes"] == 0 and not view["verifierForfeited"]
    (drafter_pay, verifier_pay, _, _), _ = finalize(env, job_id)
    assert drafter_pay == 0 and verifier_pay > 0


def _send(env, fn, sender, value=0):
    """Estimated against the pending block (the draw reads the opening block's hash: docs/clients.md)."""
    gas = int(fn.estimate_gas({"from": sender, "value": value}, block_identifier="pending") * 1.2)
    receipt = env.w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value, "gas": gas}))
    assert receipt.status == 1
    return receipt


# ---------------------------------------------------------------- force moves


def _force_by_drafter(env, t, k):
    """The drafter posts co-signed S(k-1): its Draft of cycle k and the verifier's Verification of k-1."""
    ev = TX.evidence(
        t.drafts[k],
        t.sign(t.drafts[k], DRAFTER_KEY),
        t.verifications[k - 1] if k else None,
        t.sign(t.verifications[k - 1], VERIFIER_KEY) if k else b"",
    )
    return env.system.transcript.functions.forceMove(t.job_id, ev, TX.pack_cycles(t.cycles[:k], GAMMA))


def test_silent_verifier_is_slashed_and_the_job_settles_at_the_co_signed_state(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a, p = env.actors, env.params
    stake = env.registry.functions.stakeOf(a.verifier).call()
    _revert(env, _force_by_drafter(env, t, 2), a.outsider, "NotParty")
    receipt = transact(env.w3, _force_by_drafter(env, t, 2), a.drafter)
    (moved,) = events(env.system.transcript, receipt, "ForceMoved")
    assert (moved.args.silent, moved.args.cycles) == (a.verifier, 2)
    _revert(env, env.system.transcript.functions.claimForce(job_id), a.outsider, "ForceDeadline")
    advance(env.w3, p.verify_timeout + 1)
    transact(env.w3, env.system.transcript.functions.claimForce(job_id), a.outsider)
    assert env.registry.functions.stakeOf(a.verifier).call() == stake - p.timeout_slash
    assert owed(env, a.requester) == 0 and owed(env, BURN_ADDRESS) == p.timeout_slash  # burnt (v1.2)
    view = job_view(env, job_id)
    assert (view["cycle"], view["emitted"], view["status"]) == (2, 8, STATUS_FINISHED) and not view["alphaEligible"]
    read = TX.read_settlement(env.w3, env.system.transcript, job_id)
    assert read.cycles == t.cycles[:2] and read.reveals() == t.reveals[:2]
    (drafter_pay, verifier_pay, refund, _), _ = finalize(env, job_id)
    # paid for the two co-signed cycles only; the unsigned third is nobody's
    assert drafter_pay == (4 + 2) * 10**12 and verifier_pay == 2 * 3 * 10**12
    assert refund == view["escrow"] - drafter_pay - verifier_pay


def test_a_verifier_answers_a_force_with_its_checked_verification(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a = env.actors
    transact(env.w3, _force_by_drafter(env, t, 1), a.drafter)
    ts = env.system.transcript.functions
    # a wrong accept count is no answer
    wrong = TX.Cycle(t.cycles[1].tokens, t.cycles[1].q, t.cycles[1].p, 1, OUT)
    _revert(env, ts.answerForce(job_id, TX.verification_answer(wrong, t.reveals[1])), a.verifier, "RuleViolated")
    _revert(env, ts.answerForce(job_id, TX.verification_answer(t.cycles[1], t.reveals[1])), a.drafter, "NotParty")
    transact(env.w3, ts.answerForce(job_id, TX.verification_answer(t.cycles[1], t.reveals[1])), a.verifier)
    assert ts.forceOf(job_id).call()[9] == "0x" + "00" * 20
    _revert(env, ts.claimForce(job_id), a.outsider, "NoForce")
    # the job goes on off chain and settles normally
    transact(env.w3, t.settle_call(), a.drafter)
    assert job_view(env, job_id)["status"] == STATUS_FINISHED


def test_silent_drafter_after_the_verifiers_force(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a, p = env.actors, env.params
    ts = env.system.transcript.functions
    k = 1
    ev = TX.evidence(
        t.drafts[k],
        t.sign(t.drafts[k], DRAFTER_KEY),
        t.verifications[k - 1],
        t.sign(t.verifications[k - 1], VERIFIER_KEY),
        t.verifications[k],
        t.sign(t.verifications[k], VERIFIER_KEY),
    )
    transact(env.w3, ts.forceMove(job_id, ev, TX.pack_cycles(t.cycles[:k], GAMMA)), a.verifier)
    stake = env.registry.functions.stakeOf(a.drafter).call()
    advance(env.w3, p.commit_timeout + 1)
    transact(env.w3, ts.claimForce(job_id), a.outsider)
    assert env.registry.functions.stakeOf(a.drafter).call() == stake - p.timeout_slash
    view = job_view(env, job_id)
    # the verifier's checked verification of cycle 1 counts (the drafter signed that draft): as a v1 draft timeout
    assert (view["cycle"], view["emitted"]) == (2, 8) and view["alphaEligible"]
    read = TX.read_settlement(env.w3, env.system.transcript, job_id)  # rebuilt from chain data alone
    assert read.cycles == t.cycles[:2] and read.reveals() == t.reveals[:2] and read.salt == SALT


def test_a_drafter_answers_the_verifiers_force_with_its_next_draft(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a = env.actors
    ts = env.system.transcript.functions
    ev = TX.evidence(
        t.drafts[1],
        t.sign(t.drafts[1], DRAFTER_KEY),
        t.verifications[0],
        t.sign(t.verifications[0], VERIFIER_KEY),
        t.verifications[1],
        t.sign(t.verifications[1], VERIFIER_KEY),
    )
    transact(env.w3, ts.forceMove(job_id, ev, TX.pack_cycles(t.cycles[:1])), a.verifier)
    _revert(
        env,
        ts.answerForce(job_id, TX.draft_answer(t.drafts[2], t.sign(t.drafts[2], OUTSIDER_KEY))),
        a.drafter,
        "TranscriptWrongSigner",
    )
    transact(env.w3, ts.answerForce(job_id, TX.draft_answer(t.drafts[2], t.sign(t.drafts[2], DRAFTER_KEY))), a.drafter)
    assert ts.forceOf(job_id).call()[9] == "0x" + "00" * 20


def test_a_drafter_that_never_sent_a_draft_is_not_slashed(chain, env):
    job_id = transcript_job(env)
    a, p = env.actors, env.params
    ts = env.system.transcript.functions
    stake = env.registry.functions.stakeOf(a.drafter).call()
    transact(env.w3, ts.forceMove(job_id, TX.no_draft_evidence(), TX.pack_cycles([], GAMMA)), a.verifier)
    advance(env.w3, p.commit_timeout + 1)
    transact(env.w3, ts.claimForce(job_id), a.outsider)
    assert env.registry.functions.stakeOf(a.drafter).call() == stake
    assert job_view(env, job_id)["status"] == STATUS_FINALIZED  # no cycle: refunded at once


def _evidence_of_verifier(t, k):
    """The verifier's force at co-signed S(k-1): the Draft of k, the Verification of k-1, its own Verification of k."""
    return TX.evidence(
        t.drafts[k],
        t.sign(t.drafts[k], DRAFTER_KEY),
        t.verifications[k - 1] if k else None,
        t.sign(t.verifications[k - 1], VERIFIER_KEY) if k else b"",
        t.verifications[k],
        t.sign(t.verifications[k], VERIFIER_KEY),
    )


def test_a_stale_force_is_superseded_by_a_force_at_a_later_state(chain, env):
    """The drafter forces at an old co-signed state (to cut the verifier's pay): the verifier answers with a force at
    the latest co-signed state, so the drafter must answer that one, and cannot refuse to pay a co-signed cycle."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a, p = env.actors, env.params
    ts = env.system.transcript.functions
    transact(env.w3, _force_by_drafter(env, t, 0), a.drafter)
    _revert(env, _force_by_drafter(env, t, 0), a.drafter, "ForcePending")
    cycles = TX.pack_cycles(t.cycles[:1])
    transact(env.w3, ts.forceMove(job_id, _evidence_of_verifier(t, 1), cycles), a.verifier)
    force = ts.forceOf(job_id).call()
    assert force[9] == a.drafter and force[5] == 2
    advance(env.w3, p.commit_timeout + 1)
    transact(env.w3, ts.claimForce(job_id), a.outsider)
    view = job_view(env, job_id)
    assert (view["cycle"], view["emitted"]) == (2, 8)  # both co-signed cycles and the checked one are paid


def test_a_force_whose_pending_verification_ends_the_job_settles_at_once(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a = env.actors
    ts = env.system.transcript.functions
    stakes = [env.registry.functions.stakeOf(x).call() for x in (a.drafter, a.verifier)]
    # the drafter would not sign the Settlement: the verifier posts its verification of the last cycle
    receipt = transact(
        env.w3, ts.forceMove(job_id, _evidence_of_verifier(t, 2), TX.pack_cycles(t.cycles[:2])), a.verifier
    )
    assert events(env.system.transcript, receipt, "ForceCompleted")[0].args.cycles == 3
    assert [env.registry.functions.stakeOf(x).call() for x in (a.drafter, a.verifier)] == stakes
    view = job_view(env, job_id)
    assert (view["cycle"], view["emitted"], view["status"]) == (3, MAX_TOKENS, STATUS_FINISHED)
    assert ts.settled(job_id).call()[0] == P.cycles_root(TX.cycle_leaves(t.cycles))
    read = TX.read_settlement(env.w3, env.system.transcript, job_id)
    assert read.cycles == t.cycles and read.reveals() == t.reveals[:3]
    # its records are challengeable and pullable as a settlement's
    transact(env.w3, TX.pull_call(env.system.transcript, job_id, t.cycles, 2), a.outsider)


def test_a_verifier_force_with_a_wrong_verification_is_refused(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id, lie=(1,))
    ts = env.system.transcript.functions
    _revert(
        env,
        ts.forceMove(job_id, _evidence_of_verifier(t, 1), TX.pack_cycles(t.cycles[:1])),
        env.actors.verifier,
        "RuleViolated",
    )
    # and a force needs the counterparty's signatures: a drafter cannot forge the verifier's co-signature
    ev = TX.evidence(
        t.drafts[1], t.sign(t.drafts[1], DRAFTER_KEY), t.verifications[0], t.sign(t.verifications[0], OUTSIDER_KEY)
    )
    _revert(env, ts.forceMove(job_id, ev, TX.pack_cycles(t.cycles[:1])), env.actors.drafter, "TranscriptWrongSigner")


def test_a_settlement_answers_a_force(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    ts = env.system.transcript.functions
    transact(env.w3, _force_by_drafter(env, t, 1), env.actors.drafter)
    transact(env.w3, t.settle_call(), env.actors.verifier)
    assert ts.forceOf(job_id).call()[9] == "0x" + "00" * 20
    _revert(env, ts.claimForce(job_id), env.actors.outsider, "NoForce")


def test_on_chain_checks_of_a_running_job_use_the_drafters_salt(chain, env):
    """A running transcript job's market record has no salt yet (it is in the Drafts): the force moves' rule checks
    must take it from the Drafts. Pick a salt for which salt 0 would give cycle 1 another accept count."""
    job_id = transcript_job(env)
    for salt in range(1, 200):
        t = Transcript(env, job_id, salt=salt)
        v = t.verifications[1]
        if P.count_accepted(v.reveal, v.draft_root, t.drafts[1].q, v.p, 0) != v.accepted:
            break
    else:
        raise AssertionError("no salt separates the counts")
    ts = env.system.transcript.functions
    transact(env.w3, _force_by_drafter(env, t, 1), env.actors.drafter)
    transact(env.w3, ts.answerForce(job_id, TX.verification_answer(t.cycles[1], t.reveals[1])), env.actors.verifier)
    transact(
        env.w3, ts.forceMove(job_id, _evidence_of_verifier(t, 1), TX.pack_cycles(t.cycles[:1])), env.actors.verifier
    )
    assert ts.forceOf(job_id).call()[5] == 2


def test_the_market_hooks_take_only_the_settlement_contract_and_wiring_is_once(chain, env):
    job_id = transcript_job(env)
    m, a = env.market.functions, env.actors
    outcome = (1, 1, 0, False, SALT, 0, "0x" + "00" * 20, False)
    for fn in (m.transcriptFinish(job_id, outcome), m.storeTranscriptRecord(job_id, 0, b"\x01" * 32),
               m.transcriptConvict(job_id, a.outsider, 1, 1)):  # fmt: skip
        expect_revert(env, fn, a.outsider, "NotTranscriptSettlement", (a.outsider,))
    expect_revert(env, m.setTranscriptSettlement(a.outsider), a.outsider, "MarketNotDeployer", (a.outsider,))
    expect_revert(env, m.setTranscriptSettlement(a.outsider), a.deployer, "MarketAlreadyWired")
    assert m.transcriptSettlement().call() == env.system.transcript.address
    # a per-cycle job is not the settlement contract's to end
    v1 = submit_job(env)
    _revert(env, Transcript(env, v1).settle_call(), a.drafter, "NotTranscriptJob")


def test_an_unaccepted_transcript_job_times_out_as_v1(chain, env):
    req = job_request(env, maxTokens=MAX_TOKENS)
    receipt = transact(
        env.w3, env.market.functions.submitTranscriptJob(req, b"\x00"), env.actors.requester, escrow_for(req)
    )
    job_id = env.market.functions.jobCount().call()
    assert events(env.market, receipt, "TranscriptJobSubmitted")[0].args.jobId == job_id
    advance(env.w3, env.params.accept_timeout + 1)
    transact(env.w3, env.market.functions.claimTimeout(job_id), env.actors.outsider)
    view = job_view(env, job_id)
    assert view["status"] == STATUS_FINALIZED and view["transcript"]
    assert owed(env, env.actors.requester) == escrow_for(req)


def test_an_answered_force_cannot_be_repeated(chain, env):
    """Griefing by re-posting an answered force: the forcer's next force must reach a later state."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    a = env.actors
    ts = env.system.transcript.functions
    transact(env.w3, _force_by_drafter(env, t, 1), a.drafter)
    transact(env.w3, ts.answerForce(job_id, TX.verification_answer(t.cycles[1], t.reveals[1])), a.verifier)
    _revert(env, _force_by_drafter(env, t, 1), a.drafter, "ForceAlreadyAnswered")
    transact(env.w3, _force_by_drafter(env, t, 2), a.drafter)  # the next cycle's draft: a new move to answer
    assert ts.forceOf(job_id).call()[5] == 2


# ---------------------------------------------------------------- the settlement encoding (PackedCycles)


def _settle_packed(t, data):
    """settle with `data` as the cycles' calldata, the rest of the call as the honest one."""
    s = t.settlement()
    signed = (s.as_tuple(), t.sign(s, DRAFTER_KEY), t.sign(s, VERIFIER_KEY), t.salt, t.reveals[len(t.cycles) - 1])
    return t.env.system.transcript.functions.settle(signed, data)


def test_malformed_packed_cycles_revert_with_their_error_and_settle_nothing(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    good = TX.pack_cycles(t.cycles)
    size = TX.record_size(GAMMA)
    assert len(good) == 1 + 3 * size and size == 5 + 19 * GAMMA
    a = env.actors.verifier
    malformed = {
        "PackedLength": [
            b"",
            good[:-1],
            good + b"\x00",
            good[: 1 + size + 7],
            good[:1] + good[1 : 1 + size] * 2 + b"\x01",
        ],
        "PackedGamma": [bytes([GAMMA + 1]) + good[1:], bytes([0]) + good[1:]],
        "WrongCycles": [good[: 1 + 2 * size], good + good[1 : 1 + size]],  # a whole record missing or added
    }
    for error, datas in malformed.items():
        for data in datas:
            _revert(env, _settle_packed(t, data), a, error)
    # cycles packed for another γ (3 proposals each) also name their γ
    short = [TX.Cycle(c.tokens[:3], c.q[:3], c.p[:3], min(c.accepted, 3), c.out_token) for c in t.cycles]
    _revert(env, _settle_packed(t, TX.pack_cycles(short)), a, "PackedGamma")
    # accepted above γ fits the byte but not the rule
    over = bytearray(good)
    over[1] = GAMMA + 1
    _revert(env, _settle_packed(t, bytes(over)), a, "BadCycle")
    # forceMove and challengeRule read the same encoding
    ts = env.system.transcript.functions
    ev = TX.evidence(t.drafts[1], t.sign(t.drafts[1], DRAFTER_KEY))
    _revert(env, ts.forceMove(job_id, ev, TX.pack_cycles(t.cycles[:1])[:-1]), env.actors.drafter, "PackedLength")
    _revert(env, ts.forceMove(job_id, ev, b"\x05" + good[1 : 1 + size]), env.actors.drafter, "PackedGamma")
    assert job_view(env, job_id)["status"] == STATUS_RUNNING
    transact(env.w3, _settle_packed(t, good), a)
    proof = P.cycle_proof(TX.cycle_leaves(t.cycles), 1)
    one = TX.pack_cycles(t.cycles[1:2])
    for data, error in ((one[:-1], "PackedLength"), (TX.pack_cycles(t.cycles[1:3]), "WrongCycles")):
        _revert(env, ts.challengeRule(job_id, 1, data, t.reveals[1], proof), env.actors.outsider, error)


def test_calldata_that_does_not_hash_to_the_signed_state_reverts(chain, env):
    """Any one bit of a posted field changes that cycle's leaf (its bytes are hashed as posted), so the fold misses
    the signed state: StateMismatch, nothing settled."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    good = TX.pack_cycles(t.cycles)
    size = TX.record_size(GAMMA)
    # cycle 1's outToken, then its proposal 2's token, q and p (5 + 19·2 bytes into the record)
    proposal = 1 + size + 5 + 19 * 2
    for at, bit in ((1 + size + 4, 0), (proposal + 3, 0), (proposal + 6, 3), (proposal + 18, 0)):
        data = bytearray(good)
        data[at] ^= 1 << bit
        _revert(env, _settle_packed(t, bytes(data)), env.actors.verifier, "StateMismatch")
    assert job_view(env, job_id)["status"] == STATUS_RUNNING


@pytest.mark.parametrize("gamma, accepts", [(1, [1] * 6), (7, [7, 4]), (16, [11])])
def test_packed_runs_at_every_gamma_settle_and_decode_to_the_signed_records(chain, env, gamma, accepts):
    job_id = transcript_job(env, gamma=gamma)
    t = Transcript(env, job_id, accepts=accepts)
    receipt = transact(env.w3, t.settle_call(), env.actors.drafter)
    (ev,) = events(env.system.transcript, receipt, "TranscriptSettled")
    assert ev.args.cyclesRoot == P.cycles_root(TX.cycle_leaves(t.cycles))
    assert TX.read_settlement(env.w3, env.system.transcript, job_id).cycles == t.cycles


def test_pack_cycles_round_trips_and_refuses_what_the_contract_would():
    cycles = [TX.Cycle((0, 2**32 - 1), (1, WAD), (0, 2**60 - 1), 2, 2**32 - 1), TX.Cycle((5, 6), (7, 8), (9, 10), 0, 3)]
    data = TX.pack_cycles(cycles)
    assert len(data) == 1 + 2 * TX.record_size(2) and data[0] == 2
    assert TX.unpack_cycles(data) == cycles
    assert TX.pack_cycles([], 4) == b"\x04" and TX.unpack_cycles(b"\x04") == []
    bad = [
        lambda: TX.pack_cycles([TX.Cycle((1,), (2**60,), (0,), 0, 0)]),  # q past 60 bits
        lambda: TX.pack_cycles([TX.Cycle((2**32,), (1,), (0,), 0, 0)]),  # token past 32 bits
        lambda: TX.pack_cycles([TX.Cycle((1,), (1,), (0,), 2, 0)]),  # accepted above γ
        lambda: TX.pack_cycles([cycles[0], TX.Cycle((1,), (1,), (0,), 0, 0)]),  # two γs in one run
        lambda: TX.pack_cycles([]),  # an empty run needs its γ
        lambda: TX.unpack_cycles(data[:-1]),
        lambda: TX.unpack_cycles(b""),
        lambda: TX.unpack_cycles(b"\x00"),
    ]
    for call in bad:
        with pytest.raises(ValueError):
            call()
