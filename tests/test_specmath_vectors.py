"""Replay the shared vectors (generated from node/protocol.py) against the deployed SpecMath."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from eth_hash.auto import keccak
from web3.exceptions import ContractCustomError

from node import protocol as P
from node.chain.contracts import deploy_contract

ROOT = Path(__file__).resolve().parents[1]
VECTORS = json.loads((ROOT / "tests" / "vectors" / "specmath.json").read_text())


def _b(hex_string: str) -> bytes:
    return bytes.fromhex(hex_string[2:])


@pytest.fixture(scope="module")
def harness(w3, artifacts):
    return deploy_contract(w3, "SpecMathHarness", artifacts=artifacts)


def test_vectors_file_is_current():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_vectors.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_leaf(harness):
    for v in VECTORS["leaf"]:
        got = harness.functions.leaf(v["jobId"], v["cycle"], v["index"], v["token"], v["qWad"]).call()
        assert "0x" + got.hex() == v["expected"]


def test_uniforms(harness):
    for v in VECTORS["uniform"]:
        assert harness.functions.uniform(_b(v["h"])).call() == v["expected"]
    for v in VECTORS["draftUniform"]:
        assert harness.functions.draftUniform(v["jobId"], v["cycle"], v["index"]).call() == v["expected"]
    for v in VECTORS["acceptUniform"]:
        got = harness.functions.acceptUniform(_b(v["reveal"]), _b(v["draftRoot"]), v["index"]).call()
        assert got == v["expected"]
    for v in VECTORS["residualUniform"]:
        assert harness.functions.residualUniform(_b(v["reveal"]), _b(v["draftRoot"])).call() == v["expected"]


def test_root_and_proofs(harness):
    widths = set()
    for v in VECTORS["root"]:
        leaves = [_b(x) for x in v["leaves"]]
        widths.add(len(leaves))
        assert "0x" + harness.functions.root(leaves).call().hex() == v["expected"]
        for leaf_hash, proof in zip(leaves, v["proofs"]):
            assert harness.functions.verifyProof([_b(s) for s in proof], _b(v["expected"]), leaf_hash).call()
        # a proof for one leaf must not verify another
        if len(leaves) > 1:
            wrong = [_b(s) for s in v["proofs"][0]]
            assert not harness.functions.verifyProof(wrong, _b(v["expected"]), leaves[1]).call()
    assert set(range(1, 17)) <= widths


def test_count_accepted(harness):
    outcomes = set()
    for v in VECTORS["countAccepted"]:
        got = harness.functions.countAccepted(_b(v["reveal"]), _b(v["draftRoot"]), v["q"], v["p"]).call()
        assert got == v["expected"], v["case"]
        outcomes.add((len(v["q"]), "all" if got == len(v["q"]) else "none" if got == 0 else "some"))
    # the vectors exercise full acceptance, immediate rejection and partial prefixes
    assert {o for _, o in outcomes} == {"all", "none", "some"}


def test_count_accepted_reverts(harness):
    for v in VECTORS["countAcceptedReverts"]:
        with pytest.raises(ContractCustomError) as raised:
            harness.functions.countAccepted(_b(v["reveal"]), _b(v["draftRoot"]), v["q"], v["p"]).call()
        selector = next(e for e in harness.abi if e.get("type") == "error" and e["name"] == v["error"])
        inputs = ",".join(i["type"] for i in selector["inputs"])
        expected_selector = "0x" + keccak(f"{v['error']}({inputs})".encode())[:4].hex()
        assert raised.value.data.startswith(expected_selector), (raised.value.data, v["error"])
        with pytest.raises(ValueError):
            P.count_accepted(_b(v["reveal"]), _b(v["draftRoot"]), v["q"], v["p"])


def test_cycle_record(harness):
    for v in VECTORS["cycleRecord"]:
        got = harness.functions.cycleRecordHash(_b(v["draftRoot"]), v["p"], v["accepted"], v["outToken"]).call()
        assert "0x" + got.hex() == v["expected"]
