"""Fixtures for the ape suite (`make ape-test`): the real StakingRegistry + InferenceMarket, deployed with ape.

This folder runs only under ape (`bash scripts/ape.sh test`, in .venv-ape): it needs ape's pytest plugin
(`accounts`, `project`, `chain` fixtures, per-test chain isolation). The main suite never collects it
(pyproject's testpaths = ["tests"]); a `pytest .` from the main venv, which has no ape, skips it here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # node.chain.params: plain Python, no web3 needed
from node.chain.params import DEFAULT_PARAMS

ZERO_ADDRESS = "0x" + "00" * 20

if importlib.util.find_spec("ape") is None:  # the main venv: nothing here can run
    collect_ignore_glob = ["*"]


@pytest.fixture(scope="session", autouse=True)
def own_anvil(chain):
    """Fail at once if ape connected to somebody else's node instead of starting its own anvil."""
    provider = chain.provider
    assert provider.name == "foundry", f"ape-test runs on ape-foundry's anvil, got provider {provider.name!r}"
    assert provider.process is not None, f"ape connected to a node it did not start, at {provider.uri}"
    return provider


@pytest.fixture(scope="session")
def deployer(accounts):
    return accounts[0]


@pytest.fixture(scope="session")
def registry(project, deployer):
    return deployer.deploy(project.StakingRegistry, *DEFAULT_PARAMS.registry_args())


@pytest.fixture(scope="session")
def market(project, deployer, registry):
    """The market (also the α window), wired into the registry without a dispute manager."""
    market = deployer.deploy(project.InferenceMarket, registry.address, *DEFAULT_PARAMS.market_args())
    registry.setProtocolContracts(market.address, ZERO_ADDRESS, sender=deployer)
    return market
