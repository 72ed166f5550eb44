"""What every `verispec` command shares, declared once: its context object (`Session`, in ctx.obj: where its
chain, home and key come from), the options that fill it, checks of choice options, and one-line errors.

Like ape's CLI context: a decorator (`session_options`) adds the shared options to a command and puts the
Session in ctx.obj, so `verispec register --dev-account 2 …` works after the command as well as the
global `verispec --home DIR register …` before it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from node.chain.enums import DisputeKind, Role
from node.console import console, err, print_error

# ---------------------------------------------------------------- errors


class CliError(RuntimeError):
    """A user-facing error: printed as one line, exit code 1."""


def user_message(exc: BaseException) -> str | None:
    """The one-line message of an error a user can cause; None for a bug."""
    from node.chain.deployment import DeploymentFileError
    from node.chain.errors import (
        ChainUnavailable,
        IdempotencyError,
        ReceiptTimeout,
        TransactionRejected,
        TransactionReverted,
    )
    from node.chain.keys import KeySourceError
    from node.chain.local import LocalChainError
    from node.chain.rpc import is_transient
    from node.demo.errors import DemoError
    from node.processes import NodeProcessError
    from node.requester.errors import RequesterError
    from node.requester.reverts import explain_revert
    from node.store import StoreError

    if isinstance(exc, ChainUnavailable):
        return f"{exc} — is the chain running? (`verispec chain up`, or pass --rpc URL)"
    if is_transient(exc):
        return f"lost the chain RPC: {type(exc).__name__}: {exc}"
    if isinstance(exc, TransactionReverted):
        return explain_revert(exc, now=_chain_time())
    checkpoints = sys.modules.get("node.decoding.model_id")  # not loaded: the error cannot be one of its own
    if checkpoints is not None and isinstance(exc, checkpoints.CheckpointError):
        return str(exc)
    if isinstance(exc, KeySourceError):
        return f"bad key: {exc}"
    if isinstance(
        exc,
        (
            CliError,
            RequesterError,
            DeploymentFileError,
            LocalChainError,
            StoreError,
            TransactionRejected,
            ReceiptTimeout,
            IdempotencyError,
            NodeProcessError,
            DemoError,
        ),
    ):
        return str(exc)
    return None


_CONNECTED: list = []  # the chain this command connected to, for the chain-time countdown of an error


def _chain_time() -> int | None:
    """The latest block's time of the chain the command used (a dev chain's clock may run ahead of the wall
    clock: `verispec chain advance`); None when there is none to ask."""
    try:
        return int(_CONNECTED[-1].eth.get_block("latest")["timestamp"]) if _CONNECTED else None
    except Exception:  # the countdown must never hide the error itself
        return None


def _stdout_closed() -> bool:
    """Whether whatever reads our stdout has gone (`verispec … | head`): on Linux a pipe without readers polls as
    POLLERR. Tells that broken pipe apart from a lost chain connection's."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def _is_usage_error(exc: BaseException) -> bool:
    # click's exceptions, duck-typed: typer may vendor its own click
    return hasattr(exc, "format_message") and hasattr(exc, "exit_code")


class CommandGroup(TyperGroup):
    """Typer's group, where every failure becomes one line on stderr: a usage error (missing option, bad value,
    unknown command) exits 2, any other error a command or an option's check raises exits 1."""

    def invoke(self, ctx):
        _CONNECTED.clear()  # a command's countdowns ask its own chain (tests run many commands in one process)
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None
        except Exception as exc:
            if _is_usage_error(exc):
                raise
            if isinstance(exc, BrokenPipeError) and _stdout_closed():
                # the reader stopped reading (`| head`): nothing is wrong and nobody is left to tell; exit like a
                # process killed by SIGPIPE, and keep Python from failing again on flushing stdout at exit
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                raise typer.Exit(141) from None
            message = user_message(exc)
            if message is None:
                if os.environ.get("VERISPEC_DEBUG"):
                    raise
                message = f"unexpected {type(exc).__name__}: {exc} (set VERISPEC_DEBUG=1 for the traceback)"
            print_error(message)
            raise typer.Exit(1) from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except Exception as exc:
            if not _is_usage_error(exc):
                raise
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
                console.print(ctx.get_help())
                sys.exit(2)
            where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            print_error(exc.format_message() + where)
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


# ---------------------------------------------------------------- where a command's chain and key come from


