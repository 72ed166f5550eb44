"""The pure pieces of the engine: the rejection sampler, the sampling transform, and the protocol helpers they use.

The single-position test is the exactness argument in miniature: over many
jobs, the first emitted token of a one-proposal cycle is distributed as p,
and the same test rejects a sampler whose residual was replaced by p.
"""

from __future__ import annotations

import contextlib
import random
from unittest import mock

import numpy as np
import pytest
import torch
from eth_hash.auto import keccak
from scipy.stats import chisquare
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from node import protocol
from node.decoding import sampler
from node.decoding.distributions import SamplingParams, probabilities, quantized, top_k

WAD = protocol.WAD
SIGNIFICANCE = 1e-3  # a p-value below this fails the test; every run is seeded, so the verdict is fixed


def wad(probs) -> np.ndarray:
    return np.array(protocol.quantize(probs), dtype=np.int64)


# ---------------------------------------------------------------- single position: emitted token ~ p


P_TOY = [0.30, 0.05, 0.25, 0.00, 0.15, 0.25]
Q_TOY = [0.10, 0.30, 0.05, 0.20, 0.30, 0.05]  # sum(min(p, q)) = 0.40: most proposals are rejected


SALT = 0xFEED_5A17  # a drafter salt (the job's, on chain)


def first_token_counts(p, q, samples: int, residual=None) -> np.ndarray:
    """Counts of the first emitted token of a K=1 cycle over `samples` jobs, run through the real sampler.

    residual: a replacement for protocol.residual_sample (the tamper that shows the test has power);
    the product itself has no such switch.
    """
    p_wad, q_wad = wad(p), wad(q)
    p_rows, q_rows = np.stack([p_wad, p_wad]), q_wad[None, :]
    counts = np.zeros(len(p), dtype=np.int64)
    patch = mock.patch.object(protocol, "residual_sample", residual) if residual else contextlib.nullcontext()
    with patch:
        for job_id in range(samples):
            x = protocol.invcdf(q_wad, protocol.draft_uniform(job_id, 0, 0))
            reveal = keccak(job_id.to_bytes(32, "big"))  # stands in for the verifier's hash-chain reveal
            decision = sampler.decide(job_id, 0, reveal, [x], [int(q_wad[x])], p_rows, q_rows, salt=job_id)
            counts[x if decision.accepted else decision.out_token] += 1
    return counts


def chi_square_pvalue(counts, probs) -> float:
    probs = np.asarray(probs)
    support = probs > 0
    assert counts[~support].sum() == 0, "a token with no target mass was emitted"
    return chisquare(counts[support], probs[support] * counts.sum()).pvalue


@pytest.mark.statistical
def test_single_position_emitted_token_is_distributed_as_p():
    counts = first_token_counts(P_TOY, Q_TOY, samples=20_000)
    assert chi_square_pvalue(counts, P_TOY) > SIGNIFICANCE


@pytest.mark.statistical
def test_single_position_test_rejects_a_sampler_whose_residual_is_p():
    def residual_is_p(p_wad, q_wad, u):
        return protocol.invcdf(p_wad, u)

    counts = first_token_counts(P_TOY, Q_TOY, samples=20_000, residual=residual_is_p)
    assert chi_square_pvalue(counts, P_TOY) < SIGNIFICANCE


# ---------------------------------------------------------------- the sampler's verdicts


def random_rows(rng, rows, vocab):
    return np.stack([wad(rng.dirichlet(np.full(vocab, 0.3))) for _ in range(rows)])


