"""Schedule fuzzing: random shapes and random schedules for matmul, batched matmul and
conv2d; every compiled result is compared with numpy, within the 4*K*eps*max|ref| bound
for random inputs and bit-exactly for small integers.

Two strategies. `schedules` builds schedules that are legal by construction (interchange,
then tiling at one or two levels, then the register-level steps, with loom-hoist either
first or last, and loom-parallelize on 1, 2, 3 or 8 threads at the end): every one must
compile and compute the right result. `pass_orders` draws
any schedule pass, with random options, in any order (hoist before unroll-and-jam,
packing after unrolling, peeling after tiling, ...): each must either be refused with a
LoomError that names the pass, or compute the right result; anything else (a raw Python
exception from a pass, a wrong result) is a bug.

The default run is a fixed-seed sample (tests/conftest.py); the long run is
`HYPOTHESIS_PROFILE=long pytest tests/test_schedule_fuzz.py`.
"""

import re

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


def csv(values) -> str:
    return ",".join(map(str, values))


@st.composite
def schedules(draw, depth: int, tag: str):
    """A pass list: interchange first (on the textbook band), then tiling, then the
    register-level steps; loom-hoist first (the accumulator carried across the
    reduction loop before anything else: unroll-and-jam then copies the loop that carries
    it) or among the last steps."""
    sel = f" op={tag}" if draw(st.booleans()) else ""
    hoist = f"loom-hoist{{{sel.strip()}}}" if sel else "loom-hoist"
    if draw(st.integers(0, 3)) == 0:
        # after hoisting, the band around the statement ends above the reduction loop
        steps = [hoist]
        if draw(st.booleans()):
            # (2: the band around the statement is (i, j) for matmul, deeper for the others)
            factors = draw(st.lists(st.integers(1, 4), min_size=1, max_size=2))
            steps.append(f"loom-unroll-jam{{factors={csv(factors)}}}")
        if draw(st.booleans()):
            steps.append(f"loom-unroll{{factor={draw(st.integers(1, 5))}{sel}}}")
        return ",".join(steps)
    steps = []
    if draw(st.booleans()):
        order = draw(st.permutations(range(depth)))
        steps.append(f"loom-interchange{{order={csv(order)}{sel}}}")
    band = depth
    if draw(st.booleans()):
        sizes = draw(st.lists(st.integers(1, 9), min_size=1, max_size=depth))
        steps.append(f"loom-tile{{sizes={csv(sizes)}{sel}}}")
        band += len(sizes)
        if draw(st.booleans()):
            inner = draw(st.lists(st.integers(1, 4), min_size=1, max_size=depth))
            steps.append(f"loom-tile{{sizes={csv(inner)} depth={len(sizes)}{sel}}}")
            band += len(inner)
    if draw(st.booleans()):
        factors = draw(st.lists(st.integers(1, 4), min_size=1, max_size=min(2, band - 1)))
        steps.append(f"loom-unroll-jam{{factors={csv(factors)}{sel}}}")
    if draw(st.booleans()):
        steps.append(hoist)
    if draw(st.booleans()):
        steps.append(f"loom-unroll{{factor={draw(st.integers(1, 5))}{sel}}}")
    if draw(st.booleans()):
        steps.append(f"loom-prefetch{{distance={draw(st.integers(1, 3))}{sel}}}")
    if draw(st.booleans()):  # last: loops that stay loops for the passes above
        threads = draw(st.sampled_from([1, 2, 3, 8]))
        steps.append(f"loom-parallelize{{num-threads={threads} min-work={draw(st.sampled_from([0, 500]))}{sel}}}")
    return ",".join(steps) or "naive"


def check(src, shapes, k, pipeline, exact):
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


@given(data=st.data(), exact=st.booleans())
def test_random_schedules_match_numpy(data, exact):
    src, shapes, k, depth, tag = data.draw(kernels())
    pipeline = data.draw(schedules(depth, tag))
    note(f"pipeline: {pipeline}\n{src}")
    check(src, shapes, k, pipeline, exact)


@st.composite
def any_step(draw, depth: int, tag: str):
    """One schedule pass with random options (some of which the pass refuses)."""
    sel = f" op={tag}" if draw(st.booleans()) else ""
    small = st.integers(1, 6)
    kind = draw(st.sampled_from(
        ["interchange", "tile", "unroll-jam", "unroll", "hoist", "pack", "peel", "prefetch", "vectorize", "parallelize"]
    ))
    if kind == "parallelize":
        depth_option = draw(st.sampled_from(["", " depth=0", " depth=1", " depth=2"]))
        return f"loom-parallelize{{num-threads={draw(st.sampled_from([1, 2, 3, 8]))}{depth_option}{sel}}}"
    if kind == "interchange":
        order = draw(st.permutations(range(draw(st.integers(2, depth)))))
        return f"loom-interchange{{order={csv(order)}{sel}}}"
    if kind == "tile":
        sizes = draw(st.lists(st.integers(1, 9), min_size=1, max_size=depth))
        return f"loom-tile{{sizes={csv(sizes)} depth={draw(st.integers(0, 3))}{sel}}}"
    if kind == "unroll-jam":
        return f"loom-unroll-jam{{factors={csv(draw(st.lists(small, min_size=1, max_size=depth)))}{sel}}}"
    if kind == "unroll":
        return f"loom-unroll{{factor={draw(small)}{sel}}}"
    if kind == "hoist":
        return f"loom-hoist{{{sel.strip()}}}" if sel else "loom-hoist"
    if kind == "pack":
        panel = draw(st.sampled_from(["", " panel=2", " panel=4", " panel=16"]))
        return f"loom-pack{{operand={draw(st.integers(0, 1))} level={draw(st.integers(0, depth))}{panel}{sel}}}"
    if kind == "peel":
        return f"loom-peel{{sizes={csv(draw(st.lists(small, min_size=1, max_size=depth)))}{sel}}}"
    if kind == "prefetch":
        return f"loom-prefetch{{distance={draw(st.integers(1, 3))}{sel}}}"
    return f"loom-vectorize{{width={draw(st.sampled_from([0, 4, 8]))}{sel}}}"


#: a refusal names the pass that refused (`loom-tile: ...`)
REFUSAL = re.compile(r"error: loom-[a-z-]+: ")


@given(data=st.data(), exact=st.booleans())
def test_any_pass_order_refused_or_right(data, exact):
    src, shapes, k, depth, tag = data.draw(kernels())
    steps = data.draw(st.lists(any_step(depth, tag), min_size=1, max_size=4))
    pipeline = ",".join(steps)
    note(f"pipeline: {pipeline}\n{src}")
    try:
        check(src, shapes, k, pipeline, exact)
    except compiler.LoomError as e:
        assert REFUSAL.search(str(e)), f"a refusal that names no pass: {e}"
