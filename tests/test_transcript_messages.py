"""Transcript mode's typed data (docs/protocol.md, "Transcript mode (v2): messages and state") against the contracts.

Python's EIP-712 digests (eth-account) equal `_hashTypedDataV4` of `TranscriptTypesHarness` on anvil for every
message type, eth-account's signatures recover to their signer on chain, and a forged, replayed or tampered one
recovers to someone else (or is refused, in Python and on chain). The state chain and the records root agree
between node/protocol.py and TranscriptTypes, through the shared vectors in tests/vectors/transcript.json.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from eth_abi import encode as abi_encode
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import function_signature_to_4byte_selector
from web3.exceptions import ContractCustomError

from node import protocol as P
from node.chain import transcript_messages as T
from node.chain.contracts import deploy_contract
from node.chain.keys import dev_account

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "tests" / "vectors" / "transcript.json").read_text())
DRAFTER, VERIFIER, STRANGER = dev_account(1), dev_account(2), dev_account(3)
JOB, SALT, GAMMA = 42, 0x1234_5678_9ABC_DEF0, 3


def _b(hex_string: str) -> bytes:
    return bytes.fromhex(hex_string[2:])


def _reverts(call, signature: str, types: list[str] | None = None, args: list | None = None) -> None:
    """`call` (a contract function, not yet called) reverts with custom error `signature` (and `args`, if given)."""
    expected = function_signature_to_4byte_selector(signature)
    if args is not None:
        expected += abi_encode(types, args)
    with pytest.raises(ContractCustomError) as raised:
        call.call()
    data = raised.value.data
    assert data == "0x" + expected.hex() if args is not None else data.startswith("0x" + expected.hex()), data


@pytest.fixture(scope="module")
def harness(w3, artifacts):
    return deploy_contract(w3, "TranscriptTypesHarness", artifacts=artifacts)


@pytest.fixture(scope="module")
def domain(w3, harness) -> T.Domain:
    return T.Domain(w3.eth.chain_id, harness.address)


def _on_chain(harness, msg, kind: str):
    """The harness function `kind` ("hash", "Digest", "recover") for msg's type."""
    name = {"hash": f"hash{msg.PRIMARY}", "digest": f"{msg.PRIMARY.lower()}Digest", "recover": f"recover{msg.PRIMARY}"}
    return getattr(harness.functions, name[kind])


