"""The dispute manager's pure libraries, called on chain through their harnesses.

* RefereeDraw (contracts/lib/RefereeDraw.sol) against the rules of docs/disputes.md, "Referee draw" (the stake
  tree it draws from: tests/test_stake_tree.py).
* DisputePayout (contracts/lib/DisputePayout.sol) against the table of docs/disputes.md, "Outcomes and money":
  each row of the table is a test case, computed here from the row's own words; the test also checks that the
  table still reads as encoded, so that a change to it has to come with a change here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_abi import encode
from eth_hash.auto import keccak

from node.chain.contracts import deploy_contract

DOC = Path(__file__).resolve().parents[1] / "docs" / "disputes.md"
ETHER = 10**18
TRIES_EXTRA = 8
O_NONE, O_ACCUSED_LOST, O_CHALLENGER_LOST, O_VOID, O_SILENT = range(5)
V_NONE, V_FAITHFUL, V_CHEATED = range(3)


@pytest.fixture(scope="module")
def draw(w3, artifacts):
    return deploy_contract(w3, "RefereeDrawHarness", artifacts=artifacts).functions


@pytest.fixture(scope="module")
def payout(w3, artifacts):
    return deploy_contract(w3, "DisputePayoutHarness", artifacts=artifacts).functions


# ------------------------------------------------------------------ referee draw


def _seed(block_hash: bytes, dispute_id: int, round_: int = 0) -> int:
    return int.from_bytes(keccak(encode(["bytes32", "uint256", "uint256"], [block_hash, dispute_id, round_])), "big")


def test_seed_is_the_seed_block_hash_with_the_dispute_id_and_round(draw):
    block_hash = keccak(b"verispec.test.seed-block")
    for dispute_id in (1, 2, 77):
        for round_ in (0, 1, 2):
            assert draw.seed(block_hash, dispute_id, round_).call() == _seed(block_hash, dispute_id, round_)
    assert draw.seed(block_hash, 1, 0).call() != draw.seed(block_hash, 2, 0).call()
    assert draw.seed(block_hash, 1, 0).call() != draw.seed(block_hash, 1, 1).call()


@pytest.mark.parametrize("panel", [1, 3, 5, 7, 15, 31])
def test_a_draw_makes_at_most_4n_plus_8_tries(draw, panel):
    assert draw.tries(panel).call() == 4 * panel + TRIES_EXTRA


@pytest.mark.parametrize("total", [1, 2, 7, 10**18 + 3, 2**200 + 1])
def test_each_try_looks_up_a_hashed_point_of_the_stake(draw, total):
    seed = _seed(keccak(b"points"), total)
    for j in range(5):
        expected = int.from_bytes(keccak(encode(["uint256", "uint256"], [seed, j])), "big") % total
        assert draw.point(seed, j, total).call() == expected < total


def test_appeal_panels_grow_to_2n_plus_1(draw):
    for first in (1, 3, 5):
        sizes = [draw.panelSize(first, k).call() for k in range(4)]
        expected = [first]
        for _ in range(3):
            expected.append(2 * expected[-1] + 1)
        assert sizes == expected


# ------------------------------------------------------------------ payouts: the table of docs/disputes.md

TABLE_ROWS = [
    "| AccusedLost (cheated > n/2) | slashed S (taken T ≤ S) | B + 50% of (T − min(T, W)) | the other 50% "
    "| min(T, W) |",
    "| ChallengerLost (faithful > n/2) | B − W | – | – | W |",
    "| Void | untouched | B back | – | – |",
    "| AccusedSilent (no answer) | slashed S | B + 50% of T | the other 50% | – (referees released, not punished) |",
]


def _row(outcome: int, B: int, W: int, T: int) -> tuple[int, int, int, int]:
    """(challenger, requester, accused, referees' reward pool before penalties), read off the table. "50% of x"
    is x // 2 and "the other 50%" what is left of x, so that every wei is paid."""
    if outcome == O_ACCUSED_LOST:
        reward = min(T, W)
        rest = T - reward
        return B + rest // 2, rest - rest // 2, 0, reward
    if outcome == O_CHALLENGER_LOST:
        return 0, 0, B - W, W
    if outcome == O_VOID:
        return B, 0, 0, 0
    if outcome == O_SILENT:
        return B + T // 2, T - T // 2, 0, 0
    raise ValueError(outcome)


def test_the_table_is_still_the_one_encoded_here():
    text = DOC.read_text()
    for row in TABLE_ROWS:
        assert row in text, f"docs/disputes.md no longer has the row {row!r}: update _row() with it"
    assert "Let `B = bond`, `W = refereeReward = B × 50%`" in text


def test_referee_reward_is_half_the_bond(payout):
    for bond in (0, 1, 3, ETHER // 10, 10**30 + 1):
        assert payout.refereeReward(bond).call() == bond * 5_000 // 10_000


# B = 0.1 ETH (the default bond), W = B/2; T = the default slash 0.5 ETH, a slash capped by a thin stake below
# W, nothing left to take, and odd amounts that leave integer-division remainders.
CASES = [
    (ETHER // 10, ETHER // 20, ETHER // 2),
    (ETHER // 10, ETHER // 20, ETHER // 50),
    (ETHER // 10, ETHER // 20, 0),
    (10**17 + 1, (10**17 + 1) // 2, 10**18 + 3),
    (7, 3, 5),
]


@pytest.mark.parametrize("outcome", [O_ACCUSED_LOST, O_CHALLENGER_LOST, O_VOID, O_SILENT])
@pytest.mark.parametrize("B, W, T", CASES)
def test_split_follows_the_table(payout, outcome, B, W, T):
    taken = T if outcome in (O_ACCUSED_LOST, O_SILENT) else 0  # only a losing accused is slashed
    got = tuple(payout.split(outcome, B, W, taken).call())
    assert got == _row(outcome, B, W, taken)
    assert sum(got) == B + taken  # every wei of the bond and the slash is paid to someone


def test_the_referees_earn_the_same_whichever_side_wins(payout):
    """With a slash of at least W, the majority's reward is W whether the accused or the challenger loses."""
    B, W, T = ETHER // 10, ETHER // 20, ETHER // 2
    assert payout.split(O_ACCUSED_LOST, B, W, T).call()[3] == payout.split(O_CHALLENGER_LOST, B, W, 0).call()[3] == W


@pytest.mark.parametrize("pool, majority", [(0, 0), (3 * 10**16, 0), (10, 3), (3 * 10**16, 2), (10**16 + 7, 5), (5, 7)])
def test_the_pool_goes_to_the_majority_with_the_dust_to_the_first(payout, pool, majority):
    """The reward is shared equally by the final round's majority referees, the dust to the first of them (with
    nobody to share it the challenger would get it; a decided outcome always has a majority)."""
    to_challenger, share, dust = payout.splitPool(pool, majority).call()
    if majority == 0:
        assert (to_challenger, share, dust) == (pool, 0, 0)
    else:
        assert (to_challenger, share, dust) == (0, pool // majority, pool % majority)
        assert share * majority + dust == pool


@pytest.mark.parametrize(
    "drawn, faithful, cheated, outcome",
    [
        (3, 0, 2, O_ACCUSED_LOST),
        (3, 0, 3, O_ACCUSED_LOST),
        (3, 2, 1, O_CHALLENGER_LOST),
        (3, 1, 1, O_VOID),
        (3, 0, 1, O_VOID),  # a single revealer cannot decide for a panel of 3
        (3, 0, 0, O_VOID),
        (1, 0, 1, O_ACCUSED_LOST),
        (1, 1, 0, O_CHALLENGER_LOST),
        (4, 2, 2, O_VOID),
        (4, 1, 3, O_ACCUSED_LOST),
        (5, 3, 2, O_CHALLENGER_LOST),
        (5, 2, 2, O_VOID),
        (2, 1, 1, O_VOID),
    ],
)
def test_a_strict_majority_of_the_drawn_panel_decides(payout, drawn, faithful, cheated, outcome):
    assert payout.decide(drawn, faithful, cheated).call() == outcome


def test_winning_verdicts(payout):
    assert [payout.winningVerdict(o).call() for o in (O_ACCUSED_LOST, O_CHALLENGER_LOST, O_VOID)] == [
        V_CHEATED,
        V_FAITHFUL,
        V_NONE,
    ]


@pytest.mark.parametrize("final", [O_ACCUSED_LOST, O_CHALLENGER_LOST, O_VOID])
def test_penalties_follow_the_final_verdict_in_every_round(payout, final):
    """A non-revealer is always penalized; a revealer only when the final verdict is decided and it voted the
    other way; so a referee's penalty depends on the final verdict, never on its own round's majority."""
    winning = {O_ACCUSED_LOST: V_CHEATED, O_CHALLENGER_LOST: V_FAITHFUL, O_VOID: V_NONE}[final]
    for verdict in (V_NONE, V_FAITHFUL, V_CHEATED):
        expected = verdict == V_NONE or (winning != V_NONE and verdict != winning)
        assert payout.penalized(final, verdict).call() == expected, (final, verdict)


def test_an_appeal_bond_comes_back_when_the_verdict_changed(payout):
    for final in (O_ACCUSED_LOST, O_CHALLENGER_LOST, O_VOID):
        for appealed in (O_ACCUSED_LOST, O_CHALLENGER_LOST, O_VOID):
            assert payout.appealRefunded(final, appealed).call() == (final != appealed)
