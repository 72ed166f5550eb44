"""`verispec transcript stream|fetch JOB`, `serve verifier --listen HOST:PORT` and `submit --mode`: the CLI of the
transcript link (node/link). The commands only drive node/link; what they print is here."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Annotated

import typer

from node.cli_context import CHAIN, CliError, CommandGroup, JobArg, JsonOpt, session_options
from node.cli_pair import PairOpt, pair_models
from node.console import console, emit_json, err

MODES = ("onchain", "transcript")
DEFAULT_MODE = "transcript"

transcript_app = typer.Typer(
    cls=CommandGroup, no_args_is_help=True, help="Transcript-mode jobs over the verifier's link endpoint."
)

EndpointOpt = Annotated[
    str | None,
    typer.Option(
        "--endpoint",
        help="The verifier's ws:// URL (default: the one it published in the registry).",
        show_default=False,
    ),
]


def parse_listen(listen: str | None, role: str) -> tuple[str, int] | None:
    """HOST:PORT of `--listen` (a verifier's option), checked before anything is loaded."""
    if listen is None:
        return None
    if role != "verifier":
        raise CliError("--listen is a verifier's option (the endpoint it serves transcript jobs on)")
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"--listen must be HOST:PORT with a port in 1..65535, got {listen!r}")
    try:  # a port in use is said at once, not after the models load (the server binds it again later)
        socket.create_server((host, int(port))).close()
    except OSError as exc:
        raise CliError(f"--listen {host}:{port}: {exc.strerror or exc}") from None
    return host, int(port)


def check_mode(mode: str, market) -> str:
    """`submit --mode`: transcript mode needs the market's transcript job mode (a deployment from before it has
    none: said in one line, with the way out)."""
    if mode not in MODES:
        raise CliError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "transcript" and not any(e.get("name") == "submitTranscriptJob" for e in market.abi):
        raise CliError("--mode transcript: this deployment's market has no transcript job mode; use --mode onchain")
    return mode


def start_link(node, listen: tuple[str, int]) -> str:
    """Serve the node's transcript jobs on `listen` from a thread beside its chain loop, and publish the endpoint.

    The server is `node.link_server`: the node opens each transcript job it accepts on it (`LinkServer.open_job`)."""
    from node.link.chain import listen_url, publish_endpoint
    from node.link.verifier import LinkServer

    server = LinkServer(node.account, node.store, node.target_model, node.draft_model)
    try:
        host, port = server.run_in_thread(*listen)
    except OSError as exc:
        raise CliError(f"--listen {listen[0]}:{listen[1]}: {exc.strerror or exc}") from None
    url = listen_url(host, port)
    node.link_server = server
    node.reconsider_refusals()  # transcript jobs refused while it did not listen are decided again
    if host in ("0.0.0.0", "::"):
        err.print(f"transcript link on {url}: a wildcard address is not published; peers need --endpoint")
    elif publish_endpoint(node, url):
        err.print(f"transcript link on {url}: publishing it in the registry (setEndpoint)")
    return url


def _verifier_endpoint(ctx, job: int, endpoint: str | None) -> str:
    from node.jobs import chaindata
    from node.link.chain import EndpointError, check_endpoint, endpoint_of

    try:
        if endpoint is not None:
            return check_endpoint(endpoint)
        w3, deployment, _ = ctx.obj.connect()
        system = deployment.system(w3)
        record = chaindata.job_request(system.market, job, from_block=deployment.start_block)
        return endpoint_of(system.registry, record.verifier)
    except (EndpointError, chaindata.ChainDataError) as exc:
        raise CliError(str(exc)) from None


def _run(coroutine):
    from node.link.wire import LinkRefused

    try:
        return asyncio.run(coroutine)
    except (LinkRefused, OSError, TimeoutError) as exc:
        raise CliError(f"the transcript link: {exc}") from None


@transcript_app.command("stream")
@session_options(*CHAIN)
def stream(
    ctx: typer.Context,
    job: JobArg,
    endpoint: EndpointOpt = None,
    target_model: Annotated[
        Path | None, typer.Option("--target-model", help="Tokenizer to decode with (default: the --pair's target).")
    ] = None,
    pair: PairOpt = None,
    as_json: JsonOpt = False,
):
    """Print a job's text as the verifier verifies it, until the job is settled."""
    from websockets.exceptions import ConnectionClosed

    from node.link.requester import stream_tokens
    from node.requester.checkpoints import load_tokenizer

    url = _verifier_endpoint(ctx, job, endpoint)
    tokenizer = load_tokenizer(pair_models(pair, target=target_model, need=("target",))[1])
    tokens: list[int] = []

    def show(cycle: int, new: list[int]) -> None:
        before = tokenizer.decode(tokens)
        tokens.extend(new)
        if not as_json:
            console.print(tokenizer.decode(tokens)[len(before) :], end="", markup=False, highlight=False)

    try:
        _run(stream_tokens(url, job, show))
    except ConnectionClosed as exc:
        raise CliError(f"the verifier closed the stream: {exc}") from None
    if as_json:
        emit_json({"job_id": job, "tokens": tokens, "text": tokenizer.decode(tokens)})
    else:
        console.print()


@transcript_app.command("fetch")
@session_options(*CHAIN)
def fetch(
    ctx: typer.Context,
    job: JobArg,
    endpoint: EndpointOpt = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the signed transcript (JSON) here.")] = None,
    target_model: Annotated[
        Path | None, typer.Option("--target-model", help="Tokenizer to decode with (default: the --pair's target).")
    ] = None,
    pair: PairOpt = None,
    as_json: JsonOpt = False,
):
    """Fetch a job's whole signed transcript, check every signature, state and accept count, print its text."""
    from node.jobs import chaindata
    from node.link.chain import transcript_spec
    from node.link.requester import check_transcript, fetch_transcript
    from node.link.wire import LinkRefused
    from node.requester.checkpoints import load_tokenizer

    url = _verifier_endpoint(ctx, job, endpoint)
    transcript = _run(fetch_transcript(url, job))
    tokenizer = load_tokenizer(pair_models(pair, target=target_model, need=("target",))[1])
    w3, deployment, _ = ctx.obj.connect()
    try:
        spec = transcript_spec(w3, deployment.system(w3), job, tokenizer, from_block=deployment.start_block)
        checked = check_transcript(spec, transcript)
    except (LinkRefused, chaindata.ChainDataError, ValueError) as exc:
        raise CliError(f"job {job}'s transcript is refused: {exc}") from None
    if out is not None:
        out.write_text(json.dumps(transcript))
    summary = {"job_id": job, "cycles": checked.cycles, "settled": checked.settled, "tokens": checked.tokens}
    if as_json:
        emit_json({**summary, "state": "0x" + checked.state.hex(), "text": tokenizer.decode(checked.tokens)})
        return
    console.print(tokenizer.decode(checked.tokens), markup=False, highlight=False)
    settled = "settled (both signed)" if checked.settled else "not settled yet"
    err.print(f"job {job}: {checked.cycles} cycles, {len(checked.tokens)} tokens, every message checked; {settled}")
