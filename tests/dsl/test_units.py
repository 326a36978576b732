"""Laws of `Quantity` and the unit table, as properties."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import assume, given, strategies as st

from gclc.dsl import units as u
from gclc.dsl.units import UNITS, DimensionError, Quantity, UnitError, format_quantity, parse_unit

ALL_UNITS = sorted(UNITS)
DIMS = sorted({dim for _, dim in UNITS.values()})

fractions = st.fractions(min_value=-(10**12), max_value=10**12, max_denominator=10**6)
unit_names = st.sampled_from(ALL_UNITS)
rate_units = st.sampled_from([name for name, (_, dim) in UNITS.items() if dim == u.BYTES]).map(lambda n: n + "/s")
dims = st.sampled_from(DIMS)
quantities = st.builds(Quantity, fractions, dims)


def same_dim_pair():
    return dims.flatmap(lambda d: st.tuples(st.builds(Quantity, fractions, st.just(d)),
                                            st.builds(Quantity, fractions, st.just(d))))


# ----------------------------------------------------------------- conversions


@given(fractions, unit_names | rate_units)
def test_conversion_round_trip_is_exact(x, unit):
    assert Quantity.of(x, unit).to(unit) == x


@given(st.integers(-(10**9), 10**9), unit_names)
def test_of_accepts_text_ints_and_fractions(n, unit):
    assert Quantity.of(str(n), unit) == Quantity.of(n, unit) == Quantity.of(Fraction(n), unit)


@given(fractions, unit_names, unit_names)
def test_conversion_between_units_of_one_dimension(x, a, b):
    qa = Quantity.of(x, a)
    if UNITS[a][1] == UNITS[b][1]:
        assert Quantity.of(qa.to(b), b) == qa
    else:
        with pytest.raises(ValueError):
            qa.to(b)


def test_underscores_in_numbers():
    assert Quantity.of("1_000", "GB") == Quantity.of(1000, "GB")


# ----------------------------------------------------------------- arithmetic laws


@given(same_dim_pair())
def test_addition_commutes(pair):
    a, b = pair
    assert a + b == b + a


@given(dims.flatmap(lambda d: st.tuples(*[st.builds(Quantity, fractions, st.just(d))] * 3)))
def test_addition_associates(triple):
    a, b, c = triple
    assert (a + b) + c == a + (b + c)


@given(quantities, quantities)
def test_multiplication_commutes(a, b):
    assert a * b == b * a


@given(quantities, quantities, quantities)
def test_multiplication_associates(a, b, c):
    assert (a * b) * c == a * (b * c)


@given(same_dim_pair(), quantities)
def test_multiplication_distributes_over_addition(pair, c):
    a, b = pair
    assert (a + b) * c == a * c + b * c


@given(quantities, quantities)
def test_addition_needs_equal_dimensions(a, b):
    if a.dim == b.dim:
        assert (a + b).dim == a.dim and (a - b).dim == a.dim
    else:
        with pytest.raises(DimensionError):
            a + b
        with pytest.raises(DimensionError):
            a - b
        with pytest.raises(DimensionError):
            a < b


@given(quantities, quantities)
def test_division_inverts_multiplication(a, b):
    assume(b.value != 0)
    assert (a * b) / b == a
    assert (a / b).dim == tuple(x - y for x, y in zip(a.dim, b.dim))


@given(quantities)
def test_division_by_zero_raises(a):
    with pytest.raises(ZeroDivisionError):
        a / Quantity(Fraction(0), a.dim)


@given(quantities)
def test_negation_and_subtraction(a):
    assert a - a == Quantity(Fraction(0), a.dim)
    assert -(-a) == a
    assert a + (-a) == a - a


@given(same_dim_pair())
def test_order_is_total_within_a_dimension(pair):
    a, b = pair
    assert (a < b) + (b < a) + (a.value == b.value) == 1
    assert (a <= b) == (a < b or a.value == b.value)


# ----------------------------------------------------------------- the unit table


def test_bits_and_bytes():
    assert Quantity.of(8, "Gb") == Quantity.of(1, "GB")
    assert Quantity.of(8, "bits") == Quantity.of(1, "byte")
    assert Quantity.of(400, "Gb/s") == Quantity.of(50, "GB/s")
    assert Quantity.of(800, "Gb/s").to("GB/s") == 100


@given(st.sampled_from(["k", "M", "G", "T", "P", "E"]), fractions)
def test_bits_are_an_eighth_of_bytes_for_every_prefix(prefix, x):
    assert Quantity.of(x * 8, prefix + "b") == Quantity.of(x, prefix + "B")


def test_binary_and_decimal_prefixes():
    assert Quantity.of(1, "GiB") == Quantity.of(2**30, "bytes")
    assert Quantity.of(1, "GB") == Quantity.of(10**9, "bytes")
    assert Quantity.of(1, "GiB").to("GB") == Fraction(2**30, 10**9)
    assert Quantity.of(1, "TiB").to("GiB") == 1024
    assert Quantity.of(1, "GB") < Quantity.of(1, "GiB")


def test_percentages():
    assert Quantity.of(90, "%") == Quantity(Fraction(9, 10))
    assert Quantity.of(100, "%") == Quantity.of(1)
    assert Quantity.of(50, "%") * Quantity.of(80, "GB") == Quantity.of(40, "GB")
    assert Quantity.of(12.5, "%").dim == u.NONE


def test_counts_are_plain_numbers():
    assert Quantity.of(405, "B") == Quantity.of(405 * 10**9)  # billion, not bytes
    assert Quantity.of("14.8", "T") == Quantity.of(148 * 10**11)
    assert Quantity.of(1, "B").dim == u.NONE and Quantity.of(1, "GB").dim == u.BYTES


def test_dimensions_of_derived_units():
    assert parse_unit("TB/s")[1] == u.BANDWIDTH
    assert parse_unit("TFLOPS")[1] == u.FLOPS and parse_unit("TFLOP")[1] == u.FLOP
    assert parse_unit("kWh")[1] == u.ENERGY and parse_unit("MW")[1] == u.POWER
    assert parse_unit("GHz")[1] == u.RATE
    assert (Quantity.of(1, "kW") * Quantity.of(1, "h")) == Quantity.of(1, "kWh")
    assert (Quantity.of(1, "PFLOPS") * Quantity.of(1, "s")) == Quantity.of(1, "PFLOP")
    assert (Quantity.of(1, "GB") / Quantity.of(1, "s")) == Quantity.of(1, "GB/s")


@pytest.mark.parametrize("unit", ["FLOPs", "TFLOPs", "GBps", "Gbps", "bogus", "GB/bogus", "sec"])
def test_unknown_units_raise(unit):
    with pytest.raises(UnitError):
        parse_unit(unit)


# ----------------------------------------------------------------- display


@given(quantities)
def test_format_never_raises(q):
    assert isinstance(format_quantity(q), str)


def test_format_examples():
    assert format_quantity(Quantity.of("3.35", "TB/s")) == "3.35 TB/s"
    assert format_quantity(Quantity.of(80, "GB")) == "80 GB"
    assert format_quantity(Quantity.of(405, "B")) == "405 B"
    assert format_quantity(Quantity.of(700, "W")) == "700 W"
    assert format_quantity(Quantity(8_030_000_000)) == "8.03 B"  # an int value, as rules compute it


def test_spelled_out_units_are_respelled():
    from gclc.dsl.units import respell

    assert respell("Gbit/s") == "Gb/s" and respell("Gbits/s") == "Gb/s" and respell("Gbitps") == "Gb/s"
    assert respell("GBytes") == "GB" and respell("MByte/s") == "MB/s" and respell("Kibit") == "Kib"
    assert respell("GB/s") is None and respell("bit") is None and respell("Gbps") is None
