"""InferenceMarket on a real anvil chain: jobs, drafts, on-chain verification, deadlines, settlement.

Every draft root, uniform, accept count, record hash and hash-chain reveal comes from node/protocol.py.
"""

from __future__ import annotations

import pytest
from eth_abi import encode as abi_encode
from eth_hash.auto import keccak
from eth_utils import function_signature_to_4byte_selector
from web3.exceptions import ContractCustomError

from chainutil import (  # noqa: F401  (env is a fixture)
    DRAFT_MODEL,
    EOS,
    OTHER_MODEL,
    PHASE_DRAFT,
    PHASE_VERIFY,
    PRICE_ACCEPTED,
    PRICE_PASS,
    REASON_ACCEPT_TIMEOUT,
    REASON_COMPLETED,
    REASON_DISPUTE,
    REASON_DRAFT_TIMEOUT,
    REASON_VERIFY_TIMEOUT,
    SEED,
    STATUS_FINALIZED,
    STATUS_FINISHED,
    STATUS_NONE,
    STATUS_OPEN,
    STATUS_RUNNING,
    TARGET_MODEL,
    WAD,
    ZERO_ADDRESS,
    Draft,
    JobRunner,
    advance,
    build_env,
    decode_error,
    env,
    escrow_for,
    events,
    expect_revert,
    forcing_p,
    impersonate,
    job_request,
    job_view,
    make_draft,
    measure_cycle_gas,
    paid_gas,
    send_eth,
    submit_job,
    transact,
    unpack_draft,
    unpack_output,
)
from node import protocol as P
from node.chain.contracts import deploy_contract
from node.chain.params import BURN_ADDRESS


def running_job(env, **overrides) -> JobRunner:
    job_id = submit_job(env, **overrides)
    runner = JobRunner(env, job_id)
    runner.accept()
    return runner


def locks(env, who) -> int:
    return env.registry.functions.accountOf(who).call()[2]


def expect_no_more_drafts(env, runner: JobRunner, cycle: int) -> None:
    """The finished job refuses the drafter's draft of `cycle`: JobWrongStatus (Finished)."""
    d = make_draft(runner.job_id, cycle, 4)
    fn = env.market.functions.commitDraft(runner.job_id, cycle, d.root, d.tokens, d.q)
    expect_revert(env, fn, env.actors.drafter, "JobWrongStatus", (runner.job_id, STATUS_FINISHED))


# ---------------------------------------------------------------- submitJob