def test_decide_applies_the_on_chain_rule_and_samples_from_the_right_row():
    rng = np.random.default_rng(0)
    k, vocab = 4, 12
    for job_id in range(200):
        q_rows, p_rows = random_rows(rng, k, vocab), random_rows(rng, k + 1, vocab)
        tokens = [protocol.invcdf(q_rows[i], protocol.draft_uniform(job_id, 3, i)) for i in range(k)]
        q = [int(q_rows[i, t]) for i, t in enumerate(tokens)]
        reveal = keccak(b"r" + job_id.to_bytes(8, "big"))
        before = (p_rows.copy(), q_rows.copy())
        d = sampler.decide(job_id, 3, reveal, tokens, q, p_rows, q_rows, salt=SALT)
        assert np.array_equal(before[0], p_rows) and np.array_equal(before[1], q_rows)  # pure: inputs untouched
        root = protocol.draft_root(job_id, 3, tokens, q)
        assert d.root == root
        assert d.p == tuple(int(p_rows[i, t]) for i, t in enumerate(tokens))
        assert d.accepted == protocol.count_accepted(reveal, root, q, list(d.p), SALT)
        v = protocol.residual_uniform(reveal, root, SALT)
        if d.accepted < k:
            assert d.out_token == protocol.residual_sample(p_rows[d.accepted], q_rows[d.accepted], v)
            assert d.out_token != tokens[d.accepted]  # a rejected token has no residual mass
        else:
            assert d.out_token == protocol.invcdf(p_rows[k], v)
        assert d == sampler.decide(job_id, 3, reveal, tokens, q, p_rows, q_rows, salt=SALT)  # deterministic


def test_identical_models_accept_everything_and_draw_the_bonus():
    rng = np.random.default_rng(1)
    rows = random_rows(rng, 4, 9)
    tokens = [protocol.invcdf(rows[i], protocol.draft_uniform(7, 0, i)) for i in range(3)]
    d = sampler.decide(
        7, 0, b"\x11" * 32, tokens, [int(rows[i, t]) for i, t in enumerate(tokens)], rows, rows[:3], salt=SALT
    )
    assert d.accepted == 3
    assert d.out_token == protocol.invcdf(rows[3], protocol.residual_uniform(b"\x11" * 32, d.root, SALT))


def test_greedy_one_hot_rows_emit_the_target_argmax():
    one_hot = lambda t: wad(np.eye(5)[t])  # noqa: E731
    p_rows, q_rows = np.stack([one_hot(2), one_hot(4), one_hot(1)]), np.stack([one_hot(2), one_hot(3)])
    d = sampler.decide(1, 0, b"\x22" * 32, [2, 3], [WAD, WAD], p_rows, q_rows, salt=SALT)
    assert (d.accepted, d.out_token, d.p) == (1, 4, (WAD, 0))


def test_decide_checks_row_counts():
    rows = random_rows(np.random.default_rng(2), 3, 4)
    with pytest.raises(ValueError):
        sampler.decide(1, 0, b"\x00" * 32, [0, 1], [1, 1], rows[:2], rows[:2], salt=SALT)


# ---------------------------------------------------------------- the vocabulary cap


OUTSIDE = 10_000  # a proposal id no row covers: the contract takes any uint32 and caps `accepted` before it


