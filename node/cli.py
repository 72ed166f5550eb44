"""`verispec`: the command line of the node — local chain, operators, requesters, node processes, the demo.

The CLI only parses, prints and drives the roles (node/roles/); every chain operation lives in
node/roles/requester.py, every node loop in node/roles/{drafter,verifier,referee}.py (imported lazily).
Every failure a user can cause ends in one line on stderr and exit code 1 — never a traceback
(set VERISPEC_DEBUG=1 to see one for unexpected errors).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer
from rich.console import Console
from rich.table import Table

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # its warnings are not the user's business here

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BUNDLED_TARGET = PROJECT_ROOT / "models" / "target"
BUNDLED_DRAFT = PROJECT_ROOT / "models" / "draft"



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

HELP = (
    "verispec — verifiable speculative decoding on a blockchain.\n\n"
    "A [bold]requester[/] submits a prompt with escrow. A staked [bold]drafter[/] (small draft model) commits γ "
    "proposals per cycle; a staked [bold]verifier[/] (target model) posts the target probabilities and its "
    "hash-chain randomness, and the [bold]contract itself[/] applies the speculative-sampling accept rule, so the "
    "output is distributed exactly as the target model would sample it. Drafters are paid per accepted token, "
    "verifiers per pass. Anyone can [bold]audit[/] a job's draft by replaying it from chain data and "
    "[bold]dispute[/] a position; staked [bold]referees[/] replay it and vote; a cheater is slashed.\n\n"
    "Quick start: [cyan]verispec demo[/] (everything on a local chain), or [cyan]verispec chain up[/], "
    "[cyan]register[/], [cyan]serve[/], [cyan]submit[/]. Keys: --key HEX, --key-file PATH, --dev-account N "
    "(local chains) or $VERISPEC_KEY. Home (deployment file, stores): --home or $VERISPEC_HOME "
    "(default ./.verispec)."
)

class _App(typer.Typer):
    """Typer, with usage errors (missing option, bad value, unknown command) as one line on stderr, exit 2."""

    def __call__(self, *args, **kwargs):
        if "standalone_mode" in kwargs:
            return super().__call__(*args, **kwargs)
        try:
            code = super().__call__(*args, standalone_mode=False, **kwargs)
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]")
            sys.exit(130)
        except Exception as exc:  # click's exceptions (typer may vendor its own click): duck-typed
            if not hasattr(exc, "format_message") or not hasattr(exc, "exit_code"):
                raise
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
                console.print(ctx.get_help())
                sys.exit(2)
            where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            err.print(f"[bold red]error:[/] {_one_line(exc.format_message())}{where}")
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


app = _App(help=HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  rich_markup_mode="rich")
chain_app = _App(help="Start or stop a local anvil chain with the protocol deployed.", no_args_is_help=True)
app.add_typer(chain_app, name="chain")


class CliError(RuntimeError):
    """A user-facing error: printed as one line, exit code 1."""


@dataclass
class Globals:
    rpc: str | None = None
    home: Path | None = None


# ---------------------------------------------------------------- options shared by commands

RpcOpt = Annotated[Optional[str], typer.Option("--rpc", help="EVM JSON-RPC URL (default: the deployment file's).",
                                               show_default=False)]
HomeOpt = Annotated[Optional[Path], typer.Option("--home", help="Directory of the deployment file and stores.",
                                                 show_default=False)]
KeyOpt = Annotated[Optional[str], typer.Option("--key", help="Private key (hex).", show_default=False)]
KeyFileOpt = Annotated[Optional[Path], typer.Option("--key-file", help="File holding the private key (hex).",
                                                    show_default=False)]
DevOpt = Annotated[Optional[int], typer.Option("--dev-account", help="Use anvil's dev account N (local chains only).",
                                               show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]


@app.callback()
def main(ctx: typer.Context,
         rpc: Annotated[Optional[str], typer.Option("--rpc", envvar="VERISPEC_RPC",
                                                    help="EVM JSON-RPC URL for every command.")] = None,
         home: Annotated[Optional[Path], typer.Option("--home", envvar="VERISPEC_HOME",
                                                      help="Home directory (deployment file, stores).")] = None):
    ctx.obj = Globals(rpc, home)


def _globals(ctx: typer.Context) -> Globals:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Globals) else Globals()


def resolve_home(ctx: typer.Context, home: Path | None) -> Path:
    from node.chain.deployment import default_home

    chosen = home or _globals(ctx).home
    return Path(chosen).expanduser().resolve() if chosen else default_home()


# ---------------------------------------------------------------- errors


def _message(exc: BaseException) -> str | None:
    """The one-line message of an error a user can cause; None for a bug."""
    from node.chain.client import (ChainUnavailable, IdempotencyError, ReceiptTimeout, TransactionRejected,
                                   TransactionReverted)
    from node.chain.deployment import DeploymentFileError
    from node.chain.keys import KeySourceError
    from node.chain.local import LocalChainError
    from node.roles.requester import RequesterError, explain_revert
    from node.store import StoreError

    from node.chain.client import is_transient

    if isinstance(exc, ChainUnavailable):
        return f"{exc} — is the chain running? (`verispec chain up`, or pass --rpc URL)"
    if is_transient(exc):
        return f"lost the chain RPC: {type(exc).__name__}: {exc}"
    if isinstance(exc, TransactionReverted):
        return explain_revert(exc, now=int(time.time()))
    if isinstance(exc, KeySourceError):
        return f"bad key: {exc}"
    if isinstance(exc, (CliError, RequesterError, DeploymentFileError, LocalChainError, StoreError,
                        TransactionRejected, ReceiptTimeout, IdempotencyError)):
        return str(exc)
    return None


def cli_errors(fn: Callable) -> Callable:
    """Turn every expected failure into `error: <one line>` and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None
        except Exception as exc:  # noqa: BLE001 - the point is to never show a traceback to a user
            message = _message(exc)
            if message is None:
                if os.environ.get("VERISPEC_DEBUG"):
                    raise
                message = f"unexpected {type(exc).__name__}: {exc} (set VERISPEC_DEBUG=1 for the traceback)"
            err.print(f"[bold red]error:[/] {_one_line(message)}")
            raise typer.Exit(1) from None

    return wrapper


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# ---------------------------------------------------------------- sessions


