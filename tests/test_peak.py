"""The machine's FMA peak (compiler/measure/peak.py): the measuring kernel really is vector FMAs,
the figure is measured once per machine and kept in Loom's cache directory, a broken or
foreign cache file is never trusted, and `loom-bench --peak` prints it."""

import json
import re
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from targets import asm_for_cpu

from compiler.measure import peak
from compiler.jit.engine import compile_ir
from passes.support.target import openmp_runtime
from passes.support.target import machine
from tools import loom_bench
from tools.bench import common


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory and no figure remembered in this process."""
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peak, "_measured", {})
    return tmp_path


@pytest.fixture
def fake_measure(monkeypatch):
    """measure_peak replaced by a counter: 100 GFLOP/s per thread, f64 half of it."""
    calls = []

    def measure(dtype, threads=1, **_):
        calls.append((dtype, threads))
        return 100.0 * threads / (2 if dtype == "f64" else 1)

    monkeypatch.setattr(peak, "measure_peak", measure)
    return calls


@pytest.mark.skipif(not machine().fma, reason="the host has no FMA unit")
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_kernel_is_vector_fmas_of_the_host_width(dtype):
    """The loop body is `chains` FMAs on full vector registers (zmm on AVX-512, ymm on
    AVX2), none on scalars: what the peak is the peak of."""
    lanes, chains = peak.vector_shape(dtype)
    assert lanes * (4 if dtype == "f32" else 8) * 8 == machine().vector_bits
    register = {512: "zmm", 256: "ymm"}.get(machine().vector_bits, "xmm")
    suffix = "ps" if dtype == "f32" else "pd"
    asm = compile_ir(peak.peak_module(dtype)).asm()
    vector = re.findall(rf"vfmadd\d+{suffix}\s+%{register}", asm)
    scalar = re.findall(r"vfmadd\d+s[sd]\s", asm)
    assert len(vector) >= chains and not scalar, asm


def test_measure_gives_positive_figures_for_each_dtype():
    for dtype in ("f32", "f64", np.float32, np.dtype(np.float64), "bf16", ml_dtypes.bfloat16, "int8", np.uint8):
        assert peak.measure_peak(dtype, iterations=10_000, runs=2) > 0


@pytest.mark.skipif(openmp_runtime() is None, reason="libgomp is not installed")
def test_measure_on_two_threads():
    assert peak.measure_peak("f32", 2, iterations=10_000, runs=2) > 0


def test_measured_once_then_read_from_the_cache_file(cache, fake_measure):
    assert peak.peak_gflops("f32") == 100.0
    assert peak.peak_gflops(np.float32, 1) == 100.0  # remembered in this process
    assert fake_measure == [("f32", 1)]
    data = json.loads((cache / peak.CACHE_FILE).read_text())
    entry = data["machines"][peak.machine_key()]
    assert entry["cpu"] == machine().cpu and entry["peaks"] == {"f32:1": 100.0}
    peak._measured.clear()  # a new process: the file is read, nothing measured
    assert peak.peak_gflops("f32") == 100.0 and fake_measure == [("f32", 1)]
    assert peak.peak_gflops("f64", 2) == 100.0  # another figure: measured, added beside the first
    assert fake_measure == [("f32", 1), ("f64", 2)]
    assert json.loads((cache / peak.CACHE_FILE).read_text())["machines"][peak.machine_key()]["peaks"] == {
        "f32:1": 100.0, "f64:2": 100.0}


@pytest.mark.parametrize("content", ["", "{not json", "[1, 2]", '{"machines": 3}',
                                     '{"machines": {"KEY": {"peaks": {"f32:1": "fast"}}}}',
                                     '{"machines": {"KEY": {"peaks": {"f32:1": -5}}}}'])
def test_a_broken_cache_file_is_measured_again_and_rewritten(cache, fake_measure, content):
    (cache / peak.CACHE_FILE).write_text(content.replace("KEY", peak.machine_key()))
    assert peak.peak_gflops("f32") == 100.0 and fake_measure == [("f32", 1)]
    data = json.loads((cache / peak.CACHE_FILE).read_text())
    assert data["machines"][peak.machine_key()]["peaks"]["f32:1"] == 100.0


def test_another_machines_figure_is_not_used_and_kept(cache, fake_measure):
    other = {"machines": {"0" * 32: {"cpu": "elsewhere", "peaks": {"f32:1": 999.0}}}}
    (cache / peak.CACHE_FILE).write_text(json.dumps(other))
    assert peak.peak_gflops("f32") == 100.0 and fake_measure == [("f32", 1)]
    machines = json.loads((cache / peak.CACHE_FILE).read_text())["machines"]
    assert machines["0" * 32]["peaks"] == {"f32:1": 999.0} and peak.machine_key() in machines


def test_remeasure_keeps_the_best_figure(cache, monkeypatch):
    figures = iter([80.0, 120.0, 90.0])
    monkeypatch.setattr(peak, "measure_peak", lambda dtype, threads=1: next(figures))
    assert peak.remeasure("f32") == (80.0, 80.0)
    assert peak.remeasure("f32") == (120.0, 120.0)
    assert peak.remeasure("f32") == (90.0, 120.0)  # a slower run (a busy machine) does not lower it
    assert peak.peak_gflops("f32") == 120.0


#: a machine with the dot-product instructions (znver4), at 512 and 256 bits
DOT_TARGETS = {bits: replace(machine(), cpu="znver4", vector_bits=bits, vector_registers=32 if bits == 512 else 16,
                             fma=True, bf16_dot=True, int8_dot=True) for bits in (512, 256)}


@pytest.mark.parametrize("bits", [512, 256])
@pytest.mark.parametrize(("dtype", "instruction"), [("bf16", "vdpbf16ps"), ("int8", "vpdpbusd")])
def test_a_machine_with_dot_products_measures_them(dtype, instruction, bits):
    """On a target with AVX512-BF16 / VNNI the loop body is `chains` dot-product instructions on
    full registers (compiled for znver4 whatever the host: the module is only compiled here)."""
    target = DOT_TARGETS[bits]
    assert peak.dot_path(dtype, target).instruction == instruction
    asm = asm_for_cpu(peak.peak_module(dtype, target), "znver4")
    lanes, chains = peak.vector_shape(dtype, target)
    register = "zmm" if bits == 512 else "ymm"
    full = re.findall(rf"{instruction}\s+%{register}\d+, %{register}", asm)
    assert lanes == bits // 32 and len(full) >= chains and len(full) == asm.count(instruction), asm  # (unrolled)


@pytest.mark.parametrize(("dtype", "instruction", "ops"), [
    ("f32", "vfmaddps", 2), ("f64", "vfmaddpd", 2), ("bf16", "vfmaddps", 2), ("int8", "vpmaddwd + vpaddd", 4)])
def test_a_machine_without_dot_products_measures_what_replaces_them(dtype, instruction, ops):
    target = replace(DOT_TARGETS[256], bf16_dot=False, int8_dot=False)
    path = peak.dot_path(dtype, target)
    assert (path.instruction, path.ops_per_lane) == (instruction, ops)
    assert ("widened" in path.describe()) == (dtype in peak.LOW_PRECISION)
    asm = asm_for_cpu(peak.peak_module(dtype, target), "znver3")
    name = {"f32": r"vfmadd\d+ps", "f64": r"vfmadd\d+pd", "bf16": r"vfmadd\d+ps", "int8": "vpmaddwd"}[dtype]
    assert len(re.findall(rf"{name}\s+%ymm", asm)) >= peak.vector_shape(dtype, target)[1], asm


@pytest.mark.parametrize("dtype", ["f16", np.int32, "float32x", None, object(), "i8", np.int16])
def test_bad_dtype(dtype):
    with pytest.raises(ValueError, match="float32, float64, bfloat16 and int8"):
        peak.peak_gflops(dtype)


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_bad_threads(threads):
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        peak.peak_gflops("f32", threads)


def test_bad_iterations():
    with pytest.raises(ValueError, match="iterations and runs must be positive"):
        peak.measure_peak("f32", iterations=0)


def test_loom_bench_peak(cache, fake_measure, capsys):
    assert loom_bench.main(["--peak", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    assert "| 1 | 100.0 | 50.0 | 100.0 | 100.0 |" in out and "| 2 | 200.0 | 100.0 | 200.0 | 200.0 |" in out
    int8 = peak.dot_path("int8")
    assert f"  int8: {int8.describe()}, {int8.ops_per_lane} operations per lane" in out
    assert f"cached (the best known) in {cache / peak.CACHE_FILE}" in out
    assert loom_bench.main(["--peak", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["peak"] == [{"threads": 1, "f32": 100.0, "f32_best": 100.0, "f64": 50.0, "f64_best": 50.0,
                             "bf16": 100.0, "bf16_best": 100.0, "int8": 100.0, "int8_best": 100.0}]
    assert data["instructions"]["bf16"] == peak.dot_path("bf16").describe()
    assert data["cache"] == str(cache / peak.CACHE_FILE)


def test_loom_bench_peak_refuses_options_of_other_modes(capsys):
    with pytest.raises(SystemExit):
        loom_bench.parse_args(["--peak", "--rounds", "3"])
    assert "--rounds applies to --shapes and --conv and --fusion and --model only" in capsys.readouterr().err


def test_bench_tables_quote_the_peak(cache, fake_measure):
    assert common.peak_line(2) == ("peak: 200.0 GFLOP/s f32, 100.0 f64 (vector FMA, 2 threads; measured once per "
                                  "machine, compiler/measure/peak.py)")
