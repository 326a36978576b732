"""`gclc export --to trace`: the planned step as a Chrome trace, one answer with the plan,
opened in headless Chromium by Chrome DevTools' own trace engine (the Performance panel's
parser, npm `@paulirish/trace_engine` pinned in tests/data/exports/devtools_trace/, installed
by `.ci/setup`). STUB, named: `third-party-web` (a URL-to-company table the engine's
third-party insight imports, CommonJS only) is replaced in the browser by
tests/data/exports/devtools_trace/stub-third-party-web.js; a step trace has no URLs."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from gclc.views.export import ExportError, export
from gclc.views.export.trace import PER_MICROBATCH

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "tests" / "data" / "exports" / "devtools_trace"
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-component-update", "--disable-sync", "--enable-logging=stderr", "--v=0",
         "--allow-file-access-from-files", "--virtual-time-budget=30000", "--dump-dom")


def _trace(named, name: str = "dgx_h100_superpod") -> dict:
    return json.loads(_exported(named(name)))


@functools.cache
def _exported(example) -> str:
    return export("trace", example.design, None, None, example.name)["trace.json"]


def _tracks(trace: dict) -> dict[str, list[dict]]:
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    out = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            out[names[e["tid"]]].append(e)
    return out


def test_the_trace_is_the_plans_step(named, cli_once):
    """Each term's slices add up to the plan's seconds for it (`gclc plan --json`), every
    stage spans the same pipeline time, and the step ends at the plan's step time."""
    example = named("dgx_h100_superpod")
    code, out, _ = cli_once("plan", example.path, "--json")   # once per test run (tests/conftest.py)
    assert code == 0
    planned = json.loads(out)
    trace = _trace(named)
    tracks, b = _tracks(trace), planned["step_breakdown_s"]
    assert trace["otherData"]["step_breakdown_s"] == pytest.approx(b, rel=1e-12)
    us = lambda events: sum(e["dur"] for e in events) / 1e6  # noqa: E731
    slack = lambda events: len(events) * 1e-6  # noqa: E731  (each end on a whole microsecond)
    for dim in ("TP", "PP", "DP", "optimizer"):
        assert us(tracks[dim]) == pytest.approx(b[dim.lower()], abs=slack(tracks[dim])), dim
    assert us(tracks["bubble"]) == pytest.approx(b["bubble"], abs=1e-5)
    stages = planned["parallelism"]["pp"]
    m = planned["parallelism"]["microbatches"]
    work = sum(b[t] for t in PER_MICROBATCH)
    last = tracks[f"stage {stages - 1}"]
    assert len(last) == 2 * m and us(last) == pytest.approx(work, abs=slack(last))
    assert us(tracks["stage 0"]) == pytest.approx(work + b["bubble"], abs=slack(tracks["stage 0"]))
    end = max(e["ts"] + e["dur"] for events in tracks.values() for e in events) / 1e6
    assert end == pytest.approx(planned["step_time_s"], abs=1e-5)
    tp = tracks["TP"][0]["args"]
    assert tp["group"] == planned["placement"]["tp"]["size"] and tp["tiers"] == planned["placement"]["tp"]["tiers"]
    assert tp["bytes"] > 0 and tracks["DP"][0]["args"]["bytes"] > 0


def test_a_trace_needs_one_layout(named):
    example = named("hetero_h100_a100")
    with pytest.raises(ExportError, match="heterogeneous split"):
        export("trace", example.design, None, None, example.name)


def _open_in_chromium(trace: dict, directory: Path) -> dict:
    page = (ENGINE / "open.html").read_text().replace("BASE", ENGINE.as_uri())
    page = page.replace("TRACE_JSON", json.dumps(trace).replace("</", "<\\/"))
    (directory / "open.html").write_text(page)
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={directory / 'profile'}", (directory / "open.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="out">GCLC-(PARSED|ERROR) ([^<]*)</pre>', done.stdout)
    assert found is not None, done.stdout[-2000:] + done.stderr[-2000:]
    assert found.group(1) == "PARSED", found.group(2)
    return json.loads(found.group(2).replace("&quot;", '"'))


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_chromium_opens_the_trace_with_devtools_own_engine(named, tmp_path):
    if not (ENGINE / "node_modules" / "@paulirish" / "trace_engine").is_dir():
        pytest.skip("the pinned DevTools trace engine is missing: run `bash .ci/setup` (npm ci in "
                    "tests/data/exports/devtools_trace)")
    trace = _trace(named)
    parsed = _open_in_chromium(trace, tmp_path)
    tracks = {name: (events, roots) for name, events, roots in parsed["tracks"]}
    mine = _tracks(trace)
    assert set(tracks) == set(mine)                  # every track, by name
    for name, (events, roots) in tracks.items():
        assert events == len(mine[name]) == roots, name   # every slice read, none overlapping another
    assert parsed["max"] == max(e["ts"] + e["dur"] for events in mine.values() for e in events)
    # negative control: a slice that overlaps its neighbour is nested by the engine
    broken = json.loads(json.dumps(trace))
    stage = next(e for e in broken["traceEvents"] if e["ph"] == "X" and e["name"] == "forward")
    stage["dur"] += 10 ** 9
    tracks = {name: (events, roots) for name, events, roots in _open_in_chromium(broken, tmp_path)["tracks"]}
    assert any(events != roots for events, roots in tracks.values())
