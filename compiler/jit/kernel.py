"""A compiled kernel: numpy arrays in and out, checked before any call into machine code.

The calling convention is fixed by `loom-bufferize` and `loom-convert-to-llvm`: one
pointer per memref argument (inputs first, then the out-parameters that replaced the
tensor results), shapes and strides static in the code. Arrays are passed by pointer,
never copied, so each must have exactly the dtype, shape and layout the kernel was
compiled for: C-contiguous for a tensor or an identity-layout memref, the memref's own
strides for a `strided<[...], offset: o>` one (its pointer is then the array's data
pointer minus o elements, the base the code adds the offset to).

On CPython each kernel also exports `<entry>__loom_objects` (`objects_wrapper`), the same
call with each array given as the address of its numpy object: the fast call's way in.

A function that may fail (it allocates temporaries) returns a status: 0, or the number
of the allocation site that got no memory, which the kernel turns into a `MemoryError`
naming the temporary, its type, its size and its location (`allocation_sites`).

Threads. A kernel whose loops run on libgomp's team (its code calls `GOMP_parallel`,
passes/conversion/loom_lower_parallel.py) is `parallel`. Two limits of libgomp's:

- It starts a team with a record of about 120 bytes per thread on the calling thread's
  stack, and ends the process when it cannot create a thread: 100,000 threads overflowed
  the main thread's 8 MiB stack (SIGSEGV), and with a larger stack libgomp exited for
  want of threads. A loop runs on at most `MAX_THREADS` threads (more than any machine's
  cores; half a MiB of stack): compile() refuses more (compiler/build.py reads the count
  in the code, whichever option or environment variable set it).
- Its team does not survive fork(): in a child forked after the team started
  (`os.fork`, multiprocessing's fork start method, DataLoader workers), the next parallel
  region waits forever for threads that exist only in the parent. So in a child forked
  after a parallel kernel was made (`os.register_at_fork`), Loom sets libgomp's
  max-active-levels to 0, and `GOMP_parallel` then runs each region on the calling thread
  alone (a thread's share of the iterations comes from `omp_get_num_threads()`: the
  results are the same); the first parallel kernel called there warns once
  (`ForkWarning`). Threads the child starts have teams of their own.
"""

from __future__ import annotations

import ctypes
import math
import os
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import cffi
import numpy as np

from compiler.jit.loader import symbol_address
from dialects.dtypes import dtype_expression
from passes.support.units import format_bytes

if TYPE_CHECKING:
    from passes.support.remarks import Remark

_ffi = cffi.FFI()

#: the most threads a parallel loop runs on (see the module's docstring)
MAX_THREADS = 4096


class ForkWarning(RuntimeWarning):
    """This process was forked after a kernel ran on libgomp's threads: its parallel
    kernels run on one thread here."""


_parallel_made = [False]  # a parallel kernel was made in this process
_fork_unwarned = [False]  # forked after that, and no parallel kernel has warned yet: what the calls read


def _serial_after_fork() -> None:
    """In a child forked after a parallel kernel was made: no parallel region of this
    thread starts libgomp's team (the parent's), each runs on this thread alone."""
    if _parallel_made[0]:
        address = symbol_address("omp_set_max_active_levels")  # from the libgomp the kernels call
        if address:
            ctypes.CFUNCTYPE(None, ctypes.c_int)(address)(0)
        _fork_unwarned[0] = True


os.register_at_fork(after_in_child=_serial_after_fork)


