"""RL post-training (`rl` jobs): what one step of generate, score, train and weight sync costs
given each pool's layout. `job.py` reads the job; `phases.py` times scoring, training and the
moves of the weights and optimizer state; `step.py` puts the phases together (synchronous,
asynchronous or colocated) into the step time, each pool's timeline and its memory. The
generation phase's time comes from the serving simulator (solver/rl/generation.py). `stacks.py` names
each RL stack's releases and its calibration: what it costs beyond the phases' physics, fitted on
published step times (solver/rl/pools.py `calibrated` applies it)."""
