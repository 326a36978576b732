"""Cluster operations: many jobs on one shared cluster, scheduled Kubernetes-style in a
discrete-event simulation, held against a MILP optimum, with goodput under failures."""
