"""The transcript link (node/link): real bundled models, real WebSockets on loopback, real SQLite stores.

Run as a script (`python tests/test_transcript_link.py verifier|drafter CONFIG.json`) it is one party of a job in
its own process, so that the kill -9 test can kill it mid-job.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from eth_account import Account

from node import BUNDLED_DRAFT, BUNDLED_TARGET, PROJECT_ROOT
from node import protocol as P
from node.chain import transcript_messages as tm
from node.chain.enums import NO_EOS
from node.decoding.messages import DecodingJob
from node.jobs import chaindata
from node.jobs.sessions import chain_head, verifier_seed
from node.link import wire
from node.link.drafter import DrafterLink
from node.link.job import TranscriptJob, check_cycle
from node.link.requester import check_transcript, fetch_transcript, stream_tokens
from node.link.verifier import LinkServer
from node.store import NodeStore
from tests.chainutil import VOCAB, advance, env, escrow_for, events, job_request, submit_job, transact  # noqa: F401

# in-process nodes run whole jobs on a chain (models, many blocks): not in `make test-fast`
pytestmark = pytest.mark.node_jobs

DRAFTER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"  # anvil's accounts 1 and 2
VERIFIER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdee365a"
OTHER_KEY = "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"
DOMAIN = tm.Domain(31337, "0x5FbDB2315678afecb367f032d93F642f64180aa3")
PROMPT = "def fibonacci(n):"


def load_models():
    import torch

    from node.decoding import loading
    from node.jobs.models import load_model

    torch.set_num_threads(1)
    draft = load_model(BUNDLED_DRAFT, torch.device("cpu"), torch.float32)
    target = load_model(BUNDLED_TARGET, torch.device("cpu"), torch.float32)
    prompt = loading.load_tokenizer(str(BUNDLED_TARGET))(PROMPT, add_special_tokens=False)["input_ids"]
    return draft, target, [int(t) for t in prompt], loading.vocab_size(target)


def make_spec(job_id: int, prompt, vocab: int, max_tokens: int = 16, gamma: int = 4) -> TranscriptJob:
    job = DecodingJob(job_id=job_id, prompt=tuple(prompt), max_new_tokens=max_tokens, gamma=gamma)
    drafter, verifier = Account.from_key(DRAFTER_KEY), Account.from_key(VERIFIER_KEY)
    head = chain_head(VERIFIER_KEY, job_id, max_tokens)
    return TranscriptJob(job, DOMAIN, drafter.address, verifier.address, head, vocab)


@pytest.fixture(scope="module")
def models():
    return load_models()


def serve_jobs(store_path, models, specs, limits=None, key=VERIFIER_KEY) -> LinkServer:
    draft, target, _, _ = models
    server = LinkServer(Account.from_key(key), NodeStore(store_path), target, draft, limits)
    for spec in specs:
        server.open_job(spec, verifier_seed(key, spec.job_id))
    return server


def drafter_link(store_path, models, spec, uri, key=DRAFTER_KEY, **kw) -> DrafterLink:
    return DrafterLink(Account.from_key(key), NodeStore(store_path), models[0], spec, uri, **kw)


def engine_tokens(models, spec, salt, key=VERIFIER_KEY):
    from node.decoding.decoder import SpeculativeDecoder

    draft, target, _, _ = models
    decoder = SpeculativeDecoder(target, draft, gamma=spec.job.gamma, verify_draft=True)
    seed = verifier_seed(key, spec.job_id)
    return decoder.generate(list(spec.job.prompt), spec.job.max_new_tokens, spec.job_id, seed, salt=salt).tokens


def kinds(store_path, role):
    rows = NodeStore(store_path).link_messages(7, role)
    return sorted((r.kind, r.position, r.direction) for r in rows), rows


# ------------------------------------------------------------------ the store


def test_a_v4_store_is_migrated_to_keep_signed_messages_and_a_second_message_for_a_position_is_refused(tmp_path):
    from node.store import SCHEMA_VERSION, IdempotencyConflict, StoredLinkMessage

    path = tmp_path / "node.db"
    NodeStore(path).save_job(7, "drafter", "active", {"x": 1})
    raw = sqlite3.connect(path)  # what a v4 store is: no link_messages (nor v6's poller_blocks, v7's job_salts)
    raw.execute("DROP TABLE job_salts")
    raw.execute("DROP TABLE link_messages")
    raw.execute("DROP TABLE poller_blocks")
    raw.execute("ALTER TABLE processed_logs DROP COLUMN block_number")
    raw.execute("PRAGMA user_version=4")
    raw.commit()
    raw.close()
    store = NodeStore(path)
    assert SCHEMA_VERSION == 7 and store.job(7, "drafter").params == {"x": 1}
    draft, sig = _draft0(None)
    row = StoredLinkMessage(7, "drafter", "Draft", 0, "drafter", wire.message_json(draft), sig, "sent")
    assert store.save_link_message(row) and not store.save_link_message(row)  # the same one again: kept once
    other, other_sig = _draft0(None, salt=12)
    with pytest.raises(IdempotencyConflict, match="another Draft 0 by drafter"):
        store.save_link_message(
            StoredLinkMessage(7, "drafter", "Draft", 0, "drafter", wire.message_json(other), other_sig, "sent")
        )
    assert NodeStore(path).link_messages(7, "drafter") == [row]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


# ------------------------------------------------------------------ an honest job


def test_honest_job_equals_the_engine_every_message_stored_and_the_stream_equals_the_transcript(models, tmp_path):
    spec = make_spec(7, models[2], models[3], max_tokens=24)

    async def main():
        server = serve_jobs(tmp_path / "v.db", models, [spec])
        host, port = await server.start()
        uri = f"ws://{host}:{port}"
        streamed: list[tuple[int, list[int]]] = []
        stream = asyncio.create_task(stream_tokens(uri, 7, lambda c, t: streamed.append((c, t))))
        await asyncio.sleep(0.2)
        link = drafter_link(tmp_path / "d.db", models, spec, uri)
        result = await link.run()
        tokens_streamed = await asyncio.wait_for(stream, 60)
        transcript = await fetch_transcript(uri, 7)
        await server.stop()
        return result, link, streamed, tokens_streamed, transcript, server.jobs[7].ahead.hits

    result, link, streamed, tokens_streamed, transcript, hits = asyncio.run(main())
    assert result.settled and result.refused is None and result.connections == 1
    checked = check_transcript(spec, transcript)
    assert checked.settled and checked.tokens == result.tokens and len(result.tokens) == 24
    # a transcript tampered with on the way is refused: a changed out token, a cycle left out
    tampered = json.loads(json.dumps(transcript))
    tampered["verifications"][1]["typed"]["message"]["outToken"] += 1
    with pytest.raises(wire.LinkRefused, match="state does not chain its cycle"):
        check_transcript(spec, tampered)
    shortened = {**transcript, "drafts": transcript["drafts"][:-1], "verifications": transcript["verifications"][:-1]}
    with pytest.raises(wire.LinkRefused, match=r"Settlement is for cycles \d+, expected"):
        check_transcript(spec, shortened)
    # the same job id, reveals and salt through the per-cycle engine: the same tokens, token for token, although
    # the verifier answered every cycle after the first from its guess of the draft (node/link/ahead.py)
    assert result.tokens == engine_tokens(models, spec, link.ledger.salt)
    assert hits == len(transcript["drafts"]) - 1
    assert tokens_streamed == checked.tokens and [c for c, _ in streamed] == list(range(checked.cycles))
    # every signed message in both stores, in the direction each node saw it, each one's signature its sender's
    n = checked.cycles
    for path, role, mine in ((tmp_path / "v.db", "verifier", "Verification"), (tmp_path / "d.db", "drafter", "Draft")):
        listing, rows = kinds(path, role)
        expected = [(k, c, "sent" if k == mine else "received") for k in ("Draft", "Verification") for c in range(n)]
        expected += [("Settlement", n, "received"), ("Settlement", n, "sent")]
        assert listing == sorted(expected)
        for row in rows:
            msg = tm.MESSAGE_TYPES[row.kind].from_message(row.message)
            assert (
                tm.recover(DOMAIN, msg, row.signature)
                == {"drafter": spec.drafter, "verifier": spec.verifier}[row.signer]
            )
    # the cycles settlement posts fold, from the genesis of the salt, to the state both signed
    from node.chain import transcript as TX

    cycles = [TX.Cycle.of(link.ledger.drafts[c][0], link.ledger.verifications[c][0]) for c in range(checked.cycles)]
    genesis = P.transcript_genesis(7, link.ledger.salt)
    assert P.state_chain(genesis, TX.cycle_leaves(cycles))[-1] == checked.state == link.ledger.settlement.state


def test_one_verifier_serves_four_concurrent_jobs_each_equal_to_the_engine(models, tmp_path):
    specs = [make_spec(job_id, models[2], models[3], max_tokens=12) for job_id in (21, 22, 23, 24)]

    async def main():
        server = serve_jobs(tmp_path / "v.db", models, specs)
        host, port = await server.start()
        links = [drafter_link(tmp_path / f"d{s.job_id}.db", models, s, f"ws://{host}:{port}") for s in specs]
        results = await asyncio.wait_for(asyncio.gather(*(link.run() for link in links)), 300)
        await server.stop()
        return links, results

    links, results = asyncio.run(main())
    for spec, link, result in zip(specs, links, results):
        assert result.settled and result.connections == 1
        assert result.tokens == engine_tokens(models, spec, link.ledger.salt)
    assert len({link.ledger.salt for link in links}) == 4  # every job its own salt


def test_a_wrong_guess_of_the_next_draft_puts_the_session_back_exactly(models):
    from node.decoding.messages import Draft as EngineDraft
    from node.decoding.scorer import VerifySession
    from node.link.ahead import MISSES, VerifyAhead

    draft_model, target, prompt, _ = models
    spec = make_spec(31, prompt, models[3])
    seed = verifier_seed(VERIFIER_KEY, 31)
    guessed, fresh = (VerifySession(target, spec.job, seed, draft_model=draft_model, salt=5) for _ in range(2))
    ahead = VerifyAhead(draft_model, spec.job)
    for miss in range(MISSES):
        ahead.run(guessed, {})
        tokens, q = ahead.guess[2:4]
        other = tokens[:-1] + ((tokens[-1] + 1) % models[3],)  # not the draft an honest drafter sends
        assert ahead.take(guessed, 0, other, q) is None and ahead.enabled == (miss + 1 < MISSES)
    real = EngineDraft(31, 0, other, q, q_rows=None)
    a, b = guessed.verify(0, real), fresh.verify(0, real)
    assert (a.p, a.accepted, a.out_token, a.emitted, a.reveal) == (b.p, b.accepted, b.out_token, b.emitted, b.reveal)
    ahead.run(guessed, {})
    assert ahead.guess is None  # disabled: no more guesses


# ------------------------------------------------------------------ on anvil: the job, head and endpoint from chain


def test_a_transcript_job_on_anvil_submit_accept_link_settle_finalize_in_four_transactions(
    models, tmp_path, chain, env
):
    from node.chain import transcript as TX
    from node.chain.keys import dev_account
    from node.decoding import loading
    from node.link.chain import EndpointError, endpoint_of, settle_call, transcript_spec

    a, w3, market = env.actors, env.w3, env.market
    drafter_key, verifier_key = dev_account(2).key, dev_account(3).key  # anvil's accounts 2 and 3: env's actors
    assert (Account.from_key(drafter_key).address, Account.from_key(verifier_key).address) == (a.drafter, a.verifier)
    tokenizer = loading.load_tokenizer(str(BUNDLED_TARGET))
    per_cycle = submit_job(env, prompt=PROMPT.encode(), maxTokens=16, eosToken=NO_EOS)
    with pytest.raises(chaindata.ChainDataError, match="not a transcript-mode job"):
        transcript_spec(w3, env.system, per_cycle, tokenizer)
    req = job_request(env, maxTokens=16, eosToken=NO_EOS)
    sent = [transact(w3, market.functions.submitTranscriptJob(req, PROMPT.encode()), a.requester, escrow_for(req))]
    job_id = market.functions.jobCount().call()
    with pytest.raises(chaindata.ChainDataError, match="not been accepted"):
        transcript_spec(w3, env.system, job_id, tokenizer)
    sent.append(transact(w3, market.functions.acceptJob(job_id, chain_head(verifier_key, job_id, 16)), a.verifier))
    with pytest.raises(EndpointError, match="no endpoint"):
        endpoint_of(env.registry, a.verifier)
    spec = transcript_spec(w3, env.system, job_id, tokenizer)
    assert spec.domain == tm.Domain(w3.eth.chain_id, env.system.transcript.address) and spec.vocab_size == VOCAB
    assert (spec.drafter, spec.verifier, spec.job.prompt) == (a.drafter, a.verifier, tuple(models[2]))

    async def main():
        server = serve_jobs(tmp_path / "v.db", models, [spec], key=verifier_key)
        host, port = await server.start()
        transact(w3, env.registry.functions.setEndpoint(f"ws://{host}:{port}"), a.verifier)  # once per verifier
        uri = endpoint_of(env.registry, a.verifier)
        stream = asyncio.create_task(stream_tokens(uri, job_id))
        link = drafter_link(tmp_path / "d.db", models, spec, uri, key=drafter_key)
        result = await link.run()
        streamed = await stream
        await server.stop()
        return result, link, streamed

    result, link, streamed = asyncio.run(main())
    assert result.settled and streamed == result.tokens
    assert result.tokens == engine_tokens(models, spec, link.ledger.salt, key=verifier_key)
    sent.append(transact(w3, settle_call(env.system.transcript, link.ledger), a.drafter))  # either party may
    advance(w3, env.params.challenge_window + 1)
    sent.append(transact(w3, market.functions.finalize(job_id), a.requester))
    # what the chain holds: the settled output is the streamed one, token for token, rebuilt from calldata alone
    settled = TX.read_settlement(w3, env.system.transcript, job_id)
    assert settled.output(NO_EOS, 16) == streamed and settled.salt == link.ledger.salt
    (paid,) = events(market, sent[-1], "JobFinalized")
    accepted = sum(
        min(v.accepted, len(out))  # the accepted proposals it emitted
        for (v, _), out in zip(link.ledger.verifications.values(), link.ledger.outputs.values())
    )
    assert paid.args.drafterPay == accepted * req["pricePerAcceptedToken"]
    fees = sum(e.args.amount for e in events(market, sent[-1], "AlphaFeePaid"))
    total = paid.args.drafterPay + paid.args.verifierPay + fees + paid.args.refund
    assert paid.args.verifierPay > 0 and total == escrow_for(req)
    # the job's own transactions: submit, accept, settle, finalize, whatever its length (per cycle: 2 a cycle more)
    assert len(sent) == 4 and all(r.status == 1 for r in sent)


# ------------------------------------------------------------------ a verifier that breaks the accept rule


def test_drafter_refuses_to_countersign_a_verification_the_rule_refutes(models, tmp_path):
    spec = make_spec(7, models[2], models[3])
    key = Account.from_key(VERIFIER_KEY)
    reveal = P.chain_reveal(verifier_seed(VERIFIER_KEY, 7), spec.job.chain_length, 0)
    drafts_seen = []

    async def lying_verifier(ws):  # a hostile peer: its signature and state chain are right, its accept count is not
        await ws.send(wire.encode({"type": "challenge", "nonce": wire.new_nonce()}))
        await ws.recv()
        await ws.send(
            wire.encode({"type": "welcome", "job": 7, "next_cycle": 0, "verification": None, "settlement": None})
        )
        async for text in ws:
            draft, _ = wire.parse_signed(json.loads(text), DOMAIN, tm.Draft, wire.Limits())
            drafts_seen.append(draft.cycle)
            p = [0] * len(draft.tokens)  # every proposal has probability 0, yet all are "accepted"
            v = tm.Verification.build(draft, p, reveal, len(p), 5)
            await ws.send(wire.encode(wire.signed_frame("verification", DOMAIN, v, tm.sign(DOMAIN, v, key.key))))

    async def main():
        from websockets.asyncio.server import serve

        async with serve(lying_verifier, "127.0.0.1", 0) as server:
            host, port = server.sockets[0].getsockname()[:2]
            first = await drafter_link(tmp_path / "d.db", models, spec, f"ws://{host}:{port}").run()
            again = await drafter_link(tmp_path / "d.db", models, spec, f"ws://{host}:{port}").run()  # a restart
        return first, again

    first, again = asyncio.run(main())
    assert first.refused is not None and "accepts 4 proposals; the rule accepts 0" in first.refused
    assert not first.settled and drafts_seen == [0]
    listing, _ = kinds(tmp_path / "d.db", "drafter")
    assert listing == [("Draft", 0, "sent"), ("Verification", 0, "received")]  # the evidence; no Draft 1
    assert again.refused == first.refused and again.connections == 0  # it never reconnects to continue
    salt = next(r for r in kinds(tmp_path / "d.db", "drafter")[1] if r.kind == "Draft").message["salt"]
    assert first.last_cosigned[:2] == (0, P.transcript_genesis(7, salt))  # the last good state: the genesis


def test_drafter_refuses_a_verification_not_signed_by_the_job_verifier_and_does_not_store_it(models, tmp_path):
    spec = make_spec(7, models[2], models[3])
    reveal = P.chain_reveal(verifier_seed(VERIFIER_KEY, 7), spec.job.chain_length, 0)

    async def impostor(ws):  # signs a rule-abiding answer, but with a key that is not the job's verifier
        await ws.send(wire.encode({"type": "challenge", "nonce": wire.new_nonce()}))
        await ws.recv()
        await ws.send(
            wire.encode({"type": "welcome", "job": 7, "next_cycle": 0, "verification": None, "settlement": None})
        )
        draft, _ = wire.parse_signed(json.loads(await ws.recv()), DOMAIN, tm.Draft, wire.Limits())
        p = [0] * len(draft.tokens)
        v = tm.Verification.build(draft, p, reveal, 0, 5)
        await ws.send(wire.encode(wire.signed_frame("verification", DOMAIN, v, tm.sign(DOMAIN, v, OTHER_KEY))))
        await ws.wait_closed()

    async def main():
        from websockets.asyncio.server import serve

        async with serve(impostor, "127.0.0.1", 0) as server:
            host, port = server.sockets[0].getsockname()[:2]
            with pytest.raises(wire.LinkRefused, match=r"signed by .* not the verifier"):
                await drafter_link(tmp_path / "d.db", models, spec, f"ws://{host}:{port}").run()

    asyncio.run(main())
    assert kinds(tmp_path / "d.db", "drafter")[0] == [("Draft", 0, "sent")]  # nothing unsigned by the verifier kept


# ------------------------------------------------------------------ hostile frames


def _hello(nonce: bytes, key=DRAFTER_KEY, job_id=7, domain=DOMAIN) -> dict:
    return {"type": "hello", "job": job_id, "role": "drafter", "signature": wire.sign_hello(domain, job_id, nonce, key)}


async def _raw(uri, frames, read=2, hello=_hello, close=False):
    """Send `frames` (str or bytes) after a hello for job 7 (`hello(nonce)`: the hello frame for the connection's
    challenge); return (frames received, close code, close reason)."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    got = []
    async with connect(uri, max_size=None) as ws:
        nonce = wire.challenge_nonce(json.loads(await ws.recv()))
        await ws.send(wire.encode(hello(nonce)))
        try:
            got.append(json.loads(await ws.recv()))
        except ConnectionClosed:
            return got, ws.close_code, ws.close_reason
        try:
            for frame in frames:
                await ws.send(frame)
            for _ in range(read):
                got.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
        except ConnectionClosed:
            pass
        if close:  # (a peer the server answered: it closes itself)
            await ws.close()
        await asyncio.wait_for(ws.wait_closed(), 10)
        return got, ws.close_code, ws.close_reason


