"""JobSlot (contracts/lib/JobSlot.sol): the bit layout of the market's two hot job words, pinned three ways.

1. The offsets are the compiler's own: solc's storage layout of `InferenceMarket.Job` (tests/solc_analysis.py)
   puts every field where the library reads it.
2. Known values pack to a known raw word (written out below, so a moved field fails loudly) and unpack back.
3. On a real job, the words the market wrote (read with eth_getStorageAt) unpack to what `getJob` reports
   through Solidity's own struct access.
"""

from __future__ import annotations

import pytest
from eth_abi import encode
from eth_hash.auto import keccak
from web3 import Web3

from chainutil import VOCAB, JobRunner, env, job_view, submit_job  # noqa: F401  (env is a fixture)
from node.chain.contracts import deploy_contract
from solc_analysis import analysis

SLOT0 = ("drafter", "state", "gamma", "cycle", "emitted", "rejected", "deadline")
SLOT1 = ("verifier", "maxTokens", "eosToken", "openDisputes", "vocabSize")
# (slot, first bit, width in bits) of each field, as the library reads it
PINNED = {
    "drafter": (0, 0, 160),
    "state": (0, 160, 8),
    "gamma": (0, 168, 8),
    "cycle": (0, 176, 16),
    "emitted": (0, 192, 16),
    "rejected": (0, 208, 16),
    "deadline": (0, 224, 32),
    "verifier": (1, 0, 160),
    "maxTokens": (1, 160, 16),
    "eosToken": (1, 176, 32),
    "openDisputes": (1, 208, 16),
    "vocabSize": (1, 224, 32),
}
DRAFTER = "0x1111111111111111111111111111111111111111"
KNOWN = {
    "drafter": int(DRAFTER, 16),
    "state": 0x93,
    "gamma": 16,
    "cycle": 0xBEEF,
    "emitted": 0x1234,
    "rejected": 0x0FED,
    "deadline": 0xDEADBEEF,
}
# deadline | rejected | emitted | cycle | γ | state | drafter, most significant first
KNOWN_WORD = int("deadbeef0fed1234beef1093" + "11" * 20, 16)


def _storage_layout() -> dict:
    return analysis()["contracts"]["contracts/InferenceMarket.sol"]["InferenceMarket"]["storageLayout"]


def _job_fields() -> dict[str, tuple[int, int, int]]:
    layout = _storage_layout()
    job = next(t for t in layout["types"].values() if t["label"] == "struct InferenceMarket.Job")
    return {
        m["label"]: (int(m["slot"]), m["offset"] * 8, int(layout["types"][m["type"]]["numberOfBytes"]) * 8)
        for m in job["members"]
    }


def _word(values: dict[str, int]) -> int:
    return sum(value << PINNED[name][1] for name, value in values.items())


@pytest.fixture(scope="module")
def slot(w3, artifacts):
    return deploy_contract(w3, "JobSlotHarness", artifacts=artifacts).functions


def _unpack(slot, word: int) -> dict[str, int]:
    values = slot.unpack(word).call()
    return dict(zip(SLOT0, [int(values[0], 16), *values[1:]]))


def test_offsets_are_the_compilers_storage_layout():
    fields = _job_fields()
    assert {name: fields[name] for name in PINNED} == PINNED


def test_known_fields_pack_to_the_pinned_word(slot):
    assert _word(KNOWN) == KNOWN_WORD
    assert slot.pack(DRAFTER, *(KNOWN[f] for f in SLOT0[1:])).call() == KNOWN_WORD
    assert _unpack(slot, KNOWN_WORD) == KNOWN
    assert slot.status(KNOWN_WORD).call() == 0x3  # the low 4 bits of the state; the flags are the high 4


def test_each_field_owns_exactly_its_bits(slot):
    full = (1 << 256) - 1
    widths = {name: PINNED[name][2] for name in SLOT0}
    everything = {name: (1 << width) - 1 for name, width in widths.items()}
    all_ones = Web3.to_checksum_address("0x" + "ff" * 20)
    assert slot.pack(all_ones, *(everything[f] for f in SLOT0[1:])).call() == full
    assert _unpack(slot, full) == everything
    for name in SLOT0:
        alone = {f: (everything[f] if f == name else 0) for f in SLOT0}
        word = slot.pack(all_ones if name == "drafter" else "0x" + "00" * 20, *(alone[f] for f in SLOT0[1:])).call()
        assert word == everything[name] << PINNED[name][1], name
        assert _unpack(slot, word) == alone, name


