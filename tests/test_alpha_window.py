"""The α window (inherited by the market) on a real anvil chain: accrual per job, recorded at finalize, sliding
buckets, slashing an under-performing drafter (to the treasury, capped at a window's cycles at the price floor),
never slashing one that meets its claim, which jobs count (reference sampling, price floor, no conviction, no
verifier timeout), the α fee, claim rules. The attacks of issue 10 on the α window: tests/test_alpha_attacks.py."""

from __future__ import annotations

import pytest

from chainutil import (
    ALPHA_STAR,
    EOS,
    VOCAB,
    WAD,
    JobRunner,
    advance,
    build_env,
    events,
    expect_revert,
    impersonate,
    job_request,
    job_view,
    make_draft,
    submit_job,
    transact,
)
from node.chain.params import BURN_ADDRESS, DEFAULT_PARAMS

BUCKET = 2  # cycles per bucket: a full window is 8 buckets of (at least) 2 cycles
TAU = DEFAULT_PARAMS.alpha_tolerance
FLOOR = DEFAULT_PARAMS.alpha_price_floor


@pytest.fixture(scope="module")
def aenv(w3):
    return build_env(w3, DEFAULT_PARAMS.with_(alpha_bucket_cycles=BUCKET))


def window(env, drafter=None) -> tuple:
    return tuple(env.market.functions.alphaWindowOf(drafter or env.actors.drafter).call())


def set_claim(env, alpha_star: int) -> None:
    transact(env.w3, env.registry.functions.setAlphaStar(alpha_star), env.actors.drafter)


def finalize(env, job_id: int):
    """Let the challenge window pass and settle the job; returns the finalize receipt (α is recorded there)."""
    advance(env.w3, env.params.challenge_window + 1)
    return transact(env.w3, env.market.functions.finalize(job_id), env.actors.outsider)


def run_job(env, accepts: list[int], eligible: bool = True, gamma: int = 4, settle: bool = True, **overrides):
    """One job of len(accepts) cycles, ended by an EOS outToken in its last cycle, then (`settle`) finalized;
    returns (job id, the finalize receipt or the last cycle's)."""
    extra = {} if eligible else {"topK": 50}
    runner = JobRunner(env, submit_job(env, gamma=gamma, maxTokens=200, **extra, **overrides))
    runner.accept()
    receipt = None
    for cycle, accept in enumerate(accepts):
        out = EOS if cycle == len(accepts) - 1 else 777
        _, receipt, _ = runner.cycle(cycle, accept, out_token=out)
    assert job_view(env, runner.job_id)["status"] == 3  # Finished
    return runner.job_id, finalize(env, runner.job_id) if settle else receipt


def test_parameters(aenv):
    m = aenv.market.functions
    assert m.alphaBucketCycles().call() == BUCKET
    assert m.ALPHA_BUCKETS().call() == 8
    assert m.alphaTolerance().call() == TAU
    assert m.alphaSlashBps().call() == DEFAULT_PARAMS.alpha_slash_bps
    assert m.alphaPriceFloor().call() == FLOOR
    assert m.alphaFeeBps().call() == DEFAULT_PARAMS.alpha_fee_bps
    assert m.treasury().call() == BURN_ADDRESS == DEFAULT_PARAMS.treasury
    # A breach slashes alphaSlashBps of the stake, at most the α fees of a full window's cycles at the floor.
    cap = 8 * BUCKET * FLOOR * DEFAULT_PARAMS.alpha_fee_bps // 10_000
    assert m.alphaSlashAmount(10**18).call() == cap == aenv.params.alpha_slash(10**18)
    assert m.alphaSlashAmount(cap).call() == cap * DEFAULT_PARAMS.alpha_slash_bps // 10_000
    assert window(aenv) == (ALPHA_STAR, 0, 0, 0, 0)


def test_default_slash_is_capped_so_a_full_window_at_the_floor_costs_at_least_the_slash():
    """docs/contracts.md "Griefing": for every stake, the α fees of a full window at the floor (what even a requester
    with its own verifier burns) ≥ the slash, and what a requester alone pays for it, N × floor, ≥ 10 × the slash."""
    p = DEFAULT_PARAMS
    assert p.alpha_window_cycles == 512 and p.alpha_slash_cap == 512 * p.alpha_price_floor * p.alpha_fee_bps // 10_000
    for stake in (p.min_drafter_stake, 10 * p.min_drafter_stake, 10**6 * p.min_drafter_stake):
        slash = p.alpha_slash(stake)
        assert p.alpha_window_cycles * p.alpha_price_floor * p.alpha_fee_bps // 10_000 >= slash > 0
        assert p.alpha_window_cycles * p.alpha_price_floor >= 10 * slash


