"""A settled transcript job seen as a per-cycle job: the audit's, the referees' and the disputes' one reader.

A transcript job (docs/protocol.md "Transcript mode (v2)") has no DraftCommitted / CycleVerified events: its cycles are
in the calldata of the transaction that settled it, read back by `node.chain.transcript.read_settlement` (never
decoded here). `job_cycles` gives the same `chaindata.ChainCycle`s for either mode, so `verispec audit`, the
watchdog, the referees and an accused answering a dispute replay a transcript job exactly as a per-cycle one.

Two things only transcript jobs have:

* `rule_fault`: whether a settled cycle breaks the accept rule itself (settlement does not re-run it; a rule
  challenge does): the same primitives as the drafter's check of each Verification (`link.job.check_cycle`), on
  chain data. Such a cycle is refuted by `challengeRule` with no bond and no referees.
* `pull`: a replay dispute proves against `cycleRecordHash`, which a transcript cycle has only once pulled
  (`pullCycle` with the record's proof). Done before every opening unless the record is there already.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from web3 import Web3

from node import protocol as P
from node.chain.enums import JobStatus
from node.jobs import chaindata
from node.jobs.chaindata import ChainCycle, ChainDataError


@dataclass(frozen=True)
class Settled:
    """A settled transcript job: what read_settlement gave and its cycles as ChainCycles."""

    raw: object  # node.chain.transcript.SettledTranscript
    cycles: list[ChainCycle]


def is_transcript(system, job_id: int) -> bool:
    return bool(chaindata.job_view(system.market, job_id).get("transcript"))


def read(system, job_id: int, from_block: int = 0) -> Settled:
    """The settled cycles of transcript job `job_id`; ChainDataError when it has not settled (yet)."""
    from node.chain.transcript import read_settlement

    view = chaindata.job_view(system.market, job_id)
    if view["status"] in (JobStatus.Open, JobStatus.Running):
        raise ChainDataError(f"transcript job {job_id} has not settled: its cycles are not on chain yet")
    try:
        raw = read_settlement(system.market.w3, system.transcript, job_id, from_block)
    except LookupError as exc:
        raise ChainDataError(f"transcript job {job_id} has no settled cycles: {exc}") from None
    salt = int(raw.salt)
    if salt != int(view["salt"]):  # what the market recorded at settlement; anything else is not this job's data
        raise ChainDataError(f"transcript job {job_id}: the settled salt {salt} is not the job's {int(view['salt'])}")
    eos, budget = int(view["eosToken"]), int(view["maxTokens"])
    out, generated = [], 0
    for c, (cycle, reveal) in enumerate(zip(raw.cycles, raw.reveals())):
        output = P.truncate_emitted([*cycle.tokens[: cycle.accepted], cycle.out_token], eos, budget - generated)
        generated += len(output)
        out.append(
            ChainCycle(
                job_id=int(job_id),
                cycle=c,
                draft_root=P.draft_root(job_id, c, cycle.tokens, cycle.q),
                tokens=tuple(int(t) for t in cycle.tokens),
                q=tuple(int(x) for x in cycle.q),
                commit_tx="",
                reveal=bytes(reveal),
                accepted=int(cycle.accepted),
                out_token=int(cycle.out_token),
                output=tuple(output),
                p=tuple(int(x) for x in cycle.p),
                salt=salt,
            )
        )
    return Settled(raw, out)


def job_cycles(system, job_id: int, from_block: int = 0, with_p: bool = True) -> list[ChainCycle]:
    """Every cycle of a job from chain data, in order: events for a per-cycle job (`chaindata.cycles`), the
    settlement's calldata for a transcript job (ChainDataError before it settled: its cycles are not on chain)."""
    if not is_transcript(system, job_id):
        return chaindata.cycles(system, job_id, from_block=from_block, with_p=with_p)
    return read(system, job_id, from_block).cycles


def job_cycle(system, job_id: int, cycle: int, from_block: int = 0) -> ChainCycle:
    """One verified cycle with its p (either mode); ChainDataError when the job has no such cycle."""
    if not is_transcript(system, job_id):
        return chaindata.cycle(system, job_id, cycle, from_block=from_block)
    found = read(system, job_id, from_block).cycles
    if not 0 <= cycle < len(found):
        raise ChainDataError(f"transcript job {job_id} settled cycles 0..{len(found) - 1}, not cycle {cycle}")
    return found[cycle]


