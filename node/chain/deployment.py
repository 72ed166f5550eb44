"""The deployment file every command reads: RPC URL, chain id, start block, contract addresses, parameters.

`verispec chain up` writes it (`<home>/deployment.json`, home = $VERISPEC_HOME or ./.verispec);
nodes, the requester CLI and the demo load it and bind web3 contract objects from the compiled ABIs.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from web3 import Web3
from web3.contract import Contract

from node.chain.compile import compile_contracts
from node.chain.deploy import System
from node.chain.params import DeploymentParams

CONTRACT_NAMES = ("StakingRegistry", "InferenceMarket", "DisputeManager", "TranscriptSettlement", "ProbeScheduler")
ZERO_ADDRESS = "0x" + "00" * 20


class DeploymentFileError(RuntimeError):
    """The deployment file is missing, unreadable, or does not match the chain it names."""


def default_home() -> Path:
    return Path(os.environ.get("VERISPEC_HOME", ".verispec")).resolve()


def default_path() -> Path:
    return default_home() / "deployment.json"


@dataclass
class Deployment:
    rpc_url: str
    chain_id: int
    start_block: int
    addresses: dict[str, str]  # contract name -> checksummed address
    params: dict = field(default_factory=dict)
    anvil_pid: int | None = None  # set when `verispec chain up` started the chain itself

    @classmethod
    def of_system(
        cls, w3: Web3, system: System, rpc_url: str, start_block: int, anvil_pid: int | None = None
    ) -> Deployment:
        addresses = {"StakingRegistry": system.registry.address, "InferenceMarket": system.market.address}
        if system.disputes is not None:
            addresses["DisputeManager"] = system.disputes.address
        if system.transcript is not None:
            addresses["TranscriptSettlement"] = system.transcript.address
        # the probe scheduler only where the market is wired to it (probes move its α windows; docs/protocol.md
        # "Soundness (v1.2)"): a deployment without corpora deploys one that nothing uses
        if system.probes is not None and system.market.functions.probeScheduler().call() != ZERO_ADDRESS:
            addresses["ProbeScheduler"] = system.probes.address
        return cls(
            rpc_url=rpc_url,
            chain_id=w3.eth.chain_id,
            start_block=start_block,
            addresses=addresses,
            params=system.params.as_dict(),
            anvil_pid=anvil_pid,
        )

    def save(self, path: Path | None = None) -> Path:
        path = path or default_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: Path | None = None) -> Deployment:
        path = path or default_path()
        if not path.exists():
            raise DeploymentFileError(
                f"no deployment file at {path}: run `verispec chain up` first "
                "(or set VERISPEC_HOME / --home to where it lives)"
            )
        try:
            return cls(**json.loads(path.read_text()))
        except (json.JSONDecodeError, TypeError) as exc:
            raise DeploymentFileError(f"{path} is not a verispec deployment file: {exc}") from exc

    @property
    def deployment_params(self) -> DeploymentParams:
        return DeploymentParams(**self.params)

    def check_chain(self, w3: Web3) -> None:
        """Refuse to talk to a chain other than the one the file was written for."""
        chain_id = w3.eth.chain_id
        if chain_id != self.chain_id:
            raise DeploymentFileError(f"the RPC serves chain {chain_id} but the deployment is on chain {self.chain_id}")
        market = self.addresses.get("InferenceMarket")
        if not market or not w3.eth.get_code(market):
            raise DeploymentFileError(f"no InferenceMarket code at {market} on {self.rpc_url}: stale deployment file?")

    def contract(self, w3: Web3, name: str, artifacts: dict | None = None) -> Contract:
        if name not in self.addresses:
            raise DeploymentFileError(f"the deployment has no {name}")
        abi = (artifacts or compile_contracts())[name]["abi"]
        return w3.eth.contract(address=self.addresses[name], abi=abi)

    def system(self, w3: Web3, artifacts: dict | None = None) -> System:
        artifacts = artifacts or compile_contracts()
        market = self.contract(w3, "InferenceMarket", artifacts)
        disputes = self.contract(w3, "DisputeManager", artifacts) if "DisputeManager" in self.addresses else None
        has_transcript = "TranscriptSettlement" in self.addresses
        transcript = self.contract(w3, "TranscriptSettlement", artifacts) if has_transcript else None
        probes = self.contract(w3, "ProbeScheduler", artifacts) if "ProbeScheduler" in self.addresses else None
        return System(
            registry=self.contract(w3, "StakingRegistry", artifacts),
            market=market,
            alpha_window=market,
            disputes=disputes,
            params=self.deployment_params,
            deployer="",
            transcript=transcript,
            probes=probes,
        )
