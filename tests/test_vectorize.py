"""loom-vectorize: vectorized kernels against numpy, and the machine code they become.

Random inputs are checked within 4*K*eps*max|ref| (the fma and the reassociated sums
round differently from the scalar loop, inside that bound); small integers, whose
products and sums are exact, bit-exactly. The sizes cover a width that divides the
extent, one that does not (a masked remainder), and extents below the width (one masked
vector).

`loom-vectorize` (width=0) takes the target's width, so the tests that use it run for
both kinds of x86-64 host (the `vector_target` fixture: 8 and 16 f32 lanes) and expect
what that width gives (`split`). The machine code is checked for the host's vectors
(ymm on AVX2, zmm on AVX-512) and compiled for each kind's CPU.
"""

import re

import numpy as np
import pytest
from targets import CPUS, REGISTERS, TARGETS, asm_for_cpu, fma_registers, is_x86_64, planning_for

import compiler
from passes.support.target import machine
from dialects.loom import conv2d_output_hw
from kernels import assert_within_bound, binary, conv2d_kernel, matches_naive, matmul, small_ints

IKJ = "loom-interchange{order=0,2,1},loom-vectorize"
DTYPES = [np.float32, np.float64]


def remarks_of(kernel, tag):
    return [r for r in kernel.remarks if "[loom-vectorize]" in r and f"nest '{tag}'" in r]


def split(trips: int, width: int) -> str:
    """What the remark says of a loop of a constant `trips` vectorized by `width`."""
    if trips < width:
        return f"by {width} (one masked vector of {trips}: fewer iterations than the width)"
    chunks, rest = divmod(trips, width)
    tail = f"masked remainder of {rest}" if rest else "no remainder"
    return f"by {width} (main {chunks} iteration{'s' * (chunks > 1)}, {tail})"


def test_split_words():
    """The expectation of the tests below, against remarks written out (8 f32 lanes)."""
    assert split(13, 8) == "by 8 (main 1 iteration, masked remainder of 5)"
    assert split(64, 8) == "by 8 (main 8 iterations, no remainder)"
    assert split(3, 8) == "by 8 (one masked vector of 3: fewer iterations than the width)"


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (2, 3, 5), (7, 13, 11), (8, 8, 8), (16, 16, 16), (33, 17, 33), (5, 31, 37)])
def test_matmul_ikj(m, k, n, dtype, vector_target):
    src = matmul((m, k), (k, n), (m, n), dtype)
    kernel = compiler.compile(src, pipeline=IKJ, remarks=True)
    rng = np.random.default_rng(m * 100 + n)
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    assert_within_bound(kernel(a, b), compiler.reference(src, a, b), k, dtype)
    (said,) = remarks_of(kernel, "matmul")
    # an inner loop: fewer columns than the width make one masked vector
    assert f"vectorized loop %j {split(n, vector_target.lanes(np.dtype(dtype).itemsize))}" in said, said


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_matmul_exact_with_masked_remainder(dtype, vector_target):
    """Small integers: every product and partial sum is exact, so the vector code (fma,
    masked tail) must give numpy's result to the bit."""
    m, k, n = 9, 21, 29
    src = matmul((m, k), (k, n), (m, n), dtype)
    kernel = compiler.compile(src, pipeline=IKJ)
    rng = np.random.default_rng(3)
    a, b = (small_ints(rng, s, dtype) for s in [(m, k), (k, n)])
    np.testing.assert_array_equal(kernel(a, b), (a.astype(np.int64) @ b.astype(np.int64)).astype(dtype))


