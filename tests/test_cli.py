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
    assert p.returncode == 1
    assert p.stderr == f"loom-opt: error: cannot read input file '{tmp_path / 'missing.mlir'}': No such file or directory\n"
    binary = tmp_path / "bin.mlir"
    binary.write_bytes(bytes(range(256)))  # 0x80, the first byte that is not UTF-8, is on line 2
    p = run("loom-opt", binary)
    assert p.returncode == 1 and p.stderr == f"{binary}:2:118: error: input is not UTF-8 text (a binary file?): byte 0x80\n"
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "loom-frobnicate")
    assert p.returncode == 1 and p.stderr.startswith("loom-opt: error: invalid pass pipeline 'loom-frobnicate'")
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "loom-bufferize{bogus=3}")
    assert p.returncode == 1 and "loom-opt: error: invalid pass pipeline" in p.stderr and "bogus" in p.stderr
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


def clean_error_lines(stderr: str) -> bool:
    """Every line of stderr is `file:line:col: error: ...` or `loom-opt: error: ...`."""
    import re

    lines = stderr.splitlines()
    return bool(lines) and all(re.match(r"^([^\s:]+:\d+:\d+|loom-opt): error: ", ln) for ln in lines)


def test_opt_assembly_targets():
    """-t asm (and -t x86-asm on an x86-64 host) print the host's assembly of lowered IR,
    as kernel.asm(); on IR not yet in the llvm dialect they refuse it at the first op that
    is not (x86-asm raised an AssertionError and dumped the IR)."""
    import platform

    targets = ["asm"] + (["x86-asm"] if platform.machine() in ("x86_64", "AMD64") else [])
    for target in targets:
        p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "naive", "-t", target)
        assert p.returncode == 0, p.stderr
        assert ".globl\tmatmul\n" in p.stdout and "\nmatmul:" in p.stdout and "func.func" not in p.stdout
        p = run("loom-opt", EXAMPLES / "matmul.mlir", "-t", target)
        assert p.returncode == 1 and p.stdout == ""
        assert p.stderr == (f"{EXAMPLES / 'matmul.mlir'}:2:1: error: cannot emit 'func.func' as LLVM IR: "
                            "lower it to the llvm dialect first (loom-convert-to-llvm)\n")
    # xDSL's targets for its own hardware dialects are not offered: Loom never emits those
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "naive", "-t", "riscv-asm")
    assert p.returncode == 1 and "invalid choice: 'riscv-asm'" in p.stderr


def test_opt_assembly_needs_no_linking(tmp_path):
    """-t asm prints the code of a module that calls a function the process lacks (it
    built and linked an MCJIT engine, and failed: unresolved external functions)."""
    src = tmp_path / "ext.mlir"
    src.write_text("llvm.func @loom_no_such_symbol(f32) -> f32\n"
                   "llvm.func @f(%x: f32) -> f32 {\n"
                   "  %y = llvm.call @loom_no_such_symbol(%x) : (f32) -> f32\n"
                   "  llvm.return %y : f32\n}\n")
    p = run("loom-opt", src, "-t", "asm")
    assert p.returncode == 0, p.stderr
    assert "\nf:" in p.stdout and "loom_no_such_symbol" in p.stdout


def test_opt_errors_without_location_have_the_program_prefix(tmp_path):
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-o", "/nonexistent/dir/x")
    assert p.returncode == 1
    assert p.stderr == "loom-opt: error: cannot write output file '/nonexistent/dir/x': No such file or directory\n"
    for args in (["-p", "defualt"], ["-p", "loom-tile{sizes=4"], ["-p", "loom-unroll{factor=0}"],
                 ["-p", "naive,cse"], ["-t", "llvm{"]):
        p = run("loom-opt", EXAMPLES / "matmul.mlir", *args)
        assert p.returncode == 1 and p.stdout == "", args
        lines = [ln for ln in p.stderr.splitlines() if not ln.startswith(("usage:", " "))]
        assert clean_error_lines("\n".join(lines)), (args, p.stderr)


def test_opt_unknown_pipeline_lists_the_known_ones():
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "defualt")
    assert p.returncode == 1
    assert p.stderr.startswith("loom-opt: error: invalid pass pipeline 'defualt': unknown pass or pipeline "
                               "'defualt'; did you mean 'default' or 'loom-default'? (named pipelines: naive, default; "
                               "Loom's passes: loom-bufferize, convert-loom-to-affine, ")
    assert "loom-vectorize" in p.stderr and "\n" not in p.stderr.rstrip("\n")
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "loom-bufferize,loom-tyle{sizes=2}")
    assert "unknown pass or pipeline 'loom-tyle'; did you mean 'loom-tile'" in p.stderr
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "zzzzzz")
    assert "unknown pass or pipeline 'zzzzzz' (named pipelines" in p.stderr  # nothing close: no guess


def test_opt_named_pipeline():
    """-p naive and -p default run the named pipelines (loom dialect -> llvm dialect)."""
    for name in ("naive", "default"):
        p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", name)
        assert p.returncode == 0, p.stderr
        assert "llvm.func @matmul(" in p.stdout and "loom." not in p.stdout and "affine." not in p.stdout


def test_opt_help_lists_loom_first():
    from passes import LOOM_PASSES

    p = run("loom-opt", "--help")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    loom_section, xdsl_section = out.index("Loom's passes"), out.index("xDSL's passes")
    assert loom_section < out.index("Named pipelines") < xdsl_section
    for flag in LOOM_PASSES:  # one entry per pass, with what it does, before any of xDSL's
        line = next(ln for ln in out.splitlines() if ln.startswith(f"  {flag}"))
        assert len(line.split()) > 2, line
        assert out.index(f"  {flag}") < xdsl_section
    assert "loom-tile{sizes=... op=... depth=0}  tile a perfect band" in out
    assert "  naive  loom-bufferize, convert-loom-to-affine" in out
    assert out.index("apply-pdl") > xdsl_section and out.index("scf-for-loop-unroll") > xdsl_section


def test_opt_version():
    import llvmlite
    import xdsl  # noqa: F401
    from importlib.metadata import version
    from llvmlite import binding

    p = run("loom-opt", "--version")
    assert p.returncode == 0, p.stderr
    llvm = ".".join(map(str, binding.llvm_version_info))
    assert p.stdout.splitlines() == [f"loom-opt (Loom) {version('loomir')}", f"xDSL {version('xdsl')}",
                                     f"LLVM {llvm} (llvmlite {llvmlite.__version__})"]


def test_opt_time_passes():
    p = run("loom-opt", EXAMPLES / "matmul.mlir", "-p", "loom-bufferize,convert-loom-to-affine", "--time-passes")
    assert p.returncode == 0, p.stderr
    import re

    assert re.fullmatch(r"loom-bufferize: \d+\.\d{3} s\nconvert-loom-to-affine: \d+\.\d{3} s\n", p.stderr), p.stderr
