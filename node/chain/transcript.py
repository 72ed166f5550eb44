"""Chain side of transcript mode (docs/protocol.md "Transcript mode (v2)"): the calldata that TranscriptSettlement
takes (settle, challengeRule, pullCycle, forceMove, answerForce) built from the signed messages of
node/chain/transcript_messages.py, and the readers a requester or watchdog needs to rebuild a settled job from
chain data alone (the settle transaction's calldata is the job's data availability).

The protocol math (state chain, records root, proofs, truncation) is node/protocol.py's; nothing here re-derives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from web3 import Web3
from web3.contract import Contract

from node import protocol as P
from node.chain.transcript_messages import Draft, Settlement, Verification

EMPTY_DRAFT = (0, 0, bytes(32), bytes(32), [], [], 0)
EMPTY_VERIFICATION = (0, 0, bytes(32), [], bytes(32), 0, 0, bytes(32))


@dataclass(frozen=True)
class Cycle:
    """One cycle as settlement posts it (TranscriptSettlement.Cycle): the draft, p and the v1 record fields."""

    tokens: tuple[int, ...]
    q: tuple[int, ...]
    p: tuple[int, ...]
    accepted: int
    out_token: int

    @classmethod
    def of(cls, draft: Draft, verification: Verification) -> Cycle:
        if draft.draft_root != verification.draft_root or draft.cycle != verification.cycle:
            raise ValueError(f"verification of cycle {verification.cycle} does not answer draft {draft.cycle}")
        return cls(draft.tokens, draft.q, verification.p, verification.accepted, verification.out_token)

    def as_tuple(self) -> tuple:
        return (list(self.tokens), list(self.q), list(self.p), self.accepted, self.out_token)

    def record(self, job_id: int, cycle: int) -> tuple[bytes, list[int], int, int]:
        """The v1 record (draftRoot, p, accepted, outToken), its draft root recomputed from (tokens, q)."""
        return P.draft_root(job_id, cycle, self.tokens, self.q), list(self.p), self.accepted, self.out_token

    def record_hash(self, job_id: int, cycle: int) -> bytes:
        return P.cycle_record_hash(*self.record(job_id, cycle))


def record_hashes(job_id: int, cycles: Sequence[Cycle]) -> list[bytes]:
    return [c.record_hash(job_id, i) for i, c in enumerate(cycles)]


def settle_call(
    transcript: Contract,
    settlement: Settlement,
    drafter_sig: bytes,
    verifier_sig: bytes,
    salt: int,
    last_reveal: bytes,
    cycles: Sequence[Cycle],
):
    """`TranscriptSettlement.settle` with the Settlement, both signatures, the salt, the last reveal and the cycles."""
    signed = (settlement.as_tuple(), drafter_sig, verifier_sig, salt, last_reveal)
    return transcript.functions.settle(signed, [c.as_tuple() for c in cycles])


def challenge_call(transcript: Contract, job_id: int, cycles: Sequence[Cycle], cycle: int, reveal: bytes):
    """`challengeRule` on `cycle` of a settled job, with its proof against the records root."""
    proof = P.record_proof(record_hashes(job_id, cycles), cycle)
    return transcript.functions.challengeRule(job_id, cycle, cycles[cycle].as_tuple(), reveal, proof)


def pull_call(transcript: Contract, job_id: int, cycles: Sequence[Cycle], cycle: int):
    """`pullCycle`: the record of `cycle` and its proof, so the dispute manager can prove against it."""
    proof = P.record_proof(record_hashes(job_id, cycles), cycle)
    return transcript.functions.pullCycle(job_id, cycle, cycles[cycle].record(job_id, cycle), proof)


def evidence(
    draft: Draft,
    draft_sig: bytes,
    last: Verification | None = None,
    last_sig: bytes = b"",
    pending: Verification | None = None,
    pending_sig: bytes = b"",
) -> tuple:
    """A force move's Evidence: the Draft of cycle k, the Verification of k-1 (k >= 1), the forcer's pending one."""
    return (
        draft.as_tuple(),
        draft_sig,
        last.as_tuple() if last else EMPTY_VERIFICATION,
        last_sig,
        pending.as_tuple() if pending else EMPTY_VERIFICATION,
        pending_sig,
    )


def no_draft_evidence() -> tuple:
    """The verifier's force when the drafter never sent Draft 0."""
    return (EMPTY_DRAFT, b"", EMPTY_VERIFICATION, b"", EMPTY_VERIFICATION, b"")


