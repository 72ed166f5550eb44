"""The demo's job steps (node/demo/world.py has the state and the set-up steps): transcript jobs on the chain's 1 s
blocks, the watchdog node's rule challenge and replay dispute, the referees' verdict, the settlement and
the gas of each. Everything shown is read from chain data or from the watchdog node's own store."""

from __future__ import annotations

import time
from collections import Counter

from rich.table import Table

from node.chain.calldata import function_of
from node.console import console, cycle_table, print_dispute, summary_lines
from node.demo.errors import DemoError
from node.demo.world import (
    BIASED,
    COSIGN,
    DRAFTER,
    OVERACCEPT,
    REFEREES,
    REQUESTER,
    VERIFIER,
    WATCHDOG,
    Demo,
    step,
)
from node.plots import save_acceptance_plot

BIASED_PROMPTS = (  # a short job may hold no ambiguous position for the biased drafter to bias
    "class Stack:\n    def push(self, item):\n",
    "import numpy as np\n",
    "def parse_args(argv):\n",
)
COLLUDING_PROMPT = "def quicksort(items):\n"
SHOWN_FAULTS = 5  # of the watchdog's findings printed per job


def _submit(demo: Demo, prompt: str, drafter: int, verifier: int, label: str):
    from node.requester.units import format_eth

    job = demo.requester.submit(
        prompt,
        draft_model=demo.draft,
        target_model=demo.target,
        max_tokens=demo.max_tokens,
        gamma=4,
        drafter=demo.addresses[drafter],
        verifier=demo.addresses[verifier],
        mode="transcript",
    )
    console.print(
        f"job {job.job_id} ({label}, transcript mode): {job.prompt_tokens} prompt tokens, escrow "
        f"{format_eth(job.escrow_wei)}, drafter {job.drafter}, verifier {job.verifier}"
    )
    return job


def _settled(demo: Demo, job_id: int, show_text: bool = True):
    """Wait for the settlement of transcript job `job_id`, print its cycles from the settlement's calldata."""
    demo.requester.wait(job_id, accept_timeout=120, timeout=600)
    demo.nodes.check()
    report = demo.requester.report(job_id, tokenizer_path=demo.target)
    if show_text:
        console.print("[bold]text[/] (decoded from the settlement's calldata):")
        console.print(report.prompt + (report.text or ""), markup=False)
    console.print(cycle_table(report, demo.tokenizer))
    for line in summary_lines(report):
        console.print(line)
    return report


def step4_honest_job(demo: Demo) -> None:
    from node.console import wait_for_transcript
    from node.requester.checkpoints import load_tokenizer

    demo.requester = demo.actor(REQUESTER)
    demo.watchdog = demo.actor(WATCHDOG)
    demo.tokenizer = load_tokenizer(demo.target)
    step("4. an honest transcript job: its tokens streamed from the verifier's link as they are verified")
    job = _submit(demo, demo.prompt, DRAFTER, VERIFIER, "honest drafter")
    console.print(f"[bold]stream[/] ({demo.endpoints[VERIFIER]}):")
    console.print(demo.prompt, end="", markup=False)
    wait_for_transcript(
        demo.requester,
        job.job_id,
        demo.max_tokens,
        quiet=False,
        target_model=demo.target,
        streamed=demo.streamed,
        accept_timeout=120,
        timeout=600,
    )
    demo.honest = report = _settled(demo, job.job_id, show_text=False)
    if report.tokens != demo.streamed:
        raise DemoError(f"job {job.job_id}: the tokens streamed are not the ones settled on chain")
    console.print(
        f"{len(demo.streamed)} tokens streamed = the {len(report.tokens)} settled on chain; the job's "
        "transactions so far:"
    )
    rows = transactions(demo, job.job_id)
    for _, name, gas in rows:
        console.print(f"  {name:24s} {gas:>9,} gas")
    gas = sum(g for _, _, g in rows)
    console.print(f"  {gas:,} gas over {len(rows)} txs: {gas / max(len(report.tokens), 1):,.0f} gas per token")
    demo.summary["honest"] = {
        "job": job.job_id,
        "streamed": list(demo.streamed),
        "settled": report.tokens,
        "txs": len(rows),
        "gas": gas,
    }


