"""The `default` pipeline (loom-default + the cost model) and the target it plans for.

The plan depends on the machine's caches and vector registers, so every test here plans
for a fixed target given by `LOOM_TARGET`: an AVX2-like machine unless said otherwise,
and the numerics for each kind of x86-64 host in turn (the `vector_target` fixture,
tests/targets.py: 6x16 register tiles of 8 lanes, then 8x48 of 16 on znver4), whatever this host
is. The assembly of the micro-kernel is checked on the host, for its own vectors, and
compiled for each kind's CPU. compile() caches kernels per LOOM_TARGET value too; each
source here still names its function after the module, so that no kernel compiled
elsewhere is reused.

Numerics: random inputs within 4*K*eps*max|ref| of numpy in float64, small-integer inputs
bit-exactly (their products and sums are exact in any order).
"""

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from kernels import assert_within_bound, conv2d_kernel, small_ints, ty
from targets import CPUS, REGISTERS, TARGETS, asm_for_cpu, is_x86_64, planning_for

import compiler
from passes.support import target as target_module
from passes.support.diagnostics import LoomError
from passes.support.target import Target, cache_sizes, machine, override
from passes.analysis.cost_model import MV_J_VECTORS, MV_K_JAM, MatmulPlan, plan_matmul, register_tile
from passes.schedule.loom_default import STEPS

ROOT = Path(__file__).parent.parent
BIN = Path(sys.executable).parent

AVX2 = "cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1"
AVX512 = "cpu=test512,l1=49152,l2=2097152,l3=33554432,vector_bits=512,vector_registers=32,fma=1"

AVX2_TARGET = Target("avx2", 32768, 524288, 33554432, 256, 16, True)
AVX512_TARGET = Target("avx512", 49152, 2097152, 33554432, 512, 32, True)
SSE_TARGET = Target("sse", 32768, 262144, 8 << 20, 128, 16, False)


def set_target(mp: pytest.MonkeyPatch, spec: str) -> None:
    mp.setenv("LOOM_TARGET", spec)
    target_module._host.cache_clear()


@pytest.fixture(scope="module", autouse=True)
def avx2_target():
    """Every test of the module plans for AVX2 (module-scoped: hypothesis tests too)."""
    with pytest.MonkeyPatch.context() as mp:
        set_target(mp, AVX2)
        yield
    target_module._host.cache_clear()


# --------------------------------------------------------------------------------------
# Sources (the function names keep them apart from other modules' kernels in the cache)


def mm_source(m, n, k, dtype=np.float32, name="default_mm") -> str:
    ta, tb, tc = ty((m, k), dtype), ty((k, n), dtype), ty((m, n), dtype)
    return (f"func.func @{name}(%a: {ta}, %b: {tb}) -> {tc} {{\n"
            f"  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}\n"
            f"  func.return %c : {tc}\n}}\n")


def bmm_source(bsz, m, n, k, dtype=np.float32, name="default_bmm") -> str:
    ta, tb, tc = ty((bsz, m, k), dtype), ty((bsz, k, n), dtype), ty((bsz, m, n), dtype)
    return (f"func.func @{name}(%a: {ta}, %b: {tb}) -> {tc} {{\n"
            f"  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}\n"
            f"  func.return %c : {tc}\n}}\n")


def dense_source(m, n, k, dtype=np.float32) -> str:
    tx, tw, tb, tc = ty((m, k), dtype), ty((k, n), dtype), ty((n,), dtype), ty((m, n), dtype)
    return (f"func.func @default_dense(%x: {tx}, %w: {tw}, %bias: {tb}) -> {tc} {{\n"
            f"  %c = loom.matmul %x, %w : ({tx}, {tw}) -> {tc}\n"
            f"  %s = loom.add %c, %bias : ({tc}, {tb}) -> {tc}\n"
            f"  %r = loom.relu %s : {tc}\n"
            f"  func.return %r : {tc}\n}}\n")


def exact_matmul(a, b, dtype):
    return np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(dtype)


def check_matmul(src, a_shape, b_shape, k, *, pipeline="default", dtype=np.float32, seed=0):
    """Random inputs within the bound, small integers bit-exactly; returns the kernel."""
    kern = compiler.compile(src, pipeline=pipeline)
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s).astype(dtype) for s in (a_shape, b_shape))
    out = kern(a, b)
    assert out.dtype == dtype
    assert_within_bound(out, compiler.reference(src, a, b), k, dtype, context=pipeline)
    a, b = small_ints(rng, a_shape, dtype), small_ints(rng, b_shape, dtype)
    np.testing.assert_array_equal(kern(a, b), exact_matmul(a, b, dtype), err_msg=pipeline)
    return kern