def verification_answer(cycle: Cycle, reveal: bytes) -> tuple:
    """The verifier's answer to a force: its verification of the pending draft."""
    return (list(cycle.tokens), list(cycle.q), list(cycle.p), reveal, cycle.accepted, cycle.out_token, EMPTY_DRAFT, b"")


def draft_answer(draft: Draft, signature: bytes) -> tuple:
    """The drafter's answer to a force: its signed Draft of the next cycle."""
    return ([], [], [], bytes(32), 0, 0, draft.as_tuple(), signature)


# ---------------------------------------------------------------- reading a settled job back from chain data


@dataclass(frozen=True)
class SettledTranscript:
    job_id: int
    settlement: dict
    salt: int
    last_reveal: bytes
    cycles: list[Cycle]

    def reveals(self) -> list[bytes]:
        """Each cycle's reveal, hashed down from the last one (H(reveal_c) = reveal_{c-1})."""
        out = [self.last_reveal]
        for _ in range(len(self.cycles) - 1):
            out.append(P.hash_chain(out[-1], 1))
        return out[::-1]

    def output(self, eos_token: int, max_tokens: int) -> list[int]:
        """The job's output tokens, cycle by cycle as v1 emits them (protocol.truncate_emitted)."""
        tokens: list[int] = []
        for c in self.cycles:
            cut = P.truncate_emitted([*c.tokens[: c.accepted], c.out_token], eos_token, max_tokens - len(tokens))
            tokens.extend(cut)
            if len(tokens) >= max_tokens or (cut and cut[-1] == eos_token):
                break
        return tokens


def _cycles(raw) -> list[Cycle]:
    return [Cycle(tuple(c["tokens"]), tuple(c["q"]), tuple(c["p"]), c["accepted"], c["outToken"]) for c in raw]


def _decode(w3: Web3, transcript: Contract, tx_hash) -> tuple[str, dict]:
    fn, args = transcript.decode_function_input(w3.eth.get_transaction(tx_hash)["input"])
    return fn.fn_name, args


def read_settlement(w3: Web3, transcript: Contract, job_id: int, from_block: int = 0) -> SettledTranscript:
    """The settled transcript of `job_id` from chain data alone: decoded from its `settle` transaction, or, for a job
    that a force move ended, from the `forceMove` whose state it settled at (the co-signed cycles, plus the
    verifier's on-chain-checked verification when the drafter was the silent party or the job completed).
    Raises LookupError when the job was not settled by either."""
    flt = {"jobId": job_id}
    settled = transcript.events.TranscriptSettled().get_logs(from_block=from_block, argument_filters=flt)
    if settled:
        name, args = _decode(w3, transcript, settled[-1].transactionHash)
        if name != "settle":
            raise LookupError(f"job {job_id}'s TranscriptSettled came from {name}, not settle")
        signed = args["a"]
        return SettledTranscript(
            job_id, dict(signed["settlement"]), signed["salt"], bytes(signed["lastReveal"]), _cycles(args["cycles"])
        )
    ended = transcript.events.ForceSettled().get_logs(from_block=from_block, argument_filters=flt)
    completed = transcript.events.ForceCompleted().get_logs(from_block=from_block, argument_filters=flt)
    if completed:
        source = completed[-1].transactionHash
    elif ended:
        moved = transcript.events.ForceMoved().get_logs(from_block=from_block, argument_filters=flt)
        if not moved:
            raise LookupError(f"job {job_id} was force-settled without a ForceMoved event")
        source = moved[-1].transactionHash
    else:
        raise LookupError(f"job {job_id} has not been settled")
    name, args = _decode(w3, transcript, source)
    if name != "forceMove":
        raise LookupError(f"job {job_id}'s force came from {name}, not forceMove")
    e, cycles = args["e"], _cycles(args["cycles"])
    draft, last, pending = e["draft"], e["last"], e["pending"]
    reveal = bytes(last["reveal"])
    if e["pendingSig"]:
        cycles.append(Cycle(tuple(draft["tokens"]), tuple(draft["q"]), tuple(pending["p"]), pending["accepted"],
                            pending["outToken"]))  # fmt: skip
        reveal = bytes(pending["reveal"])
    settlement = {"jobId": job_id, "cycles": len(cycles), "state": None, "tokensOut": None}
    return SettledTranscript(job_id, settlement, draft["salt"], reveal, cycles)
