"""What a node store is bound to (node/store.py, "A store is bound to one chain"): plain values, no web3."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class StoreBinding:
    """The chain and deployment a store belongs to. Two chains with one chain id, one genesis block (a dev chain
    started twice in the same second, or with a fixed genesis timestamp) and the same contract addresses are
    indistinguishable by it."""

    chain_id: int
    genesis_hash: str  # 0x-hex, lower case
    addresses: tuple[tuple[str, str], ...]  # (contract name, address in lower case), sorted by name

    @classmethod
    def of(cls, chain_id: int, genesis_hash: str, addresses: Mapping[str, str]) -> StoreBinding:
        return cls(
            int(chain_id),
            str(genesis_hash).lower(),
            tuple(sorted((str(name), str(address).lower()) for name, address in addresses.items())),
        )

    @property
    def tag(self) -> str:
        """`<chain id>-<8 hex digits of the whole binding>`: what names a store moved aside."""
        digest = hashlib.sha256(json.dumps([self.chain_id, self.genesis_hash, self.addresses]).encode()).hexdigest()
        return f"{self.chain_id}-{digest[:8]}"

    def describe(self) -> str:
        market = dict(self.addresses).get("InferenceMarket", "?")
        return f"chain {self.chain_id} (genesis {self.genesis_hash[:10]}, market {market})"