def _one_job() -> tuple[list[T.Draft], list[T.Verification], T.Settlement]:
    """An honest three-cycle transcript (values need not follow the accept rule: this layer does not judge it)."""
    drafts, verifications, state = [], [], P.transcript_genesis(JOB, SALT)
    for cycle in range(3):
        draft = T.Draft.build(JOB, cycle, state, [100 + cycle, 7, 9], [P.WAD // 2, P.WAD // 3, P.WAD], SALT)
        p = [P.WAD // 2 + cycle, 0, P.WAD]
        state = P.next_state(state, P.transcript_leaf(cycle, draft.tokens, draft.q, p, 1, 55))
        verifications.append(T.Verification(JOB, cycle, draft.draft_root, p, bytes([cycle]) * 32, 1, 55, state))
        drafts.append(draft)
    return drafts, verifications, T.Settlement(JOB, 3, state, 6)


def _expecting(draft: T.Draft) -> dict:
    """What the verifier expects of `draft`'s cycle: check_draft's keyword arguments."""
    return dict(
        drafter=DRAFTER.address, job_id=JOB, cycle=draft.cycle, gamma=GAMMA, prev_state=draft.prev_state, salt=SALT
    )


# ------------------------------------------------------------------ vectors


def test_type_strings_are_the_contracts(harness):
    draft, verification, settlement = harness.functions.typeStrings().call()
    assert {"Draft": draft, "Verification": verification, "Settlement": settlement} == VECTORS["typeStrings"]
    assert {name: cls.type_string() for name, cls in T.MESSAGE_TYPES.items()} == VECTORS["typeStrings"]


def test_message_vectors_in_python():
    """eth-account reproduces every vector: struct hash, domain separator, digest, signature, signer."""
    assert {v["type"] for v in VECTORS["messages"]} == set(T.MESSAGE_TYPES)
    for v in VECTORS["messages"]:
        msg = T.MESSAGE_TYPES[v["type"]].from_message(v["message"])
        domain = T.Domain(v["domain"]["chainId"], v["domain"]["verifyingContract"])
        signable = T.signable(domain, msg)
        assert "0x" + bytes(signable.body).hex() == v["structHash"]
        assert "0x" + bytes(signable.header).hex() == v["domainSeparator"]
        assert "0x" + T.digest(domain, msg).hex() == v["digest"]
        assert T.recover(domain, msg, v["signature"]) == v["signer"]
        # the vector's domain dict round-trips through the parser a peer's message goes through
        assert T.from_typed_data({**T.typed_data(domain, msg), "message": v["message"]}, domain) == msg


def test_struct_hashes_on_chain(harness):
    for v in VECTORS["messages"]:
        msg = T.MESSAGE_TYPES[v["type"]].from_message(v["message"])
        assert "0x" + _on_chain(harness, msg, "hash")(msg.as_tuple()).call().hex() == v["structHash"], v["type"]


def test_python_digest_equals_hash_typed_data_v4(w3, harness, domain):
    """For every message type, eth-account's digest under the harness's domain is the contract's _hashTypedDataV4."""
    fields, name, version, chain_id, contract, _, _ = harness.functions.eip712Domain().call()
    assert (name, version, chain_id, contract) == ("verispec", "2", w3.eth.chain_id, harness.address)
    assert fields == b"\x0f"  # name, version, chainId, verifyingContract: no salt, no extensions
    seen = set()
    for v in VECTORS["messages"]:
        msg = T.MESSAGE_TYPES[v["type"]].from_message(v["message"])
        assert harness.functions.domainSeparator().call() == bytes(T.signable(domain, msg).header)
        assert _on_chain(harness, msg, "digest")(msg.as_tuple()).call() == T.digest(domain, msg), v["type"]
        seen.add(msg.PRIMARY)
    assert seen == set(T.MESSAGE_TYPES)


# ------------------------------------------------------------------ signatures on chain


def test_eth_account_signatures_recover_on_chain(harness, domain):
    drafts, verifications, settlement = _one_job()
    for msg, signer in [(drafts[0], DRAFTER), (verifications[0], VERIFIER), (settlement, DRAFTER)]:
        signature = T.sign(domain, msg, signer.key)
        assert _on_chain(harness, msg, "recover")(msg.as_tuple(), signature).call() == signer.address
        assert T.recover(domain, msg, signature) == signer.address
    h = harness.functions
    draft_sig = T.sign(domain, drafts[1], DRAFTER.key)
    h.requireDraftSigner(drafts[1].as_tuple(), draft_sig, DRAFTER.address).call()  # does not revert
    _reverts(
        h.requireDraftSigner(drafts[1].as_tuple(), draft_sig, VERIFIER.address),
        "TranscriptWrongSigner(address,address)",
        ["address", "address"],
        [VERIFIER.address, DRAFTER.address],
    )
    both = [T.sign(domain, settlement, k.key) for k in (DRAFTER, VERIFIER)]
    h.requireSettlementSigners(settlement.as_tuple(), *both, DRAFTER.address, VERIFIER.address).call()
    # one party's signature twice is not both parties'
    _reverts(
        h.requireSettlementSigners(settlement.as_tuple(), both[0], both[0], DRAFTER.address, VERIFIER.address),
        "TranscriptWrongSigner(address,address)",
        ["address", "address"],
        [VERIFIER.address, DRAFTER.address],
    )


def test_replayed_signatures_recover_to_someone_else(w3, artifacts, harness, domain):
    """A Draft signature replayed on another job, cycle, chain id or contract never recovers to the drafter, on chain
    or in Python, and the receiver's check refuses it."""
    draft = _one_job()[0][1]
    signature = T.sign(domain, draft, DRAFTER.key)
    recover = harness.functions.recoverDraft
    replays = {
        "other job": dataclasses.replace(draft, job_id=JOB + 1),
        "other cycle": dataclasses.replace(draft, cycle=draft.cycle + 1),
    }
    for why, replayed in replays.items():
        assert recover(replayed.as_tuple(), signature).call() != DRAFTER.address, why
        assert T.recover(domain, replayed, signature) != DRAFTER.address, why
    # signed for another chain id / another market, posted to this one
    for why, other in {
        "other chain id": T.Domain(domain.chain_id + 1, domain.verifying_contract),
        "other contract": T.Domain(domain.chain_id, "0x" + "42" * 20),
    }.items():
        foreign = T.sign(other, draft, DRAFTER.key)
        assert T.recover(other, draft, foreign) == DRAFTER.address
        assert recover(draft.as_tuple(), foreign).call() != DRAFTER.address, why
        with pytest.raises(T.MessageRejected, match="signed by"):
            T.check_draft(domain, draft, foreign, **_expecting(draft))
    # and a real second market: this harness's signature does not verify there
    second = deploy_contract(w3, "TranscriptTypesHarness", artifacts=artifacts)
    assert second.address != harness.address
    assert second.functions.recoverDraft(draft.as_tuple(), signature).call() != DRAFTER.address
    assert recover(draft.as_tuple(), signature).call() == DRAFTER.address


def _tamper(value):
    if isinstance(value, bytes):
        return bytes([value[0] ^ 1]) + value[1:]
    if isinstance(value, tuple):
        return (value[0] + 1,) + value[1:] if value[0] < 2**31 else (value[0] - 1,) + value[1:]
    return value + 1 if value < 2**31 else value - 1


def test_every_tampered_field_recovers_to_someone_else(harness, domain):
    drafts, verifications, settlement = _one_job()
    for msg in (drafts[2], verifications[2], settlement):
        signature = T.sign(domain, msg, DRAFTER.key)
        recover = _on_chain(harness, msg, "recover")
        for field in dataclasses.fields(msg):
            tampered = dataclasses.replace(msg, **{field.name: _tamper(getattr(msg, field.name))})
            assert tampered != msg
            assert recover(tampered.as_tuple(), signature).call() != DRAFTER.address, (msg.PRIMARY, field.name)
            assert T.recover(domain, tampered, signature) != DRAFTER.address, (msg.PRIMARY, field.name)


def test_forged_and_malleated_signatures_are_refused(harness, domain):
    draft = _one_job()[0][0]
    signature = T.sign(domain, draft, DRAFTER.key)
    recover = harness.functions.recoverDraft
    forged = T.sign(domain, draft, STRANGER.key)
    assert recover(draft.as_tuple(), forged).call() == STRANGER.address
    with pytest.raises(T.MessageRejected, match=f"signed by {STRANGER.address}, not the drafter"):
        T.check_draft(domain, draft, forged, **_expecting(draft))
    r, s, v = signature[:32], int.from_bytes(signature[32:64], "big"), signature[64]
    high_s = r + (T.SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - v])
    low_v = signature[:64] + bytes([v - 27])
    # eth-account alone would take both: the node must not, since the contract refuses them
    signable = T.signable(domain, draft)
    assert Account.recover_message(signable, signature=high_s) == DRAFTER.address
    assert Account.recover_message(signable, signature=low_v) == DRAFTER.address
    _reverts(recover(draft.as_tuple(), high_s), "ECDSAInvalidSignatureS(bytes32)")
    _reverts(recover(draft.as_tuple(), low_v), "ECDSAInvalidSignature()")
    _reverts(recover(draft.as_tuple(), signature[:64]), "ECDSAInvalidSignatureLength(uint256)", ["uint256"], [64])
    for bad, why in [
        (high_s, "not canonical"),
        (low_v, "v=[01], not 27 or 28"),
        (signature[:64], "65 bytes"),
        ("0xzz", "not hex"),
    ]:
        with pytest.raises(T.MessageRejected, match=why):
            T.recover(domain, draft, bad)
    zero_r = bytes(32) + signature[32:]
    with pytest.raises(T.MessageRejected, match="not canonical"):
        T.recover(domain, draft, zero_r)
    _reverts(recover(draft.as_tuple(), zero_r), "ECDSAInvalidSignature()")


# ------------------------------------------------------------------ state chain and records root


def test_state_chain_vectors_on_chain(harness):
    h = harness.functions
    for v in VECTORS["genesis"]:
        assert "0x" + h.genesisState(v["jobId"], v["salt"]).call().hex() == v["expected"]
        assert "0x" + P.transcript_genesis(v["jobId"], v["salt"]).hex() == v["expected"]
    for v in VECTORS["cycleLeaf"]:
        packed = _b(v["packed"])
        assert "0x" + P.cycle_leaf(v["cycle"], packed).hex() == v["expected"]
        assert "0x" + h.cycleLeaf(v["cycle"], bytes([v["gamma"]]) + packed).call().hex() == v["expected"]
        assert "0x" + h.cycleLeafOf(v["cycle"], *P.unpack_cycle(packed)).call().hex() == v["expected"]
    for v in VECTORS["stateChain"]:
        genesis, leaves, run = _b(v["genesis"]), [_b(x) for x in v["leaves"]], _b(v["run"])
        cycles = [(c["tokens"], c["q"], c["p"], c["accepted"], c["outToken"]) for c in v["cycles"]]
        assert bytes([v["gamma"]]) + b"".join(P.pack_cycle(*c) for c in cycles) == run
        assert [P.transcript_leaf(i, *c) for i, c in enumerate(cycles)] == leaves
        states = [_b(s) for s in v["states"]]
        assert P.state_chain(genesis, leaves) == states
        previous = [genesis] + states[:-1]
        assert [h.nextState(a, b).call() for a, b in zip(previous, leaves)] == states
        assert h.finalState(genesis, leaves).call() == states[-1]
        assert "0x" + h.cyclesRoot(leaves).call().hex() == v["root"] == "0x" + P.cycles_root(leaves).hex()
        # settlement's one pass over the packed run: the signed state and the root together
        assert h.foldRun(genesis, run).call() == [states[-1], _b(v["root"])]
    assert {len(v["cycles"]) for v in VECTORS["stateChain"]} >= {1, 2, 3, 5, 8}


def test_a_settled_transcript_folds_to_its_signed_state_on_chain(harness, domain):
    """The cycles of a transcript's Drafts and Verifications, packed as settlement posts them, fold on chain to the
    state both parties signed in the Settlement, and their root proves every cycle's leaf."""
    drafts, verifications, settlement = _one_job()
    genesis = P.transcript_genesis(JOB, SALT)
    packed = [P.pack_cycle(d.tokens, d.q, v.p, v.accepted, v.out_token) for d, v in zip(drafts, verifications)]
    run = bytes([GAMMA]) + b"".join(packed)
    state, root = harness.functions.foldRun(genesis, run).call()
    assert state == settlement.state == verifications[-1].state
    leaves = [P.cycle_leaf(c, x) for c, x in enumerate(packed)]
    assert root == P.cycles_root(leaves)
    for cycle, leaf in enumerate(leaves):
        assert harness.functions.verifyCycle(P.cycle_proof(leaves, cycle), root, leaf).call()
    # one byte changed in calldata, or one cycle left out, folds to a state nobody signed
    size = P.cycle_size(GAMMA)
    for at in (1, 1 + size, 1 + size + 5, len(run) - 1):
        changed = run[:at] + bytes([run[at] ^ 1]) + run[at + 1 :]
        assert harness.functions.foldRun(genesis, changed).call()[0] != settlement.state
    left_out = run[: 1 + 2 * size]
    assert harness.functions.foldRun(genesis, left_out).call()[0] == verifications[1].state != settlement.state
    # two cycles swapped: the leaves bind their index, so the state differs
    swapped = run[:1] + packed[1] + packed[0] + packed[2]
    assert harness.functions.foldRun(genesis, swapped).call()[0] != settlement.state


def test_cycle_proofs_verify_on_chain(harness):
    verify = harness.functions.verifyCycle
    for v in VECTORS["stateChain"]:
        root, leaves = _b(v["root"]), [_b(x) for x in v["leaves"]]
        packed = [P.pack_cycle(c["tokens"], c["q"], c["p"], c["accepted"], c["outToken"]) for c in v["cycles"]]
        for cycle, (leaf, path) in enumerate(zip(leaves, v["proofs"])):
            path = [_b(x) for x in path]
            assert path == P.cycle_proof(leaves, cycle)
            assert verify(path, root, leaf).call()
            if len(leaves) > 1:
                # a cycle's bytes proven at another cycle, or another cycle's bytes at this one, do not verify
                other = (cycle + 1) % len(leaves)
                assert not verify(path, root, P.cycle_leaf(other, packed[cycle])).call()
                assert not verify(path, root, P.cycle_leaf(cycle, packed[other])).call()


def test_empty_and_malformed_cycles(harness):
    h = harness.functions
    _reverts(h.cyclesRoot([]), "TranscriptNoCycles()")
    assert h.finalState(b"\x01" * 32, []).call() == b"\x01" * 32  # a job settled before its first cycle
    with pytest.raises(ValueError, match="at least one cycle"):
        P.cycles_root([])
    with pytest.raises(ValueError, match="out of range"):
        P.cycle_proof([b"\x02" * 32], 1)
    with pytest.raises(ValueError, match="expected 32 bytes, got 31"):
        P.next_state(b"\x01" * 31, b"\x02" * 32)
    with pytest.raises(ValueError, match=r"salt=.* out of range"):
        P.transcript_genesis(1, 2**64)
    # a field that does not fit the encoding has no cycle leaf, in Python and on chain
    for bad in (([5], [2**60], [0], 0, 9), ([5], [1], [2**60], 0, 9), ([5], [1], [0], 2, 9), ([2**32], [1], [0], 0, 9)):
        with pytest.raises(ValueError, match=r"does not fit|a cycle of"):
            P.pack_cycle(*bad)
    _reverts(h.cycleLeafOf(3, [5], [2**60], [0], 0, 9), "PackedField(uint256)", ["uint256"], [3])
    _reverts(h.cycleLeafOf(3, [5], [1], [2**60], 0, 9), "PackedField(uint256)", ["uint256"], [3])
    _reverts(h.cycleLeafOf(3, [5], [1, 2], [0], 0, 9), "PackedField(uint256)", ["uint256"], [3])
    with pytest.raises(ValueError, match="not one packed cycle"):
        P.unpack_cycle(bytes(P.cycle_size(2) + 1))
    one = bytes([2]) + bytes(P.cycle_size(2))
    _reverts(h.cycleLeaf(0, one[:-1]), "PackedLength(uint256,uint256)")
    _reverts(h.cycleLeaf(0, one + one[1:]), "PackedLength(uint256,uint256)")


# ------------------------------------------------------------------ the receiver's checks


def test_an_honest_transcript_passes_every_check(domain):
    drafts, verifications, settlement = _one_job()
    state = P.transcript_genesis(JOB, SALT)
    for cycle, (draft, verification) in enumerate(zip(drafts, verifications)):
        d_sig, v_sig = T.sign(domain, draft, DRAFTER.key), T.sign(domain, verification, VERIFIER.key)
        T.check_draft(domain, draft, d_sig, **{**_expecting(draft), "cycle": cycle, "prev_state": state})
        T.check_verification(domain, verification, v_sig, verifier=VERIFIER.address, draft=draft)
        state = verification.state
    for key in (DRAFTER, VERIFIER):
        signature = T.sign(domain, settlement, key.key)
        T.check_settlement(
            domain, settlement, signature, signer=key.address, job_id=JOB, cycles=3, state=state, tokens_out=6
        )


def test_cycle_0_fixes_the_salt_in_the_genesis(domain):
    """Draft 0 brings the salt (docs/protocol.md: the drafter's salt): the verifier takes it from there, and Draft 0
    must counter-sign the genesis of that very salt; a later Draft cannot be checked without the job's salt."""
    draft = _one_job()[0][0]
    signature = T.sign(domain, draft, DRAFTER.key)
    T.check_draft(domain, draft, signature, drafter=DRAFTER.address, job_id=JOB, cycle=0, gamma=GAMMA)
    other_genesis = T.Draft.build(JOB, 0, P.transcript_genesis(JOB, SALT + 1), draft.tokens, draft.q, SALT)
    with pytest.raises(T.MessageRejected, match="counter-signs state"):
        forged_sig = T.sign(domain, other_genesis, DRAFTER.key)
        T.check_draft(domain, other_genesis, forged_sig, drafter=DRAFTER.address, job_id=JOB, cycle=0, gamma=GAMMA)
    later = _one_job()[0][1]
    with pytest.raises(ValueError, match="checked against the job's salt"):
        later_sig = T.sign(domain, later, DRAFTER.key)
        T.check_draft(domain, later, later_sig, drafter=DRAFTER.address, job_id=JOB, cycle=1, gamma=GAMMA)


def test_stale_out_of_order_and_inconsistent_messages_are_refused(domain):
    drafts, verifications, settlement = _one_job()
    signed = {id(m): T.sign(domain, m, DRAFTER.key) for m in drafts}
    expect = {"drafter": DRAFTER.address, "job_id": JOB, "salt": SALT, "gamma": GAMMA}

    def refuse(draft, match, **overrides):
        args = {**expect, "cycle": 1, "prev_state": drafts[1].prev_state, **overrides}
        with pytest.raises(T.MessageRejected, match=match):
            T.check_draft(domain, draft, signed.get(id(draft)) or T.sign(domain, draft, DRAFTER.key), **args)

    refuse(drafts[0], "for cycle 0, expected 1")  # stale
    refuse(drafts[2], "for cycle 2, expected 1")  # out of order
    refuse(drafts[1], "for job 42, not job 43", job_id=JOB + 1)
    refuse(drafts[1], "counter-signs state", prev_state=drafts[2].prev_state)  # skips a cycle's state
    refuse(dataclasses.replace(drafts[1], salt=SALT + 1), "carries salt")  # a salt other than cycle 0's
    refuse(dataclasses.replace(drafts[1], tokens=(1, 2, 3)), "draftRoot is not the root")
    short = T.Draft.build(JOB, 1, drafts[1].prev_state, [5, 6], [P.WAD, P.WAD], SALT)
    refuse(short, "has 2 proposals, the job's γ is 3")

    v1 = verifications[1]
    v_sig = T.sign(domain, v1, VERIFIER.key)
    with pytest.raises(T.MessageRejected, match="for cycle 1, expected 2"):
        T.check_verification(domain, v1, v_sig, verifier=VERIFIER.address, draft=drafts[2])
    with pytest.raises(T.MessageRejected, match=r"signed by .* not the verifier"):
        T.check_verification(domain, v1, T.sign(domain, v1, DRAFTER.key), verifier=VERIFIER.address, draft=drafts[1])
    for bad, match in [
        (dataclasses.replace(v1, draft_root=drafts[0].draft_root), "answers another draft"),
        (dataclasses.replace(v1, p=(1, 2), accepted=0), "2 p values for 3"),
        (dataclasses.replace(v1, state=verifications[0].state), "does not chain"),
        (dataclasses.replace(v1, accepted=2), "does not chain"),  # a record other than the one the state holds
    ]:
        with pytest.raises(T.MessageRejected, match=match):
            T.check_verification(
                domain, bad, T.sign(domain, bad, VERIFIER.key), verifier=VERIFIER.address, draft=drafts[1]
            )

    s_sig = T.sign(domain, settlement, VERIFIER.key)
    ok = {"signer": VERIFIER.address, "job_id": JOB, "cycles": 3, "state": settlement.state, "tokens_out": 6}
    for overrides, match in [
        ({"cycles": 2}, "for cycles 3, expected 2"),
        ({"state": verifications[1].state}, "is at state"),
        ({"tokens_out": 7}, "counts 6 tokens out, not 7"),
        ({"signer": DRAFTER.address}, "not the signer"),
    ]:
        with pytest.raises(T.MessageRejected, match=match):
            T.check_settlement(domain, settlement, s_sig, **{**ok, **overrides})


def test_bad_values_get_one_clear_error():
    good = _one_job()[0][0]
    cases = [
        (lambda: T.Draft.build(JOB, 0, good.prev_state, [], [], SALT), "tokens has 0 entries, not 1..16"),
        (lambda: T.Draft.build(JOB, 0, good.prev_state, [1] * 17, [P.WAD] * 17, SALT), "tokens has 17 entries"),
        (lambda: T.Draft.build(JOB, 0, good.prev_state, [1, 2], [P.WAD], SALT), "2 tokens but 1 q values"),
        (lambda: T.Draft.build(JOB, 0, good.prev_state, [1], [0], SALT), r"q\[0\]=0 out of range 1\.\."),
        (lambda: T.Draft.build(JOB, 0, good.prev_state, [1], [P.WAD + 1], SALT), r"q\[0\]=.* out of range"),
        (lambda: T.Draft.build(JOB, 0, good.prev_state, [2**32], [P.WAD], SALT), r"tokens\[0\]=4294967296"),
        (lambda: T.Draft.build(JOB, 0, good.prev_state, [True], [P.WAD], SALT), r"tokens\[0\] must be an integer"),
        (lambda: T.Draft.build(JOB, 0, good.prev_state, [1], [P.WAD], 2**64), "salt=.* out of range"),
        (lambda: T.Draft.build(JOB, 2**32, good.prev_state, [1], [P.WAD], SALT), "cycle=4294967296"),
        (lambda: T.Draft.build(-1, 0, good.prev_state, [1], [P.WAD], SALT), "jobId=-1"),
        (lambda: T.Draft.build(JOB, 0, b"\x00" * 31, [1], [P.WAD], SALT), "prevState must be 32 bytes, got 31"),
        (lambda: T.Draft.build(JOB, 0, "0xnothex", [1], [P.WAD], SALT), "prevState is not hex"),
        (lambda: T.Draft.build(JOB, 0, good.prev_state, "12", [P.WAD], SALT), "tokens must be a list"),
        (lambda: T.Verification(JOB, 0, good.draft_root, [P.WAD + 1], bytes(32), 0, 1, bytes(32)), r"p\[0\]="),
        (
            lambda: T.Verification(JOB, 0, good.draft_root, [1], bytes(32), 2, 1, bytes(32)),
            "accepted=2 out of range 0..1",
        ),
        (lambda: T.Verification(JOB, 0, good.draft_root, [1], bytes(32), 0, 2**32, bytes(32)), "outToken="),
        (lambda: T.Settlement(JOB, -1, bytes(32), 0), "cycles=-1"),
        (lambda: T.Settlement(JOB, 0, bytes(32), 1.5), "tokensOut must be an integer, got float"),
        (lambda: T.Domain(0, "0x" + "11" * 20), "chain_id=0"),
        (lambda: T.Domain(1, "0x1234"), "is not an address"),
        (lambda: T.Draft.from_message({"jobId": 1}), "has exactly the fields jobId, cycle"),
        (lambda: T.Draft.from_message([1, 2]), "must be an object"),
    ]
    for make, match in cases:
        with pytest.raises(T.MessageRejected, match=match):
            make()
    assert issubclass(T.MessageRejected, ValueError)


def test_typed_data_from_a_peer_must_be_ours(domain):
    draft = _one_job()[0][0]
    data = T.typed_data(domain, draft)
    assert T.from_typed_data(data, domain) == draft
    encode_typed_data(full_message=data)  # it is what eth-account signs
    other_chain = {**data, "domain": {**data["domain"], "chainId": domain.chain_id + 1}}
    widened = {**data, "types": {**data["types"], "Draft": [dict(f) for f in data["types"]["Draft"]]}}
    widened["types"]["Draft"][1]["type"] = "uint64"
    for bad, match in [
        (other_chain, "not this market's"),
        ({**data, "primaryType": "Payment"}, "unknown message type 'Payment'"),
        (widened, "the types of a Draft are not"),
        ({k: v for k, v in data.items() if k != "domain"}, "exactly the keys"),
        ({**data, "message": {**data["message"], "extra": 1}}, "has exactly the fields"),
    ]:
        with pytest.raises(T.MessageRejected, match=match):
            T.from_typed_data(bad, domain)
