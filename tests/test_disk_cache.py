"""The disk cache of compiled kernels (compiler/jit/disk_cache.py) and the loader of their machine
code (compiler/jit/loader.py).

- A kernel compiled in one process is found by the next, loaded in milliseconds (without
  LLVM) and computes exactly what a fresh compile does; its interface, IR texts, stages,
  remarks and assembly are the compiled kernel's.
- An entry that is truncated, corrupted, garbage, filed under another key (another
  version, CPU or options) is never loaded: the kernel is compiled again and the entry
  replaced. Processes filling one folder at the same time leave only whole entries.
- The key changes with anything the machine code depends on; `cache=False`, a timed
  compile, `loom-run --no-cache`, `LOOM_CACHE_MAX_BYTES=0` bypass the disk; a folder that
  cannot be used turns the disk cache off with a warning; the folder stays under its
  bound.

tests/conftest.py keeps the suite's disk cache off (and in a temporary folder); the
`disk` fixture turns it on in a folder of the test's own.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from kernels import conv2d_kernel, matmul
from targets import TARGETS

import compiler
from compiler.jit import disk_cache as cache
from compiler import driver
from compiler.jit import loader
from compiler.jit.disk_cache import CacheWarning, SourceState, disk_cache
from passes.support.diagnostics import LoomError
from compiler.measure.runner import random_inputs
from passes.support import session

ROOT = Path(__file__).parent.parent
TESTS = Path(__file__).parent

#: 256^3 f32 on the default pipeline: packs through the buffer pool, runs on libgomp's
#: team, returns a status (its temporaries may fail to allocate)
MM256 = matmul((256, 256), (256, 256), (256, 256), np.float32)

#: what the processes these tests start plan for (`LOOM_TARGET`, every field pinned, the
#: threads too): a plan that packs through the buffer pool, whose entry the tests count.
#: The host's own plan may not: on 2 cores a 128^3 matmul's panels stay under
#: `MIN_BYTES` and come from malloc, and no pool entry is written.
PLANNED = f"{TARGETS['avx512']},threads=4"


def relu(n: int, name: str = "k") -> str:
    """A kernel that compiles in a fraction of a second, one per (n, name)."""
    return (f"func.func @{name}(%a: tensor<{n}xf32>) -> tensor<{n}xf32> {{\n"
            f"  %r = loom.relu %a : tensor<{n}xf32>\n  func.return %r : tensor<{n}xf32>\n}}\n")


#: the checks that Loom's sources did not change under the process (the `disk` fixture
#: turns them off: the tree may be edited while the suite runs; they have tests of their own)
SOURCES_UNCHANGED = SourceState.unchanged
SOURCES_AS_IMPORTED = SourceState.as_imported


def entries(folder: Path) -> list[Path]:
    """The entries filed in `folder`."""
    return sorted(folder.glob("*.loom"))


def kernel_entry_of(folder: Path, source: str, **options) -> Path:
    """The entry compile(source, **options) files its kernel under."""
    return folder / (disk_cache.kernel_key(*driver._cache_key(source, **options)) + ".loom")


def from_memory_then_disk(source: str, **options):
    """compile() once (a real compile, filed on disk), then again with nothing in memory."""
    fresh = compiler.compile(source, **options)
    driver.kernel_cache.clear()
    return fresh, compiler.compile(source, **options)


def outputs(kernel, seed: int = 0) -> list[np.ndarray]:
    """What `kernel` computes on seeded inputs: its results, then the arguments it writes."""
    arrays = random_inputs(kernel.inputs, seed)
    got = kernel(*arrays)
    results = [] if got is None else list(got) if isinstance(got, tuple) else [got]
    return results + [a for a, s in zip(arrays, kernel.inputs) if s.in_place]


def run_python(code: str, cache_folder: Path, *args) -> dict:
    """Run `code` in a new interpreter with the disk cache on in `cache_folder`, planning
    for `PLANNED`; the JSON its last line prints."""
    environment = {**os.environ, "LOOM_CACHE_DIR": str(cache_folder), "LOOM_TARGET": PLANNED,
                   "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}"}
    environment.pop("LOOM_CACHE_MAX_BYTES", None)
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          env=environment, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- a new process

#: compile argv[1]'s kernel, check it against numpy in float64
_COMPILE = """
import json, sys
import numpy as np
import compiler
from compiler.jit.disk_cache import disk_cache

source = open(sys.argv[1]).read()
kernel = compiler.compile(source)
rng = np.random.default_rng(1)
a, b = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
want = a.astype(np.float64) @ b
error = float(np.abs(kernel(a, b) - want).max())
bound = 4 * 256 * float(np.finfo(np.float32).eps) * float(np.abs(want).max())  # 4*K*eps*max|ref|
sources = disk_cache.fingerprint().sources
print(json.dumps({"error": error, "bound": bound,
                  "stats": dict(disk_cache.stats), "module": type(kernel._module).__name__,
                  "objects": bool(kernel.objects_address),
                  "llvm": "llvmlite.binding" in sys.modules, "sources": sources.digest,
                  "xdsl": sorted(m for m in sys.modules if m.startswith("xdsl.")),
                  "edited": not sources.unchanged()}))
"""


def skip_if_edited(*runs: dict) -> None:
    """Skip a test whose processes ran different sources of Loom, or saw them edited
    (the tree was edited while it ran: no entry of one can be found by another, and a
    process that saw the edit stores nothing)."""
    if len({r["sources"] for r in runs}) > 1 or any(r["edited"] for r in runs):
        pytest.skip("Loom's sources were edited while the test ran")


def test_a_new_process_finds_the_kernel_without_llvm(tmp_path):
    """A hit in a new process loads no LLVM and no xDSL at all (what makes it cost
    milliseconds: `loom-bench --compile` times it), and its kernel computes the right
    product, called through the function that takes the arrays by address
    (kernel.objects_wrapper)."""
    source = tmp_path / "mm.mlir"
    source.write_text(MM256)
    folder = tmp_path / "cache"
    cold = run_python(_COMPILE, folder, source)
    skip_if_edited(cold)
    assert cold["stats"] == {"miss": 2, "stored": 2} and cold["module"] == "JITModule"  # the kernel and the pool
    warm = [run_python(_COMPILE, folder, source) for _ in range(3)]
    skip_if_edited(cold, *warm)
    for w in warm:
        assert w["stats"] == {"hit": 2} and w["module"] == "LoadedModule" and not w["llvm"] and not w["xdsl"]
        assert w["error"] <= w["bound"] and w["objects"]


def test_a_broken_entry_of_the_pool_is_rebuilt(tmp_path):
    """The buffer pool's machine code (one copy per process, compiler/jit/pool.py) is kept
    on disk like a kernel's, and rebuilt like one."""
    source = tmp_path / "mm.mlir"
    source.write_text(MM256)
    folder = tmp_path / "cache"
    cold = run_python(_COMPILE, folder, source)
    skip_if_edited(cold)
    (pool_entry,) = [p for p in entries(folder / "kernels") if b'"kind":"runtime"' in p.read_bytes()[:200]]
    pool_entry.write_bytes(pool_entry.read_bytes()[:-1])
    warm = run_python(_COMPILE, folder, source)
    skip_if_edited(cold, warm)
    assert warm["stats"] == {"hit": 1, "rejected": 1, "stored": 1} and warm["module"] == "LoadedModule"
    assert warm["error"] <= warm["bound"]
    cache.decode(pool_entry.stem, pool_entry.read_bytes())  # whole again


# --------------------------------------------------------------------------- round trips

CONV, _, _ = conv2d_kernel((1, 8, 16, 16, 16, 3, 3, (1, 1), (1, 1), (1, 1)), np.float32)
BIAS_RELU_F64 = """func.func @ew(%a: tensor<33x65xf64>, %b: tensor<65xf64>) -> tensor<33x65xf64> {
  %s = loom.add %a, %b : (tensor<33x65xf64>, tensor<65xf64>) -> tensor<33x65xf64>
  %r = loom.relu %s : tensor<33x65xf64>
  func.return %r : tensor<33x65xf64>
}"""
TWO_RESULTS = """func.func @two(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>) {
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %r = loom.relu %c : tensor<4x5xf32>
  func.return %c, %r : tensor<4x5xf32>, tensor<4x5xf32>
}
func.func @other(%a: tensor<2xf32>) -> tensor<2xf32> {
  %r = loom.relu %a : tensor<2xf32>
  func.return %r : tensor<2xf32>
}"""
IN_PLACE_STRIDED = """func.func @t(%a: memref<4x4xf32, strided<[8, 1], offset: 2>>, %b: memref<4x4xf32>,
                   %c: memref<4x4xf32, strided<[1, 4]>>) {
  loom.matmul ins(%a, %b : memref<4x4xf32, strided<[8, 1], offset: 2>>, memref<4x4xf32>)
              outs(%c : memref<4x4xf32, strided<[1, 4]>>)
  func.return
}"""

ROUND_TRIPS = {
    "matmul 256 (pool, threads, status)": (MM256, {}),
    "conv2d": (CONV, {}),
    "bias + relu f64": (BIAS_RELU_F64, {"num_threads": 1}),
    "two results, entry": (TWO_RESULTS, {"entry": "two", "pipeline": "naive"}),
    "memref views written in place": (IN_PLACE_STRIDED, {"pipeline": "naive", "filename": "views.mlir"}),
    "stages and remarks": (matmul((33, 17), (17, 20), (33, 20), np.float32), {"stages": True, "remarks": True}),
}