def load_key(key: str | None, key_file: Path | None, dev_account: int | None):
    from node.chain.keys import load_account

    return load_account(key, key_file, dev_account)


def connect_deployment(ctx: typer.Context, rpc: str | None, home: Path | None):
    """(w3, deployment, home): the deployment file of `home`, over --rpc or the file's own URL."""
    from node.chain.client import connect
    from node.chain.deployment import Deployment

    home = resolve_home(ctx, home)
    deployment = Deployment.load(home / "deployment.json")
    url = rpc or _globals(ctx).rpc or deployment.rpc_url
    w3 = connect(url, wait=float(os.environ.get("VERISPEC_RPC_WAIT", "5")))
    deployment.check_chain(w3)
    deployment.rpc_url = url
    return w3, deployment, home


def requester_for(ctx: typer.Context, rpc: str | None, home: Path | None, key: str | None = None,
                  key_file: Path | None = None, dev_account: int | None = None, need_key: bool = True):
    from node.roles.requester import Requester

    account = load_key(key, key_file, dev_account) if need_key else None
    w3, deployment, home = connect_deployment(ctx, rpc, home)
    store = home / "cli" / f"{account.address.lower()}.db" if account is not None else None
    return Requester(w3, deployment, account, store_path=store)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, default=_json_default) + "\n")
    sys.stdout.flush()


def _json_default(value: Any):
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")


# ---------------------------------------------------------------- chain up / down


def _parse_params(items: list[str]):
    from dataclasses import fields

    from node.chain.deploy import DEFAULT_PARAMS
    from node.roles.requester import parse_amount

    names = {f.name for f in fields(DEFAULT_PARAMS)}
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
@cli_errors
def chain_up(ctx: typer.Context,
             port: Annotated[Optional[int], typer.Option("--port", help="anvil's port (default: a free one).")] = None,
             home: HomeOpt = None,
             param: Annotated[list[str], typer.Option("--param", help="Deployment parameter NAME=VALUE "
                                                      "(e.g. challenge_window=3600); repeatable.")] = [],
             as_json: JsonOpt = False):
    """Start anvil in the background (pid file in the home), deploy the contracts, write the deployment file."""
    from node.chain.local import chain_up as up

    params = _parse_params(param) if param else None
    chain = up(resolve_home(ctx, home), port, params)
    if as_json:
        emit_json({"rpc_url": chain.rpc_url, "pid": chain.pid, "deployment": str(chain.deployment_path),
                   "addresses": chain.deployment.addresses, "chain_id": chain.deployment.chain_id})
        return
    console.print(f"[green]chain up[/]: anvil pid {chain.pid} at {chain.rpc_url} "
                  f"(chain id {chain.deployment.chain_id})")
    for name, address in chain.deployment.addresses.items():
        console.print(f"  {name:16s} {address}")
    console.print(f"  deployment file  {chain.deployment_path}")
    console.print(f"  log              {chain.log_path}")
    console.print("Dev accounts 0..19 are funded (account 0 deployed); use --dev-account N. "
                  "Stop with `verispec chain down`.")


@chain_app.command("deploy")
@cli_errors
def chain_deploy(ctx: typer.Context,
                 rpc: Annotated[Optional[str], typer.Option(
                     "--rpc", help="RPC of a running dev chain (anvil, hardhat) whose first account is unlocked.",
                     show_default=False)] = None,
                 home: HomeOpt = None,
                 param: Annotated[list[str], typer.Option("--param", help="Deployment parameter NAME=VALUE; "
                                                          "repeatable.")] = [],
                 as_json: JsonOpt = False):
    """Deploy the contracts onto an already running dev chain and write the deployment file."""
    from node.chain.local import deploy_to

    url = rpc or _globals(ctx).rpc
    if not url:
        raise CliError("chain deploy needs --rpc URL (or use `chain up` to start a local anvil)")
    home = resolve_home(ctx, home)
    deployment = deploy_to(url, home, _parse_params(param) if param else None)
    if as_json:
        emit_json({"rpc_url": url, "deployment": str(home / "deployment.json"), "addresses": deployment.addresses,
                   "chain_id": deployment.chain_id})
        return
    console.print(f"[green]deployed[/] on {url} (chain id {deployment.chain_id}); deployment file "
                  f"{home / 'deployment.json'}")
    for name, address in deployment.addresses.items():
        console.print(f"  {name:16s} {address}")


@chain_app.command("down")
@cli_errors
def chain_down(ctx: typer.Context, home: HomeOpt = None):
    """Stop the anvil that `chain up` started for this home (via its pid file)."""
    from node.chain.local import chain_down as down

    home = resolve_home(ctx, home)
    pid = down(home)
    if pid is None:
        console.print(f"no chain started by `verispec chain up` is running for {home}")
    else:
        console.print(f"[green]chain down[/]: stopped anvil (pid {pid})")


# ---------------------------------------------------------------- operators


@app.command()
@cli_errors
def register(ctx: typer.Context,
             role: Annotated[str, typer.Option("--role", help="drafter | verifier | referee", show_default=False)],
             stake: Annotated[str, typer.Option("--stake", help="Stake in ETH (e.g. 1.5).", show_default=False)],
             model: Annotated[list[Path], typer.Option("--model", help="Model directory to serve (a drafter: its "
                                                       "draft model; verifier/referee: repeat for each model).")] = [],
             target_model: Annotated[Optional[Path], typer.Option("--target-model", help="Drafters: the target "
                                                                  "model its drafts are verified with.")] = None,
             alpha: Annotated[Optional[float], typer.Option("--alpha", help="Drafters: claimed acceptance rate α* "
                                                            "in [0,1] (default 0.6).")] = None,
             key: KeyOpt = None, key_file: KeyFileOpt = None, dev_account: DevOpt = None,
             rpc: RpcOpt = None, home: HomeOpt = None, as_json: JsonOpt = False):
    """Stake and register as a drafter, verifier or referee for the given model(s)."""
    from node.roles.requester import format_eth, parse_amount

    role = role.strip().lower()
    if role not in ("drafter", "verifier", "referee"):
        raise CliError(f"--role must be drafter, verifier or referee, got {role!r}")
    with closing(requester_for(ctx, rpc, home, key, key_file, dev_account)) as requester:
        result = requester.register(role, list(model), parse_amount(stake, "eth"), alpha, target_model)
    if as_json:
        emit_json(result)
        return
    console.print(f"[green]registered[/] {result.address} as {result.role} with {format_eth(result.stake_wei)} "
                  f"stake (tx {result.tx.tx_hash}, gas {result.tx.gas_used:,})")
    for model_id in result.model_ids:
        console.print(f"  model {model_id}")
    if result.alpha_star is not None:
        console.print(f"  claimed α* = {result.alpha_star}")


