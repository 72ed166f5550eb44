"""Every deployment parameter, with its default, in one place (wei, seconds, WAD, basis points).

Plain Python with no web3: node/chain/deploy.py deploys with it, and so does the ape suite (tests_ape/), which
runs in its own venv.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

ETHER = 10**18
WAD = 10**18
MINUTE = 60
HOUR = 3600
DAY = 86400
BURN_ADDRESS = "0x000000000000000000000000000000000000dEaD"
# `treasury` value meaning "the deployment's ProbeScheduler" (deploy_system puts its address in its place)
PROBE_TREASURY = "probes"


@dataclass(frozen=True)
class DeploymentParams:
    """Every deployment parameter, with the defaults in one place (wei, seconds, WAD, basis points)."""

    # StakingRegistry
    min_drafter_stake: int = 1 * ETHER
    min_verifier_stake: int = 1 * ETHER
    min_referee_stake: int = ETHER // 2
    unbonding_period: int = 3 * DAY
    # InferenceMarket
    accept_timeout: int = 10 * MINUTE
    commit_timeout: int = 2 * MINUTE
    verify_timeout: int = 2 * MINUTE
    challenge_window: int = 1 * DAY
    timeout_slash: int = ETHER // 10
    # α window (inherited by the market): a full window holds 8 buckets of >= alpha_bucket_cycles cycles.
    # N = 512, τ = 0.1: an honest drafter whose true α equals its claim is slashed within 20,000 cycles with
    # probability < 5e-5 at γ ≥ 4 and ~1e-3 at γ = 1 (geometric model; see docs/contracts.md).
    alpha_bucket_cycles: int = 64
    alpha_tolerance: int = WAD // 10
    # A breach slashes min(alpha_slash_bps of the stake, N × floor × fee), the α fees a full window at the floor
    # burns: at the defaults the cap binds (512 × 3e12 × 10 % = 1.536e14 wei), so whoever fills a drafter's window
    # with adversarial prompts at the floor loses ≥ what the honest drafter loses, a requester alone ≥ 10 × it
    # (griefing factor ≥ 10 for every stake, ≥ 1 from a tenth of a window on: docs/contracts.md "Griefing").
    alpha_slash_bps: int = 1_000
    # Only jobs paying pricePerPass ≥ the floor count toward α (the requester's default price per pass), and
    # alpha_fee_bps of pricePerPass of every counted cycle goes to the treasury (padding a window with
    # self-dealt jobs burns ≥ floor × fee = 3e11 wei per cycle).
    alpha_price_floor: int = 3 * 10**12
    alpha_fee_bps: int = 1_000
    # Receives α slashes and fees, never a party of a job: the burn address by default. PROBE_TREASURY: the
    # deployment's ProbeScheduler, which pays probes and keeper tips with them (docs/protocol.md "Soundness
    # (v1.2)"; only with probe corpora at deployment, deploy_system's `corpora`).
    treasury: str = BURN_ADDRESS
    # Probes (ProbeScheduler): the only jobs that move α windows. One per drafter per probe_interval, anyone may
    # open a due one (keeper_tip from the treasury); probe_tokens tokens at γ = probe_gamma, paid probe_price per
    # pass and per accepted token (at least the α price floor).
    probe_interval: int = 1 * HOUR
    probe_tokens: int = 32
    probe_gamma: int = 4
    probe_price: int = 3 * 10**12
    keeper_tip: int = 10**13
    # DisputeManager (deployed only when its artifact exists)
    dispute_bond: int = ETHER // 10
    answer_period: int = 1 * HOUR
    vote_commit_period: int = 1 * HOUR
    vote_reveal_period: int = 1 * HOUR
    referee_count: int = 3
    accused_slash: int = ETHER // 2
    referee_penalty: int = ETHER // 100
    # v1.1 referee rules (docs/disputes.md): appeals to 2n + 1 fresh seats with bond × 2^k, escalation of short draws
    appeal_period: int = 1 * HOUR
    escalation_period: int = 1 * HOUR
    max_appeals: int = 1
    max_escalations: int = 2
    # TranscriptSettlement (transcript mode, docs/protocol.md "Transcript mode (v2)"): a rule challenge slashes each
    # signer of a refuted cycle rule_slash; the challenger gets rule_reward_bps of the smaller of the two slashes
    # (< 100 %: an ally of either signer gets back less than that signer lost), the rest goes to the treasury.
    rule_slash: int = ETHER // 2
    rule_reward_bps: int = 5_000

    @property
    def alpha_window_cycles(self) -> int:
        return 8 * self.alpha_bucket_cycles

    @property
    def alpha_slash_cap(self) -> int:
        """Most wei one α breach slashes: the α fees of a full window's cycles at the price floor
        (AlphaWindow.alphaSlashAmount)."""
        return self.alpha_window_cycles * self.alpha_price_floor * self.alpha_fee_bps // 10_000

    def alpha_slash(self, stake: int) -> int:
        """What one α breach slashes from a drafter with `stake` (AlphaWindow.alphaSlashAmount)."""
        return min(stake * self.alpha_slash_bps // 10_000, self.alpha_slash_cap)

    @property
    def dispute_duration(self) -> int:
        """Longest dispute: every round escalated to the limit, voted and appealed (the answer once)."""
        vote = self.vote_commit_period + self.vote_reveal_period + self.appeal_period
        return self.answer_period + (self.max_appeals + 1) * (vote + self.max_escalations * self.escalation_period)

    def validate(self) -> None:
        """Unbonding must outlast the challenge window plus a full dispute, so nobody escapes a slash."""
        needed = self.challenge_window + self.dispute_duration
        if self.unbonding_period <= needed:
            raise ValueError(
                f"unbonding_period={self.unbonding_period}s must exceed challenge window + dispute duration = {needed}s"
            )
        if not 1 <= self.alpha_bucket_cycles <= 2**24:
            raise ValueError("alpha_bucket_cycles must be in 1..2^24")
        if not 0 <= self.alpha_price_floor < 2**128:
            raise ValueError("alpha_price_floor must fit in uint128")
        if not 0 <= self.alpha_fee_bps <= 10_000 or not 0 <= self.alpha_slash_bps <= 10_000:
            raise ValueError("alpha_fee_bps and alpha_slash_bps must be in 0..10000")
        if not 0 <= self.rule_reward_bps < 10_000:
            raise ValueError("rule_reward_bps must be in 0..9999 (a challenger allied with a signer must not profit)")
        if self.treasury != PROBE_TREASURY and int(self.treasury, 16) == 0:
            raise ValueError("treasury must not be the zero address (the burn address 0x…dEaD burns)")
        if not 0 < self.probe_interval <= 365 * DAY or not 0 < self.probe_tokens < 2**16:
            raise ValueError("probe_interval must be in 1 s..365 days and probe_tokens in 1..65535")
        if not 1 <= self.probe_gamma <= 16 or self.probe_price < self.alpha_price_floor:
            raise ValueError("probe_gamma must be in 1..16 and probe_price at least alpha_price_floor")

    def registry_args(self) -> tuple[int, ...]:
        """StakingRegistry's constructor arguments."""
        return (self.min_drafter_stake, self.min_verifier_stake, self.min_referee_stake, self.unbonding_period)

    def market_args(self) -> tuple[int | str, ...]:
        """InferenceMarket's constructor arguments after the registry address."""
        return (
            self.accept_timeout,
            self.commit_timeout,
            self.verify_timeout,
            self.challenge_window,
            self.timeout_slash,
            self.alpha_bucket_cycles,
            self.alpha_tolerance,
            self.alpha_slash_bps,
            self.alpha_price_floor,
            self.alpha_fee_bps,
            self.treasury,
        )

    def disputes_args(self) -> tuple[tuple[int, ...]]:
        """DisputeManager's constructor arguments after the registry and market addresses: one Config tuple."""
        return (
            (
                self.dispute_bond,
                self.answer_period,
                self.vote_commit_period,
                self.vote_reveal_period,
                self.referee_count,
                self.accused_slash,
                self.referee_penalty,
                self.appeal_period,
                self.escalation_period,
                self.max_appeals,
                self.max_escalations,
            ),
        )

    def probe_args(self) -> tuple[int, ...]:
        """ProbeScheduler's constructor arguments after the registry address."""
        return (self.probe_interval, self.probe_tokens, self.probe_gamma, self.probe_price, self.keeper_tip)

    def transcript_args(self) -> tuple[int, int]:
        """TranscriptSettlement's constructor arguments after the market address."""
        return (self.rule_slash, self.rule_reward_bps)

    def with_(self, **changes) -> DeploymentParams:
        return replace(self, **changes)

    def as_dict(self) -> dict:
        return asdict(self)


DEFAULT_PARAMS = DeploymentParams()
