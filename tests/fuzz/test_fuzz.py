"""Bad input ends in a clean error or a checked result: the fuzzer (tests/fuzz/) as a test.

The default run is a fixed, derandomized sample; `HYPOTHESIS_PROFILE=long` draws 5,000
random cases. `LOOM_FUZZ_SAVE=DIR` keeps a reproducer per distinct failure (the shortest
case seen) in DIR.
"""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from .corpus import seeds, tokenize, untokenize
from .mutations import Case, cases
from .oracle import Worker, assert_clean, load_reproducer
from .worker import CRASH_CASE, CRASH_ENV

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
FUZZ = settings(
    max_examples=5000 if LONG else 50,
    derandomize=not LONG,
    deadline=None,
    report_multiple_bugs=True,
    suppress_health_check=list(HealthCheck),
)
SAVE = Path(os.environ["LOOM_FUZZ_SAVE"]) if os.environ.get("LOOM_FUZZ_SAVE") else None


@pytest.fixture(scope="module")
def worker():
    with Worker() as w:
        yield w


@FUZZ
@given(case=cases())
def test_bad_input_gives_a_clean_error_or_a_checked_result(worker, case):
    assert_clean(case, worker.run(case), SAVE)


REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.mlir"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_found_failures_stay_fixed(worker, path):
    """What campaigns found (`python -m tests.fuzz --save DIR`), replayed: each file's
    header says what it did then (a hang, a traceback, an internal error)."""
    case = load_reproducer(path)
    assert_clean(case, worker.run(case), None)


MATMUL = """func.func @mm(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %c = loom.matmul %a, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  func.return %c : tensor<8x8xf32>
}
"""


def test_a_valid_kernel_is_checked_against_numpy(worker):
    pipeline = "loom-bufferize,convert-loom-to-affine,loom-tile{sizes=4,4,4}"
    verdicts = worker.run(Case("matmul", MATMUL, (), pipeline, to_llvm=False))
    assert [v.outcome for v in verdicts] == ["ok"] * 5 + ["checked"] * 3, [v.describe() for v in verdicts]


def test_a_worker_killed_in_a_case_is_a_crash_and_the_run_goes_on(monkeypatch):
    monkeypatch.setenv(CRASH_ENV, "1")  # the worker honours CRASH_CASE: it kills itself with SIGSEGV
    with Worker() as w:
        w.run(Case("matmul", MATMUL, (), "", to_llvm=False))  # started, warm
        verdicts = w.run(Case("matmul", CRASH_CASE + MATMUL, (), "", to_llvm=False))
        assert verdicts[0].outcome == "crash" and "killed by SIGSEGV" in verdicts[0].message, verdicts[0].describe()
        assert {v.outcome for v in verdicts[1:]} == {"skipped"}, [v.describe() for v in verdicts]
        assert {v.outcome for v in w.run(Case("matmul", MATMUL, (), "", to_llvm=False))} == {"ok", "checked"}


def test_a_step_past_the_time_bound_is_a_hang_and_the_run_goes_on():
    with Worker(timeout=0.001) as w:
        verdicts = w.run(Case("matmul", MATMUL, (), "", to_llvm=False))
        assert verdicts[0].outcome == "hang" and {v.outcome for v in verdicts[1:]} == {"skipped"}
        w.timeout = 60
        assert {v.outcome for v in w.run(Case("matmul", MATMUL, (), "", to_llvm=False))} == {"ok", "checked"}


def test_the_tokenizer_keeps_every_seed_and_types_whole():
    for seed in seeds():
        assert untokenize(tokenize(seed.text)) == seed.text, seed.name
    kinds = [(t.kind, t.text) for t in tokenize("%c = loom.matmul %a : memref<4x4xf32, strided<[8, 1]>>")]
    assert ("bracketed", "memref<4x4xf32, strided<[8, 1]>>") in kinds and ("ssa", "%a") in kinds
