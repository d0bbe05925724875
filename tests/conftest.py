import os

from hypothesis import HealthCheck, settings

# The default run is a fixed, reproducible sample (CI); HYPOTHESIS_PROFILE=long explores.
settings.register_profile(
    "default", max_examples=20, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
