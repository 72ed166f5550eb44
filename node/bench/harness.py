"""Chain and process helpers every benchmark shares: the pair, the dev accounts' parts, a minimal JSON-RPC client,
waits, mining, gas, and the engine alone beside the chain.

The pair is the one `use_pair` named: it lives in $VERISPEC_PAIR (node.decoding.pairs.PAIR_ENV), so that the node
processes a benchmark starts inherit it, and `bench_pair()` reads it back wherever it is needed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import pathlib
import statistics
import threading
import time

WAD = 10**18
ETHER = 10**18
STAKE = 5 * ETHER
REQUESTER, DRAFTER, VERIFIER, REFEREES, CHALLENGER = 1, 2, 3, (4, 5, 6), 7  # bench_e2e's dev accounts
PRICE_ACCEPTED, PRICE_PASS = 10**12, 3 * 10**12
DEFAULT_PROMPT = "import os\nimport sys\n\n\ndef main(argv=None):\n"
NO_SPECULATE_ENV = "VERISPEC_BENCH_NO_SPECULATE"
# the drafter's salt, fixed so that both modes run the same randomness (same job id, verifier seed and salt: the
# same tokens); read by every node (process) the benchmark starts. Its value changes no cost.
SALT_ENV = "VERISPEC_BENCH_SALT"
BENCH_SALT = 0x5EED_0F_BE4C4


# ====================================================================== the pair


@dataclasses.dataclass(frozen=True)
class BenchPair:
    """The pair every node and the engine run (node/decoding/pairs.py), with its vocabulary (registered with both
    model ids)."""

    name: str
    target: pathlib.Path
    draft: pathlib.Path
    vocab: int


def use_pair(name: str | None) -> str:
    """Make the pair `name` (--pair; $VERISPEC_PAIR or the default when None) the one this run and its node
    processes use; its name. Raises PairError for an unknown pair or missing folders."""
    from node.decoding.pairs import PAIR_ENV, get_pair

    pair = get_pair(name)
    os.environ[PAIR_ENV] = pair.name  # the node processes inherit it
    return pair.name


def bench_pair() -> BenchPair:
    """The pair `use_pair` chose (read from $VERISPEC_PAIR, as a node process reads it)."""
    from node.decoding.pairs import get_pair

    pair = get_pair(None)
    return BenchPair(pair.name, pair.target, pair.draft, _vocab(pair.target))


@functools.cache
def _vocab(target: pathlib.Path) -> int:
    from node.decoding.loading import vocab_size

    return vocab_size(target)


def model_ids(pair: BenchPair) -> dict[str, bytes]:
    """The pair's model ids (the registry's and the jobs'), without loading the models."""
    from node.jobs.models import model_id

    return {"draft": model_id(pair.draft), "target": model_id(pair.target)}


# ====================================================================== chain helpers


