"""`@compiler.jit`: numpy-like Python traced into the loom dialect, compiled once per signature.

    import compiler as loom

    @loom.jit
    def mlp(x, w, b):
        return loom.relu(x @ w + b)

    y = mlp(x, w, b)            # numpy in, numpy out

The first call with a new signature (each array's shape, dtype and strides; the values
of the other arguments) runs the Python function once on `Traced` stand-ins: each
operation on them appends one loom op to a function, located at the user's line (so a
verifier error points there too). The function is compiled with `compiler.compile`
(pipeline `default` unless told otherwise) and kept; later calls with that signature go
straight to the kernel. Keyword arguments are bound to their positions (`f(x, w=w)` is
`f(x, w)`, one signature); a keyword-only parameter or `**kwargs` is refused. The
compiled signatures share the process's budget of kernels in memory (`LOOM_CACHE_SIZE`,
`compiler.set_cache_size`: `compiler.driver.KernelCache`): one function called with
thousands of shapes keeps the least recently used out, and traces one again if it comes
back; the signature called last is always kept. Arrays are passed as they are: a view
(transposed, sliced with steps, broadcast, Fortran-ordered) becomes an argument with its
strides (`loom.buffer_layout`), never a copy; a view with a negative stride is refused
(pass a copy).

What a trace may do: `@` (2-D, batched 3-D, and 3-D @ 2-D; `np.matmul(a, b, dtype=)`),
`+`, `-`, `*` with numpy broadcasting (Python numbers and float arguments included, on
either side: they become inputs of the kernel, so a new value does not recompile), unary
`-`, `loom.relu`, `loom.clamp(x, min, max)`, `loom.conv2d(x, w, stride=, padding=, dilation=, layout=)`,
`.astype(dtype)`, `loom.quantize(x, scale, zero_point, dtype=np.uint8, axis=None)`,
`loom.dequantize(q, scale, zero_point, axis=None)`, `.T`, `.transpose(...)`, slicing with
steps (`x[1:, ::2]`, `x[::-1]`, an integer index, `...`, `None`), `loom.broadcast_to`,
`.reshape(...)`, `loom.contiguous`; `.shape`, `.dtype`, `.ndim`, `.size`. Anything else (a
division, a comparison, `if` on a traced value, a method numpy has and Loom lacks such as
`x.sum()`, an index array, converting to numpy, another @loom.jit function called inside:
call its `.fn`) is an error that names the user's line and what is supported.

The arrays are float32, float64, bfloat16 (`ml_dtypes.bfloat16`), int8, uint8 and int32
(dialects/dtypes.py), with numpy's semantics where Loom computes them:
- `@` and `loom.conv2d` of float32 or float64 arrays give that dtype; of bfloat16 arrays,
  float32 (`np.matmul(a, b, dtype=np.float32)`: products summed in float32, the dtype
  numpy's own `a @ b` of bfloat16 gives); of int8 and uint8 arrays in any mix, int32
  (`np.matmul(a, b, dtype=np.int32)`: exact, wrapping as int32 does, where numpy's `a @ b`
  would stay in 8 or 16 bits).
- `+`, `-`, `*` and `loom.relu` compute in float32, float64 and int32; a Python int beside
  an int32 array stays int32, as in numpy.
- `x.astype` converts float32 -> bfloat16 (round to nearest even, as ml_dtypes does),
  bfloat16 -> float32 and int32 -> float32 (`loom.cast`, bit for bit numpy's).
- `loom.quantize` takes float32 to int8 or uint8: `clip(round_half_to_even(x / scale) +
  zero_point)`, the quotient in float32, a NaN the least value; `loom.dequantize` takes
  int8, uint8 or int32 to `float32(q - zero_point) * scale`. `scale` (float32) and
  `zero_point` (int32) are array arguments: 0-d per tensor, or 1-d per channel along
  `axis`. Like loom.relu, both work on traced arrays only.
Loom promotes nothing itself: an operation it does not compute in that dtype (`+` of
bfloat16 arrays, where numpy computes in bfloat16; `@` of int32 arrays) or a mix numpy
would promote (bfloat16 @ float32, an int32 array times a float) is refused at that line
with the conversion to write.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.driver import compile as compile_source
from compiler.driver import kernel_cache
from compiler.numpy_reference import pack_filter as reference_pack_filter
from compiler.numpy_reference import winograd_filter as reference_winograd_filter
from dialects import winograd
from dialects.dtypes import FILTER_GROUPS, dtype_expression, numpy_dtype
from dialects.loom import (ACCUMULATOR, CASTS, ELEMENT_TYPES, ELEMENTWISE_TYPES, QUANTIZED, broadcast_shapes,
                           conv2d_output_hw, type_names)
from passes.support.algorithms import check_algorithms
from passes.support.diagnostics import LoomError

_HERE = os.path.abspath(__file__)


class TraceError(LoomError):
    """What a traced function did that Loom cannot compile, located at the user's line."""


class TraceTypeError(TraceError, TypeError):
    """A TraceError about a type: a dtype, a non-array operand."""


class TraceAttributeError(TraceError, AttributeError):
    """A TraceError about an attribute a traced array does not have (`x.sum()`): an
    AttributeError still, so that `hasattr` and `getattr(x, name, default)` work."""


_located = threading.local()  # the location `located()` gives the ops traced on this thread


@contextlib.contextmanager
def thread_setting(store: threading.local, name: str, value):
    """`store.name` is `value` on this thread inside the block (which gets it), and what it
    was before after it."""
    previous = getattr(store, name, None)
    setattr(store, name, value)
    try:
        yield value
    finally:
        setattr(store, name, previous)


def located(location: str):
    """The ops traced inside the block carry `location` (`name:line:col`) in place of the
    user's expression: a front end that traces from another program's nodes (the torch
    backend: the module each ATen node came from) names them by what the user knows."""
    return thread_setting(_located, "location", location)


def _user_location() -> str | None:
    """`file:line:col` of the innermost frame outside this module and the code Loom
    generates (a kernel's call, `<loom kernel @f>`): the user's expression (or the
    location `located()` gives)."""
    given = getattr(_located, "location", None)
    if given is not None:
        return given
    frame = inspect.currentframe()
    while frame is not None and (frame.f_code.co_filename.startswith("<loom ")
                                 or os.path.abspath(frame.f_code.co_filename) == _HERE):
        frame = frame.f_back
    if frame is None:
        return None
    info = inspect.getframeinfo(frame, context=0)
    col = info.positions.col_offset if info.positions and info.positions.col_offset is not None else 0
    return f"{info.filename}:{info.lineno}:{col + 1}"


def _fail(message: str, *, type_error: bool = False) -> None:
    raise (TraceTypeError if type_error else TraceError)(message, location=_user_location())


def _tensor(shape: Sequence[int], dtype: np.dtype) -> str:
    return f"tensor<{''.join(f'{n}x' for n in shape)}{BY_DTYPE[dtype]}>"


def _array_attr(values: Sequence[int]) -> str:
    return f"array<i64{': ' if values else ''}{', '.join(str(v) for v in values)}>"


def _loc(location: str | None) -> str:
    if location is None:
        return ""
    path, line, col = location.rsplit(":", 2)
    escaped = path.replace("\\", "\\\\").replace('"', '\\"')
    return f' loc("{escaped}":{line}:{col})'


@dataclass
class _Function:
    """The function being traced: its arguments and ops, as MLIR text."""

    name: str
    args: list[str] = field(default_factory=list)  # `%x: tensor<...> {attrs}`
    lines: list[str] = field(default_factory=list)
    extras: list[tuple[int | None, np.ndarray]] = field(default_factory=list)
    """The kernel's inputs after the arrays, in order: a number of the body (None, its
    array) or a float argument (its position, an array of its dtype to fill per call)."""
    scalars: dict[tuple[int, np.dtype], Traced] = field(default_factory=dict)  # float arguments made inputs
    count: int = 0

    def fresh(self) -> str:
        self.count += 1
        return f"%{self.count - 1}"

    def op(self, text: str, shape: Sequence[int], dtype: np.dtype, *, view: bool = False) -> Traced:
        """Append `%r = text` (its type and location added by the caller's text) and return %r."""
        result = self.fresh()
        self.lines.append(f"  {result} = {text}{_loc(_user_location())}")
        return Traced(self, result, tuple(shape), dtype, view=view)


