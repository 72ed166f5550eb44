"""The engine end to end, on the bundled pair in models/ (or a tiny random pair if it is absent,
or if VERISPEC_TINY_PAIR=1 is set).

Exactness: greedy equals the target's own greedy generate; the joint law of
the first two tokens equals the target's; cached logits after every rollback
equal a fresh forward; a drafter and a verifier in separate processes
reproduce generate() exactly. Plus the per-cycle records against the
protocol, EOS/budget truncation, draft replay checks, model ids and the
load-time pairing checks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import multiprocessing
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import textwrap
from unittest import mock

import numpy as np
import pytest
import torch
from eth_hash.auto import keccak
from scipy.stats import chisquare

from node import protocol
from node.decoding import DraftSession, SpeculativeDecoder, VerifySession, model_id, model_id_of
from node.decoding.distributions import SamplingParams, probabilities
from node.decoding.loading import load_model
from tests.fixtures.drafter_process import serve_drafts
from tests.fixtures.tiny_pair import build_pair, bundled_pair

SIGNIFICANCE = 1e-3
PROMPT = "def __init__(self, "
CPU = torch.device("cpu")
ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pair_paths(tmp_path_factory):
    torch.set_num_threads(1)  # the test machine is shared; one thread keeps runs modest and deterministic
    bundled = None if os.environ.get("VERISPEC_TINY_PAIR") else bundled_pair()
    return bundled or build_pair(tmp_path_factory.mktemp("tiny_pair"))


@pytest.fixture(scope="module")
def decoder(pair_paths):
    return SpeculativeDecoder.from_pretrained(*pair_paths, device="cpu", gamma=4)


@pytest.fixture(scope="module")
def prompt(decoder):
    return decoder.tokenizer(PROMPT)["input_ids"]


def seed_for(i: int) -> bytes:
    return keccak(b"verifier seed " + i.to_bytes(8, "big"))


def with_settings(decoder, gamma=None, verify_draft=False, **sampling) -> SpeculativeDecoder:
    """The same loaded pair under other settings."""
    return SpeculativeDecoder(
        decoder.target, decoder.draft, gamma=gamma or decoder.gamma, verify_draft=verify_draft, **sampling
    )


# ---------------------------------------------------------------- exactness


@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_greedy_equals_the_targets_own_greedy_generate(decoder, prompt, gamma):
    eos = decoder.tokenizer.eos_token_id
    greedy = with_settings(decoder, gamma=gamma, temperature=0)
    ours = greedy.generate(prompt, 48, job_id=gamma, verifier_seed=seed_for(gamma), eos_token_id=eos)
    with torch.inference_mode():
        reference = decoder.target.generate(
            torch.tensor([prompt]), max_new_tokens=48, do_sample=False, eos_token_id=eos, pad_token_id=eos
        )[0, len(prompt) :].tolist()
    assert ours.tokens == reference


def target_joint_of_two(target, prompt, params: SamplingParams) -> np.ndarray:
    """Exact P(t1, t2 | prompt) under plain autoregressive sampling from the target, from one batched forward."""
    with torch.inference_mode():
        first = probabilities(target(torch.tensor([prompt])).logits[0, -1:], params)[0].double()
        vocab = first.shape[0]
        batch = torch.tensor([prompt + [t] for t in range(vocab)])
        second = torch.cat([probabilities(target(chunk).logits[:, -1], params) for chunk in batch.split(256)]).double()
    return (first[:, None] * second).numpy()


def chi_square_on_pairs(pairs: list[tuple[int, int]], joint: np.ndarray) -> float:
    """Pairs expected at least 5 times are their own bins, the rest one 'other' bin."""
    n = len(pairs)
    expected = joint * n
    bins = np.argwhere(expected >= 5)
    index = {tuple(b): i for i, b in enumerate(bins)}
    observed = np.zeros(len(bins) + 1)
    for pair in pairs:
        observed[index.get(pair, len(bins))] += 1
    exp = np.append(expected[tuple(bins.T)], n - expected[tuple(bins.T)].sum())
    assert len(bins) >= 5, "the test needs a peaked enough target to have bins"
    return chisquare(observed, exp).pvalue


def first_pairs(engine, prompt, samples: int, residual=None) -> list[tuple[int, int]]:
    """The first two generated tokens of `samples` jobs (job id and verifier seed vary per sample).

    residual: a replacement for protocol.residual_sample, the tamper that shows the test has power.
    """
    patch = mock.patch.object(protocol, "residual_sample", residual) if residual else contextlib.nullcontext()
    with patch:
        return [tuple(engine.generate(prompt, 2, job_id=i, verifier_seed=seed_for(i)).tokens) for i in range(samples)]


# Prompts where the bundled target is peaked enough for informative bins; the tamper
# test uses a setting where the draft disagrees often, so a wrong residual shows.
@pytest.mark.parametrize(
    "text, settings",
    [
        ("\n\n\n", dict(gamma=3)),
        ('    """', dict(gamma=2, temperature=0.7, top_k=20, top_p=0.9)),
    ],
)
@pytest.mark.statistical
def test_first_two_tokens_are_jointly_distributed_as_the_target(decoder, text, settings):
    prompt = decoder.tokenizer(text)["input_ids"]
    engine = with_settings(decoder, **settings)
    joint = target_joint_of_two(decoder.target, prompt, engine.sampling)
    assert chi_square_on_pairs(first_pairs(engine, prompt, 1500), joint) > SIGNIFICANCE


