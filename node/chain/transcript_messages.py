"""The signed messages of transcript mode (docs/protocol.md, "Transcript mode (v2): messages and state").

`Draft`, `Verification` and `Settlement` are EIP-712 typed data under the domain of the market's
TranscriptSettlement (`market.transcriptSettlement()`, `System.transcript`). They are built,
hashed, signed and recovered with eth-account (`encode_typed_data`, `Account.sign_message`,
`Account.recover_message`); nothing here hashes typed data by hand, so the digests are eth-account's, which
the tests pin to the contracts' `_hashTypedDataV4` (contracts/lib/TranscriptSigner.sol). The state chain the
messages carry is protocol math (`node/protocol.py`: `transcript_genesis`, `transcript_leaf`, `next_state`).

What a peer sends is hostile: every constructor validates types and ranges and every `check_*` refuses,
with one `MessageRejected` line, a message that is not the one the receiver expects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from eth_account import Account
from eth_account.messages import SignableMessage, _hash_eip191_message, encode_typed_data
from eth_utils import is_address, to_checksum_address

from node import protocol as P

DOMAIN_NAME = "verispec"
DOMAIN_VERSION = "2"  # TranscriptSigner.DOMAIN_VERSION
UINT256_MAX = 2**256 - 1
# secp256k1's group order: OpenZeppelin's ECDSA.recover takes only s <= n/2 (EIP-2) and v in {27, 28}
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141

DOMAIN_FIELDS = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
]


class MessageRejected(ValueError):
    """A message that cannot be built, or that its receiver must refuse; the text says why, in one line."""


def _uint(name: str, value: Any, upper: int, lower: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MessageRejected(f"{name} must be an integer, got {type(value).__name__}")
    if not lower <= value <= upper:
        raise MessageRejected(f"{name}={value} out of range {lower}..{upper}")
    return value


def _bytes_or_hex(name: str, value: Any) -> bytes:
    if isinstance(value, str):
        try:
            return bytes.fromhex(value[2:] if value.startswith("0x") else value)
        except ValueError:
            raise MessageRejected(f"{name} is not hex") from None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise MessageRejected(f"{name} must be bytes or hex")


def _bytes32(name: str, value: Any) -> bytes:
    raw = _bytes_or_hex(name, value)
    if len(raw) != 32:
        raise MessageRejected(f"{name} must be 32 bytes, got {len(raw)}")
    return raw


def _uints(name: str, values: Any, upper: int, lower: int = 0) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise MessageRejected(f"{name} must be a list of integers")
    if not 1 <= len(values) <= P.MAX_GAMMA:
        raise MessageRejected(f"{name} has {len(values)} entries, not 1..{P.MAX_GAMMA}")
    return tuple(_uint(f"{name}[{i}]", v, upper, lower) for i, v in enumerate(values))


@dataclass(frozen=True)
class Domain:
    """The EIP-712 domain: this chain and the market's TranscriptSettlement (which inherits TranscriptSigner)."""

    chain_id: int
    verifying_contract: str

    def __post_init__(self):
        _uint("chain_id", self.chain_id, UINT256_MAX, lower=1)
        if not isinstance(self.verifying_contract, str) or not is_address(self.verifying_contract):
            raise MessageRejected(f"verifying_contract {self.verifying_contract!r} is not an address")
        object.__setattr__(self, "verifying_contract", to_checksum_address(self.verifying_contract))

    def as_dict(self) -> dict:
        return {
            "name": DOMAIN_NAME,
            "version": DOMAIN_VERSION,
            "chainId": self.chain_id,
            "verifyingContract": self.verifying_contract,
        }


class _Message:
    """A typed-data message: a frozen dataclass whose fields map, in order, onto the EIP-712 type `TYPE`."""

    PRIMARY: ClassVar[str]
    TYPE: ClassVar[list[tuple[str, str, str]]]  # (python field, EIP-712 name, EIP-712 type), in type order

    @classmethod
    def type_string(cls) -> str:
        """The EIP-712 type string, as `TranscriptTypes.*_TYPE`."""
        return f"{cls.PRIMARY}({','.join(f'{t} {n}' for _, n, t in cls.TYPE)})"

    def message(self) -> dict:
        return {n: list(v) if isinstance(v := getattr(self, f), tuple) else v for f, n, _ in self.TYPE}

    def as_tuple(self) -> tuple:
        """The struct as web3 passes it to the harness (fields in order)."""
        return tuple(list(v) if isinstance(v := getattr(self, f), tuple) else v for f, _, _ in self.TYPE)

    @classmethod
    def from_message(cls, data: Any):
        """Parse a peer's message dict (EIP-712 field names; bytes32 as 0x-hex), refusing unknown or missing fields."""
        if not isinstance(data, dict):
            raise MessageRejected(f"a {cls.PRIMARY} must be an object")
        names = [n for _, n, _ in cls.TYPE]
        if set(data) != set(names):
            raise MessageRejected(f"a {cls.PRIMARY} has exactly the fields {', '.join(names)}")
        return cls(**{f: data[n] for f, n, _ in cls.TYPE})


