"""Deploy and wire the protocol: StakingRegistry, InferenceMarket (also the α window) and, when its
artifact exists, DisputeManager. All default parameters live in `DeploymentParams`.

Wiring order: registry → market(registry) → disputes(registry, market) →
registry.setProtocolContracts(market, disputes) → market.setDisputeManager(disputes).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from web3 import Web3
from web3.contract import Contract

from node.chain.compile import compile_contracts
from node.chain.contracts import DeploymentError, deploy_contract

ETHER = 10**18
WAD = 10**18
MINUTE = 60
HOUR = 3600
DAY = 86400


@dataclass(frozen=True)
class DeploymentParams:
    """Every deployment parameter, with the defaults in one place (wei, seconds, WAD, basis points)."""

    # StakingRegistry
    min_drafter_stake: int = 1 * ETHER
    min_verifier_stake: int = 1 * ETHER
    min_referee_stake: int = ETHER // 2
    unbonding_period: int = 3 * DAY
    # InferenceMarket
    accept_timeout: int = 10 * MINUTE
    commit_timeout: int = 2 * MINUTE
    verify_timeout: int = 2 * MINUTE
    challenge_window: int = 1 * DAY
    timeout_slash: int = ETHER // 10
    # α window (inherited by the market): a full window holds 8 buckets of >= alpha_bucket_cycles cycles.
    # N = 512, τ = 0.1: an honest drafter whose true α equals its claim is slashed within 20,000 cycles with
    # probability < 5e-5 at γ ≥ 4 and ~1e-3 at γ = 1 (geometric model; see docs/contracts.md).
    alpha_bucket_cycles: int = 64
    alpha_tolerance: int = WAD // 10
    alpha_slash_bps: int = 1_000
    # DisputeManager (deployed only when its artifact exists)
    dispute_bond: int = ETHER // 10
    answer_period: int = 1 * HOUR
    vote_commit_period: int = 1 * HOUR
    vote_reveal_period: int = 1 * HOUR
    referee_count: int = 3
    accused_slash: int = ETHER // 2
    referee_penalty: int = ETHER // 100

    @property
    def alpha_window_cycles(self) -> int:
        return 8 * self.alpha_bucket_cycles

    @property
    def dispute_duration(self) -> int:
        return self.answer_period + self.vote_commit_period + self.vote_reveal_period

    def validate(self) -> None:
        """Unbonding must outlast the challenge window plus a full dispute, so nobody escapes a slash."""
        needed = self.challenge_window + self.dispute_duration
        if self.unbonding_period <= needed:
            raise ValueError(
                f"unbonding_period={self.unbonding_period}s must exceed challenge window + dispute duration = {needed}s"
            )
        if not 1 <= self.alpha_bucket_cycles <= 2**24:
            raise ValueError("alpha_bucket_cycles must be in 1..2^24")

    def with_(self, **changes) -> DeploymentParams:
        return replace(self, **changes)

    def as_dict(self) -> dict:
        return asdict(self)


DEFAULT_PARAMS = DeploymentParams()


@dataclass
class System:
    """The deployed protocol as web3 contract objects (`alpha_window` is the market: it inherits AlphaWindow)."""

    registry: Contract
    market: Contract
    alpha_window: Contract
    disputes: Contract | None
    params: DeploymentParams
    deployer: str


def _transact(w3: Web3, fn, sender: str) -> None:
    receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender}))
    if receipt.status != 1:
        raise DeploymentError(f"wiring transaction {fn.fn_name} failed")


def deploy_system(
    w3: Web3,
    deployer: str | None = None,
    params: DeploymentParams | None = None,
    artifacts: dict | None = None,
    with_disputes: bool = True,
) -> System:
    """Deploy and wire registry, market and (if compiled and `with_disputes`) the dispute manager."""
    params = params or DEFAULT_PARAMS
    params.validate()
    artifacts = artifacts or compile_contracts()
    deployer = deployer or w3.eth.accounts[0]
    p = params

    registry = deploy_contract(
        w3,
        "StakingRegistry",
        p.min_drafter_stake,
        p.min_verifier_stake,
        p.min_referee_stake,
        p.unbonding_period,
        sender=deployer,
        artifacts=artifacts,
    )
    market = deploy_contract(
        w3,
        "InferenceMarket",
        registry.address,
        p.accept_timeout,
        p.commit_timeout,
        p.verify_timeout,
        p.challenge_window,
        p.timeout_slash,
        p.alpha_bucket_cycles,
        p.alpha_tolerance,
        p.alpha_slash_bps,
        sender=deployer,
        artifacts=artifacts,
    )
    disputes = None
    if with_disputes and "DisputeManager" in artifacts:
        disputes = deploy_contract(
            w3,
            "DisputeManager",
            registry.address,
            market.address,
            p.dispute_bond,
            p.answer_period,
            p.vote_commit_period,
            p.vote_reveal_period,
            p.referee_count,
            p.accused_slash,
            p.referee_penalty,
            sender=deployer,
            artifacts=artifacts,
        )
    disputes_address = disputes.address if disputes is not None else "0x" + "00" * 20
    _transact(w3, registry.functions.setProtocolContracts(market.address, disputes_address), deployer)
    if disputes is not None:
        _transact(w3, market.functions.setDisputeManager(disputes.address), deployer)
    return System(
        registry=registry, market=market, alpha_window=market, disputes=disputes, params=params, deployer=deployer
    )