def run(tool, *args, env=None):
    proc = subprocess.run([str(BIN / tool), *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


# --------------------------------------------------------------------------------------
# 1. Numerics of pipeline="default"

# 1, primes, multiples of MR = 6 and NR = 16 and their neighbours, and anything in 1..80
dim = st.one_of(st.sampled_from([1, 2, 3, 5, 6, 7, 11, 12, 13, 16, 17, 31, 32, 37, 47, 48, 61, 79, 80]),
                st.integers(1, 80))


@given(m=dim, n=dim, k=dim, seed=st.integers(0, 2**16), kind=st.sampled_from(sorted(TARGETS)))
@example(m=29, n=47, k=5, seed=0, kind="avx512")  # peeled to 28x32: copies of 1 row, of 15 columns
@example(m=13, n=33, k=3, seed=0, kind="avx512")  # 13 rows < MR=14: (k, i, j), columns peeled to 32
def test_matmul_shapes(m, n, k, seed, kind):
    """Each example plans for one kind of host (drawn: the examples share the two)."""
    with planning_for(TARGETS[kind]):
        check_matmul(mm_source(m, n, k), (m, k), (k, n), k, seed=seed)


@pytest.mark.parametrize("m, n, k", [
    pytest.param(1, 1, 1, id="1x1x1"),
    pytest.param(1, 300, 200, id="matrix-vector"),  # M < MR: (k, i, j), B streamed once
    pytest.param(7, 5, 3, id="7x5x3"),  # N < one vector
    pytest.param(200, 33, 9, id="200x33x9"),  # peeled on both i and j
    pytest.param(100, 70, 90, id="packed"),  # A and B packed in the main nest
    pytest.param(6, 16, 1, id="one-register-tile"),
])
def test_matmul_fixed(m, n, k, vector_target):
    check_matmul(mm_source(m, n, k), (m, k), (k, n), k)


def test_matmul_f64(vector_target):
    check_matmul(mm_source(37, 45, 29, np.float64), (37, 29), (29, 45), 29, dtype=np.float64)


@pytest.mark.parametrize("bsz, m, n, k", [(3, 13, 37, 21), (2, 12, 32, 8), (2, 1, 40, 70)])
def test_batched_matmul(bsz, m, n, k, vector_target):
    src = bmm_source(bsz, m, n, k)
    check_matmul(src, (bsz, m, k), (bsz, k, n), k)
    kern = compiler.compile(src, pipeline="default", remarks=True)
    assert any("[loom-default] matmul" in r for r in kern.remarks), kern.remarks


def test_matmul_bias_relu_epilogue_vectorized(vector_target):
    m, n, k = 50, 40, 30
    src = dense_source(m, n, k)
    kern = compiler.compile(src, pipeline="default", remarks=True)
    rng = np.random.default_rng(5)
    x, w, bias = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal(n)
    x, w, bias = (v.astype(np.float32) for v in (x, w, bias))
    out = kern(x, w, bias)
    ref = compiler.reference(src, x, w, bias)
    assert_within_bound(out, ref, k, np.float32)
    assert (out >= 0).all() and (out == 0).any()
    x, w, bias = small_ints(rng, (m, k), np.float32), small_ints(rng, (k, n), np.float32), small_ints(rng, (n,), np.float32)
    np.testing.assert_array_equal(kern(x, w, bias), np.maximum(exact_matmul(x, w, np.float32) + bias, 0))
    # the add and relu nests (lines 3 and 4) are fused into the matmul's nest (its step
    # `fuse`), or, with skip=fuse, vectorized by loom-default, for the target
    assert any("fused add (line 3), relu (line 4) into the 'matmul' nest" in r for r in kern.remarks), kern.remarks
    unfused = compiler.compile(src, pipeline="loom-default{skip=fuse}", remarks=True)
    words = f"vectorized its innermost loop by {vector_target.lanes()} "
    vectorized = {int(r.split(":")[1]) for r in unfused.remarks if "[loom-vectorize]" in r and words in r}
    assert {3, 4} <= vectorized, unfused.remarks


@pytest.mark.parametrize("m", [1, 3, 7])
def test_few_rows_times_a_transposed_weight(m):
    """x @ w.T with fewer rows than MR (a linear layer at batch 1): each element a dot
    product of a row of x and a row of W read through the transposed view; exact on small
    integers at sizes no tile divides."""
    n, k = 37, 29
    t = lambda *s: ty(s, np.float32)  # noqa: E731
    src = (f"func.func @lin(%x: {t(m, k)}, %w: {t(n, k)}) -> {t(m, n)} {{\n"
           f"  %wt = loom.transpose %w {{perm = array<i64: 1, 0>}} : {t(n, k)} -> {t(k, n)}\n"
           f"  %y = loom.matmul %x, %wt : ({t(m, k)}, {t(k, n)}) -> {t(m, n)}\n"
           f"  func.return %y : {t(m, n)}\n}}\n")
    kern = compiler.compile(src, pipeline="default")
    rng = np.random.default_rng(m)
    x, w = small_ints(rng, (m, k), np.float32), small_ints(rng, (n, k), np.float32)
    np.testing.assert_array_equal(kern(x, w), exact_matmul(x, w.T, np.float32))


def test_two_matmuls_and_two_functions():
    """Each matmul nest of the module is planned and scheduled on its own (loom-default
    tags one nest at a time), in every function, the entry's result unchanged."""
    f32 = lambda *s: ty(s, np.float32)
    src = (f"func.func @default_chain(%a: {f32(37, 29)}, %b: {f32(29, 45)}, %c: {f32(45, 20)}) -> {f32(37, 20)} {{\n"
           f"  %x = loom.matmul %a, %b : ({f32(37, 29)}, {f32(29, 45)}) -> {f32(37, 45)}\n"
           f"  %y = loom.matmul %x, %c : ({f32(37, 45)}, {f32(45, 20)}) -> {f32(37, 20)}\n"
           f"  func.return %y : {f32(37, 20)}\n}}\n"
           f"func.func @default_other(%a: {f32(7, 9)}, %b: {f32(9, 70)}) -> {f32(7, 70)} {{\n"
           f"  %x = loom.matmul %a, %b : ({f32(7, 9)}, {f32(9, 70)}) -> {f32(7, 70)}\n"
           f"  func.return %x : {f32(7, 70)}\n}}\n")
    kern = compiler.compile(src, entry="default_chain", pipeline="default", remarks=True)
    lines = {int(r.split(":")[1]) for r in default_remarks(kern)}
    assert lines == {2, 3, 7}, kern.remarks  # both matmuls of @default_chain and the one of @default_other
    rng = np.random.default_rng(9)
    a, b, c = small_ints(rng, (37, 29), np.float32), small_ints(rng, (29, 45), np.float32), small_ints(rng, (45, 20), np.float32)
    np.testing.assert_array_equal(kern(a, b, c), (a.astype(np.int64) @ b @ c).astype(np.float32))
    other = compiler.compile(src, entry="default_other", pipeline="default")
    a, b = small_ints(rng, (7, 9), np.float32), small_ints(rng, (9, 70), np.float32)
    np.testing.assert_array_equal(other(a, b), exact_matmul(a, b, np.float32))


@pytest.mark.parametrize("skip", ["", "direct", "direct,im2col"])
def test_conv2d_direct_im2col_or_left_as_it_is(skip, vector_target):
    """loom-default rewrites a conv2d into a direct convolution (its cost model's choice
    here: 5 output channels make im2col's patch matrix dear) or, with skip=direct, a patch
    copy, each then an implicit or a plain matmul that gets the matmul schedule; with
    skip=direct,im2col the conv2d nest is left as it is. All are right."""
    case = (2, 3, 11, 10, 5, 3, 2, (2, 1), (1, 2), (1, 2))
    src, (x_shape, w_shape), k = conv2d_kernel(case, np.float32)
    src = src.replace("@conv(", "@default_conv(")
    kern = compiler.compile(src, pipeline=f"loom-default{{skip={skip}}}" if skip else "default", remarks=True)
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)
    assert_within_bound(kern(x, w), compiler.reference(src, x, w), k, np.float32)
    x, w = small_ints(rng, x_shape, np.float32), small_ints(rng, w_shape, np.float32)
    np.testing.assert_array_equal(kern(x, w), compiler.reference(src, x, w).astype(np.float32))
    scheduled = [r for r in kern.remarks if re.search(r"\[loom-(tile|interchange|unroll-jam|pack|peel|default)\]", r)
                 and not r.startswith("remark:")]  # (not the module-wide one-thread remark)
    if skip == "direct,im2col":  # only the zero fill is touched
        assert not scheduled, kern.remarks
        return
    plan = next(r for r in scheduled if "[loom-default] conv2d" in r)
    how = next(r for r in scheduled if "[loom-default] nest 'conv2d'" in r)
    assert "conv2d 2x3x11x10 * 5x3x3x2 (strides [2, 1], padding [1, 2], dilations [1, 2]) -> 2x5x6x12" in plan, plan
    assert "direct +25.9%" in plan and "across stride phases +12%" in plan and "im2col +320.0%" in plan, plan
    if skip:
        assert ": im2col: the direct convolution not allowed here" in plan, plan
        assert "patch matrix 2x18x72" in how and "then matmul 5x72x18, batched over 2" in how, how
    else:
        assert ": direct: estimated" in plan, plan
        assert "direct convolution: X staged as 2x3x2x1 planes of 7x14" in how and "implicit matmul 5x82x18" in how, how
    assert any("[loom-default] matmul" in r for r in scheduled), kern.remarks


def micro_kernel_loop(asm: str) -> list[str]:
    """The loop of `asm` with the most fmas (from a label to the first jump after it)."""
    blocks: list[list[str]] = [[]]
    for line in asm.splitlines():
        if re.match(r"^\.?\w+:", line):
            blocks.append([])
        if not blocks[-1] or not blocks[-1][-1].startswith("j"):
            blocks[-1].append(line.strip())
    return max(blocks, key=lambda b: sum(x.startswith("vfmadd231ps") for x in b))


def micro_kernel_asm(target: Target, asm_of, order: str) -> tuple[str, int, int]:
    """(assembly, MR, vectors per row) of a matmul of whole MR x NR register tiles (no
    peeled copy: the loop with the most fmas is the micro-kernel's k loop), planned for
    `target` (the current LOOM_TARGET) in the `order` "rows" (skip=fuse-pack) or "panels"
    (where the tile may differ: MEASURED_PANEL_TILES); `asm_of(kernel)` compiles it for a CPU."""
    mr, nr = register_tile(target)
    m, n, k = 16 * mr, 2 * nr, 256
    plan = plan_matmul(m, n, k, target, panels=order == "panels")
    assert plan.panels == (order == "panels") and m % plan.mr == 0 and n % plan.nr == 0
    src = mm_source(m, n, k, name=f"default_mm_asm_{plan.mr}x{plan.nr}")
    pipeline = "default" if order == "panels" else "loom-default{skip=fuse-pack}"
    return asm_of(compiler.compile(src, pipeline=pipeline)), plan.mr, plan.nr // target.lanes()


def check_micro_kernel(asm: str, mr: int, nv: int, register: str) -> None:
    """The k loop of the MR x NR tile (NR = nv vectors): its MR*nv accumulators stay in
    vector registers of the target's width (MR*nv distinct fma destinations, fmas a
    multiple of MR*nv: LLVM may unroll it), MR broadcasts of A and nv vector loads of B
    per MR*nv fmas, and nothing spilled to the stack. (In the panel order the loop may be
    the first row tile's, which also stores the B vectors it loads into the panel.)"""
    loop = micro_kernel_loop(asm)
    accumulators = mr * nv
    fmas = [x for x in loop if x.startswith("vfmadd231ps")]
    assert fmas and len(fmas) % accumulators == 0, loop
    assert len({x.split(",")[-1].strip() for x in fmas}) == accumulators, fmas
    assert all(x.split(",")[-1].strip().startswith(register) for x in fmas), fmas
    assert sum(x.startswith("vbroadcastss") for x in loop) == len(fmas) // nv, loop
    loads = [x for x in loop if x.startswith(("vmovaps", "vmovups")) and not x.split(None, 1)[1].startswith("%")]
    assert len(loads) == len(fmas) // mr, loop  # (the first row tile of the panel order also stores them)
    assert not any("rsp" in x for x in loop), loop  # no spills


@pytest.mark.parametrize("order", ["rows", "panels"])
def test_micro_kernel_in_registers(order):
    """The assembly of the register micro-kernel on this host, planned for it
    (LOOM_TARGET unset): 6x16 in 12 ymm accumulators on AVX2 (16 registers), 14x32 in
    28 zmm accumulators on AVX-512 (32 registers; 8x48 in 24 on znver4, 4x48 in 12 in
    its panel order)."""
    host = machine()
    if not (host.fma and host.vector_bits in REGISTERS):
        pytest.skip(f"the host ({host.describe()}) has no FMA on ymm or zmm registers")
    with planning_for("") as target:
        asm, mr, nv = micro_kernel_asm(target, lambda kernel: kernel.asm(), order)
    check_micro_kernel(asm, mr, nv, REGISTERS[host.vector_bits])


@pytest.mark.skipif(not is_x86_64(), reason="compiles for x86-64 CPUs")
@pytest.mark.parametrize("order", ["rows", "panels"])
@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_micro_kernel_in_registers_for_each_kind_of_host(kind, order):
    """The same, planned for each kind of host and compiled for its CPU without running
    it (Zen 3: 6x16 in ymm, Zen 4: 8x48 in zmm, 4x48 in the panel order), whichever this
    host is."""
    with planning_for(TARGETS[kind]) as target:
        asm, mr, nv = micro_kernel_asm(target, lambda kernel: asm_for_cpu(kernel.llvm_ir, CPUS[kind]), order)
    check_micro_kernel(asm, mr, nv, REGISTERS[target.vector_bits])


# --------------------------------------------------------------------------------------
# 2. Ablations: loom-default{skip=...}

#: the pass whose remarks show that a step ran
STEP_PASS = {"direct": "loom-direct-conv", "im2col": "loom-im2col", "grouped": "loom-grouped-conv", "peel": "loom-peel", "tile": "loom-tile", "pack": "loom-pack", "vectorize": "loom-vectorize",
             "unroll-jam": "loom-unroll-jam", "hoist": "loom-hoist", "prefetch": "loom-prefetch",
             "fuse-pack": "loom-fuse-pack", "parallel": "loom-parallelize", "fuse": "loom-fuse-epilogue"}


@pytest.mark.parametrize("skip", [*STEPS, "tile,pack", ",".join(STEPS)])
def test_skip_variants_are_correct(skip, vector_target):
    pipeline = f"loom-default{{skip={skip}}}"
    src = mm_source(37, 45, 29)
    check_matmul(src, (37, 29), (29, 45), 29, pipeline=pipeline)
    remarks = "\n".join(compiler.compile(src, pipeline=pipeline, remarks=True).remarks)
    for step in skip.split(","):
        assert f"[{STEP_PASS[step]}]" not in remarks, (step, remarks)
    if skip == "tile":  # no tiles to interchange or pack either
        assert "[loom-interchange]" not in remarks and "[loom-pack]" not in remarks


def test_skip_pack_on_a_packed_shape(vector_target):
    src = mm_source(100, 70, 90, name="default_mm_pack")
    packed = compiler.compile(src, pipeline="default", remarks=True)
    assert any("[loom-pack]" in r for r in packed.remarks)
    plain = check_matmul(src, (100, 90), (90, 70), 90, pipeline="loom-default{skip=pack}")
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((100, 90)).astype(np.float32), rng.standard_normal((90, 70)).astype(np.float32)
    # packing moves the data, not the order of the arithmetic: the same bits
    np.testing.assert_array_equal(packed(a, b), plain(a, b))
    assert "memref.alloc" not in compiler.compile(src, pipeline="loom-default{skip=pack}", stages=True).stages["loom-default"]


def test_skip_unknown_step_is_an_error():
    with pytest.raises(LoomError) as info:
        compiler.compile(mm_source(5, 6, 7, name="default_bogus"), pipeline="loom-default{skip=bogus}")
    message = str(info.value)
    assert "loom-default: unknown step bogus in option 'skip'" in message
    assert all(step in message for step in STEPS), message
    p = run("loom-opt", ROOT / "examples" / "matmul.mlir", "-p", "loom-default{skip=bogus}")
    assert p.returncode == 1 and p.stdout == ""
    assert "error: loom-default: unknown step bogus in option 'skip' (steps: direct, im2col, grouped, fuse, peel, tile, pack, vectorize, unroll-jam, hoist, prefetch, fuse-pack, parallel)" in p.stderr
    p = run("loom-run", ROOT / "examples" / "matmul.mlir", "--pipeline", "loom-default{skip=hoist,bogus}", "--repeat", "1")
    assert p.returncode == 1 and "unknown step bogus" in p.stdout + p.stderr


# --------------------------------------------------------------------------------------
# 3. Remarks: the plan, and its pass list


def default_remarks(kern) -> list[str]:
    """loom-default's remarks about nests (each at its line), not the module-wide ones (one
    thread: OMP_NUM_THREADS=1)."""
    return [r for r in kern.remarks if "[loom-default]" in r and not r.startswith("remark:")]


def pass_list(remark: str) -> str:
    return remark.split("; pass list: ", 1)[1].strip()


def test_remark_describes_the_plan():
    kern = compiler.compile(mm_source(200, 33, 9, name="default_remark"), pipeline="default", remarks=True)
    remarks = default_remarks(kern)
    assert len(remarks) == 4, remarks  # the main nest and three peeled copies (2 rows: columns peeled too)
    main = remarks[0]
    assert main.startswith("<source>:2:3: remark: [loom-default] matmul 198x32x9 on test: ")
    for words in ["L1d 32 KiB, L2 512 KiB, L3 32 MiB, 256-bit vectors x 16 registers, FMA",
                  "register tile 6x16 (12 accumulators of 8 lanes)", "MC=", "NC=", "KC=9",
                  "estimated traffic in f32 elements: DRAM->L3 ", "L2->L1 ", "L1->registers ", "; pass list: "]:
        assert words in main, (words, main)
    assert "(peeled copy 1 of the nest)" in remarks[1] and "(peeled copy 2 of the nest)" in remarks[2]
    assert "loom-tile{sizes=" in pass_list(main) and "op=matmul" in pass_list(main)


def test_remark_pass_list_gives_the_same_results(vector_target):
    """A shape the register tile divides (no peeling): the remark's pass list is the whole
    matmul schedule, and compile() completes it into the same kernel."""
    mr, nr = register_tile(vector_target)
    m, n, k = 8 * mr, 4 * nr, 100  # packed: A and B take 44 KiB (6x16), 96 KiB (14x32)
    src = mm_source(m, n, k, name="default_roundtrip")
    kern = compiler.compile(src, pipeline="default", remarks=True)
    (remark,) = default_remarks(kern)
    spec = pass_list(remark)
    assert "loom-pack{" in spec and "loom-peel" not in spec
    again = compiler.compile(src, pipeline=spec, remarks=True)
    assert not default_remarks(again)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_array_equal(again(a, b), kern(a, b))
    assert_within_bound(again(a, b), compiler.reference(src, a, b), k, np.float32)


def test_remark_pass_list_of_a_peeled_nest_is_correct_on_the_whole_nest(vector_target):
    src = mm_source(37, 45, 29, name="default_peeled_list")
    main = default_remarks(compiler.compile(src, pipeline="default", remarks=True))[0]
    check_matmul(src, (37, 29), (29, 45), 29, pipeline=pass_list(main))


def test_remark_512_bit_target_via_loom_opt(tmp_path):
    f = tmp_path / "mm.mlir"
    f.write_text(mm_source(100, 70, 90))
    p = run("loom-opt", f, "-p", "loom-default", "--remarks", env={"LOOM_TARGET": AVX512})
    assert p.returncode == 0, p.stderr
    assert "llvm." not in p.stdout and "affine.for" in p.stdout
    main = next(line for line in p.stderr.splitlines() if "[loom-default] matmul 98x64x90 on test512" in line)
    assert "512-bit vectors x 32 registers, FMA: register tile 14x32 (28 accumulators of 16 lanes)" in main
    assert "loom-tile{sizes=14,32 op=matmul depth=3}" in main and "loom-unroll-jam{factors=1,1,1,1,1,1,14,2 op=matmul}" in main
    assert "L1d 48 KiB, L2 2 MiB" in main


def test_plan_is_the_targets(vector_target):
    """Planned for each kind of host (6x16 tiles of 8 lanes, 8x48 of 16 on znver4) on whatever
    this host is: the remark names the target's register tile, and the results hold."""
    mr, nr = register_tile(vector_target)
    w = vector_target.lanes()
    src = mm_source(37, nr + 13, 29, name="default_mm_plan")  # wider than a tile
    kern = compiler.compile(src, pipeline="default", remarks=True)
    main = default_remarks(kern)[0]
    assert f"on {vector_target.cpu}: " in main and f"{vector_target.vector_bits}-bit vectors" in main, main
    assert f"register tile {mr}x{nr} ({mr * nr // w} accumulators of {w} lanes)" in main, main
    check_matmul(bmm_source(2, 30, 40, 50, name="default_bmm_plan"), (2, 30, 50), (2, 50, 40), 50)


@pytest.mark.parametrize("source", ["matmul.mlir", "matmul_bias_relu.mlir"])
def test_loom_target_vector_width_reaches_every_nest(source, vector_target):
    """Every vector loom-default makes, in the matmul and in the other nests it vectorizes
    (the zero fill of C, the bias and the relu), has the width LOOM_TARGET gives: the
    one target every pass asks, whatever the host's own width is."""
    f = ROOT / "examples" / source
    p = run("loom-opt", f, "-p", "loom-default")  # LOOM_TARGET: the fixture's
    assert p.returncode == 0, p.stderr
    # (the bound groups of an affine.parallel, `dense<1> : vector<1xi32>`, are no data)
    assert set(re.findall(r"vector<(\d+)x(?!i32)", p.stdout)) == {str(vector_target.lanes())}, p.stdout
    assert "iter_args" in p.stdout  # the MR x NR block of C in registers across k


# --------------------------------------------------------------------------------------
# 4. The cost model and the target


@pytest.mark.parametrize("target, tile", [
    (AVX2_TARGET, (6, 16)),
    (AVX512_TARGET, (14, 32)),
    # the tile measured on the CPU (cost_model.MEASURED_TILES), where it fits; else the rule
    (Target("znver4", 32768, 1 << 20, 32 << 20, 512, 32, True), (8, 48)),
    (Target("znver4", 32768, 1 << 20, 32 << 20, 256, 16, True), (6, 16)),
    (SSE_TARGET, (6, 8)),
    (Target("neon", 65536, 1 << 20, 0, 128, 32, True), (9, 12)),
    (Target("few", 32768, 1 << 20, 0, 256, 4, True), (1, 8)),  # no tile that is not load-bound
])
def test_register_tile(target, tile):
    mr, nr = register_tile(target)
    assert (mr, nr) == tile
    nv = nr // target.lanes()
    if (mr, nr) != (1, target.lanes()):
        assert mr * nv + nv + 1 <= target.vector_registers  # accumulators, B vectors, a broadcast
        assert mr + nv <= mr * nv  # at most one load per fma


def test_plan_1024_on_znver3_like_host():
    plan = plan_matmul(1024, 1024, 1024, AVX2_TARGET)
    assert (plan.mr, plan.nr, plan.mc, plan.nc, plan.kc, plan.pack) == (6, 16, 96, 1024, 1024, True)
    assert plan.lanes == 8 and plan.rows_tiled


def test_windows_take_k_in_blocks_of_one_size():
    """A direct convolution's windows (A in place) take K in blocks of one size where up to
    twice the fewest blocks divide it in multiples of 8 (the k loop then has no min bound:
    3x3 C128 28^2, K = 1152, ran 2.5x faster on one thread in 576 + 576 than in 1024 + 128);
    a packed A keeps the largest block that fits."""
    assert plan_matmul(784, 128, 1152, AVX2_TARGET, in_place="A").kc == 576
    assert plan_matmul(196, 256, 2304, AVX2_TARGET, in_place="A").kc == 768
    assert plan_matmul(49, 512, 4608, AVX2_TARGET, in_place="A", b_panel=True).kc == 768
    assert plan_matmul(3136, 64, 576, AVX2_TARGET, in_place="A").kc == 576  # one block
    assert plan_matmul(100, 64, 1031, AVX2_TARGET, in_place="A").kc == 1024  # no such blocks (1031 is prime)
    assert plan_matmul(784, 128, 1152, AVX2_TARGET).kc == 1024


def test_plan_no_packing_when_a_and_b_fit_in_l1():
    plan = plan_matmul(64, 64, 64, AVX2_TARGET)  # 2 x 16 KiB = L1
    assert not plan.pack and plan.why_no_pack == "A and B fit in L1 together"
    assert (plan.mc, plan.nc, plan.kc) == (64, 64, 64)
    assert plan_matmul(64, 64, 65, AVX2_TARGET).pack
    assert "no packing: A and B fit in L1 together" in plan.describe()


def test_plan_counts_a_masked_vector_as_an_accumulator():
    """A peeled copy 15 columns wide keeps a full and a masked vector per row: 12 vector
    registers for a 6x15 tile, not 6*15/8 = 11."""
    plan = plan_matmul(126, 15, 511, AVX2_TARGET)
    assert (plan.mr, plan.nr) == (6, 15)
    assert "register tile 6x15 (12 accumulators of 8 lanes)" in plan.describe()


@pytest.mark.parametrize("m", [1, 3, 5])
def test_plan_no_packing_with_fewer_rows_than_mr(m):
    plan = plan_matmul(m, 4096, 4096, AVX2_TARGET)
    assert not plan.pack and not plan.rows_tiled
    assert plan.why_no_pack == "B is read once, a copy would only add traffic"
    assert f"{m} row{'s' * (m != 1)} < MR=6: rows of B streamed once" in plan.describe()
    assert plan_matmul(6, 4096, 4096, AVX2_TARGET).pack


@given(m=st.integers(1, 5000), n=st.integers(1, 5000), k=st.integers(1, 5000),
       target=st.sampled_from([AVX2_TARGET, AVX512_TARGET, SSE_TARGET]))
def test_plan_invariants(m, n, k, target):
    plan = plan_matmul(m, n, k, target)
    assert isinstance(plan, MatmulPlan) and (plan.m, plan.n, plan.k) == (m, n, k)
    mr, nr = register_tile(target)
    assert (plan.mr, plan.nr) == (mr, min(nr, n)) and plan.lanes == target.lanes()  # narrow: one panel
    if plan.pack:
        assert plan.rows_tiled
        assert plan.kc * plan.mr * 4 <= target.l1 * 3 // 4  # an A sliver takes at most 3/4 of L1
        assert plan.mc % plan.mr == 0 and plan.nc % plan.nr == 0
        assert plan.mc * plan.kc * 4 <= target.l2  # the packed A block fits L2
        assert 1 <= plan.kc <= k and plan.mc <= -(-m // plan.mr) * plan.mr and plan.nc <= -(-n // plan.nr) * plan.nr
        assert f"packed A {plan.mc}x{plan.kc}" in plan.describe()
    else:
        assert (m * k + k * n) * 4 <= target.l1 or m < plan.mr
    traffic = plan.traffic()
    assert list(traffic) == ["DRAM->L3", "L2->L1", "L1->registers"]
    assert all(v > 0 for v in traffic.values()), traffic
    text = plan.describe()
    assert all(f"{level} " in text for level in traffic), text
    assert text.count("/fma)") == 3


def test_traffic_of_a_large_plan():
    plan = plan_matmul(1024, 1024, 1024, AVX2_TARGET)
    traffic = plan.traffic()
    flops = 1024**3
    assert traffic["L1->registers"] == pytest.approx(flops / 16 + flops / 6)
    # more reuse further from the registers
    assert traffic["DRAM->L3"] < traffic["L2->L1"] < traffic["L1->registers"]


def fake_cache_tree(root: Path, entries) -> Path:
    for i, fields in enumerate(entries):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        for name, value in fields.items():
            (d / name).write_text(value + "\n")
    return root


def test_cache_sizes_from_a_fake_sys_tree(tmp_path):
    root = fake_cache_tree(tmp_path / "cache", [
        {"level": "1", "type": "Data", "size": "48K"},
        {"level": "1", "type": "Instruction", "size": "32K"},
        {"level": "2", "type": "Unified", "size": "2048K"},
        {"level": "3", "type": "Unified", "size": "32M"},
        {"level": "4", "type": "Unified"},  # no size: skipped
        {"level": "x", "type": "Data", "size": "1K"},  # unreadable level: skipped
    ])
    assert cache_sizes(root) == {1: 48 * 1024, 2: 2 << 20, 3: 32 << 20}
    assert cache_sizes(tmp_path / "missing") == {}
    plain = fake_cache_tree(tmp_path / "plain", [{"level": "2", "type": "Unified", "size": "524288"}])
    assert cache_sizes(plain) == {2: 524288}


def test_override_parses_a_spec():
    t = override(AVX2_TARGET, " l1=48K, l2=2M,l3=1G ,vector_bits=512,vector_registers=32,fma=0,cpu=zen5 ")
    assert t == Target("zen5", 48 * 1024, 2 << 20, 1 << 30, 512, 32, False)
    assert override(AVX2_TARGET, "") is AVX2_TARGET and override(AVX2_TARGET, "  ") is AVX2_TARGET
    assert override(SSE_TARGET, "fma=yes").fma and override(SSE_TARGET, "fma=true").fma
    assert override(AVX2_TARGET, "bf16_dot=1,int8_dot=yes") == replace(AVX2_TARGET, bf16_dot=True, int8_dot=True)
    assert not override(replace(AVX2_TARGET, int8_dot=True), "int8_dot=false").int8_dot


@pytest.mark.parametrize("spec, words", [
    ("l4=1M", "expected key=value with key in cpu, l1, l2, l3, vector_bits, vector_registers, fma, threads, "
              "bf16_dot, int8_dot, got 'l4=1M'"),
    ("int8_dot=2", "'int8_dot' is one of 1, true, yes, 0, false, no, got '2'"),
    ("l1", "got 'l1'"),
    ("l1=", "got 'l1='"),
    ("l1=32K,,l2=1M", "got ''"),
    ("l1=abc", "'l1' needs a number, got 'abc'"),
    ("vector_bits=2.5", "'vector_bits' needs a number, got '2.5'"),
    ("l2=1.5M", "'l2' needs a number, got '1.5M'"),
])
def test_override_rejects_bad_specs(spec, words):
    with pytest.raises(LoomError) as info:
        override(AVX2_TARGET, spec)
    assert "LOOM_TARGET: " in str(info.value) and words in str(info.value)


def test_host_reads_loom_target(monkeypatch):
    monkeypatch.setenv("LOOM_TARGET", "cpu=fake,l1=16K,vector_bits=128")
    target_module._host.cache_clear()
    try:
        host = target_module.host()
        assert (host.cpu, host.l1, host.vector_bits, host.lanes()) == ("fake", 16384, 128, 4)
        assert "fake: L1d 16 KiB" in host.describe() and "128-bit vectors" in host.describe()
        monkeypatch.setenv("LOOM_TARGET", "l1=oops")  # read again: the cache is per value
        with pytest.raises(LoomError, match="'l1' needs a number"):
            target_module.host()
    finally:
        monkeypatch.setenv("LOOM_TARGET", AVX2)
        target_module._host.cache_clear()


@pytest.mark.parametrize("features, vectors", [
    ({"avx512f": True, "avx": True, "fma": True}, (512, 32)),  # Zen 4/5, Intel AVX-512: zmm
    ({"avx512f": False, "avx2": True, "avx": True}, (256, 16)),  # Zen 3: ymm
    ({"neon": True}, (128, 32)),
    ({"sse2": True}, (128, 16)),
])
def test_vectors_of_the_cpu_features(features, vectors):
    assert target_module.vectors_of(features) == vectors


@pytest.mark.parametrize("features, bits, dots", [
    ({"avx512bf16": True, "avx512vnni": True}, 512, (True, True)),  # Zen 4/5, Sapphire Rapids
    ({"avx512bf16": True, "avx512vnni": True}, 256, (False, False)),  # 256-bit forms need AVX512-VL
    ({"avx512bf16": True, "avx512vnni": True, "avx512vl": True}, 256, (True, True)),
    ({"avxvnni": True, "avx2": True}, 256, (False, True)),  # AVX-VNNI (Alder Lake): the VEX form, int8 only
    ({"avx2": True}, 256, (False, False)),  # Zen 3
])
def test_dot_products_of_the_cpu_features(features, bits, dots):
    assert target_module.dot_products_of(features, bits) == dots


def test_machine_is_the_host_whatever_loom_target_says():
    """`machine()` (the CPU the JIT compiles for) ignores LOOM_TARGET; `host()` (what the
    passes plan for) takes it (this module sets an AVX2-like one)."""
    assert target_module.host().cpu == "test" and machine().cpu != "test"
    with planning_for("") as real:
        assert real == machine()


def test_override_rejects_zero_vector_bits():
    with pytest.raises(LoomError, match="LOOM_TARGET"):
        override(AVX2_TARGET, "vector_bits=0")


# --------------------------------------------------------------------------------------
# 5. The command line


def test_loom_opt_default_prints_scheduled_affine_loops():
    """BLIS's order with the register tiles row by row (skip=fuse-pack, or on several
    threads); on one thread, where the 128 rows are one block: the panel order, each B
    panel copied by the first row tile."""
    for skip, names in ((" skip=fuse-pack", ("j_t", "k_t", "i_t", "i_t2", "j_t2", "k")), ("", ("i_t", "k_t", "j_t", "i_t2", "k"))):
        p = run("loom-opt", ROOT / "examples" / "matmul_bias_relu.mlir", "-p", f"loom-default{{num-threads=1{skip}}}",
                env={"LOOM_TARGET": "cpu=znver3,l1=32K,l2=512K,l3=32M,vector_bits=256,vector_registers=16,fma=1"})
        assert p.returncode == 0, p.stderr
        out = p.stdout
        assert "llvm." not in out and "loom.matmul" not in out and "loom.add" not in out
        assert "affine.for %j_t = " in out and "iter_args(" in out and "vector.fma" in out
        assert re.search(r"memref\.alloc\(\) \{alignment = 64 : i64\} : memref<\d+x256x16xf32>", out), out
        order = [out.index(f"affine.for %{name} = ") for name in names]
        assert order == sorted(order), (skip, out)
        assert ("loom.prefetch %w[" in out) == (not skip)


def test_loom_run_default():
    p = run("loom-run", ROOT / "examples" / "matmul_bias_relu.mlir", ROOT / "examples" / "batched_matmul_f64.mlir",
            "--pipeline", "default", "--repeat", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("check    OK") == 2 and "pipeline=default" in p.stdout


# --------------------------------------------------------------------------------------
# Known bugs


def test_f64_matmul_gets_a_register_tile(vector_target):
    src = mm_source(48, 64, 32, np.float64)
    p = subprocess.run([str(BIN / "loom-opt"), "-", "-p", "loom-default"], input=src, capture_output=True,
                       text=True, env=dict(os.environ), check=False)  # LOOM_TARGET: the fixture's
    assert p.returncode == 0, p.stderr
    assert "iter_args" in p.stdout
    assert set(re.findall(r"vector<(\d+)xf64>", p.stdout)) == {str(vector_target.lanes(8))}, p.stdout


def test_matrix_vector_k_unroll_jam_applies(vector_target):
    kern = compiler.compile(mm_source(1, 300, 200, name="default_mv"), pipeline="default", remarks=True)
    assert f"k unroll-jammed by {MV_K_JAM}" in default_remarks(kern)[0]
    jam = next(r for r in kern.remarks if "[loom-unroll-jam]" in r)
    vectors = MV_J_VECTORS  # j: the plan's own vectors, whatever the register tile's NR
    assert f"factors [{MV_K_JAM}, 1, {vectors}] requested, [{MV_K_JAM}, 1, {vectors}] applied" in jam, jam


def test_malformed_pipeline_is_a_loom_error():
    src = mm_source(5, 6, 7, name="default_malformed")
    try:
        compiler.compile(src, pipeline="loom-default{skip=}")
    except LoomError:
        pass
    except BaseException as e:  # noqa: BLE001 - what escapes today
        pytest.fail(f"{type(e).__name__} escaped compile(): {e}")
    else:
        pytest.fail("no error")
    p = subprocess.run([str(BIN / "loom-opt"), str(ROOT / "examples" / "matmul.mlir"), "-p", "loom-default{skip=}"],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 1 and "Traceback" not in p.stderr and "error: invalid pass pipeline" in p.stderr


def test_f64_batched_matmul_with_a_one_column_remainder(vector_target):
    """17 f64 columns leave one past a multiple of the width: the zero fill's and the
    epilogue's remainders are 1-lane masks, which loom-convert-to-llvm makes scalar
    (as 1-lane masked stores, LLVM took 89 s to compile this on an AVX-512 host)."""
    ta, tb, tc = "tensor<4x64x48xf64>", "tensor<4x48x17xf64>", "tensor<4x64x17xf64>"
    src = f"""func.func @bmm_mul(%a: {ta}, %b: {tb}, %s: {tc}) -> {tc} {{
  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}
  %p = loom.mul %c, %s : ({tc}, {tc}) -> {tc}
  func.return %p : {tc}
}}"""
    kern = compiler.compile(src, pipeline="default")
    rng = np.random.default_rng(3)
    a, b, s = small_ints(rng, (4, 64, 48), np.float64), small_ints(rng, (4, 48, 17), np.float64), \
        small_ints(rng, (4, 64, 17), np.float64)
    np.testing.assert_array_equal(kern(a, b, s), (a @ b) * s)


def test_matrix_vector_columns_split_only_into_equal_blocks():
    """On 2 threads a matrix-vector product's columns are split into two equal blocks of
    whole vectors; columns that do not split so stay on one thread (a block of another
    width has a run-time trip count, whose vector remainder keeps k from being jammed:
    the loop over j then ran in parallel inside k, a fork per k)."""
    from passes.support.target import openmp_runtime
    from passes.schedule.loom_default import LoomDefaultPass

    if openmp_runtime() is None:
        pytest.skip("libgomp is not installed: everything stays serial")
    default = LoomDefaultPass(num_threads=2)
    assert default._column_blocks(plan_matmul(1, 4096, 4096, AVX512_TARGET), set(), AVX512_TARGET) == 2048
    assert default._column_blocks(plan_matmul(1, 4080, 4096, AVX512_TARGET), set(), AVX512_TARGET) == 0
    assert default._column_blocks(plan_matmul(5, 224, 511, AVX2_TARGET), set(), AVX2_TARGET) == 112



@pytest.mark.parametrize("k, tile", [(4608, (7, 32)), (2304, (7, 32)), (256, (4, 64))])
def test_a_direct_conv_whose_rows_seven_divide_takes_seven_row_tiles_where_its_filter_outgrows_l2(k, tile):
    """ResNet's 7x7 maps at batch 1: 49 rows, which 4 leaves one of, a copy that would read
    the filter unpacked all over again; where the filter (K x 512 f32) is larger than L2
    (1 MiB), 7x32 tiles (`MEASURED_WINDOW_ROW_TILES`); the 1x1 projection's 512 KiB keeps 4x64."""
    znver4 = Target("znver4", 32768, 1 << 20, 32 << 20, 512, 32, True)
    plan = plan_matmul(49, 512, k, znver4, in_place="A")
    assert (plan.mr, plan.nr) == tile
    assert (plan_matmul(56 * 56, 512, k, znver4, in_place="A").mr, plan_matmul(49, 512, k, znver4).mr) == (4, 8)
