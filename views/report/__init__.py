"""The self-contained HTML report (`page.py`): its headline, plots, diagrams and roofline."""
