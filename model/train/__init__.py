"""The training step model: the operations of one layer and micro-batch (`workload.py`), their
costs (`layer_cost.py`), memory, recompute, offload, the optimizer, sharding and data-parallel
synchronization, hosts and DPUs, and the step that puts them together (`step.py`)."""
