"""The α window (inherited by the market) on a real anvil chain: accrual per job, sliding buckets,
slashing an under-performing drafter, never slashing one that meets its claim, claim rules."""

from __future__ import annotations

import pytest

from chainutil import (
    ALPHA_STAR,
    DRAFT_MODEL,
    EOS,
    ROLE_DRAFTER,
    TARGET_MODEL,
    VOCAB,
    WAD,
    JobRunner,
    advance,
    build_env,
    events,
    expect_revert,
    impersonate,
    job_view,
    submit_job,
    transact,
)
from node.chain.params import DEFAULT_PARAMS

BUCKET = 2  # cycles per bucket: a full window is 8 buckets of (at least) 2 cycles
TAU = DEFAULT_PARAMS.alpha_tolerance


@pytest.fixture(scope="module")
def aenv(w3):
    return build_env(w3, DEFAULT_PARAMS.with_(alpha_bucket_cycles=BUCKET))


def window(env, drafter=None) -> tuple:
    return tuple(env.market.functions.alphaWindowOf(drafter or env.actors.drafter).call())


def set_claim(env, alpha_star: int) -> None:
    transact(env.w3, env.registry.functions.setAlphaStar(alpha_star), env.actors.drafter)


def run_job(env, accepts: list[int], eligible: bool = True, gamma: int = 4):
    """One job of len(accepts) cycles, ended by an EOS outToken in its last cycle; returns the last receipt."""
    extra = {} if eligible else {"topK": 50}
    runner = JobRunner(env, submit_job(env, gamma=gamma, maxTokens=200, **extra))
    runner.accept()
    receipt = None
    for cycle, accept in enumerate(accepts):
        out = EOS if cycle == len(accepts) - 1 else 777
        _, receipt, _ = runner.cycle(cycle, accept, out_token=out)
    assert job_view(env, runner.job_id)["status"] == 3  # Finished
    return runner.job_id, receipt


def test_parameters(aenv):
    m = aenv.market.functions
    assert m.alphaBucketCycles().call() == BUCKET
    assert m.ALPHA_BUCKETS().call() == 8
    assert m.alphaTolerance().call() == TAU
    assert m.alphaSlashBps().call() == DEFAULT_PARAMS.alpha_slash_bps
    assert window(aenv) == (ALPHA_STAR, 0, 0, 0, 0)


def test_cycles_accrue_per_job_and_enter_the_window_when_it_stops(chain, aenv):
    runner = JobRunner(aenv, submit_job(aenv, maxTokens=200))
    runner.accept()
    runner.cycle(0, 4)
    runner.cycle(1, 2)
    assert window(aenv) == (ALPHA_STAR, 0, 0, 0, 0)  # nothing until the job stops
    assert job_view(aenv, runner.job_id)["rejected"] == 1
    _, receipt, _ = runner.cycle(2, 1, out_token=EOS)
    (rec,) = events(aenv.market, receipt, "AlphaCyclesRecorded")
    # n accepted per cycle, plus one rejection for each cycle with n < K
    assert (rec.args.cycles, rec.args.accepted, rec.args.rejected) == (3, 4 + 2 + 1, 2)
    assert window(aenv) == (ALPHA_STAR, 3, 7, 2, 1)  # 3 ≥ BUCKET cycles: one bucket closed


def test_truncated_last_cycle_counts_all_accepted_proposals(chain, aenv):
    runner = JobRunner(aenv, submit_job(aenv, maxTokens=3))
    runner.accept()
    runner.cycle(0, 4)  # 4 accepted, only 3 tokens fit
    assert job_view(aenv, runner.job_id)["drafterTokens"] == 3  # paid for what was emitted
    assert window(aenv)[1:4] == (1, 4, 0)  # α counts what the rule accepted


def test_only_reference_sampling_jobs_count(chain, aenv):
    run_job(aenv, [0, 0, 0], eligible=False)
    assert window(aenv) == (ALPHA_STAR, 0, 0, 0, 0)
    run_job(aenv, [4])
    assert window(aenv)[1:4] == (1, 4, 0)


