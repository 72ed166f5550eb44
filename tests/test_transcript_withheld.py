"""Every honest move from chain data alone (docs/protocol.md "Transcript mode v2.1"): a counterparty that withholds
a message over the link never leaves the honest party slashed or unpaid. Real `serve` processes on anvil (real
models, real WebSockets on loopback, real SQLite), the attacker a node with a `--behavior` (node/roles/behaviors.py).

* `withhold` verifier: signs its Verification of cycle 1, never sends it, and forces the drafter with it. Before,
  the drafter drafted only from the link, could not answer, and was slashed at the claim. Now it drafts on the
  Verification the force posted and answers, every time, and the job completes on chain with nobody slashed.
* `nopost` drafter: co-signs the Settlement and never posts it. Before, the verifier held both signatures and did
  nothing; `claimIdle` refunded everything and it was paid 0. Now it posts the Settlement after `--link-silence`.
* `nosign` verifier: never signs the Settlement. Before, the drafter's `force_verifier` returned 0 once the job
  ended and it was paid 0. Now it forces with the final Verification, which completes the job at once.
"""

from __future__ import annotations

import pytest

from tests.test_cli import DRAFTER, VERIFIER, address
from tests.transcript_nodes import (  # noqa: F401  (served_chain, fresh_chain: fixtures)
    fresh_chain,
    job_logs,
    served_chain,
    serving,
    submit_no_wait,
    wait_for,
)

# `verispec serve` node processes (20-40 s a start on a busy machine): not in `make test-fast`
pytestmark = pytest.mark.node_processes

SILENCE = "3"  # --link-silence (s): how long a node waits on its counterparty before its move from chain data
TOKENS = 16  # ~4 cycles of γ = 4
COMPLETED = 0  # IInferenceMarket.FinishReason.Completed


def _stakes(system):
    return [system.registry.functions.stakeOf(address(a)).call() for a in (DRAFTER, VERIFIER)]


def _finished(chain, job_id, procs):
    finished = chain.system.market.events.JobFinished()
    wait_for(lambda: job_logs(finished, job_id), 300, "the job's end", [procs["verifier"], procs["drafter"]])
    (end,) = job_logs(finished, job_id)
    return end


def _sender(w3, log) -> str:
    return w3.eth.get_transaction(log.transactionHash)["from"]


def test_a_verifier_forcing_with_a_verification_it_never_sent_is_answered_and_nobody_is_slashed(fresh_chain, tmp_path):
    chain, system = fresh_chain, fresh_chain.system
    stakes = _stakes(system)
    job_id = system.market.functions.jobCount().call() + 1
    # the drafter's link waits long on its own (60 s): what answers the force is the drafter node reading the chain
    with serving(chain, tmp_path, SILENCE, "60", verifier_args=("--behavior", "withhold")) as procs:
        submit_no_wait(chain.home, TOKENS)
        end = _finished(chain, job_id, procs)
    ts = system.transcript.events
    forces = job_logs(ts.ForceMoved(), job_id)
    answers = job_logs(ts.ForceAnsweredDraft(), job_id)
    assert forces and all(f.args.forcer == address(VERIFIER) for f in forces)
    assert forces[0].args.cycles == 2  # Draft 1 and the verifier's own (withheld) Verification of cycle 1
    # each force was answered by the drafter with its Draft on the Verification that force posted
    assert [a.args.cycle for a in answers] == [f.args.cycles for f in forces]
    assert all(_sender(chain.w3, a) == address(DRAFTER) for a in answers)
    assert not job_logs(ts.ForceSettled(), job_id)  # no force was ever claimed
    assert end.args.reason == COMPLETED and _stakes(system) == stakes


def test_a_drafter_that_never_posts_the_cosigned_settlement_is_settled_by_the_verifier(fresh_chain, tmp_path):
    chain, system = fresh_chain, fresh_chain.system
    stakes = _stakes(system)
    job_id = system.market.functions.jobCount().call() + 1
    with serving(chain, tmp_path, SILENCE, drafter_args=("--behavior", "nopost")) as procs:
        submit_no_wait(chain.home, TOKENS)
        end = _finished(chain, job_id, procs)
    (settled,) = job_logs(system.transcript.events.TranscriptSettled(), job_id)
    assert _sender(chain.w3, settled) == address(VERIFIER)  # the holder of both signatures posted it
    assert end.args.reason == COMPLETED and _stakes(system) == stakes
    assert settled.args.tokensOut == TOKENS


def test_a_verifier_that_never_signs_the_settlement_is_forced_with_its_final_verification(fresh_chain, tmp_path):
    chain, system = fresh_chain, fresh_chain.system
    stakes = _stakes(system)
    job_id = system.market.functions.jobCount().call() + 1
    with serving(chain, tmp_path, SILENCE, verifier_args=("--behavior", "nosign")) as procs:
        submit_no_wait(chain.home, TOKENS)
        end = _finished(chain, job_id, procs)
    ts = system.transcript.events
    assert not job_logs(ts.TranscriptSettled(), job_id)
    (completed,) = job_logs(ts.ForceCompleted(), job_id)
    assert _sender(chain.w3, completed) == address(DRAFTER)  # its force with the final Verification ended the job
    assert end.args.reason == COMPLETED and _stakes(system) == stakes
