"""Strided views, zero copy: loom.transpose / slice / broadcast_to / reshape / contiguous,
`loom.buffer_layout` arguments, and what the schedules do with strided operands.

Three levels, each against numpy's own view operations:
- the layouts loom-bufferize computes (no JIT): the memref a view becomes, read with
  `as_strided` over the root buffer, holds the elements numpy's view holds;
- compiled kernels, `naive` and `default`, on random chains of views and random strided
  arguments (shapes with 1s and primes, negative steps, f32 and f64), bit-exact on small
  integers and equal to `compiler.reference`;
- zero copy: the pointer the machine code gets is the array's own data pointer, and the
  lowered IR of a view allocates and copies nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernels import prime_factors, small_ints, ty
from xdsl.dialects import func

import compiler
from dialects.context import make_context
from passes.support.diagnostics import LoomError
from compiler.build import load_module, signature
from compiler.jit.kernel import _ffi
from passes.pipelines import build
from dialects import loom
from dialects.layout import reshape_strides, static_strides

DTYPES = [np.float32, np.float64]
PIPELINES = ["naive", "default"]
DIMS = [1, 2, 3, 5, 7]


# --------------------------------------------------------------------------------------
# Random chains of views, as MLIR text and as numpy operations
# --------------------------------------------------------------------------------------


@dataclass
class Chain:
    """A function of one argument: views applied in turn, then a consumer. `numpy` are
    the same views as numpy operations."""

    dtype: type
    arg_shape: tuple[int, ...]
    shape: tuple[int, ...] = ()
    lines: list[str] = field(default_factory=list)
    numpy: list = field(default_factory=list)
    value: str = "%x"

    def __post_init__(self):
        self.shape = self.arg_shape

    def add(self, text: str, shape: tuple[int, ...], fn) -> None:
        name = f"%v{len(self.lines)}"
        self.lines.append(f"  {name} = {text} : {ty(self.shape, self.dtype)} -> {ty(shape, self.dtype)}")
        self.numpy.append(fn)
        self.value, self.shape = name, shape

    def view_of(self, x: np.ndarray) -> np.ndarray:
        for fn in self.numpy:
            x = fn(x)
        return x

    def source(self, consumer: str, layout: tuple[int, ...] | None) -> str:
        """The function: the views, then `consumer` (relu, mul of the view by itself, the
        view returned as it is, or loom.contiguous of it)."""
        t = ty(self.shape, self.dtype)
        body = list(self.lines)
        if consumer == "relu":
            body.append(f"  %r = loom.relu {self.value} : {t}")
        elif consumer == "mul":
            body.append(f"  %r = loom.mul {self.value}, {self.value} : ({t}, {t}) -> {t}")
        elif consumer == "contiguous":
            body.append(f"  %r = loom.contiguous {self.value} : {t} -> {t}")
        result = "%r" if consumer != "return" else self.value
        attr = f" {{loom.buffer_layout = strided<[{', '.join(map(str, layout))}]>}}" if layout is not None else ""
        return "\n".join([f"func.func @views(%x: {ty(self.arg_shape, self.dtype)}{attr}) -> {t} {{", *body,
                          f"  func.return {result} : {t}", "}"])

    @staticmethod
    def expected(view: np.ndarray, consumer: str) -> np.ndarray:
        if consumer == "relu":
            return np.maximum(view, 0)
        if consumer == "mul":
            return view * view
        return view


def _array(values) -> str:
    return f"array<i64: {', '.join(map(str, values))}>" if len(values) else "array<i64>"


@st.composite
def transposes(draw, chain: Chain) -> None:
    perm = tuple(draw(st.permutations(range(len(chain.shape)))))
    chain.add(f"loom.transpose {chain.value} {{perm = {_array(perm)}}}", tuple(chain.shape[p] for p in perm),
              lambda x, perm=perm: np.transpose(x, perm))


@st.composite
def slices(draw, chain: Chain) -> None:
    """Basic slicing, negative steps included: a Python slice per dimension."""
    offsets, sizes, strides, index = [], [], [], []
    for n in chain.shape:
        step = draw(st.sampled_from([1, 2, 3, -1, -2]))
        start = draw(st.integers(0, n - 1)) if n else 0
        most = len(range(start, n if step > 0 else -1, step)) if n else 0
        size = draw(st.integers(0 if n else 0, most)) if most else 0
        stop = start + step * size
        offsets.append(start), sizes.append(size), strides.append(step)
        index.append(slice(start, stop if stop >= 0 else None, step))
    chain.add(f"loom.slice {chain.value} {{offsets = {_array(offsets)}, sizes = {_array(sizes)}, "
              f"strides = {_array(strides)}}}", tuple(sizes), lambda x, index=tuple(index): x[index])


@st.composite
def broadcasts(draw, chain: Chain) -> None:
    lead = draw(st.lists(st.sampled_from([1, 2, 3]), max_size=1))
    stretched = [draw(st.sampled_from([1, 2, 3])) if n == 1 else n for n in chain.shape]
    shape = (*lead, *stretched)
    chain.add(f"loom.broadcast_to {chain.value}", shape, lambda x, shape=shape: np.broadcast_to(x, shape))


@st.composite
def reshapes(draw, chain: Chain) -> None:
    """The element count regrouped: its prime factors shuffled into 1 to 4 dimensions, 1s
    sprinkled in."""
    count = math.prod(chain.shape)
    if count == 0:
        return
    factors = draw(st.permutations(prime_factors(count)))
    rank = draw(st.integers(1, 4))
    dims = [1] * rank
    for f in factors:
        dims[draw(st.integers(0, rank - 1))] *= f
    shape = tuple(dims)
    chain.add(f"loom.reshape {chain.value}", shape, lambda x, shape=shape: np.reshape(x, shape))


STEPS = {"transpose": transposes, "slice": slices, "broadcast_to": broadcasts, "reshape": reshapes}


@st.composite
def chains(draw, dtype=None) -> Chain:
    dtype = dtype or draw(st.sampled_from(DTYPES))
    chain = Chain(dtype, tuple(draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=3))))
    for kind in draw(st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4)):
        draw(STEPS[kind](chain))
    return chain


@st.composite
def strided_arrays(draw, shape: tuple[int, ...], dtype) -> tuple[np.ndarray, np.ndarray]:
    """(root, x): `x` of `shape`, a view into the flat array `root` whose lowest address
    is root's first element: C order, transposed (Fortran order), reversed along some
    dimensions (negative strides), or every other element (a slice with step 2)."""
    kind = draw(st.sampled_from(["c", "fortran", "reversed", "stepped"]))  # (an empty one: C order)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if kind == "stepped" and math.prod(shape):
        root = small_ints(rng, (2 * math.prod(shape),), dtype)
        return root, root[::2].reshape(shape)
    root = small_ints(rng, (math.prod(shape),), dtype)
    if kind in ("c", "stepped"):
        return root, root.reshape(shape)
    if kind == "fortran":
        return root, root.reshape(shape[::-1]).T
    flips = tuple(slice(None, None, -1) if draw(st.booleans()) else slice(None) for _ in shape)
    return root, root.reshape(shape)[flips]


def element_strides(x: np.ndarray) -> tuple[int, ...] | None:
    """The `loom.buffer_layout` strides of an array (None: row-major, no attribute)."""
    if x.flags.c_contiguous and all(s >= 0 for s in x.strides):
        return None
    return tuple(s // x.itemsize for s in x.strides)


# --------------------------------------------------------------------------------------
# The layouts loom-bufferize computes, read back with as_strided (no JIT)
# --------------------------------------------------------------------------------------


def _bufferized(src: str) -> func.FuncOp:
    module = load_module(src)
    build("loom-bufferize").apply(make_context(), module)
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


def _read_memref(root: np.ndarray, base_offset: int, t) -> np.ndarray:
    """The elements memref type `t` reaches, its base pointer `base_offset` elements into
    `root`."""
    strides, offset = static_strides(t)
    start = base_offset + offset
    return np.lib.stride_tricks.as_strided(root[start:], t.get_shape(),
                                           tuple(s * root.itemsize for s in strides))


@given(chain=chains(), data=st.data())
def test_bufferized_layouts_hold_numpys_elements(chain, data):
    """Each view's memref, read through its strides and offset from the argument's base,
    is numpy's view of the argument; and the reference evaluates it so too."""
    root, x = data.draw(strided_arrays(chain.arg_shape, chain.dtype))
    src = chain.source("relu", element_strides(x))
    fn = _bufferized(src)
    arg_t = fn.body.block.args[0].type
    base = (x.ctypes.data - root.ctypes.data) // x.itemsize - static_strides(arg_t)[1]
    relu = next(op for op in fn.walk() if isinstance(op, loom.ReluOp))
    want = chain.view_of(x)
    copied = any(op.name == "memref.copy" for op in fn.walk())  # a reshape that is not a view
    if not copied and 0 not in want.shape:
        np.testing.assert_array_equal(_read_memref(root, base, relu.ins[0].type), want)
    np.testing.assert_array_equal(compiler.reference(src, x), np.maximum(want, 0))