def _watchdog_verdict(demo: Demo, job_id: int, timeout: float = 300.0):
    """Wait until the watchdog node has audited `job_id` (its store says so); (what it found, its dispute or None)."""
    from node.chain import logs as chain_logs
    from node.store import NodeStore

    path = demo.home / "nodes" / f"watchdog-{demo.addresses[WATCHDOG].lower()}.db"
    deadline = time.monotonic() + timeout
    while True:
        demo.nodes.check()
        if path.exists():
            with NodeStore(path) as store:
                job = store.job(job_id, "watchdog")
            if job is not None and job.status == "done":
                break
        if time.monotonic() > deadline:
            raise DemoError(f"the watchdog did not audit job {job_id} within {timeout:.0f}s")
        time.sleep(0.5)
    disputes = demo.watchdog.disputes
    logs = chain_logs.event_logs(
        disputes.events.DisputeOpened, demo.deployment.start_block, argument_filters={"jobId": job_id}
    )
    mine = [log for log in logs if log["args"]["challenger"] == demo.addresses[WATCHDOG]]
    return job.params, (demo.watchdog.dispute_info(mine[0]["args"]["disputeId"]) if mine else None)


def _print_audit(job_id: int, params: dict) -> None:
    audit = params.get("audit")
    if not isinstance(audit, dict):
        console.print(f"the watchdog did not audit job {job_id}: {audit}")
        return
    if "rule_faults" in audit:
        console.print(
            f"the watchdog node checked the accept rule on all {audit['cycles']} settled records of job {job_id} "
            f"(no model needed): {len(audit['rule_faults'])} break it, confirmed by the contract's rule (eth_call)"
        )
        for cycle, why in audit["rule_faults"][:SHOWN_FAULTS]:
            console.print(f"  cycle {cycle}: {why}")
        return
    console.print(
        f"the watchdog node audited job {job_id}: the rule on every record, the draft of {audit['draft_cycles']} of "
        f"{audit['cycles']} cycles ({audit['draft_forwards']} draft forwards), {len(audit['target_positions'])} "
        f"binding target positions ({audit['target_forwards']} target forwards, drawn with its private seed)"
    )
    faults = [
        f"cycle {cycle} index {index}: a proposal an honest drafter could not have made ({reason} fault)"
        for cycle, index, reason in audit["draft_faults"]
    ] + [f"cycle {cycle} index {index}: {reason}" for cycle, index, reason in audit["target_faults"]]
    for line in faults[:SHOWN_FAULTS]:
        console.print(f"  {line}")
    if len(faults) > SHOWN_FAULTS:
        console.print(f"  … and {len(faults) - SHOWN_FAULTS} more (the watchdog's log has them all)")


def step5_colluding_job(demo: Demo) -> None:
    from node.chain import logs as chain_logs
    from node.requester.units import format_eth

    step("5. a colluding pair (drafter `cosign`, verifier `overaccept`); the watchdog node challenges the rule")
    params, dispute = _watchdog_verdict(demo, demo.honest.job_id)
    _print_audit(demo.honest.job_id, params)
    if dispute is not None or params.get("candidates"):
        raise DemoError(f"the watchdog found fault with the honest job {demo.honest.job_id}")
    pair = {demo.addresses[COSIGN]: "drafter (cosign)", demo.addresses[OVERACCEPT]: "verifier (overaccept)"}
    before = {a: demo.watchdog.balances(a)["stake"] for a in pair}
    job = _submit(demo, COLLUDING_PROMPT, COSIGN, OVERACCEPT, "colluding pair")
    demo.colluding = _settled(demo, job.job_id)
    console.print(
        "the verifier accepted all γ proposals where the rule stops earlier and the drafter co-signed it; "
        "settlement checks signatures and the state chain, not the rule, so the job settled"
    )
    params, _ = _watchdog_verdict(demo, job.job_id)
    _print_audit(job.job_id, params)
    candidate = (params.get("candidates") or [None])[0]
    if candidate is None or candidate["kind"] != "rule" or not isinstance(candidate.get("result"), dict):
        raise DemoError(f"the watchdog did not rule-challenge job {job.job_id}: {params.get('candidates')}")
    market = demo.system.market
    [won] = chain_logs.event_logs(
        market.events.TranscriptConvicted, demo.deployment.start_block, argument_filters={"jobId": job.job_id}
    )
    a = won["args"]
    tx = candidate["result"]["challenge_tx"]
    gas = demo.w3.eth.get_transaction_receipt(tx)["gasUsed"]
    console.print(
        f"the watchdog node sent challengeRule on cycle {candidate['cycle']} ({gas:,} gas): no bond, no referees; "
        "the contract re-ran the rule on the record and refuted it"
    )
    after = {a: demo.watchdog.balances(a)["stake"] for a in pair}
    for address, name in pair.items():
        slashed = a["fromDrafter"] if name.startswith("drafter") else a["fromVerifier"]
        console.print(
            f"  {name} slashed {format_eth(slashed)}: stake {format_eth(before[address])} → "
            f"{format_eth(after[address])}"
        )
    withdrawn = chain_logs.event_logs(
        market.events.Withdrawn, won["blockNumber"], argument_filters={"account": demo.addresses[WATCHDOG]}
    )
    console.print(
        f"  the watchdog's reward {format_eth(a['reward'])} (ruleRewardBps of the slash), withdrawn from the market: "
        f"{format_eth(sum(w['args']['amount'] for w in withdrawn))}"
    )
    console.print(
        f"  neither signer is paid: the requester gets its whole escrow {format_eth(demo.colluding.escrow_wei)} back "
        "at finalize (step 8)"
    )
    demo.challenge = {
        "job": job.job_id,
        "cycle": candidate["cycle"],
        "tx": tx,
        "from_drafter": a["fromDrafter"],
        "from_verifier": a["fromVerifier"],
        "reward": a["reward"],
        "withdrawn": sum(w["args"]["amount"] for w in withdrawn),
        "stakes_before": [before[x] for x in pair],
        "stakes_after": [after[x] for x in pair],
    }
    demo.summary["rule_challenge"] = demo.challenge


