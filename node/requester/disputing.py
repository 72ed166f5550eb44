"""The dispute half of the requester client: open a dispute with the evidence rebuilt from chain data, draw
its referees, read it, appeal a round's verdict and wait for it (contracts/DisputeManager.sol, docs/disputes.md).

A mixin of `Requester` (node/requester/client.py) and of the watchdog node, whose `system`, `disputes` and `_send` it
uses. A transcript job's cycles come from its settlement (node/link/settled.py), and a cycle is pulled into the
market before its dispute opens: the same flow for the CLI and the watchdog.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from web3 import Web3
from web3.logs import DISCARD

from node.chain import logs as chain_logs
from node.chain.enums import (
    DisputeKind,
    DisputeStatus,
    Outcome,
    Verdict,
    solidity_name,
)
from node.chain.errors import TransactionReverted
from node.jobs import chaindata
from node.link import settled
from node.requester.errors import RequesterError
from node.requester.reports import (
    DisputeInfo,
    VoteInfo,
)

# what a draw reverts with when someone drew (or answered) first, or the seed block is not old enough yet
_LOST_DRAW_RACE = ("AlreadyDrawn", "DisputeWrongStatus", "DrawTooEarly", "EscalationPending")


def _dispute_kind(kind: DisputeKind | str) -> DisputeKind:
    """A DisputeKind from itself or its label ("draft", "target"); a RequesterError for anything else."""
    if isinstance(kind, DisputeKind):
        return kind
    try:
        return DisputeKind.from_label(kind)
    except (ValueError, AttributeError):
        raise RequesterError(f"--kind must be draft or target, got {kind!r}") from None


class DisputeClient:
    """Disputes on one deployment (the host class provides `system`, `disputes`, `_send` and `job_view`)."""

    def open_dispute(
        self, job_id: int, cycle: int, index: int, kind: DisputeKind | str, key: str | None = None
    ) -> DisputeInfo:
        """Open a dispute of `kind` (a DisputeKind, or its label "draft" / "target") on a position, with the bond.
        `key`: the transaction's idempotency key (a node's: opened again after a restart, it is the same one)."""
        disputes = self._require_disputes()
        kind = _dispute_kind(kind)
        self.job_view(job_id)
        record, leaf_proof = self.dispute_evidence(job_id, cycle, index)
        # a transcript cycle is proven against cycleRecordHash only once pulled there (nothing sent when it was)
        settled.pull(self.system, self._send, job_id, cycle, self.deployment.start_block, key and f"{key}:pull")
        bond = disputes.functions.bond().call()
        _, receipt = self._send(
            "openDispute",
            disputes.functions.openDispute(job_id, cycle, index, kind, record, leaf_proof),
            value=bond,
            key=key,
        )
        (event,) = disputes.events.DisputeOpened().process_receipt(receipt, errors=DISCARD)
        dispute_id = event["args"]["disputeId"]
        self.draw_referees(dispute_id)
        return self.dispute_info(dispute_id)

    def draw_referees(self, dispute_id: int, timeout: float = 30.0) -> bool:
        """Draw the referees of the current round of `dispute_id` now, from the hash of its seed block, in a later
        block. The challenger (or appellant) draws at once so that an accused cannot wait for that hash to age out of
        the 256-block window to get a second draw. An escalated draw is scheduled first (once its escalation period
        is over) and drawn in the next block. False when there was nothing to do: already drawn, answered (the
        answer draws), resolved, escalated and still waiting, or escalated again."""
        disputes = self._require_disputes()
        d = chaindata.dispute_view(disputes, dispute_id)
        if d["status"] not in (DisputeStatus.AwaitingAnswer, DisputeStatus.Drawing) or d["drawn"]:
            return False
        if d["drawBlock"] == 0:  # escalated: schedule a fresh seed block once the escalation period is over
            if self.w3.eth.get_block("latest")["timestamp"] < d["drawAfter"]:
                return False
            if not self._send_draw(dispute_id):
                return False
            d = chaindata.dispute_view(disputes, dispute_id)
        # the node may hand out the previous receipt before its block is the latest one; estimated against a
        # pending block that is still the seed block, the draw would revert DrawTooEarly
        deadline = time.monotonic() + timeout
        while self.w3.eth.block_number < d["drawBlock"] and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self._send_draw(dispute_id):
            return False
        return bool(chaindata.dispute_view(disputes, dispute_id)["drawn"])

    def _send_draw(self, dispute_id: int) -> bool:
        """Send `drawReferees` unless the round's panel is drawn already (the accused's answer draws it too, and
        often comes first: a draw sent after it reverts and still costs its gas). A race lost between that look
        and the transaction is no error either: the dispute goes on with the panel someone else drew."""
        disputes = self._require_disputes()
        d = chaindata.dispute_view(disputes, dispute_id)
        if d["status"] not in (DisputeStatus.AwaitingAnswer, DisputeStatus.Drawing) or d["drawn"]:
            return False
        try:
            self._send("drawReferees", disputes.functions.drawReferees(dispute_id))
        except TransactionReverted as exc:
            # the accused's answer came first, the opening is on chain either way, or the escalation still waits
            if exc.error_name in _LOST_DRAW_RACE:
                return False
            raise
        return True

    def appeal_dispute(self, dispute_id: int) -> DisputeInfo:
        """Appeal the latest decided round of `dispute_id` (anyone may), posting bond × 2^(round+1), and draw the
        appeal's fresh, larger panel at once."""
        disputes = self._require_disputes()
        self.dispute_info(dispute_id)  # a RequesterError for an unknown id
        d = chaindata.dispute_view(disputes, dispute_id)
        if d["status"] != DisputeStatus.Appealable:
            raise RequesterError(
                f"dispute {dispute_id} is {solidity_name(DisputeStatus(d['status']))}: only a decided round "
                "can be appealed, within its appeal period"
            )
        now = self.w3.eth.get_block("latest")["timestamp"]
        if now > d["appealDeadline"]:
            raise RequesterError(f"the appeal period of dispute {dispute_id} ended at {d['appealDeadline']}")
        bond = disputes.functions.appealBond(int(d["round"]) + 1).call()
        self._send("appeal", disputes.functions.appeal(dispute_id), value=bond)
        self.draw_referees(dispute_id)
        return self.dispute_info(dispute_id)

    def dispute_evidence(self, job_id: int, cycle: int, index: int) -> tuple[tuple, tuple]:
        """(record preimage, leaf proof) of position `index` of `cycle`, rebuilt from chain data alone."""
        try:
            data = settled.job_cycle(self.system, job_id, cycle, self.deployment.start_block)
            record = data.record_preimage()
        except LookupError as exc:
            raise RequesterError(f"cannot dispute cycle {cycle} of job {job_id}: {exc}") from None
        gamma = len(record[1])
        if not 0 <= index <= gamma:
            raise RequesterError(f"--index must be in 0..{gamma} (γ = {gamma}; index {gamma} is the outToken)")
        return record, data.leaf_proof(index)

    def job_disputes(self, job_id: int) -> list[DisputeInfo]:
        if self.disputes is None:
            return []
        logs = chain_logs.event_logs(
            self.disputes.events.DisputeOpened, self.deployment.start_block, argument_filters={"jobId": job_id}
        )
        return [self.dispute_info(log["args"]["disputeId"]) for log in logs]

    def dispute_info(self, dispute_id: int) -> DisputeInfo:
        disputes = self._require_disputes()
        count = disputes.functions.disputeCount().call()
        if not 1 <= dispute_id <= count:
            raise RequesterError(f"there is no dispute {dispute_id}")
        d = chaindata.dispute_view(disputes, dispute_id)
        start = self.deployment.start_block
        by_id = {"disputeId": dispute_id}
        opened = chain_logs.event_logs(disputes.events.DisputeOpened, start, argument_filters=by_id)[0]
        referees = list(disputes.functions.refereesOf(dispute_id).call())
        votes = []
        for referee in referees:
            commitment, _drawn, verdict, _round = disputes.functions.ballotOf(dispute_id, referee).call()
            votes.append(VoteInfo(referee, commitment != b"\0" * 32, solidity_name(Verdict(verdict))))
        answered = chain_logs.event_logs(disputes.events.Answered, start, argument_filters=by_id)
        answer = None
        if answered:
            a = answered[0]["args"]
            answer = {
                "claimed_prob": a["claimedProb"],
                "top_tokens": list(a["topTokens"]),
                "top_probs": list(a["topProbs"]),
            }
        resolved = chain_logs.event_logs(disputes.events.DisputeResolved, start, argument_filters=by_id)
        credited: dict[str, int] = {}
        for log in chain_logs.event_logs(disputes.events.Credited, start, argument_filters=by_id):
            credited[log["args"]["account"]] = credited.get(log["args"]["account"], 0) + log["args"]["amount"]
        a = opened["args"]
        return DisputeInfo(
            dispute_id=dispute_id,
            job_id=d["jobId"],
            cycle=d["cycle"],
            index=d["index"],
            kind=DisputeKind(d["kind"]).label,
            challenger=d["challenger"],
            accused=d["accused"],
            token=a["token"],
            claimed_value=a["claimedValue"],
            status=solidity_name(DisputeStatus(d["status"])),
            outcome=solidity_name(Outcome(d["outcome"])),
            referees=referees,
            votes=votes,
            answer=answer,
            faithful_votes=d["faithfulVotes"],
            cheated_votes=d["cheatedVotes"],
            accused_slashed_wei=resolved[0]["args"]["accusedSlashed"] if resolved else 0,
            credits=credited,
            open_tx=Web3.to_hex(opened["transactionHash"]),
            round=int(d["round"]),
            appeal_deadline=int(d["appealDeadline"]),
            round_result=solidity_name(Outcome(d["roundResult"])),
        )

    def wait_dispute(
        self,
        dispute_id: int,
        timeout: float = 300.0,
        poll: float = 0.5,
        on_change: Callable[[DisputeInfo], None] | None = None,
        until_appealable: bool = True,
    ) -> DisputeInfo:
        """Wait until `dispute_id` is Resolved, or (with `until_appealable`) until a round is decided and may be
        appealed; an escalated draw is scheduled and drawn when its escalation period is over."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            info = self.dispute_info(dispute_id)
            state = (
                info.status,
                info.round,
                info.answer is not None,
                tuple((v.committed, v.verdict) for v in info.votes),
            )
            if state != last and on_change is not None:
                on_change(info)
            last = state
            if info.status == "Resolved" or (until_appealable and info.status == "Appealable"):
                return info
            if info.status in ("AwaitingAnswer", "Drawing") and not info.referees:
                self.draw_referees(dispute_id)  # an escalated or appealed round waits for its panel
            if time.monotonic() > deadline:
                raise RequesterError(
                    f"dispute {dispute_id} was not resolved within {timeout:.0f}s (status {info.status})"
                )
            time.sleep(poll)
