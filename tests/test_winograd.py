"""Winograd's convolution: the loom.winograd_* ops and their lowering, loom-winograd, the
front end's `winograd_filter` / `winograd_conv2d`, and `algorithms="fast"` in compile and
@jit. Numerics against the float64 direct convolution within the stated componentwise
bound (`numpy_reference.winograd_error_bound`), over shapes (1, primes, sizes no tile
divides), tiles, padding, pipelines and threads; exact on small integers where the
transforms are (F(2x2): its matrices hold 0, +-1 and 1/2)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler as loom
from compiler import numpy_reference as ref
from passes.analysis import cost_model
from targets import TARGETS, planning_for

sizes = st.sampled_from([1, 2, 3, 5, 7, 8, 13])
EPS = {np.float32: np.finfo(np.float32).eps / 2, np.float64: np.finfo(np.float64).eps / 2}


def conv_source(n, h, w, c, f, padding, ty="f32", epilogue=False):
    x, wt = f"tensor<{n}x{h}x{w}x{c}x{ty}>", f"tensor<3x3x{c}x{f}x{ty}>"
    y = f"tensor<{n}x{h + 2 * padding - 2}x{w + 2 * padding - 2}x{f}x{ty}>"
    body = f"""  %y = loom.conv2d %x, %w {{layout = "nhwc", padding = array<i64: {padding}, {padding}>}} : ({x}, {wt}) -> {y}
"""
    if epilogue:
        body += f"""  %s = loom.add %y, %b : ({y}, tensor<{f}x{ty}>) -> {y}
  %r = loom.relu %s : {y}
  func.return %r : {y}
}}"""
        return f"func.func @conv(%x: {x}, %w: {wt}, %b: tensor<{f}x{ty}>) -> {y} {{\n" + body
    return f"func.func @conv(%x: {x}, %w: {wt}) -> {y} {{\n" + body + f"  func.return %y : {y}\n}}"


def check_bound(got, x, w, tile, padding, dtype, exact_ref=None):
    want = ref.conv2d_nhwc(x.astype(np.float64), w.astype(np.float64), (1, 1), (padding, padding), (1, 1))
    if exact_ref is not None:
        want = exact_ref(want)
    bound = ref.winograd_error_bound(x, w, tile, (padding, padding), EPS[dtype])
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= bound).all(), f"error {err.max():.3g} over the bound at {np.unravel_index(np.argmax(err - bound), err.shape)}"


@settings(max_examples=30, deadline=None)
@given(n=st.sampled_from([1, 2]), h=sizes, w=sizes, c=st.sampled_from([1, 3, 16, 17]), f=st.sampled_from([1, 5, 16, 33]),
       padding=st.integers(0, 2), tile=st.sampled_from([2, 4]), ty=st.sampled_from(["f32", "f64"]),
       pipeline=st.sampled_from(["default", "naive"]), data=st.data())
def test_winograd_is_within_its_bound_of_the_direct_convolution(n, h, w, c, f, padding, tile, ty, pipeline, data):
    """loom-winograd{tile=m} on every 3x3 stride-1 NHWC conv2d whose window fits: tiles that
    overhang the output and the padded border (which the input's runs leave out of the sums)."""
    if h + 2 * padding < 3 or w + 2 * padding < 3:
        return
    dtype = np.float32 if ty == "f32" else np.float64
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x, wt = rng.standard_normal((n, h, w, c)).astype(dtype), rng.standard_normal((3, 3, c, f)).astype(dtype)
    src = conv_source(n, h, w, c, f, padding, ty)
    kern = loom.compile(src, pipeline=f"loom-winograd{{tile={tile}}}" + (",loom-naive" if pipeline == "naive" else ",loom-default"))
    check_bound(kern(x, wt), x, wt, tile, padding, dtype)


@pytest.mark.parametrize("tile", [2, 4])
def test_the_bound_is_tight_enough_to_catch_a_wrong_coefficient(tile, monkeypatch):
    """A transform off by one ulp-sized coefficient is not within the bound: the test above
    can fail (A^T's last entry of F(4) times 1 + 2^-10; F(2)'s 1/2 as 0.5 + 2^-10)."""
    from dialects import winograd

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 8, 8, 16)).astype(np.float32), rng.standard_normal((3, 3, 16, 8)).astype(np.float32)
    bt, g, at = winograd.MATRICES[tile]
    g = tuple(tuple(v * (1 + 2**-10) if (i, j) == (1, 0) else v for j, v in enumerate(row)) for i, row in enumerate(g))
    monkeypatch.setitem(winograd.MATRICES, tile, (bt, g, at))
    kern = loom.compile(conv_source(1, 8, 8, 16, 8, 1), pipeline=f"loom-winograd{{tile={tile}}},loom-default",
                        cache=False)
    got = kern(x, w)
    monkeypatch.undo()
    with pytest.raises(AssertionError, match="over the bound"):
        check_bound(got, x, w, tile, 1, np.float32)


