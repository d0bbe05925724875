"""The documentation site (docs/, mkdocs.yml): the pass reference is what the passes say
now, the Python examples run as written, the paths the pages name exist, and the site
builds without a warning (`mkdocs build --strict`, where mkdocs is installed: the `docs`
extra)."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest
from test_readme import README, ROOT, python_blocks, run_block

from tools import pass_reference

DOCS = ROOT / "docs"
#: the pages written by hand (the pass reference is generated from the passes' docstrings)
PAGES = sorted(p for p in DOCS.rglob("*.md") if p != pass_reference.PAGE)
BLOCKS = [(page, i) for page in PAGES for i in range(len(python_blocks(page)))]


def test_pass_reference_is_current():
    """docs/passes.md is what tools/pass_reference.py renders from the passes as they are."""
    assert pass_reference.PAGE.read_text() == pass_reference.render(), (
        "docs/passes.md is stale: run python -m tools.pass_reference")


@pytest.mark.parametrize(("page", "index"), BLOCKS, ids=[f"{p.relative_to(DOCS)}-{i + 1}" for p, i in BLOCKS])
def test_docs_python_example(page, index, monkeypatch):
    run_block(python_blocks(page)[index], f"{page.relative_to(ROOT)}, python block {index + 1}", monkeypatch)


def test_named_paths_exist():
    """Every file or folder of the project that a page or the README names in backquotes
    (`compiler/jit/pool.py`) is there: the pages follow the code when it moves."""
    named = {(page.name, path.rstrip("/"))
             for page in [README, *PAGES]
             for path in re.findall(r"`((?:dialects|passes|compiler|tools|tests|examples|docs)/[\w./-]*)`",
                                    page.read_text())}
    assert not sorted((page, path) for page, path in named if not (ROOT / path).exists())


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
                    reason="mkdocs and mkdocs-material are not installed (pip install -e '.[docs]')")
def test_site_builds_without_warnings(tmp_path):
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                         check=False, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stderr
    assert "WARNING" not in run.stderr
    assert (tmp_path / "passes" / "index.html").exists()
