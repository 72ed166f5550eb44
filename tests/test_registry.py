"""StakingRegistry on a real anvil chain: roles, models, stake, unbonding, locks, slashing, referee lists."""

from __future__ import annotations

import pytest

from chainutil import (  # noqa: F401  (env is a fixture)
    ALPHA_STAR,
    DRAFT_MODEL,
    OTHER_MODEL,
    ROLE_DRAFTER,
    ROLE_NONE,
    ROLE_REFEREE,
    ROLE_VERIFIER,
    TARGET_MODEL,
    VOCAB,
    WAD,
    ZERO_ADDRESS,
    advance,
    env,
    events,
    expect_revert,
    impersonate,
    paid_gas,
    submit_job,
    transact,
)
from node.chain.contracts import deploy_contract
from node.chain.deploy import deploy_system
from node.chain.params import DEFAULT_PARAMS, ETHER


def account(env, who) -> dict:
    abi = next(f for f in env.registry.abi if f.get("name") == "accountOf")
    names = [c["name"] for c in abi["outputs"][0]["components"]]
    return dict(zip(names, env.registry.functions.accountOf(who).call()))


def registry_state(env, *who):
    reg = env.registry.functions
    return (
        env.w3.eth.get_balance(env.registry.address),
        tuple(tuple(reg.accountOf(w).call()) for w in who),
        tuple(tuple(reg.modelsOf(w).call()) for w in who),
        reg.refereeCount(DRAFT_MODEL).call(),
        reg.refereeCount(TARGET_MODEL).call(),
    )


# ---------------------------------------------------------------- construction and wiring


def test_parameters_and_wiring(env):
    reg = env.registry.functions
    p = env.params
    assert reg.minDrafterStake().call() == p.min_drafter_stake
    assert reg.minVerifierStake().call() == p.min_verifier_stake
    assert reg.minRefereeStake().call() == p.min_referee_stake
    assert [reg.minStake(r).call() for r in range(4)] == [
        0,
        p.min_drafter_stake,
        p.min_verifier_stake,
        p.min_referee_stake,
    ]
    assert reg.unbondingPeriod().call() == p.unbonding_period
    assert reg.deployer().call() == env.actors.deployer
    assert reg.market().call() == env.market.address
    assert reg.disputes().call() == (env.system.disputes.address if env.system.disputes else ZERO_ADDRESS)
    assert reg.MAX_MODELS().call() == 8


def test_deployment_params_validate_the_unbonding_relation(chain, env):
    p = DEFAULT_PARAMS
    # the longest dispute: the answer, then every round escalated to the limit, voted and appealable
    rounds = (p.max_appeals + 1) * (
        p.vote_commit_period + p.vote_reveal_period + p.appeal_period + p.max_escalations * p.escalation_period
    )
    needed = p.challenge_window + p.answer_period + rounds
    assert needed == p.challenge_window + p.dispute_duration and p.unbonding_period > needed
    with pytest.raises(ValueError, match="unbonding_period"):
        deploy_system(env.w3, env.actors.deployer, p.with_(unbonding_period=needed))
    system = deploy_system(env.w3, env.actors.deployer, p.with_(unbonding_period=needed + 1), with_disputes=False)
    assert system.disputes is None and system.alpha_window is system.market
    assert system.registry.functions.disputes().call() == ZERO_ADDRESS
    assert system.market.functions.disputeManager().call() == ZERO_ADDRESS


def test_set_protocol_contracts_only_once_and_only_by_deployer(chain, env):
    fn = env.registry.functions.setProtocolContracts(env.market.address, ZERO_ADDRESS)
    expect_revert(env, fn, env.actors.outsider, "RegistryNotDeployer", (env.actors.outsider,))
    expect_revert(env, fn, env.actors.deployer, "RegistryAlreadyWired")


