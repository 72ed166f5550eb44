"""`verispec chain up | deploy | down | advance`: a local dev chain (anvil or hardhat) with the protocol deployed
(node/chain/local.py), and its clock moved forward."""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated

import typer

from node.cli_context import CliError, JsonOpt, session_options
from node.cli_pair import PairOpt
from node.console import console, emit_json, print_addresses

chain_app = typer.Typer(
    help="Start or stop a local dev chain (anvil or hardhat) with the protocol deployed.", no_args_is_help=True
)


def _parse_params(items: list[str]):
    from node.chain.params import DEFAULT_PARAMS
    from node.requester.units import parse_amount

    names = {f.name for f in dataclasses.fields(DEFAULT_PARAMS)}
    changes = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in names:
            raise CliError(f"--param wants NAME=VALUE with NAME one of: {', '.join(sorted(names))}")
        changes[name] = _param_value(name, value.strip(), parse_amount)
    params = DEFAULT_PARAMS.with_(**changes)
    try:
        params.validate()
    except ValueError as exc:
        raise CliError(f"bad deployment parameters: {exc}") from None
    return params


def _param_value(name: str, text: str, parse_amount):
    """A deployment parameter's value in its own unit: seconds, basis points, a count, an address or wei."""
    from node.requester.errors import RequesterError

    if name == "treasury":
        return text
    if name.endswith("_bps"):
        unit = "basis points"
    elif name.endswith(("_period", "_window", "_timeout", "_interval")):
        unit = "seconds"
    elif any(word in name for word in ("stake", "slash", "bond", "price", "tip", "penalty", "floor")):
        try:
            return parse_amount(text)
        except RequesterError as exc:
            raise CliError(f"--param {name}={text}: {exc}") from None
    else:
        unit = "a whole number"
    if not text.isdigit():
        what = unit if unit == "a whole number" else f"a whole number of {unit}"
        raise CliError(f"--param {name}={text}: {name} is {what}, 0 or more")
    return int(text)


DEFAULT_PROBE_FUNDS = "10eth"
ProbesOpt = Annotated[
    bool,
    typer.Option(
        "--probes",
        help='Deploy with probes (docs/protocol.md "Soundness (v1.2)"): the --pair\'s shipped probe corpus committed '
        "for its target model, the ProbeScheduler as the treasury, funded from the deployer; only probes move α "
        "windows then (`verispec serve keeper` runs them).",
    ),
]
ProbeFundsOpt = Annotated[
    str, typer.Option("--probe-funds", help="With --probes: wei (or e.g. 10eth) sent to the probe scheduler.")
]


def _probe_setup(probes: bool, pair: str | None, funds: str) -> dict:
    """deploy_to's `corpora` and `probe_funding` for --probes / --probe-funds (the pair's corpus: node/probes)."""
    from node.requester.errors import RequesterError
    from node.requester.units import parse_amount

    try:
        funding = parse_amount(funds)
    except RequesterError as exc:
        raise CliError(f"--probe-funds: {exc}") from None
    if not probes:
        if funds != DEFAULT_PROBE_FUNDS:
            raise CliError("--probe-funds goes with --probes")
        return {}
    from node.cli_pair import pair_models
    from node.probes.corpus import CorpusError, load_corpus

    _, target = pair_models(pair, need=("target",))
    try:
        corpus = load_corpus(target)
    except CorpusError as exc:
        raise CliError(f"--probes: {exc}") from None
    return {"corpora": {corpus.target_model: corpus.entry()}, "probe_funding": funding}


@chain_app.command("up")
@session_options("home", before="param")
def chain_up(
    ctx: typer.Context,
    port: Annotated[int | None, typer.Option("--port", help="The chain's port (default: a free one).")] = None,
    client: Annotated[
        str,
        typer.Option("--client", help="The dev chain: anvil or hardhat (what differs: docs/clients.md)."),
    ] = "anvil",
    param: Annotated[
        list[str],
        typer.Option("--param", help="Deployment parameter NAME=VALUE (e.g. challenge_window=3600); repeatable."),
    ] = [],
    block_time: Annotated[
        str,
        typer.Option(
            "--block-time",
            help="Seconds between blocks (interval mining, like a real chain's); 0: a block per transaction.",
        ),
    ] = "0",
    probes: ProbesOpt = False,
    probe_funds: ProbeFundsOpt = DEFAULT_PROBE_FUNDS,
    pair: PairOpt = None,
    as_json: JsonOpt = False,
):
    """Start a dev chain in the background (pid file in the home), deploy the contracts, write the deployment file."""
    from node.chain.anvil import check_block_time
    from node.chain.local import CLIENTS
    from node.chain.local import chain_up as up

    if client not in CLIENTS:
        raise CliError(f"--client must be one of {', '.join(CLIENTS)}, got {client!r}")
    try:  # checked before anything starts (typer's own int parsing would print a usage box, not one line)
        seconds = check_block_time(block_time)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    params = _parse_params(param) if param else None
    setup = _probe_setup(probes, pair, probe_funds)
    chain = up(ctx.obj.home_dir(), port, params, client=client, block_time=seconds, **setup)
    if as_json:
        emit_json(
            {
                "rpc_url": chain.rpc_url,
                "pid": chain.pid,
                "client": chain.client,
                "deployment": str(chain.deployment_path),
                "addresses": chain.deployment.addresses,
                "chain_id": chain.deployment.chain_id,
                "block_time_s": chain.block_time,
            }
        )
        return
    mining = f"a block every {chain.block_time} s" if chain.block_time else "a block per transaction"
    console.print(
        f"[green]chain up[/]: {chain.client} pid {chain.pid} at {chain.rpc_url} (chain id {chain.deployment.chain_id}, "
        f"{mining})"
    )
    print_addresses(chain.deployment.addresses)
    console.print(f"  deployment file  {chain.deployment_path}")
    console.print(f"  log              {chain.log_path}")
    console.print(
        "Dev accounts 0..19 are funded (account 0 deployed); use --dev-account N. Stop with `verispec chain down`."
    )