@pytest.mark.parametrize("name", ROUND_TRIPS)
def test_a_kernel_from_disk_is_the_compiled_kernel(disk, name):
    source, options = ROUND_TRIPS[name]
    fresh, loaded = from_memory_then_disk(source, **options)
    assert type(fresh._module).__name__ == "JITModule" and type(loaded._module).__name__ == "LoadedModule"
    assert disk_cache.stats["hit"] == 1
    for field in ("entry", "inputs", "outputs", "flops", "llvm_ir", "optimized_ir", "stages", "pipeline",
                  "num_threads", "remarks", "target", "returns_status", "allocation_sites"):
        assert getattr(loaded, field) == getattr(fresh, field), field
    assert repr(loaded) == repr(fresh)
    for seed in (0, 1):
        for got, want in zip(outputs(loaded, seed), outputs(fresh, seed), strict=True):
            np.testing.assert_array_equal(got, want)  # the same machine code: the same bits


def test_a_kernel_from_disk_has_the_compiled_kernels_assembly(disk):
    fresh, loaded = from_memory_then_disk(relu(40))
    assert loaded.asm() == fresh.asm() and "ret" in loaded.asm()


def test_a_kernel_from_disk_still_checks_its_arguments(disk):
    _, loaded = from_memory_then_disk(MM256)
    with pytest.raises(TypeError, match="has dtype float64, expected float32"):
        loaded(np.zeros((256, 256)), np.zeros((256, 256), np.float32))
    with pytest.raises(ValueError, match=r"has shape \(2, 2\), expected \(256, 256\)"):
        loaded(np.zeros((2, 2), np.float32), np.zeros((256, 256), np.float32))


def test_a_kernel_from_disk_frees_its_code_when_dropped(disk):
    import gc
    import weakref

    _, loaded = from_memory_then_disk(relu(23))
    pages = weakref.ref(loaded._module._pages)
    driver.kernel_cache.clear()
    x = np.linspace(-2, 2, 23, dtype=np.float32)
    np.testing.assert_array_equal(loaded(x), np.maximum(x, 0))
    assert pages() is not None  # held: its code stays
    del loaded
    gc.collect()
    assert pages() is None  # unmapped


def test_threads_loading_from_disk_at_once(disk):
    from concurrent.futures import ThreadPoolExecutor

    sources = [relu(24 + i, f"t{i}") for i in range(6)] + [MM256]
    for source in sources:
        compiler.compile(source)
    driver.kernel_cache.clear()
    with ThreadPoolExecutor(4) as threads:
        kernels = list(threads.map(compiler.compile, sources * 2))
    assert disk_cache.stats["hit"] >= len(sources)
    for kernel in kernels[:-1]:
        x = np.linspace(-1, 1, kernel.inputs[0].shape[0], dtype=np.float32)
        if kernel.entry != "mm":
            np.testing.assert_array_equal(kernel(x), np.maximum(x, 0))
    a = np.eye(256, dtype=np.float32)
    np.testing.assert_array_equal(kernels[-1](a, a), a)


#: compile a kernel (filed on disk), then, for each forgery of its object's ELF header
#: (argv[1]: name -> (offset, bytes)), file the forged object under its key in a whole,
#: checksummed entry and compile again: each must be rejected with a warning and rebuilt
_FORGED_HEADERS = """
import json, sys, warnings
import numpy as np
import compiler
from compiler import driver
from compiler.jit import disk_cache as cache
from compiler.jit.disk_cache import disk_cache

source = sys.argv[2]
compiler.compile(source)
path = disk_cache.folder() / (disk_cache.kernel_key(*driver._cache_key(source)) + ".loom")
header, sections = cache.decode(path.stem, path.read_bytes())
del header["format"], header["key"], header["sections"]
x = np.linspace(-3, 3, 31, dtype=np.float32)
runs = {}
for name, (offset, forged) in json.loads(sys.argv[1]).items():
    obj = bytearray(sections["object"])
    obj[offset : offset + len(forged)] = bytes(forged)
    path.write_bytes(cache.encode(path.stem, header, {**sections, "object": bytes(obj)}))
    driver.kernel_cache.clear()
    disk_cache.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = compiler.compile(source)
    runs[name] = {"stats": dict(disk_cache.stats), "module": type(kernel._module).__name__,
                  "right": bool((kernel(x) == np.maximum(x, 0)).all()),
                  "rewritten": cache._loadable(cache.decode(path.stem, path.read_bytes())[1]["object"]),
                  "warnings": [str(w.message) for w in caught]}
print(json.dumps({"runs": runs, "edited": not disk_cache.fingerprint().sources.unchanged()}))
"""


def test_a_whole_entry_whose_object_header_is_forged_is_rebuilt_with_a_warning(tmp_path):
    """The forged ELF headers that crashed LLVM's loader (another class, byte order or
    machine) or raised a raw struct.error (a section table past the end): a whole,
    checksummed entry whose object is one is rejected with a CacheWarning, never loaded,
    and the kernel is compiled again and filed anew. In a process of its own: a
    regression kills that process, not the suite's."""
    forgeries = {"EI_CLASS 32-bit": (4, [1]), "EI_DATA big-endian": (5, [2]), "e_machine i386": (0x12, [3, 0]),
                 "e_machine AArch64": (0x12, [183, 0]), "e_shoff past the end": (0x28, list((1 << 20).to_bytes(8, "little"))),
                 "e_shentsize 0": (0x3A, [0, 0]), "e_shstrndx past the table": (0x3E, [0xFF, 0x7F])}
    run = run_python(_FORGED_HEADERS, tmp_path / "cache", json.dumps(forgeries), relu(31))
    if run["edited"]:
        pytest.skip("Loom's sources were edited while the test ran")
    for name, r in run["runs"].items():
        assert r["stats"] == {"rejected": 1, "stored": 1} and r["module"] == "JITModule", (name, r)
        assert r["right"] and r["rewritten"], (name, r)
        assert any("cannot be used" in w and "compiled again" in w for w in r["warnings"]), (name, r)


# --------------------------------------------------------------------------- broken entries


def _truncate(data: bytes, other: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip_a_byte_of_the_code(data: bytes, other: bytes) -> bytes:
    at = data.index(b"\x7fELF") + 200
    return data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1 :]


def _garbage(data: bytes, other: bytes) -> bytes:
    return np.random.default_rng(0).bytes(len(data))


def _another_kernels_entry(data: bytes, other: bytes) -> bytes:
    return other  # whole and checksummed, filed under another key


BREAKAGES = {"truncated": _truncate, "a byte flipped": _flip_a_byte_of_the_code, "garbage": _garbage,
             "empty": lambda data, other: b"", "another kernel's entry": _another_kernels_entry}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_entry_is_never_loaded_and_is_rebuilt(disk, breakage):
    compiler.compile(relu(30, "other"))
    compiler.compile(relu(31))
    path = kernel_entry_of(disk, relu(31))
    other = kernel_entry_of(disk, relu(30, "other")).read_bytes()
    path.write_bytes(BREAKAGES[breakage](path.read_bytes(), other))
    driver.kernel_cache.clear()
    with pytest.warns(CacheWarning, match="cannot be used"):
        kernel = compiler.compile(relu(31))
    assert type(kernel._module).__name__ == "JITModule"  # compiled again
    assert disk_cache.stats["hit"] == 0 and disk_cache.stats["rejected"] == 1
    x = np.linspace(-3, 3, 31, dtype=np.float32)
    np.testing.assert_array_equal(kernel(x), np.maximum(x, 0))
    header, _ = cache.decode(path.stem, path.read_bytes())  # replaced by a whole entry
    assert header["entry"] == "k"
    driver.kernel_cache.clear()
    assert type(compiler.compile(relu(31))._module).__name__ == "LoadedModule"


def test_an_entry_of_another_version_or_cpu_is_not_found(disk, monkeypatch):
    compiler.compile(relu(12))
    key = kernel_entry_of(disk, relu(12)).stem
    for change in ("version", "cpu"):
        with monkeypatch.context() as m:
            if change == "version":
                m.setattr(cache, "__version__", "0.0.0-another")
            else:
                m.setattr(cache, "cpu_identity", lambda: "vendor_id=Another; flags=sse2")
            disk_cache.reset()
            driver.kernel_cache.clear()
            assert kernel_entry_of(disk, relu(12)).stem != key
            kernel = compiler.compile(relu(12))
            assert type(kernel._module).__name__ == "JITModule" and disk_cache.stats["hit"] == 0
        disk_cache.reset()
    assert len(entries(disk)) == 3


def test_an_entry_whose_object_is_broken_is_rejected_not_given_to_llvm(disk):
    """A whole entry, checksum and key right, whose object file's tables point outside
    it: rejected by the loader (Malformed), never handed to LLVM (which trusts its input)."""
    compiler.compile(relu(13))
    path = kernel_entry_of(disk, relu(13))
    header, sections = cache.decode(path.stem, path.read_bytes())
    obj = bytearray(sections["object"])
    obj[0x28:0x30] = (len(obj) - 8).to_bytes(8, "little")  # the section table past the end
    del header["format"], header["key"], header["sections"]
    path.write_bytes(cache.encode(path.stem, header, {**sections, "object": bytes(obj)}))
    driver.kernel_cache.clear()
    with pytest.warns(CacheWarning, match="cannot be used .*Malformed.*compiled again"):
        assert type(compiler.compile(relu(13))._module).__name__ == "JITModule"
    assert disk_cache.stats["rejected"] == 1


# --------------------------------------------------------------------------- concurrency

