"""Shared fixtures: one real anvil chain per test session, snapshot-isolated per test."""

from __future__ import annotations

import os

import pytest
from web3 import Web3

from node.chain.anvil import running_anvil
from node.chain.compile import compile_contracts

# The CLI, the demo and the benchmarks run the real pair by default (node/decoding/pairs.py); a test that names no
# pair runs the bundled tiny one, in this process and in every node process it starts. A test of the real pair
# names it (tests/test_real_pair.py).
os.environ.setdefault("VERISPEC_PAIR", "tiny")


@pytest.fixture(scope="session")
def artifacts() -> dict:
    return compile_contracts()


@pytest.fixture(scope="session")
def anvil():
    with running_anvil() as node:
        yield node


@pytest.fixture(scope="session")
def w3(anvil) -> Web3:
    web3 = Web3(Web3.HTTPProvider(anvil.rpc_url, request_kwargs={"timeout": 60}))
    assert web3.is_connected()
    return web3


@pytest.fixture
def chain(w3):
    """Reverts every chain change a test makes, so tests never see each other's state."""
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]
    yield w3
    w3.provider.make_request("evm_revert", [snapshot])