@chain_app.command("deploy")
@session_options("home", before="param")
def chain_deploy(
    ctx: typer.Context,
    rpc: Annotated[
        str | None,
        typer.Option(
            "--rpc",
            help="RPC of a running dev chain (anvil, hardhat) whose first account is unlocked.",
            show_default=False,
        ),
    ] = None,
    param: Annotated[list[str], typer.Option("--param", help="Deployment parameter NAME=VALUE; repeatable.")] = [],
    force: Annotated[
        bool, typer.Option("--force", help="Replace the home's deployment file (nodes serving it stay on the old one).")
    ] = False,
    probes: ProbesOpt = False,
    probe_funds: ProbeFundsOpt = DEFAULT_PROBE_FUNDS,
    pair: PairOpt = None,
    as_json: JsonOpt = False,
):
    """Deploy the contracts onto an already running dev chain and write the deployment file (refused when the home
    has one, unless --force)."""
    from node.chain.local import deploy_to

    url = rpc or ctx.obj.rpc
    if not url:
        raise CliError("chain deploy needs --rpc URL (or use `chain up` to start a local anvil)")
    home = ctx.obj.home_dir()
    setup = _probe_setup(probes, pair, probe_funds)
    deployment = deploy_to(url, home, _parse_params(param) if param else None, force=force, **setup)
    if as_json:
        emit_json(
            {
                "rpc_url": url,
                "deployment": str(home / "deployment.json"),
                "addresses": deployment.addresses,
                "chain_id": deployment.chain_id,
            }
        )
        return
    console.print(
        f"[green]deployed[/] on {url} (chain id {deployment.chain_id}); deployment file {home / 'deployment.json'}"
    )
    print_addresses(deployment.addresses)


@chain_app.command("down")
@session_options("home")
def chain_down(ctx: typer.Context):
    """Stop the chain (anvil or hardhat) that `chain up` started for this home (via its pid file)."""
    from node.chain.local import chain_down as down

    home = ctx.obj.home_dir()
    pid = down(home)
    if pid is None:
        console.print(f"no chain started by `verispec chain up` is running for {home}")
    else:
        console.print(f"[green]chain down[/]: stopped the chain (pid {pid})")


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_MAX_ADVANCE = 100 * 365 * 86400


def parse_duration(text: str) -> int:
    """'25h', '90m', '3600s', '2d', '1d2h30m' -> seconds (a whole, positive number of seconds)."""
    raw = text.strip().lower()
    parts = re.findall(r"(\d+)([smhd])", raw) if re.fullmatch(r"(\d+[smhd])+", raw) else []
    seconds = sum(int(n) * _UNITS[unit] for n, unit in parts)
    if seconds <= 0:
        raise CliError(f"not a duration: {text!r} (examples: 25h, 90m, 3600s, 2d, 1d2h)")
    if seconds > _MAX_ADVANCE:  # past a uint64 timestamp's sane range the node's own error would blame the chain
        raise CliError(f"{text!r} is more than {_MAX_ADVANCE // 86400}d: too far to move a chain's clock")
    return seconds


@chain_app.command("advance")
@session_options("rpc", "home")
def chain_advance(
    ctx: typer.Context,
    duration: Annotated[str, typer.Argument(help="How far: 25h, 90m, 3600s, 2d, 1d2h.", show_default=False)],
    as_json: JsonOpt = False,
):
    """Move a local dev chain's clock forward and mine a block (evm_increaseTime + evm_mine): past a challenge
    window, an unbonding period or a deadline without waiting. Refused on any chain but a dev chain."""
    from node.chain.anvil import ANVIL_CHAIN_ID
    from node.chain.deployment import Deployment
    from node.chain.rpc import connect
    from node.requester.units import format_time

    seconds = parse_duration(duration)
    url = ctx.obj.rpc or Deployment.load(ctx.obj.home_dir() / "deployment.json").rpc_url
    w3 = connect(url, wait=1.0)
    chain_id = w3.eth.chain_id
    if chain_id != ANVIL_CHAIN_ID:
        raise CliError(f"{url} is chain {chain_id}, not a local dev chain ({ANVIL_CHAIN_ID}): its time cannot be moved")
    before = w3.eth.get_block("latest")["timestamp"]
    for method, params in (("evm_increaseTime", [seconds]), ("evm_mine", [])):
        reply = w3.provider.make_request(method, params)
        if reply.get("error"):
            message = reply["error"].get("message", reply["error"]) if isinstance(reply["error"], dict) else reply
            raise CliError(f"{url} refused {method} ({message}): not a dev chain whose time can be moved")
    block = w3.eth.get_block("latest")
    if as_json:
        emit_json({"seconds": seconds, "before": before, "timestamp": block["timestamp"], "block": block["number"]})
        return
    console.print(
        f"[green]advanced[/] chain time by {duration} ({seconds:,} s): block {block['number']} at "
        f"{format_time(block['timestamp'])} (was {format_time(before)})"
    )
