"""A differential fuzzer for `@loom.jit`: random programs over views and operations
(tests/jit_programs.py) run through @loom.jit and through numpy on the same arrays, with
random layouts, and compared bit for bit, dtypes included: float programs on small
integers (every sum is exact), quantized layers of int8 and uint8 arrays into int32
(numpy's `np.matmul(a, b, dtype=np.int32)` and int32 arithmetic).

The default run is a fixed, derandomized sample, `naive` and `default` pipelines;
`HYPOTHESIS_PROFILE=long` draws 5,000 random float programs and 1,000 int8 ones, `naive`
only (the trace and the views are what it tests; compiling each with `default` would
take an hour).
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from jit_programs import int8_programs, programs

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
PIPELINES = ("naive",) if LONG else ("naive", "naive", "naive", "default")


def fuzz(examples: int, long_examples: int):
    return settings(max_examples=long_examples if LONG else examples, derandomize=not LONG, deadline=None,
                    suppress_health_check=list(HealthCheck))


@fuzz(48, 5000)
@given(program=programs(pipelines=PIPELINES))
def test_jit_agrees_with_numpy(program):
    agrees(program)


@fuzz(12, 1000)
@given(program=int8_programs(pipelines=PIPELINES))
def test_jit_int8_programs_agree_with_numpy(program):
    agrees(program)


def agrees(program):
    jitted, reference = program.functions()
    arguments = program.arguments()
    floats = [] if program.scalar is None else [program.scalar]
    refused = [i for i, (_, view) in enumerate(arguments) if view is not None]
    if refused:  # a view with a negative stride: refused, with what to do
        with pytest.raises(ValueError, match=rf"argument #{refused[0]} has strides \(.*\): Loom passes views with "
                                             r"non-negative strides .* \(pass a copy"):
            jitted(*[view if view is not None else array for array, view in arguments], *floats)
    arrays = [array for array, _ in arguments]
    for call in range(2):  # the second call: the compiled signature's path (another value of s)
        args = [*arrays, *(s + call for s in floats)]
        got, want = jitted(*args), reference(*args)
        assert isinstance(got, tuple) == isinstance(want, tuple)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            w = np.asarray(w)
            assert isinstance(g, np.ndarray) and g.dtype == w.dtype and g.shape == w.shape, (k, g, w)
            np.testing.assert_array_equal(g, w, err_msg=f"result #{k}, call #{call}")
            assert not any(np.shares_memory(g, a) for a in arrays), f"result #{k} is not a fresh array"
