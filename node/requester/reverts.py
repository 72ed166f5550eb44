"""What a contract revert means for the user: the decoded custom error and a one-line explanation.

`TransactionReverted` (node/chain/errors.py) carries the custom error decoded from the revert data
(`RevertDecoder`); `explain_revert` turns it into "the contract refused: Name(args) — what it means".
"""

from __future__ import annotations

from typing import Any

from node.chain.enums import DisputeStatus, JobStatus, solidity_name
from node.chain.errors import TransactionReverted
from node.requester.units import format_eth, format_time


def _fmt_args(args: dict[str, Any]) -> str:
    def show(value: Any) -> str:
        if isinstance(value, (bytes, bytearray)):
            return "0x" + bytes(value).hex()
        return str(value)

    return ", ".join(f"{name}={show(value)}" for name, value in args.items())


def explain_revert(exc: TransactionReverted, now: int | None = None) -> str:
    """One line: what the contract said (its custom error, decoded) and what it means for the user."""
    name, args = exc.error_name, dict(exc.error_args)
    if name is None:
        return f"the transaction reverted ({'no revert data' if not exc.data else '0x' + exc.data[:4].hex()})"
    status = args.get("status")
    status_name = _name_of(JobStatus, status)
    hints = {
        "JobNotDisputable": lambda: (
            f"job {args.get('jobId')} is {status_name}: disputes can be opened only while "
            "a job is Running or Finished (before finalize)"
        ),
        "JobWrongStatus": lambda: f"job {args.get('jobId')} is {status_name}",
        "DisputeWrongStatus": lambda: f"dispute {args.get('disputeId')} is {_name_of(DisputeStatus, status)}",
        "DeadlineNotPassed": lambda: (
            f"too early: that waits until {format_time(args['deadline'])}"
            + (f" ({_in(args['deadline'], now)})" if now else "")
        ),
        "DeadlinePassed": lambda: f"too late: the deadline was {format_time(args['deadline'])}",
        "DisputesOpen": lambda: f"{args.get('open')} dispute(s) on the job are still open",
        "InsufficientEscrow": lambda: f"escrow {args['sent']} wei is below the required {args['required']} wei",
        "EscrowTooLarge": lambda: f"escrow {args['sent']} wei exceeds the market's limit of {args['max']} wei",
        "DrafterNotActive": lambda: f"{args['drafter']} is not an active drafter for this model pair",
        "VerifierNotActive": lambda: f"{args['verifier']} is not an active verifier for this target model",
        "PartiesNotDistinct": lambda: "requester, drafter and verifier must be three different accounts",
        "AlreadyRegistered": lambda: f"{args['account']} is already registered (unbond and withdraw first)",
        "StakeBelowMinimum": lambda: (
            f"stake {format_eth(args['stake'])} is below the minimum {format_eth(args['minimum'])}"
        ),
        "NotRegistered": lambda: f"{args['account']} is not registered",
        "AlreadyUnbonding": lambda: f"{args['account']} is already unbonding",
        "NotUnbonding": lambda: f"{args['account']} has not requested unbonding (`verispec unbond` first)",
        "UnbondingNotElapsed": lambda: f"the stake is withdrawable from {format_time(args['withdrawableAt'])}",
        "StakeLocked": lambda: f"the stake is locked by {args['locks']} open job(s)/dispute(s)",
        "NothingOwed": lambda: "nothing is owed to this account by the market",
        "NothingToWithdraw": lambda: "nothing is credited to this account by the dispute manager",
        "WrongBond": lambda: f"the bond must be exactly {args.get('required')} wei",
        "CycleNotVerified": lambda: f"cycle {args.get('cycle')} of job {args.get('jobId')} has not been verified",
        "PositionDoesNotBind": lambda: (
            f"position {args.get('index')} is after the cycle's first rejection "
            f"(accepted={args.get('accepted')}): it decides nothing"
        ),
        "IndexOutOfRange": lambda: (
            f"index {args.get('index')} is beyond the cycle's outToken position K={args.get('k')}"
        ),
        "OutTokenNeedsTargetReplay": lambda: (
            "the outToken position (index == γ) can only be disputed with --kind target"
        ),
        "PositionUnderDispute": lambda: "a dispute on this position is already running",
        "PositionAlreadyProven": lambda: "the accused already lost a dispute on this position",
        "ChallengerIsAccused": lambda: "you cannot dispute your own work",
        "NoEligibleReferees": lambda: "no active referee (outside the job's parties) serves the disputed model",
        "RecordMismatch": lambda: "the cycle record rebuilt from chain data does not match the stored hash",
        "InvalidProof": lambda: "the draft leaf's Merkle proof does not verify",
        "BadGamma": lambda: "gamma must be in 1..16",
        "BadTopP": lambda: "top-p must be in (0, 1]",
        "AlphaAboveWad": lambda: "alpha must be at most 1",
        "DrafterAtCapacity": lambda: (
            f"drafter {args['drafter']} already has {args['capacity']} job(s) Open or Running, the most it accepts: "
            "submit again once one finishes, or to another drafter"
        ),
        "BadCapacity": lambda: "a capacity must be at least 1 concurrent job",
        "PriceBelowDrafterMinimum": lambda: (
            f"drafter {args['drafter']} takes jobs from {args['minPrice']} wei per accepted token (its declared min "
            f"price); this one pays {args['price']}: raise --price-token or pick another drafter"
        ),
        "NotRegisteredDrafter": lambda: f"{args['account']} is not registered as a drafter",
    }
    hint = hints.get(name)
    try:
        text = hint() if hint else ""
    except Exception:  # an explanation must never hide the error itself
        text = ""
    shown = f"{name}({_fmt_args(args)})"
    return f"the contract refused: {shown}" + (f" — {text}" if text else "")


def _name_of(enum, value):
    """The Solidity name of `value` in `enum` (e.g. JobStatus 2 -> "Running"), or `value` itself when it is none."""
    try:
        return solidity_name(enum(value))
    except ValueError:
        return value


def _in(deadline: int, now: int | None) -> str:
    if now is None:
        return ""
    left = deadline - now
    if left <= 0:
        return "now"
    hours, rest = divmod(left, 3600)
    return f"in {hours}h{rest // 60:02d}m" if hours else f"in {rest // 60}m{rest % 60:02d}s"
