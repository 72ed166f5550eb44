"""`verispec serve ROLE`: one drafter, verifier or referee node in this process until Ctrl-C / SIGTERM."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from node.cli_context import CHAIN, KEY, SERVE_ROLES, CliError, session_options
from node.console import err

NODE_CLASSES = {"drafter": "DrafterNode", "verifier": "VerifierNode", "referee": "RefereeNode"}  # in node.roles


def _behavior(role: str, name: str | None):
    """The role's behaviour called `name` (default: honest); node/roles/behaviors.py holds the names."""
    from node.roles.behaviors import BEHAVIORS

    kinds = BEHAVIORS[role]
    try:
        return kinds.parse(name if name is not None else kinds.HONEST)
    except ValueError as exc:
        raise CliError(f"--behavior: {exc}") from None


@session_options(*KEY, *CHAIN)
def serve(
    ctx: typer.Context,
    role: Annotated[str, typer.Argument(help="drafter | verifier | referee", show_default=False, callback=SERVE_ROLES)],
    model: Annotated[
        Path,
        typer.Option(
            "--model",
            help="The model this node runs: a drafter's draft model, a verifier's or referee's target model.",
            show_default=False,
        ),
    ],
    draft_model: Annotated[
        Path | None, typer.Option("--draft-model", help="Verifier/referee: the draft model (to replay drafts).")
    ] = None,
    target_model: Annotated[
        Path | None, typer.Option("--target-model", help="Drafter: the target model of its pair.")
    ] = None,
    behavior: Annotated[
        str | None,
        typer.Option(
            "--behavior",
            help="Misbehave, for demos and tests: one "
            "of the role's behaviours in node/roles/behaviors.py "
            "(default: honest).",
            show_default=False,
        ),
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option("--store", help="SQLite store of this node (default: <home>/nodes/<role>-<address>.db)."),
    ] = None,
    min_price: Annotated[
        str,
        typer.Option(
            "--min-price",
            help="Drafter: decline jobs paying less than this per accepted token (wei; or e.g. 2gwei, 0.001eth).",
        ),
    ] = "0",
    poll_interval: Annotated[float, typer.Option("--poll-interval", help="Seconds between chain polls.")] = 0.2,
    device: Annotated[str | None, typer.Option("--device", help="cpu | cuda (default: cuda if present).")] = None,
    threads: Annotated[int | None, typer.Option("--threads", help="torch CPU threads.")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug | info | warning | error")] = "info",
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            help="Verifier: serve transcript jobs on HOST:PORT (published in the registry).",
            show_default=False,
        ),
    ] = None,
):
    """Run a drafter, verifier or referee node until Ctrl-C / SIGTERM (register it first with `register`)."""
    behavior = _behavior(role, behavior)
    from node.cli_transcript import parse_listen, start_link

    listen_at = parse_listen(listen, role)  # node/cli_transcript.py
    from node.roles.errors import RequesterError
    from node.roles.units import parse_amount

    try:
        min_price_wei = parse_amount(min_price)
    except RequesterError as exc:
        raise CliError(f"--min-price: {exc}") from None
    if min_price_wei and role != "drafter":
        raise CliError("--min-price is a drafter's option (its price per accepted token)")
    if role == "drafter" and target_model is None:
        raise CliError("a drafter needs --target-model PATH")
    if role != "drafter" and draft_model is None:
        raise CliError(f"a {role} needs --draft-model PATH (it replays drafts)")
    # the node's model pair in the order its class takes them: a drafter (draft, target), the others (target, draft)
    models = {"draft": model, "target": target_model} if role == "drafter" else {"target": model, "draft": draft_model}
    for name, path in models.items():
        if not Path(path).is_dir():
            raise CliError(f"{name} model directory {path} does not exist")
    if device is not None:
        from node.roles.models import node_device

        try:
            node_device(device)
        except ValueError as exc:
            raise CliError(f"--device: {exc}") from None
    import logging

    level = getattr(logging, log_level.strip().upper(), None)
    if not isinstance(level, int):
        raise CliError(f"--log-level must be debug, info, warning or error, got {log_level!r}")
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    account = ctx.obj.account()
    from node import roles
    from node.processes import stop_on_signals

    node_class = getattr(roles, NODE_CLASSES[role])  # torch and the node code load here
    w3, deployment, home = ctx.obj.connect()
    store = store or home / "nodes" / f"{role}-{account.address.lower()}.db"
    if threads:
        import torch

        torch.set_num_threads(threads)
    kwargs = {"behavior": behavior} if role != "referee" else {}  # a referee node has one way of working
    if role == "drafter":
        kwargs["min_price_wei"] = min_price_wei
    node = node_class(
        w3, deployment, account, store, *models.values(), poll_interval=poll_interval, device=device, **kwargs
    )
    link = f"; transcript link on {start_link(node, listen_at)}" if listen_at else ""
    stop = stop_on_signals()
    price = f", declining jobs below {min_price_wei} wei per accepted token" if min_price_wei else ""
    err.print(
        f"{role} node {account.address} ({behavior}{price}) serving on {deployment.rpc_url}{link}; store {store}. "
        "Ctrl-C to stop."
    )
    try:
        node.run(stop)
    finally:
        node.close()
    err.print(f"{role} node {account.address} stopped")
