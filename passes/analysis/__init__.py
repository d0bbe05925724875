"""Analyses the schedule passes share: loops, affine forms, dependences, the cost model."""
