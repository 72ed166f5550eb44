"""What the CLI and the demo print: rich consoles, JSON, a job's report, its progress bar, disputes and audits.

Human output goes to stdout, progress bars and errors to stderr (`err`); `emit_json` prints the one JSON
object of `--json`.
"""

from __future__ import annotations

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


def summary_lines(report) -> list[str]:
    from node.roles.units import format_eth

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
        f"α fee {format_eth(report.payments.get('alpha_fee', 0))}), "
        f"refund {format_eth(report.payments['refund'])}" + ("" if report.finalized else " (settles at finalize)"),
    ]


def print_report(report, tokenizer=None) -> None:
    from node.roles.units import format_eth, format_time

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
        console.print(
            f"challenge window until {format_time(report.deadline)}; then `verispec finalize {report.job_id}`"
        )
    for d in report.disputes:
        votes = ", ".join(f"{v.referee[:10]}…={v.verdict}" for v in d.votes)
        console.print(
            f"dispute {d.dispute_id}: {d.kind} replay of cycle {d.cycle} index {d.index} against "
            f"{d.accused[:10]}… — {d.status}/{d.outcome} ({votes}); "
            f"slashed {format_eth(d.accused_slashed_wei)}"
        )


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


def print_dispute(info) -> None:
    from node.roles.units import format_eth

    console.print(
        f"dispute {info.dispute_id}: {info.status}, outcome [bold]{info.outcome}[/] "
        f"({info.cheated_votes} cheated / {info.faithful_votes} faithful); accused slashed "
        f"{format_eth(info.accused_slashed_wei)}"
    )
    for vote in info.votes:
        console.print(f"  referee {vote.referee}: {vote.verdict}")


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
