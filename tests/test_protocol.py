"""Unit tests of node/protocol.py's pure math (the chain replay is in test_specmath_vectors.py)."""

from __future__ import annotations

import random

import pytest
from eth_hash.auto import keccak

from node import protocol as P


def test_quantize_sums_to_wad_and_gives_remainder_to_lowest_largest():
    w = P.quantize([1 / 3, 1 / 3, 1 / 3])
    assert sum(w) == P.WAD
    assert w[0] > w[1] == w[2]  # the rounding remainder lands on the lowest id among equals
    assert P.quantize([0.0, 1.0, 0.0]) == [0, P.WAD, 0]
    rng = random.Random(1)
    for _ in range(50):
        raw = [rng.random() ** 4 for _ in range(rng.randint(1, 300))]
        w = P.quantize([x / sum(raw) for x in raw])
        assert sum(w) == P.WAD and min(w) >= 0


@pytest.mark.parametrize("bad", [[], [0.5, float("nan")], [1.5, -0.5], [0.2, 0.2]])
def test_quantize_rejects_non_distributions(bad):
    with pytest.raises(ValueError):
        P.quantize(bad)


def test_invcdf_boundaries():
    w = [P.WAD // 4, 0, P.WAD // 4, P.WAD // 2]
    assert P.invcdf(w, 0) == 0
    assert P.invcdf(w, P.WAD // 4 - 1) == 0
    assert P.invcdf(w, P.WAD // 4) == 2  # token 1 has no mass and is never drawn
    assert P.invcdf(w, P.WAD - 1) == 3
    with pytest.raises(ValueError):
        P.invcdf(w, P.WAD)
    with pytest.raises(ValueError):
        P.invcdf([1, 2], 0)


def test_sample_window_is_what_a_uniform_within_the_tolerance_draws():
    w = [P.WAD // 4, 0, P.WAD // 4, P.WAD // 2]
    draw = lambda u: P.invcdf(w, u)  # noqa: E731
    boundary = P.WAD // 4  # tokens 0 | 2 meet here (token 1 has no mass)
    assert P.sample_window(draw, boundary - 10, 0) == (0, 0)  # no tolerance: exactly the sample
    assert P.sample_window(draw, boundary - 10, 9) == (0, 0)
    assert P.sample_window(draw, boundary - 10, 10) == (0, 2)  # reaches across: 0..2, so 1 lies inside too
    assert P.sample_window(draw, 5, 100) == (0, 0)  # clamped at 0
    assert P.sample_window(draw, P.WAD - 5, 100) == (3, 3)  # clamped at WAD - 1
    with pytest.raises(ValueError):
        P.sample_window(draw, 5, -1)


def test_check_proposal_is_the_draft_replay_rule():
    row = [P.WAD // 4, 0, P.WAD // 4, P.WAD // 2]
    u = P.WAD // 4 - 10  # draws token 0; within 10 of the boundary to token 2
    assert P.check_proposal(row, 0, P.WAD // 4, u, 0) == (P.WAD // 4, True, True)
    assert P.check_proposal(row, 0, P.WAD // 4 + 5, u, 4).q_faithful is False  # q off by more than the tolerance
    assert P.check_proposal(row, 0, P.WAD // 4 + 5, u, 5).faithful
    assert P.check_proposal(row, 2, P.WAD // 4, u, 9) == (P.WAD // 4, True, False)  # not the sample
    assert P.check_proposal(row, 2, P.WAD // 4, u, 10).faithful  # a uniform within the tolerance draws it
    assert P.check_proposal(row, 100_000, 1, u, 10) == (0, True, False)  # outside the vocabulary: probability 0
    # binding: proposals up to the first rejection, and the outToken
    assert [i for i in range(5) if P.binds(i, 1, 4)] == [0, 1, 4]
    assert [i for i in range(5) if P.binds(i, 4, 4)] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "bad",
    [
        [P.WAD // 2, -1, P.WAD // 2 + 1],  # a negative entry, total still WAD
        [2**63 - 1, 2**63 - 1, P.WAD + 2],  # every entry >= 0 and the int64 total wraps around to exactly WAD
    ],
)
def test_wad_vectors_that_only_look_like_distributions_are_refused(bad):
    with pytest.raises(ValueError):
        P.invcdf(bad, 0)
    with pytest.raises(ValueError):
        P.residual_sample(bad, bad, 0)


def test_residual_sample_draws_only_where_p_exceeds_q():
    p = [P.WAD // 2, P.WAD // 2, 0]
    q = [P.WAD // 2, 0, P.WAD // 2]
    for u in (0, P.WAD // 2, P.WAD - 1):
        assert P.residual_sample(p, q, u) == 1
    with pytest.raises(ValueError, match="residual is empty"):
        P.residual_sample(p, p, 0)


def test_accept_rule_matches_min_one_p_over_q():
    """Over many reveals, the accept frequency of one proposal is min(1, p/q)."""
    q, p = [P.WAD // 2], [P.WAD // 5]
    root = keccak(b"root")
    trials = 4000
    accepted = sum(P.count_accepted(keccak(i.to_bytes(8, "big")), root, q, p, 7) for i in range(trials))
    assert abs(accepted / trials - 0.4) < 0.03
    # one reveal, many drafter salts: the same frequency (the salt is as good a source of randomness)
    accepted = sum(P.count_accepted(root, root, q, p, salt) for salt in range(trials))
    assert abs(accepted / trials - 0.4) < 0.03
    assert P.count_accepted(root, root, [P.WAD // 2], [P.WAD // 2], 0) == 1  # p >= q always accepts
    assert P.count_accepted(root, root, [1], [0], 0) == 0  # p = 0 never accepts
    with pytest.raises(ValueError):
        P.count_accepted(root, root, [1], [0], 2**64)  # a salt is a uint64


def test_count_accepted_stops_at_first_rejection():
    root = keccak(b"r")
    # position 1 can never be accepted; position 2 always could, but binds nothing after the rejection
    assert P.count_accepted(root, root, [P.WAD, P.WAD, P.WAD], [P.WAD, 0, P.WAD], 0) == 1


def test_cap_at_vocab():
    """docs/protocol.md §4: the accept count stops before the first proposal outside the vocabulary."""
    assert P.cap_at_vocab([1, 2, 3], 3, 4) == 3
    assert P.cap_at_vocab([1, 4, 3], 3, 4) == 1
    assert P.cap_at_vocab([9, 2, 3], 2, 4) == 0
    assert P.cap_at_vocab([1, 2, 9], 2, 4) == 2  # past the accepted prefix it binds nothing


def test_merkle_proofs_round_trip_for_every_width():
    for width in range(1, 18):
        leaves = [P.leaf(7, 3, i, i * 11, P.WAD // (i + 2)) for i in range(width)]
        tree_root = P.root(leaves)
        for i, leaf_hash in enumerate(leaves):
            assert P.verify_proof(P.proof(leaves, i), tree_root, leaf_hash)
        if width > 1:
            assert not P.verify_proof(P.proof(leaves, 0), tree_root, leaves[-1])
    with pytest.raises(ValueError):
        P.root([])


def test_hash_chain_reveals_link_back_to_the_head():
    seed = keccak(b"seed")
    length = 6
    head = P.hash_chain(seed, length)
    previous = head
    for cycle in range(length):
        reveal = P.chain_reveal(seed, length, cycle)
        assert keccak(reveal) == previous
        previous = reveal
    with pytest.raises(ValueError):
        P.chain_reveal(seed, length, length)


def test_speedup_model():
    assert P.expected_tokens_per_pass(0.0, 4) == 1.0
    assert P.expected_tokens_per_pass(1.0, 4) == 5.0
    assert P.expected_tokens_per_pass(0.5, 1) == pytest.approx(1.5)
    assert P.predicted_speedup(0.8, 4, 0.1) == pytest.approx((1 - 0.8**5) / 0.2 / 1.4)
