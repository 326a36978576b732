"""The analytical performance model: the physics every job kind shares at the top (compute
rooflines, caches, collectives, DVFS, power, shapes, ranks, calibration bands), and one room
per job kind: `train/` (the step: `train/step.py` puts it together) and `serve/` (a serving
iteration)."""
