"""v1.2: a drafter is never assigned more than it accepted (docs/protocol.md, "Soundness (v1.2)").

A drafter declares on chain how many jobs it serves at once (`setCapacity`; one that never did accepts the market's
DEFAULT_CAPACITY, 4). `submitJob` and `submitTranscriptJob` refuse a job that would give it more Open or Running jobs
(`DrafterAtCapacity`), and a job frees its slot when it stops being Open or Running: the finishing cycle, any
timeout, a dispute lost while running, a transcript settlement or force. Under v1.1 a requester with its own
verifier flooded an honest drafter with more jobs than it could serve before their deadlines and collected the
timeout slashes of those it could not reach.
"""

from __future__ import annotations

import pytest

from chainutil import (  # noqa: F401  (env is a fixture)
    SEED,
    STATUS_FINALIZED,
    STATUS_FINISHED,
    JobRunner,
    advance,
    build_env,
    env,
    escrow_for,
    events,
    expect_revert,
    job_request,
    make_draft,
    submit_job,
    transact,
)
from node import protocol as P

DEFAULT_CAPACITY = 4  # InferenceMarket.DEFAULT_CAPACITY


def load(env) -> tuple[int, int]:
    return tuple(env.market.functions.drafterLoad(env.actors.drafter).call())


def transcript_submit(env, **overrides):
    req = job_request(env, maxTokens=12, **overrides)
    return env.market.functions.submitTranscriptJob(req, b"\x00\x01"), escrow_for(req)


def test_the_default_capacity_is_a_constant_of_the_market(env):
    assert env.market.functions.DEFAULT_CAPACITY().call() == DEFAULT_CAPACITY
    assert load(env) == (0, DEFAULT_CAPACITY)  # a drafter that never declared one


def test_a_requester_with_its_own_verifier_cannot_flood_a_drafter_past_its_capacity(chain, env):
    """The flood, on chain: the requester (its verifier accepts everything it is told to) submits job after job to
    one honest drafter. The market takes DEFAULT_CAPACITY of them and refuses the next, per-cycle or transcript, with
    DrafterAtCapacity; v1.1 took them all. Once one of the drafter's jobs finishes, the next is taken."""
    w3, a, m = env.w3, env.actors, env.market
    jobs = [submit_job(env, maxTokens=5) for _ in range(DEFAULT_CAPACITY)]
    assert load(env) == (DEFAULT_CAPACITY, DEFAULT_CAPACITY)
    req = job_request(env, maxTokens=5)
    full = (a.drafter, DEFAULT_CAPACITY)
    expect_revert(env, m.functions.submitJob(req, b"\x00"), a.requester, "DrafterAtCapacity", full, escrow_for(req))
    fn, value = transcript_submit(env)
    expect_revert(env, fn, a.requester, "DrafterAtCapacity", full, value)
    # another requester is refused as well: the capacity is the drafter's, not a requester's quota
    expect_revert(env, m.functions.submitJob(req, b"\x00"), a.outsider, "DrafterAtCapacity", full, escrow_for(req))
    # the drafter serves the first job to its end (4 + 1 tokens: maxTokens), which frees its slot at once, before
    # the challenge window and finalize
    runner = JobRunner(env, jobs[0])
    runner.accept()
    runner.cycle(0, accept=4)
    assert m.functions.jobStatus(jobs[0]).call() == STATUS_FINISHED
    assert load(env) == (DEFAULT_CAPACITY - 1, DEFAULT_CAPACITY)
    transact(w3, m.functions.submitJob(req, b"\x00"), a.requester, escrow_for(req))
    assert load(env) == (DEFAULT_CAPACITY, DEFAULT_CAPACITY)
    # finalize does not free it twice
    advance(w3, env.params.challenge_window + 1)
    transact(w3, m.functions.finalize(jobs[0]), a.outsider)
    assert load(env) == (DEFAULT_CAPACITY, DEFAULT_CAPACITY)


