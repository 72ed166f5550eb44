"""The link's wire format: one JSON object per WebSocket text frame, with explicit limits.

A frame is `{"type": T, ...}`. The signed messages travel as their full EIP-712 typed data (so the receiver checks
the domain, chain id and market included, with `transcript_messages.from_typed_data`) plus the 65-byte signature:

    verifier  -> peer       challenge {nonce}: the first frame of every connection, before the peer's hello
    drafter   -> verifier   hello {job, role, signature}, draft {typed, signature}, settlement {typed, signature}
    requester -> verifier   hello {job, role}, subscribe {job, from}, fetch {job}
    verifier  -> peer       welcome {job, next_cycle, verification, settlement}, verification {typed, signature},
                            settlement {typed, signature}, settled {job}, tokens {job, cycle, tokens},
                            end {job, tokens_out}, transcript {job, drafts, verifications, settlements},
                            error {reason}

Everything a peer sends is hostile: a frame that is not JSON, not an object, of an unknown type, or over the
limits is refused with one `LinkRefused` line, which the server sends as an `error` frame and as the close reason.

A drafter's hello is signed (EIP-191, `hello_text`) over the connection's fresh 32-byte nonce, the job, the chain id
and the settlement contract, and the verifier checks that it recovers to the job's drafter on chain: anyone may
connect, but only the drafter may send the job's Drafts, and a hello seen on one connection (or for another job,
chain or market) is worth nothing on the next. A requester's hello is not signed: it only reads.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.messages import encode_defunct

from node import protocol as P
from node.chain import transcript_messages as tm

LINK_VERSION = 2  # the protocol version of the messages (transcript_messages.DOMAIN_VERSION)
CLOSE_INVALID = 1007  # RFC 6455: a frame whose data is not what the protocol allows (not JSON, not a known frame)
CLOSE_POLICY = 1008  # a refused message (bad signature, stale, wrong state)
CLOSE_TOO_BIG = 1009  # over max_message_bytes (the websockets library closes with it on its own)
ROLES = ("drafter", "requester")
FRAME_TYPES = frozenset(
    {"challenge", "hello", "draft", "settlement", "subscribe", "fetch", "welcome", "verification", "settled"}
    | {"tokens", "end", "transcript", "error"}
)


@dataclass(frozen=True)
class Limits:
    """What a link endpoint accepts; both sides refuse anything beyond, before parsing it further."""

    max_message_bytes: int = 64 * 1024  # one frame from a peer (a γ = 16 Draft is about 3 KB)
    max_gamma: int = P.MAX_GAMMA  # proposals per cycle
    max_tokens: int = 4096  # per job: bounds a job's cycles, its store rows and its transcript
    max_transcript_bytes: int = 64 * 1024 * 1024  # what a client takes in one `transcript` frame
    hello_timeout_s: float = 10.0  # a connection that has not said who it is by then is closed (slowloris)
    idle_timeout_s: float = 600.0  # a connection silent that long is closed
    max_subscriber_backlog: int = 1024  # frames queued for one slow subscriber before it is dropped
    # open connections the endpoint holds for one remote host, and in all: a peer that opens sockets faster than
    # the hello timeout closes them (or subscribes to streams without end) runs into these, not into the memory
    # or the file descriptors that the endpoint's other jobs need
    max_connections_per_host: int = 64
    max_connections: int = 1024


class LinkRefused(ValueError):
    """A frame or message the receiver refuses; `code` is the WebSocket close code that goes with it."""

    def __init__(self, reason: str, code: int = CLOSE_POLICY):
        super().__init__(reason)
        self.code = code


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def message_json(msg) -> dict:
    """A message's EIP-712 message dict with bytes as 0x-hex: what the store and the wire keep."""
    return _jsonable(msg.message())


def encode(frame: dict) -> str:
    return json.dumps(_jsonable(frame), separators=(",", ":"))


def decode(text: Any, limits: Limits) -> dict:
    """A peer's frame as a dict, refused unless it is a JSON object of a known type within the size limit."""
    if isinstance(text, bytes):
        raise LinkRefused("binary frames are not part of the link; send JSON text", CLOSE_INVALID)
    if len(text.encode()) > limits.max_message_bytes:
        raise LinkRefused(f"frame of {len(text.encode())} bytes exceeds {limits.max_message_bytes}", CLOSE_TOO_BIG)
    try:
        frame = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise LinkRefused(f"malformed JSON: {exc}", CLOSE_INVALID) from None
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise LinkRefused('a frame is a JSON object with a string "type"', CLOSE_INVALID)
    if frame["type"] not in FRAME_TYPES:
        raise LinkRefused(f"unknown frame type {frame['type'][:40]!r}", CLOSE_INVALID)
    return frame


