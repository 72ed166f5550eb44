"""The verifier's link endpoint caps the connections it holds, per remote host and in all (real WebSockets).

Without a cap a peer could open sockets faster than the hello timeout closes them, or subscribe to a job's stream
over and over, until the endpoint runs out of file descriptors or memory and its honest jobs stall with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from eth_account import Account
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from node.link import wire
from node.link.verifier import LinkServer
from node.store import NodeStore

VERIFIER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdee365a"  # anvil's account 2


def endpoint(tmp_path, **limits) -> LinkServer:
    return LinkServer(Account.from_key(VERIFIER_KEY), NodeStore(tmp_path / "v.db"), None, None, wire.Limits(**limits))


async def first_frame(ws) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), 5))


async def refusal(uri: str) -> tuple[dict, int]:
    """What the endpoint says to one more connection, and the close code it ends it with."""
    async with connect(uri) as ws:
        frame = await first_frame(ws)
        with contextlib.suppress(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 5)
        return frame, ws.close_code


def test_a_host_past_its_connection_cap_is_refused_and_a_closed_one_frees_its_place(tmp_path):
    async def main():
        server = endpoint(tmp_path, max_connections_per_host=3, hello_timeout_s=30.0)
        host, port = await server.start()
        uri = f"ws://{host}:{port}"
        held = [await connect(uri) for _ in range(3)]
        challenges = [await first_frame(ws) for ws in held]
        over = await refusal(uri)
        await held.pop().close()
        await asyncio.sleep(0.2)  # the server's side of the close
        again = await connect(uri)
        after_close = await first_frame(again)
        counted = dict(server.open_connections)
        for ws in [*held, again]:
            await ws.close()
        await asyncio.sleep(0.2)
        left = dict(server.open_connections)
        await server.stop()
        return challenges, over, after_close, counted, left

    challenges, (frame, code), after_close, counted, left = asyncio.run(main())
    assert [c["type"] for c in challenges] == ["challenge"] * 3
    assert frame == {"type": "error", "reason": "127.0.0.1 holds 3 connections already"} and code == wire.CLOSE_POLICY
    assert after_close["type"] == "challenge" and counted == {"127.0.0.1": 3}
    assert left == {}  # nothing leaks: every closed connection was uncounted


def test_the_endpoint_total_cap_holds_whatever_the_host_and_a_hello_timeout_frees_the_place(tmp_path):
    async def main():
        server = endpoint(tmp_path, max_connections_per_host=50, max_connections=2, hello_timeout_s=1.0)
        host, port = await server.start()
        uri = f"ws://{host}:{port}"
        silent = [await connect(uri) for _ in range(2)]  # they never say hello
        for ws in silent:
            await first_frame(ws)
        over = await refusal(uri)

        async def freed():  # the endpoint closes both at the hello timeout and frees their places
            for ws in silent:
                await ws.wait_closed()
            while server.open_connections.total():
                await asyncio.sleep(0.01)

        await asyncio.wait_for(freed(), 30)  # (waited on, not slept: the 30 s only bound a hang)
        closed = [ws.close_code for ws in silent]
        late = await connect(uri)
        after_timeout = await first_frame(late)
        await late.close()
        await server.stop()
        return over, closed, after_timeout, list(server.refused)

    (frame, code), closed, after_timeout, refused = asyncio.run(main())
    assert frame["reason"] == "the endpoint holds 2 connections already" and code == wire.CLOSE_POLICY
    assert closed == [wire.CLOSE_POLICY] * 2 and after_timeout["type"] == "challenge"
    assert refused.count("no hello within 1 s") == 2
