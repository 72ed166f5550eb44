"""node/requester/units.py: amounts and WAD fractions as people type them, and what the market's fields can hold."""

from __future__ import annotations

from decimal import Decimal

import pytest

from node.requester.errors import RequesterError
from node.requester.units import MAX_WAD_FRACTION, UINT64_MAX, parse_amount, to_wad


def test_to_wad_is_exact_up_to_the_uint64_field():
    assert to_wad(1.0, "--temperature") == 10**18
    assert to_wad("0.7", "--top-p") == 7 * 10**17
    assert to_wad(0, "--temperature") == 0
    assert to_wad(MAX_WAD_FRACTION, "--temperature") == UINT64_MAX
    assert Decimal("18.446744073709551615") == MAX_WAD_FRACTION


@pytest.mark.parametrize("value", [19, "18.446744073709551616", float("inf"), float("nan"), "-inf", -0.5, "-1e-18"])
def test_to_wad_refuses_what_a_uint64_wad_cannot_hold(value):
    with pytest.raises(RequesterError, match=r"--temperature must be in \[0, 18\.446744073709551615\]"):
        to_wad(value, "--temperature")


def test_to_wad_refuses_text_that_is_no_number():
    with pytest.raises(RequesterError, match="must be a number"):
        to_wad("warm", "--temperature")


def test_parse_amount_is_exact():
    assert parse_amount("1.5eth") == 15 * 10**17 and parse_amount("20 gwei") == 20 * 10**9
    with pytest.raises(RequesterError, match="whole number of wei"):
        parse_amount("0.5wei")
