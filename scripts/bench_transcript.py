"""Per-cycle mode against transcript mode, side by side in one run: decoding tokens/s and transactions per job.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_transcript.py                  # 64 tokens, γ = 4
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_transcript.py --tokens 32 --block-time 1 --json

* Per-cycle: `scripts/bench_e2e.py --nodes threads --no-dispute --repeats 1` (its own anvil): the chain's tokens/s
  from submission to the last `CycleVerified`, the engine's beside it, and the job's transactions (submit, accept,
  a commit and a verification a cycle, finalize). bench_e2e.py has no block time: this row is at 0 s blocks.
* Transcript: on a fresh anvil (`--block-time` as given; 0 = a block per transaction), the job is submitted
  (`submitTranscriptJob`) and accepted on chain, then runs over the link on loopback (node/link: `LinkServer` for
  the verifier, `DrafterLink` for the drafter, a requester subscribed to the stream), all real: models, WebSocket,
  SQLite stores; then one `settle` (TranscriptSettlement) and, past the challenge window, `finalize`. Tokens/s is
  measured from the acceptance to the last token at the requester; the output must equal the engine's with the same
  job id, reveals and salt. Its transactions (submit, accept, settle, finalize) are counted from their receipts.

Figures move with the machine's load: read the two modes' ratio, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET, DRAFT = ROOT / "models" / "target", ROOT / "models" / "draft"
REQUESTER, DRAFTER, VERIFIER = 1, 2, 3
STAKE = 5 * 10**18
PROMPT = "import os\nimport sys\n\n\ndef main(argv=None):\n"  # bench_e2e.py's default


def per_cycle(args) -> dict:
    command = [sys.executable, str(ROOT / "scripts" / "bench_e2e.py"), "--json", "--nodes", "threads"]
    command += ["--no-dispute", "--repeats", "1", "--engine-runs", "1", "--tokens", str(args.tokens)]
    command += ["--gamma", str(args.gamma), "--threads", str(args.threads), "--prompt", PROMPT]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), **_env()})
    if out.returncode != 0:
        raise SystemExit(f"bench_e2e.py failed: {out.stderr[-2000:]}")
    report = json.loads(out.stdout)
    cost = report["gas"]["job_cost"]
    kinds = ("submit", "accept", "commits", "verifications", "finalize")
    return {
        "mode": "per-cycle",
        "block_time_s": 0,
        "tokens": report["jobs"][0]["tokens"],
        "decoding_tok_s": report["summary"]["e2e_tok_s"],
        "engine_tok_s": report["summary"]["engine_tok_s"],
        "txs_per_job": sum(cost[k]["txs"] for k in kinds),
        "gas_per_job": sum(cost[k]["gas"] for k in kinds),
        "identical_to_engine": report["summary"]["all_identical_to_engine"],
    }


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def transcript(args) -> dict:
    import torch

    from node.chain.anvil import running_anvil
    from node.chain.deploy import deploy_system
    from node.chain.enums import NO_EOS, Role
    from node.chain.keys import dev_account
    from node.chain.rpc import connect
    from node.decoding import SpeculativeDecoder
    from node.decoding.loading import vocab_size
    from node.link.chain import settle_call, transcript_spec
    from node.link.drafter import DrafterLink
    from node.link.requester import stream_tokens
    from node.link.verifier import LinkServer
    from node.roles.jobs import chain_head, prompt_tokens, verifier_seed
    from node.roles.models import load_model, load_tokenizer, model_id, node_device
    from node.store import DURABILITY_PROCESS, NodeStore

    torch.set_num_threads(args.threads)
    device, dtype = node_device(None)
    target, draft = load_model(TARGET, device, dtype), load_model(DRAFT, device, dtype)
    tokenizer = load_tokenizer(TARGET, DRAFT)
    vocab = vocab_size(target)
    extra = ("--block-time", str(args.block_time)) if args.block_time else ()
    with running_anvil(extra_args=extra) as anvil, tempfile.TemporaryDirectory(prefix="bench-transcript-") as tmp:
        w3 = connect(anvil.rpc_url)
        accounts = w3.eth.accounts
        system = deploy_system(w3, accounts[0])
        market, reg = system.market, system.registry.functions
        ids = model_id(DRAFT), model_id(TARGET)

        def send(fn, who, value=0):
            receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": accounts[who], "value": value}))
            assert receipt.status == 1, fn.fn_name
            return receipt

        send(reg.registerDrafter(*ids, 10**18 // 2, vocab), DRAFTER, STAKE)
        send(reg.register(Role.Verifier, [ids[1]], [vocab]), VERIFIER, STAKE)
        request = dict(
            draftModel=ids[0], targetModel=ids[1], drafter=accounts[DRAFTER], verifier=accounts[VERIFIER],
            gamma=args.gamma, temperature=10**18, topK=0, topP=10**18, maxTokens=args.tokens, eosToken=NO_EOS,
            pricePerAcceptedToken=10**12, pricePerPass=3 * 10**12,
        )  # fmt: skip
        escrow = args.tokens * (request["pricePerAcceptedToken"] + request["pricePerPass"])
        receipts = [send(market.functions.submitTranscriptJob(request, PROMPT.encode()), REQUESTER, escrow)]
        job_id = market.functions.jobCount().call()
        verifier_key = dev_account(VERIFIER).key
        folder = pathlib.Path(tmp)
        # the verifier's endpoint is up before it accepts (it publishes it once, at start-up)
        server = LinkServer(dev_account(VERIFIER), NodeStore(folder / "v.db", DURABILITY_PROCESS), target, draft)
        drafter_store = NodeStore(folder / "d.db", DURABILITY_PROCESS)
        link_times: list[float] = []

        async def run():
            host, port = await server.start()
            uri = f"ws://{host}:{port}"
            head = chain_head(verifier_key, job_id, args.tokens)
            receipts.append(send(market.functions.acceptJob(job_id, head), VERIFIER))
            accepted_at = time.monotonic()  # from here: the drafter reads the job from chain, both run it
            spec = transcript_spec(w3, system, job_id, tokenizer)
            server.open_job(spec, verifier_seed(verifier_key, job_id))
            stream = asyncio.create_task(stream_tokens(uri, job_id, lambda c, t: link_times.append(time.monotonic())))
            drafter = DrafterLink(dev_account(DRAFTER), drafter_store, draft, spec, uri)
            result = await drafter.run()
            streamed = await stream
            await server.stop()
            return result, streamed, drafter.ledger, accepted_at

        decoder = SpeculativeDecoder(target, draft, gamma=args.gamma, verify_draft=True)
        prompt = prompt_tokens(tokenizer, PROMPT.encode())
        decoder.generate(prompt, min(args.tokens, 16), job_id=10**9, verifier_seed=bytes(32))  # warm-up, as bench_e2e
        result, streamed, ledger, accepted_at = asyncio.run(run())
        decoding_s = link_times[-1] - accepted_at
        salt = ledger.salt
        receipts.append(send(settle_call(system.transcript, ledger), DRAFTER))  # either party, once per job
        w3.provider.make_request("evm_increaseTime", [system.params.challenge_window + 1])
        w3.provider.make_request("evm_mine", [])
        receipts.append(send(market.functions.finalize(job_id), REQUESTER))
        start = time.monotonic()
        engine = decoder.generate(prompt, args.tokens, job_id, verifier_seed(verifier_key, job_id), salt=salt)
        engine_s = time.monotonic() - start
        return {
            "mode": "transcript",
            "block_time_s": args.block_time,
            "tokens": len(result.tokens),
            "decoding_tok_s": len(streamed) / decoding_s,
            "engine_tok_s": len(engine.tokens) / engine_s,
            "txs_per_job": len(receipts),
            "gas_per_job": sum(r.gasUsed for r in receipts),
            "identical_to_engine": result.tokens == engine.tokens == streamed and result.settled,
        }


def print_table(rows: list[dict]) -> None:
    head = (
        "mode",
        "block s",
        "tokens",
        "decode tok/s",
        "engine tok/s",
        "e2e/engine",
        "txs/job",
        "gas/job",
        "gas/token",
    )
    head += ("= engine",)
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for r in rows:
        txs = str(r["txs_per_job"])
        speed = (
            f"{r['decoding_tok_s']:.1f}",
            f"{r['engine_tok_s']:.1f}",
            f"{r['decoding_tok_s'] / r['engine_tok_s']:.2f}",
        )
        gas = f"{r['gas_per_job']:,.0f}", f"{r['gas_per_job'] / r['tokens']:,.0f}"
        cells = (r["mode"], str(r["block_time_s"]), str(r["tokens"]), *speed, txs, *gas)
        cells += (str(r["identical_to_engine"]),)
        print(" | ".join(cells))
    print("\ntxs/job and gas/job: the job's own transactions (per cycle: submit, accept, 2 a cycle, finalize;")
    print("transcript: submit, accept, settle, finalize), from their receipts; withdrawals are left out of both")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--block-time", type=int, default=0, help="anvil's block time for the transcript run (s)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [per_cycle(args), transcript(args)]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows)
    return 0 if all(r["identical_to_engine"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
