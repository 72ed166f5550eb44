"""Which positions a watchdog audits (docs/watchdog.md): pure Python, no web3, no torch.

A watchdog that replays only a fraction `rate` of a job's binding target positions must draw them so that no
audited party can predict which ones, and should spend its target forwards where a cheat is most likely to sit.

* **Unpredictable.** Each position's draw is a keyed hash of the watchdog's private seed (`new_seed`, kept in its
  own store, never posted) with (job, cycle, index). A drafter or verifier sees the job's data but not the seed,
  so every position is audited with its inclusion probability whatever it does; the seed's holder cannot steer
  which positions it audits after seeing them either, because the draw is fixed by the hash.
* **Weighted.** `inclusion_probabilities` turns weights w_i ≥ 0 into probabilities π_i = min(1, c·w_i) whose sum
  is rate·N (the expected audit count of a uniform draw at the same rate), so weighting moves audits around
  without changing what they cost on average. `WEIGHTINGS` names the weights the benchmark compares:
  - `uniform`: w = 1.
  - `entropy`: the entropy of the draft distribution q at the position (the watchdog's cheap draft replay gives
    it): a biased drafter can only gain where q is spread, and a shaded p matters most where the draft is unsure.
  - `threshold`: closeness of the accept test u < p/q to its threshold, from the posted values alone,
    w = 1 − |min(1, p/q) − u| for proposals, 1 for the outToken: a verifier that shades p to reject changes
    outcomes only where the posted ratio lands just below u.
* Poisson sampling: positions are drawn independently, so each π_i is exact (the benchmark's detection rates are
  then products over positions, checkable against the measured ones).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import NamedTuple

from eth_utils import keccak

WAD = 10**18
WEIGHTINGS = ("uniform", "entropy", "threshold")
_FLOOR = 1e-6  # every position keeps a chance: a weight of 0 would tell a cheater where never to be checked


class Position(NamedTuple):
    """One binding target position of a verified cycle, with what the weights look at."""

    cycle: int
    index: int  # i < γ: p_i of proposal i; γ: the outToken
    q_entropy: float  # nats, of the replayed draft distribution at this position (0 where there is none)
    ratio: float  # min(1, p_i / q_i) as posted (1 for the outToken)
    uniform: float  # the accept uniform u_i in [0, 1) (0 for the outToken)
    out_token: bool = False  # the cycle's outToken (index γ), which has no accept test


def new_seed() -> bytes:
    """A fresh private audit seed (32 bytes from the OS)."""
    return os.urandom(32)


def weight(position: Position, weighting: str) -> float:
    """The ambiguity weight of `position` under `weighting` (one of WEIGHTINGS)."""
    if weighting == "uniform":
        return 1.0
    if weighting == "entropy":
        return max(position.q_entropy, _FLOOR)
    if weighting == "threshold":
        return 1.0 if position.out_token else max(1.0 - abs(position.ratio - position.uniform), _FLOOR)
    raise ValueError(f"unknown audit weighting {weighting!r}; choose one of {', '.join(WEIGHTINGS)}")


def inclusion_probabilities(weights: Sequence[float], rate: float) -> list[float]:
    """π_i = min(1, c·w_i) with Σπ_i = rate·N (water-filling: positions that would exceed 1 are capped at 1 and the
    rest share what is left). rate ∈ [0, 1]; rate 1 audits everything."""
    if not 0 <= rate <= 1 or math.isnan(rate):
        raise ValueError(f"an audit rate is in [0, 1], got {rate}")
    if any(not w >= 0 or math.isinf(w) for w in weights):
        raise ValueError("audit weights must be finite and >= 0")
    n = len(weights)
    budget = rate * n
    if n == 0 or budget == 0:
        return [0.0] * n
    probabilities = [0.0] * n
    open_ = [i for i in range(n) if weights[i] > 0]
    while open_:
        total = sum(weights[i] for i in open_)
        scale = budget / total
        capped = [i for i in open_ if weights[i] * scale >= 1]
        if not capped:
            for i in open_:
                probabilities[i] = weights[i] * scale
            break
        for i in capped:
            probabilities[i] = 1.0
        budget -= len(capped)
        open_ = [i for i in open_ if i not in set(capped)]
        if budget <= 0:
            break
    return probabilities


def draw_uniform(seed: bytes, job_id: int, cycle: int, index: int) -> float:
    """The watchdog's private uniform in [0, 1) for one position: keccak(seed ‖ job ‖ cycle ‖ index)."""
    if len(seed) != 32:
        raise ValueError("an audit seed is 32 bytes")
    message = seed + job_id.to_bytes(32, "big") + cycle.to_bytes(32, "big") + index.to_bytes(32, "big")
    return int.from_bytes(keccak(message), "big") / 2**256


def select(positions: Sequence[Position], rate: float, weighting: str, seed: bytes, job_id: int) -> list[Position]:
    """The positions to audit: each independently with its inclusion probability under `weighting`."""
    weights = [weight(p, weighting) for p in positions]
    probabilities = inclusion_probabilities(weights, rate)
    return [
        p for p, pi in zip(positions, probabilities) if pi >= 1 or draw_uniform(seed, job_id, p.cycle, p.index) < pi
    ]


def entropy(probabilities: Sequence[float]) -> float:
    """Shannon entropy in nats of a distribution (zeros ignored)."""
    return -sum(x * math.log(x) for x in probabilities if x > 0)


def detection_probability(cheat_probabilities: Sequence[float]) -> float:
    """P(at least one cheating position is audited) when the cheating positions have these inclusion
    probabilities (independent draws)."""
    miss = 1.0
    for pi in cheat_probabilities:
        miss *= 1.0 - pi
    return 1.0 - miss


def break_even_rate(gain_wei: float, loss_wei: float, positions_cheated: int) -> float:
    """The uniform audit rate f at which cheating does not pay in expectation: a cheat on k positions gains
    `gain_wei` when missed and loses `loss_wei` (slash and forfeits) when caught, caught with 1 − (1 − f)^k;
    cheating is unprofitable once (1 − f)^k·gain ≤ (1 − (1 − f)^k)·loss, i.e. f ≥ 1 − (loss/(gain+loss))^(1/k)."""
    if positions_cheated < 1:
        raise ValueError("a cheat touches at least one position")
    if gain_wei < 0 or loss_wei <= 0:
        raise ValueError("gain must be >= 0 and loss > 0")
    if gain_wei == 0:
        return 0.0
    return 1.0 - (loss_wei / (gain_wei + loss_wei)) ** (1.0 / positions_cheated)
