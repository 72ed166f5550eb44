"""node/chain/fault_proxy.py itself, in front of the session's real anvil: transparent when no fault is set, each
fault kind as its doc says (seen by a raw HTTP client), seeded, filtered by method, restarting on its port, and
tunnelling a HeadWaker's websocket."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from node.chain.events import HeadWaker
from node.chain.fault_proxy import KINDS, FaultProxy


@pytest.fixture
def proxy(anvil):
    with FaultProxy(anvil.rpc_url, seed=7) as running:
        yield running


def post(proxy: FaultProxy, method: str, params=(), timeout: float = 5.0) -> tuple[int, bytes]:
    """One JSON-RPC request over a fresh connection: (HTTP status, body); raises what http.client raises."""
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 42, "method": method, "params": list(params)})
        conn.request("POST", "/", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_with_no_faults_it_answers_what_anvil_answers(anvil, proxy, w3):
    assert proxy.url == f"http://127.0.0.1:{proxy.port}"
    for method, params in (("eth_chainId", []), ("eth_getBlockByNumber", ["0x0", False])):
        status, body = post(proxy, method, params)
        direct = w3.provider.make_request(method, params)
        assert status == 200 and json.loads(body)["result"] == direct["result"]
    # a kept-alive connection carries many requests, a batch is forwarded whole
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
    batch = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "eth_blockNumber", "params": []} for i in (1, 2)])
    for _ in range(3):
        conn.request("POST", "/", body=batch, headers={"Content-Type": "application/json"})
        answer = json.loads(conn.getresponse().read())
        assert sorted(a["id"] for a in answer) == [1, 2]
    conn.close()
    assert proxy.stats["requests"] == proxy.stats["forwarded"] == 5
    assert all(proxy.stats[k] == 0 for k in KINDS) and proxy.injected == []
    assert proxy.by_method == {"eth_chainId": 1, "eth_getBlockByNumber": 1, "eth_blockNumber": 6}


def test_each_fault_kind_does_what_it_says(proxy):
    proxy.set_faults(http_429=1.0)
    assert post(proxy, "eth_blockNumber")[0] == 429
    proxy.set_faults(http_5xx=1.0)
    assert {post(proxy, "eth_blockNumber")[0] for _ in range(12)} <= {500, 502, 503, 504}
    proxy.set_faults(rpc_error=1.0)
    codes = set()
    for _ in range(12):
        status, body = post(proxy, "eth_blockNumber")
        answer = json.loads(body)
        assert status == 200 and answer["id"] == 42 and "result" not in answer
        codes.add(answer["error"]["code"])
    assert codes == {-32005, -32603}
    proxy.set_faults(cut=1.0)
    for _ in range(5):  # the full Content-Length, then part of the body, then the connection closes
        with pytest.raises(http.client.IncompleteRead):
            post(proxy, "eth_getBlockByNumber", ["0x0", False])
    proxy.set_faults(drop=1.0)
    outcomes = set()
    for _ in range(9):
        try:
            post(proxy, "eth_blockNumber", timeout=0.5)
        except TimeoutError:
            outcomes.add("held")
        except (http.client.RemoteDisconnected, ConnectionResetError):
            outcomes.add("closed")
    assert outcomes == {"held", "closed"}
    proxy.set_faults(delay=1.0, max_delay_s=0.3)
    started = time.monotonic()
    assert post(proxy, "eth_blockNumber")[0] == 200
    assert time.monotonic() - started >= int(proxy.injected[-1].variant.removesuffix("ms")) / 1000
    counted = {k: sum(1 for i in proxy.injected if i.kind == k) for k in KINDS}
    assert counted == {k: proxy.stats[k] for k in KINDS} == dict(zip(KINDS, (9, 1, 12, 1, 12, 5)))
    variants = {i.variant for i in proxy.injected if i.kind in ("drop", "http_5xx")}
    assert {"lost", "refused", "hold"} & variants and any(v.endswith("after") for v in variants)
    # a forwarded fault reached anvil: the proxy counted the forward although the client got no answer
    assert proxy.stats["forwarded"] >= 5 + sum(1 for i in proxy.injected if i.variant in ("lost", "-32603"))


def test_the_fault_sequence_is_the_seeds(anvil):
    def sequence(seed):
        with FaultProxy(anvil.rpc_url, seed=seed) as proxy:
            proxy.set_faults(rpc_error=0.3, http_429=0.3)
            for _ in range(30):
                post(proxy, "eth_blockNumber")
            return [(i.n, i.kind, i.variant) for i in proxy.injected]

    first = sequence(1)
    assert first and sequence(1) == first and sequence(2) != first


def test_faults_hit_only_the_methods_named(proxy):
    proxy.set_faults(http_429=1.0, methods={"eth_getLogs"})
    assert post(proxy, "eth_blockNumber")[0] == 200
    assert post(proxy, "eth_getLogs", [{"fromBlock": "0x0", "toBlock": "0x0"}])[0] == 429
    assert [i.method for i in proxy.injected] == ["eth_getLogs"]


def test_bad_fault_settings_are_refused(proxy):
    with pytest.raises(ValueError, match="sum to at most 1"):
        proxy.set_faults(drop=0.6, cut=0.6)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        proxy.set_faults(delay=-0.1)
    with pytest.raises(ValueError, match="http://"):
        FaultProxy("ws://127.0.0.1:8545")


def test_a_restart_refuses_connections_for_its_down_time_and_comes_back_on_the_same_port(proxy):
    port = proxy.port
    held = http.client.HTTPConnection("127.0.0.1", port, timeout=5)  # a kept-alive connection is cut by the restart
    held.request(
        "POST",
        "/",
        body=b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}',
        headers={"Content-Type": "application/json"},
    )
    assert held.getresponse().read()
    restart = threading.Thread(target=proxy.restart, args=(1.0,))
    restart.start()
    deadline = time.monotonic() + 30  # (only bounds a hang)
    while proxy.stats["restarts"] == 0:  # counted once the listener and every connection are closed
        assert time.monotonic() < deadline, "the proxy did not close"
        time.sleep(0.01)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    restart.join()
    assert proxy.port == port and proxy.stats["restarts"] == 1
    assert post(proxy, "eth_blockNumber")[0] == 200
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        held.request("POST", "/", body=b"{}", headers={"Content-Type": "application/json"})
        held.getresponse()


def test_a_head_wakers_websocket_is_tunnelled_to_anvil(proxy, w3):
    waker = HeadWaker(HeadWaker.url_for(proxy.url)).start()
    try:
        deadline = time.monotonic() + 10
        while not waker.connected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert waker.connected and proxy.stats["websockets"] == 1
        proxy.set_faults(http_429=1.0)  # websocket frames are not requests: no faults on them
        waker.take()
        w3.provider.make_request("evm_mine", [])
        assert waker.wait(5) and waker.take() == w3.eth.block_number
    finally:
        waker.stop()
