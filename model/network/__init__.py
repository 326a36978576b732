"""The network as collectives see it: where a group's members meet on the tiers (placement),
and what a collective over them costs by message size, algorithm and protocol. `model/comms.py`
is the interface the training and serving rooms call."""
