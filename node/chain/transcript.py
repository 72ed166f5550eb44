"""Chain side of transcript mode (docs/protocol.md "Transcript mode (v2)"): the calldata that TranscriptSettlement
takes (settle, challengeRule, pullCycle, forceMove, answerForce) built from the signed messages of
node/chain/transcript_messages.py, and the readers a requester or watchdog needs to rebuild a settled job from
chain data alone (the settle transaction's calldata is the job's data availability).

The protocol math (cycle encoding, state chain, cycles root, proofs, truncation) is node/protocol.py's; nothing
here re-derives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from web3 import Web3
from web3.contract import Contract

from node import protocol as P
from node.chain.calldata import decode_call
from node.chain.transcript_messages import Draft, Settlement, Verification

EMPTY_DRAFT = (0, 0, bytes(32), bytes(32), [], [], 0)
# The settlement encoding (contracts/lib/PackedCycles.sol, docs/protocol.md "Settlement encoding"): a γ byte, then
# each cycle in protocol.pack_cycle's encoding.
MAX_GAMMA = 16  # InferenceMarket.MAX_GAMMA
EMPTY_VERIFICATION = (0, 0, bytes(32), [], bytes(32), 0, 0, bytes(32))


@dataclass(frozen=True)
class Cycle:
    """One cycle as settlement posts it (PackedCycles.Cycle, unpacked): the draft, p and the v1 record fields."""

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

    def packed(self) -> bytes:
        """This cycle in the cycle encoding (no γ byte, `protocol.pack_cycle`): ValueError when a field does not fit."""
        return P.pack_cycle(self.tokens, self.q, self.p, self.accepted, self.out_token)

    def leaf(self, cycle: int) -> bytes:
        """Its cycle leaf (`protocol.cycle_leaf`): what the state chain steps on and the cycles root holds."""
        return P.cycle_leaf(cycle, self.packed())

    def record(self, job_id: int, cycle: int) -> tuple[bytes, list[int], int, int]:
        """The v1 record (draftRoot, p, accepted, outToken), its draft root recomputed from (tokens, q)."""
        return P.draft_root(job_id, cycle, self.tokens, self.q), list(self.p), self.accepted, self.out_token

    def record_hash(self, job_id: int, cycle: int) -> bytes:
        """The v1 record hash that `pullCycle` stores in the market for the dispute manager."""
        return P.cycle_record_hash(*self.record(job_id, cycle))


def record_size(gamma: int) -> int:
    return P.cycle_size(gamma)


def pack_cycles(cycles: Sequence[Cycle], gamma: int | None = None) -> bytes:
    """A run of cycles in the settlement encoding (what settle, forceMove and challengeRule take). `gamma` is needed
    only for an empty run; every cycle must have γ proposals."""
    gamma = len(cycles[0].tokens) if gamma is None and cycles else gamma
    if gamma is None or not 1 <= gamma <= MAX_GAMMA:
        raise ValueError(f"γ must be 1..{MAX_GAMMA}, got {gamma}")
    records = [c.packed() for c in cycles]
    if any(len(r) != record_size(gamma) for r in records):
        raise ValueError(f"every cycle of a run must have γ = {gamma} proposals")
    return bytes([gamma]) + b"".join(records)


def unpack_cycles(data: bytes) -> list[Cycle]:
    """The cycles of a packed run, read as hostile chain data: ValueError on the malformations the contract refuses
    (no γ byte, γ out of range, a length that is not whole records)."""
    data = bytes(data)
    if not data or not 1 <= data[0] <= MAX_GAMMA:
        raise ValueError("a packed run starts with its γ byte (1..16)")
    gamma, size = data[0], record_size(data[0])
    if (len(data) - 1) % size:
        raise ValueError(f"a packed run of {len(data)} bytes is not whole {size}-byte records of γ = {gamma}")
    return [Cycle(*P.unpack_cycle(data[at : at + size])) for at in range(1, len(data), size)]


def cycle_leaves(cycles: Sequence[Cycle]) -> list[bytes]:
    """The cycle leaves of cycles 0..n-1: `protocol.state_chain` and `protocol.cycles_root` take them."""
    return [c.leaf(i) for i, c in enumerate(cycles)]


def settle_call(
    transcript: Contract,
    settlement: Settlement,
    drafter_sig: bytes,
    verifier_sig: bytes,
    salt: int,
    last_reveal: bytes,
    cycles: Sequence[Cycle],
    gamma: int | None = None,
):
    """`TranscriptSettlement.settle` with the Settlement, both signatures, the salt, the last reveal and the cycles
    (packed; `gamma` is needed only when there are none)."""
    signed = (settlement.as_tuple(), drafter_sig, verifier_sig, salt, last_reveal)
    return transcript.functions.settle(signed, pack_cycles(cycles, gamma))


def challenge_call(transcript: Contract, job_id: int, cycles: Sequence[Cycle], cycle: int, reveal: bytes):
    """`challengeRule` on `cycle` of a settled job, with its proof against the cycles root."""
    proof = P.cycle_proof(cycle_leaves(cycles), cycle)
    return transcript.functions.challengeRule(job_id, cycle, pack_cycles([cycles[cycle]]), reveal, proof)


def pull_call(transcript: Contract, job_id: int, cycles: Sequence[Cycle], cycle: int):
    """`pullCycle`: the packed cycle and its proof; the contract rebuilds its v1 record for the dispute manager."""
    proof = P.cycle_proof(cycle_leaves(cycles), cycle)
    return transcript.functions.pullCycle(job_id, cycle, pack_cycles([cycles[cycle]]), proof)


def force_call(transcript: Contract, job_id: int, evidence: tuple, cycles: Sequence[Cycle], gamma: int | None = None):
    """`forceMove` with its Evidence (`evidence`, `no_draft_evidence`) and the co-signed cycles 0..k-1, packed. γ
    comes from the cycles or the Evidence's Draft; pass it for a force with neither (`no_draft_evidence`)."""
    gamma = gamma or (len(cycles[0].tokens) if cycles else len(evidence[0][4])) or None
    return transcript.functions.forceMove(job_id, evidence, pack_cycles(cycles, gamma))


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