@app.command()
@cli_errors
def unbond(ctx: typer.Context, key: KeyOpt = None, key_file: KeyFileOpt = None, dev_account: DevOpt = None,
           rpc: RpcOpt = None, home: HomeOpt = None, as_json: JsonOpt = False):
    """Start unbonding your stake (inactive at once); run again after the unbonding period to withdraw it."""
    from node.roles.requester import format_eth, format_time

    with closing(requester_for(ctx, rpc, home, key, key_file, dev_account)) as requester:
        result = requester.unbond()
    if as_json:
        emit_json(result)
        return
    when = format_time(result.withdrawable_at) if result.withdrawable_at else "?"
    if result.action == "requested":
        console.print(f"[green]unbonding[/] {format_eth(result.stake_wei)}: withdrawable from {when} "
                      f"(then `verispec unbond` or `verispec withdraw` again)")
    elif result.action == "withdrawn":
        console.print(f"[green]withdrew[/] the stake of {format_eth(result.stake_wei)}")
    else:
        locks = f"; {result.locks} open job(s)/dispute(s) hold it" if result.locks else ""
        console.print(f"still unbonding: {format_eth(result.stake_wei)} withdrawable from {when}{locks}")


@app.command()
@cli_errors
def withdraw(ctx: typer.Context, key: KeyOpt = None, key_file: KeyFileOpt = None, dev_account: DevOpt = None,
             rpc: RpcOpt = None, home: HomeOpt = None, as_json: JsonOpt = False):
    """Withdraw everything you are owed: market earnings and refunds, dispute credits, unbonded stake."""
    from node.roles.requester import format_eth

    with closing(requester_for(ctx, rpc, home, key, key_file, dev_account)) as requester:
        result = requester.withdraw()
    if as_json:
        emit_json({**result.__dict__, "total_wei": result.total_wei})
        return
    console.print(f"[green]withdrew[/] {format_eth(result.total_wei)} to {result.address} (market "
                  f"{format_eth(result.market_wei)}, disputes {format_eth(result.disputes_wei)}, stake "
                  f"{format_eth(result.stake_wei)})")


# ---------------------------------------------------------------- jobs


def _cycle_table(report, tokenizer=None, title: str | None = None) -> Table:
    table = Table(title=title, show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("cycle", justify="right")
    table.add_column("accepted", justify="left")
    table.add_column("output")
    for cycle in report.cycles:
        bar = "■" * cycle.accepted + "□" * (cycle.gamma - cycle.accepted)
        text = tokenizer.decode(cycle.output) if tokenizer is not None else " ".join(map(str, cycle.output))
        table.add_row(str(cycle.cycle), f"{bar} {cycle.accepted}/{cycle.gamma}", repr(text)[1:-1][:60])
    return table


def _summary_lines(report) -> list[str]:
    from node.roles.requester import format_eth

    n = len(report.tokens)
    passes = len(report.cycles)
    alpha = f"{report.alpha:.3f}" if report.alpha is not None else "–"
    lines = [
        f"job {report.job_id}: {report.status}" + (f" ({report.finish_reason})" if report.finish_reason else "")
        + f" — {n} tokens in {passes} cycles" + (f" ({n / passes:.2f} tokens/pass)" if passes else "")
        + f", α = {alpha}, γ = {report.gamma}",
        f"gas {report.gas_used:,} over {report.tx_count} txs; cost {format_eth(report.cost_wei)} "
        f"(drafter {format_eth(report.payments['drafter'])}, verifier {format_eth(report.payments['verifier'])}), "
        f"refund {format_eth(report.payments['refund'])}" + ("" if report.finalized else " (settles at finalize)"),
    ]
    return lines


@app.command()
@cli_errors
def submit(ctx: typer.Context,
           prompt: Annotated[str, typer.Argument(help="The prompt (UTF-8 text).", show_default=False)],
           max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens to generate.")] = 64,
           gamma: Annotated[int, typer.Option("--gamma", help="Proposals per cycle γ (1..16).")] = 4,
           temperature: Annotated[float, typer.Option("--temperature", help="0 = greedy.")] = 1.0,
           top_k: Annotated[int, typer.Option("--top-k", help="0 = off.")] = 0,
           top_p: Annotated[float, typer.Option("--top-p", help="1 = off.")] = 1.0,
           drafter: Annotated[Optional[str], typer.Option("--drafter", help="Drafter address (default: an "
                                                          "active one serving the model pair).")] = None,
           verifier: Annotated[Optional[str], typer.Option("--verifier", help="Verifier address (default: an "
                                                           "active one serving the target).")] = None,
           price_token: Annotated[str, typer.Option("--price-token", help="Price per accepted token (wei; "
                                                    "or e.g. 2gwei, 0.001eth).")] = "1000000000000",
           price_pass: Annotated[str, typer.Option("--price-pass",
                                                   help="Price per target pass (wei).")] = "3000000000000",
           escrow: Annotated[Optional[str], typer.Option("--escrow", help="Escrow to send (wei or 0.1eth; default: "
                                                         "exactly what the market requires).")] = None,
           draft_model: Annotated[Path, typer.Option("--draft-model", help="Draft model (its id names the job's "
                                                     "draft model).")] = BUNDLED_DRAFT,
           target_model: Annotated[Path, typer.Option("--target-model",
                                                      help="Target model (tokenizer and id).")] = BUNDLED_TARGET,
           no_eos: Annotated[bool, typer.Option("--no-eos", help="Do not stop at the end-of-text token.")] = False,
           no_wait: Annotated[bool, typer.Option("--no-wait", help="Print the job id and return at once.")] = False,
           accept_timeout: Annotated[float, typer.Option("--accept-timeout", help="Seconds to wait for a verifier "
                                                         "to accept.")] = 120.0,
           timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the job to finish.")] = 1800.0,
           key: KeyOpt = None, key_file: KeyFileOpt = None, dev_account: DevOpt = None,
           rpc: RpcOpt = None, home: HomeOpt = None, as_json: JsonOpt = False):
    """Submit a job with escrow, wait for it with a progress bar, and print the text, cycles, α, gas and cost."""
    from node.roles.requester import load_tokenizer, parse_amount

    with closing(requester_for(ctx, rpc, home, key, key_file, dev_account)) as requester:
        job = requester.submit(
            prompt, draft_model=draft_model, target_model=target_model, max_tokens=max_tokens, gamma=gamma,
            temperature=temperature, top_k=top_k, top_p=top_p, drafter=drafter, verifier=verifier,
            price_token_wei=parse_amount(price_token), price_pass_wei=parse_amount(price_pass),
            escrow_wei=parse_amount(escrow, "wei") if escrow is not None else None, eos=not no_eos)
        if no_wait:
            if as_json:
                emit_json({"job_id": job.job_id, "drafter": job.drafter, "verifier": job.verifier,
                           "escrow_wei": job.escrow_wei, "tx": job.tx})
            else:
                console.print(f"submitted job {job.job_id} (drafter {job.drafter}, verifier {job.verifier}, "
                              f"escrow {job.escrow_wei} wei)")
            return
        if not as_json:
            err.print(f"job {job.job_id} submitted ({job.prompt_tokens} prompt tokens; drafter {job.drafter}, "
                      f"verifier {job.verifier}); waiting…")
        wait_with_progress(requester, job.job_id, max_tokens, quiet=as_json, accept_timeout=accept_timeout,
                           timeout=timeout)
        report = requester.report(job.job_id, tokenizer_path=target_model)
    if as_json:
        emit_json({**report.to_json(), "cycle_count": len(report.cycles)})
        return
    print_report(report, load_tokenizer(target_model))


def wait_with_progress(requester, job_id: int, max_tokens: int, quiet: bool = False, **kwargs) -> str:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if quiet:
        return requester.wait(job_id, **kwargs)
    stats = {"accepted": 0, "rejected": 0}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("tokens"),
                  TimeElapsedColumn(), console=err, transient=False) as progress:
        task = progress.add_task(f"job {job_id}: waiting for the verifier", total=max_tokens)

        def on_cycle(cycle, tokens):
            stats["accepted"] += cycle.accepted
            stats["rejected"] += cycle.rejected
            seen = stats["accepted"] + stats["rejected"]
            alpha = stats["accepted"] / seen if seen else 1.0
            progress.update(task, completed=len(tokens),
                            description=f"job {job_id}: cycle {cycle.cycle} "
                                        f"{cycle.accepted}/{cycle.gamma} accepted, α {alpha:.2f}")

        reason = requester.wait(job_id, on_cycle=on_cycle, **kwargs)
        progress.update(task, total=max(progress.tasks[0].completed, 1))
    return reason


