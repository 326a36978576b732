"""`gclc export FILE --to KIND [-o DIR|-] [--job NAME] [--cluster NAME]`: the plan and the
cluster as the files Megatron-LM, torchtitan, Slurm, Kubernetes or a serving engine read, or
the planned step as a Chrome/Perfetto trace or per-rank Chakra execution traces (binary: -o DIR).

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

from ..compiler.driver import EXIT_ERRORS, EXIT_INFEASIBLE, EXIT_OK, EXIT_USAGE
from .progress import progress
from .common import checked_design, error, settings_option
from .common import quiet, wrote
from .output import write_atomic


BINARY = ("chakra",)   # kinds whose files are bytes, never stdout or JSON
MANY = 20


def add(commands) -> None:
    from ..views.export import KINDS

    export = commands.add_parser(
        "export", help="the plan and the cluster as Megatron-LM, torchtitan, Slurm or Kubernetes files, or a trace",
        description="Write what the software stack reads: megatron (arguments and YAML), torchtitan (TOML and "
                    "CLI overrides), slurm (slurm.conf lines, gres.conf, tree and block topology.conf, sbatch), "
                    "kubernetes (Kueue Topology, ResourceFlavors and queues, node labels, JobSet), trace (the planned "
                    "step as a Chrome/Perfetto trace: a track per pipeline stage and per communicator), chakra (the step as "
                    "Chakra execution traces per rank for ASTRA-sim, with its communicator groups), vllm (a serve "
                    "plan's `vllm serve` settings per pool, as bash arrays and vLLM's config-file YAML), sglang (the "
                    "same for SGLang's launch_server), dynamo (NVIDIA Dynamo's frontend and per-pool workers of the "
                    "plan's engine), trtllm (refused with the reason: no TensorRT-LLM code installs here to check a "
                    "launch). On an rl job, vllm writes its generation pool's engine and "
                    "megatron its training pool's arguments.")
    export.add_argument("file", metavar="FILE")
    export.add_argument("--to", required=True, choices=KINDS, help="what to write")
    export.add_argument("-o", "--output", metavar="DIR",
                        help="write the files into this directory (created if missing); `-` or none: stdout")
    export.add_argument("--json", action="store_true",
                        help="print the files as one JSON object keyed by file name (instead of writing -o DIR)")
    export.add_argument("--job", metavar="NAME",
                        help="the job to plan: a train job, or for slurm, kubernetes, vllm, sglang and dynamo a serve job, or for "
                             "vllm and megatron an rl job (default: the file's first train job, else its first "
                             "job; for vllm its first serve job, else its first job)")
    export.add_argument("--cluster", metavar="NAME",
                        help="slurm/kubernetes: the cluster to write, or one partition of it as CLUSTER.PART "
                             "(default: the job's, else the file's first)")
    settings_option(export)
    export.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..model.job import JobError
    from ..views.export import ExportError, Infeasible, export

    out = None if args.output in (None, "-") else args.output
    if args.to in BINARY and (out is None or args.json):
        error(f"--to {args.to} writes binary files (one trace per rank): name a directory with -o DIR, "
              "without --json")
        return EXIT_USAGE
    problem = _output_problem(out, args.file)
    if problem is not None:
        return problem
    design = checked_design(args.file, args.set)
    if design is None:
        return EXIT_ERRORS
    if args.cluster is not None and (problem := _unknown_cluster(design, args.cluster, args.file)):
        error(problem)
        return EXIT_USAGE
    try:
        with progress(f"planning and exporting to {args.to}"):
            files = export(args.to, design, args.job, args.cluster, args.file)
    except Infeasible as problem:
        error(f"infeasible: {problem}")
        return EXIT_INFEASIBLE
    except (ExportError, JobError, LookupError) as problem:
        error(f"cannot export to {args.to}: {problem}")
        return EXIT_USAGE if getattr(problem, "usage", False) else EXIT_ERRORS
    if args.json:
        import json

        print(json.dumps(files, indent=2, ensure_ascii=False))
        return EXIT_OK if out is None else write_all(Path(out), files)
    if out is None:
        sys.stdout.write("".join(f"# ==> {name} <==\n{text}" for name, text in files.items()))
        return EXIT_OK
    return write_all(Path(out), files)


def _unknown_cluster(design, name: str, source: str) -> str | None:
    """What is wrong with `--cluster NAME` (a cluster, or `Cluster.part`), or None."""
    from ..compiler.lower import lower_cluster
    from ..views import selection

    cluster, _, part = name.partition(".")
    clusters = {e.name: e for e in design.of_kind("cluster")}
    if cluster not in clusters:
        return selection.unknown_export_cluster(cluster, source, clusters)
    parts = [p.name for p in lower_cluster(clusters[cluster]).partitions]
    if part and part not in parts:
        return selection.unknown_partition(cluster, part, parts)
    return None


def _output_problem(out: str | None, source: str) -> int | None:
    if out is None:
        return None
    if out == "":
        error("-o needs a directory name")
        return EXIT_USAGE
    path = Path(out)
    if path.exists() and not path.is_dir():
        what = "the input file" if os.path.realpath(out) == os.path.realpath(source) else "a file"
        error(f"-o `{out}` is {what}; export writes several files, so -o names a directory")
        return EXIT_USAGE
    return None


def write_all(directory: Path, files: dict[str, str | bytes], announce: bool = True) -> int:
    """Every file into `directory`; `wrote` lines unless the command prints JSON instead (one
    line for the folder when there are more than MANY files: a trace per rank)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)   # `jobs/...` of a schedule's replay
            write_atomic(directory / name, text)
    except OSError as problem:
        error(f"cannot write into `{directory}`: {problem.strerror or problem}")
        return EXIT_ERRORS
    if announce and len(files) > MANY:
        if not quiet():
            print(f"wrote {len(files):,} files into {directory}/")
        return EXIT_OK
    for name in files if announce else ():
        wrote(directory / name)
    return EXIT_OK
