"""The node roles: drafter, verifier and referee nodes on a chain, plus the readers and conventions they share.

    chaindata   a job's history from chain data alone (events, calldata, views); no torch
    jobs        on-chain JobRequest + prompt -> the engine's DecodingJob (and a session resumed at a cycle);
                the verifier-seed convention
    models      the models a node computes with: loaded once per process, fp32, replays
    schedule    which tracked jobs / disputes a node looks at on a step; jobs in progress; announced turns
    inflight    a node's transactions in flight: submitted without waiting, settled on later steps
    base        NodeBase, the node loop: one key, one store, one TxSender, one EventPoller
    party       PartyNode: what the drafter and the verifier share (settling jobs, answering disputes)
    drafter     DrafterNode    (DraftSession per job; commitDraft; answers DraftReplay disputes)
    verifier    VerifierNode   (VerifySession per job; acceptJob, submitVerification; answers TargetReplay disputes)
    referee     RefereeNode    (replays a disputed position; commit-reveal vote; resolve)
    behaviors   the behaviour names and the misbehaviours used by tests and the demo (biased drafter, retaliating
                verifier)
    requester   Requester: the requester / operator side (register, submit, report, disputes, finalize, withdraw)
    reports     what the requester returns (JobReport, DisputeInfo, CycleSummary, ...)
    audit       the audit replays of chain data (audit_job; `verispec audit`: replay_draft, replay_target)
    watchdog    WatchdogNode   (audits finished jobs by sampled replay; opens, follows and cashes its disputes)
    checkpoints local checkpoints (model id, context window, tokenizer) and the prompt fit
    identity    the chain a store is bound to; whether a key's registration fits the role and models it serves
    units       amounts and times as people type and read them
    reverts     what a contract revert means for the user (explain_revert)
    errors      RequesterError

The node classes are imported lazily, so `from node.roles import chaindata` stays free of torch.
See docs/node.md.
"""

from __future__ import annotations

_LAZY = {
    "DrafterNode": "node.roles.drafter",
    "VerifierNode": "node.roles.verifier",
    "RefereeNode": "node.roles.referee",
    "WatchdogNode": "node.roles.watchdog",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'node.roles' has no attribute {name!r}")
