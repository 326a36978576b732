"""What a design costs: the bill of materials (`bom.py`) and the total cost of ownership
(`tco.py`), from the prices a design states."""
