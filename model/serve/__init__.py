"""The serving model: one scheduler iteration of a replica (`inference.py`), the routed experts
of a MoE iteration (`moe.py`), the KV cache (`kv.py`) and the hops of a replica's pipeline
(`pipeline.py`)."""
