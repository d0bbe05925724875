"""A fuzzer of the disk cache's entries (compiler/jit/disk_cache.py) and of the object files
in them (compiler/jit/loader.py): no entry, however broken or forged, may crash or hang
the process that reads it, or raise anything but a rejection.

Real entries are made first (a small kernel, a parallel matmul through the buffer pool,
the pool's own code). Each case is one of them changed:

- as a file: a bit flipped anywhere, truncated, bytes appended, another entry's file
  under its name. The checksum or the key refuses each: it must be rejected.
- as a whole, checksummed entry (what only a forger writes): a field of the object's ELF
  header, of a section header, a symbol or a relocation set to another value; a bit of
  those tables, or of anything in the object, flipped; the object truncated or another
  entry's; a field of the entry's JSON header replaced. It must be rejected, or loaded
  without harm to the process (the loader reads the object in Python and checks every
  table first: it never writes outside its own mapping, and LLVM never sees an entry).

An unchanged entry must load and compute the right result. Every rejection comes with a
CacheWarning. The cases run in batches, each in a process of its own that reports each
case as it ends: a batch that dies or hangs names its case, and the rest run in a new
process. The default run is a fixed sample (tests/conftest.py: derandomized, 20
batches); the long run is `HYPOTHESIS_PROFILE=long pytest tests/test_cache_fuzz.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from kernels import matmul
from targets import TARGETS

from compiler.jit import disk_cache as cache
from compiler.jit import loader

ROOT = Path(__file__).parent.parent
TESTS = Path(__file__).parent
#: a plan (every field pinned) whose matmul packs through the buffer pool on threads
PLANNED = f"{TARGETS['avx512']},threads=4"
RELU = ("func.func @k(%a: tensor<300xf32>) -> tensor<300xf32> {\n  %r = loom.relu %a : tensor<300xf32>\n"
        "  func.return %r : tensor<300xf32>\n}\n")
MM = matmul((256, 256), (256, 256), (256, 256), np.float32)
BATCH = 40

#: compile the kernels (argv[1]: a JSON list of sources) with the disk cache on
_MAKE = """
import json, sys
import compiler
from compiler.jit.disk_cache import disk_cache

for source in json.loads(sys.argv[1]):
    compiler.compile(source)
print(json.dumps({"edited": not disk_cache.fingerprint().sources.unchanged()}))
"""

#: read the pool's real entry and the cases from stdin (JSON), load the pool's code from
#: that entry first (the kernels' calls to the pool go to it, whatever the cases file
#: under its key later), then file each case's entry under its key and load it as the
#: cache does; one JSON line per case, printed as it ends
_WORKER = """
import json, sys, traceback, warnings
import numpy as np
from compiler import driver  # (installs the pool)
from compiler.jit import pool
from compiler.jit.disk_cache import CacheWarning, disk_cache

folder = disk_cache.folder()
work = json.loads(sys.stdin.read())
(folder / (work["pool"]["key"] + ".loom")).write_bytes(open(work["pool"]["file"], "rb").read())
pool.address("loom_take")
for case in work["cases"]:
    (folder / (case["key"] + ".loom")).write_bytes(open(case["file"], "rb").read())
    disk_cache.reset()
    result = {"i": case["i"]}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if case["kind"] == "kernel":
                loaded = disk_cache.load(case["key"])
            else:
                loaded = disk_cache.load_runtime(case["key"])
        result["outcome"] = "rejected" if loaded is None else "loaded"
        result["warned"] = any(issubclass(w.category, CacheWarning) for w in caught)
        if loaded is not None and case["check"] == "relu":
            x = np.linspace(-3, 3, 300, dtype=np.float32)
            result["right"] = bool((loaded(x) == np.maximum(x, 0)).all())
        elif loaded is not None and case["check"] == "matmul":
            rng = np.random.default_rng(0)
            a, b = (rng.integers(-4, 5, (256, 256)).astype(np.float32) for _ in range(2))
            result["right"] = bool((loaded(a, b) == a @ b).all())
    except Exception:
        result["outcome"] = "exception"
        result["error"] = traceback.format_exc()[-2000:]
    print(json.dumps(result), flush=True)
