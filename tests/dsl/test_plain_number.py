"""The one parser of numbers from outside GCL text (issue 30, item 2): CSV cells, CLI options,
host-list ranges accept what a GCL literal accepts, within GCL's limits, in ASCII digits only,
and every CLI numeric option goes through it."""

from __future__ import annotations

import argparse
import unicodedata
from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from gclc.cli.main import _parser, main
from gclc.compiler.hostlist import HostlistError, count, expand
from gclc.dsl.plain_number import PlainNumberError, parse_plain
from gclc.dsl.units import literal_problem
from gclc.testing import load_profile

load_profile()

# Every Unicode digit that is not ASCII (`²`, Arabic-Indic, full-width, ...): `int` and
# `str.isdigit` accept many of them.
NON_ASCII_DIGITS = st.characters(categories=("Nd", "No"), exclude_characters="0123456789")
LITERALS = st.builds(lambda sign, whole, fraction, exponent: f"{sign}{whole}{fraction}{exponent}",
                     st.sampled_from(["", "+", "-"]), st.from_regex(r"[0-9]{1,45}", fullmatch=True),
                     st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,45}", fullmatch=True)),
                     st.one_of(st.just(""), st.from_regex(r"[eE][+-]?[0-9]{1,3}", fullmatch=True)))


@given(LITERALS)
def test_an_ascii_literal_is_accepted_exactly_when_gcl_accepts_it(text):
    problem = literal_problem(text)
    if problem is None:
        assert parse_plain(text) == float(Fraction(text))
    else:
        with pytest.raises(PlainNumberError, match="out of range"):
            parse_plain(text)


@given(st.text(min_size=0, max_size=6), NON_ASCII_DIGITS, st.text(max_size=6))
def test_a_non_ascii_digit_is_never_a_number(before, digit, after):
    assert unicodedata.category(digit) in ("Nd", "No")
    with pytest.raises(PlainNumberError):
        parse_plain(before + digit + after)
    with pytest.raises(PlainNumberError):
        parse_plain(before + digit + after, whole=True, digits_only=True)


@pytest.mark.parametrize("text", ["1_000", "1,000", "inf", "-inf", "nan", "0x10", "", " ", "1e", "²", "٣", "１２",
                                  "1e99999999", "9" * 4000, "1e-320", "1 000"])
def test_what_python_would_take_or_overflow_on_is_refused(text):
    with pytest.raises(PlainNumberError):
        parse_plain(text)


@given(st.integers(0, 10**30))
def test_whole_numbers_are_exact_and_1e3_is_a_thousand(n):
    assert parse_plain(str(n), whole=True) == n
    assert parse_plain("1e3", whole=True) == 1000 and isinstance(parse_plain("1e3", whole=True), int)


@pytest.mark.parametrize("text, options, why", [
    ("2.5", {"whole": True}, "not a whole number"), ("-1", {"low": 0}, "at least 0"),
    ("0", {"low": 0, "low_open": True}, "above 0"), ("11", {"high": 10}, "at most 10")])
def test_bounds_are_checked_on_the_exact_value(text, options, why):
    with pytest.raises(PlainNumberError, match=why):
        parse_plain(text, **options)


# ----------------------------------------------------------------- every CLI numeric option


def _numeric_options():
    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, command in sorted(commands.items()):
        for action in command._actions:
            if action.type is not None and action.type is not str:
                yield name, action


def test_every_numeric_cli_option_goes_through_the_one_parser():
    options = list(_numeric_options())
    assert {(name, a.option_strings[-1]) for name, a in options} >= {
        ("schedule", "--seed"), ("schedule", "--epochs"), ("plan", "--top"), ("sweep", "--workers")}
    assert all(a.type.__name__ == "number" and a.type.__module__ == "gclc.cli.common" for _, a in options), \
        [(n, a.option_strings) for n, a in options if a.type.__name__ != "number"]


@pytest.mark.parametrize("value", ["-1", "²", "1_000", "1e300", "nan", "2.5x"])
def test_a_bad_number_in_any_option_is_a_usage_error_naming_it(capsys, value):
    for name, action in _numeric_options():
        with pytest.raises(SystemExit) as exit_:
            main([name, "in.gcl", action.option_strings[-1], value])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and f"argument {action.option_strings[-1]}" in err and "Traceback" not in err, err


def test_seed_minus_one_is_a_usage_error_and_1e3_is_a_seed(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["schedule", "in.gcl", "--seed", "-1"])
    assert exit_.value.code == 2 and "at least 0" in capsys.readouterr().err
    args = _parser().parse_args(["schedule", "in.gcl", "--seed", "1e3"])
    assert args.seed == 1000 and isinstance(args.seed, int)


# ----------------------------------------------------------------- host-list ranges

RANGES = st.lists(st.tuples(st.integers(0, 500), st.integers(0, 40), st.integers(0, 3)), min_size=1, max_size=4)


@given(RANGES)
def test_a_host_list_is_counted_as_it_expands(ranges):
    body = ",".join(f"{a:0{w}d}-{a + n:0{w}d}" if n else f"{a:0{w}d}" for a, n, w in ranges)
    text = f"gpu[{body}],login"
    assert count(text) == len(expand(text)) == sum(n + 1 for _, n, _ in ranges) + 1


def test_a_huge_range_is_counted_never_expanded():
    assert count("n[0-99999999999]") == 100_000_000_000
    with pytest.raises(HostlistError, match="100,000,000,000 hosts; at most 4"):
        expand("n[0-99999999999]", most=4)


@pytest.mark.parametrize("bad", ["n[²]", "n[1-²]", "n[١-٣]", "n[1e3]", "n[+1-4]", "n[1_0]", "n[-1]"])
def test_a_host_number_is_ascii_digits_only(bad):
    with pytest.raises(HostlistError, match="not a number"):
        count(bad)
