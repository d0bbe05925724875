"""loom-prefetch end to end: the default pipeline prefetches the next register tile's
block of C; a prefetch changes no value, so the results are the same bits as without it
(`loom-default{skip=prefetch}`), on shapes whose last tile prefetches rows past the end
of C, and within the bound of numpy's. Then the pass on its own after the register
micro-kernel pipeline, and the remarks.
"""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kernels import check_both, matmul, small_ints

import compiler

TARGET = "cpu=test,l1=32768,l2=524288,l3=33554432,vector_bits=256,vector_registers=16,fma=1"

_EXAMPLES = settings().max_examples
EXAMPLES = min(_EXAMPLES, 6) if _EXAMPLES <= 20 else _EXAMPLES


@pytest.fixture(autouse=True)
def avx2_target(monkeypatch):
    """Plan for a fixed AVX2-like target (6x16 register tiles) whatever the host."""
    monkeypatch.setenv("LOOM_TARGET", TARGET)


@settings(max_examples=EXAMPLES, deadline=None)
@given(m=st.integers(6, 40), n=st.integers(1, 40), k=st.integers(1, 24))
@example(m=12, n=16, k=8)  # the second tile's prefetch reaches rows 12..17 of a 12-row C
@example(m=6, n=5, k=3)  # one tile, narrower than a vector: a masked block, nothing to prefetch
@example(m=37, n=33, k=7)  # peeled rows and columns
def test_prefetch_changes_no_value(m, n, k):
    src = matmul((m, k), (k, n), (m, n), np.float32)
    with_prefetch = compiler.compile(src, pipeline="default")
    without = compiler.compile(src, pipeline="loom-default{skip=prefetch}")
    rng = np.random.default_rng(m * 10_000 + n * 100 + k)
    for a, b in [(rng.standard_normal((m, k)), rng.standard_normal((k, n))),
                 (small_ints(rng, (m, k), np.float32), small_ints(rng, (k, n), np.float32))]:
        a, b = a.astype(np.float32), b.astype(np.float32)
        np.testing.assert_array_equal(with_prefetch(a, b), without(a, b))
    check_both(src, [(m, k), (k, n)], k, "default")


def test_default_prefetches_the_next_tile_of_c():
    src = matmul((48, 40), (40, 32), (48, 32), np.float32)
    kern = compiler.compile(src, pipeline="default", remarks=True, stages=True)
    remarks = [r for r in kern.remarks if "[loom-prefetch]" in r]
    assert len(remarks) == 1, kern.remarks
    assert "loop %j_t2: 12 prefetches one iteration (16 in %j_t2) ahead" in remarks[0]
    assert "(12 for writing, locality 3), e.g. of %c[%i_t2, %j_t2]" in remarks[0]
    assert "loom-prefetch{op=matmul}" in next(r for r in kern.remarks if "[loom-default]" in r)
    assert kern.stages["loom-default"].count("loom.prefetch %c[") == 12
    assert kern.llvm_ir.count("@llvm.prefetch.p0(") == 12 + 1  # the calls and the declaration
    check_both(src, [(48, 40), (40, 32)], 40, "default")


def test_row_streaming_plan_has_no_prefetch_step():
    """A matrix-vector product is planned as rows of B streamed once: no register tile
    of C to prefetch, and the step is not in its pass list."""
    src = matmul((1, 64), (64, 48), (1, 48), np.float32)
    kern = compiler.compile(src, pipeline="default", remarks=True)
    assert not any("[loom-prefetch]" in r for r in kern.remarks), kern.remarks
    assert "loom-prefetch" not in next(r for r in kern.remarks if "[loom-default]" in r)


@pytest.mark.parametrize("options", ["", "{distance=3 locality=0}", "{op=matmul distance=2}"])
def test_prefetch_after_the_micro_kernel_pipeline(options):
    """The pass on its own, last, after the explicit micro-kernel pass list (the one the
    default pipeline's remark prints), with its options."""
    pipeline = ("loom-peel{sizes=6,16 op=matmul},loom-tile{sizes=12,32,8 op=matmul},"
                "loom-tile{sizes=6,16 op=matmul depth=3},loom-interchange{order=1,2,0,4,3,7,5,6 op=matmul},"
                "loom-pack{operand=1 level=1 panel=16 op=matmul},loom-pack{operand=0 level=2 panel=6 op=matmul},"
                "loom-vectorize{width=8 op=matmul},loom-unroll-jam{factors=1,1,1,1,1,1,6,2 op=matmul},"
                f"loom-hoist{{op=matmul}},loom-prefetch{options}")
    src = matmul((25, 19), (19, 35), (25, 35), np.float32)
    kern = compiler.compile(src, pipeline=pipeline, remarks=True)
    assert any("[loom-prefetch]" in r for r in kern.remarks), kern.remarks
    check_both(src, [(25, 19), (19, 35)], 19, pipeline)
