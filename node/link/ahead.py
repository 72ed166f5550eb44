"""Verifying ahead on the link: while the drafter drafts cycle c, the verifier verifies the draft it will send.

An honest draft is a deterministic function of public data (the job, the outputs so far, the public draft uniforms)
and the draft model, which the verifier holds to replay every draft anyway. So once it has answered cycle c-1, the
verifier proposes cycle c itself with a `DraftSession` taken through every cycle exactly as the drafter's is
(propose, then advance with the cycle's output), and verifies that guess on its session. When the drafter's Draft
arrives, one equal to the guess (tokens and q, exactly) takes the verification computed ahead, which is what
verifying it then would compute (the same session state, the same input); any other draft puts the session back
as it was (cropping its caches restores the KV entries exactly) and is verified as usual. Nothing is signed, stored
or sent ahead. After `MISSES` wrong guesses in a row (a drafter that restarted, or computes on other hardware) the
job is no longer verified ahead. The same idea as the per-cycle verifier node's speculation
(node/roles/verifier/node.py).
"""

from __future__ import annotations

import logging

from node.decoding.messages import Draft as EngineDraft
from node.decoding.proposer import DraftSession

log = logging.getLogger("verispec.link.ahead")
MISSES = 2  # wrong guesses in a row after which a job is verified only once its draft is here
CATCH_UP = 8  # cycles the mirror may replay to reach the session's cycle (after a restart it is not worth more)


class VerifyAhead:
    def __init__(self, draft_model, job):
        self.mirror = DraftSession(draft_model, job)
        self.proposed: int | None = None  # the cycle the mirror proposed and has not advanced past
        self.proposal: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())  # its (tokens, q)
        self.guess = None  # (session, cycle, tokens, q, result, cache lengths before the guess)
        self.misses = 0
        self.enabled = True
        self.hits = 0

    def run(self, session, outputs: dict[int, tuple[int, ...]]) -> None:
        """Guess and verify, on `session`, the draft of its next cycle (a worker thread; the job's lock is held)."""
        c = session.cycle
        if not self.enabled or session.done or self.guess is not None or session.salt is None:
            return
        m = self.mirror
        if c - m.cycle > CATCH_UP:
            self.enabled = False
            return
        while m.cycle < c:  # the drafter's path exactly: every cycle proposed, then advanced with its output
            k = m.cycle
            if self.proposed != k:
                m.propose(k)
            m.advance(outputs[k])
            self.proposed = None
        if self.proposed != c:  # (proposed already: a guess of this cycle was dropped; the proposal stands)
            draft = m.propose(c)
            self.proposed, self.proposal = c, (tuple(int(t) for t in draft.tokens), tuple(int(x) for x in draft.q))
        tokens, q = self.proposal
        lengths = len(session.target.tokens), len(session.replay.tokens)
        result = session.verify(c, EngineDraft(session.job.job_id, c, tokens, q, q_rows=None))
        self.guess = (session, c, tokens, q, result, lengths)

    def take(self, session, cycle: int, tokens, q):
        """The verification computed ahead if the drafter's draft is the guess, else None (the session restored)."""
        guess, self.guess = self.guess, None
        if guess is None:
            return None
        same_session, c, g_tokens, g_q, result, lengths = guess
        if same_session is session and c == cycle and g_tokens == tuple(tokens) and g_q == tuple(q):
            self.misses, self.hits = 0, self.hits + 1
            return result
        if same_session is session:  # undo the guess: a verify only appends to the caches and holds its outcome
            session.target.crop(lengths[0])
            session.replay.crop(lengths[1])
            session._last = None
        self.misses += 1
        if self.misses >= MISSES:
            self.enabled = False
        log.info("job %d cycle %d: the draft is not the one guessed; verifying it now", session.job.job_id, cycle)
        return None
