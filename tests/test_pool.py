"""The buffer pool (compiler/jit/pool.py): large temporaries are parked between calls and
reused, small ones are not pooled; concurrent calls each get a buffer of their own;
`clear()` frees what is parked."""

import ctypes
import platform
import subprocess
import sys
import threading

import numpy as np
import pytest

import compiler
from compiler.jit import pool
from compiler.jit.engine import compile_ir
from kernels import conv2d, small_ints


def _conv_source():
    # a padded 3x3 conv, direct: X in its planes with its border (110 KiB) and Y with the
    # windows' overhang (105 KiB) are temporaries above pool.MIN_BYTES
    return conv2d((1, 16, 40, 40), (16, 16, 3, 3), (1, 16, 40, 40), (1, 1), (1, 1), (1, 1), np.float32)


def test_large_temporaries_are_parked_and_reused():
    src = _conv_source()
    kern = compiler.compile(src, pipeline="default", num_threads=1)
    assert "@loom_take(i64 64" in kern.llvm_ir and "@loom_give(ptr" in kern.llvm_ir
    rng = np.random.default_rng(0)
    x, w = small_ints(rng, (1, 16, 40, 40), np.float32), small_ints(rng, (16, 16, 3, 3), np.float32)
    want = compiler.reference(src, x, w).astype(np.float32)
    pool.clear()
    np.testing.assert_array_equal(kern(x, w), want)
    parked = pool.clear()
    assert parked >= 2  # every large temporary of the call, parked when it was freed
    for _ in range(3):
        np.testing.assert_array_equal(kern(x, w), want)
    assert pool.clear() == parked  # reused, not piled up


def test_concurrent_calls_each_get_their_own_buffers():
    src = _conv_source()
    kern = compiler.compile(src, pipeline="default", num_threads=1)
    rng = np.random.default_rng(1)
    inputs = [(small_ints(rng, (1, 16, 40, 40), np.float32), small_ints(rng, (16, 16, 3, 3), np.float32))
              for _ in range(4)]
    wants = [compiler.reference(src, x, w).astype(np.float32) for x, w in inputs]
    failures = []

    def work(i):
        for _ in range(20):
            if not np.array_equal(kern(*inputs[i]), wants[i]):
                failures.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert pool.clear() <= pool.SLOTS


def test_small_temporaries_are_not_pooled():
    src = conv2d((1, 2, 6, 6), (3, 2, 3, 3), (1, 3, 6, 6), (1, 1), (1, 1), (1, 1), np.float32)
    llvm_ir = compiler.compile(src, pipeline="default", num_threads=1).llvm_ir
    assert "loom_take" not in llvm_ir and "@aligned_alloc(" in llvm_ir and "@free(" in llvm_ir


def test_a_parked_buffer_is_handed_out_only_for_its_own_size():
    """loom_take reuses a parked buffer only for a request of exactly its size: a larger
    request handed it would write past its end, a smaller one would keep its bytes idle.
    Driven through the pool's own functions, as a kernel calls them."""
    take = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(pool.address("loom_take"))
    give = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(pool.address("loom_give"))
    size = 1 << 20
    pool.clear()
    parked = take(64, size)
    assert parked
    give(parked, size)
    others = [(take(64, size + 64), size + 64), (take(64, size - 64), size - 64)]
    assert all(p and p != parked for p, _ in others), "a parked buffer handed out for another size"
    assert take(64, size) == parked, "the parked buffer not reused for its own size"
    for p, n in [*others, (parked, size)]:
        give(p, n)
    assert pool.clear() == 3


#: takes and parks a buffer of %bytes %n times, as kernels on several threads do; returns
#: how many of the pointers taken were not buffers (null, or 1: the mark of a busy slot)
CHURN = """
declare ptr @loom_take(i64, i64)
declare void @loom_give(ptr, i64)

define i64 @churn(i64 %bytes, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %step]
  %bad = phi i64 [0, %entry], [%bad2, %step]
  %p = call ptr @loom_take(i64 64, i64 %bytes)
  %pi = ptrtoint ptr %p to i64
  %real = icmp ugt i64 %pi, 1
  br i1 %real, label %park, label %step
park:
  call void @loom_give(ptr %p, i64 %bytes)
  br label %step
step:
  %more = add i64 %bad, 1
  %bad2 = select i1 %real, i64 %bad, i64 %more
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %out, label %loop
out:
  ret i64 %bad2
}
"""