@pytest.mark.parametrize("pipeline", [
    "loom-interchange{order=0,2,1},loom-tile{sizes=8,8,12},loom-vectorize",  # min bounds: runtime remainder
    "loom-tile{sizes=4,4,6},loom-vectorize{width=4}",  # k innermost: B[k, j] strided, refused
])
def test_matmul_tiled(pipeline, vector_target):
    m, k, n = 19, 23, 45
    src = matmul((m, k), (k, n), (m, n), np.float32)
    kernel = compiler.compile(src, pipeline=pipeline, remarks=True)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    assert_within_bound(kernel(a, b), compiler.reference(src, a, b), k, np.float32)
    (said,) = remarks_of(kernel, "matmul")
    if "interchange" in pipeline:
        assert f"vectorized loop %j by {vector_target.lanes()} (a main loop and a masked remainder" in said, said
    else:
        assert "loop %k not vectorized: %b[%k, %j] has stride 45 in %k" in said


def test_matmul_of_a_transposed_view_reads_it_scalar():
    """B a transposed view (strides [1, K]): along %j, the subscript that moves is B's
    last, but its elements are K apart, not adjacent: the ikj loop is not vectorized (a
    vector load reads adjacent addresses). Exact on small integers."""
    m, k, n = 5, 7, 19
    src = matmul((m, k), (k, n), (m, n), np.float32).replace(
        f"%b: tensor<{k}x{n}xf32>", f"%b: tensor<{k}x{n}xf32> {{loom.buffer_layout = strided<[1, {k}]>}}")
    kernel = compiler.compile(src, pipeline=IKJ, remarks=True)
    (said,) = remarks_of(kernel, "matmul")
    assert f"loop %j not vectorized: %b[%k, %j] has stride {k} in %j" in said, said
    rng = np.random.default_rng(4)
    a, b = small_ints(rng, (m, k), np.float32), small_ints(rng, (n, k), np.float32).T
    np.testing.assert_array_equal(kernel(a, b), a.astype(np.float64) @ b)


@pytest.mark.parametrize("op", ["add", "mul"])
@pytest.mark.parametrize("a_shape,b_shape", [((5, 13), (13,)), ((6, 19), (6, 1)), ((7, 1), (1, 9)), ((3, 4, 17), (4, 1))])
def test_elementwise_broadcast_relu(op, a_shape, b_shape, vector_target):
    out_shape = tuple(np.broadcast_shapes(a_shape, b_shape))
    src = binary(op, a_shape, b_shape, out_shape, np.float32, relu=True)
    kernel = compiler.compile(src, pipeline="loom-vectorize", remarks=True)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal(b_shape).astype(np.float32)
    a.flat[0], a.flat[1], a.flat[2] = np.nan, -0.0, np.inf
    out = kernel(a, b)
    ref = compiler.reference(src, a, b).astype(np.float32)
    np.testing.assert_array_equal(out, ref)  # one rounding per element: exact
    (said,) = remarks_of(kernel, "relu")
    assert f"vectorized its innermost loop {split(out_shape[-1], vector_target.lanes())}" in said, said


def test_relu_signs_and_nan(vector_target):
    """relu as arith.maximumf(x, 0.0): NaN stays NaN, -0.0 and negatives become +0.0,
    in the vector loop and in the masked remainder alike."""
    src = binary("add", (2, 11), (11,), (2, 11), np.float32, relu=True)
    kernel = compiler.compile(src, pipeline="loom-vectorize")
    a = np.array([[np.nan, -0.0, 0.0, -1.0, 2.0, -np.inf, np.inf, 3.0, np.nan, -0.0, -5.0]] * 2, np.float32)
    out = kernel(a, np.zeros(11, np.float32))
    expected = np.maximum(a + np.zeros(11, np.float32), 0)
    np.testing.assert_array_equal(out, expected)
    assert not np.signbit(out[~np.isnan(out)]).any()


CONV_CASES = {  # n, c, h, w, f, r, s, strides, padding, dilations
    "3x3": (1, 2, 9, 21, 3, 3, 3, (1, 1), (0, 0), (1, 1)),
    "s11": (2, 3, 12, 14, 4, 3, 11, (1, 1), (0, 0), (1, 1)),  # a sum along s, vectorized
    "stride2-pad1": (1, 2, 9, 21, 3, 3, 3, (2, 2), (1, 1), (1, 1)),  # refused (guard), still right
}
OW_INNERMOST = "loom-interchange{order=0,1,4,5,6,2,3},"


