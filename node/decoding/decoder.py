"""SpeculativeDecoder: one process holding both models, built from the two one-cycle pieces.

generate() is nothing but the cycle loop a drafter and a verifier run
between them: DraftSession.propose -> VerifySession.verify -> both advance.
Two processes holding one model each, exchanging the same Draft and
Verification messages, therefore produce exactly the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from node.decoding import loading
from node.decoding.distributions import SamplingParams
from node.decoding.messages import DecodingJob
from node.decoding.model_id import model_id
from node.decoding.proposer import DraftSession
from node.decoding.scorer import VerifySession


@dataclass(frozen=True)
class DecodedCycle:
    """One cycle of `generate` as the two sessions decided it (the on-chain per-cycle record is the contracts'
    `CycleRecord` hash of some of these fields: node/protocol.py `cycle_record_hash`)."""

    cycle: int
    proposals: tuple[int, ...]
    q: tuple[int, ...]  # q_i(x_i), WAD
    p: tuple[int, ...]  # p_i(x_i), WAD
    reveal: bytes
    accepted: int
    out_token: int
    emitted: tuple[int, ...]


@dataclass(frozen=True)
class Timings:
    """Where the wall time went (seconds), for the cost model and the overhead report."""

    draft_forward_s: float
    draft_forwards: int
    target_forward_s: float
    target_forwards: int
    replay_forward_s: float  # the verifier's teacher-forced draft pass, when it replays
    protocol_s: float  # quantization, inverse CDF, keccak (uniforms, roots), rejection sampling


@dataclass(frozen=True)
class GenerationResult:
    tokens: list[int]  # the generated tokens (the prompt excluded)
    cycles: list[DecodedCycle]
    stop_reason: str  # "eos" or "length"
    chain_head: bytes  # the verifier's committed hash-chain head
    draft_faults: int  # proposals the verifier's replay contradicted (0 unless verify_draft)
    timings: Timings

    @property
    def alpha(self) -> float:
        """docs/protocol.md §5's estimate: accepted / (accepted + rejected), at most one rejection per cycle."""
        accepted = sum(c.accepted for c in self.cycles)
        rejected = sum(c.accepted < len(c.proposals) for c in self.cycles)
        return accepted / (accepted + rejected) if accepted + rejected else 1.0

    @property
    def tokens_per_pass(self) -> float:
        """Ω: tokens emitted per target pass (the last cycle may be truncated)."""
        return len(self.tokens) / len(self.cycles)


class SpeculativeDecoder:
    def __init__(
        self,
        target,
        draft,
        gamma: int = 4,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        verify_draft: bool = False,
    ):
        """target, draft: loaded causal LMs sharing a tokenizer, on one device.

        verify_draft: the verifier also teacher-forces the draft model over each
        cycle's proposals, checks every q_i and x_i, and samples the residual from
        its own replay, as an untrusting verifier does (costs about one draft step
        per cycle). Off, the residual uses the drafter's distributions directly.
        """
        loading.check_same_vocabulary(target, draft)
        if target.device != draft.device:
            raise ValueError(f"target on {target.device} but draft on {draft.device}")
        if gamma < 1:
            raise ValueError(f"gamma must be >= 1, got {gamma}")
        self.target, self.draft = target, draft
        self.gamma = gamma
        self.sampling = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p)
        self.verify_draft = verify_draft
        self.tokenizer = None
        self.target_id = self.draft_id = None  # set by from_pretrained

    @classmethod
    def from_pretrained(cls, target_path, draft_path, device=None, dtype=None, **kwargs) -> SpeculativeDecoder:
        """Load both checkpoints (on CUDA when available, else CPU), check they pair, and name them by model id."""
        device = loading.resolve_device(device)
        dtype = dtype if dtype is not None else loading.default_dtype(device)
        target_tokenizer = loading.load_tokenizer(target_path)
        loading.check_same_tokenizer(target_tokenizer, loading.load_tokenizer(draft_path))
        target = loading.load_model(target_path, device, dtype)
        draft = loading.load_model(draft_path, device, dtype)
        decoder = cls(target, draft, **kwargs)
        decoder.tokenizer = target_tokenizer
        decoder.target_id, decoder.draft_id = model_id(target_path), model_id(draft_path)
        return decoder

    def job(self, input_ids, max_new_tokens: int, job_id: int, eos_token_id=None) -> DecodingJob:
        return DecodingJob(
            job_id=job_id,
            prompt=tuple(int(t) for t in input_ids),
            max_new_tokens=max_new_tokens,
            gamma=self.gamma,
            sampling=self.sampling,
            eos_token_id=eos_token_id,
        )

    def generate(
        self,
        input_ids: list[int],
        max_new_tokens: int,
        job_id: int,
        verifier_seed: bytes,
        eos_token_id: int | None = None,
        salt: int = 0,
    ) -> GenerationResult:
        """`salt`: the drafter's salt in every accept and residual uniform (on chain the job's, docs/protocol.md §3)."""
        job = self.job(input_ids, max_new_tokens, job_id, eos_token_id)
        drafter = DraftSession(self.draft, job)
        verifier = VerifySession(
            self.target, job, verifier_seed, draft_model=self.draft if self.verify_draft else None, salt=salt
        )
        cycles, tokens, faults = [], [], 0
        while not verifier.done:
            cycle = verifier.cycle
            draft = drafter.propose(cycle)
            verification = verifier.verify(cycle, draft)
            verifier.advance(verification.emitted)
            drafter.advance(verification.emitted)
            tokens.extend(verification.emitted)
            faults += len(verification.draft_faults)
            cycles.append(
                DecodedCycle(
                    cycle=cycle,
                    proposals=draft.tokens,
                    q=draft.q,
                    p=verification.p,
                    reveal=verification.reveal,
                    accepted=verification.accepted,
                    out_token=verification.out_token,
                    emitted=verification.emitted,
                )
            )
        stop = "eos" if eos_token_id is not None and tokens and tokens[-1] == eos_token_id else "length"
        replay = verifier.replay
        timings = Timings(
            draft_forward_s=drafter.lm.forward_s,
            draft_forwards=drafter.lm.forwards,
            target_forward_s=verifier.target.forward_s,
            target_forwards=verifier.target.forwards,
            replay_forward_s=replay.forward_s if replay is not None else 0.0,
            protocol_s=drafter.protocol_s + verifier.protocol_s,
        )
        return GenerationResult(
            tokens=tokens,
            cycles=cycles,
            stop_reason=stop,
            chain_head=verifier.chain_head,
            draft_faults=faults,
            timings=timings,
        )