@pytest.mark.statistical
def test_the_joint_test_rejects_a_residual_replaced_by_p(decoder):
    prompt = decoder.tokenizer("class ")["input_ids"]
    engine = with_settings(decoder, gamma=3, top_k=10)
    joint = target_joint_of_two(decoder.target, prompt, engine.sampling)
    pairs = first_pairs(engine, prompt, 600, residual=lambda p_wad, q_wad, u: protocol.invcdf(p_wad, u))
    assert chi_square_on_pairs(pairs, joint) < SIGNIFICANCE


def test_cached_logits_after_every_rollback_equal_a_fresh_forward(decoder, prompt):
    engine = with_settings(decoder, gamma=3)
    job = engine.job(prompt, 40, job_id=11)
    drafter = DraftSession(decoder.draft, job)
    verifier = VerifySession(decoder.target, job, seed_for(11), draft_model=decoder.draft)
    checked = []

    def check_against_fresh_forward(lm, name):
        extend = lm.extend

        def checked_extend(tokens, keep=1):
            prefix = list(lm.tokens)
            assert lm.cache.get_seq_length() == len(prefix)  # the cache holds exactly the tokens it claims
            logits = extend(tokens, keep)
            with torch.inference_mode():
                fresh = lm.model(torch.tensor([prefix + list(tokens)])).logits[0, -keep:]
            assert torch.allclose(logits, fresh, atol=1e-4, rtol=1e-4), f"{name} cache went stale"
            checked.append(name)
            return logits

        lm.extend = checked_extend

    for lm, name in ((drafter.lm, "draft"), (verifier.target, "target"), (verifier.replay, "replay")):
        check_against_fresh_forward(lm, name)
    rejections = 0
    while not verifier.done:
        draft = drafter.propose(verifier.cycle)
        verification = verifier.verify(verifier.cycle, draft)
        rejections += verification.accepted < job.gamma
        verifier.advance(verification.emitted)
        drafter.advance(verification.emitted)
        assert drafter.lm.tokens == drafter.context[: len(drafter.lm.tokens)]
        assert verifier.target.tokens == verifier.context[: len(verifier.target.tokens)]
    assert rejections >= 2 and checked.count("target") == verifier.cycle  # rollbacks did happen


