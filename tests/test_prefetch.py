"""loom-prefetch end to end: the default pipeline prefetches the next register tile's
block of C; a prefetch changes no value, so the results are the same bits as without it
(`loom-default{skip=prefetch}`), on shapes whose last tile prefetches rows past the end
of C, and within the bound of numpy's. Then the pass on its own after the register
micro-kernel pipeline, and the remarks. The default pipeline is planned for each kind
of x86-64 host in turn (tests/targets.py: 6x16 and 8x48 register tiles), whatever
this host is.
"""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kernels import check_both, matmul, small_ints
from targets import TARGETS, planning_for

import compiler
from passes.analysis.cost_model import register_tile

TARGET = "cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1"

_EXAMPLES = settings().max_examples
EXAMPLES = min(_EXAMPLES, 6) if _EXAMPLES <= 20 else _EXAMPLES


@pytest.fixture(autouse=True)
def avx2_target(monkeypatch):
    """Plan for a fixed AVX2-like target (6x16 register tiles) whatever the host."""
    monkeypatch.setenv("LOOM_TARGET", TARGET)


@settings(max_examples=EXAMPLES, deadline=None)
@given(m=st.integers(6, 40), n=st.integers(1, 56), k=st.integers(1, 24), kind=st.sampled_from(sorted(TARGETS)))
@example(m=12, n=16, k=8, kind="avx2")  # the second tile's prefetch reaches rows 12..17 of a 12-row C
@example(m=6, n=5, k=3, kind="avx2")  # one tile, narrower than a vector: a masked block, nothing to prefetch
@example(m=37, n=33, k=7, kind="avx2")  # peeled rows and columns
@example(m=16, n=48, k=8, kind="avx512")  # the second 8x48 tile's prefetch reaches row 16 of a 16-row C
@example(m=37, n=53, k=7, kind="avx512")  # peeled rows (32 + 5) and columns (48 + 5)
def test_prefetch_changes_no_value(m, n, k, kind):
    with planning_for(TARGETS[kind]):
        prefetch_changes_no_value(m, n, k)


def prefetch_changes_no_value(m: int, n: int, k: int) -> None:
    src = matmul((m, k), (k, n), (m, n), np.float32)
    with_prefetch = compiler.compile(src, pipeline="default")
    without = compiler.compile(src, pipeline="loom-default{skip=prefetch}")
    rng = np.random.default_rng(m * 10_000 + n * 100 + k)
    for a, b in [(rng.standard_normal((m, k)), rng.standard_normal((k, n))),
                 (small_ints(rng, (m, k), np.float32), small_ints(rng, (k, n), np.float32))]:
        a, b = a.astype(np.float32), b.astype(np.float32)
        np.testing.assert_array_equal(with_prefetch(a, b), without(a, b))
    check_both(src, [(m, k), (k, n)], k, "default")


def test_default_prefetches_the_next_tile_of_c(vector_target):
    """One prefetch per accumulator vector of the MR x NR tile: 12 (6x16, 8 lanes) on
    AVX2, 24 (8x48, 16 lanes) on znver4."""
    mr, nr = register_tile(vector_target)
    m, n = 8 * mr, 2 * nr  # whole register tiles: one main nest, nothing peeled
    blocks = mr * nr // vector_target.lanes()
    src = matmul((m, 40), (40, n), (m, n), np.float32)
    kern = compiler.compile(src, pipeline="default", remarks=True, stages=True)
    remarks = [r for r in kern.remarks if "[loom-prefetch]" in r]
    assert len(remarks) == 1, kern.remarks
    assert f"loop %j_t2: {blocks} prefetches one iteration ({nr} in %j_t2) ahead" in remarks[0]
    assert f"({blocks} for writing, locality 3), e.g. of %c[%i_t2, %j_t2]" in remarks[0]
    assert "loom-prefetch{op=matmul}" in next(r for r in kern.remarks if "[loom-default]" in r)
    assert kern.stages["loom-default"].count("loom.prefetch %c[") == blocks
    assert kern.llvm_ir.count("@llvm.prefetch.p0(") == blocks + 1  # the calls and the declaration
    check_both(src, [(m, 40), (40, n)], 40, "default")


def test_row_streaming_plan_has_no_prefetch_step(vector_target):
    """A matrix-vector product is planned as rows of B streamed once: no register tile
    of C to prefetch, and the step is not in its pass list."""
    src = matmul((1, 64), (64, 48), (1, 48), np.float32)
    kern = compiler.compile(src, pipeline="default", remarks=True)
    assert not any("[loom-prefetch]" in r for r in kern.remarks), kern.remarks
    assert "loom-prefetch" not in next(r for r in kern.remarks if "[loom-default]" in r)


@pytest.mark.parametrize("options", ["", "{distance=3 locality=0}", "{op=matmul distance=2}"])
def test_prefetch_after_the_micro_kernel_pipeline(options):
    """The pass on its own, last, after an explicit micro-kernel pass list (as in
    tests/test_peel.py: i jammed by 6, the 2 vectors of j unrolled, which fits the main
    nest and the peeled copies alike), with its options."""
    pipeline = ("loom-peel{sizes=6,16 op=matmul},loom-tile{sizes=12,32,8 op=matmul},"
                "loom-tile{sizes=6,16 op=matmul depth=3},loom-interchange{order=1,2,0,4,3,7,5,6 op=matmul},"
                "loom-pack{operand=1 level=1 panel=16 op=matmul},loom-pack{operand=0 level=2 panel=6 op=matmul},"
                "loom-vectorize{width=8 op=matmul},loom-unroll-jam{factors=1,1,1,1,1,1,6 op=matmul},"
                f"loom-unroll{{factor=2 op=matmul}},loom-hoist{{op=matmul}},loom-prefetch{options}")
    src = matmul((25, 19), (19, 35), (25, 35), np.float32)
    kern = compiler.compile(src, pipeline=pipeline, remarks=True)
    assert any("[loom-prefetch]" in r for r in kern.remarks), kern.remarks
    check_both(src, [(25, 19), (19, 35)], 19, pipeline)