_active = threading.local()  # the _Function being traced on this thread, if any


def _tracing() -> _Function | None:
    return getattr(_active, "function", None)


class Traced:
    """An array inside a `@loom.jit` function while it is traced: a value of the loom
    function being built. It has the shape and dtype of the numpy array it stands for."""

    __array_priority__ = 1000  # numpy defers `ndarray + Traced` to Traced.__radd__

    def __init__(self, function: _Function, name: str, shape: tuple[int, ...], dtype: np.dtype,
                 *, view: bool = False, argument: bool = False):
        self._function = function
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self._view = view  # a view op's result: returned, it is made contiguous
        self._argument = argument

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"<traced {self.dtype.name}{list(self.shape)} {self.name}>"

    @property
    def type(self) -> str:
        return _tensor(self.shape, self.dtype)

    # ---- arithmetic ------------------------------------------------------------------

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def __add__(self, other):
        return add(self, other)

    def __radd__(self, other):
        return add(other, self)

    def __mul__(self, other):
        return multiply(self, other)

    def __rmul__(self, other):
        return multiply(other, self)

    def __sub__(self, other):
        return _subtract(self, other)

    def __rsub__(self, other):
        return _subtract(other, self)

    def __neg__(self):
        return _elementwise("mul", self, -1, "-x")

    def __pos__(self):
        return self

    # ---- views -----------------------------------------------------------------------

    @property
    def T(self) -> Traced:
        return transpose(self)

    def transpose(self, *axes) -> Traced:
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], Sequence)):
            axes = axes[0]
        return transpose(self, axes or None)

    def reshape(self, *shape) -> Traced:
        if len(shape) == 1 and isinstance(shape[0], Sequence):
            shape = tuple(shape[0])
        return reshape(self, shape)

    def __getitem__(self, index) -> Traced:
        return _index(self, index)

    # ---- dtypes ----------------------------------------------------------------------

    def astype(self, dtype, *args, **kwargs) -> Traced:
        """numpy's astype where loom.cast converts, bit for bit as numpy: float32 ->
        bfloat16 (round to nearest even, as ml_dtypes), bfloat16 -> float32, int32 ->
        float32; to its own dtype, the array itself."""
        if args or kwargs:
            _fail("x.astype takes the dtype alone inside @loom.jit (numpy's order=, casting=, subok= and copy= "
                  "are not supported)", type_error=True)
        to = _dtype("x.astype", dtype)
        if to == self.dtype:
            return self
        if not _casts(self.dtype, to):
            _fail(f"x.astype({to.name}) of {_an_array(self.dtype)}: inside @loom.jit .astype converts "
                  f"{_CAST_PAIRS} (convert an argument before the call)", type_error=True)
        return self._function.op(f"loom.cast {self.name} : {self.type} -> {_tensor(self.shape, to)}", self.shape, to)

    # ---- what a trace cannot do ------------------------------------------------------

    def _unsupported(self, what: str, *, kind: type[TraceError] = TraceTypeError):
        raise kind(f"{what} is not supported on a traced array inside @loom.jit (supported: @, +, -, *, "
                   "loom.relu, loom.clamp, loom.conv2d, .astype, loom.quantize, loom.dequantize, .T, .transpose, slicing, "
                   ".reshape, loom.broadcast_to, loom.contiguous; and .shape, .dtype, .ndim, .size)",
                   location=_user_location())

    def __getattr__(self, name: str):
        if name.startswith("_"):  # numpy's and Python's protocols probe for these: "not here", as usual
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._unsupported(f".{name}", kind=TraceAttributeError)

    def __truediv__(self, other):
        self._unsupported("division (/)")

    __rtruediv__ = __floordiv__ = __rfloordiv__ = __truediv__

    def __pow__(self, other):
        self._unsupported("a power (**)")

    def __lt__(self, other):
        self._unsupported("a comparison")

    __le__ = __gt__ = __ge__ = __lt__

    def __bool__(self):
        _fail("a traced array has no value while @loom.jit traces the function: Python control flow "
              "(if, while, and, or) cannot depend on array contents inside @loom.jit", type_error=True)

    def __array__(self, *args, **kwargs):
        _fail("a traced array cannot be converted to numpy inside @loom.jit (use loom's operations on it: "
              "loom.contiguous for np.ascontiguousarray; or compute with numpy outside the jit function)",
              type_error=True)

    def __iter__(self):
        _fail("iterating over a traced array is not supported inside @loom.jit (index it instead)",
              type_error=True)

    def __len__(self) -> int:
        if not self.shape:
            _fail("len() of a 0-d traced array", type_error=True)
        return self.shape[0]

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc is np.matmul and method == "__call__" and set(kwargs) <= {"dtype"}:
            return _matmul_dtype(matmul(*inputs), kwargs.get("dtype"))
        if ufunc is np.add and method == "__call__" and not kwargs:
            return add(*inputs)
        if ufunc is np.multiply and method == "__call__" and not kwargs:
            return multiply(*inputs)
        if ufunc is np.subtract and method == "__call__" and not kwargs:  # ndarray - Traced
            return _subtract(*inputs)
        _fail(f"numpy's {ufunc.__name__} is not supported on a traced array inside @loom.jit "
              "(use +, -, *, @, loom.relu; np.matmul takes dtype= alone)", type_error=True)

    def __array_function__(self, func, types, args, kwargs):
        forwarded = {np.transpose: transpose, np.reshape: reshape, np.broadcast_to: broadcast_to}
        if func in forwarded:  # (np.matmul is a ufunc: __array_ufunc__)
            try:
                inspect.signature(forwarded[func]).bind(*args, **kwargs)
            except TypeError as e:  # numpy's options Loom lacks: order=, subok=, ...
                _fail(f"numpy.{func.__name__} on a traced array inside @loom.jit takes what "
                      f"loom.{forwarded[func].__name__} takes: {e}", type_error=True)
            return forwarded[func](*args, **kwargs)
        _fail(f"numpy.{func.__name__} is not supported on a traced array inside @loom.jit", type_error=True)


# --------------------------------------------------------------------------------------
# Operations (also the module-level functions of `compiler`: loom.relu, loom.conv2d, ...)
# --------------------------------------------------------------------------------------


def _traced(x, what: str) -> Traced:
    if isinstance(x, Traced):
        return x
    if _tracing() is None:
        raise TypeError(f"{what} works on the arrays of a @loom.jit function while it is traced; "
                        f"got {type(x).__name__} outside one (decorate the function with @loom.jit)")
    if isinstance(x, np.ndarray):
        _fail(f"{what}: a numpy array captured from outside the function (shape {x.shape}) cannot be "
              "used inside @loom.jit: pass it as an argument", type_error=True)
    _fail(f"{what} takes traced arrays, got {type(x).__name__}", type_error=True)


def _operands(a, b, what: str) -> tuple[Traced, Traced]:
    """Two operands of a binary op: a Python number becomes a kernel input of shape (1,)
    in the other's dtype (a new value does not recompile)."""
    if not isinstance(a, Traced) and not isinstance(b, Traced):
        if isinstance(a, ScalarArgument) or isinstance(b, ScalarArgument):
            (a if isinstance(a, ScalarArgument) else b)._refuse()
        _traced(b if isinstance(b, np.ndarray) else a, what)  # says what is wrong (a captured array first)
    for t in (a, b):
        if isinstance(t, Traced):
            _elementwise_dtype(t, what)
    ta = a if isinstance(a, Traced) else _scalar(a, b, what)
    tb = b if isinstance(b, Traced) else _scalar(b, a, what)
    _same_dtype(ta, tb, what)
    return ta, tb


# ---- dtypes: what each operation computes in (the dialect's tables, in numpy's names) ---

