"""One number formatter behind every number a user reads: `gclc explain`'s values, the
compiler's diagnostics, the editor's hover and `gclc diff` write a quantity as
`dsl/numbers.py` writes a number (three significant digits unless whole, thousands
separators, never an exponent) in the units GCL writes, and hover and diff render a checked
value with the one renderer `compiler/show.py`."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import example, given, strategies as st

from gclc.cli.main import main
from gclc.compiler.driver import check_file
from gclc.compiler.lower import lower
from gclc.compiler.metrics import explain
from gclc.compiler.show import show_value
from gclc.dsl import units as u
from gclc.dsl.numbers import number
from gclc.dsl.units import Quantity, format_distinct, format_quantity
from gclc.lsp.analysis import analyse
from gclc.lsp.hover import hover_text
from gclc.testing import load_profile

load_profile()
ROOT = Path(__file__).resolve().parents[2]
SHOWN = [d for d in (u.BYTES, u.BANDWIDTH, u.TIME, u.POWER, u.ENERGY, u.FLOPS, u.FLOP, u.MONEY, u.RATE)]
NUMBER = re.compile(r"^-?[\d,]+(?:\.(\d+))?(?: |/|$)")   # `5 W`, `5/s`, `5`


def _digits(text: str) -> int:
    """Significant digits of the number a formatted quantity starts with (a whole number: 0)."""
    found = NUMBER.match(text)
    assert found, text
    whole, fraction = found[0].split(".")[0].strip(" -").replace(",", ""), found[1]
    if fraction is None:
        return 0
    return len((whole.lstrip("0") + fraction).lstrip("0"))


@given(st.fractions(min_value=Fraction(1, 10**6), max_value=10**24, max_denominator=10**6),
       st.sampled_from(SHOWN))
@example(Fraction(1, 10**6), u.RATE)   # the deep profile's counterexample: a rate is written `0.000001/s`
def test_a_quantity_reads_as_the_one_formatter_writes_it(value, dim):
    text = format_quantity(Quantity(value, dim))
    assert "e+" not in text and "e-" not in text and _digits(text) <= 3, text
    shown, unit = text.rsplit(" ", 1) if " " in text else (text.removesuffix("/s"), "/s")
    factor, got_dim = u.parse_unit(unit) if unit != "/s" else (Fraction(1), u.RATE)
    assert got_dim == dim
    # the number is the one formatter's for the value in the unit shown, and reads back within rounding
    assert shown == number(float(value / factor))
    back = float(shown.replace(",", ""))
    assert abs(back - float(value / factor)) <= 0.005 * abs(float(value / factor)) + 1e-12


def test_what_the_old_formatter_got_wrong():
    assert format_quantity(Quantity.of(5_000_000, "PB/s")) == "5,000,000 PB/s"   # separators above the largest prefix
    assert format_quantity(Quantity.of("21.84", "PFLOPS")) == "21.8 PFLOPS"       # three digits, not four
    assert format_quantity(Quantity(123_456)) == "123,456" and format_quantity(Quantity(8_030_000_000)) == "8.03 B"
    assert format_quantity(Quantity.of("494.5", "TFLOPS"), 6) == "494.5 TFLOPS"   # more digits when asked
    # two values a message compares get the digits that tell them apart
    assert format_distinct(Quantity.of("1.005", "GHz"), Quantity.of("1.004", "GHz")) == ("1.005 GHz", "1.004 GHz")
    assert format_distinct(Quantity.of(700, "W"), Quantity.of(700, "W")) == ("700 W", "700 W")


def test_explain_values_and_formulas_use_the_one_formatter():
    design = check_file(str(ROOT / "examples" / "a100_cluster.gcl")).design
    metrics = {m.key: m for m in explain(lower(design))}
    assert metrics["gpus"].text == "1,120"
    assert metrics["peak.bf16"].text == "349 PFLOPS" and metrics["peak.bf16"].formula == "1,120 x 312 TFLOPS"
    assert metrics["hbm.bandwidth"].text == "2.28 PB/s" and metrics["hbm.bandwidth"].formula == "1,120 x 2.04 TB/s"
    assert all(_digits(m.text) <= 3 for m in metrics.values()), [m.text for m in metrics.values()]


def _check(source: str) -> list[str]:
    result = check_file("t.gcl", text=source)
    return [d.summary + " | " + " | ".join(d.notes) for d in result.diagnostics]


def test_diagnostics_write_numbers_with_the_one_formatter():
    order = _check('chip C {\n  peak { bf16 = 989 TFLOPS }\n  hbm { capacity = 80 GB  bandwidth = 3.35 TB/s }\n'
                   '  clock = 1.004 GHz\n  power { tdp = 700 W  min_clock = 1.005 GHz }\n}\n')
    assert any("(1.005 GHz) must be below `clock` (1.004 GHz)" in m for m in order), order
    whole = _check("node N {\n  gpus = 2.5 x H\n}\nchip H {\n  peak { bf16 = 1 PFLOPS }\n"
                   "  hbm { capacity = 80 GB  bandwidth = 3 TB/s }\n  power { tdp = 700 W }\n}\n")
    assert any("whole number; it is 2.5" in m for m in whole), whole
    uneven = check_file(str(ROOT / "tests" / "data" / "gb200_moe.gcl")).diagnostics   # 61 layers on 16 stages
    notes = " ".join(n for d in uneven if d.code == "uneven-pipeline" for n in d.notes)
    assert "the model counts 3.81 per stage" in notes


TWO = """param clock = {clock}
param fast  = {fast}
chip C {{
  peak {{ bf16 = 989 TFLOPS }}
  hbm {{ capacity = 80 GB  bandwidth = 3.35 TB/s }}
  clock = clock
  power {{ tdp = 700 W }}
}}
"""


def test_hover_and_diff_render_a_value_alike(tmp_path, capsys):
    a, b = tmp_path / "a.gcl", tmp_path / "b.gcl"
    a.write_text(TWO.format(clock="1.755 GHz", fast="true"))
    b.write_text(TWO.format(clock="1.756 GHz", fast="false"))
    assert main(["diff", str(a), str(b), "--json"]) == 0
    import json
    changes = {c["key"]: (c["a"], c["b"]) for c in json.loads(capsys.readouterr().out)["changes"]
               if c["section"] == "params"}
    # a change in the fourth digit is seen, and a flag reads as the language writes it
    assert changes == {"clock": ("1.755 GHz", "1.756 GHz"), "fast": ("true", "false")}
    analysis = analyse(str(a), a.read_text())
    hover = hover_text(analysis, a.read_text().index("clock = clock") + len("clock = c"))
    assert "`1.755 GHz`" in hover, hover
    assert show_value(Quantity.of("1.755", "GHz")) == "1.755 GHz" and show_value(True) == "true"


@pytest.mark.parametrize("value, text", [
    (Quantity.of(8, "GB"), "8 GB"), (Quantity(1024), "1,024"), ((Quantity.of(1, "GB"), Quantity.of(2, "GB")), "[1 GB, 2 GB]"),
    (Quantity.of("0.123456789", "s"), "123.457 ms")])
def test_the_one_renderer(value, text):
    assert show_value(value) == text


def test_the_sweep_front_reads_like_the_report():
    from gclc.views.sweep.report import front_table

    row = {"gpus": 64, "tp": 8, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "tokens_per_s": 12345.6, "goodput_share": 0.97,
           "mfu": 0.413, "time_to_train_s": 3.2e6, "facility_power_w": 1.23e6, "capex_usd": 4.5e7, "tco_usd": 9.9e7,
           "cost_per_token_usd": 2.3e-7}
    assert front_table([row], ())[1] == ["64", "8", "1", "8", "1", "1", "12,346", "97%", "41.3%", "37 days", "1.23 MW",
                                         "45 MUSD", "99 MUSD", "0.23 USD per M tokens"]


def test_a_number_passed_to_a_diagnostic_reads_with_separators():
    result = check_file(str(ROOT / "tests" / "data" / "pod.gcl"), {"nodes": "512"})
    assert [d.summary for d in result.diagnostics if d.code == "radix-too-small"] == [
        "`NDR` cannot connect 4,096 ports: 2 tiers of radix 64 reach 2,048"]


# A hand-written float format (`:.1f`, `:,.0f`, `:.0%`, `:.2e`) in a module that writes what a
# user reads bypasses the one formatter. `:g` stays allowed: it echoes a declared value as the
# design wrote it (`PUE 1.25`). Graphviz attributes are not read by a user.
HAND_FORMAT = re.compile(r"\{[^{}:]*:,?\.?\d*[fe%]\}")
NOT_READ = ("penwidth=",)


def test_no_module_formats_a_number_by_hand():
    found = []
    for folder in ("dsl", "compiler", "model", "solver", "views", "cli", "lsp"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "numbers.py" and folder == "dsl":
                continue
            for line_no, line in enumerate(path.read_text().splitlines(), 1):
                if HAND_FORMAT.search(line) and not any(word in line for word in NOT_READ):
                    found.append(f"{path.relative_to(ROOT)}:{line_no}: {line.strip()}")
    assert not found, "format these with dsl/numbers.py:\n" + "\n".join(found)
