"""`gclc plan`: train jobs (search, power budget), jobs across partitions and serve jobs,
printed as a table or as stable JSON. Exit codes: 0, 1 errors, 3 infeasible."""

from __future__ import annotations

import argparse
import sys

from .diagnostics import render_all
from .driver import EXIT_ERRORS, EXIT_INFEASIBLE, EXIT_OK, check_file


def run_plan(args: argparse.Namespace) -> int:
    import json

    from ..solver.plan import plan as make_plan
    from .model.job import JobError, train_job
    from .planview import plan_json, plan_text

    result = check_file(args.file, args.set)
    if result.diagnostics:
        print(render_all(result.diagnostics, result.sources), file=sys.stderr)
    if result.design is None:
        return EXIT_ERRORS
    split = _heterogeneous(result.design, args)
    if split is not None:
        return split
    served = _serve(result.design, args)
    if served is not None:
        return served
    try:
        job = train_job(result.design, args.job)
    except JobError as error:
        print(f"gclc: {error}", file=sys.stderr)
        return EXIT_ERRORS
    objective = args.objective or job_objective(job.entity)
    chosen = make_plan(job, objective, args.top)
    powered = _power(job, chosen, objective)
    data = plan_json(chosen)
    text = plan_text(chosen)
    if powered is not None:
        from ..solver.power import curve_json, power_json, power_text

        inputs, budgeted = powered
        curve = curve_json(inputs, budgeted.budget)
        data["power_budget"] = power_json(budgeted) | {"shares": list(inputs.shares), "fit_error": inputs.fit_error,
                                                       "curve": curve}
        text += "\n" + power_text(budgeted, inputs) + "\n  curve            " + ", ".join(
            f"{p['budget_w'] / 1e6:,.4g} MW: {p['tokens_per_s']:,.0f}" for p in curve) + " tokens/s"
    print(json.dumps(data, indent=2) if args.json else text)
    if chosen.best is None and not (powered is not None and powered[1].feasible and chosen.binding == ("power",)):
        print(infeasible_message(chosen), file=sys.stderr)
        return EXIT_INFEASIBLE
    return EXIT_OK


def _heterogeneous(design, args: argparse.Namespace) -> int | None:
    """A job spanning partitions: split it with the MILP and report; None for ordinary jobs."""
    import json

    from ..solver.hetero import hetero_entity, hetero_json, hetero_text, plan_hetero

    entity = hetero_entity(design, args.job)
    if entity is None:
        return None
    split = plan_hetero(entity)
    print(json.dumps(hetero_json(split), indent=2) if args.json else hetero_text(split))
    if split.best is None:
        reasons = "; ".join(f"{s.mode} split: {s.message}" for s in (split.data, split.pipeline) if s.message)
        print(f"gclc: infeasible: `{entity.name}` fits neither split across its partitions"
              + (f" ({reasons})" if reasons else ""), file=sys.stderr)
        return EXIT_INFEASIBLE
    return EXIT_OK


def _serve(design, args: argparse.Namespace) -> int | None:
    """A serve job: the width and batch that maximize output tokens within the SLOs."""
    import json

    from ..solver.serve import plan_serve, serve_entity
    from ..views.serve import serve_json, serve_text

    entity = serve_entity(design, args.job)
    if entity is None:
        return None
    chosen = plan_serve(entity, args.top)
    print(json.dumps(serve_json(chosen), indent=2) if args.json else serve_text(chosen))
    if chosen.best is None:
        print(f"gclc: infeasible: no configuration of `{entity.name}` meets its limits"
              + (f" ({'; '.join(chosen.binding)})" if chosen.binding else ""), file=sys.stderr)
        return EXIT_INFEASIBLE
    return EXIT_OK


def _power(job, chosen, objective: str):
    """Meet the job's power bound (or the cluster's budget) with GPU counts and clocks (the GP)."""
    from ..solver.power import power_plan, without_power_limit

    bounded = without_power_limit(job) is not job
    return power_plan(job, objective=objective, chosen=None if bounded else chosen)


def job_objective(job) -> str:
    maximize, minimize = job.get("maximize"), job.get("minimize")
    if minimize is not None:
        return {"time": "time", "energy": "energy"}.get(minimize.name, "throughput")
    return {"mfu": "mfu"}.get(getattr(maximize, "name", ""), "throughput")


def infeasible_message(chosen) -> str:
    reason = getattr(chosen, "infeasibility", None)
    if reason is not None:
        return f"gclc: infeasible: {reason.message}"
    job = chosen.job
    return f"gclc: infeasible: no admissible configuration of `{job.name}` on {job.gpus} GPUs"
