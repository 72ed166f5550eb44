"""One full TargetReplay dispute on an honest position, judged by the benchmark's referee nodes, and its gas."""

from __future__ import annotations

import time

from node.bench.harness import CHALLENGER, Rpc, gas_of, tx_hashes, wait_until
from node.chain.enums import DisputeKind, DisputeStatus, Outcome, solidity_name


def run_dispute(rpc: Rpc, system, job_id: int, start_block: int, accounts, timeout: float) -> dict:
    """A TargetReplay dispute on an honest position (cycle 0, proposal 0): the verifier node answers, the three
    referee nodes commit and reveal, one decides the round; past the appeal period the dispute is finished (resolve
    again) and the challenger loses its bond."""
    from node.jobs import chaindata

    dm = system.disputes
    record = chaindata.record_preimage(system, job_id, 0, from_block=start_block)
    proof = chaindata.leaf_proof(system, job_id, 0, 0, from_block=start_block)
    t0 = time.monotonic()
    opened = rpc.send(
        dm.functions.openDispute(job_id, 0, 0, DisputeKind.TargetReplay, record, proof),
        accounts[CHALLENGER],
        system.params.dispute_bond,
    )
    dispute_id = dm.functions.disputeCount().call()
    decided = (DisputeStatus.Appealable, DisputeStatus.Resolved)
    wait_until(
        lambda: chaindata.dispute_view(dm, dispute_id)["status"] in decided,
        timeout,
        interval=0.05,
        what=f"dispute {dispute_id} decided",
    )
    wall = time.monotonic() - t0  # open to a decided round (the appeal period is a wait, not work)
    if chaindata.dispute_view(dm, dispute_id)["status"] == DisputeStatus.Appealable:
        # nobody appeals the (right) verdict: past the appeal period, anyone finishes the dispute and it pays out
        rpc("evm_increaseTime", system.params.appeal_period + 1)
        rpc("evm_mine")
        try:
            rpc.send(dm.functions.resolve(dispute_id), accounts[CHALLENGER])
        except Exception:  # a referee node finished it first (DisputeWrongStatus): that is the same end state
            if chaindata.dispute_view(dm, dispute_id)["status"] != DisputeStatus.Resolved:
                raise
    view = chaindata.dispute_view(dm, dispute_id)
    f = {"disputeId": dispute_id}
    cost = {
        "open": gas_of(rpc, [opened["transactionHash"]]),
        "answer": gas_of(rpc, tx_hashes(dm.events.Answered, start_block, **f)),
        "commit votes": gas_of(rpc, tx_hashes(dm.events.VoteCommitted, start_block, **f)),
        "reveal votes": gas_of(rpc, tx_hashes(dm.events.VoteRevealed, start_block, **f)),
        "decide round": gas_of(rpc, tx_hashes(dm.events.RoundDecided, start_block, **f)),
        "resolve": gas_of(rpc, tx_hashes(dm.events.DisputeResolved, start_block, **f)),
    }
    return {
        "dispute_id": dispute_id,
        "job_id": job_id,
        "kind": DisputeKind.TargetReplay.name,
        "position": [0, 0],
        "outcome": solidity_name(Outcome(view["outcome"])),
        "wall_s": wall,
        "cost": cost,
    }