@pytest.mark.parametrize("name,order,dtype", [
    ("3x3", "", np.float32), ("3x3", OW_INNERMOST, np.float32), ("3x3", OW_INNERMOST, np.float64),
    ("s11", "", np.float32), ("s11", "", np.float64), ("s11", OW_INNERMOST, np.float32),
    ("stride2-pad1", "", np.float32), ("stride2-pad1", OW_INNERMOST, np.float32),
])
def test_conv2d(name, order, dtype, vector_target):
    case = CONV_CASES[name]
    n, c, h, w, f, r, s, strides, padding, dilations = case
    src, _, k = conv2d_kernel(case, dtype)
    kernel = compiler.compile(src, pipeline=order + "loom-vectorize", remarks=True)
    rng = np.random.default_rng(11)
    x, wt = rng.standard_normal((n, c, h, w)).astype(dtype), rng.standard_normal((f, c, r, s)).astype(dtype)
    assert_within_bound(kernel(x, wt), compiler.reference(src, x, wt), k, dtype)
    (said,) = remarks_of(kernel, "conv2d")
    width = vector_target.lanes(np.dtype(dtype).itemsize)
    if padding != (0, 0):
        assert "not vectorized: its body has an affine.if" in said, said
    elif order:  # along the output row: no sum
        wo = conv2d_output_hw(h, w, r, s, strides, padding, dilations)[1]
        assert f"vectorized loop %ow {split(wo, width)}" in said and "sum into" not in said, said
    else:  # along the filter row: a sum into one element of y
        assert f"vectorized loop %s {split(s, width)}; sum into %y" in said, said


SUM_PLUS_ONE = """
func.func @sum(%a: memref<100xf32>, %c: memref<1xf32>) {
  %one = arith.constant 1.000000e+00 : f32
  affine.for %kt = 0 to 100 step 32 {
    affine.for %k = BOUNDS {
      %x = affine.load %a[%k] : memref<100xf32>
      %acc = affine.load %c[0] : memref<1xf32>
      %y = arith.addf %x, %one : f32
      %s = arith.addf %acc, %y : f32
      affine.store %s, %c[0] : memref<1xf32>
    }
  } {loom.tag = "sum"}
  func.return
}
"""


@pytest.mark.parametrize("bounds,trips,summed", [
    ("affine_map<(d0) -> (d0)>(%kt) to min affine_map<(d0) -> (d0 + 32, 100)>(%kt)", None, slice(0, 100)),
    ("0 to 13", 13, [slice(0, 13)] * 4),  # a[0:13], once per %kt
    ("0 to 21", 21, [slice(0, 21)] * 4),  # a main loop and a remainder at 8 and 16 lanes
])
def test_sum_masked_lanes_do_not_count(bounds, trips, summed, vector_target):
    """c += a[k] + 1: a masked lane reads 0.0 and would add 1.0, so the remainder must keep
    the accumulator's masked lanes (a shuffle for a constant count, lane by lane when the
    count is only known at run time)."""
    kernel = compiler.compile(SUM_PLUS_ONE.replace("BOUNDS", bounds), pipeline="loom-vectorize", remarks=True)
    (said,) = remarks_of(kernel, "sum")
    width = vector_target.lanes()
    words = split(trips, width) if trips else f"by {width} (a main loop and a masked remainder"
    assert f"vectorized loop %k {words}" in said, said
    a = np.arange(100, dtype=np.float32) - 50
    c = np.array([0.5], np.float32)
    kernel(a, c)
    parts = summed if isinstance(summed, list) else [summed]
    assert c[0] == 0.5 + sum(float(np.sum(a[part] + 1)) for part in parts)  # small integers: exact


