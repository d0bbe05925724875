"""@compiler.jit: numpy-like Python traced into the loom dialect, compiled once per signature."""

import _thread
import gc
import inspect
import re
import sys
import threading
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler as loom
from compiler import driver

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
    assert any("[loom-default]" in r for r in loom.jit(lambda a, b: a @ b, remarks=True).kernel(a, a).remarks)


def test_python_numbers_are_inputs_a_new_float_does_not_recompile():
    @loom.jit
    def f(x, s):
        return (x - 1.5) * s + -x - s

    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    for s in (2.0, -0.25, 3.0):
        np.testing.assert_array_equal(f(x, s), (x - 1.5) * s + -x - s)
    assert len(f._specializations) == 1
    assert "%s: tensor<1xf64>" in f.lower(x, 2.0)


def test_a_float_argument_on_either_side_of_an_array():
    """`s * x`, `s + x`, `s - x` are array arithmetic as `x * s` is (once refused: the
    float argument's own operators took them for arithmetic between numbers)."""
    @loom.jit
    def f(x, s):
        return s * x + (s - x) + (s + x)

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(f(x, 1.5), 1.5 * x + (1.5 - x) + (1.5 + x))
    for s in (np.float32(2.5), np.float64(-0.5)):  # numpy's float scalars are float arguments too
        np.testing.assert_array_equal(f(x, s), s * x + (s - x) + (s + x))
    assert len(f._specializations) == 1  # one kernel: the value is its input, not a constant
    g = loom.jit(lambda x, s: x * s)  # traced first with a numpy float
    np.testing.assert_array_equal(g(x, np.float32(0.5)), x * 0.5)
    np.testing.assert_array_equal(g(x, 3.0), x * 3.0)
    assert len(g._specializations) == 1
    with pytest.raises(TypeError, match=r"the float argument s is a kernel input"):
        loom.jit(lambda x, s: x * (s - 1.0))(x, 1.5)


def test_a_0d_array_and_a_number_stay_0d():
    """numpy's `x[0, 0] * 2.0` is 0-d: the number's kernel input, of shape (1,), is viewed
    as 0-d beside it (it once broadcast the result to shape (1,))."""
    @loom.jit
    def f(x, s):
        return x[0, 1] * 2.0, 1.0 - x[1, 2], x[-1, 0] * s, x[0, 0] + x

    x = np.arange(6.0).reshape(2, 3)
    for got, want in zip(f(x, 3.0), (x[0, 1] * 2.0, 1.0 - x[1, 2], x[-1, 0] * 3.0, x[0, 0] + x)):
        assert got.shape == np.shape(want)
        np.testing.assert_array_equal(got, want)


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


