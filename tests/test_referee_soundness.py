"""v1.2 referee rules (docs/protocol.md §11, docs/disputes.md), each against its attacker's best response on anvil.

* **Frozen draws.** v1.1 rescheduled a draw whose stake tree changed after the seed block, so any referee who saw
  the public seed re-rolled a panel it disliked with `addStake` of 1 wei (a 40 % coalition won 20 of 20 disputes).
  A draw now reads the tree as it stood before the seed block: every move an attacker can make once the seed is
  public (stake added, an unbond, a whale registering, all at once) leaves the panel exactly as it would have been.
* **A decided verdict stands.** v1.1 ended an appeal that could not be staffed Void, so a verifier convicted in
  round 0 appealed into a pool too small for 7 fresh seats and walked away with its bond and no slash.
* **Penalties lower weight.** v1.1 ejected a referee staked at the minimum on its first penalty, so captured
  rounds shrank the honest pool; a referee now leaves only below a quarter of the minimum.
"""

from __future__ import annotations

from tests.test_disputes import (
    DRAFT,
    DRAFT_MODEL,
    ETHER,
    O_ACCUSED_LOST,
    PARAMS,
    ROLE_REFEREE,
    STAKE,
    TARGET,
    TARGET_MODEL,
    V_CHEATED,
    V_FAITHFUL,
    advance,
    answer,
    appeal,
    burnt,
    check_solvent,
    credits,
    deploy_world,
    dispute,
    draw_referees,
    escalate_to_void,
    events,
    fresh_account,
    job_view,
    locks,
    open_dispute,
    panel,
    register_referee,
    resolve_final,
    send,
    stake,
    vote_round,
    world,  # noqa: F401 (fixture)
    world_base,  # noqa: F401 (fixture)
)


def _counterfactual_panel(world, dispute_id):
    """The panel the next draw would seat if nobody did anything first (drawn, then rolled back)."""
    w3 = world.w3
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]
    try:
        receipt = draw_referees(world, dispute_id)
        [drawn] = events(world, receipt, "RefereesDrawn")
        return list(drawn["referees"])
    finally:
        assert w3.provider.make_request("evm_revert", [snapshot])["result"] is True


def test_nothing_a_referee_does_after_the_seed_moves_the_panel(world):
    """The re-roll attack played in full: once the seed block is mined, a referee who dislikes the panel it can now
    compute adds 1 wei of stake (v1.1's re-roll), another unbonds, a whale registers with most of the stake; the
    draw is not rescheduled and seats exactly the panel nobody moved, and the unbonding referee, if seated, is
    locked and must vote like any other."""
    w3, registry = world.w3, world.registry
    whale = fresh_account(w3, b"late whale referee")
    for index, kind in ((2, TARGET), (1, DRAFT)):
        dispute_id, opened = open_dispute(world, index=index, kind=kind, draw=False)
        expected = _counterfactual_panel(world, dispute_id)
        assert len(expected) == 3
        send(w3, registry.functions.addStake(), world.referees[0], value=1)
        leaver = expected[0]
        send(w3, registry.functions.requestUnbond(), leaver)
        if index == 1:  # the last dispute: a tree this lopsided would make later draws of 3 escalate
            register_referee(world, whale, 90 * ETHER)  # 90 of ~94 ETH of the tree now
        tree_changed = registry.functions.stakeTreeChangedAt(DRAFT_MODEL).call()
        assert tree_changed > opened["blockNumber"]  # v1.1 rescheduled here
        held = locks(world, leaver)  # 1 where the first dispute seated it too (the seeds decide)
        receipt = draw_referees(world, dispute_id)
        assert not events(world, receipt, "DrawRescheduled")
        [drawn] = events(world, receipt, "RefereesDrawn")
        assert list(drawn["referees"]) == expected == panel(world, dispute_id)
        assert whale not in expected
        assert locks(world, leaver) == held + 1  # seated though unbonding: its stake stays until the dispute ends
        # the whale's weight counts only for draws seeded after it registered
        assert registry.functions.refereeStakeTotalAt(TARGET_MODEL, opened["blockNumber"] - 1).call() < 90 * ETHER


