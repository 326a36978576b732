"""`gclc degrade FILE PART=SHARE`: what a train job's step becomes with one NIC, leaf uplink,
spine switch or GPU slow or down, and the plan re-made around it. Exit 0, 1 errors, 2 usage."""

from __future__ import annotations

import argparse
import json

from ..compiler.driver import EXIT_ERRORS, EXIT_OK, EXIT_USAGE
from .common import checked_design, error, settings_option


def add(commands) -> None:
    degrade = commands.add_parser("degrade", help="a NIC, link, spine switch or GPU slow or down: what the step becomes")
    degrade.add_argument("file", metavar="FILE")
    degrade.add_argument("what", metavar="PART=SHARE",
                         help="nic, link, spine or gpu = down, or the share of its rate left (0.5 or 50%%)")
    degrade.add_argument("--job", metavar="NAME", help="the train job (default: the file's first)")
    degrade.add_argument("--json", action="store_true", help="print the result as JSON")
    settings_option(degrade)
    degrade.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..model.job import JobError, job_from_entity, select_job
    from ..model.network.degrade import DegradeError, parse
    from ..solver.train.degraded import degraded
    from ..views.degrade import degraded_json, degraded_text, not_a_train_job

    try:
        degradation = parse(args.what)
    except ValueError as problem:
        error(str(problem))
        return EXIT_USAGE
    design = checked_design(args.file, args.set)
    if design is None:
        return EXIT_ERRORS
    try:
        kind, entity = select_job(design, args.job)
        if kind != "train":
            error(not_a_train_job(entity.name, kind))
            return EXIT_USAGE
        result = degraded(job_from_entity(entity), degradation)
    except (JobError, DegradeError) as problem:
        error(str(problem))
        return EXIT_USAGE
    print(json.dumps(degraded_json(result), indent=2, allow_nan=False) if args.json else degraded_text(result))
    return EXIT_OK
