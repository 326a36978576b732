"""The noise of a training run around its own system's constants, read from the published runs:
heavy-tailed (docs/calibration.md, "Why a calibration transferred worse beyond its runs"; a fit
under that Student-t noise was measured and not shipped: commit 48eb2b06).

    .venv/bin/python benchmarks/train_noise.py

Each system of benchmarks/calibrate_own.py (a group's runs on one chip, at least MIN_RUNS) is
predicted by the physics refitted without its group (leave one group out, as for a cluster the
shipped fit never saw); each run's log(predicted / measured) less the mean of the other runs of
its system (the system's offset, which the calibrated constants carry) is what an operator's
calibration cannot remove. A Student-t distribution is fitted to those by maximum likelihood over
a grid of degrees of freedom and scales; the normal's and the Cauchy's best scales are printed
beside it."""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

import calibrate as published  # noqa: E402
import calibrate_own  # noqa: E402

TAILS = (0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0, 30.0, 1e4)   # 1e4: a normal
SCALES = tuple(0.005 * i for i in range(1, 41))


def offsets_removed() -> list[float]:
    """Each run's cross-validated log error less the mean of the other runs of its system."""
    cases = published.load(HERE / "runs", HERE / "data" / "public_runs_measured.csv")
    out = []
    fits: dict = {}
    for (group, _), runs in calibrate_own.systems(cases).items():
        if group not in fits:
            fits[group] = published.fit([c for c in cases if c.group != group])
        errors = published.errors(runs, fits[group])
        out += [e - statistics.mean(errors[:i] + errors[i + 1:]) for i, e in enumerate(errors)]
    return out


def log_likelihood(xs: list[float], tails: float, scale: float) -> float:
    const = math.lgamma((tails + 1) / 2) - math.lgamma(tails / 2) - 0.5 * math.log(tails * math.pi) - math.log(scale)
    return sum(const - (tails + 1) / 2 * math.log1p((x / scale) ** 2 / tails) for x in xs)


def main() -> int:
    start, cpu = time.perf_counter(), time.process_time()
    xs = offsets_removed()
    best = {t: max(SCALES, key=lambda s: log_likelihood(xs, t, s)) for t in TAILS}
    tails = max(TAILS, key=lambda t: log_likelihood(xs, t, best[t]))
    top = log_likelihood(xs, tails, best[tails])
    print(f"{len(xs)} runs: maximum likelihood Student-t, {tails:g} degrees of freedom at scale {best[tails]:.3f}")
    for t in TAILS:
        name = "normal" if t >= 1e4 else ("Cauchy" if t == 1.0 else f"t{t:g}")
        print(f"  {name:7} scale {best[t]:.3f}  log likelihood {log_likelihood(xs, t, best[t]) - top:+.1f}")
    normal = max(t for t in TAILS)
    print(f"train noise: {len(xs)} runs, Student-t {tails:g} at {best[tails]:.3f} (normal {best[normal]:.3f}, "
          f"{log_likelihood(xs, normal, best[normal]) - top:+.1f} log likelihood) | wall {time.perf_counter() - start:.1f} s, "
          f"cpu {time.process_time() - cpu:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
