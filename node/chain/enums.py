"""The contracts' enums and shared constants, mirrored once for every Python caller.

Each `IntEnum` here has the members of the Solidity enum of the same name (see `SOLIDITY_NAMES`), in
the same order, so `JobStatus(view["status"])` reads a chain value and `Role.Drafter` can be passed to
a contract call as it is. tests/test_enums.py checks the mirror against the compiled contracts' AST.

`label` is the short lower-case name people type and read (`--role drafter`, `--kind draft`);
`from_label` is its inverse and raises ValueError naming the valid labels.
"""

from __future__ import annotations

from enum import IntEnum

# uint32 max: a token id no tokenizer produces, the requester's "no EOS" choice (the job runs to maxTokens)
NO_EOS = 2**32 - 1


class _Labelled(IntEnum):
    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def from_label(cls, text: str):
        for member in cls:
            if member.label == text:
                return member
        raise ValueError(f"{text!r} is not one of {', '.join(cls.labels())}")

    @classmethod
    def labels(cls) -> list[str]:
        return [member.label for member in cls]


class Role(_Labelled):
    """IStakingRegistry.Role."""

    None_ = 0
    Drafter = 1
    Verifier = 2
    Referee = 3

    @property
    def label(self) -> str:
        return "none" if self is Role.None_ else self.name.lower()

    @classmethod
    def staked(cls) -> list[Role]:
        """The roles an account can register as."""
        return [cls.Drafter, cls.Verifier, cls.Referee]


class JobStatus(_Labelled):
    """IInferenceMarket.JobStatus."""

    None_ = 0
    Open = 1
    Running = 2
    Finished = 3
    Finalized = 4


class Phase(_Labelled):
    """InferenceMarket.Phase: whose move a running job waits for."""

    AwaitDraft = 0
    AwaitVerify = 1


class FinishReason(_Labelled):
    """InferenceMarket.FinishReason."""

    Completed = 0
    AcceptTimeout = 1
    DraftTimeout = 2
    VerifyTimeout = 3
    DisputeLost = 4


class DisputeKind(_Labelled):
    """DisputeManager.Kind: which model a dispute replays (labels: draft, target)."""

    DraftReplay = 0
    TargetReplay = 1

    @property
    def label(self) -> str:
        return self.name.removesuffix("Replay").lower()


class DisputeStatus(_Labelled):
    """DisputeManager.Status."""

    None_ = 0
    AwaitingAnswer = 1
    Voting = 2
    Resolved = 3
    Appealable = 4  # a round is decided; it may be appealed until appealDeadline
    Drawing = 5  # an appeal round waits for its panel


class Verdict(_Labelled):
    """DisputeManager.Verdict: a referee's vote."""

    None_ = 0
    AccusedFaithful = 1
    AccusedCheated = 2


class Outcome(_Labelled):
    """DisputeManager.Outcome: how a dispute ended."""

    None_ = 0
    AccusedLost = 1
    ChallengerLost = 2
    Void = 3
    AccusedSilent = 4


class PositionState(_Labelled):
    """DisputeManager.PositionState: whether a (job, cycle, index, kind) position may be disputed."""

    Free = 0
    Open = 1
    Proven = 2


class ProbeStatus(_Labelled):
    """IProbeScheduler.ProbeStatus: where a probe stands."""

    None_ = 0
    Seeding = 1
    Running = 2
    Done = 3


def solidity_name(member: IntEnum) -> str:
    """The member's name in Solidity (`None` is a Python keyword, so it is spelled `None_` here)."""
    return member.name.removesuffix("_")


# Python enum -> the simple name of the Solidity enum it mirrors
SOLIDITY_NAMES: dict[type[IntEnum], str] = {
    Role: "Role",
    JobStatus: "JobStatus",
    Phase: "Phase",
    FinishReason: "FinishReason",
    DisputeKind: "Kind",
    DisputeStatus: "Status",
    Verdict: "Verdict",
    Outcome: "Outcome",
    PositionState: "PositionState",
    ProbeStatus: "ProbeStatus",
}
