"""Test kernels: MLIR text for loom ops, random conv2d cases, inputs, and the check of a
result against the numpy reference."""

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

import compiler
from compiler.measure.runner import error_bound
from dialects.loom import conv2d_output_hw

DT = {np.float32: "f32", np.float64: "f64", ml_dtypes.bfloat16: "bf16", np.int8: "i8", np.uint8: "ui8", np.int32: "i32"}


def prime_factors(n: int) -> list[int]:
    """n's prime factors, with repeats, smallest first (what a shape's element count is
    regrouped from)."""
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def ty(shape, dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + DT[dtype] + ">"


def matmul(a_shape, b_shape, c_shape, dtype, b_dtype=None, c_dtype=None) -> str:
    """C = A @ B; B's and C's element types are A's unless given (bf16 -> f32, i8 -> i32)."""
    ta, tb, tc = ty(a_shape, dtype), ty(b_shape, b_dtype or dtype), ty(c_shape, c_dtype or dtype)
    return f"""func.func @mm(%a: {ta}, %b: {tb}) -> {tc} {{
  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}
  func.return %c : {tc}
}}"""


def quantized_matmul(m: int, k: int, n: int, x_type: str, out_type: str) -> str:
    """A quantized layer, one fused nest in Loom: X (x_type) @ W (i8) in i32, + i32 bias,
    dequantized per column, relu, requantized per tensor to `out_type`."""
    return f"""func.func @layer(%x: tensor<{m}x{k}x{x_type}>, %w: tensor<{k}x{n}xi8>, %bias: tensor<{n}xi32>,
                     %scale: tensor<{n}xf32>, %zero: tensor<{n}xi32>, %os: tensor<f32>, %oz: tensor<i32>) -> tensor<{m}x{n}x{out_type}> {{
  %acc = loom.matmul %x, %w : (tensor<{m}x{k}x{x_type}>, tensor<{k}x{n}xi8>) -> tensor<{m}x{n}xi32>
  %sum = loom.add %acc, %bias : (tensor<{m}x{n}xi32>, tensor<{n}xi32>) -> tensor<{m}x{n}xi32>
  %y = loom.dequantize %sum, %scale, %zero {{axis = 1 : i64}} : (tensor<{m}x{n}xi32>, tensor<{n}xf32>, tensor<{n}xi32>) -> tensor<{m}x{n}xf32>
  %r = loom.relu %y : tensor<{m}x{n}xf32>
  %q = loom.quantize %r, %os, %oz : (tensor<{m}x{n}xf32>, tensor<f32>, tensor<i32>) -> tensor<{m}x{n}x{out_type}>
  func.return %q : tensor<{m}x{n}x{out_type}>
}}"""


def conv2d(x_shape, w_shape, y_shape, strides, padding, dilations, dtype, w_dtype=None, y_dtype=None,
           layout="nchw") -> str:
    tx, tw, ty_ = ty(x_shape, dtype), ty(w_shape, w_dtype or dtype), ty(y_shape, y_dtype or dtype)
    layout_attr = "" if layout == "nchw" else f', layout = "{layout}"'
    attrs = (f"{{strides = array<i64: {strides[0]}, {strides[1]}>, padding = array<i64: {padding[0]}, "
             f"{padding[1]}>, dilations = array<i64: {dilations[0]}, {dilations[1]}>{layout_attr}}}")
    return f"""func.func @conv(%x: {tx}, %w: {tw}) -> {ty_} {{
  %y = loom.conv2d %x, %w {attrs} : ({tx}, {tw}) -> {ty_}
  func.return %y : {ty_}
}}"""


def binary(op, a_shape, b_shape, out_shape, dtype, relu=False) -> str:
    ta, tb, to = ty(a_shape, dtype), ty(b_shape, dtype), ty(out_shape, dtype)
    tail = f"  %r = loom.relu %s : {to}\n  func.return %r : {to}" if relu else f"  func.return %s : {to}"
    return f"""func.func @ew(%a: {ta}, %b: {tb}) -> {to} {{
  %s = loom.{op} %a, %b : ({ta}, {tb}) -> {to}
{tail}
}}"""


#: a triangle whose inner loop only ends at the outer iv (%j = 0 to %i + 1): c = 2a on and below the diagonal
TRIANGLE = """func.func @tri(%a: memref<9x9xf32>, %c: memref<9x9xf32>) {
  affine.for %i = 0 to 9 {
    affine.for %j = 0 to affine_map<(d0) -> (d0 + 1)>(%i) {
      %x = affine.load %a[%i, %j] : memref<9x9xf32>
      %y = arith.addf %x, %x : f32
      affine.store %y, %c[%i, %j] : memref<9x9xf32>
    }
  } {loom.tag = "tri"}
  func.return
}"""

# --------------------------------------------------------------------------------------
# conv2d cases: (n, c, h, w, f, r, s, strides, padding, dilations)


def conv2d_kernel(case, dtype):
    """The conv2d of a case: (source, input shapes, reduction length c*r*s)."""
    n, c, h, w, f, r, s, strides, padding, dilations = case
    ho, wo = conv2d_output_hw(h, w, r, s, strides, padding, dilations)
    src = conv2d((n, c, h, w), (f, c, r, s), (n, f, ho, wo), strides, padding, dilations, dtype)
    return src, [(n, c, h, w), (f, c, r, s)], c * r * s


@st.composite
def conv2d_cases(draw, *, max_c, max_f, max_rs, max_stride, max_padding, max_dilation, max_hw):
    """Random conv2d cases: a batch of 1 or 2, c channels in 1..max_c, f filters in
    1..max_f, an r x s window in 1..max_rs, strides, padding and dilations per spatial
    dimension in 1..max_stride, 0..max_padding and 1..max_dilation, and an input h x w
    of at most max_hw that the dilated window fits in (padding included)."""
    n, c, f = draw(st.integers(1, 2)), draw(st.integers(1, max_c)), draw(st.integers(1, max_f))
    r, s = draw(st.integers(1, max_rs)), draw(st.integers(1, max_rs))
    strides = (draw(st.integers(1, max_stride)), draw(st.integers(1, max_stride)))
    padding = (draw(st.integers(0, max_padding)), draw(st.integers(0, max_padding)))
    dilations = (draw(st.integers(1, max_dilation)), draw(st.integers(1, max_dilation)))
    h = draw(st.integers(max(1, dilations[0] * (r - 1) + 1 - 2 * padding[0]), max_hw))
    w = draw(st.integers(max(1, dilations[1] * (s - 1) + 1 - 2 * padding[1]), max_hw))
    return n, c, h, w, f, r, s, strides, padding, dilations


# --------------------------------------------------------------------------------------
# Inputs and checks


def matches_naive(kern, src: str, *arrays: np.ndarray) -> list[np.ndarray]:
    """Run `kern` and the unscheduled (`naive`) compile of `src` on copies of `arrays` (a
    memref function's arguments, the ones it writes included): every array the same bits
    afterwards. Returns the kernel's copies."""
    got, want = [a.copy() for a in arrays], [a.copy() for a in arrays]
    kern(*got)
    compiler.compile(src, pipeline="naive")(*want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    return got


def small_ints(rng, shape, dtype, limit=4):
    """Integers in -limit..limit: their products and sums are exact in f32, in any order."""
    return rng.integers(-limit, limit + 1, size=shape).astype(dtype)


def assert_within_bound(out, ref, k, dtype, context=None):
    """`out` is within 4*K*eps*max|ref| of the float64 reference `ref` (K = k, the
    reduction length: `compiler.measure.runner.error_bound`); `context` leads the message."""
    bound = error_bound(k, np.dtype(dtype), float(np.max(np.abs(ref), initial=0.0)))
    err = float(np.max(np.abs(out - ref), initial=0.0))
    message = f"max error {err} > bound {bound}"
    assert err <= bound, f"{context}: {message}" if context else message


def check_both(src, shapes, k, pipeline, seed=0):
    """Compile with `pipeline`; compare with the reference on random normal inputs
    (within the bound) and on small integers (exactly)."""
    kern = compiler.compile(src, pipeline=pipeline)
    rng = np.random.default_rng(seed)
    normal = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    assert_within_bound(kern(*normal), compiler.reference(src, *normal), k, np.float32, pipeline)
    ints = [small_ints(rng, s, np.float32) for s in shapes]
    np.testing.assert_array_equal(kern(*ints), compiler.reference(src, *ints).astype(np.float32), err_msg=pipeline)


def unknown_memref(maker: str, t: str) -> str:
    """`%m = ...`: %a when %c holds, else %b, chosen by `maker` (arith.select or scf.if):
    a memref of unknown origin, which the analyses must take for any buffer."""
    if maker == "arith.select":
        return f"%m = arith.select %c, %a, %b : {t}"
    assert maker == "scf.if", maker
    return f"""%m = scf.if %c -> ({t}) {{
    scf.yield %a : {t}
  }} else {{
    scf.yield %b : {t}
  }}"""
