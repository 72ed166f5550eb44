"""The misbehaving sessions (node/roles/behaviors.py) against the honest ones, on the bundled pair.

Each misbehaviour overrides only the honest session's one decision; these tests pin down that it changes
exactly that decision and nothing else, one cycle at a time, without a chain (tests/test_roles.py drives
the same sessions through nodes and disputes on anvil).
"""

from __future__ import annotations

import pathlib

import pytest
import torch

from node import protocol
from node.decoding import DraftSession, SpeculativeDecoder, VerifySession
from node.roles.behaviors import (
    BiasedDraftSession,
    BiasPolicy,
    RetaliatingVerifySession,
    RetaliationPolicy,
    draft_session,
    verify_session,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = protocol.hash_chain(b"\x01" * 32, 1)

pytestmark = pytest.mark.skipif(
    not (ROOT / "models" / "target" / "model.safetensors").exists(), reason="bundled models are missing"
)


@pytest.fixture(scope="module")
def decoder():
    torch.set_num_threads(1)
    return SpeculativeDecoder.from_pretrained(
        ROOT / "models" / "target", ROOT / "models" / "draft", device="cpu", gamma=4
    )


@pytest.fixture(scope="module")
def job(decoder):
    return decoder.job(decoder.tokenizer("def read(path):\n    ")["input_ids"], 24, job_id=77)


def run_cycles(drafter, verifier, cycles: int):
    """Drive one drafter and one verifier session in lock step; returns [(draft, verification)]."""
    out = []
    for cycle in range(cycles):
        if verifier.done:
            break
        draft = drafter.propose(cycle)
        verification = verifier.verify(cycle, draft)
        verifier.advance(verification.emitted)
        drafter.advance(verification.emitted)
        out.append((draft, verification))
    return out


def test_a_biased_drafter_with_no_ambiguous_position_is_the_honest_one(decoder, job):
    honest = run_cycles(DraftSession(decoder.draft, job), VerifySession(decoder.target, job, SEED), 4)
    biased_session = BiasedDraftSession(decoder.draft, job, BiasPolicy(threshold=0.0))
    biased = run_cycles(biased_session, VerifySession(decoder.target, job, SEED), 4)
    assert [(d.tokens, d.q) for d, _ in biased] == [(d.tokens, d.q) for d, _ in honest]
    assert all(records == [] for records in biased_session.biased.values())
    assert sorted(biased_session.biased) == list(range(len(biased)))


def test_a_biased_drafter_proposes_the_second_choice_and_understates_q(decoder, job):
    session = BiasedDraftSession(decoder.draft, job, BiasPolicy(threshold=1.01, understate_q=0.5))  # all ambiguous
    draft = session.propose(0)
    honest = DraftSession(decoder.draft, job).propose(0)
    [first, *_] = session.biased[0]
    assert first.index == 0 and first.honest_token == honest.tokens[0]  # the first position sees the same context
    for record in session.biased[0]:
        row = draft.q_rows[record.index]
        assert record.token == draft.tokens[record.index] != record.honest_token
        assert record.honest_token == protocol.invcdf(row, protocol.draft_uniform(job.job_id, 0, record.index))
        assert record.true_q == int(row[record.token]) == sorted(row, reverse=True)[1]
        assert draft.q[record.index] == record.q == max(1, int(record.true_q * 0.5))
    # the root commits to what it proposed, so the contract cannot tell: only a DraftReplay dispute can
    assert draft.root == protocol.draft_root(job.job_id, 0, draft.tokens, draft.q)


def test_a_retaliating_verifier_shades_exactly_its_positions_and_the_chain_rule_follows(decoder, job):
    policy = RetaliationPolicy(every=3, factor=0.5)
    honest = run_cycles(DraftSession(decoder.draft, job), VerifySession(decoder.target, job, SEED), 3)
    session = RetaliatingVerifySession(decoder.target, job, SEED, policy=policy)
    drafter = DraftSession(decoder.draft, job)
    shaded_positions = 0
    for cycle, (honest_draft, honest_verification) in enumerate(honest):
        draft = drafter.propose(cycle)
        verification = session.verify(cycle, draft)
        if draft.tokens == honest_draft.tokens:  # same history so far: the target's p are the honest verifier's
            assert session.true_p[cycle] == honest_verification.p
        for i, (posted, true) in enumerate(zip(verification.p, session.true_p[cycle])):
            shaded = (cycle * job.gamma + i) % policy.every == 0
            shaded_positions += shaded
            assert posted == (int(true * policy.factor) if shaded else true)
        assert verification.accepted == protocol.count_accepted(
            verification.reveal, draft.root, draft.q, verification.p, session.salt
        )
        session.advance(verification.emitted)
        drafter.advance(verification.emitted)
    assert shaded_positions > 0


def test_behaviours_are_chosen_by_name_and_unknown_names_are_refused(decoder, job):
    assert type(draft_session("honest", decoder.draft, job)) is DraftSession
    assert type(draft_session("biased", decoder.draft, job)) is BiasedDraftSession
    assert type(verify_session("honest", decoder.target, job, SEED)) is VerifySession
    assert type(verify_session("retaliate", decoder.target, job, SEED)) is RetaliatingVerifySession
    with pytest.raises(ValueError, match="unknown drafter behavior 'retaliate'"):
        draft_session("retaliate", decoder.draft, job)
    with pytest.raises(ValueError, match="unknown verifier behavior 'biased'"):
        verify_session("biased", decoder.target, job, SEED)
