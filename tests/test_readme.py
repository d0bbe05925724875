"""The README is a front page that stays one: at most 250 lines, with the two quick-start
commands as they are, links that lead somewhere, and Python examples that run as written (tests/test_docs.py runs
those of the documentation the same way)."""

import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"

QUICK_START = (
    "pip install -e . && loom-run examples/*.mlir --pipeline default --numpy",
    "pip install -e '.[test]' && pytest",
)


def python_blocks(path: Path) -> list[str]:
    """The ```python blocks of a Markdown page, each a program to run as written."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.DOTALL | re.MULTILINE)


def run_block(block: str, name: str, monkeypatch) -> None:
    """Run one block from the repository's root (its examples name files under it); a
    block that imports torch or torchvision needs them installed (the `torch` extra)."""
    for package in ("torch", "torchvision"):
        if re.search(rf"^import .*\b{package}\b", block, re.MULTILINE) and importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed (pip install -e '.[torch]')")
    monkeypatch.chdir(ROOT)
    exec(compile(block, name, "exec"), {})
    assert os.getcwd() == str(ROOT)


def test_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    for command in QUICK_START:
        assert command in text


def test_readme_links_lead_to_files():
    """The README's relative links (into docs/, mostly) name files that exist."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing


@pytest.mark.parametrize("index", range(len(python_blocks(README))))
def test_readme_python_example(index, monkeypatch):
    run_block(python_blocks(README)[index], f"README.md, python block {index + 1}", monkeypatch)
