"""Pure security arithmetic for scripts/bench_security.py (no web3, no torch): referee capture, the geometric
model of a full α window, and binomial bounds.

Referee capture (docs/protocol.md §10, stake-weighted panels; the math is node/capture.py's). Each seat of a
panel is drawn with probability proportional to stake. A coalition holding stake share s does best by splitting
its stake over many small accounts: every seat is then the coalition's with probability s, independently (a
single large account could hold at most one seat of a panel of distinct accounts), so the number of coalition
seats is Binomial(m, s) and that is an upper bound on what any real split achieves. A strict majority decides,
so a panel of m = 2R + 1 seats is captured with probability P(Binomial(m, s) ≥ R + 1).

Appeals. A decided round can be appealed to a fresh panel of 2m + 1 seats (m the previous panel), up to
`appeals` times, and the last round decides. Every round has a losing side; the honest side always appeals a
wrong verdict and the coalition appeals a right one, so with `appeals` appeals available every round is held
and the coalition wins exactly when it captures the final panel: `capture_probability(s, panel, appeals)`.
`capture_probability_unanswered` is the other extreme, nobody honest ever appeals (the coalition wins as soon as
it wins one round), shown to say what appeals are worth only when someone uses them.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from node.capture import capture_probability, panel_sizes, round_capture

__all__ = ["capture_probability", "capture_probability_unanswered", "majority_probability", "panel_sizes"]

majority_probability = round_capture  # P(Binomial(seats, s) > seats / 2); one implementation, in node/capture.py

Number = float | Fraction


def capture_probability_unanswered(s: Number, panel: int, appeals: int = 0) -> Number:
    """The coalition wins if it captures any round (nobody honest appeals; the coalition appeals each loss)."""
    lose_all = 1
    for seats in panel_sizes(panel, appeals):
        lose_all *= 1 - majority_probability(s, seats)
    return 1 - lose_all


# ------------------------------------------------------------------ geometric model of a window


def geometric_cycle(alpha: float, gamma: int) -> np.ndarray:
    """P(n accepted of γ) for n = 0..γ: each proposal accepted with probability α until the first rejection."""
    return np.array([alpha**n * (1 - alpha) for n in range(gamma)] + [alpha**gamma])


def window_alpha_distribution(alpha: float, gamma: int, cycles: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact distribution of a window's α̂ = A / (A + R) over `cycles` i.i.d. geometric cycles.

    A cycle contributes (n, 1) for n < γ and (γ, 0) for n = γ. R ~ Binomial(cycles, 1 − α^γ); given R, A is γ·(cycles
    − R) plus the sum of R draws of n | n < γ. Returns (sorted α̂ values, their probabilities).
    """
    pn = geometric_cycle(alpha, gamma)
    full = pn[gamma]
    short = pn[:gamma] / (1 - full) if full < 1 else np.zeros(gamma)
    values, probs = [], []
    conv = np.array([1.0])  # distribution of the sum of r short cycles' n
    for r in range(cycles + 1):
        p_r = math.comb(cycles, r) * full ** (cycles - r) * (1 - full) ** r
        base = gamma * (cycles - r)
        if p_r > 0:
            a = base + np.arange(len(conv))
            total = a + r
            with np.errstate(invalid="ignore", divide="ignore"):
                values.append(np.where(total > 0, a / np.maximum(total, 1), 1.0))
            probs.append(p_r * conv)
        conv = np.convolve(conv, short)
    v, p = np.concatenate(values), np.concatenate(probs)
    order = np.argsort(v, kind="stable")
    return v[order], p[order]


def distribution_quantile(values: np.ndarray, probs: np.ndarray, q: float) -> float:
    """The q-quantile (smallest v with P(α̂ ≤ v) ≥ q) of a discrete distribution sorted by value."""
    cdf = np.cumsum(probs)
    return float(values[min(int(np.searchsorted(cdf, q * cdf[-1])), len(values) - 1)])


def probability_below(values: np.ndarray, probs: np.ndarray, threshold: float) -> float:
    """P(α̂ < threshold)."""
    return float(probs[values < threshold].sum())


def binomial_upper_bound(successes: int, trials: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on a rate; for 0 successes it is 1 − (1 − c)^(1/n) (≈ 3/n at 95 %)."""
    if trials <= 0:
        return 1.0
    if successes == 0:
        return 1 - (1 - confidence) ** (1 / trials)
    if successes >= trials:
        return 1.0
    lo, hi = successes / trials, 1.0
    for _ in range(100):  # bisection on P(Binomial(trials, p) ≤ successes) = 1 − confidence
        mid = (lo + hi) / 2
        if _binomial_cdf(successes, trials, mid) > 1 - confidence:
            lo = mid
        else:
            hi = mid
    return hi


def _binomial_cdf(k: int, n: int, p: float) -> float:
    logs = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p)
        for i in range(k + 1)
    ]
    top = max(logs)
    return math.exp(top) * sum(math.exp(x - top) for x in logs)