BY_TYPE = {t: numpy_dtype(t) for t in ELEMENT_TYPES}  # element type -> dtype
BY_DTYPE = {d: t for t, d in BY_TYPE.items()}  # and back
_QUANTIZED = frozenset(BY_TYPE[t] for t in QUANTIZED)  # int8, uint8
_ELEMENTWISE = [BY_TYPE[t] for t in ELEMENTWISE_TYPES]  # float32, float64, int32
_CAST_PAIRS = ", ".join(f"{BY_TYPE[a].name} -> {BY_TYPE[b].name}" for a, bs in CASTS.items() for b in bs)
_CONTRACTIONS = type_names([BY_TYPE[t].name + ("" if s == t else f" (summed in {BY_TYPE[s].name})")
                            for t, s in ACCUMULATOR.items()])
_FLOAT32 = np.dtype(np.float32)


def _an_array(dtype: np.dtype) -> str:
    return f"{'an' if dtype.name[0] in 'aeio' else 'a'} {dtype.name} array"


def _accumulator(dtype: np.dtype) -> np.dtype | None:
    """The dtype a matmul or conv2d of `dtype` arrays sums in and returns (bfloat16 ->
    float32, int8 and uint8 -> int32), or None where Loom has none (int32)."""
    t = ACCUMULATOR.get(BY_DTYPE[dtype])
    return None if t is None else BY_TYPE[t]


def _casts(src: np.dtype, dst: np.dtype) -> bool:
    """Whether loom.cast converts `src` to `dst`: `.astype` inside a trace."""
    return BY_DTYPE.get(dst) in CASTS.get(BY_DTYPE[src], ())


def _convert(src: np.dtype, dst: np.dtype) -> str:
    """How to make a `src` array `dst`: `.astype(...)`, inside the function where loom.cast
    does it, else before the call."""
    astype = f".astype({dtype_expression(dst)})"
    return astype if _casts(src, dst) else f"{astype} before the call (inside @loom.jit .astype converts {_CAST_PAIRS})"


def _same_dtype(ta: Traced, tb: Traced, what: str) -> None:
    """Refuse operands of two dtypes (numpy would promote them), saying which one to
    convert: by a cast Loom does inside the function where there is one (to numpy's
    promoted dtype first: bfloat16 -> float32 rather than back), else to numpy's promoted
    dtype before the call."""
    if ta.dtype == tb.dtype:
        return
    promoted = np.result_type(ta.dtype, tb.dtype)
    src, dst = max([(ta.dtype, tb.dtype), (tb.dtype, ta.dtype)], key=lambda p: (_casts(*p), p[1] == promoted))
    _fail(f"{what} of {ta.dtype.name} and {tb.dtype.name} arrays: both operands must have one dtype (numpy would "
          f"compute in {promoted.name}); convert the {src.name} one with {_convert(src, dst)}", type_error=True)


def _elementwise_dtype(t: Traced, what: str) -> None:
    """Refuse +, -, * and relu on a dtype Loom does not compute them in (bfloat16, int8,
    uint8, where numpy would compute in that type), saying how to widen it."""
    if t.dtype not in _ELEMENTWISE:
        _fail(f"{what} of {_an_array(t.dtype)}: Loom computes +, -, * and loom.relu in "
              f"{type_names([d.name for d in _ELEMENTWISE])}; widen it first with "
              f"{_convert(t.dtype, _accumulator(t.dtype))}", type_error=True)


def _contraction(ta: Traced, tb: Traced, what: str) -> np.dtype:
    """The dtype a matmul or conv2d of `ta` and `tb` computes in and returns: numpy's
    `np.matmul(a, b, dtype=...)` with that dtype. A dtype or a mix Loom lacks is refused
    with what to convert."""
    for t in (ta, tb):
        if _accumulator(t.dtype) is None:
            _fail(f"{what} of {_an_array(t.dtype)}: Loom's matmul and conv2d take {_CONTRACTIONS} arrays (int8 "
                  f"and uint8 mix); convert it with {_convert(t.dtype, _FLOAT32)}", type_error=True)
    if not (ta.dtype in _QUANTIZED and tb.dtype in _QUANTIZED):
        _same_dtype(ta, tb, what)
    return _accumulator(ta.dtype)


def _scalar(value, like: Traced, what: str) -> Traced:
    """A number as an operand beside `like`: its kernel input, viewed as 0-d beside a 0-d
    array (numpy's 0-d array * number is 0-d, not of shape (1,))."""
    t = _scalar_input(value, like, what)
    return t if like.ndim else reshape(t, ())


def _scalar_input(value, like: Traced, what: str) -> Traced:
    """A number as a kernel input of shape (1,) in `like`'s dtype: a float argument of the
    function (filled per call) or a number of the body (fixed)."""
    f = like._function
    if isinstance(value, ScalarArgument):
        known = f.scalars.get((value.position, like.dtype))
        if known is not None:
            return known
    elif isinstance(value, np.ndarray):
        _traced(value, what)  # a captured array: pass it as an argument
    elif isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        _fail(f"{what} takes traced arrays or Python numbers, got {type(value).__name__}", type_error=True)
    if like.dtype.kind == "i":
        _integer_operand(value, like.dtype, what)
    name = f"%scalar{len(f.extras)}"
    if isinstance(value, ScalarArgument):
        taken = any(position == value.position for position, _ in f.extras)
        name = f"%{value.name}_{like.dtype.name}" if taken else f"%{value.name}"
    f.args.append(f"{name}: {_tensor((1,), like.dtype)}")
    t = Traced(f, name, (1,), like.dtype, argument=True)
    if isinstance(value, ScalarArgument):
        f.extras.append((value.position, np.empty(1, like.dtype)))
        f.scalars[(value.position, like.dtype)] = t
    else:
        f.extras.append((None, np.array([value], dtype=like.dtype)))
    return t


def _integer_operand(value, dtype: np.dtype, what: str) -> None:
    """Refuse a number beside an integer array unless numpy keeps the array's dtype: a
    Python int that fits does; a float (numpy computes in float64), a wider numpy integer,
    an int out of range (numpy's OverflowError) do not."""
    promoted = np.dtype(np.float64) if isinstance(value, ScalarArgument) else np.result_type(dtype, value)
    if promoted != dtype:
        number = (f"the float argument {value.name}" if isinstance(value, ScalarArgument)
                  else f"a number of type {type(value).__name__}")
        instead = (f"convert the array first with {_convert(dtype, _FLOAT32)}" if promoted.kind == "f"
                   else "use a Python int")
        _fail(f"{what} of {_an_array(dtype)} and {number}: numpy computes it in {promoted.name}, which Loom does "
              f"not; {instead}", type_error=True)
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        _fail(f"{what}: the Python integer {value} is out of bounds for {dtype.name} (numpy raises OverflowError)")


class ScalarArgument:
    """A float argument of a @loom.jit function while it is traced: a kernel input (a new
    value does not recompile), so it takes part in array arithmetic only; arithmetic
    between such numbers alone would be evaluated once, at trace time, and is refused."""

    def __init__(self, position: int, name: str):
        self.position = position
        self.name = name

    def __repr__(self) -> str:
        return f"<traced float argument {self.name}>"

    def _refuse(self, *_args):
        _fail(f"the float argument {self.name} is a kernel input inside @loom.jit: it takes part in array "
              "arithmetic (x * s, x + s) only; compute with it outside the function, or pass it as an array",
              type_error=True)

    def _arithmetic(self, other):
        if isinstance(other, Traced):  # s * x: the array's reflected operation (x.__rmul__) takes it
            return NotImplemented
        self._refuse()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _arithmetic
    __neg__ = __float__ = __int__ = __bool__ = __index__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse

    def __matmul__(self, other):
        self._refuse()

    def __eq__(self, other):
        self._refuse()

    __hash__ = object.__hash__


def _broadcast(a: tuple[int, ...], b: tuple[int, ...], what: str) -> tuple[int, ...]:
    out = broadcast_shapes(a, b)
    if out is None:
        _fail(f"{what}: shapes {a} and {b} do not broadcast (numpy's rules: trailing dimensions equal or 1)")
    return out


def _elementwise(op: str, a, b, what: str) -> Traced:
    ta, tb = _operands(a, b, what)
    shape = _broadcast(ta.shape, tb.shape, what)
    return ta._function.op(f"loom.{op} {ta.name}, {tb.name} : ({ta.type}, {tb.type}) -> {_tensor(shape, ta.dtype)}",
                           shape, ta.dtype)