async def _half_frame(host, port):
    """A WebSocket handshake, then a text frame header announcing 200 bytes and only 10 of them: (seconds until the
    server closed the connection, what it sent)."""
    import base64

    reader, writer = await asyncio.open_connection(host, port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    assert b" 101 " in await reader.readuntil(b"\r\n\r\n")
    writer.write(bytes([0x81, 0x80 | 126]) + (200).to_bytes(2, "big") + os.urandom(4) + b"x" * 10)
    await writer.drain()
    start = time.monotonic()
    data = await asyncio.wait_for(reader.read(), 30)  # to the end of the stream: the server closed it
    writer.close()
    return time.monotonic() - start, data


async def _half_frame_after_hello(uri):
    """A drafter that says a signed hello, then sends a frame header announcing 200 bytes and only 10 of them:
    (seconds until the server closed the connection, the close reason)."""
    from websockets.asyncio.client import connect

    async with connect(uri) as ws:
        await ws.send(wire.encode(_hello(wire.challenge_nonce(json.loads(await ws.recv())))))
        assert json.loads(await ws.recv())["type"] == "welcome"
        ws.transport.write(bytes([0x81, 0x80 | 126]) + (200).to_bytes(2, "big") + os.urandom(4) + b"x" * 10)
        start = time.monotonic()
        await asyncio.wait_for(ws.wait_closed(), 30)
        return time.monotonic() - start, ws.close_reason


def _draft0(spec, key=DRAFTER_KEY, domain=DOMAIN, job_id=7, salt=11, tokens=(1, 2, 3, 4)):
    draft = tm.Draft.build(job_id, 0, P.transcript_genesis(job_id, salt), list(tokens), [P.WAD // 2] * 4, salt)
    return draft, tm.sign(domain, draft, key)


def test_forged_replayed_malformed_and_oversize_messages_are_refused_and_the_server_serves_on(models, tmp_path):
    spec, spec9 = make_spec(7, models[2], models[3]), make_spec(9, models[2], models[3])
    limits = wire.Limits(max_message_bytes=16 * 1024, hello_timeout_s=1.0, idle_timeout_s=4.0)
    n = tm.SECP256K1_N

    async def main():
        server = serve_jobs(tmp_path / "v.db", models, [spec, spec9], limits)
        host, port = await server.start()
        uri = f"ws://{host}:{port}"
        out = {}
        d, _ = _draft0(spec)
        out["forged"] = await _raw(
            uri, [wire.encode(wire.signed_frame("draft", DOMAIN, d, tm.sign(DOMAIN, d, OTHER_KEY)))]
        )
        d8, s8 = _draft0(spec, job_id=8)  # the drafter's real signature, from another job
        out["other job"] = await _raw(uri, [wire.encode(wire.signed_frame("draft", DOMAIN, d8, s8))])
        other_chain = tm.Domain(1, DOMAIN.verifying_contract)
        dc, sc = _draft0(spec, domain=other_chain)
        out["other chain"] = await _raw(uri, [wire.encode(wire.signed_frame("draft", other_chain, dc, sc))])
        other_market = tm.Domain(DOMAIN.chain_id, "0x" + "22" * 20)
        dm, sm = _draft0(spec, domain=other_market)
        frame = wire.signed_frame("draft", DOMAIN, dm, sm)  # claims this market, signed for another
        out["other market"] = await _raw(uri, [wire.encode(frame)])
        d0, s0 = _draft0(spec)
        s_value = int.from_bytes(s0[32:64], "big")
        high_s = s0[:32] + (n - s_value).to_bytes(32, "big") + bytes([55 - s0[64]])  # the same signature, malleated
        out["high s"] = await _raw(uri, [wire.encode(wire.signed_frame("draft", DOMAIN, d0, high_s))])
        d1 = tm.Draft.build(7, 1, P.transcript_genesis(7, 11), [1, 2, 3, 4], [P.WAD // 2] * 4, 11)
        out["out of order"] = await _raw(
            uri, [wire.encode(wire.signed_frame("draft", DOMAIN, d1, tm.sign(DOMAIN, d1, DRAFTER_KEY)))]
        )
        # signed by the drafter (job 9), one token past the vocabulary: verified as per cycle, p = 0 from there
        do, so = _draft0(spec, job_id=9, tokens=(1, 2, models[3], 4))
        oov = {"hello": lambda nonce: _hello(nonce, job_id=9), "read": 1, "close": True}
        out["oov draft"] = do
        out["out of vocabulary"] = await _raw(uri, [wire.encode(wire.signed_frame("draft", DOMAIN, do, so))], **oov)
        # the hello: signed by another key; replayed from an earlier connection; signed for another job, chain or
        # market; unsigned; and a requester (whose hello is not signed) sending a Draft
        out["hello by another key"] = await _raw(uri, [], hello=lambda nonce: _hello(nonce, key=OTHER_KEY))
        from websockets.asyncio.client import connect

        async with connect(uri) as ws:  # the drafter's own connection, which an eavesdropper records
            seen = _hello(wire.challenge_nonce(json.loads(await ws.recv())))
            await ws.send(wire.encode(seen))
            out["honest hello"] = json.loads(await ws.recv())
        out["replayed hello"] = await _raw(uri, [], hello=lambda nonce: seen)
        out["hello for job 8"] = await _raw(uri, [], hello=lambda nonce: {**_hello(nonce, job_id=8), "job": 7})
        out["hello for chain 1"] = await _raw(
            uri, [], hello=lambda nonce: _hello(nonce, domain=tm.Domain(1, DOMAIN.verifying_contract))
        )
        out["hello unsigned"] = await _raw(uri, [], hello=lambda nonce: {"type": "hello", "job": 7, "role": "drafter"})
        as_requester = {"hello": lambda nonce: {**_hello(nonce), "role": "requester"}}
        relayed = wire.encode(wire.signed_frame("draft", DOMAIN, d0, s0))
        out["requester drafts"] = await _raw(uri, [relayed], **as_requester)
        out["not json"] = await _raw(uri, ["{not json"])
        out["not a frame"] = await _raw(uri, ["[1, 2]"])
        out["binary"] = await _raw(uri, [b"\x00\x01"])
        out["oversize"] = await _raw(uri, [json.dumps({"type": "draft", "pad": "x" * 20000})])
        start = time.monotonic()
        from websockets.asyncio.client import connect

        async with connect(uri) as ws:  # slowloris: connects, never says hello
            await asyncio.wait_for(ws.wait_closed(), 10)
            out["silent"] = (ws.close_code, ws.close_reason, time.monotonic() - start)
        # after all that, an honest drafter's job goes through on the same server, while a slowloris peer sends
        # half a frame and then nothing
        result, out["half frame"], out["half frame after hello"] = await asyncio.gather(
            drafter_link(tmp_path / "d.db", models, spec, uri).run(),
            _half_frame(host, port),
            _half_frame_after_hello(uri),
        )
        await server.stop()
        return out, result, server.refused

    out, result, refused = asyncio.run(main())
    for case, needle in [
        ("forged", "signed by"),
        ("other job", "job 8, not job 7"),
        ("other chain", "not this market's"),
        ("other market", "signed by"),
        ("high s", "not canonical"),
        ("out of order", "stale or out of order"),
        ("hello by another key", f"not job 7's drafter {Account.from_key(DRAFTER_KEY).address}"),
        ("replayed hello", "not job 7's drafter"),
        ("hello for job 8", "not job 7's drafter"),
        ("hello for chain 1", "not job 7's drafter"),
        ("hello unsigned", "hello: "),
        ("requester drafts", "a requester does not send draft frames"),
    ]:
        got, code, reason = out[case]
        assert got[-1]["type"] == "error" and needle in got[-1]["reason"], (case, got[-1])
        assert code == wire.CLOSE_POLICY and got[-1]["reason"].startswith(reason), (case, code, reason)
    got, _, _ = out["out of vocabulary"]  # answered, and the answer follows the rule the drafter re-runs
    v, vsig = wire.parse_signed(got[1], DOMAIN, tm.Verification, limits)
    do = out["oov draft"]
    tm.check_verification(DOMAIN, v, vsig, verifier=Account.from_key(VERIFIER_KEY).address, draft=do)
    emitted = check_cycle(spec9, do, v, spec9.head, 0)
    assert v.p[2:] == (0, 0) and v.accepted <= 2 and list(emitted) == [1, 2][: v.accepted] + [v.out_token]
    assert v.out_token < models[3]
    for case in ("not json", "not a frame", "binary"):
        assert out[case][1] == wire.CLOSE_INVALID, (case, out[case])
    assert "malformed JSON" in out["not json"][2]
    assert out["oversize"][1] == wire.CLOSE_TOO_BIG
    code, reason, waited = out["silent"]
    assert code == wire.CLOSE_POLICY and "no hello within 1 s" in reason and waited < 5
    assert result.settled and len(result.tokens) == 16
    waited, data = out["half frame"]
    assert b"no hello within 1 s" in data and waited < 15  # its connection closed; the honest job was not stalled
    waited, reason = out["half frame after hello"]  # the same after a hello: the idle limit closes it
    assert "idle for 4 s" in reason and 3 < waited < 15
    assert not any(
        r.kind == "Draft" and r.message["salt"] == 11 for r in NodeStore(tmp_path / "v.db").link_messages(7, "verifier")
    )
    assert len(refused) >= 17
    assert out["honest hello"]["type"] == "welcome"
    for case in ("hello by another key", "replayed hello", "hello for job 8", "hello for chain 1", "hello unsigned"):
        assert [f["type"] for f in out[case][0]] == ["error"], case  # refused before any welcome


# ------------------------------------------------------------------ a dropped connection (no process dies)


async def _dropping_proxy(port: int):
    """A TCP proxy to 127.0.0.1:`port`: (its port, a function that cuts every connection through it now, abruptly:
    a reset, not a WebSocket close)."""
    live: list[asyncio.StreamWriter] = []

    async def pipe(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()

    async def handle(reader, writer):
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        live.extend([writer, up_writer])
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)

    def cut() -> int:
        for writer in live:
            writer.transport.abort()
        n, live[:] = len(live), []
        return n // 2

    return server, server.sockets[0].getsockname()[1], cut


def test_a_dropped_connection_reconnects_and_resumes_from_the_last_cosigned_state(models, tmp_path):
    spec = make_spec(7, models[2], models[3], max_tokens=48)
    other = make_spec(8, models[2], models[3], max_tokens=16)  # a second job on the same server, not cut

    async def main():
        server = serve_jobs(tmp_path / "v.db", models, [spec, other])
        host, port = await server.start()
        proxy, proxy_port, cut = await _dropping_proxy(port)
        link = drafter_link(tmp_path / "d.db", models, spec, f"ws://127.0.0.1:{proxy_port}", retry_delay_s=0.05)
        job = asyncio.create_task(link.run())
        second = asyncio.create_task(drafter_link(tmp_path / "d8.db", models, other, f"ws://{host}:{port}").run())
        while len(server.jobs[7].ledger.verifications) < 3 and not job.done():
            await asyncio.sleep(0.02)
        at_cut = len(link.ledger.outputs)
        cuts = cut()
        result, result8 = await asyncio.wait_for(asyncio.gather(job, second), 240)
        proxy.close()
        await server.stop()
        return result, result8, at_cut, cuts

    result, result8, at_cut, cuts = asyncio.run(main())
    assert cuts == 1 and 1 <= at_cut < len(result.tokens)  # cut mid-job
    assert result.settled and result.connections == 2
    assert result.tokens == engine_tokens(models, spec, _salt(tmp_path / "d.db"))  # the job as if never cut
    assert result8.settled and len(result8.tokens) == 16  # the other job went on
    listing, _ = kinds(tmp_path / "d.db", "drafter")
    cycles = max(c for k, c, _ in listing if k == "Draft") + 1
    # one Draft and one Verification a cycle: nothing was signed twice across the reconnect
    assert sorted(x[:2] for x in listing) == sorted(
        [("Draft", c) for c in range(cycles)]
        + [("Verification", c) for c in range(cycles)]
        + [("Settlement", cycles)] * 2
    )
    assert [x[:2] for x in listing] == [x[:2] for x in kinds(tmp_path / "v.db", "verifier")[0]]


def _salt(path) -> int:
    return next(r for r in NodeStore(path).link_messages(7, "drafter") if r.kind == "Draft").message["salt"]


# ------------------------------------------------------------------ the CLI


@pytest.mark.node_processes
def test_cli_serve_verifier_listen_publishes_its_endpoint_and_bad_link_options_get_one_line(tmp_path):
    from node.chain.anvil import free_port
    from tests.test_cli import (
        DRAFTER,
        REQUESTER,
        VERIFIER,
        _serve,
        _stop,
        chain_with_drafter_and_verifier,
        clean_error,
        cli,
        ok,
    )
    from tests.transcript_nodes import chain_of, endpoint_published, wait_for

    verifier = ("serve", "verifier", "--model", BUNDLED_TARGET, "--draft-model", BUNDLED_DRAFT)
    clean_error(
        cli(*verifier, "--dev-account", VERIFIER, "--listen", "nonsense", home=tmp_path), "--listen must be HOST:PORT"
    )
    drafter = ("serve", "drafter", "--model", BUNDLED_DRAFT, "--target-model", BUNDLED_TARGET, "--dev-account", DRAFTER)
    clean_error(cli(*drafter, "--listen", "127.0.0.1:9000", home=tmp_path), "--listen is a verifier's option")
    silence = "--link-silence is a drafter's or verifier's option"
    clean_error(cli(*verifier, "--dev-account", VERIFIER, "--link-silence", "0", home=tmp_path), silence)
    referee = ("serve", "referee", "--model", BUNDLED_TARGET, "--draft-model", BUNDLED_DRAFT, "--dev-account", "5")
    clean_error(cli(*referee, "--link-silence", "5", home=tmp_path), silence)
    with chain_with_drafter_and_verifier(tmp_path / "home") as home:
        system = chain_of(home)[1]
        port = free_port()
        node = _serve(home, "verifier", VERIFIER, "--listen", f"127.0.0.1:{port}")
        try:
            url = f"ws://127.0.0.1:{port}"
            wait_for(endpoint_published(system, port), 120, "the endpoint", [node])
            assert node.poll() is None
            clean_error(cli("transcript", "stream", "99", "--endpoint", url, home=home), "job 99 is not served here")
            clean_error(cli("transcript", "fetch", "99", "--endpoint", "http://x", home=home), "not a ws://")
            clean_error(cli("transcript", "stream", "99", home=home), "no JobSubmitted event for job 99")
            submit = ("submit", "hello", "--max-tokens", "4", "--no-wait", "--dev-account", REQUESTER)
            assert "submitted job" in ok(cli(*submit, "--mode", "transcript", home=home))  # the verifier takes it
            clean_error(cli(*submit, "--mode", "both", home=home), "--mode must be one of onchain, transcript")
            # a second verifier on the same port: one line, not a hang
            clean_error(
                cli(
                    *verifier,
                    "--dev-account",
                    VERIFIER,
                    "--listen",
                    f"127.0.0.1:{port}",
                    "--store",
                    tmp_path / "x.db",
                    home=home,
                ),
                f"--listen 127.0.0.1:{port}",
            )
        finally:
            assert _stop(node) == 0


# ------------------------------------------------------------------ kill -9 of either party mid-job


def _party(role: str, config: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    return subprocess.Popen(
        [sys.executable, __file__, role, str(config)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.node_processes
def test_kill_9_of_either_party_mid_job_resumes_from_the_last_cosigned_state(models, tmp_path):
    from tests.transcript_nodes import link_rows, wait_for  # (not at the top: the party processes import this file)

    spec = make_spec(7, models[2], models[3], max_tokens=64)
    config = tmp_path / "job.json"
    vdb, ddb = tmp_path / "v.db", tmp_path / "d.db"
    config.write_text(
        json.dumps(
            {"prompt": list(spec.job.prompt), "max_tokens": 64, "vocab": models[3], "port": 0, "dir": str(tmp_path)}
        )
    )
    verifier = _party("verifier", config)
    port = int(verifier.stdout.readline())
    config.write_text(json.dumps({**json.loads(config.read_text()), "port": port}))
    drafter = _party("drafter", config)
    try:
        wait_for(lambda: link_rows(vdb, "Verification") >= 3, 240, "three verified cycles", poll=0.05)
        os.kill(drafter.pid, signal.SIGKILL)  # the drafter dies mid-job
        drafter.wait()
        before, _ = kinds(ddb, "drafter")
        drafter = _party("drafter", config)
        wait_for(lambda: link_rows(vdb, "Verification") >= len(before) // 2 + 3, 240, "the drafter to go on", poll=0.05)
        os.kill(verifier.pid, signal.SIGKILL)  # the verifier dies mid-job; the drafter keeps reconnecting
        verifier.wait()
        mid, mid_rows = kinds(vdb, "verifier")
        verifier = _party("verifier", config)
        assert int(verifier.stdout.readline()) == port
        out, errors = drafter.communicate(timeout=300)
        assert drafter.returncode == 0, errors[-2000:]
        result = json.loads(out.strip().splitlines()[-1])
    finally:
        for proc in (verifier, drafter):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert result["settled"] and result["connections"] >= 2 and len(result["tokens"]) == 64
    d_listing, d_rows = kinds(ddb, "drafter")
    v_listing, v_rows = kinds(vdb, "verifier")
    # one Draft and one Verification a cycle, nothing signed twice, both stores hold the same messages
    cycles = max(c for k, c, _ in d_listing if k == "Draft") + 1
    assert [x[:2] for x in d_listing] == [x[:2] for x in v_listing]
    assert sorted(x[:2] for x in d_listing) == sorted(
        [("Draft", c) for c in range(cycles)]
        + [("Verification", c) for c in range(cycles)]
        + [("Settlement", cycles)] * 2
    )
    assert {(r.kind, r.position, r.signer, json.dumps(r.message, sort_keys=True), r.signature) for r in d_rows} == {
        (r.kind, r.position, r.signer, json.dumps(r.message, sort_keys=True), r.signature) for r in v_rows
    }
    # what was stored before each kill is what the job settled on: it resumed from there, it did not redo it
    assert set(before) <= set(d_listing) and set(mid) <= set(v_listing)
    assert {(r.kind, r.position, r.signature) for r in mid_rows} <= {(r.kind, r.position, r.signature) for r in v_rows}
    checked = check_transcript(spec, {"drafts": [], "verifications": [], "settlements": {}} | _transcript_of(spec, vdb))
    assert checked.settled and checked.tokens == result["tokens"]


def _transcript_of(spec, path):
    rows = NodeStore(path).link_messages(7, "verifier")
    frames = {"drafts": [], "verifications": [], "settlements": {}}
    for r in rows:
        if r.kind == "Settlement":
            frames["settlements"][r.signer] = wire.stored_frame("settlement", DOMAIN, r)
        else:
            frames[r.kind.lower() + "s"].append(wire.stored_frame(r.kind.lower(), DOMAIN, r))
    return json.loads(wire.encode(frames))


def _party_models(role: str):
    """What one party process loads: a drafter only its draft model (the prompt and vocabulary are in its config),
    so that a restart after a kill costs no more than it must."""
    import torch

    from node.jobs.models import load_model

    torch.set_num_threads(1)
    draft = load_model(BUNDLED_DRAFT, torch.device("cpu"), torch.float32)
    target = load_model(BUNDLED_TARGET, torch.device("cpu"), torch.float32) if role == "verifier" else None
    return draft, target, None, None


def _main(role: str, config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    models = _party_models(role)
    spec = make_spec(7, config["prompt"], config["vocab"], max_tokens=config["max_tokens"])
    folder = Path(config["dir"])

    async def verifier():
        server = serve_jobs(folder / "v.db", models, [spec])
        _, port = await server.start("127.0.0.1", config["port"])
        print(port, flush=True)
        await asyncio.Event().wait()

    async def drafter():
        link = drafter_link(folder / "d.db", models, spec, f"ws://127.0.0.1:{config['port']}", retry_delay_s=0.1)
        result = await link.run()
        print(json.dumps({"settled": result.settled, "tokens": result.tokens, "connections": result.connections}))

    asyncio.run(verifier() if role == "verifier" else drafter())


if __name__ == "__main__":
    _main(*sys.argv[1:3])
