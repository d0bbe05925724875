"""The dot-product micro-kernels (issue 28): loom-pack lays A and B out in groups along k,
loom-dot runs the register tile on x86vector.dot, loom-convert-to-llvm lowers it to
vpmaddwd + vpaddd (any x86-64 host: run here, bit for bit against int64 numpy), vpdpbusd
(VNNI) and vdpbf16ps (AVX512-BF16): planned for a pinned target that has them and compiled
for znver4 without running (the host may lack them), and refused with a clear error by the
JIT where the host lacks what the kernel calls (LLVM would abort the process)."""

from __future__ import annotations

import re
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from kernels import assert_within_bound, conv2d, matmul, quantized_matmul, ty
from targets import TARGETS, asm_for_cpu, is_x86_64, planning_for
from xdsl.dialects.builtin import VectorType, i16, i32
from xdsl.dialects.test import TestOp
from xdsl.utils.exceptions import VerifyException

import compiler
from compiler.jit import engine
from compiler.jit.emit import to_llvm_ir
from dialects.context import make_context
from dialects.x86vector import DotOp
from passes.conversion.to_llvm.x86vector import missing_features
from passes.pipelines import build, resolve
from passes.support.diagnostics import LoomError
from passes.support.parser import parse_module
from passes.support.remarks import collect
from passes.support.target import host

LIMITS = {np.int8: (-128, 127), np.uint8: (0, 255)}
#: the avx512 kind with both dot-product instructions (Zen 4, Sapphire Rapids)
DOT512 = TARGETS["avx512"] + ",bf16_dot=1,int8_dot=1"
AVX2 = TARGETS["avx2"] + ",bf16_dot=0,int8_dot=0"


def _ints(rng, shape, dtype, extremes):
    lo, hi = LIMITS[dtype]
    if extremes:
        return rng.choice(np.array([lo, hi]), size=shape).astype(dtype)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def _dot_remarks(kernel) -> list[str]:
    return [r for r in kernel.remarks if "[loom-dot]" in r]


# --------------------------------------------------------------------------------------
# vpmaddwd + vpaddd: every x86-64 host runs it


@settings(max_examples=12, deadline=None)
@given(m=st.sampled_from([6, 37, 97]), n=st.sampled_from([16, 40, 131]), k=st.sampled_from([2, 130, 256, 259]),
       types=st.sampled_from([(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8), (np.int8, np.uint8)]),
       extremes=st.booleans(), threads=st.sampled_from([1, 2]), transposed=st.booleans())
def test_int8_matmul_on_i16_pairs_is_exact(m, n, k, types, extremes, threads, transposed):
    """Any mix of i8/ui8 on vpmaddwd (both widened to i16 as they are packed): equal to the
    int64 product, at the extremes too (-128 x -128 pairs: 32768, an i32); an odd K too,
    its last pair padded with a zero in both buffers. `transposed`: B is the transpose of
    W[N, K] (`x @ w.T`), its groups copied from W's rows."""
    a_type, b_type = types
    src = _transposed(m, n, k, a_type, b_type) if transposed else matmul((m, k), (k, n), (m, n), a_type, b_type,
                                                                         np.int32)
    with planning_for(AVX2):
        kernel = compiler.compile(src, pipeline="default", num_threads=threads, remarks=True)
    rng = np.random.default_rng(m * 7 + n * 11 + k)
    a, b = _ints(rng, (m, k), a_type, extremes), _ints(rng, (k, n), b_type, extremes)
    got = kernel(a, np.ascontiguousarray(b.T)) if transposed else kernel(a, b)
    np.testing.assert_array_equal(got.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))
    dots = _dot_remarks(kernel)
    packed = m * k + k * n > 8192  # (the plan packs what does not fit in L1 together)
    if not packed:
        assert not dots
    elif m >= 6:
        assert dots and all("vpmaddwd + vpaddd on 256-bit vectors" in r for r in dots), kernel.remarks


