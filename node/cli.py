"""`verispec`: the command line of the node — local chain, operators, requesters, node processes, the demo.

This module parses and prints. Every chain operation lives in node/requester/client.py, every node loop in
node/roles/{drafter,verifier,referee,watchdog}/node.py (imported lazily, so `verispec --help` does not load torch);
what is printed at length in node/console.py, the demo in node/demo/; `chain …` in node/cli_chain.py, `serve` in
node/cli_serve.py. Every failure a user can cause ends in one
line on stderr and exit code 1 — never a traceback (VERISPEC_DEBUG=1 shows one for unexpected errors).
"""

from __future__ import annotations

import os
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Annotated

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # its warnings are not the user's business here

import typer

from node.chain.enums import DisputeKind
from node.cli_chain import chain_app
from node.cli_context import CHAIN, KEY, KINDS, ROLES, CliError, CommandGroup, JobArg, JsonOpt, Session, session_options
from node.cli_demo import demo
from node.cli_dispute import challenge
from node.cli_pair import PairOpt, known_target, pair_models
from node.cli_serve import serve
from node.cli_transcript import DEFAULT_MODE, check_mode, transcript_app
from node.console import (
    console,
    emit_json,
    err,
    print_audit,
    print_dispute,
    print_report,
    print_rule_faults,
    wait_for_transcript,
    wait_with_progress,
)

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


