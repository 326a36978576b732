"""Views: plans, IR and schedules as text, JSON and pictures."""