def check_matmul_fma(asm: str, vector_bits: int) -> None:
    """The vectorized 32x32x64 matmul's fmas work on the target's vectors (8 floats in a
    ymm register, 16 in a zmm one), and 64 columns leave no remainder: no masked move
    (AVX's vmaskmov, AVX-512's {%k} masks)."""
    registers = fma_registers(asm)
    assert registers, "no vfmadd...ps"
    assert all(r.startswith(REGISTERS[vector_bits]) for r in registers), registers
    assert "vmaskmov" not in asm and not re.search(r"\{%k\d\}", asm)


MATMUL_32 = matmul((32, 32), (32, 64), (32, 64), np.float32)


def test_vectorized_matmul_uses_the_hosts_vector_fma():
    """On the host, planned for it (LOOM_TARGET unset): vfmadd on its widest vectors."""
    host = machine()
    if not (host.fma and host.vector_bits in REGISTERS):
        pytest.skip(f"the host ({host.describe()}) has no FMA on ymm or zmm registers")
    with planning_for(""):
        asm = compiler.compile(MATMUL_32, pipeline=IKJ).asm()
    check_matmul_fma(asm, host.vector_bits)


@pytest.mark.skipif(not is_x86_64(), reason="compiles for x86-64 CPUs")
@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_vectorized_matmul_fma_for_each_kind_of_host(kind):
    """Planned for each kind of host and compiled for its CPU (not run): ymm on Zen 3,
    zmm on Zen 4, whichever this host is."""
    with planning_for(TARGETS[kind]) as target:
        kernel = compiler.compile(MATMUL_32, pipeline=IKJ)
    check_matmul_fma(asm_for_cpu(kernel.llvm_ir, CPUS[kind]), target.vector_bits)


def _loop_of(body: str, n: int = 16, step: int = 1, head: str = "") -> str:
    """`body` in a loop %j = 0 to n (tagged "v") over %a and %c, 32 elements each."""
    return f"""func.func @v(%a: memref<32xf32>, %c: memref<32xf32>) {{
{head}  affine.for %j = 0 to {n} step {step} {{
{body}
  }} {{loom.tag = "v"}}
  func.return
}}"""


def _doubled(load: str, store: str) -> str:
    return (f"    %x = affine.load {load} : memref<32xf32>\n    %y = arith.addf %x, %x : f32\n"
            f"    affine.store %y, {store} : memref<32xf32>")


DOUBLE = _doubled("%a[%j]", "%c[%j]")
#: case -> (source, why the loop is not vectorized by 8; None: vectorized)
VECTORIZE_GUARDS = {
    "8_iterations": (_loop_of(DOUBLE, n=8), None),
    "7_iterations": (_loop_of(DOUBLE, n=7), "it has 7 iterations, fewer than the width 8"),
    "step_2": (_loop_of(DOUBLE, step=2), "its step is 2, not 1"),
    "iv_as_a_value": (_loop_of("    %k = arith.index_cast %j : index to i32\n    %f = arith.sitofp %k : i32 to f32\n"
                               "    affine.store %f, %c[%j] : memref<32xf32>"),
                      "%j is used as a value by 'arith.index_cast'"),
    "one_element": (_loop_of("    %x = affine.load %a[%j] : memref<32xf32>\n"
                             "    affine.store %x, %c[0] : memref<32xf32>"),
                    "%c[0] is stored to the same element in every iteration of %j, not as a sum"),
    # reads what the iteration 7 before wrote: within one vector
    "distance_7": (_loop_of(_doubled("%c[%j]", "%c[%j + 7]")),
                   "dependence store %c[%j + 7] (line 5) -> load %c[%j] (line 3), direction (<) at distance 7 "
                   "(vector width 8)"),
    "distance_8": (_loop_of(_doubled("%c[%j]", "%c[%j + 8]")), None),  # from the vector before: in order
    # each element of %a read twice, or %a's first 4 elements again and again: no vector load
    "floordiv_of_the_iv": (_loop_of("    %x = affine.load %a[%j floordiv 2] : memref<32xf32>\n"
                                    "    affine.store %x, %c[%j] : memref<32xf32>"),
                           "%a[%j floordiv 2] is not linear in %j"),
    "mod_of_the_iv": (_loop_of("    %x = affine.load %a[%j mod 4] : memref<32xf32>\n"
                               "    affine.store %x, %c[%j] : memref<32xf32>"), "%a[%j mod 4] is not linear in %j"),
    "reads_ahead": (_loop_of(_doubled("%c[%j + 1]", "%c[%j]")), None),  # the load stays before the store
    "view_of_the_result": (_loop_of(_doubled("%v[%j]", "%c[%j]").replace(
        "%v[%j] : memref<32xf32>", "%v[%j] : memref<31xf32, strided<[1], offset: 1>>"),
        head="  %v = memref.subview %c[1] [31] [1] : memref<32xf32> to memref<31xf32, strided<[1], offset: 1>>\n"),
        "%v and %c are views of one buffer"),
}