def test_native_threads_taking_and_parking_at_once():
    """Four threads take and park buffers of their own size in a native loop (no GIL
    between the calls): a slot another thread is filling or emptying is never claimed,
    so every pointer handed out is a buffer (a take that finds its size's slot busy
    allocates another: at most SLOTS stay parked)."""
    pool.install()
    jit = compile_ir(CHURN)
    churn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(jit.function_address("churn"))
    pool.clear()
    bad: list[int] = []
    threads = [threading.Thread(target=lambda i=i: bad.append(churn((i + 1) << 12, 200_000))) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == [0] * 4, f"pointers that were not buffers handed out: {bad}"
    assert 4 <= pool.clear() <= pool.SLOTS


def test_at_most_slots_buffers_stay_parked_and_null_is_not_parked():
    """SLOTS + 1 buffers of distinct sizes given back: SLOTS are parked (each handed back
    for its own size), the last one freed; loom_give(null) parks nothing; a buffer taken
    new has the alignment asked."""
    take = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(pool.address("loom_take"))
    give = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(pool.address("loom_give"))
    pool.clear()
    give(None, 1 << 16)
    assert pool.clear() == 0
    sizes = [(i + 1) << 16 for i in range(pool.SLOTS + 1)]
    buffers = [take(4096, n) for n in sizes]
    assert all(p and p % 4096 == 0 for p in buffers)
    for p, n in zip(buffers, sizes):
        give(p, n)
    again = [take(64, n) for n in sizes]
    assert again[: pool.SLOTS] == buffers[: pool.SLOTS]  # each parked buffer for its size
    for p, n in zip(again, sizes):
        give(p, n)
    assert pool.clear() == pool.SLOTS
    assert pool.clear() == 0


def _relu_source(rows: int, cols: int) -> str:
    t = f"tensor<{rows}x{cols}xf32>"
    return f"func.func @f(%x: {t}) -> {t} {{\n  %y = loom.relu %x : {t}\n  func.return %y : {t}\n}}"


def test_large_outputs_come_from_the_pool_and_go_back_when_the_array_dies():
    kern = compiler.compile(_relu_source(256, 256))  # a 256 KiB output
    x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    pool.clear()
    y = kern(x)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert y.flags.c_contiguous and y.flags.writeable and y.flags.aligned and y.ctypes.data % 64 == 0
    first = y.ctypes.data
    view = y[::2]  # a view keeps the buffer
    del y
    other = kern(x)
    assert other.ctypes.data != first
    np.testing.assert_array_equal(view, np.maximum(x, 0)[::2])
    del view, other
    # both parked again: the next calls get them back, no new memory
    again = [kern(x), kern(x)]
    assert first in {a.ctypes.data for a in again}
    np.testing.assert_array_equal(again[0], again[1])


def test_small_outputs_are_numpys_own():
    kern = compiler.compile(_relu_source(8, 8))
    y = kern(np.ones((8, 8), np.float32))
    assert y.base is None and y.flags.owndata


FAULTS = """
import ctypes, resource, sys
import numpy as np
import compiler
libc = ctypes.CDLL(None)
libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD fixed: every large malloc maps fresh pages, freed ones go back
t = "tensor<1024x2048xf32>"  # 8 MiB: 2048 pages
kern = compiler.compile(f"func.func @f(%x: {t}) -> {t} {{\\n  %y = loom.relu %x : {t}\\n  func.return %y : {t}\\n}}")
x = np.ones((1024, 2048), np.float32)
use_torch = sys.argv[1] == "torch"
if use_torch:
    import torch
    conv, image = torch.nn.Conv2d(64, 64, 3, padding=1), torch.randn(1, 64, 112, 112)
def faults(fn):
    spent = []
    for _ in range(6):
        if use_torch:
            with torch.no_grad():
                conv(image)  # torch allocates and frees its 3 MiB output
        else:
            np.ones(12 << 20, np.uint8)  # 12 MiB mapped, touched, unmapped
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        y = fn()
        spent.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        del y
    return sorted(spent[1:])  # (the first call maps what the pool then keeps)
def plain():
    y = np.empty((1024, 2048), np.float32)
    y[...] = 1
    return y
print(faults(lambda: kern(x))[-1], faults(plain)[2])  # Loom's most, numpy's median
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt(M_MMAP_THRESHOLD) is glibc's")
@pytest.mark.parametrize("between", ["numpy", "torch"])
def test_outputs_do_not_fault_in_fresh_pages_between_other_code(between):
    """Where the allocator hands back memory that other code freed (glibc with a fixed mmap
    threshold: each 8 MiB array is fresh pages, faulted in as it is written; in a model, torch's ops
    between Loom's calls), the pool's outputs stay mapped: no page faults per call."""
    if between == "torch":
        pytest.importorskip("torch")
    run = subprocess.run([sys.executable, "-c", FAULTS, between], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    loom_faults, numpy_faults = map(int, run.stdout.split())
    if numpy_faults < 64:  # (transparent huge pages: 2 MiB a fault)
        pytest.skip(f"fresh pages cost numpy only {numpy_faults} faults here: nothing to avoid")
    assert loom_faults <= 16, (loom_faults, numpy_faults)  # numpy's array: hundreds (516 on znver4's VM)