def test_f2_is_exact_on_small_integers():
    """F(2x2)'s transforms multiply by 0, +-1 and 1/2 only: on small integers every value
    stays exact in f32, so the result equals the direct convolution's bit for bit."""
    rng = np.random.default_rng(1)
    x = rng.integers(-8, 9, (2, 9, 7, 16)).astype(np.float32)
    w = rng.integers(-8, 9, (3, 3, 16, 24)).astype(np.float32)
    src = conv_source(2, 9, 7, 16, 24, 1)
    got = loom.compile(src, pipeline="loom-winograd{tile=2},loom-default")(x, w)
    np.testing.assert_array_equal(got, loom.compile(src)(x, w))


def test_the_epilogue_fuses_into_the_output_transform():
    """bias + relu after the conv: applied where the output transform stores each element
    (loom-fuse-epilogue), the intermediates never written; within the bound (relu and one
    more rounding of the sum with the bias: 1-Lipschitz, one ulp of the result)."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((1, 14, 14, 32)).astype(np.float32), rng.standard_normal((3, 3, 32, 48)).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    kern = loom.compile(conv_source(1, 14, 14, 32, 48, 1, epilogue=True), algorithms="fast", remarks=True, cache=False)
    assert any("[loom-fuse-epilogue] fused add" in r and "'winograd_output' nest" in r for r in kern.remarks), kern.remarks
    got = kern(x, w, b)
    want = np.maximum(ref.conv2d_nhwc(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1), (1, 1)) + b, 0)
    bound = ref.winograd_error_bound(x, w, 4, (1, 1), EPS[np.float32]) + np.abs(want) * EPS[np.float32]
    assert (np.abs(got - want) <= bound).all()


def test_an_outlined_output_transform_takes_its_epilogue_with_it():
    """F(4x4) on 14x14: the output transform is 4 nests (the last row and column of tiles
    overhang Y), the input's 9: enough nests for loom-outline, which moves the 4 with the
    bias, residual add and relu into one function, where they fuse."""
    @loom.jit(algorithms="fast", remarks=True)
    def block(x, u, b, z):
        return loom.relu(loom.winograd_conv2d(x, u, tile=4, padding=1) + b + z)

    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((1, 14, 14, 64)).astype(np.float32), rng.standard_normal((3, 3, 64, 64)).astype(np.float32)
    b, z = rng.standard_normal(64).astype(np.float32), rng.standard_normal((1, 14, 14, 64)).astype(np.float32)
    got = block(x, loom.winograd_filter(w, 4), b, z)
    remarks = block.kernel(x, loom.winograd_filter(w, 4), b, z).remarks
    assert any("[loom-outline]" in r for r in remarks), remarks
    assert any("fused add" in r and "relu" in r and "'winograd_output' nest" in r for r in remarks), remarks
    want = np.maximum(ref.conv2d_nhwc(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1), (1, 1)) + b + z, 0)
    bound = ref.winograd_error_bound(x, w, 4, (1, 1), EPS[np.float32]) + 2 * np.abs(want) * EPS[np.float32]
    assert (np.abs(got - want) <= bound).all()


def test_exact_and_fast_are_kernels_of_their_own():
    """The cache keys differ: a fast kernel is never served for an exact compile."""
    src = conv_source(1, 28, 28, 64, 64, 1)
    fast = loom.compile(src, algorithms="fast", remarks=True)
    exact = loom.compile(src, remarks=True)
    assert fast is not exact and fast is loom.compile(src, algorithms="fast", remarks=True)
    assert any("winograd" in r for r in fast.remarks) and not any("winograd" in r for r in exact.remarks)


def test_threads_give_the_same_bits():
    """The batched matmul splits its blocks over threads, never a sum: 1, 2 and 3 threads
    give bit-identical results."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 28, 28, 64)).astype(np.float32), rng.standard_normal((3, 3, 64, 64)).astype(np.float32)
    src = conv_source(2, 28, 28, 64, 64, 1)
    results = [loom.compile(src, algorithms="fast", num_threads=t)(x, w) for t in (1, 2, 3)]
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_fast_is_opt_in():
    """algorithms="exact" (the default) never rewrites; "fast" does where the cost model
    says so, and the remark gives the estimates."""
    src = conv_source(1, 28, 28, 64, 64, 1)
    exact = loom.compile(src, remarks=True, cache=False)
    assert not any("loom-winograd" in r for r in exact.remarks)
    fast = loom.compile(src, remarks=True, algorithms="fast", cache=False)
    assert any("[loom-winograd] F(4x4, 3x3): estimated time in fmas at the peak: direct" in r for r in fast.remarks)
    tiny = loom.compile(conv_source(1, 4, 4, 2, 2, 1), remarks=True, algorithms="fast", cache=False)
    assert any("[loom-winograd] kept the direct convolution: estimated time" in r for r in tiny.remarks), tiny.remarks


