"""Hypothesis strategies that turn a seed into a bad input: mutations of MLIR text and of
pass pipelines, and the case that bundles them.

A mutation is a tuple such as `("number", 3, "99999999999")`: the kind, which candidate
token (an index taken modulo the number of candidates, so any integer applies to any
text), and the replacement. Strategies draw the replacement from short lists of values
known to break things (0, -1, a prime, huge, f16, a missing tag), and every list starts
with the most ordinary value, so that a failing case shrinks to a readable one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import reduce

from hypothesis import strategies as st

from passes import LOOM_PASSES

from .corpus import Token, corpus_pipelines, seeds, tokenize, untokenize

NUMBERS = ("0", "1", "-1", "2", "7", "13", "64", "4096", "-8", "99999999999")
DIMS = ("1", "0", "2", "3", "7", "17", "?", "99999999999")
ELEMENT_TYPES = ("f64", "f32", "f16", "bf16", "i32", "index", "f80", "f128", "i1")
TAGS = ('"matmul"', '"conv2d"', '"add"', '"relu"', '"matmul.init"', '"nosuch"', '""')
ATTR_VALUES = (1, 0, 2, 3, -1, 99999999999)

#: what the pipeline mutator puts in: every Loom pass, a few of xDSL's, typos
PASS_NAMES = (*LOOM_PASSES, "convert-scf-to-cf", "cse", "canonicalize", "loom-tiles", "defualt", "loom_tile", "")
PASSES = (
    "loom-tile{sizes=4,4,4}", "loom-interchange{order=1,0,2}", "loom-unroll{factor=4}",
    "loom-unroll-jam{factors=2,2}", "loom-hoist", "loom-vectorize{width=8}", "loom-vectorize",
    "loom-pack{operand=1 level=1}", "loom-peel{sizes=6,16}", "loom-prefetch", "loom-default",
    "loom-naive", "loom-bufferize", "convert-loom-to-affine", "loom-lower-affine", "convert-scf-to-cf",
    "loom-convert-to-llvm", "cse", "canonicalize",
)
OPTION_NAMES = ("sizes", "factors", "factor", "order", "op", "depth", "width", "operand", "level", "panel",
                "distance", "locality", "skip", "bogus")
OPTION_VALUES = ("1", "0", "-1", "2", "3", "99999999999", "2,2", "4,4,4,4,4", "0,0", "1,0,2", "", "x",
                 "matmul", "nosuch", "matmul.init", "pack,hoist")
#: the pipelines every case may start its mutated pipeline from, besides its seed's
STANDARD_PIPELINES = (
    "loom-naive", "loom-default", "loom-bufferize,convert-loom-to-affine,loom-tile{sizes=4,4,4},loom-vectorize",
    "loom-bufferize,convert-loom-to-affine,loom-unroll-jam{factors=2,2},loom-hoist",
)

#: LOOM_TARGET for the case: the host, an AVX2-like and an AVX-512-like machine
TARGETS = ("", "vector_bits=256,vector_registers=16", "vector_bits=512,vector_registers=32")

index = st.integers(0, 1 << 16)  # a candidate, modulo their count: shrinks toward the first


# --------------------------------------------------------------------------------------
# Text mutations: (kind, *args) -> a function of the text


def _nth(tokens: list[Token], i: int, accept) -> int | None:
    """The position of the i-th token (modulo their count) for which accept(token) holds."""
    where = [k for k, t in enumerate(tokens) if accept(t)]
    return where[i % len(where)] if where else None


def _replace(text: str, i: int, accept, change) -> str:
    """Replace the i-th accepted token by change(its text)."""
    tokens = tokenize(text)
    k = _nth(tokens, i, accept)
    if k is not None:
        tokens[k] = Token(tokens[k].kind, change(tokens[k].text))
    return untokenize(tokens)


def _solid(t: Token) -> bool:
    return t.kind != "space"


def _delete_token(text, i):
    tokens = tokenize(text)
    k = _nth(tokens, i, _solid)
    return untokenize(tokens[:k] + tokens[k + 1 :]) if k is not None else text


def _duplicate_token(text, i):
    return _replace(text, i, _solid, lambda s: f"{s} {s}")


def _swap_tokens(text, i, j):
    tokens = tokenize(text)
    a, b = _nth(tokens, i, _solid), _nth(tokens, j, _solid)
    if a is not None:
        tokens[a], tokens[b] = tokens[b], tokens[a]
    return untokenize(tokens)


def _lines(text, change):
    lines = text.splitlines()
    return "\n".join(change(lines)) + "\n" if lines else text


def _delete_line(text, i):
    return _lines(text, lambda ls: ls[: i % len(ls)] + ls[i % len(ls) + 1 :])


def _duplicate_line(text, i):
    return _lines(text, lambda ls: ls[: i % len(ls) + 1] + ls[i % len(ls) :])


def _move_line(text, i, j):
    """Move line i before line j: a use before its definition, an op out of its region."""
    def move(ls):
        line = ls.pop(i % len(ls))
        ls.insert(j % (len(ls) + 1), line)
        return ls
    return _lines(text, move)


def _number(text, i, value):
    return _replace(text, i, lambda t: t.kind == "number", lambda _: value)


_SHAPED = re.compile(r"^(tensor|memref|vector)<((?:[\d?]+x)*)([a-z]\w*)(.*)>$", re.S)


def _is_shaped(t: Token) -> bool:
    return t.kind == "bracketed" and bool(_SHAPED.match(t.text))


def _change_shaped(text, i, change):
    """Apply change(kind, dims, element, rest) -> (kind, dims, element, rest) to the i-th
    shaped type."""
    def rewrite(s):
        kind, dims, elt, rest = _SHAPED.match(s).groups()
        kind, dims, elt, rest = change(kind, dims.split("x")[:-1], elt, rest)
        return f"{kind}<{''.join(d + 'x' for d in dims)}{elt}{rest}>"
    return _replace(text, i, _is_shaped, rewrite)


def _element_type(text, i, elt):
    """A new element type, in a shaped type or a bare `f32`/`f64`."""
    def accept(t):
        return _is_shaped(t) or (t.kind == "word" and t.text in ELEMENT_TYPES)

    def change(s):
        m = _SHAPED.match(s)
        return f"{m[1]}<{m[2]}{elt}{m[4]}>" if m else elt
    return _replace(text, i, accept, change)


def _set_dim(text, i, j, dim):
    def change(kind, dims, elt, rest):
        if dims:
            dims[j % len(dims)] = dim
        return kind, dims, elt, rest
    return _change_shaped(text, i, change)


def _drop_dim(text, i, j):
    def change(kind, dims, elt, rest):
        if dims:
            del dims[j % len(dims)]
        return kind, dims, elt, rest
    return _change_shaped(text, i, change)


def _add_dim(text, i, j, dim):
    def change(kind, dims, elt, rest):
        dims.insert(j % (len(dims) + 1), dim)
        return kind, dims, elt, rest
    return _change_shaped(text, i, change)


def _tensor_memref(text, i):
    swap = {"tensor": "memref", "memref": "tensor", "vector": "vector"}
    return _change_shaped(text, i, lambda kind, dims, elt, rest: (swap[kind], dims, elt, rest))


def _strided(text, i, pitch):
    """Rows `pitch` times as long as the shape's (a strided<[..]> layout) for one memref
    type, wherever it occurs."""
    def change(s):
        kind, dims, elt, _ = _SHAPED.match(s).groups()
        dims = dims.split("x")[:-1]
        if kind != "memref" or len(dims) < 2 or not all(d.isdigit() for d in dims):
            return s
        strides, acc = [], 1
        for k, d in enumerate(reversed(dims)):
            strides.insert(0, acc)
            acc *= int(d) * (pitch if k == 0 else 1)
        return f"{kind}<{''.join(d + 'x' for d in dims)}{elt}, strided<[{', '.join(map(str, strides))}]>>"
    tokens = tokenize(text)
    k = _nth(tokens, i, _is_shaped)
    if k is None:
        return text
    old = tokens[k].text
    return untokenize([Token(t.kind, change(old)) if t.text == old else t for t in tokens])


def _every_dim(text, i, dim):
    """Change one extent everywhere: in every shaped type and every equal number (loop
    bounds), so that the shapes still agree and the program reaches the passes."""
    tokens = tokenize(text)
    extents = sorted({d for t in tokens if _is_shaped(t) for d in _SHAPED.match(t.text)[2].split("x")[:-1]})
    if not extents:
        return text
    old = extents[i % len(extents)]

    def change(t):
        if t.kind == "number" and t.text == old:
            return Token(t.kind, dim)
        if _is_shaped(t):
            kind, dims, elt, rest = _SHAPED.match(t.text).groups()
            dims = "".join((dim if d == old else d) + "x" for d in dims.split("x")[:-1])
            return Token(t.kind, f"{kind}<{dims}{elt}{rest}>")
        return t
    return untokenize([change(t) for t in tokens])


def _every_element_type(text, elt):
    """Change the element type of every shaped type and every bare f32/f64."""
    def change(t):
        if _is_shaped(t):
            m = _SHAPED.match(t.text)
            return Token(t.kind, f"{m[1]}<{m[2]}{elt}{m[4]}>")
        return Token(t.kind, elt) if t.kind == "word" and t.text in ("f32", "f64") else t
    return untokenize([change(t) for t in tokenize(text)])


def _attribute(text, i, values, dense):
    """New values for the i-th `array<i64: ...>` or `dense<...>`, written as either."""
    body = ", ".join(map(str, values))
    new = f"dense<[{body}]> : tensor<{len(values)}xi64>" if dense else f"array<i64: {body}>"
    return _replace(text, i, lambda t: t.text.startswith(("array<", "dense<")), lambda _: new)


def _string(text, i, value):
    return _replace(text, i, lambda t: t.kind == "string", lambda _: value)


def _ssa(text, i, j):
    """Replace an SSA name by another one of the text: an aliased or wrong operand, a use
    of an undefined or later value."""
    names = [t.text for t in tokenize(text) if t.kind == "ssa"]
    return _replace(text, i, lambda t: t.kind == "ssa", lambda s: names[j % len(names)]) if names else text


#: mutations that keep a program consistent (its shapes agree, its types match), so that
#: it reaches the passes, the JIT and the kernel with new extents, element types,
#: attribute values and operands
CONSISTENT_MUTATIONS = {
    "every_dim": (_every_dim, index, st.sampled_from(DIMS)),
    "every_element_type": (_every_element_type, st.sampled_from(ELEMENT_TYPES)),
    "number": (_number, index, st.sampled_from(NUMBERS)),
    "attribute": (_attribute, index, st.lists(st.sampled_from(ATTR_VALUES), max_size=4), st.booleans()),
    "string": (_string, index, st.sampled_from(TAGS)),
    "strided": (_strided, index, st.sampled_from((2, 3, 1))),
}
#: mutations that mostly break a program: the parser's and the verifiers' diagnostics,
#: dominance, regions
BREAKING_MUTATIONS = {
    "ssa": (_ssa, index, index),
    "element_type": (_element_type, index, st.sampled_from(ELEMENT_TYPES)),
    "set_dim": (_set_dim, index, index, st.sampled_from(DIMS)),
    "drop_dim": (_drop_dim, index, index),
    "add_dim": (_add_dim, index, index, st.sampled_from(DIMS)),
    "tensor_memref": (_tensor_memref, index),
    "delete_token": (_delete_token, index),
    "duplicate_token": (_duplicate_token, index),
    "swap_tokens": (_swap_tokens, index, index),
    "delete_line": (_delete_line, index),
    "duplicate_line": (_duplicate_line, index),
    "move_line": (_move_line, index, index),
}
TEXT_MUTATIONS = {**CONSISTENT_MUTATIONS, **BREAKING_MUTATIONS}


def _mutations(table: dict) -> st.SearchStrategy[tuple]:
    """(kind, *args) tuples, the args drawn from the strategies the table gives the kind."""
    return st.one_of(*(st.tuples(st.just(kind), *args) for kind, (_, *args) in table.items()))


def text_mutations(table: dict = TEXT_MUTATIONS) -> st.SearchStrategy[tuple]:
    return _mutations(table)


def mutate_text(text: str, mutation: tuple) -> str:
    kind, *args = mutation
    return TEXT_MUTATIONS[kind][0](text, *args)


# --------------------------------------------------------------------------------------
# Pipeline mutations, on the pipeline as a list of [name, [option, ...]]


def parse_pipeline(spec: str) -> list[list]:
    """`a{x=1 y=2,3},b` -> [["a", ["x=1", "y=2,3"]], ["b", []]] (loosely: bad input is the point)."""
    passes = []
    for name, opts in re.findall(r"([^,{}]*)(?:\{([^}]*)\})?(?:,|$)", spec):
        if name.strip() or opts:
            passes.append([name.strip(), opts.split()])
    return passes


def format_pipeline(passes: list[list]) -> str:
    return ",".join(name + (f"{{{' '.join(opts)}}}" if opts else "") for name, opts in passes)


def _option_value(passes, i, k, value):
    """A new value for the k-th option of pass i (an `op=` option if it has none)."""
    if passes:
        opts = passes[i % len(passes)][1]
        key = opts[k % len(opts)].split("=")[0] if opts else "op"
        _add_option(passes, i, key, value)
    return passes


def _add_option(passes, i, key, value):
    if passes:
        p = passes[i % len(passes)]
        p[1] = [o for o in p[1] if o.split("=")[0] != key] + [f"{key}={value}"]
    return passes


def _drop_option(passes, i, k):
    if passes and passes[i % len(passes)][1]:
        opts = passes[i % len(passes)][1]
        del opts[k % len(opts)]
    return passes


def _rename_pass(passes, i, name):
    if passes:
        passes[i % len(passes)][0] = name
    return passes


def _insert_pass(passes, i, text):
    k = i % (len(passes) + 1)
    return passes[:k] + parse_pipeline(text) + passes[k:]


def _drop_pass(passes, i):
    return passes[: i % len(passes)] + passes[i % len(passes) + 1 :] if passes else passes


def _swap_passes(passes, i, j):
    if passes:
        a, b = i % len(passes), j % len(passes)
        passes[a], passes[b] = passes[b], passes[a]
    return passes


PIPELINE_MUTATIONS = {
    "option_value": (_option_value, index, index, st.sampled_from(OPTION_VALUES)),
    "add_option": (_add_option, index, st.sampled_from(OPTION_NAMES), st.sampled_from(OPTION_VALUES)),
    "drop_option": (_drop_option, index, index),
    "rename_pass": (_rename_pass, index, st.sampled_from(PASS_NAMES)),
    "insert_pass": (_insert_pass, index, st.sampled_from(PASSES)),
    "drop_pass": (_drop_pass, index),
    "swap_passes": (_swap_passes, index, index),
}


def pipeline_mutations() -> st.SearchStrategy[tuple]:
    return _mutations(PIPELINE_MUTATIONS)


def mutate_pipeline(spec: str, mutation: tuple) -> str:
    kind, *args = mutation
    return format_pipeline(PIPELINE_MUTATIONS[kind][0](parse_pipeline(spec), *args))


# --------------------------------------------------------------------------------------
# Cases


@dataclass(frozen=True)
class Case:
    seed: str
    text: str
    mutations: tuple[tuple, ...]
    pipeline: str  # the mutated pipeline (loom-opt -p, and compile's schedule)
    to_llvm: bool  # run the mutated pipeline with -t llvm
    target: str = ""  # LOOM_TARGET, what loom-default plans for ("": the host)

    def describe(self) -> str:
        return (f"seed {self.seed}, mutations {list(self.mutations)}, pipeline {self.pipeline!r}"
                + (" -t llvm" if self.to_llvm else "") + (f", LOOM_TARGET={self.target}" if self.target else ""))


@st.composite
def cases(draw) -> Case:
    loom_level = [s for s in seeds() if s.loom_level]  # half the cases: what compile() and numpy check
    seed = draw(st.one_of(st.sampled_from(loom_level), st.sampled_from(seeds())))
    mutations = draw(st.lists(text_mutations(CONSISTENT_MUTATIONS), max_size=3))
    if draw(st.booleans()) or not mutations:  # about half the cases still verify
        mutations.append(draw(text_mutations(BREAKING_MUTATIONS)))
    base = draw(st.sampled_from(seed.pipelines + STANDARD_PIPELINES + corpus_pipelines()))
    pipeline_changes = draw(st.lists(pipeline_mutations(), max_size=3))
    return Case(
        seed=seed.name,
        text=reduce(mutate_text, mutations, seed.text),
        mutations=tuple(mutations),
        pipeline=reduce(mutate_pipeline, pipeline_changes, base),
        to_llvm=draw(st.booleans()),
        target=draw(st.sampled_from(TARGETS)),
    )