def print_report(report, tokenizer=None) -> None:
    from node.roles.requester import format_eth, format_time

    console.print("[bold]prompt[/]: " + repr(report.prompt))
    if report.text is not None:
        console.print("[bold]output[/]:")
        console.print(report.prompt + report.text, markup=False)
    else:
        console.print(f"[bold]output tokens[/]: {report.tokens}")
    if report.cycles:
        console.print(_cycle_table(report, tokenizer))
    for line in _summary_lines(report):
        console.print(line)
    if report.status == "Finished":
        console.print(f"challenge window until {format_time(report.deadline)}; "
                      f"then `verispec finalize {report.job_id}`")
    for d in report.disputes:
        votes = ", ".join(f"{v.referee[:10]}…={v.verdict}" for v in d.votes)
        console.print(f"dispute {d.dispute_id}: {d.kind} replay of cycle {d.cycle} index {d.index} against "
                      f"{d.accused[:10]}… — {d.status}/{d.outcome} ({votes}); "
                      f"slashed {format_eth(d.accused_slashed_wei)}")


@app.command()
@cli_errors
def status(ctx: typer.Context,
           job: Annotated[int, typer.Argument(help="Job id.", show_default=False)],
           target_model: Annotated[Optional[Path], typer.Option("--target-model", help="Model whose tokenizer "
                                                                "decodes the output (default: the bundled target, "
                                                                "when it is the job's).", show_default=False)] = None,
           rpc: RpcOpt = None, home: HomeOpt = None, as_json: JsonOpt = False):
    """Show a job from chain data: status, cycles and acceptance per cycle, α, payments, disputes, text."""
    from node.roles.requester import load_model_info, load_tokenizer

    if target_model is not None and not target_model.is_dir():
        raise CliError(f"model directory {target_model} does not exist")
    with closing(requester_for(ctx, rpc, home, need_key=False)) as requester:
        tokenizer_path = target_model
        # the bundled model decodes only jobs of the bundled model: no wrong text from a foreign tokenizer
        if tokenizer_path is None and BUNDLED_TARGET.is_dir():
            bundled = "0x" + load_model_info(BUNDLED_TARGET).model_id.hex()
            if requester.job_view(job)["targetModel"].hex() == bundled[2:]:
                tokenizer_path = BUNDLED_TARGET
        report = requester.report(job, tokenizer_path=tokenizer_path)
    if as_json:
        emit_json({**report.to_json(), "cycle_count": len(report.cycles)})
        return
    print_report(report, load_tokenizer(tokenizer_path) if tokenizer_path else None)


