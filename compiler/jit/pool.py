"""The buffer pool: large temporaries kept from one kernel call to the next.

A kernel's temporaries (packed panels, im2col's patch matrix) are allocated and freed on
every call. glibc serves a request of more than its mmap threshold (128 KiB, growing with
use to at most 32 MiB) with fresh pages from the kernel, each faulted in and zeroed on
first touch: the 59 MB patch matrix of a batch-8 ResNet stem cost as much again as the
convolution itself. So loom-convert-to-llvm lowers an allocation of `MIN_BYTES` or more
(passes/conversion/to_llvm/abi.py) to `loom_take(align, bytes)` and its free to
`loom_give(ptr, bytes)`:

- `loom_give` parks the buffer in one of `SLOTS` slots (the first empty one; with none
  empty it frees the buffer);
- `loom_take` reuses a parked buffer of exactly that many bytes, else calls
  `aligned_alloc` (and returns its null on failure, which the kernel reports).

The slots are claimed with compare-and-swap, so concurrent calls (Python threads, or
kernels on libgomp's team) each get a buffer of their own. At most `SLOTS` buffers stay
parked between calls; `clear()` frees them.

A kernel's outputs come from the pool too (`empty`, which `install()` makes the kernels'
allocator of their results: `compiler.jit.kernel.set_output_allocator`): an output of
`MIN_BYTES` or more is a numpy array over a buffer `loom_take` gave, parked again by
`loom_give` when the array and every view of it (a torch tensor made with
`torch.from_numpy`, for one) are gone. Fresh numpy arrays would come from glibc, which,
where other code (torch) has just freed memory to the kernel, hands back pages that fault
in and are zeroed while the kernel writes them: a batch-8 ResNet stem through the torch
backend ran at a third of its speed, 620 page faults per call.

The pool is LLVM IR, one copy of its machine code per process, made when a kernel first
needs it (read from the disk cache where it is there, else compiled: compiler/jit/disk_cache.py
`runtime_code`). `install()` registers its functions with the loader's symbol table
(compiler/jit/loader.py), where the JIT and the loader resolve a kernel's calls, as
numba's runtime registers its NRT functions with the JIT: the code that makes and loads
kernels never imports the pool. compiler/driver.py installs it.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import math
import weakref

import numpy as np

from compiler.jit import kernel
from compiler.jit.disk_cache import runtime_code
from compiler.jit.loader import LOCK, register_symbols
from passes.support.heap import HEAP_ALIGNMENT, MIN_BYTES

SLOTS = 16
_BUSY = 1  # a slot being filled or emptied

IR = f"""
@loom_pool_ptr = internal global [{SLOTS} x ptr] zeroinitializer, align 64
@loom_pool_bytes = internal global [{SLOTS} x i64] zeroinitializer, align 64

declare ptr @aligned_alloc(i64, i64)
declare void @free(ptr)

; a parked buffer of exactly %bytes, else a new one
define ptr @loom_take(i64 %align, i64 %bytes) nounwind {{
entry:
  br label %slot
slot:
  %i = phi i64 [0, %entry], [%next, %skip]
  %pp = getelementptr [{SLOTS} x ptr], ptr @loom_pool_ptr, i64 0, i64 %i
  %p = load atomic ptr, ptr %pp acquire, align 8
  %pi = ptrtoint ptr %p to i64
  %full = icmp ugt i64 %pi, {_BUSY}
  br i1 %full, label %claim, label %skip
claim:
  %cx = cmpxchg ptr %pp, ptr %p, ptr inttoptr (i64 {_BUSY} to ptr) acq_rel acquire
  %won = extractvalue {{ ptr, i1 }} %cx, 1
  br i1 %won, label %check, label %skip
check:
  %bp = getelementptr [{SLOTS} x i64], ptr @loom_pool_bytes, i64 0, i64 %i
  %b = load atomic i64, ptr %bp acquire, align 8
  %fits = icmp eq i64 %b, %bytes
  br i1 %fits, label %hit, label %putback
hit:
  store atomic ptr null, ptr %pp release, align 8
  ret ptr %p
putback:
  store atomic ptr %p, ptr %pp release, align 8
  br label %skip
skip:
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, {SLOTS}
  br i1 %done, label %miss, label %slot
miss:
  %q = call ptr @aligned_alloc(i64 %align, i64 %bytes)
  ret ptr %q
}}

