"""Power-constrained planning: how many GPUs run and at what clock under a power limit
(a geometric program, `program.py`), from the figures of a planned configuration (`inputs.py`)."""