def test_submit_job(chain, env):
    w3, a, m = env.w3, env.actors, env.market
    req = job_request(env, temperature=WAD // 2, topK=40, topP=WAD * 9 // 10)
    prompt = bytes(range(1, 40))
    value = escrow_for(req) + 777  # excess is refunded at finalize
    before = w3.eth.get_balance(m.address)
    receipt = transact(w3, m.functions.submitJob(req, prompt), a.requester, value)
    assert w3.eth.get_balance(m.address) == before + value
    job_id = m.functions.jobCount().call()
    (ev,) = events(m, receipt, "JobSubmitted")
    assert ev.args.jobId == job_id and ev.args.requester == a.requester
    assert ev.args.prompt == prompt and ev.args.escrow == value
    assert dict(ev.args.request) == req
    job = job_view(env, job_id)
    assert (job["requester"], job["drafter"], job["verifier"]) == (a.requester, a.drafter, a.verifier)
    assert (job["draftModel"], job["targetModel"]) == (DRAFT_MODEL, TARGET_MODEL)
    assert (job["status"], job["gamma"], job["alphaEligible"], job["cycle"], job["emitted"]) == (
        STATUS_OPEN,
        4,
        False,
        0,
        0,
    )
    assert (job["maxTokens"], job["eosToken"], job["escrow"]) == (req["maxTokens"], EOS, value)
    assert (job["pricePerAcceptedToken"], job["pricePerPass"]) == (PRICE_ACCEPTED, PRICE_PASS)
    assert job["deadline"] == w3.eth.get_block(receipt.blockNumber)["timestamp"] + env.params.accept_timeout
    assert m.functions.jobStatus(job_id).call() == STATUS_OPEN
    assert m.functions.jobParties(job_id).call() == (a.requester, a.drafter, a.verifier, DRAFT_MODEL, TARGET_MODEL)
    assert locks(env, a.drafter) == 1 and locks(env, a.verifier) == 1
    # Reference sampling settings at a price per pass of at least the floor make the job count toward α.
    assert job_view(env, submit_job(env))["alphaEligible"] is True
    floor = env.params.alpha_price_floor
    assert job_view(env, submit_job(env, pricePerPass=floor - 1))["alphaEligible"] is False


def test_submit_job_reverts(chain, env):
    a, m = env.actors, env.market.functions

    def reverts(error, args=None, value=None, sender=None, **overrides):
        req = job_request(env, **overrides)
        expect_revert(
            env,
            m.submitJob(req, b"\x01"),
            sender or a.requester,
            error,
            args,
            value=escrow_for(req) if value is None else value,
        )

    reverts("BadGamma", (0,), gamma=0)
    reverts("BadGamma", (17,), gamma=17)
    reverts("BadMaxTokens", maxTokens=0)
    reverts("BadTopP", (0,), topP=0)
    reverts("BadTopP", (WAD + 1,), topP=WAD + 1)
    reverts("PartiesNotDistinct", verifier=a.drafter)
    reverts("PartiesNotDistinct", sender=a.drafter)
    reverts("PartiesNotDistinct", sender=a.verifier)
    reverts("DrafterNotActive", (a.outsider,), drafter=a.outsider)
    reverts("DrafterNotActive", (a.drafter,), draftModel=OTHER_MODEL)
    reverts("DrafterNotActive", (a.drafter,), targetModel=OTHER_MODEL)  # drafts for another target
    reverts("DrafterNotActive", (a.referees[0],), drafter=a.referees[0])  # wrong role
    reverts("VerifierNotActive", (a.outsider,), verifier=a.outsider)
    reverts("VerifierNotActive", (a.referees[0],), verifier=a.referees[0])
    req = job_request(env)
    reverts("InsufficientEscrow", (escrow_for(req) - 1, escrow_for(req)), value=escrow_for(req) - 1)
    reverts("InsufficientEscrow", (0, escrow_for(req)), value=0)
    # an escrow that does not fit the job's uint96 field is refused as such, not as too little
    env.w3.provider.make_request("anvil_setBalance", [a.requester, hex(2**97)])
    reverts("EscrowTooLarge", (2**96, 2**96 - 1), value=2**96)
    # An unbonding verifier takes no new jobs.
    transact(env.w3, env.registry.functions.requestUnbond(), a.verifier)
    reverts("VerifierNotActive", (a.verifier,))


# ---------------------------------------------------------------- acceptJob


def test_accept_job(chain, env):
    w3, m = env.w3, env.market
    job_id = submit_job(env)
    head = P.hash_chain(SEED, 32)
    receipt = transact(w3, m.functions.acceptJob(job_id, head), env.actors.verifier)
    assert events(m, receipt, "JobAccepted")[0].args.chainHead == head
    job = job_view(env, job_id)
    assert (job["status"], job["phase"], job["cycle"]) == (STATUS_RUNNING, PHASE_DRAFT, 0)
    assert job["deadline"] == w3.eth.get_block(receipt.blockNumber)["timestamp"] + env.params.commit_timeout


def test_accept_job_reverts(chain, env):
    a, m = env.actors, env.market.functions
    head = P.hash_chain(SEED, 32)
    expect_revert(env, m.acceptJob(99, head), a.verifier, "JobWrongStatus", (99, STATUS_NONE))
    job_id = submit_job(env)
    expect_revert(env, m.acceptJob(job_id, head), a.drafter, "NotJobVerifier", (a.drafter,))
    expect_revert(env, m.acceptJob(job_id, head), a.outsider, "NotJobVerifier", (a.outsider,))
    expect_revert(env, m.acceptJob(job_id, b"\0" * 32), a.verifier, "ZeroChainHead")
    transact(env.w3, m.acceptJob(job_id, head), a.verifier)
    expect_revert(env, m.acceptJob(job_id, head), a.verifier, "JobWrongStatus", (job_id, STATUS_RUNNING))
    late = submit_job(env)
    deadline = job_view(env, late)["deadline"]
    advance(env.w3, env.params.accept_timeout + 1)
    expect_revert(env, m.acceptJob(late, head), a.verifier, "DeadlinePassed", (deadline,))


# ---------------------------------------------------------------- commitDraft


def test_commit_draft(chain, env):
    w3, m = env.w3, env.market
    runner = running_job(env)
    draft = make_draft(runner.job_id, 0, 4)
    receipt = runner.commit(draft)
    (ev,) = events(m, receipt, "DraftCommitted")
    assert (ev.args.jobId, ev.args.cycle, ev.args.draftRoot) == (runner.job_id, 0, draft.root)
    assert unpack_draft(ev.args.draft) == (draft.tokens, draft.q)
    job = job_view(env, runner.job_id)
    assert (job["status"], job["phase"], job["cycle"]) == (STATUS_RUNNING, PHASE_VERIFY, 0)
    accepted_at = w3.eth.get_block(receipt.blockNumber - 1)["timestamp"]  # acceptJob's block
    assert job["deadline"] == accepted_at + env.params.commit_timeout + env.params.verify_timeout


def test_commit_draft_reverts(chain, env):
    a, m = env.actors, env.market.functions
    open_job = submit_job(env)
    draft = make_draft(open_job, 0, 4)
    expect_revert(
        env,
        m.commitFirstDraft(open_job, draft.root, draft.tokens, draft.q, 1),
        a.drafter,
        "JobWrongStatus",
        (open_job, STATUS_OPEN),
    )
    runner = running_job(env)
    j = runner.job_id
    d = make_draft(j, 0, 4)
    # cycle 0 goes through commitFirstDraft, with the drafter's salt
    expect_revert(env, m.commitDraft(j, 0, d.root, d.tokens, d.q), a.drafter, "FirstDraftNeedsSalt")

    def reverts(error, args=None, sender=a.drafter, cycle=0, root=None, tokens=None, q=None):
        root, tokens, q = (
            d.root if root is None else root,
            d.tokens if tokens is None else tokens,
            d.q if q is None else q,
        )
        fn = m.commitFirstDraft(j, root, tokens, q, 99) if cycle == 0 else m.commitDraft(j, cycle, root, tokens, q)
        expect_revert(env, fn, sender, error, args)

    reverts("NotJobDrafter", (a.verifier,), sender=a.verifier)
    reverts("NotJobDrafter", (a.outsider,), sender=a.outsider)
    reverts("WrongCycle", (0, 1), cycle=1)
    reverts("GammaLengthMismatch", (4, 3), tokens=d.tokens[:3])
    reverts("GammaLengthMismatch", (4, 5), tokens=d.tokens + [5])
    reverts("GammaLengthMismatch", (4, 3), q=d.q[:3])
    reverts("SpecMathZeroDraftProbability", (2,), q=[d.q[0], d.q[1], 0, d.q[3]])
    reverts("SpecMathProbabilityAboveWad", (1, WAD + 1), q=[d.q[0], WAD + 1, d.q[2], d.q[3]])
    reverts("RootMismatch", (d.root, b"\x11" * 32), root=b"\x11" * 32)
    other = Draft(j, 0, d.tokens[::-1], d.q)
    reverts("RootMismatch", (other.root, d.root), tokens=other.tokens)
    # A root computed for another job or cycle does not match either.
    reverts("RootMismatch", (d.root, make_draft(j + 1, 0, 4).root), root=P.draft_root(j + 1, 0, d.tokens, d.q))
    runner.commit(d)
    reverts("WrongPhase", (j, PHASE_VERIFY))  # a second draft before the verification


def test_commit_draft_rejects_token_ids_above_uint32(chain, env):
    """Raw calldata: web3 refuses to encode such a value, a hostile client does not."""
    runner = running_job(env)
    d = make_draft(runner.job_id, 0, 4)
    selector = function_signature_to_4byte_selector("commitFirstDraft(uint256,bytes32,uint32[],uint64[],uint64)")
    tokens = d.tokens[:2] + [2**32 + 5] + d.tokens[3:]
    data = selector + abi_encode(
        ["uint256", "bytes32", "uint256[]", "uint64[]", "uint64"], [runner.job_id, d.root, tokens, d.q, 7]
    )
    with pytest.raises(ContractCustomError) as info:
        env.w3.eth.call({"from": env.actors.drafter, "to": env.market.address, "data": "0x" + data.hex()})
    assert decode_error(info.value.data, env.market) == ("TokenOutOfRange", (2, 2**32 + 5))


# ---------------------------------------------------------------- submitVerification


@pytest.mark.parametrize("gamma", [1, 3, 4, 7, 16])
def test_verification_matches_protocol(chain, env, gamma):
    """Random-looking p: the contract's accept count, record hash and output equal node/protocol.py's."""
    w3, m = env.w3, env.market
    runner = running_job(env, gamma=gamma, maxTokens=200)
    for cycle in range(3):
        draft = make_draft(runner.job_id, cycle, gamma)
        runner.commit(draft)
        reveal = runner.reveal(cycle)
        root = draft.root
        p = [(int.from_bytes(keccak(bytes([cycle, i, gamma])), "big") % WAD) for i in range(gamma)]
        p[0] = draft.q[0]  # at least the first proposal is accepted (p ≥ q)
        n = P.count_accepted(reveal, root, draft.q, p, runner.salt)
        out_token = 4000 + cycle
        before = job_view(env, runner.job_id)
        receipt = transact(w3, runner.verify_fn(draft, p, out_token), env.actors.verifier)
        (ev,) = events(m, receipt, "CycleVerified")
        assert (ev.args.cycle, ev.args.reveal, ev.args.accepted, ev.args.outToken) == (cycle, reveal, n, out_token)
        assert unpack_output(ev.args.output) == draft.tokens[:n] + [out_token]
        assert m.functions.cycleRecordHash(runner.job_id, cycle).call() == P.cycle_record_hash(root, p, n, out_token)
        job = job_view(env, runner.job_id)
        assert job["cycle"] == cycle + 1 and job["phase"] == PHASE_DRAFT
        assert job["emitted"] == before["emitted"] + n + 1
        assert job["rejected"] == before["rejected"] + (1 if n < gamma else 0)
        assert job["drafterTokens"] == before["drafterTokens"] + n
        assert job["deadline"] == w3.eth.get_block(receipt.blockNumber)["timestamp"] + env.params.commit_timeout
    assert m.functions.cycleRecordHash(runner.job_id, 3).call() == b"\0" * 32


def test_forced_accept_counts(chain, env):
    runner = running_job(env, maxTokens=200)
    for cycle, accept in enumerate([0, 1, 2, 3, 4, 4, 0]):
        _, receipt, _ = runner.cycle(cycle, accept, realistic=cycle % 2 == 1)
        assert events(env.market, receipt, "CycleVerified")[0].args.accepted == accept


def test_submit_verification_reverts(chain, env):
    a, m = env.actors, env.market.functions
    runner = running_job(env)
    j = runner.job_id
    d = make_draft(j, 0, 4)
    p = forcing_p(4, 2)
    r0 = runner.reveal(0)

    def reverts(error, args=None, sender=a.verifier, cycle=0, tokens=None, q=None, pp=None, reveal=None):
        fn = m.submitVerification(
            j,
            cycle,
            d.tokens if tokens is None else tokens,
            d.q if q is None else q,
            p if pp is None else pp,
            r0 if reveal is None else reveal,
            9,
        )
        expect_revert(env, fn, sender, error, args)

    reverts("WrongPhase", (j, PHASE_DRAFT))  # no draft committed yet
    runner.commit(d)
    reverts("NotJobVerifier", (a.drafter,), sender=a.drafter)
    reverts("NotJobVerifier", (a.outsider,), sender=a.outsider)
    reverts("WrongCycle", (0, 1), cycle=1)
    reverts("GammaLengthMismatch", (4, 3), tokens=d.tokens[:3])
    reverts("GammaLengthMismatch", (4, 3), q=d.q[:3])
    reverts("GammaLengthMismatch", (4, 5), pp=p + [1])
    reverts("SpecMathProbabilityAboveWad", (3, WAD + 1), pp=p[:3] + [WAD + 1])
    reverts("CommitmentMismatch", reveal=runner.reveal(1))  # not the preimage of the head
    reverts("CommitmentMismatch", reveal=P.hash_chain(SEED, runner.length))  # the head itself
    reverts("CommitmentMismatch", tokens=d.tokens[:3] + [d.tokens[3] + 1])  # not the committed draft
    reverts("CommitmentMismatch", q=d.q[:3] + [d.q[3] - 1])
    runner.verify(d, p)
    # The next cycle needs the next reveal of the chain, not the same one again.
    d1 = make_draft(j, 1, 4)
    runner.commit(d1)
    fn = m.submitVerification(j, 1, d1.tokens, d1.q, p, r0, 9)
    expect_revert(env, fn, a.verifier, "CommitmentMismatch")
    transact(env.w3, m.submitVerification(j, 1, d1.tokens, d1.q, p, runner.reveal(1), 9), a.verifier)


def test_late_draft_and_verification_revert(chain, env):
    a, w3 = env.actors, env.w3
    runner = running_job(env)
    j = runner.job_id
    d = make_draft(j, 0, 4)
    deadline = job_view(env, j)["deadline"]
    advance(w3, env.params.commit_timeout + 1)
    expect_revert(env, runner.commit_fn(d), a.drafter, "DeadlinePassed", (deadline,))

    runner = running_job(env)
    j = runner.job_id
    d = make_draft(j, 0, 4)
    advance(w3, env.params.commit_timeout - 30)  # a late but valid draft...
    runner.commit(d)
    deadline = job_view(env, j)["deadline"]
    advance(w3, 60)  # ...still leaves the verifier verifyTimeout after the draft deadline
    runner.verify(d, forcing_p(4, 1))
    d1 = make_draft(j, 1, 4)
    runner.commit(d1)
    deadline = job_view(env, j)["deadline"]
    advance(w3, env.params.commit_timeout + env.params.verify_timeout + 1)
    fn = runner.verify_fn(d1, forcing_p(4, 1), 9)
    expect_revert(env, fn, a.verifier, "DeadlinePassed", (deadline,))


# ---------------------------------------------------------------- ending a job, truncation, settlement


def finish(env, runner: JobRunner, cycles: list[int], out_tokens: list[int] | None = None):
    receipts = []
    for cycle, accept in enumerate(cycles):
        out = (out_tokens or [777] * len(cycles))[cycle]
        receipts.append(runner.cycle(cycle, accept, out_token=out))
    return receipts


def test_job_ends_at_max_tokens_and_settles_to_the_wei(chain, env):
    w3, a, m = env.w3, env.actors, env.market
    req = job_request(env, maxTokens=10)
    value = escrow_for(req) + 1234
    transact(w3, m.functions.submitJob(req, b"\x07"), a.requester, value)
    runner = JobRunner(env, m.functions.jobCount().call())
    runner.accept()
    # cycles: 3+1, 4+1 = 9 tokens; the third cycle accepts 2 but only 1 token fits: the outToken is cut.
    receipts = finish(env, runner, [3, 4, 2])
    last = receipts[-1][1]
    (ev,) = events(m, last, "CycleVerified")
    assert unpack_output(ev.args.output) == receipts[-1][2].tokens[:1]
    (fin,) = events(m, last, "JobFinished")
    assert (fin.args.reason, fin.args.party, fin.args.slashed) == (REASON_COMPLETED, ZERO_ADDRESS, 0)
    job = job_view(env, runner.job_id)
    assert (job["status"], job["emitted"], job["cycle"], job["drafterTokens"]) == (STATUS_FINISHED, 10, 3, 8)
    assert job["deadline"] == w3.eth.get_block(last.blockNumber)["timestamp"] + env.params.challenge_window
    # Nothing more can be drafted.
    expect_no_more_drafts(env, runner, 3)
    expect_revert(env, m.functions.finalize(runner.job_id), a.outsider, "DeadlineNotPassed", (job["deadline"],))
    advance(w3, env.params.challenge_window + 1)
    receipt = transact(w3, m.functions.finalize(runner.job_id), a.outsider)
    # An α-eligible job: alphaFeeBps of the passes' price goes from the verifier's pay to the treasury.
    fee = 3 * PRICE_PASS * env.params.alpha_fee_bps // 10_000
    drafter_pay, verifier_pay = 8 * PRICE_ACCEPTED, 3 * PRICE_PASS - fee
    refund = value - drafter_pay - verifier_pay - fee
    (ev,) = events(m, receipt, "JobFinalized")
    assert (ev.args.drafterPay, ev.args.verifierPay, ev.args.refund) == (drafter_pay, verifier_pay, refund)
    (paid,) = events(m, receipt, "AlphaFeePaid")
    assert (paid.args.jobId, paid.args.treasury, paid.args.amount) == (runner.job_id, env.params.treasury, fee)
    # α is recorded at finalize: the 8 accepted proposals emitted; the last cycle's rejection lay after the cut.
    (rec,) = events(m, receipt, "AlphaCyclesRecorded")
    assert (rec.args.drafter, rec.args.cycles, rec.args.accepted, rec.args.rejected) == (a.drafter, 3, 8, 1)
    assert [m.functions.owed(x).call() for x in (a.drafter, a.verifier, a.requester, env.params.treasury)] == [
        drafter_pay,
        verifier_pay,
        refund,
        fee,
    ]
    assert m.functions.jobStatus(runner.job_id).call() == STATUS_FINALIZED
    assert locks(env, a.drafter) == 0 and locks(env, a.verifier) == 0
    expect_revert(
        env, m.functions.finalize(runner.job_id), a.outsider, "JobWrongStatus", (runner.job_id, STATUS_FINALIZED)
    )
    for who, amount in ((a.drafter, drafter_pay), (a.verifier, verifier_pay), (a.requester, refund)):
        balance = w3.eth.get_balance(who)
        receipt = transact(w3, m.functions.withdraw(), who)
        assert w3.eth.get_balance(who) == balance + amount - paid_gas(w3, receipt)
        assert events(m, receipt, "Withdrawn")[0].args.amount == amount
        expect_revert(env, m.functions.withdraw(), who, "NothingOwed")


def test_eos_among_accepted_proposals_ends_the_job(chain, env):
    runner = running_job(env, maxTokens=50)
    finish(env, runner, [2])
    draft = make_draft(runner.job_id, 1, 4)
    draft.tokens[1] = EOS
    _, receipt, _ = runner.cycle(1, 4, draft=draft)
    (ev,) = events(env.market, receipt, "CycleVerified")
    assert unpack_output(ev.args.output) == draft.tokens[:2]  # cut right after EOS
    job = job_view(env, runner.job_id)
    assert (job["status"], job["emitted"], job["drafterTokens"]) == (STATUS_FINISHED, 3 + 2, 2 + 2)


def test_out_token_eos_ends_the_job(chain, env):
    runner = running_job(env, maxTokens=50)
    receipts = finish(env, runner, [1, 3], out_tokens=[777, EOS])
    (ev,) = events(env.market, receipts[-1][1], "CycleVerified")
    assert unpack_output(ev.args.output) == receipts[-1][2].tokens[:3] + [EOS]
    job = job_view(env, runner.job_id)
    assert (job["status"], job["emitted"], job["drafterTokens"]) == (STATUS_FINISHED, 2 + 4, 4)


def test_finalize_reverts(chain, env):
    a, m = env.actors, env.market.functions
    job_id = submit_job(env)
    expect_revert(env, m.finalize(job_id), a.outsider, "JobWrongStatus", (job_id, STATUS_OPEN))
    runner = running_job(env)
    expect_revert(env, m.finalize(runner.job_id), a.outsider, "JobWrongStatus", (runner.job_id, STATUS_RUNNING))
    expect_revert(env, m.finalize(1234), a.outsider, "JobWrongStatus", (1234, STATUS_NONE))


# ---------------------------------------------------------------- timeouts


def test_accept_timeout_cancels_without_slash(chain, env):
    w3, a, m = env.w3, env.actors, env.market
    job_id = submit_job(env)
    deadline = job_view(env, job_id)["deadline"]
    expect_revert(env, m.functions.claimTimeout(job_id), a.outsider, "DeadlineNotPassed", (deadline,))
    stakes = [env.registry.functions.stakeOf(x).call() for x in (a.drafter, a.verifier)]
    advance(w3, env.params.accept_timeout + 1)
    receipt = transact(w3, m.functions.claimTimeout(job_id), a.outsider)
    (fin,) = events(m, receipt, "JobFinished")
    assert (fin.args.reason, fin.args.party, fin.args.slashed) == (REASON_ACCEPT_TIMEOUT, ZERO_ADDRESS, 0)
    assert m.functions.jobStatus(job_id).call() == STATUS_FINALIZED
    assert m.functions.owed(a.requester).call() == escrow_for(job_request(env))
    assert [env.registry.functions.stakeOf(x).call() for x in (a.drafter, a.verifier)] == stakes
    assert locks(env, a.drafter) == 0 and locks(env, a.verifier) == 0


def test_first_draft_timeout_cancels_without_slash(chain, env):
    w3, a, m = env.w3, env.actors, env.market
    runner = running_job(env)
    stake = env.registry.functions.stakeOf(a.drafter).call()
    advance(w3, env.params.commit_timeout + 1)
    receipt = transact(w3, m.functions.claimTimeout(runner.job_id), a.outsider)
    (fin,) = events(m, receipt, "JobFinished")
    assert (fin.args.reason, fin.args.party, fin.args.slashed) == (REASON_DRAFT_TIMEOUT, ZERO_ADDRESS, 0)
    assert env.registry.functions.stakeOf(a.drafter).call() == stake
    assert m.functions.jobStatus(runner.job_id).call() == STATUS_FINALIZED  # nothing verified: settled at once
    assert m.functions.owed(a.requester).call() == escrow_for(job_request(env))


def test_draft_timeout_after_first_cycle_slashes_drafter(chain, env):
    w3, a, m, p = env.w3, env.actors, env.market, env.params
    runner = running_job(env)
    finish(env, runner, [2])
    deadline = job_view(env, runner.job_id)["deadline"]
    expect_revert(env, m.functions.claimTimeout(runner.job_id), a.outsider, "DeadlineNotPassed", (deadline,))
    stake = env.registry.functions.stakeOf(a.drafter).call()
    advance(w3, p.commit_timeout + 1)
    receipt = transact(w3, m.functions.claimTimeout(runner.job_id), a.outsider)
    (fin,) = events(m, receipt, "JobFinished")
    assert (fin.args.reason, fin.args.party, fin.args.slashed) == (REASON_DRAFT_TIMEOUT, a.drafter, p.timeout_slash)
    assert env.registry.functions.stakeOf(a.drafter).call() == stake - p.timeout_slash
    assert m.functions.owed(a.requester).call() == 0  # burnt, never the requester's (v1.2)
    assert m.functions.owed(BURN_ADDRESS).call() == p.timeout_slash
    assert m.functions.jobStatus(runner.job_id).call() == STATUS_FINISHED
    expect_revert(
        env, m.functions.claimTimeout(runner.job_id), a.outsider, "JobWrongStatus", (runner.job_id, STATUS_FINISHED)
    )
    advance(w3, p.challenge_window + 1)
    transact(w3, m.functions.finalize(runner.job_id), a.outsider)
    escrow = escrow_for(job_request(env))
    fee = PRICE_PASS * p.alpha_fee_bps // 10_000  # a drafter timeout does not stop the job's cycles counting
    assert m.functions.owed(a.drafter).call() == 2 * PRICE_ACCEPTED
    assert m.functions.owed(a.verifier).call() == PRICE_PASS - fee
    assert p.treasury == BURN_ADDRESS  # the default treasury burns too: the α fee and the slash in one balance
    assert m.functions.owed(p.treasury).call() == fee + p.timeout_slash
    assert m.functions.owed(a.requester).call() == escrow - 2 * PRICE_ACCEPTED - PRICE_PASS


def test_verify_timeout_slashes_verifier(chain, env):
    w3, a, m, p = env.w3, env.actors, env.market, env.params
    runner = running_job(env)
    runner.commit(make_draft(runner.job_id, 0, 4))
    deadline = job_view(env, runner.job_id)["deadline"]
    advance(w3, p.commit_timeout + 1)  # past the draft deadline, not the verification deadline
    expect_revert(env, m.functions.claimTimeout(runner.job_id), a.outsider, "DeadlineNotPassed", (deadline,))
    stake = env.registry.functions.stakeOf(a.verifier).call()
    advance(w3, p.verify_timeout)
    receipt = transact(w3, m.functions.claimTimeout(runner.job_id), a.outsider)
    (fin,) = events(m, receipt, "JobFinished")
    assert (fin.args.reason, fin.args.party, fin.args.slashed) == (REASON_VERIFY_TIMEOUT, a.verifier, p.timeout_slash)
    assert env.registry.functions.stakeOf(a.verifier).call() == stake - p.timeout_slash
    # No cycle was verified: the job settles at once, the requester gets its escrow back and the slash is burnt.
    assert m.functions.jobStatus(runner.job_id).call() == STATUS_FINALIZED
    assert m.functions.owed(a.requester).call() == escrow_for(job_request(env))
    assert m.functions.owed(BURN_ADDRESS).call() == p.timeout_slash
    assert locks(env, a.verifier) == 0


def test_claim_timeout_on_unknown_job(chain, env):
    expect_revert(env, env.market.functions.claimTimeout(77), env.actors.outsider, "JobWrongStatus", (77, STATUS_NONE))


# ---------------------------------------------------------------- ETH in and out


def test_market_refuses_plain_eth(chain, env):
    receipt = send_eth(env.w3, env.actors.outsider, env.market.address, 1)
    assert receipt.status == 0
    with pytest.raises(ContractCustomError) as info:
        env.w3.eth.call({"from": env.actors.outsider, "to": env.market.address, "value": 1})
    assert decode_error(info.value.data, env.market) == ("UnexpectedSender", (env.actors.outsider,))


def test_withdraw_to_a_contract_that_refuses_eth(chain, env):
    """Pull payments: a recipient that rejects ETH only hurts itself (MarketTransferFailed, balance kept)."""
    w3, a, m = env.w3, env.actors, env.market
    sink = impersonate(w3, deploy_contract(w3, "SpecMathHarness").address)  # a contract with no receive()
    req = job_request(env, maxTokens=3)
    transact(w3, m.functions.submitJob(req, b"\x01"), sink, escrow_for(req))
    job_id = m.functions.jobCount().call()
    advance(w3, env.params.accept_timeout + 1)
    transact(w3, m.functions.claimTimeout(job_id), a.outsider)
    assert m.functions.owed(sink).call() == escrow_for(req)
    expect_revert(env, m.functions.withdraw(), sink, "MarketTransferFailed")


def test_constructor_and_wiring_parameter_checks(chain, env):
    w3, a = env.w3, env.actors
    good = [env.registry.address, 60, 60, 60, 600, 0, 4, WAD // 10, 1000, 10**12, 1000, a.outsider]
    for index, bad in ((0, ZERO_ADDRESS), (1, 0), (2, 0), (3, 0), (4, 0)):
        args = list(good)
        args[index] = bad
        with pytest.raises(ContractCustomError) as info:
            deploy_contract(w3, "InferenceMarket", *args)
        assert decode_error(info.value.data, env.market)[0] == "BadParams"
    for index, bad in ((6, 0), (6, 2**24 + 1), (7, WAD + 1), (8, 10_001), (9, 2**128), (10, 10_001)):
        args = list(good)
        args[index] = bad
        with pytest.raises(ContractCustomError) as info:
            deploy_contract(w3, "InferenceMarket", *args)
        assert decode_error(info.value.data, env.market)[0] == "BadAlphaParams"
    args = list(good)
    args[11] = ZERO_ADDRESS
    with pytest.raises(ContractCustomError) as info:
        deploy_contract(w3, "InferenceMarket", *args)
    assert decode_error(info.value.data, env.market)[0] == "ZeroTreasury"
    market = deploy_contract(w3, "InferenceMarket", *good, sender=a.deployer)
    with pytest.raises(ContractCustomError) as info:
        market.functions.setDisputeManager(ZERO_ADDRESS).transact({"from": a.deployer})
    assert decode_error(info.value.data, env.market)[0] == "BadParams"


def test_withdraw_nothing_owed(chain, env):
    expect_revert(env, env.market.functions.withdraw(), env.actors.outsider, "NothingOwed")


# ---------------------------------------------------------------- dispute hooks


@pytest.fixture(scope="module")
def hooked(w3):
    """A deployment whose dispute manager is a plain account, so tests can drive the hooks directly."""
    e = build_env(w3, with_disputes=False)
    transact(w3, e.market.functions.setDisputeManager(e.actors.spare[7]), e.actors.deployer)
    return e


def test_set_dispute_manager_once_by_deployer(chain, hooked):
    m, a = hooked.market.functions, hooked.actors
    assert m.disputeManager().call() == a.spare[7]
    expect_revert(hooked, m.setDisputeManager(a.outsider), a.outsider, "MarketNotDeployer", (a.outsider,))
    expect_revert(hooked, m.setDisputeManager(a.outsider), a.deployer, "MarketAlreadyWired")


def test_dispute_hooks_reject_outsiders_and_bad_states(chain, hooked):
    m, a = hooked.market.functions, hooked.actors
    dm = a.spare[7]
    job_id = submit_job(hooked)
    expect_revert(hooked, m.disputeOpened(job_id), a.outsider, "NotDisputeManager", (a.outsider,))
    expect_revert(hooked, m.disputeClosed(job_id, a.drafter, True), a.requester, "NotDisputeManager", (a.requester,))
    expect_revert(hooked, m.disputeOpened(job_id), dm, "JobWrongStatus", (job_id, STATUS_OPEN))
    expect_revert(hooked, m.disputeClosed(job_id, a.drafter, True), dm, "NoOpenDispute", (job_id,))


def test_open_dispute_blocks_finalize_and_a_lost_dispute_forfeits(chain, hooked):
    w3, m, a, p = hooked.w3, hooked.market, hooked.actors, hooked.params
    dm = a.spare[7]
    runner = running_job(hooked)
    finish(hooked, runner, [3, 1])
    receipt = transact(w3, m.functions.disputeOpened(runner.job_id), dm)
    assert events(m, receipt, "DisputeOpened")[0].args.open == 1
    transact(w3, m.functions.disputeOpened(runner.job_id), dm)
    # The drafter lost: the running job stops at once.
    receipt = transact(w3, m.functions.disputeClosed(runner.job_id, a.drafter, True), dm)
    (closed,) = events(m, receipt, "DisputeClosed")
    assert (closed.args.accused, closed.args.accusedLost, closed.args.open) == (a.drafter, True, 1)
    (fin,) = events(m, receipt, "JobFinished")
    assert (fin.args.reason, fin.args.party) == (REASON_DISPUTE, a.drafter)
    job = job_view(hooked, runner.job_id)
    assert (job["status"], job["drafterForfeited"], job["verifierForfeited"]) == (STATUS_FINISHED, True, False)
    expect_no_more_drafts(hooked, runner, 2)
    advance(w3, p.challenge_window + 1)
    expect_revert(hooked, m.functions.finalize(runner.job_id), a.outsider, "DisputesOpen", (1,))
    transact(w3, m.functions.disputeClosed(runner.job_id, a.verifier, False), dm)  # the verifier was faithful
    transact(w3, m.functions.finalize(runner.job_id), a.outsider)
    escrow = escrow_for(job_request(hooked))
    assert m.functions.owed(a.drafter).call() == 0  # forfeited to the requester
    assert m.functions.owed(a.verifier).call() == 2 * PRICE_PASS
    assert m.functions.owed(a.requester).call() == escrow - 2 * PRICE_PASS
    expect_revert(
        hooked, m.functions.disputeOpened(runner.job_id), dm, "JobWrongStatus", (runner.job_id, STATUS_FINALIZED)
    )


def test_lost_dispute_of_verifier_on_finished_job(chain, hooked):
    w3, m, a, p = hooked.w3, hooked.market, hooked.actors, hooked.params
    dm = a.spare[7]
    runner = running_job(hooked, maxTokens=5)
    finish(hooked, runner, [4])
    transact(w3, m.functions.disputeOpened(runner.job_id), dm)
    receipt = transact(w3, m.functions.disputeClosed(runner.job_id, a.verifier, True), dm)
    assert events(m, receipt, "JobFinished") == []  # already finished
    advance(w3, p.challenge_window + 1)
    transact(w3, m.functions.finalize(runner.job_id), a.outsider)
    escrow = escrow_for(job_request(hooked, maxTokens=5))
    assert m.functions.owed(a.drafter).call() == 4 * PRICE_ACCEPTED
    assert m.functions.owed(a.verifier).call() == 0
    assert m.functions.owed(a.requester).call() == escrow - 4 * PRICE_ACCEPTED


# ---------------------------------------------------------------- gas and size


def test_contracts_fit_the_code_size_limit(env):
    for contract in (env.market, env.registry, env.system.transcript, env.system.disputes):
        assert len(env.w3.eth.get_code(contract.address)) <= 24_576, contract.address


def test_gas_per_cycle(chain, env, capsys):
    """commitDraft + submitVerification, both transactions all-in (21000 base, calldata, execution)."""
    table = {gamma: measure_cycle_gas(env.w3, gamma, env=env) for gamma in (1, 4, 8, 16)}
    with capsys.disabled():
        print(
            "\ngas per cycle (commitDraft + submitVerification):",
            {g: (t["commitDraft"], t["submitVerification"], t["total"]) for g, t in table.items()},
        )
    assert table[4]["total"] <= 110_000
    assert table[1]["total"] < table[4]["total"] < table[8]["total"] < table[16]["total"]