def test_a_drafter_declares_its_capacity(chain, env):
    w3, a, m = env.w3, env.actors, env.market
    receipt = transact(w3, m.functions.setCapacity(2), a.drafter)
    (ev,) = events(m, receipt, "CapacitySet")
    assert (ev.args.drafter, ev.args.capacity) == (a.drafter, 2)
    assert load(env) == (0, 2)
    first, second = submit_job(env), submit_job(env)
    expect_revert(env, m.functions.submitJob(job_request(env), b"\x00"), a.requester, "DrafterAtCapacity",
                  (a.drafter, 2), escrow_for(job_request(env)))  # fmt: skip
    # lowering it below the jobs it has keeps them and refuses new ones until it has room again
    transact(w3, m.functions.setCapacity(1), a.drafter)
    assert load(env) == (2, 1)
    for job_id in (first, second):
        advance(w3, env.params.accept_timeout + 1)
        transact(w3, m.functions.claimTimeout(job_id), a.outsider)  # never accepted: cancelled, refunded
    assert load(env) == (0, 1)
    submit_job(env)
    # only a registered drafter declares one, and never 0 (0 would read as the default: not a way to stop)
    for who in (a.verifier, a.requester, a.outsider):
        expect_revert(env, m.functions.setCapacity(3), who, "NotRegisteredDrafter", (who,))
    expect_revert(env, m.functions.setCapacity(0), a.drafter, "BadCapacity")


def _accept_timeout(env, job_id):
    advance(env.w3, env.params.accept_timeout + 1)
    transact(env.w3, env.market.functions.claimTimeout(job_id), env.actors.outsider)


def _first_draft_timeout(env, job_id):
    JobRunner(env, job_id).accept()
    advance(env.w3, env.params.commit_timeout + 1)
    transact(env.w3, env.market.functions.claimTimeout(job_id), env.actors.outsider)


def _verify_timeout(env, job_id):
    runner = JobRunner(env, job_id)
    runner.accept()
    runner.commit(make_draft(job_id, 0, runner.gamma))
    advance(env.w3, env.params.commit_timeout + env.params.verify_timeout + 1)
    transact(env.w3, env.market.functions.claimTimeout(job_id), env.actors.outsider)


def _draft_timeout_after_a_cycle(env, job_id):
    runner = JobRunner(env, job_id)
    runner.accept()
    runner.cycle(0, accept=1)
    advance(env.w3, env.params.commit_timeout + 1)
    transact(env.w3, env.market.functions.claimTimeout(job_id), env.actors.outsider)


def _completed(env, job_id):
    runner = JobRunner(env, job_id)
    runner.accept()
    for c in range(3):  # 5 + 5 + 5 ≥ maxTokens 12
        if env.market.functions.jobStatus(job_id).call() != STATUS_FINISHED:
            runner.cycle(c, accept=4)


ENDS = {
    "accept-timeout": _accept_timeout,
    "first-draft-timeout": _first_draft_timeout,
    "verify-timeout": _verify_timeout,
    "draft-timeout": _draft_timeout_after_a_cycle,
    "completed": _completed,
}


@pytest.mark.parametrize("end", list(ENDS))
def test_every_end_of_a_per_cycle_job_frees_its_slot_once(chain, env, end):
    w3, m = env.w3, env.market
    transact(w3, m.functions.setCapacity(1), env.actors.drafter)
    job_id = submit_job(env, maxTokens=12)
    assert load(env) == (1, 1)
    ENDS[end](env, job_id)
    assert m.functions.jobStatus(job_id).call() in (STATUS_FINISHED, STATUS_FINALIZED)
    assert load(env) == (0, 1)
    if m.functions.jobStatus(job_id).call() == STATUS_FINISHED:
        advance(w3, env.params.challenge_window + 1)
        transact(w3, m.functions.finalize(job_id), env.actors.outsider)
    assert load(env) == (0, 1)
    for party in (env.actors.drafter, env.actors.verifier):  # a slashed party tops its stake up to stay active
        transact(w3, env.registry.functions.addStake(), party, env.params.timeout_slash)
    submit_job(env)  # the freed slot takes the next job
    assert load(env) == (1, 1)


@pytest.fixture(scope="module")
def hooked(w3):
    """A deployment whose dispute manager is a plain account, so the test can close a dispute directly."""
    e = build_env(w3, with_disputes=False)
    transact(w3, e.market.functions.setDisputeManager(e.actors.spare[7]), e.actors.deployer)
    return e


