"""The layers run one way, `tools -> compiler -> passes -> dialects`, and no two files of
Loom import each other, directly or through others (imports inside functions count too).
The contracts are import-linter's, in pyproject.toml ([tool.importlinter]); this suite runs
them, and looks for a cycle between any two files itself (a cycle through a package's
`__init__` is one too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tools", "compiler", "passes", "dialects")


def test_import_linter_contracts_are_kept():
    run = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
                          "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    sys.path.insert(0, str(ROOT))
    try:
        return grimp.build_graph(*PACKAGES, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))


def test_no_two_files_import_each_other(graph):
    """Each import a -> b with a path back from b to a is a cycle; the message names one path."""
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                cycles.append(" -> ".join((importer, *back)))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
