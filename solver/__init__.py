"""Estimates -> plans, one room per job kind: `train/` (the exact search), `serve/`,
`split/` (one job across partitions), `power/` (the power program), `schedule/` (the shared
cluster), `sweep/` (design spaces); `jobs.py` plans whichever job a design names and
`compare.py` sets two designs side by side."""
