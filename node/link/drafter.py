"""The drafter's side of the transcript link: one job, over a connection to the verifier's endpoint.

Per cycle it proposes with the engine's `DraftSession`, signs the Draft (its commitment, and its counter-signature
of the verifier's last state), stores it, then sends it. On each Verification it checks the signature and the state
chain (`check_verification`), stores it, and re-runs the accept rule (`job.check_cycle`) before anything else: a
cycle the rule refutes is never counter-signed. The drafter stops there, keeps the evidence (the Verification,
stored, signed by the verifier) and reports the last good state, which a rule challenge or a force move posts.

A dropped connection, or a restart after kill -9, resumes from the store: the verifier's `welcome` says which Draft
it awaits and carries its latest answer; a Draft stored but not answered is resent as stored (never a second
one), and a session rebuilt from the stored outputs proposes the next.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from node import protocol as P
from node.chain import transcript_messages as tm
from node.decoding.proposer import DraftSession
from node.jobs.sessions import drafter_salt, resume_draft_session
from node.link import wire
from node.link.job import Ledger, RuleViolation, TranscriptJob
from node.link.wire import Limits, LinkRefused
from node.store import NodeStore

log = logging.getLogger("verispec.link.drafter")
ROLE = "drafter"  # the role's rows in the store


class PeerRefused(ConnectionError):
    """The verifier sent an error frame (and closes): retried, up to the connection limit."""


RETRYABLE = (OSError, ConnectionClosed, InvalidHandshake, TimeoutError)


@dataclass(frozen=True)
class DrafterResult:
    job_id: int
    tokens: list[int]
    settled: bool  # both signed the Settlement
    refused: str | None  # the rule violation that stopped the job (its Verification is in the store), else None
    last_cosigned: tuple[int, bytes, int]  # (cycles, state, tokens out): Ledger.last_cosigned
    connections: int


class DrafterLink:
    """Runs one transcript job as its drafter against the verifier at `uri` (ws://host:port)."""

    def __init__(
        self,
        account,
        store: NodeStore,
        draft_model,
        spec: TranscriptJob,
        uri: str,
        limits: Limits | None = None,
        give_up_after_s: float = 600.0,
        retry_delay_s: float = 0.2,
        new_session=None,
        rule=None,
    ):
        if spec.drafter != account.address:
            raise ValueError(f"job {spec.job_id}'s drafter is {spec.drafter}, not this node's {account.address}")
        self.account, self.store, self.draft_model, self.spec, self.uri = account, store, draft_model, spec, uri
        self.limits = limits or Limits()
        # a silent verifier is the force-move rule's case (on chain); until then, keep trying, backing off to 2 s
        self.give_up_after_s, self.retry_delay_s = give_up_after_s, retry_delay_s
        self.ledger = Ledger.load(spec, store, ROLE, rule)
        # a misbehaviour's session and rule (node/roles/behaviors.py `link_drafter_options`); honest by default
        self.new_session = new_session or (lambda job: DraftSession(draft_model, job))
        self.session: DraftSession | None = None
        self.proposed: int | None = None  # the cycle `session` proposed and has not advanced past
        self.connections = 0
        self.on_cycle = None  # optional callback(cycle, tokens) once a cycle is taken in
        # the link's loop and the node's (which takes a force's Verification from chain data and drafts on it,
        # node/roles/transcript_jobs.py) both take Verifications in and draft: one at a time, so never two Drafts
        self.lock = threading.Lock()

    def _result(self, settled: bool = False, refused: str | None = None) -> DrafterResult:
        ledger = self.ledger
        return DrafterResult(
            self.spec.job_id, ledger.tokens, settled, refused, ledger.last_cosigned(), self.connections
        )

    def violation(self) -> str | None:
        """Why the job stopped, if a stored Verification fails the rule (after a restart as before it)."""
        bad = [c for c in self.ledger.verifications if c not in self.ledger.outputs]
        if not bad:
            return None
        try:
            self.ledger.checked_output(min(bad), self.ledger.verifications[min(bad)][0])
        except RuleViolation as exc:
            return str(exc)
        return None

    async def run(self) -> DrafterResult:
        """Drive the job to its Settlement, reconnecting as needed; stops at once on a rule violation."""
        refused = self.violation()
        if refused is not None:
            return self._result(refused=refused)
        c = self.ledger.next_cycle
        if c and not self.ledger.done and c not in self.ledger.drafts and self.ledger.verifications[c - 1][1] == b"":
            # on a state the chain attested (an on-chain answer, no signature): the Draft on it is signed and stored
            # before any connection, so a verifier that stays silent is forced with it
            await self._draft()
        failing_since, delay = None, self.retry_delay_s
        while True:
            self.connections += 1
            progress = len(self.ledger.outputs)
            try:
                return await self._connection()
            except RuleViolation as exc:
                log.error("job %d: %s; not counter-signed, evidence kept", self.spec.job_id, exc)
                self.store.save_job(self.spec.job_id, "link-drafter", "rule-violation", {"reason": str(exc)})
                return self._result(refused=str(exc))
            except RETRYABLE as exc:
                now = time.monotonic()
                if failing_since is None or len(self.ledger.outputs) > progress:  # it got somewhere: start afresh
                    failing_since, delay = now, self.retry_delay_s
                if now - failing_since > self.give_up_after_s:
                    raise LinkRefused(
                        f"job {self.spec.job_id}: no progress over the link for {self.give_up_after_s:g} s: {exc}"
                    ) from None
                log.info("job %d: link down (%s); reconnecting in %.1f s", self.spec.job_id, exc, delay)
                await asyncio.sleep(delay)
                delay = min(2 * delay, 2.0)

    async def _connection(self) -> DrafterResult:
        async with connect(self.uri, max_size=self.limits.max_message_bytes, open_timeout=10) as ws:
            nonce = wire.challenge_nonce(wire.decode(await asyncio.wait_for(ws.recv(), 30), self.limits))
            signature = wire.sign_hello(self.spec.domain, self.spec.job_id, nonce, self.account.key)
            await ws.send(wire.encode({"type": "hello", "job": self.spec.job_id, "role": ROLE, "signature": signature}))
            welcome = await self._recv(ws)
            if welcome["type"] != "welcome":
                raise LinkRefused(f"expected a welcome, got {welcome['type']}")
            for reply in await self._resume(welcome):
                await ws.send(wire.encode(reply))
            while True:
                frame = await self._recv(ws)
                if frame["type"] == "settled":
                    return self._result(settled=len(self.ledger.settlement_sigs) == 2)
                for reply in await self._take(frame):
                    await ws.send(wire.encode(reply))

    async def _recv(self, ws) -> dict:
        frame = wire.decode(await asyncio.wait_for(ws.recv(), self.limits.idle_timeout_s), self.limits)
        if frame["type"] == "error":  # e.g. a restarted verifier that does not serve the job yet: retried
            raise PeerRefused(f"the verifier refused: {str(frame.get('reason'))[:200]}")
        return frame

    async def _resume(self, welcome: dict) -> list[dict]:
        """Take in the verifier's latest answers, then send what it awaits (the next Draft, or my settlement)."""
        replies: list[dict] = []
        for key in ("verification", "settlement"):
            if isinstance(welcome.get(key), dict):
                replies += await self._take(welcome[key], resend=True)
        n = wire.field(welcome, "next_cycle")
        if not self.ledger.done and n < self.ledger.next_cycle:  # I hold its signed Verification of cycle n
            raise PeerRefused(f"the verifier awaits cycle {n}, whose Verification it signed: it withholds it")
        if not self.ledger.done and n != self.ledger.next_cycle:
            raise LinkRefused(
                f"job {self.spec.job_id}: the verifier awaits cycle {n}, my store is at {self.ledger.next_cycle}"
            )
        if not self.ledger.done and not replies:
            replies.append(await self._draft())
        return replies

    async def _take(self, frame: dict, resend: bool = False) -> list[dict]:
        if frame["type"] == "verification":
            return await self._take_verification(frame, resend)
        if frame["type"] == "settlement":
            return self._take_settlement(frame)
        raise LinkRefused(f"a drafter does not take {frame['type']} frames", wire.CLOSE_INVALID)

    async def _take_verification(self, frame: dict, resend: bool) -> list[dict]:
        v, sig = wire.parse_signed(frame, self.spec.domain, tm.Verification, self.limits)
        if not self.take_verification(v, sig):
            return []
        if self.on_cycle is not None:
            self.on_cycle(v.cycle, self.ledger.outputs[v.cycle])
        return [] if self.ledger.done else [await self._draft()]

    def take_verification(self, v: tm.Verification, sig: bytes) -> bool:
        """Check, store and take in the verifier's signed Verification `v` (over the link, or from a force's
        evidence on chain); False when it is one I hold. LinkRefused when it is not the one I await, RuleViolation
        (stored: the evidence) when the accept rule refutes it. Thread-safe."""
        spec, ledger, c = self.spec, self.ledger, v.cycle
        with self.lock:
            if c in ledger.verifications:
                if ledger.verifications[c][1] == b"":  # the chain attested cycle c (an on-chain answer): it stands
                    return False
                if ledger.verifications[c] != (v, sig):
                    raise LinkRefused(f"a second, different Verification of cycle {c}")
                return False  # a resend of what I hold
            if c != ledger.next_cycle or c not in ledger.drafts:
                raise LinkRefused(f"Verification of cycle {c} is stale or out of order: I await {ledger.next_cycle}")
            try:
                tm.check_verification(spec.domain, v, sig, verifier=spec.verifier, draft=ledger.drafts[c][0])
            except tm.MessageRejected as exc:
                raise LinkRefused(str(exc)) from None
            ledger.save(v, sig, "verifier", "received")  # stored before it is acted on: evidence if refuted
            ledger.verifications[c] = (v, sig)
            ledger.outputs[c] = ledger.checked_output(c, v)  # RuleViolation: stop, never counter-sign
        return True

    def _take_settlement(self, frame: dict) -> list[dict]:
        spec, ledger = self.spec, self.ledger
        s, sig = wire.parse_signed(frame, spec.domain, tm.Settlement, self.limits)
        if not ledger.done:
            raise LinkRefused(f"a Settlement before the job's end (cycle {ledger.next_cycle})")
        expected = ledger.final_settlement()
        try:
            tm.check_settlement(
                spec.domain,
                s,
                sig,
                signer=spec.verifier,
                job_id=spec.job_id,
                cycles=expected.cycles,
                state=expected.state,
                tokens_out=expected.tokens_out,
            )
        except tm.MessageRejected as exc:
            raise LinkRefused(str(exc)) from None
        if ledger.save(s, sig, "verifier", "received"):
            ledger.settlement_sigs["verifier"] = sig
        ledger.settlement = s
        own = ledger.settlement_sigs.get("drafter")
        if own is None:
            own = tm.sign(spec.domain, s, self.account.key)
            ledger.save(s, own, "drafter", "sent")
            ledger.settlement_sigs["drafter"] = own
        return [wire.signed_frame("settlement", spec.domain, s, own)]

    async def _draft(self) -> dict:
        """The Draft of the next cycle: the stored one if it was signed before (maybe sent), else a new one."""
        return wire.signed_frame("draft", self.spec.domain, *await asyncio.to_thread(self.draft_next))

    def draft_next(self) -> tuple[tm.Draft, bytes]:
        """The (Draft, signature) of the next cycle, signed and stored once (a worker thread, or the node's loop
        answering a force: thread-safe, so never two Drafts of a cycle)."""
        spec, ledger = self.spec, self.ledger
        with self.lock:
            c = ledger.next_cycle
            if c not in ledger.drafts:
                tokens, q = self._propose(c)
                # cycle 0 draws the job's salt, stored before the Draft carrying it is signed
                salt = drafter_salt(ledger.store, spec.job_id, ROLE) if c == 0 else ledger.salt
                prev = P.transcript_genesis(spec.job_id, salt) if c == 0 else ledger.state(c - 1)
                draft = tm.Draft.build(spec.job_id, c, prev, tokens, q, salt)
                sig = tm.sign(spec.domain, draft, self.account.key)
                ledger.save(draft, sig, "drafter", "sent")  # stored before it is sent: a restart resends this one
                ledger.drafts[c] = (draft, sig)
            return ledger.drafts[c]

    def _propose(self, c: int) -> tuple[list[int], list[int]]:
        s, ledger = self.session, self.ledger
        if s is not None and s.cycle == c - 1 and self.proposed == c - 1:
            s.advance(ledger.outputs[c - 1])
        elif s is None or s.cycle != c or self.proposed is not None:
            s = self.new_session(self.spec.job)
            s = resume_draft_session(s, list(self.spec.job.prompt) + ledger.tokens, c)
        self.session, self.proposed = s, c
        draft = s.propose(c)
        return [int(t) for t in draft.tokens], [int(x) for x in draft.q]