def test_wiring_checks_on_a_fresh_registry(chain, env):
    w3, deployer = env.w3, env.actors.deployer
    registry = deploy_contract(w3, "StakingRegistry", ETHER, ETHER, ETHER, 1000, sender=deployer)
    market = deploy_contract(
        w3,
        "InferenceMarket",
        registry.address,
        60,
        60,
        60,
        1000,
        0,
        4,
        WAD // 10,
        1000,
        0,
        0,
        deployer,
        sender=deployer,
    )
    fresh = type(env)(w3, type(env.system)(registry, market, market, None, env.params, deployer), env.actors)
    state = lambda: (registry.functions.market().call(), registry.functions.disputes().call())  # noqa: E731
    # Not wired yet: nobody can register.
    expect_revert(
        fresh,
        registry.functions.registerDrafter(DRAFT_MODEL, TARGET_MODEL, ALPHA_STAR, VOCAB),
        env.actors.drafter,
        "NotWired",
        value=ETHER,
        state=state,
    )
    expect_revert(
        fresh,
        registry.functions.setProtocolContracts(ZERO_ADDRESS, ZERO_ADDRESS),
        deployer,
        "RegistryZeroAddress",
        state=state,
    )
    # The unbonding period (1000 s) does not outlast the market's challenge window (1000 s).
    expect_revert(
        fresh,
        registry.functions.setProtocolContracts(market.address, ZERO_ADDRESS),
        deployer,
        "UnbondingTooShort",
        (1000, 1000),
        state=state,
    )


# ---------------------------------------------------------------- registration


