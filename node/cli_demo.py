"""`verispec demo`: the command (the demo itself is node/demo/)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from node.cli_pair import PairOpt, pair_models


def demo(
    home: Annotated[
        Path | None,
        typer.Option(
            "--home", help="Keep the demo's chain logs, stores and plot here (default: a fresh temp directory)."
        ),
    ] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens per job.")] = 48,
    prompt: Annotated[str, typer.Option("--prompt", help="The honest job's prompt.")] = "def fibonacci(n):\n",
    block_time: Annotated[
        str,
        typer.Option(
            "--block-time",
            help="Seconds between blocks once the operators are registered (0: a block per transaction).",
        ),
    ] = "1",
    pair: PairOpt = None,
):
    """Everything end to end on a local chain with 1 s blocks: nodes as processes, transcript jobs, a colluding pair
    and a biased drafter slashed, on the real model pair by default (--pair tiny: the fast bundled one).

    Starts anvil, deploys, registers and starts drafters, verifiers (serving transcript jobs), three referees and a
    watchdog as separate `verispec serve` processes; streams an honest transcript job's text; lets the watchdog
    rule-challenge a colluding pair's co-signed wrong cycle (both slashed) and pull and dispute a biased drafter's
    cycle (the referees convict it); settles and prints the gas. Stops everything it started, also on Ctrl-C."""
    from node.demo.run import run_demo

    draft, target = pair_models(pair)  # before anything starts: a bad name or a missing folder is one line
    run_demo(home=home, max_tokens=max_tokens, prompt=prompt, block_time=block_time, draft=draft, target=target)
