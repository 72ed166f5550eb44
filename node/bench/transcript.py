"""One transcript (protocol v2) run of scripts/bench_e2e.py: `submitTranscriptJob` jobs served by a drafter node and a
verifier node whose link listens on loopback (`serve verifier --listen`), a requester in this process following each
job's token stream (node.link.requester.stream_tokens), beside the engine alone on the same jobs."""

from __future__ import annotations

import itertools
import pathlib
import tempfile
import time

from node.bench.harness import (
    BENCH_SALT,
    DRAFTER,
    PRICE_ACCEPTED,
    PRICE_PASS,
    REQUESTER,
    STAKE,
    VERIFIER,
    WAD,
    HeadWatch,
    Rpc,
    bench_pair,
    block_of,
    build_engine,
    engine_runs,
    gas_of,
    job_request,
    median,
    reverted_node_txs,
    set_mining,
    tx_hashes,
    wait_until,
)
from node.bench.nodes import start_nodes
from node.chain.enums import NO_EOS, JobStatus, Role

STALL_S = 2.0  # a gap this long between two streamed cycles of a job (or no end at all): the job stalled


async def follow_streams(uri: str, job_ids: list[int], timeout: float) -> dict[int, dict]:
    """The requester's side: subscribe to every job's token stream (retrying until the verifier serves it) and record
    when each cycle's tokens arrive: {job: {"tokens": [...], "frames": [(time, cycle, n tokens)]}}."""
    import asyncio

    from node.link.requester import stream_tokens
    from node.link.wire import LinkRefused

    deadline = time.monotonic() + timeout

    async def follow(job_id):
        while True:
            frames: list = []

            def arrived(cycle, tokens, frames=frames):
                frames.append((time.monotonic(), cycle, len(tokens)))

            try:
                tokens = await stream_tokens(uri, job_id, arrived, timeout_s=timeout)
                return {"tokens": tokens, "frames": frames}
            except LinkRefused as exc:  # not served yet: the verifier opens it once its acceptance is mined
                if "not served" not in str(exc) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.01)

    results = await asyncio.gather(*(follow(j) for j in job_ids))
    return dict(zip(job_ids, results))


