"""What the chain client raises on purpose: one base class (`ChainError`), one type per way a call can fail.

Callers tell a chain that is down (`ChainUnavailable`: retry later) from a transaction the node refused
(`TransactionRejected`), one that reverts (`TransactionReverted`, with the decoded custom error), one whose receipt
is late (`ReceiptTimeout`: it stays recorded) or can never land (`TransactionSuperseded`), and a key fought over by
another signer (`IdempotencyError`).
"""

from __future__ import annotations

from typing import Any


class ChainError(RuntimeError):
    """Base of everything the chain client raises on purpose."""


class ChainUnavailable(ChainError):
    """The RPC endpoint did not answer within the retry budget."""

    def __init__(self, url: str, reason: str = ""):
        super().__init__(f"chain RPC at {url} is unavailable" + (f": {reason}" if reason else ""))
        self.url = url
        self.reason = reason


class TransactionRejected(ChainError):
    """The node refused the transaction outright (not a revert): e.g. insufficient funds."""

    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: transaction rejected by the node: {reason}")
        self.key = key
        self.reason = reason


class TransactionReverted(ChainError):
    """The call reverts (at gas estimation) or a mined transaction reverted; carries the decoded error."""

    def __init__(
        self, key: str, error_name: str | None, error_args: dict[str, Any], data: bytes, tx_hash: str | None = None
    ):
        shown = error_name or (f"unknown error 0x{data[:4].hex()}" if data else "no revert data")
        args = ", ".join(f"{name}={value!r}" for name, value in error_args.items())
        where = f" in {tx_hash}" if tx_hash else ""
        super().__init__(f"{key}: reverted{where} with {shown}({args})")
        self.key = key
        self.error_name = error_name
        self.error_args = error_args
        self.data = data
        self.tx_hash = tx_hash


class ReceiptTimeout(ChainError):
    """No receipt within the timeout; the transaction is recorded, so a later send with the key resumes it."""

    def __init__(self, key: str, tx_hash: str, timeout: float):
        super().__init__(
            f"{key}: no receipt for {tx_hash} after {timeout:.1f}s (it stays recorded: send the key again to resume)"
        )
        self.key = key
        self.tx_hash = tx_hash


class TransactionSuperseded(ChainError):
    """The key's transaction can never land (its nonce went to another transaction); submit the key again."""

    def __init__(self, key: str, tx_hash: str):
        super().__init__(f"{key}: {tx_hash} was superseded by another transaction with its nonce")
        self.key = key
        self.tx_hash = tx_hash


class IdempotencyError(ChainError):
    """The key's transaction kept losing its nonce to other transactions: another signer uses this key."""
