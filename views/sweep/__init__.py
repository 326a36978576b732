"""A sweep's views: its table, plots and HTML report."""