def test_cycles_accrue_per_job_and_enter_the_window_at_finalize(chain, aenv):
    runner = JobRunner(aenv, submit_job(aenv, maxTokens=200))
    runner.accept()
    runner.cycle(0, 4)
    runner.cycle(1, 2)
    assert job_view(aenv, runner.job_id)["rejected"] == 1
    _, receipt, _ = runner.cycle(2, 1, out_token=EOS)
    assert events(aenv.market, receipt, "AlphaCyclesRecorded") == []  # not when the job stops ...
    assert window(aenv) == (ALPHA_STAR, 0, 0, 0, 0)
    receipt = finalize(aenv, runner.job_id)  # ... but when it is settled
    (rec,) = events(aenv.market, receipt, "AlphaCyclesRecorded")
    # n accepted per cycle, plus one rejection for each cycle with n < K
    assert (rec.args.cycles, rec.args.accepted, rec.args.rejected) == (3, 4 + 2 + 1, 2)
    assert window(aenv) == (ALPHA_STAR, 3, 7, 2, 1)  # 3 ≥ BUCKET cycles: one bucket closed


def test_a_last_cycle_cut_before_its_out_token_counts_what_was_emitted(chain, aenv):
    runner = JobRunner(aenv, submit_job(aenv, maxTokens=3))
    runner.accept()
    runner.cycle(0, 4)  # 4 accepted, only 3 tokens fit
    assert job_view(aenv, runner.job_id)["drafterTokens"] == 3  # paid for what was emitted
    finalize(aenv, runner.job_id)
    assert window(aenv)[1:4] == (1, 3, 0)
    # 2 of 4 accepted, then EOS as the first proposal: the rejection lies after the cut and is not counted
    # (an unbiased truncation: neither the accepts nor the rejection after the cut are observed).
    runner = JobRunner(aenv, submit_job(aenv, maxTokens=50))
    runner.accept()
    draft = make_draft(runner.job_id, 0, 4)
    draft.tokens[0] = EOS
    runner.cycle(0, 2, draft=draft)
    job = job_view(aenv, runner.job_id)
    assert (job["emitted"], job["rejected"], job["drafterTokens"]) == (1, 0, 1)
    finalize(aenv, runner.job_id)
    assert window(aenv)[1:4] == (2, 4, 0)


def test_only_reference_sampling_jobs_at_the_price_floor_count(chain, aenv):
    job_id, _ = run_job(aenv, [0, 0, 0], eligible=False)
    assert job_view(aenv, job_id)["alphaEligible"] is False
    job_id, _ = run_job(aenv, [0, 0, 0], pricePerPass=FLOOR - 1)
    assert job_view(aenv, job_id)["alphaEligible"] is False
    assert window(aenv) == (ALPHA_STAR, 0, 0, 0, 0)
    job_id, receipt = run_job(aenv, [4], pricePerPass=FLOOR)
    assert window(aenv)[1:4] == (1, 4, 0)
    fee = FLOOR * aenv.params.alpha_fee_bps // 10_000
    (paid,) = events(aenv.market, receipt, "AlphaFeePaid")
    assert (paid.args.jobId, paid.args.amount) == (job_id, fee)


def test_the_alpha_fee_is_paid_out_of_the_verifiers_pay_to_the_treasury(chain, aenv):
    a, m, p = aenv.actors, aenv.market.functions, aenv.params
    price = 5 * FLOOR
    job_id, receipt = run_job(aenv, [3, 1], pricePerPass=price)
    fee = 2 * price * p.alpha_fee_bps // 10_000
    (fin,) = events(aenv.market, receipt, "JobFinalized")
    assert fin.args.verifierPay == 2 * price - fee
    assert m.owed(a.verifier).call() == 2 * price - fee
    assert m.owed(p.treasury).call() == fee
    # escrow = drafter + verifier + fee + refund, to the wei
    escrow = job_view(aenv, job_id)["escrow"]
    assert escrow == fin.args.drafterPay + fin.args.verifierPay + fee + fin.args.refund


