"""One per-cycle (protocol v1) run of scripts/bench_e2e.py: jobs submitted on chain one at a time, served by a drafter
and a verifier node, beside the engine alone on the same jobs; their gas, a dispute's, and where a cycle's time goes
(node.bench.breakdown)."""

from __future__ import annotations

import pathlib
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping

from node.bench.breakdown import cycle_legs, node_breakdown
from node.bench.disputes import run_dispute
from node.bench.harness import (
    CHALLENGER,
    DRAFTER,
    PRICE_ACCEPTED,
    PRICE_PASS,
    REFEREES,
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
from node.chain.enums import JobStatus, Role


def web3_struct(value, components) -> dict:
    """A struct as web3's generic decoding returns it (a tuple, or a mapping), keyed by the ABI's field names: what
    chaindata's direct decoding is checked against."""
    if isinstance(value, Mapping):
        return dict(value)
    return {c["name"]: v for c, v in zip(components, value)}


def run_onchain(args) -> dict:
    """Per-cycle jobs (`submitJob`, one after another) served by a drafter and a verifier node on a fresh anvil (and,
    unless `args.no_dispute`, one dispute judged by three referee nodes): the report scripts/bench_e2e.py prints."""
    from node import protocol
    from node.chain.anvil import running_anvil
    from node.chain.compile import compile_contracts
    from node.chain.deploy import deploy_system
    from node.chain.deployment import Deployment
    from node.chain.keys import dev_account
    from node.chain.rpc import connect
    from node.jobs import chaindata
    from node.jobs.sessions import verifier_seed

    device, dtype, prompt_ids, ids, decoder = build_engine(args)
    vocab = bench_pair().vocab
    artifacts = compile_contracts()
    report: dict = {
        "config": {
            "tokens": args.tokens,
            "gamma": args.gamma,
            "prompt": args.prompt,
            "prompt_tokens": len(prompt_ids),
            "pair": args.pair,
            "sampling": {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p},
            "repeats": args.repeats,
            "nodes": args.nodes,
            "poll_interval": args.poll_interval,
            "active_poll_interval": args.active_poll_interval,
            "speculate": not args.no_speculate,
            "device": str(device),
            "dtype": str(dtype).replace("torch.", ""),
            "torch_threads": args.threads,
            "engine_runs_per_job": 2 * args.engine_runs,
            "dispute": not args.no_dispute,
        }
    }

    with running_anvil() as anvil, tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        tmp = pathlib.Path(tmp)
        rpc_url = anvil.rpc_url
        w3 = connect(rpc_url)
        rpc = Rpc(rpc_url)
        accounts = w3.eth.accounts
        start_block = w3.eth.block_number + 1
        system = deploy_system(w3, accounts[0], artifacts=artifacts)
        market, dm, params = system.market, system.disputes, system.params
        reg = system.registry.functions
        rpc.send(reg.registerDrafter(ids["draft"], ids["target"], WAD // 2, vocab), accounts[DRAFTER], STAKE)
        rpc.send(reg.register(Role.Verifier, [ids["target"]], [vocab]), accounts[VERIFIER], STAKE)
        for i in REFEREES:
            rpc.send(
                reg.register(Role.Referee, [ids["draft"], ids["target"]], [vocab, vocab]),
                accounts[i],
                params.min_referee_stake,
            )
        deployment = Deployment.of_system(w3, system, rpc_url, start_block)
        deployment_path = deployment.save(tmp / "deployment.json")

        first_job = market.functions.jobCount().call() + 1
        job_ids = list(range(first_job, first_job + args.repeats))
        verifier_key = dev_account(VERIFIER).key
        seeds = {j: verifier_seed(verifier_key, j) for j in job_ids}

        decoder.generate(prompt_ids, min(args.tokens, 16), job_id=10**9, verifier_seed=bytes(32))  # warm-up
        engine: dict[int, list] = {j: [] for j in job_ids}
        n_engine = args.engine_runs

        groups = [("drafter", [DRAFTER]), ("verifier", [VERIFIER])]
        if not args.no_dispute:
            groups.append(("referee", list(REFEREES)))
        started = time.monotonic()
        nodes = start_nodes(args, groups, rpc_url, deployment, deployment_path, tmp, artifacts)
        report["config"]["node_start_s"] = time.monotonic() - started
        block_time = getattr(args, "block_time_s", 0)
        report["config"]["block_time_s"] = block_time
        watch = HeadWatch(rpc_url)
        if block_time:  # from here the chain mines a block every block_time s, as a public chain would
            set_mining(rpc_url, block_time)
            watch.start()

        jobs = []
        try:
            request = job_request(ids, accounts[DRAFTER], accounts[VERIFIER], args)
            escrow = args.tokens * (PRICE_ACCEPTED + PRICE_PASS)
            for job_id in job_ids:
                # the engine alone right before and right after the job (the nodes idle meanwhile), so that
                # both see the same machine load
                engine[job_id] += engine_runs(decoder, prompt_ids, args.tokens, job_id, seeds[job_id], n_engine)
                receipt = rpc.send(
                    market.functions.submitJob(request, args.prompt.encode()), accounts[REQUESTER], escrow
                )
                t0 = time.monotonic()  # submitJob mined (anvil mines on arrival; the receipt is there)
                wait_until(
                    lambda job_id=job_id: market.functions.jobStatus(job_id).call() >= JobStatus.Finished,
                    timeout=args.job_timeout,
                    interval=0.05,
                    what=f"job {job_id} finished",
                )
                jobs.append({"job_id": job_id, "t0": t0, "submit_tx": receipt["transactionHash"]})
                salt = chaindata.job_salt(system, job_id, from_block=start_block)
                engine[job_id] += engine_runs(decoder, prompt_ids, args.tokens, job_id, seeds[job_id], n_engine, salt)

            if block_time:  # the decoding is measured: the rest (counted, not timed) waits for no block
                watch.stop()
                set_mining(rpc_url, 0)
            dispute = None
            if not args.no_dispute:
                dispute = run_dispute(rpc, system, job_ids[0], start_block, accounts, args.job_timeout)

            # past the challenge window: the nodes finalize their jobs by themselves
            window = params.challenge_window
            w3.provider.make_request("evm_increaseTime", [window + 1])
            w3.provider.make_request("evm_mine", [])
            t_window = time.monotonic()
            finalized_by_nodes = True
            try:
                wait_until(
                    lambda: all(market.functions.jobStatus(j).call() == JobStatus.Finalized for j in job_ids),
                    timeout=args.finalize_timeout,
                    interval=0.1,
                    what="finalization by the nodes",
                )
            except TimeoutError:
                finalized_by_nodes = False
                for j in job_ids:
                    if market.functions.jobStatus(j).call() != JobStatus.Finalized:
                        rpc.send(market.functions.finalize(j), accounts[REQUESTER])
            finalize_wall = time.monotonic() - t_window
        finally:
            probes = nodes.stop()

        report["reverted_node_txs"] = reverted_node_txs(rpc, tmp)

        # withdrawals (after the nodes stopped, so no nonce of theirs is touched)
        withdrawals = []
        for i in (DRAFTER, VERIFIER, REQUESTER):
            if market.functions.owed(accounts[i]).call() > 0:
                withdrawals.append(rpc.send(market.functions.withdraw(), accounts[i])["transactionHash"])
        dispute_withdrawals = []
        if dm is not None and dispute is not None:
            for i in (VERIFIER, DRAFTER, *REFEREES, CHALLENGER):
                if dm.functions.credits(accounts[i]).call() > 0:
                    dispute_withdrawals.append(rpc.send(dm.functions.withdraw(), accounts[i])["transactionHash"])

        # ------------------------------------------------------------------ per job
        drafter_probe = probes["drafter"][0]
        verifier_probe = probes["verifier"][0]
        all_legs = defaultdict(list)
        all_turns = {"drafter": [], "verifier": []}
        windows = []
        cost = defaultdict(lambda: {"txs": 0, "gas": 0, "wei": 0})

        def add(kind, g):
            for k in ("txs", "gas", "wei"):
                cost[kind][k] += g[k]

        for job in jobs:
            j = job["job_id"]
            chain_tokens = chaindata.output_tokens(system, j, from_block=start_block)
            cycles = chaindata.cycles(system, j, from_block=start_block, with_p=False)
            runs = engine[j]
            salted = runs[len(runs) // 2 :]  # the runs after the job, with its salt (the first half: timing only)
            engine_tokens = salted[0][1].tokens
            identical = chain_tokens == engine_tokens and all(r.tokens == engine_tokens for _, r in salted)
            same_cycles = [(c.tokens, c.q, c.accepted, c.out_token) for c in cycles] == [
                (r.proposals, r.q, r.accepted, r.out_token) for r in salted[0][1].cycles
            ]
            verified = tx_hashes(market.events.CycleVerified, start_block, jobId=j)
            accepted = tx_hashes(market.events.JobAccepted, start_block, jobId=j)
            if block_time:  # seen by the requester when the blocks holding them arrive
                t_end, t_first, t_accept = (
                    watch.seen_at(block_of(rpc, h)) for h in (verified[-1], verified[0], accepted[0])
                )
            else:  # mined as sent (a block per transaction): the verifier's marks
                sent_at = {m[2][0]: m[0] for m in verifier_probe["marks"] if m[1] == "sent"}
                t_end = sent_at[f"job:{j}:cycle:{len(cycles) - 1}:verify"]
                t_first, t_accept = sent_at[f"job:{j}:cycle:0:verify"], sent_at[f"job:{j}:accept"]
            e2e_s = t_end - job["t0"]
            windows.append((job["t0"], t_end))
            engine_s = median(t for t, _ in runs)
            submit = gas_of(rpc, [job["submit_tx"]])
            accept = gas_of(rpc, tx_hashes(market.events.JobAccepted, start_block, jobId=j))
            commits = gas_of(rpc, tx_hashes(market.events.DraftCommitted, start_block, jobId=j))
            verifies = gas_of(rpc, verified)
            finalize = gas_of(rpc, tx_hashes(market.events.JobFinalized, start_block, jobId=j))
            for kind, g in (
                ("submit", submit),
                ("accept", accept),
                ("commits", commits),
                ("verifications", verifies),
                ("finalize", finalize),
            ):
                add(kind, g)
            legs, turns = cycle_legs(drafter_probe, verifier_probe, j, len(cycles), job["t0"])
            for k, v in legs.items():
                all_legs[k].extend(v)
            for k, v in turns.items():
                all_turns[k].extend(v)
            job.update(
                tokens=len(chain_tokens),
                cycles=len(cycles),
                accepted=sum(c.accepted for c in cycles),
                identical_to_engine=identical,
                same_cycles_as_engine=same_cycles,
                e2e_s=e2e_s,
                e2e_tok_s=len(chain_tokens) / e2e_s,
                decode_tok_s=len(chain_tokens) / (t_end - t_accept),
                ttft_s=t_first - job["t0"],
                output=chain_tokens,
                engine_s=engine_s,
                engine_tok_s=len(engine_tokens) / engine_s,
                engine_runs_s=[t for t, _ in runs],
                ms_per_cycle_e2e=1e3 * e2e_s / len(cycles),
                ms_per_cycle_engine=1e3 * engine_s / len(cycles),
                gas={
                    "submit": submit,
                    "accept": accept,
                    "commits": commits,
                    "verifications": verifies,
                    "finalize": finalize,
                },
            )
            job.pop("t0")
        add("withdrawals", gas_of(rpc, withdrawals))

        n_jobs = len(jobs)
        total_tokens = sum(j["tokens"] for j in jobs)
        total_cycles = sum(j["cycles"] for j in jobs)
        cycle_gas = cost["commits"]["gas"] + cost["verifications"]["gas"]
        cycle_txs = cost["commits"]["txs"] + cost["verifications"]["txs"]
        job_txs = sum(cost[k]["txs"] for k in ("submit", "accept", "commits", "verifications", "finalize"))
        job_gas = sum(cost[k]["gas"] for k in ("submit", "accept", "commits", "verifications", "finalize"))
        e2e = median(j["e2e_tok_s"] for j in jobs)
        eng = median(j["engine_tok_s"] for j in jobs)
        report["jobs"] = jobs
        report["summary"] = {
            "e2e_tok_s": e2e,
            "decode_tok_s": median(j["decode_tok_s"] for j in jobs),
            "ttft_s": median(j["ttft_s"] for j in jobs),
            "engine_tok_s": eng,
            "e2e_over_engine": e2e / eng,
            "chain_overhead": eng / e2e,
            "goal_e2e_over_engine": 0.5,
            "goal_met": e2e / eng >= 0.5,
            "ms_per_cycle_e2e": median(j["ms_per_cycle_e2e"] for j in jobs),
            "ms_per_cycle_engine": median(j["ms_per_cycle_engine"] for j in jobs),
            "tokens_per_cycle": total_tokens / total_cycles,
            "all_identical_to_engine": all(j["identical_to_engine"] for j in jobs),
        }
        gas_price = int(rpc("eth_gasPrice"), 16)
        per_job = {
            k: {kk: v / n_jobs for kk, v in cost[k].items()}
            for k in ("submit", "accept", "commits", "verifications", "finalize", "withdrawals")
        }
        per_job["total"] = {k: sum(per_job[x][k] for x in per_job) for k in ("txs", "gas", "wei")}
        report["gas"] = {
            "cycle_txs_per_token": cycle_txs / total_tokens,
            "cycle_gas_per_token": cycle_gas / total_tokens,
            "job_txs_per_token": job_txs / total_tokens,
            "job_gas_per_token": job_gas / total_tokens,
            "gas_per_cycle": cycle_gas / total_cycles,
            "anvil_gas_price_wei": gas_price,
            "job_cost": per_job,
        }
        if dispute is not None:
            dispute["cost"]["withdrawals"] = gas_of(rpc, dispute_withdrawals)
            dispute["cost"]["total"] = {k: sum(v[k] for v in dispute["cost"].values()) for k in ("txs", "gas", "wei")}
        report["dispute"] = dispute
        mean_e2e = sum(j["e2e_s"] for j in jobs) / n_jobs
        report["time"] = {
            "submission_to_last_cycle_s": mean_e2e,
            "challenge_window_s": params.challenge_window,
            "submission_to_finalizable_s": mean_e2e + params.challenge_window,
            "finalized_by": "nodes" if finalized_by_nodes else "requester",
            "finalize_wall_after_window_s": finalize_wall,
            "dispute_wall_s": dispute["wall_s"] if dispute else None,
        }
        report["breakdown"] = {
            "cycle_legs_ms": {k: median(v) for k, v in all_legs.items()},
            "drafter": node_breakdown(drafter_probe, windows, total_cycles, all_turns["drafter"]),
            "verifier": node_breakdown(verifier_probe, windows, total_cycles, all_turns["verifier"]),
        }
        report["config"]["protocol_hash_chain_length"] = protocol.hash_chain_length(args.tokens)
        # the nodes read views through chaindata's direct ABI decoding: it must equal web3's generic path
        abi = next(e for e in market.abi if e.get("type") == "function" and e["name"] == "getJob")
        report["checks"] = {
            "view_decoding_equals_web3": all(
                chaindata.job_view(market, j)
                == web3_struct(market.functions.getJob(j).call(), abi["outputs"][0]["components"])
                for j in job_ids
            ),
            "outputs_equal_engine": report["summary"]["all_identical_to_engine"],
        }
    return report