def _transposed(m: int, n: int, k: int, a_type, b_type) -> str:
    """C = A @ W.T, W[N, K] (a linear layer's weight): B a transposed view of it."""
    ta, tw, tb, tc = ty((m, k), a_type), ty((n, k), b_type), ty((k, n), b_type), ty((m, n), np.int32)
    return f"""func.func @mm(%a: {ta}, %w: {tw}) -> {tc} {{
  %b = loom.transpose %w {{perm = array<i64: 1, 0>}} : {tw} -> {tb}
  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}
  func.return %c : {tc}
}}"""


def test_the_dot_path_sizes_a_block_by_its_packed_elements():
    """A's block in L2 (MC) counts A's packed elements: i16 pairs hold twice the rows of the
    f32 plan's (same target, same shape); KC stays the f32 plan's. The remark tells the
    packed block's size in those elements (2 bytes each), not C's."""
    plans = {}
    for dtypes in ((np.float32,) * 3, (np.uint8, np.int8, np.int32)):
        ctx = make_context()
        module = parse_module(ctx, matmul((1024, 1024), (1024, 1024), (1024, 1024), *dtypes), "test.mlir")
        with planning_for(AVX2), collect() as remarks:
            build(resolve("default")).apply(ctx, module)
        [words] = [str(r) for r in remarks if r.pass_name == "loom-default" and "matmul 1020x1024x1024" in str(r)]
        plans[dtypes[0]] = tuple(int(re.search(rf"{b}=(\d+)", words).group(1)) for b in ("MC", "KC"))
        mc, kc = plans[dtypes[0]]
        assert f"packed A {mc}x{kc} ({mc * kc * (4 if dtypes[0] == np.float32 else 2) // 1024} KiB, L2)" in words, words
    (mc32, kc32), (mc8, kc8) = plans[np.float32], plans[np.uint8]
    assert kc8 == kc32 and mc8 in (2 * mc32 - 6, 2 * mc32, 2 * mc32 + 6), plans  # (whole register tiles)


def test_int8_matmul_on_pairs_at_the_largest_sums():
    """K = 4096 of 255 x 127 (u8 x s8) and of -128 x -128 (s8 x s8): sums near 2^27, exact."""
    m, n, k = 12, 32, 4096
    for a_type, b_type, x, y in ((np.uint8, np.int8, 255, 127), (np.int8, np.int8, -128, -128)):
        src = matmul((m, k), (k, n), (m, n), a_type, b_type, np.int32)
        with planning_for(AVX2):
            kernel = compiler.compile(src, pipeline="default", num_threads=1, remarks=True)
        assert _dot_remarks(kernel)
        a, b = np.full((m, k), x, a_type), np.full((k, n), y, b_type)
        np.testing.assert_array_equal(kernel(a, b), np.full((m, n), x * y * k, np.int32))


def test_quantized_layer_on_pairs_is_exact():
    """The fused layer (i32 accumulators + bias, dequantized, relu, requantized to u8) with
    its matmul on vpmaddwd: bit for bit Loom's numpy reference."""
    m, k, n = 64, 256, 64
    src = quantized_matmul(m, k, n, "ui8", "ui8")
    with planning_for(AVX2):
        kernel = compiler.compile(src, pipeline="default", num_threads=1, remarks=True)
    assert _dot_remarks(kernel)
    rng = np.random.default_rng(5)
    args = (rng.integers(0, 256, (m, k)).astype(np.uint8), rng.integers(-128, 128, (k, n)).astype(np.int8),
            rng.integers(-5000, 5000, n).astype(np.int32), rng.uniform(1e-4, 1e-3, n).astype(np.float32),
            rng.integers(-3, 3, n).astype(np.int32), np.array(0.05, np.float32), np.array(7, np.int32))
    np.testing.assert_array_equal(kernel(*args), compiler.reference(src, *args))


# --------------------------------------------------------------------------------------
# vpdpbusd and vdpbf16ps run on a host that has them (Zen 4, Sapphire Rapids)

HOST = host()