def field(frame: dict, name: str, kind: type = int) -> Any:
    """A required field of `kind` (an int: a non-negative integer, not a bool)."""
    value = frame.get(name)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise LinkRefused(f"{frame['type']}: {name} must be a non-negative integer", CLOSE_INVALID)
    if kind is not int and not isinstance(value, kind):
        raise LinkRefused(f"{frame['type']}: {name} must be a {kind.__name__}", CLOSE_INVALID)
    return value


def signed_frame(kind: str, domain: tm.Domain, msg, signature: bytes) -> dict:
    return {"type": kind, "typed": _jsonable(tm.typed_data(domain, msg)), "signature": signature}


def parse_signed(frame: dict, domain: tm.Domain, cls, limits: Limits):
    """(message, 65-byte signature) of a signed frame: typed data under `domain` of type `cls`, γ within limits."""
    try:
        msg = tm.from_typed_data(frame.get("typed"), domain)
        signature = tm.canonical_signature(frame.get("signature"))
    except tm.MessageRejected as exc:
        raise LinkRefused(f"{frame['type']}: {exc}") from None
    if not isinstance(msg, cls):
        raise LinkRefused(f"a {frame['type']} frame carries a {msg.PRIMARY}, not a {cls.PRIMARY}")
    width = len(getattr(msg, "tokens", getattr(msg, "p", ())))
    if width > limits.max_gamma:
        raise LinkRefused(f"{msg.PRIMARY} has {width} proposals, this endpoint takes at most {limits.max_gamma}")
    return msg, signature


def stored_frame(kind: str, domain: tm.Domain, stored) -> dict:
    """The signed frame of a message kept in the store (`StoredLinkMessage`), to resend or serve it."""
    cls = tm.MESSAGE_TYPES[stored.kind]
    return signed_frame(kind, domain, cls.from_message(stored.message), stored.signature)


# ------------------------------------------------------------------ the signed hello

NONCE_BYTES = 32


def new_nonce() -> bytes:
    return os.urandom(NONCE_BYTES)


def hello_text(domain: tm.Domain, job_id: int, nonce: bytes) -> str:
    """What a drafter signs (EIP-191 personal message) to say it is job `job_id`'s drafter on this connection."""
    return (
        f"verispec link hello v{LINK_VERSION}\nrole: drafter\njob: {job_id}\nchain: {domain.chain_id}\n"
        f"contract: {domain.verifying_contract.lower()}\nnonce: 0x{nonce.hex()}"
    )


def sign_hello(domain: tm.Domain, job_id: int, nonce: bytes, private_key) -> bytes:
    return bytes(Account.sign_message(encode_defunct(text=hello_text(domain, job_id, nonce)), private_key).signature)


def hello_signer(domain: tm.Domain, job_id: int, nonce: bytes, signature) -> str:
    """The address that signed a drafter's hello on the connection of `nonce`; LinkRefused when it does not recover."""
    try:
        sig = tm.canonical_signature(signature)
        return Account.recover_message(encode_defunct(text=hello_text(domain, job_id, nonce)), signature=sig)
    except tm.MessageRejected as exc:
        raise LinkRefused(f"hello: {exc}") from None
    except Exception as exc:  # eth-keys raises BadSignature and friends for a point off the curve
        raise LinkRefused(f"hello: the signature does not recover: {exc}") from None


def challenge_nonce(frame: dict) -> bytes:
    """The nonce of a verifier's `challenge` frame (what the peer's hello must sign)."""
    if frame.get("type") != "challenge" or not isinstance(frame.get("nonce"), str):
        raise LinkRefused("the verifier's first frame must be a challenge with a nonce", CLOSE_INVALID)
    try:
        nonce = bytes.fromhex(frame["nonce"].removeprefix("0x"))
    except ValueError:
        raise LinkRefused("challenge: the nonce is not hex", CLOSE_INVALID) from None
    if len(nonce) != NONCE_BYTES:
        raise LinkRefused(f"challenge: the nonce is {len(nonce)} bytes, not {NONCE_BYTES}", CLOSE_INVALID)
    return nonce
