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


@pytest.mark.parametrize(
    ("text", "unit", "line"),
    [
        ("-1", "eth", "'-1' is negative: an amount is 0 or more"),  # register --stake -1 (issue 27: "whole … wei")
        (
            "1.5",
            "wei",
            "'1.5' is not a whole number of wei (a bare number here is in wei: did you mean 1.5gwei or 1.5eth?)",
        ),
        ("abc", "wei", "not an amount: 'abc' (examples: 1000, 2gwei, 0.001eth)"),  # no example the option refuses
        ("abc", "eth", "not an amount: 'abc' (examples: 1.5, 0.1eth, 20gwei)"),
        ("0.5wei", "eth", "'0.5wei' is not a whole number of wei"),
        ("nan", "eth", "not an amount: 'nan' (examples: 1.5, 0.1eth, 20gwei)"),
    ],
)
def test_amount_errors_say_the_unit_a_bare_number_is_read_in(text, unit, line):
    with pytest.raises(RequesterError) as raised:
        parse_amount(text, unit)
    assert str(raised.value) == line
    for example in ("1000", "2gwei", "0.001eth") if unit == "wei" else ("1.5", "0.1eth", "20gwei"):
        parse_amount(example, unit)  # every example the message gives parses


@pytest.mark.parametrize(
    ("item", "line"),
    [
        (
            "challenge_window=-5",
            "--param challenge_window=-5: challenge_window is a whole number of seconds, 0 or more",
        ),
        ("alpha_fee_bps=1.5", "--param alpha_fee_bps=1.5: alpha_fee_bps is a whole number of basis points, 0 or more"),
        ("referee_count=x", "--param referee_count=x: referee_count is a whole number, 0 or more"),
        ("timeout_slash=-1", "--param timeout_slash=-1: '-1' is negative: an amount is 0 or more"),
    ],
)
def test_deployment_parameters_are_read_in_their_own_units(item, line):
    from node.cli_chain import _parse_params
    from node.cli_context import CliError

    with pytest.raises(CliError) as raised:
        _parse_params([item])
    assert str(raised.value) == line
    assert _parse_params(["challenge_window=600", "timeout_slash=0.2eth"]).timeout_slash == 2 * 10**17
