import atexit
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from targets import TARGETS, planning_for

from compiler import driver
from compiler.jit.disk_cache import SourceState, disk_cache

# The default run is a fixed, reproducible sample (CI); HYPOTHESIS_PROFILE=long explores.
settings.register_profile(
    "default", max_examples=20, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# The suite never touches the user's cache folder: one temporary folder for the session
# (made by the first process, xdist's controller; its workers and every subprocess a test
# starts inherit it), removed at the end. The disk cache of kernels is off in it
# (LOOM_CACHE_MAX_BYTES=0), so that a test compiles what it compiles whatever ran before
# it; tests/test_disk_cache.py turns it on in folders of its own.
if "LOOM_TEST_CACHE_DIR" not in os.environ:
    os.environ["LOOM_TEST_CACHE_DIR"] = os.environ["LOOM_CACHE_DIR"] = tempfile.mkdtemp(prefix="loom-test-cache-")
    os.environ["LOOM_CACHE_MAX_BYTES"] = "0"
    atexit.register(shutil.rmtree, os.environ["LOOM_TEST_CACHE_DIR"], ignore_errors=True)


@pytest.fixture(params=sorted(TARGETS))
def vector_target(request):
    """Each kind of x86-64 host in turn (tests/targets.py), planned for through
    LOOM_TARGET whatever this host is: an IR-level test that takes it runs under 256-bit
    and 512-bit vectors alike and derives what it expects from the Target it gets."""
    with planning_for(TARGETS[request.param]) as target:
        yield target


@pytest.fixture
def disk(tmp_path, monkeypatch):
    """The disk cache on, in a folder of the test's own (yields the folder of its
    entries), nothing in memory; Loom's sources count as unchanged (tests/test_disk_cache.py,
    and the tests of what uses the cache)."""
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LOOM_CACHE_MAX_BYTES", raising=False)
    monkeypatch.setattr(SourceState, "unchanged", lambda self: True)
    monkeypatch.setattr(SourceState, "as_imported", lambda self: True)
    disk_cache.reset()
    driver.kernel_cache.clear()
    yield tmp_path / "cache" / "kernels"
    disk_cache.reset()
    driver.kernel_cache.clear()
