"""Deploy and wire the protocol: StakingRegistry, InferenceMarket (also the α window) and, when its
artifact exists, DisputeManager, and TranscriptSettlement (transcript mode), with the parameters of
node/chain/params.py.

The market's α parameters include its `treasury` (α slashes and fees; the burn address by default, or the
ProbeScheduler, which pays the probes that alone move α windows once wired: docs/protocol.md "Soundness (v1.2)").
Wiring order: registry → probes(registry) → probes.setCorpus(...) for each corpus → market(registry,
treasury) → disputes(registry, market) → registry.setProtocolContracts(market, disputes) →
market.setDisputeManager(disputes) → transcript(market) → market.setTranscriptSettlement(transcript) →
probes.wire(market) → market.setProbeScheduler(probes) (only with corpora).
"""

from __future__ import annotations

from dataclasses import dataclass

from web3 import Web3
from web3.contract import Contract

from node.chain.compile import compile_contracts
from node.chain.contracts import DeploymentError, deploy_contract
from node.chain.params import DEFAULT_PARAMS, PROBE_TREASURY, DeploymentParams


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
    probes: Contract | None = None  # ProbeScheduler: the probes that move α windows; the treasury by default


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
    corpora: dict | None = None,
) -> System:
    """Deploy and wire registry, probe scheduler, market and (if compiled and `with_disputes`) the dispute manager.

    `corpora` maps a target model id (bytes32) to its probe corpus (root, size, eos token): fixed at deployment.
    The returned System's params hold the treasury's real address."""
    params = params or DEFAULT_PARAMS
    params.validate()
    artifacts = artifacts or compile_contracts()
    deployer = deployer or w3.eth.accounts[0]

    registry = deploy_contract(w3, "StakingRegistry", *params.registry_args(), sender=deployer, artifacts=artifacts)
    probes = deploy_contract(
        w3, "ProbeScheduler", registry.address, *params.probe_args(), sender=deployer, artifacts=artifacts
    )
    for model, (root, size, eos) in (corpora or {}).items():
        _transact(w3, probes.functions.setCorpus(model, root, size, eos), deployer)
    if params.treasury == PROBE_TREASURY and not corpora:
        raise DeploymentError("the probe scheduler is the treasury only in a deployment with probe corpora")
    treasury = probes.address if params.treasury == PROBE_TREASURY else Web3.to_checksum_address(params.treasury)
    params = params.with_(treasury=treasury)  # web3 takes checksummed addresses only
    p = params
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
    _transact(w3, probes.functions.wire(market.address), deployer)
    if corpora:  # probes move the α windows from now on (without a corpus there is nothing to probe with)
        _transact(w3, market.functions.setProbeScheduler(probes.address), deployer)
    return System(
        registry=registry,
        market=market,
        alpha_window=market,
        disputes=disputes,
        params=params,
        deployer=deployer,
        transcript=transcript,
        probes=probes,
    )
