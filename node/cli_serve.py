"""`verispec serve ROLE`: one drafter, verifier, referee, watchdog or keeper node in this process until Ctrl-C /
SIGTERM."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from node.cli_context import CHAIN, KEY, STAKED_ROLES, CliError, one_of, session_options
from node.cli_pair import PairOpt, pair_models
from node.console import err

NODE_CLASSES = {  # in node.roles
    "drafter": "DrafterNode",
    "verifier": "VerifierNode",
    "referee": "RefereeNode",
    "watchdog": "WatchdogNode",
    "keeper": "KeeperNode",  # node/probes/keeper.py
}
UNSTAKED_ROLES = ("watchdog", "keeper")  # a watchdog bonds each dispute; a keeper only sends transactions
SERVE_ROLES = one_of("role", [*STAKED_ROLES, *UNSTAKED_ROLES])


def _behavior(role: str, name: str | None):
    """The role's behaviour called `name` (default: honest); node/roles/behaviors.py holds the names."""
    from node.roles.behaviors import BEHAVIORS

    if role in UNSTAKED_ROLES:
        if name is not None and name != "honest":
            raise CliError(f"--behavior: a {role} has one way of working")
        return "honest"

    kinds = BEHAVIORS[role]
    try:
        return kinds.parse(name if name is not None else kinds.HONEST)
    except ValueError as exc:
        raise CliError(f"--behavior: {exc}") from None


