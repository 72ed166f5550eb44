"""The reading half of the requester client: a job's view, its events and the report `verispec status`
prints, all from chain data (events, views, calldata; node/jobs/chaindata.py), never from a node's store.

A mixin of `Requester` (node/requester/client.py), whose `system`, `market`, `w3` and `deployment` it reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from web3 import Web3

from node.chain import logs as chain_logs
from node.chain.enums import (
    FinishReason,
    JobStatus,
    Phase,
    solidity_name,
)
from node.jobs import chaindata
from node.jobs.chaindata import ChainDataError
from node.link import settled
from node.protocol import WAD
from node.requester.checkpoints import load_tokenizer
from node.requester.errors import RequesterError
from node.requester.reports import (
    CycleSummary,
    JobReport,
    alpha_of,
)
from node.requester.units import format_time

_JOB_EVENTS = (
    "JobSubmitted",
    "JobAccepted",
    "DraftCommitted",
    "CycleVerified",
    "JobFinished",
    "JobFinalized",
    "AlphaFeePaid",
    "DisputeOpened",
    "DisputeClosed",
    "AlphaSlashed",
)


class JobReader:
    """Reading one deployment's jobs (the host class provides `w3`, `deployment`, `system` and `market`)."""

    def job_view(self, job_id: int) -> dict:
        """The market's `getJob` view of `job_id`; a RequesterError when the deployment has no such job."""
        view = chaindata.job_view(self.market, job_id)
        if view["status"] == JobStatus.None_:
            count = self.market.functions.jobCount().call()
            raise RequesterError(
                f"there is no job {job_id} (jobs on this deployment: 1..{count})"
                if count
                else f"there is no job {job_id} (no job was submitted yet)"
            )
        return view

    def job_logs(self, job_id: int, from_block: int | None = None, to_block: int | None = None) -> list:
        """Every market event of `job_id` (jobId is each one's first indexed topic), in chain order, up to
        `to_block` (default: the head)."""
        topic = "0x" + job_id.to_bytes(32, "big").hex()
        logs = chain_logs.get_logs(
            self.w3,
            {"address": self.market.address, "topics": [None, topic]},
            self.deployment.start_block if from_block is None else from_block,
            to_block,
        )
        out = []
        for log in logs:
            event = self._event_for(log)
            if event is not None:
                out.append(event.process_log(log))
        return out

    def _event_for(self, log):
        if not hasattr(self, "_topic_map"):
            from eth_utils.abi import event_abi_to_log_topic

            self._topic_map = {}
            for entry in self.market.abi:
                if entry.get("type") == "event" and entry["name"] in _JOB_EVENTS:
                    self._topic_map[bytes(event_abi_to_log_topic(entry))] = self.market.events[entry["name"]]()
        return self._topic_map.get(bytes(log["topics"][0])) if log["topics"] else None

    def report(self, job_id: int, tokenizer_path: Path | None = None, with_gas: bool = True) -> JobReport:
        view = self.job_view(job_id)
        logs = self.job_logs(job_id)
        by_name: dict[str, list] = {}
        for log in logs:
            by_name.setdefault(log["event"], []).append(log)
        submitted = by_name["JobSubmitted"][0]["args"]
        request = dict(submitted["request"])
        drafts = {log["args"]["cycle"]: log for log in by_name.get("DraftCommitted", [])}
        cycles = []
        for log in by_name.get("CycleVerified", []):
            a = log["args"]
            draft = drafts.get(a["cycle"])
            proposals, q = chaindata.unpack_draft(draft["args"]["draft"]) if draft else ([], [])
            tx_hashes = [Web3.to_hex(drafts[a["cycle"]]["transactionHash"])] if a["cycle"] in drafts else []
            tx_hashes.append(Web3.to_hex(log["transactionHash"]))
            cycles.append(
                CycleSummary(
                    a["cycle"],
                    proposals,
                    q,
                    a["accepted"],
                    a["outToken"],
                    chaindata.unpack_output(a["output"]),
                    Web3.to_hex(a["reveal"]),
                    tx_hashes,
                )
            )
        finished = by_name.get("JobFinished", [])
        if view.get("transcript") and finished:  # its cycles are in the settlement's calldata, not in events
            cycles = self._settled_cycles(job_id)
        tokens = [t for c in cycles for t in c.output]
        finalized = by_name.get("JobFinalized", [])
        if finalized:
            f = finalized[-1]["args"]
            fee = sum(log["args"]["amount"] for log in by_name.get("AlphaFeePaid", []))
            payments = {
                "drafter": f["drafterPay"],
                "verifier": f["verifierPay"],
                "alpha_fee": fee,
                "refund": f["refund"],
            }
        else:  # the projection mirrors InferenceMarket._payOut
            drafter_pay = 0 if view["drafterForfeited"] else view["drafterTokens"] * view["pricePerAcceptedToken"]
            verifier_pay = 0 if view["verifierForfeited"] else view["cycle"] * view["pricePerPass"]
            counts = view["alphaEligible"] and view["cycle"] != 0
            fee = verifier_pay * self.market.functions.alphaFeeBps().call() // 10_000 if counts else 0
            payments = {
                "drafter": drafter_pay,
                "verifier": verifier_pay - fee,
                "alpha_fee": fee,
                "refund": view["escrow"] - drafter_pay - verifier_pay,
            }
        gas_used = fees = 0
        tx_hashes = list(dict.fromkeys(Web3.to_hex(log["transactionHash"]) for log in logs))
        if with_gas:
            for tx_hash in tx_hashes:
                receipt = self.w3.eth.get_transaction_receipt(tx_hash)
                gas_used += receipt["gasUsed"]
                fees += receipt["gasUsed"] * receipt.get("effectiveGasPrice", 0)
        text = None
        if tokenizer_path is not None:
            text = self._decode(tokens, tokenizer_path, view["targetModel"])
        return JobReport(
            job_id=job_id,
            status=solidity_name(JobStatus(view["status"])),
            phase=solidity_name(Phase(view["phase"])),
            requester=view["requester"],
            drafter=view["drafter"],
            verifier=view["verifier"],
            draft_model=Web3.to_hex(view["draftModel"]),
            target_model=Web3.to_hex(view["targetModel"]),
            gamma=view["gamma"],
            max_tokens=view["maxTokens"],
            eos_token=view["eosToken"],
            temperature=request["temperature"] / WAD,
            top_k=request["topK"],
            top_p=request["topP"] / WAD,
            alpha_eligible=view["alphaEligible"],
            prompt=bytes(submitted["prompt"]).decode("utf-8", "replace"),
            escrow_wei=view["escrow"],
            price_token_wei=view["pricePerAcceptedToken"],
            price_pass_wei=view["pricePerPass"],
            cycles=cycles,
            tokens=tokens,
            text=text,
            alpha=alpha_of(cycles),
            drafter_tokens=view["drafterTokens"],
            finish_reason=FinishReason(finished[-1]["args"]["reason"]).name if finished else None,
            deadline=view["deadline"],
            open_disputes=view["openDisputes"],
            payments=payments,
            finalized=bool(finalized),
            disputes=self.job_disputes(job_id),
            gas_used=gas_used,
            gas_fees_wei=fees,
            tx_count=len(tx_hashes),
        )

    def _settled_cycles(self, job_id: int) -> list[CycleSummary]:
        """A transcript job's cycles as its settlement posted them, read by the one reader of settled transcript
        jobs (node/link/settled.py); none when the chain holds no settlement of it that is the job's own."""
        try:
            found = settled.read(self.system, job_id, self.deployment.start_block).cycles
        except ChainDataError:
            return []
        return [
            CycleSummary(
                c.cycle, list(c.tokens), list(c.q), c.accepted, c.out_token, list(c.output), Web3.to_hex(c.reveal)
            )
            for c in found
        ]

    def _decode(self, tokens: list[int], tokenizer_path: Path, target_model: bytes) -> str | None:
        """The text of `tokens`, with the tokenizer at `tokenizer_path` (None if it cannot be loaded)."""
        try:
            tokenizer = load_tokenizer(tokenizer_path)
        except RequesterError:
            return None
        return tokenizer.decode(tokens)

    def wait(
        self,
        job_id: int,
        on_cycle: Callable[[CycleSummary, list[int]], None] | None = None,
        accept_timeout: float = 120.0,
        timeout: float = 1800.0,
        poll: float = 0.25,
        waited: float = 0.0,
    ) -> str:
        """Block until `job_id` finishes (returns the finish reason), calling `on_cycle` per verified cycle.
        `waited`: seconds already spent on the job before this call (both timeouts count from the submission)."""
        start = time.monotonic() - waited
        from_block = self.deployment.start_block
        drafts: dict[int, tuple[list[int], list[int]]] = {}
        tokens: list[int] = []
        accepted_at = None
        while True:
            head = self.w3.eth.block_number
            # up to `head`, not to whatever the head is by the time the logs are asked for: the next poll starts
            # at head + 1, so a block mined in between was read twice, its cycle counted twice (33/32 tokens)
            for log in self.job_logs(job_id, from_block, head) if head >= from_block else []:
                a = log["args"]
                if log["event"] == "JobAccepted":
                    accepted_at = time.monotonic()
                elif log["event"] == "DraftCommitted":
                    drafts[a["cycle"]] = chaindata.unpack_draft(a["draft"])
                elif log["event"] == "CycleVerified":
                    proposals, q = drafts.get(a["cycle"], ([], []))
                    output = chaindata.unpack_output(a["output"])
                    tokens.extend(output)
                    if on_cycle is not None:
                        on_cycle(
                            CycleSummary(
                                a["cycle"], proposals, q, a["accepted"], a["outToken"], output, Web3.to_hex(a["reveal"])
                            ),
                            list(tokens),
                        )
                elif log["event"] == "JobFinished":
                    return FinishReason(a["reason"]).name
            from_block = head + 1
            elapsed = time.monotonic() - start
            if accepted_at is None and elapsed > accept_timeout:
                held_until = format_time(self.job_view(job_id)["deadline"])
                raise RequesterError(
                    f"job {job_id} was not accepted within {accept_timeout:.0f}s: is the verifier's "
                    "node running (`verispec serve verifier`)? The market holds the escrow until a verifier "
                    f"accepts; if none does by {held_until}, `verispec claim-timeout {job_id}` refunds it. "
                    f"Check later with `verispec status {job_id}`"
                )
            if elapsed > timeout:
                raise RequesterError(
                    f"job {job_id} did not finish within {timeout:.0f}s; check later with `verispec status {job_id}`"
                )
            time.sleep(poll)
