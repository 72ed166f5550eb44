"""Anything TranscriptSettlement accepts, the node reads (docs/protocol.md "Transcript mode v2.1: canonical reading").

Solidity's calldata decoder ignores what a canonical encoding would zero or place elsewhere: the padding after a
`bytes` value, junk between or after the values, offsets that point anywhere a value can be read from (a struct
member's even backwards). web3's strict decoder refused one such byte (`NonEmptyPaddingBytes`), so a colluding pair
could settle a rule-breaking transcript that no watchdog or `verispec challenge` could read, and a drafter could
force its verifier with a Draft the verifier node could not read (then slashed at `claimForce`).

* The fuzz test sends calldata with random non-canonical layouts and dirty padding to the real contract (eth_call)
  and, where it accepts it, checks that node/chain/calldata.py reads exactly what Solidity itself read: the
  CalldataEcho harness returns that, re-encoded canonically, for the same selector and bytes.
* The attack, as real transactions: a pair settles a rule-breaking transcript with one dirty padding byte, and the
  watchdog's reader and `verispec challenge` still convict it; a drafter forces with one dirty byte, and the
  verifier's reader still finds the forced Draft.
"""

from __future__ import annotations

import random

import pytest
from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from web3._utils.abi import get_abi_input_types
from web3.exceptions import ContractLogicError
from web3.logs import DISCARD

from chainutil import advance, env, transact  # noqa: F401  (env is a fixture)
from node.chain import calldata as CD
from node.chain import transcript as TX
from node.chain.contracts import deploy_contract
from node.chain.deployment import Deployment
from node.link import settled
from node.link.chain import forced_draft
from test_transcript_settlement import DRAFTER_KEY, Transcript, _evidence_of_verifier, _force_by_drafter, transcript_job

WORD = 32