def add(a, b) -> Traced:
    """a + b with numpy broadcasting."""
    return _elementwise("add", a, b, "a + b")


def _subtract(a, b) -> Traced:
    """a - b with numpy broadcasting: a + (-b), with a number negated in Python and an
    array or float argument multiplied by -1 (both exact)."""
    if isinstance(b, int | float | np.integer | np.floating) and not isinstance(b, bool):
        if isinstance(a, Traced) and a.dtype.kind == "i":  # b checked as numpy does, before it is negated
            _elementwise_dtype(a, "a - b")
            _integer_operand(b, a.dtype, "a - b")
            if b == np.iinfo(a.dtype).min:  # -b is out of range: a - b wraps to a + b
                return _elementwise("add", a, b, "a - b")
        return _elementwise("add", a, -b, "a - b")
    if not isinstance(b, Traced):
        a, b = _operands(a, b, "a - b")  # b a float argument (a kernel input), or refused
    return _elementwise("add", a, multiply(b, -1), "a - b")


def multiply(a, b) -> Traced:
    """a * b with numpy broadcasting."""
    return _elementwise("mul", a, b, "a * b")


def relu(x) -> Traced:
    """max(x, 0) elementwise."""
    t = _traced(x, "loom.relu")
    _elementwise_dtype(t, "loom.relu")
    return t._function.op(f"loom.relu {t.name} : {t.type}", t.shape, t.dtype)


def clamp(x, min, max) -> Traced:  # noqa: A002 (numpy's and torch's names)
    """numpy.clip(x, min, max) elementwise: torch's clamp and hardtanh, ReLU6 as
    clamp(x, 0, 6); a NaN stays a NaN. float32 and float64 arrays; `min` and `max` are
    Python numbers (finite, min <= max), part of the kernel (a new value compiles anew)."""
    t = _traced(x, "loom.clamp")
    if t.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        _fail(f"loom.clamp of {_an_array(t.dtype)}: Loom clamps float32 and float64 arrays", type_error=True)
    bounds = []
    for name, v in (("min", min), ("max", max)):
        if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating) or not np.isfinite(v):
            _fail(f"loom.clamp's {name} must be a finite Python number, got {v!r}", type_error=True)
        bounds.append(float(v))
    if bounds[0] > bounds[1]:
        _fail(f"loom.clamp's min ({bounds[0]}) is larger than its max ({bounds[1]})")
    lo, hi = (f"{b:.17e}" for b in bounds)  # (MLIR's float literal: a decimal point, every digit)
    return t._function.op(f"loom.clamp {t.name} {{min = {lo} : f64, max = {hi} : f64}} : {t.type}", t.shape, t.dtype)


def matmul(a, b) -> Traced:
    """a @ b: (M, K) @ (K, N), batched (B, M, K) @ (B, K, N), or (B, M, K) @ (K, N) (the
    batch folded into the rows: a reshape, no copy for a contiguous a). float32 and
    float64 as numpy; bfloat16 and int8/uint8 (any mix) are `np.matmul(a, b,
    dtype=np.float32)` and `np.matmul(a, b, dtype=np.int32)`: products summed in float32,
    exactly in int32 (wrapping as int32 does)."""
    ta, tb = _traced(a, "a @ b"), _traced(b, "a @ b")
    out = _contraction(ta, tb, "a @ b")
    if ta.ndim == 3 and tb.ndim == 2:
        batch, m, _ = ta.shape
        flat = matmul(reshape(ta, (batch * m, ta.shape[2])), tb)
        return reshape(flat, (batch, m, tb.shape[1]))
    if ta.ndim not in (2, 3) or tb.ndim != ta.ndim:
        _fail(f"a @ b takes 2-D @ 2-D, 3-D @ 3-D (batched) or 3-D @ 2-D arrays, got shapes {ta.shape} @ {tb.shape}")
    if ta.ndim == 3 and ta.shape[0] != tb.shape[0]:
        _fail(f"a @ b: batch sizes differ, {ta.shape[0]} and {tb.shape[0]} (shapes {ta.shape} @ {tb.shape})")
    if ta.shape[-1] != tb.shape[-2]:
        _fail(f"a @ b: a has {ta.shape[-1]} columns but b has {tb.shape[-2]} rows (shapes {ta.shape} @ {tb.shape})")
    shape = (*ta.shape[:-1], tb.shape[-1])
    return ta._function.op(f"loom.matmul {ta.name}, {tb.name} : ({ta.type}, {tb.type}) -> {_tensor(shape, out)}",
                           shape, out)


def _matmul_dtype(product: Traced, dtype) -> Traced:
    """`np.matmul(a, b, dtype=dtype)`: `product`, where `dtype` is None or what it computes in."""
    if dtype is not None and (to := _dtype("np.matmul", dtype)) != product.dtype:
        _fail(f"np.matmul(..., dtype={to.name}): Loom computes this matmul in {product.dtype.name} "
              f"(dtype={dtype_expression(product.dtype)}, or leave dtype= out)", type_error=True)
    return product


def _dtype(what: str, dtype) -> np.dtype:
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError) as e:
        _fail(f"{what}: {dtype!r} is not a dtype ({e})", type_error=True)


def _pair(name: str, value, least: int, op: str = "loom.conv2d") -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int | np.integer) else tuple(value) if isinstance(value, Sequence) else None
    if (pair is None or len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in pair)
            or min(pair) < least):
        _fail(f"{op}: {name} must be an integer or a pair of integers >= {least}, got {value!r}")
    return int(pair[0]), int(pair[1])


def max_pool2d(x, window, *, stride=None, padding=0, layout: str = "nchw") -> Traced:
    """2-D max pooling, as torch's `max_pool2d` (dilation 1, ceil_mode false): the greatest
    element of each `window` of an NCHW (or `layout="nhwc"`: NHWC) array, `stride` the
    window by default, `padding` at most half the window (the border never chosen; a NaN
    in a window is its maximum). float32, float64 and int32."""
    t = _traced(x, "loom.max_pool2d")
    _elementwise_dtype(t, "loom.max_pool2d")
    return _pool2d("loom.max_pool2d", t, window, stride, padding, layout, [])


def avg_pool2d(x, window, *, stride=None, padding=0, layout: str = "nchw", count_include_pad: bool = True) -> Traced:
    """2-D average pooling, as torch's `avg_pool2d` (ceil_mode false): the mean of each
    `window`, over its area, or with `count_include_pad=False` over its elements inside the
    input; windows, strides and padding as max_pool2d's. float32 and float64."""
    t = _averaged(x, "loom.avg_pool2d")
    if not isinstance(count_include_pad, bool):
        _fail(f"loom.avg_pool2d: count_include_pad must be True or False, got {count_include_pad!r}",
              type_error=True)
    return _pool2d("loom.avg_pool2d", t, window, stride, padding, layout,
                   [] if count_include_pad else ["count_include_pad = false"])


def _averaged(x, op: str) -> Traced:
    """`x` traced for an average (`op`): a float32 or float64 array, else a TraceTypeError."""
    t = _traced(x, op)
    if t.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        _fail(f"{op} of {_an_array(t.dtype)}: it averages float32 and float64 arrays", type_error=True)
    return t


def _pool2d(op: str, t: Traced, window, stride, padding, layout: str, extra: list[str]) -> Traced:
    if layout not in ("nchw", "nhwc"):
        _fail(f"{op}: layout must be 'nchw' or 'nhwc', got {layout!r}")
    win = _pair("window", window, 1, op)
    strides = win if stride is None else _pair("stride", stride, 1, op)
    pads = _pair("padding", padding, 0, op)
    if t.ndim != 4:
        _fail(f"{op} takes a 4-D {layout.upper()} array, got shape {t.shape}")
    if any(2 * p > k for p, k in zip(pads, win)):
        _fail(f"{op}: padding {pads} is more than half the window {win}")
    n, c, h, w = (t.shape[0], t.shape[3], t.shape[1], t.shape[2]) if layout == "nhwc" else t.shape
    ho, wo = conv2d_output_hw(h, w, win[0], win[1], strides, pads, (1, 1))
    if ho < 1 or wo < 1:
        _fail(f"{op}: the {win[0]}x{win[1]} window does not fit the padded {h + 2 * pads[0]}x{w + 2 * pads[1]} input")
    shape = (n, ho, wo, c) if layout == "nhwc" else (n, c, ho, wo)
    attrs = [f"window = {_array_attr(win)}", f"strides = {_array_attr(strides)}", f"padding = {_array_attr(pads)}",
             *([f'layout = "{layout}"'] if layout != "nchw" else []), *extra]
    return t._function.op(f"{op} {t.name} {{{', '.join(attrs)}}} : {t.type} -> {_tensor(shape, t.dtype)}",
                          shape, t.dtype)


