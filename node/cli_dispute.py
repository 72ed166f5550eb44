"""`verispec challenge JOB`: the rule challenge of a settled transcript job (docs/protocol.md "Transcript mode (v2)":
`challengeRule`, no bond, no referees). The rule check and the calldata are node/link/settled.py's, the ones the
watchdog uses; this module only drives them and prints the outcome."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated

import typer

from node.cli_context import CHAIN, KEY, CliError, JobArg, JsonOpt, session_options
from node.console import console, emit_json


@session_options(*KEY, *CHAIN)
def challenge(
    ctx: typer.Context,
    job: JobArg,
    cycle: Annotated[
        int | None,
        typer.Option("--cycle", help="A settled cycle (default: the first the rule refutes).", show_default=False),
    ] = None,
    as_json: JsonOpt = False,
):
    """Re-run the accept rule on every settled record of a transcript job and, on one it refutes, send challengeRule:
    both signers are slashed and the challenger is owed its reward (withdraw it from the market). A record that
    follows the rule is refused here, before anything is sent."""
    from web3.logs import DISCARD

    from node.jobs.chaindata import ChainDataError
    from node.link import settled

    with closing(ctx.obj.requester()) as requester:
        system, start = requester.system, requester.deployment.start_block
        requester.job_view(job)  # one line for an unknown job
        if not settled.is_transcript(system, job):
            raise CliError(f"job {job} is a per-cycle job: the market re-ran the rule on each cycle; use `dispute`")
        try:
            cycles = settled.job_cycles(system, job, start)
        except ChainDataError as exc:
            raise CliError(f"cannot challenge job {job}: {exc}") from None
        broken = dict(settled.rule_faults(system, job, cycles))
        if cycle is not None and not 0 <= cycle < len(cycles):
            raise CliError(f"--cycle must be in 0..{len(cycles) - 1}: job {job} settled {len(cycles)} cycles")
        if cycle is None and not broken:
            raise CliError(f"every settled record of job {job} follows the accept rule: nothing to challenge")
        cycle = min(broken) if cycle is None else cycle
        if cycle not in broken:
            raise CliError(f"cycle {cycle} of job {job} follows the accept rule: a challenge would revert")
        if settled.convicted(system, job):
            raise CliError(f"job {job} lost a rule challenge already (one per job)")
        tx, receipt = requester._send("challengeRule", settled.challenge_call(system, job, cycle, start))
        (won,) = requester.market.events.TranscriptConvicted().process_receipt(receipt, errors=DISCARD)
    a = won["args"]
    result = {
        "job_id": job,
        "cycle": cycle,
        "reason": broken[cycle],
        "tx": tx.tx_hash,
        "drafter_slashed_wei": int(a["fromDrafter"]),
        "verifier_slashed_wei": int(a["fromVerifier"]),
        "reward_wei": int(a["reward"]),
    }
    if as_json:
        emit_json(result)
        return
    console.print(
        f"[green]rule challenge won[/] on job {job} cycle {cycle} ({broken[cycle]}): drafter slashed "
        f"{result['drafter_slashed_wei']} wei, verifier {result['verifier_slashed_wei']} wei; your reward "
        f"{result['reward_wei']} wei is owed by the market (`verispec withdraw`)"
    )
