"""The analytical performance model: FLOPs, compute, memory, communication, power.

One module per concern; `step.py` puts them together into a step-time estimate.
"""