@pytest.mark.skipif(not (HOST.int8_dot and HOST.bf16_dot), reason="the host has no VNNI or no AVX512-BF16")
@settings(max_examples=16, deadline=None)
@given(m=st.sampled_from([1, 4, 37, 97]), n=st.sampled_from([16, 61, 104, 131, 196]),
       k=st.sampled_from([3, 130, 256, 259]),
       types=st.sampled_from([(np.uint8, np.int8), (np.int8, np.uint8), (np.int8, np.int8), ("bf16", "bf16")]),
       extremes=st.booleans(), threads=st.sampled_from([1, 2]))
def test_the_host_dot_products_are_exact(m, n, k, types, extremes, threads):
    """On the host's own VNNI and AVX512-BF16 (its plan, its tile): u8 x s8 and s8 x u8 on
    vpdpbusd bit for bit the int64 product, at the extremes too (255 x -128, -128 x 255);
    s8 x s8 there too, A shifted by +128 and B's column sums taken back out (-128 x -128);
    bf16 on vdpbf16ps within the f32 bound of the float64 product of the bf16 inputs.
    Shapes 1, primes, and columns no vector divides (a copy peeled off, widened; 104 =
    64 + 40, whose copy of 40 takes two vectors and peels the last 8)."""
    a_type, b_type = types
    rng = np.random.default_rng(m * 7 + n * 11 + k)
    if a_type == "bf16":
        src = matmul((m, k), (k, n), (m, n), ml_dtypes.bfloat16, ml_dtypes.bfloat16, np.float32)
        a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    else:
        src = matmul((m, k), (k, n), (m, n), a_type, b_type, np.int32)
        a, b = _ints(rng, (m, k), a_type, extremes), _ints(rng, (k, n), b_type, extremes)
    kernel = compiler.compile(src, pipeline="default", num_threads=threads, remarks=True)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if a_type == "bf16":
        assert_within_bound(kernel(a, b), ref, k, np.float32)
    else:
        np.testing.assert_array_equal(kernel(a, b).astype(np.int64), ref.astype(np.int64))
    name = "vdpbf16ps" if a_type == "bf16" else "vpdpbusd"
    if m * k + k * n > 8192 and m >= 4 and n >= 16:  # (packed, a register tile's rows and a vector's columns)
        assert any(f"{name} on 512-bit vectors" in r for r in _dot_remarks(kernel)), kernel.remarks
        assert any("[loom-compensate]" in r for r in kernel.remarks) == (types == (np.int8, np.int8))


@pytest.mark.skipif(not (HOST.int8_dot and HOST.bf16_dot), reason="the host has no VNNI or no AVX512-BF16")
@settings(max_examples=14, deadline=None)
@given(c=st.sampled_from([3, 4, 5, 6, 8, 64]), f=st.sampled_from([16, 40, 64]), hw=st.sampled_from([(5, 7), (14, 14)]),
       window=st.sampled_from([1, 3]), stride=st.sampled_from([1, 2]), batch=st.sampled_from([1, 2]),
       threads=st.sampled_from([1, 2]),
       types=st.sampled_from([(np.uint8, np.int8), (np.int8, np.uint8), ("bf16", "bf16")]), extremes=st.booleans())
