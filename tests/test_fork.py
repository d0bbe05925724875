"""Parallel kernels in processes forked after libgomp's team started (compiler/jit/kernel.py):
the team's threads exist only in the parent, and a child that waited for them hung
forever. A child runs its parallel kernels on its one thread, with one ForkWarning, and
gets the same results; a kernel compiled in the child, and one called from a thread the
child starts, run too. Checked through os.fork and multiprocessing's fork start method,
in a process of its own whose waits have deadlines: a regression fails, it never hangs
the suite. Results are compared exactly with numpy on small integers.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from passes.support.target import openmp_runtime

pytestmark = pytest.mark.skipif(openmp_runtime() is None, reason="libgomp is not installed")

ROOT = Path(__file__).parent.parent
TESTS = Path(__file__).parent

#: run a parallel matmul, fork (os.fork, then a multiprocessing pool of the fork start
#: method) and report, as JSON, what the children computed and warned, or which hung
_FORKS = '''
import json, multiprocessing, os, sys, threading, time, warnings
import numpy as np
import compiler
from compiler.jit.kernel import ForkWarning
from kernels import matmul

kernel = compiler.compile(matmul((256, 256), (256, 256), (256, 256), np.float32), num_threads=4, remarks=True)
# a serial kernel made after the parallel one: the fork still finds a parallel kernel was made
serial = compiler.compile(matmul((8, 8), (8, 8), (8, 8), np.float32), num_threads=1)
assert kernel._parallel and not serial._parallel
rng = np.random.default_rng(0)
a, b = (rng.integers(-4, 5, (256, 256)).astype(np.float32) for _ in range(2))


def right(k, x, y) -> bool:
    return bool((k(x, y) == x @ y).all())


def in_child() -> dict:
    """What a forked child reports: its calls of the parent's kernel, of a kernel
    compiled in it and of the parent's kernel from a thread it starts."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calls = [right(kernel, a, b) for _ in range(3)]
        fresh = compiler.compile(matmul((200, 300), (300, 100), (200, 100), np.float32), num_threads=3)
        x, y = rng.integers(-4, 5, (200, 300)).astype(np.float32), rng.integers(-4, 5, (300, 100)).astype(np.float32)
        calls.append(right(fresh, x, y))
        done = []
        thread = threading.Thread(target=lambda: done.append(right(kernel, a, b)))
        thread.start()
        thread.join()
    return {"right": calls + done, "warnings": [str(w.message) for w in caught if w.category is ForkWarning]}


def in_pool_worker(i: int) -> tuple[bool, int]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok = right(kernel, a, b)
    return ok, sum(w.category is ForkWarning for w in caught)


assert any("run in parallel" in r for r in kernel.remarks) and right(kernel, a, b)  # the team runs in the parent
report_file = sys.argv[1]
pid = os.fork()
if pid == 0:
    with open(report_file, "w") as f:
        json.dump(in_child(), f)
    os._exit(0)
deadline = time.monotonic() + 120
while os.waitpid(pid, os.WNOHANG) == (0, 0):
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print(json.dumps({"hang": "os.fork"}))
        sys.exit(0)
    time.sleep(0.05)
with open(report_file) as f:
    forked = json.load(f)
try:
    with multiprocessing.get_context("fork").Pool(2) as workers:
        pooled = workers.map_async(in_pool_worker, range(4)).get(timeout=120)
except multiprocessing.TimeoutError:
    print(json.dumps({"hang": "multiprocessing"}))
    sys.exit(0)
print(json.dumps({"forked": forked, "pool": pooled, "parent": right(kernel, a, b)}))
'''


def test_forked_children_run_parallel_kernels_serially(tmp_path):
    done = subprocess.run([sys.executable, "-c", _FORKS, str(tmp_path / "child.json")], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}"}, timeout=500,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert "hang" not in run, f"a child forked after a parallel kernel ran hung ({run['hang']})"
    forked = run["forked"]
    assert forked["right"] == [True] * 5, forked  # the parent's kernel 3 times, one compiled there, one on a thread
    assert len(forked["warnings"]) == 1 and "forked" in forked["warnings"][0], forked
    assert all(ok for ok, _ in run["pool"]) and run["parent"], run
    warned = [n for _, n in run["pool"]]
    assert set(warned) <= {0, 1} and 1 <= sum(warned) <= 2, run  # once per worker process
