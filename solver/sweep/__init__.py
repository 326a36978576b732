"""Design-space sweeps: axes, points, the engine (in process or on Dask), Pareto fronts."""