def test_an_ellipsis_stands_for_the_dimensions_it_replaces():
    """`...` expands where it stands, as in numpy: `x[..., 1]` is a column, `x[1, ...]` a row."""
    @loom.jit
    def f(x):
        return x[..., 1], x[1, ...], x[..., ::-1], x[None, ..., 2], x[...]

    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    for got, want in zip(f(x), (x[..., 1], x[1, ...], x[..., ::-1], x[None, ..., 2], x[...])):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_the_same_array_returned_twice_gives_two_arrays():
    @loom.jit
    def f(x):
        y = x * 2
        return y, y

    a, b = f(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(a, [0, 2, 4, 6])
    np.testing.assert_array_equal(b, [0, 2, 4, 6])
    a[0] = 100  # two outputs, not one buffer returned twice
    assert b[0] == 0


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
    with pytest.raises(TypeError, match=r"argument #0 has dtype int64: Loom kernels take float32, float64, bfloat16, "
                                        r"int8, uint8 and int32 arrays"):
        loom.jit(lambda a: loom.relu(a))(np.ones((2, 2), np.int64))
    with pytest.raises(TypeError, match=r"argument #1 is a list"):
        loom.jit(lambda a, b: a)(a32, [1.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clamp_is_numpys_clip_and_refuses_bad_bounds(dtype):
    """loom.clamp(x, min, max) gives np.clip's values bit for bit, a NaN kept and infinities
    clamped; an int32 array, a bound that is not a finite number, and min > max are refused
    at the user's line."""
    x = np.array([[-np.inf, -3.0, -0.5, 0.0], [0.25, 6.0, 7.5, np.nan]], dtype)
    got = loom.jit(lambda a: loom.clamp(a * 2, -1, 6))(x)
    np.testing.assert_array_equal(got, np.clip(x * 2, -1, 6))
    with pytest.raises(TypeError, match=r"loom.clamp of an int32 array: Loom clamps float32 and float64 arrays"):
        loom.jit(lambda a: loom.clamp(a, 0, 6))(np.ones((2, 2), np.int32))
    for low, shown in ((float("nan"), "nan"), (True, "True"), ("0", "'0'")):
        with pytest.raises(TypeError, match=rf"loom.clamp's min must be a finite Python number, got {shown}"):
            loom.jit(lambda a, low=low: loom.clamp(a, low, 6))(x)
    with pytest.raises(loom.TraceError, match=r"loom.clamp's min \(6.0\) is larger than its max \(0.0\)"):
        loom.jit(lambda a: loom.clamp(a, 6, 0))(x)


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


def test_an_index_past_the_end_is_refused_by_the_tracer():
    """The tracer's own message, at the user's line (not the slice verifier's, later)."""
    @loom.jit
    def f(x):
        return x[3] * 2.0

    with pytest.raises(loom.TraceError, match=r"index 3 is out of bounds for dimension 0 of size 3 \(shape \(3,\)\)") \
            as e:
        f(np.ones(3))
    assert str(e.value).startswith(f"{__file__}:{line_of(f.fn, 'return x[3]')}:")
    for index, message in [((slice(None), 4), "index 4 is out of bounds for dimension 1 of size 4"),
                           (-4, "index -4 is out of bounds for dimension 0 of size 3"),
                           ((2, -5), "index -5 is out of bounds for dimension 1 of size 4")]:
        with pytest.raises(loom.TraceError, match=message):
            loom.jit(lambda x, i=index: x[i] + 0.0).lower(np.ones((3, 4)))
    np.testing.assert_array_equal(loom.jit(lambda x: x[2, -4] * 2.0)(np.arange(12.0).reshape(3, 4)), 16.0)


@pytest.mark.parametrize("index", ["x[-9::-1]", "x[9:]", "x[1:, -9::-2]", "x[2:1, ::-1]"])
def test_slices_that_select_nothing_are_numpys_empty_arrays(index):
    """An empty slice starts at 0 whatever its bounds (x[-9::-1] of a size-4 dimension is
    range(-1, -1, -1), empty; its start -1 is no offset), and gives numpy's shape."""
    x = np.arange(12.0).reshape(3, 4)
    got = loom.jit(eval(f"lambda x: {index} * 2.0"))(x)
    want = eval(index, {"x": x}) * 2.0
    assert got.shape == want.shape and want.size == 0


def test_an_argument_with_negative_strides_is_refused():
    """A reversed view is not passed (Loom's layouts have non-negative strides): a
    ValueError that says to pass a copy; inside the function, x[::-1] is a view."""
    f = loom.jit(lambda x: x * 2.0)
    a = np.arange(6.0).reshape(2, 3)
    for view in (a[::-1], a[:, ::-1], a.T[::-1]):
        with pytest.raises(ValueError, match=r"argument #0 has strides \(-?\d+, -?\d+\): Loom passes views with "
                                             r"non-negative strides .* np\.ascontiguousarray"):
            f(view)
    np.testing.assert_array_equal(f(np.ascontiguousarray(a[::-1])), a[::-1] * 2)
    field = np.zeros(3, dtype=[("a", np.float64), ("b", np.float32)])["a"]  # strides of 12 bytes: 1.5 elements
    with pytest.raises(ValueError, match=r"argument #0 has strides \(12,\): Loom passes views with non-negative "
                                         r"strides that are multiples of the element size"):
        f(field)


def test_a_jit_function_called_in_another_trace_says_to_call_its_fn():
    """Called on the Traced arrays of another trace, first or after a call of its own
    (then its last kernel's call refuses the Traced and looks it up): the dedicated message
    at the caller's line, not "argument #0 is a Traced"."""
    @loom.jit(pipeline="naive")
    def double(x):
        return x + x

    @loom.jit
    def outer(x):
        return double(x) * 3.0

    a = np.ones((2, 2), np.float32)
    for _ in range(2):
        with pytest.raises(loom.TraceError, match=r"double\(\) is a @loom.jit function called while another is "
                                                  r"traced .*: call the undecorated function \(its \.fn\)") as e:
            outer(a)
        assert str(e.value).startswith(f"{__file__}:{line_of(outer.fn, 'return double(x)')}:")
        np.testing.assert_array_equal(double(a), 2 * a)  # the second time, outer calls a known signature
    np.testing.assert_array_equal(loom.jit(lambda x: double.fn(x) * 3.0)(a), 6 * a)


def test_a_jit_function_calling_itself_is_refused_not_a_deadlock():
    """Traced under its own lock, a function that calls itself once waited for the lock
    forever: the same message, in a thread that must finish."""
    @loom.jit
    def power(x, n):
        return x if n == 0 else power(x, n - 1) * 2.0

    outcome = []

    def call():
        try:
            power(np.ones(3), 2)
        except loom.TraceError as e:
            outcome.append(e)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "power() deadlocked on its own lock"
    assert "power() is a @loom.jit function called while another is traced (or while it is itself)" in str(outcome[0])
    assert str(outcome[0]).startswith(f"{__file__}:{line_of(power.fn, 'power(x, n - 1)')}:")


@pytest.mark.parametrize("expression", ["x + w", "w + x", "x - w", "w - x", "x * w", "w * x", "loom.add(w, 1.0)"])
def test_a_captured_array_in_elementwise_arithmetic_says_pass_it(expression):
    w = np.ones((2, 2), np.float32)
    f = loom.jit(eval(f"lambda x: {expression}", {"w": w, "loom": loom}))
    with pytest.raises(loom.TraceError, match=r"a numpy array captured from outside the function \(shape \(2, 2\)\) "
                                              r"cannot be used inside @loom.jit: pass it as an argument"):
        f(w)


def test_subtraction_in_both_orders():
    @loom.jit
    def f(x, y, s):
        return (x - y, 1.5 - x, x - s, np.subtract(y, x), x - 2)

    x, y = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    for got, want in zip(f(x, y, 0.5), (x - y, 1.5 - x, x - 0.5, y - x, x - 2)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(loom.TraceError, match=r"a - b: shapes \(2, 3\) and \(2,\) do not broadcast"):
        f(x, np.ones(2), 0.5)


def test_keyword_arguments_are_bound_to_their_positions():
    """`f(x, w=w)` is `f(x, w)`: one signature, one kernel; a parameter skipped before a
    given one takes its default; what cannot go by position is refused with a reason."""
    @loom.jit(pipeline="naive")
    def f(x, w, b=None, scale=1.0):
        y = x @ w
        return (y if b is None else y + b) * scale

    x, w, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4), np.arange(4.0)
    np.testing.assert_array_equal(f(x, w=w), x @ w)
    np.testing.assert_array_equal(f(w=w, x=x), x @ w)
    np.testing.assert_array_equal(f(x, w), x @ w)
    assert len(f._specializations) == 1
    np.testing.assert_array_equal(f(x, w, scale=2.0), (x @ w) * 2)  # b: its default, None
    np.testing.assert_array_equal(f(x, w, b=b), x @ w + b)
    assert f.lower(x, w=w) == f.lower(x, w) and f.kernel(x, w=w) is f.kernel(x, w)
    assert f.compile_request(x, w=w) == f.compile_request(x, w)
    assert f.specialize(x, w, scale=3.0) is f.specialize(x, w, None, 2.0)
    with pytest.raises(TypeError, match=r"^f\(\): got an unexpected keyword argument 'c'$"):
        f(x, w, c=1)
    with pytest.raises(TypeError, match=r"^f\(\): multiple values for argument 'w'$"):
        f(x, w, w=w)
    with pytest.raises(TypeError, match=r"^f\(\): missing a required argument: 'w'$"):
        f(x)

    @loom.jit
    def g(x, *, k=2.0):
        return x * k

    np.testing.assert_array_equal(g(x), 2 * x)  # a keyword-only default is the function's own
    for call in (lambda: g(x, k=3.0), lambda: loom.jit(lambda x, **kw: x)(x, k=3.0)):
        with pytest.raises(TypeError, match=r"got k for a keyword-only parameter or \*\*kwargs: a @loom.jit function "
                                            r"passes its arguments on by position"):
            call()


def test_positional_only_parameters_keep_their_place_among_keywords():
    """`f(x, w=w)` with `def f(x, /, w)`: x, positional-only, stays the first argument (a
    binding that counted only the positional-or-keyword parameters dropped it)."""
    @loom.jit(pipeline="naive")
    def f(x, /, w, b=None):
        return x @ w if b is None else x @ w + b

    x, w, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4), np.arange(4.0)
    np.testing.assert_array_equal(f(x, w=w), x @ w)
    np.testing.assert_array_equal(f(x, w, b=b), x @ w + b)
    assert f.specialize(x, w=w) is f.specialize(x, w)


def test_a_parameter_named_like_a_numbers_input_is_renamed():
    """The body's numbers are the inputs %scalar0, %scalar1, ...: a parameter of that name
    is called arg<i> in the kernel, never a second %scalar0."""
    @loom.jit(pipeline="naive")
    def f(scalar0, scalar1, s):
        return scalar0 * 2.0 + scalar1 * s + 3.0

    x, y = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    np.testing.assert_array_equal(f(x, y, 0.5), x * 2.0 + y * 0.5 + 3.0)
    assert "%arg0: tensor<2x3xf64>" in f.lower(x, y, 0.5)


@pytest.mark.parametrize("method", ["sum", "clip", "max", "mean", "copy"])
def test_an_array_method_loom_lacks_is_a_located_refusal(method):
    @loom.jit
    def f(x):
        return getattr(x, method)()

    with pytest.raises(loom.TraceError, match=rf"\.{method} is not supported on a traced array inside @loom.jit "
                                              r"\(supported: @, \+, -, \*, .*\.shape, \.dtype") as e:
        f(np.ones(3))
    assert isinstance(e.value, AttributeError)
    assert str(e.value).startswith(f"{__file__}:{line_of(f.fn, 'return getattr')}:")


def test_a_traced_array_still_answers_attribute_probes():
    """hasattr and getattr with a default say "no" (the refusal is an AttributeError);
    names with an underscore stay plain AttributeErrors: numpy probes `__array_*__`."""
    seen = {}

    @loom.jit
    def f(x):
        seen.update(sum=hasattr(x, "sum"), default=getattr(x, "mean", None), shape=x.shape, ndim=x.ndim)
        with pytest.raises(AttributeError) as e:
            x.__array_interface__  # noqa: B018
        seen["plain"] = type(e.value) is AttributeError
        return x * 1.0

    f(np.ones((2, 3)))
    assert seen == {"sum": False, "default": None, "shape": (2, 3), "ndim": 2, "plain": True}


@pytest.mark.parametrize("index, shown", [
    ("np.array([0, 1])", r"array\(\[0, 1\]\)"), ("[0, 1]", r"\[0, 1\]"), ("True", "True"),
    ("(0, np.array([1]))", r"array\(\[1\]\)"), ("(..., [0])", r"\[0\]"), ("x > 0", ""),
])
def test_advanced_indexing_is_a_located_refusal(index, shown):
    """Arrays, lists, booleans: refused before numpy's `==` on the index tuple could say
    "the truth value of an array is ambiguous"."""
    f = loom.jit(eval(f"lambda x: x[{index}]", {"np": np}))
    with pytest.raises(loom.TraceError) as e:
        f(np.ones((2, 3)))
    assert ("a comparison" in str(e.value)) if index == "x > 0" else \
        re.search(rf"index {shown}: inside @loom.jit an index is made of slices, integers, \.\.\. and None "
                  r"\(no arrays, lists or booleans", str(e.value))


def test_a_bad_slice_is_a_located_refusal():
    for index, message in [(slice(0.5, None), r"index slice\(0.5, None, None\): slice indices must be integers"),
                           (slice(None, None, 0), r"index slice\(None, None, 0\): slice step cannot be zero")]:
        with pytest.raises(loom.TraceError, match=message):
            loom.jit(lambda x, i=index: x[i] * 1.0).lower(np.ones(3))


@pytest.fixture
def kernel_budget():
    """The process's kernel budget, emptied and set to 4 for the test."""
    size = driver.kernel_cache.size
    driver.kernel_cache.clear()
    loom.set_cache_size(4)
    yield driver.kernel_cache
    loom.set_cache_size(size)


def test_specializations_share_the_process_kernel_budget(kernel_budget):
    """One function called with 12 shapes keeps the 4 used last, not 12 (each once held
    its kernel and machine code forever: +0.8 MiB a shape); a dropped signature is traced
    again, and right."""
    traces = []

    @loom.jit(pipeline="naive")
    def f(x):
        traces.append(x.shape)
        return x + x

    kernels = []
    for n in range(1, 13):
        x = np.arange(n, dtype=np.float64)
        np.testing.assert_array_equal(f(x), 2 * x)
        kernels.append(weakref.ref(f.kernel(x)))
    gc.collect()
    assert sum(k() is not None for k in kernels) == 4 and len(kernel_budget) == 4
    assert len(f._specializations) == 4  # a specialization and compile()'s entry of its kernel count once
    np.testing.assert_array_equal(f(np.arange(1.0)), [0.0])
    assert len(traces) == 13
    f(np.arange(12.0))
    assert len(traces) == 13 and len(f._specializations) == 4


def test_without_a_budget_the_signature_called_last_is_kept(kernel_budget):
    traces = []

    @loom.jit(pipeline="naive")
    def f(x, s):
        traces.append(x.shape)
        return x * s

    loom.set_cache_size(0)
    a, b = np.ones(2), np.ones(3)
    f(a, 2.0), f(a, 3.0)
    assert len(traces) == 1
    f(b, 2.0), f(a, 2.0)
    assert len(traces) == 3 and len(f._specializations) == 1 and len(kernel_budget) == 0


def test_numpy_functions_on_a_traced_array():
    """numpy's functions that dispatch to a traced array (`__array_function__`) run as
    Loom's, and an option of numpy's that Loom lacks (`order=`) is a located refusal (it
    was a TypeError from inside Loom); np.ascontiguousarray does not dispatch (it converts
    its argument): refused, naming loom.contiguous."""
    @loom.jit
    def f(x):
        return np.transpose(x), np.reshape(x, (3, 2)), np.broadcast_to(x, (2, 2, 3)), np.matmul(x, x.T)

    x = np.arange(6.0).reshape(2, 3)
    for got, want in zip(f(x), (x.T, x.reshape(3, 2), np.broadcast_to(x, (2, 2, 3)), x @ x.T)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(loom.TraceError, match=r"cannot be converted to numpy .* loom.contiguous for "
                                              r"np.ascontiguousarray"):
        loom.jit(lambda x: np.ascontiguousarray(x))(x)
    with pytest.raises(loom.TraceError, match=r"numpy.reshape on a traced array inside @loom.jit takes what "
                                              r"loom.reshape takes: got an unexpected keyword argument 'order'"):
        loom.jit(lambda x: np.reshape(x, (3, 2), order="F"))(x)


# ---- every refusal of the tracer, at the user's line; beside it, the last accepted input ---

REFUSALS = [  # (expression on x (2, 3), v (3,), b (2, 3, 4), s a float, img (1, 2, 5, 5), w (1, 2, 3, 3); message)
    ("x ** 2", r"a power \(\*\*\) is not supported on a traced array inside @loom.jit \(supported: @"),
    ("[y for y in x]", r"iterating over a traced array is not supported inside @loom.jit \(index it instead\)"),
    ("len(x[0, 0])", r"len\(\) of a 0-d traced array$"),
    ("np.concatenate([x, x])", r"numpy.concatenate is not supported on a traced array inside @loom.jit$"),
    ("[[1.0, 2.0]] @ x", r"a @ b takes traced arrays, got list$"),
    ("np.add(x, x, dtype=np.float32)", r"numpy's add is not supported on a traced array inside @loom.jit \(use \+, -, "
                                       r"\*, @, loom.relu; np.matmul takes dtype= alone\)$"),
    ("np.multiply(x, x, dtype=np.float32)", r"numpy's multiply is not supported on a traced array"),
    ("np.subtract(x, x, dtype=np.float32)", r"numpy's subtract is not supported on a traced array"),
    ("np.matmul(x, x.T, out=x)", r"numpy's matmul is not supported on a traced array"),
    ("s @ x", r"the float argument s is a kernel input inside @loom.jit: it takes part in array arithmetic"),
    ("x if s == 1.0 else x", r"the float argument s is a kernel input inside @loom.jit"),
    ("loom.add(s, 1.0)", r"the float argument s is a kernel input inside @loom.jit"),
    ("loom.multiply(2.0, s)", r"the float argument s is a kernel input inside @loom.jit"),
    ("x + 'a'", r"a \+ b takes traced arrays or Python numbers, got str$"),
    ("x * True", r"a \* b takes traced arrays or Python numbers, got bool$"),
    ("x - True", r"a - b takes traced arrays or Python numbers, got bool$"),  # not x + -True
    ("v @ v", r"a @ b takes 2-D @ 2-D, 3-D @ 3-D \(batched\) or 3-D @ 2-D arrays, got shapes \(3,\) @ \(3,\)$"),
    ("x @ b", r"a @ b takes 2-D @ 2-D, .* got shapes \(2, 3\) @ \(2, 3, 4\)$"),
    ("b @ b[:1].transpose(0, 2, 1)", r"a @ b: batch sizes differ, 2 and 1 \(shapes \(2, 3, 4\) @ \(1, 4, 3\)\)$"),
    ("b @ x", r"a @ b: a has 4 columns but b has 2 rows"),  # 3-D @ 2-D: the batch folded into the rows first
    ("loom.conv2d(img, w, layout='NCHW')", r"loom.conv2d: layout must be 'nchw' or 'nhwc', got 'NCHW'$"),
    ("loom.conv2d(x, w)", r"loom.conv2d takes a 4-D NCHW input and a 4-D FCHW filter, got shapes \(2, 3\) and "
                          r"\(1, 2, 3, 3\)$"),
    ("loom.conv2d(img, x, layout='nhwc')", r"takes a 4-D NHWC input and a 4-D HWCF filter \(or a 5-D or 6-D one in panels, "
                                           r"pack_filter\), got shapes \(1, 2, 5, 5\) and \(2, 3\)$"),
    ("loom.conv2d(img, w.transpose(1, 0, 2, 3))", r"loom.conv2d: the input has 2 channels but the filter takes 1 "
                                                  r"\(shapes \(1, 2, 5, 5\) and \(2, 1, 3, 3\), layout nchw\)$"),
    ("loom.conv2d(img, w, layout='nhwc')", r"the input has 5 channels but the filter takes 3 .* layout nhwc\)$"),
    ("loom.conv2d(img, w, dilation=3)", r"loom.conv2d: the 3x3 window \(dilation \(3, 3\)\) does not fit the padded "
                                        r"5x5 input$"),
    ("loom.conv2d(img, w, dilation=(1, 4), padding=(0, 1))", r"the 3x3 window \(dilation \(1, 4\)\) does not fit the "
                                                             r"padded 5x7 input$"),
    ("loom.conv2d(img, w, stride=(1, 0))", r"stride must be an integer or a pair of integers >= 1, got \(1, 0\)$"),
    ("loom.conv2d(img, w, dilation=True)", r"dilation must be an integer or a pair of integers >= 1, got True$"),
    ("loom.conv2d(img, w, padding=(1, 2, 3))", r"padding must be an integer or a pair .* got \(1, 2, 3\)$"),
    ("x.transpose('a', 'b')", r"transpose: axes \('a', 'b'\) are not a permutation of the 2 dimensions of shape "
                              r"\(2, 3\)$"),
    ("x.transpose(0, 0)", r"transpose: axes \(0, 0\) are not a permutation"),
    ("x.transpose(1, -3)", r"transpose: axes \(1, -3\) are not a permutation"),
    ("b.transpose(0, 1)", r"transpose: axes \(0, 1\) are not a permutation of the 3 dimensions"),
    ("x.reshape(-2, -3)", r"reshape: the new shape must be integers >= 0 with at most one -1, got \(-2, -3\)$"),
    ("x.reshape(-1, -1)", r"reshape: the new shape must be .* at most one -1, got \(-1, -1\)$"),
    ("x.reshape(2.0, 3)", r"reshape: the new shape must be integers .* got \(2.0, 3\)$"),
    ("x.reshape(True, 6)", r"reshape: the new shape must be integers .* got \(True, 6\)$"),
    ("x.reshape(4, -1)", r"reshape: cannot infer -1 in \(4, -1\) for 6 elements \(shape \(2, 3\)\)$"),
    ("x.reshape(0, -1)", r"reshape: cannot infer -1 in \(0, -1\) for 6 elements"),
    ("x.reshape(5)", r"reshape: cannot reshape shape \(2, 3\) \(6 elements\) into \(5,\) \(5\)$"),
    ("loom.broadcast_to(v, (1,))", r"broadcast_to: shape \(3,\) does not broadcast to \(1,\)$"),
    ("loom.broadcast_to(x, 3)", r"broadcast_to: shape \(2, 3\) does not broadcast to \(3,\)$"),
    ("loom.broadcast_to(v, (2,))", r"broadcast_to: shapes \(3,\) and \(2,\) do not broadcast"),
    ("x[..., 0, ...]", r"an index can only have a single ellipsis \('\.\.\.'\)$"),
    ("x[0, None, 0, 0]", r"too many indices for a traced array of shape \(2, 3\): 3$"),
]


@pytest.mark.parametrize("expression, message", REFUSALS, ids=[e for e, _ in REFUSALS])
def test_each_refusal_of_the_tracer_names_the_users_line(expression, message):
    f = loom.jit(eval(f"lambda x, v, b, s, img, w: {expression}", {"loom": loom, "np": np}))
    args = (np.ones((2, 3)), np.ones(3), np.ones((2, 3, 4)), 0.5, np.ones((1, 2, 5, 5), np.float32),
            np.ones((1, 2, 3, 3), np.float32))
    with pytest.raises(loom.TraceError, match=message) as e:
        f.lower(*args)
    assert str(e.value).startswith("<string>:1:"), str(e.value)


def test_the_last_accepted_inputs_beside_the_refusals():
    """Each guard's other side: axes given negative (or None: reversed), one -1, ... and
    None beside exactly ndim integers, a window that just fits (with and without padding),
    a broadcast that only adds dimensions; and what a trace may ask of a traced array:
    repr, len, +x."""
    seen = {}

    @loom.jit(pipeline="naive")
    def f(x, b, img, w, s):
        seen.update(x=repr(x), s=repr(s), len=len(x), len3=len(b))
        return (x.transpose(-1, 0), x.transpose(None), x.reshape(-1, 2), x.reshape((3, 2)), x.reshape([6]),
                x[1, None, 2, ...] * s, +x, loom.broadcast_to(x[0], 3), loom.broadcast_to(x, (4, 2, 3)),
                b @ b.transpose(0, 2, 1), loom.conv2d(img, w, dilation=2),
                loom.conv2d(img, w, dilation=(3, 1), padding=(1, 0)))

    rng = np.random.default_rng(5)
    x, b = np.arange(6.0).reshape(2, 3), rng.integers(-3, 4, (2, 3, 4)).astype(np.float64)
    img, w = (rng.integers(-3, 4, s).astype(np.float32) for s in [(1, 2, 5, 5), (3, 2, 3, 3)])
    got = f(x, b, img, w, 2.0)
    assert seen == {"x": "<traced float64[2, 3] %x>", "s": "<traced float argument s>", "len": 2, "len3": 2}
    padded = np.pad(img[0], ((0, 0), (1, 1), (0, 0)))[:, ::3]  # rows 0, 3, 6 of the padded input
    windows = np.lib.stride_tricks.sliding_window_view(padded, 3, axis=2)  # (c, 3 taps, 3 columns, 3 taps)
    want = (x.T, x.T, x.reshape(3, 2), x.reshape(3, 2), x.reshape(6), x[1, None, 2, ...] * 2.0, x,
            np.broadcast_to(x[0], 3), np.broadcast_to(x, (4, 2, 3)), b @ b.transpose(0, 2, 1),
            np.einsum("cij,fcij->f", img[0, :, ::2, ::2], w).reshape(1, 3, 1, 1),
            np.einsum("cijk,fcik->fj", windows, w)[None, :, None, :])
    assert len(got) == len(want)
    for g, v in zip(got, want):
        assert g.shape == v.shape
        np.testing.assert_array_equal(g, v)
    assert not np.shares_memory(got[6], x)  # +x returned: a copy, as an argument returned is


def test_a_jit_function_that_is_not_a_function_or_has_no_signature():
    with pytest.raises(TypeError, match=r"^@loom.jit decorates a function, got int$"):
        loom.jit(3)

    def f(x, s):
        return x * s

    f.__signature__ = "?"  # inspect.signature() cannot read it: the arguments go by position only
    g = loom.jit(pipeline="naive")(f)
    x = np.arange(4.0)
    np.testing.assert_array_equal(g(x, 3.0), 3 * x)
    assert "%arg0: tensor<4xf64>" in g.lower(x, 3.0) and repr(g).endswith("f: 1 compiled signatures>")
    with pytest.raises(TypeError, match=r"^f\(\) takes its arguments by position inside @loom.jit \(its parameters "
                                        r"are unknown\), got the keywords s$"):
        g(x, s=3.0)


def test_what_a_call_may_pass_and_a_trace_may_return():
    x = np.arange(4.0)
    with pytest.raises(TypeError, match=r"an argument that is a constant of the trace \(a tuple\) must hold "
                                        r"hashable values"):
        loom.jit(lambda x, t: x * 2.0)(x, (1, [2]))
    np.testing.assert_array_equal(loom.jit(lambda x, t: x * float(t[1][0]))(x, (1, (2,))), 2 * x)
    with pytest.raises(TypeError, match=r"^kernel\(\) argument #0 is a MaskedArray: pass a plain numpy.ndarray"):
        loom.jit(lambda x: x * 2.0)(np.ma.masked_array(x))
    leaked = []
    loom.jit(lambda x: leaked.append(x) or x * 2.0).lower(x)
    for body, message in [(lambda x: (), r"kernel\(\) returned nothing: a @loom.jit function returns one or more"),
                          (lambda x: 1.0, r"result #0 is a float: a @loom.jit function returns the arrays it computed"),
                          (lambda x: (x * 2.0, np.ones(2)), r"result #1 is a ndarray: "),
                          (lambda x: leaked[0], r"result #0 is a Traced: ")]:  # a Traced of another trace
        with pytest.raises(TypeError, match=message):
            loom.jit(body).lower(x)


def test_two_threads_calling_a_new_signature_trace_it_once():
    """The second waits at the lock the first holds while it traces, then finds the
    first's specialization there: one trace, one kernel, two right results."""
    traces, tracing, go, waiting = [], threading.Event(), threading.Event(), threading.Event()

    @loom.jit(pipeline="naive")
    def f(x):
        traces.append(x.shape)
        tracing.set()
        go.wait(60)
        return x * 2.0

    class Spy:  # f's lock, saying when a caller comes to it while the first traces
        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            if tracing.is_set():
                waiting.set()
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)

    f._lock = Spy(f._lock)
    x, results = np.arange(3.0), {}
    threads = [threading.Thread(target=lambda i=i: results.update({i: f(x)}), daemon=True) for i in range(2)]
    threads[0].start()
    assert tracing.wait(60)
    threads[1].start()
    assert waiting.wait(60)
    go.set()
    for t in threads:
        t.join(60)
    assert traces == [(3,)] and sorted(results) == [0, 1]
    for r in results.values():
        np.testing.assert_array_equal(r, 2 * x)


def test_a_trace_with_no_user_frame_has_no_location(monkeypatch):
    """loom.relu itself jitted and specialized on a thread that starts in Loom: no frame
    outside Loom, so the ops and the refusal carry no location (not a crash)."""
    f = loom.jit(loom.relu, pipeline="naive")
    raised, done = [], threading.Event()
    monkeypatch.setattr(sys, "unraisablehook", lambda u: (raised.append(u.exc_value), done.set()))
    _thread.start_new_thread(f.specialize, (np.ones(3, np.int8),))
    assert done.wait(60)
    assert isinstance(raised[0], loom.TraceError)
    assert str(raised[0]).startswith("error: loom.relu of an int8 array: Loom computes +, -, * and loom.relu in")
    _thread.start_new_thread(f.specialize, (np.arange(-2.0, 2.0),))
    for _ in range(600):
        if f._recent is not None or len(raised) > 1:
            break
        threading.Event().wait(0.1)
    assert len(raised) == 1 and "loc(" not in f._recent.source and "loom.relu %x" in f._recent.source
    np.testing.assert_array_equal(f(np.arange(-2.0, 2.0)), [0, 0, 0, 1])


def test_signature_constants_by_type_and_results_of_one_in_a_tuple():
    """True and 1 are two constants (equal and of one hash in Python: the signature holds
    their type); a float argument beside arrays of two dtypes is two kernel inputs that
    take its value at each call; a tuple or list of one array comes back a tuple of one."""
    @loom.jit(pipeline="naive")
    def f(x, y, s, flag):
        return (x * s, y * s) if flag is True else [x * 3.0]

    x, y = np.arange(3, dtype=np.float32), np.arange(4.0)
    for s in (2.0, -0.5):
        a, b = f(x, y, s, True)
        assert a.dtype == np.float32 and b.dtype == np.float64
        np.testing.assert_array_equal(a, x * np.float32(s))
        np.testing.assert_array_equal(b, y * s)
    one = f(x, y, 2.0, 1)
    assert isinstance(one, tuple) and len(one) == 1 and len(f._specializations) == 2
    np.testing.assert_array_equal(one[0], 3 * x)
    g = loom.jit(lambda x: (x + x,), pipeline="naive")  # no number: x is the kernel's one input
    for _ in range(2):  # the second call goes through the kernel's own checked call
        one = g(x)
        assert isinstance(one, tuple) and len(one) == 1
        np.testing.assert_array_equal(one[0], 2 * x)
