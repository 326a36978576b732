"""Serve planning speed: the CPU seconds of `gclc plan --json` on every serve design in
examples/ and tests/data/, and a digest of each plan, so that a change meant only to make
planning faster can be shown to leave every plan byte-for-byte the same (run it before and
after; the digests must agree).

    .venv/bin/python benchmarks/serve_plan_speed.py [--rounds N]

Each design is planned `--rounds` times in this process (default 1) and the least CPU time is
printed with the plan's simulations and the SHA-256 of its JSON. The last line sums the CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the folder holding the `gclc` package

# (design, plan arguments): every serve job of the repository's examples and test data
DESIGNS = (("examples/deepseek_v3_serve.gcl", ()),
           ("examples/deepseek_v3_serve.gcl", ("--set", "demand=10")),
           ("examples/deepseek_v3_serve.gcl", ("--set", "nodes=8")),
           ("examples/custom_dsa.gcl", ("--job", "chat_405b")),
           ("examples/chat_serve_features.gcl", ()),
           ("tests/data/serve_cost.gcl", ()))


def plan(path: Path, args: tuple[str, ...]) -> tuple[float, str]:
    """(CPU seconds, `plan --json` output) of one plan, run in this process."""
    from gclc.cli.main import main

    out = io.StringIO()
    cpu = time.process_time()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["plan", str(path), "--json", *args])
    return time.process_time() - cpu, out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    rounds = parser.parse_args().rounds
    total, most = 0.0, 0.0
    for design, args in DESIGNS:
        runs = [plan(HERE.parent / design, args) for _ in range(max(1, rounds))]
        cpu, text = min(runs)
        if len({t for _, t in runs}) != 1:
            raise SystemExit(f"{design} {' '.join(args)}: plans differ between rounds")
        solver = json.loads(text).get("solver", {})
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        print(f"{design:38} {' '.join(args):18} cpu {cpu:7.2f} s  simulated {solver.get('simulated', 0):3}  "
              f"sha256 {digest}")
        total, most = total + cpu, max(most, cpu)
    print(f"serve plans: {len(DESIGNS)} designs, {total:.2f} s CPU in all, {most:.2f} s the most for one "
          f"(least of {max(1, rounds)} round{'s' if rounds > 1 else ''})")


if __name__ == "__main__":
    main()
