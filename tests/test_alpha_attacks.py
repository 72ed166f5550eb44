"""The α-window attacks of issue 10 on a real anvil chain: each test first sets the attack up as it worked on the old
rules (v1: α recorded when a job stopped, any reference-sampling job counted, slashes to the job's requester, a new
registration restarted the window), then shows it fails under the v1.1 rules (docs/contracts.md "α window").

The contract half of attack 5 (an out-of-range outToken) is the registry's vocabulary check; its node half is in
tests/test_alpha_nodes.py. A conviction is delivered through the market's own hook (`disputeClosed`), sent from the
dispute manager's address as it does after a verdict against the accused (the verdict itself: tests/test_disputes.py).
"""

from __future__ import annotations

import pytest

from chainutil import (
    ALPHA_STAR,
    DRAFT_MODEL,
    EOS,
    ROLE_DRAFTER,
    ROLE_VERIFIER,
    TARGET_MODEL,
    VOCAB,
    WAD,
    JobRunner,
    advance,
    build_env,
    events,
    expect_revert,
    forcing_p,
    impersonate,
    job_request,
    job_view,
    make_draft,
    paid_gas,
    submit_job,
    transact,
)
from node import protocol as P
from node.chain.params import DEFAULT_PARAMS

BUCKET = 2  # a full window is 8 buckets of ≥ 2 cycles: N = 16
N = 8 * BUCKET
FLOOR = DEFAULT_PARAMS.alpha_price_floor
FEE_BPS = DEFAULT_PARAMS.alpha_fee_bps


@pytest.fixture(scope="module")
def aenv(w3):
    return build_env(w3, DEFAULT_PARAMS.with_(alpha_bucket_cycles=BUCKET))


def window(env, drafter=None) -> tuple:
    return tuple(env.market.functions.alphaWindowOf(drafter or env.actors.drafter).call())


def stake(env, who) -> int:
    return env.registry.functions.stakeOf(who).call()


def owed(env, who) -> int:
    return env.market.functions.owed(who).call()


def finalize(env, job_id: int):
    advance(env.w3, env.params.challenge_window + 1)
    return transact(env.w3, env.market.functions.finalize(job_id), env.actors.outsider)


def run_cycles(env, accepts, requester=None, verifier=None, finish=True, **request) -> JobRunner:
    """A job whose cycles accept `accepts` (the verifier's p forces them), submitted by `requester` to `verifier`;
    the last cycle's outToken is EOS when `finish`."""
    verifier = verifier or env.actors.verifier
    runner = JobRunner(env, submit_job(env, sender=requester, verifier=verifier, **request))
    head = P.hash_chain(runner.seed, runner.length)
    transact(env.w3, env.market.functions.acceptJob(runner.job_id, head), verifier)
    for cycle, accept in enumerate(accepts):
        out = EOS if finish and cycle == len(accepts) - 1 else 777
        draft = make_draft(runner.job_id, cycle, runner.gamma)
        runner.commit(draft)
        transact(env.w3, runner.verify_fn(draft, forcing_p(runner.gamma, accept), out), verifier)
    return runner


def convict(env, job_id: int, accused: str):
    """A dispute against `accused` on the job, decided against it (the dispute manager's hooks)."""
    dm = impersonate(env.w3, env.system.disputes.address)
    market = env.market.functions
    transact(env.w3, market.disputeOpened(job_id), dm)
    return transact(env.w3, market.disputeClosed(job_id, accused, True), dm)


# ---------------------------------------------------------------- attack 2: a lying verifier farms the slash


@pytest.mark.parametrize("price_per_pass", [0, FLOOR], ids=["zero-price", "at-the-floor"])
def test_attack2_a_convicted_lying_verifier_does_not_farm_the_drafters_alpha_slash(chain, aenv, price_per_pass):
    """Requester and verifier collude: the verifier posts p₀ = 0 in every cycle of 8 cheap jobs (α̂ = 0 over a full
    window), then a dispute convicts it, which on v1 stopped the job, closed the drafter's bucket in the same
    transaction and credited the α slash to the requester. Now the convicted jobs never enter the window: the
    honest drafter keeps its stake, and nobody of the job gets more than it put in."""
    a = aenv.actors
    before = (stake(aenv, a.drafter), owed(aenv, a.requester), owed(aenv, a.verifier), owed(aenv, aenv.params.treasury))
    escrows = 0
    for _ in range(8):
        runner = run_cycles(
            aenv, [0, 0], finish=False, maxTokens=40, pricePerAcceptedToken=0, pricePerPass=price_per_pass
        )
        assert job_view(aenv, runner.job_id)["alphaEligible"] is (price_per_pass >= FLOOR)
        escrows += job_view(aenv, runner.job_id)["escrow"]
        receipt = convict(aenv, runner.job_id, a.verifier)  # v1: the job stopped here and fed the window
        assert events(aenv.market, receipt, "JobFinished")[0].args.reason == 4  # DisputeLost
        assert events(aenv.market, receipt, "AlphaCyclesRecorded") == []
        view = job_view(aenv, runner.job_id)
        assert (view["verifierForfeited"], view["alphaEligible"]) == (True, False)
        receipt = finalize(aenv, runner.job_id)
        assert events(aenv.market, receipt, "AlphaCyclesRecorded") == events(aenv.market, receipt, "AlphaSlashed") == []
    # 16 cycles of α̂ = 0 against α* = 0.6 would have been a breach; none of them is in the window.
    assert window(aenv) == (ALPHA_STAR, 0, 0, 0, 0)
    assert stake(aenv, a.drafter) == before[0]
    # The requester gets its escrow back (the verifier forfeited its pay), the verifier nothing, and nothing
    # reaches the treasury either: the coalition gains nothing (the real dispute also slashes the verifier).
    assert owed(aenv, a.requester) - before[1] == escrows
    assert owed(aenv, a.verifier) == before[2] and owed(aenv, aenv.params.treasury) == before[3]


