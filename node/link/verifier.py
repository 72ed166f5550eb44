"""The verifier's endpoint of the transcript link: an asyncio WebSocket server that serves transcript jobs.

For each job it is given (`open_job`: the job, both parties, the hash-chain seed whose head is on chain) it takes
the drafter's Drafts in cycle order, each checked with `check_draft` against the last state it signed (a forged,
replayed, stale or out-of-order Draft is refused), stored, then verified by the engine's `VerifySession` (the
target pass and the draft replay, the hash-chain reveal and the drafter's salt in the uniforms exactly as in
per-cycle mode) and answered with a signed Verification, stored before it is sent. The cycle's tokens go to every
subscribed requester; when the job ends it signs the Settlement, and takes the drafter's.

A Draft the drafter resends after a reconnect gets the stored Verification again (the same bytes), so a restart of
either side resumes from the store: nothing is verified twice into two answers, and nothing unsigned is served.
Model forwards run in worker threads, so one job's verification never stalls another job's connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from types import SimpleNamespace

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from node import protocol as P
from node.chain import transcript_messages as tm
from node.decoding import sampler
from node.decoding.messages import Draft as EngineDraft
from node.decoding.scorer import VerifySession
from node.jobs.models import next_token_rows
from node.jobs.sessions import resume_verify_session
from node.link import wire
from node.link.ahead import VerifyAhead
from node.link.job import Ledger, TranscriptJob
from node.link.wire import Limits, LinkRefused
from node.store import NodeStore

log = logging.getLogger("verispec.link.verifier")
ROLE = "verifier"  # the role's rows in the store


@dataclass
class ServedJob:
    spec: TranscriptJob
    seed: bytes
    ledger: Ledger
    session: VerifySession | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    subscribers: set[asyncio.Queue] = field(default_factory=set)
    ahead: VerifyAhead | None = None  # verifies the next draft while the drafter drafts it (node/link/ahead.py)
    ahead_task: asyncio.Future | None = None
    heard: float = field(default_factory=time.monotonic)  # when the drafter last said something (served since)
    poked: float = 0.0  # when the silence watch last reported this job
    session_class: type = VerifySession  # a misbehaviour's (node/roles/behaviors.py `link_verifier_options`)
    # (Verification, signature) of the guessed draft, signed ahead: used only when the Verification the real draft
    # gets is that one exactly; a signature kept in memory and never sent commits to nothing
    presigned: tuple | None = None
    # misbehaviours for the tests (node/roles/behaviors.py `link_verifier_options`): the first cycle whose
    # Verification is never sent over the link (`withhold`), and whether the Settlement is signed (`nosign`)
    withhold_from: int | None = None
    signs_settlement: bool = True
    ended: bool = False  # the node saw the job leave Running on chain: nothing is owed on it any more

    @property
    def holds_settlement(self) -> bool:
        """Both signed the Settlement and the job has not ended on chain: the drafter posts it, or after
        `--link-silence` this verifier does (node/roles/transcript_jobs.py)."""
        return len(self.ledger.settlement_sigs) == 2 and not self.ended

    def drafter_silence(self) -> float:
        """Seconds since the drafter's last hello, Draft or Settlement (or since the job was served): when that passes
        the node's `--link-silence` while the job waits on the drafter, the node forces it (transcript_jobs)."""
        return time.monotonic() - self.heard

    @property
    def awaits_drafter(self) -> bool:
        """The next move is the drafter's: its next Draft, or its signature of the Settlement."""
        ledger = self.ledger
        if ledger.done:
            return "drafter" not in ledger.settlement_sigs
        return ledger.next_cycle not in ledger.drafts