@dataclass(frozen=True)
class Draft(_Message):
    """The drafter's message of one cycle: its commitment and its counter-signature of `prev_state` = S(cycle-1)."""

    job_id: int
    cycle: int
    prev_state: bytes
    draft_root: bytes
    tokens: tuple[int, ...]
    q: tuple[int, ...]
    salt: int

    PRIMARY: ClassVar[str] = "Draft"
    TYPE: ClassVar = [
        ("job_id", "jobId", "uint256"),
        ("cycle", "cycle", "uint32"),
        ("prev_state", "prevState", "bytes32"),
        ("draft_root", "draftRoot", "bytes32"),
        ("tokens", "tokens", "uint32[]"),
        ("q", "q", "uint64[]"),
        ("salt", "salt", "uint64"),
    ]

    def __post_init__(self):
        _uint("jobId", self.job_id, UINT256_MAX)
        _uint("cycle", self.cycle, P.UINT32_MAX)
        object.__setattr__(self, "prev_state", _bytes32("prevState", self.prev_state))
        object.__setattr__(self, "draft_root", _bytes32("draftRoot", self.draft_root))
        object.__setattr__(self, "tokens", _uints("tokens", self.tokens, P.UINT32_MAX))
        object.__setattr__(self, "q", _uints("q", self.q, P.WAD, lower=1))
        if len(self.tokens) != len(self.q):
            raise MessageRejected(f"{len(self.tokens)} tokens but {len(self.q)} q values")
        _uint("salt", self.salt, P.UINT64_MAX)

    @classmethod
    def build(cls, job_id: int, cycle: int, prev_state: bytes, tokens, q, salt: int) -> Draft:
        """A Draft with its draft root computed from (job_id, cycle, tokens, q), docs/protocol.md §4."""
        draft = cls(job_id, cycle, prev_state, bytes(32), tokens, q, salt)
        return cls(job_id, cycle, prev_state, P.draft_root(job_id, cycle, draft.tokens, draft.q), tokens, q, salt)


@dataclass(frozen=True)
class Verification(_Message):
    """The verifier's message of one cycle: the v1 record (draft root, p, accepted, outToken), its reveal, S(cycle)."""

    job_id: int
    cycle: int
    draft_root: bytes
    p: tuple[int, ...]
    reveal: bytes
    accepted: int
    out_token: int
    state: bytes

    PRIMARY: ClassVar[str] = "Verification"
    TYPE: ClassVar = [
        ("job_id", "jobId", "uint256"),
        ("cycle", "cycle", "uint32"),
        ("draft_root", "draftRoot", "bytes32"),
        ("p", "p", "uint64[]"),
        ("reveal", "reveal", "bytes32"),
        ("accepted", "accepted", "uint32"),
        ("out_token", "outToken", "uint32"),
        ("state", "state", "bytes32"),
    ]

    def __post_init__(self):
        _uint("jobId", self.job_id, UINT256_MAX)
        _uint("cycle", self.cycle, P.UINT32_MAX)
        object.__setattr__(self, "draft_root", _bytes32("draftRoot", self.draft_root))
        object.__setattr__(self, "p", _uints("p", self.p, P.WAD))
        object.__setattr__(self, "reveal", _bytes32("reveal", self.reveal))
        _uint("accepted", self.accepted, len(self.p))
        _uint("outToken", self.out_token, P.UINT32_MAX)
        object.__setattr__(self, "state", _bytes32("state", self.state))

    @property
    def record(self) -> tuple[bytes, list[int], int, int]:
        """The v1 cycle record (draftRoot, p, accepted, outToken): what a pull rebuilds and the market stores."""
        return self.draft_root, list(self.p), self.accepted, self.out_token

    @property
    def record_hash(self) -> bytes:
        """The v1 cycle record hash of this cycle (`protocol.cycle_record_hash`): what a pull stores in the market."""
        return P.cycle_record_hash(*self.record)

    @classmethod
    def build(cls, draft: Draft, p, reveal: bytes, accepted: int, out_token: int) -> Verification:
        """The Verification of `draft` with this (p, accepted, outToken): its state chains the cycle onto the Draft's
        prevState (`chained_state`)."""
        state = chained_state(draft, p, accepted, out_token)
        return cls(draft.job_id, draft.cycle, draft.draft_root, p, reveal, accepted, out_token, state)