def step6_biased_job(demo: Demo) -> None:
    from node.chain import logs as chain_logs
    from node.requester.units import format_eth

    step("6. a biased drafter's transcript job; the watchdog node replays it, pulls the cycle and disputes")
    for prompt in BIASED_PROMPTS:
        biased = demo.biased = _settled(demo, _submit(demo, prompt, BIASED, VERIFIER, "biased drafter").job_id)
        honest = demo.honest
        console.print(
            f"α of this job {biased.alpha or 0:.2f} vs {honest.alpha or 0:.2f} for the honest drafter: "
            "acceptance alone does not show the bias. The watchdog's replay of the draft model does:"
        )
        params, demo.dispute = _watchdog_verdict(demo, biased.job_id)
        _print_audit(biased.job_id, params)
        if demo.dispute is not None:
            break
        console.print("no binding biased position in this job; running another")
    plot = save_acceptance_plot([("honest", demo.honest), ("biased", demo.biased)], demo.home / "acceptance.png")
    if plot:
        console.print(f"per-cycle acceptance plot: {plot}")
    if demo.dispute is None:
        raise DemoError(
            f"the biased drafter never deviated on a binding position in {len(BIASED_PROMPTS)} jobs; nothing to dispute"
        )
    info = demo.dispute
    pulls = chain_logs.event_logs(
        demo.system.transcript.events.CyclePulled,
        demo.deployment.start_block,
        argument_filters={"jobId": info.job_id},
    )
    [pulled] = [p for p in pulls if p["args"]["cycle"] == info.cycle]
    gas = demo.w3.eth.get_transaction_receipt(pulled["transactionHash"])["gasUsed"]
    record_hash = "0x" + bytes(pulled["args"]["recordHash"]).hex()
    demo.pull = {"job": info.job_id, "cycle": info.cycle, "record_hash": record_hash}
    console.print(
        f"the watchdog pulled cycle {info.cycle} (pullCycle with the record's proof against the settled root, "
        f"{gas:,} gas): its record hash {demo.pull['record_hash'][:18]}… is now in the market, for the referees"
    )
    console.print(
        f"then opened dispute {info.dispute_id} (DraftReplay) on cycle {info.cycle} index {info.index} with a "
        f"{format_eth(demo.watchdog.disputes.functions.bond().call())} bond; referees drawn: "
        f"{', '.join(info.referees) or 'none yet'}"
    )


