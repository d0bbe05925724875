"""loom-bench: Loom's matmul beside numpy, in one process, interleaved, medians.

    loom-bench --stages [--sizes 8,32,128] [--repeat N] [--budget S] [--json] [--show-ir]

`--stages` retells the classic report on CPU matmul optimizations with Loom's passes:
naive, tiling, permutation, invariant hoisting, unrolling; each stage checked against
numpy and timed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tools import console_entry


def parse_args(argv):
    p = argparse.ArgumentParser(prog="loom-bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--stages", action="store_true", help="the staged table (naive -> tiling -> ...)")
    p.add_argument("--sizes", default="8,32,128,256,512,1024", help="square sizes N (default 8,...,1024)")
    p.add_argument("--repeat", type=int, default=10, help="at most this many timed runs per stage")
    p.add_argument("--budget", type=float, default=2.0, help="seconds of timing per stage and size")
    p.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    p.add_argument("--show-ir", action="store_true", help="print each stage's loop nest (at the smallest N)")
    args = p.parse_args(argv)
    try:
        args.sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        p.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if min(args.sizes) < 1 or args.repeat < 1 or args.budget <= 0:
        p.error("--sizes, --repeat and --budget must be positive")
    if not args.stages:
        p.error("nothing to do: pass --stages")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    from tools.numpy_env import prepare_numpy_for_timing

    blas = prepare_numpy_for_timing()
    from compiler import bench
    from compiler.diagnostics import LoomError

    shown: set[str] = set()

    def on_row(row, info):
        if not args.json:
            print(f"  N={row.n:<5} {row.stage:<40} {row.seconds:.4g} s  {row.gflops:7.2f} GFLOP/s"
                  f"  (numpy {row.numpy_gflops:.2f})", file=sys.stderr)
        if args.show_ir and row.stage not in shown:
            shown.add(row.stage)
            print(f"\n// ----- {row.stage}: pipeline {row.pipeline!r}, N={row.n}", file=sys.stderr)
            affine_ir = [ir for name, ir in info["stages"].items() if "affine.for" in ir]
            print(affine_ir[-1] if affine_ir else "", file=sys.stderr)

    try:
        rows = bench.run_stages(args.sizes, repeat=args.repeat, budget=args.budget, on_row=on_row)
    except LoomError as e:
        print(e, file=sys.stderr)
        return 1
    machine = bench_machine()
    if args.json:
        print(json.dumps({"machine": machine, "blas": blas, "rows": bench.as_json(rows)}, indent=1))
    else:
        print(f"machine: {machine}\n{blas}\n")
        print(bench.markdown(rows))
    return 0 if all(r.ok for r in rows) else 1


def bench_machine() -> str:
    import platform

    import llvmlite.binding as llvm

    return f"{platform.machine()}, {os.cpu_count()} cores, LLVM host CPU {llvm.get_host_cpu_name()}"


entry = console_entry(main)


if __name__ == "__main__":
    sys.exit(entry())