class Rpc:
    """Minimal JSON-RPC (no web3 formatting) for the bench's own waits, so that they cost the nodes little."""

    def __init__(self, url: str):
        import requests

        self.url, self.session, self.id = url, requests.Session(), 0

    def __call__(self, method: str, *params):
        self.id += 1
        reply = self.session.post(
            self.url, json={"jsonrpc": "2.0", "id": self.id, "method": method, "params": list(params)}, timeout=30
        ).json()
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def send(self, fn, sender: str, value: int = 0) -> dict:
        """Send a bound contract call from an unlocked dev account and return its receipt (asserting success)."""
        tx_hash = "0x" + bytes(fn.transact({"from": sender, "value": value})).hex()
        receipt = self.receipt(tx_hash)
        if int(receipt["status"], 16) != 1:
            raise RuntimeError(f"{fn.fn_name} reverted")
        return receipt

    def receipt(self, tx_hash: str, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            receipt = self("eth_getTransactionReceipt", tx_hash)
            if receipt is not None:
                return receipt
            if time.monotonic() > deadline:
                raise TimeoutError(f"no receipt for {tx_hash}")
            time.sleep(0.002)


class HeadWatch(threading.Thread):
    """The requester's view of an interval-mined chain: when each block was first seen (eth_blockNumber every
    `interval` s, as a client following new heads would). On such a chain a transaction's effect is visible from
    its block's arrival, not from its sending."""

    def __init__(self, url: str, interval: float = 0.01):
        super().__init__(daemon=True, name="head-watch")
        self.rpc, self.interval, self.seen = Rpc(url), interval, {}
        self.stopped = threading.Event()

    def run(self) -> None:
        last = -1
        while not self.stopped.is_set():
            number = int(self.rpc("eth_blockNumber"), 16)
            if number > last:
                self.seen[number], last = time.monotonic(), number
            self.stopped.wait(self.interval)

    def seen_at(self, block: int) -> float:
        """When the first block >= `block` was seen (blocks mined between two polls are seen together)."""
        return min(t for n, t in self.seen.items() if n >= block)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


def hex_hash(tx_hash) -> str:
    return tx_hash if isinstance(tx_hash, str) else "0x" + bytes(tx_hash).hex()


def block_of(rpc: Rpc, tx_hash) -> int:
    return int(rpc.receipt(hex_hash(tx_hash))["blockNumber"], 16)


def set_mining(rpc_url: str, block_time: int) -> None:
    """Interval mining every `block_time` s, or back to a block per transaction (0; what waits in the mempool is
    mined at once)."""
    from node.chain.anvil import set_block_time

    set_block_time(rpc_url, block_time)
    if not block_time:
        Rpc(rpc_url)("evm_mine")


def gas_of(rpc: Rpc, tx_hashes) -> dict:
    """Transactions, gas and wei (gasUsed x effectiveGasPrice) of the given transactions."""
    gas = wei = n = 0
    for tx_hash in tx_hashes:
        receipt = rpc.receipt(hex_hash(tx_hash))
        used = int(receipt["gasUsed"], 16)
        gas, wei, n = gas + used, wei + used * int(receipt["effectiveGasPrice"], 16), n + 1
    return {"txs": n, "gas": gas, "wei": wei}


def tx_hashes(event, from_block: int, **filters) -> list[str]:
    """The transactions that emitted `event` (matching `filters`) since `from_block`, in chain order, once each."""
    logs = event().get_logs(argument_filters=filters or None, from_block=from_block, to_block="latest")
    seen, out = set(), []
    for log in sorted(logs, key=lambda entry: (entry["blockNumber"], entry["logIndex"])):
        h = "0x" + bytes(log["transactionHash"]).hex()
        if h not in seen:
            seen.add(h)
            out.append(h)
    return out


def wait_until(condition, timeout: float, interval: float = 0.05, what: str = "condition"):
    """`condition()`'s first truthy value, polled every `interval` s; TimeoutError past `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout:.0f}s")
        time.sleep(interval)


def reverted_node_txs(rpc: Rpc, store_dir: pathlib.Path) -> list[dict]:
    """Every transaction the nodes sent (their stores) that reverted on chain (lost races)."""
    import sqlite3

    reverted = []
    for db in sorted(store_dir.glob("*.db")):
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            for key, tx_hash in conn.execute("SELECT idempotency_key, tx_hash FROM sent_txs"):
                receipt = rpc("eth_getTransactionReceipt", tx_hash)
                if receipt is not None and int(receipt["status"], 16) == 0:
                    reverted.append({"node": db.stem, "key": key, "gas": int(receipt["gasUsed"], 16)})
    return reverted


def job_request(ids: dict, drafter: str, verifier: str, args) -> dict:
    """The JobRequest of a bench job: the pair's models, `args`' γ, sampling and maxTokens, no EOS, the bench's
    prices."""
    from node.chain.enums import NO_EOS

    return dict(
        draftModel=ids["draft"],
        targetModel=ids["target"],
        drafter=drafter,
        verifier=verifier,
        gamma=args.gamma,
        temperature=round(args.temperature * WAD),
        topK=args.top_k,
        topP=round(args.top_p * WAD),
        maxTokens=args.tokens,
        eosToken=NO_EOS,
        pricePerAcceptedToken=PRICE_ACCEPTED,
        pricePerPass=PRICE_PASS,
    )


# ====================================================================== the engine alone


def build_engine(args):
    """What every engine-backed run sets up first: (device, dtype, prompt ids, model ids, the engine on the pair in
    this process: SpeculativeDecoder(verify_draft=True) with `args`' γ and sampling, on `args.threads` torch
    threads)."""
    import torch

    from node.decoding import SpeculativeDecoder
    from node.jobs.models import load_model, load_tokenizer, node_device
    from node.jobs.sessions import prompt_tokens

    pair = bench_pair()
    torch.set_num_threads(args.threads)
    device, dtype = node_device(args.device)
    prompt_ids = prompt_tokens(load_tokenizer(pair.target, pair.draft), args.prompt.encode())
    decoder = SpeculativeDecoder(
        load_model(pair.target, device, dtype),
        load_model(pair.draft, device, dtype),
        gamma=args.gamma,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        verify_draft=True,
    )
    return device, dtype, prompt_ids, model_ids(pair), decoder


def engine_runs(decoder, prompt_ids, tokens, job_id, seed, runs, salt: int = 0) -> list[tuple[float, object]]:
    """`runs` timed SpeculativeDecoder.generate calls for one job: [(seconds, GenerationResult)]. `salt`: the
    drafter's (known only once the job's first draft is on chain; before it, 0: the same work, other uniforms)."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        result = decoder.generate(prompt_ids, tokens, job_id=job_id, verifier_seed=seed, eos_token_id=None, salt=salt)
        out.append((time.perf_counter() - start, result))
    return out


def median(values):
    values = list(values)
    return statistics.median(values) if values else float("nan")


def machine_load() -> dict:
    one, five, fifteen = os.getloadavg()
    return {"loadavg_1_5_15": [one, five, fifteen], "cpus": os.cpu_count()}