def test_the_host_reads_nhwc_windows_in_place_on_dot_products(c, f, hw, window, stride, batch, threads, types,
                                                              extremes):
    """An NHWC convolution (but a pointwise one) runs directly, its windows read in place
    in groups (a window row's taps are one run of S*C elements) on vdpbf16ps or vpdpbusd,
    the filter packed in groups: exact for int8 (at the extremes too), within the f32
    bound of C*R*S terms for bf16; C = 3, 5 or 6 is no whole quads (3 and 5 no whole
    pairs): the planes' channels are padded to whole groups with zeros, and the filter's
    (the 3-channel stem's)."""
    x_type, w_type = types
    (h, w), r = hw, window
    pad = (r // 2, r // 2)
    ho, wo = (h + 2 * pad[0] - r) // stride + 1, (w + 2 * pad[1] - r) // stride + 1
    x_shape, w_shape, y_shape = (batch, h, w, c), (r, r, c, f), (batch, ho, wo, f)
    rng = np.random.default_rng(c * 7 + f + h)
    if x_type == "bf16":
        src = conv2d(x_shape, w_shape, y_shape, (stride, stride), pad, (1, 1), ml_dtypes.bfloat16,
                     ml_dtypes.bfloat16, np.float32, layout="nhwc")
        x = rng.standard_normal(x_shape).astype(ml_dtypes.bfloat16)
        wt = rng.standard_normal(w_shape).astype(ml_dtypes.bfloat16)
    else:
        src = conv2d(x_shape, w_shape, y_shape, (stride, stride), pad, (1, 1), x_type, w_type, np.int32,
                     layout="nhwc")
        x, wt = _ints(rng, x_shape, x_type, extremes), _ints(rng, w_shape, w_type, extremes)
    kernel = compiler.compile(src, pipeline="default", num_threads=threads, remarks=True)
    ref = compiler.reference(src, x, wt)
    if x_type == "bf16":
        assert_within_bound(kernel(x, wt), ref, c * r * r, np.float32)
    else:
        np.testing.assert_array_equal(kernel(x, wt), ref)
    in_place = any(": direct: " in m and "reading the windows in place, in groups" in m for m in kernel.remarks)
    assert in_place == (r > 1 or stride > 1), kernel.remarks
    padded = any(f"its {c} channels padded with zeros to " in m for m in kernel.remarks)
    assert padded == (in_place and c % (2 if x_type == "bf16" else 4) != 0), kernel.remarks


def test_nhwc_windows_are_read_in_place_only_where_their_groups_are_whole():
    """Planned for a target with VNNI and AVX512-BF16: a stride-1 NHWC 3x3 conv in bf16, u8 x
    s8 or s8 x u8 runs directly on the dot-product instruction, its windows read in place;
    s8 x s8 (A shifted as it is packed), a dilation or NCHW take im2col, as before. C = 6 in
    quads runs directly on 8 channels (a third more products, estimated cheaper than the
    patch matrix), C = 1 in quads (four times the products) and C = 3 in quads of a conv of
    8 output channels (the patch matrix then costs more per product) take im2col."""
    def plan(x_type, w_type, c=64, strides=(1, 1), dilations=(1, 1), layout="nhwc", f=32) -> str:
        x_shape, w_shape = ((1, 14, 14, c), (3, 3, c, f)) if layout == "nhwc" else ((1, c, 14, 14), (f, c, 3, 3))
        ho = (14 + 2 - 2 * dilations[0] - 1) // strides[0] + 1
        y_shape = (1, ho, ho, f) if layout == "nhwc" else (1, f, ho, ho)
        y_type = np.float32 if x_type is ml_dtypes.bfloat16 else np.int32
        src = conv2d(x_shape, w_shape, y_shape, strides, (1, 1), dilations, x_type, w_type, y_type, layout=layout)
        ctx = make_context()
        module = parse_module(ctx, src, "test.mlir")
        with planning_for(DOT512), collect() as remarks:
            build(resolve("default")).apply(ctx, module)
        module.verify()
        [choice] = [str(r) for r in remarks if r.pass_name == "loom-default" and "] conv2d " in str(r)]
        return choice

    bf16 = ml_dtypes.bfloat16
    assert "direct: bf16 input, vdpbf16ps reading the windows in place, in groups" in plan(bf16, bf16)
    assert "direct: ui8 input, vpdpbusd reading the windows in place, in groups" in plan(np.uint8, np.int8)
    assert "direct: i8 input, vpdpbusd reading the windows in place, in groups" in plan(np.int8, np.uint8)
    assert "direct: bf16 input, vdpbf16ps reading the windows in place" in plan(bf16, bf16, strides=(2, 2))
    assert "direct: ui8 input, vpdpbusd reading the windows in place, in groups; estimated time over the matmul's: " \
           "direct +33.3% (the windows' overhang 0.0% of the computed pixels, taps read in place +0%, 6 channels " \
           "padded to 8 +33.3%), im2col +150.0%" in plan(np.uint8, np.int8, c=6)
    for other in (plan(np.int8, np.int8), plan(bf16, bf16, dilations=(2, 2)), plan(np.uint8, np.int8, c=1),
                  plan(np.uint8, np.int8, c=3, f=512), plan(bf16, bf16, layout="nchw")):
        assert "im2col: " in other and "reading the windows" not in other, other


# --------------------------------------------------------------------------------------
# vpdpbusd and vdpbf16ps: planned for a target that has them, compiled for znver4


def _scheduled_llvm(src: str, spec: str) -> tuple[str, str]:
    """(LLVM IR, loom-dot's remarks) of `src` through the default pipeline, planned for the
    LOOM_TARGET `spec`: no JIT (the host may lack the instructions)."""
    ctx = make_context()
    module = parse_module(ctx, src, "test.mlir")
    with planning_for(spec), collect() as remarks:
        build(resolve("default")).apply(ctx, module)
    module.verify()
    return to_llvm_ir(module), "\n".join(str(r) for r in remarks if r.pass_name == "loom-dot")


def _source(a_type: str, b_type: str, n: int = 256, k: int | None = None) -> str:
    c_type = "f32" if a_type == "bf16" else "i32"
    k = n if k is None else k
    ta, tb, tc = f"tensor<{n}x{k}x{a_type}>", f"tensor<{k}x{n}x{b_type}>", f"tensor<{n}x{n}x{c_type}>"
    return f"""func.func @mm(%a: {ta}, %b: {tb}) -> {tc} {{
  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}
  func.return %c : {tc}
}}"""


@pytest.mark.skipif(not is_x86_64(), reason="compiles for an x86-64 CPU")
@pytest.mark.parametrize("a_type, b_type, instruction, mnemonic", [
    ("ui8", "i8", "vpdpbusd", "vpdpbusd"),
    ("i8", "ui8", "vpdpbusd", "vpdpbusd"),
    ("i8", "i8", "vpdpbusd", "vpdpbusd"),
    ("ui8", "ui8", "vpmaddwd + vpaddd", "vpmaddwd"),
    ("bf16", "bf16", "vdpbf16ps", "vdpbf16ps"),
])
@pytest.mark.parametrize("k", [256, 253])
def test_znver4_code_runs_on_its_dot_product_instruction(a_type, b_type, instruction, mnemonic, k):
    """On a target with VNNI and AVX512-BF16: u8 x s8 on vpdpbusd (quads; s8 x u8 with B's
    bytes as its unsigned source; s8 x s8 with A shifted by +128 and 128 x B's column sums,
    on vpdpbusd too, subtracted), u8 x u8 on vpmaddwd (exact in i16 pairs), bf16 on
    vdpbf16ps, 16 lanes; LLVM's znver4 code has the instruction on zmm registers (LLVM may
    fuse vpmaddwd + vpaddd into VNNI's vpdpwssd). K = 253 is no whole groups: the last one
    padded with zeros, run on to."""
    ir, remarks = _scheduled_llvm(_source(a_type, b_type, k=k), DOT512)
    assert f"{instruction} on 512-bit vectors" in remarks, remarks
    assert ("runs on to its tiles' last whole group" in remarks) == (k % 2 == 1), remarks
    if a_type == b_type == "i8":  # the column sums on vpdpbusd as well
        assert remarks.count("vpdpbusd on 512-bit vectors: loop %k_sum") >= 1, remarks
    asm = asm_for_cpu(ir, "znver4")
    mnemonics = (mnemonic, "vpdpwssd") if mnemonic == "vpmaddwd" else (mnemonic,)
    assert any(m in line and "%zmm" in line for line in asm.splitlines() for m in mnemonics)


@settings(max_examples=20, deadline=None)
@given(m=st.integers(1, 300), n=st.integers(1, 1100), k=st.integers(1, 300),
       types=st.sampled_from([("ui8", "i8"), ("i8", "ui8"), ("i8", "i8"), ("bf16", "bf16")]))
def test_every_shape_is_planned_for_the_dot_products(m, n, k, types):
    """loom-default on a target with VNNI and AVX512-BF16 schedules any shape down to LLVM
    IR (no JIT: the host may lack them): 1000 columns once left a 40-column copy whose
    tile of two vectors had 8 columns beside it, which loom-dot refused."""
    a_type, b_type = types
    c_type = "f32" if a_type == "bf16" else "i32"
    ta, tb, tc = f"tensor<{m}x{k}x{a_type}>", f"tensor<{k}x{n}x{b_type}>", f"tensor<{m}x{n}x{c_type}>"
    src = f"""func.func @mm(%a: {ta}, %b: {tb}) -> {tc} {{
  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}
  func.return %c : {tc}
}}"""
    _scheduled_llvm(src, DOT512)


def test_a_thousand_columns_peel_whole_vectors():
    """N = 1000 = 960 + 40: the copy of 40 columns takes a tile of two vectors (32), and its
    last 8 columns are peeled off again (widened), as loom-dot needs whole vectors."""
    _, remarks = _scheduled_llvm(_source("ui8", "i8", n=1000, k=256), DOT512)
    assert "vpdpbusd on 512-bit vectors" in remarks


@pytest.mark.skipif(not is_x86_64(), reason="compiles for an x86-64 CPU")
def test_avx2_code_runs_int8_on_vpmaddwd():
    """The AVX2 kind (no VNNI): u8 x s8 on vpmaddwd over ymm, no vpmulld left in the kernel's
    main loop (the widened path's multiply)."""
    ir, remarks = _scheduled_llvm(_source("ui8", "i8"), AVX2)
    assert "vpmaddwd + vpaddd on 256-bit vectors" in remarks
    asm = asm_for_cpu(ir, "znver3")
    assert sum("vpmaddwd" in line and "%ymm" in line for line in asm.splitlines()) >= 12


def test_jit_refuses_an_instruction_the_host_lacks(monkeypatch):
    """A kernel planned for VNNI on a host without it is a LoomError naming the intrinsic
    and the features, never LLVM's abort of the process."""
    monkeypatch.setattr(engine, "_host", None)
    host = engine._get_host()
    monkeypatch.setattr(engine, "_host", replace(host, features="+avx2,-avx512vnni,-avx512vl,-avxvnni"))
    ir, _ = _scheduled_llvm(_source("ui8", "i8"), DOT512)
    with pytest.raises(LoomError, match=r"the kernel calls llvm\.x86\.avx512\.vpdpbusd\.512, which needs avx512vnni"):
        engine.compile_ir(ir)


def test_missing_features():
    assert missing_features("llvm.x86.avx2.pmadd.wd", {"avx2": True}) is None
    assert missing_features("llvm.x86.avx512.vpdpbusd.256", {"avxvnni": True}) is None
    assert missing_features("llvm.x86.avx512.vpdpbusd.256", {"avx512vnni": True}) == "avx512vl+avx512vnni or avxvnni"
    assert missing_features("llvm.fma.v8f32", {}) is None  # not an x86 intrinsic of the table


# --------------------------------------------------------------------------------------
# the op's verifier


@pytest.mark.parametrize("instruction, types, message", [
    ("vpmaddwd", ([8], i32, [2], i16, [8], i16), "vpmaddwd: b is vector<16xi16> (groups of 2, 8 lanes), got vector<8xi16>"),
    ("vpmaddwd", ([8], i32, [4], i16, [16], i16), "vpmaddwd: a is vector<2xi16>"),
    ("vpmaddwd", ([3], i32, [2], i16, [6], i16), "vpmaddwd: 128, 256 or 512-bit accumulators, got vector<3xi32>"),
    ("vpdpbusd", ([8], i32, [2], i16, [16], i16), "vpdpbusd: a is vector<4xui8>"),
    ("vfoo", ([8], i32, [2], i16, [16], i16), "instruction 'vfoo' is not one of vpmaddwd, vpdpbusd, vpdpbusd.swapped, vdpbf16ps"),
])
def test_dot_op_verifier(instruction, types, message):
    acc_shape, acc, a_shape, a, b_shape, b = types
    values = TestOp(result_types=[VectorType(acc, acc_shape), VectorType(a, a_shape), VectorType(b, b_shape)])
    op = DotOp(instruction, *values.results)
    with pytest.raises(VerifyException, match=message.replace("(", r"\(").replace(")", r"\)")):
        op.verify()


# --------------------------------------------------------------------------------------
# a differential fuzzer: hand-written schedules on the grouped layout, exact or refused

dim = st.sampled_from([1, 2, 3, 5, 6, 8, 11, 16, 17, 24])


@st.composite
def grouped_schedules(draw) -> str:
    """Register tiles MR x NR on (i, j), k outside them (or tiled by KC, the packing inside
    its tiles: a K no group divides ends inside a group in the last tile, or in every tile
    where KC is not whole groups), A and B packed in groups (pairs of i16, or the bytes
    themselves in quads), then some of loom-vectorize, loom-dot, loom-unroll-jam,
    loom-hoist; `op=` or not on each."""
    mr, nr = draw(st.sampled_from([1, 2, 3, 6])), draw(st.sampled_from([4, 8, 16]))
    group, elements = draw(st.sampled_from([(2, ("i16", "i16")), (4, ("ui8", "i8")), (2, ("ui8", "i8"))]))
    kc = draw(st.sampled_from([None, 3, 4, 8]))

    def sel() -> str:
        return " op=matmul" if draw(st.booleans()) else ""

    if kc is None:  # (i_t, j_t, k, i, j)
        steps, levels = [f"loom-tile{{sizes={mr},{nr}}}", "loom-interchange{order=0,1,4,2,3}"], (0, 1)
    else:  # (i_t, j_t, k_t, k, i, j)
        steps, levels = [f"loom-tile{{sizes={mr},{nr},{kc}}}", "loom-interchange{order=0,1,2,5,3,4}"], (2, 2)
    steps += [f"loom-pack{{operand=1 level={levels[1]} panel={nr} group={group} element={elements[1]}{sel()}}}",
              f"loom-pack{{operand=0 level={levels[0]} panel={mr} group={group} element={elements[0]}{sel()}}}"]
    if draw(st.booleans()):
        steps.append(f"loom-vectorize{{width=8{sel()}}}")
    steps.append(f"loom-dot{{width={draw(st.sampled_from([4, 8]))}{sel()}}}")
    if draw(st.booleans()):
        jam = "1," * (3 if kc is None else 4)  # (the loops outside i)
        steps.append(f"loom-unroll-jam{{factors={jam}{mr},{draw(st.integers(1, 2))}{sel()}}}")
    if draw(st.booleans()):
        steps.append(f"loom-hoist{{{sel().strip()}}}")
    return ",".join(steps)


@settings(max_examples=25, deadline=None)
@given(m=dim, n=dim, k=dim, data=st.data())
def test_grouped_schedules_are_exact_or_refused(m, n, k, data):
    """u8 x s8 through random grouped schedules (shapes 1, primes, sizes no tile divides):
    the int64 product bit for bit, or a refusal that names the pass."""
    pipeline = data.draw(grouped_schedules())
    src = matmul((m, k), (k, n), (m, n), np.uint8, np.int8, np.int32)
    rng = np.random.default_rng(m + 31 * n + 17 * k)
    a, b = _ints(rng, (m, k), np.uint8, False), _ints(rng, (k, n), np.int8, False)
    try:
        with planning_for(AVX2):
            kernel = compiler.compile(src, pipeline=pipeline, num_threads=1, remarks=True)
    except LoomError as e:
        assert re.search(r"error: loom-[a-z-]+: ", str(e)), f"a refusal that names no pass: {e}"
        event("refused")
        return
    event("on x86vector.dot" if any("[loom-dot]" in r and "not rewritten" not in r for r in kernel.remarks)
          else "not rewritten")
    np.testing.assert_array_equal(kernel(a, b).astype(np.int64), a.astype(np.int64) @ b.astype(np.int64),
                                  err_msg=pipeline)