def _ceil32(n: int) -> int:
    return -(-n // WORD) * WORD


class Layout:
    """An adversarial ABI encoder: the same values, laid out as a hostile sender may (a `random.Random` decides).
    Each dynamic value is (prefix, body); its parent points at the body, and a struct may place a member's encoding
    in its own prefix, before the struct, with a negative offset (Solidity reads struct member offsets as signed)."""

    def __init__(self, rnd: random.Random, backwards: bool):
        self.rnd, self.backwards = rnd, backwards

    def junk(self, words_max: int = 2) -> bytes:
        return self.rnd.randbytes(WORD * self.rnd.randint(0, words_max)) if self.rnd.random() < 0.4 else b""

    def padding(self, n: int) -> bytes:
        if not n or self.rnd.random() < 0.3:
            return bytes(n)
        return bytes(self.rnd.randint(1, 255) if self.rnd.random() < 0.5 else 0 for _ in range(n)) or bytes(n)

    def value(self, abi: dict, v) -> tuple[bytes, bytes]:
        typ = abi["type"]
        if typ == "tuple":
            return self.tuple(abi["components"], v)
        if typ == "bytes":
            raw = bytes(v)
            return b"", len(raw).to_bytes(WORD, "big") + raw + self.padding(_ceil32(len(raw)) - len(raw)) + self.junk()
        if typ.endswith("[]"):
            item = {**abi, "type": typ[:-2]}
            body = b"".join(self.value(item, x)[1] for x in v)
            return b"", len(v).to_bytes(WORD, "big") + body + self.junk()
        return b"", abi_encode([typ], [v])

    def tuple(self, components: list[dict], values, top: bool = False) -> tuple[bytes, bytes]:
        values = list(values.values()) if isinstance(values, dict) else list(values)
        head_size = sum(CD._head_size(c) for c in components)
        parts = [(c, self.value(c, v), CD._is_dynamic(c)) for c, v in zip(components, values)]
        before, after = b"", b""
        gap = self.junk() if any(dynamic for _, _, dynamic in parts) else b""  # a static struct is its words only
        after_at = head_size + len(gap)
        head, pointers = [], []
        for _, (prefix, body), dynamic in parts:
            if not dynamic:
                head.append(body)
                continue
            if self.backwards and not top and self.rnd.random() < 0.4:
                at = len(before) + len(prefix)  # from the start of `before`
                before += prefix + body
                pointers.append(("before", at))
            else:
                pointers.append(("after", after_at + len(after) + len(prefix)))
                after += prefix + body + self.junk(1)
            head.append(None)
        words, it = [], iter(pointers)
        for h in head:
            if h is not None:
                words.append(h)
                continue
            side, at = next(it)
            rel = at if side == "after" else at - len(before)
            words.append((rel % (1 << 256)).to_bytes(WORD, "big"))
        return before, b"".join(words) + gap + after

    def call(self, fn_abi: dict, selector: bytes, args: dict) -> bytes:
        _, body = self.tuple(fn_abi["inputs"], args, top=True)
        return selector + body + self.junk()


def plain(x):
    """Decoded values, comparable across readers: tuples all the way down, addresses lower-case."""
    if isinstance(x, dict):
        return tuple(plain(v) for v in x.values())
    if isinstance(x, list | tuple):
        return tuple(plain(v) for v in x)
    if isinstance(x, str) and x.startswith("0x"):
        return x.lower()
    return bytes(x) if isinstance(x, bytes | bytearray) else x


def _fn_abi(contract, name):
    return next(e for e in contract.abi if e.get("type") == "function" and e["name"] == name)


def _accepts(w3, to, sender, data) -> bool:
    try:
        w3.eth.call({"to": to, "from": sender, "data": data})
    except ContractLogicError:  # (any revert: the contract refused this calldata)
        return False
    return True


def _echo(w3, echo, fn_abi, data):
    raw = w3.eth.call({"to": echo.address, "data": data})
    (encoded,) = abi_decode(["bytes"], raw)
    return abi_decode(get_abi_input_types(fn_abi), encoded)


@pytest.fixture
def echo(chain, env):
    return deploy_contract(env.w3, "CalldataEcho")


@pytest.fixture
def calls(chain, env):
    """A settle (a finished transcript) and a verifier's force (at cycle 1 of another job), canonical, unsent."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    force_job = transcript_job(env)
    f = Transcript(env, force_job)
    ts = env.system.transcript.functions
    forcing = ts.forceMove(force_job, _evidence_of_verifier(f, 1), TX.pack_cycles(f.cycles[:1]))
    return {"settle": (t.settle_call(), env.actors.drafter), "forceMove": (forcing, env.actors.verifier)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(["settle", "forceMove"]), backwards=st.booleans())
def test_every_calldata_the_contract_accepts_decodes_to_what_solidity_read(env, echo, calls, seed, name, backwards):
    transcript, w3 = env.system.transcript, env.w3
    call, sender = calls[name]
    canonical = bytes.fromhex(call._encode_transaction_data()[2:])
    fn_abi = _fn_abi(transcript, name)
    _, intended = CD.decode_call(transcript, canonical)
    data = Layout(random.Random(seed), backwards).call(fn_abi, canonical[:4], intended)
    if not _accepts(w3, transcript.address, sender, data):
        assert backwards  # only a backwards member offset may be refused: everything else Solidity never reads
        return
    solidity = _echo(w3, echo, fn_abi, data)
    assert plain(solidity) == plain(intended)  # the contract acts on the intended values
    name_read, node = CD.decode_call(transcript, data)
    assert name_read == name and plain(node) == plain(solidity)


def test_the_node_reader_agrees_with_solidity_on_hand_made_non_canonical_calldata(chain, env, echo, calls):
    """Cases the fuzz reaches by chance, pinned: one dirty padding byte (which web3's strict decoder refuses), a
    missing last padding and junk after the arguments."""
    transcript, w3 = env.system.transcript, env.w3
    call, sender = calls["settle"]
    canonical = bytes.fromhex(call._encode_transaction_data()[2:])
    fn_abi = _fn_abi(transcript, "settle")
    _, intended = CD.decode_call(transcript, canonical)
    cycles_len = len(intended["cycles"])
    assert cycles_len % WORD, "the settled cycles end inside a word: their padding is the calldata's last bytes"
    dirty = canonical[:-1] + b"\x01"
    unpadded = canonical[: len(canonical) - (_ceil32(cycles_len) - cycles_len)]
    trailing = canonical + b"\xff" * 7
    with pytest.raises(Exception, match="Padding bytes"):  # what the node read before: web3's strict decoder
        transcript.decode_function_input(dirty)
    for data in (dirty, unpadded, trailing):
        assert _accepts(w3, transcript.address, sender, data)
        assert plain(CD.decode_call(transcript, data)[1]) == plain(_echo(w3, echo, fn_abi, data)) == plain(intended)


def _settle_dirty(env, t: Transcript, sender: str):
    """Send `t`'s settlement with one non-zero padding byte (the last byte of its cycles' padding)."""
    data = bytearray(bytes.fromhex(t.settle_call()._encode_transaction_data()[2:]))
    data[-1] = 0x5A
    tx = env.w3.eth.send_transaction({"from": sender, "to": env.system.transcript.address, "data": bytes(data)})
    receipt = env.w3.eth.wait_for_transaction_receipt(tx)
    assert receipt.status == 1  # the contract accepts it
    return receipt


def test_a_rule_breaking_settlement_with_a_dirty_padding_byte_is_still_challenged(chain, env, tmp_path):
    """The attack: a colluding pair settles a transcript whose cycle 1 breaks the accept rule, with one dirty byte.
    The watchdog's reader (node/link/settled.py) and `verispec challenge` still read it and convict both signers."""
    from tests.test_cli import cli, ok

    job_id = transcript_job(env)
    t = Transcript(env, job_id, lie=(1,))
    _settle_dirty(env, t, env.actors.drafter)
    cycles = settled.job_cycles(env.system, job_id)
    assert [c for c, _ in settled.rule_faults(env.system, job_id, cycles)] == [1]
    assert settled.refuted_on_chain(env.system, job_id, 1, env.actors.outsider)
    home = tmp_path / "home"
    Deployment.of_system(env.w3, env.system, env.w3.provider.endpoint_uri, 0).save(home / "deployment.json")
    out = ok(cli("challenge", job_id, "--dev-account", 7, home=home))
    assert "rule challenge won" in out and "cycle 1" in out
    assert settled.convicted(env.system, job_id)


def test_a_force_with_a_dirty_padding_byte_still_shows_its_draft(chain, env):
    """The same byte on a drafter's forceMove: the verifier's reader (`forced_draft`, what it answers from) still
    reads the forced Draft, so the honest verifier can answer instead of being slashed."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    call = _force_by_drafter(env, t, 1)
    data = bytearray(bytes.fromhex(call._encode_transaction_data()[2:]))
    data[-1] = 0x77  # the cycles' padding (one cycle of 81 bytes, padded to 96)
    to = env.system.transcript.address
    receipt = env.w3.eth.wait_for_transaction_receipt(
        env.w3.eth.send_transaction({"from": env.actors.drafter, "to": to, "data": bytes(data)})
    )
    assert receipt.status == 1
    draft, sig = forced_draft(env.w3, env.system.transcript, job_id)
    assert draft == t.drafts[1] and sig == t.sign(t.drafts[1], DRAFTER_KEY)


def test_transcript_settlement_fits_eip_170(env):
    """anvil refuses a contract over 24,576 bytes at deployment; this says how close TranscriptSettlement is."""
    assert 0 < len(env.w3.eth.get_code(env.system.transcript.address)) <= 24_576


def test_a_force_through_a_contract_wallet_is_read_from_its_log(chain, env):
    """A drafter whose account is an EIP-7702 account (delegated to a batching wallet) forces through its code: the
    transaction's input is the wallet's `run`, not `forceMove`. The verifier reads the forced Draft from the
    ForceEvidence log the contract emitted."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    data = bytearray(bytes.fromhex(_force_by_drafter(env, t, 1)._encode_transaction_data()[2:]))
    data[-1] = 0x33  # and one dirty padding byte
    w3, drafter = env.w3, env.actors.drafter
    wallet = deploy_contract(w3, "CallBatch")
    w3.provider.make_request("anvil_setCode", [drafter, "0xef0100" + wallet.address[2:].lower()])  # a 7702 delegation
    to = env.system.transcript.address
    run = wallet.functions.run([to], [bytes(data)], [False])._encode_transaction_data()
    sent = w3.eth.send_transaction({"from": drafter, "to": drafter, "data": run})
    receipt = w3.eth.wait_for_transaction_receipt(sent)
    assert receipt.status == 1 and receipt.to == drafter
    assert env.system.transcript.functions.forceOf(job_id).call()[9] == env.actors.verifier  # the drafter's force
    (logged,) = env.system.transcript.events.ForceEvidence().process_receipt(receipt, errors=DISCARD)
    assert bytes(logged.args.call) == bytes(data)  # the call as the contract read it, junk included
    draft, sig = forced_draft(w3, env.system.transcript, job_id)
    assert draft == t.drafts[1] and sig == t.sign(t.drafts[1], DRAFTER_KEY)


def test_two_forces_in_one_transaction_show_the_one_in_effect(chain, env):
    """Threat-model row 119: a drafter's contract wallet forces at S(0) and then at S(1) in one transaction. The
    contract keeps the second force; a reader of the transaction's first ForceEvidence would hand the verifier the
    stale Draft of cycle 1, its answer would not fit the force, and `claimForce` would slash it. The reader takes
    the last force, and the verifier's answer to it holds."""
    job_id = transcript_job(env)
    t = Transcript(env, job_id)
    w3, a, ts = env.w3, env.actors, env.system.transcript
    calls = [bytes.fromhex(_force_by_drafter(env, t, k)._encode_transaction_data()[2:]) for k in (1, 2)]
    wallet = deploy_contract(w3, "CallBatch")
    w3.provider.make_request("anvil_setCode", [a.drafter, "0xef0100" + wallet.address[2:].lower()])
    run = wallet.functions.run([ts.address] * 2, calls, [False, False])._encode_transaction_data()
    sent = w3.eth.send_transaction({"from": a.drafter, "to": a.drafter, "data": run})
    receipt = w3.eth.wait_for_transaction_receipt(sent)
    assert receipt.status == 1
    assert len(ts.events.ForceEvidence().process_receipt(receipt, errors=DISCARD)) == 2
    draft, sig = forced_draft(w3, ts, job_id)
    assert draft == t.drafts[2] and sig == t.sign(t.drafts[2], DRAFTER_KEY)
    stake = env.registry.functions.stakeOf(a.verifier).call()
    answer = TX.verification_answer(t.cycles[draft.cycle], t.reveals[draft.cycle])
    transact(w3, ts.functions.answerForce(job_id, answer), a.verifier)
    advance(w3, env.params.verify_timeout + 1)
    with pytest.raises(ContractLogicError):  # answered: nothing is left to claim
        ts.functions.claimForce(job_id).call({"from": a.outsider})
    assert env.registry.functions.stakeOf(a.verifier).call() == stake