def test_a_convicted_verifier_cannot_escape_by_appealing_into_a_pool_too_small(w3, chain):
    """Finding 5: three listed referees convict the verifier in round 0; it appeals its own conviction, 7 fresh
    seats cannot be drawn, and after the last escalation the conviction stands (v1.1: Void, the liar's bond back,
    no slash, the lying job still counted against the drafter). Its appeal bond comes back."""
    world = deploy_world(w3, referees=3)
    verifier_locks = locks(world, world.verifier)
    dispute_id, _ = open_dispute(world, index=2, kind=TARGET)  # the verifier is accused
    refs = panel(world, dispute_id)
    assert sorted(refs) == sorted(world.referees)
    answer(world, dispute_id)
    vote_round(world, dispute_id, dict.fromkeys(refs, V_CHEATED))
    assert dispute(world, dispute_id)["roundResult"] == O_ACCUSED_LOST
    appeal(world, dispute_id, world.verifier, 1)  # the convicted verifier's best response
    assert events(world, draw_referees(world, dispute_id), "DrawEscalated")
    receipt = escalate_to_void(world, dispute_id, PARAMS.max_escalations)
    [unstaffed] = events(world, receipt, "AppealUnstaffed")
    assert (unstaffed["appellant"], unstaffed["refund"]) == (world.verifier, 2 * PARAMS.dispute_bond)
    [resolved] = events(world, receipt, "DisputeResolved")
    assert (resolved["outcome"], resolved["accusedSlashed"]) == (O_ACCUSED_LOST, PARAMS.accused_slash)
    assert stake(world, world.verifier) == STAKE - PARAMS.accused_slash
    assert credits(world, world.verifier) == 2 * PARAMS.dispute_bond  # only its appeal bond back
    job = job_view(world, world.running.job_id)
    assert job["verifierForfeited"] and not job["drafterForfeited"]  # the lying job leaves the drafter's window
    assert all(locks(world, r) == 0 for r in refs) and locks(world, world.verifier) == verifier_locks
    check_solvent(world)


def test_an_unstaffed_appeal_of_a_decided_round_keeps_its_payouts(w3, chain):
    """The verdict that stands is paid as a final one: the majority of round 0 earns the referee reward, the
    dissenter is penalized (burnt), and the challenger, who won, gets its bond back with its share of the slash."""
    world = deploy_world(w3, referees=3)
    dispute_id, _ = open_dispute(world, index=2, kind=TARGET)
    refs = panel(world, dispute_id)
    answer(world, dispute_id)
    vote_round(world, dispute_id, {r: (V_FAITHFUL if r == refs[2] else V_CHEATED) for r in refs})
    appeal(world, dispute_id, world.verifier, 1)
    draw_referees(world, dispute_id)
    escalate_to_void(world, dispute_id, PARAMS.max_escalations)
    reward = PARAMS.dispute_bond // 2
    assert credits(world, refs[0]) + credits(world, refs[1]) == reward and credits(world, refs[2]) == 0
    assert burnt(world) == PARAMS.referee_penalty
    assert credits(world, world.challenger) > PARAMS.dispute_bond  # its bond and a share of the slash
    check_solvent(world)


def test_one_penalty_lowers_a_minimum_staked_referee_and_only_the_floor_ejects_it(world):
    """Extra finding 1: a penalty at the minimum stake no longer ejects the referee (v1.1 did, so every captured
    round shrank the honest pool); it stays drawable with its lowered weight down to minRefereeStake / 4."""
    registry = world.registry
    dispute_id, _ = open_dispute(world, index=1, kind=DRAFT)
    refs = panel(world, dispute_id)
    answer(world, dispute_id)
    dissenter = refs[1]
    vote_round(world, dispute_id, {r: (V_FAITHFUL if r == dissenter else V_CHEATED) for r in refs})
    advance(world.w3, PARAMS.appeal_period + 1)
    resolve_final(world, dispute_id)
    left = PARAMS.min_referee_stake - PARAMS.referee_penalty
    assert stake(world, dissenter) == left
    assert registry.functions.refereeWeight(dissenter).call() == left
    assert registry.functions.isActive(dissenter, ROLE_REFEREE, DRAFT_MODEL).call()
    floor = registry.functions.refereeFloor().call()
    assert floor == PARAMS.min_referee_stake // 4
    # the protocol's own slashes (the dispute manager impersonated) down to the floor, then one wei below it
    w3, dm = world.w3, world.dm.address
    w3.provider.make_request("anvil_impersonateAccount", [dm])
    w3.provider.make_request("anvil_setBalance", [dm, hex(ETHER)])
    send(w3, registry.functions.slash(dissenter, left - floor), dm)
    assert registry.functions.refereeWeight(dissenter).call() == floor
    send(w3, registry.functions.slash(dissenter, 1), dm)
    assert registry.functions.refereeWeight(dissenter).call() == 0
    assert not registry.functions.isActive(dissenter, ROLE_REFEREE, DRAFT_MODEL).call()
    w3.provider.make_request("anvil_stopImpersonatingAccount", [dm])
