"""Planning a training job: the exact branch-and-bound search over tp, pp, vp, dp, cp, ep,
micro-batch, recompute, ZeRO and placement order (`search.py`, its bounds and leaves), the
exhaustive enumerator that is its test oracle (`enumerate.py`), the limits and objective they
share, and the plan with its review and the reasons when nothing fits."""