def run_sessions(job, seed, drafter, target, replay_draft=None, wire=lambda m: pickle.loads(pickle.dumps(m))):
    """The cycle loop of two nodes: `drafter` proposes, a VerifySession on `target` verifies, both advance."""
    verifier = VerifySession(target, job, seed, draft_model=replay_draft)
    tokens, records = [], []
    while not verifier.done:
        draft = wire(drafter.propose(verifier.cycle))
        verification = verifier.verify(verifier.cycle, draft)
        verifier.advance(verification.emitted)
        drafter.advance(verification.emitted)
        tokens += verification.emitted
        records.append(
            (
                draft.tokens,
                draft.q,
                verification.p,
                verification.reveal,
                verification.accepted,
                verification.out_token,
                verification.emitted,
            )
        )
    return tokens, records


def as_records(result):
    return [(c.proposals, c.q, c.p, c.reveal, c.accepted, c.out_token, c.emitted) for c in result.cycles]


@pytest.mark.parametrize("verify_draft", [False, True])
def test_separate_drafter_and_verifier_reproduce_generate(decoder, pair_paths, prompt, verify_draft):
    engine = with_settings(decoder, gamma=4, verify_draft=verify_draft)
    expected = engine.generate(prompt, 40, job_id=21, verifier_seed=seed_for(21))
    # fresh model instances, as two nodes would load them; messages go through pickle, as over a wire
    target_path, draft_path = pair_paths
    job = engine.job(prompt, 40, job_id=21)
    replay = load_model(draft_path, CPU, torch.float32) if verify_draft else None
    drafter = DraftSession(load_model(draft_path, CPU, torch.float32), job)
    tokens, records = run_sessions(
        job, seed_for(21), drafter, load_model(target_path, CPU, torch.float32), replay_draft=replay
    )
    assert tokens == expected.tokens and records == as_records(expected)


@pytest.mark.long_run
def test_a_drafter_in_another_os_process_reproduces_generate(decoder, pair_paths, prompt):
    expected = decoder.generate(prompt, 24, job_id=31, verifier_seed=seed_for(31))
    job = decoder.job(prompt, 24, job_id=31)
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    drafter = context.Process(target=serve_drafts, args=(str(pair_paths[1]), job, theirs), daemon=True)
    drafter.start()

    class RemoteDrafter:
        def propose(self, cycle):
            ours.send(("propose", cycle))
            return ours.recv()

        def advance(self, emitted):
            ours.send(("advance", emitted))

    try:
        tokens, records = run_sessions(
            job, seed_for(31), RemoteDrafter(), load_model(pair_paths[0], CPU, torch.float32)
        )
    finally:
        ours.send(None)
        drafter.join(timeout=30)
    assert tokens == expected.tokens and records == as_records(expected)


# ---------------------------------------------------------------- the records against the protocol


def test_every_cycle_record_passes_the_on_chain_checks(decoder, prompt):
    seed = seed_for(41)
    result = decoder.generate(prompt, 64, job_id=41, verifier_seed=seed)
    assert result.chain_head == protocol.hash_chain(seed, protocol.hash_chain_length(64))
    previous = result.chain_head
    emitted = []
    for c in result.cycles:
        assert len(c.proposals) == decoder.gamma and all(0 < q <= protocol.WAD for q in c.q)
        assert keccak(c.reveal) == previous  # the hash-chain step the contract checks
        previous = c.reveal
        root = protocol.draft_root(41, c.cycle, c.proposals, c.q)
        assert protocol.count_accepted(c.reveal, root, c.q, c.p, 0) == c.accepted  # the local engine: salt 0
        assert list(c.emitted) == protocol.truncate_emitted(
            list(c.proposals[: c.accepted]) + [c.out_token], None, 64 - len(emitted)
        )
        emitted += c.emitted
    assert emitted == result.tokens and len(result.tokens) == 64 and result.stop_reason == "length"
    assert [c.cycle for c in result.cycles] == list(range(len(result.cycles)))


