"""What the CLI and the demo print: rich consoles, JSON, a job's report, its progress bar or streamed text, disputes
and audits.

Human output goes to stdout, progress bars and errors to stderr (`err`); `emit_json` prints the one JSON
object of `--json`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from node.chain.enums import DisputeKind


def _width(stream) -> int | None:
    """Terminal width on a terminal; 120 columns (or $COLUMNS) when piped, so tables are not squeezed to 80."""
    try:
        if stream.isatty():
            return None
    except (AttributeError, ValueError):
        pass
    return int(os.environ.get("COLUMNS", "120"))


console = Console(highlight=False, soft_wrap=True, width=_width(sys.stdout))
err = Console(stderr=True, highlight=False, soft_wrap=True, width=_width(sys.stderr))


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def print_error(message: str) -> None:
    err.print(f"[bold red]error:[/] {one_line(message)}")


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, default=_json_default) + "\n")
    sys.stdout.flush()


def _json_default(value: Any):
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")


def print_addresses(addresses: dict[str, str]) -> None:
    """A deployment's contracts, one per line."""
    for name, address in addresses.items():
        console.print(f"  {name:16s} {address}")


# ---------------------------------------------------------------- jobs


def cycle_table(report, tokenizer=None, title: str | None = None) -> Table:
    table = Table(title=title, show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("cycle", justify="right")
    table.add_column("accepted", justify="left")
    table.add_column("output")
    for cycle in report.cycles:
        bar = "■" * cycle.accepted + "□" * (cycle.gamma - cycle.accepted)
        text = tokenizer.decode(cycle.output) if tokenizer is not None else " ".join(map(str, cycle.output))
        table.add_row(str(cycle.cycle), f"{bar} {cycle.accepted}/{cycle.gamma}", repr(text)[1:-1][:60])
    return table


def until(deadline: int, now: int | None) -> str:
    """A chain deadline and, given the chain's own time `now` (its latest block: a dev chain's clock may have been
    moved on), how far off it is."""
    from node.requester.reverts import _in
    from node.requester.units import format_time

    left = f" ({_in(deadline, now)} by chain time)" if now is not None else ""
    return format_time(deadline) + left.replace("(now by chain time)", "(passed by chain time)")


def _refund_line(report) -> str:
    from node.requester.units import format_eth

    if report.finalized:
        return f"refund {format_eth(report.payments['refund'])}"
    if report.status == "Open":  # nothing is owed to anyone yet: the whole escrow comes back unless someone accepts
        return (
            f"escrow {format_eth(report.escrow_wei)} held: no verifier has accepted the job; if none does before the "
            f"accept deadline, `verispec claim-timeout {report.job_id}` refunds all of it"
        )
    return f"refund {format_eth(report.payments['refund'])} (settles at finalize)"


def summary_lines(report) -> list[str]:
    from node.requester.units import format_eth

    n = len(report.tokens)
    passes = len(report.cycles)
    alpha = f"{report.alpha:.3f}" if report.alpha is not None else "–"
    return [
        f"job {report.job_id}: {report.status}"
        + (f" ({report.finish_reason})" if report.finish_reason else "")
        + f" — {n} tokens in {passes} cycles"
        + (f" ({n / passes:.2f} tokens/pass)" if passes else "")
        + f", α = {alpha}, γ = {report.gamma}",
        f"gas {report.gas_used:,} over {report.tx_count} txs; cost {format_eth(report.cost_wei)} "
        f"(drafter {format_eth(report.payments['drafter'])}, verifier {format_eth(report.payments['verifier'])}, "
        f"α fee {format_eth(report.payments.get('alpha_fee', 0))}), " + _refund_line(report),
    ]


def print_report(report, tokenizer=None, now: int | None = None) -> None:
    """`now`: the chain's time (its latest block), for countdowns to the job's deadlines."""
    from node.requester.units import format_eth

    console.print("[bold]prompt[/]: " + repr(report.prompt))
    if report.text is not None:
        console.print("[bold]output[/]:")
        console.print(report.prompt + report.text, markup=False)
    else:
        console.print(f"[bold]output tokens[/]: {report.tokens}")
    if report.cycles:
        console.print(cycle_table(report, tokenizer))
    for line in summary_lines(report):
        console.print(line)
    if report.status == "Finished":
        console.print(f"challenge window until {until(report.deadline, now)}; then `verispec finalize {report.job_id}`")
    elif report.status == "Open":
        console.print(
            f"accept deadline {until(report.deadline, now)}; after it `verispec claim-timeout {report.job_id}` "
            "refunds the escrow"
        )
    for d in report.disputes:
        votes = ", ".join(f"{v.referee[:10]}…={v.verdict}" for v in d.votes)
        console.print(
            f"dispute {d.dispute_id}: {d.kind} replay of cycle {d.cycle} index {d.index} against "
            f"{d.accused[:10]}… — {d.status}/{d.outcome} ({votes}); "
            f"slashed {format_eth(d.accused_slashed_wei)}"
        )
        line = challenger_line(d)
        if line:
            console.print("  " + line)


def wait_with_progress(requester, job_id: int, max_tokens: int, quiet: bool = False, **kwargs) -> str:
    """`requester.wait(job_id)` with a progress bar on stderr (tokens so far, the last cycle, α so far)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if quiet:
        return requester.wait(job_id, **kwargs)
    stats = {"accepted": 0, "rejected": 0}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tokens"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as progress:
        task = progress.add_task(f"job {job_id}: waiting for the verifier", total=max_tokens)

        def on_cycle(cycle, tokens):
            stats["accepted"] += cycle.accepted
            stats["rejected"] += cycle.rejected
            seen = stats["accepted"] + stats["rejected"]
            alpha = stats["accepted"] / seen if seen else 1.0
            progress.update(
                task,
                completed=len(tokens),
                description=f"job {job_id}: cycle {cycle.cycle} {cycle.accepted}/{cycle.gamma} accepted, α {alpha:.2f}",
            )

        reason = requester.wait(job_id, on_cycle=on_cycle, **kwargs)
        progress.update(task, total=max(progress.tasks[0].completed, 1))
    return reason


# ---------------------------------------------------------------- disputes and audits


def print_dispute(info, now: int | None = None) -> None:
    from node.requester.units import format_eth

    console.print(
        f"dispute {info.dispute_id}: {info.status}, outcome [bold]{info.outcome}[/] "
        f"({info.cheated_votes} cheated / {info.faithful_votes} faithful); accused slashed "
        f"{format_eth(info.accused_slashed_wei)}"
    )
    for vote in info.votes:
        console.print(f"  referee {vote.referee}: {vote.verdict}")
    line = challenger_line(info)
    if line:
        console.print(line)
    if info.status == "Appealable":
        console.print(
            f"round {info.round} decided: [bold]{info.round_result}[/]; appealable until "
            f"{until(info.appeal_deadline, now)} (`verispec dispute-appeal {info.dispute_id}`); final after that, "
            "when a referee's node resolves it"
        )


def challenger_line(info) -> str | None:
    """What the dispute means for the challenger's bond (docs/disputes.md, "Outcomes and money"): final once
    Resolved, "if it stands" while a decided round may still be appealed."""
    from node.requester.units import format_eth

    credited = format_eth(info.credits.get(info.challenger, 0))
    who = f"challenger {info.challenger[:10]}…"
    if info.status == "Appealable":
        if info.round_result == "ChallengerLost":
            return f"if this stands, {who} loses its bond (half to the accused, half to the referees)"
        if info.round_result == "AccusedLost":
            return f"if this stands, {who} gets its bond back plus half the slash left after the referees' reward"
        return None
    if info.status != "Resolved":
        return None
    if info.outcome == "ChallengerLost":
        return f"{who} lost: its bond is forfeited (half to the accused, half to the referees); nothing comes back"
    if info.outcome in ("AccusedLost", "AccusedSilent"):
        return f"{who} won: bond back plus its share of the slash, {credited} credited (`verispec withdraw`)"
    if info.outcome == "Void":
        return f"no verdict (Void): {who} gets its bond back, {credited} credited (`verispec withdraw`)"
    return None


def print_rule_faults(job: int, broken: list[tuple[int, str]] | None) -> None:
    """A settled transcript job's records the accept rule refutes (None: a per-cycle job, nothing to print)."""
    if broken is None:
        return
    if not broken:
        console.print(f"job {job}: every settled record follows the accept rule")
        return
    console.print(f"[red]job {job}: {len(broken)} settled record(s) break the accept rule[/] (both signers slashable)")
    for cycle, why in broken:
        console.print(f"  cycle {cycle}: {why}")
    console.print(f"challenge it (no bond, no model): verispec challenge {job} --cycle {broken[0][0]}")


def print_audit(job: int, kind: DisputeKind, faults: list) -> None:
    """The faults of `verispec audit`, and the dispute command for the first binding one."""
    from node.protocol import WAD

    if not faults:
        who = "drafter" if kind is DisputeKind.DraftReplay else "verifier"
        console.print(f"job {job}: the replay agrees with everything the {who} posted in every verified cycle")
        return
    table = Table(box=None, header_style="bold")
    if kind is DisputeKind.DraftReplay:
        for column in (
            "cycle",
            "index",
            "committed token",
            "committed q",
            "honest token",
            "replayed q",
            "binding",
            "why",
        ):
            table.add_column(column)
        for f in faults:
            why = "not the inverse-CDF sample" if f.reason == "token" else "q is not the draft's probability"
            table.add_row(
                str(f.cycle),
                str(f.index),
                str(f.committed_token),
                f"{f.committed_q / WAD:.4f}",
                str(f.replay_token),
                f"{f.replay_q / WAD:.4f}",
                "yes" if f.binding else "no",
                why,
            )
        binding = [f for f in faults if f.binding]
    else:
        for column in ("cycle", "index", "posted", "why"):
            table.add_column(column)
        for f in faults:
            table.add_row(str(f.cycle), str(f.index), str(f.claimed), f.reason)
        binding = faults  # only binding positions are replayed
    console.print(table)
    if binding:
        f = binding[0]
        console.print(
            f"dispute the first binding one: verispec dispute {job} --cycle {f.cycle} --index {f.index} "
            f"--kind {kind.label}"
        )
    else:
        console.print("none binds (each lies after its cycle's first rejection): nothing to dispute")


def wait_for_transcript(
    requester,
    job_id: int,
    max_tokens: int,
    *,
    quiet: bool,
    target_model: Path,
    streamed: list[int] | None = None,
    **kwargs,
):
    """`submit` of a transcript job: once a verifier accepts it, print its text as the verifier verifies it (the
    stream of its registered endpoint), then wait for the settlement on chain (`requester.wait`: JobFinished) and
    say whether what streamed is what settled. Returns the finish reason; `streamed` (a list) gets the tokens that
    streamed (the demo compares them with the settlement)."""
    import time

    from websockets.exceptions import WebSocketException

    from node.chain.enums import JobStatus
    from node.link.chain import EndpointError, endpoint_of
    from node.link.requester import stream_tokens
    from node.link.wire import LinkRefused
    from node.requester.checkpoints import load_tokenizer

    tokenizer, tokens = load_tokenizer(target_model), (streamed if streamed is not None else [])
    accept_timeout, start = kwargs.get("accept_timeout", 120.0), time.monotonic()

    def show(cycle: int, new: list[int]) -> None:
        before = tokenizer.decode(tokens)
        tokens.extend(new)
        if not quiet:
            console.print(tokenizer.decode(tokens)[len(before) :], end="", markup=False, highlight=False)

    url = None
    while time.monotonic() - start < accept_timeout:  # the stream opens once the verifier serves the job
        view = requester.job_view(job_id)
        if view["status"] != JobStatus.Open:
            running = view["status"] == JobStatus.Running
            if not running and view["status"] != JobStatus.Finished:
                break  # over already (or cancelled): the chain has what there is
            try:  # a short job can settle between two looks: its verifier still streams it whole, to the end
                url = url or endpoint_of(requester.registry, view["verifier"])
                asyncio.run(stream_tokens(url, job_id, show))
                break
            except (EndpointError, LinkRefused, OSError, TimeoutError, WebSocketException) as exc:
                if tokens:  # the stream broke off mid-job: the settlement still comes from chain
                    err.print(f"\njob {job_id}: the stream broke off ({exc}); waiting for the settlement")
                    break
                if not running:  # settled, and no longer served: the chain has it all
                    break
        time.sleep(0.25)
    if tokens and not quiet:
        console.print()
    waited = time.monotonic() - start  # the accept timeout counts from the submission, not again from here
    reason = requester.wait(job_id, **{**kwargs, "accept_timeout": accept_timeout, "waited": waited})
    settled = requester.report(job_id, with_gas=False).tokens
    if tokens and not quiet:
        same = "equal to" if settled == tokens else "NOT EQUAL to"
        err.print(f"job {job_id}: {len(tokens)} tokens streamed, {same} the {len(settled)} tokens settled on chain")
    return reason