class LinkServer:
    """Serves transcript jobs over one WebSocket endpoint (`serve verifier --listen HOST:PORT`)."""

    def __init__(
        self, account, store: NodeStore, target_model, draft_model, limits: Limits | None = None, ahead: bool = True
    ):
        self.account, self.store, self.limits, self.verify_ahead = account, store, limits or Limits(), ahead
        self.target_model, self.draft_model = target_model, draft_model
        self.jobs: dict[int, ServedJob] = {}
        self.address: tuple[str, int] | None = None
        self._server = None
        self._watch: asyncio.Task | None = None
        # the latest refusals' reasons, in order (for the tests): bounded, as a peer can provoke them without end
        self.refused: deque[str] = deque(maxlen=1000)
        self.open_connections: Counter[str] = Counter()  # by remote host
        self.silence_s: float | None = None  # `watch_silence`
        self.on_silent = None

    def watch_silence(self, silence_s: float, on_silent) -> None:
        """Call `on_silent(job_id)` (on the server's loop) once a job that awaits its drafter (a Draft, its Settlement
        signature, or the post of the Settlement both signed) has heard nothing from it for `silence_s`, and again
        every `silence_s` while that lasts: the node then forces the drafter on chain, or posts the Settlement
        (node/roles/transcript_jobs.py). The link itself never gives up on a job; the chain's force move does."""
        self.silence_s, self.on_silent = float(silence_s), on_silent

    async def _watch_silence(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            if self.on_silent is None:
                continue
            now = time.monotonic()
            for job_id, served in list(self.jobs.items()):
                waits = served.awaits_drafter or served.holds_settlement
                silent = waits and now - served.heard > self.silence_s
                if silent and now - served.poked > self.silence_s:
                    served.poked = now
                    try:
                        self.on_silent(job_id)
                    except Exception:  # the node's callback must not stop the watch of the other jobs
                        log.exception("job %d: the silence callback failed", job_id)

    # ------------------------------------------------------------------ jobs

    def open_job(
        self, spec: TranscriptJob, seed: bytes, session_class=VerifySession, rule=None, **misbehaviour
    ) -> ServedJob:
        """Serve `spec` (restored from the store if it ran before); `seed` must be the one behind its head."""
        if spec.verifier != self.account.address:
            raise ValueError(f"job {spec.job_id}'s verifier is {spec.verifier}, not this node's {self.account.address}")
        if P.hash_chain(seed, spec.job.chain_length) != spec.head:
            raise ValueError(f"job {spec.job_id}: the seed is not the one behind the committed head")
        if spec.job.max_new_tokens > self.limits.max_tokens or spec.job.gamma > self.limits.max_gamma:
            raise ValueError(
                f"job {spec.job_id}: {spec.job.max_new_tokens} tokens, γ {spec.job.gamma}: over this endpoint's "
                f"limits ({self.limits.max_tokens} tokens, γ {self.limits.max_gamma})"
            )
        served = self.jobs.get(spec.job_id)
        if served is None:
            ledger = Ledger.load(spec, self.store, ROLE, rule)
            served = ServedJob(spec, seed, ledger, session_class=session_class, **misbehaviour)
            self.jobs[spec.job_id] = served
            if self.verify_ahead and served.ledger.next_cycle == 0:  # a mirror of the drafter starts at cycle 0
                served.ahead = VerifyAhead(self.draft_model, spec.job)
            if served.ledger.done and "verifier" not in served.ledger.settlement_sigs and served.signs_settlement:
                self._sign_settlement(served)  # killed between the last Verification and the Settlement
        return served

    # ------------------------------------------------------------------ server

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        self._server = await serve(
            self._handle,
            host,
            port,
            max_size=self.limits.max_message_bytes,
            open_timeout=self.limits.hello_timeout_s,
            ping_interval=20,
            ping_timeout=20,
        )
        self.address = self._server.sockets[0].getsockname()[:2]
        self._watch = asyncio.ensure_future(self._watch_silence())
        log.info("transcript link listening on ws://%s:%d", *self.address)
        return self.address

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def run_in_thread(self, host: str, port: int) -> tuple[str, int]:
        """Serve from a daemon thread with its own event loop (beside a node's blocking chain loop); the error of a
        failed start (an address in use) is raised here."""
        started, loop, failed = threading.Event(), asyncio.new_event_loop(), []

        def main():
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start(host, port))
            except BaseException as exc:  # handed to the caller
                failed.append(exc)
                return
            finally:
                started.set()
            loop.run_forever()

        threading.Thread(target=main, name="transcript-link", daemon=True).start()
        if not started.wait(30):
            raise RuntimeError(f"the transcript link did not start on {host}:{port}")
        if failed:
            raise failed[0]
        self.loop = loop
        return self.address

    async def _handle(self, ws) -> None:
        peer, writer, nonce = ws.remote_address, None, wire.new_nonce()
        host = str(peer[0]) if peer else "unknown"
        self.open_connections[host] += 1
        try:
            self._check_connections(host)
            await ws.send(wire.encode({"type": "challenge", "nonce": nonce}))
            try:
                first = await asyncio.wait_for(ws.recv(), self.limits.hello_timeout_s)
            except TimeoutError:
                raise LinkRefused(f"no hello within {self.limits.hello_timeout_s:g} s") from None
            hello = wire.decode(first, self.limits)
            if hello["type"] != "hello":
                raise LinkRefused(f"the first frame must be a hello, not {hello['type']}", wire.CLOSE_INVALID)
            served = self.jobs.get(wire.field(hello, "job"))
            if served is None:
                raise LinkRefused(f"job {hello['job']} is not served here")
            role = hello.get("role")
            if role not in wire.ROLES:
                raise LinkRefused(f"hello: role must be one of {', '.join(wire.ROLES)}", wire.CLOSE_INVALID)
            if role == "drafter":
                signer = wire.hello_signer(served.spec.domain, served.spec.job_id, nonce, hello.get("signature"))
                if signer != served.spec.drafter:
                    raise LinkRefused(
                        f"hello: signed by {signer}, not job {served.spec.job_id}'s drafter {served.spec.drafter}"
                    )
                served.heard = time.monotonic()
            await ws.send(wire.encode(self._welcome(served)))
            while True:
                try:  # a subscriber only listens: it is not idle while its stream runs
                    text = await asyncio.wait_for(ws.recv(), None if writer else self.limits.idle_timeout_s)
                except TimeoutError:
                    raise LinkRefused(f"idle for {self.limits.idle_timeout_s:g} s") from None
                frame = wire.decode(text, self.limits)
                if role == "requester" and frame["type"] in ("draft", "settlement"):
                    raise LinkRefused(f"a requester does not send {frame['type']} frames; say hello as the drafter")
                if frame["type"] == "subscribe" and writer is None:
                    writer = asyncio.create_task(self._feed(ws, served, wire.field(frame, "from")))
                    continue
                for reply in await self._dispatch(served, frame):
                    await ws.send(wire.encode(reply))
        except LinkRefused as exc:
            self.refused.append(str(exc))
            log.warning("link peer %s refused: %s", peer, exc)
            with contextlib.suppress(ConnectionClosed):
                await ws.send(wire.encode({"type": "error", "reason": str(exc)}))
                await ws.close(exc.code, str(exc)[:120])  # a close reason is at most 123 bytes
        except ConnectionClosed:
            pass
        except Exception:  # a bug here must not take the endpoint (and the other jobs) down with this connection
            log.exception("link peer %s: internal error", peer)
            with contextlib.suppress(ConnectionClosed):
                await ws.close(1011, "internal error")
        finally:
            if writer is not None:  # the peer is gone: its stream with it
                writer.cancel()
            self.open_connections[host] -= 1
            if self.open_connections[host] <= 0:
                del self.open_connections[host]

    def _check_connections(self, host: str) -> None:
        """Refuse a connection past the per-host or the total cap (it counts itself already)."""
        if self.open_connections[host] > self.limits.max_connections_per_host:
            raise LinkRefused(f"{host} holds {self.limits.max_connections_per_host} connections already")
        if self.open_connections.total() > self.limits.max_connections:
            raise LinkRefused(f"the endpoint holds {self.limits.max_connections} connections already")

    async def _dispatch(self, served: ServedJob, frame: dict) -> list[dict]:
        kind = frame["type"]
        if kind == "draft":
            return await self._on_draft(served, frame)
        if kind == "settlement":
            return await self._on_settlement(served, frame)
        if kind == "fetch":
            return [self._transcript(served)]
        raise LinkRefused(f"a verifier does not take {kind} frames", wire.CLOSE_INVALID)

    def _welcome(self, served: ServedJob) -> dict:
        """Where the job stands here: the next Draft awaited, and the latest signed answers to resend."""
        ledger, domain = served.ledger, served.spec.domain
        shown = [c for c in ledger.verifications if served.withhold_from is None or c < served.withhold_from]
        last = max(shown, default=None)
        next_cycle = ledger.next_cycle if served.withhold_from is None else min(ledger.next_cycle, served.withhold_from)
        frame = {"type": "welcome", "job": served.spec.job_id, "next_cycle": next_cycle}
        frame["verification"] = (
            wire.signed_frame("verification", domain, *ledger.verifications[last]) if last is not None else None
        )
        sig = ledger.settlement_sigs.get("verifier")
        frame["settlement"] = wire.signed_frame("settlement", domain, ledger.settlement, sig) if sig else None
        return frame

    # ------------------------------------------------------------------ drafts

    async def _on_draft(self, served: ServedJob, frame: dict) -> list[dict]:
        spec, ledger = served.spec, served.ledger
        msg, sig = wire.parse_signed(frame, spec.domain, tm.Draft, self.limits)
        served.heard = time.monotonic()
        async with served.lock:
            c = msg.cycle
            if c in ledger.drafts and ledger.drafts[c] != (msg, sig):
                raise LinkRefused(f"Draft of cycle {c}: another Draft of that cycle was taken in; it stands")
            if c not in ledger.drafts:
                if ledger.done:
                    raise LinkRefused(f"job {spec.job_id} is finished; no Draft of cycle {c} is taken")
                if c != ledger.next_cycle:
                    raise LinkRefused(f"Draft of cycle {c} is stale or out of order: cycle {ledger.next_cycle} is next")
                previous = {} if c == 0 else {"prev_state": ledger.state(c - 1), "salt": ledger.salt}
                try:
                    tm.check_draft(
                        spec.domain,
                        msg,
                        sig,
                        drafter=spec.drafter,
                        job_id=spec.job_id,
                        cycle=c,
                        gamma=spec.job.gamma,
                        **previous,
                    )
                except tm.MessageRejected as exc:
                    raise LinkRefused(str(exc)) from None
                ledger.save(msg, sig, "drafter", "received")  # stored before it is acted on
                ledger.drafts[c] = (msg, sig)
            if c not in ledger.verifications:
                if served.ahead_task is not None:  # the guess holds the session until it is done
                    await served.ahead_task
                    served.ahead_task = None
                await asyncio.to_thread(self._verify, served, msg)
                self._publish(served, c)
                if served.ahead is not None and not ledger.done:
                    served.ahead_task = asyncio.ensure_future(asyncio.to_thread(self._ahead, served))
        if served.withhold_from is not None and c >= served.withhold_from:
            return []  # (`withhold`: signed and stored, never sent)
        replies = [wire.signed_frame("verification", spec.domain, *ledger.verifications[c])]
        if ledger.settlement is not None and c == ledger.settlement.cycles - 1:
            replies.append(
                wire.signed_frame("settlement", spec.domain, ledger.settlement, ledger.settlement_sigs["verifier"])
            )
        return replies

    def _verify(self, served: ServedJob, draft: tm.Draft) -> None:
        """Verify cycle `draft.cycle` with the engine, sign the answer and store it (a worker thread)."""
        spec, ledger, c = served.spec, served.ledger, draft.cycle
        invalid = next((i for i, t in enumerate(draft.tokens) if t >= spec.vocab_size), None)
        if invalid is not None:
            session, result = None, self._verify_out_of_vocab(served, draft, invalid)
        else:
            session = self._session_at(served, c)
            result = served.ahead.take(session, c, draft.tokens, draft.q) if served.ahead is not None else None
        if result is None:
            result = session.verify(c, EngineDraft(spec.job_id, c, draft.tokens, draft.q, q_rows=None))
        for fault in result.draft_faults:  # grounds for a DraftReplay dispute on the pulled cycle
            log.warning(
                "job %d cycle %d: the draft replay disagrees with proposal %d (%s)",
                spec.job_id,
                c,
                fault.index,
                fault.kind,
            )
        v = _verification(draft, result)
        output = ledger.checked_output(c, v)  # the one rule, also on my own answer: never sign what it refutes
        if output != result.emitted:
            raise RuntimeError(f"job {spec.job_id} cycle {c}: the engine emitted {result.emitted}, the rule {output}")
        v = self.answer(served, v)
        presigned, served.presigned = served.presigned, None
        sig = presigned[1] if presigned is not None and presigned[0] == v else tm.sign(spec.domain, v, self.account.key)
        ledger.save(v, sig, "verifier", "sent")  # stored before it is sent
        ledger.verifications[c], ledger.outputs[c] = (v, sig), output
        if session is not None:
            session.advance(output)
        if ledger.done:
            if served.signs_settlement:
                self._sign_settlement(served)
            served.session = None  # generation is over: free the caches

    def _verify_out_of_vocab(self, served: ServedJob, draft: tm.Draft, invalid: int) -> SimpleNamespace:
        """A Draft whose proposal `invalid` is not a token of the vocabulary, verified as per cycle (node/roles/
        verifier.py `_verify_invalid_draft`; the contract takes any uint32 and caps the count there): the target
        gives that token probability 0, so p there and after it is 0 and the rule rejects there at the latest
        (`sampler.decide` with the job's vocabulary). The
        rows up to it come from one fresh forward over the valid prefix, the residual's q from the draft model at
        the rejected position. The engine session cannot hold the id: it is rebuilt from the ledger next cycle.
        Refusing the Draft instead would let its drafter force this verifier on chain with it, unanswerable."""
        spec, ledger, c = served.spec, served.ledger, draft.cycle
        log.warning(
            "job %d cycle %d: proposal %d is token %d, outside the vocabulary (%d); p = 0 from there",
            spec.job_id,
            c,
            invalid,
            draft.tokens[invalid],
            spec.vocab_size,
        )
        job, tokens, q = spec.job, list(draft.tokens), list(draft.q)
        context = list(job.prompt) + [t for k in range(c) for t in ledger.outputs[k]]
        p_rows = next_token_rows(self.target_model, context + tokens[:invalid], job.sampling, keep=invalid + 1)
        reveal = P.chain_reveal(served.seed, job.chain_length, c)

        def q_row(n: int):  # the residual's q: the draft model at the rejected position, computed once n is known
            return next_token_rows(self.draft_model, context + tokens[:n], job.sampling)[0]

        d = sampler.decide(
            job.job_id, c, reveal, tokens, q, p_rows, q_row, salt=ledger.salt, vocab_size=spec.vocab_size
        )
        n = d.accepted  # <= invalid
        generated = sum(len(ledger.outputs[k]) for k in range(c))
        emitted = P.truncate_emitted(tokens[:n] + [d.out_token], job.eos_token_id, job.max_new_tokens - generated)
        served.session, served.ahead = None, None  # (the mirror's path is not the drafter's any more)
        return SimpleNamespace(
            root=d.root,
            p=d.p,
            reveal=reveal,
            accepted=n,
            out_token=d.out_token,
            emitted=tuple(emitted),
            draft_faults=(),
        )

    async def take_draft(self, job_id: int, draft: tm.Draft, signature: bytes) -> tm.Verification:
        """Take in a Draft that reached this node other than over the link (a force move's calldata), checked,
        stored and verified exactly as if the drafter had sent it; its Verification (LinkRefused if refused)."""
        served = self.jobs[job_id]
        await self._on_draft(served, wire.signed_frame("draft", served.spec.domain, draft, signature))
        return served.ledger.verifications[draft.cycle][0]

    def answer(self, served: ServedJob, v: tm.Verification) -> tm.Verification:
        """The Verification to sign for a checked one: itself. A hook for a dishonest server in the tests (one whose
        answer the drafter's rule check must refuse); the node never overrides it."""
        return v

    def _ahead(self, served: ServedJob) -> None:
        try:
            served.ahead.run(served.session, served.ledger.outputs)
            guess = served.ahead.guess
            if guess is not None:  # the signature too is computed while the drafter drafts (`ServedJob.presigned`)
                c, tokens, q, result = guess[1:5]
                ledger = served.ledger
                draft = tm.Draft(served.spec.job_id, c, ledger.state(c - 1), result.root, tokens, q, ledger.salt)
                v = _verification(draft, result)
                served.presigned = (v, tm.sign(served.spec.domain, v, self.account.key))
        except Exception:  # a guess that fails costs nothing but the guess
            log.exception("job %d: verifying ahead failed; verifying each draft as it comes", served.spec.job_id)
            served.ahead = None
            served.session = None  # rebuilt from the ledger at the next draft

    def _sign_settlement(self, served: ServedJob) -> None:
        ledger = served.ledger
        settlement = ledger.final_settlement()
        sig = tm.sign(served.spec.domain, settlement, self.account.key)
        ledger.save(settlement, sig, "verifier", "sent")
        ledger.settlement, ledger.settlement_sigs["verifier"] = settlement, sig

    def _session_at(self, served: ServedJob, c: int) -> VerifySession:
        s = served.session
        if s is not None and s.cycle == c:
            return s
        ledger, job = served.ledger, served.spec.job
        s = served.session_class(self.target_model, job, served.seed, draft_model=self.draft_model, salt=ledger.salt)
        served.session = resume_verify_session(s, list(job.prompt) + ledger.tokens, c, ledger.generated)
        return served.session

    async def _on_settlement(self, served: ServedJob, frame: dict) -> list[dict]:
        spec, ledger = served.spec, served.ledger
        msg, sig = wire.parse_signed(frame, spec.domain, tm.Settlement, self.limits)
        served.heard = time.monotonic()
        async with served.lock:
            if ledger.settlement is None:
                raise LinkRefused(f"job {spec.job_id} has not ended; there is nothing to settle")
            s = ledger.settlement
            try:
                tm.check_settlement(
                    spec.domain,
                    msg,
                    sig,
                    signer=spec.drafter,
                    job_id=spec.job_id,
                    cycles=s.cycles,
                    state=s.state,
                    tokens_out=s.tokens_out,
                )
            except tm.MessageRejected as exc:
                raise LinkRefused(str(exc)) from None
            if ledger.save(msg, sig, "drafter", "received"):
                ledger.settlement_sigs["drafter"] = sig
                self._publish(served, None)
        return [{"type": "settled", "job": spec.job_id}]

    # ------------------------------------------------------------------ requesters

    def _token_frames(self, served: ServedJob, start: int) -> list[dict]:
        ledger, job_id = served.ledger, served.spec.job_id
        frames = [
            {"type": "tokens", "job": job_id, "cycle": c, "tokens": list(ledger.outputs[c])}
            for c in range(start, ledger.next_cycle)
        ]
        if len(ledger.settlement_sigs) == 2:
            frames.append({"type": "end", "job": job_id, "tokens_out": ledger.settlement.tokens_out})
        return frames

    def _publish(self, served: ServedJob, cycle: int | None) -> None:
        """Queue cycle `cycle`'s tokens (None: the end of the job) for every subscriber; drop one too slow to read."""
        frames = self._token_frames(served, cycle if cycle is not None else served.ledger.next_cycle)
        frames = frames[:1] if cycle is not None else frames
        for queue in list(served.subscribers):
            for frame in frames:
                try:
                    queue.put_nowait(frame)
                except asyncio.QueueFull:  # its writer drains what is queued, then closes
                    served.subscribers.discard(queue)
                    break

    async def _feed(self, ws, served: ServedJob, start: int) -> None:
        """A subscriber's writer: the cycles so far from `start`, then each as it is verified, then the end."""
        queue: asyncio.Queue = asyncio.Queue(self.limits.max_subscriber_backlog)
        async with served.lock:  # no cycle lands between the backlog and the subscription
            backlog = self._token_frames(served, start)
            served.subscribers.add(queue)
        try:
            for frame in backlog:
                await ws.send(wire.encode(frame))
                if frame["type"] == "end":
                    return
            while True:
                if queue not in served.subscribers and queue.empty():
                    await ws.close(1013, "subscriber too slow")
                    return
                frame = await queue.get()
                await ws.send(wire.encode(frame))
                if frame["type"] == "end":
                    return
        except ConnectionClosed:
            pass
        finally:
            served.subscribers.discard(queue)

    def _transcript(self, served: ServedJob) -> dict:
        ledger, domain = served.ledger, served.spec.domain
        return {
            "type": "transcript",
            "job": served.spec.job_id,
            "drafts": [wire.signed_frame("draft", domain, *ledger.drafts[c]) for c in sorted(ledger.drafts)],
            "verifications": [
                wire.signed_frame("verification", domain, *ledger.verifications[c])
                for c in sorted(ledger.verifications)
            ],
            "settlements": {
                who: wire.signed_frame("settlement", domain, ledger.settlement, sig)
                for who, sig in ledger.settlement_sigs.items()
            },
        }


def _verification(draft: tm.Draft, result) -> tm.Verification:
    """The Verification of an engine result on `draft` (the cycle chained onto its prevState)."""
    return tm.Verification.build(draft, result.p, result.reveal, result.accepted, result.out_token)
