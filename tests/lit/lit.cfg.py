# lit configuration for Loom's FileCheck tests: tests/lit/<pass-flag>/*.mlir
import os
import shutil
import sys

import lit.formats

config.name = "loom"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, "Output")

# Use the tools of the Python that runs lit (the one Loom is installed in).
bindir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "")])
# LOOM_TARGET: the target the passes plan for (passes/support/target.py); tests/test_lit.py runs
# the suite once per kind of x86-64 host with it set. A test whose output depends on the
# target pins its own in its RUN lines (`env LOOM_TARGET=...`).
for var in ("HOME", "TMPDIR", "PYTHONPATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "LOOM_TARGET"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

for tool in ("loom-opt", "filecheck"):
    if shutil.which(tool, path=config.environment["PATH"]) is None:
        lit_config.fatal(f"{tool} not found on PATH: pip install -e '.[test]'")
config.substitutions.append(("%python", sys.executable))