def test_generation_stops_at_eos_inclusive_and_at_the_budget(decoder, prompt):
    free = decoder.generate(prompt, 40, job_id=51, verifier_seed=seed_for(51))
    eos = free.tokens[17]  # pretend this token is EOS: the run must stop right after its first occurrence
    stopped = decoder.generate(prompt, 40, job_id=51, verifier_seed=seed_for(51), eos_token_id=eos)
    first = free.tokens.index(eos)
    assert stopped.tokens == free.tokens[: first + 1] and stopped.stop_reason == "eos"
    for budget in (1, 2, 5, 13):
        short = decoder.generate(prompt, budget, job_id=51, verifier_seed=seed_for(51))
        assert len(short.tokens) == budget and short.stop_reason == "length"


def test_a_verifier_replaying_the_draft_flags_lies_and_passes_honest_drafts(decoder, prompt):
    honest = with_settings(decoder, verify_draft=True).generate(prompt, 30, job_id=61, verifier_seed=seed_for(61))
    assert honest.draft_faults == 0
    job = decoder.job(prompt, 30, job_id=61)
    draft = DraftSession(decoder.draft, job).propose(0)
    lie_q = dataclasses.replace(draft, q=(draft.q[0] // 2,) + draft.q[1:], q_rows=None)
    lie_x = dataclasses.replace(draft, tokens=(draft.tokens[0], (draft.tokens[1] + 1) % 50) + draft.tokens[2:])

    def faults(lie):
        verifier = VerifySession(decoder.target, job, seed_for(61), draft_model=decoder.draft)
        return [(f.index, f.kind) for f in verifier.verify(0, lie).draft_faults]

    assert faults(lie_q) == [(0, "q")]
    assert (1, "x") in faults(lie_x)


def test_verifications_expose_top_k_for_disputes(decoder, prompt):
    job = decoder.job(prompt, 8, job_id=71)
    draft = DraftSession(decoder.draft, job).propose(0)
    verification = VerifySession(decoder.target, job, seed_for(71)).verify(0, draft)
    top = verification.top_k(5)
    assert len(top) == decoder.gamma + 1 and all(len(row) == 5 for row in top)
    assert all(a[1] >= b[1] for row in top for a, b in itertools.pairwise(row))
    assert len(draft.top_k(3)) == decoder.gamma


def test_the_half_precision_path_decodes_within_its_tolerance(pair_paths, prompt):
    """bf16 is the GPU default (node/decoding/loading.py); on CPU it runs the same code path minus the device.

    The verifier's teacher-forced draft replay and the drafter's one-token-at-a-time proposals differ in the
    last digits, more in bf16 than in fp32: default_tolerance_wad must absorb that (no draft fault on an
    honest run), and every cycle must still satisfy the on-chain accept rule.
    """
    bf16 = SpeculativeDecoder.from_pretrained(
        *pair_paths, device="cpu", dtype=torch.bfloat16, gamma=3, verify_draft=True
    )
    assert bf16.target.dtype == bf16.draft.dtype == torch.bfloat16
    result = bf16.generate(prompt, 40, job_id=81, verifier_seed=seed_for(81))
    assert len(result.tokens) == 40 and result.draft_faults == 0
    for c in result.cycles:
        root = protocol.draft_root(81, c.cycle, c.proposals, c.q)
        assert protocol.count_accepted(c.reveal, root, c.q, c.p, 0) == c.accepted  # the local engine: salt 0
    # the same job decodes to the same tokens every time: nothing in the bf16 path is nondeterministic
    assert bf16.generate(prompt, 40, job_id=81, verifier_seed=seed_for(81)).tokens == result.tokens


def test_a_device_torch_cannot_use_is_refused_at_load(pair_paths):
    with pytest.raises(ValueError, match="unknown device"):
        SpeculativeDecoder.from_pretrained(*pair_paths, device="tpu9")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA device"):
            SpeculativeDecoder.from_pretrained(*pair_paths, device="cuda")


def test_context_window_is_checked_up_front(decoder, prompt):
    window = decoder.target.config.n_positions
    with pytest.raises(ValueError, match="exceed"):
        decoder.generate(prompt, window, job_id=1, verifier_seed=seed_for(1))


# ---------------------------------------------------------------- model ids and pairing


def test_model_id_is_stable_and_names_weights_and_tokenizer(decoder, pair_paths, tmp_path):
    target_path, _ = pair_paths
    assert model_id(target_path) == decoder.target_id == model_id(target_path)
    assert len(decoder.target_id) == 32 and decoder.target_id != decoder.draft_id
    assert model_id_of(decoder.target, decoder.tokenizer) == decoder.target_id  # in memory = as saved
    copy = tmp_path / "copy"
    shutil.copytree(target_path, copy)
    assert model_id(copy) == decoder.target_id  # the directory does not matter, the content does
    config = (copy / "tokenizer_config.json").read_text()
    (copy / "tokenizer_config.json").write_text(config.replace('"', '"', 1).replace("{", "{\n  ", 1))
    assert model_id(copy) == decoder.target_id  # JSON layout does not matter either
    model = load_model(copy, CPU, torch.float32)
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] += 1e-3
    model.save_pretrained(copy)
    assert model_id(copy) != decoder.target_id


def test_a_mismatched_tokenizer_or_vocabulary_fails_at_load(decoder, pair_paths, tmp_path):
    target_path, draft_path = pair_paths
    other = tmp_path / "other"
    shutil.copytree(draft_path, other)
    tokenizer = decoder.tokenizer
    vocab = tokenizer.backend_tokenizer
    swapped = vocab.to_str().replace('"<|endoftext|>"', '"<|end|>"')
    (other / "tokenizer.json").write_text(swapped)
    with pytest.raises(ValueError, match="share a tokenizer"):
        SpeculativeDecoder.from_pretrained(target_path, other, device="cpu")
    small = load_model(draft_path, CPU, torch.float32)
    small.resize_token_embeddings(small.config.vocab_size - 8)
    with pytest.raises(ValueError, match="vocabularies differ"):
        SpeculativeDecoder(decoder.target, small)


@pytest.mark.long_run
def test_the_pair_decodes_in_under_1gb_rss(pair_paths):
    """A fresh process (so nothing else inflates the peak) loads both models and decodes 400 tokens."""
    target_path, draft_path = map(str, pair_paths)
    code = textwrap.dedent(f"""
        import resource, torch
        torch.set_num_threads(1)
        from node.decoding import SpeculativeDecoder
        decoder = SpeculativeDecoder.from_pretrained({target_path!r}, {draft_path!r}, device="cpu", verify_draft=True)
        result = decoder.generate(decoder.tokenizer("import os")["input_ids"], 400, job_id=1, verifier_seed=bytes(32))
        print(len(result.tokens), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    tokens, peak_kib = map(int, done.stdout.split()[-2:])
    assert tokens == 400 and peak_kib < 1024 * 1024


def test_a_llama_style_pair_decodes_exactly_too():
    """Not only GPT-2: a rotary, RMSNorm, grouped-query Llama pair through the same engine."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    shape = dict(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    target = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, **shape)).eval()
    draft = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, **shape)).eval()
    prompt = [5, 17, 42, 7]
    greedy = SpeculativeDecoder(target, draft, gamma=3, temperature=0)
    ours = greedy.generate(prompt, 30, job_id=1, verifier_seed=seed_for(1))
    with torch.inference_mode():
        reference = target.generate(
            torch.tensor([prompt]), max_new_tokens=30, do_sample=False, eos_token_id=None, pad_token_id=0
        )[0, len(prompt) :].tolist()
    assert ours.tokens == reference
    sampled = SpeculativeDecoder(target, draft, gamma=3, verify_draft=True)
    result = sampled.generate(prompt, 30, job_id=2, verifier_seed=seed_for(2))
    assert len(result.tokens) == 30 and result.draft_faults == 0