def _quiet_model_loading() -> None:
    """No "Loading weights" progress bars in a node's log (transformers' warnings still reach it)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _check_registration(w3, deployment, address: str, role: str, models: dict) -> None:
    """Refuse, before any model is loaded, to serve a role the key is not registered in with these models (a node
    that serves anyway is given no job, or jobs and disputes it cannot do: node/chain/identity.py)."""
    from node.chain.identity import registration_problem
    from node.decoding.loading import vocab_size
    from node.jobs.models import model_id

    loaded = {}
    for name, path in models.items():
        try:
            loaded[name] = (model_id(path), vocab_size(path))
        except (FileNotFoundError, ValueError, OSError) as exc:
            raise CliError(f"{path} is not a usable {name} model checkpoint: {exc}") from None
    problem = registration_problem(deployment.system(w3).registry, address, role, loaded)
    if problem is not None:
        raise CliError(f"cannot serve: {problem}")


@session_options(*KEY, *CHAIN)
def serve(
    ctx: typer.Context,
    role: Annotated[
        str,
        typer.Argument(
            help="drafter | verifier | referee | watchdog | keeper", show_default=False, callback=SERVE_ROLES
        ),
    ],
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="The model this node runs: a drafter's draft model, a verifier's, referee's or watchdog's target "
            "model (a keeper's: the target whose shipped probe corpus it probes with; default: the --pair's, and the "
            "pair's other model too).",
            show_default=False,
        ),
    ] = None,
    draft_model: Annotated[
        Path | None,
        typer.Option("--draft-model", help="Verifier/referee/watchdog: the draft model (to replay drafts)."),
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
    capacity: Annotated[
        int | None,
        typer.Option(
            "--capacity",
            help="Drafter: the most jobs it serves at once (Open or Running), declared on chain at start when it "
            "differs; the market refuses a job past it (default: the capacity on chain, else the market's 4).",
            show_default=False,
        ),
    ] = None,
    poll_interval: Annotated[float, typer.Option("--poll-interval", help="Seconds between chain polls.")] = 0.2,
    device: Annotated[str | None, typer.Option("--device", help="cpu | cuda (default: cuda if present).")] = None,
    threads: Annotated[int | None, typer.Option("--threads", help="torch CPU threads.")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug | info | warning | error")] = "info",
    jobs: Annotated[
        list[int] | None,
        typer.Option("--job", help="Watchdog: follow only this job (repeat for more; default: every job).", min=1),
    ] = None,
    draft_rate: Annotated[
        float, typer.Option("--draft-rate", help="Watchdog: fraction of draft positions replayed (draft model only).")
    ] = 1.0,
    audit_rate: Annotated[
        float,
        typer.Option("--audit-rate", help="Watchdog: fraction of binding target positions audited (docs/watchdog.md)."),
    ] = 0.1,
    weighting: Annotated[
        str,
        typer.Option("--weighting", help="Watchdog: how target positions are drawn: uniform | entropy | threshold."),
    ] = "uniform",
    bond_budget: Annotated[
        str,
        typer.Option(
            "--bond-budget", help="Watchdog: most wei (or e.g. 0.5eth) locked in its open disputes' bonds at once."
        ),
    ] = "1eth",
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            help="Verifier: serve transcript jobs on HOST:PORT (published in the registry).",
            show_default=False,
        ),
    ] = None,
    link_silence: Annotated[
        float,
        typer.Option(
            "--link-silence",
            help="Drafter, verifier: seconds of a silent transcript-link peer before a force move on chain.",
        ),
    ] = 120.0,
    confirmations: Annotated[
        int,
        typer.Option(
            "--confirmations",
            help="Act on an event (and count a transaction of ours as landed) only once this many blocks are on top "
            "of its block (0: at once, as on a dev chain; a reorg is handled at any depth: docs/node.md).",
            min=0,
        ),
    ] = 0,
    pair: PairOpt = None,
):
    """Run a drafter, verifier, referee, watchdog or keeper node until Ctrl-C / SIGTERM (register a staked role
    first with `register`; a watchdog needs only funds for its bonds; a keeper runs the probes of a deployment
    made with `chain up --probes` and needs only gas)."""
    behavior = _behavior(role, behavior)
    watchdog = _watchdog_options(role, jobs, draft_rate, audit_rate, weighting, bond_budget)
    from node.cli_transcript import parse_listen, start_link

    listen_at = parse_listen(listen, role)  # node/cli_transcript.py
    from node.requester.errors import RequesterError
    from node.requester.units import parse_amount

    try:
        min_price_wei = parse_amount(min_price)
    except RequesterError as exc:
        raise CliError(f"--min-price: {exc}") from None
    if (link_silence != 120.0 and role not in ("drafter", "verifier")) or not link_silence > 0:
        raise CliError("--link-silence is a drafter's or verifier's option: a positive number of seconds")
    if min_price_wei and role != "drafter":
        raise CliError("--min-price is a drafter's option (its price per accepted token)")
    if capacity is not None and (role != "drafter" or not 1 <= capacity < 2**32):
        raise CliError("--capacity is a drafter's option: the number of jobs it serves at once, at least 1")
    if model is None:  # the pair's models; a path given for the other one wins
        draft, target = pair_models(pair, draft_model, target_model)
        model, draft_model, target_model = (draft, None, target) if role == "drafter" else (target, draft, None)
    if role == "drafter" and target_model is None:
        raise CliError("a drafter needs --target-model PATH (or no --model: the --pair's models)")
    if role != "drafter" and draft_model is None:
        raise CliError(f"a {role} needs --draft-model PATH (it replays drafts; or no --model: the --pair's models)")
    # the node's model pair in the order its class takes them: a drafter (draft, target), the others (target, draft)
    models = {"draft": model, "target": target_model} if role == "drafter" else {"target": model, "draft": draft_model}
    from node.requester.checkpoints import check_model_dir

    for name, path in models.items():
        check_model_dir(path, f"{name} model")
    if device is not None:
        from node.jobs.models import node_device

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
    _quiet_model_loading()
    w3, deployment, home = ctx.obj.connect()
    from node.processes import NodeLockError, node_lock

    lock = contextlib.ExitStack()
    try:  # before anything is sent or signed: one node per key and deployment on this machine
        market = deployment.addresses["InferenceMarket"]
        chain = f"chain {deployment.chain_id} at {deployment.rpc_url}"
        lock.enter_context(node_lock(chain, market, account.address, role))
    except NodeLockError as exc:
        raise CliError(str(exc)) from None
    with lock:  # released on every way out, an error included (tests run `serve` in-process too)
        if role not in UNSTAKED_ROLES:  # a watchdog's bonds are checked per dispute; a keeper stakes nothing
            _check_registration(w3, deployment, account.address, role, models)
        store = store or home / "nodes" / f"{role}-{account.address.lower()}.db"
        if threads:
            import torch

            torch.set_num_threads(threads)
        kwargs = {"behavior": behavior} if role not in ("referee", *UNSTAKED_ROLES) else watchdog  # one way of working
        if role == "drafter":
            kwargs["min_price_wei"] = min_price_wei
            kwargs["link_silence_s"] = link_silence
            kwargs["capacity"] = capacity
        try:
            node = node_class(
                w3,
                deployment,
                account,
                store,
                *models.values(),
                poll_interval=poll_interval,
                device=device,
                confirmations=confirmations,
                **kwargs,
            )
        except ValueError as exc:  # e.g. a bond budget below one bond, a deployment without disputes
            raise CliError(str(exc)) from None
        if role == "verifier":
            node.link_silence_s = link_silence  # its drafters' silence on the link (node/roles/transcript_jobs.py)
        link = f"; transcript link on {start_link(node, listen_at)}" if listen_at else ""
        stop = stop_on_signals()
        price = f", declining jobs below {min_price_wei} wei per accepted token" if min_price_wei else ""
        if role == "drafter":
            price += f", at most {node.capacity} job(s) at once"
        if role == "keeper":
            behavior = f"probing the drafters of {len(node.corpora)} target model(s) with the shipped corpus"
        if role == "watchdog":
            behavior = (
                f"audit rate {audit_rate} ({watchdog['weighting']}), draft rate {draft_rate}, bond budget "
                f"{watchdog['bond_budget_wei']} wei, {'jobs ' + str(jobs) if jobs else 'every job'}"
            )
        err.print(
            f"{role} node {account.address} ({behavior}{price}) serving on {deployment.rpc_url}{link}; store {store}. "
            "Ctrl-C to stop."
        )
        try:
            node.run(stop)
        finally:
            node.close()
    err.print(f"{role} node {account.address} stopped")
    global _NODE_CLOSED
    _NODE_CLOSED = True


_NODE_CLOSED = False  # set once `serve` has closed its node: the process has nothing left to flush


def run_app(app) -> None:
    """Run the CLI as a program (the `verispec` script, `python -m node.cli`). After `serve` closed its node the
    process ends at once: the interpreter's teardown with torch loaded took 2-6 s after SIGTERM (issue 15), and the
    store is closed, the logs flushed. Never used in-process (tests call `app` through typer's runner)."""
    import logging
    import os

    try:
        app()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    if not _NODE_CLOSED:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code if isinstance(code, int) else 1)


