"""`verispec chain up | deploy | down`: a local anvil chain with the protocol deployed (node/chain/local.py)."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from node.cli_context import CliError, JsonOpt, session_options
from node.console import console, emit_json, print_addresses

chain_app = typer.Typer(help="Start or stop a local anvil chain with the protocol deployed.", no_args_is_help=True)


def _parse_params(items: list[str]):
    from node.chain.params import DEFAULT_PARAMS
    from node.roles.units import parse_amount

    names = {f.name for f in dataclasses.fields(DEFAULT_PARAMS)}
    changes = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in names:
            raise CliError(f"--param wants NAME=VALUE with NAME one of: {', '.join(sorted(names))}")
        changes[name] = parse_amount(value.strip())
    params = DEFAULT_PARAMS.with_(**changes)
    try:
        params.validate()
    except ValueError as exc:
        raise CliError(f"bad deployment parameters: {exc}") from None
    return params


@chain_app.command("up")
@session_options("home", before="param")
def chain_up(
    ctx: typer.Context,
    port: Annotated[int | None, typer.Option("--port", help="anvil's port (default: a free one).")] = None,
    param: Annotated[
        list[str],
        typer.Option("--param", help="Deployment parameter NAME=VALUE (e.g. challenge_window=3600); repeatable."),
    ] = [],
    as_json: JsonOpt = False,
):
    """Start anvil in the background (pid file in the home), deploy the contracts, write the deployment file."""
    from node.chain.local import chain_up as up

    params = _parse_params(param) if param else None
    chain = up(ctx.obj.home_dir(), port, params)
    if as_json:
        emit_json(
            {
                "rpc_url": chain.rpc_url,
                "pid": chain.pid,
                "deployment": str(chain.deployment_path),
                "addresses": chain.deployment.addresses,
                "chain_id": chain.deployment.chain_id,
            }
        )
        return
    console.print(
        f"[green]chain up[/]: anvil pid {chain.pid} at {chain.rpc_url} (chain id {chain.deployment.chain_id})"
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
    as_json: JsonOpt = False,
):
    """Deploy the contracts onto an already running dev chain and write the deployment file (refused when the home
    has one, unless --force)."""
    from node.chain.local import deploy_to

    url = rpc or ctx.obj.rpc
    if not url:
        raise CliError("chain deploy needs --rpc URL (or use `chain up` to start a local anvil)")
    home = ctx.obj.home_dir()
    deployment = deploy_to(url, home, _parse_params(param) if param else None, force=force)
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
    """Stop the anvil that `chain up` started for this home (via its pid file)."""
    from node.chain.local import chain_down as down

    home = ctx.obj.home_dir()
    pid = down(home)
    if pid is None:
        console.print(f"no chain started by `verispec chain up` is running for {home}")
    else:
        console.print(f"[green]chain down[/]: stopped anvil (pid {pid})")
