"""Checking, lowering, the performance model, rendering and the driver."""