# ---------------------------------------------------------------- the accept rule on a settled cycle


def rule_fault(cycle: ChainCycle, vocab: int) -> str | None:
    """Why `cycle` breaks the v1 accept rule (what `challengeRule` re-runs), None when it follows it. The rule is the
    drafter's own check of a Verification (`link.job.check_cycle`: accepted = count_accepted with the job's salt,
    capped at the first proposal outside the vocabulary, outToken inside it), applied to the settled record; its
    reveal link was checked at settlement (the last reveal against the head, earlier ones hashed down from it), and
    emission limits play no part in the rule."""
    from node.link.job import RuleViolation, check_cycle

    job = SimpleNamespace(eos_token_id=None, max_new_tokens=len(cycle.tokens) + 1)
    spec = SimpleNamespace(vocab_size=vocab, job=job)
    draft = SimpleNamespace(
        cycle=cycle.cycle, draft_root=cycle.draft_root, tokens=cycle.tokens, q=cycle.q, salt=cycle.salt
    )
    v = SimpleNamespace(reveal=cycle.reveal, p=cycle.p, accepted=cycle.accepted, out_token=cycle.out_token)
    try:
        check_cycle(spec, draft, v, P.hash_chain(cycle.reveal, 1), 0)
    except RuleViolation as exc:
        return str(exc)
    except ValueError as exc:  # a q or p out of range: the contract's rule refuses the record
        return f"Verification of cycle {cycle.cycle}: {exc}"
    return None


def rule_faults(system, job_id: int, cycles: list[ChainCycle]) -> list[tuple[int, str]]:
    vocab = int(chaindata.job_view(system.market, job_id)["vocabSize"])
    return [(c.cycle, why) for c in cycles if (why := rule_fault(c, vocab)) is not None]


def convicted(system, job_id: int) -> bool:
    """Whether a rule challenge of the job succeeded already (once per job)."""
    return bool(system.transcript.functions.settled(job_id).call()[2])


def refuted_on_chain(system, job_id: int, cycle: int, sender: str, from_block: int = 0) -> bool:
    """Whether the contract's own rule refutes the record of `cycle` now (challengeRule as an eth_call from `sender`):
    what a challenger confirms before relying on `rule_fault`, so that a disagreement costs nothing."""
    from web3.exceptions import ContractLogicError

    try:
        challenge_call(system, job_id, cycle, from_block).call({"from": sender})
    except ContractLogicError:
        return False
    return True


def challenge_call(system, job_id: int, cycle: int, from_block: int = 0):
    """`challengeRule` on `cycle` of settled job `job_id`, with its proof and reveal (node/chain/transcript.py)."""
    from node.chain.transcript import challenge_call as call

    s = read(system, job_id, from_block)
    return call(system.transcript, job_id, s.raw.cycles, cycle, s.cycles[cycle].reveal)


# ---------------------------------------------------------------- pulling a cycle for the referee flow


def pulled(system, job_id: int, cycle: int) -> bool:
    return system.market.functions.cycleRecordHash(job_id, cycle).call() != bytes(32)


def pull(system, send, job_id: int, cycle: int, from_block: int = 0, key: str | None = None) -> str | None:
    """Before a replay dispute on a transcript cycle: `pullCycle` with the cycle's proof (`protocol.cycle_proof`),
    unless the record is in the market already (pulled before, by anyone). `send(action, function, key=...)` is the
    caller's sender (the CLI's or a node's TxSender). The pull's transaction hash, None when nothing was sent."""
    from node.chain.transcript import pull_call

    if not is_transcript(system, job_id) or pulled(system, job_id, cycle):
        return None
    s = read(system, job_id, from_block)
    if not 0 <= cycle < len(s.cycles):
        raise ChainDataError(f"transcript job {job_id} settled cycles 0..{len(s.cycles) - 1}, not cycle {cycle}")
    _, receipt = send("pullCycle", pull_call(system.transcript, job_id, s.raw.cycles, cycle), key=key)
    return Web3.to_hex(receipt["transactionHash"])
