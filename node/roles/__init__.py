"""The serving nodes: one room per role, and what the roles share beside them.

    drafter/    DrafterNode    (DraftSession per job; commitDraft; answers DraftReplay disputes)
    verifier/   VerifierNode   (VerifySession per job; acceptJob, submitVerification; answers TargetReplay disputes)
    referee/    RefereeNode    (replays a disputed position; commit-reveal vote; resolve)
    watchdog/   WatchdogNode   (audits finished jobs by sampled replay; opens, follows and cashes its disputes), and
                the audit replays `verispec audit` runs
    KeeperNode (node/probes/keeper.py): opens and starts the probes of a probing deployment (docs/node.md "Keeper")

  shared by the roles:
    base        NodeBase, the node loop: one key, one store, one TxSender, one EventPoller
    party       PartyNode: what the drafter and the verifier share (settling jobs, answering disputes)
    schedule    which tracked jobs / disputes a node looks at on a step; jobs in progress; announced turns
    inflight    a node's transactions in flight: submitted without waiting, settled on later steps
    transcript_jobs     transcript-mode jobs in the serving nodes
    transcript_answers  the drafter's side of an answered force
    behaviors   the behaviour names and the misbehaviours used by tests and the demo (biased drafter, retaliating
                verifier)

Below the roles: node/jobs/ (a job between chain and engine), node/link/ (the transcript link), node/requester/ (the
requester client, which the watchdog uses to dispute). The node classes are imported lazily, so `import node.roles`
stays free of torch. See docs/node.md.
"""

from __future__ import annotations

_LAZY = {
    "DrafterNode": "node.roles.drafter.node",
    "VerifierNode": "node.roles.verifier.node",
    "RefereeNode": "node.roles.referee.node",
    "WatchdogNode": "node.roles.watchdog.node",
    "KeeperNode": "node.probes.keeper",  # runs probes (docs/node.md "Keeper")
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'node.roles' has no attribute {name!r}")