def test_a_drafter_timeout_counts_a_verifier_timeout_does_not(chain, aenv):
    a, m = aenv.actors, aenv.market.functions
    runner = JobRunner(aenv, submit_job(aenv, maxTokens=200))
    runner.accept()
    runner.cycle(0, 3)
    runner.cycle(1, 0)
    advance(aenv.w3, aenv.params.commit_timeout + 1)
    receipt = transact(aenv.w3, m.claimTimeout(runner.job_id), a.outsider)
    assert events(aenv.market, receipt, "AlphaCyclesRecorded") == []
    assert job_view(aenv, runner.job_id)["alphaEligible"] is True  # the drafter's own fault: its cycles count
    assert events(aenv.market, finalize(aenv, runner.job_id), "AlphaCyclesRecorded")[0].args.cycles == 2
    assert window(aenv)[1:4] == (2, 3, 2)
    # The verifier goes silent after two cycles of rejections: nothing of that job enters the window.
    transact(aenv.w3, aenv.registry.functions.addStake(), a.drafter, aenv.params.timeout_slash)  # active again
    runner = JobRunner(aenv, submit_job(aenv, maxTokens=200))
    runner.accept()
    runner.cycle(0, 0)
    runner.cycle(1, 0)
    runner.commit(make_draft(runner.job_id, 2, 4))
    advance(aenv.w3, aenv.params.commit_timeout + aenv.params.verify_timeout + 1)
    transact(aenv.w3, m.claimTimeout(runner.job_id), a.outsider)
    assert job_view(aenv, runner.job_id)["alphaEligible"] is False
    receipt = finalize(aenv, runner.job_id)
    assert events(aenv.market, receipt, "AlphaCyclesRecorded") == events(aenv.market, receipt, "AlphaFeePaid") == []
    assert window(aenv)[1:4] == (2, 3, 2)