app = typer.Typer(
    cls=CommandGroup,
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
app.add_typer(chain_app, name="chain")
app.add_typer(transcript_app, name="transcript")  # node/cli_transcript.py


@app.callback()
def main(
    ctx: typer.Context,
    rpc: Annotated[
        str | None, typer.Option("--rpc", envvar="VERISPEC_RPC", help="EVM JSON-RPC URL for every command.")
    ] = None,
    home: Annotated[
        Path | None, typer.Option("--home", envvar="VERISPEC_HOME", help="Home directory (deployment file, stores).")
    ] = None,
):
    ctx.obj = Session(rpc=rpc, home=home)


# ---------------------------------------------------------------- operators


@app.command()
@session_options(*KEY, *CHAIN)
def register(
    ctx: typer.Context,
    role: Annotated[
        str, typer.Option("--role", help="drafter | verifier | referee", show_default=False, callback=ROLES)
    ],
    stake: Annotated[str, typer.Option("--stake", help="Stake in ETH (e.g. 1.5).", show_default=False)],
    model: Annotated[
        list[Path],
        typer.Option(
            "--model",
            help="Model directory to serve (a drafter: its draft model; verifier/referee: repeat for each model; "
            "default: the --pair's).",
        ),
    ] = [],
    target_model: Annotated[
        Path | None, typer.Option("--target-model", help="Drafters: the target model its drafts are verified with.")
    ] = None,
    alpha: Annotated[
        float | None, typer.Option("--alpha", help="Drafters: claimed acceptance rate α* in [0,1] (default 0.6).")
    ] = None,
    capacity: Annotated[
        int | None,
        typer.Option(
            "--capacity",
            help="Drafters: the most jobs it serves at once (Open or Running), declared on chain; the market refuses "
            "a job past it (default: the market's DEFAULT_CAPACITY, 4).",
            show_default=False,
        ),
    ] = None,
    pair: PairOpt = None,
    as_json: JsonOpt = False,
):
    """Stake and register as a drafter, verifier or referee for the given model(s) (default: the pair's)."""
    from node.requester.units import format_eth, parse_amount

    if not model:  # the role's models of the pair: a referee replays both
        draft, target = pair_models(pair, target=target_model)
        model = {"drafter": [draft], "verifier": [target], "referee": [target, draft]}[role]
        target_model = target if role == "drafter" else target_model
    with closing(ctx.obj.requester()) as requester:
        result = requester.register(role, list(model), parse_amount(stake, "eth"), alpha, target_model, capacity)
    if as_json:
        emit_json(result)
        return
    console.print(
        f"[green]registered[/] {result.address} as {result.role} with {format_eth(result.stake_wei)} "
        f"stake (tx {result.tx.tx_hash}, gas {result.tx.gas_used:,})"
    )
    if result.role == "drafter":
        labels = [("draft model", model[0]), ("target model", target_model)]
    else:  # the registry lists each model once: paths name the ids only when no two paths are the same model
        labels = [("model", path) for path in model] if len(model) == len(result.model_ids) else []
    for model_id, (label, path) in zip(
        result.model_ids, labels or [("model", "")] * len(result.model_ids), strict=True
    ):
        console.print(f"  {label:12s} {model_id}" + (f"  ({path})" if path else ""))
    if result.alpha_star is not None:
        console.print(f"  claimed α* = {result.alpha_star}")
    if result.capacity is not None:
        declared = f"declared, tx {result.capacity_tx.tx_hash}" if result.capacity_tx else "the market's default"
        console.print(f"  capacity   {result.capacity} concurrent job(s) ({declared})")


@app.command()
@session_options(*KEY, *CHAIN)
def unbond(ctx: typer.Context, as_json: JsonOpt = False):
    """Start unbonding your stake (inactive at once); run again after the unbonding period to withdraw it."""
    from node.console import until
    from node.requester.units import format_eth

    with closing(ctx.obj.requester()) as requester:
        result = requester.unbond()
        now = requester.now()
    if as_json:
        emit_json(result)
        return
    when = until(result.withdrawable_at, now) if result.withdrawable_at else "?"
    if result.action == "requested":
        console.print(
            f"[green]unbonding[/] {format_eth(result.stake_wei)}: withdrawable from {when} "
            f"(then `verispec unbond` or `verispec withdraw` again)"
        )
    elif result.action == "withdrawn":
        console.print(f"[green]withdrew[/] the stake of {format_eth(result.stake_wei)}")
    else:
        locks = f"; {result.locks} open job(s)/dispute(s) hold it" if result.locks else ""
        console.print(f"still unbonding: {format_eth(result.stake_wei)} withdrawable from {when}{locks}")


@app.command()
@session_options(*KEY, *CHAIN)
def withdraw(ctx: typer.Context, as_json: JsonOpt = False):
    """Withdraw everything you are owed: market earnings and refunds, dispute credits, unbonded stake."""
    from node.requester.units import format_eth

    with closing(ctx.obj.requester()) as requester:
        result = requester.withdraw()
    if as_json:
        emit_json({**result.__dict__, "total_wei": result.total_wei})
        return
    console.print(
        f"[green]withdrew[/] {format_eth(result.total_wei)} to {result.address} (market "
        f"{format_eth(result.market_wei)}, disputes {format_eth(result.disputes_wei)}, stake "
        f"{format_eth(result.stake_wei)})"
    )


# ---------------------------------------------------------------- jobs


@app.command()
@session_options(*KEY, *CHAIN)
def submit(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="The prompt (UTF-8 text).", show_default=False)],
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens to generate.")] = 64,
    gamma: Annotated[int, typer.Option("--gamma", help="Proposals per cycle γ (1..16).")] = 4,
    temperature: Annotated[float, typer.Option("--temperature", help="0 = greedy.")] = 1.0,
    top_k: Annotated[int, typer.Option("--top-k", help="0 = off.")] = 0,
    top_p: Annotated[float, typer.Option("--top-p", help="1 = off.")] = 1.0,
    drafter: Annotated[
        str | None, typer.Option("--drafter", help="Drafter address (default: an active one serving the model pair).")
    ] = None,
    verifier: Annotated[
        str | None, typer.Option("--verifier", help="Verifier address (default: an active one serving the target).")
    ] = None,
    price_token: Annotated[
        str, typer.Option("--price-token", help="Price per accepted token (wei; or e.g. 2gwei, 0.001eth).")
    ] = "1000000000000",
    price_pass: Annotated[str, typer.Option("--price-pass", help="Price per target pass (wei).")] = "3000000000000",
    escrow: Annotated[
        str | None,
        typer.Option("--escrow", help="Escrow to send (wei or 0.1eth; default: exactly what the market requires)."),
    ] = None,
    draft_model: Annotated[
        Path | None,
        typer.Option("--draft-model", help="Draft model (its id names the job's draft model; default: the --pair's)."),
    ] = None,
    target_model: Annotated[
        Path | None, typer.Option("--target-model", help="Target model (tokenizer and id; default: the --pair's).")
    ] = None,
    pair: PairOpt = None,
    no_eos: Annotated[bool, typer.Option("--no-eos", help="Do not stop at the end-of-text token.")] = False,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Print the job id and return at once.")] = False,
    accept_timeout: Annotated[
        float, typer.Option("--accept-timeout", help="Seconds to wait for a verifier to accept.")
    ] = 120.0,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the job to finish.")] = 1800.0,
    mode: Annotated[
        str, typer.Option("--mode", help="onchain (a transaction a cycle) | transcript (off chain).")
    ] = DEFAULT_MODE,
    as_json: JsonOpt = False,
):
    """Submit a job with escrow, wait for it with a progress bar, and print the text, cycles, α, gas and cost."""
    from node.requester.checkpoints import load_tokenizer
    from node.requester.units import parse_amount

    draft_model, target_model = pair_models(pair, draft_model, target_model)
    with closing(ctx.obj.requester()) as requester:
        check_mode(mode, requester.market)  # node/cli_transcript.py
        job = requester.submit(
            prompt,
            draft_model=draft_model,
            target_model=target_model,
            max_tokens=max_tokens,
            gamma=gamma,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            drafter=drafter,
            verifier=verifier,
            price_token_wei=parse_amount(price_token),
            price_pass_wei=parse_amount(price_pass),
            escrow_wei=parse_amount(escrow, "wei") if escrow is not None else None,
            eos=not no_eos,
            mode=mode,
        )
        if no_wait:
            if as_json:
                emit_json(
                    {
                        "job_id": job.job_id,
                        "drafter": job.drafter,
                        "verifier": job.verifier,
                        "escrow_wei": job.escrow_wei,
                        "tx": job.tx,
                    }
                )
            else:
                console.print(
                    f"submitted job {job.job_id} (drafter {job.drafter}, verifier {job.verifier}, "
                    f"escrow {job.escrow_wei} wei)"
                )
            return
        if not as_json:
            err.print(
                f"job {job.job_id} submitted ({job.prompt_tokens} prompt tokens; drafter {job.drafter}, "
                f"verifier {job.verifier}); waiting…"
            )
        waiter = partial(wait_for_transcript, target_model=target_model) if mode == "transcript" else wait_with_progress
        waiter(requester, job.job_id, max_tokens, quiet=as_json, accept_timeout=accept_timeout, timeout=timeout)
        report = requester.report(job.job_id, tokenizer_path=target_model)
        now = requester.now()
    if as_json:
        emit_json({**report.to_json(), "cycle_count": len(report.cycles)})
        return
    print_report(report, load_tokenizer(target_model), now=now)


