"""The fuzz worker: a long-lived process that runs cases through `loom-opt` (its `main`,
in-process, output captured) and `compiler.compile` + a call, and judges each step.

Run by `oracle.Worker` as a script (`python worker.py`), in a scratch directory. It
reads one case per line on stdin, `{"text": ..., "target": ..., "steps": [...]}`,
writes the text to `case.mlir`, sets `LOOM_TARGET` to the target, and writes one JSON line per step to the protocol pipe (its original
stdout; fd 1 itself is pointed at stderr, so that nothing LLVM or a kernel prints can
garble the protocol): `{"outcome": ..., "message": ..., "exc": ..., "where": ...}`.
Before a kernel runs it writes `{"progress": "call"}`, so that a kernel that kills the
process is reported as a crash in the call, not in the compiler.

Outcomes: `error` (a clean error), `ok` (success), `checked` (success, results equal to
the float64 numpy reference), `skipped`, and the failures `traceback`, `internal`,
`badmsg` (an error without the `file:line:col: error:` / `loom-opt: error:` form, or a
message of several lines) and `wrong`. The parent adds `crash` and `hang`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import resource
import signal
import sys
import traceback
from pathlib import Path

import numpy as np

FILE = "case.mlir"
#: the first line of a clean command-line error
CLEAN_CLI = re.compile(r"^(?:[^\s:]+:\d+:\d+: error: |loom-opt: error: )")
#: kernels larger than this are compiled but not run (elements of all arrays, flops)
MAX_ELEMENTS, MAX_FLOPS = 1 << 22, 5e7
PROJECT = Path(__file__).resolve().parents[2]
#: a case whose text starts with CRASH_CASE kills the worker with SIGSEGV in its first
#: step, when the environment has CRASH_ENV=1: how the tests check, without a timer racing
#: the case, that a crash is reported and the run goes on
CRASH_CASE, CRASH_ENV = "// loom-fuzz: crash the worker\n", "LOOM_FUZZ_CRASH_CASE"
LOOM_PACKAGES = tuple(str(PROJECT / d) + os.sep for d in ("compiler", "dialects", "passes", "tools"))


def _where(exc: BaseException, prefixes=LOOM_PACKAGES) -> str:
    """`path:function:line` of the innermost traceback frame under one of `prefixes`."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        for prefix in prefixes:
            if frame.filename.startswith(prefix):
                rel = frame.filename[len(str(PROJECT)) + 1 :]
                return f"{rel}:{frame.name}:{frame.lineno}"
    return ""


def _xdsl_frame(exc: BaseException) -> str:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if f"{os.sep}xdsl{os.sep}" in frame.filename:
            return f"xdsl/{frame.filename.rsplit(os.sep + 'xdsl' + os.sep, 1)[1]}:{frame.name}:{frame.lineno}"
    return ""


def verdict(outcome: str, message: str = "", exc: BaseException | None = None, phase: str = "") -> dict:
    v = {"outcome": outcome, "message": _first_line(message)[:500], "phase": phase}
    if exc is not None:
        v.update(exc=type(exc).__name__, where=_where(exc) or _xdsl_frame(exc), xdsl=_xdsl_frame(exc))
    return v


def _first_line(text: str) -> str:
    return next((ln for ln in text.splitlines() if ln.strip()), "")


# --------------------------------------------------------------------------------------
# loom-opt


def _loom_opt(argv: list[str]) -> tuple[int, str]:
    from tools import loom_opt

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = loom_opt.main([FILE, *argv])
    except SystemExit as e:  # argparse
        rc = e.code if isinstance(e.code, int) else 1
    return rc, err.getvalue()


def _debug_exception(argv: list[str]) -> BaseException | None:
    """Run again with LOOM_DEBUG=1, which lets an internal error out: the exception, for
    its type and the frame it comes from."""
    os.environ["LOOM_DEBUG"] = "1"
    try:
        _loom_opt(argv)
    except BaseException as e:  # noqa: BLE001 - what is wanted here is any exception
        return e
    finally:
        del os.environ["LOOM_DEBUG"]
    return None


#: a verifier's message: what a pass must never cause on input that verified
_VERIFIER_MESSAGE = re.compile(r"(?:^|: error: )'([\w.]+)' op ")


def _invalid_output(message: str, parses: bool) -> dict | None:
    """A verifier error on input that verified: a pass left IR that does not verify."""
    m = _VERIFIER_MESSAGE.search(message)
    if parses and m:
        return {"outcome": "internal", "message": f"a pass left IR that does not verify: {message}"[:500],
                "exc": "InvalidIR", "where": f"'{m[1]}' op", "xdsl": ""}
    return None