def _warn_forked() -> None:
    """The ForkWarning, at the first call of a parallel kernel in a forked child."""
    if _fork_unwarned[0]:
        _fork_unwarned[0] = False
        warnings.warn("this process was forked after kernels ran on libgomp's threads, which do not survive a fork: "
                      "its parallel kernels run on one thread (start workers with multiprocessing's 'spawn' or "
                      "'forkserver' method to keep their threads)", ForkWarning, stacklevel=3)


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The byte strides numpy gives a C-contiguous array of `shape`."""
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _significant(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """The strides that address anything: those of dimensions longer than 1, none for an
    empty array (numpy puts anything in the others, and so may a view)."""
    if 0 in shape:
        return ()
    return tuple(s for n, s in zip(shape, strides) if n > 1)


@dataclass(frozen=True)
class ArgSpec:
    """One array of the kernel's interface."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    is_output: bool  # a result the kernel allocates and returns
    in_place: bool = False  # a memref argument the kernel writes into
    strides: tuple[int, ...] | None = None  # in bytes, as numpy reports them; None: C-contiguous
    offset: int = 0  # elements from the pointer passed to element 0 (the memref layout's offset)
    type: str = ""  # the MLIR type, for messages
    contiguous: bool = field(init=False, compare=False)
    """C-contiguous from the pointer passed (offset 0): any C-contiguous array fits."""

    def __post_init__(self):
        c = c_strides(self.shape, self.dtype.itemsize)
        if self.strides is None:
            object.__setattr__(self, "strides", c)
        contiguous = self.offset == 0 and _significant(self.shape, self.strides) == _significant(self.shape, c)
        object.__setattr__(self, "contiguous", contiguous)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def fits(self, a: np.ndarray) -> bool:
        """Whether `a`'s layout is the one the code addresses (dtype and shape checked
        before): the same strides where they matter."""
        strides = self.strides
        return a.strides == strides or _significant(self.shape, a.strides) == _significant(self.shape, strides)

    def describe(self) -> str:
        layout = "" if self.contiguous else f" with strides {self.strides} (bytes, {self.type})"
        return f"{self.dtype.name} array of shape {self.shape}{layout}"

    def short(self) -> str:
        """`float32[4, 3]`, marked when strided or written."""
        marks = [m for m, on in (("strided", not self.contiguous), ("written", self.in_place)) if on]
        return f"{self.dtype.name}{list(self.shape)}" + (f" ({', '.join(marks)})" if marks else "")