def chained_state(draft: Draft, p, accepted: int, out_token: int) -> bytes:
    """S(c) = next_state(S(c-1), cycle leaf of c): the Draft's tokens and q with the verifier's p, accepted and
    outToken in the cycle encoding (`protocol.transcript_leaf`), stepped onto the Draft's prevState. ValueError when a
    field does not fit the encoding (accepted above γ, a probability of 2^60 or more)."""
    leaf = P.transcript_leaf(draft.cycle, draft.tokens, draft.q, p, accepted, out_token)
    return P.next_state(draft.prev_state, leaf)


@dataclass(frozen=True)
class Settlement(_Message):
    """The end of a job, signed by both: `cycles` cycles, final state S(cycles-1), `tokens_out` tokens emitted."""

    job_id: int
    cycles: int
    state: bytes
    tokens_out: int

    PRIMARY: ClassVar[str] = "Settlement"
    TYPE: ClassVar = [
        ("job_id", "jobId", "uint256"),
        ("cycles", "cycles", "uint32"),
        ("state", "state", "bytes32"),
        ("tokens_out", "tokensOut", "uint32"),
    ]

    def __post_init__(self):
        _uint("jobId", self.job_id, UINT256_MAX)
        _uint("cycles", self.cycles, P.UINT32_MAX)
        object.__setattr__(self, "state", _bytes32("state", self.state))
        _uint("tokensOut", self.tokens_out, P.UINT32_MAX)


MESSAGE_TYPES = {cls.PRIMARY: cls for cls in (Draft, Verification, Settlement)}


def typed_data(domain: Domain, msg: _Message) -> dict:
    """The full EIP-712 typed-data dict (eth_signTypedData_v4's shape) of `msg` under `domain`."""
    return {
        "types": {
            "EIP712Domain": DOMAIN_FIELDS,
            msg.PRIMARY: [{"name": n, "type": t} for _, n, t in msg.TYPE],
        },
        "primaryType": msg.PRIMARY,
        "domain": domain.as_dict(),
        "message": msg.message(),
    }


def signable(domain: Domain, msg: _Message) -> SignableMessage:
    """eth-account's EIP-712 encoding: header = the domain separator, body = the struct hash."""
    return encode_typed_data(full_message=typed_data(domain, msg))


def digest(domain: Domain, msg: _Message) -> bytes:
    """The 32-byte digest that is signed: what `TranscriptSigner` computes with `_hashTypedDataV4`."""
    return bytes(_hash_eip191_message(signable(domain, msg)))  # the hash eth-account's sign_message signs


def struct_hash(domain: Domain, msg: _Message) -> bytes:
    """EIP-712 hashStruct(msg), as `TranscriptTypes.hash*` (eth-account computes it; the domain only rides along)."""
    return bytes(signable(domain, msg).body)


def sign(domain: Domain, msg: _Message, private_key) -> bytes:
    """The 65-byte r ‖ s ‖ v signature (v in {27, 28}, low s) of `msg` by `private_key`."""
    return bytes(Account.sign_message(signable(domain, msg), private_key).signature)


def canonical_signature(signature: Any) -> bytes:
    """The signature as 65 bytes, refused unless OpenZeppelin's `ECDSA.recover` would take it.

    eth-account also recovers a high-s copy of a signature and one with v in {0, 1}; the contract reverts on both,
    so a node that accepted one could not settle with it (docs/protocol.md, "Checking a received message").
    """
    raw = _bytes_or_hex("signature", signature)
    if len(raw) != 65:
        raise MessageRejected(f"a signature is 65 bytes, got {len(raw)}")
    r, s, v = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:64], "big"), raw[64]
    if v not in (27, 28):
        raise MessageRejected(f"signature v={v}, not 27 or 28")
    if not 0 < r < SECP256K1_N or not 0 < s <= SECP256K1_N // 2:
        raise MessageRejected("signature is not canonical (r or s out of range, or high s)")
    return raw


def recover(domain: Domain, msg: _Message, signature: Any) -> str:
    """The checksummed address that signed `msg` under `domain` (a canonical signature only)."""
    sig = canonical_signature(signature)
    try:
        return Account.recover_message(signable(domain, msg), signature=sig)
    except Exception as exc:  # eth-keys raises BadSignature and friends for a point off the curve
        raise MessageRejected(f"signature does not recover: {exc}") from None


def from_typed_data(data: Any, domain: Domain) -> _Message:
    """Parse a peer's full typed-data dict: refused unless its domain is `domain` and its types are ours exactly."""
    if not isinstance(data, dict) or set(data) != {"types", "primaryType", "domain", "message"}:
        raise MessageRejected("typed data has exactly the keys types, primaryType, domain, message")
    cls = MESSAGE_TYPES.get(data["primaryType"]) if isinstance(data["primaryType"], str) else None
    if cls is None:
        raise MessageRejected(f"unknown message type {data['primaryType']!r}")
    if data["domain"] != domain.as_dict():
        raise MessageRejected(f"signed for domain {data['domain']!r}, not this market's {domain.as_dict()!r}")
    msg = cls.from_message(data["message"])
    if data["types"] != typed_data(domain, msg)["types"]:
        raise MessageRejected(f"the types of a {cls.PRIMARY} are not {cls.type_string()}")
    return msg