def _watchdog_options(role, jobs, draft_rate, audit_rate, weighting, bond_budget) -> dict:
    """The watchdog's node options, checked; refused for another role when not left at their defaults."""
    from node.audit_sampling import WEIGHTINGS
    from node.requester.errors import RequesterError
    from node.requester.units import parse_amount

    if role != "watchdog":
        given = [
            name
            for name, value, default in (
                ("--job", jobs, None),
                ("--draft-rate", draft_rate, 1.0),
                ("--audit-rate", audit_rate, 0.1),
                ("--weighting", weighting, "uniform"),
                ("--bond-budget", bond_budget, "1eth"),
            )
            if value != default and value != []
        ]
        if given:
            raise CliError(f"{given[0]} is a watchdog's option")
        return {}
    for name, value in (("--draft-rate", draft_rate), ("--audit-rate", audit_rate)):
        if not 0 <= value <= 1:
            raise CliError(f"{name} must be a fraction in [0, 1], got {value}")
    weighting = weighting.strip().lower()
    if weighting not in WEIGHTINGS:
        raise CliError(f"--weighting must be {', '.join(WEIGHTINGS)}, got {weighting!r}")
    try:
        budget = parse_amount(bond_budget)
    except RequesterError as exc:
        raise CliError(f"--bond-budget: {exc}") from None
    return {
        "jobs": jobs or None,
        "draft_rate": draft_rate,
        "audit_rate": audit_rate,
        "weighting": weighting,
        "bond_budget_wei": budget,
    }
