"""cvxpy formulations and searches: parallelism and placement, power, heterogeneous split."""
