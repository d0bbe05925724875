"""loom-run: compile a .mlir kernel, run it on random inputs, check it against numpy.

    loom-run FILE... [--entry F] [--pipeline P] [--budget S] [--rounds R] [--repeat N]
                     [--seed S] [--numpy] [--explain] [--no-cache]

Prints, per file, the max error against the float64 numpy reference with its bound
(about 4*K*eps*max|ref|, K the reduction length) over every result, and for a function
on memrefs over every argument it writes (arguments with a strided layout are views into
larger buffers); then the median time and GFLOP/s, timed like loom-bench: R rounds
(default 3) of as many runs as fit S seconds (default 0.5; at least 3, at most N), with
numpy's runs interleaved under --numpy, whose loom/numpy speed is the median of the
rounds' ratios, printed with their range. With --explain, each file's report follows
(compiler/explain/): the loop nests stage by stage, the schedule's decisions and their
reasons, the estimated traffic per memory level, the GFLOP/s against the machine's peak.
With --no-cache, kernels are compiled afresh: the kernel caches (in memory and on disk,
compiler/jit/disk_cache.py) are neither read nor written.
Exit status 0 when every result is within its bound, 1 otherwise or on bad input.
"""

from __future__ import annotations

import argparse
import sys

from tools import console_entry, report_error


def parse_args(argv):
    p = argparse.ArgumentParser(prog="loom-run", description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", metavar="FILE", help=".mlir file(s) with loom kernels")
    p.add_argument("--entry", help="function to run (default: the only one in the file)")
    p.add_argument("--pipeline", default="default", help="named pipeline or pass list (default: default)")
    p.add_argument("--budget", type=float, default=0.5, help="seconds of timing per round (default 0.5)")
    p.add_argument("--rounds", type=int, default=3, help="timing rounds; their median is reported (default 3)")
    p.add_argument("--repeat", type=int, default=100, help="at most this many timed runs per round (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--threads", "--num-threads", dest="num_threads", type=int, default=None,
                   help="threads for the parallel loops (default: OMP_NUM_THREADS, else the cores)")
    p.add_argument("--numpy", action="store_true",
                   help="also time numpy on the same work, in the inputs' dtype, in this process")
    p.add_argument("--explain", action="store_true",
                   help="then explain the kernel: its loop nests stage by stage, the schedule's decisions and why, the "
                        "estimated traffic per memory level, its GFLOP/s against the machine's FMA peak")
    p.add_argument("--no-cache", action="store_true",
                   help="compile afresh: neither read nor write the kernel caches (in memory and on disk)")
    args = p.parse_args(argv)
    if args.repeat < 1 or args.rounds < 1 or not args.budget > 0 or (args.num_threads is not None and args.num_threads < 1):
        p.error("--repeat, --rounds, --budget and --threads must be positive")
    return args


def run_file(path: str, args) -> bool:
    from compiler.measure.runner import run_and_check

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        print(f"{path}: error: cannot read input file: {e.strerror}", file=sys.stderr)
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        print(f"{path}: error: input is not UTF-8 text (a binary file?)", file=sys.stderr)
        return False
    report = run_and_check(
        text, filename=path, entry=args.entry, pipeline=args.pipeline, repeat=args.repeat, budget=args.budget,
        rounds=args.rounds, seed=args.seed, num_threads=args.num_threads, compare_numpy=args.numpy,
    )
    print(report.format())
    if args.explain:
        from compiler.explain.report import explain_source

        print()
        print(explain_source(text, filename=path, entry=report.entry, pipeline=args.pipeline,
                             num_threads=args.num_threads, seconds=report.seconds))
    return report.ok


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.no_cache:
        from compiler.jit.disk_cache import disk_cache
        from compiler.driver import set_cache_size

        set_cache_size(0)
        disk_cache.disable()
    if args.numpy:
        from tools.numpy_env import prepare_numpy_for_timing

        print(prepare_numpy_for_timing(args.num_threads))
    ok = True
    for path in args.files:
        try:
            ok &= run_file(path, args)
        except KeyboardInterrupt:
            return 130
        except Exception as e:
            report_error(path, e)
            ok = False
    return 0 if ok else 1


entry = console_entry(main)


if __name__ == "__main__":
    sys.exit(entry())
