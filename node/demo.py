"""`verispec demo`: the whole system on this machine in a few minutes (docs/cli.md, "The demo").

Seven steps on one shared `Demo` state: a local chain; staked operators; seven `verispec serve` processes (a
watchdog among them); an honest job; a biased drafter's job that the watchdog node's replay of chain data catches
and disputes by itself; the dispute the referees decide and the watchdog cashes; the settlement. `run_demo` stops
every process it started and the chain, also on Ctrl-C, SIGTERM or SIGHUP.
"""

from __future__ import annotations

import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from node import BUNDLED_DRAFT, BUNDLED_TARGET
from node.console import console, cycle_table, print_addresses, print_dispute, summary_lines, wait_with_progress
from node.plots import save_acceptance_plot
from node.processes import NodeProcesses, serve_command

# dev accounts of anvil's mnemonic
REQUESTER, DRAFTER, VERIFIER, REFEREES, BIASED, WATCHDOG = 1, 2, 3, (4, 5, 6), 7, 8
BIASED_PROMPT = "class Stack:\n    def push(self, item):\n"
BIASED_ATTEMPTS = 3  # a short job may hold no ambiguous position for the biased drafter to bias
NODE_OPTIONS = ("--poll-interval", "0.2", "--device", "cpu", "--threads", "1")
SHOWN_FAULTS = 5  # of the watchdog's findings printed per job
WATCHDOG_AUDIT_RATE = "0.25"  # of the binding target positions; every draft position is replayed (cheap)


class DemoError(RuntimeError):
    """The demo cannot go on (printed as one line by the CLI)."""


@dataclass
class Demo:
    """What the steps share: where they run, and what the earlier steps made."""

    home: Path
    max_tokens: int
    prompt: str
    nodes: NodeProcesses
    started: float = field(default_factory=time.monotonic)
    w3: Any = None
    deployment: Any = None
    addresses: dict[int, str] = field(default_factory=dict)  # dev account -> its address
    requester: Any = None  # dev account REQUESTER's Requester
    watchdog: Any = None  # dev account WATCHDOG's Requester (reads; the watchdog node acts)
    dispute: Any = None  # DisputeInfo of the watchdog node's dispute on the biased job
    tokenizer: Any = None
    honest: Any = None  # JobReport of the honest job
    biased: Any = None  # JobReport of the biased drafter's job

    def actor(self, index: int):
        """A Requester for dev account `index`, with its own transaction store in the home."""
        from node.chain.keys import dev_account
        from node.roles.requester import Requester

        account = dev_account(index)
        return Requester(
            self.w3, self.deployment, account, store_path=self.home / "cli" / f"{account.address.lower()}.db"
        )


def _step(text: str) -> None:
    console.rule(f"[bold]{text}")


def step1_chain(demo: Demo) -> None:
    from node.chain.local import chain_up
    from node.chain.rpc import connect

    _step("1. a local chain with the protocol deployed")
    chain = chain_up(demo.home)
    console.print(f"anvil pid {chain.pid} at {chain.rpc_url}; home {demo.home}")
    print_addresses(chain.deployment.addresses)
    demo.w3, demo.deployment = connect(chain.rpc_url), chain.deployment


def step2_register(demo: Demo) -> None:
    from node.roles.units import ETHER, format_eth

    _step("2. operators stake and register (model ids from the bundled checkpoints)")
    roles = [
        ("drafter", DRAFTER, 2 * ETHER),
        ("drafter (biased)", BIASED, 2 * ETHER),
        ("verifier", VERIFIER, 2 * ETHER),
    ]
    roles += [(f"referee {i + 1}", n, ETHER) for i, n in enumerate(REFEREES)]
    table = Table(box=None, header_style="bold")
    for column in ("role", "dev account", "address", "stake", "models"):
        table.add_column(column)
    for label, index, stake in roles:
        operator = demo.actor(index)
        if label.startswith("drafter"):
            result = operator.register("drafter", [BUNDLED_DRAFT], stake, alpha=0.6, target_model_path=BUNDLED_TARGET)
        elif label == "verifier":
            result = operator.register("verifier", [BUNDLED_TARGET], stake)
        else:
            result = operator.register("referee", [BUNDLED_TARGET, BUNDLED_DRAFT], stake)
        operator.close()
        demo.addresses[index] = result.address
        table.add_row(
            label, str(index), result.address, format_eth(stake), ", ".join(m[:10] + "…" for m in result.model_ids)
        )
    console.print(table)


