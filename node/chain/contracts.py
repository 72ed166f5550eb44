"""Deploy compiled contracts and wrap them as web3.py contract objects."""

from __future__ import annotations

from web3 import Web3
from web3.contract import Contract

from node.chain.compile import compile_contracts


class DeploymentError(RuntimeError):
    """A deployment transaction failed or the artifact is unknown."""


def deploy_contract(
    w3: Web3, name: str, *constructor_args, sender: str | None = None, value: int = 0, artifacts: dict | None = None
) -> Contract:
    artifacts = artifacts or compile_contracts()
    if name not in artifacts:
        raise DeploymentError(f"no compiled contract named {name!r}; known: {sorted(artifacts)}")
    artifact = artifacts[name]
    factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    sender = sender or w3.eth.accounts[0]
    tx_hash = factory.constructor(*constructor_args).transact({"from": sender, "value": value})
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash)
    if receipt.status != 1 or not receipt.contractAddress:
        raise DeploymentError(f"deploying {name} failed (tx {tx_hash.hex()})")
    return w3.eth.contract(address=receipt.contractAddress, abi=artifact["abi"])
