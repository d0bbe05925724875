"""compile(algorithms=...): which algorithms a kernel may use (no xDSL here: the driver
checks the value before a disk-cache hit, which loads no compiler).

"exact" computes what the ops say, up to the reassociation of sums (the default); "fast"
also lets in algorithms that round differently, each with a stated bound: Winograd's
convolution (loom-winograd, docs/guide/winograd.md). Each maps to the passes it puts in
front of the pipeline.
"""

from __future__ import annotations

ALGORITHMS: dict[str, tuple[str, ...]] = {"exact": (), "fast": ("loom-winograd",)}


def check_algorithms(algorithms: object) -> str:
    """`algorithms`, or a ValueError naming the choices."""
    if not isinstance(algorithms, str) or algorithms not in ALGORITHMS:
        raise ValueError(f"algorithms must be {' or '.join(map(repr, ALGORITHMS))}, got {algorithms!r}")
    return algorithms
