"""The requester / operator side of the protocol: what `verispec register|unbond|withdraw|submit|status|
dispute|finalize` do, over web3 and the exactly-once `TxSender` (node/chain/sender.py).

Everything a report shows is read from the chain (events, views, calldata), never from a node's store:
the output text is decoded from `CycleVerified` outputs, the proposals from `DraftCommitted`, p from the
`submitVerification` calldata (via node/roles/chaindata.py). Results are the dataclasses of
node/roles/reports.py.

Errors a user can cause raise `RequesterError` (node/roles/errors.py) with a one-line message; a contract
revert is decoded (RevertDecoder) and explained by node/roles/reverts.py.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3 import Web3
from web3.logs import DISCARD

from node.chain import logs as chain_logs
from node.chain.compile import compile_contracts
from node.chain.deployment import Deployment
from node.chain.enums import (
    NO_EOS,
    DisputeKind,
    DisputeStatus,
    FinishReason,
    JobStatus,
    Outcome,
    Phase,
    Role,
    Verdict,
    solidity_name,
)
from node.chain.errors import TransactionRejected, TransactionReverted
from node.chain.revert_decoder import RevertDecoder
from node.chain.sender import TxSender
from node.protocol import WAD
from node.roles import chaindata
from node.roles.checkpoints import check_fits, load_model_info, load_tokenizer, tokenize_prompt
from node.roles.errors import RequesterError
from node.roles.reports import (
    CycleSummary,
    DisputeInfo,
    JobReport,
    Registration,
    SubmitResult,
    TxResult,
    UnbondResult,
    VoteInfo,
    WithdrawResult,
    alpha_of,
)
from node.roles.units import format_eth, format_time, to_wad
from node.store import NodeStore

UINT96_MAX = 2**96 - 1
MAX_GAMMA = 16

_JOB_EVENTS = (
    "JobSubmitted",
    "JobAccepted",
    "DraftCommitted",
    "CycleVerified",
    "JobFinished",
    "JobFinalized",
    "DisputeOpened",
    "DisputeClosed",
    "AlphaSlashed",
)


def _label_of(enum, value) -> str:
    """The label of `value` in `enum` (e.g. Role 1 -> "drafter"), or `value` as text when it is none."""
    try:
        return enum(value).label
    except ValueError:
        return str(value)


def _staked_role(role: Role | str) -> Role:
    """A role an account can register as, from the Role or its label; a RequesterError for any other."""
    if isinstance(role, Role) and role in Role.staked():
        return role
    if isinstance(role, str) and role in [r.label for r in Role.staked()]:
        return Role.from_label(role)
    raise RequesterError(f"unknown role {role!r}: use drafter, verifier or referee")


def _dispute_kind(kind: DisputeKind | str) -> DisputeKind:
    """A DisputeKind from itself or its label ("draft", "target"); a RequesterError for anything else."""
    if isinstance(kind, DisputeKind):
        return kind
    try:
        return DisputeKind.from_label(kind)
    except (ValueError, AttributeError):
        raise RequesterError(f"--kind must be draft or target, got {kind!r}") from None


class Requester:
    """Operations of one account (or read-only, without one) against one deployment."""

    def __init__(
        self,
        w3: Web3,
        deployment: Deployment,
        account: LocalAccount | None = None,
        store_path: str | Path | None = None,
        artifacts: dict | None = None,
        receipt_timeout: float = 120.0,
    ):
        self.w3 = w3
        self.deployment = deployment
        self.artifacts = artifacts or compile_contracts()
        self.system = deployment.system(w3, self.artifacts)
        self.registry = self.system.registry
        self.market = self.system.market
        self.disputes = self.system.disputes
        self.errors = RevertDecoder.from_artifacts(self.artifacts)
        self.account = account
        self.address = to_checksum_address(account.address) if account is not None else None
        self._store: NodeStore | None = None
        self._sender: TxSender | None = None
        self._store_path = Path(store_path) if store_path else None
        self._receipt_timeout = receipt_timeout

    # --- plumbing ---------------------------------------------------------------------------------

    @property
    def sender(self) -> TxSender:
        if self.account is None:
            raise RequesterError("this command needs a key: --key, --key-file, --dev-account N or $VERISPEC_KEY")
        if self._sender is None:
            path = self._store_path or Path(".verispec") / "cli" / f"{self.address.lower()}.db"
            self._store = NodeStore(path)
            self._sender = TxSender(
                self.w3, self.account, self._store, errors=self.errors, receipt_timeout=self._receipt_timeout
            )
        return self._sender

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def _send(self, action: str, function, value: int = 0, key: str | None = None) -> tuple[TxResult, Any]:
        key = key or f"cli:{action}:{uuid.uuid4().hex}"
        try:
            receipt = self.sender.send_call(key, function, value=value)
        except TransactionRejected as exc:
            reason = exc.reason
            if "insufficient funds" in reason.lower():
                raise RequesterError(f"{self.address} cannot pay for this transaction: {reason}") from None
            raise RequesterError(f"the node refused the transaction: {reason}") from None
        result = TxResult(action, Web3.to_hex(receipt["transactionHash"]), receipt["gasUsed"], receipt["blockNumber"])
        return result, receipt

    def now(self) -> int:
        return self.w3.eth.get_block("latest")["timestamp"]

    def _require_disputes(self):
        if self.disputes is None:
            raise RequesterError("this deployment has no DisputeManager")
        return self.disputes

    # --- registry ---------------------------------------------------------------------------------

    def account_state(self, address: str | None = None) -> dict:
        address = address or self.address
        state = self.registry.functions.accountOf(address).call()
        stake, role, locks, unbonding_since, alpha_star, target = state
        return {
            "stake": stake,
            "role": _label_of(Role, role),
            "locks": locks,
            "unbonding_since": unbonding_since,
            "alpha_star": alpha_star,
            "target_model": target,
        }

    def register(
        self,
        role: Role | str,
        model_paths: list[Path],
        stake_wei: int,
        alpha: float | None = None,
        target_model_path: Path | None = None,
    ) -> Registration:
        role = _staked_role(role)
        if not model_paths:
            raise RequesterError("give the model to serve: --model PATH")
        current = self.account_state()
        if current["role"] != "none":
            raise RequesterError(
                f"{self.address} is already registered as a {current['role']} "
                f"(one role per address: `verispec unbond`, then `withdraw`, then register again)"
            )
        minimum = self.registry.functions.minStake(role).call()
        if stake_wei < minimum or stake_wei == 0:
            raise RequesterError(
                f"a {role.label} must stake at least {format_eth(minimum)}; --stake gave {format_eth(stake_wei)}"
            )
        if role == Role.Drafter:
            if len(model_paths) != 1:
                raise RequesterError("a drafter serves exactly one draft model: give one --model")
            if target_model_path is None:
                raise RequesterError("a drafter needs --target-model PATH (the model its drafts are verified with)")
            alpha = 0.6 if alpha is None else alpha
            if not 0 <= alpha <= 1:
                raise RequesterError(f"--alpha must be in [0, 1], got {alpha}")
            draft, target = load_model_info(model_paths[0]), load_model_info(target_model_path)
            alpha_wad = to_wad(alpha, "--alpha")
            tx, _ = self._send(
                "registerDrafter",
                self.registry.functions.registerDrafter(draft.model_id, target.model_id, alpha_wad),
                value=stake_wei,
            )
            ids = [draft.model_id, target.model_id]
        else:
            if alpha is not None:
                raise RequesterError("--alpha is a drafter's claim; verifiers and referees have none")
            if target_model_path is not None:
                raise RequesterError(
                    "--target-model is for drafters; a verifier or referee lists every model with --model"
                )
            infos = [load_model_info(p) for p in model_paths]
            ids = list(dict.fromkeys(info.model_id for info in infos))
            if len(ids) > 8:
                raise RequesterError("at most 8 models per verifier or referee")
            tx, _ = self._send("register", self.registry.functions.register(role, ids), value=stake_wei)
        return Registration(self.address, role.label, stake_wei, ["0x" + i.hex() for i in ids], alpha, tx)

    def unbond(self) -> UnbondResult:
        """requestUnbond; when already unbonding and due (and no locks), withdrawUnbonded."""
        state = self.account_state()
        if state["role"] == "none":
            raise RequesterError(f"{self.address} is not registered")
        period = self.registry.functions.unbondingPeriod().call()
        if state["unbonding_since"] == 0:
            tx, _ = self._send("requestUnbond", self.registry.functions.requestUnbond())
            since = self.registry.functions.accountOf(self.address).call()[3]
            return UnbondResult(self.address, "requested", state["stake"], since + period, state["locks"], tx)
        due = state["unbonding_since"] + period
        if self.now() < due or state["locks"]:
            return UnbondResult(self.address, "waiting", state["stake"], due, state["locks"])
        tx, _ = self._send("withdrawUnbonded", self.registry.functions.withdrawUnbonded())
        return UnbondResult(self.address, "withdrawn", state["stake"], due, 0, tx)

    def balances(self, address: str | None = None) -> dict[str, int]:
        address = address or self.address
        state = self.account_state(address)
        result = {
            "market": self.market.functions.owed(address).call(),
            "disputes": self.disputes.functions.credits(address).call() if self.disputes else 0,
            "stake": state["stake"],
            "wallet": self.w3.eth.get_balance(address),
        }
        return result

    def withdraw(self) -> WithdrawResult:
        """Pull everything this account is owed: market earnings/refunds, dispute credits, and the unbonded
        stake once its unbonding period has passed (with no locks)."""
        result = WithdrawResult(self.address, 0, 0, 0)
        owed = self.market.functions.owed(self.address).call()
        if owed:
            tx, _ = self._send("market.withdraw", self.market.functions.withdraw())
            result.market_wei, result.txs = owed, result.txs + [tx]
        if self.disputes is not None:
            credit = self.disputes.functions.credits(self.address).call()
            if credit:
                tx, _ = self._send("disputes.withdraw", self.disputes.functions.withdraw())
                result.disputes_wei, result.txs = credit, result.txs + [tx]
        state = self.account_state()
        if state["unbonding_since"]:
            due = state["unbonding_since"] + self.registry.functions.unbondingPeriod().call()
            if self.now() >= due and not state["locks"]:
                tx, _ = self._send("withdrawUnbonded", self.registry.functions.withdrawUnbonded())
                result.stake_wei, result.txs = state["stake"], result.txs + [tx]
        if not result.txs:
            raise RequesterError(
                f"nothing to withdraw for {self.address}"
                + (f" (stake unbonding until {format_time(due)})" if state["unbonding_since"] else "")
            )
        return result

    # --- finding nodes ----------------------------------------------------------------------------

    def _registry_logs(self, event: str, **filters) -> list:
        return chain_logs.event_logs(self.registry.events[event], self.deployment.start_block, argument_filters=filters)

    def active_drafters(self, draft_id: bytes, target_id: bytes) -> list[str]:
        logs = self._registry_logs("DrafterPairSet", draftModel=draft_id, targetModel=target_id)
        seen = dict.fromkeys(to_checksum_address(log["args"]["account"]) for log in logs)
        return self._rank([a for a in seen if self.registry.functions.isActiveDrafter(a, draft_id, target_id).call()])

    def active_verifiers(self, target_id: bytes) -> list[str]:
        seen = dict.fromkeys(
            to_checksum_address(log["args"]["account"]) for log in self._registry_logs("Registered", role=Role.Verifier)
        )
        return self._rank([a for a in seen if self.registry.functions.isActive(a, Role.Verifier, target_id).call()])

    def _rank(self, accounts: list[str]) -> list[str]:
        """Highest stake first; registration order among equals."""
        stakes = {a: self.registry.functions.stakeOf(a).call() for a in accounts}
        return sorted(accounts, key=lambda a: -stakes[a])

    # --- jobs -------------------------------------------------------------------------------------

    def submit(
        self,
        prompt: str,
        *,
        draft_model: Path,
        target_model: Path,
        max_tokens: int = 64,
        gamma: int = 4,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        drafter: str | None = None,
        verifier: str | None = None,
        price_token_wei: int = 10**12,
        price_pass_wei: int = 3 * 10**12,
        escrow_wei: int | None = None,
        eos: bool = True,
    ) -> SubmitResult:
        from node.decoding import tokenizer_digest

        if not 1 <= gamma <= MAX_GAMMA:
            raise RequesterError(f"--gamma must be in 1..{MAX_GAMMA}, got {gamma}")
        if not 1 <= max_tokens <= 65535:
            raise RequesterError(f"--max-tokens must be in 1..65535, got {max_tokens}")
        if not temperature >= 0:
            raise RequesterError(f"--temperature must be >= 0, got {temperature}")
        if top_k < 0:
            raise RequesterError(f"--top-k must be >= 0, got {top_k}")
        if not 0 < top_p <= 1:
            raise RequesterError(f"--top-p must be in (0, 1], got {top_p}")
        if price_token_wei >= 2**128 or price_pass_wei >= 2**128:
            raise RequesterError("prices must fit in uint128")
        draft, target = load_model_info(draft_model), load_model_info(target_model)
        try:
            same = tokenizer_digest(draft.path) == tokenizer_digest(target.path)
        except FileNotFoundError as exc:
            raise RequesterError(str(exc)) from None
        if not same:
            raise RequesterError(f"{draft.path} and {target.path} do not share a tokenizer: they cannot be paired")
        tokenizer = load_tokenizer(target.path)
        tokens = tokenize_prompt(tokenizer, prompt)
        if not tokens:
            raise RequesterError("the prompt is empty: it must encode to at least one token")
        limits = [m for m in (draft.max_positions, target.max_positions) if m]
        check_fits(len(tokens), max_tokens, gamma, min(limits) if limits else None)

        registry = self.registry.functions
        drafter = self._pick(
            "drafter",
            drafter,
            self.active_drafters(draft.model_id, target.model_id),
            lambda a: registry.isActiveDrafter(a, draft.model_id, target.model_id).call(),
            f"draft model 0x{draft.model_id.hex()[:16]}… for target 0x{target.model_id.hex()[:16]}…",
        )
        verifier = self._pick(
            "verifier",
            verifier,
            self.active_verifiers(target.model_id),
            lambda a: self.registry.functions.isActive(a, Role.Verifier, target.model_id).call(),
            f"target model 0x{target.model_id.hex()[:16]}…",
        )
        if len({drafter, verifier, self.address}) != 3:
            raise RequesterError(
                "requester, drafter and verifier must be three different accounts "
                f"(requester {self.address}, drafter {drafter}, verifier {verifier})"
            )
        required = max_tokens * (price_token_wei + price_pass_wei)
        escrow = required if escrow_wei is None else escrow_wei
        if escrow < required:
            raise RequesterError(
                f"escrow {format_eth(escrow)} ({escrow} wei) is too little: the market requires "
                f"max tokens × (price per accepted token + price per pass) = {max_tokens} × "
                f"({price_token_wei} + {price_pass_wei}) = {required} wei"
            )
        if escrow > UINT96_MAX:
            raise RequesterError(f"escrow {escrow} wei exceeds the market's uint96 limit")
        eos_token = tokenizer.eos_token_id if eos and tokenizer.eos_token_id is not None else NO_EOS
        # JobRequest, in the struct's field order
        request = (
            draft.model_id,
            target.model_id,
            drafter,
            verifier,
            gamma,
            to_wad(temperature, "--temperature"),
            top_k,
            to_wad(top_p, "--top-p"),
            max_tokens,
            eos_token,
            price_token_wei,
            price_pass_wei,
        )
        tx, receipt = self._send(
            "submitJob", self.market.functions.submitJob(request, prompt.encode("utf-8")), value=escrow
        )
        (event,) = self.market.events.JobSubmitted().process_receipt(receipt, errors=DISCARD)
        return SubmitResult(event["args"]["jobId"], drafter, verifier, escrow, len(tokens), tx)

    def _pick(
        self, role: str, given: str | None, candidates: list[str], is_active: Callable[[str], bool], what: str
    ) -> str:
        if given:
            try:
                address = to_checksum_address(given)
            except (ValueError, TypeError):
                raise RequesterError(f"--{role} {given!r} is not an address") from None
            if not is_active(address):
                raise RequesterError(f"{address} is not an active {role} for {what}")
            return address
        others = [c for c in candidates if c != self.address]
        if candidates and not others:
            raise RequesterError(
                f"the only active {role} for {what} is the requester itself: requester, drafter "
                "and verifier must be three different accounts"
            )
        candidates = others
        if not candidates:
            raise RequesterError(
                f"unknown model: no registered active {role} serves {what} "
                f"(register one with `verispec register --role {role}`)"
            )
        return candidates[0]

    # --- reading a job from the chain --------------------------------------------------------------

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

    def job_logs(self, job_id: int, from_block: int | None = None) -> list:
        """Every market event of `job_id` (jobId is each one's first indexed topic), in chain order."""
        topic = "0x" + job_id.to_bytes(32, "big").hex()
        logs = chain_logs.get_logs(
            self.w3,
            {"address": self.market.address, "topics": [None, topic]},
            self.deployment.start_block if from_block is None else from_block,
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
        tokens = [t for c in cycles for t in c.output]
        finished = by_name.get("JobFinished", [])
        finalized = by_name.get("JobFinalized", [])
        if finalized:
            f = finalized[-1]["args"]
            payments = {"drafter": f["drafterPay"], "verifier": f["verifierPay"], "refund": f["refund"]}
        else:
            drafter_pay = 0 if view["drafterForfeited"] else view["drafterTokens"] * view["pricePerAcceptedToken"]
            verifier_pay = 0 if view["verifierForfeited"] else view["cycle"] * view["pricePerPass"]
            payments = {
                "drafter": drafter_pay,
                "verifier": verifier_pay,
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
    ) -> str:
        """Block until `job_id` finishes (returns the finish reason), calling `on_cycle` per verified cycle."""
        start = time.monotonic()
        from_block = self.deployment.start_block
        drafts: dict[int, tuple[list[int], list[int]]] = {}
        tokens: list[int] = []
        accepted_at = None
        while True:
            head = self.w3.eth.block_number
            for log in self.job_logs(job_id, from_block) if head >= from_block else []:
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
                raise RequesterError(
                    f"job {job_id} was not accepted within {accept_timeout:.0f}s: is the verifier's "
                    "node running (`verispec serve verifier`)? Check later with "
                    f"`verispec status {job_id}`"
                )
            if elapsed > timeout:
                raise RequesterError(
                    f"job {job_id} did not finish within {timeout:.0f}s; check later with `verispec status {job_id}`"
                )
            time.sleep(poll)

    def finalize(self, job_id: int) -> tuple[TxResult, dict[str, int]]:
        self.job_view(job_id)
        tx, receipt = self._send("finalize", self.market.functions.finalize(job_id), key=None)
        (event,) = self.market.events.JobFinalized().process_receipt(receipt, errors=DISCARD)
        a = event["args"]
        return tx, {"drafter": a["drafterPay"], "verifier": a["verifierPay"], "refund": a["refund"]}

    def claim_timeout(self, job_id: int) -> tuple[TxResult, dict]:
        """`claimTimeout`: ends a job whose current deadline passed (see docs/contracts.md, Deadlines)."""
        self.job_view(job_id)
        tx, receipt = self._send("claimTimeout", self.market.functions.claimTimeout(job_id))
        (event,) = self.market.events.JobFinished().process_receipt(receipt, errors=DISCARD)
        a = event["args"]
        return tx, {"reason": FinishReason(a["reason"]).name, "party": a["party"], "slashed": a["slashed"]}

    # --- disputes ---------------------------------------------------------------------------------

    def open_dispute(self, job_id: int, cycle: int, index: int, kind: DisputeKind | str) -> DisputeInfo:
        """Open a dispute of `kind` (a DisputeKind, or its label "draft" / "target") on a position, with the bond."""
        disputes = self._require_disputes()
        kind = _dispute_kind(kind)
        self.job_view(job_id)
        record, leaf_proof = self.dispute_evidence(job_id, cycle, index)
        bond = disputes.functions.bond().call()
        _, receipt = self._send(
            "openDispute", disputes.functions.openDispute(job_id, cycle, index, kind, record, leaf_proof), value=bond
        )
        (event,) = disputes.events.DisputeOpened().process_receipt(receipt, errors=DISCARD)
        dispute_id = event["args"]["disputeId"]
        self.draw_referees(dispute_id)
        return self.dispute_info(dispute_id)

    def draw_referees(self, dispute_id: int, timeout: float = 30.0) -> bool:
        """Draw the referees of `dispute_id` now, from the hash of its opening block, in a later block. The
        challenger draws at once so that an accused cannot wait for that hash to age out of the 256-block window
        to get a second draw. False when there was nothing to do: already drawn, answered (the answer draws) or
        resolved."""
        disputes = self._require_disputes()
        d = chaindata.dispute_view(disputes, dispute_id)
        if d["status"] != DisputeStatus.AwaitingAnswer or d["drawn"]:
            return False
        # the node may hand out the opening's receipt before its block is the latest one; estimated against a
        # pending block that is still the opening block, the draw would revert DrawTooEarly
        deadline = time.monotonic() + timeout
        while self.w3.eth.block_number < d["drawBlock"] and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            self._send("drawReferees", disputes.functions.drawReferees(dispute_id))
        except TransactionReverted as exc:
            if exc.error_name in ("AlreadyDrawn", "DisputeWrongStatus"):  # the accused's answer came first
                return False
            if exc.error_name == "DrawTooEarly":  # the opening is on chain either way; the answer will draw
                return False
            raise
        return True

    def dispute_evidence(self, job_id: int, cycle: int, index: int) -> tuple[tuple, tuple]:
        """(record preimage, leaf proof) of position `index` of `cycle`, rebuilt from chain data alone."""
        try:
            record = chaindata.record_preimage(self.system, job_id, cycle, from_block=self.deployment.start_block)
        except LookupError as exc:
            raise RequesterError(f"cannot dispute cycle {cycle} of job {job_id}: {exc}") from None
        gamma = len(record[1])
        if not 0 <= index <= gamma:
            raise RequesterError(f"--index must be in 0..{gamma} (γ = {gamma}; index {gamma} is the outToken)")
        proof = chaindata.leaf_proof(self.system, job_id, cycle, index, from_block=self.deployment.start_block)
        return record, proof

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
            commitment, _drawn, verdict = disputes.functions.ballotOf(dispute_id, referee).call()
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
        )

    def wait_dispute(
        self,
        dispute_id: int,
        timeout: float = 300.0,
        poll: float = 0.5,
        on_change: Callable[[DisputeInfo], None] | None = None,
    ) -> DisputeInfo:
        deadline = time.monotonic() + timeout
        last = None
        while True:
            info = self.dispute_info(dispute_id)
            state = (info.status, info.answer is not None, tuple((v.committed, v.verdict) for v in info.votes))
            if state != last and on_change is not None:
                on_change(info)
            last = state
            if info.status == "Resolved":
                return info
            if time.monotonic() > deadline:
                raise RequesterError(
                    f"dispute {dispute_id} was not resolved within {timeout:.0f}s (status {info.status})"
                )
            time.sleep(poll)