@pytest.mark.parametrize("case", sorted(VECTORIZE_GUARDS))
def test_vectorize_guards(case):
    """Each guard of loom-vectorize at its boundary (8 iterations vectorized by 8, 7 not;
    a dependence at distance 8 kept by the vector order, 7 not): the remark says why, and
    the result is exactly what the unscheduled loops compute."""
    src, why = VECTORIZE_GUARDS[case]
    kern = compiler.compile(src, pipeline="loom-vectorize{width=8}", remarks=True)
    [said] = [r.split("] ", 1)[1] for r in kern.remarks]
    assert said.startswith("nest 'v': vectorized loop %j by 8") if why is None else \
        said == f"nest 'v': loop %j not vectorized: {why}", said
    rng = np.random.default_rng(10)
    matches_naive(kern, src, small_ints(rng, (32,), np.float32), small_ints(rng, (32,), np.float32))


#: select(cmpf ugt x, c), x, d): relu where d is c (0.0), something else otherwise
_SELECT = """func.func @s(%a: memref<32xf32>, %c: memref<32xf32>) {{
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  affine.for %j = 0 to 32 {{
    %x = affine.load %a[%j] : memref<32xf32>
    %p = arith.cmpf ugt, %x, {compared} : f32
    %r = arith.select %p, %x, {chosen} : f32
    affine.store %r, %c[%j] : memref<32xf32>
  }} {{loom.tag = "s"}}
  func.return
}}"""


@pytest.mark.parametrize(("compared", "chosen", "words"), [
    ("%zero", "%zero", "vectorized loop %j by 8"),  # relu: a max
    ("%zero", "%one", "an arith.select on a condition that varies with %j"),  # x > 0 ? x : 1 is no max
    ("%one", "%zero", "an arith.select on a condition that varies with %j"),  # x > 1 ? x : 0 neither
])
def test_only_a_select_of_the_value_compared_is_a_max(compared, chosen, words):
    """select(x > c, x, d) is max(x, c) only when d is c: any other select stays scalar, and
    every case is exact against the unscheduled loop on values around 0 and 1."""
    src = _SELECT.format(compared=compared, chosen=chosen)
    kern = compiler.compile(src, pipeline="loom-vectorize{width=8}", remarks=True)
    assert any(words in r for r in kern.remarks), kern.remarks
    matches_naive(kern, src, np.linspace(-1.5, 1.5, 32, dtype=np.float32), np.zeros(32, np.float32))


#: a running sum kept in %acc[0] and also stored each iteration (a prefix sum into %p)
_PREFIX_SUM = """func.func @prefix(%x: memref<32xf32>, %acc: memref<1xf32>, %p: memref<32xf32>) {
  affine.for %j = 0 to 32 {
    %s = affine.load %acc[0] : memref<1xf32>
    %v = affine.load %x[%j] : memref<32xf32>
    %t = arith.addf %s, %v : f32
    affine.store %t, %acc[0] : memref<1xf32>
    affine.store %t, %p[%j] : memref<32xf32>
  } {loom.tag = "prefix"}
  func.return
}"""


