"""StakingRegistry wired to InferenceMarket, driven through ape: registration, events, reverts, unbonding."""

from __future__ import annotations

import ape
import pytest
from eth_utils import keccak

from node.chain.params import DEFAULT_PARAMS, ETHER, WAD

ZERO_ADDRESS = "0x" + "00" * 20

# IStakingRegistry.Role
NONE, DRAFTER, VERIFIER, REFEREE = range(4)
DRAFT_MODEL = keccak(text="models/draft")
TARGET_MODEL = keccak(text="models/target")
ALPHA_STAR = 6 * WAD // 10
VOCAB = 768  # registered with every model id (docs/protocol.md, "Project decisions")


@pytest.fixture
def drafter(accounts):
    return accounts[2]


@pytest.fixture
def referee(accounts):
    return accounts[4]


def test_deployment_and_wiring(project, deployer, registry, market):
    assert registry.minDrafterStake() == DEFAULT_PARAMS.min_drafter_stake
    assert [registry.minStake(role) for role in range(4)] == [0, ETHER, ETHER, ETHER // 2]
    assert registry.unbondingPeriod() == DEFAULT_PARAMS.unbonding_period
    assert registry.deployer() == deployer.address
    assert registry.market() == market.address
    assert registry.disputes() == ZERO_ADDRESS
    assert market.registry() == registry.address
    assert market.challengeWindow() == DEFAULT_PARAMS.challenge_window
    # The wiring transaction is in the registry's history, with its event.
    (wired,) = list(registry.ProtocolContractsSet)  # the registry's logs of that event: one wiring
    assert wired.market == market.address and wired.disputes == ZERO_ADDRESS


def test_wiring_happens_once_and_only_by_the_deployer(accounts, project, deployer, registry, market):
    with ape.reverts(registry.RegistryAlreadyWired):
        registry.setProtocolContracts(market.address, ZERO_ADDRESS, sender=deployer)
    fresh = deployer.deploy(project.StakingRegistry, *DEFAULT_PARAMS.registry_args())
    with ape.reverts(fresh.RegistryNotDeployer, caller=accounts[1].address):
        fresh.setProtocolContracts(market.address, ZERO_ADDRESS, sender=accounts[1])
    # The unbonding period must outlast the market's challenge window.
    short = deployer.deploy(project.StakingRegistry, ETHER, ETHER, ETHER, DEFAULT_PARAMS.challenge_window)
    with ape.reverts(
        short.UnbondingTooShort,
        unbondingPeriod=DEFAULT_PARAMS.challenge_window,
        challengeWindow=DEFAULT_PARAMS.challenge_window,
    ):
        short.setProtocolContracts(market.address, ZERO_ADDRESS, sender=deployer)
    with ape.reverts(fresh.NotWired):
        fresh.registerDrafter(DRAFT_MODEL, TARGET_MODEL, ALPHA_STAR, VOCAB, sender=accounts[1], value=ETHER)


def test_register_drafter_stakes_and_emits(chain, registry, market, drafter):
    stake = 2 * ETHER
    balance_before = drafter.balance
    tx = registry.registerDrafter(DRAFT_MODEL, TARGET_MODEL, ALPHA_STAR, VOCAB, sender=drafter, value=stake)

    assert tx.status == 1
    assert drafter.balance == balance_before - stake - tx.total_fees_paid
    assert chain.provider.get_balance(registry.address) == stake
    assert registry.stakeOf(drafter) == stake
    account = registry.accountOf(drafter)
    assert (account.stake, account.role, account.locks, account.unbondingSince) == (stake, DRAFTER, 0, 0)
    assert account.alphaStar == ALPHA_STAR and account.targetModel == TARGET_MODEL
    assert registry.modelsOf(drafter) == [DRAFT_MODEL]
    assert registry.registeredBlock(drafter) == tx.block_number
    assert registry.isActiveDrafter(drafter, DRAFT_MODEL, TARGET_MODEL)
    assert not registry.isActiveDrafter(drafter, TARGET_MODEL, DRAFT_MODEL)
    assert registry.isActive(drafter, DRAFTER, DRAFT_MODEL) and not registry.isActive(drafter, VERIFIER, DRAFT_MODEL)

    assert tx.events == [
        registry.VocabSizeSet(account=drafter, modelId=DRAFT_MODEL, vocabSize=VOCAB),
        registry.Registered(account=drafter, role=DRAFTER, stake=stake, modelIds=[DRAFT_MODEL]),
        registry.DrafterPairSet(account=drafter, draftModel=DRAFT_MODEL, targetModel=TARGET_MODEL),
        registry.AlphaStarSet(account=drafter, alphaStar=ALPHA_STAR),
        market.AlphaClaimSet(drafter=drafter, alphaStar=ALPHA_STAR),  # the address's window (kept for good)
    ]


def test_registration_rejects_bad_input(registry, market, drafter, referee):
    minimum = DEFAULT_PARAMS.min_drafter_stake
    with ape.reverts(registry.StakeBelowMinimum, stake=minimum - 1, minimum=minimum):
        registry.registerDrafter(DRAFT_MODEL, TARGET_MODEL, ALPHA_STAR, VOCAB, sender=drafter, value=minimum - 1)
    with ape.reverts(registry.AlphaAboveWad, alphaStar=WAD + 1):
        registry.registerDrafter(DRAFT_MODEL, TARGET_MODEL, WAD + 1, VOCAB, sender=drafter, value=minimum)
    with ape.reverts(registry.ZeroModel):
        registry.registerDrafter(b"\x00" * 32, TARGET_MODEL, ALPHA_STAR, VOCAB, sender=drafter, value=minimum)
    with ape.reverts(registry.InvalidRole, role=DRAFTER):
        registry.register(DRAFTER, [DRAFT_MODEL], [VOCAB], sender=referee, value=ETHER)
    with ape.reverts(registry.BadModelCount, count=0):
        registry.register(REFEREE, [], [], sender=referee, value=ETHER)
    with ape.reverts(registry.BadModelCount, count=9):
        registry.register(REFEREE, [keccak(text=str(i)) for i in range(9)], [VOCAB] * 9, sender=referee, value=ETHER)
    with ape.reverts(registry.DuplicateModel, modelId=TARGET_MODEL):
        registry.register(REFEREE, [TARGET_MODEL, TARGET_MODEL], [VOCAB, VOCAB], sender=referee, value=ETHER)

    registry.registerDrafter(DRAFT_MODEL, TARGET_MODEL, ALPHA_STAR, VOCAB, sender=drafter, value=minimum)
    with ape.reverts(registry.AlreadyRegistered, account=drafter.address):
        registry.register(VERIFIER, [TARGET_MODEL], [VOCAB], sender=drafter, value=ETHER)
    with ape.reverts(registry.NotProtocol, caller=drafter.address):
        registry.lock(drafter, sender=drafter)


def test_each_test_starts_from_the_deployment(registry, drafter, referee):
    """ape's chain isolation reverts what the tests above registered."""
    assert registry.accountOf(drafter).role == NONE and registry.stakeOf(drafter) == 0
    assert registry.refereeCount(TARGET_MODEL) == 0


def test_referee_unbonds_after_the_period(chain, registry, market, referee):
    stake = ETHER
    registry.register(REFEREE, [TARGET_MODEL, DRAFT_MODEL], [VOCAB, VOCAB], sender=referee, value=stake)
    assert [registry.refereeCount(m) for m in (TARGET_MODEL, DRAFT_MODEL)] == [1, 1]
    assert registry.refereeAt(TARGET_MODEL, 0) == referee.address

    tx = registry.requestUnbond(sender=referee)
    withdrawable_at = chain.blocks[tx.block_number].timestamp + DEFAULT_PARAMS.unbonding_period
    assert tx.events == [  # the referee's draw weight goes to 0 at once, then the unbonding starts
        registry.RefereeWeightSet(account=referee, weight=0),
        registry.UnbondRequested(account=referee, withdrawableAt=withdrawable_at),
    ]
    assert [registry.refereeCount(m) for m in (TARGET_MODEL, DRAFT_MODEL)] == [0, 0]  # left the lists at once
    assert not registry.isActive(referee, REFEREE, TARGET_MODEL)
    with ape.reverts(registry.AlreadyUnbonding, account=referee.address):
        registry.addStake(sender=referee, value=1)
    with ape.reverts(registry.UnbondingNotElapsed, withdrawableAt=withdrawable_at):
        registry.withdrawUnbonded(sender=referee)

    chain.pending_timestamp = withdrawable_at
    balance_before = referee.balance
    tx = registry.withdrawUnbonded(sender=referee)
    assert tx.events == [registry.Unbonded(account=referee, amount=stake)]
    assert referee.balance == balance_before + stake - tx.total_fees_paid
    assert chain.provider.get_balance(registry.address) == 0
    assert registry.accountOf(referee).role == NONE and registry.modelsOf(referee) == []
    assert not registry.serves(referee, TARGET_MODEL)
    with ape.reverts(registry.NotUnbonding, account=referee.address):
        registry.withdrawUnbonded(sender=referee)