def step7_dispute(demo: Demo) -> None:
    from node.requester.units import format_eth

    info = demo.dispute
    step(f"7. dispute {info.dispute_id}: draft replay of job {info.job_id}, cycle {info.cycle}, index {info.index}")
    watchdog = demo.watchdog
    names = {demo.addresses[BIASED]: "biased drafter", demo.requester.address: "requester"}
    names[watchdog.address] = "watchdog"
    names.update({demo.addresses[i]: f"referee {n + 1}" for n, i in enumerate(REFEREES)})
    before = {a: watchdog.balances(a) for a in names}

    def on_change(d):
        demo.nodes.check()
        committed = sum(v.committed for v in d.votes)
        revealed = sum(v.verdict != "None" for v in d.votes)
        console.print(
            f"  {d.status}: answered={'yes' if d.answer else 'no'}, {committed}/{len(d.votes)} votes "
            f"committed, {revealed}/{len(d.votes)} revealed"
        )

    info = watchdog.wait_dispute(info.dispute_id, timeout=300, on_change=on_change)
    if info.status == "Appealable":  # the round's verdict: final once nobody appeals within the appeal period
        period = demo.deployment.deployment_params.appeal_period
        console.print(
            f"round {info.round} decided: {info.round_result}; nobody appeals "
            f"(local chain: the {period} s appeal period skipped with evm_increaseTime)"
        )
        demo.w3.provider.make_request("evm_increaseTime", [period + 1])
        demo.w3.provider.make_request("evm_mine", [])
        info = watchdog.wait_dispute(info.dispute_id, timeout=120, on_change=on_change, until_appealable=False)
    if info.answer:
        console.print(
            f"the accused answered: q = {info.answer['claimed_prob'] / 1e18:.4f} for token {info.token} "
            f"(committed {info.claimed_value / 1e18:.4f}); its top tokens {info.answer['top_tokens'][:5]}"
        )
    print_dispute(info)
    demo.dispute = info
    withdrawn = _watchdog_withdrawal(demo, info.dispute_id)
    if withdrawn:
        console.print(f"the watchdog node withdrew its dispute credits: {format_eth(withdrawn)}")
    after = {a: watchdog.balances(a) for a in names}
    table = Table(box=None, header_style="bold", title="balances (stake in the registry; credits withdrawable)")
    for column in ("who", "stake before", "stake after", "dispute credits", "market owed"):
        table.add_column(column)
    for address, name in names.items():
        table.add_row(
            name,
            format_eth(before[address]["stake"]),
            format_eth(after[address]["stake"]),
            format_eth(after[address]["disputes"]),
            format_eth(after[address]["market"]),
        )
    console.print(table)
    demo.summary["dispute"] = {
        "id": info.dispute_id,
        "job": info.job_id,
        "cycle": info.cycle,
        "index": info.index,
        "kind": info.kind,
        "accused": info.accused,
        "biased_drafter": demo.addresses[BIASED],
        "status": info.status,
        "outcome": info.outcome,
        "cheated_votes": info.cheated_votes,
        "slashed": info.accused_slashed_wei,
        "stake_before": before[demo.addresses[BIASED]]["stake"],
        "stake_after": after[demo.addresses[BIASED]]["stake"],
        "pull": demo.pull,
    }


def _watchdog_withdrawal(demo: Demo, dispute_id: int, timeout: float = 60.0) -> int:
    """What the watchdog node withdrew from the dispute manager once `dispute_id` was resolved (0 if nothing yet)."""
    from node.chain import logs as chain_logs

    disputes = demo.watchdog.disputes
    deadline = time.monotonic() + timeout
    while disputes.functions.credits(demo.addresses[WATCHDOG]).call() and time.monotonic() < deadline:
        demo.nodes.check()
        time.sleep(0.5)
    logs = chain_logs.event_logs(
        disputes.events.Withdrawn, demo.deployment.start_block, argument_filters={"account": demo.addresses[WATCHDOG]}
    )
    return sum(log["args"]["amount"] for log in logs)


def _finalize_or_read(requester, job_id: int) -> dict[str, int]:
    """Finalize `job_id`, or read its settlement if a node finalized it first."""
    from node.chain.errors import TransactionReverted

    try:
        return requester.finalize(job_id)[1]
    except TransactionReverted as exc:
        if exc.error_name != "JobWrongStatus":
            raise
        return requester.report(job_id, with_gas=False).payments


