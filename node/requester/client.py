"""The requester / operator side of the protocol: what `verispec register|unbond|withdraw|submit|status|
dispute|finalize` do, over web3 and the exactly-once `TxSender` (node/chain/sender.py).

Everything a report shows is read from the chain (events, views, calldata), never from a node's store:
the output text is decoded from `CycleVerified` outputs, the proposals from `DraftCommitted`, p from the
`submitVerification` calldata (via node/jobs/chaindata.py; the reading half is node/requester/job_reader.py,
the dispute half node/requester/disputing.py). Results are the dataclasses of node/requester/reports.py.

Errors a user can cause raise `RequesterError` (node/requester/errors.py) with a one-line message; a contract
revert is decoded (RevertDecoder) and explained by node/requester/reverts.py.
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
from web3.exceptions import BadFunctionCallOutput, ContractLogicError
from web3.logs import DISCARD

from node.chain import logs as chain_logs
from node.chain.compile import compile_contracts
from node.chain.deployment import Deployment
from node.chain.enums import (
    NO_EOS,
    FinishReason,
    JobStatus,
    Role,
)
from node.chain.errors import TransactionRejected, TransactionReverted
from node.chain.identity import store_binding
from node.chain.revert_decoder import RevertDecoder
from node.chain.sender import TxSender
from node.requester.checkpoints import check_fits, load_model_info, load_tokenizer, tokenize_prompt
from node.requester.disputing import DisputeClient
from node.requester.errors import RequesterError
from node.requester.job_reader import JobReader
from node.requester.reports import (
    Registration,
    SubmitResult,
    TxResult,
    UnbondResult,
    WithdrawResult,
)
from node.requester.units import MAX_WAD_FRACTION, format_eth, format_time, to_wad
from node.store import NodeStore

UINT96_MAX = 2**96 - 1
# how a node says the sender cannot pay: anvil and geth "insufficient funds …", Hardhat "Sender doesn't have
# enough funds to send tx …"
_NO_FUNDS = ("insufficient funds", "enough funds")
MAX_GAMMA = 16


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


class Requester(JobReader, DisputeClient):
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
            self._store = NodeStore(path, binding=store_binding(self.w3, self.deployment))
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
            if any(s in reason.lower() for s in _NO_FUNDS):
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
        capacity: int | None = None,
    ) -> Registration:
        role = _staked_role(role)
        if capacity is not None and role != Role.Drafter:
            raise RequesterError("--capacity is a drafter's option (the jobs it serves at once)")
        if capacity is not None and not 1 <= capacity < 2**32:
            raise RequesterError(f"--capacity must be in 1..{2**32 - 1}, got {capacity}")
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
            vocab = _registered_vocab(draft)
            if target.vocab_size is not None and target.vocab_size != vocab:
                raise RequesterError(
                    f"the draft model's vocabulary ({vocab}) is not the target's ({target.vocab_size}): "
                    "no verifier of that target could take a job"
                )
            tx, _ = self._send(
                "registerDrafter",
                self.registry.functions.registerDrafter(draft.model_id, target.model_id, alpha_wad, vocab),
                value=stake_wei,
            )
            ids = [draft.model_id, target.model_id]
            capacity_tx = self.set_capacity(capacity) if capacity is not None else None
            capacity = self.drafter_load()[1]
            result = Registration(self.address, role.label, stake_wei, ["0x" + i.hex() for i in ids], alpha, tx)
            result.capacity, result.capacity_tx = capacity, capacity_tx
            return result
        else:
            if alpha is not None:
                raise RequesterError("--alpha is a drafter's claim; verifiers and referees have none")
            if target_model_path is not None:
                raise RequesterError(
                    "--target-model is for drafters; a verifier or referee lists every model with --model"
                )
            infos = [load_model_info(p) for p in model_paths]
            vocabs = {info.model_id: _registered_vocab(info) for info in infos}
            ids = list(vocabs)
            if len(ids) > 8:
                raise RequesterError("at most 8 models per verifier or referee")
            call = self.registry.functions.register(role, ids, [vocabs[i] for i in ids])
            tx, _ = self._send("register", call, value=stake_wei)
        return Registration(self.address, role.label, stake_wei, ["0x" + i.hex() for i in ids], alpha, tx)

    def set_capacity(self, capacity: int) -> TxResult:
        """Declare, as a registered drafter, how many jobs it serves at once (`setCapacity`; docs/protocol.md
        "Soundness (v1.2)")."""
        if not 1 <= capacity < 2**32:
            raise RequesterError(f"--capacity must be in 1..{2**32 - 1}, got {capacity}")
        if self.account_state()["role"] != "drafter":
            raise RequesterError(f"{self.address} is not registered as a drafter: only a drafter declares a capacity")
        tx, _ = self._send("setCapacity", self.market.functions.setCapacity(capacity))
        return tx

    def drafter_load(self, drafter: str | None = None) -> tuple[int, int]:
        """(Open or Running jobs, most it accepts) of `drafter` (default: this account), from the market."""
        live, capacity = self.market.functions.drafterLoad(drafter or self.address).call()
        return int(live), int(capacity)

    def drafter_min_price(self, drafter: str) -> int:
        """The least price per accepted token (wei) `drafter` declared (`minPriceOf`; 0: any), from the market; 0 on
        a market without declared prices (an older deployment)."""
        try:
            return int(self.market.functions.minPriceOf(drafter).call())
        except (BadFunctionCallOutput, ContractLogicError):
            return 0

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
        mode: str = "onchain",
    ) -> SubmitResult:
        from node.decoding import tokenizer_digest

        if not 1 <= gamma <= MAX_GAMMA:
            raise RequesterError(f"--gamma must be in 1..{MAX_GAMMA}, got {gamma}")
        if not 1 <= max_tokens <= 65535:
            raise RequesterError(f"--max-tokens must be in 1..65535, got {max_tokens}")
        if not 0 <= temperature <= MAX_WAD_FRACTION:  # also refuses nan; inf is above the bound
            raise RequesterError(
                f"--temperature must be in [0, {MAX_WAD_FRACTION}] (the market holds it as a uint64 WAD), "
                f"got {temperature}"
            )
        if not 0 <= top_k < 2**32:
            raise RequesterError(f"--top-k must be in 0..{2**32 - 1} (the market holds it as a uint32), got {top_k}")
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
        drafter = self._pick_drafter(
            drafter,
            self.active_drafters(draft.model_id, target.model_id),
            lambda a: registry.isActiveDrafter(a, draft.model_id, target.model_id).call(),
            f"draft model 0x{draft.model_id.hex()[:16]}… for target 0x{target.model_id.hex()[:16]}…",
            price_token_wei,
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
        fn = "submitTranscriptJob" if mode == "transcript" else "submitJob"  # transcript: cycles off chain
        tx, receipt = self._send(fn, getattr(self.market.functions, fn)(request, prompt.encode("utf-8")), value=escrow)
        (event,) = self.market.events.JobSubmitted().process_receipt(receipt, errors=DISCARD)
        return SubmitResult(event["args"]["jobId"], drafter, verifier, escrow, len(tokens), tx)

    def _pick_drafter(
        self, given: str | None, candidates: list[str], is_active: Callable[[str], bool], what: str, price: int
    ) -> str:
        """`_pick` among the drafters with a free slot (`drafterLoad`: live < capacity; the market refuses a job past
        it, DrafterAtCapacity) whose declared min price (`minPriceOf`; PriceBelowDrafterMinimum) `price` meets: a
        given drafter that is full or dearer, or no such one, is a clear error before anything is sent."""
        if given:
            address = self._pick("drafter", given, candidates, is_active, what)
            least = self.drafter_min_price(address)
            if price < least:
                raise RequesterError(
                    f"drafter {address} takes jobs from {least} wei per accepted token (its declared min price); "
                    f"--price-token is {price} wei"
                )
            live, capacity = self.drafter_load(address)
            if live >= capacity:
                raise RequesterError(
                    f"drafter {address} is at capacity: {live} of its {capacity} job(s) Open or Running "
                    "(submit again once one finishes, or name another --drafter)"
                )
            return address

        def has_room(a: str) -> bool:
            live, capacity = self.drafter_load(a)
            return live < capacity

        # (the requester itself stays a candidate: `_pick` says why it cannot be its own drafter)
        priced = [a for a in candidates if a == self.address or price >= self.drafter_min_price(a)]
        if candidates and not priced:
            cheapest = min(self.drafter_min_price(a) for a in candidates)
            raise RequesterError(
                f"every active drafter for {what} asks more than {price} wei per accepted token ({len(candidates)} "
                f"of them; the cheapest takes {cheapest} wei): raise --price-token"
            )
        free = [a for a in priced if a == self.address or has_room(a)]
        if priced and not free:
            raise RequesterError(
                f"every active drafter for {what} at this price is at capacity ({len(priced)} of them): submit again "
                "once one of their jobs finishes"
            )
        return self._pick("drafter", None, free, is_active, what)

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

    def finalize(self, job_id: int) -> tuple[TxResult, dict[str, Any]]:
        """Settle `job_id`: (the finalize transaction, its payments). Anyone may finalize, and a serving node does
        once the window is over, so a job finalized already (before this call, or by a transaction that won the
        race against ours) is no error: the payments are those of the transaction that did it, and
        `payments["already_finalized"]` is true, with `payments["finalized_by"]` its sender."""
        if self.job_view(job_id)["status"] != JobStatus.Finalized:
            try:
                tx, receipt = self._send("finalize", self.market.functions.finalize(job_id), key=None)
            except TransactionReverted as exc:
                lost_race = exc.error_name == "JobWrongStatus" and exc.error_args.get("status") == JobStatus.Finalized
                if not lost_race:
                    raise
            else:
                return tx, {**self._settlement(receipt), "already_finalized": False, "finalized_by": self.address}
        log = self._finalized_log(job_id)
        receipt = self.w3.eth.get_transaction_receipt(log["transactionHash"])
        tx = TxResult("finalize", Web3.to_hex(receipt["transactionHash"]), receipt["gasUsed"], receipt["blockNumber"])
        return tx, {**self._settlement(receipt), "already_finalized": True, "finalized_by": receipt["from"]}

    def _finalized_log(self, job_id: int, timeout: float = 60.0, poll: float = 0.25):
        """The JobFinalized log of `job_id`, waiting for it a while: a finalize that beat ours may still be pending
        where our estimate already saw it (against the pending block)."""
        deadline = time.monotonic() + timeout
        while True:
            logs = chain_logs.event_logs(
                self.market.events.JobFinalized, self.deployment.start_block, argument_filters={"jobId": job_id}
            )
            if logs:
                return logs[0]
            if time.monotonic() > deadline:
                raise RequesterError(
                    f"job {job_id} is being finalized by another transaction, not mined within {timeout:.0f}s: "
                    f"check later with `verispec status {job_id}`"
                )
            time.sleep(poll)

    def _settlement(self, receipt) -> dict[str, int]:
        """What a finalize transaction paid, from its JobFinalized and AlphaFeePaid logs."""
        (event,) = self.market.events.JobFinalized().process_receipt(receipt, errors=DISCARD)
        a = event["args"]
        fee = sum(
            e["args"]["amount"] for e in self.market.events.AlphaFeePaid().process_receipt(receipt, errors=DISCARD)
        )
        return {"drafter": a["drafterPay"], "verifier": a["verifierPay"], "alpha_fee": fee, "refund": a["refund"]}

    def claim_timeout(self, job_id: int) -> tuple[TxResult, dict]:
        """`claimTimeout`: ends a job whose current deadline passed (see docs/contracts.md, Deadlines)."""
        self.job_view(job_id)
        tx, receipt = self._send("claimTimeout", self.market.functions.claimTimeout(job_id))
        (event,) = self.market.events.JobFinished().process_receipt(receipt, errors=DISCARD)
        a = event["args"]
        return tx, {"reason": FinishReason(a["reason"]).name, "party": a["party"], "slashed": a["slashed"]}


def _registered_vocab(info) -> int:
    """The vocabulary size registered with a model id (docs/protocol.md §4): its checkpoint's, 2..2^32-1."""
    vocab = info.vocab_size
    if vocab is None or not 2 <= vocab < 2**32:
        raise RequesterError(f"{info.path}: its config.json gives no usable vocab_size ({vocab})")
    return int(vocab)