def test_timed_out_job_counts(chain, aenv):
    runner = JobRunner(aenv, submit_job(aenv, maxTokens=200))
    runner.accept()
    runner.cycle(0, 3)
    runner.cycle(1, 0)
    advance(aenv.w3, aenv.params.commit_timeout + 1)
    receipt = transact(aenv.w3, aenv.market.functions.claimTimeout(runner.job_id), aenv.actors.outsider)
    assert events(aenv.market, receipt, "AlphaCyclesRecorded")[0].args.cycles == 2
    assert window(aenv)[1:4] == (2, 3, 2)


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


def test_exactly_at_the_tolerance_is_not_a_breach(chain, aenv):
    set_claim(aenv, WAD * 6 // 10)  # α* − τ = 0.5; one of four accepted every cycle gives α̂ = 0.5 exactly
    for _ in range(8):
        _, receipt = run_job(aenv, [1, 1])
    (ev,) = events(aenv.market, receipt, "AlphaWindowEvaluated")
    assert (ev.args.accepted, ev.args.rejected, ev.args.breached) == (16, 16, False)


def test_under_performing_drafter_is_slashed_and_window_restarts(chain, aenv):
    a, m = aenv.actors, aenv.market
    set_claim(aenv, WAD * 6 // 10 + 1)  # one wei above the previous test's boundary
    stake = aenv.registry.functions.stakeOf(a.drafter).call()
    for i in range(8):
        job_id, receipt = run_job(aenv, [1, 1])
        if i < 7:
            assert events(m, receipt, "AlphaWindowEvaluated") == []
    (ev,) = events(m, receipt, "AlphaWindowEvaluated")
    assert (ev.args.cycles, ev.args.accepted, ev.args.rejected, ev.args.breached) == (16, 16, 16, True)
    slash = stake * aenv.params.alpha_slash_bps // 10_000
    (slashed,) = events(m, receipt, "AlphaSlashed")
    assert (slashed.args.jobId, slashed.args.drafter, slashed.args.amount) == (job_id, a.drafter, slash)
    assert aenv.registry.functions.stakeOf(a.drafter).call() == stake - slash
    # Credited to the requester of the job that completed the window, as a pull payment.
    assert m.functions.owed(a.requester).call() == slash
    assert window(aenv) == (WAD * 6 // 10 + 1, 0, 0, 0, 0)
    # After the restart the claim may be lowered.
    set_claim(aenv, WAD // 4)
    assert window(aenv)[0] == WAD // 4


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
    set_claim(aenv, ALPHA_STAR + 1)  # and so is keeping it
    assert window(aenv)[0] == ALPHA_STAR + 1


def test_only_the_registry_sets_claims(chain, aenv):
    a, m = aenv.actors, aenv.market.functions
    state = lambda: window(aenv)  # noqa: E731
    expect_revert(aenv, m.alphaClaimSet(a.drafter, 1, True), a.drafter, "NotAlphaAuthority", (a.drafter,), state=state)
    expect_revert(
        aenv, m.alphaClaimSet(a.drafter, 1, True), a.deployer, "NotAlphaAuthority", (a.deployer,), state=state
    )
    registry = impersonate(aenv.w3, aenv.registry.address)
    transact(aenv.w3, m.alphaClaimSet(a.outsider, 5, False), registry)
    assert window(aenv, a.outsider)[0] == 5


def test_registering_again_restarts_the_window(chain, aenv):
    w3, a, reg, m = aenv.w3, aenv.actors, aenv.registry.functions, aenv.market.functions
    job_id, _ = run_job(aenv, [2, 2, 2])
    assert window(aenv)[1] == 3
    transact(w3, reg.requestUnbond(), a.drafter)
    advance(w3, aenv.params.challenge_window + 1)
    transact(w3, m.finalize(job_id), a.outsider)
    advance(w3, aenv.params.unbonding_period)
    transact(w3, reg.withdrawUnbonded(), a.drafter)
    assert window(aenv)[1] == 3  # the old window stays until a new registration
    transact(
        w3, reg.registerDrafter(DRAFT_MODEL, TARGET_MODEL, WAD // 5, VOCAB), a.drafter, aenv.params.min_drafter_stake
    )
    assert reg.isActive(a.drafter, ROLE_DRAFTER, DRAFT_MODEL).call()
    assert window(aenv) == (WAD // 5, 0, 0, 0, 0)