# ---------------------------------------------------------------- attack 3: adversarial prompts


def test_attack3_adversarial_prompts_at_zero_price_do_not_count(chain, aenv):
    """The requester alone (honest drafter and verifier) sends N one-cycle jobs whose prompts the draft gets wrong
    (acceptance 0 at the first position) at zero price: on v1 they filled the window, the honest drafter was
    slashed and the slash was paid to the requester. Now they are below the price floor and do not count."""
    a = aenv.actors
    before = stake(aenv, a.drafter)
    for _ in range(N):
        runner = run_cycles(aenv, [0], maxTokens=1, pricePerAcceptedToken=0, pricePerPass=0)
        assert job_view(aenv, runner.job_id)["alphaEligible"] is False
        finalize(aenv, runner.job_id)
    assert window(aenv) == (ALPHA_STAR, 0, 0, 0, 0)
    assert stake(aenv, a.drafter) == before and owed(aenv, a.requester) == 0


def test_attack3_at_the_floor_the_attacker_spends_at_least_what_the_drafter_loses(chain, aenv):
    """The same attack paying the floor per pass (and nothing per token, its cheapest): the window fills and the
    honest drafter is slashed, but the slash (capped at the α fees of N cycles at the floor) goes to the treasury,
    and the attacker's spend, measured on its wallet, is 10000 / alphaFeeBps = 10 times the drafter's loss:
    griefing factor ≥ 1 (here 10)."""
    w3, a, p = aenv.w3, aenv.actors, aenv.params
    m = aenv.market.functions
    stake_before, wallet_before, gas = stake(aenv, a.drafter), w3.eth.get_balance(a.requester), 0
    treasury_before = owed(aenv, p.treasury)
    slashed = []
    request = job_request(aenv, maxTokens=1, pricePerAcceptedToken=0, pricePerPass=FLOOR)
    for _ in range(N):
        gas += paid_gas(w3, transact(w3, m.submitJob(request, b"\x00\x01"), a.requester, FLOOR))  # its only txs
        runner = JobRunner(aenv, m.jobCount().call())
        runner.accept()
        runner.cycle(0, 0)  # the draft is wrong at the first position; the honest verifier rejects it
        slashed += events(aenv.market, finalize(aenv, runner.job_id), "AlphaSlashed")
    (slash,) = slashed
    loss = stake_before - stake(aenv, a.drafter)
    assert slash.args.amount == loss == p.alpha_slash(stake_before) == N * FLOOR * FEE_BPS // 10_000  # the cap
    spend = wallet_before - w3.eth.get_balance(a.requester)
    assert spend - gas == N * FLOOR  # what the attack cost, gas aside: the floor per pass
    assert spend >= loss and (spend - gas) * FEE_BPS == loss * 10_000  # griefing factor spend / loss ≥ 10
    # the slash went to the treasury (with the α fees of the N jobs), nothing to the requester
    assert owed(aenv, p.treasury) - treasury_before == loss + N * FLOOR * FEE_BPS // 10_000
    assert owed(aenv, a.requester) == 0


# ---------------------------------------------------------------- attack 4: padding with self-dealt jobs


