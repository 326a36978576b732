"""`gclc probe -o machine.csv`: measure this machine's GEMM, attention and HBM rates (and,
under torchrun, its collectives) with PyTorch and write the kernel CSV `gclc calibrate`
reads. Exit 0, 1 (PyTorch missing, or the file cannot be written), 2 usage."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..compiler.driver import EXIT_ERRORS, EXIT_OK
from .common import error, write_output
from .progress import progress


def add(commands) -> None:
    probe = commands.add_parser(
        "probe", help="measure this machine's kernels and collectives with PyTorch, for gclc calibrate",
        description="Time GEMMs by shape and precision, causal attention, an HBM copy and (launched with torchrun "
                    "on several GPUs) all_reduce, all_gather and reduce_scatter, and write them as the kernel CSV "
                    "with the machine's identity (docs/calibration.md). Needs PyTorch: pip install 'gclc[probe]'.")
    probe.add_argument("-o", "--output", required=True, metavar="OUT", help="write the CSV here")
    probe.add_argument("--quick", action="store_true", help="small shapes, few repeats: a smoke run (seconds on a CPU)")
    probe.add_argument("--no-collectives", action="store_true", help="skip torch.distributed collectives")
    probe.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..compiler.measure.probe import ProbeUnavailable, run as measure

    if not args.output:
        error("-o needs a file name")
        return 2
    if Path(args.output).is_dir():
        error(f"cannot write `{args.output}`: it is a directory")
        return EXIT_ERRORS
    try:
        with progress("measuring this machine"):
            text = measure(quick=args.quick, collectives=not args.no_collectives)
    except ProbeUnavailable as problem:
        error(str(problem))
        return EXIT_ERRORS
    if text is None:   # a torch.distributed rank other than 0: rank 0 writes
        return EXIT_OK
    return write_output(args, text)
