"""The README's Python example runs as written."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_readme_python_example(monkeypatch):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    monkeypatch.chdir(ROOT)
    exec(compile(blocks[0], "README.md", "exec"), {})
    assert os.getcwd() == str(ROOT)
