"""`gclc report`: one self-contained, deterministic HTML file, with the sections a design
(with or without a plannable job) calls for; it opens in headless Chromium without
console errors and draws something."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gclc.views.report import page as report
from gclc.cli.main import main
from gclc.compiler.driver import check_file

ROOT = Path(__file__).resolve().parents[2]
PLANNED, UNPLANNED, SHARED = "dgx_h100_superpod.gcl", "custom_dsa.gcl", "shared_cluster.gcl"
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--enable-logging=stderr",
                  "--v=0", "--window-size=1280,2400")
# Injected into a copy of the report for the browser test only: the report itself has no script.
HARNESS = """<script>
(function () {
  console.error = function () { console.log("GCLC-ERROR " + Array.prototype.join.call(arguments, " ")); };
  window.addEventListener("error", function (e) {
    var t = e.target;
    console.log("GCLC-ERROR " + (t && t !== window ? "resource " + (t.src || t.href) : e.message));
  }, true);
  window.addEventListener("load", function () { console.log("GCLC-LOADED"); });
})();
</script>"""


@pytest.fixture(scope="module")
def reports(example_report):
    """The reports, made once per test run (tests/conftest.py: other files read the same ones)."""
    return {name: example_report(name) for name in (PLANNED, UNPLANNED, "hetero_h100_a100.gcl", SHARED)}


def _plan_json(cli_once, path: Path) -> dict:
    code, out, _ = cli_once("plan", path, "--json")
    assert code == 0
    return json.loads(out)


def _sections(text: str) -> list[str]:
    return re.findall(r"<h2>([^<]+)</h2>", text)


def test_a_planned_design_gets_every_section(reports):
    text = reports[PLANNED]
    assert _sections(text) == ["llama3_405b_pretrain: the answer", "Design", "Bill of materials and cost", "Plan",
                               "Step time", "Step timeline", "Memory per GPU",
                               "Throughput against power budget", "Runners-up", "Roofline", "Diagrams"]
    assert "llama3_405b_pretrain" in text and "bisection bandwidth" in text
    assert "127 x 270 kUSD" in text and "capex + energy + maintenance" in text  # the bill (270,000 USD a node) and the TCO
    assert "<th>range</th>" in text                         # the plan's 80 % error band
    for caption in ("topology:", "placement:", "power:"):
        assert f"<figcaption>{caption}" in text
    assert text.count("<svg") >= 8
    # one step per pipeline stage (issue 27; tests/views/test_timeline.py checks its arithmetic)
    timeline = text[text.index("<h2>Step timeline</h2>"):]
    timeline = timeline[:timeline.index("</section>")]
    assert "<svg" in timeline and "per pipeline stage (every stage of 7)" in timeline
    assert "pipeline bubble (idle)" in timeline and ">stage 6<" in timeline


def test_serve_and_heterogeneous_jobs_get_their_plan_and_its_placement(reports, cli_once):
    # a serve job and a job split across partitions: their plan as text, and the placement
    # drawing `gclc render --view placement` makes of it (pools; one grid per partition)
    for name, why, drawn in ((UNPLANNED, "(serve)", "pool ·"), ("hetero_h100_a100.gcl", "split:", "h100: ")):
        text = reports[name]
        assert _sections(text)[0].endswith(": the answer")
        assert _sections(text)[1:] == ["Design", "Bill of materials and cost", "Plan", "Roofline", "Diagrams"]
        assert why in text and "<figcaption>topology:" in text and "<figcaption>power:" in text
        placement = text[text.index('id="diagram-placement'):text.index("<figcaption>placement:")]
        assert drawn in placement, name
    hetero = reports["hetero_h100_a100.gcl"]
    head = hetero[hetero.index('id="headline"'):hetero.index("<h2>Design</h2>")]
    assert re.findall(r'data-figure="([^"]+)"', head) == ["time to train", "throughput", "MFU", "power",
                                                          "energy to train"]
    # the headline names the partition the plan itself finds slowest (its JSON's busy times)
    split = _plan_json(cli_once, ROOT / "examples" / "hetero_h100_a100.gcl")
    split = split[split["mode"]]["partitions"]
    slowest = max(split, key=lambda p: p["busy_s"])["partition"]
    assert f"What limits it:</b> Compute on {slowest} (the slowest partition" in head
    serve = reports[UNPLANNED]
    head = serve[serve.index('id="headline"'):serve.index("<h2>Design</h2>")]
    assert re.findall(r'data-figure="([^"]+)"', head) == ["throughput", "engine", "MFU", "power", "energy"]
    assert "vllm_v1" in head and "vLLM 0.8.0 and later" in head     # the engine and its releases
    assert "What limits it:</b> GPUs: " in head     # the plan's binding line (gpus:), in words
    placement = hetero[hetero.index('id="diagram-placement'):hetero.index("<figcaption>placement:")]
    assert "a100: " in placement and "GPUs ·" in placement     # both partitions' frames, the split's title


def test_a_shared_cluster_gets_its_schedule(reports):
    text = reports[SHARED]
    assert _sections(text)[-2:] == ["Schedule", "Diagrams"]
    assert "policy priority" in text and "finetune_8b" in text and "optimum    MILP" in text
    assert "<figcaption>GPUs in use and jobs waiting" in text


def test_the_report_is_self_contained(reports):
    for text in reports.values():
        assert "<script" not in text and "<?xml" not in text and "<!DOCTYPE svg" not in text
        assert not re.search(r'\b(src|href)="(?!#|data:)', text)
        assert not re.search(r"url\((?!#)", text)
        assert "dc:date" not in text.lower()
        ids = re.findall(r'\bid="([^"]+)"', text)
        assert len(ids) == len(set(ids)), "inline SVGs share element ids"


def test_the_report_is_deterministic(reports):
    design = check_file(str(ROOT / "examples" / UNPLANNED)).design
    assert report.report_html(design, source=f"examples/{UNPLANNED}") == reports[UNPLANNED]


def test_the_error_band_hook_adds_a_range_column(reports):
    from gclc.model.job import train_job
    from gclc.solver.train.plan import plan

    chosen = plan(train_job(check_file(str(ROOT / "examples" / PLANNED)).design))

    class Banded:
        error_band = {"step_time_s": (70.0, 90.0)}

        def __getattr__(self, name):
            return getattr(chosen, name)

    assert set(report.plan_error_band(chosen)) >= {"step_time_s", "tokens_per_s", "mfu"}
    low, high = report.plan_error_band(chosen)["step_time_s"]
    assert low < chosen.best.step_time < high
    table = report._metrics_table(Banded())
    assert "<th>range</th>" in table and "70–90 s" in table


def test_the_power_curve_marks_budgets_nothing_runs_within(monkeypatch, tmp_path):
    from gclc.model.job import train_job
    from gclc.solver.train.plan import plan
    from gclc.views.report import plots

    # replicas of 8 GPUs (tp = 8) under 8 kW: a fifth of it runs not even one replica
    shutil.copy(ROOT / "tests" / "data" / "pod.gcl", tmp_path / "pod.gcl")
    text = (ROOT / "tests" / "data" / "train.gcl").read_text().replace(
        "precision = bf16\n}", "precision = bf16\n  parallelism { tp = 8  pp = 1 }\n  subject to { power <= 8 kW }\n}")
    (tmp_path / "bound.gcl").write_text(text)
    chosen = plan(train_job(check_file(str(tmp_path / "bound.gcl"), {"nodes": "4"}).design))
    drawn = {}
    real = plots.throughput_curve
    monkeypatch.setattr(plots, "throughput_curve", lambda *a: drawn.setdefault("args", a) and real(*a))
    section = report._power_curve_section(chosen)
    points, chosen_point, _, infeasible = drawn["args"]
    assert "<svg" in section and "infeasible" in section
    assert all(tokens > 0 for _, tokens in points)      # never a 0 tokens/s point drawn as a measurement
    assert infeasible and max(infeasible) < min(budget for budget, _ in points)
    assert chosen_point == (chosen.power.total, chosen.best.tokens_per_s)


def test_report_command(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", str(ROOT / "examples" / UNPLANNED), "-o", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert main(["report", str(ROOT / "examples" / UNPLANNED), "-o", str(tmp_path / "x.html"), "--job", "x"]) == 2  # a job that is not there: usage
    assert "no job `x`; the design's jobs: " in capsys.readouterr().err and not (tmp_path / "x.html").exists()


def _pixel_spread(png: Path) -> float:
    from PIL import Image, ImageStat

    with Image.open(png) as image:
        return ImageStat.Stat(image.convert("L")).stddev[0]


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("name", [PLANNED, UNPLANNED])
def test_the_report_opens_in_headless_chromium(name, reports, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(reports[name].replace("<head>", "<head>\n" + HARNESS, 1))
    shot = tmp_path / "shot.png"
    done = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                           f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert done.returncode == 0, done.stderr[-2000:]
    assert any("GCLC-LOADED" in line for line in console), done.stderr[-2000:]
    assert [line for line in console if "GCLC-LOADED" not in line] == []
    assert shot.exists() and _pixel_spread(shot) > 10


@pytest.mark.parametrize("example, words", [("custom_dsa.gcl", "(serve)"), ("hetero_h100_a100.gcl", "split:")])
def test_serve_and_heterogeneous_jobs_are_reported_with_their_plan(example, words, tmp_path):
    """Regression: a design whose job is `serve` was reported with "no train job"."""
    from gclc.cli.main import main

    out = tmp_path / "r.html"
    assert main(["report", str(ROOT / "examples" / example), "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert words in text and "no train job" not in text