; park %p (of %bytes) in an empty slot, else free it
define void @loom_give(ptr %p, i64 %bytes) nounwind {{
entry:
  %null = icmp eq ptr %p, null
  br i1 %null, label %out, label %slot
slot:
  %i = phi i64 [0, %entry], [%next, %skip]
  %pp = getelementptr [{SLOTS} x ptr], ptr @loom_pool_ptr, i64 0, i64 %i
  %cx = cmpxchg ptr %pp, ptr null, ptr inttoptr (i64 {_BUSY} to ptr) acq_rel acquire
  %won = extractvalue {{ ptr, i1 }} %cx, 1
  br i1 %won, label %park, label %skip
park:
  %bp = getelementptr [{SLOTS} x i64], ptr @loom_pool_bytes, i64 0, i64 %i
  store atomic i64 %bytes, ptr %bp release, align 8
  store atomic ptr %p, ptr %pp release, align 8
  ret void
skip:
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, {SLOTS}
  br i1 %done, label %drop, label %slot
drop:
  call void @free(ptr %p)
  br label %out
out:
  ret void
}}

; free every parked buffer; returns how many
define i64 @loom_pool_clear() nounwind {{
entry:
  br label %slot
slot:
  %i = phi i64 [0, %entry], [%next, %skip]
  %n = phi i64 [0, %entry], [%n2, %skip]
  %pp = getelementptr [{SLOTS} x ptr], ptr @loom_pool_ptr, i64 0, i64 %i
  %p = load atomic ptr, ptr %pp acquire, align 8
  %pi = ptrtoint ptr %p to i64
  %full = icmp ugt i64 %pi, {_BUSY}
  br i1 %full, label %claim, label %skip
claim:
  %cx = cmpxchg ptr %pp, ptr %p, ptr null acq_rel acquire
  %won = extractvalue {{ ptr, i1 }} %cx, 1
  br i1 %won, label %drop, label %skip
drop:
  call void @free(ptr %p)
  %ninc = add i64 %n, 1
  br label %skip
skip:
  %n2 = phi i64 [%n, %slot], [%n, %claim], [%ninc, %drop]
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, {SLOTS}
  br i1 %done, label %out, label %slot
out:
  ret i64 %n2
}}
"""

FUNCTIONS = ("loom_take", "loom_give", "loom_pool_clear")


@functools.cache
def _code():
    """The pool's machine code, for the life of the process (its buffers outlive any one
    kernel). Call with compiler.jit.loader.LOCK held."""
    return runtime_code("pool", IR)


def address(name: str) -> int:
    """The address of the pool's function `name` (one of FUNCTIONS)."""
    with LOCK:
        return _code().function_address(name)


def install() -> None:
    """Resolve kernels' calls to the pool's functions to its one copy (made when first
    needed): registered with the loader's symbol table; and make `empty` the kernels'
    allocator of their outputs."""
    register_symbols(FUNCTIONS, address)
    kernel.set_output_allocator(empty, MIN_BYTES)


@functools.cache
def _functions() -> tuple[ctypes._CFuncPtr, ctypes._CFuncPtr]:
    take = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(address("loom_take"))
    give = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(address("loom_give"))
    return take, give


_exiting: list[bool] = []  # once set, a dying array's buffer is left to the process's end
atexit.register(_exiting.append, True)  # (the pool's code may be gone before the last arrays)


def _give(pointer: int, nbytes: int) -> None:
    if not _exiting:
        _functions()[1](pointer, nbytes)


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array on a buffer of the pool (a parked one of its
    size where there is one), parked again when the array and its views are gone."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    pointer = _functions()[0](HEAP_ALIGNMENT, nbytes)
    if not pointer:
        raise MemoryError(f"cannot allocate an output of {nbytes} bytes")
    buffer = (ctypes.c_char * nbytes).from_address(pointer)
    weakref.finalize(buffer, _give, pointer, nbytes).atexit = False
    return np.frombuffer(buffer, dtype).reshape(shape)


def clear() -> int:
    """Free the buffers parked in the pool; returns how many there were. Safe at any
    time: a kernel running meanwhile takes or parks its own buffers as usual."""
    return int(ctypes.CFUNCTYPE(ctypes.c_int64)(address("loom_pool_clear"))())
