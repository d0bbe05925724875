"""A compiled kernel: numpy arrays in and out, checked before any call into machine code.

The calling convention is fixed by `loom-bufferize` and `loom-convert-to-llvm`: one
pointer per memref argument (inputs first, then the out-parameters that replaced the
tensor results), shapes and strides static in the code. Arrays are passed by pointer,
never copied, so each must have exactly the dtype, shape and C-contiguous layout the
kernel was compiled for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cffi
import numpy as np
from xdsl.dialects.builtin import Float32Type, Float64Type, MemRefType, TensorType
from xdsl.ir import Attribute

from compiler.diagnostics import LoomError

_ffi = cffi.FFI()
_DTYPES = {Float32Type: np.dtype(np.float32), Float64Type: np.dtype(np.float64)}


@dataclass(frozen=True)
class ArgSpec:
    """One array of the kernel's interface."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    is_output: bool  # a result the kernel allocates and returns
    in_place: bool = False  # a memref argument the kernel writes into

    @staticmethod
    def from_type(name: str, t: Attribute, *, is_output: bool) -> ArgSpec:
        if not isinstance(t, TensorType | MemRefType):
            raise LoomError(f"kernel {'results' if is_output else 'arguments'} must be tensors or memrefs, "
                            f"got {t} for {name}")
        elt = type(t.get_element_type())
        if elt not in _DTYPES:
            raise LoomError(f"unsupported element type {t.get_element_type()} for {name} (f32 and f64 are)")
        return ArgSpec(name, tuple(t.get_shape()), _DTYPES[elt], is_output, isinstance(t, MemRefType))

    def describe(self) -> str:
        return f"{self.dtype.name} array of shape {self.shape}"


@dataclass
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
    _module: object = None  # keeps the JIT'd code alive
    _cfunc: object = None
    _writes_inputs: bool = False

    def __post_init__(self):
        self._writes_inputs = any(s.in_place for s in self.inputs)
        n = len(self.inputs) + len(self.outputs)
        # cffi rather than ctypes: a call costs well under a microsecond of Python
        self._cfunc = _ffi.cast(f"void (*)({', '.join(['void *'] * n) or 'void'})", self.address)

    def asm(self) -> str:
        """The machine code, as assembly text."""
        return self._module.asm()

    def check(self, arrays: tuple) -> tuple:
        """Validate the call's arrays against the signature; raises TypeError/ValueError."""
        if len(arrays) != len(self.inputs):
            self._diagnose(arrays)
        for s, a in zip(self.inputs, arrays):
            if not (type(a) is np.ndarray and a.dtype == s.dtype and a.shape == s.shape):
                self._diagnose(arrays)
            flags = a.flags
            if not (flags.c_contiguous and flags.aligned and (flags.writeable or not s.in_place)):
                self._diagnose(arrays)
        if self._writes_inputs:
            self._check_overlap(arrays)
        return arrays

    def _check_overlap(self, arrays: tuple) -> None:
        for i, spec in enumerate(self.inputs):
            if spec.in_place and any(j != i and np.shares_memory(arrays[i], b) for j, b in enumerate(arrays)):
                raise ValueError(f"@{self.entry} argument #{i} ({spec.name}) is written in place and must not "
                                 "overlap another argument (the kernel assumes no aliasing)")

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
                                f"(convert with .astype(np.{spec.dtype.name}))")
            if arr.shape != spec.shape:
                raise ValueError(f"{where} has shape {arr.shape}, expected {spec.shape}")
            if not arr.flags.c_contiguous:
                raise ValueError(f"{where} is not C-contiguous (strides {arr.strides}); this kernel reads "
                                 "its arguments in place with row-major strides: pass np.ascontiguousarray(x)")
            if not arr.flags.aligned:
                raise ValueError(f"{where} is not aligned to its element size")
            if spec.in_place and not arr.flags.writeable:
                raise ValueError(f"{where} is written in place but is read-only")
        raise TypeError(f"@{self.entry}: arrays must be numpy.ndarray instances (not subclasses)")

    def __call__(self, *arrays):
        ins = self.check(arrays)
        outs = [np.empty(spec.shape, dtype=spec.dtype) for spec in self.outputs]
        self._cfunc(*[_ffi.from_buffer(a) for a in (*ins, *outs)])
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)
