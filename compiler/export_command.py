"""`gclc export FILE --to KIND [-o DIR|-] [--job NAME] [--cluster NAME]`: the plan and the
cluster as the files Megatron-LM, torchtitan, Slurm or Kubernetes read.

Every file of the kind is computed before any is written; `-o DIR` writes each one
atomically into DIR (created when missing); without `-o`, or with `-o -`, they go to
stdout, each after a `# ==> NAME <==` line. Exit codes: 0, 1 errors (including a plan the
target cannot express), 2 usage, 3 infeasible.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .diagnostics import render_all
from .driver import EXIT_ERRORS, EXIT_INFEASIBLE, EXIT_OK, EXIT_USAGE, check_file
from .output import write_atomic


def add_parser(commands) -> None:
    from ..views.export import KINDS

    export = commands.add_parser(
        "export", help="the plan and the cluster as Megatron-LM, torchtitan, Slurm or Kubernetes files",
        description="Write what the software stack reads: megatron (arguments and YAML), torchtitan (TOML and "
                    "CLI overrides), slurm (slurm.conf lines, gres.conf, tree and block topology.conf, sbatch), "
                    "kubernetes (Kueue Topology and ResourceFlavors, node labels, JobSet).")
    export.add_argument("file", metavar="FILE")
    export.add_argument("--to", required=True, choices=KINDS, help="what to write")
    export.add_argument("-o", "--output", metavar="DIR",
                        help="write the files into this directory (created if missing); `-` or none: stdout")
    export.add_argument("--job", metavar="NAME", help="the train job to plan (default: the file's first)")
    export.add_argument("--cluster", metavar="NAME",
                        help="slurm/kubernetes: the cluster to write (default: the job's, else the file's first)")
    export.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help='override a `param` (repeatable), e.g. --set racks=256')
    export.set_defaults(run=run_export)


def run_export(args: argparse.Namespace) -> int:
    from ..views.export import ExportError, Infeasible, export
    from .model.job import JobError

    out = None if args.output in (None, "-") else args.output
    problem = _output_problem(out, args.file)
    if problem is not None:
        return problem
    result = check_file(args.file, args.set)
    if result.diagnostics:
        print(render_all(result.diagnostics, result.sources), file=sys.stderr)
    if result.design is None:
        return EXIT_ERRORS
    if args.cluster is not None and not any(e.name == args.cluster for e in result.design.of_kind("cluster")):
        known = ", ".join(e.name for e in result.design.of_kind("cluster")) or "none"
        print(f"gclc: no cluster `{args.cluster}` in {args.file}; the design has: {known}", file=sys.stderr)
        return EXIT_USAGE
    try:
        files = export(args.to, result.design, args.job, args.cluster, args.file)
    except Infeasible as error:
        print(f"gclc: infeasible: {error}", file=sys.stderr)
        return EXIT_INFEASIBLE
    except (ExportError, JobError, LookupError) as error:
        print(f"gclc: cannot export to {args.to}: {error}", file=sys.stderr)
        return EXIT_ERRORS
    if out is None:
        sys.stdout.write("".join(f"# ==> {name} <==\n{text}" for name, text in files.items()))
        return EXIT_OK
    return _write_all(Path(out), files)


def _output_problem(out: str | None, source: str) -> int | None:
    if out is None:
        return None
    if out == "":
        print("gclc: -o needs a directory name", file=sys.stderr)
        return EXIT_USAGE
    path = Path(out)
    if path.exists() and not path.is_dir():
        what = "the input file" if os.path.realpath(out) == os.path.realpath(source) else "a file"
        print(f"gclc: -o `{out}` is {what}; export writes several files, so -o names a directory",
              file=sys.stderr)
        return EXIT_USAGE
    return None


def _write_all(directory: Path, files: dict[str, str]) -> int:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            write_atomic(directory / name, text)
    except OSError as error:
        print(f"gclc: cannot write into `{directory}`: {error.strerror or error}", file=sys.stderr)
        return EXIT_ERRORS
    print(f"wrote {', '.join(files)} to {directory}", file=sys.stderr)
    return EXIT_OK