@app.command()
@cli_errors
def audit(ctx: typer.Context,
          job: Annotated[int, typer.Argument(help="Job id.", show_default=False)],
          kind: Annotated[str, typer.Option("--kind", help="draft: replay the drafter's proposals and q; target: the "
                                            "verifier's p and outToken.")] = "draft",
          draft_model: Annotated[Path, typer.Option("--draft-model", help="The job's draft model (checked against "
                                                    "its model id; default: the bundled draft).",
                                                    show_default=False)] = BUNDLED_DRAFT,
          target_model: Annotated[Path, typer.Option("--target-model", help="The job's target model, for --kind "
                                                     "target (default: the bundled target).",
                                                     show_default=False)] = BUNDLED_TARGET,
          rpc: RpcOpt = None, home: HomeOpt = None, as_json: JsonOpt = False):
    """Replay a job from chain data as a watchdog and list what a dispute would prove: per verified cycle the first
    proposal an honest drafter could not have made (--kind draft), or every binding p and outToken the target model
    contradicts (--kind target, by the referees' own rule)."""
    from node.roles.requester import WAD, replay_draft, replay_target

    kind = kind.strip().lower()
    if kind not in ("draft", "target"):
        raise CliError(f"--kind must be draft or target, got {kind!r}")
    with closing(requester_for(ctx, rpc, home, need_key=False)) as requester:  # it refuses a missing or wrong model
        faults = (replay_draft(requester, job, draft_model) if kind == "draft"
                  else replay_target(requester, job, target_model, draft_model))
    if as_json:
        emit_json({"job_id": job, "kind": kind, "faults": faults})
        return
    if not faults:
        who = "drafter" if kind == "draft" else "verifier"
        console.print(f"job {job}: the replay agrees with everything the {who} posted in every verified cycle")
        return
    table = Table(box=None, header_style="bold")
    if kind == "draft":
        for column in ("cycle", "index", "committed token", "committed q", "honest token", "replayed q", "binding",
                       "why"):
            table.add_column(column)
        for f in faults:
            why = "not the inverse-CDF sample" if f.reason == "token" else "q is not the draft's probability"
            table.add_row(str(f.cycle), str(f.index), str(f.committed_token), f"{f.committed_q / WAD:.4f}",
                          str(f.replay_token), f"{f.replay_q / WAD:.4f}", "yes" if f.binding else "no", why)
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
        console.print(f"dispute the first binding one: verispec dispute {job} --cycle {f.cycle} --index {f.index} "
                      f"--kind {kind}")
    else:
        console.print("none binds (each lies after its cycle's first rejection): nothing to dispute")


@app.command()
@cli_errors
def dispute(ctx: typer.Context,
            job: Annotated[int, typer.Argument(help="Job id.", show_default=False)],
            cycle: Annotated[int, typer.Option("--cycle", help="Verified cycle.", show_default=False)],
            index: Annotated[int, typer.Option("--index", help="Position: 0..γ-1 a proposal, γ the outToken.",
                                               show_default=False)],
            kind: Annotated[str, typer.Option("--kind", help="draft (accuse the drafter) | target (the verifier).",
                                              show_default=False)],
            wait: Annotated[bool, typer.Option("--wait", help="Wait until the referees resolve it.")] = False,
            timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait with --wait.")] = 600.0,
            key: KeyOpt = None, key_file: KeyFileOpt = None, dev_account: DevOpt = None,
            rpc: RpcOpt = None, home: HomeOpt = None, as_json: JsonOpt = False):
    """Open a dispute on one position of a verified cycle, posting the bond (record and proof from chain data)."""
    kind = kind.strip().lower()
    if kind not in ("draft", "target"):
        raise CliError(f"--kind must be draft or target, got {kind!r}")
    if cycle < 0 or index < 0:
        raise CliError("--cycle and --index must be >= 0")
    with closing(requester_for(ctx, rpc, home, key, key_file, dev_account)) as requester:
        info = requester.open_dispute(job, cycle, index, kind)
        if not as_json:
            console.print(f"[green]dispute {info.dispute_id} opened[/] on job {job} cycle {cycle} index {index} "
                          f"({kind} replay) against {info.accused}; referees: {', '.join(info.referees) or 'none drawn'}")
        if wait:
            info = requester.wait_dispute(info.dispute_id, timeout=timeout)
    if as_json:
        emit_json(info)
        return
    if wait:
        print_dispute(info)


def print_dispute(info) -> None:
    from node.roles.requester import format_eth

    console.print(f"dispute {info.dispute_id}: {info.status}, outcome [bold]{info.outcome}[/] "
                  f"({info.cheated_votes} cheated / {info.faithful_votes} faithful); accused slashed "
                  f"{format_eth(info.accused_slashed_wei)}")
    for vote in info.votes:
        console.print(f"  referee {vote.referee}: {vote.verdict}")


@app.command()
@cli_errors
def finalize(ctx: typer.Context, job: Annotated[int, typer.Argument(help="Job id.", show_default=False)],
             key: KeyOpt = None, key_file: KeyFileOpt = None, dev_account: DevOpt = None,
             rpc: RpcOpt = None, home: HomeOpt = None, as_json: JsonOpt = False):
    """Settle a finished job after its challenge window: pay drafter and verifier, refund the rest."""
    from node.roles.requester import format_eth

    with closing(requester_for(ctx, rpc, home, key, key_file, dev_account)) as requester:
        tx, payments = requester.finalize(job)
    if as_json:
        emit_json({"job_id": job, "tx": tx, "payments": payments})
        return
    console.print(f"[green]finalized[/] job {job}: drafter {format_eth(payments['drafter'])}, verifier "
                  f"{format_eth(payments['verifier'])}, refund {format_eth(payments['refund'])} "
                  f"(credited; `verispec withdraw` pays out)")


@app.command("claim-timeout")
@cli_errors
def claim_timeout(ctx: typer.Context, job: Annotated[int, typer.Argument(help="Job id.", show_default=False)],
                  key: KeyOpt = None, key_file: KeyFileOpt = None, dev_account: DevOpt = None,
                  rpc: RpcOpt = None, home: HomeOpt = None, as_json: JsonOpt = False):
    """End a job whose current deadline passed: refund a job no verifier accepted, slash a party that missed
    its turn (anyone may call it)."""
    with closing(requester_for(ctx, rpc, home, key, key_file, dev_account)) as requester:
        tx, finished = requester.claim_timeout(job)
    if as_json:
        emit_json({"job_id": job, "tx": tx, **finished})
        return
    slashed = f"; {finished['party']} slashed {finished['slashed']} wei" if finished["slashed"] else ""
    console.print(f"[green]job {job} ended[/]: {finished['reason']}{slashed}")


# ---------------------------------------------------------------- node processes


ROLE_CLASSES = {"drafter": ("node.roles.drafter", "DrafterNode"), "verifier": ("node.roles.verifier", "VerifierNode"),
                "referee": ("node.roles.referee", "RefereeNode")}