def _check_signed(domain: Domain, msg: _Message, signature: Any, signers: dict[str, str]) -> str:
    """The role (a key of `signers`) whose address signed `msg`; refused when none did."""
    signer = recover(domain, msg, signature)
    for role, address in signers.items():
        if signer == to_checksum_address(address):
            return role
    wanted = " or ".join(f"the {role} {to_checksum_address(a)}" for role, a in signers.items())
    raise MessageRejected(f"{msg.PRIMARY} signed by {signer}, not {wanted}")


def _check_position(msg: _Message, job_id: int, field: str, expected: int) -> None:
    if msg.job_id != job_id:
        raise MessageRejected(f"{msg.PRIMARY} is for job {msg.job_id}, not job {job_id}")
    if getattr(msg, field) != expected:
        raise MessageRejected(f"{msg.PRIMARY} is for {field} {getattr(msg, field)}, expected {expected}")


def check_draft(
    domain: Domain,
    msg: Draft,
    signature: Any,
    *,
    drafter: str,
    job_id: int,
    cycle: int,
    gamma: int,
    prev_state: bytes | None = None,
    salt: int | None = None,
) -> None:
    """Refuse a Draft unless it is the drafter's, for this job and cycle, with the job's γ proposals and a
    consistent draft root, on the receiver's state and with the job's salt.

    Cycle 0 fixes the salt: leave `salt` and `prev_state` out, and its prevState must be the genesis of the salt it
    carries. Every later cycle needs the job's salt and the receiver's S(cycle-1).
    """
    _check_position(msg, job_id, "cycle", cycle)
    if cycle == 0:
        salt = msg.salt if salt is None else salt
        prev_state = P.transcript_genesis(job_id, salt) if prev_state is None else prev_state
    elif salt is None or prev_state is None:
        raise ValueError(f"a Draft of cycle {cycle} is checked against the job's salt and S({cycle - 1})")
    if len(msg.tokens) != gamma:
        raise MessageRejected(f"Draft of cycle {msg.cycle} has {len(msg.tokens)} proposals, the job's γ is {gamma}")
    if msg.salt != salt:
        raise MessageRejected(f"Draft of cycle {msg.cycle} carries salt {msg.salt}, the job's is {salt}")
    if msg.prev_state != prev_state:
        raise MessageRejected(f"Draft of cycle {msg.cycle} counter-signs state 0x{msg.prev_state.hex()}, not ours")
    if msg.draft_root != P.draft_root(msg.job_id, msg.cycle, msg.tokens, msg.q):
        raise MessageRejected(f"Draft of cycle {msg.cycle}: draftRoot is not the root of its tokens and q")
    _check_signed(domain, msg, signature, {"drafter": drafter})


def check_verification(domain: Domain, msg: Verification, signature: Any, *, verifier: str, draft: Draft) -> None:
    """Refuse a Verification unless it is the verifier's answer to `draft` (same job, cycle, draft root, one p per
    proposal) and its state is `chained_state` of the cycle. Whether its record follows the accept
    rule is the drafter's next check, not this one."""
    _check_position(msg, draft.job_id, "cycle", draft.cycle)
    if msg.draft_root != draft.draft_root:
        raise MessageRejected(f"Verification of cycle {msg.cycle} answers another draft")
    if len(msg.p) != len(draft.tokens):
        raise MessageRejected(f"Verification of cycle {msg.cycle} has {len(msg.p)} p values for {len(draft.tokens)}")
    if msg.state != chained_state(draft, msg.p, msg.accepted, msg.out_token):
        raise MessageRejected(f"Verification of cycle {msg.cycle}: state does not chain its cycle onto prevState")
    _check_signed(domain, msg, signature, {"verifier": verifier})


def check_settlement(
    domain: Domain,
    msg: Settlement,
    signature: Any,
    *,
    signer: str,
    job_id: int,
    cycles: int,
    state: bytes,
    tokens_out: int,
) -> None:
    """Refuse a Settlement unless `signer` signed it for this job, at our cycle count, state and output length."""
    _check_position(msg, job_id, "cycles", cycles)
    if msg.state != state:
        raise MessageRejected(f"Settlement of job {job_id} is at state 0x{msg.state.hex()}, not ours")
    if msg.tokens_out != tokens_out:
        raise MessageRejected(f"Settlement of job {job_id} counts {msg.tokens_out} tokens out, not {tokens_out}")
    _check_signed(domain, msg, signature, {"signer": signer})
