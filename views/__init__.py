"""Views of plans and sweeps: tables, charts, reports."""
