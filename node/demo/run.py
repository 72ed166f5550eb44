"""`verispec demo`'s run: the set-up steps (node/demo/world.py), then the job steps (node/demo/steps.py), on one
shared state; the nodes and the chain stop at the end, also on an error or a signal."""

from __future__ import annotations

import json
import signal
import tempfile
import time
from pathlib import Path

from node import BUNDLED_DRAFT, BUNDLED_TARGET  # the tiny pair: what run_demo runs when no pair is given
from node.console import console
from node.demo.errors import DemoError
from node.demo.world import DEFAULT_BLOCK_TIME, Demo, step1_chain, step2_register, step3_nodes
from node.processes import NodeProcesses


def _interrupt(signum, _frame):
    raise KeyboardInterrupt


def run_demo(
    home: Path | None = None,
    max_tokens: int = 48,
    prompt: str = "def fibonacci(n):\n",
    block_time: int = DEFAULT_BLOCK_TIME,
    draft: Path = BUNDLED_DRAFT,
    target: Path = BUNDLED_TARGET,
) -> None:
    """Run every step on the pair (`draft`, `target`); stop the nodes and the chain at the end, also on an error or
    a signal."""
    from node.chain.anvil import check_block_time
    from node.chain.local import chain_down, read_pid

    try:
        block_time = check_block_time(block_time)
    except ValueError as exc:
        raise DemoError(str(exc)) from None
    home = Path(home).expanduser().resolve() if home else Path(tempfile.mkdtemp(prefix="verispec-demo-"))
    home.mkdir(parents=True, exist_ok=True)
    demo = Demo(home, max_tokens, prompt, NodeProcesses(home / "logs"), block_time, Path(draft), Path(target))
    demo.summary["models"] = {"draft": str(demo.draft), "target": str(demo.target)}
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        # torch, transformers and the node code load now, so a broken install fails before anything starts
        from transformers.utils import logging as hf_logging

        from node.demo import steps
        from node.roles import DrafterNode, RefereeNode, VerifierNode  # noqa: F401

        hf_logging.disable_progress_bar()
        for run_step in (step1_chain, step2_register, step3_nodes, *steps.STEPS):
            run_step(demo)
        demo.summary["wall_s"] = round(time.monotonic() - demo.started, 1)
        (home / "demo.json").write_text(json.dumps(demo.summary, indent=1))
        console.rule(f"[bold green]demo done in {time.monotonic() - demo.started:.0f}s")
        console.print(f"home {home} (logs, stores, demo.json, acceptance.png); stopping nodes and the chain")
    finally:
        demo.nodes.stop_all()
        if read_pid(home) is not None:
            chain_down(home)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
