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

The pool is LLVM IR, one copy of its machine code per process, made when a kernel first
needs it (read from the disk cache where it is there, else compiled: compiler/jit/disk_cache.py
`runtime_code`). `install()` registers its functions with the loader's symbol table
(compiler/jit/loader.py), where the JIT and the loader resolve a kernel's calls, as
numba's runtime registers its NRT functions with the JIT: the code that makes and loads
kernels never imports the pool. compiler/driver.py installs it.
"""

from __future__ import annotations

import ctypes
import functools

from compiler.jit.disk_cache import runtime_code
from compiler.jit.loader import LOCK, register_symbols

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
    needed): registered with the loader's symbol table."""
    register_symbols(FUNCTIONS, address)


def clear() -> int:
    """Free the buffers parked in the pool; returns how many there were. Safe at any
    time: a kernel running meanwhile takes or parks its own buffers as usual."""
    return int(ctypes.CFUNCTYPE(ctypes.c_int64)(address("loom_pool_clear"))())