"""


def _environment(folder: Path) -> dict:
    environment = {**os.environ, "LOOM_CACHE_DIR": str(folder), "LOOM_TARGET": PLANNED,
                   "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}"}
    environment.pop("LOOM_CACHE_MAX_BYTES", None)
    return environment


class Entry:
    """A real entry: its key, kind and bytes, and where the tables of its object lie."""

    def __init__(self, path: Path):
        self.key, self.data = path.stem, path.read_bytes()
        self.header, self.sections = cache.decode(self.key, self.data)
        self.kind = self.header["kind"]
        self.check = None if self.kind == "runtime" else "matmul" if self.header["entry"] == "mm" else "relu"
        self.obj = self.sections["object"]
        parsed = loader._Object(self.obj)
        shoff = int.from_bytes(self.obj[0x28:0x30], "little")
        self.section_table = [shoff + i * 64 for i in range(len(parsed.sections))]
        symtab = next(s for s in parsed.sections if s[1] == loader._SHT_SYMTAB)
        self.symbols = list(range(symtab[4], symtab[4] + symtab[5], 24))
        relas = [s for s in parsed.sections if s[1] == loader._SHT_RELA]
        self.relocations = [at for s in relas for at in range(s[4], s[4] + s[5], 24)]
        tables = [s for s in parsed.sections if s[1] in (loader._SHT_SYMTAB, loader._SHT_STRTAB, loader._SHT_RELA)]
        self.metadata = [(0, 64), (shoff, shoff + 64 * len(parsed.sections)), *((s[4], s[4] + s[5]) for s in tables)]

    def sealed(self, obj: bytes | None = None, **header) -> bytes:
        """A whole, checksummed entry under this key: its header with `header`'s fields
        replaced, and `obj` for its object."""
        fields = {k: v for k, v in self.header.items() if k not in ("format", "key", "sections")}
        return cache.encode(self.key, {**fields, **header}, {**self.sections, "object": self.obj if obj is None else obj})


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> list[Entry]:
    """The real entries: a small kernel, a parallel matmul through the pool, the pool."""
    folder = tmp_path_factory.mktemp("made")
    done = subprocess.run([sys.executable, "-c", _MAKE, json.dumps([RELU, MM])], capture_output=True, text=True,
                          env=_environment(folder), timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    if json.loads(done.stdout.strip().splitlines()[-1])["edited"]:
        pytest.skip("Loom's sources were edited while the entries were made")
    found = [Entry(p) for p in sorted((folder / "kernels").glob("*.loom"))]
    assert sorted(e.check or e.kind for e in found) == ["matmul", "relu", "runtime"]
    return found


# --------------------------------------------------------------------------- mutations

#: (offset, bytes) of each field: the ELF header's (its identification byte by byte),
#: a section header's, a symbol's, a relocation's
ELF_HEADER = [*((i, 1) for i in range(4, 16)), (16, 2), (18, 2), (20, 4), (24, 8), (32, 8), (40, 8), (48, 4),
              (52, 2), (54, 2), (56, 2), (58, 2), (60, 2), (62, 2)]
SECTION = [(0, 4), (4, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 4), (44, 4), (48, 8), (56, 8)]
SYMBOL = [(0, 4), (4, 1), (5, 1), (6, 2), (8, 8), (16, 8)]
RELOCATION = [(0, 8), (8, 4), (12, 4), (16, 8)]
#: what a field is set to: a value (cut to the field's width) or the old one moved
values = st.one_of(
    st.tuples(st.just("="), st.sampled_from([0, 1, 2, 3, 8, 62, 0x40, 0x7F, 0x80, 0xFF, 0xFFFF, 0xFF00, 0xFFF1,
                                             0x7FFFFFFF, 0xFFFFFFFF, 1 << 63, (1 << 64) - 1]) | st.integers(0, (1 << 64) - 1)),
    st.tuples(st.just("+"), st.integers(-64, 64)),
)
JSON_VALUES = [None, 0, -1, 1 << 70, 1e308, "x", True, [], {}, [1, 2], {"k": "k"}]
position = st.integers(0, 1 << 32)
mutations = st.one_of(
    st.tuples(st.just("file: a bit flipped"), position, st.integers(0, 7)),
    st.tuples(st.just("file: truncated"), position),
    st.tuples(st.just("file: bytes appended"), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("file: another entry's"), st.integers(1, 2)),
    st.tuples(st.just("ELF header field"), st.integers(0, len(ELF_HEADER) - 1), values),
    st.tuples(st.just("section header field"), position, st.integers(0, len(SECTION) - 1), values),
    st.tuples(st.just("symbol field"), position, st.integers(0, len(SYMBOL) - 1), values),
    st.tuples(st.just("relocation field"), position, st.integers(0, len(RELOCATION) - 1), values),
    st.tuples(st.just("a bit of the tables flipped"), position, st.integers(0, 7)),
    st.tuples(st.just("a bit of the object flipped"), position, st.integers(0, 7)),
    st.tuples(st.just("object truncated"), position),
    st.tuples(st.just("another entry's object"), st.integers(1, 2)),
    st.tuples(st.just("JSON header field"), position, st.sampled_from(JSON_VALUES)),
)


def _set(data: bytes, at: int, width: int, value: tuple) -> bytes:
    old = int.from_bytes(data[at : at + width], "little")
    new = value[1] if value[0] == "=" else old + value[1]
    return data[:at] + (new % (1 << 8 * width)).to_bytes(width, "little") + data[at + width :]


def _flip(data: bytes, at: int, bit: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1 << bit]) + data[at + 1 :]


def forge(entries: list[Entry], which: int, mutation: tuple) -> tuple[bytes, bool]:
    """Entry `which` changed by `mutation`: its bytes, and whether the file is whole (its
    checksum and key right: only a forger writes such a file) where it differs."""
    entry, (kind, *args) = entries[which], mutation
    obj = entry.obj
    if kind == "file: a bit flipped":
        return _flip(entry.data, args[0] % len(entry.data), args[1]), False
    if kind == "file: truncated":
        return entry.data[: args[0] % len(entry.data)], False
    if kind == "file: bytes appended":
        return entry.data + args[0], False
    if kind == "file: another entry's":
        return entries[(which + args[0]) % len(entries)].data, False
    if kind == "JSON header field":
        names = sorted(k for k in entry.header if k not in ("format", "key", "sections"))
        return entry.sealed(**{names[args[0] % len(names)]: args[1]}), True
    if kind == "ELF header field":
        obj = _set(obj, *ELF_HEADER[args[0]], args[1])
    elif kind == "section header field":
        at, width = SECTION[args[1]]
        obj = _set(obj, entry.section_table[args[0] % len(entry.section_table)] + at, width, args[2])
    elif kind == "symbol field":
        at, width = SYMBOL[args[1]]
        obj = _set(obj, entry.symbols[args[0] % len(entry.symbols)] + at, width, args[2])
    elif kind == "relocation field":
        at, width = RELOCATION[args[1]]
        places = entry.relocations or entry.symbols  # (an object without relocations: its symbols)
        obj = _set(obj, places[args[0] % len(places)] + at, width, args[2])
    elif kind == "a bit of the tables flipped":
        at = args[0] % sum(end - start for start, end in entry.metadata)
        for start, end in entry.metadata:
            if at < end - start:
                obj = _flip(obj, start + at, args[1])
                break
            at -= end - start
    elif kind == "a bit of the object flipped":
        obj = _flip(obj, args[0] % len(obj), args[1])
    elif kind == "object truncated":
        obj = obj[: args[0] % len(obj)]
    elif kind == "another entry's object":
        obj = entries[(which + args[0]) % len(entries)].obj
    return entry.sealed(obj), True


def run_cases(cases: list[dict], pool: dict, folder: Path) -> dict[int, dict]:
    """Each case's result, from worker processes (`pool`: the pool's real entry, its key
    and file): a case whose worker died or hung is a `crash` or a `hang` (its stderr
    kept), and the cases after it run in a new one."""
    results: dict[int, dict] = {}
    todo = cases
    while todo:
        worker = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=_environment(folder))
        try:
            out, err = worker.communicate(json.dumps({"pool": pool, "cases": todo}), timeout=60 + 2 * len(todo))
            ended = "crash"
        except subprocess.TimeoutExpired:
            worker.kill()
            out, err = worker.communicate()
            ended = "hang"
        for line in out.splitlines():
            result = json.loads(line)
            results[result["i"]] = result
        rest = [case for case in todo if case["i"] not in results]
        if rest:
            results[rest[0]["i"]] = {"outcome": ended, "returncode": worker.returncode, "error": err[-2000:]}
            rest = rest[1:]
        todo = rest
    return results


def fuzz(entries: list[Entry], batch: list[tuple[int, tuple]], folder: Path) -> tuple[list[str], Counter]:
    """Run `batch` ((entry, mutation) pairs) after each unchanged entry: what went wrong,
    and how many cases of each kind of mutation ended how."""
    cases, expect = [], {}
    (folder / "cases").mkdir(parents=True, exist_ok=True)
    plan = [(i, ("unchanged",)) for i in range(len(entries))] + [(w % len(entries), m) for w, m in batch]
    for n, (which, mutation) in enumerate(plan):
        entry = entries[which]
        data, whole = (entry.data, True) if mutation == ("unchanged",) else forge(entries, which, mutation)
        unchanged = data == entry.data
        file = folder / "cases" / f"{n}.loom"
        file.write_bytes(data)
        cases.append({"i": n, "key": entry.key, "kind": entry.kind, "file": str(file),
                      "check": entry.check if unchanged else None})
        expect[n] = (mutation, entry.check or entry.kind, "loaded" if unchanged else None if whole else "rejected")
    (runtime,) = [e for e in entries if e.kind == "runtime"]
    (folder / "cases" / "pool.loom").write_bytes(runtime.data)
    results = run_cases(cases, {"key": runtime.key, "file": str(folder / "cases" / "pool.loom")}, folder)
    shutil.rmtree(folder)  # (a case is its mutation, which hypothesis reports: the files are not kept)
    problems = []
    for n, (mutation, name, wanted) in expect.items():
        r = results[n]
        if r["outcome"] not in ("loaded", "rejected"):
            problems.append(f"{name}, {mutation}: {r['outcome']} ({r.get('returncode')}) {r.get('error', '')}")
        elif wanted is not None and r["outcome"] != wanted:
            problems.append(f"{name}, {mutation}: {r['outcome']}, expected {wanted}")
        elif r["outcome"] == "rejected" and not r["warned"]:
            problems.append(f"{name}, {mutation}: rejected without a warning")
        elif r.get("right") is False:
            problems.append(f"{name}, {mutation}: loaded, computes a wrong result")
    counts = Counter((expect[n][0][0], r["outcome"]) for n, r in results.items())
    return problems, counts


@given(batch=st.lists(st.tuples(st.integers(0, 2), mutations), min_size=BATCH, max_size=BATCH))
def test_no_entry_crashes_or_hangs_the_process_that_reads_it(made, tmp_path_factory, batch):
    problems, counts = fuzz(made, batch, tmp_path_factory.mktemp("fuzz"))
    note(str(dict(counts)))
    assert not problems, "\n".join(problems)
