"""`gclc calibrate FILE MEASUREMENT... [-o OUT]`: refit the design's constants to an
operator's own measurements, print the report, and write the calibrated design. Exit 0, 1
errors (the design or a measurement file), 2 usage."""

from __future__ import annotations

import argparse
import json
import sys

from ..compiler.driver import EXIT_ERRORS, EXIT_OK, EXIT_USAGE
from .common import checked_design, diagnostics_text, error, output_problem, settings_option, write_output
from .progress import progress


def add(commands) -> None:
    calibrate = commands.add_parser(
        "calibrate", help="refit the design's efficiencies and error band to your own measurements",
        description="Read nccl-tests output, training logs (Megatron-LM, torchtitan, NeMo), serving benchmarks "
                    "(vLLM, SGLang, genai-perf, aiperf) and kernel CSVs (gclc probe), refit the design's chip and "
                    "fabric constants to them, and write a design that imports FILE with the calibrated parts and "
                    "band (docs/calibration.md).")
    calibrate.add_argument("file", metavar="FILE", help="the design (.gcl)")
    calibrate.add_argument("measurements", metavar="MEASUREMENT", nargs="+", help="measurement files or folders")
    calibrate.add_argument("-o", "--output", metavar="OUT",
                           help="write the calibrated design here (in FILE's folder or above it, so that it can "
                                "import FILE); without it, only the report")
    calibrate.add_argument("--job", metavar="NAME", help="the train job the training logs ran, or the serve job "
                                                         "the serving benchmarks ran (default: the first of each)")
    calibrate.add_argument("--model-offsets", action="store_true",
                           help="give each model's training runs their own offset on the step time, so that one "
                                "model's miss is kept out of the cluster's constants (runs of two or more models; "
                                "not the default: measured worse on the published runs, docs/calibration.md)")
    calibrate.add_argument("--json", action="store_true", help="print the report as JSON")
    settings_option(calibrate)
    calibrate.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..compiler.measure.read import read_paths
    from ..model.job import JobError
    from ..solver.calibrate.advice import calibrate_design
    from ..views.calibrate.overrides import CannotWrite, overrides
    from ..views.calibrate.report import report_json, report_text

    if args.output is not None and (problem := output_problem(args)) is not None:
        return problem
    design = checked_design(args.file, args.set)
    if design is None:
        return EXIT_ERRORS
    measurements, diagnostics, sources = read_paths(args.measurements)
    shown = diagnostics_text(diagnostics, sources)
    if shown:
        print(shown, file=sys.stderr)
    if any(d.is_error for d in diagnostics):
        return EXIT_ERRORS
    try:
        with progress("fitting the design's constants to the measurements"):
            calibration, advice = calibrate_design(design, measurements, args.job, args.model_offsets)
    except JobError as problem:
        error(str(problem))
        return EXIT_USAGE if problem.usage else EXIT_ERRORS
    if args.output is not None:
        source = "gclc calibrate " + " ".join([args.file, *args.measurements])
        try:
            text = overrides(design, calibration, args.file, args.output, source)
        except CannotWrite as problem:
            error(str(problem))
            return EXIT_USAGE
        status = write_output(argparse.Namespace(output=args.output), text)
        if status != EXIT_OK:
            return status
    if args.json:
        print(json.dumps(report_json(calibration, advice), indent=2, allow_nan=False))
    else:
        print(report_text(calibration, advice, args.file))
    return EXIT_OK
