"""The kernel CSV's first line and columns: what `probe.py` writes and `kernels.py` reads.
No imports, so that the probe runs as a plain script on a machine with only PyTorch."""

MAGIC = "# gclc kernels v1"
COLUMNS = ("kind", "precision", "m", "n", "k", "batch", "heads", "seq", "head_dim", "causal", "bytes", "ranks", "nodes",
           "seconds", "rate")
