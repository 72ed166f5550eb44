"""Replay the shared vectors (generated from node/protocol.py) against the deployed SpecMath.

Every vector with arrays goes through both doors of its rule: the memory functions of the
conformance surface (docs/protocol.md §3a) and the calldata variants the market calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from eth_abi import encode as abi_encode
from eth_hash.auto import keccak
from eth_utils import function_signature_to_4byte_selector
from web3.exceptions import ContractCustomError

from node import protocol as P
from node.chain.contracts import deploy_contract

ROOT = Path(__file__).resolve().parents[1]
VECTORS = json.loads((ROOT / "tests" / "vectors" / "specmath.json").read_text())
WAD = P.WAD


def _b(hex_string: str) -> bytes:
    return bytes.fromhex(hex_string[2:])


def _hex(value: bytes) -> str:
    return "0x" + value.hex()


@pytest.fixture(scope="module")
def harness(w3, artifacts):
    return deploy_contract(w3, "SpecMathHarness", artifacts=artifacts)


def _reverts_with(harness, call, error: str, args: tuple | None = None) -> None:
    """`call` (a contract function, not yet called) reverts with custom error `error` (and `args`, if given)."""
    entry = next(e for e in harness.abi if e.get("type") == "error" and e["name"] == error)
    types = [i["type"] for i in entry["inputs"]]
    expected = function_signature_to_4byte_selector(f"{error}({','.join(types)})")
    if args is not None:
        expected += abi_encode(types, list(args))
    with pytest.raises(ContractCustomError) as raised:
        call.call()
    data = raised.value.data
    assert (data == _hex(expected)) if args is not None else data.startswith(_hex(expected)), (data, error)


def _raw_call(w3, harness, signature: str, types: list[str], values: list):
    """eth_call with hand-encoded arguments: lets a test send words a well-behaved client would refuse to encode."""
    data = function_signature_to_4byte_selector(signature) + abi_encode(types, values)
    return w3.eth.call({"to": harness.address, "data": _hex(data)})


def test_vectors_file_is_current():
    # PYTHONPATH: the script imports this checkout's node (not an editable install's, CONTRIBUTING.md)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_vectors.py"), "--check"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr


def test_leaf(harness):
    for v in VECTORS["leaf"]:
        got = harness.functions.leaf(v["jobId"], v["cycle"], v["index"], v["token"], v["qWad"]).call()
        assert _hex(got) == v["expected"]


def test_uniforms(harness):
    for v in VECTORS["uniform"]:
        assert harness.functions.uniform(_b(v["h"])).call() == v["expected"]
    for v in VECTORS["draftUniform"]:
        assert harness.functions.draftUniform(v["jobId"], v["cycle"], v["index"]).call() == v["expected"]
    for v in VECTORS["acceptUniform"]:
        got = harness.functions.acceptUniform(_b(v["reveal"]), _b(v["draftRoot"]), v["index"], v["salt"]).call()
        assert got == v["expected"] == P.accept_uniform(_b(v["reveal"]), _b(v["draftRoot"]), v["index"], v["salt"])
    for v in VECTORS["residualUniform"]:
        got = harness.functions.residualUniform(_b(v["reveal"]), _b(v["draftRoot"]), v["salt"]).call()
        assert got == v["expected"] == P.residual_uniform(_b(v["reveal"]), _b(v["draftRoot"]), v["salt"])
    # the salt is in every vector, the extremes included
    salts = {v["salt"] for v in VECTORS["acceptUniform"] + VECTORS["countAccepted"]}
    assert {0, P.UINT64_MAX} <= salts and len(salts) > 10


def test_the_salt_moves_every_uniform(harness):
    """docs/protocol.md §3: the drafter's salt enters the accept and residual uniforms (a verifier that fixed its
    reveals cannot know them before the salt), and the contract and node/protocol.py agree on it."""
    reveal, root = keccak(b"reveal"), keccak(b"root")
    h = harness.functions
    accepts = {h.acceptUniform(reveal, root, 0, salt).call() for salt in range(8)}
    residuals = {h.residualUniform(reveal, root, salt).call() for salt in range(8)}
    assert len(accepts) == len(residuals) == 8
    assert accepts == {P.accept_uniform(reveal, root, 0, salt) for salt in range(8)}
    with pytest.raises(ValueError):
        P.accept_uniform(reveal, root, 0, P.UINT64_MAX + 1)


def test_root_and_proofs(harness):
    h = harness.functions
    widths = set()
    for v in VECTORS["root"]:
        leaves = [_b(x) for x in v["leaves"]]
        widths.add(len(leaves))
        # memory doors: leaf by leaf, then root over the leaves
        drafts = enumerate(zip(v["tokens"], v["q"]))
        assert [h.leaf(v["jobId"], v["cycle"], i, t, q).call() for i, (t, q) in drafts] == leaves
        assert _hex(h.root(leaves).call()) == v["expected"]
        # calldata door: the whole draft at once
        assert _hex(h.draftRootCalldata(v["jobId"], v["cycle"], v["tokens"], v["q"]).call()) == v["expected"]
        for leaf_hash, proof in zip(leaves, v["proofs"]):
            assert h.verifyProof([_b(s) for s in proof], _b(v["expected"]), leaf_hash).call()
        # a proof for one leaf must not verify another
        if len(leaves) > 1:
            wrong = [_b(s) for s in v["proofs"][0]]
            assert not h.verifyProof(wrong, _b(v["expected"]), leaves[1]).call()
    assert set(range(1, 17)) <= widths


def test_root_reverts(harness):
    h = harness.functions
    for v in VECTORS["rootReverts"]:
        _reverts_with(harness, h.draftRootCalldata(v["jobId"], v["cycle"], v["tokens"], v["q"]), v["error"])
        if len(v["tokens"]) == len(v["q"]):  # the memory door takes leaves, so only the empty tree applies
            drafts = enumerate(zip(v["tokens"], v["q"]))
            leaves = [h.leaf(v["jobId"], v["cycle"], i, t, q).call() for i, (t, q) in drafts]
            _reverts_with(harness, h.root(leaves), v["error"])
        with pytest.raises(ValueError):
            P.draft_root(v["jobId"], v["cycle"], v["tokens"], v["q"])


def test_count_accepted(harness):
    h = harness.functions
    outcomes = set()
    for v in VECTORS["countAccepted"]:
        args = (_b(v["reveal"]), _b(v["draftRoot"]), v["q"], v["p"], v["salt"])
        got = h.countAccepted(*args).call()
        assert got == v["expected"], v["case"]
        assert h.countAcceptedCalldata(*args).call() == v["expected"], v["case"]
        outcomes.add((len(v["q"]), "all" if got == len(v["q"]) else "none" if got == 0 else "some"))
    # the vectors exercise full acceptance, immediate rejection and partial prefixes
    assert {o for _, o in outcomes} == {"all", "none", "some"}


def test_count_accepted_reverts(harness):
    h = harness.functions
    for v in VECTORS["countAcceptedReverts"]:
        args = (_b(v["reveal"]), _b(v["draftRoot"]), v["q"], v["p"], v["salt"])
        _reverts_with(harness, h.countAccepted(*args), v["error"])
        _reverts_with(harness, h.countAcceptedCalldata(*args), v["error"])
        with pytest.raises(ValueError):
            P.count_accepted(*args)


def test_cycle_record(harness):
    h = harness.functions
    for v in VECTORS["cycleRecord"]:
        args = (_b(v["draftRoot"]), v["p"], v["accepted"], v["outToken"])
        assert _hex(h.cycleRecordHash(*args).call()) == v["expected"]
        assert _hex(h.cycleRecordHashCalldata(*args).call()) == v["expected"]


def test_chain_hash(harness):
    for v in VECTORS["chainHash"]:
        assert _hex(harness.functions.chainHash(_b(v["value"])).call()) == v["expected"]
    # each reveal hashes to the one before it, and reveal 0 to the committed head
    seed, length = keccak(b"verispec.test.chain"), 5
    reveals = P.chain_reveals(seed, length)
    previous = [P.hash_chain(seed, length)] + reveals[:-1]
    assert [harness.functions.chainHash(r).call() for r in reveals] == previous


def test_probability_ranges(harness):
    h = harness.functions
    for q, ok in ((0, False), (1, True), (WAD, True), (WAD + 1, False), (2**64 + 1, False), (2**256 - 1, False)):
        assert h.isDraftProbability(q).call() is ok, q
    for p, ok in ((0, True), (WAD, True), (WAD + 1, False), (2**256 - 1, False)):
        assert h.isTargetProbability(p).call() is ok, p


def test_calldata_doors_read_raw_words(w3, harness):
    """What a hostile client can send: words with bits above their declared type. countAcceptedCalldata sees
    them as out of range; the hashing doors hash them as they are, so they match no well-formed input."""
    reveal, root = keccak(b"reveal"), keccak(b"root")
    q, p = [WAD // 2, WAD // 3], [WAD // 4, WAD]
    dirty = 2**64 + q[1]
    with pytest.raises(ContractCustomError) as raised:
        _raw_call(
            w3,
            harness,
            "countAcceptedCalldata(bytes32,bytes32,uint64[],uint64[],uint64)",
            ["bytes32", "bytes32", "uint256[]", "uint256[]", "uint64"],
            [reveal, root, [q[0], dirty], p, 5],
        )
    assert raised.value.data == _hex(
        function_signature_to_4byte_selector("SpecMathProbabilityAboveWad(uint256,uint256)")
        + abi_encode(["uint256", "uint256"], [1, dirty])
    )

    tokens = [11, 12]
    clean = P.draft_root(3, 1, tokens, q)
    raw = _raw_call(
        w3,
        harness,
        "draftRootCalldata(uint256,uint32,uint32[],uint64[])",
        ["uint256", "uint32", "uint256[]", "uint256[]"],
        [3, 1, [tokens[0] + 2**32, tokens[1]], q],
    )
    dirty_leaf = keccak(keccak(abi_encode(["uint256"] * 5, [3, 1, 0, tokens[0] + 2**32, q[0]])))
    assert raw != clean and raw == P.root([dirty_leaf, P.leaf(3, 1, 1, tokens[1], q[1])])

    raw = _raw_call(
        w3,
        harness,
        "cycleRecordHashCalldata(bytes32,uint64[],uint32,uint32)",
        ["bytes32", "uint256[]", "uint32", "uint32"],
        [root, [p[0], 2**64 + p[1]], 1, 9],
    )
    assert raw != P.cycle_record_hash(root, p, 1, 9)
