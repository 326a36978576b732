"""Predicted against measured tokens/s per accelerator, drawn from the two accuracy benchmarks'
JSON: the leave-one-group-out predictions of benchmarks/accuracy.py (each run predicted by the
physics refitted without its source) and the never-fitted runs of benchmarks/validation.py
(with the 80 % band a plan prints). These are the figures of docs/model.md:

    .venv/bin/python benchmarks/accuracy.py --json > accuracy.json        # minutes: 19 refits
    .venv/bin/python benchmarks/validation.py --json > validation.json
    .venv/bin/python benchmarks/accuracy_plot.py accuracy.json validation.json -o docs/img

The SVGs are deterministic for the same JSON (fixed hash salt, no date). The last line is a
one-line summary of what was drawn, its medians recomputed from the rows drawn.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

BANDS = ((0.10, "±10 %", (0, (4, 3))), (0.25, "±25 %", (0, (1, 3))))


def _axes(title: str, points: list[tuple[float, float]]):
    figure, axes = plt.subplots(figsize=(6.4, 5.6))
    low = min(min(p) for p in points) / 1.5
    high = max(max(p) for p in points) * 1.5
    axes.plot([low, high], [low, high], color="black", linewidth=1, label="predicted = measured")
    for share, label, dash in BANDS:
        for sign in (1, -1):
            axes.plot([low, high], [low * (1 + sign * share), high * (1 + sign * share)], color="grey",
                      linewidth=0.8, linestyle=dash, label=label if sign == 1 else None)
    axes.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high), title=title,
             xlabel="measured tokens/s per accelerator", ylabel="predicted tokens/s per accelerator")
    axes.set_aspect("equal")
    return figure, axes


def cross_validated(payload: dict, out: Path) -> str:
    cv = payload["cross_validated"]
    rows = cv["runs"]
    errors = [abs(r["error"]) for r in rows]
    inside = sum(1 for r in rows if r["in_band"])
    title = (f"Leave one source out: {len(rows)} runs, median |error| {statistics.median(errors):.1%},\n"
             f"{inside} inside the 80 % band fitted without their source")
    figure, axes = _axes(title, [(r["measured"], r["predicted"]) for r in rows])
    for inside_band, colour, label in ((True, "tab:blue", "inside the band"), (False, "tab:red", "outside the band")):
        chosen = [r for r in rows if r["in_band"] == inside_band]
        axes.scatter([r["measured"] for r in chosen], [r["predicted"] for r in chosen], s=14, color=colour,
                     alpha=0.75, label=f"{label} ({len(chosen)})")
    axes.legend(loc="upper left", fontsize=8)
    _save(figure, out / "accuracy_cv.svg")
    return f"cv n={len(rows)} median={statistics.median(errors):.1%} band80={inside / len(rows):.0%}"


def never_fitted(payload: dict, out: Path) -> str:
    rows = [r for r in payload["runs"] if r.get("predicted") is not None]
    errors = [abs(r["error"]) for r in rows]
    inside = sum(1 for r in rows if r["in_band"])
    title = (f"Never fitted: {len(rows)} runs, median |error| {statistics.median(errors):.1%},\n"
             f"{inside} of {len(rows)} inside the plan's 80 % band")
    figure, axes = _axes(title, [(r["measured"], r["predicted"]) for r in rows])
    for inside_band, colour, label in ((True, "tab:blue", "measurement inside the band"),
                                       (False, "tab:red", "outside the band")):
        chosen = [r for r in rows if r["in_band"] == inside_band]
        axes.errorbar([r["measured"] for r in chosen], [r["predicted"] for r in chosen],
                      yerr=[[r["predicted"] - r["band"][0] for r in chosen], [r["band"][1] - r["predicted"] for r in chosen]],
                      fmt="o", markersize=4, color=colour, elinewidth=0.8, capsize=2, label=f"{label} ({len(chosen)})")
    axes.legend(loc="upper left", fontsize=8)
    _save(figure, out / "validation.svg")
    return f"never fitted n={len(rows)} median={statistics.median(errors):.1%} band80={inside / len(rows):.0%}"


def _save(figure, path: Path) -> None:
    figure.tight_layout()
    figure.savefig(path, format="svg", metadata={"Date": None})
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("accuracy", help="the output of benchmarks/accuracy.py --json (with its cross-validation)")
    parser.add_argument("validation", help="the output of benchmarks/validation.py --json")
    parser.add_argument("-o", "--output", default="docs/img", help="folder for accuracy_cv.svg and validation.svg")
    args = parser.parse_args(argv)
    wall, cpu = time.perf_counter(), time.process_time()
    matplotlib.rcParams.update({"svg.hashsalt": "gclc", "svg.fonttype": "none"})
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    accuracy = json.loads(Path(args.accuracy).read_text())
    if not accuracy.get("cross_validated"):
        print(f"{args.accuracy} has no cross-validation (made with --no-cv?): nothing drawn", file=sys.stderr)
        return 1
    drawn = [cross_validated(accuracy, out), never_fitted(json.loads(Path(args.validation).read_text()), out)]
    print(f"drew {out / 'accuracy_cv.svg'} and {out / 'validation.svg'}: " + " | ".join(drawn)
          + f" (read from the JSON given; {time.perf_counter() - wall:.1f} s wall, {time.process_time() - cpu:.1f} s CPU)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