@app.command()
@session_options(*CHAIN)
def status(
    ctx: typer.Context,
    job: JobArg,
    target_model: Annotated[
        Path | None,
        typer.Option(
            "--target-model",
            help="Model whose tokenizer decodes the output (default: a pair's target here, when it is the job's).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
):
    """Show a job from chain data: status, cycles and acceptance per cycle, α, payments, disputes, text."""
    from node.requester.checkpoints import check_model_dir, load_tokenizer

    if target_model is not None:
        check_model_dir(target_model, "--target-model")
    with closing(ctx.obj.requester(need_key=False)) as requester:
        # a pair's model decodes only jobs of that model: no wrong text from a foreign tokenizer
        tokenizer_path = target_model or known_target(bytes(requester.job_view(job)["targetModel"]))
        report = requester.report(job, tokenizer_path=tokenizer_path)
        now = requester.now()
    if as_json:
        emit_json({**report.to_json(), "cycle_count": len(report.cycles)})
        return
    print_report(report, load_tokenizer(tokenizer_path) if tokenizer_path else None, now=now)


@app.command()
@session_options(*CHAIN)
def audit(
    ctx: typer.Context,
    job: JobArg,
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="draft: replay the drafter's proposals and q; target: the verifier's p and outToken.",
            callback=KINDS,
        ),
    ] = "draft",
    draft_model: Annotated[
        Path | None,
        typer.Option(
            "--draft-model",
            help="The job's draft model (checked against its model id; default: the --pair's draft).",
            show_default=False,
        ),
    ] = None,
    target_model: Annotated[
        Path | None,
        typer.Option(
            "--target-model",
            help="The job's target model, for --kind target (default: the --pair's target).",
            show_default=False,
        ),
    ] = None,
    pair: PairOpt = None,
    as_json: JsonOpt = False,
):
    """Replay a job from chain data as a watchdog and list what a dispute would prove: per verified cycle the first
    proposal an honest drafter could not have made (--kind draft), or every binding p and outToken the target model
    contradicts (--kind target, by the referees' own rule)."""
    from node.roles.watchdog.audit import replay_draft, replay_target, rule_faults

    need = ("draft",) if kind is DisputeKind.DraftReplay else ("draft", "target")
    draft_model, target_model = pair_models(pair, draft_model, target_model, need)
    with closing(ctx.obj.requester(need_key=False)) as requester:  # it refuses a missing or wrong model
        broken = rule_faults(requester, job)  # a transcript job's records, by the rule alone
        faults = (
            replay_draft(requester, job, draft_model)
            if kind is DisputeKind.DraftReplay
            else replay_target(requester, job, target_model, draft_model)
        )
    if as_json:
        emit_json({"job_id": job, "kind": kind.label, "faults": faults, "rule_faults": broken})
        return
    print_rule_faults(job, broken)
    print_audit(job, kind, faults)


