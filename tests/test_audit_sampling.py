"""node/audit_sampling.py: the watchdog's weighted, unpredictable position draw (pure, no chain)."""

from __future__ import annotations

import math

import pytest

from node import audit_sampling as A


def _positions(n):
    return [A.Position(c // 4, c % 4, q_entropy=0.1 * (c % 5), ratio=0.5, uniform=(c % 7) / 7) for c in range(n)]


def test_inclusion_probabilities_keep_the_budget_and_cap_at_one():
    weights = [100.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    pi = A.inclusion_probabilities(weights, 0.5)
    assert math.isclose(sum(pi), 3.0) and pi[0] == 1.0 and pi[5] == 0.0
    assert all(math.isclose(p, 0.5) for p in pi[1:5])
    assert A.inclusion_probabilities([1.0] * 10, 1.0) == [1.0] * 10
    assert A.inclusion_probabilities([1.0] * 4, 0.0) == [0.0] * 4
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="audit rate"):
            A.inclusion_probabilities([1.0], bad)
    with pytest.raises(ValueError, match="weights"):
        A.inclusion_probabilities([1.0, float("inf")], 0.5)


def test_every_weighting_gives_every_position_a_chance():
    positions = [A.Position(0, 0, q_entropy=0.0, ratio=1.0, uniform=0.0), *_positions(20)]
    for weighting in A.WEIGHTINGS:
        pi = A.inclusion_probabilities([A.weight(p, weighting) for p in positions], 0.2)
        assert math.isclose(sum(pi), 0.2 * len(positions)) and min(pi) > 0
    with pytest.raises(ValueError, match="unknown audit weighting"):
        A.weight(positions[0], "loudest")


def test_the_draw_is_fixed_by_the_seed_and_unpredictable_without_it():
    positions = _positions(400)
    seed = b"\x01" * 32
    chosen = A.select(positions, 0.1, "uniform", seed, job_id=7)
    assert chosen == A.select(positions, 0.1, "uniform", seed, job_id=7)  # deterministic for its holder
    assert 15 <= len(chosen) <= 65  # Binomial(400, 0.1): mean 40
    other = A.select(positions, 0.1, "uniform", b"\x02" * 32, job_id=7)
    assert set(chosen) != set(other)  # another seed, another draw
    assert set(A.select(positions, 0.1, "uniform", seed, job_id=8)) != set(chosen)
    assert A.select(positions, 1.0, "entropy", seed, 7) == positions
    with pytest.raises(ValueError, match="32 bytes"):
        A.draw_uniform(b"short", 1, 0, 0)
    assert len(A.new_seed()) == 32 and A.new_seed() != A.new_seed()


def test_detection_and_break_even():
    assert A.detection_probability([]) == 0.0
    assert math.isclose(A.detection_probability([0.5, 0.5]), 0.75)
    f = A.break_even_rate(gain_wei=1.0, loss_wei=9.0, positions_cheated=4)
    caught = A.detection_probability([f] * 4)
    assert math.isclose((1 - caught) * 1.0, caught * 9.0)  # the expected payoff of the cheat is exactly 0 there
    assert A.break_even_rate(0, 1, 1) == 0.0
    with pytest.raises(ValueError):
        A.break_even_rate(1, 0, 1)
    assert math.isclose(A.entropy([0.5, 0.5, 0.0]), math.log(2))


def test_the_threshold_weighting_gives_the_out_token_full_weight():
    # an outToken has no accept test (ratio 1, u 0 by convention): weighting it by |ratio − u| gave it the floor, so a
    # verifier that cheated only on outTokens was never audited under `threshold`
    out = A.Position(0, 4, q_entropy=1.0, ratio=1.0, uniform=0.0, out_token=True)
    assert A.weight(out, "threshold") == 1.0
    proposal = A.Position(0, 0, q_entropy=1.0, ratio=0.5, uniform=0.5)
    assert A.weight(proposal, "threshold") == 1.0 and A.weight(proposal._replace(uniform=0.9), "threshold") < 1
    assert not proposal.out_token  # the default: a proposal
