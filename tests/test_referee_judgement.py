"""The referees' rule and the verifier's agree where the residual is empty (docs/protocol.md "Residual with no mass").

At T = 0 the draft and target rows are one-hot, and equal wherever the two models agree. A drafter that proposes
another token there with a q claimed as certain gets it rejected (p = 0 at it), and the residual max(0, p − q) of
the replayed rows is empty. The honest verifier then emits p's own sample (`protocol.rejection_sample`); a referee
must judge that outToken faithful, or the lying drafter could get the honest verifier slashed by disputing it.
Pure: the rows are given (`judge_position(rows=...)`), as a watchdog passes its cycle rows; no model is loaded.
"""

from __future__ import annotations

import numpy as np
import pytest

from node import protocol
from node.chain.enums import DisputeKind, Verdict
from node.decoding import sampler
from node.decoding.messages import DecodingJob
from node.jobs.chaindata import ChainCycle
from node.protocol import WAD
from node.roles.referee.node import judge_position

VOCAB, GAMMA, AGREED, LIE, SALT, TOL = 8, 3, 3, 5, 77, 10**12
JOB = DecodingJob(job_id=4, prompt=(1, 2), max_new_tokens=8, gamma=GAMMA)
REVEAL = b"\x42" * 32


def one_hot(token: int) -> np.ndarray:
    row = np.zeros(VOCAB, dtype=np.int64)
    row[token] = WAD
    return row


def rows(_model, _context) -> np.ndarray:
    return one_hot(AGREED)  # both models, every position: greedy, and they agree


def lying_cycle(out_token: int | None = None) -> tuple[ChainCycle, sampler.Decision]:
    """The drafter proposes LIE (the models' argmax is AGREED) and claims q = WAD for it; the verifier decides."""
    tokens, q = [LIE, AGREED, AGREED], [WAD] * GAMMA
    p_rows = np.stack([one_hot(AGREED)] * (GAMMA + 1))
    d = sampler.decide(JOB.job_id, 0, REVEAL, tokens, q, p_rows, p_rows[:GAMMA], salt=SALT)
    cycle = ChainCycle(
        JOB.job_id, 0, d.root, tuple(tokens), tuple(q), "0x", REVEAL, d.accepted,
        d.out_token if out_token is None else out_token, (), d.p, salt=SALT,
    )  # fmt: skip
    return cycle, d


def judge(cycle: ChainCycle, index: int, kind: DisputeKind):
    return judge_position(JOB, list(JOB.prompt), cycle, index, kind, TOL, rows=rows)


def test_the_honest_verifiers_out_token_at_an_empty_residual_is_faithful():
    cycle, d = lying_cycle()
    assert d.accepted == 0 and d.p[0] == 0  # rejected at once: p(LIE) = 0
    with pytest.raises(ValueError, match="residual is empty"):
        protocol.residual_sample(one_hot(AGREED), one_hot(AGREED), 0)
    assert d.out_token == AGREED  # p's own sample
    judgement = judge(cycle, GAMMA, DisputeKind.TargetReplay)
    assert judgement.verdict == Verdict.AccusedFaithful, judgement


def test_another_out_token_there_is_still_convicted():
    cycle, _ = lying_cycle(out_token=LIE)
    judgement = judge(cycle, GAMMA, DisputeKind.TargetReplay)
    assert judgement.verdict == Verdict.AccusedCheated and "rejection sample" in judgement.reason, judgement


def test_the_lying_drafter_is_the_one_convicted():
    cycle, _ = lying_cycle()
    judgement = judge(cycle, 0, DisputeKind.DraftReplay)
    assert judgement.verdict == Verdict.AccusedCheated and "q_0" in judgement.reason, judgement


def test_rejection_sample_is_the_residual_where_it_has_mass_and_refuses_malformed_rows():
    p, q = [WAD // 2, WAD // 2, 0], [WAD, 0, 0]
    for u in (0, WAD // 3, WAD - 1):
        assert protocol.rejection_sample(p, q, u) == protocol.residual_sample(p, q, u) == 1
    assert protocol.rejection_sample(q, q, WAD - 1) == protocol.invcdf(q, WAD - 1) == 0
    with pytest.raises(ValueError):
        protocol.rejection_sample(p, q[:2], 0)