def step3_nodes(demo: Demo) -> None:
    _step("3. node processes: drafter, biased drafter, verifier, 3 referees, a watchdog (`verispec serve …`)")
    common = ["--home", demo.home, *NODE_OPTIONS]
    drafter = ["drafter", "--model", BUNDLED_DRAFT, "--target-model", BUNDLED_TARGET]
    judge = ["--model", BUNDLED_TARGET, "--draft-model", BUNDLED_DRAFT]  # a verifier's or a referee's models
    demo.nodes.start("drafter", serve_command(*drafter, "--dev-account", DRAFTER, *common))
    demo.nodes.start(
        "drafter-biased", serve_command(*drafter, "--behavior", "biased", "--dev-account", BIASED, *common)
    )
    demo.nodes.start("verifier", serve_command("verifier", *judge, "--dev-account", VERIFIER, *common))
    for i, index in enumerate(REFEREES):
        demo.nodes.start(f"referee-{i + 1}", serve_command("referee", *judge, "--dev-account", index, *common))
    from node.chain.keys import dev_account

    demo.addresses[WATCHDOG] = dev_account(WATCHDOG).address  # it stakes nothing: it bonds each dispute it opens
    watchdog = ["--audit-rate", WATCHDOG_AUDIT_RATE, "--dev-account", WATCHDOG]
    demo.nodes.start("watchdog", serve_command("watchdog", *judge, *watchdog, *common))
    demo.nodes.wait_ready()
    console.print(f"{len(demo.nodes.procs)} node processes up; logs in {demo.nodes.log_dir}")


def _run_job(demo: Demo, prompt: str, drafter_index: int, label: str):
    from node.roles.units import format_eth

    requester = demo.requester
    job = requester.submit(
        prompt,
        draft_model=BUNDLED_DRAFT,
        target_model=BUNDLED_TARGET,
        max_tokens=demo.max_tokens,
        gamma=4,
        drafter=demo.addresses[drafter_index],
        verifier=demo.addresses[VERIFIER],
    )
    console.print(
        f"job {job.job_id} ({label}): {job.prompt_tokens} prompt tokens, escrow "
        f"{format_eth(job.escrow_wei)}, drafter {job.drafter}"
    )
    wait_with_progress(requester, job.job_id, demo.max_tokens, accept_timeout=120, timeout=600)
    demo.nodes.check()
    report = requester.report(job.job_id, tokenizer_path=BUNDLED_TARGET)
    console.print("[bold]text[/] (decoded from CycleVerified events):")
    console.print(report.prompt + (report.text or ""), markup=False)
    console.print(cycle_table(report, demo.tokenizer))
    for line in summary_lines(report):
        console.print(line)
    return report


def step4_honest_job(demo: Demo) -> None:
    from node.roles.checkpoints import load_tokenizer

    demo.requester = demo.actor(REQUESTER)
    demo.tokenizer = load_tokenizer(BUNDLED_TARGET)
    _step("4. an honest job")
    demo.honest = _run_job(demo, demo.prompt, DRAFTER, "honest drafter")


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
    console.print(
        f"the watchdog node audited job {job_id}: the draft of {audit['draft_cycles']} of {audit['cycles']} cycles "
        f"({audit['draft_forwards']} draft forwards), {len(audit['target_positions'])} binding target positions "
        f"({audit['target_forwards']} target forwards, drawn with its private seed)"
    )
    faults = [
        f"cycle {cycle} index {index}: a proposal an honest drafter could not have made ({reason} fault)"
        for cycle, index, reason in audit["draft_faults"]
    ] + [f"cycle {cycle} index {index}: {reason}" for cycle, index, reason in audit["target_faults"]]
    for line in faults[:SHOWN_FAULTS]:
        console.print(f"  {line}")
    if len(faults) > SHOWN_FAULTS:
        console.print(f"  … and {len(faults) - SHOWN_FAULTS} more (the watchdog's log has them all)")