def test_a_dispute_lost_while_running_frees_the_slot(chain, hooked):
    w3, m, a = hooked.w3, hooked.market, hooked.actors
    dm = a.spare[7]
    runner = JobRunner(hooked, submit_job(hooked))
    runner.accept()
    runner.cycle(0, accept=1)
    transact(w3, m.functions.disputeOpened(runner.job_id), dm)
    assert load(hooked) == (1, DEFAULT_CAPACITY)
    transact(w3, m.functions.disputeClosed(runner.job_id, a.verifier, True), dm)  # stops the running job
    assert m.functions.jobStatus(runner.job_id).call() == STATUS_FINISHED
    assert load(hooked) == (0, DEFAULT_CAPACITY)
    # a loss on a job that had already finished frees nothing more
    other = JobRunner(hooked, submit_job(hooked, maxTokens=5))
    other.accept()
    other.cycle(0, accept=4)
    transact(w3, m.functions.disputeOpened(other.job_id), dm)
    transact(w3, m.functions.disputeClosed(other.job_id, a.drafter, True), dm)
    assert load(hooked) == (0, DEFAULT_CAPACITY)


def test_a_transcript_job_frees_its_slot_when_it_settles_or_is_forced(chain, env):
    from tests.test_transcript_settlement import DRAFTER_KEY, VERIFIER_KEY, Transcript, _force_by_drafter

    w3, m, a, p = env.w3, env.market, env.actors, env.params
    transact(w3, m.functions.setCapacity(2), a.drafter)
    ids = []
    for _ in range(2):
        fn, value = transcript_submit(env)
        transact(w3, fn, a.requester, value)
        ids.append(m.functions.jobCount().call())
        transact(w3, m.functions.acceptJob(ids[-1], P.hash_chain(SEED, 12)), a.verifier)
    assert load(env) == (2, 2)
    fn, value = transcript_submit(env)
    expect_revert(env, fn, a.requester, "DrafterAtCapacity", (a.drafter, 2), value)
    settled = Transcript(env, ids[0])
    transact(w3, settled.settle_call(drafter_key=DRAFTER_KEY, verifier_key=VERIFIER_KEY), a.drafter)
    assert load(env) == (1, 2)
    forced = Transcript(env, ids[1])
    transact(w3, _force_by_drafter(env, forced, 2), a.drafter)  # the verifier goes silent
    advance(w3, p.verify_timeout + 1)
    transact(w3, env.system.transcript.functions.claimForce(ids[1]), a.outsider)
    assert load(env) == (0, 2)


def test_jobs_below_a_drafters_declared_min_price_cannot_hold_its_capacity(chain, env):
    """Threat-model row 118: a requester with its own verifier filled an honest drafter's capacity with zero-escrow
    jobs the drafter would never serve (transcript jobs of maxTokens 65,535: nothing ends them for about 182 days),
    and no paid job could reach it. A drafter declares its least price per accepted token (`setMinPrice`); below
    it, per-cycle or transcript, the market refuses the job at submit and no slot is taken. An outsider's job at
    the price is taken."""
    w3, a, m = env.w3, env.actors, env.market
    price = 10**12
    receipt = transact(w3, m.functions.setMinPrice(price), a.drafter)
    (ev,) = events(m, receipt, "MinPriceSet")
    assert (ev.args.drafter, ev.args.minPrice) == (a.drafter, price)
    assert m.functions.minPriceOf(a.drafter).call() == price
    free = job_request(env, maxTokens=65535, pricePerAcceptedToken=0, pricePerPass=0)
    refused = (a.drafter, 0, price)
    for _ in range(DEFAULT_CAPACITY + 1):
        expect_revert(env, m.functions.submitJob(free, b"\x00"), a.requester, "PriceBelowDrafterMinimum", refused)
        fn = m.functions.submitTranscriptJob(free, b"\x00")
        expect_revert(env, fn, a.requester, "PriceBelowDrafterMinimum", refused)
    one_short = job_request(env, maxTokens=5, pricePerAcceptedToken=price - 1)
    expect_revert(env, m.functions.submitJob(one_short, b"\x00"), a.requester, "PriceBelowDrafterMinimum",
                  (a.drafter, price - 1, price), escrow_for(one_short))  # fmt: skip
    assert load(env) == (0, DEFAULT_CAPACITY)
    fair = job_request(env, maxTokens=5, pricePerAcceptedToken=price)
    transact(w3, m.functions.submitJob(fair, b"\x00"), a.outsider, escrow_for(fair))
    assert load(env) == (1, DEFAULT_CAPACITY)
    # only a registered drafter declares one; 0 takes any price again
    for who in (a.verifier, a.requester, a.outsider):
        expect_revert(env, m.functions.setMinPrice(1), who, "NotRegisteredDrafter", (who,))
    transact(w3, m.functions.setMinPrice(0), a.drafter)
    transact(w3, m.functions.submitJob(free, b"\x00"), a.requester)
    assert load(env) == (2, DEFAULT_CAPACITY)
