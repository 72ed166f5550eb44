"""Exact referee-capture probabilities (docs/disputes.md, "Capture"): pure Python, no web3, no torch.

The question: a coalition holds a share `s` of the active referee stake for a model and wants a dispute decided
against the truth (a lie to stand, or an honest party convicted). What is the probability that it succeeds?

Model (the coalition's best case under contracts/DisputeManager.sol's stake-weighted draw):

* Every seat is drawn with probability ∝ stake among distinct accounts. The coalition splits its stake into many
  small accounts, so that drawing one of them does not lower its share of what is left, and the honest stake is
  spread as finely (drawing an honest account does not raise the coalition's share either): each seat is then
  the coalition's with probability exactly `s`, independently, and a panel of n seats holds Binomial(n, s)
  coalition seats. (Concentrated honest stake only lowers the coalition's odds within a round; splitting the
  coalition's own stake is its best response, and buys it nothing beyond `s` per seat.)
* Honest referees vote the truth and reveal. Coalition referees vote the lie, or stay silent, whichever helps:
  a round goes the truth's way only with a strict majority of the drawn panel, so the truth fails a round of n
  (odd) seats exactly when the coalition holds at least (n + 1)/2 of them.
* Appeals: rounds have n_0 = R, n_k = 2 n_{k-1} + 1 seats, fresh panels (earlier panels excluded; under the
  fine-grained model this leaves the share at `s`), at most `appeals` of them. The side that lost a round
  appeals while it can (the honest side always does; the coalition does whenever that gives it another chance),
  so every dispute that is contested goes through the last round, whose result is final:
  P(truth fails) = P(Binomial(n_A, s) ≥ (n_A + 1)/2) with A = the number of appeal rounds used.
  Without appeal (A = 0) that is the first panel's tail.
* Not modelled: escalation (too few eligible referees) ends a dispute Void, which nobody wins; a dispute the
  accused does not answer; bribery of honest referees.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

PANELS = (3, 5, 7)
SHARES = (0.1, 0.2, 0.3, 0.4, 0.5)


def panel_sizes(first_panel: int, appeals: int) -> list[int]:
    """Seats of rounds 0..appeals: R, 2R + 1, 4R + 3, ... (RefereeDraw.panelSize)."""
    if first_panel < 1 or first_panel % 2 == 0:
        raise ValueError(f"a panel needs an odd number of seats, got {first_panel}")
    if appeals < 0:
        raise ValueError(f"appeals must be >= 0, got {appeals}")
    return [((first_panel + 1) << k) - 1 for k in range(appeals + 1)]


def round_capture(share: float | Fraction, seats: int) -> float | Fraction:
    """P(the coalition holds a majority of a panel of `seats` (odd) seats) = P(Binomial(seats, share) > seats/2).
    Exact for a Fraction share (rational arithmetic); a float share gives the same sum in floating point."""
    if seats < 1 or seats % 2 == 0:
        raise ValueError(f"a panel needs an odd number of seats, got {seats}")
    if not 0 <= share <= 1:
        raise ValueError(f"a stake share is in [0, 1], got {share}")
    need = seats // 2 + 1
    return sum(comb(seats, k) * share**k * (1 - share) ** (seats - k) for k in range(need, seats + 1))


def capture_probability(share: float | Fraction, first_panel: int, appeals: int = 0) -> float | Fraction:
    """P(a coalition holding stake share `share` wins a dispute against the truth) with a first panel of
    `first_panel` seats and `appeals` appeal rounds (0: no appeal). See the module docstring for the model."""
    if appeals < 0:
        raise ValueError("appeals must be >= 0")
    return round_capture(share, panel_sizes(first_panel, appeals)[-1])


def seat_share_standard_error(share: float, seats: int) -> float:
    """Standard error of the observed coalition seat fraction over `seats` independent seats (Binomial)."""
    return (share * (1 - share) / seats) ** 0.5


def capture_table(panels=PANELS, shares=SHARES, appeals=(0, 1)) -> list[dict]:
    """Rows {share, panel, appeals, seats, probability} for bench_security's table (docs/benchmarks.md)."""
    rows = []
    for panel in panels:
        for a in appeals:
            seats = panel_sizes(panel, a)[-1]
            for s in shares:
                rows.append(
                    {
                        "share": s,
                        "panel": panel,
                        "appeals": a,
                        "seats": seats,
                        "probability": float(capture_probability(Fraction(str(s)), panel, a)),
                    }
                )
    return rows


def format_table(rows: list[dict] | None = None) -> str:
    """A markdown table: one line per (panel, appeals), one column per share."""
    rows = rows if rows is not None else capture_table()
    shares = sorted({r["share"] for r in rows})
    keys = sorted({(r["panel"], r["appeals"], r["seats"]) for r in rows})
    head = "| panel | appeals | final seats | " + " | ".join(f"s = {s:.0%}" for s in shares) + " |"
    lines = [head, "|" + "---|" * (3 + len(shares))]
    for panel, a, seats in keys:
        cells = [next(r for r in rows if (r["panel"], r["appeals"]) == (panel, a) and r["share"] == s) for s in shares]
        lines.append(f"| {panel} | {a} | {seats} | " + " | ".join(f"{c['probability']:.2e}" for c in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table())