#: after a common start time, compile the shared kernels and this process's own in an
#: order of its own, check each; print the disk cache's counts
_FILL = """
import json, sys, time
import numpy as np
import compiler
from compiler.jit.disk_cache import disk_cache
from kernels import matmul

me, start = int(sys.argv[1]), float(sys.argv[2])
def relu(n):
    return (f"func.func @k(%a: tensor<{n}xf32>) -> tensor<{n}xf32> {{\\n"
            f"  %r = loom.relu %a : tensor<{n}xf32>\\n  func.return %r : tensor<{n}xf32>\\n}}\\n")
jobs = [("mm", matmul((128, 128), (128, 128), (128, 128), np.float32)), ("relu", relu(64)), ("relu", relu(100 + me))]
jobs = jobs[me % 3:] + jobs[:me % 3]
while time.time() < start:
    time.sleep(0.001)
rng = np.random.default_rng(me)
for kind, source in jobs:
    k = compiler.compile(source)
    if kind == "mm":
        assert "@loom_take" in k.llvm_ir  # through the buffer pool: its entry is one of those counted
        a, b = (rng.standard_normal((128, 128)).astype(np.float32) for _ in range(2))
        assert np.abs(k(a, b) - a.astype(np.float64) @ b).max() < 1e-3
    else:
        x = rng.standard_normal(k.inputs[0].shape).astype(np.float32)
        assert (k(x) == np.maximum(x, 0)).all()
sources = disk_cache.fingerprint().sources
print(json.dumps({**disk_cache.stats, "sources": sources.digest, "edited": not sources.unchanged()}))
"""


