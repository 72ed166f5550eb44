"""Deploy and wire the protocol: StakingRegistry, InferenceMarket (also the α window) and, when its
artifact exists, DisputeManager, and TranscriptSettlement (transcript mode), with the parameters of
node/chain/params.py.

The market's α parameters include its `treasury` (α slashes and fees; the burn address by default).
Wiring order: registry → market(registry) → disputes(registry, market) →
registry.setProtocolContracts(market, disputes) → market.setDisputeManager(disputes) →
transcript(market) → market.setTranscriptSettlement(transcript).
"""

from __future__ import annotations

from dataclasses import dataclass

from web3 import Web3
from web3.contract import Contract

from node.chain.compile import compile_contracts
from node.chain.contracts import DeploymentError, deploy_contract
from node.chain.params import DEFAULT_PARAMS, DeploymentParams


@dataclass
class System:
    """The deployed protocol as web3 contract objects (`alpha_window` is the market: it inherits AlphaWindow)."""

    registry: Contract
    market: Contract
    alpha_window: Contract
    disputes: Contract | None
    params: DeploymentParams
    deployer: str
    transcript: Contract | None = None  # TranscriptSettlement: ends the market's transcript-mode jobs


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
    if params.treasury != Web3.to_checksum_address(params.treasury):  # web3 takes checksummed addresses only
        params = params.with_(treasury=Web3.to_checksum_address(params.treasury))
    artifacts = artifacts or compile_contracts()
    deployer = deployer or w3.eth.accounts[0]
    p = params

    registry = deploy_contract(w3, "StakingRegistry", *p.registry_args(), sender=deployer, artifacts=artifacts)
    market = deploy_contract(
        w3, "InferenceMarket", registry.address, *p.market_args(), sender=deployer, artifacts=artifacts
    )
    disputes = None
    if with_disputes and "DisputeManager" in artifacts:
        disputes = deploy_contract(
            w3,
            "DisputeManager",
            registry.address,
            market.address,
            *p.disputes_args(),
            sender=deployer,
            artifacts=artifacts,
        )
    disputes_address = disputes.address if disputes is not None else "0x" + "00" * 20
    _transact(w3, registry.functions.setProtocolContracts(market.address, disputes_address), deployer)
    if disputes is not None:
        _transact(w3, market.functions.setDisputeManager(disputes.address), deployer)
    transcript = None
    if "TranscriptSettlement" in artifacts:
        transcript = deploy_contract(
            w3, "TranscriptSettlement", market.address, *p.transcript_args(), sender=deployer, artifacts=artifacts
        )
        _transact(w3, market.functions.setTranscriptSettlement(transcript.address), deployer)
    return System(
        registry=registry,
        market=market,
        alpha_window=market,
        disputes=disputes,
        params=params,
        deployer=deployer,
        transcript=transcript,
    )
