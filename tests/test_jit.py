"""@compiler.jit: numpy-like Python traced into the loom dialect, compiled once per signature."""

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler as loom

EPS = {np.float32: np.finfo(np.float32).eps, np.float64: np.finfo(np.float64).eps}


def close(got, want, k: int, dtype) -> None:
    """Within about 4·K·eps·max|ref| of the float64 reference."""
    bound = 4 * max(k, 1) * EPS[dtype] * max(np.abs(want).max(initial=0), 1)
    assert got.dtype == dtype and got.shape == want.shape
    assert np.abs(got.astype(np.float64) - want).max(initial=0) <= bound


def line_of(fn, text: str) -> int:
    """The file line of `text` inside `fn`'s source."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@loom.jit
def mlp(x, w, b):
    return loom.relu(x @ w + b)


def test_readme_example_numpy_in_numpy_out():
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(64, 96), (96, 48), (48,)])
    y = mlp(x, w, b)
    close(y, np.maximum(x.astype(np.float64) @ w + b, 0), 96, np.float32)
    assert isinstance(y, np.ndarray)
    assert "loom.matmul" in mlp.lower(x, w, b) and "loom.relu" in mlp.lower(x, w, b)


def test_compiles_once_per_signature():
    @loom.jit
    def f(a, b):
        return a * b + a

    a = np.ones((3, 4), np.float32)
    f(a, a)
    f(a + 1, a)
    assert len(f._specializations) == 1
    f(np.ones((4, 3), np.float32), np.ones((4, 3), np.float32))  # a new shape
    f(a.astype(np.float64), a.astype(np.float64))  # a new dtype
    f(np.asfortranarray(np.ones((3, 4), np.float32)), a)  # a new stride pattern
    assert len(f._specializations) == 4


def test_default_pipeline_and_options():
    @loom.jit(pipeline="naive", num_threads=1, remarks=True)
    def f(a, b):
        return a @ b

    a = np.ones((8, 8), np.float32)
    k = f.kernel(a, a)
    assert k.pipeline == "naive" and k.num_threads == 1
    assert mlp.kernel(a, a, np.ones(8, np.float32)).pipeline == "default"


def test_python_numbers_are_inputs_a_new_float_does_not_recompile():
    @loom.jit
    def f(x, s):
        return (x - 1.5) * s + -x - s

    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    for s in (2.0, -0.25, 3.0):
        np.testing.assert_array_equal(f(x, s), (x - 1.5) * s + -x - s)
    assert len(f._specializations) == 1
    assert "%s: tensor<1xf64>" in f.lower(x, 2.0)


def test_integer_arguments_are_constants_of_the_signature():
    @loom.jit
    def f(x, w, stride):
        return loom.conv2d(x, w, stride=stride, padding=1)

    x, w = np.ones((1, 2, 9, 9), np.float32), np.ones((3, 2, 3, 3), np.float32)
    assert f(x, w, 1).shape == (1, 3, 9, 9) and f(x, w, 2).shape == (1, 3, 5, 5)
    assert len(f._specializations) == 2


def test_several_results_are_a_tuple():
    @loom.jit
    def f(a, b):
        c = a @ b
        return c, loom.relu(c), a

    a = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
    b = np.ones((4, 2), np.float32)
    c, r, a2 = f(a, b)
    np.testing.assert_array_equal(c, a @ b)
    np.testing.assert_array_equal(r, np.maximum(a @ b, 0))
    np.testing.assert_array_equal(a2, a)  # an argument returned is a fresh copy
    assert not np.shares_memory(a2, a)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_conv2d_bias_relu_exact_on_small_integers(layout):
    @loom.jit
    def f(x, w, b):
        return loom.relu(loom.conv2d(x, w, stride=2, padding=(1, 2), dilation=1, layout=layout) + b)

    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, (2, 3, 11, 10)).astype(np.float32)
    w = rng.integers(-3, 4, (5, 3, 3, 3)).astype(np.float32)
    b = rng.integers(-3, 4, (5, 1, 1)).astype(np.float32)
    ref = loom.reference(
        "func.func @f(%x: tensor<2x3x11x10xf32>, %w: tensor<5x3x3x3xf32>) -> tensor<2x5x6x6xf32> {\n"
        "  %y = loom.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 2>} : "
        "(tensor<2x3x11x10xf32>, tensor<5x3x3x3xf32>) -> tensor<2x5x6x6xf32>\n"
        "  func.return %y : tensor<2x5x6x6xf32>\n}", x, w)
    want = np.maximum(ref + b, 0)
    if layout == "nhwc":
        x, w, b = x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy(), b.reshape(5).copy()
        want = want.transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(f(x, w, b), want)


@settings(max_examples=12, deadline=None)
@given(m=st.sampled_from([1, 2, 7, 13, 64]), k=st.sampled_from([1, 3, 17, 40]), n=st.sampled_from([1, 5, 16, 31]),
       dtype=st.sampled_from([np.float32, np.float64]), batch=st.sampled_from([0, 2]), seed=st.integers(0, 99))
def test_mlp_random_shapes(m, k, n, dtype, batch, seed):
    rng = np.random.default_rng(seed)
    lead = (batch,) if batch else ()
    x = rng.standard_normal((*lead, m, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)  # 3-D @ 2-D folds the batch into the rows
    b = rng.standard_normal(n).astype(dtype)
    close(mlp(x, w, b), np.maximum(x.astype(np.float64) @ w + b, 0), k, dtype)


def test_views_inside_the_trace_are_exact():
    @loom.jit
    def f(a, b):
        return loom.relu(a.T[::-1, 1::2] * loom.broadcast_to(b, (5, 3)) + a[1, ::2].reshape(1, 3)[None][0, ..., :])

    a = np.arange(-20, 10, dtype=np.float64).reshape(6, 5)
    b = np.arange(3, dtype=np.float64)
    np.testing.assert_array_equal(f(a, b), np.maximum(a.T[::-1, 1::2] * np.broadcast_to(b, (5, 3))
                                                      + a[1, ::2].reshape(1, 3)[None][0, ..., :], 0))


def test_view_arguments_are_not_copied(monkeypatch):
    """A transposed, sliced, broadcast or Fortran-ordered argument is passed with its
    strides: nothing copies it (numpy's copy functions fail if called)."""
    @loom.jit
    def f(a, b):
        return a @ b

    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    views = [base.T[::2], np.asfortranarray(base[:4, :6]), np.broadcast_to(base[0, :6], (4, 6))]
    b = np.ones((6, 3), np.float32)
    for v in views:
        f.kernel(v, b)  # compiled before numpy's copies are broken
    for name in ("ascontiguousarray", "copy", "array"):
        monkeypatch.setattr(np, name, lambda *a, **k: pytest.fail("a view was copied"))
    for v in views:
        assert not v.flags.c_contiguous
        got = f(v, b)
        assert np.array_equal(got, np.matmul(v, b))


# ---- errors: what was expected, what was received, at the user's line ------------------


def test_shape_error_points_at_the_users_line():
    @loom.jit
    def f(a, b):
        c = a + b
        return c @ b

    a = np.ones((3, 4), np.float32)
    with pytest.raises(loom.TraceError, match=r"a has 4 columns but b has 3 rows \(shapes \(3, 4\) @ \(3, 4\)\)") as e:
        f(a, a)
    assert str(e.value).startswith(f"{__file__}:{line_of(f.fn, 'return c @ b')}:")


def test_unsupported_operations_say_what_is_supported():
    a = np.ones((2, 2), np.float32)
    for body in (lambda x: x / 2, lambda x: x if x else x, lambda x: np.exp(x), lambda x: np.asarray(x)):
        with pytest.raises(TypeError, match=r"inside @loom.jit"):
            loom.jit(body)(a)


def test_dtype_errors():
    a32, a64 = np.ones((2, 2), np.float32), np.ones((2, 2), np.float64)
    with pytest.raises(TypeError, match=r"a \+ b of float32 and float64 arrays: both operands must have one dtype"):
        loom.jit(lambda a, b: a + b)(a32, a64)
    with pytest.raises(TypeError, match=r"argument #0 has dtype int64: Loom kernels take float32 and float64"):
        loom.jit(lambda a: loom.relu(a))(np.ones((2, 2), np.int64))
    with pytest.raises(TypeError, match=r"argument #1 is a list"):
        loom.jit(lambda a, b: a)(a32, [1.0])


def test_captured_arrays_and_float_arithmetic_are_refused():
    w = np.ones((2, 2), np.float32)
    with pytest.raises(TypeError, match=r"captured from outside the function"):
        loom.jit(lambda x: x @ w)(w)
    with pytest.raises(TypeError, match=r"the float argument s is a kernel input"):
        loom.jit(lambda x, s: x * (s * 2))(w, 1.0)


def test_verifier_errors_of_the_traced_module_point_at_the_user():
    @loom.jit
    def f(x, w):
        return loom.conv2d(x, w, padding=-1)

    with pytest.raises(loom.TraceError, match=r"padding must be an integer or a pair of integers >= 0"):
        f(np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 3, 3), np.float32))


def test_operations_outside_a_trace_say_so():
    with pytest.raises(TypeError, match=r"decorate the function with @loom.jit"):
        loom.relu(np.ones(3, np.float32))