def test_bufferized_layout_of_each_view():
    """One case per op, the strides worked out by hand."""
    src = """func.func @f(%a: tensor<4x6xf32>) -> (tensor<6x4xf32>, tensor<2x3xf32>, tensor<3x4x6xf32>, tensor<2x2x6xf32>) {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x6xf32> -> tensor<6x4xf32>
  %s = loom.slice %a {offsets = array<i64: 3, 5>, sizes = array<i64: 2, 3>, strides = array<i64: -2, -2>} : tensor<4x6xf32> -> tensor<2x3xf32>
  %b = loom.broadcast_to %a : tensor<4x6xf32> -> tensor<3x4x6xf32>
  %r = loom.reshape %a : tensor<4x6xf32> -> tensor<2x2x6xf32>
  %t2 = loom.relu %t : tensor<6x4xf32>
  %s2 = loom.relu %s : tensor<2x3xf32>
  %b2 = loom.relu %b : tensor<3x4x6xf32>
  %r2 = loom.relu %r : tensor<2x2x6xf32>
  func.return %t2, %s2, %b2, %r2 : tensor<6x4xf32>, tensor<2x3xf32>, tensor<3x4x6xf32>, tensor<2x2x6xf32>
}"""
    layouts = [static_strides(op.ins[0].type) for op in _bufferized(src).walk() if isinstance(op, loom.ReluOp)]
    assert layouts == [((1, 6), 0), ((-12, -2), 23), ((0, 6, 1), 0), ((12, 6, 1), 0)]


