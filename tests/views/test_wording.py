"""Words and numbers an architect reads without the source: every example's plan text,
`gclc explain` and HTML report (its tables, plots and embedded diagrams, as the browser
shows their text) are scanned for what `dsl/numbers.py` exists to prevent: exponents
(`1.031e+05`), over-precise decimals (`0.4633`), a count with `.0` (`768.0 GPUs`), Python
words (`sp True`), a singular with a plural (`1 switches`) and long numbers without
thousands separators (`100008`). The formatter itself is tested on the cases the issue
names."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from gclc.compiler.driver import check_file
from gclc.compiler.lower import lower, pick_cluster
from gclc.compiler.metrics import explain
from gclc.compiler.cost.tco import cost_metrics
from gclc.model.chip_metrics import chip_metrics
from gclc.dsl.numbers import big, count, duration, number, percent, quantity, span
from gclc.solver.jobs import plan_design
from gclc.views.explain import explain_text
from gclc.views.plan_text import outcome_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.gcl"))
PLURALS = ("switches|GPUs|nodes|links|racks|replicas|stages|layers|tiers|groups|configurations|jobs|partitions|"
           "units|ports|cables|micro-batches|days|hours|bytes|rails|spines|leaves|chips|CPUs|NICs|DPUs|accelerators")
BAD = {
    "an exponent": re.compile(r"\b\d+(?:\.\d+)?e[+-]?\d+\b"),
    "a number ending in .0": re.compile(r"(?<![\d.])\d[\d,]*\.0(?![\d.])"),
    "more than three decimals": re.compile(r"(?<![\d.])\d+\.\d{4,}(?![\d.])"),
    "a Python word": re.compile(r"\b(?:True|False|None)\b"),
    "one with a plural": re.compile(rf"(?<![\d.,])(?<!x )\b1 (?:more |other )?(?:pipeline )?(?:{PLURALS})\b"),
    "no thousands separators": re.compile(r"(?<![\w.,/#:=-])\d{5,}(?![\w.,])"),
}


class _Text(HTMLParser):
    """The text a browser shows: every text node outside <style> (inline SVG text included)."""

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self._style = False

    def handle_starttag(self, tag, attrs):
        self._style = tag in ("style", "script")

    def handle_endtag(self, tag):
        self._style = False

    def handle_data(self, data):
        if not self._style and data.strip():
            self.parts.append(data.strip())


def visible_text(page: str) -> str:
    parser = _Text()
    parser.feed(page)
    return "\n".join(parser.parts)


def problems(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        for what, pattern in BAD.items():
            match = pattern.search(line)
            if match:
                found.append(f"{what}: {match[0]!r} in {line.strip()[:160]!r}")
    return found


def _explain(design) -> str:
    """As `gclc explain` prints it: the cluster, the chip's derivations, the bill and the TCO."""
    graph = lower(design)
    metrics = explain(graph) + chip_metrics(graph) + cost_metrics(pick_cluster(design, None), graph)
    return explain_text(graph.name, metrics)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_output_of_every_example_reads_without_decoding(name, example_report):
    design = check_file(str(ROOT / "examples" / name)).design
    outputs = {
        "plan": outcome_text(plan_design(design, None, None)),
        "explain": _explain(design),
        "report": visible_text(example_report(name)),   # report_html(design, source=examples/NAME), made once a run
    }
    found = [f"{where}: {p}" for where, text in outputs.items() for p in problems(text)]
    assert found == [], "\n".join(found)


def test_the_scan_catches_what_the_issue_found():
    for line in ("1.031e+05 - 1.298e+05", "0.4633 - 0.583", "sp True", "GPUs running 768.0", "1 switches",
                 "(all 100008 at the top tier)", "⋮ 1 more pipeline stages, each", "tp=1 = 1 GPUs, batch 8"):
        assert problems(line), line
    assert problems("88,565 tokens/s, 35.5 s, 1 switch, 16 switches, 2,048 GPUs, H100_SXM, dgx-001, v0.2.2") == []


def test_one_formatter_for_every_number():
    assert number(88565.3) == "88,565" and number(35.519) == "35.5" and number(0.4633) == "0.463"
    assert number(768.0) == "768" and number(1e-7) == "0.0000001" and number(0) == "0"
    assert count(1, "switch", "switches") == "1 switch" and count(16.0, "switch", "switches") == "16 switches"
    assert quantity(966_100, "W") == "966 kW" and quantity(44.07e9, "B") == "44.1 GB" and quantity(12, "B") == "12 bytes"
    assert quantity(3.35e12, "B/s") == "3.35 TB/s" and quantity(0.5, "J") == "500 mJ" and quantity(2.1e6, "USD") == "2.1 MUSD"
    assert duration(35.519) == "35.5 s" and duration(3780) == "63 min" and duration(39.2 * 86400) == "39.2 days"
    assert duration(0.000850) == "850 us" and duration(0.5) == "500 ms"
    assert percent(0.398) == "39.8%" and percent(0.0983) == "9.8%" and percent(1.0) == "100%"
    assert span(78222, 100210, "tokens/s") == "78,222–100,210 tokens/s" and span(0.4633, 0.583, "%") == "46.3–58.3%"
    assert span(9e5, 1.2e6, "W") == "0.9–1.2 MW" and big(3e11) == "300 B" and big(15.6e12) == "15.6 T"