def step5_biased_job(demo: Demo) -> None:
    from node.roles.units import format_eth

    _step("5. a job with the biased drafter; the watchdog node replays it from chain data and disputes")
    honest = demo.honest
    demo.watchdog = demo.actor(WATCHDOG)
    params, dispute = _watchdog_verdict(demo, honest.job_id)
    _print_audit(honest.job_id, params)
    if dispute is not None:
        raise DemoError(f"the watchdog disputed the honest job {honest.job_id} (dispute {dispute.dispute_id})")
    for _ in range(BIASED_ATTEMPTS):
        biased = demo.biased = _run_job(demo, BIASED_PROMPT, BIASED, "biased drafter")
        console.print(
            f"α of this job {biased.alpha or 0:.2f} vs {honest.alpha or 0:.2f} for the honest drafter: "
            "acceptance alone does not show the bias. The watchdog's replay of the draft model does:"
        )
        params, demo.dispute = _watchdog_verdict(demo, biased.job_id)
        _print_audit(biased.job_id, params)
        if demo.dispute is not None:
            info = demo.dispute
            console.print(
                f"watchdog {info.challenger} opened dispute {info.dispute_id} on cycle {info.cycle} index "
                f"{info.index} with a {format_eth(demo.watchdog.disputes.functions.bond().call())} bond; referees "
                f"drawn: {', '.join(info.referees) or 'none yet'}"
            )
            break
        console.print("no binding biased position in this job; running another")
    plot = save_acceptance_plot([("honest", honest), ("biased", demo.biased)], demo.home / "acceptance.png")
    if plot:
        console.print(f"per-cycle acceptance plot: {plot}")
    if demo.dispute is None:
        raise DemoError(
            f"the biased drafter never deviated on a binding position in {BIASED_ATTEMPTS} jobs; nothing to dispute"
        )


def step6_dispute(demo: Demo) -> None:
    from node.roles.units import format_eth

    info = demo.dispute
    _step(f"6. dispute {info.dispute_id}: draft replay of job {info.job_id}, cycle {info.cycle}, index {info.index}")
    watchdog = demo.watchdog
    names = {
        demo.addresses[BIASED]: "biased drafter",
        demo.requester.address: "requester",
        watchdog.address: "watchdog",
    }
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


def step7_settle(demo: Demo) -> None:
    from node.roles.units import format_eth

    _step("7. settlement after the challenge window (local chain: time skipped with evm_increaseTime)")
    window = demo.deployment.deployment_params.challenge_window
    demo.w3.provider.make_request("evm_increaseTime", [window + 1])
    demo.w3.provider.make_request("evm_mine", [])
    for report in (demo.honest, demo.biased):
        pay = _finalize_or_read(demo.requester, report.job_id)
        console.print(
            f"job {report.job_id}: drafter {format_eth(pay['drafter'])}, verifier "
            f"{format_eth(pay['verifier'])}, refund to the requester {format_eth(pay['refund'])}"
        )
    demo.requester.close()
    demo.watchdog.close()


STEPS = (step1_chain, step2_register, step3_nodes, step4_honest_job, step5_biased_job, step6_dispute, step7_settle)


def _interrupt(signum, _frame):
    raise KeyboardInterrupt


def run_demo(home: Path | None = None, max_tokens: int = 48, prompt: str = "def fibonacci(n):\n") -> None:
    """Run every step; stop the nodes and the chain at the end, also on an error or a signal."""
    from node.chain.local import chain_down, read_pid

    home = Path(home).expanduser().resolve() if home else Path(tempfile.mkdtemp(prefix="verispec-demo-"))
    home.mkdir(parents=True, exist_ok=True)
    demo = Demo(home, max_tokens, prompt, NodeProcesses(home / "logs"))
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        # torch, transformers and the node code load now, so a broken install fails before anything starts
        from transformers.utils import logging as hf_logging

        from node.roles import DrafterNode, RefereeNode, VerifierNode  # noqa: F401

        hf_logging.disable_progress_bar()
        for step in STEPS:
            step(demo)
        console.rule(f"[bold green]demo done in {time.monotonic() - demo.started:.0f}s")
        console.print(f"home {home} (logs, stores, acceptance.png); stopping nodes and the chain")
    finally:
        demo.nodes.stop_all()
        if read_pid(home) is not None:
            chain_down(home)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