def capped_cycle(rng, k: int, vocab: int, cap: int, job_id: int):
    """A cycle of k proposals whose proposal `cap` (if < k) is outside the vocabulary, with p = q before it: every
    proposal before the cap is accepted (p >= q), so the rule stops exactly at the cap and the residual is read there.
    Returns (tokens, q, p_rows, q_rows) with cap+1 p rows (k+1 without a cap) and min(cap+1, k) q rows."""
    q_rows = random_rows(rng, min(cap + 1, k), vocab)
    p_rows = np.vstack([q_rows[:cap], random_rows(rng, 1, vocab)])
    tokens = [protocol.invcdf(q_rows[i], protocol.draft_uniform(job_id, 0, i)) for i in range(cap)]
    q = [int(q_rows[i, t]) for i, t in enumerate(tokens)]
    if cap < k:
        tokens += [OUTSIDE + i for i in range(k - cap)]
        q += [WAD // 3] * (k - cap)  # any q_i > 0 is a valid commitment, even for an id outside the vocabulary
    return tokens, q, p_rows, q_rows


@pytest.mark.parametrize("cap", [0, 2, 4])  # the first proposal outside, one in the middle, none (k = 4)
def test_decide_caps_at_the_first_proposal_outside_the_vocabulary_and_draws_the_residual_there(cap):
    rng, k, vocab = np.random.default_rng(10 + cap), 4, 9
    for job_id in range(40):
        tokens, q, p_rows, q_rows = capped_cycle(rng, k, vocab, cap, job_id)
        reveal = keccak(b"cap" + job_id.to_bytes(8, "big"))
        d = sampler.decide(job_id, 0, reveal, tokens, q, p_rows, q_rows, salt=SALT, vocab_size=vocab)
        root = protocol.draft_root(job_id, 0, tokens, q)
        assert d.root == root
        assert d.p == tuple(int(p_rows[i, t]) for i, t in enumerate(tokens[:cap])) + (0,) * (k - cap)
        assert d.accepted == cap  # p = q before the cap always accepts; p = 0 at it never does
        assert d.accepted == protocol.cap_at_vocab(tokens, protocol.count_accepted(reveal, root, q, d.p, SALT), vocab)
        v = protocol.residual_uniform(reveal, root, SALT)
        if cap < k:
            assert d.out_token == protocol.residual_sample(p_rows[cap], q_rows[cap], v)  # the residual at the cap
        else:
            assert d.out_token == protocol.invcdf(p_rows[k], v)  # no cap: all accepted, the bonus token
        assert 0 <= d.out_token < vocab


def test_a_posted_p_past_the_cap_does_not_move_it():
    """The contract caps `accepted` whatever p says (docs/protocol.md §4, "Token ranges"): a p posted WAD at every
    proposal accepts all of them, but the count still stops before the first proposal outside the vocabulary."""
    rng, k, vocab = np.random.default_rng(20), 4, 9
    tokens, q, p_rows, q_rows = capped_cycle(rng, k, vocab, 2, 3)
    d = sampler.decide(3, 0, b"\x33" * 32, tokens, q, p_rows, q_rows, salt=SALT, vocab_size=vocab, p=[WAD] * k)
    assert (d.p, d.accepted) == ((WAD,) * k, 2)
    assert sampler.accepted_count(b"\x33" * 32, d.root, tokens, q, [WAD] * k, salt=SALT, vocab_size=vocab) == 2
    assert sampler.accepted_count(b"\x33" * 32, d.root, tokens, q, [WAD] * k, salt=SALT, vocab_size=OUTSIDE + 9) == k


def test_a_registered_vocabulary_below_the_rows_width_caps_there():
    rows = random_rows(np.random.default_rng(21), 3, 8)
    tokens = [int(rows[0].argmax()), 6]  # 6 is a row entry, but outside a registered vocabulary of 6
    q = [int(rows[0, tokens[0]]), WAD // 2]
    d = sampler.decide(5, 1, b"\x44" * 32, tokens, q, rows[:2], rows[:2], salt=SALT, vocab_size=6, p=[WAD, WAD])
    assert d.accepted == 1 and d.p == (WAD, WAD)
    assert sampler.decide(5, 1, b"\x44" * 32, tokens, q, rows, rows[:2], salt=SALT, p=[WAD, WAD]).accepted == 2


def test_the_residual_row_may_come_from_a_function_called_once_with_n():
    rng, k, vocab = np.random.default_rng(22), 4, 9
    tokens, q, p_rows, q_rows = capped_cycle(rng, k, vocab, 2, 8)
    asked = []

    def q_row(n):
        asked.append(n)
        return q_rows[n]

    lazy = sampler.decide(8, 0, b"\x55" * 32, tokens, q, p_rows, q_row, salt=SALT, vocab_size=vocab)
    assert asked == [2]
    assert lazy == sampler.decide(8, 0, b"\x55" * 32, tokens, q, p_rows, q_rows, salt=SALT, vocab_size=vocab)


def test_an_empty_residual_at_the_cap_emits_a_sample_of_p():
    """p = q at the rejected position (the same model on both sides): the rejection was the id's, not the
    distributions', so there is no residual mass and the cycle's last token is p's own sample."""
    rng, k, vocab = np.random.default_rng(23), 3, 7
    tokens, q, p_rows, q_rows = capped_cycle(rng, k, vocab, 1, 4)
    p_rows[1] = q_rows[1]
    d = sampler.decide(4, 0, b"\x66" * 32, tokens, q, p_rows, q_rows, salt=SALT, vocab_size=vocab)
    assert d.accepted == 1
    assert d.out_token == protocol.invcdf(p_rows[1], protocol.residual_uniform(b"\x66" * 32, d.root, SALT))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_greedy_and_sampled_rows_follow_the_rule_up_to_the_cap(temperature):
    """Rows of a model's logits as the engine quantizes them: greedy (T = 0, one-hot) emits the target's argmax at
    the first disagreement or at the cap; T = 1 is the rule over the posted p, then the residual there."""
    gen = torch.Generator().manual_seed(24)
    vocab, cap = 50, 3  # γ = 4: the proposal at index 3 is outside the vocabulary
    sampling = SamplingParams(temperature=temperature)
    for job_id in range(30):
        p_rows = quantized(torch.randn(cap + 1, vocab, generator=gen) * 2, sampling)
        q_rows = quantized(torch.randn(cap + 1, vocab, generator=gen) * 2, sampling)
        tokens = [protocol.invcdf(q_rows[i], protocol.draft_uniform(job_id, 2, i)) for i in range(cap)] + [OUTSIDE]
        q = [int(q_rows[i, t]) for i, t in enumerate(tokens[:cap])] + [WAD]
        reveal = keccak(b"t" + job_id.to_bytes(8, "big"))
        d = sampler.decide(job_id, 2, reveal, tokens, q, p_rows, q_rows, salt=SALT, vocab_size=vocab)
        assert d.accepted <= cap
        assert d.accepted == protocol.count_accepted(reveal, d.root, q, list(d.p), SALT)
        if temperature == 0:
            first_miss = next((i for i in range(cap) if tokens[i] != int(p_rows[i].argmax())), cap)
            assert (d.accepted, d.out_token) == (first_miss, int(p_rows[first_miss].argmax()))
        else:
            v = protocol.residual_uniform(reveal, d.root, SALT)
            assert d.out_token == protocol.residual_sample(p_rows[d.accepted], q_rows[d.accepted], v)


def test_decide_refuses_rows_that_do_not_reach_the_cap_and_a_vocabulary_wider_than_the_rows():
    rng, k, vocab = np.random.default_rng(25), 4, 9
    tokens, q, p_rows, q_rows = capped_cycle(rng, k, vocab, 2, 1)
    with pytest.raises(ValueError, match="p rows"):
        sampler.decide(1, 0, b"\x00" * 32, tokens, q, p_rows[:2], q_rows, salt=SALT, vocab_size=vocab)
    with pytest.raises(ValueError, match="q rows"):
        sampler.decide(1, 0, b"\x00" * 32, tokens, q, p_rows, q_rows[:2], salt=SALT, vocab_size=vocab)
    with pytest.raises(ValueError, match="does not fit"):
        sampler.decide(1, 0, b"\x00" * 32, tokens, q, p_rows, q_rows, salt=SALT, vocab_size=vocab + 1)
    with pytest.raises(ValueError, match="3 p values"):
        sampler.decide(1, 0, b"\x00" * 32, tokens, q, p_rows, q_rows, salt=SALT, vocab_size=vocab, p=[1, 1, 1])


# ---------------------------------------------------------------- sampling transform


def hf_warped(logits, temperature, top_k_, top_p):
    scores = TemperatureLogitsWarper(temperature)(None, logits.clone())
    if top_k_:
        scores = TopKLogitsWarper(top_k_)(None, scores)
    if top_p < 1:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return scores.softmax(-1)


@pytest.mark.parametrize(
    "temperature, k, p",
    [(1.0, 0, 1.0), (0.7, 0, 1.0), (1.0, 5, 1.0), (1.3, 0, 0.8), (0.6, 20, 0.9), (1.0, 1, 1.0), (1.0, 0, 0.01)],
)
def test_probabilities_match_transformers_warpers(temperature, k, p):
    logits = torch.randn(6, 100, generator=torch.Generator().manual_seed(3)) * 3
    ours = probabilities(logits, SamplingParams(temperature, k, p))
    assert torch.allclose(ours, hf_warped(logits, temperature, k, p), atol=1e-6)


def test_temperature_zero_is_one_hot_on_the_first_maximum():
    logits = torch.tensor([[0.0, 2.0, 2.0, 1.0], [5.0, -1.0, 0.0, 5.0]])
    rows = quantized(logits, SamplingParams(temperature=0))
    assert rows.tolist() == [[0, WAD, 0, 0], [WAD, 0, 0, 0]]


def test_quantized_rows_are_exact_wad_vectors():
    logits = torch.randn(5, 300, generator=torch.Generator().manual_seed(4)) * 4
    rows = quantized(logits, SamplingParams(0.9, 50, 0.95))
    assert rows.dtype == np.int64 and (rows >= 0).all() and (rows.sum(axis=1) == WAD).all()
    assert ((rows > 0).sum(axis=1) <= 50).all()


@pytest.mark.parametrize("bad", [dict(temperature=-1), dict(top_k=-1), dict(top_p=0), dict(top_p=1.5)])
def test_sampling_params_are_validated(bad):
    with pytest.raises(ValueError):
        SamplingParams(**bad)


def test_top_k_lists_most_likely_first():
    rows = np.array([[1, 5, 5, 0], [0, 0, 0, 10]], dtype=np.int64)
    assert top_k(rows, 2) == [[(1, 5), (2, 5)], [(3, 10), (0, 0)]]


# ---------------------------------------------------------------- protocol helpers the engine added


def test_quantize_rows_equals_quantize_row_by_row():
    rng = random.Random(5)
    for _ in range(30):
        vocab = rng.randint(1, 400)
        rows = np.array([[rng.random() ** 6 for _ in range(vocab)] for _ in range(rng.randint(1, 4))])
        rows /= rows.sum(axis=1, keepdims=True)
        fast = protocol.quantize_rows(rows)
        assert fast.tolist() == [protocol.quantize(list(r)) for r in rows]
    with pytest.raises(ValueError):
        protocol.quantize_rows(np.array([[0.5, 0.2]]))
    with pytest.raises(ValueError):
        protocol.quantize_rows(np.array([0.5, 0.5]))


def test_chain_reveals_match_chain_reveal_and_hash_back_to_the_head():
    seed = keccak(b"verifier seed")
    n = protocol.hash_chain_length(9)
    reveals = protocol.chain_reveals(seed, n)
    assert reveals == [protocol.chain_reveal(seed, n, c) for c in range(n)]
    assert keccak(reveals[0]) == protocol.hash_chain(seed, n)  # the committed head
    assert all(keccak(reveals[c]) == reveals[c - 1] for c in range(1, n))


def test_truncate_emitted_cuts_after_eos_and_at_the_budget():
    assert protocol.truncate_emitted([4, 5, 6], eos_token=None, remaining=10) == [4, 5, 6]
    assert protocol.truncate_emitted([4, 0, 6], eos_token=0, remaining=10) == [4, 0]
    assert protocol.truncate_emitted([4, 5, 6], eos_token=0, remaining=2) == [4, 5]
    assert protocol.truncate_emitted([0, 5, 0], eos_token=0, remaining=1) == [0]
    with pytest.raises(ValueError):
        protocol.hash_chain_length(0)