# reshape_strides is numpy's rule: a view exactly when numpy's reshape(copy=False) is one
@given(chain=chains(np.float32), data=st.data())
def test_reshape_strides_is_numpys_rule(chain, data):
    view = chain.view_of(np.arange(math.prod(chain.arg_shape), dtype=np.float32).reshape(chain.arg_shape))
    count = math.prod(view.shape)
    if count == 0:
        return
    factors = data.draw(st.permutations(prime_factors(count)))
    dims = [1] * data.draw(st.integers(1, 4))
    for f in factors:
        dims[data.draw(st.integers(0, len(dims) - 1))] *= f
    found = reshape_strides(view.shape, [s // 4 for s in view.strides], dims)
    try:
        want = np.reshape(view, dims, copy=False)
    except ValueError:
        assert found is None, (view.shape, view.strides, dims)
        return
    assert found is not None, (view.shape, view.strides, dims)
    assert [s for n, s in zip(dims, found) if n != 1] == [s // 4 for n, s in zip(dims, want.strides) if n != 1]


# --------------------------------------------------------------------------------------
# Compiled kernels on views: naive and default, bit-exact on small integers
# --------------------------------------------------------------------------------------


@given(chain=chains(), consumer=st.sampled_from(["relu", "mul", "return", "contiguous"]), data=st.data())
def test_view_chains_compiled(chain, consumer, data):
    _, x = data.draw(strided_arrays(chain.arg_shape, chain.dtype))
    src = chain.source(consumer, element_strides(x))
    want = Chain.expected(chain.view_of(x), consumer)
    np.testing.assert_array_equal(compiler.reference(src, x), want)
    for pipeline in PIPELINES:
        out = compiler.compile(src, pipeline=pipeline)(x)
        assert out.dtype == chain.dtype and out.flags.c_contiguous
        np.testing.assert_array_equal(out, want, err_msg=f"{pipeline}\n{src}")


@given(m=st.sampled_from([1, 2, 3, 7, 13, 17, 32]), k=st.sampled_from([1, 3, 5, 16, 31]),
       n=st.sampled_from([1, 2, 5, 17, 33]), dtype=st.sampled_from(DTYPES), data=st.data())
def test_matmul_of_strided_operands(m, k, n, dtype, data):
    """A and B views (transposed, reversed, stepped) passed as they are: naive and
    default (packing or, for B read in place, a row-major copy of B) exact."""
    _, a = data.draw(strided_arrays((m, k), dtype))
    _, b = data.draw(strided_arrays((k, n), dtype))
    la, lb = element_strides(a), element_strides(b)
    attr = lambda s: f" {{loom.buffer_layout = strided<[{', '.join(map(str, s))}]>}}" if s is not None else ""  # noqa: E731
    src = f"""func.func @mm(%a: {ty((m, k), dtype)}{attr(la)}, %b: {ty((k, n), dtype)}{attr(lb)}) -> {ty((m, n), dtype)} {{
  %c = loom.matmul %a, %b : ({ty((m, k), dtype)}, {ty((k, n), dtype)}) -> {ty((m, n), dtype)}
  func.return %c : {ty((m, n), dtype)}
}}"""
    want = (a.astype(np.int64) @ b.astype(np.int64)).astype(dtype)
    for pipeline in PIPELINES:
        np.testing.assert_array_equal(compiler.compile(src, pipeline=pipeline)(a, b), want, err_msg=pipeline)


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_matmul_of_transposed_views_in_the_function(pipeline):
    """`x @ w.T + b` with the transpose inside the function (a view of a row-major
    argument), random normal inputs within the error bound."""
    src = """func.func @dense(%x: tensor<13x40xf32>, %w: tensor<24x40xf32>, %b: tensor<24xf32>) -> tensor<13x24xf32> {
  %t = loom.transpose %w {perm = array<i64: 1, 0>} : tensor<24x40xf32> -> tensor<40x24xf32>
  %c = loom.matmul %x, %t : (tensor<13x40xf32>, tensor<40x24xf32>) -> tensor<13x24xf32>
  %s = loom.add %c, %b : (tensor<13x24xf32>, tensor<24xf32>) -> tensor<13x24xf32>
  func.return %s : tensor<13x24xf32>
}"""
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(13, 40), (24, 40), (24,)])
    out = compiler.compile(src, pipeline=pipeline)(x, w, b)
    ref = compiler.reference(src, x, w, b)
    np.testing.assert_allclose(out, ref, atol=4 * 40 * np.finfo(np.float32).eps * np.abs(ref).max())
    np.testing.assert_allclose(ref, x.astype(np.float64) @ w.T.astype(np.float64) + b, rtol=1e-12)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_conv2d_of_strided_operands(layout, pipeline):
    """An input and a filter in the other layout's order, transposed views: exact, and
    `default` schedules it (the filter copied once, with a remark) instead of leaving the
    textbook nest."""
    rng = np.random.default_rng(4)
    if layout == "nchw":
        x = small_ints(rng, (2, 9, 11, 3), np.float32).transpose(0, 3, 1, 2)
        w = small_ints(rng, (3, 3, 3, 5), np.float32).transpose(3, 2, 0, 1)
        y_shape = (2, 5, 9, 11)
    else:
        x = small_ints(rng, (2, 3, 9, 11), np.float32).transpose(0, 2, 3, 1)
        w = small_ints(rng, (5, 3, 3, 3), np.float32).transpose(2, 3, 1, 0)
        y_shape = (2, 9, 11, 5)
    attr = lambda a: f"{{loom.buffer_layout = strided<[{', '.join(str(s // 4) for s in a.strides)}]>}}"  # noqa: E731
    src = f"""func.func @conv(%x: {ty(x.shape, np.float32)} {attr(x)}, %w: {ty(w.shape, np.float32)} {attr(w)}) -> {ty(y_shape, np.float32)} {{
  %y = loom.conv2d %x, %w {{layout = "{layout}", padding = array<i64: 1, 1>}} : ({ty(x.shape, np.float32)}, {ty(w.shape, np.float32)}) -> {ty(y_shape, np.float32)}
  func.return %y : {ty(y_shape, np.float32)}
}}"""
    kern = compiler.compile(src, pipeline=pipeline, remarks=True)
    np.testing.assert_array_equal(kern(x, w), compiler.reference(src, x, w).astype(np.float32))
    copied = [r for r in kern.remarks if "W is a strided view" in r]
    assert len(copied) == (pipeline == "default"), kern.remarks
    assert not any("conv2d nest left as it is" in r for r in kern.remarks), kern.remarks


def _transposed_b_kernel(m: int, k: int, n: int, dtype: type = np.float32, batch: int = 0, epilogue: bool = False,
                         num_threads: int | None = None):
    """A matmul of A (m x k) by B (k x n) passed as a transposed view (`w.T` of an n x k
    array), batched over `batch` when it is not 0; with `epilogue`, relu(A @ B + bias)."""
    lead = [batch] if batch else []
    a_t, b_t, c_t = (ty(lead + s, dtype) for s in ([m, k], [k, n], [m, n]))
    layout = f"strided<[{'%d, ' % (k * n) if batch else ''}1, {k}]>"
    body = f"  %c = loom.matmul %a, %b : ({a_t}, {b_t}) -> {c_t}\n"
    args = f"%a: {a_t}, %b: {b_t} {{loom.buffer_layout = {layout}}}"
    if epilogue:
        bias_t = ty([n], dtype)
        args += f", %bias: {bias_t}"
        body += (f"  %s = loom.add %c, %bias : ({c_t}, {bias_t}) -> {c_t}\n"
                 f"  %r = loom.relu %s : {c_t}\n")
    result = "%r" if epilogue else "%c"
    src = f"func.func @mm({args}) -> {c_t} {{\n{body}  func.return {result} : {c_t}\n}}"
    return src, compiler.compile(src, pipeline="default", remarks=True, num_threads=num_threads)


def test_default_reads_a_transposed_b_in_place_as_dot_products():
    """Fewer rows than MR and B a transposed view (x @ w.T): dot products of rows of A
    and rows of B's buffer, read in place (no copy), k vectorized as a sum; exact. A
    64-row one packs B (reading the view) and copies nothing more."""
    rng = np.random.default_rng(5)
    _, small = _transposed_b_kernel(3, 64, 48)
    assert any("B a transposed view" in r and "dot products" in r for r in small.remarks), small.remarks
    assert not any("copied into a row-major buffer" in r or "not vectorized" in r for r in small.remarks)
    assert any("sum into" in r for r in small.remarks)
    a, w = small_ints(rng, (3, 64), np.float32), small_ints(rng, (48, 64), np.float32)
    np.testing.assert_array_equal(small(a, w.T), a @ w.T)
    # B's elements adjacent along neither dimension (a view with steps): copied, then vectorized
    steps = compiler.jit(lambda x, y: x @ y, remarks=True)
    a, w = small_ints(rng, (3, 64), np.float32), small_ints(rng, (128, 96), np.float32)
    np.testing.assert_array_equal(steps(a, w[::2, ::2]), a @ w[::2, ::2])
    remarks = steps.kernel(a, w[::2, ::2]).remarks
    assert any("copied into a row-major buffer" in r for r in remarks) and not any("not vectorized" in r for r in remarks)
    _, large = _transposed_b_kernel(192, 256, 256)
    assert any("[loom-pack] packed operand 1" in r for r in large.remarks)
    assert not any("B is a strided view" in r or "dot products" in r for r in large.remarks)
    a, w = small_ints(rng, (192, 256), np.float32), small_ints(rng, (256, 256), np.float32)
    np.testing.assert_array_equal(large(a, w.T), a @ w.T)


@given(m=st.sampled_from([1, 2, 3, 5, 7]), k=st.sampled_from([1, 2, 13, 16, 37, 64]),
       n=st.sampled_from([2, 3, 5, 17, 48, 67]), dtype=st.sampled_from([np.float32, np.float64]),
       batch=st.sampled_from([0, 2]), epilogue=st.booleans(), threads=st.sampled_from([1, 2]))
def test_dot_product_schedule_is_exact(m, k, n, dtype, batch, epilogue, threads):
    """The dot-product schedule of a transposed B, on shapes no jam factor or vector
    width divides, batched or not, with a fused epilogue or not, on 1 or 2 threads:
    bit-exact with small integers."""
    src, kern = _transposed_b_kernel(m, k, n, dtype, batch, epilogue, threads)
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    np_dtype = np.dtype(dtype)
    lead = (batch,) if batch else ()
    a = small_ints(rng, lead + (m, k), np_dtype)
    w = small_ints(rng, lead + (n, k), np_dtype)
    b = np.swapaxes(w, -1, -2)
    args = [a, b] + ([small_ints(rng, (n,), np_dtype)] if epilogue else [])
    np.testing.assert_array_equal(kern(*args), compiler.reference(src, *args).astype(np_dtype))


@pytest.mark.parametrize("shape, dtype", [((300, 200), np.float32), ((2, 130, 270), np.float64), ((129, 7), np.float32)])
def test_contiguous_of_a_long_transposed_view(shape, dtype):
    """loom.contiguous of a transposed view longer than COPY_BLOCK along either of its
    last two dimensions (8x8 tiles in blocks of 128x128, partial blocks and tiles at the
    ends): numpy's copy, exactly."""
    *batch, rows, cols = shape
    perm = [*range(len(batch)), len(shape) - 1, len(shape) - 2]
    out = (*batch, cols, rows)
    src = f"""func.func @f(%a: {ty(shape, dtype)}) -> {ty(out, dtype)} {{
  %t = loom.transpose %a {{perm = array<i64: {', '.join(map(str, perm))}>}} : {ty(shape, dtype)} -> {ty(out, dtype)}
  %c = loom.contiguous %t : {ty(out, dtype)} -> {ty(out, dtype)}
  func.return %c : {ty(out, dtype)}
}}"""
    kern = compiler.compile(src, pipeline="default", remarks=True)
    assert any("in blocks of 128x128" in r for r in kern.remarks), kern.remarks
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    np.testing.assert_array_equal(kern(a), np.transpose(a, perm))


def test_broadcast_argument_is_vectorized():
    """An argument broadcast along its rows (stride 0) is read once per vector: the
    elementwise nest is vectorized, and exact."""
    src = """func.func @f(%a: tensor<8x40xf64>, %b: tensor<8x40xf64> {loom.buffer_layout = strided<[1, 0]>}) -> tensor<8x40xf64> {
  %s = loom.add %a, %b : (tensor<8x40xf64>, tensor<8x40xf64>) -> tensor<8x40xf64>
  func.return %s : tensor<8x40xf64>
}"""
    kern = compiler.compile(src, pipeline="default", remarks=True)
    assert any("vectorized" in r and "not vectorized" not in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(6)
    a, column = small_ints(rng, (8, 40), np.float64), small_ints(rng, (8, 1), np.float64)
    b = np.broadcast_to(column, (8, 40))
    np.testing.assert_array_equal(kern(a, b), a + column)


def test_many_views_outlined():
    """A function of more than 16 nests (loom-outline: a function per distinct nest) on
    views: the outlined functions take the strided memrefs as they are."""
    lines, prev, shape = [], "%a", (6, 5)
    for i in range(18):
        t, nt = f"tensor<{shape[0]}x{shape[1]}xf32>", f"tensor<{shape[1]}x{shape[0]}xf32>"
        lines.append(f"  %t{i} = loom.transpose {prev} {{perm = array<i64: 1, 0>}} : {t} -> {nt}")
        lines.append(f"  %s{i} = loom.slice %t{i} {{offsets = array<i64: {shape[1] - 1}, 0>, sizes = "
                     f"array<i64: {shape[1]}, {shape[0]}>, strides = array<i64: -1, 1>}} : {nt} -> {nt}")
        lines.append(f"  %r{i} = loom.add %s{i}, %t{i} : ({nt}, {nt}) -> {nt}")
        prev, shape = f"%r{i}", shape[::-1]
    t = f"tensor<{shape[0]}x{shape[1]}xf32>"
    src = "\n".join(["func.func @f(%a: tensor<6x5xf32> {loom.buffer_layout = strided<[1, 6]>}) -> " + t + " {",
                     *lines, f"  func.return {prev} : {t}", "}"])
    a = small_ints(np.random.default_rng(7), (5, 6), np.float32, limit=1).T
    want = compiler.reference(src, a).astype(np.float32)
    for pipeline in PIPELINES:
        kern = compiler.compile(src, pipeline=pipeline, stages=True)
        assert kern.stages["loom-outline"].count("func.call") == 18
        np.testing.assert_array_equal(kern(a), want)


# --------------------------------------------------------------------------------------
# Zero copy: the data pointer
# --------------------------------------------------------------------------------------


class _PointerSpy:
    """Stands in for a kernel's machine-code entry: records the addresses it is given."""

    def __init__(self, kernel: compiler.Kernel):
        self.target = kernel._cfunc
        self.calls: list[list[int]] = []

    def __call__(self, *pointers):
        self.calls.append([int(_ffi.cast("uintptr_t", p)) for p in pointers])
        return self.target(*pointers)


def _spied(kernel: compiler.Kernel, monkeypatch) -> _PointerSpy:
    spy = _PointerSpy(kernel)
    monkeypatch.setattr(kernel, "_cfunc", spy)
    return spy


def _refuse_copies(monkeypatch) -> None:
    """From here on, numpy's copying functions fail: a call that copied an argument would
    raise."""
    def refuse(*args, **kwargs):
        pytest.fail("an argument was copied")

    for name in ("ascontiguousarray", "asfortranarray", "copy", "require"):
        monkeypatch.setattr(np, name, refuse)


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_views_are_passed_by_their_data_pointer(pipeline, monkeypatch):
    """A transposed, a broadcast and a stepped array are passed as they are: the kernel
    gets each one's own data pointer (the first element's address), no copy."""
    src = """func.func @f(%a: tensor<4x6xf32> {loom.buffer_layout = strided<[1, 4]>}, %b: tensor<4x6xf32> {loom.buffer_layout = strided<[0, 1]>}, %c: tensor<4x6xf32> {loom.buffer_layout = strided<[24, 2]>}) -> tensor<4x6xf32> {
  %s = loom.add %a, %b : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %t = loom.mul %s, %c : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  func.return %t : tensor<4x6xf32>
}"""
    kern = compiler.compile(src, pipeline=pipeline)
    assert [s.strides for s in kern.inputs] == [(4, 16), (0, 4), (96, 8)]
    rng = np.random.default_rng(8)
    a = small_ints(rng, (6, 4), np.float32).T
    row = small_ints(rng, (6,), np.float32)
    b = np.broadcast_to(row, (4, 6))
    big = small_ints(rng, (8, 12), np.float32)
    c = big[::2, ::2]
    spy = _spied(kern, monkeypatch)
    _refuse_copies(monkeypatch)
    out = kern(a, b, c)
    monkeypatch.undo()
    assert spy.calls[0][:3] == [a.ctypes.data, row.ctypes.data, big.ctypes.data]
    np.testing.assert_array_equal(out, (a + b) * c)


def test_negative_strides_pass_the_lowest_address(monkeypatch):
    """A reversed array (negative strides): the memref's base is the lowest address it
    reaches, its offset the distance to the first element; the kernel is given that base
    (the data pointer moved back by the offset): the root array's own pointer."""
    src = """func.func @f(%a: tensor<5x7xf64> {loom.buffer_layout = strided<[-7, -1]>}) -> tensor<5x7xf64> {
  %r = loom.relu %a : tensor<5x7xf64>
  func.return %r : tensor<5x7xf64>
}"""
    kern = compiler.compile(src)
    spec = kern.inputs[0]
    assert (spec.strides, spec.offset) == ((-56, -8), 34)
    root = small_ints(np.random.default_rng(9), (5, 7), np.float64)
    a = root[::-1, ::-1]
    spy = _spied(kern, monkeypatch)
    _refuse_copies(monkeypatch)
    out = kern(a)
    monkeypatch.undo()
    assert spy.calls[0][0] == root.ctypes.data
    np.testing.assert_array_equal(out, np.maximum(a, 0))


def test_a_view_argument_of_the_wrong_strides_is_refused():
    """The kernel is compiled for one stride pattern: another is a clear ValueError (a
    copy would fit, the message says which strides are expected)."""
    src = """func.func @f(%a: tensor<4x6xf32> {loom.buffer_layout = strided<[1, 4]>}) -> tensor<4x6xf32> {
  %r = loom.relu %a : tensor<4x6xf32>
  func.return %r : tensor<4x6xf32>
}"""
    kern = compiler.compile(src)
    with pytest.raises(ValueError, match=r"has strides \(24, 4\), expected \(4, 16\) \(bytes\)"):
        kern(np.zeros((4, 6), np.float32))
    kern(np.zeros((6, 4), np.float32).T)  # the layout it was compiled for


def test_jit_passes_a_transposed_view_without_a_copy(monkeypatch):
    """`f(x, w.T)`: the traced kernel takes w.T with its strides, by its data pointer."""
    @compiler.jit
    def dense(x, w):
        return compiler.relu(x @ w)

    rng = np.random.default_rng(10)
    x, w = small_ints(rng, (5, 7), np.float32), small_ints(rng, (3, 7), np.float32)
    assert "loom.buffer_layout = strided<[1, 7]>" in dense.lower(x, w.T)
    kern = dense.kernel(x, w.T)
    spy = _spied(kern, monkeypatch)
    _refuse_copies(monkeypatch)
    out = dense(x, w.T)
    monkeypatch.undo()
    assert spy.calls and spy.calls[-1][1] == w.ctypes.data
    np.testing.assert_array_equal(out, np.maximum(x @ w.T, 0))


def _true_convolution(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NCHW x FCHW convolution with the filter flipped (not torch's cross-correlation), in float64."""
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), w.shape[2:], axis=(2, 3))
    return np.einsum("nchwrs,fcrs->nfhw", windows, w[:, :, ::-1, ::-1].astype(np.float64))


# Slices that reverse a dimension and keep the shape (the trace once took them for the
# identity): (function, shapes of the arguments, numpy's result from the arguments)
REVERSALS = {
    "x[::-1]": (lambda x: x[::-1] * 2, [(3,)], lambda x: x[::-1] * 2),
    "x[:, ::-1]": (lambda x: x[:, ::-1] + 0.0, [(3, 4)], lambda x: x[:, ::-1]),
    "a[-1::-1]": (lambda a: a[-1::-1] * 1.0, [(4, 3)], lambda a: a[::-1]),
    "a[::-1] @ w": (lambda a, w: a[::-1] @ w, [(5, 4), (4, 3)], lambda a, w: a[::-1] @ w),
    "contiguous(a[::-1])": (lambda a: compiler.contiguous(a[::-1]), [(4, 3)], lambda a: a[::-1]),
    "a[::-1][:2]": (lambda a: a[::-1][:2] + a[:2], [(4, 3)], lambda a: a[::-1][:2] + a[:2]),
    "a[None, ::-1]": (lambda a: a[None, ::-1] * 1.0, [(4, 3)], lambda a: a[None, ::-1]),
    "returned a[::-1, ::-1]": (lambda a: a[::-1, ::-1], [(4, 3)], lambda a: a[::-1, ::-1]),
    "conv2d(x, w[:, :, ::-1, ::-1])": (lambda x, w: compiler.conv2d(x, w[:, :, ::-1, ::-1]),
                                       [(2, 3, 6, 5), (4, 3, 3, 2)], _true_convolution),
}


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(REVERSALS))
def test_jit_reversing_slices_that_keep_the_shape(case, dtype, pipeline):
    """`x[::-1]` has x's shape but not its elements: the trace records the slice (once it
    recorded a slice only when the sizes changed, and `x[::-1] * 2` of [1, 2, 3] gave
    [2, 4, 6]). Exact on small integers against numpy."""
    fn, shapes, numpy_fn = REVERSALS[case]
    rng = np.random.default_rng(12)
    args = [small_ints(rng, s, dtype) for s in shapes]
    assert "loom.slice" in compiler.jit(fn).lower(*args)
    out = compiler.jit(fn, pipeline=pipeline)(*args)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, numpy_fn(*args))