@pytest.mark.long_run
def test_drafter_meeting_its_claim_is_never_slashed(chain, aenv):
    set_claim(aenv, WAD * 6 // 10)
    stake = aenv.registry.functions.stakeOf(aenv.actors.drafter).call()
    evaluations = []
    for _ in range(10):  # a full window and two slides
        _, receipt = run_job(aenv, [4, 3])
        evaluations += events(aenv.market, receipt, "AlphaWindowEvaluated")
        assert events(aenv.market, receipt, "AlphaSlashed") == []
    assert [e.args.breached for e in evaluations] == [False, False, False]
    assert evaluations[0].args.cycles == 16 and evaluations[0].args.accepted == 8 * 7
    assert aenv.registry.functions.stakeOf(aenv.actors.drafter).call() == stake
    assert window(aenv)[4] == 8  # the window stays full and keeps sliding


@pytest.mark.long_run
def test_exactly_at_the_tolerance_is_not_a_breach(chain, aenv):
    set_claim(aenv, WAD * 6 // 10)  # α* − τ = 0.5; one of four accepted every cycle gives α̂ = 0.5 exactly
    for _ in range(8):
        _, receipt = run_job(aenv, [1, 1])
    (ev,) = events(aenv.market, receipt, "AlphaWindowEvaluated")
    assert (ev.args.accepted, ev.args.rejected, ev.args.breached) == (16, 16, False)


@pytest.mark.long_run
def test_under_performing_drafter_is_slashed_to_the_treasury_and_window_restarts(chain, aenv):
    a, m, p = aenv.actors, aenv.market, aenv.params
    set_claim(aenv, WAD * 6 // 10 + 1)  # one wei above the previous test's boundary
    stake = aenv.registry.functions.stakeOf(a.drafter).call()
    fees = 0
    for i in range(8):
        job_id, receipt = run_job(aenv, [1, 1])
        fees += events(m, receipt, "AlphaFeePaid")[0].args.amount
        if i < 7:
            assert events(m, receipt, "AlphaWindowEvaluated") == []
    (ev,) = events(m, receipt, "AlphaWindowEvaluated")
    assert (ev.args.cycles, ev.args.accepted, ev.args.rejected, ev.args.breached) == (16, 16, 16, True)
    cap = 16 * FLOOR * p.alpha_fee_bps // 10_000
    slash = min(stake * p.alpha_slash_bps // 10_000, cap)
    assert slash == cap == m.functions.alphaSlashAmount(stake).call()  # the cap binds at a 1 ETH stake
    (slashed,) = events(m, receipt, "AlphaSlashed")
    assert (slashed.args.jobId, slashed.args.drafter, slashed.args.amount) == (job_id, a.drafter, slash)
    assert aenv.registry.functions.stakeOf(a.drafter).call() == stake - slash
    # Credited to the treasury (with the α fees), never to the requester: it only got its refunds.
    assert m.functions.owed(p.treasury).call() == slash + fees
    refund = events(m, receipt, "JobFinalized")[0].args.refund  # the same for each of the eight jobs
    assert m.functions.owed(a.requester).call() == 8 * refund
    assert window(aenv) == (WAD * 6 // 10 + 1, 0, 0, 0, 0)
    # After the restart the claim may be lowered.
    set_claim(aenv, WAD // 4)
    assert window(aenv)[0] == WAD // 4


@pytest.mark.long_run
def test_window_slides_bucket_by_bucket(chain, aenv):
    m = aenv.market
    set_claim(aenv, WAD * 9 // 10)  # breach below 0.8
    for _ in range(8):
        run_job(aenv, [4, 4])  # 8 accepted, 0 rejected per job
    # Bad jobs replace good ones one bucket at a time: b bad of 8 gives 8(8−b) / (8(8−b) + 2b).
    breached = []
    for _ in range(5):
        _, receipt = run_job(aenv, [0, 0])
        (ev,) = events(m, receipt, "AlphaWindowEvaluated")
        breached.append(ev.args.breached)
    # b = 4 gives exactly 0.8 (no breach); b = 5 gives 24/34 < 0.8.
    assert breached == [False, False, False, False, True]
    assert ev.args.accepted == 24 and ev.args.rejected == 10


def test_claim_cannot_be_lowered_while_the_window_is_open(chain, aenv):
    a, reg = aenv.actors, aenv.registry.functions
    run_job(aenv, [2])
    state = lambda: (window(aenv), tuple(reg.accountOf(a.drafter).call()))  # noqa: E731
    expect_revert(
        aenv,
        reg.setAlphaStar(ALPHA_STAR - 1),
        a.drafter,
        "AlphaWindowOpen",
        (a.drafter, ALPHA_STAR, ALPHA_STAR - 1),
        state=state,
    )
    set_claim(aenv, ALPHA_STAR + 1)  # raising is fine
    receipt = transact(aenv.w3, reg.setAlphaStar(ALPHA_STAR + 1), a.drafter)  # and so is keeping it
    (claim,) = events(aenv.market, receipt, "AlphaClaimSet")
    assert (claim.args.drafter, claim.args.alphaStar) == (a.drafter, ALPHA_STAR + 1)
    assert window(aenv)[0] == ALPHA_STAR + 1


def test_only_the_registry_sets_claims(chain, aenv):
    a, m = aenv.actors, aenv.market.functions
    state = lambda: window(aenv)  # noqa: E731
    expect_revert(aenv, m.alphaClaimSet(a.drafter, 1), a.drafter, "NotAlphaAuthority", (a.drafter,), state=state)
    expect_revert(aenv, m.alphaClaimSet(a.drafter, 1), a.deployer, "NotAlphaAuthority", (a.deployer,), state=state)
    registry = impersonate(aenv.w3, aenv.registry.address)
    transact(aenv.w3, m.alphaClaimSet(a.outsider, 5), registry)
    assert window(aenv, a.outsider)[0] == 5


def test_the_treasury_cannot_be_a_party_of_a_job(chain, w3):
    env = build_env(w3, DEFAULT_PARAMS.with_(treasury=w3.eth.accounts[7]))  # the outsider is the treasury
    a, m = env.actors, env.market.functions
    assert m.treasury().call() == a.outsider
    req = job_request(env)
    value = req["maxTokens"] * (req["pricePerAcceptedToken"] + req["pricePerPass"])
    expect_revert(env, m.submitJob(req, b"\x01"), a.outsider, "TreasuryIsParty", (a.outsider,), value=value)
    # ... nor the drafter or the verifier (the treasury registered as one)
    transact(
        w3, env.registry.functions.register(2, [req["targetModel"]], [VOCAB]), a.outsider, env.params.min_verifier_stake
    )
    bad = job_request(env, verifier=a.outsider)
    expect_revert(env, m.submitJob(bad, b"\x01"), a.requester, "TreasuryIsParty", (a.outsider,), value=value)
