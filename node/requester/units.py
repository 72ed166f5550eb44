"""Amounts and times as people type and read them: wei / gwei / ETH, WAD fractions, UTC timestamps.

Amounts are parsed exactly (Decimal), never through a float: '1.5', '0.1eth', '20 gwei', '1e12', '1000wei'.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

from node.protocol import WAD
from node.requester.errors import RequesterError

ETHER = 10**18
GWEI = 10**9


# examples that parse with each default unit (an error for "abc" must not suggest a value the same option refuses)
_EXAMPLES = {"wei": "1000, 2gwei, 0.001eth", "gwei": "1.5, 20gwei, 0.001eth", "eth": "1.5, 0.1eth, 20gwei"}


def parse_amount(text: str | int, default_unit: str = "wei") -> int:
    """'1.5' (in default_unit), '1.5eth', '20 gwei', '1e12', '1000wei' -> wei. Exact (Decimal), never a float.
    Errors name the unit a bare number is read in."""
    if isinstance(text, int):
        if text < 0:
            raise RequesterError(f"{text} is negative: an amount is 0 or more")
        return text
    raw = str(text).strip().lower().replace("_", "")
    units = {"eth": ETHER, "ether": ETHER, "gwei": GWEI, "wei": 1}
    unit = default_unit
    for name in sorted(units, key=len, reverse=True):
        if raw.endswith(name):
            raw, unit = raw[: -len(name)].strip(), name
            break
    try:
        value = Decimal(raw) * units[unit]
    except (InvalidOperation, KeyError):
        raise RequesterError(f"not an amount: {text!r} (examples: {_EXAMPLES.get(default_unit, '1000wei')})") from None
    if not value.is_finite():
        raise RequesterError(f"not an amount: {text!r} (examples: {_EXAMPLES.get(default_unit, '1000wei')})")
    if value < 0:
        raise RequesterError(f"{text!r} is negative: an amount is 0 or more")
    if value != value.to_integral_value():
        bare = unit == default_unit and not str(text).strip().lower().endswith(default_unit)
        hint = f" (a bare number here is in {default_unit}: did you mean {raw}gwei or {raw}eth?)" if bare else ""
        raise RequesterError(f"{text!r} is not a whole number of wei{hint}")
    return int(value)


UINT64_MAX = 2**64 - 1
# The largest WAD fraction a uint64 field holds (sampling temperature, top-p): 18.446744073709551615.
MAX_WAD_FRACTION = Decimal(UINT64_MAX) / WAD


def to_wad(value: float | str, name: str) -> int:
    """`value` as a uint64 WAD fraction (the market's sampling fields), exactly; refuses what the field cannot hold."""
    try:
        fraction = Decimal(str(value))
    except InvalidOperation:
        raise RequesterError(f"{name} must be a number, got {value!r}") from None
    if not fraction.is_finite() or not 0 <= fraction <= MAX_WAD_FRACTION:
        raise RequesterError(f"{name} must be in [0, {MAX_WAD_FRACTION}] (a uint64 WAD), got {value!r}")
    return int(fraction * WAD)


def format_eth(wei: int) -> str:
    if 0 < abs(wei) < 10**10:  # below 1e-8 ETH the decimals would round it away
        return f"{wei} wei"
    text = f"{Decimal(wei) / ETHER:.8f}".rstrip("0").rstrip(".")
    return f"{text} ETH"


def format_time(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