# --------------------------------------------------------------------------------------
# The documented example: the 4x4 tile swap as one strided view
# --------------------------------------------------------------------------------------

TILE_SWAP = """func.func @tile_swap(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = loom.reshape %a : tensor<4x4xf32> -> tensor<2x2x2x2xf32>
  %t = loom.transpose %r {perm = array<i64: 2, 1, 0, 3>} : tensor<2x2x2x2xf32> -> tensor<2x2x2x2xf32>
  %e = loom.relu %t : tensor<2x2x2x2xf32>
  %s = loom.reshape %e : tensor<2x2x2x2xf32> -> tensor<4x4xf32>
  func.return %s : tensor<4x4xf32>
}"""
SWAPPED = [[0, 1, 8, 9], [4, 5, 12, 13], [2, 3, 10, 11], [6, 7, 14, 15]]


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_tile_swap_is_one_strided_view(pipeline):
    """arange(16).reshape(4, 4) viewed as 2x2x2x2 with element strides (2, 4, 8, 1)
    (as_strided's, in bytes (8, 16, 32, 4)) is the tile swap; relu reads it in place and
    writes the out-parameter: nothing allocated, nothing copied, at any stage."""
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    view = np.lib.stride_tricks.as_strided(a, (2, 2, 2, 2), (8, 16, 32, 4))
    np.testing.assert_array_equal(view.reshape(4, 4), SWAPPED)
    kern = compiler.compile(TILE_SWAP, pipeline=pipeline, stages=True)
    np.testing.assert_array_equal(kern(a), SWAPPED)
    np.testing.assert_array_equal(compiler.reference(TILE_SWAP, a), SWAPPED)
    bufferized = kern.stages["loom-bufferize"]
    assert "strided<[2, 4, 8, 1]>" in bufferized
    for stage, text in kern.stages.items():
        assert "memref.alloc" not in text and "memref.copy" not in text, stage
        assert '"copy"' not in text, stage
    assert "aligned_alloc" not in kern.llvm_ir and "loom_take" not in kern.llvm_ir


