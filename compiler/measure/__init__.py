"""Checking and timing kernels: run-and-check against numpy, the FMA peak."""