def run_opt(argv: list[str], parses: bool) -> dict:
    try:
        rc, err = _loom_opt(argv)
    except BaseException as e:  # noqa: BLE001 - main() let an exception out: a traceback
        return verdict("traceback", f"{type(e).__name__}: {e}", e)
    if rc == 0:
        return verdict("ok")
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("usage:", " "))]
    first = lines[0] if lines else ""
    if "internal compiler error" in err:
        exc = _debug_exception(argv)
        return verdict("internal", first, exc)
    if "Traceback (most recent call last)" in err:
        return verdict("traceback", err.strip().splitlines()[-1])
    if not CLEAN_CLI.match(first):
        return verdict("badmsg", first or f"exit status {rc}, no message")
    return _invalid_output(first, parses) or verdict("error", first)


# --------------------------------------------------------------------------------------
# compile() and a call


def _api_error(exc: Exception, phase: str, parses: bool) -> dict:
    """A LoomError, or a ValueError/TypeError/MemoryError raised by the API's own checks
    (in compiler/), with a one-line message, is clean; anything else is a traceback."""
    from compiler import LoomError

    message = str(exc).strip()
    own = isinstance(exc, LoomError) or (
        isinstance(exc, ValueError | TypeError | MemoryError) and _where(exc).startswith("compiler/")
    )
    if not own:
        return verdict("traceback", f"{type(exc).__name__}: {message}", exc, phase)
    if not message or "\n" in message:
        return verdict("badmsg", f"{type(exc).__name__} with {'no' if not message else 'a multi-line'} message: "
                       f"{message[:200]!r}", exc, phase)
    return _invalid_output(message, parses) or verdict("error", message, exc, phase)


def _evaluable(text: str) -> tuple[bool, str | None, object]:
    """(whether the text parses and verifies, the function to compile, that function if
    the numpy reference evaluates it: loom ops on tensors or memrefs and a return, else
    None). The function to compile is the first one the reference evaluates, else the
    first one with a body."""
    from xdsl.dialects import func

    from compiler import LoomError
    from compiler.build import load_module
    from dialects import loom

    try:
        module = load_module(text, FILE)
    except LoomError:
        return False, None, None
    bodies = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    for op in bodies:
        if len(op.body.blocks) == 1 and all(isinstance(o, loom.LoomComputeOp | func.ReturnOp)
                                            for o in op.body.block.ops):
            return True, op.sym_name.data, op
    return True, bodies[0].sym_name.data if bodies else None, None


def _array(t, rng) -> np.ndarray | None:
    """Small integers in -3..3 in the type's shape and layout (a memref's strides and
    offset), or None for what cannot be made or is too large to run."""
    from xdsl.dialects.builtin import Float32Type, Float64Type, MemRefType

    dtype = {Float32Type: np.float32, Float64Type: np.float64}.get(type(t.get_element_type()))
    shape = tuple(t.get_shape())
    if dtype is None or any(d < 0 for d in shape) or np.prod(shape, dtype=float) > MAX_ELEMENTS:
        return None
    if not isinstance(t, MemRefType):
        return rng.integers(-3, 4, size=shape).astype(dtype)
    strides, offset = t.get_strides(), t.get_offset()
    if strides is None or offset is None or None in strides or any(s < 0 for s in strides):
        return None
    extent = offset + 1 + sum((d - 1) * s for d, s in zip(shape, strides)) if all(shape) else offset
    if extent > MAX_ELEMENTS:
        return None
    base = rng.integers(-3, 4, size=max(extent, 1)).astype(dtype)
    itemsize = np.dtype(dtype).itemsize
    return np.lib.stride_tricks.as_strided(base[offset:], shape, tuple(s * itemsize for s in strides))


def _magnitude(fn, arrays) -> float:
    """The largest value any op reaches with each input replaced by its absolute value: a
    bound on every partial sum in any summation order (below 2**24 in f32, every result
    of small integers is exact whatever the schedule)."""
    from compiler import numpy_reference as ref
    from dialects import loom

    env = dict(zip(fn.body.block.args, (np.abs(a).astype(np.float64) for a in arrays)))
    top = max((float(np.max(a, initial=0)) for a in env.values()), default=0.0)
    for op in fn.body.block.ops:
        if isinstance(op, loom.LoomComputeOp):
            value = ref.evaluate_op(op, [env[v] for v in op.ins])
            if op.is_bufferized:
                env[op.outs[0]][...] = value
            else:
                env[op.res[0]] = value
            top = max(top, float(np.max(value, initial=0)))
    return top


def _fails_fast(fn) -> bool:
    """Whether an op's result is larger than the worker may allocate: then the call must
    fail at once (a MemoryError) however much work the function would be."""
    from dialects import loom

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    sizes = [np.prod(op.output_type.get_shape(), dtype=float) * 8 for op in fn.walk()
             if isinstance(op, loom.LoomComputeOp)]
    return limit > 0 and max(sizes, default=0) > limit