def decoded_call(w3: Web3, transcript: Contract, tx_hash, name: str | None = None, job_id: int | None = None):
    """(function name, arguments) of the call into `transcript` that transaction `tx_hash` made: its own calldata
    when it was sent to the contract, else, for a transaction through a contract (a smart wallet, a forwarder, a
    batch), the last successful call of `name` about `job_id` found in its call trace. Without that second way a
    pair could settle through a wrapper and leave its records unreadable to every watchdog that parses top-level
    calldata only. The last, not the first: two forces in one transaction leave the second in effect (threat-model
    row 119), and a settlement succeeds once. Both are read as the contract reads them (node/chain/calldata.py): a
    padding byte that Solidity ignores must not blind the reader."""
    tx = w3.eth.get_transaction(tx_hash)
    if tx["to"] is not None and Web3.to_checksum_address(tx["to"]) == transcript.address:
        return decode_call(transcript, tx["input"])
    found = None
    for frame in _call_frames(w3, tx_hash, tx["to"]):
        if Web3.to_checksum_address(frame.get("to") or "0x" + "00" * 20) != transcript.address:
            continue
        try:
            fn_name, args = decode_call(transcript, Web3.to_bytes(hexstr=frame.get("input", "0x")))
        except ValueError:
            continue
        if (name is None or fn_name == name) and (job_id is None or _call_job(fn_name, args) == job_id):
            found = fn_name, args
    if found is None:
        what = name or "call"
        raise LookupError(f"transaction {Web3.to_hex(tx_hash)} made no successful {what} into {transcript.address}")
    return found


def force_move_call(w3: Web3, transcript: Contract, tx_hash, job_id: int) -> dict:
    """The arguments of the `forceMove` of `job_id` that transaction `tx_hash` made: from its ForceEvidence log (v2.1:
    the call as the contract read it, whoever sent it), else (a deployment before v2.1) from its calldata or trace.
    Decoded as Solidity decodes it. Where one transaction forced the job twice (a contract wallet's batch), the last
    force is the one in effect: reading the first would have the honest counterparty answer a stale Draft and be
    slashed at `claimForce` (threat-model row 119)."""
    if any(e.get("type") == "event" and e.get("name") == "ForceEvidence" for e in transcript.abi):
        topic = Web3.keccak(text="ForceEvidence(uint256,bytes)")
        found = None
        for log in w3.eth.get_transaction_receipt(tx_hash)["logs"]:
            mine = Web3.to_checksum_address(log["address"]) == transcript.address
            if not mine or not log["topics"] or bytes(log["topics"][0]) != topic:
                continue
            ev = transcript.events.ForceEvidence().process_log(log)
            if int(ev.args["jobId"]) == job_id:
                name, args = decode_call(transcript, bytes(ev.args["call"]))
                if name == "forceMove" and int(args["jobId"]) == job_id:
                    found = args
        if found is not None:
            return found
    name, args = decoded_call(w3, transcript, tx_hash, "forceMove", job_id)
    if name != "forceMove":
        raise LookupError(f"job {job_id}'s force came from {name}, not forceMove")
    return args