def load_role_class(role: str):
    import importlib

    module_name, class_name = ROLE_CLASSES[role]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("node.roles"):
            raise CliError(f"the {role} node is not available in this build ({module_name} is missing)") from None
        raise
    return getattr(module, class_name)


@app.command()
@cli_errors
def serve(ctx: typer.Context,
          role: Annotated[str, typer.Argument(help="drafter | verifier | referee", show_default=False)],
          model: Annotated[Path, typer.Option("--model", help="The model this node runs: a drafter's draft model, "
                                              "a verifier's or referee's target model.", show_default=False)],
          draft_model: Annotated[Optional[Path], typer.Option("--draft-model", help="Verifier/referee: the draft "
                                                              "model (to replay drafts).")] = None,
          target_model: Annotated[Optional[Path], typer.Option("--target-model", help="Drafter: the target model "
                                                               "of its pair.")] = None,
          behavior: Annotated[str, typer.Option("--behavior", help="honest | biased (drafter) | retaliate "
                                                "(verifier): misbehave, for demos and tests.")] = "honest",
          store: Annotated[Optional[Path], typer.Option("--store", help="SQLite store of this node (default: "
                                                        "<home>/nodes/<role>-<address>.db).")] = None,
          poll_interval: Annotated[float, typer.Option("--poll-interval", help="Seconds between chain polls.")] = 0.2,
          device: Annotated[Optional[str], typer.Option("--device",
                                                        help="cpu | cuda (default: cuda if present).")] = None,
          threads: Annotated[Optional[int], typer.Option("--threads", help="torch CPU threads.")] = None,
          log_level: Annotated[str, typer.Option("--log-level", help="debug | info | warning | error")] = "info",
          key: KeyOpt = None, key_file: KeyFileOpt = None, dev_account: DevOpt = None,
          rpc: RpcOpt = None, home: HomeOpt = None):
    """Run a drafter, verifier or referee node until Ctrl-C / SIGTERM (register it first with `register`)."""
    role = role.strip().lower()
    if role not in ROLE_CLASSES:
        raise CliError(f"role must be drafter, verifier or referee, got {role!r}")
    allowed = {"drafter": ("honest", "biased"), "verifier": ("honest", "retaliate"), "referee": ("honest",)}[role]
    if behavior not in allowed:
        raise CliError(f"--behavior for a {role} must be one of: {', '.join(allowed)}")
    if role == "drafter":
        if target_model is None:
            raise CliError("a drafter needs --target-model PATH")
        paths = {"draft": model, "target": target_model}
    else:
        if draft_model is None:
            raise CliError(f"a {role} needs --draft-model PATH (it replays drafts)")
        paths = {"target": model, "draft": draft_model}
    for name, path in paths.items():
        if not Path(path).is_dir():
            raise CliError(f"{name} model directory {path} does not exist")
    if device is not None:
        from node.roles.base import resolve_device

        try:
            resolve_device(device)
        except ValueError as exc:
            raise CliError(f"--device: {exc}") from None
    import logging

    level = getattr(logging, log_level.strip().upper(), None)
    if not isinstance(level, int):
        raise CliError(f"--log-level must be debug, info, warning or error, got {log_level!r}")
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    account = load_key(key, key_file, dev_account)
    node_class = load_role_class(role)
    w3, deployment, home = connect_deployment(ctx, rpc, home)
    store = store or home / "nodes" / f"{role}-{account.address.lower()}.db"
    if threads:
        import torch

        torch.set_num_threads(threads)
    kwargs = {"behavior": behavior} if role != "referee" else {}
    if role == "drafter":
        node = node_class(w3, deployment, account, store, paths["draft"], paths["target"], poll_interval=poll_interval,
                          device=device, **kwargs)
    else:
        node = node_class(w3, deployment, account, store, paths["target"], paths["draft"], poll_interval=poll_interval,
                          device=device, **kwargs)
    stop = threading.Event()

    def request_stop(signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    err.print(f"{role} node {account.address} ({behavior}) serving on {deployment.rpc_url}; store {store}. "
              "Ctrl-C to stop.")
    try:
        node.run(stop)
    finally:
        close = getattr(node, "close", None)
        if callable(close):
            close()
    err.print(f"{role} node {account.address} stopped")


# ---------------------------------------------------------------- the demo


@app.command()
@cli_errors
def demo(home: Annotated[Optional[Path], typer.Option("--home", help="Keep the demo's chain logs, stores and "
                                                      "plot here (default: a fresh temp directory).")] = None,
         max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens per job.")] = 48,
         prompt: Annotated[str, typer.Option("--prompt", help="The honest job's prompt.")] = "def fibonacci(n):\n"):
    """Everything end to end on a local chain: nodes as processes, an honest job, a biased drafter slashed.

    Starts anvil, deploys, registers and starts a drafter, a verifier and three referees as separate
    `verispec serve` processes, runs an honest job (text + per-cycle acceptance + plot), then a job with a
    biased drafter, finds a biased position by replaying the draft model over chain data, disputes it and
    shows the referees' votes and the slash. Stops everything it started, also on Ctrl-C."""
    run_demo(home=home, max_tokens=max_tokens, prompt=prompt)


DEMO_REQUESTER, DEMO_DRAFTER, DEMO_VERIFIER, DEMO_REFEREES, DEMO_BIASED, DEMO_WATCHDOG = 1, 2, 3, (4, 5, 6), 7, 8
DEMO_BIASED_PROMPT = "class Stack:\n    def push(self, item):\n"


class NodeProcesses:
    """`verispec serve` subprocesses, each in its own process group, stopped together."""

    def __init__(self, home: Path):
        self.home = home
        self.procs: list[tuple[str, Any, Path]] = []

    def start(self, name: str, args: list[str]) -> None:
        import subprocess

        log_path = self.home / "logs" / f"{name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
                   PYTHONUNBUFFERED="1")
        with open(log_path, "ab") as log:
            process = subprocess.Popen([sys.executable, "-m", "node.cli", *args], stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                       cwd=str(PROJECT_ROOT))
        self.procs.append((name, process, log_path))

    def check(self) -> None:
        for name, process, log_path in self.procs:
            if process.poll() is not None:
                raise CliError(f"the {name} node exited with code {process.returncode}: {_tail(log_path)}")

    def wait_ready(self, timeout: float = 180.0, marker: str = "serving on") -> None:
        deadline = time.monotonic() + timeout
        pending = {name: path for name, _, path in self.procs}
        while pending:
            self.check()
            for name, path in list(pending.items()):
                if path.exists() and marker in path.read_text(errors="replace"):
                    del pending[name]
            if time.monotonic() > deadline:
                raise CliError(f"nodes not ready within {timeout:.0f}s: {', '.join(pending)}")
            time.sleep(0.2)

    def stop_all(self, timeout: float = 15.0) -> None:
        for _, process, _ in self.procs:
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for _, process, _ in self.procs:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except Exception:
                _signal_group(process, signal.SIGKILL)
                process.wait()
        self.procs.clear()