@dataclass(frozen=True)
class AllocationSite:
    """A heap allocation of the compiled code that may fail: what the MemoryError names."""

    function: str
    name: str  # the SSA name, with its %, or "" when it has none
    type: str
    nbytes: int
    location: str | None


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays share an element; one too hard to decide counts as overlapping."""
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=100_000))
    except np.exceptions.TooHardError:
        return True


def _layout_message(where: str, spec: ArgSpec, arr: np.ndarray) -> str:
    """Why `arr` does not fit `spec`'s layout, and what to pass instead. The kernel takes
    the array's memory as it is: a copy fits an argument it only reads, but one it writes
    would leave its results in the copy, so the message says to copy them back."""
    name = spec.name.lstrip("%")
    if spec.contiguous:
        head = f"{where} is not C-contiguous (strides {arr.strides}, expected {spec.strides}): "
        if not spec.in_place:
            return (f"{head}the kernel reads {spec.name} in place with row-major strides; pass "
                    f"np.ascontiguousarray({name})")
        return (f"{head}the kernel writes {spec.name} in place with row-major strides, so a copy would get its "
                f"results: pass a C-contiguous array (buf = np.ascontiguousarray({name})) and copy them back "
                f"({name}[...] = buf)")
    head = f"{where} has strides {arr.strides}, expected {spec.strides} (bytes): the kernel "
    if not spec.in_place:
        return (f"{head}reads {spec.name} in place with the layout of {spec.type}; pass an array with exactly "
                "those strides (a view into a larger array)")
    return (f"{head}writes {spec.name} in place with the layout of {spec.type}, so a copy would get its results: "
            "pass a view with exactly those strides into a larger array, and copy the results from it")


@dataclass(frozen=True)
class ProfileSlot:
    """What one timer of a profiled kernel times (passes/conversion/loom_profile.py): a
    loop nest, by the op it came from (its `loom.tag`) and its source location."""

    tag: str
    location: str


@dataclass(frozen=True)
class ProfileRow(ProfileSlot):
    """A slot's measurements since the kernel was made (or `reset_profile`): how often
    its nest ran and the seconds it took in all."""

    calls: int
    seconds: float


_tick_rate: list[float] = []


def tick_rate() -> float:
    """The cycle counter's ticks per second (`loom.ticks`, x86's constant-rate
    time-stamp counter), measured once per process against `time.perf_counter` over 50 ms."""
    if not _tick_rate:
        import time

        from compiler.jit.engine import compile_ir  # LLVM: loaded already where a kernel is profiled

        module = compile_ir("declare i64 @llvm.readcyclecounter()\n"
                            "define i64 @ticks() {\n  %t = call i64 @llvm.readcyclecounter()\n  ret i64 %t\n}\n")
        ticks = ctypes.CFUNCTYPE(ctypes.c_int64)(module.function_address("ticks"))
        t0, c0 = time.perf_counter(), ticks()
        while time.perf_counter() - t0 < 0.05:
            pass
        t1, c1 = time.perf_counter(), ticks()
        module.close()
        _tick_rate.append((c1 - c0) / (t1 - t0))
    return _tick_rate[0]


@dataclass(repr=False)
class Kernel:
    """A compiled entry function. Call it with the input arrays; it returns the result
    array (a tuple for several results, None for none)."""

    entry: str
    inputs: list[ArgSpec]
    outputs: list[ArgSpec]
    address: int
    flops: int
    llvm_ir: str
    """LLVM IR as emitted from the llvm dialect, before LLVM's optimizations."""
    optimized_ir: str
    """LLVM IR after O3 for the host CPU."""
    stages: dict[str, str] = field(default_factory=dict)
    """The IR after each stage, in order: `input`, then one entry per pass."""
    pipeline: str = ""
    num_threads: int | None = None
    remarks: list[str] = field(default_factory=list)
    """What the schedule passes did, when compiled with remarks=True."""
    remark_records: tuple[Remark, ...] = field(default=(), repr=False, compare=False)
    """The same remarks as data (passes/support/remarks.py: each with the objects it was
    written from, what explain reads), from the compile that ran the passes: a kernel
    served from the disk cache has their text alone."""
    target: str = ""
    """The LLVM CPU the machine code was compiled for."""
    returns_status: bool = False
    """The entry function returns a status (it may fail to allocate a temporary)."""
    allocation_sites: dict[int, AllocationSite] = field(default_factory=dict)
    """Status k -> the allocation that failed."""
    profile_slots: tuple[ProfileSlot, ...] | None = None
    """A profiled kernel's timers (compile(profile=True)); None for a kernel that is not.
    Its entry takes their counters after the arrays, and each call passes the kernel's own."""
    _module: object = None  # keeps the JIT'd code alive
    objects_address: int = 0
    """The address of the function exported beside the entry that takes the arrays as
    Python objects (`objects_wrapper`), or 0 for none."""
    _cfunc: object = None
    _written: tuple[int, ...] = ()
    _direct: bool = True
    _asm: str = ""
    _parallel: bool = False

    def __post_init__(self):
        self._parallel = "@GOMP_parallel(" in self.llvm_ir
        _parallel_made[0] |= self._parallel
        self._written = tuple(i for i, s in enumerate(self.inputs) if s.in_place)
        # a profiled kernel's timers' counters (ticks, calls), passed after the arrays
        self._counters = None if self.profile_slots is None else np.zeros((len(self.profile_slots), 2), np.int64)
        self._direct = all(s.contiguous for s in self.inputs)  # from_buffer takes every array
        # cffi rather than ctypes: a call costs well under a microsecond of Python
        self._cfunc = _ffi.cast(_c_type(self, "void *"), self.address)
        self._fast = _fast_call(self) if self._direct and not self._written else None

    def __repr__(self) -> str:
        args = ", ".join(f"{s.name}: {s.short()}" for s in self.inputs)
        results = ", ".join(s.short() for s in self.outputs) or "None"
        return f"<Kernel @{self.entry}({args}) -> {results}, pipeline={self.pipeline!r}, target={self.target!r}>"

    def profile(self) -> list[ProfileRow]:
        """Each timed nest's calls and seconds since the kernel was made or the last
        `reset_profile()`, in the order the nests run (compile(profile=True))."""
        if self._counters is None:
            raise ValueError(f"@{self.entry} was not compiled with profile=True: it has no timers")
        rate = tick_rate()
        return [ProfileRow(slot.tag, slot.location, int(calls), ticks / rate)
                for slot, (ticks, calls) in zip(self.profile_slots, self._counters.tolist())]

    def reset_profile(self) -> None:
        """Zero the timers' counters."""
        if self._counters is None:
            raise ValueError(f"@{self.entry} was not compiled with profile=True: it has no timers")
        self._counters[...] = 0

    def asm(self) -> str:
        """The machine code, as assembly text: LLVM's listing of the optimized IR, for the
        host CPU (LLVM is imported here: a kernel read from the disk cache runs without it)."""
        if not self._asm:
            from compiler.jit.engine import optimized_assembly

            self._asm = optimized_assembly(self.optimized_ir)
        return self._asm

    def check(self, arrays: tuple) -> tuple:
        """Validate the call's arrays against the signature; raises TypeError/ValueError."""
        if len(arrays) != len(self.inputs):
            self._diagnose(arrays)
        for s, a in zip(self.inputs, arrays):
            if not (type(a) is np.ndarray and a.dtype == s.dtype and a.shape == s.shape
                    and (a.strides == s.strides or s.fits(a))):
                self._diagnose(arrays)
            flags = a.flags
            if not (flags.aligned and (flags.writeable or not s.in_place)):
                self._diagnose(arrays)
        if self._written:
            self._check_overlap(arrays)
        return arrays

    def _check_overlap(self, arrays: tuple) -> None:
        """An argument the kernel writes must not share memory with any other (the code
        assumes no aliasing), nor reach one element from two indices (the schedule passes
        take distinct indices for distinct elements); arguments it only reads may."""
        from dialects.layout import is_injective  # with xDSL: only for a kernel that writes an argument

        for i in self._written:
            a = arrays[i]
            if not a.flags.c_contiguous and not is_injective(a.shape, a.strides, a.itemsize):
                raise ValueError(f"@{self.entry} argument #{i} ({self.inputs[i].name}) is written by the kernel but "
                                 f"its strides {a.strides} reach some elements from several indices (a broadcast or "
                                 "as_strided view): an argument the kernel writes must not overlap itself")
            for j, other in enumerate(arrays):
                if j != i and _overlap(arrays[i], other):
                    raise ValueError(f"@{self.entry} argument #{i} ({self.inputs[i].name}) is written by the kernel "
                                     f"and overlaps argument #{j} ({self.inputs[j].name}); an argument the kernel "
                                     "writes must not share memory with another (the kernel assumes no aliasing)")

    def _diagnose(self, arrays: tuple) -> None:
        """Raise the error that says what is wrong with the first bad argument."""
        if len(arrays) != len(self.inputs):
            sig = ", ".join(f"{a.name}: {a.describe()}" for a in self.inputs)
            raise TypeError(f"@{self.entry} takes {len(self.inputs)} arrays ({sig}), got {len(arrays)}")
        for i, (spec, arr) in enumerate(zip(self.inputs, arrays)):
            where = f"@{self.entry} argument #{i} ({spec.name})"
            if not isinstance(arr, np.ndarray):
                raise TypeError(f"{where} must be a numpy array ({spec.describe()}), got {type(arr).__name__}")
            if arr.dtype != spec.dtype:
                raise TypeError(f"{where} has dtype {arr.dtype}, expected {spec.dtype} "
                                f"(convert with .astype({dtype_expression(spec.dtype)}))")
            if arr.shape != spec.shape:
                raise ValueError(f"{where} has shape {arr.shape}, expected {spec.shape}")
            if not spec.fits(arr):
                raise ValueError(_layout_message(where, spec, arr))
            if not arr.flags.aligned:
                raise ValueError(f"{where} is not aligned to its element size")
            if spec.in_place and not arr.flags.writeable:
                raise ValueError(f"{where} is written by the kernel but is read-only")
        raise TypeError(f"@{self.entry}: arrays must be numpy.ndarray instances (not subclasses)")

    def _pointers(self, arrays: tuple) -> list:
        """The pointer each array is passed as: its data pointer, moved back by the
        layout's offset (cffi's from_buffer takes C-contiguous arrays only)."""
        out = []
        for spec, a in zip(self.inputs, arrays):
            if spec.contiguous:
                out.append(_ffi.from_buffer(a))
            else:
                out.append(_ffi.cast("char *", a.ctypes.data) - spec.offset * a.itemsize)
        return out

    def _allocation_error(self, status: int) -> MemoryError:
        site = self.allocation_sites.get(status)
        if site is None:  # the table comes from the same module: not expected
            return MemoryError(f"@{self.entry}: a temporary could not be allocated (status {status})")
        what = f"the temporary {site.name}" if site.name else "a temporary"
        if site.function != self.entry:
            what += f" of @{site.function} (which @{self.entry} calls)"
        where = f" at {site.location}" if site.location else ""
        partial = "; the arrays it writes in place may hold partial results" if self._written else ""
        return MemoryError(f"@{self.entry}: cannot allocate {what} ({site.type}, {format_bytes(site.nbytes)}){where}"
                           f"{partial}")

    def __call__(self, *arrays):
        if self._fast is not None:
            return self._fast(self, arrays, self._call)
        return self._call(arrays)

    def _call(self, arrays: tuple):
        """The call with every check spelled out: what `_fast_call`'s code falls back on."""
        if self._parallel and _fork_unwarned[0]:
            _warn_forked()
        ins = self.check(arrays)
        outs = [_allocator(spec) for spec in self.outputs]
        counters = [] if self._counters is None else [_ffi.from_buffer(self._counters)]
        if self._direct:
            status = self._cfunc(*[_ffi.from_buffer(a) for a in (*ins, *outs)], *counters)
        else:
            status = self._cfunc(*self._pointers(ins), *[_ffi.from_buffer(a) for a in outs], *counters)
        if status:
            raise self._allocation_error(status)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)


