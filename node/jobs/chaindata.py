"""A job's history read from chain data alone: pure readers over logs, calldata and views.

Everything a node, a referee, a watchdog or the requester CLI needs to rebuild a job lives on chain:

* `JobSubmitted`      the request (models, parties, γ, sampling, maxTokens, EOS, prices), the prompt bytes;
* `SaltCommitted`     once, with the cycle-0 draft: the drafter's salt, which enters every accept and residual
                      uniform of the job (docs/protocol.md §3);
* `DraftCommitted`    per cycle: the draft root and the proposals with their q (12 bytes each);
* `CycleVerified`     per cycle: the reveal, the accepted count, outToken and the emitted tokens;
* the calldata of the `submitVerification` transaction that emitted `CycleVerified`: the posted p;
* disputes (DisputeManager views): `dispute_view`, `ballot_view`, and per round (first panel, appeals)
  `round_view` / `dispute_rounds` with each round's panel.

Logs are fetched filtered on the indexed `jobId` topic, from the deployment's start block, in block
ranges any provider answers (node/chain/logs.py). No store, no model, no engine: this module imports
only web3, `node.protocol` and that log reader.

The first argument of every reader is where the market lives: a `System` (node.chain.deploy), the
market `Contract` itself, or, for older callers, `w3` followed by the market contract.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_utils import function_abi_to_4byte_selector, to_checksum_address, to_hex
from web3 import Web3

from node import protocol
from node.chain import logs as chain_logs
from node.chain.calldata import decode_call


class ChainDataError(LookupError):
    """The chain does not hold what was asked for (no such job, cycle not committed/verified, ...)."""


# ---------------------------------------------------------------- packed event bytes


def unpack_draft(data: bytes) -> tuple[list[int], list[int]]:
    """DraftCommitted.draft: 12 bytes per proposal, token (uint32) ‖ q (uint64), big-endian."""
    data = bytes(data)
    if len(data) % 12:
        raise ValueError(f"a packed draft is 12 bytes per proposal, got {len(data)} bytes")
    items = [data[i : i + 12] for i in range(0, len(data), 12)]
    return [int.from_bytes(x[:4], "big") for x in items], [int.from_bytes(x[4:], "big") for x in items]


def unpack_output(data: bytes) -> list[int]:
    """CycleVerified.output: 4 big-endian bytes per token."""
    data = bytes(data)
    if len(data) % 4:
        raise ValueError(f"a packed output is 4 bytes per token, got {len(data)} bytes")
    return [int.from_bytes(data[i : i + 4], "big") for i in range(0, len(data), 4)]


# ---------------------------------------------------------------- what the readers return


@dataclass(frozen=True)
class ChainJob:
    """A job as submitted, read from its `JobSubmitted` event."""

    job_id: int
    requester: str
    request: dict[str, Any]  # JobRequest by field name: draftModel, targetModel, drafter, verifier, gamma, ...
    prompt: bytes  # UTF-8 text (docs/node.md)
    escrow: int
    block_number: int
    tx_hash: str

    @property
    def gamma(self) -> int:
        return int(self.request["gamma"])

    @property
    def max_tokens(self) -> int:
        return int(self.request["maxTokens"])

    @property
    def draft_model(self) -> bytes:
        return bytes(self.request["draftModel"])

    @property
    def target_model(self) -> bytes:
        return bytes(self.request["targetModel"])

    @property
    def drafter(self) -> str:
        return to_checksum_address(self.request["drafter"])

    @property
    def verifier(self) -> str:
        return to_checksum_address(self.request["verifier"])


@dataclass(frozen=True)
class ChainCycle:
    """One cycle of a job as the chain holds it: the committed draft and, once verified, its outcome and the posted p
    (the preimage of the contracts' `CycleRecord` hash: `record_preimage`)."""

    job_id: int
    cycle: int
    draft_root: bytes
    tokens: tuple[int, ...]  # x_0 .. x_{K-1}
    q: tuple[int, ...]  # q_i(x_i), WAD
    commit_tx: str
    reveal: bytes | None = None  # None until verified
    accepted: int | None = None
    out_token: int | None = None
    output: tuple[int, ...] | None = None  # the tokens the cycle emitted (after EOS / maxTokens cuts)
    p: tuple[int, ...] | None = None  # p_i(x_i) as posted, from the submitVerification calldata
    verify_tx: str | None = None
    salt: int = 0  # the job's drafter salt (SaltCommitted; every cycle of a job carries the same one)

    @property
    def verified(self) -> bool:
        return self.accepted is not None

    @property
    def gamma(self) -> int:
        return len(self.tokens)

    @property
    def leaves(self) -> list[bytes]:
        return [protocol.leaf(self.job_id, self.cycle, i, t, q) for i, (t, q) in enumerate(zip(self.tokens, self.q))]

    def record_preimage(self) -> tuple[bytes, list[int], int, int]:
        """(draftRoot, p, accepted, outToken): what `openDispute` proves against `cycleRecordHash`."""
        if not self.verified or self.p is None:
            raise ChainDataError(f"cycle {self.cycle} of job {self.job_id} is not verified")
        return self.draft_root, list(self.p), self.accepted, self.out_token

    def leaf_proof(self, index: int) -> tuple[int, int, list[bytes]]:
        """(token, q, proof) of proposal `index` against the draft root; (0, 0, []) for index == K (outToken)."""
        if index == self.gamma:
            return 0, 0, []
        if not 0 <= index < self.gamma:
            raise ChainDataError(f"index {index} out of range 0..{self.gamma} for a cycle of {self.gamma} proposals")
        return self.tokens[index], self.q[index], protocol.proof(self.leaves, index)


# ---------------------------------------------------------------- readers


def _market_of(source: Any, rest: tuple) -> tuple[Any, tuple]:
    """(market contract, remaining positional args) from a System, a market Contract or (w3, market)."""
    if isinstance(source, Web3):
        if not rest:
            raise TypeError("after w3, pass the market contract")
        return rest[0], rest[1:]
    market = getattr(source, "market", None)
    if market is not None and hasattr(market, "events"):
        return market, rest
    if hasattr(source, "events") and hasattr(source, "w3"):
        return source, rest
    raise TypeError(f"expected a System, the market contract, or (w3, market); got {type(source).__name__}")


def _args(source: Any, args: tuple, names: Sequence[str]) -> tuple:
    market, rest = _market_of(source, args)
    if len(rest) != len(names):
        raise TypeError(f"expected arguments {', '.join(names)}; got {len(rest)} positional arguments")
    return (market, *rest)


def _logs(event, job_id: int, from_block: int | None) -> list:
    return chain_logs.event_logs(event, from_block or 0, argument_filters={"jobId": int(job_id)})


def _struct(value: Any, components: Sequence[dict]) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return {key: value[key] for key in value}
    return {c["name"]: v for c, v in zip(components, value)}


def _chain_job(market, args: Mapping[str, Any], block_number: int, tx_hash: str) -> ChainJob:
    """A ChainJob from the decoded arguments of a `JobSubmitted` log."""
    abi = next(e for e in market.abi if e.get("type") == "event" and e["name"] == "JobSubmitted")
    components = next(i for i in abi["inputs"] if i["name"] == "request")["components"]
    return ChainJob(
        job_id=int(args["jobId"]),
        requester=to_checksum_address(args["requester"]),
        request=_struct(args["request"], components),
        prompt=bytes(args["prompt"]),
        escrow=int(args["escrow"]),
        block_number=block_number,
        tx_hash=tx_hash,
    )


def job_request(source, *args, from_block: int | None = None) -> ChainJob:
    """The `JobSubmitted` record of a job: request, prompt bytes, requester. `job_request(system, job_id)`."""
    market, job_id = _args(source, args, ["job_id"])
    logs = _logs(market.events.JobSubmitted, job_id, from_block)
    if not logs:
        raise ChainDataError(f"no JobSubmitted event for job {job_id} (from block {from_block or 0})")
    log = logs[0]
    return _chain_job(market, log["args"], log["blockNumber"], to_hex(log["transactionHash"]))


def job_from_event(event, market) -> ChainJob:
    """The ChainJob of a `JobSubmitted` event the node's poller delivered (a `ChainEvent`: args, block_number,
    tx_hash), without a log query."""
    return _chain_job(market, event.args, event.block_number, event.tx_hash)


def verification_p(source, *args) -> tuple[int, ...]:
    """The p array posted by the `submitVerification` transaction `tx_hash` for (job_id, cycle).

    `verification_p(system, tx_hash, job_id, cycle)`. Raises ChainDataError when the transaction is not a
    direct call of the market (e.g. it came through a contract wallet: then p is only in its trace).
    """
    market, tx_hash, job_id, cycle = _args(source, args, ["tx_hash", "job_id", "cycle"])
    tx = market.w3.eth.get_transaction(tx_hash)
    if tx["to"] is None or to_checksum_address(tx["to"]) != to_checksum_address(market.address):
        raise ChainDataError(
            f"verification {to_hex(tx_hash)} of job {job_id} cycle {cycle} was not sent to the "
            "market directly; its p is not in the transaction's calldata"
        )
    try:
        fn_name, params = decode_call(market, tx["input"])  # as the market read it (a dirty padding byte is no error)
    except ValueError as exc:
        raise ChainDataError(f"cannot decode the calldata of {to_hex(tx_hash)}: {exc}") from None
    if fn_name != "submitVerification" or params["jobId"] != job_id or params["cycle"] != cycle:
        raise ChainDataError(f"{to_hex(tx_hash)} is not the submitVerification of job {job_id} cycle {cycle}")
    return tuple(int(v) for v in params["p"])


def cycles(source, *args, from_block: int | None = None, with_p: bool = True) -> list[ChainCycle]:
    """Every committed cycle of a job in cycle order, with its verification once there is one.

    `cycles(system, job_id)`. `with_p=False` skips the per-cycle transaction lookups for p.
    """
    market, job_id = _args(source, args, ["job_id"])
    salt = job_salt(market, job_id, from_block=from_block)
    drafts = {}
    for log in _logs(market.events.DraftCommitted, job_id, from_block):
        a = log["args"]
        tokens, q = unpack_draft(a["draft"])
        drafts[int(a["cycle"])] = ChainCycle(
            job_id=int(job_id),
            cycle=int(a["cycle"]),
            draft_root=bytes(a["draftRoot"]),
            tokens=tuple(tokens),
            q=tuple(q),
            commit_tx=to_hex(log["transactionHash"]),
            salt=salt,
        )
    for log in _logs(market.events.CycleVerified, job_id, from_block):
        a = log["args"]
        c = int(a["cycle"])
        if c not in drafts:
            raise ChainDataError(
                f"job {job_id}: cycle {c} was verified but its DraftCommitted is missing "
                f"(from block {from_block or 0} too late?)"
            )
        tx_hash = to_hex(log["transactionHash"])
        p = verification_p(market, tx_hash, int(job_id), c) if with_p else None
        drafts[c] = replace(
            drafts[c],
            reveal=bytes(a["reveal"]),
            accepted=int(a["accepted"]),
            out_token=int(a["outToken"]),
            output=tuple(unpack_output(a["output"])),
            p=p,
            verify_tx=tx_hash,
        )
    ordered = [drafts[c] for c in sorted(drafts)]
    if [c.cycle for c in ordered] != list(range(len(ordered))):
        raise ChainDataError(f"job {job_id}: cycles {[c.cycle for c in ordered]} are not contiguous from 0")
    return ordered


def job_salt(source, *args, from_block: int | None = None) -> int:
    """The drafter's salt of a job (its `SaltCommitted` event; 0 before the cycle-0 draft). `job_salt(system, job_id)`.

    The event carries a uint64, so the value is always in range; the view `getJob(...).salt` holds the same."""
    market, job_id = _args(source, args, ["job_id"])
    logs = _logs(market.events.SaltCommitted, job_id, from_block)
    return int(logs[0]["args"]["salt"]) if logs else 0


def cycle(source, *args, from_block: int | None = None) -> ChainCycle:
    """One cycle of a job: `cycle(system, job_id, cycle)`."""
    market, job_id, c = _args(source, args, ["job_id", "cycle"])
    found = [x for x in cycles(market, job_id, from_block=from_block, with_p=False) if x.cycle == c]
    if not found:
        raise ChainDataError(f"job {job_id} has no committed cycle {c}")
    data = found[0]
    if data.verified:
        data = replace(data, p=verification_p(market, data.verify_tx, int(job_id), int(c)))
    return data


def with_p(source, *args) -> ChainCycle:
    """`cycle_data` with its posted p filled in from the verification's calldata: `with_p(system, cycle_data)`."""
    market, data = _args(source, args, ["cycle_data"])
    if not data.verified or data.p is not None:
        return data
    return replace(data, p=verification_p(market, data.verify_tx, data.job_id, data.cycle))


def output_tokens(source, *args, from_block: int | None = None) -> list[int]:
    """The job's output so far: every verified cycle's emitted tokens, in order. `output_tokens(system, job_id)`."""
    market, job_id = _args(source, args, ["job_id"])
    out: list[int] = []
    for log in _logs(market.events.CycleVerified, job_id, from_block):
        out.extend(unpack_output(log["args"]["output"]))
    return out


def record_preimage(source, *args, from_block: int | None = None) -> tuple[bytes, list[int], int, int]:
    """(draftRoot, p, accepted, outToken) of a verified cycle. `record_preimage(system, job_id, cycle)`."""
    market, job_id, c = _args(source, args, ["job_id", "cycle"])
    return cycle(market, job_id, c, from_block=from_block).record_preimage()


def leaf_proof(source, *args, from_block: int | None = None) -> tuple[int, int, list[bytes]]:
    """(token, q, proof) of proposal `index`; (0, 0, []) for index == K. `leaf_proof(system, job_id, cycle, index)`."""
    market, job_id, c, index = _args(source, args, ["job_id", "cycle", "index"])
    found = [x for x in cycles(market, job_id, from_block=from_block, with_p=False) if x.cycle == c]
    if not found:
        raise ChainDataError(f"job {job_id} has no committed cycle {c}")
    return found[0].leaf_proof(int(index))


# ---------------------------------------------------------------- views as dicts


_PRIMITIVE = re.compile(
    r"^(address|bool|bytes([1-9]|[12][0-9]|3[0-2])|u?int(8|16|24|32|40|48|56|64|72|80|88|96|104|"
    r"112|120|128|136|144|152|160|168|176|184|192|200|208|216|224|232|240|248|256)?)$"
)
_VIEW_CODECS: dict[tuple[str, str, int], tuple[bytes, list[str], list[dict]] | None] = {}


def _view_codec(contract, function: str, abi: dict):
    """(selector, input types, output components) of a view returning one struct of primitive fields, else
    None. Cached per contract address and function."""
    key = (contract.address, function, id(contract.abi))
    if key not in _VIEW_CODECS:
        codec = None
        outputs = abi.get("outputs") or []
        inputs = [i["type"] for i in abi.get("inputs", [])]
        if (
            len(outputs) == 1
            and outputs[0]["type"] == "tuple"
            and all(_PRIMITIVE.match(c["type"]) for c in outputs[0]["components"])
            and all(_PRIMITIVE.match(t) for t in inputs)
        ):
            codec = (function_abi_to_4byte_selector(abi), inputs, outputs[0]["components"])
        _VIEW_CODECS[key] = codec
    return _VIEW_CODECS[key]


def _view(contract, function: str, *call_args) -> dict[str, Any]:
    abi = next(e for e in contract.abi if e.get("type") == "function" and e["name"] == function)
    codec = _view_codec(contract, function, abi)
    if codec is None:
        return _struct(getattr(contract.functions, function)(*call_args).call(), abi["outputs"][0]["components"])
    # A struct of primitive fields: encode and decode it with eth_abi directly (web3's generic output
    # normalization costs more than the round trip); addresses checksummed, as web3 returns them.
    selector, inputs, components = codec
    data = selector + abi_encode(inputs, list(call_args))
    raw = contract.w3.eth.call({"to": contract.address, "data": data})
    (values,) = abi_decode([f"({','.join(c['type'] for c in components)})"], bytes(raw))
    return {c["name"]: to_checksum_address(v) if c["type"] == "address" else v for c, v in zip(components, values)}


def job_view(market, job_id: int) -> dict[str, Any]:
    """`market.getJob(job_id)` keyed by the JobView field names (status, phase, cycle, deadline, ...)."""
    return _view(market, "getJob", int(job_id))


def dispute_view(disputes, dispute_id: int) -> dict[str, Any]:
    """`disputes.getDispute(dispute_id)` keyed by field name (jobId, cycle, index, kind, status, deadlines, ...)."""
    return _view(disputes, "getDispute", int(dispute_id))


def ballot_view(disputes, dispute_id: int, referee: str) -> dict[str, Any]:
    """`disputes.ballotOf(dispute_id, referee)`: commitment, drawn, verdict, round (the panel it sits on)."""
    return _view(disputes, "ballotOf", int(dispute_id), to_checksum_address(referee))


def round_view(disputes, dispute_id: int, round_: int) -> dict[str, Any]:
    """`disputes.roundOf(dispute_id, round_)`: result, votes, and for an appeal round its appellant and bond."""
    return _view(disputes, "roundOf", int(dispute_id), int(round_))


def dispute_rounds(disputes, dispute_id: int) -> list[dict[str, Any]]:
    """Every round of a dispute so far (0 = the first panel), each with its panel (`panelOf`) under "panel"."""
    d = dispute_view(disputes, dispute_id)
    rounds = []
    for k in range(int(d["round"]) + 1):
        view = round_view(disputes, dispute_id, k)
        view["panel"] = [to_checksum_address(a) for a in disputes.functions.panelOf(int(dispute_id), k).call()]
        rounds.append(view)
    return rounds
