"""cvxpy formulations: parallelism and placement, power, heterogeneous split."""