def _signal_group(process, sig) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"


def _save_plot(reports: list, path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # plotting is a bonus; the demo does not fail without it
        return None
    fig, axes = plt.subplots(len(reports), 1, figsize=(9, 2.6 * len(reports)), squeeze=False)
    for ax, (label, report) in zip(axes[:, 0], reports):
        xs = [c.cycle for c in report.cycles]
        ax.bar(xs, [c.acceptance for c in report.cycles], color="tab:blue", alpha=0.8, label="accepted / γ")
        if report.alpha is not None:
            ax.axhline(report.alpha, color="tab:red", linestyle="--",
                       label=f"α = {report.alpha:.2f} (Σ accepted / Σ (accepted + rejected))")
        ax.set_ylim(0, 1.35)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
        ax.set_ylabel("acceptance")
        ax.set_title(f"job {report.job_id} ({label}): {len(report.tokens)} tokens in {len(report.cycles)} cycles, "
                     f"γ = {report.gamma}")
        ax.legend(loc="upper center", fontsize=8, ncol=2, frameon=False)
    axes[-1, 0].set_xlabel("cycle")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _finalize_or_read(requester, job_id: int) -> dict[str, int]:
    """Finalize `job_id`, or read its settlement if a node finalized it first."""
    from node.chain.client import TransactionReverted

    try:
        return requester.finalize(job_id)[1]
    except TransactionReverted as exc:
        if exc.error_name != "WrongStatus":
            raise
        return requester.report(job_id, with_gas=False).payments


def run_demo(home: Path | None = None, max_tokens: int = 48, prompt: str = "def fibonacci(n):\n") -> None:
    """The whole system on this machine in a few minutes (see `verispec demo --help`); stops all it started."""
    import tempfile

    started = time.monotonic()
    home = Path(home).expanduser().resolve() if home else Path(tempfile.mkdtemp(prefix="verispec-demo-"))
    home.mkdir(parents=True, exist_ok=True)
    nodes = NodeProcesses(home)
    chain_started = False

    def on_term(signum, _frame):
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_term) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        chain_started = _demo(home, nodes, max_tokens, prompt, started)
    finally:
        nodes.stop_all()
        from node.chain.local import chain_down, read_pid

        if chain_started or read_pid(home) is not None:
            chain_down(home)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _step(text: str) -> None:
    console.rule(f"[bold]{text}")


