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
from compiler.runner import error_bound
from dialects.loom import conv2d_output_hw
from mlirgen import conv2d, matmul

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
    n, c, f = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    st_, pad, dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2))), (draw(st.integers(0, 2)), draw(st.integers(0, 2))), (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, dil[0] * (r - 1) + 1 - 2 * pad[0]), 9))
    w = draw(st.integers(max(1, dil[1] * (s - 1) + 1 - 2 * pad[1]), 9))
    ho, wo = conv2d_output_hw(h, w, r, s, st_, pad, dil)
    src = conv2d((n, c, h, w), (f, c, r, s), (n, f, ho, wo), st_, pad, dil, np.float32)
    return src, [(n, c, h, w), (f, c, r, s)], c * r * s, 7, "conv2d"


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
        arrays = [rng.integers(-3, 4, size=s).astype(np.float32) for s in shapes]
    else:
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out = compiler.compile(src, pipeline=pipeline)(*arrays)
    ref = compiler.reference(src, *arrays)
    if exact:
        np.testing.assert_array_equal(out, ref.astype(np.float32))
    else:
        bound = error_bound(k, np.dtype(np.float32), float(np.max(np.abs(ref))))
        assert float(np.max(np.abs(out - ref))) <= bound