def transactions(demo: Demo, job_id: int, dispute_ids: tuple[int, ...] = ()) -> list[tuple[str, str, int]]:
    """Every transaction of `job_id` and of its disputes `dispute_ids`, in chain order: (what it belongs to, the
    function called, gas used); what it belongs to is "job", "rule challenge" or "dispute"."""
    from web3 import Web3

    from node.chain import logs as chain_logs

    system = demo.system
    contracts = {c.address: c for c in (system.market, system.transcript, system.disputes, system.registry)}
    queries = [(a, job_id) for a in (system.market.address, system.transcript.address)]
    queries += [(system.disputes.address, d) for d in dispute_ids]  # disputeId is each event's first topic
    seen = {}
    for address, key in queries:
        topic = "0x" + key.to_bytes(32, "big").hex()
        query = {"address": address, "topics": [None, topic]}
        for log in chain_logs.get_logs(demo.w3, query, demo.deployment.start_block):
            seen[Web3.to_hex(log["transactionHash"])] = (log["blockNumber"], log["transactionIndex"])
    rows = []
    for tx_hash in sorted(seen, key=seen.get):
        tx = demo.w3.eth.get_transaction(tx_hash)
        contract = contracts.get(tx["to"])
        name = function_of(contract, tx["input"])["name"] if contract is not None else "?"
        group = "job"
        if tx["to"] == system.disputes.address or name == "pullCycle":
            group = "dispute"
        elif name == "challengeRule":
            group = "rule challenge"
        rows.append((group, name, demo.w3.eth.get_transaction_receipt(tx_hash)["gasUsed"]))
    return rows


def _gas_table(demo: Demo) -> Table:
    blocks = f"a block every {demo.block_time} s" if demo.block_time else "a block per transaction"
    table = Table(box=None, header_style="bold", title=f"transactions and gas ({blocks})")
    for column in ("job", "what", "txs", "gas", "tokens", "gas / token", "calls"):
        table.add_column(column, justify="right" if column in ("txs", "gas", "tokens", "gas / token") else "left")
    jobs = [("honest", demo.honest), ("colluding pair", demo.colluding), ("biased drafter", demo.biased)]
    rows_out = []
    for label, report in jobs:
        disputes = tuple(d.dispute_id for d in demo.requester.job_disputes(report.job_id))
        rows = transactions(demo, report.job_id, disputes)
        for group in ("job", "rule challenge", "dispute"):
            mine = [(name, gas) for g, name, gas in rows if g == group]
            if not mine:
                continue
            gas = sum(g for _, g in mine)
            tokens = len(report.tokens) if group == "job" else None
            calls = ", ".join(f"{n}× {name}" if n > 1 else name for name, n in Counter(n for n, _ in mine).items())
            table.add_row(
                f"{report.job_id} ({label})" if group == "job" else "",
                group,
                str(len(mine)),
                f"{gas:,}",
                str(tokens) if tokens is not None else "",
                f"{gas / tokens:,.0f}" if tokens else "",
                calls,
            )
            rows_out.append({"job": report.job_id, "what": group, "txs": len(mine), "gas": gas, "tokens": tokens})
    demo.summary["gas"] = rows_out
    return table


def step8_settle(demo: Demo) -> None:
    from node.requester.units import format_eth

    step("8. settlement after the challenge window (local chain: time skipped with evm_increaseTime), and the gas")
    window = demo.deployment.deployment_params.challenge_window
    demo.w3.provider.make_request("evm_increaseTime", [window + 1])
    demo.w3.provider.make_request("evm_mine", [])
    paid = {}
    for label, report in (("honest", demo.honest), ("colluding", demo.colluding), ("biased", demo.biased)):
        pay = paid[label] = _finalize_or_read(demo.requester, report.job_id)
        console.print(
            f"job {report.job_id} ({label}): drafter {format_eth(pay['drafter'])}, verifier "
            f"{format_eth(pay['verifier'])}, refund to the requester {format_eth(pay['refund'])}"
            + (" = the whole escrow" if pay["refund"] == report.escrow_wei else "")
        )
    demo.summary["colluding_refund"] = {"refund": paid["colluding"]["refund"], "escrow": demo.colluding.escrow_wei}
    console.print(_gas_table(demo))
    console.print(
        "a job row is the requester's and the pair's transactions: submit, accept, settle (every cycle's record in "
        "its calldata, in one transaction), finalize; the challenge and the dispute are paid by whoever sends them"
    )
    demo.requester.close()
    demo.watchdog.close()


STEPS = (step4_honest_job, step5_colluding_job, step6_biased_job, step7_dispute, step8_settle)