def mean(x, axis, *, keepdims: bool = False) -> Traced:
    """`np.mean(x, axis=axis, keepdims=keepdims)` of a float32 or float64 array over the
    axes given (an int or a tuple of them; negative from the end), summed in its dtype;
    without keepdims the result is a reshape (no copy) of the kept one."""
    t = _averaged(x, "loom.mean")
    axes = (axis,) if isinstance(axis, int | np.integer) and not isinstance(axis, bool) else axis
    if (not isinstance(axes, tuple) or not axes
            or any(isinstance(a, bool) or not isinstance(a, int | np.integer) or not -t.ndim <= a < t.ndim for a in axes)
            or len({int(a) % t.ndim for a in axes}) != len(axes)):
        _fail(f"loom.mean: axis must be an axis or a tuple of distinct axes of the array of shape {t.shape}, "
              f"got {axis!r}")
    normal = sorted(int(a) % t.ndim for a in axes)
    kept = tuple(1 if d in normal else n for d, n in enumerate(t.shape))
    m = t._function.op(f"loom.mean {t.name} {{axes = {_array_attr(normal)}}} : {t.type} -> {_tensor(kept, t.dtype)}",
                       kept, t.dtype)
    return m if keepdims else reshape(m, tuple(n for d, n in enumerate(t.shape) if d not in normal))


def conv2d(x, w, *, stride=1, padding=0, dilation=1, layout: str = "nchw", groups: int = 1) -> Traced:
    """2-D convolution (cross-correlation, as torch's): NCHW input with an FCHW filter, or
    `layout="nhwc"`: NHWC input with an HWCF filter, or one in panels (`pack_filter`: 5-D
    float32/float64, 6-D in groups for bfloat16, int8 and uint8). Its dtypes as matmul's:
    bfloat16 sums in float32, int8/uint8 (any mix) in int32, and returns that. `groups`
    (torch's): C and F split into that many groups, each output channel summing its own
    group's C/groups input channels (the filter's C dimension); groups = C = F is a
    depthwise convolution. A grouped filter is not in panels."""
    tx, tw = _traced(x, "loom.conv2d"), _traced(w, "loom.conv2d")
    if layout not in ("nchw", "nhwc"):
        _fail(f"loom.conv2d: layout must be 'nchw' or 'nhwc', got {layout!r}")
    strides, pads, dils = _pair("stride", stride, 1), _pair("padding", padding, 0), _pair("dilation", dilation, 1)
    panels = layout == "nhwc" and tw.ndim in (5, 6)
    if tx.ndim != 4 or (tw.ndim != 4 and not panels):
        names = ("NCHW", "FCHW") if layout == "nchw" else ("NHWC", "HWCF")
        _fail(f"loom.conv2d takes a 4-D {names[0]} input and a 4-D {names[1]} filter"
              f"{' (or a 5-D or 6-D one in panels, pack_filter)' if layout == 'nhwc' else ''}, got shapes {tx.shape} "
              f"and {tw.shape}")
    group = _filter_group(tw.dtype)
    if panels and (tw.ndim == 6) != bool(group) or (tw.ndim == 6 and tw.shape[5] != group):
        _fail(f"loom.conv2d: a {tw.ndim}-D filter in panels of {tw.dtype} is not pack_filter's layout (5-D for "
              f"float32/float64, 6-D with groups of {group or 'G'} last for {tw.dtype})", type_error=True)
    out = _contraction(tx, tw, "loom.conv2d")
    if layout == "nchw":
        (n, c, h, wd), (f, cw, r, s) = tx.shape, tw.shape
    elif panels:
        (n, h, wd, c), (p, r, s, cw, nr) = tx.shape, tw.shape[:5]
        f, cw = p * nr, cw * (group or 1)
    else:
        (n, h, wd, c), (r, s, cw, f) = tx.shape, tw.shape
    if isinstance(groups, bool) or not isinstance(groups, int | np.integer):
        _fail(f"loom.conv2d: groups must be a positive integer, got {groups!r}", type_error=True)
    if groups < 1:
        _fail(f"loom.conv2d: groups must be a positive integer, got {groups!r}")
    groups = int(groups)
    if groups > 1 and panels:
        _fail("loom.conv2d: a grouped convolution takes its filter in its plain layout, not in panels")
    if c % groups or f % groups:
        _fail(f"loom.conv2d: {groups} groups do not split the {c} input and {f} output channels (shapes {tx.shape} "
              f"and {tw.shape}, layout {layout})")
    if c != cw * groups:
        per_group = f" per group ({groups} groups: C/groups = {c // groups})" if groups > 1 else ""
        _fail(f"loom.conv2d: the input has {c} channels but the filter takes {cw}{per_group} (shapes {tx.shape} and "
              f"{tw.shape}, layout {layout})")
    ho, wo = conv2d_output_hw(h, wd, r, s, strides, pads, dils)
    if ho < 1 or wo < 1:
        _fail(f"loom.conv2d: the {r}x{s} window (dilation {dils}) does not fit the padded {h + 2 * pads[0]}x"
              f"{wd + 2 * pads[1]} input")
    shape = (n, f, ho, wo) if layout == "nchw" else (n, ho, wo, f)
    attrs = [f"strides = {_array_attr(strides)}", f"padding = {_array_attr(pads)}",
             f"dilations = {_array_attr(dils)}"] + ([f'layout = "{layout}"'] if layout != "nchw" else []) + (
                 [f"groups = {groups} : i64"] if groups > 1 else [])
    return tx._function.op(f"loom.conv2d {tx.name}, {tw.name} {{{', '.join(attrs)}}} : ({tx.type}, {tw.type}) -> "
                           f"{_tensor(shape, out)}", shape, out)


def _filter_group(dtype: np.dtype) -> int:
    """G of a filter of `dtype` in panels: its dot-product instruction's group (bfloat16
    pairs, int8/uint8 quads), 0 for float32 and float64 (rank 5, no groups)."""
    return next((g for name, g in FILTER_GROUPS.items() if numpy_dtype(name) == dtype), 0)


def pack_filter(w: np.ndarray, panel: int) -> np.ndarray:
    """An HWCF filter in panels of `panel` output channels, for `conv2d(..., layout="nhwc")`:
    a constant filter packed once, ahead of the calls, in the layout its direct convolution
    reads (the schedule then packs nothing). float32/float64: P x R x S x C x NR (F =
    P*NR); bfloat16, int8 and uint8 in groups of the channels their dot-product
    instruction reads together (G = 2 for bfloat16, 4 for int8/uint8; C a multiple of G):
    P x R x S x C/G x NR x G. The same result as the HWCF filter; `panel` must divide F."""
    w = np.asarray(w)
    group = _filter_group(w.dtype)
    if w.ndim != 4 or (w.dtype not in (_FLOAT32, np.dtype(np.float64)) and not group):
        _fail(f"loom.pack_filter takes an RxSxCxF (HWCF) float32, float64, bfloat16, int8 or uint8 filter, got shape "
              f"{w.shape} {w.dtype}", type_error=True)
    if not isinstance(panel, int) or panel < 1 or w.shape[3] % panel:
        _fail(f"loom.pack_filter: panel must be a positive integer that divides F = {w.shape[3]}, got {panel!r}")
    if group and w.shape[2] % group:
        _fail(f"loom.pack_filter: a filter of {w.dtype} is packed in groups of {group} channels, and C = {w.shape[2]} "
              f"is not a multiple of {group}")
    return reference_pack_filter(w, panel, group)