def test_the_deadline_keeps_its_low_32_bits_as_a_uint32_cast_would(slot):
    word = slot.pack(DRAFTER, *(KNOWN[f] for f in SLOT0[1:-1]), (1 << 32) + 5).call()
    assert _unpack(slot, word) == {**KNOWN, "deadline": 5}


@pytest.mark.parametrize(
    "state, count, rejection, deadline", [(0x12, 5, 1, 1_900_000_000), (0x33, 1, 0, (1 << 32) + 77), (0x93, 17, 1, 0)]
)
def test_next_cycle_is_pack_of_the_advanced_fields(slot, state, count, rejection, deadline):
    before = {**KNOWN, "cycle": 40, "emitted": 150, "rejected": 12}
    word = _word(before)
    expected = slot.pack(
        DRAFTER,
        state,
        before["gamma"],
        before["cycle"] + 1,
        before["emitted"] + count,
        before["rejected"] + rejection,
        deadline % (1 << 32),
    ).call()
    assert slot.nextCycle(word, state, count, rejection, deadline).call() == expected
    assert _unpack(slot, expected) == {
        "drafter": KNOWN["drafter"],
        "state": state,
        "gamma": before["gamma"],
        "cycle": 41,
        "emitted": 150 + count,
        "rejected": 12 + rejection,
        "deadline": deadline % (1 << 32),
    }


def test_slot_one_readers(slot):
    values = {
        "verifier": int("22" * 20, 16),
        "maxTokens": 0xFFFE,
        "eosToken": 0xCAFEBABE,
        "openDisputes": 3,
        "vocabSize": 0x0001_0300,
    }
    word = _word(values)
    assert word == int("000103000003cafebabefffe" + "22" * 20, 16)
    verifier, max_tokens, eos, open_disputes, vocab = slot.unpackInfo(word).call()
    assert (int(verifier, 16), max_tokens, eos, open_disputes, vocab) == tuple(values.values())


def test_the_markets_words_unpack_to_its_own_view(chain, env, slot):
    """A real job after two verified cycles (one with a rejection): what the market hand-packs in the hot
    path is what Solidity's struct access reads back."""
    job_id = submit_job(env, gamma=4, maxTokens=40)
    runner = JobRunner(env, job_id)
    runner.accept()
    runner.cycle(0, accept=4)
    runner.cycle(1, accept=2)
    jobs_slot = next(int(s["slot"]) for s in _storage_layout()["storage"] if s["label"] == "_jobs")
    base = int.from_bytes(keccak(encode(["uint256", "uint256"], [job_id, jobs_slot])), "big")
    word0, word1 = (int.from_bytes(env.w3.eth.get_storage_at(env.market.address, base + i), "big") for i in (0, 1))
    job = job_view(env, job_id)
    fields = _unpack(slot, word0)
    assert fields["drafter"] == int(job["drafter"], 16)
    assert slot.status(word0).call() == job["status"]
    assert bool(fields["state"] & 0x10) == job["alphaEligible"] is True
    assert (
        (fields["gamma"], fields["cycle"], fields["emitted"], fields["rejected"])
        == (job["gamma"], job["cycle"], job["emitted"], job["rejected"])
        == (4, 2, 5 + 3, 1)
    )
    assert fields["deadline"] == job["deadline"]  # awaiting a draft: the stored deadline is the phase's
    verifier, max_tokens, eos, open_disputes, vocab = slot.unpackInfo(word1).call()
    assert (verifier, max_tokens, eos, open_disputes, vocab) == (
        job["verifier"],
        job["maxTokens"],
        job["eosToken"],
        job["openDisputes"],
        job["vocabSize"],
    )
    assert vocab == VOCAB
    # the commitment word: the salt in bits 64..1 (docs/contracts.md), as getJob reports it
    word6 = int.from_bytes(env.w3.eth.get_storage_at(env.market.address, base + 6), "big")
    assert (word6 >> 1) & (2**64 - 1) == job["salt"] == runner.salt and word6 & 1 == 0
