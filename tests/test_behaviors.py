"""The misbehaving sessions (node/roles/behaviors.py) against the honest ones, on the bundled pair.

Each misbehaviour overrides only the honest session's one decision; these tests pin down that it changes
exactly that decision and nothing else, one cycle at a time, without a chain (tests/test_roles.py drives
the same sessions through nodes and disputes on anvil).
"""

from __future__ import annotations

import pathlib
import sysconfig

import pytest
import torch

from node import protocol
from node.decoding import DraftSession, SpeculativeDecoder, VerifySession
from node.decoding.distributions import quantized
from node.decoding.scorer import default_tolerance_wad
from node.roles.behaviors import (
    BiasedDraftSession,
    BiasPolicy,
    ColludingVerifySession,
    LazyDraftSession,
    LazyPolicy,
    RetaliatingVerifySession,
    RetaliationPolicy,
    ShadePolicy,
    ShadingVerifySession,
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
    assert type(verify_session("honest", decoder.target, job, SEED, salt=0)) is VerifySession
    assert type(verify_session("retaliate", decoder.target, job, SEED, salt=0)) is RetaliatingVerifySession
    assert type(draft_session("lazy", decoder.draft, job)) is LazyDraftSession
    assert type(verify_session("shade", decoder.target, job, SEED, salt=0)) is ShadingVerifySession
    assert type(verify_session("collude", decoder.target, job, SEED, salt=0)) is ColludingVerifySession
    with pytest.raises(ValueError, match="unknown drafter behavior 'retaliate'"):
        draft_session("retaliate", decoder.draft, job)
    with pytest.raises(ValueError, match="unknown verifier behavior 'biased'"):
        verify_session("biased", decoder.target, job, SEED, salt=0)


STDLIB = pathlib.Path(sysconfig.get_paths()["stdlib"])
SOURCES = ("textwrap.py", "shlex.py", "fractions.py", "heapq.py", "bisect.py", "json/decoder.py", "ast.py", "string.py")


def prompts(decoder, count: int = len(SOURCES)) -> list[list[int]]:
    """Code the bundled pair was made for: 64 tokens from line 60 of some standard-library modules."""
    out = []
    for name in SOURCES[:count]:
        lines = (STDLIB / name).read_text().splitlines(keepends=True)
        out.append(decoder.tokenizer("".join(lines[60:120]))["input_ids"][:64])
    return out


TOL = default_tolerance_wad(torch.float32)


def run_job(decoder, prompt, job_id: int, drafter_behavior="honest", verifier_behavior="honest", **policies):
    """Decode one whole job with the named behaviours (the verifier replays the draft); [(draft, verification)]."""
    job = decoder.job(prompt, 48, job_id=job_id)
    seed = protocol.hash_chain(job_id.to_bytes(32, "big"), 1)
    drafter = draft_session(drafter_behavior, decoder.draft, job, lazy=policies.get("lazy"))
    verifier = verify_session(
        verifier_behavior, decoder.target, job, seed, draft_model=decoder.draft, salt=0, **policies.get("v", {})
    )
    return job, verifier, run_cycles(drafter, verifier, 64)


def rejection_rate(cycles) -> float:
    """Rejected / tested proposals (a cycle tests its proposals up to the first rejection): 1 − the window's α̂."""
    tested = sum(min(v.accepted + 1, len(d.tokens)) for d, v in cycles)
    return sum(v.accepted < len(d.tokens) for d, v in cycles) / tested


def test_a_shading_verifier_doubles_the_rejections_with_every_value_close(decoder):
    policy = ShadePolicy()
    honest, shaded = [], []
    for job_id, prompt in enumerate(prompts(decoder), start=100):
        honest += run_job(decoder, prompt, job_id)[2]
        _job, session, cycles = run_job(decoder, prompt, job_id, verifier_behavior="shade", v=dict(shade=policy))
        for _d, v in cycles:  # every proposal's p is shaded by the factor, none by more: no single value is far off
            assert v.p == tuple(int(p * policy.factor) for p in session.true_p[v.cycle])
        shaded += cycles
    ratio = rejection_rate(shaded) / rejection_rate(honest)
    assert 0.1 < rejection_rate(honest) < 0.35
    assert 1.5 < ratio < 2.6, (rejection_rate(honest), rejection_rate(shaded))


def test_a_lazy_drafter_commits_the_cheaper_models_q_which_the_registered_model_contradicts(decoder, job):
    lazy = LazyDraftSession(decoder.draft, job, LazyPolicy(window=2))
    draft = lazy.propose(0)
    with torch.inference_mode():  # what it served at position 0: the draft model on the prompt's last 2 tokens
        logits = decoder.draft(input_ids=torch.tensor([list(job.prompt[-2:])])).logits[0, -1:]
    cheap_row = quantized(logits, job.sampling)[0]
    assert draft.q[0] == int(cheap_row[draft.tokens[0]])
    assert draft.tokens[0] == protocol.invcdf(cheap_row, protocol.draft_uniform(job.job_id, 0, 0))
    # the registered model's replay (an honest verifier's draft check, the referees' rule) finds q off
    faults = total = 0
    for job_id, prompt in enumerate(prompts(decoder, 4), start=200):
        _job, _v, cycles = run_job(decoder, prompt, job_id, drafter_behavior="lazy")
        total += len(cycles)
        faults += sum(any(f.kind == "q" for f in v.draft_faults) for _d, v in cycles)
        for _d, v in cycles:
            assert all(abs(f.claimed - f.replayed) > TOL for f in v.draft_faults if f.kind == "q")
    assert faults >= 0.8 * total, (faults, total)
    with pytest.raises(ValueError, match="at least 1 token"):
        LazyDraftSession(decoder.draft, job, LazyPolicy(window=0))


def test_a_colluding_verifier_reports_no_fault_of_a_biased_draft_and_is_otherwise_honest(decoder, job):
    biased = BiasedDraftSession(decoder.draft, job, BiasPolicy(threshold=1.01))  # biases every position it can
    draft = biased.propose(0)
    assert biased.biased[0], "nothing to collude on"
    honest = VerifySession(decoder.target, job, SEED, draft_model=decoder.draft).verify(0, draft)
    colluding = ColludingVerifySession(decoder.target, job, SEED, draft_model=decoder.draft).verify(0, draft)
    assert {f.index for f in honest.draft_faults} >= {r.index for r in biased.biased[0]}  # what it would dispute
    assert colluding.draft_faults == ()  # so its node (dispute_faults=True) opens no DraftReplay dispute
    assert (colluding.p, colluding.accepted, colluding.out_token, colluding.emitted) == (
        honest.p,
        honest.accepted,
        honest.out_token,
        honest.emitted,
    )
