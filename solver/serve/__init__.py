"""Planning a serve job: the replica configurations a job may use (`space.py`), the analytic
screen and its provable floors, the discrete-event simulation of continuous batching
(`sim.py`) that confirms finalists, the searches with a demand (`demand_search.py`) and
without one (`saturated.py`), and the plan (`plan.py`)."""
