"""loom-fuse-epilogue: elementwise epilogues (bias over rows or columns, full-shape add and
mul, relu, chains of them) computed in the nest of a matmul, a batched matmul or a conv2d
(NCHW and NHWC, direct and im2col), in the `default` pipeline and with loom-default's
`skip=` options: numerics against the float64 reference within 4*K*eps*max|ref|, exactly
on small integers, bit for bit what the unfused kernel computes; the remark says what
was fused; refused epilogues compute the right result unfused; the fused nest still runs
on threads; a matmul or conv2d without an epilogue loses its zero fill all the same."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import assert_within_bound, small_ints, ty
from targets import TARGETS, planning_for

import compiler
from dialects.layout import reshape_strides
from dialects.loom import conv2d_output_hw
from passes.support.target import host
from tools.bench.conv import layer_shapes
from tools.bench.low_precision import requantized_source

#: sizes with 1, primes and sizes no register or cache tile divides
SIZES = st.sampled_from([1, 2, 3, 5, 7, 13, 16, 17, 31, 48, 67])
DTYPES = st.sampled_from([np.float32, np.float64])
#: the default pipeline, loom-default less a step, and the pass alone on the textbook nests
FUSING = ["default", "loom-default{skip=hoist}", "loom-default{skip=tile}", "loom-default{skip=vectorize}",
          "loom-default{skip=unroll-jam}", "loom-default{skip=pack}", "loom-default{skip=prefetch}",
          "loom-fuse-epilogue"]
#: epilogues: (name, the ops after %c, as (op, operand shape or None)), the operand's
#: shape a function of the result's (M, N)
EPILOGUES = {
    "bias_relu": [("add", lambda m, n: (n,)), ("relu", None)],
    "column_bias": [("add", lambda m, n: (m, 1))],
    "full_add_relu": [("add", lambda m, n: (m, n)), ("relu", None)],
    "mul_add_relu": [("mul", lambda m, n: (m, n)), ("add", lambda m, n: (1, n)), ("relu", None)],
    "relu": [("relu", None)],
}


def epilogue_source(a_shape, b_shape, steps, dtype, batch=()):
    """A matmul of `a_shape` by `b_shape`, then the epilogue `steps`; returns (source,
    operand shapes in order)."""
    m, n = a_shape[-2], b_shape[-1]
    out = (*batch, m, n)
    to = ty(out, dtype)
    args = [f"%a: {ty(a_shape, dtype)}", f"%b: {ty(b_shape, dtype)}"]
    lines = [f"  %v0 = loom.matmul %a, %b : ({ty(a_shape, dtype)}, {ty(b_shape, dtype)}) -> {to}"]
    shapes = [a_shape, b_shape]
    for i, (op, shape_of) in enumerate(steps):
        if shape_of is None:
            lines.append(f"  %v{i + 1} = loom.{op} %v{i} : {to}")
            continue
        shape = shape_of(m, n)
        args.append(f"%o{i}: {ty(shape, dtype)}")
        shapes.append(shape)
        lines.append(f"  %v{i + 1} = loom.{op} %v{i}, %o{i} : ({to}, {ty(shape, dtype)}) -> {to}")
    body = "\n".join(lines)
    return (f"func.func @f({', '.join(args)}) -> {to} {{\n{body}\n  func.return %v{len(steps)} : {to}\n}}\n",
            shapes)


def fused(kern):
    return [r for r in kern.remarks if "[loom-fuse-epilogue] fused" in r]


def check(src, shapes, k, pipeline, dtype, seed, expect_fused=True):
    """Compile, compare with the reference (within the bound on normal inputs, exactly
    on small integers), and with the unfused kernel bit for bit."""
    kern = compiler.compile(src, pipeline=pipeline, remarks=True)
    if expect_fused:
        assert fused(kern), [r for r in kern.remarks if "fuse-epilogue" in r]
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(s).astype(dtype) for s in shapes]
    got = kern(*args)
    assert_within_bound(got, compiler.reference(src, *args), k, dtype, pipeline)
    ints = [small_ints(rng, s, dtype) for s in shapes]
    np.testing.assert_array_equal(kern(*ints), compiler.reference(src, *ints).astype(dtype), err_msg=pipeline)
    return kern, args, got


@pytest.mark.parametrize("pipeline", FUSING)
@settings(max_examples=6)
@given(m=SIZES, n=SIZES, k=SIZES, epilogue=st.sampled_from(sorted(EPILOGUES)), dtype=DTYPES,
       seed=st.integers(0, 2**16))
def test_matmul_epilogue_matches_the_reference(pipeline, m, n, k, epilogue, dtype, seed):
    src, shapes = epilogue_source((m, k), (k, n), EPILOGUES[epilogue], dtype)
    check(src, shapes, k, pipeline, dtype, seed)


@settings(max_examples=10)
@given(m=SIZES, n=SIZES, k=st.sampled_from([1, 7, 64, 300, 1031]), epilogue=st.sampled_from(sorted(EPILOGUES)),
       seed=st.integers(0, 2**16))
def test_fused_is_bit_for_bit_the_unfused(m, n, k, epilogue, seed):
    """The same operations in the same order as the unfused nests (K over several
    panels: the epilogue in the last one only)."""
    src, shapes = epilogue_source((m, k), (k, n), EPILOGUES[epilogue], np.float32)
    kern, args, got = check(src, shapes, k, "default", np.float32, seed)
    unfused = compiler.compile(src, pipeline="loom-default{skip=fuse}", remarks=True)
    assert not fused(unfused)
    np.testing.assert_array_equal(got, unfused(*args))


@pytest.mark.parametrize("pipeline", ["default", "loom-fuse-epilogue"])
def test_two_operands_read_at_the_same_subscripts_are_two_loads(pipeline):
    """(x @ w + bias) * scale, bias and scale both of N: each read at [j] in the fused
    epilogue, from its own buffer (one load of one reused for the other would add the
    bias twice, or scale by it)."""
    src, shapes = epilogue_source((13, 7), (7, 17), [("add", lambda m, n: (n,)), ("mul", lambda m, n: (n,))],
                                  np.float32)
    check(src, shapes, 7, pipeline, np.float32, seed=5)


@pytest.mark.parametrize("pipeline", ["default", "loom-fuse-epilogue"])
@settings(max_examples=8)
@given(batch=st.integers(1, 3), m=SIZES, n=SIZES, k=SIZES, dtype=DTYPES, seed=st.integers(0, 2**16))
def test_batched_matmul_epilogue(pipeline, batch, m, n, k, dtype, seed):
    """A batched matmul, times a full-shape operand, plus a bias broadcast over the
    batch and the rows, relu."""
    steps = [("mul", lambda m_, n_: (batch, m_, n_)), ("add", lambda m_, n_: (n_,)), ("relu", None)]
    src, shapes = epilogue_source((batch, m, k), (batch, k, n), steps, dtype, batch=(batch,))
    check(src, shapes, k, pipeline, dtype, seed)


def conv_source(layer, layout, dtype, bias):
    """conv2d, + a bias per output channel (F x 1 x 1 in NCHW, F in NHWC) or a full-shape
    operand, relu; returns (source, shapes, reduction length)."""
    n, c, h, w, f, r, s, stride, pad = layer
    ho, wo = conv2d_output_hw(h, w, r, s, (stride, stride), (pad, pad), (1, 1))
    nchw = layout == "nchw"
    x, wt, y = ((n, c, h, w), (f, c, r, s), (n, f, ho, wo)) if nchw else ((n, h, w, c), (r, s, c, f), (n, ho, wo, f))
    b = y if bias == "full" else (f, 1, 1) if nchw else (f,)
    tx, tw, tyy, tb = (ty(t, dtype) for t in (x, wt, y, b))
    attrs = ("" if nchw else 'layout = "nhwc", ') + (f"strides = array<i64: {stride}, {stride}>, padding = "
                                                     f"array<i64: {pad}, {pad}>, dilations = array<i64: 1, 1>")
    src = (f"func.func @conv(%x: {tx}, %w: {tw}, %b: {tb}) -> {tyy} {{\n"
           f"  %y = loom.conv2d %x, %w {{{attrs}}} : ({tx}, {tw}) -> {tyy}\n"
           f"  %s = loom.add %y, %b : ({tyy}, {tb}) -> {tyy}\n"
           f"  %r = loom.relu %s : {tyy}\n  func.return %r : {tyy}\n}}\n")
    return src, [x, wt, b], c * r * s


@st.composite
def layers(draw):
    """(n, c, h, w, f, r, s, stride, padding): small layers, odd sizes included."""
    r = s = draw(st.sampled_from([1, 3]))
    pad = draw(st.integers(0, r // 2))
    h, w = draw(st.integers(r, 11)), draw(st.integers(r, 11))
    return (draw(st.integers(1, 2)), draw(st.sampled_from([1, 3, 8])), h, w, draw(st.sampled_from([1, 5, 16, 17])),
            r, s, draw(st.integers(1, 2)), pad)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("pipeline", ["default", "loom-default{skip=direct}", "loom-default{skip=im2col}"])
@settings(max_examples=6)
@given(layer=layers(), dtype=DTYPES, bias=st.sampled_from(["channel", "full"]), seed=st.integers(0, 2**16))
def test_conv2d_epilogue(layout, pipeline, layer, dtype, bias, seed):
    """Both strategies: im2col's matmul stores into Y viewed as a matrix (the operands
    read through views of that shape), the direct convolution's into Y (NHWC) or into
    the copy of its wide result into Y (NCHW)."""
    src, shapes, k = conv_source(layer, layout, dtype, bias)
    check(src, shapes, k, pipeline, dtype, seed)


def test_conv2d_bias_views_and_copy():
    """The per-channel bias of an NCHW conv2d: through a view of stride 0 along the
    pixels when im2col's matmul stores Y as F x Ho*Wo; in the copy into Y for the direct
    convolution. The remark names the nest that took the epilogue."""
    src, _, _ = conv_source((1, 8, 10, 10, 16, 3, 3, 1, 1), "nchw", np.float32, "channel")
    im2col = compiler.compile(src, pipeline="loom-default{skip=direct}", remarks=True, stages=True)
    assert "strides: [1, 0]" in im2col.stages["loom-default"], "the bias viewed over F x Ho*Wo"
    assert "into the 'matmul' nest" in fused(im2col)[0]
    direct = compiler.compile(src, pipeline="loom-default{skip=im2col}", remarks=True)
    assert "into the 'direct.out' nest" in fused(direct)[0]


def dropped_fill(kern):
    return [r for r in kern.remarks if "[loom-fuse-epilogue] the zero fill of" in r and "dropped" in r]


@settings(max_examples=10)
@given(m=SIZES, n=SIZES, k=st.sampled_from([1, 7, 64, 300, 1031]), dtype=DTYPES, seed=st.integers(0, 2**16))
def test_a_matmul_without_epilogue_drops_its_zero_fill(m, n, k, dtype, seed):
    """No epilogue: the zero fill goes all the same (each element's first read reads a
    zero; K over several k blocks: a select in the first), and the result is bit for bit
    that of the kernel that fills C first (skip=fuse)."""
    src, shapes = epilogue_source((m, k), (k, n), [], dtype)
    kern, args, got = check(src, shapes, k, "default", dtype, seed, expect_fused=False)
    assert dropped_fill(kern), [r for r in kern.remarks if "fuse-epilogue" in r]
    filled = compiler.compile(src, pipeline="loom-default{skip=fuse}", remarks=True)
    assert not dropped_fill(filled)
    np.testing.assert_array_equal(got, filled(*args))


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("skip", ["", "direct", "im2col"])
@settings(max_examples=4)
@given(layer=layers(), seed=st.integers(0, 2**16))
def test_a_conv2d_without_epilogue_drops_its_zero_fill(layout, skip, layer, seed):
    """Both strategies, no epilogue: Y (or the direct convolution's wide result) is not
    zero-filled first, and the result is bit for bit the filled kernel's."""
    src, shapes, k = conv_source(layer, layout, np.float32, "channel")
    lines = src.split("\n")
    out = lines[1].split(" -> ")[-1]
    src = "\n".join([lines[0].replace(f", %b: {ty(shapes[2], np.float32)}", ""), lines[1],
                     f"  func.return %y : {out}", "}", ""])
    pipeline = f"loom-default{{skip={skip}}}" if skip else "default"
    kern, args, got = check(src, shapes[:2], k, pipeline, np.float32, seed, expect_fused=False)
    assert dropped_fill(kern), [r for r in kern.remarks if "fuse-epilogue" in r]
    filled = compiler.compile(src, pipeline=f"loom-default{{skip={skip}{',' * bool(skip)}fuse}}")
    np.testing.assert_array_equal(got, filled(*args))


def test_fused_nest_runs_on_threads():
    """The fused matmul nest is parallelized like the unfused one, and computes the same."""
    src, shapes = epilogue_source((96, 256), (256, 96), EPILOGUES["bias_relu"], np.float32)
    two = compiler.compile(src, pipeline="default", num_threads=2, remarks=True)
    assert fused(two)
    assert any("[loom-parallelize] nest 'matmul': loop" in r and "run in parallel" in r for r in two.remarks), \
        two.remarks
    one = compiler.compile(src, pipeline="default", num_threads=1)
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    np.testing.assert_array_equal(two(*args), one(*args))


def test_the_result_is_written_once():
    """C and the sum are no longer allocated: the function's only buffer writes go to
    the result (and the packed panels)."""
    src, _ = epilogue_source((64, 128), (128, 64), EPILOGUES["bias_relu"], np.float32)
    kern = compiler.compile(src, pipeline="default", remarks=True, stages=True)
    after = kern.stages["loom-default"]
    assert "memref<64x64xf32>" not in "".join(line for line in after.splitlines() if "memref.alloc" in line)
    assert 'loom.tag = "add"' not in after and 'loom.tag = "relu"' not in after


REFUSED = {
    # C is also a result: it must still be written
    "returned": ("%c = loom.matmul %a, %b : (T45, T56) -> T46\n"
                 "  %s = loom.add %c, %d : (T46, T46) -> T46\n  func.return %c, %s : T46, T46",
                 "%c is a result of the function"),
    # C read by two elementwise ops
    "two_readers": ("%c = loom.matmul %a, %b : (T45, T56) -> T46\n"
                    "  %s = loom.add %c, %d : (T46, T46) -> T46\n  %m = loom.mul %c, %d : (T46, T46) -> T46\n"
                    "  func.return %s, %m : T46, T46",
                    "%c is also used by nest"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.parametrize("pipeline", ["default", "loom-fuse-epilogue"])
def test_refused_epilogues_stay_right(case, pipeline):
    body, why = REFUSED[case]
    t = {"T45": "tensor<4x5xf32>", "T56": "tensor<5x6xf32>", "T46": "tensor<4x6xf32>"}
    for name, text in t.items():
        body = body.replace(name, text)
    src = (f"func.func @f(%a: {t['T45']}, %b: {t['T56']}, %d: {t['T46']}) -> ({t['T46']}, {t['T46']}) {{\n"
           f"  {body}\n}}\n")
    kern = compiler.compile(src, pipeline=pipeline, remarks=True)
    assert any("not fused" in r and why in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(4, 5), (5, 6), (4, 6)]]
    for got, want in zip(kern(*args), compiler.reference(src, *args)):
        assert_within_bound(got, want, 5, np.float32)


#: an intermediate c + d that must still be written: (what follows the add, what is
#: returned, why the chain stops before the relu)
INTERMEDIATES = {
    "returned": ("", "%s, %r", "%s is a result of the function"),
    # read by the relu and by a mul: fusing the relu would leave the mul nothing to read
    "two_readers": ("\n  %m = loom.mul %s, %d : (T, T) -> T", "%r, %m", "%s is also used by nest 'mul' (line 5)"),
}


@pytest.mark.parametrize("case", sorted(INTERMEDIATES))
def test_an_intermediate_still_read_is_still_written(case):
    """relu(c + d), and c + d returned or read by another nest as well: the add is fused
    (the matmul writes the sum), the relu stays a nest that reads it."""
    after, returned, why = INTERMEDIATES[case]
    t46 = "tensor<4x6xf32>"
    src = (f"func.func @f(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>, %d: {t46}) -> ({t46}, {t46}) {{\n"
           f"  %c = loom.matmul %a, %b : (tensor<4x5xf32>, tensor<5x6xf32>) -> {t46}\n"
           f"  %s = loom.add %c, %d : ({t46}, {t46}) -> {t46}\n  %r = loom.relu %s : {t46}"
           f"{after.replace('T', t46)}\n  func.return {returned} : {t46}, {t46}\n}}\n")
    kern = compiler.compile(src, pipeline="default", remarks=True)
    assert f"relu (line 4) left as its own nest: {why}" in fused(kern)[0], fused(kern)
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(4, 5), (5, 6), (4, 6)]]
    for got, want in zip(kern(*args), compiler.reference(src, *args)):
        assert_within_bound(got, want, 5, np.float32)