def test_register_drafter(chain, env):
    w3, who = env.w3, env.actors.spare[0]
    before = w3.eth.get_balance(env.registry.address)
    receipt = transact(
        w3, env.registry.functions.registerDrafter(OTHER_MODEL, TARGET_MODEL, WAD // 2, VOCAB), who, 2 * ETHER
    )
    assert w3.eth.get_balance(env.registry.address) == before + 2 * ETHER
    acct = account(env, who)
    assert (
        acct["stake"],
        acct["role"],
        acct["locks"],
        acct["unbondingSince"],
        acct["alphaStar"],
        acct["targetModel"],
    ) == (2 * ETHER, ROLE_DRAFTER, 0, 0, WAD // 2, TARGET_MODEL)
    reg = env.registry.functions
    assert reg.modelsOf(who).call() == [OTHER_MODEL]
    assert reg.isActive(who, ROLE_DRAFTER, OTHER_MODEL).call()
    assert not reg.isActive(who, ROLE_DRAFTER, TARGET_MODEL).call()
    assert not reg.isActive(who, ROLE_VERIFIER, OTHER_MODEL).call()
    assert reg.isActiveDrafter(who, OTHER_MODEL, TARGET_MODEL).call()
    assert not reg.isActiveDrafter(who, OTHER_MODEL, DRAFT_MODEL).call()
    assert reg.stakeOf(who).call() == 2 * ETHER
    (registered,) = events(env.registry, receipt, "Registered")
    assert registered.args.account == who and registered.args.role == ROLE_DRAFTER
    assert registered.args.stake == 2 * ETHER and registered.args.modelIds == [OTHER_MODEL]
    (pair,) = events(env.registry, receipt, "DrafterPairSet")
    assert (pair.args.draftModel, pair.args.targetModel) == (OTHER_MODEL, TARGET_MODEL)
    assert events(env.registry, receipt, "AlphaStarSet")[0].args.alphaStar == WAD // 2
    (claim,) = events(env.market, receipt, "AlphaClaimSet")
    assert (claim.args.drafter, claim.args.alphaStar) == (who, WAD // 2)
    assert env.market.functions.alphaWindowOf(who).call() == [WAD // 2, 0, 0, 0, 0]


def test_register_drafter_reverts(chain, env):
    reg, a, p = env.registry.functions, env.actors, env.params
    who = a.spare[0]
    state = lambda: registry_state(env, who, a.drafter)  # noqa: E731
    m = p.min_drafter_stake
    expect_revert(env, reg.registerDrafter(b"\0" * 32, TARGET_MODEL, 1, VOCAB), who, "ZeroModel", value=m, state=state)
    expect_revert(env, reg.registerDrafter(DRAFT_MODEL, b"\0" * 32, 1, VOCAB), who, "ZeroModel", value=m, state=state)
    expect_revert(
        env,
        reg.registerDrafter(DRAFT_MODEL, TARGET_MODEL, WAD + 1, VOCAB),
        who,
        "AlphaAboveWad",
        (WAD + 1,),
        value=m,
        state=state,
    )
    expect_revert(
        env,
        reg.registerDrafter(DRAFT_MODEL, TARGET_MODEL, 1, VOCAB),
        who,
        "StakeBelowMinimum",
        (m - 1, m),
        value=m - 1,
        state=state,
    )
    expect_revert(
        env,
        reg.registerDrafter(DRAFT_MODEL, TARGET_MODEL, 1, VOCAB),
        a.drafter,
        "AlreadyRegistered",
        (a.drafter,),
        value=m,
        state=state,
    )
    # one role per address
    expect_revert(
        env,
        reg.register(ROLE_REFEREE, [DRAFT_MODEL], [VOCAB]),
        a.drafter,
        "AlreadyRegistered",
        (a.drafter,),
        value=m,
        state=state,
    )


def test_register_verifier_and_referee(chain, env):
    w3, reg = env.w3, env.registry.functions
    verifier, referee = env.actors.spare[0], env.actors.spare[1]
    receipt = transact(w3, reg.register(ROLE_VERIFIER, [TARGET_MODEL, OTHER_MODEL], [VOCAB, VOCAB]), verifier, ETHER)
    assert events(env.registry, receipt, "Registered")[0].args.modelIds == [TARGET_MODEL, OTHER_MODEL]
    assert reg.isActive(verifier, ROLE_VERIFIER, TARGET_MODEL).call()
    assert reg.isActive(verifier, ROLE_VERIFIER, OTHER_MODEL).call()
    assert not reg.isActive(verifier, ROLE_VERIFIER, DRAFT_MODEL).call()
    assert reg.refereeCount(OTHER_MODEL).call() == 0  # verifiers are not referees
    transact(w3, reg.register(ROLE_REFEREE, [OTHER_MODEL], [VOCAB]), referee, ETHER // 2)
    assert reg.refereeCount(OTHER_MODEL).call() == 1
    assert reg.refereeAt(OTHER_MODEL, 0).call() == referee
    assert reg.isActive(referee, ROLE_REFEREE, OTHER_MODEL).call()
    assert reg.serves(referee, OTHER_MODEL).call() and not reg.serves(referee, TARGET_MODEL).call()


def test_register_reverts(chain, env):
    reg, who = env.registry.functions, env.actors.spare[0]
    state = lambda: registry_state(env, who)  # noqa: E731
    v = env.params.min_verifier_stake
    expect_revert(
        env, reg.register(ROLE_NONE, [TARGET_MODEL], [VOCAB]), who, "InvalidRole", (ROLE_NONE,), value=v, state=state
    )
    expect_revert(
        env,
        reg.register(ROLE_DRAFTER, [TARGET_MODEL], [VOCAB]),
        who,
        "InvalidRole",
        (ROLE_DRAFTER,),
        value=v,
        state=state,
    )
    expect_revert(env, reg.register(ROLE_VERIFIER, [], []), who, "BadModelCount", (0,), value=v, state=state)
    nine = [bytes([i + 1]) * 32 for i in range(9)]
    expect_revert(env, reg.register(ROLE_VERIFIER, nine, [VOCAB] * 9), who, "BadModelCount", (9,), value=v, state=state)
    expect_revert(
        env,
        reg.register(ROLE_VERIFIER, [TARGET_MODEL, b"\0" * 32], [VOCAB, VOCAB]),
        who,
        "ZeroModel",
        value=v,
        state=state,
    )
    expect_revert(
        env,
        reg.register(ROLE_REFEREE, [TARGET_MODEL, TARGET_MODEL], [VOCAB, VOCAB]),
        who,
        "DuplicateModel",
        (TARGET_MODEL,),
        value=v,
        state=state,
    )
    r = env.params.min_referee_stake
    expect_revert(
        env,
        reg.register(ROLE_REFEREE, [TARGET_MODEL], [VOCAB]),
        who,
        "StakeBelowMinimum",
        (r - 1, r),
        value=r - 1,
        state=state,
    )
    expect_revert(
        env,
        reg.register(ROLE_VERIFIER, [TARGET_MODEL], [VOCAB]),
        who,
        "StakeBelowMinimum",
        (r, v),
        value=r,
        state=state,
    )


# ---------------------------------------------------------------- stake and claims


def test_add_stake(chain, env):
    reg, who = env.registry.functions, env.actors.verifier
    before = reg.stakeOf(who).call()
    receipt = transact(env.w3, reg.addStake(), who, 123)
    assert reg.stakeOf(who).call() == before + 123
    (added,) = events(env.registry, receipt, "StakeAdded")
    assert (added.args.account, added.args.amount, added.args.stake) == (who, 123, before + 123)


def test_add_stake_reverts(chain, env):
    reg, a = env.registry.functions, env.actors
    state = lambda: registry_state(env, a.outsider, a.verifier)  # noqa: E731
    expect_revert(env, reg.addStake(), a.outsider, "NotRegistered", (a.outsider,), value=1, state=state)
    expect_revert(env, reg.addStake(), a.verifier, "ZeroValue", state=state)
    transact(env.w3, reg.requestUnbond(), a.verifier)
    expect_revert(env, reg.addStake(), a.verifier, "AlreadyUnbonding", (a.verifier,), value=1, state=state)


def test_set_alpha_star(chain, env):
    reg, drafter = env.registry.functions, env.actors.drafter
    receipt = transact(env.w3, reg.setAlphaStar(WAD * 9 // 10), drafter)
    assert account(env, drafter)["alphaStar"] == WAD * 9 // 10
    assert events(env.registry, receipt, "AlphaStarSet")[0].args.alphaStar == WAD * 9 // 10
    assert events(env.market, receipt, "AlphaClaimSet")[0].args.alphaStar == WAD * 9 // 10
    assert env.market.functions.alphaWindowOf(drafter).call()[0] == WAD * 9 // 10
    # Lowering is fine while the window holds no cycle.
    transact(env.w3, reg.setAlphaStar(WAD // 10), drafter)
    assert env.market.functions.alphaWindowOf(drafter).call()[0] == WAD // 10


def test_set_alpha_star_reverts(chain, env):
    reg, a = env.registry.functions, env.actors
    state = lambda: registry_state(env, a.drafter, a.verifier)  # noqa: E731
    expect_revert(env, reg.setAlphaStar(1), a.verifier, "NotDrafter", (a.verifier,), state=state)
    expect_revert(env, reg.setAlphaStar(1), a.outsider, "NotDrafter", (a.outsider,), state=state)
    expect_revert(env, reg.setAlphaStar(WAD + 1), a.drafter, "AlphaAboveWad", (WAD + 1,), state=state)


# ---------------------------------------------------------------- unbonding


def test_unbonding_period_enforced_then_withdraw(chain, env):
    w3, reg, who = env.w3, env.registry.functions, env.actors.verifier
    stake = reg.stakeOf(who).call()
    receipt = transact(w3, reg.requestUnbond(), who)
    since = account(env, who)["unbondingSince"]
    (ev,) = events(env.registry, receipt, "UnbondRequested")
    assert ev.args.withdrawableAt == since + env.params.unbonding_period
    assert not reg.isActive(who, ROLE_VERIFIER, TARGET_MODEL).call()
    state = lambda: registry_state(env, who)  # noqa: E731
    expect_revert(env, reg.requestUnbond(), who, "AlreadyUnbonding", (who,), state=state)
    expect_revert(
        env, reg.withdrawUnbonded(), who, "UnbondingNotElapsed", (since + env.params.unbonding_period,), state=state
    )
    advance(w3, env.params.unbonding_period - 60)
    expect_revert(env, reg.withdrawUnbonded(), who, "UnbondingNotElapsed", state=state)
    advance(w3, 61)
    balance = w3.eth.get_balance(who)
    receipt = transact(w3, reg.withdrawUnbonded(), who)
    assert w3.eth.get_balance(who) == balance + stake - paid_gas(w3, receipt)
    assert events(env.registry, receipt, "Unbonded")[0].args.amount == stake
    assert account(env, who)["role"] == ROLE_NONE and reg.modelsOf(who).call() == []
    assert not reg.serves(who, TARGET_MODEL).call()
    # The address may register again, with other models.
    transact(w3, reg.register(ROLE_REFEREE, [OTHER_MODEL], [VOCAB]), who, ETHER)
    assert reg.isActive(who, ROLE_REFEREE, OTHER_MODEL).call()
    assert not reg.serves(who, TARGET_MODEL).call()


def test_withdraw_unbonded_to_a_contract_that_refuses_eth(chain, env):
    w3, reg = env.w3, env.registry.functions
    sink = impersonate(w3, deploy_contract(w3, "SpecMathHarness").address)  # a contract with no receive()
    transact(w3, reg.register(ROLE_REFEREE, [OTHER_MODEL], [VOCAB]), sink, ETHER)
    transact(w3, reg.requestUnbond(), sink)
    advance(w3, env.params.unbonding_period + 1)
    expect_revert(env, reg.withdrawUnbonded(), sink, "RegistryTransferFailed", state=lambda: registry_state(env, sink))


def test_withdraw_unbonded_reverts_when_not_unbonding(chain, env):
    reg, a = env.registry.functions, env.actors
    state = lambda: registry_state(env, a.verifier, a.outsider)  # noqa: E731
    expect_revert(env, reg.withdrawUnbonded(), a.verifier, "NotUnbonding", (a.verifier,), state=state)
    expect_revert(env, reg.withdrawUnbonded(), a.outsider, "NotUnbonding", (a.outsider,), state=state)
    expect_revert(env, reg.requestUnbond(), a.outsider, "NotRegistered", (a.outsider,), state=state)


def test_locked_stake_cannot_be_withdrawn(chain, env):
    w3, reg, a = env.w3, env.registry.functions, env.actors
    job_id = submit_job(env)  # locks the drafter and the verifier until the job is finalized
    assert account(env, a.drafter)["locks"] == 1 and account(env, a.verifier)["locks"] == 1
    transact(w3, reg.requestUnbond(), a.drafter)
    advance(w3, env.params.unbonding_period + 1)
    state = lambda: registry_state(env, a.drafter)  # noqa: E731
    expect_revert(env, reg.withdrawUnbonded(), a.drafter, "StakeLocked", (1,), state=state)
    # The verifier never accepts: the job is cancelled and the stakes unlock.
    transact(w3, env.market.functions.claimTimeout(job_id), a.outsider)
    assert account(env, a.drafter)["locks"] == 0
    stake = reg.stakeOf(a.drafter).call()
    receipt = transact(w3, reg.withdrawUnbonded(), a.drafter)
    assert events(env.registry, receipt, "Unbonded")[0].args.amount == stake


# ---------------------------------------------------------------- protocol hooks


def test_protocol_hooks_reject_outsiders(chain, env):
    reg, a = env.registry.functions, env.actors
    state = lambda: registry_state(env, a.drafter)  # noqa: E731
    for fn in (reg.lock(a.drafter), reg.unlock(a.drafter), reg.slash(a.drafter, 1)):
        expect_revert(env, fn, a.outsider, "NotProtocol", (a.outsider,), state=state)
        expect_revert(env, fn, a.drafter, "NotProtocol", (a.drafter,), state=state)


def test_lock_unlock_by_protocol_contracts(chain, env):
    w3, reg, who = env.w3, env.registry.functions, env.actors.referees[0]
    callers = [env.market.address] + ([env.system.disputes.address] if env.system.disputes else [])
    for caller in callers:
        impersonate(w3, caller)
        receipt = transact(w3, reg.lock(who), caller)
        assert events(env.registry, receipt, "Locked")[0].args.locks == 1
        assert account(env, who)["locks"] == 1
        receipt = transact(w3, reg.unlock(who), caller)
        assert events(env.registry, receipt, "Unlocked")[0].args.locks == 0
        state = lambda: registry_state(env, who)  # noqa: E731
        expect_revert(env, reg.unlock(who), caller, "NotLocked", (who,), state=state)


def test_slash_sends_to_the_calling_contract_and_caps_at_stake(chain, env):
    w3, reg, who = env.w3, env.registry.functions, env.actors.verifier
    market = impersonate(w3, env.market.address)
    stake = reg.stakeOf(who).call()
    assert reg.slash(who, ETHER // 4).call({"from": market}) == ETHER // 4
    before = w3.eth.get_balance(market), w3.eth.get_balance(env.registry.address)
    receipt = transact(w3, reg.slash(who, ETHER // 4), market)
    (ev,) = events(env.registry, receipt, "Slashed")
    assert (ev.args.account, ev.args.by, ev.args.amount) == (who, market, ETHER // 4)
    assert reg.stakeOf(who).call() == stake - ETHER // 4
    # The ETH went to the calling contract (which paid this transaction's gas itself here).
    assert w3.eth.get_balance(market) == before[0] + ETHER // 4 - paid_gas(w3, receipt)
    assert w3.eth.get_balance(env.registry.address) == before[1] - ETHER // 4
    # Below the minimum stake the verifier is no longer active.
    assert not reg.isActive(who, ROLE_VERIFIER, TARGET_MODEL).call()
    # Slashing works while unbonding, and never takes more than the stake.
    transact(w3, reg.requestUnbond(), who)
    assert reg.slash(who, 100 * ETHER).call({"from": market}) == stake - ETHER // 4
    transact(w3, reg.slash(who, 100 * ETHER), market)
    assert reg.stakeOf(who).call() == 0
    receipt = transact(w3, reg.slash(who, 1), market)
    assert reg.slash(who, 1).call({"from": market}) == 0
    assert events(env.registry, receipt, "Slashed") == []


# ---------------------------------------------------------------- referee enumeration


def test_referee_swap_and_pop_on_unbond(chain, env):
    w3, reg = env.w3, env.registry.functions
    r0, r1, r2 = env.actors.referees
    assert [reg.refereeAt(DRAFT_MODEL, i).call() for i in range(3)] == [r0, r1, r2]
    assert reg.refereeCount(TARGET_MODEL).call() == 3
    transact(w3, reg.requestUnbond(), r0)  # the last one moves into slot 0
    assert reg.refereeCount(DRAFT_MODEL).call() == 2
    assert [reg.refereeAt(DRAFT_MODEL, i).call() for i in range(2)] == [r2, r1]
    assert [reg.refereeAt(TARGET_MODEL, i).call() for i in range(2)] == [r2, r1]
    transact(w3, reg.requestUnbond(), r1)  # the last one: plain pop
    assert [reg.refereeAt(DRAFT_MODEL, i).call() for i in range(1)] == [r2]
    newcomer = env.actors.spare[0]
    transact(w3, reg.register(ROLE_REFEREE, [DRAFT_MODEL], [VOCAB]), newcomer, ETHER)
    assert [reg.refereeAt(DRAFT_MODEL, i).call() for i in range(2)] == [r2, newcomer]
    transact(w3, reg.requestUnbond(), r2)
    assert [reg.refereeAt(DRAFT_MODEL, i).call() for i in range(1)] == [newcomer]
    assert reg.refereeCount(TARGET_MODEL).call() == 0


# ------------------------------------------------------------------ referee stake trees (the weighted draw)


def test_referee_stake_tree_follows_register_add_stake_slash_unbond_and_withdraw(chain, env):
    """The per-model stake tree holds each referee's active stake: updated by register, addStake, a slash (to 0
    once below the minimum), requestUnbond and withdrawUnbonded; a re-registration reuses the slot."""
    reg, w3 = env.registry, env.w3
    referee = env.actors.outsider
    minimum = reg.functions.minRefereeStake().call()
    before = [reg.functions.refereeStakeTotal(m).call() for m in (DRAFT_MODEL, OTHER_MODEL)]
    transact(
        env.w3, reg.functions.register(ROLE_REFEREE, [DRAFT_MODEL, OTHER_MODEL], [VOCAB, VOCAB]), referee, 2 * minimum
    )
    slot, size = reg.functions.stakeTreeSlot(DRAFT_MODEL, referee).call()
    assert slot == size and slot > 0
    assert reg.functions.refereeWeight(referee).call() == 2 * minimum
    assert [reg.functions.refereeStakeTotal(m).call() for m in (DRAFT_MODEL, OTHER_MODEL)] == [
        before[0] + 2 * minimum,
        before[1] + 2 * minimum,
    ]
    assert reg.functions.stakeTreeChangedAt(DRAFT_MODEL).call() == w3.eth.block_number
    # the last point of the tree (the newest slot's stake) is this referee's
    total = reg.functions.refereeStakeTotal(OTHER_MODEL).call()
    assert reg.functions.refereeByStake(OTHER_MODEL, total - 1).call() == referee
    transact(env.w3, reg.functions.addStake(), referee, minimum)
    assert reg.functions.refereeWeight(referee).call() == 3 * minimum
    assert reg.functions.refereeStakeTotal(OTHER_MODEL).call() == before[1] + 3 * minimum
    # a slash by the protocol (the dispute manager's address is impersonated) lowers it; below the minimum: 0
    market = reg.functions.disputes().call()
    w3.provider.make_request("anvil_impersonateAccount", [market])
    w3.provider.make_request("anvil_setBalance", [market, hex(10**18)])
    transact(env.w3, reg.functions.slash(referee, minimum), market)
    assert reg.functions.refereeWeight(referee).call() == 2 * minimum
    transact(env.w3, reg.functions.slash(referee, 2 * minimum - 1), market)
    assert reg.functions.refereeWeight(referee).call() == 0
    assert reg.functions.refereeStakeTotal(OTHER_MODEL).call() == before[1]
    transact(env.w3, reg.functions.addStake(), referee, minimum)  # back above the minimum: active again
    assert reg.functions.refereeWeight(referee).call() == minimum + 1
    transact(env.w3, reg.functions.requestUnbond(), referee)
    assert reg.functions.refereeWeight(referee).call() == 0
    assert [reg.functions.refereeStakeTotal(m).call() for m in (DRAFT_MODEL, OTHER_MODEL)] == before
    w3.provider.make_request("evm_increaseTime", [reg.functions.unbondingPeriod().call() + 1])
    w3.provider.make_request("evm_mine", [])
    transact(env.w3, reg.functions.withdrawUnbonded(), referee)
    transact(env.w3, reg.functions.register(ROLE_REFEREE, [DRAFT_MODEL], [VOCAB]), referee, minimum)
    assert reg.functions.stakeTreeSlot(DRAFT_MODEL, referee).call()[0] == slot  # the same slot, no growth
    assert reg.functions.refereeStakeTotal(DRAFT_MODEL).call() == before[0] + minimum
