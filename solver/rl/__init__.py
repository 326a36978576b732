"""Planning `rl` jobs: the split of GPUs (and generations) between a generation pool and a
training pool, each pool's layout, colocated or disaggregated, and the staleness, for the
most samples a second, the least time to a number of steps, cost or energy. `rollout.py` draws
a step's samples; `generation.py` times their generation in the serving simulator, with
lower bounds; `pools.py` plans the training pool (solver/train) and scores a pair of pools;
`search.py` finds the best pair (best-first, exact over its space) and `exhaustive.py`
enumerates the space for the tests; `plan.py` is the plan the views draw."""