def test_a_running_sum_used_inside_the_loop_is_not_a_reduction():
    """A sum that each iteration also stores (a prefix sum) needs every partial sum in
    order: not vectorized as a reduction of lanes, and exact against the unscheduled loop."""
    kern = compiler.compile(_PREFIX_SUM, pipeline="loom-vectorize{width=8}", remarks=True)
    assert not any("vectorized loop %j" in r for r in kern.remarks), kern.remarks
    x = np.arange(1, 33, dtype=np.float32)
    _, total, prefix = matches_naive(kern, _PREFIX_SUM, x, np.zeros(1, np.float32), np.zeros(32, np.float32))
    np.testing.assert_array_equal(prefix, np.cumsum(x))
    assert total[0] == x.sum()


#: %t[%i] = %i (the iv stored as a value, not as a subscript), then read back as i32
_IOTA = """func.func @iota(%out: memref<16xi32>) {
  %t = memref.alloc() : memref<16xindex>
  affine.for %i = 0 to 16 {
    affine.store %i, %t[%i] : memref<16xindex>
  } {loom.tag = "iota"}
  affine.for %i = 0 to 16 {
    %v = affine.load %t[%i] : memref<16xindex>
    %w = arith.index_cast %v : index to i32
    affine.store %w, %out[%i] : memref<16xi32>
  } {loom.tag = "cast"}
  memref.dealloc %t : memref<16xindex>
  func.return
}"""


def test_the_iv_stored_as_a_value_is_not_vectorized():
    """A vector of the iv would hold the first lane's index in every lane: refused with the
    remark, and the result is 0..15."""
    kern = compiler.compile(_IOTA, pipeline="loom-vectorize{width=4 op=iota}", remarks=True)
    assert any("loop %i not vectorized: %i is used as a value by 'affine.store'" in r for r in kern.remarks), \
        kern.remarks
    out = np.zeros(16, np.int32)
    kern(out)
    np.testing.assert_array_equal(out, np.arange(16))


def test_a_product_also_stored_is_kept_beside_the_fma():
    """%m = x * x feeds x + %m and is stored too: the add may not take the product into an
    fma that drops %m (the store needs it). Vectorized, exact against the unscheduled loop."""
    src = _loop_of("    %x = affine.load %a[%j] : memref<32xf32>\n    %m = arith.mulf %x, %x : f32\n"
                   "    %s = arith.addf %m, %x : f32\n    affine.store %s, %c[%j] : memref<32xf32>\n"
                   "    affine.store %m, %a[%j] : memref<32xf32>")
    kern = compiler.compile(src, pipeline="loom-vectorize{width=8}", remarks=True)
    assert any("vectorized loop %j by 8" in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(12)
    matches_naive(kern, src, small_ints(rng, (32,), np.float32), small_ints(rng, (32,), np.float32))


def test_a_comparison_also_used_elsewhere_does_not_make_its_select_a_max():
    """relu's select whose comparison is also stored (as 0.0 or 1.0): a max would drop the
    comparison the store needs, so the select is no max and the loop is refused for it (not
    for the conversion); exact against the unscheduled loop on values around 0."""
    src = _loop_of("    %x = affine.load %a[%j] : memref<32xf32>\n    %p = arith.cmpf ugt, %x, %zero : f32\n"
                   "    %r = arith.select %p, %x, %zero : f32\n    affine.store %r, %c[%j] : memref<32xf32>\n"
                   "    %q = arith.uitofp %p : i1 to f32\n    affine.store %q, %c[%j + 16] : memref<32xf32>",
                   head="  %zero = arith.constant 0.0 : f32\n")
    kern = compiler.compile(src, pipeline="loom-vectorize{width=8}", remarks=True)
    assert any("loop %j not vectorized: an arith.select on a condition that varies with %j" in r
               for r in kern.remarks), kern.remarks
    matches_naive(kern, src, np.tile(np.float32([-1.5, 0, 0.5, -0.0]), 8), np.zeros(32, np.float32))