def test_the_cost_model_picks_per_layer():
    """ResNet-18's 3x3 layers at batch 1 (filters transformed ahead), znver4: F(4x4) on the
    56^2 and 28^2 maps; F(2x2) at 14^2 and 7^2, where F(4x4)'s filter (4x the direct one's
    bytes) is read from memory for too few tiles; at batch 8 F(4x4) everywhere; transformed
    in the kernel at every call, 7^2 C512 stays direct. On AVX2's 6x16 register tile the
    7^2 layer's 16 rows per product are 12 + 4: the 4 read its 16 MiB of U again, and the
    layer stays direct."""
    choose = cost_model.choose_winograd
    layers = ((56, 64), (28, 128), (14, 256), (7, 512))
    with planning_for(TARGETS["avx512"]) as znver4:
        assert [choose(1, s, s, c, c, znver4, filter_given=True).tile for s, c in layers] == [4, 4, 2, 2]
        assert [choose(8, s, s, c, c, znver4, filter_given=True).tile for s, c in layers] == [4, 4, 4, 4]
        assert choose(1, 7, 7, 512, 512, znver4).tile == 0
    with planning_for(TARGETS["avx2"]) as znver3:
        assert [choose(1, s, s, c, c, znver3, filter_given=True).tile for s, c in layers] == [4, 4, 2, 0]
        assert [choose(8, s, s, c, c, znver3, filter_given=True).tile for s, c in layers] == [4, 4, 4, 4]
        assert choose(1, 56, 56, 64, 64, znver3, (2,)).tile == 2  # a tile named alone is taken


def test_the_front_end_transforms_a_constant_filter_once():
    """winograd_filter (float64, rounded once) then winograd_conv2d in @jit: the same as the
    pass's in-kernel transform up to the bound, and as the reference."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 11, 13, 8)).astype(np.float32), rng.standard_normal((3, 3, 8, 5)).astype(np.float32)
    for tile in (2, 4):
        u = loom.winograd_filter(w, tile)
        assert u.shape == ((tile + 2) ** 2, 8, 5) and u.dtype == np.float32
        np.testing.assert_allclose(u, ref.winograd_filter(w.astype(np.float64), tile), rtol=2**-23)
        f = loom.jit(lambda x, u, tile=tile: loom.winograd_conv2d(x, u, tile=tile, padding=1))
        check_bound(f(x, u), x, w, tile, 1, np.float32)
        assert f.kernel(x, u).flops == 2 * (2 * 11 * 13 * 5) * 9 * 8  # the direct convolution's: effective GFLOP/s
    g = loom.jit(lambda x, w: loom.conv2d(x, w, padding=1, layout="nhwc"), algorithms="fast")
    check_bound(g(x, w), x, w, 4, 1, np.float32)


@pytest.mark.parametrize("call, message", [
    (lambda x, u: loom.winograd_conv2d(x, u, tile=3), "tile must be 2 or 4, got 3"),
    (lambda x, u: loom.winograd_conv2d(x, u[:8], tile=2), r"takes an NHWC input and a 16xCxF transformed filter"),
    (lambda x, u: loom.winograd_conv2d(x[:, :1, :1], u, tile=2), r"the 3x3 window does not fit the padded 1x1 input"),
    (lambda x, u: loom.winograd_conv2d(x, u, tile=2), "float32 or float64, one dtype for both, got float32 and float64"),
])
def test_front_end_errors_name_the_problem(call, message):
    x, u = np.ones((1, 6, 6, 4), np.float32), np.ones((16, 4, 2), np.float64 if "float64" in message else np.float32)
    with pytest.raises(loom.TraceError, match=message):
        loom.jit(call)(x, u)


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="algorithms must be 'exact' or 'fast', got 'quick'"):
        loom.compile(conv_source(1, 4, 4, 2, 2, 1), algorithms="quick")
    with pytest.raises(ValueError, match="algorithms must be 'exact' or 'fast'"):
        loom.jit(lambda x: x, algorithms=1)
    with pytest.raises(loom.LoomError, match="loom-winograd: tile must be 0 .* or 4, got 3"):
        loom.compile(conv_source(1, 4, 4, 2, 2, 1), pipeline="loom-winograd{tile=3}")
    with pytest.raises(TypeError, match="3x3xCxF"):
        loom.winograd_filter(np.ones((5, 5, 1, 1), np.float32), 2)
