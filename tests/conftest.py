import os

import pytest
from hypothesis import HealthCheck, settings
from targets import TARGETS, planning_for

# The default run is a fixed, reproducible sample (CI); HYPOTHESIS_PROFILE=long explores.
settings.register_profile(
    "default", max_examples=20, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(params=sorted(TARGETS))
def vector_target(request):
    """Each kind of x86-64 host in turn (tests/targets.py), planned for through
    LOOM_TARGET whatever this host is: an IR-level test that takes it runs under 256-bit
    and 512-bit vectors alike and derives what it expects from the Target it gets."""
    with planning_for(TARGETS[request.param]) as target:
        yield target