def test_tile_swap_with_the_jit():
    """The same through @compiler.jit: numpy code (reshape, transpose, a multiply by 1,
    reshape) gives the tile swap."""
    @compiler.jit
    def swap(a):
        return (a.reshape(2, 2, 2, 2).transpose(2, 1, 0, 3) * 1.0).reshape(4, 4)

    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(swap(a), SWAPPED)


# --------------------------------------------------------------------------------------
# Remarks, errors and the interface
# --------------------------------------------------------------------------------------


def test_reshape_that_copies_says_so():
    src = """func.func @flat(%a: tensor<4x6xf32>) -> tensor<24xf32> {
  %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x6xf32> -> tensor<6x4xf32>
  %f = loom.reshape %t : tensor<6x4xf32> -> tensor<24xf32>
  %r = loom.relu %f : tensor<24xf32>
  func.return %r : tensor<24xf32>
}"""
    kern = compiler.compile(src, pipeline="naive", remarks=True)
    assert any("[loom-bufferize] reshape of 6x4 to 24 copies its operand" in r for r in kern.remarks)
    a = small_ints(np.random.default_rng(11), (4, 6), np.float32)
    np.testing.assert_array_equal(kern(a), np.maximum(a.T.reshape(24), 0))


def test_signature_reports_the_strides():
    fn = next(op for op in load_module("""func.func @f(%a: tensor<3x4xf64> {loom.buffer_layout = strided<[1, 3]>}, %b: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %s = loom.add %a, %b : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>
  func.return %s : tensor<3x4xf64>
}""").ops)
    inputs, _ = signature(fn)
    assert [(s.strides, s.offset, s.contiguous) for s in inputs] == [((8, 24), 0, False), ((32, 8), 0, True)]


def test_bad_buffer_layout_is_an_error_at_the_function():
    src = """func.func @f(%a: tensor<3x4xf32> {loom.buffer_layout = strided<[1]>}) -> tensor<3x4xf32> {
  %r = loom.relu %a : tensor<3x4xf32>
  func.return %r : tensor<3x4xf32>
}"""
    with pytest.raises(LoomError, match=r"<source>:1:1: error: 'loom.buffer_layout' of argument #0 must be "
                                        r"strided<\[\.\.\.\]> with 2 static strides"):
        compiler.compile(src)


@pytest.mark.parametrize("op", [loom.TransposeOp, loom.SliceOp, loom.BroadcastToOp, loom.ReshapeOp,
                                loom.ContiguousOp])
def test_view_ops_are_documented_and_registered(op):
    assert op in loom.Loom.operations
    assert "```mlir" in op.__doc__ and f"= {op.name} %" in op.__doc__
