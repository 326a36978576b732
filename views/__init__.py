"""Plans and IR as text, JSON, diagrams and reports."""