def test_processes_filling_one_folder_at_once_leave_whole_entries(tmp_path):
    folder = tmp_path / "cache"
    environment = {**os.environ, "LOOM_CACHE_DIR": str(folder), "LOOM_TARGET": PLANNED,
                   "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}"}
    environment.pop("LOOM_CACHE_MAX_BYTES", None)
    start = time.time() + 3  # after every interpreter has imported Loom
    processes = [subprocess.Popen([sys.executable, "-c", _FILL, str(i), str(start)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=environment) for i in range(4)]
    runs = []
    for p in processes:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        runs.append(json.loads(out.strip().splitlines()[-1]))
    skip_if_edited(*runs)
    kernels = folder / "kernels"
    assert not list(kernels.glob("*.tmp"))  # every write renamed into place
    found = entries(kernels)
    assert len(found) == 1 + 2 + 4  # the pool, the two shared kernels, one of each process's own
    for path in found:
        header, sections = cache.decode(path.stem, path.read_bytes())  # whole, checksummed
        assert sections["object"].startswith(b"\x7fELF")
        assert path.stat().st_mode & 0o777 == 0o600
    assert kernels.stat().st_mode & 0o777 == 0o700
    again = run_python(_FILL, folder, 0, 0)  # all found now: process 0's kernels and the pool
    skip_if_edited(*runs, again)
    assert again["hit"] == 4 and "miss" not in again and "rejected" not in again


# --------------------------------------------------------------------------- the key


def _key(**change) -> str:
    parts = {"source": relu(8), "filename": "<source>", "entry": None, "pipeline": "default", "num_threads": None,
             "remarks": False, "stages": False, "loom_target": ""}
    return disk_cache.kernel_key(**{**parts, **change})


def test_the_key_changes_with_the_ir_and_every_option(disk, monkeypatch):
    same = _key()
    assert _key() == same
    changes = [{"source": relu(8).replace("%r", "%s")}, {"filename": "k.mlir"}, {"entry": "k"}, {"pipeline": "naive"},
               {"num_threads": 3}, {"remarks": True}, {"stages": True}, {"loom_target": "vector_bits=256"}]
    keys = [_key(**c) for c in changes]
    assert len({same, *keys}) == len(changes) + 1
    monkeypatch.setattr(cache, "_planned_threads", lambda: 7)  # the threads planned for without num_threads
    assert _key() != same and _key(num_threads=3) == keys[4]
    monkeypatch.setattr(cache, "_planned_threads", lambda: 3)  # planning 3 threads is not asking for them
    assert _key() != keys[4]


def test_the_key_changes_with_every_fact_of_the_machine_and_its_software(disk, monkeypatch):
    """Each line of the fingerprint counts: the cache sizes planned for, whether libgomp is
    there, where numpy keeps an array's data pointer, xDSL's version, the machine's kind."""
    import platform

    same = _key()
    has_libgomp = cache.target.openmp_runtime() is not None
    for module, name, fake in [(cache, "cache_description", lambda: "Data 1 1K"),
                               (cache.target, "openmp_runtime", lambda: None if has_libgomp else "libgomp"),
                               (cache, "array_data_offset", lambda: 4096),
                               (cache, "distribution_version", lambda name, package: "0.0-another"),
                               (platform, "machine", lambda: "another")]:
        with monkeypatch.context() as m:
            m.setattr(module, name, fake)
            disk_cache.reset()
            assert _key() != same, name
    disk_cache.reset()
    assert _key() == same


def test_the_planned_threads_are_those_machine_reads(monkeypatch):
    """OMP_NUM_THREADS (else the cores) as passes.support.target.machine() reads it, once per
    process: the key and the compile agree."""
    from passes.support import target

    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    target.machine.cache_clear()
    try:
        assert cache._planned_threads() == 7  # machine() not read yet: what it would read
        monkeypatch.setenv("OMP_NUM_THREADS", "5")
        assert target.machine().threads == 5 == cache._planned_threads()
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert cache._planned_threads() == 5  # machine() keeps what it read
    finally:
        target.machine.cache_clear()
        target._host.cache_clear()


def test_the_sources_digest_sees_every_edit(tmp_path, monkeypatch):
    package = tmp_path / "passes"
    (package / "schedule").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    edited = package / "schedule" / "tile.py"
    edited.write_text("TILE = 8\n")
    roots = [str(package)]
    monkeypatch.setattr(session, "IMPORTED_SOURCES", session.stamp(session.source_files(roots)))  # imported now
    before = SourceState(roots)
    assert before.unchanged()
    stat = edited.stat()
    edited.write_text("TILE = 9\n")  # the same size
    os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime: only the contents differ
    assert SourceState(roots).digest != before.digest
    edited.write_text("TILE = 16\n")
    assert not before.unchanged() and not SourceState(roots).as_imported()
    os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # an older mtime (cp -p, rsync -a): the size differs
    assert not before.unchanged() and not SourceState(roots).as_imported()
    (package / "schedule" / "new.py").write_text("")
    assert SourceState(roots).digest != before.digest and not SourceState(roots).as_imported()


def test_a_process_whose_sources_changed_neither_reads_nor_stores(disk, monkeypatch):
    compiler.compile(relu(14))
    monkeypatch.setattr(SourceState, "as_imported", SOURCES_AS_IMPORTED)
    monkeypatch.setattr(SourceState, "unchanged", SOURCES_UNCHANGED)
    monkeypatch.setattr(session, "IMPORTED_SOURCES", ())  # as if imported before every file was written
    disk_cache.reset()
    driver.kernel_cache.clear()
    with pytest.warns(CacheWarning, match="source files changed since this process imported them"):
        kernel = compiler.compile(relu(14))
    x = np.linspace(-1, 1, 14, dtype=np.float32)
    np.testing.assert_array_equal(kernel(x), np.maximum(x, 0))
    assert len(entries(disk)) == 1 and disk_cache.stats == {}  # the entry there neither loaded nor replaced
    compiler.compile(relu(15))
    assert len(entries(disk)) == 1 and disk_cache.stats == {}


#: import Loom (its sources as argv[1] holds them), let argv[1]'s copy of Loom be edited,
#: the edited code compile and store the kernel in another process, then compile it here
_EDITED_UNDER_ME = """
import json, os, subprocess, sys, warnings
import numpy as np
import compiler
from compiler import driver  # Loom as it is now
from compiler.jit.disk_cache import disk_cache

package, source = sys.argv[1], sys.argv[2]
assert compiler.__file__.startswith(package)
edited = os.path.join(package, "passes", "schedule", "loom_tile.py")
stat = os.stat(edited)
with open(edited, "a") as f:
    f.write("# edited\\n")
os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as rsync -a leaves it: an older mtime
other = subprocess.run([sys.executable, "-c", "import compiler, sys; compiler.compile(sys.argv[1])", source],
                       capture_output=True, text=True)
assert other.returncode == 0, other.stderr
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    kernel = compiler.compile(source)
x = np.linspace(-1, 1, 14, dtype=np.float32)
assert (kernel(x) == np.maximum(x, 0)).all()
print(json.dumps({"stats": dict(disk_cache.stats), "module": type(kernel._module).__name__,
                  "entries": len(os.listdir(os.environ["LOOM_CACHE_DIR"] + "/kernels")),
                  "warnings": [str(w.message) for w in caught]}))
"""


def test_a_kernel_built_from_sources_edited_after_the_import_is_not_loaded(tmp_path):
    """A process that imported Loom, then saw its sources edited (even keeping an older
    mtime), does not load the kernel another process built from the edited sources: its
    keys would name code it does not run."""
    import shutil

    package = tmp_path / "loom"
    for name in session.PACKAGES:
        shutil.copytree(ROOT / name, package / name, ignore=shutil.ignore_patterns("__pycache__"))
    environment = {**os.environ, "LOOM_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(package)}
    environment.pop("LOOM_CACHE_MAX_BYTES", None)
    done = subprocess.run([sys.executable, "-c", _EDITED_UNDER_ME, str(package), relu(14)], capture_output=True,
                          text=True, env=environment, cwd=tmp_path, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert run["entries"] >= 1  # the other process stored the kernel (and the pool, where it needed it)
    assert "hit" not in run["stats"] and run["module"] == "JITModule", run
    assert any("source files changed since this process imported them" in w for w in run["warnings"]), run


def test_the_package_roots_are_the_imported_ones():
    roots = {Path(p).name: Path(p) for p in session.package_roots()}
    assert roots == {"compiler": ROOT / "compiler", "passes": ROOT / "passes", "dialects": ROOT / "dialects"}


# --------------------------------------------------------------------------- bypasses


def test_compile_in_parallel_fills_the_disk_for_the_compiles_that_follow(disk):
    fn = compiler.jit(lambda a: compiler.relu(a))
    jobs = [dict(source=relu(n), pipeline="default", num_threads=1) for n in (17, 18, 19)]
    jobs.append(fn.compile_request(np.ones(20, np.float32)))
    assert driver.compile_in_parallel(jobs, processes=2) == 4
    for job in jobs:
        assert kernel_entry_of(disk, **job).exists()
    assert driver.compile_in_parallel(jobs, processes=2) == 0  # all on disk now (and loaded: kept in memory)
    driver.kernel_cache.clear()
    disk_cache.reset()
    kernels = [compiler.compile(**job) for job in jobs[:3]]
    assert np.array_equal(fn(-np.arange(20, dtype=np.float32)), np.zeros(20, np.float32))
    assert disk_cache.stats["hit"] == 4 and all(type(k._module).__name__ != "JITModule" for k in kernels)
    # one job, or no disk cache: left to the caller
    assert driver.compile_in_parallel([dict(source=relu(21))], processes=2) == 0
    assert driver.compile_in_parallel([dict(source=relu(22), cache=False), dict(source=relu(23), cache=False)]) == 0


def test_cache_false_neither_reads_nor_writes(disk):
    first = compiler.compile(relu(15), cache=False)
    assert entries(disk) == [] and compiler.compile(relu(15), cache=False) is not first
    compiler.compile(relu(15))
    stored = entries(disk)
    driver.kernel_cache.clear()
    assert type(compiler.compile(relu(15), cache=False)._module).__name__ == "JITModule"
    assert entries(disk) == stored and disk_cache.stats["hit"] == 0
    with pytest.raises(TypeError, match="cache must be True or False, got 'no'"):
        compiler.compile(relu(15), cache="no")


def test_a_timed_compile_neither_reads_nor_writes(disk):
    compiler.compile(relu(16), timings={})
    assert entries(disk) == []
    compiler.compile(relu(16))
    driver.kernel_cache.clear()
    timings = {}
    assert type(compiler.compile(relu(16), timings=timings)._module).__name__ == "JITModule"
    assert "LLVM O3" in timings and disk_cache.stats["hit"] == 0


def test_max_bytes_zero_turns_the_disk_cache_off(disk, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_MAX_BYTES", "0")
    compiler.compile(relu(17))
    assert not disk.exists() or entries(disk) == []
    monkeypatch.delenv("LOOM_CACHE_MAX_BYTES")  # an entry another process stored...
    driver.kernel_cache.clear()
    compiler.compile(relu(17))
    stored = entries(disk)
    assert len(stored) == 1
    driver.kernel_cache.clear()
    monkeypatch.setenv("LOOM_CACHE_MAX_BYTES", "0")  # ...is neither loaded nor evicted by this one
    assert type(compiler.compile(relu(17))._module).__name__ == "JITModule"
    assert disk_cache.stats["hit"] == 0 and entries(disk) == stored


def test_loom_run_no_cache(tmp_path):
    source = tmp_path / "relu.mlir"
    source.write_text(relu(18))
    environment = {**os.environ, "LOOM_CACHE_DIR": str(tmp_path / "cache")}
    environment.pop("LOOM_CACHE_MAX_BYTES", None)
    run = [sys.executable, "-m", "tools.loom_run", str(source), "--budget", "0.01", "--rounds", "1"]
    done = subprocess.run([*run, "--no-cache"], capture_output=True, text=True, env=environment, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "cache" / "kernels").exists() or entries(tmp_path / "cache" / "kernels") == []
    done = subprocess.run(run, capture_output=True, text=True, env=environment, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert len(entries(tmp_path / "cache" / "kernels")) == 1


def test_loom_opt_accepts_no_cache(tmp_path, capsys):
    from tools import loom_opt

    source = tmp_path / "relu.mlir"
    source.write_text(relu(19))
    assert loom_opt.main([str(source), "--no-cache"]) == 0
    assert "loom.relu" in capsys.readouterr().out


# --------------------------------------------------------------------------- the folder


def test_entries_are_private(disk):
    compiler.compile(relu(20))
    assert disk.stat().st_mode & 0o777 == 0o700
    assert [p.stat().st_mode & 0o777 for p in entries(disk)] == [0o600]


def test_an_unusable_folder_turns_the_disk_cache_off_with_a_warning(disk, tmp_path, monkeypatch):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setenv("LOOM_CACHE_DIR", str(not_a_folder))
    with pytest.warns(CacheWarning, match="cannot create the kernel cache's folder .*: the kernel cache is off"):
        kernel = compiler.compile(relu(21))
    assert kernel(np.ones(21, np.float32)).sum() == 21
    # writable by everyone, or by the group: by others than the user all the same
    for name, mode, n in (("shared", 0o777, 22), ("group", 0o770, 23)):
        folder = tmp_path / name
        (folder / "kernels").mkdir(parents=True)
        folder.chmod(mode)
        monkeypatch.setenv("LOOM_CACHE_DIR", str(folder))
        writable = rf"{name} is writable by others \(mode {mode:o}\).*never loaded from a folder"
        with pytest.warns(CacheWarning, match=writable):
            compiler.compile(relu(n))
        assert entries(folder / "kernels") == []
    # the folder the user's alone, the entries' folder in it writable by everyone: the same
    folder = tmp_path / "open_entries"
    (folder / "kernels").mkdir(parents=True)
    folder.chmod(0o755)
    (folder / "kernels").chmod(0o777)
    monkeypatch.setenv("LOOM_CACHE_DIR", str(folder))
    with pytest.warns(CacheWarning, match=r"open_entries/kernels is writable by others \(mode 777\)"):
        compiler.compile(relu(24))
    assert entries(folder / "kernels") == []


def test_the_folder_stays_under_its_bound(disk, monkeypatch):
    compiler.compile(relu(1, "k1"))
    size = entries(disk)[0].stat().st_size
    monkeypatch.setenv("LOOM_CACHE_MAX_BYTES", str(3 * size + size // 2))
    for i in range(2, 8):
        compiler.compile(relu(i, f"k{i}"))
        time.sleep(0.01)  # distinct mtimes: the oldest go first
    kept = entries(disk)
    assert sum(p.stat().st_size for p in kept) <= 3 * size + size // 2
    assert kernel_entry_of(disk, relu(7, "k7")) in kept and kernel_entry_of(disk, relu(1, "k1")) not in kept
    assert disk_cache.stats["evicted"] >= 3


def test_eviction_goes_down_to_90_percent_of_the_bound(disk, monkeypatch):
    """Entries of one size, the bound 10 of them: the 11th store removes the 2 used longest
    ago (down to 9, 90% of the bound), not 1 (which would leave it at the bound)."""
    start = time.time_ns() - 10**12

    def store(i: int) -> Path:
        assert disk_cache.write(f"{i:064x}", {"kind": "test"}, {"object": bytes(1000)})
        path = disk / f"{i:064x}.loom"
        os.utime(path, ns=(start + i * 10**9, start + i * 10**9))  # used in the order written
        return path

    paths = [store(0)]
    monkeypatch.setenv("LOOM_CACHE_MAX_BYTES", str(10 * paths[0].stat().st_size))
    paths += [store(i) for i in range(1, 11)]
    assert entries(disk) == paths[2:] and disk_cache.stats["evicted"] == 2


def test_a_folder_exactly_at_its_bound_keeps_every_entry(disk, monkeypatch):
    """Eviction starts past the bound, not at it: a store that brings the folder to exactly
    its bound (listed: the process's first store) removes nothing."""
    assert disk_cache.write(f"{1:064x}", {"kind": "test"}, {"object": bytes(1000)})
    size = (disk / f"{1:064x}.loom").stat().st_size
    monkeypatch.setenv("LOOM_CACHE_MAX_BYTES", str(2 * size))
    disk_cache.reset()  # a new process: its first store lists the folder
    assert disk_cache.write(f"{2:064x}", {"kind": "test"}, {"object": bytes(1000)})
    assert len(entries(disk)) == 2 and disk_cache.stats["evicted"] == 0


def test_a_read_marks_its_entry_used(disk, monkeypatch):
    """Eviction removes the entry used longest ago: one read since (a hit) is used now, and an
    entry written after it but not read since goes first."""
    start = time.time_ns() - 10**12
    paths = []
    for i in range(3):
        assert disk_cache.write(f"{i:064x}", {"kind": "test"}, {"object": bytes(1000)})
        paths.append(disk / f"{i:064x}.loom")
        os.utime(paths[-1], ns=(start + i * 10**9, start + i * 10**9))
    assert disk_cache.read(f"{0:064x}") is not None  # the oldest, read: used now
    assert paths[0].stat().st_mtime_ns > start + 10 * 10**9
    monkeypatch.setenv("LOOM_CACHE_MAX_BYTES", str(3 * paths[0].stat().st_size))
    assert disk_cache.write(f"{3:064x}", {"kind": "test"}, {"object": bytes(1000)})
    assert paths[0].exists() and not paths[1].exists()


@pytest.mark.parametrize(("text", "size"), [("1000", 1000), ("64K", 64 << 10), ("2m", 2 << 20), (" 1G ", 1 << 30)])
def test_max_bytes_from_the_environment(monkeypatch, text, size):
    monkeypatch.setenv("LOOM_CACHE_MAX_BYTES", text)
    assert cache.max_bytes() == size


@pytest.mark.parametrize("text", ["lots", "-1", "1.5", "K", "²"])
def test_max_bytes_must_be_a_size(monkeypatch, text):
    monkeypatch.setenv("LOOM_CACHE_MAX_BYTES", text)
    with pytest.raises(LoomError, match="LOOM_CACHE_MAX_BYTES must be a size in bytes"):
        cache.max_bytes()


def test_the_suite_never_uses_the_users_cache():
    """tests/conftest.py points every process of the suite (xdist's workers included)
    at a temporary folder."""
    folder = Path(os.environ["LOOM_CACHE_DIR"])
    assert folder.name.startswith("loom-test-cache-") and folder == Path(os.environ["LOOM_TEST_CACHE_DIR"])
    assert cache.cache_dir() == folder and os.environ["LOOM_CACHE_MAX_BYTES"] == "0"


# --------------------------------------------------------------------------- the loader


def _object(ir: str, reloc: str = "pic", codemodel: str = "small") -> bytes:
    """`ir` compiled to an object file for the host, in the given relocation and code models."""
    import llvmlite.binding as llvm

    from compiler.jit import engine as llvm_jit

    with llvm_jit._lock:
        host = llvm_jit._get_host()
        tm = host.target.create_target_machine(cpu=host.cpu, features=host.features, opt=2, reloc=reloc,
                                               codemodel=codemodel)
        module = llvm.parse_assembly(ir)
        module.triple = tm.triple
        return tm.emit_object(module)


#: an exported function calling an internal one, reading an internal table: PC-relative
#: relocations (R_X86_64_PC32, R_X86_64_PLT32) in the small code model
_INTERNAL = """
@table = internal constant [4 x i64] [i64 10, i64 20, i64 30, i64 40]
define internal i64 @twice(i64 %x) noinline { %y = mul i64 %x, 2
  ret i64 %y }
define i64 @f(i64 %i) { %p = getelementptr [4 x i64], ptr @table, i64 0, i64 %i
  %v = load i64, ptr %p
  %r = call i64 @twice(i64 %v)
  ret i64 %r }
"""


def test_the_loader_relocates_pc_relative_references():
    import ctypes

    obj = _object(_INTERNAL)
    module = loader.load(obj, {"f": "f"})
    f = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(module.function_address("f"))
    assert [f(i) for i in range(4)] == [20, 40, 60, 80]
    module.close()
    with pytest.raises(LoomError, match="machine code was freed"):
        module.function_address("f")


def test_the_loader_refuses_what_it_does_not_know():
    """A GOT-relative reference (an external global in position-independent code) is
    not the loader's: Unsupported (and no entry holds such an object)."""
    obj = _object("@environ = external global ptr\ndefine ptr @f() { %e = load ptr, ptr @environ\n  ret ptr %e }\n")
    with pytest.raises(loader.Unsupported, match="relocation type"):
        loader.load(obj, {"f": "f"})
    with pytest.raises(loader.Unsupported, match="relocation type"):
        loader.validate(obj)
    assert not cache._loadable(obj)


def test_the_loader_rejects_broken_objects_and_missing_symbols():
    obj = _object(_INTERNAL, reloc="static", codemodel="large")
    with pytest.raises(loader.Malformed):
        loader.load(obj[: len(obj) // 2], {"f": "f"})
    with pytest.raises(loader.Malformed, match="does not define g"):
        loader.load(obj, {"g": "g"})
    with pytest.raises(loader.Unsupported, match="not a 64-bit little-endian ELF"):
        loader.load(b"\xcf\xfa\xed\xfe" + bytes(100), {"f": "f"})
    missing = _object("declare i64 @loom_no_such_symbol()\ndefine i64 @f() { %r = call i64 @loom_no_such_symbol()\n"
                      "  ret i64 %r }\n", reloc="static", codemodel="large")
    with pytest.raises(LoomError, match="needs a symbol found nowhere: loom_no_such_symbol"):
        loader.load(missing, {"f": "f"})


def _sections(obj: bytes) -> dict[str, tuple[int, tuple]]:
    """Each section of `obj` by name: where its header lies in the file, and its fields."""
    parsed = loader._Object(obj)
    names = parsed.sections[int.from_bytes(obj[62:64], "little")][4]
    table = int.from_bytes(obj[40:48], "little")
    return {obj[names + s[0] : obj.index(b"\0", names + s[0])].decode(): (table + 64 * i, s)
            for i, s in enumerate(parsed.sections)}


def _patched(obj: bytes, at: int, value: int) -> bytes:
    """`obj` with the 8 bytes at `at` set to `value`."""
    return obj[:at] + value.to_bytes(8, "little") + obj[at + 8 :]


def _call_f(module, i: int) -> int:
    import ctypes

    return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(module.function_address("f"))(i)


def test_the_loader_refuses_a_section_whose_bytes_end_past_the_file():
    """The code moved to the file's end (after the section table) loads and runs; with its
    bytes cut off, the section starts at the end and overlaps nothing, but lies outside."""
    obj = _object(_INTERNAL, reloc="static", codemodel="large")
    obj += bytes(-len(obj) % 16)
    at, code = _sections(obj)[".ltext"]
    moved = _patched(obj, at + 24, len(obj))  # sh_offset
    module = loader.load(moved + obj[code[4] : code[4] + code[5]], {"f": "f"})
    assert [_call_f(module, i) for i in range(4)] == [20, 40, 60, 80]
    with pytest.raises(loader.Malformed, match="section 3 lies outside the file"):
        loader.validate(moved)


def test_the_loader_refuses_a_relocation_that_writes_past_its_section():
    """An 8-byte relocation (R_X86_64_64) may end at its section's last byte, not one past."""
    obj = _object(_INTERNAL, reloc="static", codemodel="large")
    sections = _sections(obj)
    relocations, code = sections[".rela.ltext"][1], sections[".ltext"][1]
    assert int.from_bytes(obj[relocations[4] + 8 : relocations[4] + 12], "little") == 1  # R_X86_64_64
    loader.validate(_patched(obj, relocations[4], code[5] - 8))  # r_offset: the section's last 8 bytes
    for r_offset in (code[5] - 7, code[5] - 1):
        with pytest.raises(loader.Malformed, match="a relocation outside its section"):
            loader.validate(_patched(obj, relocations[4], r_offset))


def test_the_loader_refuses_thread_local_data():
    """Thread-local data needs a TLS block, not a copy: Unsupported, even where no code uses it."""
    obj = _object("@t = thread_local global i64 5\ndefine i64 @f() { ret i64 1 }\n", reloc="static",
                  codemodel="large")
    with pytest.raises(loader.Unsupported, match="flags 0x403"):
        loader.validate(obj)
    assert not cache._loadable(obj)


def test_the_loader_places_each_section_at_its_alignment():
    """Constants of 4 bytes, then a 32-byte aligned vector in a section of its own: the
    second starts at the next multiple of 32, apart from the first, and both read back."""
    obj = _object("""
@a = private unnamed_addr constant i32 7, align 4
@b = private unnamed_addr constant <4 x i64> <i64 1, i64 2, i64 3, i64 4>, align 32
define i64 @f(i64 %i) { %x = load volatile i32, ptr @a
  %p = getelementptr i64, ptr @b, i64 %i
  %y = load volatile i64, ptr %p
  %w = sext i32 %x to i64
  %r = add i64 %w, %y
  ret i64 %r }
""", reloc="static", codemodel="large")
    names = list(_sections(obj))
    assert names.index(".lrodata.cst4") < names.index(".lrodata.cst32")  # laid out in this order
    module = loader.load(obj, {"f": "f"})
    assert [_call_f(module, i) for i in range(4)] == [8, 9, 10, 11]


def test_the_loader_refuses_an_exported_function_outside_code():
    """A function's symbol moved into the constants' section (within it, the tables whole)
    is not code: Malformed, its address never handed out."""
    obj = _object(_INTERNAL, reloc="static", codemodel="large")
    sections = _sections(obj)
    parsed = loader._Object(obj)
    k = next(i for i, s in enumerate(parsed.symbols) if parsed.symbol_name(s) == "f")
    at = sections[".symtab"][1][4] + 24 * k  # the symbol: name, info, other, shndx, value, size
    forged = obj[: at + 6] + list(sections).index(".lrodata").to_bytes(2, "little") + obj[at + 8 :]
    forged = _patched(forged, at + 16, 8)  # st_size: 8 of the table's 32 bytes
    loader.validate(forged)
    with pytest.raises(loader.Malformed, match="f is not in a loaded section of code"):
        loader.load(forged, {"f": "f"})


#: where each field of an object's tables lies: (offset in its entry, bytes)
_ELF_FIELDS = {"ident6": (6, 1), "ident7": (7, 1), "type": (16, 2), "machine": (18, 2), "version": (20, 4),
               "entry": (24, 8), "phoff": (32, 8), "shoff": (40, 8), "flags": (48, 4), "ehsize": (52, 2),
               "phentsize": (54, 2), "phnum": (56, 2), "shentsize": (58, 2), "shnum": (60, 2), "shstrndx": (62, 2)}
_SECTION_FIELDS = {"name": (0, 4), "type": (4, 4), "flags": (8, 8), "addr": (16, 8), "offset": (24, 8),
                   "size": (32, 8), "link": (40, 4), "info": (44, 4), "align": (48, 8), "entsize": (56, 8)}
_SYMBOL_FIELDS = {"name": (0, 4), "shndx": (6, 2), "value": (8, 8), "size": (16, 8)}
_RELA_FIELDS = {"offset": (0, 8), "info": (8, 8), "addend": (16, 8)}


def _forged(obj: bytes, changes: str) -> bytes:
    """`obj` with the fields `changes` names set (`where.field=value`, or `|=` to set bits; space-separated):
    where is `elf` (the header), a section's name (`` for section 0), `symN` (symbol N), `relaN` (relocation N
    of the first relocation section); `file.cut=N` drops the last N bytes."""
    import re

    sections = _sections(obj)
    symtab = sections[".symtab"][1][4]
    rela = next(s for _, s in sections.values() if s[1] == loader._SHT_RELA)[4]
    for change in changes.split():
        target, op, text = re.fullmatch(r"(.*?)(\|?=)(.+)", change).groups()
        where, field = target.rsplit(".", 1)
        if where == "file":
            obj = obj[: -int(text)]
            continue
        if where == "elf":
            at, (offset, width) = 0, _ELF_FIELDS[field]
        elif where.startswith("sym"):
            at, (offset, width) = symtab + 24 * int(where[3:]), _SYMBOL_FIELDS[field]
        elif where.startswith("rela"):
            at, (offset, width) = rela + 24 * int(where[4:]), _RELA_FIELDS[field]
        else:
            at, (offset, width) = sections[where][0], _SECTION_FIELDS[field]
        at += offset
        value = int(text, 0) | (int.from_bytes(obj[at : at + width], "little") if op == "|=" else 0)
        obj = obj[:at] + value.to_bytes(width, "little") + obj[at + width :]
    return obj


_HEADER = "an ELF header no compiler writes"
_TABLE = "the section table lies outside the file"
_ODD = "section 3 has an address, alignment, flags or link no compiler writes"
_SYMTAB = "a malformed symbol table"
_UNDEFINED = "an undefined symbol with a value or without a name"
_RELOCATIONS = "relocation section 4 does not link the symbol table to a section"
#: forgeries of _INTERNAL's object (static, large code model: sections .strtab 1, .text 2, .ltext 3 (twice at
#: 0, f at 16), .rela.ltext 4, .lrodata 5, .note.GNU-stack 6, .eh_frame 7, .rela.eh_frame 8, .symtab 9; symbols
#: 3 twice, 4 table, 5 .lrodata's, 6 f), each refused by one check: (changes, exception, message)
_REFUSED = {
    "an executable": ("elf.type=2", loader.Unsupported, r"not an x86-64 relocatable object \(type 2, machine 62\)"),
    "i386": ("elf.machine=3", loader.Unsupported, r"\(type 1, machine 3\)"),
    "EI_VERSION 0": ("elf.ident6=0", loader.Malformed, _HEADER),
    "an OS ABI": ("elf.ident7=3", loader.Malformed, _HEADER),
    "e_version 0": ("elf.version=0", loader.Malformed, _HEADER),
    "an entry point": ("elf.entry=0x1000", loader.Malformed, _HEADER),
    "a program header table": ("elf.phoff=64", loader.Malformed, _HEADER),
    "e_flags": ("elf.flags=1", loader.Malformed, _HEADER),
    "e_ehsize 56": ("elf.ehsize=56", loader.Malformed, _HEADER),
    "e_phentsize": ("elf.phentsize=56", loader.Malformed, _HEADER),
    "e_phnum": ("elf.phnum=1", loader.Malformed, _HEADER),
    "section headers of 40 bytes": ("elf.shentsize=40", loader.Malformed, _TABLE),
    "section names in section 0": ("elf.shstrndx=0", loader.Malformed, _TABLE),
    "section names past the table": ("elf.shstrndx=10", loader.Malformed, _TABLE),
    "the section table unaligned": ("elf.shoff=596", loader.Malformed, _TABLE),
    "the section table over the header": ("elf.shoff=0", loader.Malformed, _TABLE),
    "the section table's last byte cut": ("file.cut=1", loader.Malformed, _TABLE),
    "section 0 not null": (".size=1", loader.Malformed, "section 0 is not the null section"),
    "a section at an address": (".ltext.addr=0x1000", loader.Malformed, _ODD),
    "an alignment of 24": (".ltext.align=24", loader.Malformed, _ODD),
    "an unknown section flag": (".ltext.flags|=8", loader.Malformed, _ODD),
    "a link past the table": (".ltext.link=10", loader.Malformed, _ODD),
    "a section off its alignment": (".ltext.align=128", loader.Malformed, "section 3 lies outside the file"),
    "sections overlapping": (".lrodata.offset=96", loader.Malformed, "sections overlap"),
    "a section over the ELF header": (".lrodata.offset=0", loader.Malformed, "sections overlap"),
    "section names in the symbol table": ("elf.shstrndx=9", loader.Malformed,
                                          "the section names' string table is not one"),
    "strings without their last NUL": (".strtab.size=97", loader.Malformed,
                                       "the section names' string table is not one"),
    "a section's name past the strings": (".ltext.name=98", loader.Malformed,
                                          "a section's name lies outside its string table"),
    "no symbol table": (".symtab.type=1", loader.Malformed, "0 symbol tables"),
    "two symbol tables": (".lrodata.type=2", loader.Malformed, "2 symbol tables"),
    "symbols of 16 bytes": (".symtab.entsize=16", loader.Malformed, _SYMTAB),
    "a symbol table cut mid-symbol": (".symtab.size=160", loader.Malformed, _SYMTAB),
    "an empty symbol table": (".symtab.size=0", loader.Malformed, _SYMTAB),
    "symbol 0 not null": ("sym0.value=1", loader.Malformed, _SYMTAB),
    "the first global past the symbols": (".symtab.info=8", loader.Malformed, _SYMTAB),
    "a symbol's name past the strings": ("sym3.name=98", loader.Malformed,
                                         "a symbol's name lies outside its string table"),
    "a symbol past its section's end": ("sym4.value=1", loader.Malformed, "a symbol outside its section"),
    "a symbol of no section": ("sym4.shndx=10", loader.Malformed, "a symbol outside its section"),
    "an undefined symbol with a size": ("sym3.shndx=0", loader.Malformed, _UNDEFINED),
    "an undefined symbol with a value": ("sym3.shndx=0 sym3.size=0 sym3.value=1", loader.Malformed, _UNDEFINED),
    "an undefined symbol without a name": ("sym3.shndx=0 sym3.size=0 sym3.name=0", loader.Malformed, _UNDEFINED),
    "relocations linked to the strings": (".rela.ltext.link=1", loader.Malformed, _RELOCATIONS),
    "relocations of section 0": (".rela.ltext.info=0", loader.Malformed, _RELOCATIONS),
    "relocations of no section": (".rela.ltext.info=10", loader.Malformed, _RELOCATIONS),
    "relocations of a section without bytes": (".ltext.type=8", loader.Malformed, _RELOCATIONS),
    "REL relocations": (".rela.ltext.type=9", loader.Unsupported, "REL relocations"),
    "relocations of 16 bytes": (".rela.ltext.entsize=16", loader.Malformed, "a malformed relocation table"),
    "a relocation table cut mid-entry": (".rela.ltext.size=40", loader.Malformed, "a malformed relocation table"),
    "a relocation naming no symbol": ("rela0.info=0x700000001", loader.Malformed,
                                      "a relocation outside its section or naming no symbol"),
    "writable code": (".ltext.flags|=1", loader.Unsupported, r"section kind 0x1 \(flags 0x10000007\)"),
    "an allocated note": (".note.GNU-stack.type=7 .note.GNU-stack.flags=2", loader.Unsupported,
                          r"section kind 0x7 \(flags 0x2\)"),
}
#: the last value each check takes (the first it refuses is in _REFUSED): (changes, f still runs)
_ACCEPTED = {
    "a link to the last section": (".ltext.link=9", True),
    "an alignment of 64 at offset 64": (".ltext.align=64", True),
    "code ending where the constants start": (".ltext.size=48", True),
    "a section's name at the last NUL": (".ltext.name=97", True),
    "a symbol's name at the last NUL": ("sym3.name=97", True),
    "the first global at the symbols' end": (".symtab.info=7", True),
    "a symbol ending at its section's end": ("sym4.value=1 sym4.size=31", True),
    "an undefined symbol": ("sym3.shndx=0 sym3.size=0", True),
    "a relocation with an addend": ("rela0.addend=8", False),
    "relocations of the last section": (".rela.ltext.info=9", False),
    "a relocation naming the last symbol": ("rela0.info=0x600000001", False),
}


@pytest.fixture(scope="module")
def internal() -> bytes:
    """_INTERNAL's object, static and in the large code model (the disk cache's kind)."""
    return _object(_INTERNAL, reloc="static", codemodel="large")


@pytest.mark.parametrize("name", _REFUSED)
def test_the_loader_refuses_each_forged_table(internal, name):
    changes, error, message = _REFUSED[name]
    with pytest.raises(error, match=message):
        loader.validate(_forged(internal, changes))
    with pytest.raises(error, match=message):
        loader.load(_forged(internal, changes), {"f": "f"})


@pytest.mark.parametrize("name", _ACCEPTED)
def test_the_loader_takes_the_last_value_each_check_accepts(internal, name):
    changes, runs = _ACCEPTED[name]
    loader.validate(_forged(internal, changes))
    if runs:
        assert [_call_f(loader.load(_forged(internal, changes), {"f": "f"}), i) for i in range(4)] == [20, 40, 60, 80]


def test_the_loader_refuses_a_section_count_in_the_reserved_range(internal):
    """0xFF00 sections and more: the count is one of ELF's escapes, not a count. 0xFEFF
    empty sections after the object's own are taken."""
    shoff = int.from_bytes(internal[40:48], "little")
    table = internal[shoff:]
    for shnum, refused in ((0xFEFF, False), (0xFF00, True)):
        obj = internal + table + bytes(64 * shnum - len(table))
        obj = obj[:40] + len(internal).to_bytes(8, "little") + obj[48:60] + shnum.to_bytes(2, "little") + obj[62:]
        if refused:
            with pytest.raises(loader.Malformed, match=_TABLE):
                loader.validate(obj)
        else:
            loader.validate(obj)


def test_the_loader_writes_each_absolute_relocation(internal):
    """R_X86_64_64 writes S + A: the table's address (read back through it), the code's
    own for the call, an absolute symbol's value plus the addend; an addend moves the
    table (f(i) reads table[i + 1])."""
    import ctypes

    parsed = loader._Object(internal)
    f = next(s for s in parsed.symbols if parsed.symbol_name(s) == "f")
    rela = _sections(internal)[".rela.ltext"][1]
    (table_at, _, _), (twice_at, _, _) = loader._RELA.iter_unpack(internal[rela[4] : rela[4] + rela[5]])
    module = loader.load(internal, {"f": "f"})
    code = module.function_address("f") - f[4]
    table = ctypes.c_uint64.from_address(code + table_at).value
    assert [ctypes.c_int64.from_address(table + 8 * i).value for i in range(4)] == [10, 20, 30, 40]
    assert ctypes.c_uint64.from_address(code + twice_at).value == code  # twice: the start of the code
    shifted = loader.load(_forged(internal, "rela0.addend=8"), {"f": "f"})
    assert [_call_f(shifted, i) for i in range(3)] == [40, 60, 80]
    absolute = loader.load(_forged(internal, "rela0.addend=8 sym5.shndx=0xfff1 sym5.value=0x123456789"), {"f": "f"})
    code = absolute.function_address("f") - f[4]
    assert ctypes.c_uint64.from_address(code + table_at).value == 0x123456789 + 8
    with pytest.raises(LoomError, match=r"no function 'g' in this module \(it has: f\)"):
        absolute.function_address("g")
    pc64 = loader.load(_forged(internal, "rela0.info=0x500000018"), {"f": "f"})  # R_X86_64_PC64: S + A - P
    code = pc64.function_address("f") - f[4]
    target = code + table_at + ctypes.c_int64.from_address(code + table_at).value  # P + (S - P)
    assert [ctypes.c_int64.from_address(target + 8 * i).value for i in range(4)] == [10, 20, 30, 40]
    with pytest.raises(loader.Malformed):  # S + A - P beyond 64 bits (signed)
        loader.load(_forged(internal, "rela0.info=0x500000018 sym5.shndx=0xfff1 sym5.value=0xffffffffffffffff"),
                    {"f": "f"})
    pc64.close()
    pc64.close()  # a second close: nothing


def test_the_loader_refuses_references_it_cannot_resolve(internal):
    """A relocation against a symbol of a section not loaded (the note): Unsupported; a
    32-bit PC-relative one whose target lies beyond 2 GiB of the code: Unsupported, not
    a truncated displacement."""
    forged = _forged(internal, "sym5.shndx=6")  # .lrodata's symbol moved to the note (empty, not loaded)
    loader.validate(forged)
    with pytest.raises(loader.Unsupported, match="a symbol of section 6, which is not loaded"):
        loader.load(forged, {"f": "f"})
    pic = _object(_INTERNAL)  # its table read through R_X86_64_PC32 against .rodata's symbol (5)
    far = _forged(pic, "sym5.shndx=0xfff1 sym5.value=0")  # address 0: beyond 2 GiB of any mapping
    with pytest.raises(loader.Unsupported, match="a 32-bit PC-relative relocation out of range"):
        loader.load(far, {"f": "f"})


def test_the_loader_hands_out_only_addresses_within_loaded_code(internal):
    """f moved into .eh_frame (within it: the tables take it) is in no loaded section;
    f at the code's end, of size 0, is outside it; one byte before, it is within."""
    for changes in ("sym6.shndx=7", "sym6.value=45 sym6.size=0"):
        loader.validate(_forged(internal, changes))
        with pytest.raises(loader.Malformed, match="f is not in a loaded section of code"):
            loader.load(_forged(internal, changes), {"f": "f"})
    module = loader.load(_forged(internal, "sym6.value=44 sym6.size=0"), {"f": "f"})
    assert module.function_address("f") % loader._PAGE == 44  # .ltext starts the code's pages


_BSS = "@z = global [4 x i64] zeroinitializer\ndefine ptr @f() { ret ptr @z }\n"


def test_the_loader_maps_zeroed_data_up_to_its_bounds():
    """.lbss (no bytes in the file) is mapped zeroed and writable; its alignment may be a
    page, not more; a size past what any kernel holds (1 GiB) is Malformed, never mapped."""
    import ctypes

    obj = _object(_BSS, reloc="static", codemodel="large")
    module = loader.load(obj, {"f": "f"})  # (held: its pages live as long as it)
    z = ctypes.CFUNCTYPE(ctypes.c_void_p)(module.function_address("f"))()
    assert [ctypes.c_int64.from_address(z + 8 * i).value for i in range(4)] == [0, 0, 0, 0]
    ctypes.c_int64.from_address(z).value = 5  # writable
    loader.validate(_forged(obj, ".lbss.align=4096"))
    with pytest.raises(loader.Unsupported, match=r"section kind 0x8 \(flags 0x10000003\)"):
        loader.validate(_forged(obj, ".lbss.align=8192"))
    with pytest.raises(loader.Malformed, match="bytes of sections"):
        loader.load(_forged(obj, ".lbss.size=0x40000000"), {"f": "f"})


# --------------------------------------------------------------------------- the key's parts, the folder's edges


def test_the_cache_folder_falls_back_to_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("LOOM_CACHE_DIR", " ")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "loom"
    assert (tmp_path / "xdg" / "loom").stat().st_mode & 0o777 == 0o700
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "loom" and cache.cache_dir().is_dir()


def test_the_folder_follows_the_environment(disk, monkeypatch, tmp_path):
    """Where LOOM_CACHE_DIR, XDG_CACHE_HOME or HOME changes, the folder is looked for again."""
    monkeypatch.setenv("LOOM_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    for home in ("home1", "home2"):
        monkeypatch.setenv("HOME", str(tmp_path / home))
        assert disk_cache.folder() == tmp_path / home / ".cache" / "loom" / "kernels"
    for xdg in ("xdg1", "xdg2"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / xdg))
        assert disk_cache.folder() == tmp_path / xdg / "loom" / "kernels"
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "mine"))
    assert disk_cache.folder() == tmp_path / "mine" / "kernels"


def test_the_cpu_identity_is_the_first_processors_fields(monkeypatch):
    import io

    cpuinfo = (b"processor\t: 0\nvendor_id\t: GenuineLoom\nflags\t\t: avx2   fma\nbogomips\t: 1.0\n\n"
               b"processor\t: 1\nvendor_id\t: OtherLoom\nmodel\t\t: 9\n")
    monkeypatch.setattr(cache, "open", lambda *a, **k: io.BytesIO(cpuinfo), raising=False)
    assert cache.cpu_identity() == "flags=avx2 fma; vendor_id=GenuineLoom"  # sorted, spaces folded, cpu 0 only

    def no_proc(*args, **kwargs):
        raise FileNotFoundError("/proc/cpuinfo")

    import llvmlite.binding as llvm

    monkeypatch.setattr(cache, "open", no_proc, raising=False)
    assert cache.cpu_identity() == f"llvm {llvm.get_host_cpu_name()} {llvm.get_host_cpu_features().flatten()}"


def test_versions_and_cache_sizes_are_read_from_plain_files(tmp_path):
    from types import SimpleNamespace

    site = tmp_path / "site"
    (site / "loomfake").mkdir(parents=True)
    for name in ("loomfake_dist-2.0.dist-info", "loomfake_dist-1.5.dist-info", "loomfake_distx-9.dist-info",
                 "loomfake_dist-3.0.egg-info"):
        (site / name).mkdir()
    package = SimpleNamespace(__file__=str(site / "loomfake" / "__init__.py"))
    assert cache.distribution_version("loomfake-dist", package) == "1.5,2.0"
    missing = SimpleNamespace(__file__=str(tmp_path / "none" / "pkg" / "__init__.py"))  # no folder to list
    assert cache.distribution_version("loomfake-dist", missing) == "not installed"
    from importlib.metadata import version

    assert cache.distribution_version("numpy", missing) == version("numpy")
    root = tmp_path / "cache"
    for index, fields in (("index1", ("Instruction", "1", "32K")), ("index0", ("Data", "1", None))):
        (root / index).mkdir(parents=True)
        for field, text in zip(("type", "level", "size"), fields):
            if text is not None:
                (root / index / field).write_text(text + "\n")
    (root / "uevent").mkdir()
    assert cache.cache_description(str(root)) == "Data 1 ? Instruction 1 32K"
    assert cache.cache_description(str(tmp_path / "no such folder")) == ""


def _entry_bytes(key: str, header: dict, payload: bytes) -> bytes:
    """A whole, checksummed entry with a JSON header of its own making."""
    import hashlib

    head = json.dumps({"format": cache.FORMAT, "key": key, **header}).encode()
    body = cache._MAGIC + len(head).to_bytes(4, "little") + head + payload
    return body + hashlib.sha256(body).digest()


def test_an_entry_is_decoded_only_when_its_sections_lie_within_it():
    key = "ab" * 32
    payload = b"\x7fELF" + bytes(12)
    header, sections = cache.decode(key, _entry_bytes(key, {"sections": {"object": [0, 16]}}, payload))
    assert sections == {"object": payload} and header["key"] == key
    assert cache.decode(key, _entry_bytes(key, {"sections": {"object": [4, 12]}}, payload))[1] == {"object": bytes(12)}
    for place in ([1, 16], [0, 17], [16, 1], [-1, 1], [0, -1]):
        with pytest.raises(ValueError, match="a section outside the entry"):
            cache.decode(key, _entry_bytes(key, {"sections": {"object": place}}, payload))
    for sections in ({"llvm_ir": [0, 16]}, [], None):
        with pytest.raises(ValueError, match="no object file in the entry"):
            cache.decode(key, _entry_bytes(key, {"sections": sections}, payload))
    with pytest.raises(ValueError, match="an entry of another format or key"):
        cache.decode("cd" * 32, _entry_bytes(key, {"sections": {"object": [0, 16]}}, payload))
    whole = _entry_bytes(key, {"sections": {"object": [0, 16]}}, payload)
    with pytest.raises(ValueError, match="not an entry of this format"):
        cache.decode(key, b"LOOMKC2\n" + whole[8:])
    with pytest.raises(ValueError, match="checksum mismatch"):
        cache.decode(key, whole[:-1] + bytes([whole[-1] ^ 1]))


#: header fields of a kernel's entry forged (whole and checksummed): what its rejection says
_FORGED_FIELDS = {
    "an unknown dtype": (lambda h: h["inputs"][0].update(dtype="float99"), "ValueError: dtype 'float99'"),
    "a runtime module's entry": (lambda h: h.update(kind="runtime"), "ValueError: not a kernel's entry"),
    "no symbols": (lambda h: h.pop("symbols"), "KeyError: 'symbols'"),
    "a symbol the object lacks": (lambda h: h["symbols"].update(k="loom_nowhere"), "does not define k"),
}


@pytest.mark.parametrize("name", _FORGED_FIELDS)
def test_an_entry_whose_header_is_forged_is_rejected(disk, name):
    compiler.compile(relu(26))
    path = kernel_entry_of(disk, relu(26))
    header, sections = cache.decode(path.stem, path.read_bytes())
    del header["format"], header["key"], header["sections"]
    forge, why = _FORGED_FIELDS[name]
    forge(header)
    path.write_bytes(cache.encode(path.stem, header, sections))
    driver.kernel_cache.clear()
    disk_cache.stats.clear()
    with pytest.warns(CacheWarning, match=f"entry {path.stem[:16]}... cannot be used \\(.*{why}"):
        kernel = compiler.compile(relu(26))
    assert type(kernel._module).__name__ == "JITModule" and dict(disk_cache.stats) == {"rejected": 1, "stored": 1}


_RUNTIME_IR = "define i64 @seven() {\n  ret i64 7\n}\n"


def test_a_runtime_module_is_filed_then_loaded_and_its_entry_checked(disk):
    import ctypes

    def seven(module) -> int:
        return ctypes.CFUNCTYPE(ctypes.c_int64)(module.function_address("seven"))()

    compiled = cache.runtime_code("test", _RUNTIME_IR)
    assert type(compiled).__name__ == "JITModule" and seven(compiled) == 7
    assert dict(disk_cache.stats) == {"miss": 1, "stored": 1}
    (path,) = entries(disk)
    loaded = cache.runtime_code("test", _RUNTIME_IR)
    assert type(loaded).__name__ == "LoadedModule" and seven(loaded) == 7 and disk_cache.stats["hit"] == 1
    assert cache.runtime_code("other", _RUNTIME_IR) is not None and len(entries(disk)) == 2  # the name is keyed
    header, sections = cache.decode(path.stem, path.read_bytes())
    del header["format"], header["key"], header["sections"]
    path.write_bytes(cache.encode(path.stem, {**header, "kind": "kernel"}, sections))
    with pytest.warns(CacheWarning, match="not a runtime module's entry"):
        again = cache.runtime_code("test", _RUNTIME_IR)
    assert type(again).__name__ == "JITModule" and seven(again) == 7 and disk_cache.stats["rejected"] == 1
    assert cache.decode(path.stem, path.read_bytes())[0]["kind"] == "runtime"  # filed anew


def test_a_kernel_whose_code_the_loader_does_not_take_is_not_filed(disk):
    from types import SimpleNamespace

    assert disk_cache.store("ef" * 32, SimpleNamespace(_module=SimpleNamespace(object_code=b""))) is False
    assert disk_cache.store("ef" * 32, SimpleNamespace(_module=object())) is False
    assert entries(disk) == [] and dict(disk_cache.stats) == {}


def test_a_failed_write_leaves_no_temporary_and_warns(disk, monkeypatch):
    compiler.compile(relu(27))  # the folder made

    def full(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache.os, "replace", full)
    with pytest.warns(CacheWarning, match=r"cannot write to the kernel cache in .*kernels \(No space left on device\)"):
        assert disk_cache.write("0" * 64, {"kind": "test"}, {"object": b"x"}) is False
    assert sorted(p.name for p in disk.iterdir()) == [p.name for p in entries(disk)]  # no .tmp left
    assert disk_cache.stats["stored"] == 1


def test_a_store_removes_the_temporaries_of_crashed_writers(disk):
    """A temporary older than an hour is a dead writer's: removed when the folder is next
    listed; a younger one may be a live writer's: kept."""
    disk.mkdir(parents=True)
    now = time.time()
    for name, age in (("old", cache._STALE_TEMPORARY_S + 100), ("young", cache._STALE_TEMPORARY_S - 100)):
        (disk / f".{name}.tmp").write_bytes(b"part of an entry")
        os.utime(disk / f".{name}.tmp", (now - age, now - age))
    assert disk_cache.write("1" * 64, {"kind": "test"}, {"object": b"x"})  # the process's first store: lists
    assert sorted(p.name for p in disk.iterdir()) == [".young.tmp", "1" * 64 + ".loom"]


def test_clear_removes_the_entries_only(disk):
    for i in (2, 3):
        assert disk_cache.write(f"{i}" * 64, {"kind": "test"}, {"object": b"x"})
    (disk / ".writer.tmp").write_bytes(b"")
    (disk / "notes.txt").write_text("")
    assert disk_cache.clear() == 2
    assert sorted(p.name for p in disk.iterdir()) == [".writer.tmp", "notes.txt"]
    disk_cache.disable()
    assert disk_cache.folder() is None and disk_cache.clear() == 0


def test_disable_turns_off_reads_and_writes_until_reset(disk):
    compiler.compile(relu(28))
    disk_cache.disable()
    driver.kernel_cache.clear()
    assert type(compiler.compile(relu(28))._module).__name__ == "JITModule"
    assert compiler.compile(relu(29)) is not None and len(entries(disk)) == 1
    assert disk_cache.write("4" * 64, {"kind": "test"}, {"object": b"x"}) is False
    disk_cache.reset()
    driver.kernel_cache.clear()
    assert type(compiler.compile(relu(28))._module).__name__ == "LoadedModule"


def test_another_users_folder_or_entry_is_never_used(disk, monkeypatch):
    compiler.compile(relu(32))
    me = os.geteuid()
    monkeypatch.setattr(cache.os, "geteuid", lambda: me + 1)  # every file now another user's
    driver.kernel_cache.clear()
    with pytest.warns(CacheWarning, match="cannot be used \\(another user's file\\)"):
        assert type(compiler.compile(relu(32))._module).__name__ == "JITModule"
    assert disk_cache.stats["rejected"] == 1
    disk_cache.reset()
    with pytest.warns(CacheWarning, match=r"belongs to another user: the kernel cache is off"):
        assert disk_cache.folder() is None


def test_a_folder_not_writable_turns_the_disk_cache_off(disk, monkeypatch):
    monkeypatch.setattr(cache.os, "access", lambda path, mode: False)
    with pytest.warns(CacheWarning, match=r"kernels is not writable: the kernel cache is off"):
        assert disk_cache.folder() is None


def test_each_warning_is_given_once_per_process(disk):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        disk_cache.warn("one")
        disk_cache.warn("one")
        disk_cache.warn("two")
        disk_cache.reset()
        disk_cache.warn("one")
    assert [str(w.message) for w in caught] == ["one", "two", "one"]
    assert all(w.category is CacheWarning for w in caught)


def test_an_entry_larger_than_the_bound_is_removed_at_once(disk, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_MAX_BYTES", "100")
    assert disk_cache.write("5" * 64, {"kind": "test"}, {"object": bytes(1000)})
    assert entries(disk) == [] and disk_cache.stats["evicted"] == 1 and disk_cache.stats["stored"] == 1


def test_a_folder_removed_under_the_process_fails_the_write_with_a_warning(disk):
    import shutil

    assert disk_cache.write("6" * 64, {"kind": "test"}, {"object": b"x"})
    shutil.rmtree(disk)  # after the process found it usable
    with pytest.warns(CacheWarning, match=r"cannot write to the kernel cache in .*\(No such file or directory\)"):
        assert disk_cache.write("7" * 64, {"kind": "test"}, {"object": b"x"}) is False


def test_runtime_code_the_loader_does_not_take_is_not_filed(disk, monkeypatch):
    import ctypes

    monkeypatch.setattr(cache, "_loadable", lambda obj: False)
    module = cache.runtime_code("test", _RUNTIME_IR)
    assert ctypes.CFUNCTYPE(ctypes.c_int64)(module.function_address("seven"))() == 7
    assert entries(disk) == [] and "stored" not in disk_cache.stats