def winograd_filter(w: np.ndarray, tile: int) -> np.ndarray:
    """The transformed filter U (alpha^2 x C x F, alpha = tile + 2) of an HWCF 3x3 filter for
    `winograd_conv2d`, computed in float64 and rounded once to w's dtype (float32 or
    float64): a constant filter transformed once, ahead of the calls."""
    w = np.asarray(w)
    if w.ndim != 4 or w.shape[:2] != (3, 3) or w.dtype not in (_FLOAT32, np.dtype(np.float64)):
        _fail(f"loom.winograd_filter takes a 3x3xCxF (HWCF) float32 or float64 filter, got shape {w.shape} "
              f"{w.dtype}", type_error=True)
    if tile not in winograd.TILES:
        _fail(f"loom.winograd_filter: tile must be {' or '.join(map(str, winograd.TILES))}, got {tile!r}")
    return reference_winograd_filter(w.astype(np.float64), tile).astype(w.dtype)


def winograd_conv2d(x, u, *, tile: int, padding=0) -> Traced:
    """A 3x3 stride-1 NHWC convolution by Winograd's F(tile x tile, 3 x 3), given the
    filter already transformed (`winograd_filter`): the input transform, a batched matmul
    and the output transform (dialects/loom.py, `WinogradOp`). Rounds differently from
    `conv2d` (docs/guide/winograd.md has the bound); f32 or f64."""
    tx, tu = _traced(x, "loom.winograd_conv2d"), _traced(u, "loom.winograd_conv2d")
    if tile not in winograd.TILES:
        _fail(f"loom.winograd_conv2d: tile must be {' or '.join(map(str, winograd.TILES))}, got {tile!r}")
    ph, pw = _pair("padding", padding, 0, "loom.winograd_conv2d")
    alpha2 = winograd.points(tile) ** 2
    if tx.ndim != 4 or tu.ndim != 3 or tu.shape[0] != alpha2 or tu.shape[1] != tx.shape[3]:
        _fail(f"loom.winograd_conv2d takes an NHWC input and a {alpha2}xCxF transformed filter (tile {tile}), "
              f"got shapes {tx.shape} and {tu.shape}")
    if tx.dtype not in (_FLOAT32, np.dtype(np.float64)) or tu.dtype != tx.dtype:
        _fail(f"loom.winograd_conv2d computes in float32 or float64, one dtype for both, got {tx.dtype} and "
              f"{tu.dtype}", type_error=True)
    n, h, wd, c = tx.shape
    ho, wo = h + 2 * ph - 2, wd + 2 * pw - 2
    if ho < 1 or wo < 1:
        _fail(f"loom.winograd_conv2d: the 3x3 window does not fit the padded {ho + 2}x{wo + 2} input")
    p, f = winograd.tile_count(n, ho, wo, tile), tu.shape[2]
    fn, dt = tx._function, tx.dtype
    v = fn.op(f"loom.winograd_input {tx.name} {{tile = {tile}, padding = {_array_attr((ph, pw))}}} : {tx.type} -> "
              f"{_tensor((alpha2, p, c), dt)}", (alpha2, p, c), dt)
    m = matmul(v, tu)
    return fn.op(f"loom.winograd_output {m.name} {{tile = {tile}}} : {m.type} -> {_tensor((n, ho, wo, f), dt)}",
                 (n, ho, wo, f), dt)


def quantize(x, scale, zero_point, dtype=np.uint8, axis: int | None = None) -> Traced:
    """Affine quantization of a float32 array to int8 or uint8 (`dtype`):
    `clip(round_half_to_even(x / scale) + zero_point, least, greatest)`, the quotient in
    float32, a NaN giving the least value. `scale` (float32) and `zero_point` (int32) are
    arrays: 0-d per tensor, or per channel with x.shape[axis] values along `axis`."""
    t = _traced(x, "loom.quantize")
    to = _dtype("loom.quantize", dtype)
    if to not in _QUANTIZED:
        _fail(f"loom.quantize: dtype must be np.int8 or np.uint8, got {to.name}", type_error=True)
    if t.dtype != _FLOAT32:
        _fail(f"loom.quantize of {_an_array(t.dtype)}: it quantizes float32 arrays; convert it with "
              f"{_convert(t.dtype, _FLOAT32)}", type_error=True)
    return _affine("loom.quantize", t, scale, zero_point, axis, to)


def dequantize(q, scale, zero_point, axis: int | None = None) -> Traced:
    """Affine dequantization of an int8, uint8 or int32 (an accumulator's) array to
    float32: `float32(q - zero_point) * scale`, the difference in int32, the product in
    float32. `scale` and `zero_point` as loom.quantize's."""
    t = _traced(q, "loom.dequantize")
    if t.dtype not in _QUANTIZED and t.dtype != np.int32:
        _fail(f"loom.dequantize of {_an_array(t.dtype)}: it takes int8, uint8 and int32 arrays", type_error=True)
    return _affine("loom.dequantize", t, scale, zero_point, axis, _FLOAT32)


def _affine(op: str, t: Traced, scale, zero_point, axis, out: np.dtype) -> Traced:
    """`op` (loom.quantize or loom.dequantize) of `t` into `out`, with its scale and zero
    point per tensor (`axis` None) or per channel along `axis` (negative from the end)."""
    if axis is not None:
        if isinstance(axis, bool) or not isinstance(axis, int | np.integer) or not -t.ndim <= axis < t.ndim:
            _fail(f"{op}: axis must be None (per tensor) or an axis of the input of shape {t.shape}, got {axis!r}")
        axis = int(axis) % t.ndim
    want, per = ((), "0-d per tensor") if axis is None else ((t.shape[axis],), f"per channel along axis {axis}")
    parameters = []
    for name, value, dtype in (("scale", scale, _FLOAT32), ("zero_point", zero_point, np.dtype(np.int32))):
        if not isinstance(value, Traced | np.ndarray):
            got = f"the float argument {value.name}" if isinstance(value, ScalarArgument) else type(value).__name__
            _fail(f"{op}: the {name} is {_an_array(dtype)} passed as an argument ({per}), got {got}", type_error=True)
        p = _traced(value, op)
        if p.dtype != dtype:
            _fail(f"{op}: the {name} must be {_an_array(dtype)}, got {_an_array(p.dtype)}", type_error=True)
        if p.shape != want:
            _fail(f"{op}: the {name} has shape {p.shape}, expected {want} ({per})")
        parameters.append(p)
    s, z = parameters
    attrs = "" if axis is None else f" {{axis = {axis} : i64}}"
    return t._function.op(f"{op} {t.name}, {s.name}, {z.name}{attrs} : ({t.type}, {s.type}, {z.type}) -> "
                          f"{_tensor(t.shape, out)}", t.shape, out)


def transpose(x, axes: Sequence[int] | None = None) -> Traced:
    """numpy.transpose: a view with the dimensions permuted (reversed by default)."""
    t = _traced(x, "transpose")
    perm = tuple(reversed(range(t.ndim))) if axes is None else tuple(axes)
    try:
        normalized = tuple(int(a) + t.ndim if int(a) < 0 else int(a) for a in perm)
    except (TypeError, ValueError):
        normalized = ()
    if sorted(normalized) != list(range(t.ndim)):
        _fail(f"transpose: axes {perm} are not a permutation of the {t.ndim} dimensions of shape {t.shape}")
    if normalized == tuple(range(t.ndim)):
        return t
    shape = tuple(t.shape[a] for a in normalized)
    return t._function.op(f"loom.transpose {t.name} {{perm = {_array_attr(normalized)}}} : {t.type} -> "
                          f"{_tensor(shape, t.dtype)}", shape, t.dtype, view=True)