def test_long_chains_stop_at_the_limit():
    """An epilogue takes at most MAX_STEPS nests; the rest stay nests of their own, and
    the result is right."""
    from passes.schedule.loom_fuse_epilogue import MAX_STEPS

    steps = [("add", lambda m, n: (n,)), ("relu", None)] * (MAX_STEPS // 2 + 1)
    src, shapes = epilogue_source((8, 9), (9, 10), steps, np.float32)
    kern = compiler.compile(src, pipeline="default", remarks=True)
    assert f"an epilogue takes at most {MAX_STEPS} nests" in fused(kern)[0]
    assert len(fused(kern)) == 1, "the nests left over are not fused in a second round"
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    assert_within_bound(kern(*args), compiler.reference(src, *args), 9 + len(steps), np.float32)


def neighbours_source(n, step, epilogue, extent):
    """A producer nest (hand-written, tagged "matmul") whose iteration %j (0 to `extent`)
    accumulates column j of %a into both C[j] and C[j + 1], %j stepping by `step`, after a
    zero fill of C; then, with `epilogue`, C + d into %r (else C is %r): with step 1
    neighbouring iterations both write C[j + 1] (the written window, 2 elements, is one
    more than the step), with step 2 they write elements apart."""
    t, ta = f"memref<{n}xf32>", f"memref<4x{n}xf32>"
    c = "%c" if epilogue else "%r"
    alloc, add = "", ""
    if epilogue:
        alloc = f"  %c = memref.alloc() : {t}\n"
        add = f"""  affine.for %i = 0 to {n} {{
    %v = affine.load %c[%i] : {t}
    %w = affine.load %d[%i] : {t}
    %s = arith.addf %v, %w : f32
    affine.store %s, %r[%i] : {t}
  }} {{loom.tag = "add"}}
  memref.dealloc %c : {t}
"""
    return f"""func.func @neighbours(%a: {ta}, %d: {t}, %r: {t}) {{
{alloc}  %zero = arith.constant 0.0 : f32
  affine.for %i = 0 to {n} {{
    affine.store %zero, {c}[%i] : {t}
  }} {{loom.tag = "matmul.init"}}
  affine.for %j = 0 to {extent} step {step} {{
    affine.for %k = 0 to 4 {{
      %x = affine.load %a[%k, %j] : {ta}
      %z0 = affine.load {c}[%j] : {t}
      %s0 = arith.addf %z0, %x : f32
      affine.store %s0, {c}[%j] : {t}
      %z1 = affine.load {c}[%j + 1] : {t}
      %s1 = arith.addf %z1, %x : f32
      affine.store %s1, {c}[%j + 1] : {t}
    }}
  }} {{loom.tag = "matmul"}}
{add}  func.return
}}"""


@pytest.mark.parametrize("epilogue", [True, False])
@pytest.mark.parametrize("n, extent, step, why", [
    (10, 9, 1, "cannot tell that the iterations of loop %j write different elements of"),
    # 5 iterations of 2 elements: as many as C has, though they overlap and miss C[6:]
    (10, 5, 1, "cannot tell that the iterations of loop %j write different elements of"),
    (10, 9, 2, None),
    (9, 8, 2, "the producer writes 8 of the 9 elements of"),
], ids=["overlapping", "overlapping_as_many", "apart", "one_only_zeroed"])
def test_fused_only_where_each_element_has_one_last_write(n, extent, step, why, epilogue):
    """The iterations of a loop write different elements only when what one writes spans
    less than its step: with step 1, iteration j's C[j + 1] is rewritten by iteration
    j + 1, so that neither the epilogue (at the last write) nor a zero at the first read
    may be placed by iteration (over 5 iterations, 10 stores for C's 10 elements: their
    count alone would not tell, C[6:] only zeroed). With step 2 they are apart: the
    epilogue fused, the zero fill dropped, unless C has an element the producer never
    writes (9 elements, the last one only the fill zeroes): it would take no epilogue,
    and no zero. Refused with the reason (the fill kept), and exact either way."""
    kern = compiler.compile(neighbours_source(n, step, epilogue, extent), pipeline="loom-fuse-epilogue",
                            remarks=True)
    assert bool(fused(kern)) == (epilogue and why is None), kern.remarks
    assert bool(dropped_fill(kern)) == (not epilogue and why is None), kern.remarks
    assert why is None or any(why in r for r in kern.remarks if "[loom-fuse-epilogue]" in r), kern.remarks
    rng = np.random.default_rng(7)
    a, d = small_ints(rng, (4, n), np.float32), small_ints(rng, (n,), np.float32)
    want = d.astype(np.float64) if epilogue else np.zeros(n)
    for j in range(0, extent, step):
        want[j : j + 2] += a[:, j].sum(dtype=np.float64)
    r = np.full(n, np.nan, np.float32)
    kern(a, d, r)
    np.testing.assert_array_equal(r, want)


def test_a_store_within_a_vector_store_is_not_fused():
    """A vector store writes its lanes: %c[4], stored beside the 8 lanes of %c[0], is one
    of them, rewritten in the same iteration (neither store's epilogue could be placed by
    the analysis, nor a zero at the first read). Refused, and exact against numpy."""
    src = """func.func @lanes(%a: memref<4x9xf32>, %d: memref<9xf32>, %r: memref<9xf32>) {
  %c = memref.alloc() : memref<9xf32>
  %zero = arith.constant 0.0 : f32
  affine.for %i = 0 to 9 {
    affine.store %zero, %c[%i] : memref<9xf32>
  } {loom.tag = "matmul.init"}
  affine.for %k = 0 to 4 {
    %x = affine.vector_load %a[%k, 0] : memref<4x9xf32>, vector<8xf32>
    %z = affine.vector_load %c[0] : memref<9xf32>, vector<8xf32>
    %s = arith.addf %z, %x : vector<8xf32>
    affine.vector_store %s, %c[0] : memref<9xf32>, vector<8xf32>
    %y = affine.load %a[%k, 8] : memref<4x9xf32>
    %w = affine.load %c[4] : memref<9xf32>
    %t = arith.addf %w, %y : f32
    affine.store %t, %c[4] : memref<9xf32>
  } {loom.tag = "matmul"}
  affine.for %i = 0 to 9 {
    %v = affine.load %c[%i] : memref<9xf32>
    %e = affine.load %d[%i] : memref<9xf32>
    %u = arith.addf %v, %e : f32
    affine.store %u, %r[%i] : memref<9xf32>
  } {loom.tag = "add"}
  memref.dealloc %c : memref<9xf32>
  func.return
}"""
    kern = compiler.compile(src, pipeline="loom-fuse-epilogue", remarks=True)
    assert not fused(kern) and any("cannot tell whether the store of %c[4]" in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(8)
    a, d = small_ints(rng, (4, 9), np.float32), small_ints(rng, (9,), np.float32)
    want = d.astype(np.float64)
    want[:8] += a[:, :8].sum(axis=0, dtype=np.float64)
    want[4] += a[:, 8].sum(dtype=np.float64)
    r = np.full(9, np.nan, np.float32)
    kern(a, d, r)
    np.testing.assert_array_equal(r, want)


@pytest.mark.parametrize("stride, fuses", [(2, False), (0, True)])
def test_an_operand_read_along_the_vector_at_its_stride(stride, fuses):
    """The bias as a strided view: fused where the vector broadcasts it (stride 0: one
    value for every column), refused with the stride named where its elements are 2
    apart (a vector load would read the ones between). Exact on small integers."""
    m, n, k = 6, 40, 9
    tc = f"tensor<{m}x{n}xf32>"
    src = f"""func.func @f(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>, %bias: tensor<{n}xf32> {{loom.buffer_layout = strided<[{stride}]>}}) -> {tc} {{
  %c = loom.matmul %a, %b : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> {tc}
  %s = loom.add %c, %bias : ({tc}, tensor<{n}xf32>) -> {tc}
  func.return %s : {tc}
}}"""
    kern = compiler.compile(src, pipeline="default", remarks=True)
    assert bool(fused(kern)) == fuses, kern.remarks
    assert fuses or any("is read 2 elements apart along the vector" in r for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(9)
    a, b = small_ints(rng, (m, k), np.float32), small_ints(rng, (k, n), np.float32)
    base = small_ints(rng, (max(stride, 1) * n,), np.float32)
    bias = np.lib.stride_tricks.as_strided(base, (n,), (stride * 4,))
    np.testing.assert_array_equal(kern(a, b, bias), a.astype(np.float64) @ b + bias)


def test_a_store_every_other_element_does_not_write_the_ones_between():
    """A first nest stores the even elements of C, a second one accumulates into all of
    them: the odd ones' first read reads the zero fill. A store walked in steps of 2
    does not write the elements between (it covers them only where its step is no longer
    than what it writes): the fill is kept, and the result exact."""
    src = """func.func @evens(%a: memref<7xf32>, %b: memref<7xf32>, %c: memref<7xf32>) {
  %zero = arith.constant 0.0 : f32
  affine.for %i = 0 to 7 {
    affine.store %zero, %c[%i] : memref<7xf32>
  } {loom.tag = "matmul.init"}
  affine.for %j = 0 to 7 step 2 {
    %x = affine.load %a[%j] : memref<7xf32>
    affine.store %x, %c[%j] : memref<7xf32>
  } {loom.tag = "matmul"}
  affine.for %j = 0 to 7 {
    %z = affine.load %c[%j] : memref<7xf32>
    %y = affine.load %b[%j] : memref<7xf32>
    %s = arith.addf %z, %y : f32
    affine.store %s, %c[%j] : memref<7xf32>
  } {loom.tag = "matmul"}
  func.return
}"""
    kern = compiler.compile(src, pipeline="loom-fuse-epilogue", remarks=True)
    assert not dropped_fill(kern) and any("the zero fill of %c kept: cannot tell whether the store of %c[%j]" in r
                                          for r in kern.remarks), kern.remarks
    rng = np.random.default_rng(11)
    a, b = small_ints(rng, (7,), np.float32), small_ints(rng, (7,), np.float32)
    want = b.astype(np.float64)
    want[::2] += a[::2]
    c = np.full(7, np.nan, np.float32)
    kern(a, b, c)
    np.testing.assert_array_equal(c, want)


@settings(max_examples=50)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_operand_views_reach_what_numpy_reshape_does(shape, data):
    """The strides of an operand over the matmul's view of C (a reshape of C's shape)
    are numpy's, for a reshape that numpy does without a copy, and None where numpy
    must copy."""
    strides = [data.draw(st.sampled_from([0, 1, 2, 5])) for _ in shape]
    # a reshape that merges runs of dimensions (what a conv2d's matmul view of Y does)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(shape) - 1), max_size=len(shape) - 1))) if len(shape) > 1 else []
    bounds = [0, *cuts, len(shape)]
    new_shape = [int(np.prod(shape[a:b])) for a, b in zip(bounds, bounds[1:])]
    base = np.arange(64.0)
    view = np.lib.stride_tricks.as_strided(base, shape, [s * 8 for s in strides])
    got = reshape_strides(shape, strides, new_shape)
    try:
        reshaped = view.view()
        reshaped.shape = new_shape  # raises where numpy would have to copy
    except AttributeError:
        assert got is None or all(n == 1 for n in new_shape)
        return
    assert got is not None
    np.testing.assert_array_equal(np.lib.stride_tricks.as_strided(base, new_shape, [s * 8 for s in got]), reshaped)


def test_fusion_bench_rows_check_and_print(monkeypatch, capsys):
    """loom-bench --fusion, in-process with a tiny dense layer and a tiny conv2d: rows
    come fused and checked, the table and the JSON print. Speed is never asserted."""
    import json

    from tools import loom_bench
    from tools.bench import conv as bench_conv
    from tools.bench import fusion as bench

    monkeypatch.setattr(bench, "FUSION_DENSE", [(5, 6, 7)])
    monkeypatch.setitem(bench_conv.LAYERS["all"], "tiny", (1, 2, 5, 5, 3, 3, 3, (1, 1), (1, 1), (1, 1)))
    monkeypatch.setattr(bench, "FUSION_CONVS", ["tiny"])
    fast = ["--budget", "0.01", "--repeat", "3"]
    assert loom_bench.main(["--fusion", *fast]) == 0
    out = capsys.readouterr().out
    assert "| relu(x @ w + b) 5x6x7 |" in out and "| conv2d tiny NHWC + bias + relu |" in out
    assert out.count("| ok |") == 3, out
    assert loom_bench.main(["--fusion", "--json", "--rounds", "2", *fast]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["ok"] for r in rows] == [True] * 3 and len(rows[0]["over_unfused"]) == 2
    assert "fused add" in rows[0]["remark"] and rows[1]["numpy"] is None


ACCUMULATE = """      %x = affine.load %a[%k, %j] : memref<4x8xf32>
      %z = affine.load %c[%j] : memref<8xf32>
      %s = arith.addf %z, %x : f32
      affine.store %s, %c[%j] : memref<8xf32>"""


ADD = """    %v = affine.load %c[%i] : memref<8xf32>
    %w = affine.load %d[%i] : memref<8xf32>
    %t = arith.addf %v, %w : f32
    affine.store %t, %r[%i] : memref<8xf32>"""


def producer_source(body: str = ACCUMULATE, k: str = "affine.for %k = 0 to 4", pre: str = "", epilogue: str = ADD,
                    outside: str = "") -> str:
    """A hand-written producer (tagged "matmul") summing the columns of %a into %c, after
    its zero fill; then the `epilogue` nest (tagged "add": %r = %c + %d); %e receives what
    a body copies out; `outside`: ops before the epilogue nest."""
    t = "memref<8xf32>"
    return f"""func.func @p(%a: memref<4x8xf32>, %d: {t}, %r: {t}, %e: {t}) {{
  %c = memref.alloc() : {t}
  %zero = arith.constant 0.0 : f32
  affine.for %i = 0 to 8 {{
    affine.store %zero, %c[%i] : {t}
  }} {{loom.tag = "matmul.init"}}
  affine.for %j = 0 to 8 {{
{pre}    {k} {{
{body}
    }}
  }} {{loom.tag = "matmul"}}
{outside}  affine.for %i = 0 to 8 {{
{epilogue}
  }} {{loom.tag = "add"}}
  memref.dealloc %c : {t}
  func.return
}}"""


#: case -> (source, why the last writes of %c cannot be told; None: fused)
PRODUCERS = {
    "accumulates": (producer_source(), None),
    "one_iteration_of_k": (producer_source(k="affine.for %k = 0 to 1"), None),
    "memref_store": (producer_source(ACCUMULATE.replace("affine.store %s", "memref.store %s")),
                     "nest 'matmul' writes %c by 'memref.store'"),
    "store_not_linear": (producer_source(ACCUMULATE.replace("store %s, %c[%j]", "store %s, %c[%j mod 8]")),
                         "a store of %c in nest 'matmul' has a subscript that is not linear"),
    "load_not_linear": (producer_source(ACCUMULATE.replace("affine.load %c[%j]", "affine.load %c[%j mod 8]")),
                        "a load of %c in nest 'matmul' has a subscript that is not linear"),
    "read_after_the_store": (
        producer_source(ACCUMULATE + "\n      %q = affine.load %c[%j] : memref<8xf32>\n"
                                     "      affine.store %q, %e[%j] : memref<8xf32>"),
        "nest 'matmul' reads %c other than to accumulate into it (affine.load (line 13): no store of the same "
        "elements after it)"),
    "no_iteration_of_k": (producer_source(k="affine.for %k = 0 to 0"),
                          "loop %k of nest 'matmul' has no iterations (a zero-size dimension): the zero fill would "
                          "be the last write of %c"),
    "inner_loop_maybe_empty": (producer_source("      affine.for %l = 0 to affine_map<(d0) -> (d0)>(%j) {\n"
                                               + ACCUMULATE + "\n      }"),
                               "cannot tell that loop %l runs in every iteration of %k, which accumulates into %c"),
    "subscript_computed_inside": (
        producer_source(ACCUMULATE.replace("%c[%j]", "%c[%jj]"),
                        pre="    %c0 = arith.constant 0 : index\n    %jj = arith.addi %j, %c0 : index\n"),
        "a store of %c has a subscript computed in its nest (%jj)"),
    "k_from_a_max": (producer_source(k="affine.for %k = max affine_map<(d0) -> (0, d0 - 4)>(%j) to 4"),
                     "cannot count the elements the store of %c[%j] (line 12) writes, to tell that the producer "
                     "writes all of %c"),
}


@pytest.mark.parametrize("case", sorted(PRODUCERS))
def test_a_producer_whose_last_writes_are_unknown_is_not_fused(case):
    """Each reason the last write of an element cannot be told (a store by another op, a
    subscript not linear or computed in the nest, a read other than to accumulate, a
    reduction loop with no iteration or one that may skip an inner loop, a count that
    cannot be made): the epilogue stays its own nest and the zero fill stays, with the
    reason; exact against the unscheduled loops either way."""
    src, why = PRODUCERS[case]
    kern = compiler.compile(src, pipeline="loom-fuse-epilogue", remarks=True)
    said = [r.split("] ", 1)[1] for r in kern.remarks]
    if why is None:
        assert len(fused(kern)) == 1 and "the zero fill dropped" in said[0], said
    else:
        add = 1 + max(n for n, line in enumerate(src.splitlines()) if line.startswith("  affine.for %i"))
        assert said == [f"add (line {add}) not fused into the 'matmul' nest (line 7): {why}",
                        f"the zero fill of %c kept: {why}"]
    rng = np.random.default_rng(3)
    a, d = small_ints(rng, (4, 8), np.float32), small_ints(rng, (8,), np.float32)
    got, want = np.full((2, 8), np.nan, np.float32), np.full((2, 8), np.nan, np.float32)
    kern(a, d, got[0], got[1])
    compiler.compile(src, pipeline="naive")(a, d, want[0], want[1])
    np.testing.assert_array_equal(got, want)
    if case in ("accumulates", "memref_store", "store_not_linear", "load_not_linear", "read_after_the_store"):
        np.testing.assert_array_equal(got[0], d + a.sum(0, dtype=np.float64))


NOT_FUSED = "the zero fill of %c dropped, with no epilogue to fuse: the 'matmul' nest (line 7) reads a zero where it " \
            "read the fill, and writes %c once"
#: case -> (epilogue nest body, ops before it, why it is not fused; None: fused)
EPILOGUE_NESTS = {
    "two_stores": (ADD + "\n    affine.store %t, %e[%i] : memref<8xf32>", "", ""),
    "stores_reversed": (ADD.replace("%r[%i]", "%r[7 - %i]"), "",
                        "add (line 15) is not the textbook elementwise nest (one store, at its iteration's element)"),
    "value_from_outside": (ADD.replace("arith.addf %v, %w", "arith.addf %v, %one"),
                           "  %one = arith.constant 1.0 : f32\n",
                           "add (line 16) computes with a value from outside its nest"),
    "select_not_a_max": (ADD.replace("%t = arith.addf %v, %w : f32", "%p = arith.cmpf olt, %v, %w : f32\n"
                                     "    %t = arith.select %p, %w, %v : f32"), "",
                         "add (line 15) selects ('arith.select') other than for a max or min with a constant"),
    "reads_another_element": (ADD.replace("affine.load %c[%i]", "affine.load %c[7 - %i]"), "",
                              "add (line 15) reads %c[%i * -1 + 7], not the element it writes (a transpose or a "
                              "broadcast of %c)"),
    "reads_its_result": (ADD.replace("affine.load %d[%i]", "affine.load %r[%i]"), "",
                         "it reads %r[%i], a buffer the epilogue writes"),
    "operand_reversed": (ADD.replace("affine.load %d[%i]", "affine.load %d[7 - %i]"), "", None),
    "operand_broadcast": (ADD.replace("affine.load %d[%i]", "affine.load %d[0]"), "", None),
}


@pytest.mark.parametrize("case", sorted(EPILOGUE_NESTS))
def test_an_epilogue_nest_that_is_not_elementwise_is_not_fused(case):
    """The nest after the producer is fused only when it is the textbook elementwise nest
    of %c (one store at its iteration's element, reading %c there, no outside value, a
    select only for a max or min) writing a buffer it does not read; an operand read at any
    linear subscript is fine. Refused with the reason (the fill then dropped alone); exact
    against the unscheduled loops either way."""
    epilogue, outside, why = EPILOGUE_NESTS[case]
    src = producer_source(epilogue=epilogue, outside=outside)
    kern = compiler.compile(src, pipeline="loom-fuse-epilogue", remarks=True)
    said = [r.split("] ", 1)[1] for r in kern.remarks]
    if why is None:
        assert len(fused(kern)) == 1, said
    else:
        line = 16 if outside else 15
        assert said[0].startswith(f"add (line {line}) not fused into the 'matmul' nest (line 7): {why}"), said
        assert said[1:] == [NOT_FUSED]
    rng = np.random.default_rng(4)
    a, d = small_ints(rng, (4, 8), np.float32), small_ints(rng, (8,), np.float32)
    got = small_ints(rng, (2, 8), np.float32)
    want = got.copy()
    kern(a, d, got[0], got[1])
    compiler.compile(src, pipeline="naive")(a, d, want[0], want[1])
    np.testing.assert_array_equal(got, want)


def test_the_last_iteration_of_a_min_bounded_loop_stepping_by_two():
    """K = 12 tiled by 8 then 2: %k_t2 runs from %k_t to min(%k_t + 8, 12) step 2, so its
    last iteration is the one with %k_t2 + 2 (not + 1) at the bound (10 in the second
    panel): the epilogue is applied there, once per element."""
    src, shapes = epilogue_source((4, 12), (12, 4), EPILOGUES["bias_relu"], np.float32)
    pipeline = "loom-tile{sizes=4,4,8 op=matmul},loom-tile{sizes=4,4,2 depth=3 op=matmul},loom-fuse-epilogue"
    kern, _, _ = check(src, shapes, 12, pipeline, np.float32, 21)
    assert "1 in the last iteration of %k_t, %k_t2, %k" in fused(kern)[0], fused(kern)


# --------------------------------------------------------------------------------------
# Quantized layers: an epilogue that changes the element type (i32 sums -> f32 -> ui8)


def quantized_matmul_source(m: int, n: int, k: int, relu: bool) -> str:
    """u8 x s8 -> i32, + an i32 bias, dequantized per column, (relu,) requantized to u8."""
    acc, f, q = f"tensor<{m}x{n}xi32>", f"tensor<{m}x{n}xf32>", f"tensor<{m}x{n}xui8>"
    last = "%r" if relu else "%y"
    return f"""func.func @layer(%x: tensor<{m}x{k}xui8>, %w: tensor<{k}x{n}xi8>, %bias: tensor<{n}xi32>,
      %scale: tensor<{n}xf32>, %zero: tensor<{n}xi32>, %os: tensor<f32>, %oz: tensor<i32>) -> {q} {{
  %acc = loom.matmul %x, %w : (tensor<{m}x{k}xui8>, tensor<{k}x{n}xi8>) -> {acc}
  %sum = loom.add %acc, %bias : ({acc}, tensor<{n}xi32>) -> {acc}
  %y = loom.dequantize %sum, %scale, %zero {{axis = 1 : i64}} : ({acc}, tensor<{n}xf32>, tensor<{n}xi32>) -> {f}
{f"  %r = loom.relu %y : {f}" if relu else ""}
  %q = loom.quantize {last}, %os, %oz : ({f}, tensor<f32>, tensor<i32>) -> {q}
  func.return %q : {q}
}}"""


def _quantized_args(rng, x_shape, w_shape, f: int, k: int, bias_shape=None) -> list[np.ndarray]:
    return [rng.integers(0, 256, x_shape).astype(np.uint8), rng.integers(-128, 128, w_shape).astype(np.int8),
            rng.integers(-5000, 5000, bias_shape or (f,)).astype(np.int32),
            rng.uniform(1e-4, 1e-3, f).astype(np.float32), rng.integers(-3, 3, f).astype(np.int32),
            np.array(0.05 * max(1.0, np.sqrt(k / 256)), np.float32), np.array(7, np.int32)]


def _one_nest(kern, steps: str) -> None:
    """The layer's remark names every step fused into the producer: one nest."""
    assert any(f"fused {steps} into" in r for r in fused(kern)), [r for r in kern.remarks if "fuse-epilogue" in r]


@settings(max_examples=10, deadline=None)
@given(m=SIZES, n=SIZES, k=st.sampled_from([1, 7, 64, 301, 1031, 2500]), relu=st.booleans(),
       threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_a_quantized_layer_is_one_nest(m, n, k, relu, threads, seed):
    """i32 accumulators + bias, dequantized, relu'd and requantized to u8 in the matmul's
    nest: the u8 result stored where the sums are final (under the last k panel's guard
    where K spans several: C then keeps the partial sums of the panels before it), bit
    for bit the numpy reference; where the analysis cannot place the last writes the
    chain stays as it was, still exact."""
    src = quantized_matmul_source(m, n, k, relu)
    kern = compiler.compile(src, pipeline="default", num_threads=threads, remarks=True)
    args = _quantized_args(np.random.default_rng(seed), (m, k), (k, n), n, k)
    np.testing.assert_array_equal(kern(*args), compiler.reference(src, *args))
    if fused(kern):
        _one_nest(kern, "add (line 4), dequantize (line 5), " + ("relu (line 6), quantize (line 7)" if relu
                                                                   else "quantize (line 7)"))
    else:  # (refused with the reason: the last writes' stores could not be told apart)
        assert any("[loom-fuse-epilogue] add (line 4) not fused" in r for r in kern.remarks), kern.remarks


@pytest.mark.parametrize("m, k, kept", [(6, 7, False), (60, 9001, True)])
def test_a_quantized_layer_keeps_its_sums_only_across_k_panels(m, k, kept):
    """K in one panel: the i32 sums are never stored (C goes); K over several: C holds the
    earlier panels' sums, the u8 result is stored under the last panel's guard (scf.if).
    Planned for AVX2 on any host, whose 6-row register tile takes the 6 rows whole (with
    AVX-512's 8 rows, 6 rows stream B's rows past C, k outermost: C read back at each k)."""
    src = quantized_matmul_source(m, 16, k, True)
    with planning_for(TARGETS["avx2"]):
        kern = compiler.compile(src, pipeline="default", num_threads=1, remarks=True)
    [remark] = fused(kern)
    assert ("%acc still holds the partial sums, which the nest reads back before its last writes (i32; %q is ui8)"
            in remark) == kept, remark
    assert ("; %sum and %y and %r no longer written" in remark) == kept, remark
    args = _quantized_args(np.random.default_rng(k), (m, k), (k, 16), 16, k)
    np.testing.assert_array_equal(kern(*args), compiler.reference(src, *args))


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("pipeline", ["default", "loom-default{skip=direct}", "loom-default{skip=im2col}"])
@settings(max_examples=4, deadline=None)
@given(layer=layers(), seed=st.integers(0, 2**16))
def test_a_quantized_conv2d_layer_is_one_nest(layout, pipeline, layer, seed):
    """A quantized conv2d layer (per output channel) fused into im2col's matmul through
    the u8 result's view as a matrix, or into the direct convolution's nest or copy."""
    n, c, h, w, f, r, s, stride, pad = layer
    full = (n, c, h, w, f, r, s, (stride, stride), (pad, pad), (1, 1))
    axis = 1 if layout == "nchw" else 3
    src = requantized_source(full, layout, axis)
    kern = compiler.compile(src, pipeline=pipeline, remarks=True)
    x_shape, w_shape, _ = layer_shapes(full, layout)
    bias = (f, 1, 1) if layout == "nchw" else (1, 1, f)
    args = _quantized_args(np.random.default_rng(seed), x_shape, w_shape, f, c * r * s, bias)
    np.testing.assert_array_equal(kern(*args), compiler.reference(src, *args))
    _one_nest(kern, "add (line 3), dequantize (line 4), quantize (line 5)")


@pytest.mark.skipif(not host().int8_dot, reason="the host has no VNNI")
@pytest.mark.parametrize("layer", [(1, 64, 7, 7, 112, 3, 3, 1, 1), (1, 64, 14, 14, 96, 3, 3, 2, 1),
                                   (2, 8, 7, 7, 48, 3, 3, 1, 1)])
def test_a_quantized_layer_on_seven_rows_is_one_nest(layer):
    """NHWC quantized layers whose pixels 7 divides but 4 does not (ResNet's 7x7 maps):
    the windows read in place by vpdpbusd in a register tile of 7 rows
    (`cost_model.MEASURED_DOT_ROW_TILES`), the requantize epilogue in the one nest, exact."""
    n, c, h, w, f, r, s, stride, pad = layer
    full = (n, c, h, w, f, r, s, (stride, stride), (pad, pad), (1, 1))
    src = requantized_source(full, "nhwc", 3)
    kern = compiler.compile(src, pipeline="default", remarks=True)
    x_shape, w_shape, _ = layer_shapes(full, "nhwc")
    args = _quantized_args(np.random.default_rng(1), x_shape, w_shape, f, c * r * s, (1, 1, f))
    np.testing.assert_array_equal(kern(*args), compiler.reference(src, *args))
    _one_nest(kern, "add (line 3), dequantize (line 4), quantize (line 5)")
    assert any("] matmul" in x and "register tile 7x" in x for x in kern.remarks), kern.remarks


@settings(max_examples=6, deadline=None)
@given(m=SIZES, n=SIZES, k=st.sampled_from([1, 7, 300, 1031]), seed=st.integers(0, 2**16))
def test_a_bf16_result_is_rounded_in_the_nest(m, n, k, seed):
    """bf16 x bf16 -> f32, + bias, relu, cast to bf16 (what the torch backend stores
    between bf16 layers): one nest, rounded to nearest even where it writes each sum for
    the last time, bit for bit the unfused kernel (the same f32 sums in the same order)."""
    a_t, b_t = f"tensor<{m}x{k}xbf16>", f"tensor<{k}x{n}xbf16>"
    c_t, h_t = f"tensor<{m}x{n}xf32>", f"tensor<{m}x{n}xbf16>"
    src = f"""func.func @f(%a: {a_t}, %b: {b_t}, %bias: tensor<{n}xf32>) -> {h_t} {{
  %c = loom.matmul %a, %b : ({a_t}, {b_t}) -> {c_t}
  %s = loom.add %c, %bias : ({c_t}, tensor<{n}xf32>) -> {c_t}
  %r = loom.relu %s : {c_t}
  %h = loom.cast %r : {c_t} -> {h_t}
  func.return %h : {h_t}
}}"""
    kern = compiler.compile(src, pipeline="default", remarks=True)
    if fused(kern):
        _one_nest(kern, "add (line 3), relu (line 4), cast (line 5)")
    else:  # (refused with the reason, as an f32 epilogue of the shape is)
        assert any("[loom-fuse-epilogue] add (line 3) not fused" in r for r in kern.remarks), kern.remarks
    unfused = compiler.compile(src, pipeline="loom-default{skip=fuse}")
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s).astype(ml_dtypes.bfloat16) for s in ((m, k), (k, n)))
    bias = rng.standard_normal(n).astype(np.float32)
    got = kern(a, b, bias)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.view(np.uint16), unfused(a, b, bias).view(np.uint16))


@pytest.mark.parametrize("stride", [1, 2])
def test_an_f32_layer_on_seven_rows_with_a_filter_past_l2_takes_seven_row_tiles(monkeypatch, stride):
    """f32 NHWC layers on ResNet's 7x7 maps whose filter is larger than L2 (here made 64 KiB,
    planned as znver4): register tiles of 7 rows (`cost_model.MEASURED_WINDOW_ROW_TILES`), no
    copy of the 49th row; within the f32 bound of the float64 reference, its bias and relu fused."""
    monkeypatch.setenv("LOOM_TARGET", "cpu=znver4,l2=65536,vector_bits=512,vector_registers=32")
    hw = 7 * stride
    c, f = 64, 64  # K = 576, a 144 KiB filter
    full = (1, c, hw, hw, f, 3, 3, (stride, stride), (1, 1), (1, 1))
    x_shape, w_shape, y_shape = layer_shapes(full, "nhwc")
    assert y_shape[1:3] == (7, 7)
    src = f"""func.func @f(%x: tensor<{'x'.join(map(str, x_shape))}xf32>, %w: tensor<{'x'.join(map(str, w_shape))}xf32>,
                  %b: tensor<{f}xf32>) -> tensor<{'x'.join(map(str, y_shape))}xf32> {{
  %y = loom.conv2d %x, %w {{strides = array<i64: {stride}, {stride}>, padding = array<i64: 1, 1>, layout = "nhwc"}} : (tensor<{'x'.join(map(str, x_shape))}xf32>, tensor<{'x'.join(map(str, w_shape))}xf32>) -> tensor<{'x'.join(map(str, y_shape))}xf32>
  %s = loom.add %y, %b : (tensor<{'x'.join(map(str, y_shape))}xf32>, tensor<{f}xf32>) -> tensor<{'x'.join(map(str, y_shape))}xf32>
  %r = loom.relu %s : tensor<{'x'.join(map(str, y_shape))}xf32>
  func.return %r : tensor<{'x'.join(map(str, y_shape))}xf32>
}}"""
    kern = compiler.compile(src, pipeline="default", remarks=True, cache=False)
    rng = np.random.default_rng(stride)
    args = [rng.standard_normal(s).astype(np.float32) for s in (x_shape, w_shape, (f,))]
    ref = compiler.reference(src, *args)
    bound = 4 * c * 9 * np.finfo(np.float32).eps * np.abs(ref).max()
    assert np.abs(kern(*args) - ref).max() <= bound
    _one_nest(kern, "add (line 4), relu (line 5)")
    assert any("] matmul" in x and "register tile 7x32" in x for x in kern.remarks), kern.remarks
    assert not any("peeled copy" in x for x in kern.remarks), kern.remarks


def test_epilogues_fuse_in_a_function_long_enough_to_be_outlined():
    """Eight layers of relu(x @ w + b): 32 nests, past loom-outline's 16, so each matmul
    moves into a function with its zero fill, its add and its relu and the buffers between
    them; the epilogue fuses there as in a short function."""
    layers, n = 8, 24
    t, wt = f"tensor<{n}x{n}xf32>", f"tensor<{n}x{n}xf32>"
    args = ", ".join(f"%w{i}: {wt}, %b{i}: tensor<{n}xf32>" for i in range(layers))
    lines = [f"func.func @mlp(%x0: {t}, {args}) -> {t} {{"]
    for i in range(layers):
        lines += [f"  %c{i} = loom.matmul %x{i}, %w{i} : ({t}, {wt}) -> {t}",
                  f"  %s{i} = loom.add %c{i}, %b{i} : ({t}, tensor<{n}xf32>) -> {t}",
                  f"  %x{i + 1} = loom.relu %s{i} : {t}"]
    src = "\n".join([*lines, f"  func.return %x{layers} : {t}", "}"])
    kern = compiler.compile(src, remarks=True, cache=False)
    # one function for the eight layers (the same nests), its epilogue fused once for all
    assert any("[loom-outline] 32 of 32 loop nests moved into 1 function" in r for r in kern.remarks), kern.remarks
    assert [("fused add" in r and "relu" in r and "no longer written" in r) for r in fused(kern)] == [True]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((n, n)).astype(np.float32)]
    for _ in range(layers):
        arrays += [(rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)]
    assert_within_bound(kern(*arrays), compiler.reference(src, *arrays), layers * n, np.float32)