def _call_frames(w3: Web3, tx_hash, to):
    """Every successful CALL frame of the transaction, in execution order (a reverted frame's calls undone with it)."""
    reply = w3.provider.make_request("debug_traceTransaction", [Web3.to_hex(tx_hash), {"tracer": "callTracer"}])
    if "error" in reply or not isinstance(reply.get("result"), dict):
        reason = reply.get("error", {}).get("message", reply.get("error")) if "error" in reply else "no call trace"
        raise LookupError(
            f"transaction {Web3.to_hex(tx_hash)} went through the contract {to}: reading its calldata needs the "
            f"client's debug_traceTransaction with callTracer, which answered: {reason}"
        )
    stack = [reply["result"]]
    while stack:
        frame = stack.pop()
        if frame.get("error"):
            continue
        if frame.get("type", "CALL").upper() == "CALL":
            yield frame
        stack.extend(reversed(frame.get("calls") or []))


def _call_job(name: str, args: dict) -> int | None:
    if name == "settle":
        return int(args["a"]["settlement"]["jobId"])
    return int(args["jobId"]) if "jobId" in args else None


def read_settlement(w3: Web3, transcript: Contract, job_id: int, from_block: int = 0) -> SettledTranscript:
    """The settled transcript of `job_id` from chain data alone: decoded from its `settle` transaction, or, for a job
    that a force move ended, from the `forceMove` whose state it settled at (the co-signed cycles, plus the
    verifier's on-chain-checked verification when the drafter was the silent party or the job completed).
    Raises LookupError when the job was not settled by either."""
    flt = {"jobId": job_id}
    settled = transcript.events.TranscriptSettled().get_logs(from_block=from_block, argument_filters=flt)
    if settled:
        name, args = decoded_call(w3, transcript, settled[-1].transactionHash, "settle", job_id)
        if name != "settle":
            raise LookupError(f"job {job_id}'s TranscriptSettled came from {name}, not settle")
        signed = args["a"]
        return SettledTranscript(
            job_id,
            dict(signed["settlement"]),
            signed["salt"],
            bytes(signed["lastReveal"]),
            unpack_cycles(args["cycles"]),
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
    try:
        name, args = "forceMove", force_move_call(w3, transcript, source, job_id)
    except LookupError:  # through a contract, and no forceMove in it: an ended answer's completion
        name, args = decoded_call(w3, transcript, source, "completeAnswered", job_id)
    if name == "completeAnswered":  # the verifier's on-chain answer ended it: the cycles are all in the calldata
        cycles = unpack_cycles(args["cycles"])
        reveal = _reveal_on_chain(transcript, job_id, len(cycles) - 1, from_block)
        settlement = {"jobId": job_id, "cycles": len(cycles), "state": None, "tokensOut": None}
        return SettledTranscript(job_id, settlement, args["salt"], reveal, cycles)
    if name != "forceMove":
        raise LookupError(f"job {job_id}'s force came from {name}, not forceMove")
    e, cycles = args["e"], unpack_cycles(args["cycles"])
    draft, last, pending = e["draft"], e["last"], e["pending"]
    reveal = bytes(last["reveal"])
    if cycles and not e["lastSig"]:  # forced on the attested state: its reveal came in an earlier transaction
        reveal = _reveal_on_chain(transcript, job_id, len(cycles) - 1, from_block)
    if e["pendingSig"]:
        cycles.append(Cycle(tuple(draft["tokens"]), tuple(draft["q"]), tuple(pending["p"]), pending["accepted"],
                            pending["outToken"]))  # fmt: skip
        reveal = bytes(pending["reveal"])
    settlement = {"jobId": job_id, "cycles": len(cycles), "state": None, "tokensOut": None}
    return SettledTranscript(job_id, settlement, draft["salt"], reveal, cycles)


def _reveal_on_chain(transcript: Contract, job_id: int, cycle: int, from_block: int) -> bytes:
    """The verifier's reveal of `cycle` as the chain checked it: its answer to a force at that cycle, or its own force
    whose pending Verification was of it (ForceMoved's reveal after cycle + 1 cycles). LookupError when neither."""
    flt = {"jobId": job_id}
    for e in transcript.events.ForceAnsweredVerification().get_logs(from_block=from_block, argument_filters=flt):
        if int(e.args["cycle"]) == cycle:
            return bytes(e.args["reveal"])
    for e in transcript.events.ForceMoved().get_logs(from_block=from_block, argument_filters=flt):
        if int(e.args["cycles"]) == cycle + 1 and any(e.args["reveal"]):
            return bytes(e.args["reveal"])
    raise LookupError(f"job {job_id}: no reveal of cycle {cycle} on chain")
