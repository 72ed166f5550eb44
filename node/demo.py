"""`verispec demo`: the whole system on this machine in a few minutes (docs/cli.md, "The demo").

Seven steps on one shared `Demo` state: a local chain; staked operators; six `verispec serve` processes; an
honest job; a biased drafter's job that a watchdog's replay of chain data catches; the dispute the referees
decide; the settlement. `run_demo` stops every process it started and the chain, also on Ctrl-C, SIGTERM or
SIGHUP.
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
    watchdog: Any = None
    tokenizer: Any = None
    honest: Any = None  # JobReport of the honest job
    biased: Any = None  # JobReport of the biased drafter's job
    fault: Any = None  # the first binding position an honest drafter could not have committed

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
    _step("3. node processes: drafter, biased drafter, verifier, 3 referees (`verispec serve …`)")
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


def step5_biased_job(demo: Demo) -> None:
    from node.roles.audit import replay_draft

    _step("5. a job with the biased drafter, and a watchdog's replay of its drafts")
    honest = demo.honest
    for _ in range(BIASED_ATTEMPTS):
        biased = demo.biased = _run_job(demo, BIASED_PROMPT, BIASED, "biased drafter")
        checks = replay_draft(demo.requester, biased.job_id, BUNDLED_DRAFT)
        console.print(
            f"α of this job {biased.alpha or 0:.2f} vs {honest.alpha or 0:.2f} for the honest drafter: "
            f"acceptance alone does not show the bias. The watchdog's replay of the draft model over "
            f"chain data does: {len(checks)} of {len(biased.cycles)} cycles hold a proposal an honest "
            f"drafter could not have made:"
        )
        for check in checks:
            where = "binding" if check.binding else "after a rejection (binds nothing)"
            console.print(
                f"  cycle {check.cycle} index {check.index}: committed token {check.committed_token} "
                f"(q = {check.committed_q / 1e18:.4f}), honest replay draws {check.replay_token} "
                f"(replayed q of the committed token = {check.replay_q / 1e18:.4f}) — {where}"
            )
        demo.fault = next((c for c in checks if c.binding), None)
        if demo.fault is not None:
            break
        console.print("no binding biased position in this job; running another")
    plot = save_acceptance_plot([("honest", honest), ("biased", demo.biased)], demo.home / "acceptance.png")
    if plot:
        console.print(f"per-cycle acceptance plot: {plot}")
    if demo.fault is None:
        raise DemoError(
            f"the biased drafter never deviated on a binding position in {BIASED_ATTEMPTS} jobs; nothing to dispute"
        )


def _open_or_follow(demo: Demo):
    """Open the DraftReplay dispute on the fault, or follow the one a node opened on it first."""
    from node.chain.errors import TransactionReverted
    from node.roles.units import format_eth

    watchdog, job_id, fault = demo.watchdog, demo.biased.job_id, demo.fault
    try:
        info = watchdog.open_dispute(job_id, fault.cycle, fault.index, "draft")
    except TransactionReverted as exc:
        if exc.error_name not in ("PositionUnderDispute", "PositionAlreadyProven"):
            raise
        existing = [d for d in watchdog.job_disputes(job_id) if (d.cycle, d.index) == (fault.cycle, fault.index)]
        if not existing:
            raise
        info = existing[-1]
        console.print(
            f"a node already disputed this position (dispute {info.dispute_id} by {info.challenger}); following it"
        )
        return info
    console.print(
        f"watchdog {watchdog.address} opened dispute {info.dispute_id} with a "
        f"{format_eth(watchdog.disputes.functions.bond().call())} bond; referees drawn: "
        f"{', '.join(info.referees) or 'none'}"
    )
    return info


def step6_dispute(demo: Demo) -> None:
    from node.roles.units import format_eth

    _step(f"6. dispute: draft replay of job {demo.biased.job_id}, cycle {demo.fault.cycle}, index {demo.fault.index}")
    watchdog = demo.watchdog = demo.actor(WATCHDOG)
    names = {
        demo.addresses[BIASED]: "biased drafter",
        demo.requester.address: "requester",
        watchdog.address: "watchdog",
    }
    names.update({demo.addresses[i]: f"referee {n + 1}" for n, i in enumerate(REFEREES)})
    before = {a: watchdog.balances(a) for a in names}
    info = _open_or_follow(demo)

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
