"""Checks that relate several fields of one declaration, one module per kind of declaration
(hardware, parts, switches, models, jobs and workloads, train and serve jobs); `entity.py`
runs those of one declaration."""
