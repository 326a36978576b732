"""The "defaults" run: every published run's design with each field its source did not publish
left unstated, planned as a new user would plan it, against the measurement and the band
the plan prints.

    .venv/bin/python benchmarks/defaults.py [--runs DIR] [--csv MEASURED_CSV] [--json]

A design of benchmarks/runs (make_runs.py) marks what the row published with a `# row`
comment; the rest of its `train` block (a recipe's recompute or overlap, fp8 weights, a
layout the row does not state) is a fill-in. Here those lines are dropped, the design is
planned with `gclc plan`'s search (which chooses the layout, micro-batch, recompute and ZeRO
stage the design leaves free), and the plan's tokens/s per GPU and 80 % band (the shipped
band widened by its reasons, model/train/guessed.py's unstated fields among them) are
compared with the measured steady-state figure. The band constants were fitted on the fully
stated designs' cross-validated residuals, never on these plans. The last line is a one-line
summary.

    .venv/bin/python benchmarks/defaults.py --fields

checks the guessed fields' moves one field at a time on the designs that state them, no
measurement involved: each field of model/train/guessed.py FIELDS a full design states is
left out alone, the design planned again, and the prediction's move from the stated plan's,
e = log(left out / stated), set against the sides guessed.py computes on the new plan (the
band widens its low side by `slower`, its high side by `faster`): e > 0 (the default predicts
a faster step than the run took) needs the low side. Per field: the moves over 0.5 %, how many
lie on a side the band widens, and how many within that side's move.

    .venv/bin/python benchmarks/defaults.py --no-stack

leaves the software stack unstated as well (every row publishes it): the default stack is
assumed, and the band carries the `stack` reason instead of the stack's overlaps
(model/train/guessed.py STACK_FIELDS).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package
sys.path.insert(0, str(HERE))

from accuracy import DEFAULT_MEASURED, DEFAULT_RUNS, _finite  # noqa: E402
from crossval import stats  # noqa: E402

from gclc.compiler.formats import family  # noqa: E402

_KEEP = re.compile(r"#\s*row\b")          # a value the row published
_FIELD = re.compile(r"^\s*(\w+)\s*=")
# kept whatever their comment: the batch (MaxText publishes it per device, the design
# multiplies), and the schedule, which follows the vp (dropped below when the vp is)
_ALWAYS = ("batch", "schedule")


def published_only(text: str, stack: bool = True) -> str:
    """The design with each `train`-block field its row did not publish removed (fields with
    no comment there are the row's own: model, on, gpus, seq); without `stack`, its `software`
    too (every row publishes it)."""
    out, inside, depth = [], False, 0
    for line in text.splitlines():
        if line.startswith("train "):
            inside = True
        if inside:
            depth += line.count("{") - line.count("}")
            field = _FIELD.match(line)
            if field and field.group(1) not in _ALWAYS and "#" in line and not _KEEP.search(line):
                continue
            if field and field.group(1) == "software" and not stack:
                continue
            if depth == 0 and "}" in line:
                inside = False
        out.append(line)
    kept = "\n".join(out) + "\n"
    if not re.search(r"^\s*vp\s*=", kept, re.MULTILINE):   # interleaving is the vp's
        kept = re.sub(r"^\s*schedule\s*=\s*interleaved.*\n", "", kept, flags=re.MULTILINE)
    return kept


def conditions(best, job) -> tuple[str, ...]:
    """As crossval.conditions (precision by family), on the plan's chosen configuration."""
    return ("MoE" if job.shape.is_moe else "dense", f"precision {family(best.config.precision)}",
            f"chip {job.partition.node.accelerator.name}", "CP > 1" if best.config.cp > 1 else "CP = 1",
            "PP > 1" if best.config.pp > 1 else "PP = 1", "FSDP (ZeRO-3)" if best.config.zero >= 3 else "no FSDP")


def plan_row(path: Path, measured: dict, stack: bool = True) -> dict:
    from gclc.compiler.driver import check_text
    from gclc.model.job import train_job
    from gclc.solver.train.plan import plan

    row = {"run_id": path.stem, "group": measured.get("group", ""), "measured": float(measured["meas_tokens_per_s_per_gpu"])}
    try:
        checked = check_text(published_only(path.read_text(), stack), str(path))
        if not checked.ok or checked.design is None:
            raise ValueError("; ".join(d.summary for d in checked.diagnostics if d.is_error) or "no design")
        job = train_job(checked.design)
        p = plan(job)
        if p.best is None:
            raise ValueError(f"plan {p.status}")
        low, high = p.error_band["tokens_per_s"]
        gpus = p.best.config.gpus
        row.update(predicted=p.best.tokens_per_s_per_gpu, low=low / gpus, high=high / gpus,
                   reasons=[r.text for r in p.band_reasons], conditions=list(conditions(p.best, job)),
                   config=f"tp{p.best.config.tp} pp{p.best.config.pp} dp{p.best.config.dp} ep{p.best.config.ep} "
                          f"mb{p.best.config.microbatch} {p.best.config.recompute} z{p.best.config.zero}")
        row["error"] = row["predicted"] / row["measured"] - 1
        row["inside"] = row["low"] <= row["measured"] <= row["high"]
    except Exception as exc:  # noqa: BLE001 - a design that does not plan is a row
        row["failure"] = f"{type(exc).__name__}: {exc}"
    return row


def field_rows(path: Path) -> list[dict]:
    """For each FIELDS field the full design at `path` states and that matters to the plan without
    it: the move e of the prediction when it alone is left out, and guessed.py's sides there."""
    from gclc.compiler.driver import check_text
    from gclc.model.job import stated_fields, train_job
    from gclc.model.train import guessed
    from gclc.solver.train.plan import plan

    text, out = path.read_text(), []
    full = plan(train_job(check_text(text, str(path)).design)).best
    for field, (matters, _, _) in guessed.FIELDS.items():
        line = re.compile(rf"^\s*{field}\s*=.*\n", re.MULTILINE)
        if full is None or not line.search(text):
            continue
        left = line.sub("", text)
        if field == "vp":   # interleaving is the vp's
            left = re.sub(r"^\s*schedule\s*=\s*interleaved.*\n", "", left, flags=re.MULTILINE)
        checked = check_text(left, str(path))
        job = train_job(checked.design) if checked.ok else None
        best = plan(job).best if job is not None else None
        if best is None or not matters(job.shape, best.config):
            continue
        slower, faster = guessed.sides(job.shape, best.config, job.partition, stated_fields(job)).get(field, (0.0, 0.0))
        out.append({"run_id": path.stem, "field": field, "move": math.log(best.tokens_per_s / full.tokens_per_s),
                    "slower": slower, "faster": faster})
    return out


def fields_table(rows: list[dict]) -> tuple[list[str], dict]:
    """Per field: designs, moves over MOVED, on the band's widened side, within that side's move."""
    lines = [f"  {'field':<12} {'n':>4} {'moved':>6} {'on side':>8} {'within':>7}"]
    totals = dict(n=0, moved=0, on_side=0, within=0)
    for field in dict.fromkeys(r["field"] for r in rows):
        rs = [r for r in rows if r["field"] == field]
        moved = [r for r in rs if abs(r["move"]) > MOVED]
        side = [r["slower"] if r["move"] > 0 else r["faster"] for r in moved]
        count = dict(n=len(rs), moved=len(moved), on_side=sum(s > 0 for s in side),
                     within=sum(abs(r["move"]) <= s * (1 + 1e-9) for r, s in zip(moved, side)))
        lines.append(f"  {field:<12} {count['n']:>4} {count['moved']:>6} {count['on_side']:>8} {count['within']:>7}")
        totals = {k: totals[k] + count[k] for k in totals}
    return lines, totals


MOVED = 0.005   # |log| moves below half a percent are left out of the count


def table(rows: list[dict]) -> list[str]:
    done = [r for r in rows if "error" in r]
    groups: dict[str, list[dict]] = {}
    for r in done:
        for c in r["conditions"]:
            groups.setdefault(c, []).append(r)
    lines = [f"  {'condition':<24} {'n':>4} {'median':>8} {'p90':>8} {'band80':>7}"]
    for name, rs in sorted(groups.items()):
        s = stats([r["error"] for r in rs])
        lines.append(f"  {name:<24} {s['n']:>4} {s['median']:>8.1%} {s['p90']:>8.1%} "
                     f"{sum(r['inside'] for r in rs) / len(rs):>7.0%}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=str(DEFAULT_RUNS))
    parser.add_argument("--csv", default=str(DEFAULT_MEASURED))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fields", action="store_true", help="each guessed field left out alone of the full designs")
    parser.add_argument("--no-stack", action="store_true", help="leave the software stack unstated too")
    args = parser.parse_args(argv)
    with open(args.csv, newline="") as f:
        measured = {r["run_id"]: r for r in csv.DictReader(f) if r.get("kind") == "steady_state"}
    if args.fields:
        return fields_main(sorted(p for p in Path(args.runs).glob("*.gcl") if p.stem in measured), args.json)
    wall, cpu = time.perf_counter(), time.process_time()
    rows = [plan_row(p, measured[p.stem], not args.no_stack) for p in sorted(Path(args.runs).glob("*.gcl"))
            if p.stem in measured]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done = [r for r in rows if "error" in r]
    s = stats([r["error"] for r in done])
    coverage = sum(r["inside"] for r in done) / len(done) if done else float("nan")
    if args.json:
        print(json.dumps(_finite({"runs": rows, "overall": s, "band_coverage": coverage}), indent=1))
    else:
        for r in rows:
            if "failure" in r:
                print(f"{r['run_id']:<24} !! {r['failure']}")
            else:
                print(f"{r['run_id']:<24} {r['predicted']:>10.1f} {r['measured']:>10.1f} {r['error']:+7.1%} "
                      f"{'in ' if r['inside'] else 'OUT'} {r['low']:>9.1f}-{r['high']:<9.1f} {r['config']}  "
                      + "; ".join(t.split(' (')[0] for t in r["reasons"]))
        print("\nPer condition (the plan's configuration):")
        print("\n".join(table(rows)))
    print(f"defaults{' (no stack)' if args.no_stack else ''}: n={s.get('n', 0)} of {len(rows)} planned, median={s.get('median', float('nan')):.1%} "
          f"p90={s.get('p90', float('nan')):.1%} band80={coverage:.0%}; {wall:.0f} s wall, {cpu:.0f} s CPU")
    return 0


def fields_main(paths: list[Path], as_json: bool) -> int:
    wall = time.perf_counter()
    rows = [r for p in paths for r in field_rows(p)]
    lines, t = fields_table(rows)
    if as_json:
        print(json.dumps(_finite({"rows": rows, "totals": t}), indent=1))
    else:
        print("Each guessed field left out alone of the designs that state it (move: log(left out / stated)):")
        print("\n".join(lines))
    print(f"defaults fields: {t['n']} (design, field) pairs, {t['moved']} move the prediction by over "
          f"{MOVED:.1%}: {t['on_side']} on a side the band widens, {t['within']} within its move; "
          f"{time.perf_counter() - wall:.0f} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