class _Allocator:
    """How a call allocates the kernel's outputs: `np.empty`, or for an output of
    `min_bytes` or more the buffer pool's `empty` (compiler/jit/pool.py, which sets itself
    here: this module does not import it)."""

    def __init__(self):
        self.large, self.min_bytes = np.empty, 0

    def of(self, spec: ArgSpec):
        """The function that allocates this output: `(shape, dtype) -> array`."""
        return self.large if spec.nbytes >= self.min_bytes else np.empty

    def __call__(self, spec: ArgSpec) -> np.ndarray:
        return self.of(spec)(spec.shape, spec.dtype)


_allocator = _Allocator()


def set_output_allocator(empty, min_bytes: int) -> None:
    """Allocate the outputs of `min_bytes` or more with `empty(shape, dtype)` (the buffer
    pool's), in the kernels made from now on and in every call of `Kernel._call`."""
    _allocator.large, _allocator.min_bytes = empty, min_bytes


def _c_type(kernel: Kernel, argument: str) -> str:
    """The C type of a pointer to the kernel's function, each array an `argument`."""
    arity = len(kernel.inputs) + len(kernel.outputs) + (kernel.profile_slots is not None)
    arguments = ", ".join([argument] * arity) or "void"
    return f"{'int' if kernel.returns_status else 'void'} (*)({arguments})"


