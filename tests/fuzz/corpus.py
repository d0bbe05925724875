"""The fuzzer's seeds and its view of MLIR text as tokens.

Seeds are the lit corpus (tests/lit/**/*.mlir, one seed per `// -----` chunk, comment
lines dropped: RUN and CHECK lines are not input) and the examples (examples/*.mlir).
Each seed keeps the pipelines its file's RUN lines pass to `-p`, so that affine-level
inputs meet the passes written for them. Seeds are sorted shortest first, so that
hypothesis shrinks a failure toward the smallest seed that shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Seed:
    name: str  # path relative to the repository, with the chunk number for lit files
    text: str
    pipelines: tuple[str, ...]  # the `-p` arguments of its file's RUN lines
    refused: bool = False  # its file is (partly) input Loom must refuse: a `RUN: not` line

    @property
    def loom_level(self) -> bool:
        """Loom ops only (no loops yet), from a file of valid input: what compile() takes and
        the numpy reference checks."""
        if self.refused:
            return False
        return bool(re.search(r"\bloom\.(matmul|conv2d|add|mul|relu)\b", self.text)) and not re.search(
            r"\b(affine|scf|cf|arith|math|memref|vector|llvm)\.", self.text)


_RUN_PIPELINE = re.compile(r"-p\s+(?:'([^']*)'|(\S+))")


def _run_pipelines(text: str) -> tuple[str, ...]:
    found = []
    for line in text.splitlines():
        if "RUN:" in line:
            found += [quoted or bare for quoted, bare in _RUN_PIPELINE.findall(line)]
    return tuple(dict.fromkeys(found))


def _strip_comments(chunk: str) -> str:
    return "\n".join(ln for ln in chunk.splitlines() if not ln.lstrip().startswith("//")).strip() + "\n"


@cache
def seeds() -> tuple[Seed, ...]:
    """Every seed of the corpus, shortest first."""
    found = []
    for path in sorted((ROOT / "tests" / "lit").rglob("*.mlir")):
        if "Output" in path.parts:  # lit's scratch directory
            continue
        text = path.read_text()
        pipelines = _run_pipelines(text)
        for i, chunk in enumerate(re.split(r"^// -----.*$", text, flags=re.M)):
            body = _strip_comments(chunk)
            if body.strip():
                found.append(Seed(f"{path.relative_to(ROOT)}#{i}", body, pipelines, "RUN: not " in text))
    for path in sorted((ROOT / "examples").glob("*.mlir")):
        found.append(Seed(str(path.relative_to(ROOT)), _strip_comments(path.read_text()), ()))
    return tuple(sorted(found, key=lambda s: (len(s.text), s.name)))


@cache
def corpus_pipelines() -> tuple[str, ...]:
    """Every pipeline the lit corpus runs, for the pipeline mutator to start from."""
    return tuple(sorted({p for s in seeds() for p in s.pipelines}))


# --------------------------------------------------------------------------------------
# Tokens

#: a token's kind -> its pattern, tried in this order
_TOKEN_PATTERNS = [
    ("space", r"\s+|//[^\n]*"),
    ("string", r'"(?:[^"\\\n]|\\.)*"'),
    ("ssa", r"%[\w$.-]+(?:#\d+)?"),
    ("symbol", r"@[\w$.-]+"),
    ("block", r"\^[\w$.-]+"),
    ("bracketed", r"(?:tensor|memref|vector|array|dense|strided)<"),  # to the matching '>'
    ("number", r"-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"),
    ("word", r"[A-Za-z_][\w.$-]*"),
    ("punct", r"->|::|\S"),
]
_TOKEN = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in _TOKEN_PATTERNS))


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


def _close_bracket(text: str, start: int) -> int:
    """The index after the '>' that closes the '<' just before `start` ('->' inside an
    affine map is not a bracket)."""
    depth, i = 1, start
    while i < len(text) and depth:
        if text.startswith("->", i):
            i += 2
            continue
        depth += {"<": 1, ">": -1}.get(text[i], 0)
        i += 1
    return i


def tokenize(text: str) -> list[Token]:
    """MLIR text as tokens; a shaped type (layout included), an `array<...>` or a
    `dense<...>` is one token. `"".join(t.text for t in tokenize(s)) == s` for every s."""
    tokens, i = [], 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        kind, end = m.lastgroup, m.end()
        if kind == "bracketed":
            end = _close_bracket(text, end)
        tokens.append(Token(kind, text[i:end]))
        i = end
    return tokens


def untokenize(tokens: list[Token]) -> str:
    return "".join(t.text for t in tokens)