@dataclasses.dataclass(frozen=True)
class Session:
    """A command's chain, home and key (docs/cli.md): its own --rpc/--home over the global ones, then
    $VERISPEC_RPC/$VERISPEC_HOME, then the deployment file's RPC and ./.verispec."""

    rpc: str | None = None
    home: Path | None = None
    key: str | None = None
    key_file: Path | None = None
    dev_account: int | None = None

    def home_dir(self) -> Path:
        from node.chain.deployment import default_home

        return Path(self.home).expanduser().resolve() if self.home else default_home()

    def account(self):
        from node.chain.keys import load_account

        return load_account(self.key, self.key_file, self.dev_account)

    def connect(self):
        """(w3, deployment, home): the home's deployment file, over --rpc or the file's own URL."""
        from node.chain.deployment import Deployment
        from node.chain.rpc import connect

        home = self.home_dir()
        deployment = Deployment.load(home / "deployment.json")
        url = self.rpc or deployment.rpc_url
        w3 = connect(url, wait=float(os.environ.get("VERISPEC_RPC_WAIT", "5")))
        deployment.check_chain(w3)
        deployment.rpc_url = url
        _CONNECTED.append(w3)
        if self.dev_account is not None:
            self._check_dev_account(w3)
        return w3, deployment, home

    def _check_dev_account(self, w3) -> None:
        """A dev account exists only as far as the chain funded it: `chain up` funds 0..DEV_ACCOUNTS-1."""
        from node.chain.local import DEV_ACCOUNTS

        address = self.account().address
        if w3.eth.get_balance(address) == 0 and w3.eth.get_transaction_count(address) == 0:
            raise CliError(
                f"--dev-account {self.dev_account} ({address}) is not funded on this chain "
                f"(`verispec chain up` funds dev accounts 0..{DEV_ACCOUNTS - 1})"
            )

    def requester(self, need_key: bool = True):
        from node.requester.client import Requester

        account = self.account() if need_key else None
        w3, deployment, home = self.connect()
        store = home / "cli" / f"{account.address.lower()}.db" if account is not None else None
        return Requester(w3, deployment, account, store_path=store)


SHARED_OPTIONS = {
    "key": Annotated[str | None, typer.Option("--key", help="Private key (hex).", show_default=False)],
    "key_file": Annotated[
        Path | None, typer.Option("--key-file", help="File holding the private key (hex).", show_default=False)
    ],
    "dev_account": Annotated[
        int | None,
        typer.Option(
            "--dev-account",
            show_default=False,
            help="Use dev account N of the local chain's mnemonic (local chains only; `chain up` funds 0..19).",
        ),
    ],
    "rpc": Annotated[
        str | None, typer.Option("--rpc", help="EVM JSON-RPC URL (default: the deployment file's).", show_default=False)
    ],
    "home": Annotated[
        Path | None, typer.Option("--home", help="Directory of the deployment file and stores.", show_default=False)
    ],
}
KEY, CHAIN = ("key", "key_file", "dev_account"), ("rpc", "home")


def session_options(*names: str, before: str = "as_json") -> Callable:
    """Give a command the shared options `names` and its Session as ctx.obj: these options typed after the command
    override the global ones typed before it. `--help` lists them before the command's parameter `before` (or
    last)."""

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        own = list(signature.parameters.values())
        at = next((i for i, p in enumerate(own) if p.name == before), len(own))
        shared = [
            inspect.Parameter(
                name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=SHARED_OPTIONS[name]
            )
            for name in names
        ]

        @functools.wraps(command)
        def with_session(**kwargs):
            given = {name: kwargs.pop(name) for name in names}
            ctx = kwargs["ctx"]
            ctx.obj = dataclasses.replace(ctx.obj, **{k: v for k, v in given.items() if v is not None})
            return command(**kwargs)

        with_session.__signature__ = signature.replace(parameters=own[:at] + shared + own[at:])
        return with_session

    return decorate


def one_of(option: str, labels: list[str], parse: Callable[[str], Any] = str) -> Callable:
    """An option's check: one of `labels` (any case), handed to the command as `parse(label)`. Anything else is
    refused as a command's own checks refuse a bad value (one line, exit 1), before the command runs."""

    def check(value: str | None):
        if value is None:
            return None
        label = value.strip().lower()
        if label not in labels:
            raise CliError(f"{option} must be {', '.join(labels[:-1])} or {labels[-1]}, got {label!r}")
        return parse(label)

    return check


# ---------------------------------------------------------------- options several commands take

STAKED_ROLES = [role.label for role in Role.staked()]
ROLES, SERVE_ROLES, KINDS = (
    one_of("--role", STAKED_ROLES),
    one_of("role", STAKED_ROLES),
    one_of("--kind", DisputeKind.labels(), DisputeKind.from_label),  # the command gets a DisputeKind
)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]
JobArg = Annotated[int, typer.Argument(help="Job id.", show_default=False)]
