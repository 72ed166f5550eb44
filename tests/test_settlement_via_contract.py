"""A transcript job settled through a contract (a smart wallet, a forwarder, a batch) is as readable from chain data
as one settled directly: the reader finds the settle call in the transaction's call trace.

Attack: a pair that signed a record the accept rule refutes settles it through a wrapper contract. The settle
transaction's own calldata is then the wrapper's, and a watchdog that decodes top-level calldata only cannot read
the records, so the bad record would go unchallenged. Here it is read, and the rule refutes it.
"""

from __future__ import annotations

from chainutil import env, transact  # noqa: F401  (env is a fixture)
from node.chain import transcript as TX
from node.chain.contracts import deploy_contract
from node.link import settled
from test_transcript_settlement import DRAFTER_KEY, VERIFIER_KEY, Transcript, transcript_job


def settle_through_batch(env, t: Transcript, sender: str, calls) -> None:
    batch = deploy_contract(env.w3, "CallBatch", sender=sender)
    target = env.system.transcript.address
    data = [call._encode_transaction_data() for call, _ in calls]
    run = batch.functions.run([target] * len(calls), data, [allow for _, allow in calls])
    receipt = transact(env.w3, run, sender)
    assert receipt.status == 1 and receipt.to == batch.address


def test_a_settlement_through_a_contract_reads_back_past_a_reverted_call_beside_it(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    forged = t.settle_call(drafter_key=VERIFIER_KEY)  # reverts inside the batch, which goes on
    settle_through_batch(env, t, env.actors.outsider, [(forged, True), (t.settle_call(), False)])
    read = TX.read_settlement(env.w3, env.system.transcript, job_id)
    assert read.cycles == t.cycles and read.salt == t.salt and read.reveals() == t.reveals[: len(t.cycles)]


def test_a_lying_pair_settling_through_a_wrapper_is_still_refuted_by_the_rule(chain, env):
    job_id = transcript_job(env)
    t = Transcript(env, job_id, lie=(1,))
    settle_through_batch(env, t, env.actors.drafter, [(t.settle_call(drafter_key=DRAFTER_KEY), False)])
    cycles = settled.job_cycles(env.system, job_id)
    broken = settled.rule_faults(env.system, job_id, cycles)
    assert [cycle for cycle, _ in broken] == [1]
    assert settled.refuted_on_chain(env.system, job_id, 1, env.actors.outsider)
