"""Views: plans, IR, sweeps and schedules as text, JSON, tables and pictures."""