def _demo(home: Path, nodes: NodeProcesses, max_tokens: int, prompt: str, started: float) -> bool:
    from node.chain.client import TransactionReverted, connect
    from node.chain.keys import dev_account
    from node.chain.local import chain_up
    from node.roles.requester import ETHER, Requester, format_eth, load_tokenizer, replay_draft

    load_role_class("drafter"), load_role_class("verifier"), load_role_class("referee")  # fail early, clearly
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    _step("1. a local chain with the protocol deployed")
    chain = chain_up(home)
    console.print(f"anvil pid {chain.pid} at {chain.rpc_url}; home {home}")
    for name, address in chain.deployment.addresses.items():
        console.print(f"  {name:16s} {address}")
    w3 = connect(chain.rpc_url)
    deployment = chain.deployment

    def actor(index: int) -> Requester:
        account = dev_account(index)
        return Requester(w3, deployment, account, store_path=home / "cli" / f"{account.address.lower()}.db")

    target, draft = BUNDLED_TARGET, BUNDLED_DRAFT
    _step("2. operators stake and register (model ids from the bundled checkpoints)")
    roles = [("drafter", DEMO_DRAFTER, 2 * ETHER), ("drafter (biased)", DEMO_BIASED, 2 * ETHER),
             ("verifier", DEMO_VERIFIER, 2 * ETHER)]
    roles += [(f"referee {i + 1}", n, ETHER) for i, n in enumerate(DEMO_REFEREES)]
    table = Table(box=None, header_style="bold")
    for column in ("role", "dev account", "address", "stake", "models"):
        table.add_column(column)
    addresses = {}
    for label, index, stake in roles:
        operator = actor(index)
        if label.startswith("drafter"):
            result = operator.register("drafter", [draft], stake, alpha=0.6, target_model_path=target)
        elif label == "verifier":
            result = operator.register("verifier", [target], stake)
        else:
            result = operator.register("referee", [target, draft], stake)
        operator.close()
        addresses[index] = result.address
        table.add_row(label, str(index), result.address, format_eth(stake),
                      ", ".join(m[:10] + "…" for m in result.model_ids))
    console.print(table)

    _step("3. node processes: drafter, biased drafter, verifier, 3 referees (`verispec serve …`)")
    common = ["--home", str(home), "--poll-interval", "0.2", "--device", "cpu", "--threads", "1"]
    nodes.start("drafter", ["serve", "drafter", "--model", str(draft), "--target-model", str(target),
                            "--dev-account", str(DEMO_DRAFTER), *common])
    nodes.start("drafter-biased", ["serve", "drafter", "--model", str(draft), "--target-model", str(target),
                                   "--behavior", "biased", "--dev-account", str(DEMO_BIASED), *common])
    nodes.start("verifier", ["serve", "verifier", "--model", str(target), "--draft-model", str(draft),
                             "--dev-account", str(DEMO_VERIFIER), *common])
    for i, index in enumerate(DEMO_REFEREES):
        nodes.start(f"referee-{i + 1}", ["serve", "referee", "--model", str(target), "--draft-model", str(draft),
                                         "--dev-account", str(index), *common])
    nodes.wait_ready()
    console.print(f"{len(nodes.procs)} node processes up; logs in {home / 'logs'}")

    requester = actor(DEMO_REQUESTER)
    tokenizer = load_tokenizer(target)

    def run_job(job_prompt: str, drafter_index: int, label: str):
        job = requester.submit(job_prompt, draft_model=draft, target_model=target, max_tokens=max_tokens, gamma=4,
                               drafter=addresses[drafter_index], verifier=addresses[DEMO_VERIFIER])
        console.print(f"job {job.job_id} ({label}): {job.prompt_tokens} prompt tokens, escrow "
                      f"{format_eth(job.escrow_wei)}, drafter {job.drafter}")
        wait_with_progress(requester, job.job_id, max_tokens, accept_timeout=120, timeout=600)
        nodes.check()
        report = requester.report(job.job_id, tokenizer_path=target)
        console.print("[bold]text[/] (decoded from CycleVerified events):")
        console.print(report.prompt + (report.text or ""), markup=False)
        console.print(_cycle_table(report, tokenizer))
        for line in _summary_lines(report):
            console.print(line)
        return report

    _step("4. an honest job")
    honest = run_job(prompt, DEMO_DRAFTER, "honest drafter")

    _step("5. a job with the biased drafter, and a watchdog's replay of its drafts")
    biased, fault = None, None
    for attempt in range(3):
        biased = run_job(DEMO_BIASED_PROMPT, DEMO_BIASED, "biased drafter")
        checks = replay_draft(requester, biased.job_id, draft)
        console.print(f"α of this job {biased.alpha or 0:.2f} vs {honest.alpha or 0:.2f} for the honest drafter: "
                      f"acceptance "
                      f"alone does not show the bias. The watchdog's replay of the draft model over chain data "
                      f"does: {len(checks)} of {len(biased.cycles)} cycles hold a proposal an honest drafter could "
                      f"not have made:")
        for check in checks:
            where = "binding" if check.binding else "after a rejection (binds nothing)"
            console.print(f"  cycle {check.cycle} index {check.index}: committed token {check.committed_token} "
                          f"(q = {check.committed_q / 1e18:.4f}), honest replay draws {check.replay_token} "
                          f"(replayed q of the committed token = {check.replay_q / 1e18:.4f}) — {where}")
        fault = next((c for c in checks if c.binding), None)
        if fault is not None:
            break
        console.print("no binding biased position in this job; running another")
    plot = _save_plot([("honest", honest), ("biased", biased)], home / "acceptance.png")
    if plot:
        console.print(f"per-cycle acceptance plot: {plot}")
    if fault is None:
        raise CliError("the biased drafter never deviated on a binding position in 3 jobs; nothing to dispute")

    _step(f"6. dispute: draft replay of job {biased.job_id}, cycle {fault.cycle}, index {fault.index}")
    watchdog = actor(DEMO_WATCHDOG)
    watched = [addresses[DEMO_BIASED], requester.address, watchdog.address] + [addresses[i] for i in DEMO_REFEREES]
    before = {a: watchdog.balances(a) for a in watched}
    info = None
    try:
        info = watchdog.open_dispute(biased.job_id, fault.cycle, fault.index, "draft")
        console.print(f"watchdog {watchdog.address} opened dispute {info.dispute_id} with a "
                      f"{format_eth(watchdog.disputes.functions.bond().call())} bond; referees drawn: "
                      f"{', '.join(info.referees) or 'none'}")
    except TransactionReverted as exc:
        if exc.error_name not in ("PositionUnderDispute", "PositionAlreadyProven"):
            raise
        existing = [d for d in watchdog.job_disputes(biased.job_id) if (d.cycle, d.index) == (fault.cycle, fault.index)]
        if not existing:
            raise
        info = existing[-1]
        console.print(f"a node already disputed this position (dispute {info.dispute_id} by {info.challenger}); "
                      "following it")

    def on_change(d):
        nodes.check()
        committed = sum(v.committed for v in d.votes)
        revealed = sum(v.verdict != "None" for v in d.votes)
        console.print(f"  {d.status}: answered={'yes' if d.answer else 'no'}, {committed}/{len(d.votes)} votes "
                      f"committed, {revealed}/{len(d.votes)} revealed")

    info = watchdog.wait_dispute(info.dispute_id, timeout=300, on_change=on_change)
    if info.answer:
        console.print(f"the accused answered: q = {info.answer['claimed_prob'] / 1e18:.4f} for token {info.token} "
                      f"(committed {info.claimed_value / 1e18:.4f}); its top tokens {info.answer['top_tokens'][:5]}")
    print_dispute(info)
    after = {a: watchdog.balances(a) for a in watched}
    names = {addresses[DEMO_BIASED]: "biased drafter", requester.address: "requester", watchdog.address: "watchdog"}
    names.update({addresses[i]: f"referee {n + 1}" for n, i in enumerate(DEMO_REFEREES)})
    table = Table(box=None, header_style="bold", title="balances (stake in the registry; credits withdrawable)")
    for column in ("who", "stake before", "stake after", "dispute credits", "market owed"):
        table.add_column(column)
    for address in watched:
        table.add_row(names[address], format_eth(before[address]["stake"]), format_eth(after[address]["stake"]),
                      format_eth(after[address]["disputes"]), format_eth(after[address]["market"]))
    console.print(table)

    _step("7. settlement after the challenge window (local chain: time skipped with evm_increaseTime)")
    window = deployment.deployment_params.challenge_window
    w3.provider.make_request("evm_increaseTime", [window + 1])
    w3.provider.make_request("evm_mine", [])
    for report in (honest, biased):
        pay = _finalize_or_read(requester, report.job_id)
        console.print(f"job {report.job_id}: drafter {format_eth(pay['drafter'])}, verifier "
                      f"{format_eth(pay['verifier'])}, refund to the requester {format_eth(pay['refund'])}")
    requester.close()
    watchdog.close()
    console.rule(f"[bold green]demo done in {time.monotonic() - started:.0f}s")
    console.print(f"home {home} (logs, stores, acceptance.png); stopping nodes and the chain")
    return True


if __name__ == "__main__":
    app()
