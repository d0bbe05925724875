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
import warnings
from pathlib import Path

import numpy as np
import pytest
from kernels import matmul

import compiler
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


@pytest.fixture
def fork_state():
    """compiler.jit.kernel's fork flags (lists the generated calls hold), restored in place after the test."""
    from compiler.jit import kernel as runtime

    saved = runtime._fork_unwarned[0], runtime._parallel_made[0]
    yield runtime
    runtime._fork_unwarned[0], runtime._parallel_made[0] = saved


def test_the_fork_hook_marks_the_child_only_after_a_parallel_kernel(monkeypatch, fork_state):
    """In-process, without forking: the hook run in a forked child asks libgomp to run
    no parallel region on a team (omp_set_max_active_levels) and marks the child only
    where a parallel kernel was made before the fork."""
    runtime = fork_state
    asked = []
    monkeypatch.setattr(runtime, "symbol_address", lambda name: asked.append(name))  # found nowhere: not called
    runtime._fork_unwarned[0] = runtime._parallel_made[0] = False
    runtime._serial_after_fork()
    assert asked == [] and runtime._fork_unwarned == [False]
    runtime._parallel_made[0] = True
    runtime._serial_after_fork()
    assert asked == ["omp_set_max_active_levels"] and runtime._fork_unwarned == [True]


def test_a_forked_child_warns_once_whichever_way_a_parallel_kernel_is_called(fork_state):
    """The ForkWarning comes at the first call of a parallel kernel, by the generated call
    or the checked one, and once; a serial kernel neither warns nor uses it up. Results
    stay exact."""
    runtime = fork_state
    parallel = compiler.compile(matmul((96, 96), (96, 96), (96, 96), np.float32), num_threads=2)
    serial = compiler.compile(matmul((8, 8), (8, 8), (8, 8), np.float32), num_threads=1)
    assert parallel._parallel and not serial._parallel
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-4, 5, (96, 96)).astype(np.float32) for _ in range(2))
    s = rng.integers(-4, 5, (8, 8)).astype(np.float32)
    for call in (parallel, parallel._call):
        arrays = (a, b)
        runtime._fork_unwarned[0] = True
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_array_equal(serial(s, s), s @ s)
        assert runtime._fork_unwarned == [True]
        with pytest.warns(runtime.ForkWarning, match="forked after kernels ran on libgomp's threads"):
            got = call(a, b) if call is parallel else call(arrays)
        np.testing.assert_array_equal(got, a @ b)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_array_equal(parallel(a, b), a @ b)
            np.testing.assert_array_equal(parallel._call(arrays), a @ b)


def test_a_serial_kernel_made_after_a_parallel_one_leaves_the_child_serial(monkeypatch, fork_state):
    """The mark a parallel kernel leaves stays when serial kernels are made after it: a
    child forked then still runs its parallel regions on one thread."""
    runtime = fork_state
    runtime._fork_unwarned[0] = runtime._parallel_made[0] = False
    parallel = compiler.compile(matmul((96, 96), (96, 96), (96, 96), np.float32), num_threads=2, cache=False)
    serial = compiler.compile(matmul((8, 8), (8, 8), (8, 8), np.float32), num_threads=1, cache=False)
    assert parallel._parallel and not serial._parallel
    asked = []
    monkeypatch.setattr(runtime, "symbol_address", lambda name: asked.append(name))
    runtime._serial_after_fork()
    assert asked == ["omp_set_max_active_levels"] and runtime._fork_unwarned == [True]
