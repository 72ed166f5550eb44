"""Where a node's signing key comes from: a hex key, a key file, or (local chains only) an anvil dev account."""

from __future__ import annotations

import os
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

# anvil's and hardhat's well-known development mnemonic: its keys hold funds only on local test chains.
ANVIL_MNEMONIC = "test test test test test test test test test test test junk"


class KeySourceError(ValueError):
    """No usable key was given."""


def dev_account(index: int) -> LocalAccount:
    """The `index`-th account anvil funds at start (m/44'/60'/0'/0/index of the dev mnemonic)."""
    if not 0 <= index < 1000:
        raise KeySourceError(f"dev account index {index} out of range 0..999")
    Account.enable_unaudited_hdwallet_features()
    return Account.from_mnemonic(ANVIL_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")


def load_account(key: str | None = None, key_file: Path | None = None, dev_index: int | None = None) -> LocalAccount:
    """Exactly one source: --key HEX, --key-file PATH, $VERISPEC_KEY, or --dev-account N."""
    key = key or (None if key_file or dev_index is not None else os.environ.get("VERISPEC_KEY"))
    given = [s for s in (key, key_file, dev_index) if s is not None]
    if len(given) != 1:
        raise KeySourceError("give exactly one of --key, --key-file, --dev-account (or set VERISPEC_KEY)")
    if key_file is not None:
        try:
            key = Path(key_file).read_text().strip()
        except OSError as exc:
            raise KeySourceError(f"cannot read key file {key_file}: {exc.strerror}") from exc
    if dev_index is not None:
        return dev_account(dev_index)
    try:
        return Account.from_key(key)
    except (ValueError, TypeError) as exc:
        raise KeySourceError("the key is not a 32-byte hex private key") from exc
