"""Decoding a revert: the 4-byte selector of its data names a custom error declared in the contracts' ABIs.

`RevertDecoder` maps the selector to the error's name and decoded arguments (plus Solidity's built-in `Error(string)`
and `Panic(uint256)`); `revert_data` digs the raw bytes out of what web3 raised.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from eth_abi import decode as abi_decode
from eth_utils import to_checksum_address
from eth_utils.abi import function_abi_to_4byte_selector, get_abi_input_names, get_abi_input_types
from web3.exceptions import Web3RPCError

_BUILTIN_ERRORS = [
    {"type": "error", "name": "Error", "inputs": [{"name": "message", "type": "string"}]},
    {"type": "error", "name": "Panic", "inputs": [{"name": "code", "type": "uint256"}]},
]


@dataclass(frozen=True)
class DecodedError:
    name: str | None  # None when no ABI knows the selector
    args: dict[str, Any]
    data: bytes


class RevertDecoder:
    """Maps a revert's 4-byte selector to the custom error (name, args) declared in the given ABIs."""

    def __init__(self, abis: Iterable[list[dict]] = ()):
        self._errors: dict[bytes, dict] = {}
        for entry in _BUILTIN_ERRORS + [e for abi in abis for e in abi if e.get("type") == "error"]:
            self._errors[function_abi_to_4byte_selector(entry)] = entry

    @classmethod
    def from_artifacts(cls, artifacts: dict[str, dict]) -> RevertDecoder:
        return cls(artifact["abi"] for artifact in artifacts.values())

    def decode(self, data: bytes) -> DecodedError:
        entry = self._errors.get(data[:4]) if len(data) >= 4 else None
        if entry is None:
            return DecodedError(None, {}, data)
        try:
            values = abi_decode(get_abi_input_types(entry), data[4:])
        except Exception:  # malformed payload: report the name we know, without args
            return DecodedError(entry["name"], {}, data)
        names = [name or f"arg{i}" for i, name in enumerate(get_abi_input_names(entry))]
        types = get_abi_input_types(entry)
        # eth_abi gives lowercase addresses; web3 gives checksummed ones everywhere else
        values = [to_checksum_address(v) if t == "address" else v for t, v in zip(types, values)]
        return DecodedError(entry["name"], dict(zip(names, values)), data)


def revert_data(exc: BaseException) -> bytes:
    """The raw revert bytes web3 attached to a ContractLogicError (or an RPC error), b"" if none."""
    data: Any = getattr(exc, "data", None)
    if data is None and isinstance(exc, Web3RPCError) and isinstance(exc.rpc_response, dict):
        data = (exc.rpc_response.get("error") or {}).get("data")
    if isinstance(data, dict):
        data = data.get("data") or data.get("result")
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    if isinstance(data, str):
        data = data.removeprefix("Reverted ").strip()
        if data.startswith("0x"):
            try:
                return bytes.fromhex(data[2:])
            except ValueError:
                return b""
    return b""
