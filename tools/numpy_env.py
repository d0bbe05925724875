"""Set numpy up for a fair timing, in a benchmark process only (never in tests or CI).

Must run before numpy is imported: OpenBLAS reads its environment when it loads."""

import os


def prepare_numpy_for_timing(threads: int | None = 1) -> str:
    """Drop the OpenBLAS overrides that select a slower kernel, pin BLAS to `threads`
    (as many as Loom's kernels are compiled for; None: Loom's default, OMP_NUM_THREADS
    or the cores), and return a line naming the kernel threadpoolctl sees."""
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        os.environ.pop(var, None)
    import numpy  # noqa: F401  (loads OpenBLAS, so that threadpoolctl sees it)
    import threadpoolctl

    if threads is None:
        from passes.support.target import default_threads

        threads = default_threads()

    threadpoolctl.threadpool_limits(threads, user_api="blas")
    info = [
        f"{p.get('internal_api')} {p.get('version')} kernel={p.get('architecture')} threads={p.get('num_threads')}"
        for p in threadpoolctl.threadpool_info()
        if p.get("user_api") == "blas"
    ]
    return "numpy BLAS: " + ("; ".join(info) or "none found")