def run_transcript(args, concurrent: int = 0) -> dict:
    """Transcript-mode jobs (`submitTranscriptJob`) served by a drafter and a verifier node (`serve verifier --listen`:
    its link on loopback, published in the registry) on a fresh anvil; a requester in this process follows each
    job's token stream. `concurrent` > 0: that many jobs submitted at once, served by the one verifier."""
    import asyncio

    from node.chain.anvil import running_anvil
    from node.chain.compile import compile_contracts
    from node.chain.deploy import deploy_system
    from node.chain.deployment import Deployment
    from node.chain.keys import dev_account
    from node.chain.rpc import connect
    from node.chain.transcript import read_settlement
    from node.jobs.sessions import verifier_seed
    from node.link.chain import EndpointError, endpoint_of

    device, _, prompt_ids, ids, decoder = build_engine(args)
    vocab = bench_pair().vocab
    artifacts = compile_contracts()
    block_time = args.block_time_s
    n_jobs = concurrent or args.repeats
    report: dict = {
        "config": {
            "mode": "transcript",
            "pair": args.pair,
            "tokens": args.tokens,
            "gamma": args.gamma,
            "block_time_s": block_time,
            "jobs": n_jobs,
            "concurrent": bool(concurrent),
            "nodes": args.nodes,
            "torch_threads": args.threads,
            "device": str(device),
        }
    }
    with running_anvil() as anvil, tempfile.TemporaryDirectory(prefix="bench-e2e-v2-") as tmp:
        tmp = pathlib.Path(tmp)
        rpc_url = anvil.rpc_url
        w3, rpc = connect(rpc_url), Rpc(rpc_url)
        accounts = w3.eth.accounts
        start_block = w3.eth.block_number + 1
        system = deploy_system(w3, accounts[0], artifacts=artifacts)
        market, params = system.market, system.params
        reg = system.registry.functions
        rpc.send(reg.registerDrafter(ids["draft"], ids["target"], WAD // 2, vocab), accounts[DRAFTER], STAKE)
        rpc.send(reg.register(Role.Verifier, [ids["target"]], [vocab]), accounts[VERIFIER], STAKE)
        # --concurrent K runs K jobs at once on the one drafter: it declares room for them (v1.2 capacity)
        rpc.send(market.functions.setCapacity(max(n_jobs, 1)), accounts[DRAFTER])
        deployment = Deployment.of_system(w3, system, rpc_url, start_block)
        deployment_path = deployment.save(tmp / "deployment.json")
        first_job = market.functions.jobCount().call() + 1
        job_ids = list(range(first_job, first_job + n_jobs))
        verifier_key = dev_account(VERIFIER).key
        seeds = {j: verifier_seed(verifier_key, j) for j in job_ids}
        decoder.generate(prompt_ids, min(args.tokens, 16), job_id=10**9, verifier_seed=bytes(32))  # warm-up
        engine: dict[int, list] = {j: [] for j in job_ids}
        n_engine = args.engine_runs

        groups = [("drafter", [DRAFTER]), ("verifier", [VERIFIER])]
        nodes = start_nodes(args, groups, rpc_url, deployment, deployment_path, tmp, artifacts, listen=True)
        watch = HeadWatch(rpc_url)
        jobs, streams = [], {}
        try:

            def published():
                try:
                    return endpoint_of(system.registry, accounts[VERIFIER])
                except EndpointError:
                    return None

            uri = wait_until(published, 60, what="the verifier's endpoint in the registry")
            if block_time:
                set_mining(rpc_url, block_time)
                watch.start()
            request = job_request(ids, accounts[DRAFTER], accounts[VERIFIER], args)
            escrow = args.tokens * (PRICE_ACCEPTED + PRICE_PASS)
            batches = [job_ids] if concurrent else [[j] for j in job_ids]
            for batch in batches:
                for j in batch:  # the engine alone right before (the nodes idle), with the job's randomness
                    engine[j] += engine_runs(decoder, prompt_ids, args.tokens, j, seeds[j], n_engine, BENCH_SALT)
                sent = [
                    market.functions.submitTranscriptJob(request, args.prompt.encode()).transact(
                        {"from": accounts[REQUESTER], "value": escrow}
                    )
                    for _ in batch
                ]  # all of a batch before any receipt: concurrent jobs share their blocks
                for j, tx in zip(batch, sent):
                    receipt = rpc.receipt("0x" + bytes(tx).hex())
                    jobs.append({"job_id": j, "t0": time.monotonic(), "submit_tx": receipt["transactionHash"]})
                streams.update(asyncio.run(follow_streams(uri, batch, args.job_timeout)))
                for j in batch:
                    engine[j] += engine_runs(decoder, prompt_ids, args.tokens, j, seeds[j], n_engine, BENCH_SALT)
            if block_time:  # the decoding is measured: settle, finalize and withdrawals are counted, not timed
                watch.stop()
                set_mining(rpc_url, 0)
            wait_until(
                lambda: all(market.functions.jobStatus(j).call() >= JobStatus.Finished for j in job_ids),
                args.job_timeout,
                what="the drafter node's settlements",
            )
            w3.provider.make_request("evm_increaseTime", [params.challenge_window + 1])
            w3.provider.make_request("evm_mine", [])
            try:
                wait_until(
                    lambda: all(market.functions.jobStatus(j).call() == JobStatus.Finalized for j in job_ids),
                    args.finalize_timeout,
                    interval=0.1,
                    what="finalization by the nodes",
                )
            except TimeoutError:
                for j in job_ids:
                    if market.functions.jobStatus(j).call() != JobStatus.Finalized:
                        rpc.send(market.functions.finalize(j), accounts[REQUESTER])
        finally:
            watch.stop() if watch.is_alive() else None
            probes = nodes.stop()
        report["reverted_node_txs"] = reverted_node_txs(rpc, tmp)
        withdrawals = [
            rpc.send(market.functions.withdraw(), accounts[i])["transactionHash"]
            for i in (DRAFTER, VERIFIER, REQUESTER)
            if market.functions.owed(accounts[i]).call() > 0
        ]
        accept_marks = {m[2][0]: m[0] for m in probes["verifier"][0]["marks"] if m[1] == "sent"}
        kinds = ("submit", "accept", "settle", "finalize")
        for job in jobs:
            j = job["job_id"]
            stream = streams[j]
            settled = read_settlement(w3, system.transcript, j, start_block)
            runs = engine[j]
            engine_tokens = runs[-1][1].tokens
            accept_tx = tx_hashes(market.events.JobAccepted, start_block, jobId=j)[0]
            t_accept = watch.seen_at(block_of(rpc, accept_tx)) if block_time else accept_marks[f"job:{j}:accept"]
            times = [t for t, _, _ in stream["frames"]]
            t_first, t_end = stream["frames"][0][0], stream["frames"][-1][0]
            tokens = stream["tokens"]
            gas = {
                "submit": gas_of(rpc, [job["submit_tx"]]),
                "accept": gas_of(rpc, [accept_tx]),
                "settle": gas_of(rpc, tx_hashes(system.transcript.events.TranscriptSettled, start_block, jobId=j)),
                "finalize": gas_of(rpc, tx_hashes(market.events.JobFinalized, start_block, jobId=j)),
            }
            job.update(
                tokens=len(tokens),
                cycles=len(settled.cycles),
                identical_to_engine=tokens == settled.output(NO_EOS, args.tokens) == engine_tokens
                and all(r.tokens == engine_tokens for _, r in runs),
                decode_s=t_end - t_accept,
                decode_tok_s=len(tokens) / (t_end - t_accept),
                engine_s=median(t for t, _ in runs),
                engine_tok_s=len(engine_tokens) / median(t for t, _ in runs),
                ttft_s=t_first - job["t0"],
                accept_to_first_token_s=t_first - t_accept,
                steady_tok_s=(len(tokens) - stream["frames"][0][2]) / max(t_end - t_first, 1e-9),
                max_gap_s=max((b - a for a, b in itertools.pairwise(times)), default=0.0),  # between two cycles
                gas=gas,
                output=tokens,
                t_accept=t_accept,
                t_end=t_end,
            )
            job.pop("t0")
        cost = {k: {x: sum(jb["gas"][k][x] for jb in jobs) / len(jobs) for x in ("txs", "gas", "wei")} for k in kinds}
        cost["withdrawals"] = {k: v / len(jobs) for k, v in gas_of(rpc, withdrawals).items()}
        report["jobs"] = jobs
        first, last = min(j["t_accept"] for j in jobs), max(j["t_end"] for j in jobs)
        report["summary"] = {
            "decode_tok_s": median(j["decode_tok_s"] for j in jobs),
            "engine_tok_s": median(j["engine_tok_s"] for j in jobs),
            "ttft_s": median(j["ttft_s"] for j in jobs),
            # the link's own pace, start-up left out: the tokens after the first cycle over the time after it
            "accept_to_first_token_s": median(j["accept_to_first_token_s"] for j in jobs),
            "steady_tok_s": median(j["steady_tok_s"] for j in jobs),
            "all_identical_to_engine": all(j["identical_to_engine"] for j in jobs),
            "total_tok_s": sum(j["tokens"] for j in jobs) / (last - first),
            "stalled": [j["job_id"] for j in jobs if j["max_gap_s"] > STALL_S or j["tokens"] != args.tokens],
        }
        report["gas"] = {"job_cost": cost}
    return report
