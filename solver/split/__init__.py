"""Planning one training job across partitions of different chips: the split of its items
over lanes (`lanes.py`), solved exactly by a bit-set search (`search.py`) or a MILP
(`milp.py`), and the plan of the whole heterogeneous job (`plan.py`)."""
