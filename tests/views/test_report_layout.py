"""The report as a reader sees it at 100 % zoom, measured in headless Chromium from the
laid-out page (not from pixels): the headline comes first, holds the figures an architect
asks for in large type and says what limits the design; every plot and diagram is drawn
at a size whose text is legible (no diagram shrunk to fit the column); runner-up rows
show what differs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
# Injected into a copy of the report for the test only (the report itself has no script):
# after layout, the boxes of the headline and of every figure's SVG and its text, in CSS px.
MEASURE = """<script>
window.addEventListener("load", function () {
  function box(el) { var r = el.getBoundingClientRect(); return {top: r.top + window.scrollY, width: r.width, height: r.height}; }
  var out = {headline: null, figures: []}, h = document.getElementById("headline");
  if (h) {
    out.headline = box(h);
    out.headline.figures = Array.prototype.map.call(h.querySelectorAll(".figure"), function (f) { return f.getAttribute("data-figure"); });
    out.headline.value_px = parseFloat(getComputedStyle(h.querySelector(".figure b")).fontSize);
  }
  Array.prototype.forEach.call(document.querySelectorAll("figure"), function (fig) {
    var svg = fig.querySelector("svg"), heights = [];
    Array.prototype.forEach.call(svg ? svg.querySelectorAll("text") : [], function (t) {
      var r = t.getBoundingClientRect(); if (t.textContent.trim() && r.height > 0) heights.push(r.height); });
    heights.sort(function (a, b) { return a - b; });
    out.figures.push({caption: fig.querySelector("figcaption").textContent, box: svg ? box(svg) : null,
                      texts: heights.length, min_text_px: heights.length ? heights[0] : 0});
  });
  var pre = document.createElement("pre"); pre.id = "gclc-measure"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.fixture(scope="module")
def superpod(example_report) -> str:
    return example_report("dgx_h100_superpod.gcl")   # made once per test run (tests/conftest.py)


def test_the_headline_says_the_answer_first(superpod):
    head = superpod[superpod.index("<body>"):superpod.index("<h2>Design</h2>")]
    names = re.findall(r'data-figure="([^"]+)"', head)
    assert names == ["time to train", "throughput", "MFU", "power", "energy to train", "cost to train"]
    assert re.search(r"<b>[\d.]+ (days|years|h)</b>", head) and re.search(r"<b>[\d.,]+ MUSD</b>", head)
    limits = re.search(r"<b>What limits it:</b> ([^<]+)</p>", head)[1]
    assert limits.startswith("Compute takes") and "MFU" in limits and "Memory:" in limits and "Power:" in limits


def test_runner_up_rows_show_what_differs(superpod):
    table = superpod[superpod.index("<h2>Runners-up</h2>"):]
    table = table[:table.index("</table>")]
    assert "<th>ZeRO</th>" in table and "<th>rank order</th>" in table
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]
    assert "the plan" in rows[0] and all(re.search(r"(ranks|ZeRO stage|tp|pp|dp|cp|micro-batch|recomputation|virtual stages|power cap) [\w,. ]+, not ", r)
                                         for r in rows[1:])


def _layout(text: str, tmp_path: Path) -> dict:
    """The report laid out by headless Chromium at 100 % zoom, measured by MEASURE."""
    page = tmp_path / "report.html"
    page.write_text(text.replace("<head>", "<head>\n" + MEASURE, 1))
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--window-size=1280,2400", "--force-device-scale-factor=1",
                           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                           page.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="gclc-measure">([^<]+)</pre>', done.stdout)
    assert found, done.stdout[-2000:]
    return json.loads(found[1].replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_at_100_percent_the_headline_leads_and_every_figure_is_legible(superpod, tmp_path):
    layout = _layout(superpod, tmp_path)
    head = layout["headline"]
    assert head is not None and head["top"] < 400 and head["height"] > 60  # above the fold of a laptop screen
    assert len(head["figures"]) == 6 and head["value_px"] >= 20
    captions = [f["caption"] for f in layout["figures"]]
    assert len(captions) == 8 and any(c.startswith("topology:") for c in captions)   # the step timeline among them
    assert any(c.startswith("placement:") for c in captions) and any(c.startswith("power:") for c in captions)
    for figure in layout["figures"]:
        assert figure["box"]["width"] >= 300 and figure["texts"] >= 5, figure
        assert figure["min_text_px"] >= 10, f"text drawn {figure['min_text_px']:.1f} px high: {figure['caption']}"
    figures_top = min(f["box"]["top"] for f in layout["figures"])
    assert head["top"] < figures_top


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("example, drawn", [("hetero_h100_a100.gcl", "One rank grid per partition"),
                                            ("deepseek_v3_serve.gcl", "The serving pools")])
def test_the_placement_of_a_serve_or_heterogeneous_plan_is_drawn_legibly(example, drawn, tmp_path, example_report):
    layout = _layout(example_report(example), tmp_path)
    placement = [f for f in layout["figures"] if f["caption"].startswith("placement:")]
    assert len(placement) == 1 and drawn in placement[0]["caption"]
    figure = placement[0]
    # drawn at its natural size (wide drawings scroll): its text as high as the other diagrams'
    assert figure["box"]["width"] >= 300 and figure["texts"] >= 10, figure
    assert figure["min_text_px"] >= 10, f"text drawn {figure['min_text_px']:.1f} px high"
    # the roofline: one per partition of the split, one with prefill and decode for serving
    rooflines = [f for f in layout["figures"] if "points:" in f["caption"]]
    assert len(rooflines) == (1 if "serve" in example else 2), [f["caption"] for f in layout["figures"]]
    for figure in rooflines:
        assert figure["box"]["width"] >= 300 and figure["texts"] >= 8 and figure["min_text_px"] >= 10, figure
    head = layout["headline"]    # the answer first, as for a train plan
    assert head is not None and head["top"] < 400 and head["top"] < min(f["box"]["top"] for f in layout["figures"])
    assert {"throughput", "MFU", "power"} <= set(head["figures"]) and head["value_px"] >= 20
    expected = "time to first token (p90)" if "serve" in example else "time to train"   # a chat demand; 15 T tokens
    assert expected in head["figures"]
