"""Hostile-input benchmark: how long `gclc plan` takes on a shipped example with one field set to
a value far past anything published, the cases the hostile fuzz (benchmarks/fuzz_hostile.py)
found slow. The product's standard: bad input gets a clear answer promptly (a search design's
plan is <= 0.5 s CPU on normal input; these should stay within a few seconds).

    nice -n 19 .venv/bin/python benchmarks/hostile.py [--repeat N] [--only NAME]

Each case runs `gclc plan` as a fresh process (the package byte-compiled first, as
benchmarks/startup.py does) and prints its best CPU time (user + system) and wall time over N runs
(default 1) and its exit status (0: a plan, 1: an error in the design, 3: infeasible). The last
line is a one-line summary: the worst case's CPU time and the total.

No peer tool runs in this script, so it prints no comparison with one.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import compile_package  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GCLC = [sys.executable, "-m", "gclc"]

# (name, example, the line as shipped, the line as the hostile design has it)
CASES = (
    ("vocab-1e30", "gb200_nvl72_100k", "vocab              = 128256", "vocab              = 1e30"),
    ("layers-100000", "gb200_nvl72_100k", "layers             = 126", "layers             = 100000"),
    ("rl-prompts-1000", "rl_grpo_70b", "prompts      = 64", "prompts      = 1000"),
    ("rl-prompt-100000", "rl_grpo_70b", "prompt       = 512", "prompt       = 100000"),
    ("serve-requests-cap", "chat_serve_features", "requests  = 400", "requests  = 100000"),
    ("shipped-gb200", "gb200_nvl72_100k", "", ""),            # the shipped designs beside them
    ("shipped-rl", "rl_grpo_70b", "", ""),
    ("shipped-serve", "chat_serve_features", "", ""),
)


def design(folder: Path, name: str, example: str, shipped: str, hostile: str) -> Path:
    text = (ROOT / "examples" / f"{example}.gcl").read_text()
    if shipped:
        if shipped not in text:
            sys.exit(f"{name}: examples/{example}.gcl no longer has `{shipped}`")
        text = text.replace(shipped, hostile, 1)
    path = folder / f"{name}.gcl"
    path.write_text(text)
    return path


def run_once(path: Path) -> tuple[float, float, int]:
    """(wall, CPU, exit status) of one fresh `gclc plan` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([*GCLC, "plan", str(path)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1, 3) or "Traceback" in done.stderr:
        sys.exit(f"gclc plan {path.name} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", action="append", help="a case's name (repeatable)")
    args = parser.parse_args()
    compile_package()
    cases = [c for c in CASES if not args.only or c[0] in args.only]
    print(f"{'case':<22} {'example':<22} {'CPU s':>7} {'wall s':>7} {'exit':>5}")
    cpus = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, example, shipped, hostile in cases:
            path = design(Path(folder), name, example, shipped, hostile)
            runs = [run_once(path) for _ in range(args.repeat)]
            wall, cpu, code = min(w for w, _, _ in runs), min(c for _, c, _ in runs), runs[0][2]
            cpus[name] = cpu
            print(f"{name:<22} {example:<22} {cpu:7.2f} {wall:7.2f} {code:5}")
    hostile = {k: v for k, v in cpus.items() if not k.startswith("shipped")}
    worst = max(hostile or cpus, key=(hostile or cpus).get)
    print(f"hostile: worst {worst} {cpus[worst]:.2f} s CPU, {len(hostile)} hostile cases {sum(hostile.values()):.2f} s "
          f"CPU in all")


if __name__ == "__main__":
    main()