def _mismatch(got: np.ndarray, want: np.ndarray, exact: bool, bound: float) -> str:
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if exact:
        equal = np.array_equal(got, want.astype(got.dtype), equal_nan=True)
        return "" if equal else f"not bit-exact: max |error| {np.nanmax(np.abs(got - want), initial=0):.3g}"
    err = np.abs(got.astype(np.float64) - want)
    bad = ~((err <= bound) | (np.isnan(got) & np.isnan(want)))
    return f"max |error| {np.nanmax(err, initial=0):.3g} > bound {bound:.3g}" if bad.any() else ""


def run_compile(text: str, pipeline: str, parsed: tuple) -> dict:
    """compile(), then a call on small integers checked against the numpy reference.
    `parsed` is `_evaluable(text)`. A function of loops is compiled, not run: its loads
    and stores may be out of bounds as the mutations left them, and no reference says
    what it computes."""
    import compiler
    from compiler import numpy_reference as ref
    from compiler.measure.runner import error_bound

    parses, entry, fn = parsed
    try:
        kernel = compiler.compile(text, pipeline=pipeline, entry=entry, filename=FILE)
    except Exception as e:  # noqa: BLE001 - judged by _api_error
        return _api_error(e, "compile", parses)
    if not parses:
        return verdict("wrong", "compiled an input that does not parse", phase="compile")
    if fn is None:
        return verdict("ok", "compiled; not run (loops: no reference, maybe out of bounds)")
    rng = np.random.default_rng(0)
    arrays = [_array(t, rng) for t in fn.function_type.inputs]
    outputs = fn.function_type.outputs
    too_big = any(np.prod(t.get_shape(), dtype=float) > MAX_ELEMENTS for t in outputs)
    if any(a is None for a in arrays) or too_big or (ref.flops(fn) > MAX_FLOPS and not _fails_fast(fn)):
        return verdict("ok", "compiled; not run (too large, or a layout the fuzzer does not build)")
    before = [a.astype(np.float64) for a in arrays]  # the reference writes memref outputs into these
    print(json.dumps({"progress": "call"}), file=PROTOCOL, flush=True)
    try:
        got = kernel(*arrays)
    except Exception as e:  # noqa: BLE001 - judged by _api_error
        return _api_error(e, "call", parses)
    try:
        want = list(ref.evaluate(fn, before)) + before
    except Exception as e:  # noqa: BLE001 - a verifier that let through what the reference cannot do
        return verdict("traceback", f"the numpy reference failed: {type(e).__name__}: {e}", e, "reference")
    got = ([] if got is None else list(got) if isinstance(got, tuple) else [got]) + list(arrays)
    if len(got) != len(want):
        return verdict("wrong", f"{len(got) - len(arrays)} results, expected {len(outputs)}", phase="call")
    top, k = _magnitude(fn, arrays), ref.reduction_length(fn)
    names = [f"result #{i}" for i in range(len(outputs))] + [f"argument #{i}" for i in range(len(arrays))]
    exact = True
    for name, g, w in zip(names, map(np.asarray, got), want):
        exact = top < 2.0 ** (np.finfo(g.dtype).nmant + 1)
        problem = _mismatch(g, w, exact, error_bound(k, g.dtype, float(np.nanmax(np.abs(w), initial=0))))
        if problem:
            return verdict("wrong", f"{name}: {problem}", phase="call")
    return verdict("checked", "bit-exact" if exact else f"within 4*K*eps*max|ref| (K={k})")


# --------------------------------------------------------------------------------------
# The loop


def run_case(case: dict) -> None:
    if os.environ.get(CRASH_ENV) == "1" and case["text"].startswith(CRASH_CASE):
        os.kill(os.getpid(), signal.SIGSEGV)
    Path(FILE).write_text(case["text"])
    if case.get("target"):
        os.environ["LOOM_TARGET"] = case["target"]
    else:
        os.environ.pop("LOOM_TARGET", None)
    try:
        parsed = _evaluable(case["text"])
    except Exception:  # noqa: BLE001 - the steps below meet the same exception and report it
        parsed = (True, None, None)
    for step in case["steps"]:
        if step.get("needs_parse") and not parsed[0]:
            v = verdict("skipped", "does not parse")  # a fixed pipeline would give the same parse error
        elif step["kind"] == "opt":
            v = run_opt(step["argv"], parsed[0])
        else:
            v = run_compile(case["text"], step["pipeline"], parsed)
        print(json.dumps(v), file=PROTOCOL, flush=True)


def main() -> None:
    global PROTOCOL
    PROTOCOL = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
    limit = int(os.environ.get("LOOM_FUZZ_MEMORY", 4 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.argv[0] = "loom-opt"
    import compiler  # noqa: F401 - imported once, before the first case's clock starts

    print(json.dumps({"ready": True}), file=PROTOCOL, flush=True)
    for line in sys.stdin:
        run_case(json.loads(line))


PROTOCOL = sys.stdout

if __name__ == "__main__":
    main()
