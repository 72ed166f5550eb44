"""What the requester's operations return: plain dataclasses (the CLI prints them, `--json` dumps them).

Everything in them is read from the chain (events, views, calldata), never from a node's store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field


@dataclass
class TxResult:
    action: str
    tx_hash: str
    gas_used: int
    block: int


@dataclass
class Registration:
    address: str
    role: str
    stake_wei: int
    model_ids: list[str]
    alpha_star: float | None
    tx: TxResult
    capacity: int | None = None  # drafters: the concurrent jobs it accepts (`setCapacity`, or the market's default)
    capacity_tx: TxResult | None = None


@dataclass
class UnbondResult:
    address: str
    action: str  # "requested" | "withdrawn" | "waiting"
    stake_wei: int
    withdrawable_at: int | None
    locks: int
    tx: TxResult | None = None


@dataclass
class WithdrawResult:
    address: str
    market_wei: int
    disputes_wei: int
    stake_wei: int
    txs: list[TxResult] = field(default_factory=list)

    @property
    def total_wei(self) -> int:
        return self.market_wei + self.disputes_wei + self.stake_wei


@dataclass
class SubmitResult:
    """What `Requester.submit` did: the new job's id, the parties picked, the escrow, the prompt's length."""

    job_id: int
    drafter: str
    verifier: str
    escrow_wei: int
    prompt_tokens: int
    tx: TxResult


@dataclass
class CycleSummary:
    """One verified cycle of a job as a report shows it (from `DraftCommitted` and `CycleVerified`)."""

    cycle: int
    proposals: list[int]
    q: list[int]
    accepted: int
    out_token: int
    output: list[int]
    reveal: str
    tx_hashes: list[str] = field(default_factory=list)  # commitDraft, submitVerification

    @property
    def gamma(self) -> int:
        return len(self.proposals)

    @property
    def rejected(self) -> int:
        return 1 if self.accepted < self.gamma else 0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.gamma if self.gamma else 0.0


@dataclass
class VoteInfo:
    referee: str
    committed: bool
    verdict: str  # "None" until revealed


@dataclass
class DisputeInfo:
    dispute_id: int
    job_id: int
    cycle: int
    index: int
    kind: str
    challenger: str
    accused: str
    token: int
    claimed_value: int
    status: str
    outcome: str
    referees: list[str]
    votes: list[VoteInfo]
    answer: dict | None  # {"claimed_prob", "top_tokens", "top_probs"} once the accused answered
    faithful_votes: int
    cheated_votes: int
    accused_slashed_wei: int
    credits: dict[str, int]  # account -> wei credited by this dispute
    open_tx: str
    round: int = 0  # the current round (0 = first panel, k = k-th appeal)
    appeal_deadline: int = 0  # while Appealable: the round's result may be appealed until this time
    round_result: str = "None"  # the latest decided round's result


@dataclass
class JobReport:
    job_id: int
    status: str
    phase: str
    requester: str
    drafter: str
    verifier: str
    draft_model: str
    target_model: str
    gamma: int
    max_tokens: int
    eos_token: int
    temperature: float
    top_k: int
    top_p: float
    alpha_eligible: bool
    prompt: str
    escrow_wei: int
    price_token_wei: int
    price_pass_wei: int
    cycles: list[CycleSummary]
    tokens: list[int]
    text: str | None
    alpha: float | None
    drafter_tokens: int
    finish_reason: str | None
    deadline: int
    open_disputes: int
    payments: dict[str, int]  # drafter / verifier / alpha_fee (treasury) / refund: settled or projected so far
    finalized: bool
    disputes: list[DisputeInfo]
    gas_used: int
    gas_fees_wei: int
    tx_count: int

    @property
    def cost_wei(self) -> int:
        """What the requester pays for the job (the escrow minus the refund): the nodes, and the α fee of a counted
        job to the treasury (docs/contracts.md, "α window")."""
        return self.payments["drafter"] + self.payments["verifier"] + self.payments.get("alpha_fee", 0)

    @property
    def accepted_total(self) -> int:
        return sum(c.accepted for c in self.cycles)

    def to_json(self) -> dict:
        data = asdict(self)
        data["cost_wei"] = self.cost_wei
        data["acceptance_per_cycle"] = [c.acceptance for c in self.cycles]
        for raw in data["cycles"]:
            raw["q"] = [str(v) for v in raw["q"]]  # WAD values overflow JSON doubles in some readers
        return data


def alpha_of(cycles: Iterable[CycleSummary]) -> float | None:
    """docs/protocol.md §5: Σ accepted / Σ (accepted + rejected), at most one rejection per cycle."""
    cycles = list(cycles)
    accepted = sum(c.accepted for c in cycles)
    rejected = sum(c.rejected for c in cycles)
    return accepted / (accepted + rejected) if accepted + rejected else None