def _fast_call(kernel: Kernel):
    """The call of a kernel whose arguments are all C-contiguous and read only, as one
    generated Python function: each array checked against its exact type, dtype (the
    dtype object numpy shares), shape, strides and alignment in one expression, the
    outputs allocated, the machine code called. Anything else (another layout that still
    fits, a wrong argument) goes to `miss`: `Kernel._call`, which accepts it or says what
    is wrong, or a @loom.jit function's lookup of another signature. It cuts a call's
    Python cost from about 2.7 to 1.8 microseconds (a 64^3 matmul runs for 5): the
    checks of `check` loop over specs and build flag objects. Where the kernel exports
    `objects_wrapper`'s function, the arrays go by their addresses (`id`, 28 ns each),
    not through cffi's `from_buffer` (200-320 ns each)."""
    names = [f"a{i}" for i in range(len(kernel.inputs))]
    env: dict = {"ndarray": np.ndarray, "fb": _ffi.from_buffer, "f": kernel._cfunc,
                 "forked": _fork_unwarned, "warn_forked": _warn_forked}
    if kernel.objects_address:  # each array by its address (id), not through cffi's from_buffer
        env.update(f=_ffi.cast(_c_type(kernel, "intptr_t"), kernel.objects_address), fb=id)
    tests = []
    for i, spec in enumerate(kernel.inputs):
        env.update({f"D{i}": spec.dtype, f"S{i}": spec.shape, f"T{i}": spec.strides})
        tests.append(f"type(a{i}) is ndarray and a{i}.dtype is D{i} and a{i}.shape == S{i} "
                     f"and a{i}.strides == T{i} and a{i}.flags.aligned")
    outs = [f"o{i}" for i in range(len(kernel.outputs))]
    for i, spec in enumerate(kernel.outputs):
        env.update({f"OS{i}": spec.shape, f"OD{i}": spec.dtype, f"new{i}": _allocator.of(spec)})
    counters = []
    if kernel._counters is not None:
        env["P"], counters = kernel._counters, ["P"]
    pointers = ", ".join(f"fb({v})" for v in (*names, *outs, *counters))
    lines = ["def call(kernel, arrays, miss):",  # the kernel passed in: no cycle through its own function
             *(["    if forked[0]:", "        warn_forked()"] if kernel._parallel else []),
             f"    if len(arrays) != {len(names)}:",
             "        return miss(arrays)",
             *([f"    {', '.join(names)}, = arrays"] if names else []),
             f"    if not ({' and '.join(tests) or 'True'}):",
             "        return miss(arrays)",
             *[f"    o{i} = new{i}(OS{i}, OD{i})" for i in range(len(outs))],
             f"    status = f({pointers})" if kernel.returns_status else f"    f({pointers})",
             *(["    if status:", "        raise kernel._allocation_error(status)"] if kernel.returns_status else []),
             f"    return {', '.join(outs) if len(outs) > 1 else outs[0] if outs else 'None'}"]
    exec(compile("\n".join(lines), f"<loom kernel @{kernel.entry}>", "exec"), env)
    return env["call"]


