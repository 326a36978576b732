#!/usr/bin/env bash
# The probe on a GPU machine, in one short run (the session's `run` tool starts it from the
# repository root; $OUT comes back): PyTorch with CUDA is all it needs, not gclc.
#
#   bash benchmarks/probe_gpu.sh            # kernels on GPU 0; collectives too with 2+ GPUs
#
# Writes $OUT/probe_gpu.csv (the kernel CSV, docs/calibration.md), $OUT/probe_collectives.csv
# with 2+ GPUs, and $OUT/nvidia-smi.txt. Then, here: copy probe_gpu.csv to
# tests/data/measurements/kernels/ (naming the machine and date in its SOURCES.md entry) and run
#   .venv/bin/python benchmarks/probe_compare.py tests/data/measurements/kernels/probe_gpu.csv
set -euo pipefail
OUT=${OUT:-.}
PY=${PY:-python3}
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "probe_gpu: no PyTorch with CUDA for $PY on this machine (set PY=/path/to/python)" >&2
  exit 3
fi
nvidia-smi -q > "$OUT/nvidia-smi.txt" 2>&1 || true
time "$PY" compiler/measure/probe.py -o "$OUT/probe_gpu.csv" --no-collectives
GPUS=$("$PY" -c "import torch; print(torch.cuda.device_count())")
if [ "$GPUS" -gt 1 ]; then
  time "$PY" -m torch.distributed.run --nproc-per-node "$GPUS" compiler/measure/probe.py \
    -o "$OUT/probe_collectives.csv" --collectives-only
fi
cat "$OUT/probe_gpu.csv"