@pytest.fixture
def padder(chain, aenv):
    """The drafter's own requester and verifier accounts (spare 0 and 1), registered as a verifier."""
    a = aenv.actors
    own_requester, own_verifier = a.spare[0], a.spare[1]
    transact(
        aenv.w3,
        aenv.registry.functions.register(ROLE_VERIFIER, [TARGET_MODEL], [VOCAB]),
        own_verifier,
        aenv.params.min_verifier_stake,
    )
    transact(aenv.w3, aenv.registry.functions.setAlphaStar(WAD * 9 // 10), a.drafter)  # claims 0.9 (breach < 0.8)
    return own_requester, own_verifier


def test_attack4_zero_price_padding_no_longer_hides_a_false_claim(aenv, padder):
    """A drafter claiming α* = 0.9 with a real record of α̂ = 2/3 pads half its window with zero-price self-dealt
    jobs that accept everything: on v1 (α̂ = 48/56 = 0.857 ≥ 0.8) it escaped. Now the padding does not count, the
    real record fills the window, and it is slashed."""
    a = aenv.actors
    own_requester, own_verifier = padder
    before = stake(aenv, a.drafter)
    slashed = []
    for _ in range(8):
        pad = run_cycles(
            aenv, [4, 4], requester=own_requester, verifier=own_verifier, pricePerAcceptedToken=0, pricePerPass=0
        )
        assert job_view(aenv, pad.job_id)["alphaEligible"] is False
        finalize(aenv, pad.job_id)
        real = run_cycles(aenv, [2, 2])  # an honest requester's job at the default price (the floor)
        slashed += events(aenv.market, finalize(aenv, real.job_id), "AlphaSlashed")
    assert len(slashed) == 1 and stake(aenv, a.drafter) == before - slashed[0].args.amount > 0


def test_attack4_padding_at_the_floor_burns_floor_times_fee_per_padded_cycle(aenv, padder):
    """Padding that pays the floor counts again, but every padded cycle sends floor × alphaFeeBps to the treasury:
    the self-dealing coalition (its requester and verifier accounts) loses exactly that, per cycle."""
    p = aenv.params
    own_requester, own_verifier = padder
    coalition_before = owed(aenv, own_requester) + owed(aenv, own_verifier)
    treasury_before = owed(aenv, p.treasury)
    escrows = fees = cycles = 0
    for _ in range(4):
        pad = run_cycles(
            aenv, [4, 4], requester=own_requester, verifier=own_verifier, pricePerAcceptedToken=0, pricePerPass=FLOOR
        )
        assert job_view(aenv, pad.job_id)["alphaEligible"] is True
        escrows += job_view(aenv, pad.job_id)["escrow"]
        receipt = finalize(aenv, pad.job_id)
        fees += events(aenv.market, receipt, "AlphaFeePaid")[0].args.amount
        cycles += 2
    assert fees == cycles * FLOOR * FEE_BPS // 10_000 > 0
    assert owed(aenv, p.treasury) - treasury_before == fees
    coalition_back = owed(aenv, own_requester) + owed(aenv, own_verifier) - coalition_before
    assert escrows - coalition_back == fees  # the coalition's cost: floor × fee per padded cycle
    assert window(aenv)[1] == cycles


# ---------------------------------------------------------------- re-registration


def test_reregistration_keeps_the_window_and_the_slash_still_comes(chain, aenv):
    """On v1 a drafter about to be slashed unbonded, withdrew and registered again: a fresh window (and a lower
    claim). Now the window survives, the claim cannot be lowered while it holds cycles, and the slash comes."""
    w3, a, reg = aenv.w3, aenv.actors, aenv.registry.functions
    for _ in range(7):  # 14 cycles of α̂ = 1/3 against α* = 0.6: one more job fills the window and breaches
        finalize(aenv, run_cycles(aenv, [0, 1]).job_id)
    assert window(aenv)[1:5] == (14, 7, 14, 7)
    transact(w3, reg.requestUnbond(), a.drafter)
    advance(w3, aenv.params.unbonding_period + 1)
    transact(w3, reg.withdrawUnbonded(), a.drafter)
    assert reg.accountOf(a.drafter).call()[1] == 0  # Role.None: gone from the registry
    assert window(aenv)[1:5] == (14, 7, 14, 7)  # ... but not from the α window
    minimum = aenv.params.min_drafter_stake
    state = lambda: (window(aenv), tuple(reg.accountOf(a.drafter).call()))  # noqa: E731
    expect_revert(
        aenv,
        reg.registerDrafter(DRAFT_MODEL, TARGET_MODEL, WAD // 5, VOCAB),
        a.drafter,
        "AlphaWindowOpen",
        (a.drafter, ALPHA_STAR, WAD // 5),
        value=minimum,
        state=state,
    )
    transact(w3, reg.registerDrafter(DRAFT_MODEL, TARGET_MODEL, ALPHA_STAR, VOCAB), a.drafter, minimum)
    assert reg.isActive(a.drafter, ROLE_DRAFTER, DRAFT_MODEL).call()
    assert window(aenv) == (ALPHA_STAR, 14, 7, 14, 7)
    receipt = finalize(aenv, run_cycles(aenv, [0, 1]).job_id)
    (slash,) = events(aenv.market, receipt, "AlphaSlashed")
    assert (
        slash.args.amount == aenv.params.alpha_slash(minimum) and stake(aenv, a.drafter) == minimum - slash.args.amount
    )
    assert window(aenv) == (ALPHA_STAR, 0, 0, 0, 0)
