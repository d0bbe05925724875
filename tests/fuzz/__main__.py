"""A fuzz campaign from the command line, with a summary table:

    python -m tests.fuzz --cases 5000 [--seed S] [--save DIR] [--shrink]
    python -m tests.fuzz --replay DIR/*.mlir

Every case is drawn by hypothesis and run to the end (a failure does not stop the run);
`--save DIR` keeps, per distinct failure, the shortest case seen; `--shrink` then has
hypothesis shrink each distinct failure to a minimal case (saved the same way).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

from .mutations import cases
from .oracle import FAILURES, FuzzFailure, Verdict, Worker, assert_clean, load_reproducer, save

COLUMNS = [("clean errors", "error"), ("successes checked", "checked"), ("other successes", "ok"),
           ("skipped", "skipped"), ("tracebacks", "traceback"), ("internal errors", "internal"),
           ("bad messages", "badmsg"), ("crashes", "crash"), ("hangs", "hang"), ("wrong results", "wrong")]


def campaign(worker: Worker, n: int, rng_seed: int, save_dir: Path | None) -> tuple[int, Counter, dict]:
    """Run n cases; the steps per outcome, and per failure key (count, first verdict)."""
    tally: Counter = Counter()
    failures: dict[str, list] = {}
    count = [0]
    start = time.monotonic()

    @settings(max_examples=n, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @seed(rng_seed)
    @given(case=cases())
    def run(case):
        count[0] += 1
        for v in worker.run(case):
            tally[v.outcome] += 1
            if v.failed:
                failures.setdefault(v.key(), [0, v, None])[0] += 1
                if save_dir is not None:
                    failures[v.key()][2] = save(save_dir, case, v)
        if count[0] % 50 == 0:
            bad = sum(tally[f] for f in FAILURES)
            print(f"  {count[0]} cases, {bad} failing steps, {time.monotonic() - start:.0f} s", file=sys.stderr)

    run()
    return count[0], tally, failures


def shrink(worker: Worker, n: int, rng_seed: int, save_dir: Path | None) -> None:
    """Draw the same cases again and let hypothesis shrink each distinct failure."""
    @settings(max_examples=n, phases=[Phase.generate, Phase.shrink], database=None, deadline=None,
              report_multiple_bugs=True, suppress_health_check=list(HealthCheck))
    @seed(rng_seed)
    @given(case=cases())
    def run(case):
        assert_clean(case, worker.run(case), save_dir)

    try:
        run()
    except (FuzzFailure, BaseExceptionGroup):
        pass


def table(n: int, tally: Counter) -> str:
    head = ["cases", "steps"] + [name for name, _ in COLUMNS]
    row = [n, sum(tally.values())] + [tally[outcome] for _, outcome in COLUMNS]
    return "\n".join(["| " + " | ".join(map(str, r)) + " |" for r in (head, ["---:"] * len(head), row)])


def replay(worker: Worker, paths: list[Path]) -> int:
    failed = 0
    for path in paths:
        if not path.is_file():
            print(f"{path}: no such file")
            failed += 1
            continue
        verdicts: list[Verdict] = worker.run(load_reproducer(path))
        bad = [v for v in verdicts if v.failed]
        failed += bool(bad)
        print(f"{path}: {'FAIL' if bad else 'clean'}")
        for v in bad:
            print(f"  {v.describe()}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.fuzz", description="Run mutated corpus inputs through loom-opt and compile(); "
        "print a summary table and the distinct failures.")
    ap.add_argument("--cases", type=int, default=200, help="how many cases to draw (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="hypothesis' random seed (default 0)")
    ap.add_argument("--save", type=Path, metavar="DIR", help="directory for reproducers, one per distinct failure")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per step before it is a hang (default 20)")
    ap.add_argument("--shrink", action="store_true", help="shrink each distinct failure to a minimal case")
    ap.add_argument("--replay", nargs="+", type=Path, metavar="FILE",
                    help="run saved reproducers again and say which still fail")
    args = ap.parse_args(argv)
    if args.shrink and not args.save:
        ap.error("--shrink needs --save DIR: the shrunk cases are written there")
    with Worker(timeout=args.timeout) as worker:
        if args.replay:
            return replay(worker, args.replay)
        start = time.monotonic()
        n, tally, failures = campaign(worker, args.cases, args.seed, args.save)
        print(f"{n} cases in {time.monotonic() - start:.0f} s\n\n{table(n, tally)}\n")
        for key, (count, v, path) in sorted(failures.items(), key=lambda kv: -kv[1][0]):
            print(f"{count:5d}  {key}\n       {v.describe()[:300]}" + (f"\n       {path}" if path else ""))
        if failures and args.shrink:
            shrink(worker, args.cases, args.seed, args.save)
            for path in sorted(args.save.glob("*.mlir")) if args.save else ():
                print(f"shrunk: {path}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
