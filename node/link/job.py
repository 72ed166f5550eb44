"""A transcript job as both parties know it, the accept-rule check of one cycle, and a job's signed-message ledger.

`check_cycle` is what the drafter runs on every Verification before it counter-signs the next Draft (and what a
requester runs on a fetched transcript): pure protocol math, the v1 rule the contract's verification applies
(docs/protocol.md §4): the reveal is the next link of the verifier's hash chain, `accepted` is `count_accepted`
over the posted p with the job's salt, capped at the first proposal outside the vocabulary (`sampler.accepted_count`,
the count the verifier's `sampler.decide` makes), and outToken is a
token of the vocabulary. Whether p and outToken are the target's is not pure math: a TargetReplay dispute on the
pulled cycle decides it, as in v1.

`Ledger` holds one node's view of a job's signed messages. Every message goes to the store before the ledger (and
so the node) takes it in, and a ledger is rebuilt from the store after a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from node import protocol as P
from node.chain import transcript_messages as tm
from node.decoding import sampler
from node.decoding.messages import DecodingJob
from node.link.wire import LinkRefused, message_json
from node.store import NodeStore, StoredLinkMessage


class RuleViolation(LinkRefused):
    """A Verification that the accept rule refutes: never counter-signed, kept as evidence for a rule challenge."""


@dataclass(frozen=True)
class TranscriptJob:
    """What both parties agree on before cycle 0: the engine's job, the market's domain, the two parties, the
    verifier's hash-chain head (acceptJob) and the job's vocabulary size (registered with the model ids)."""

    job: DecodingJob
    domain: tm.Domain
    drafter: str
    verifier: str
    head: bytes
    vocab_size: int

    @property
    def job_id(self) -> int:
        return self.job.job_id


def check_cycle(spec: TranscriptJob, draft: tm.Draft, v: tm.Verification, prev_reveal: bytes, generated: int):
    """The tokens cycle `draft.cycle` emits, once `v` is shown to follow the accept rule; RuleViolation otherwise.

    `prev_reveal`: the reveal of the cycle before (the head for cycle 0), so each reveal costs one hash to check.
    `generated`: tokens the job emitted before this cycle (the budget truncates the output).
    """
    c = draft.cycle
    if P.hash_chain(v.reveal, 1) != prev_reveal:
        raise RuleViolation(f"Verification of cycle {c}: the reveal is not the next link of the verifier's chain")
    n = sampler.accepted_count(
        v.reveal, draft.draft_root, draft.tokens, draft.q, v.p, salt=draft.salt, vocab_size=spec.vocab_size
    )
    if v.accepted != n:
        raise RuleViolation(f"Verification of cycle {c} accepts {v.accepted} proposals; the rule accepts {n}")
    if v.out_token >= spec.vocab_size:
        raise RuleViolation(f"Verification of cycle {c}: outToken {v.out_token} is outside the vocabulary")
    job = spec.job
    return tuple(
        P.truncate_emitted(list(draft.tokens[:n]) + [v.out_token], job.eos_token_id, job.max_new_tokens - generated)
    )


def ends_job(spec: TranscriptJob, emitted, generated_after: int) -> bool:
    eos = spec.job.eos_token_id
    return (eos is not None and eos in emitted) or generated_after >= spec.job.max_new_tokens


@dataclass
class Ledger:
    """One node's signed messages of one job (its `role` rows of the store) and what follows from them."""

    spec: TranscriptJob
    store: NodeStore
    role: str
    drafts: dict[int, tuple[tm.Draft, bytes]] = field(default_factory=dict)
    verifications: dict[int, tuple[tm.Verification, bytes]] = field(default_factory=dict)
    outputs: dict[int, tuple[int, ...]] = field(default_factory=dict)  # cycle -> emitted tokens (rule-checked)
    settlement: tm.Settlement | None = None
    settlement_sigs: dict[str, bytes] = field(default_factory=dict)  # "drafter" / "verifier" -> signature
    rule: Callable = check_cycle  # only a misbehaviour (node/roles/behaviors.py) checks otherwise

    @classmethod
    def load(cls, spec: TranscriptJob, store: NodeStore, role: str, rule: Callable | None = None) -> Ledger:
        """The ledger as the store holds it (after a restart); every cycle's output is recomputed by the rule."""
        ledger = cls(spec, store, role, rule=rule or check_cycle)
        for row in store.link_messages(spec.job_id, role):
            msg = tm.MESSAGE_TYPES[row.kind].from_message(row.message)
            if row.kind == "Draft":
                ledger.drafts[row.position] = (msg, row.signature)
            elif row.kind == "Verification":
                ledger.verifications[row.position] = (msg, row.signature)
            else:
                ledger.settlement, ledger.settlement_sigs[row.signer] = msg, row.signature
        for c in sorted(ledger.verifications):
            try:
                ledger.outputs[c] = ledger.checked_output(c, ledger.verifications[c][0])
            except RuleViolation:
                break  # the evidence stays in the store; nothing after it is taken in
        return ledger

    def save(self, msg, signature: bytes, signer: str, direction: str) -> bool:
        """Store a signed message (before anything acts on it); False if that very message was stored before."""
        position = msg.cycles if isinstance(msg, tm.Settlement) else msg.cycle
        row = StoredLinkMessage(
            self.spec.job_id, self.role, msg.PRIMARY, position, signer, message_json(msg), signature, direction
        )
        return self.store.save_link_message(row)

    @property
    def next_cycle(self) -> int:
        """The cycle of the next Draft: one past the last cycle whose Verification was taken in."""
        return len(self.outputs)

    @property
    def generated(self) -> int:
        return sum(len(self.outputs[c]) for c in range(len(self.outputs)))

    @property
    def tokens(self) -> list[int]:
        return [t for c in range(len(self.outputs)) for t in self.outputs[c]]

    @property
    def done(self) -> bool:
        return bool(self.outputs) and ends_job(self.spec, self.outputs[len(self.outputs) - 1], self.generated)

    @property
    def salt(self) -> int | None:
        return self.drafts[0][0].salt if 0 in self.drafts else None

    def state(self, cycle: int) -> bytes:
        """S(cycle): the genesis for cycle -1, else the state the Verification of `cycle` signed."""
        if cycle < 0:
            return P.transcript_genesis(self.spec.job_id, self.salt)
        return self.verifications[cycle][0].state

    def prev_reveal(self, cycle: int) -> bytes:
        return self.spec.head if cycle == 0 else self.verifications[cycle - 1][0].reveal

    def checked_output(self, cycle: int, v: tm.Verification) -> tuple[int, ...]:
        """`check_cycle` of cycle `cycle`'s Verification against this ledger's Draft and the cycles before."""
        generated = sum(len(self.outputs[c]) for c in range(cycle))
        return self.rule(self.spec, self.drafts[cycle][0], v, self.prev_reveal(cycle), generated)

    def final_settlement(self) -> tm.Settlement:
        """The Settlement of a finished job: every cycle taken in, at the last state, with the tokens emitted."""
        cycles = len(self.outputs)
        return tm.Settlement(self.spec.job_id, cycles, self.state(cycles - 1), self.generated)

    def last_cosigned(self) -> tuple[int, bytes, int]:
        """(cycles, S(cycles-1), tokens out) of the latest state both parties signed: the prevState of the latest
        Draft (its Verification signed by the verifier, the Draft by the drafter), or the settled state. What a
        force move posts when the other party goes silent (the chain's side is the settlement contract's)."""
        if self.settlement is not None and len(self.settlement_sigs) == 2:
            return self.settlement.cycles, self.settlement.state, self.settlement.tokens_out
        if not self.drafts:
            return 0, b"", 0
        last = max(self.drafts)
        return last, self.drafts[last][0].prev_state, sum(len(self.outputs[c]) for c in range(last))
