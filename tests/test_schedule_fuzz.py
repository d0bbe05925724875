"""Schedule fuzzing: random shapes and random schedules (tiling at one or two levels,
interchange, unroll-and-jam, unrolling, hoisting, in combination) for matmul, batched
matmul and conv2d; every compiled result is compared with numpy, within the
4*K*eps*max|ref| bound for random inputs and bit-exactly for small integers.

The default run is a fixed-seed sample (tests/conftest.py); the long run is
`HYPOTHESIS_PROFILE=long pytest tests/test_schedule_fuzz.py`.
"""

import numpy as np
from hypothesis import given, note
from hypothesis import strategies as st

import compiler
from kernels import assert_within_bound, conv2d_cases, conv2d_kernel, matmul, small_ints

dim = st.sampled_from([1, 2, 3, 5, 7, 8, 11, 16, 17])


@st.composite
def kernels(draw):
    """(source, input shapes, reduction length, band depth, op tag)"""
    kind = draw(st.sampled_from(["matmul", "batched", "conv2d"]))
    if kind == "matmul":
        m, k, n = draw(dim), draw(dim), draw(dim)
        return matmul((m, k), (k, n), (m, n), np.float32), [(m, k), (k, n)], k, 3, "matmul"
    if kind == "batched":
        b, m, k, n = draw(st.integers(1, 3)), draw(dim), draw(dim), draw(dim)
        return matmul((b, m, k), (b, k, n), (b, m, n), np.float32), [(b, m, k), (b, k, n)], k, 4, "matmul"
    case = draw(conv2d_cases(max_c=3, max_f=4, max_rs=3, max_stride=2, max_padding=2, max_dilation=2, max_hw=9))
    src, shapes, k = conv2d_kernel(case, np.float32)
    return src, shapes, k, 7, "conv2d"


@st.composite
def schedules(draw, depth: int, tag: str):
    """A pass list: interchange first (on the textbook band), then tiling, then the
    register-level steps."""
    sel = f" op={tag}" if draw(st.booleans()) else ""
    steps = []
    if draw(st.booleans()):
        order = draw(st.permutations(range(depth)))
        steps.append(f"loom-interchange{{order={','.join(map(str, order))}{sel}}}")
    band = depth
    if draw(st.booleans()):
        sizes = draw(st.lists(st.integers(1, 9), min_size=1, max_size=depth))
        steps.append(f"loom-tile{{sizes={','.join(map(str, sizes))}{sel}}}")
        band += len(sizes)
        if draw(st.booleans()):
            inner = draw(st.lists(st.integers(1, 4), min_size=1, max_size=depth))
            steps.append(f"loom-tile{{sizes={','.join(map(str, inner))} depth={len(sizes)}{sel}}}")
            band += len(inner)
    if draw(st.booleans()):
        factors = draw(st.lists(st.integers(1, 4), min_size=1, max_size=min(2, band - 1)))
        steps.append(f"loom-unroll-jam{{factors={','.join(map(str, factors))}{sel}}}")
    if draw(st.booleans()):
        steps.append(f"loom-hoist{{{sel.strip()}}}" if sel else "loom-hoist")
    if draw(st.booleans()):
        steps.append(f"loom-unroll{{factor={draw(st.integers(1, 5))}{sel}}}")
    return ",".join(steps) or "naive"


@given(data=st.data(), exact=st.booleans())
def test_random_schedules_match_numpy(data, exact):
    src, shapes, k, depth, tag = data.draw(kernels())
    pipeline = data.draw(schedules(depth, tag))
    note(f"pipeline: {pipeline}\n{src}")
    rng = np.random.default_rng(0)
    if exact:
        arrays = [small_ints(rng, s, np.float32, limit=3) for s in shapes]
    else:
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out = compiler.compile(src, pipeline=pipeline)(*arrays)
    ref = compiler.reference(src, *arrays)
    if exact:
        np.testing.assert_array_equal(out, ref.astype(np.float32))
    else:
        assert_within_bound(out, ref, k, np.float32)