@app.command()
@session_options(*KEY, *CHAIN)
def dispute(
    ctx: typer.Context,
    job: JobArg,
    cycle: Annotated[int, typer.Option("--cycle", help="Verified cycle.", show_default=False)],
    index: Annotated[
        int, typer.Option("--index", help="Position: 0..γ-1 a proposal, γ the outToken.", show_default=False)
    ],
    kind: Annotated[
        str,
        typer.Option(
            "--kind", help="draft (accuse the drafter) | target (the verifier).", show_default=False, callback=KINDS
        ),
    ],
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the referees resolve it.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait with --wait.")] = 600.0,
    as_json: JsonOpt = False,
):
    """Open a dispute on one position of a verified cycle, posting the bond (record and proof from chain data)."""
    if cycle < 0 or index < 0:
        raise CliError("--cycle and --index must be >= 0")
    with closing(ctx.obj.requester()) as requester:
        info = requester.open_dispute(job, cycle, index, kind)
        if not as_json:
            console.print(
                f"[green]dispute {info.dispute_id} opened[/] on job {job} cycle {cycle} index {index} "
                f"({kind.label} replay) against {info.accused}; referees: {', '.join(info.referees) or 'none drawn'}"
            )
        if wait:
            info = requester.wait_dispute(info.dispute_id, timeout=timeout)
        now = requester.now()
    if as_json:
        emit_json(info)
        return
    if wait:
        print_dispute(info, now=now)


@app.command("dispute-appeal")
@session_options(*KEY, *CHAIN)
def dispute_appeal(
    ctx: typer.Context,
    dispute_id: Annotated[int, typer.Argument(help="Dispute id.", show_default=False)],
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the appeal round is decided.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait with --wait.")] = 600.0,
    as_json: JsonOpt = False,
):
    """Appeal a dispute's decided round (bond × 2^round): a fresh panel of 2n+1 referees votes again."""
    with closing(ctx.obj.requester()) as requester:
        info = requester.appeal_dispute(dispute_id)
        if not as_json:
            console.print(
                f"[green]dispute {dispute_id} appealed[/]: round {info.round}, "
                f"referees: {', '.join(info.referees) or 'not drawn yet (escalated)'}"
            )
        if wait:
            info = requester.wait_dispute(dispute_id, timeout=timeout)
        now = requester.now()
    if as_json:
        emit_json(info)
        return
    if wait:
        print_dispute(info, now=now)


@app.command()
@session_options(*KEY, *CHAIN)
def finalize(ctx: typer.Context, job: JobArg, as_json: JsonOpt = False):
    """Settle a finished job after its challenge window: pay drafter and verifier, refund the rest."""
    from node.requester.units import format_eth

    with closing(ctx.obj.requester()) as requester:
        tx, payments = requester.finalize(job)
    if as_json:
        emit_json({"job_id": job, "tx": tx, "payments": payments})
        return
    done = f"job {job} already finalized (by {payments['finalized_by']})" if payments["already_finalized"] else ""
    console.print(
        (done or f"[green]finalized[/] job {job}") + f": drafter {format_eth(payments['drafter'])}, verifier "
        f"{format_eth(payments['verifier'])}, α fee {format_eth(payments['alpha_fee'])} (treasury), "
        f"refund {format_eth(payments['refund'])} "
        f"(credited; `verispec withdraw` pays out)"
    )


@app.command("claim-timeout")
@session_options(*KEY, *CHAIN)
def claim_timeout(ctx: typer.Context, job: JobArg, as_json: JsonOpt = False):
    """End a job whose current deadline passed: refund a job no verifier accepted, slash a party that missed
    its turn (anyone may call it)."""
    from node.chain.enums import JobStatus

    with closing(ctx.obj.requester()) as requester:
        tx, finished = requester.claim_timeout(job)
        settled = requester.job_view(job)["status"] == JobStatus.Finalized  # no verified cycle: settled at once
    if as_json:
        emit_json({"job_id": job, "tx": tx, **finished, "settled": settled})
        return
    slashed = f"; {finished['party']} slashed {finished['slashed']} wei" if finished["slashed"] else ""
    then = (
        "the escrow is refunded to the requester (credited; `verispec withdraw` pays it out)"
        if settled
        else f"its verified cycles are paid at `verispec finalize {job}` after the challenge window"
    )
    console.print(f"[green]job {job} ended[/]: {finished['reason']}{slashed}; {then}")


app.command()(serve)  # node/cli_serve.py
app.command()(challenge)  # node/cli_dispute.py


# ---------------------------------------------------------------- the demo


app.command()(demo)  # node/cli_demo.py


def run() -> None:
    """The `verispec` program (console script and `python -m node.cli`)."""
    from node.cli_serve import run_app

    run_app(app)


if __name__ == "__main__":
    run()