#: the name of the function exported beside a kernel's entry that takes the arrays as
#: Python objects: `objects_wrapper`
OBJECTS_SUFFIX = "__loom_objects"
_offset: list[int | None] = []


def array_data_offset() -> int | None:
    """Where a numpy array object keeps its data pointer, in bytes from the object's
    address (CPython's `id`: PyArrayObject's `data` field, after the object header):
    found once per process by reading the first words of arrays of known data pointers,
    and only where every one agrees (None elsewhere: the calls keep cffi's from_buffer)."""
    if not _offset:
        import ctypes
        import sys

        found = None
        if sys.implementation.name == "cpython":
            arrays = [np.empty(n, dtype) for n, dtype in ((3, np.float32), (17, np.float64), (1000, np.float32))]
            for offset in range(8, 64, 8):
                if all(ctypes.c_void_p.from_address(id(a) + offset).value == a.ctypes.data for a in arrays):
                    found = offset
                    break
        _offset.append(found)
    return _offset[0]


def objects_wrapper(entry: str, arity: int, returns_status: bool, offset: int) -> str:
    """LLVM IR of a function `<entry>__loom_objects(i64, ...)` that takes each of the
    kernel's `arity` arrays as the address of its numpy array object, loads its data
    pointer `offset` bytes in (`array_data_offset`) and calls the entry with them (never
    inlined into it: one copy of the kernel's code)."""
    ret = "i32" if returns_status else "void"
    lines = [f'define {ret} @"{entry}{OBJECTS_SUFFIX}"({", ".join(f"i64 %o{i}" for i in range(arity))}) {{']
    for i in range(arity):
        lines += [f"  %a{i} = add i64 %o{i}, {offset}", f"  %p{i} = inttoptr i64 %a{i} to ptr",
                  f"  %d{i} = load ptr, ptr %p{i}, align 8"]
    call = f'call {ret} @"{entry}"({", ".join(f"ptr %d{i}" for i in range(arity))}) noinline'
    lines += [f"  %r = {call}", "  ret i32 %r"] if returns_status else [f"  {call}", "  ret void"]
    return "\n".join([*lines, "}"]) + "\n"