def reshape(x, shape: Sequence[int]) -> Traced:
    """numpy.reshape (one -1 allowed): a view where the layout allows it, else a copy."""
    t = _traced(x, "reshape")
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if any(isinstance(n, bool) or not isinstance(n, int | np.integer) or n < -1 for n in shape) \
            or list(shape).count(-1) > 1:
        _fail(f"reshape: the new shape must be integers >= 0 with at most one -1, got {shape}")
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if known == 0 or t.size % known:
            _fail(f"reshape: cannot infer -1 in {shape} for {t.size} elements (shape {t.shape})")
        shape = tuple(t.size // known if n == -1 else int(n) for n in shape)
    shape = tuple(int(n) for n in shape)
    if math.prod(shape) != t.size:
        _fail(f"reshape: cannot reshape shape {t.shape} ({t.size} elements) into {shape} ({math.prod(shape)})")
    if shape == t.shape:
        return t
    return t._function.op(f"loom.reshape {t.name} : {t.type} -> {_tensor(shape, t.dtype)}", shape, t.dtype,
                          view=True)


def broadcast_to(x, shape: Sequence[int]) -> Traced:
    """numpy.broadcast_to: a view with stride 0 along the stretched dimensions."""
    t = _traced(x, "broadcast_to")
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(int(n) for n in shape)
    if _broadcast(t.shape, shape, "broadcast_to") != shape:
        _fail(f"broadcast_to: shape {t.shape} does not broadcast to {shape}")
    if shape == t.shape:
        return t
    return t._function.op(f"loom.broadcast_to {t.name} : {t.type} -> {_tensor(shape, t.dtype)}", shape, t.dtype,
                          view=True)


def contiguous(x) -> Traced:
    """A row-major copy: the one operation that copies."""
    t = _traced(x, "contiguous")
    return t._function.op(f"loom.contiguous {t.name} : {t.type} -> {t.type}", t.shape, t.dtype)


def _index(t: Traced, index) -> Traced:
    """numpy basic indexing: slices (negative steps too), integers, `...`, `None`: a
    loom.slice, then a reshape for the integers (dropped) and the Nones (added)."""
    index = index if isinstance(index, tuple) else (index,)
    for i in index:  # before any `in` or `==` on the tuple: an array's == is elementwise
        if not (i is None or i is Ellipsis or isinstance(i, slice)
                or isinstance(i, int | np.integer) and not isinstance(i, bool)):
            _fail(f"index {i!r}: inside @loom.jit an index is made of slices, integers, ... and None (no arrays, "
                  "lists or booleans: numpy's advanced indexing is not supported)", type_error=True)
    if sum(i is Ellipsis for i in index) > 1:
        _fail("an index can only have a single ellipsis ('...')")
    taking = [i for i in index if i is not None and i is not Ellipsis]
    if len(taking) > t.ndim:
        _fail(f"too many indices for a traced array of shape {t.shape}: {len(taking)}")
    at = next((k for k, i in enumerate(index) if i is Ellipsis), None)
    if at is not None:
        index = index[:at] + (slice(None),) * (t.ndim - len(taking)) + index[at + 1:]
    else:
        index = index + (slice(None),) * (t.ndim - len(taking))
    offsets, sizes, strides, out_shape = [], [], [], []
    dim = 0
    for i in index:
        if i is None:
            out_shape.append(1)
            continue
        n = t.shape[dim]
        if isinstance(i, slice):
            try:
                start, stop, step = i.indices(n)
            except (TypeError, ValueError) as e:  # a bound that is not an integer, a step of 0
                _fail(f"index {i!r}: {e}", type_error=isinstance(e, TypeError))
            size = len(range(start, stop, step))
            offsets.append(start if size else 0)
            sizes.append(size)
            strides.append(step)
            out_shape.append(size)
        else:
            k = int(i) + n if int(i) < 0 else int(i)
            if not 0 <= k < n:
                _fail(f"index {int(i)} is out of bounds for dimension {dim} of size {n} (shape {t.shape})")
            offsets.append(k)
            sizes.append(1)
            strides.append(1)
        dim += 1
    result = t
    if tuple(sizes) != t.shape or any(offsets) or any(step != 1 for step in strides):  # x[::-1] keeps the shape
        result = t._function.op(
            f"loom.slice {t.name} {{offsets = {_array_attr(offsets)}, sizes = {_array_attr(sizes)}, "
            f"strides = {_array_attr(strides)}}} : {t.type} -> {_tensor(sizes, t.dtype)}",
            sizes, t.dtype, view=True)
    return reshape(result, tuple(out_shape))


# --------------------------------------------------------------------------------------
# The decorator
# --------------------------------------------------------------------------------------


@dataclass
class Specialization:
    """One signature's compiled kernel and what a call adds to the arrays given."""

    kernel: Any  # compiler.Kernel
    source: str
    extras: tuple[tuple[int | None, np.ndarray], ...]  # _Function.extras
    single: bool  # the function returns one array, not a tuple
    arrays: tuple[int, ...]  # the positions of the array arguments
    direct: bool = field(init=False)
    """The call's arguments are exactly the kernel's arrays, and its result is the
    function's: the kernel's own checked call dispatches (`JitFunction.__call__`)."""

    def __post_init__(self):
        self.direct = (self.kernel._fast is not None and not self.extras and self.single
                       and self.arrays == tuple(range(len(self.kernel.inputs))))

    def inputs(self, args: tuple) -> list[np.ndarray]:
        """The kernel's arrays for a call: the array arguments, then the extra inputs
        (a float argument's array filled with its value: a fresh one, calls may overlap)."""
        arrays = [args[i] for i in self.arrays]
        for position, array in self.extras:
            arrays.append(array if position is None else np.array([args[position]], array.dtype))
        return arrays


def _argument_type(name: str, a: np.ndarray) -> str:
    """`%name: tensor<...>`, with `{loom.buffer_layout = strided<[...]>}` for a view."""
    t = f"%{name}: {_tensor(a.shape, a.dtype)}"
    if a.flags.c_contiguous:
        return t
    strides = [s // a.itemsize for s in a.strides]
    return f"{t} {{loom.buffer_layout = strided<[{', '.join(str(s) for s in strides)}]>}}"


_STATIC = (bool, int, str, tuple)  # arguments that are constants of the trace (None too)


class JitFunction:
    """A Python function compiled by Loom on its first call with each signature.

    Its specializations share the process's budget of kernels in memory with compile()
    (`compiler.driver.KernelCache`: `LOOM_CACHE_SIZE`, `compiler.set_cache_size`): the
    least recently used are dropped (and traced again if called again); the one called
    last is always kept."""

    def __init__(self, fn: Callable, *, pipeline: str = "default", num_threads: int | None = None,
                 remarks: bool = False, cache: bool = True, profile: bool = False, algorithms: str = "exact"):
        if not callable(fn):
            raise TypeError(f"@loom.jit decorates a function, got {type(fn).__name__}")
        self.fn = fn
        self.algorithms = check_algorithms(algorithms)
        self.pipeline = pipeline
        self.num_threads = num_threads
        self.remarks = remarks
        self.cache = cache
        self.profile = profile
        # signature -> its specialization, while the kernel cache holds it (or it was called last)
        self._specializations: weakref.WeakValueDictionary[tuple, Specialization] = weakref.WeakValueDictionary()
        self._token = object()  # the kernel cache's key for a specialization: (token, signature)
        self._recent: Specialization | None = None  # the one called last
        self._last: Specialization | None = None  # the same, when direct
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn)
        try:
            self._signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            self._signature = None
        self._parameters = list(self._signature.parameters) if self._signature else []

    def __repr__(self) -> str:
        return f"<loom.jit {self.fn.__qualname__}: {len(self._specializations)} compiled signatures>"

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = self._positional(args, kwargs)
        last = self._last
        if last is not None:  # the signature of the last call: the kernel's own checks say
            return last.kernel._fast(last.kernel, args, self._dispatch)
        return self._dispatch(args)

    def _dispatch(self, args: tuple):
        """The call by signature: find (or compile) the kernel, call it."""
        spec = self.specialize(*args)
        self._last = spec if spec.direct else None
        result = spec.kernel(*spec.inputs(args))
        return result if spec.single or isinstance(result, tuple) else (result,)

    @staticmethod
    def _key(args: tuple) -> tuple:
        """The signature: each array's shape, dtype and strides; a float's type (its value
        is an input); any other argument's value (a constant of the trace)."""
        return tuple((a.shape, a.dtype, a.strides) if type(a) is np.ndarray
                     else float if type(a) is float or isinstance(a, np.floating)
                     else (type(a), a) if a is None or isinstance(a, _STATIC) else (type(a), id(a)) for a in args)

    def _positional(self, args: tuple, kwargs: dict) -> tuple:
        """The arguments of a call with keywords, by position: `f(x, w=w)` is `f(x, w)`
        (one signature), a parameter skipped before one given takes its default."""
        name = getattr(self.fn, "__name__", "kernel")
        if self._signature is None:
            raise TypeError(f"{name}() takes its arguments by position inside @loom.jit (its parameters are "
                            f"unknown), got the keywords {', '.join(kwargs)}")
        try:
            given = self._signature.bind(*args, **kwargs).arguments
        except TypeError as e:
            raise TypeError(f"{name}(): {e}") from None
        params = list(self._signature.parameters.values())
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        by_keyword = [k for k in kwargs if k not in {p.name for p in positional}]
        if by_keyword:
            raise TypeError(f"{name}() got {', '.join(by_keyword)} for a keyword-only parameter or **kwargs: a "
                            "@loom.jit function passes its arguments on by position (make it a positional "
                            "parameter, and pass it by position or by its name)")
        count = max((k + 1 for k, p in enumerate(positional) if p.name in given), default=0)
        rest = next((given.get(p.name, ()) for p in params if p.kind is p.VAR_POSITIONAL), ())
        return (*(given.get(p.name, p.default) for p in positional[:count]), *rest)

    def _outside_a_trace(self) -> None:
        if _tracing() is not None:
            _fail(f"{getattr(self.fn, '__name__', 'kernel')}() is a @loom.jit function called while another is "
                  "traced (or while it is itself): call the undecorated function (its .fn) inside, so that it is "
                  "traced into the same kernel", type_error=True)

    def specialize(self, *args, **kwargs) -> Specialization:
        """The kernel for these arguments' signature (traced and compiled on first use)."""
        if kwargs:
            args = self._positional(args, kwargs)
        self._outside_a_trace()  # (before the lock: a function calling itself would wait for it forever)
        key = self._key(args)
        try:
            spec = self._specializations.get(key)
        except TypeError:
            raise TypeError(f"{self.fn.__name__}(): an argument that is a constant of the trace (a tuple) must "
                            "hold hashable values (numbers, strings, tuples)") from None
        if spec is None:
            with self._lock:
                spec = self._specializations.get(key)
                if spec is None:
                    spec = self._compile(args)
                    self._specializations[key] = spec
        if kernel_cache.get((self._token, key)) is None:  # else it is now the most recently used
            kernel_cache.put((self._token, key), spec.kernel, spec)
        self._recent = spec
        return spec

    def lower(self, *args, **kwargs) -> str:
        """The loom-dialect MLIR text the function traces to for these arguments."""
        if kwargs:
            args = self._positional(args, kwargs)
        self._outside_a_trace()
        return self._trace(args)[0]

    def kernel(self, *args, **kwargs):
        """The compiled `compiler.Kernel` for these arguments' signature."""
        return self.specialize(*args, **kwargs).kernel

    def _trace(self, args: tuple) -> tuple[str, tuple[np.ndarray, ...], bool]:
        name = getattr(self.fn, "__name__", "kernel")
        name = name if name.isidentifier() else "kernel"
        if self._signature is not None:
            try:
                self._signature.bind(*args)
            except TypeError as e:  # said here, not by the call of the function on its Traced arguments
                raise TypeError(f"{name}(): {e}") from None
        f = _Function(name)
        traced_args = []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray) and type(a) is not np.ndarray:
                raise TypeError(f"{name}() argument #{i} is a {type(a).__name__}: pass a plain numpy.ndarray "
                                "(np.asarray(x))")
            if isinstance(a, np.ndarray):
                traced_args.append(self._argument(f, i, a))
            elif type(a) is float or isinstance(a, np.floating):
                traced_args.append(ScalarArgument(i, self._name(i)))
            elif a is None or isinstance(a, _STATIC):
                traced_args.append(a)  # a static value: part of the signature
            else:
                raise TypeError(f"{name}() argument #{i} is a {type(a).__name__}: a @loom.jit function takes "
                                "numpy arrays (and Python numbers, strings, tuples or None, which are constants)")
        _active.function = f
        try:
            out = self.fn(*traced_args)
        finally:
            _active.function = None
        single = not isinstance(out, tuple | list)
        results = [out] if single else list(out)
        if not results:
            raise TypeError(f"{name}() returned nothing: a @loom.jit function returns one or more arrays")
        names = []
        for k, r in enumerate(results):
            if not isinstance(r, Traced) or r._function is not f:
                raise TypeError(f"{name}() result #{k} is a {type(r).__name__}: a @loom.jit function returns the "
                                "arrays it computed (numpy arrays and numbers are not results of the trace)")
            if r._argument or r._view:
                r = contiguous(r)  # a result is a fresh array: an argument or a view of one is copied
            names.append(r)
        types = ", ".join(r.type for r in names)
        text = "\n".join([
            f"func.func @{name}({', '.join(f.args)}) -> ({types}) {{",
            *f.lines,
            f"  func.return {', '.join(r.name for r in names)} : {types}",
            "}",
        ])
        return text, tuple(f.extras), single

    def _argument(self, f: _Function, i: int, a: np.ndarray) -> Traced:
        if a.dtype not in BY_DTYPE:
            raise TypeError(f"{f.name}() argument #{i} has dtype {a.dtype}: Loom kernels take "
                            f"{type_names([d.name for d in BY_DTYPE])} arrays (convert with .astype(np.float32))")
        if any(s % a.itemsize for s in a.strides) or any(s < 0 for s in a.strides):
            raise ValueError(f"{f.name}() argument #{i} has strides {a.strides}: Loom passes views with "
                             "non-negative strides that are multiples of the element size (pass a copy: "
                             "np.ascontiguousarray)")
        pname = self._name(i)
        f.args.append(_argument_type(pname, a))
        return Traced(f, f"%{pname}", a.shape, a.dtype, argument=True)

    def _name(self, i: int) -> str:
        """The SSA name of argument #i: its parameter's name."""
        name = self._parameters[i] if i < len(self._parameters) else ""
        return name if name.isidentifier() and not name.startswith("scalar") else f"arg{i}"

    def compile_request(self, *args, **kwargs) -> dict:
        """What `compiler.compile` is called with for these arguments' signature (its
        keywords, the traced source included): `compiler.driver.compile_in_parallel` takes
        a list of them."""
        return self._request(self.lower(*args, **kwargs))

    def _request(self, text: str) -> dict:
        # the ops carry the user's locations; the text's own lines are named as the trace's
        filename = f"<loom.jit {getattr(self.fn, '__qualname__', 'function')}>"
        return dict(source=text, pipeline=self.pipeline, num_threads=self.num_threads, remarks=self.remarks,
                    filename=filename, cache=self.cache, profile=self.profile, algorithms=self.algorithms)

    def _compile(self, args: tuple) -> Specialization:
        text, extras, single = self._trace(args)
        kernel = compile_source(**self._request(text))
        arrays = tuple(i for i, a in enumerate(args) if isinstance(a, np.ndarray))
        return Specialization(kernel, text, extras, single, arrays)


def jit(fn: Callable | None = None, *, pipeline: str = "default", num_threads: int | None = None,
        remarks: bool = False, cache: bool = True, profile: bool = False, algorithms: str = "exact"):
    """Compile a numpy-like function with Loom: `@loom.jit` or `@loom.jit(pipeline=...,
    num_threads=..., remarks=..., cache=..., profile=..., algorithms=...)`. See this module's
    docstring; `profile=True` compiles kernels that time their loop nests (`compile(profile=True)`:
    `fn.kernel(*args).profile()`); `algorithms="fast"` lets them use Winograd's convolution
    (`compile(algorithms="fast")`)."""
    options = dict(pipeline=pipeline, num_threads=num_threads, remarks=remarks, cache=cache, profile=profile,
                   algorithms=algorithms)
    if fn is None:
        return lambda f: JitFunction(f, **options)
    return JitFunction(fn, **options)