@settings(deadline=None, max_examples=12)
@given(m=st.integers(1, 40), n=st.sampled_from([1, 16, 33]), k=st.integers(1, 40), threads=st.sampled_from([1, 2]),
       seed=st.integers(0, 2**16))
def test_a_widened_bf16_residual_is_read_in_the_epilogue(m, n, k, threads, seed):
    """relu(a @ b + f32(r)) with r bf16 (a residual block's last conv in a bf16 model):
    the add reads r and widens it in the matmul's stores, its cast nest gone; the same
    bits as the kernel that keeps every nest (skip=fuse)."""
    bf = ml_dtypes.bfloat16
    src = f"""func.func @f(%a: tensor<{m}x{k}xbf16>, %b: tensor<{k}x{n}xbf16>, %r: tensor<{m}x{n}xbf16>) -> tensor<{m}x{n}xf32> {{
  %y = loom.matmul %a, %b : (tensor<{m}x{k}xbf16>, tensor<{k}x{n}xbf16>) -> tensor<{m}x{n}xf32>
  %w = loom.cast %r : tensor<{m}x{n}xbf16> -> tensor<{m}x{n}xf32>
  %s = loom.add %y, %w : (tensor<{m}x{n}xf32>, tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %o = loom.relu %s : tensor<{m}x{n}xf32> -> tensor<{m}x{n}xf32>
  return %o : tensor<{m}x{n}xf32>
}}"""
    rng = np.random.default_rng(seed)
    a, b, r = (rng.standard_normal(s).astype(bf) for s in ((m, k), (k, n), (m, n)))
    fused = compiler.compile(src, num_threads=threads, remarks=True)
    assert any("widens it to f32 itself" in x for x in fused.remarks), fused.remarks
    unfused = compiler.compile(src, pipeline="loom-default{skip=fuse}", num_threads=threads)
    np.testing.assert_array_equal(fused(a, b, r), unfused(a, b, r))
