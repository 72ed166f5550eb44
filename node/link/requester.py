"""The requester's side of the transcript link: subscribe to a job's tokens, fetch and check its signed transcript.

The stream is a convenience (tokens as they are verified); the transcript is the evidence: `check_transcript`
checks every signature, the state chain from the genesis to the co-signed Settlement, and the accept rule of every
cycle (pure math, `job.check_cycle`), and returns the tokens it proves, which the stream must equal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from websockets.asyncio.client import connect

from node import protocol as P
from node.chain import transcript_messages as tm
from node.link import wire
from node.link.job import TranscriptJob, check_cycle, ends_job
from node.link.wire import Limits, LinkRefused


@dataclass(frozen=True)
class CheckedTranscript:
    tokens: list[int]
    cycles: int
    state: bytes
    settled: bool  # a Settlement signed by both parties ends it


async def _session(uri: str, job_id: int, limits: Limits, max_size: int):
    ws = await connect(uri, max_size=max_size, open_timeout=10)
    wire.challenge_nonce(wire.decode(await ws.recv(), limits))  # a requester's hello is not signed: it only reads
    await ws.send(wire.encode({"type": "hello", "job": job_id, "role": "requester"}))
    welcome = wire.decode(await ws.recv(), limits)
    if welcome["type"] != "welcome":
        await ws.close()
        raise LinkRefused(f"job {job_id}: {welcome.get('reason', welcome['type'])}")
    return ws


async def stream_tokens(
    uri: str,
    job_id: int,
    on_tokens: Callable[[int, list[int]], None] | None = None,
    limits: Limits | None = None,
    timeout_s: float = 600.0,
) -> list[int]:
    """Every token of job `job_id` from cycle 0, as the verifier verifies them, until the job is settled."""
    limits = limits or Limits()
    ws = await _session(uri, job_id, limits, limits.max_message_bytes)
    tokens: list[int] = []
    try:
        await ws.send(wire.encode({"type": "subscribe", "job": job_id, "from": 0}))
        expected = 0
        while True:
            frame = wire.decode(await asyncio.wait_for(ws.recv(), timeout_s), limits)
            if frame["type"] == "end":
                return tokens
            if frame["type"] != "tokens":
                raise LinkRefused(f"job {job_id}: unexpected {frame['type']} frame in the stream")
            if wire.field(frame, "cycle") != expected:
                raise LinkRefused(f"job {job_id}: the stream skipped from cycle {expected} to {frame['cycle']}")
            cycle_tokens = [int(t) for t in wire.field(frame, "tokens", list)]
            tokens.extend(cycle_tokens)
            expected += 1
            if on_tokens is not None:
                on_tokens(frame["cycle"], cycle_tokens)
    finally:
        await ws.close()


async def fetch_transcript(uri: str, job_id: int, limits: Limits | None = None) -> dict:
    """The job's whole signed transcript as the verifier serves it (a `transcript` frame)."""
    limits = limits or Limits()
    ws = await _session(uri, job_id, limits, limits.max_transcript_bytes)
    try:
        await ws.send(wire.encode({"type": "fetch", "job": job_id}))
        big = Limits(max_message_bytes=limits.max_transcript_bytes)
        frame = wire.decode(await ws.recv(), big)
        if frame["type"] != "transcript":
            raise LinkRefused(f"job {job_id}: {frame.get('reason', frame['type'])}")
        return frame
    finally:
        await ws.close()


def check_transcript(spec: TranscriptJob, transcript: dict, limits: Limits | None = None) -> CheckedTranscript:
    """The tokens a fetched transcript proves, once every message in it checks out; LinkRefused otherwise."""
    limits, domain = limits or Limits(), spec.domain
    drafts = [wire.parse_signed(f, domain, tm.Draft, limits) for f in wire.field(transcript, "drafts", list)]
    verifications = [
        wire.parse_signed(f, domain, tm.Verification, limits) for f in wire.field(transcript, "verifications", list)
    ]
    state, reveal, tokens, salt = None, spec.head, [], None
    try:
        for c, ((draft, dsig), (v, vsig)) in enumerate(zip(drafts, verifications)):
            if c == 0:
                salt, state = draft.salt, P.transcript_genesis(spec.job_id, draft.salt)
            tm.check_draft(
                domain,
                draft,
                dsig,
                drafter=spec.drafter,
                job_id=spec.job_id,
                cycle=c,
                gamma=spec.job.gamma,
                prev_state=state,
                salt=salt,
            )
            tm.check_verification(domain, v, vsig, verifier=spec.verifier, draft=draft)
            emitted = check_cycle(spec, draft, v, reveal, len(tokens))
            tokens.extend(emitted)
            state, reveal = v.state, v.reveal
            if ends_job(spec, emitted, len(tokens)) and c + 1 < len(verifications):
                raise LinkRefused(f"the transcript goes on after the job ended at cycle {c}")
    except tm.MessageRejected as exc:
        raise LinkRefused(f"transcript of job {spec.job_id}: {exc}") from None
    cycles = min(len(drafts), len(verifications))
    settlements = wire.field(transcript, "settlements", dict)
    signers = {"drafter": spec.drafter, "verifier": spec.verifier}
    for who, frame in settlements.items():
        s, sig = wire.parse_signed(frame, domain, tm.Settlement, limits)
        if who not in signers:
            raise LinkRefused(f"a settlement signature by {who!r}")
        try:
            tm.check_settlement(
                domain,
                s,
                sig,
                signer=signers[who],
                job_id=spec.job_id,
                cycles=cycles,
                state=state,
                tokens_out=len(tokens),
            )
        except tm.MessageRejected as exc:
            raise LinkRefused(f"transcript of job {spec.job_id}: {exc}") from None
    return CheckedTranscript(tokens, cycles, state, set(settlements) == set(signers))
