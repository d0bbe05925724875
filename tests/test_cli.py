"""loom-opt and loom-run as a user runs them: subprocesses, exit codes, clean errors."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent


def run(tool, *args, stdin=None):
    proc = subprocess.run([str(BIN / tool), *map(str, args)], capture_output=True, text=True, input=stdin,
                          cwd=ROOT, env={**os.environ})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_opt_naive_to_llvm_dialect():
    p = run("loom-opt", EXAMPLES / "matmul_bias_relu.mlir", "-p", "loom-naive")
    assert p.returncode == 0, p.stderr
    assert "llvm.func @dense(" in p.stdout and "loom." not in p.stdout


def test_opt_emits_llvm_ir():
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "loom-naive", "-t", "llvm")
    assert p.returncode == 0, p.stderr
    assert "define void @matmul(ptr noalias" in p.stdout


def test_opt_stdin_output_file_and_print_between(tmp_path):
    out = tmp_path / "out.mlir"
    src = (EXAMPLES / "matmul.mlir").read_text()
    p = run("loom-opt", "-", "-p", "loom-bufferize,convert-loom-to-affine", "-o", out,
            "--print-between-passes", stdin=src)
    assert p.returncode == 0, p.stderr
    assert "IR after loom-bufferize" in p.stderr
    assert '{loom.tag = "matmul"}' in out.read_text()


def test_opt_errors(tmp_path):
    p = run("loom-opt", tmp_path / "missing.mlir")
    assert p.returncode == 1 and "missing.mlir: error: cannot read input file: No such file" in p.stderr
    binary = tmp_path / "bin.mlir"
    binary.write_bytes(bytes(range(256)))
    p = run("loom-opt", binary)
    assert p.returncode == 1 and "bin.mlir: error: input is not UTF-8 text" in p.stderr
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "loom-frobnicate")
    assert p.returncode == 1 and "error: invalid pass pipeline 'loom-frobnicate'" in p.stderr
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "loom-bufferize{bogus=3}")
    assert p.returncode == 1 and "error: invalid pass pipeline" in p.stderr and "bogus" in p.stderr
    bad = tmp_path / "bad.mlir"
    bad.write_text((EXAMPLES / "matmul.mlir").read_text().replace("256x256xf32>)", "256x255xf32>)"))
    p = run("loom-opt", bad)
    assert p.returncode == 1
    assert p.stderr.startswith(f"{bad}:3:3: error: 'loom.matmul' op result has shape 256x256, expected 256x255"), p.stderr
    semi = tmp_path / "semi.mlir"
    semi.write_text("func.func @f(%i: index) -> index {\n  %0 = affine.apply affine_map<(d0)[s0] -> (d0 floordiv s0)>(%i)[%i]\n  func.return %0 : index\n}\n")
    p = run("loom-opt", semi)
    assert p.returncode == 1 and f"{semi}:2:" in p.stderr and "error: unsupported or invalid syntax" in p.stderr


def test_split_input_file_goes_on_after_an_error(tmp_path):
    f = tmp_path / "two.mlir"
    f.write_text("func.func @a() {\n  func.return\n}\n// -----\nfunc.func @b( {\n// -----\nfunc.func @c() {\n  func.return\n}\n")
    p = run("loom-opt", f, "--split-input-file")
    assert p.returncode == 1
    assert f"{f}:5:" in p.stderr
    assert "@a" in p.stdout and "@c" in p.stdout


@pytest.mark.parametrize("example", ["matmul.mlir", "matmul_bias_relu.mlir", "conv2d_dilated_f64.mlir"])
def test_run_examples(example):
    p = run("loom-run", EXAMPLES / example, "--repeat", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "check    OK" in p.stdout and "GFLOP/s" in p.stdout


def test_run_errors(tmp_path):
    p = run("loom-run", tmp_path / "nope.mlir")
    assert p.returncode == 1 and "nope.mlir: error: cannot read input file" in p.stderr
    p = run("loom-run", EXAMPLES / "matmul.mlir", "--pipeline", "bogus-pass")
    assert p.returncode == 1 and "invalid pass pipeline 'bogus-pass'" in p.stderr
    p = run("loom-run", EXAMPLES / "matmul.mlir", "--entry", "nope")
    assert p.returncode == 1 and "no function @nope" in p.stderr


def test_run_reports_mismatch(monkeypatch, capsys):
    """A wrong result makes loom-run exit 1 (the reference is perturbed in-process)."""
    from compiler import numpy_reference as ref
    from tools import loom_run

    real = ref.evaluate
    monkeypatch.setattr(ref, "evaluate", lambda fn, arrays, dtype=None: tuple(r + 1.0 for r in real(fn, arrays)))
    assert loom_run.main([str(EXAMPLES / "matmul.mlir"), "--repeat", "1"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_unknown_command_line_option_exits_1():
    for tool, arg in (("loom-opt", "-"), ("loom-run", "x.mlir"), ("loom-bench", "--stages")):
        p = run(tool, arg, "--no-such-option", stdin="")
        assert p.returncode == 1 and "unrecognized arguments: --no-such-option" in p.stderr, (tool, p.stderr)
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-t", "nosuchtarget")
    assert p.returncode == 1 and "invalid choice: 'nosuchtarget'" in p.stderr


def test_bench_stages_table_and_json():
    p = run("loom-bench", "--stages", "--sizes", "8,9", "--budget", "0.01", "--repeat", "3")
    assert p.returncode == 0, p.stderr
    assert "numpy BLAS:" in p.stdout
    for stage in ("naive (i, j, k)", "tiling (N/8)", "permutation (i, k, j)", "permutation + invariant",
                  "invariant + unroll s=2", "invariant + unroll s=4", "permutation + invariant + unroll s=4"):
        assert f"| 9 | {stage} |" in p.stdout
    assert "| 9 | numpy (same process) |" in p.stdout and "MISMATCH" not in p.stdout
    import json

    p = run("loom-bench", "--stages", "--sizes", "8", "--budget", "0.01", "--repeat", "3", "--json", "--show-ir")
    data = json.loads(p.stdout)
    assert len(data["rows"]) == 7 and all(r["ok"] for r in data["rows"])
    assert '{loom.tag = "matmul"}' in p.stderr  # --show-ir prints each stage's nest
