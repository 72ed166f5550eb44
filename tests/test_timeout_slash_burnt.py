"""v1.2: no timeout slash goes to a party that chose the slashed party's counterparty (docs/protocol.md, "Soundness
(v1.2)"). The requester chose both the drafter and the verifier; under v1.1 a timeout slash was credited to it, so a
requester allied with its verifier aborted any job it disliked for free: the verifier let it time out after seeing
the drafter's salt (when the job's outcome is fixed) and its slash came straight back to its ally. Now the slash is
burnt (credited to the market's BURN, 0x…dEaD, whose key nobody holds) and the requester gets its escrow back, no more.
"""

from __future__ import annotations

from chainutil import (  # noqa: F401  (env is a fixture)
    REASON_VERIFY_TIMEOUT,
    STATUS_FINALIZED,
    JobRunner,
    advance,
    env,
    escrow_for,
    events,
    job_request,
    make_draft,
    paid_gas,
    submit_job,
    transact,
)
from node.chain.params import BURN_ADDRESS


def _wealth(env, account: str) -> int:
    """What `account` holds: its wallet, its stake and what the market owes it."""
    stake = env.registry.functions.stakeOf(account).call()
    return env.w3.eth.get_balance(account) + stake + env.market.functions.owed(account).call()


def test_a_requester_and_its_verifier_pay_the_slash_of_a_selective_abort(chain, env):
    """The attack, played on chain: the colluding verifier accepts, the honest drafter commits its first draft (its
    salt on chain: the job's accept uniforms are fixed), the verifier dislikes what it sees and lets the verification
    deadline pass; its ally claims the timeout and withdraws. Under v1.1 the coalition lost nothing (the verifier's
    slash was credited to the requester: net 0, a costless abort); now it loses the whole slash, and the requester
    gains nothing beyond its escrow refund."""
    w3, a, m, p = env.w3, env.actors, env.market, env.params
    req = job_request(env)
    escrow = escrow_for(req)
    coalition = (a.requester, a.verifier)
    before = {x: _wealth(env, x) for x in coalition}
    gas = dict.fromkeys(coalition, 0)
    burnt = m.functions.owed(BURN_ADDRESS).call()

    gas[a.requester] += paid_gas(w3, transact(w3, m.functions.submitJob(req, b"\x00\x01"), a.requester, escrow))
    job_id = m.functions.jobCount().call()
    runner = JobRunner(env, job_id)
    gas[a.verifier] += paid_gas(w3, runner.accept())
    runner.commit(make_draft(job_id, 0, runner.gamma))  # the honest drafter's salt: the outcome is now known
    advance(w3, p.commit_timeout + p.verify_timeout + 1)  # the verifier withholds its verification
    receipt = transact(w3, m.functions.claimTimeout(job_id), a.requester)
    gas[a.requester] += paid_gas(w3, receipt)
    (fin,) = events(m, receipt, "JobFinished")
    assert (fin.args.reason, fin.args.party, fin.args.slashed) == (REASON_VERIFY_TIMEOUT, a.verifier, p.timeout_slash)
    assert m.functions.jobStatus(job_id).call() == STATUS_FINALIZED  # no cycle verified: settled at once

    # the requester is owed its escrow, exactly: no share of the slash it provoked
    assert m.functions.owed(a.requester).call() == escrow
    gas[a.requester] += paid_gas(w3, transact(w3, m.functions.withdraw(), a.requester))
    # the slash is burnt: credited to an address nobody can withdraw from
    assert m.functions.owed(BURN_ADDRESS).call() - burnt == p.timeout_slash

    change = {x: _wealth(env, x) - before[x] + gas[x] for x in coalition}  # gas aside
    assert change[a.requester] == 0  # escrow in, the same escrow back: nothing gained
    assert change[a.verifier] == -p.timeout_slash
    # v1.1 credited the slash to the requester: the coalition's change was 0 (the abort was free); now it is -slash
    assert sum(change.values()) == -p.timeout_slash < 0


def test_a_slash_after_verified_cycles_is_burnt_and_the_refund_is_the_unspent_escrow(chain, env):
    """Mid-job, as when a verifier sees the first cycles and then aborts: the requester pays for the verified cycles
    and is refunded the rest at finalize; the slash goes to BURN, not into that refund."""
    w3, a, m, p = env.w3, env.actors, env.market, env.params
    burnt = m.functions.owed(BURN_ADDRESS).call()
    job_id = submit_job(env)
    runner = JobRunner(env, job_id)
    runner.accept()
    runner.cycle(0, accept=2)
    runner.commit(make_draft(job_id, 1, runner.gamma))
    advance(w3, p.commit_timeout + p.verify_timeout + 1)
    transact(w3, m.functions.claimTimeout(job_id), a.requester)
    assert m.functions.owed(a.requester).call() == 0  # v1.1: timeoutSlash here, before any refund
    advance(w3, p.challenge_window + 1)
    receipt = transact(w3, m.functions.finalize(job_id), a.outsider)
    (final,) = events(m, receipt, "JobFinalized")
    assert final.args.refund == escrow_for(job_request(env)) - final.args.drafterPay - final.args.verifierPay
    assert m.functions.owed(a.requester).call() == final.args.refund
    # a verify timeout clears the α flag, so no α fee reaches the treasury (BURN by default) beside the slash
    assert m.functions.owed(BURN_ADDRESS).call() - burnt == p.timeout_slash
