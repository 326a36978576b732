"""Train planning speed: the CPU seconds of `gclc plan --json` on every train design (the
search benchmarks and the train and heterogeneous examples), with the call count of each
plan and a digest of its JSON, so that a change meant only to make planning faster can be
shown to leave every plan byte-for-byte the same (run it before and after, on two
checkouts; the digests must agree). The call count (Python function calls under cProfile)
does not depend on how loaded the machine is, as the CPU time does.

    .venv/bin/python benchmarks/train_plan_speed.py [--rounds N]

Each design is planned `--rounds` times in this process (default 3), the model's caches
emptied before each, and the least CPU time is printed. The last line sums the CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import io
import pstats
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package

DESIGNS = ("benchmarks/designs/mt_nlg_530b.gcl", "benchmarks/designs/gpt3_175b.gcl",
           "benchmarks/designs/llama3_405b.gcl", "benchmarks/designs/deepseek_v3.gcl",
           "benchmarks/designs/superpod_sweep.gcl", "examples/a100_cluster.gcl", "examples/dgx_h100_superpod.gcl",
           "examples/gb200_nvl72_100k.gcl", "examples/hetero_h100_a100.gcl", "examples/mi300x_roce.gcl",
           "examples/shared_cluster.gcl")


def plan(path: Path, profile: cProfile.Profile | None = None) -> tuple[float, str]:
    """(CPU seconds, `plan --json` output) of one plan, run in this process with cold model caches."""
    from gclc.cli.main import main
    from gclc.model.train.step import clear_caches

    clear_caches()
    out = io.StringIO()
    cpu = time.process_time()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        if profile is not None:
            profile.enable()
        main(["plan", str(path), "--json"])
        if profile is not None:
            profile.disable()
    return time.process_time() - cpu, out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    total = 0.0
    for design in DESIGNS:
        profile = cProfile.Profile()
        _, profiled = plan(HERE.parent / design, profile)
        runs = [plan(HERE.parent / design) for _ in range(max(1, rounds))]
        cpu, text = min(runs)
        if len({t for _, t in runs} | {profiled}) != 1:
            raise SystemExit(f"{design}: plans differ between rounds")
        calls = pstats.Stats(profile).total_calls
        print(f"{design:40} cpu {cpu:6.2f} s  calls {calls:>10,}  sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]}")
        total += cpu
    print(f"train plans: {len(DESIGNS)} designs, {total:.2f} s CPU in all")


if __name__ == "__main__":
    main()
