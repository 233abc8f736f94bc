"""Hypothesis profiles: the normal test run is deterministic, the fuzz lane explores.

A run of ``bash scripts/test.sh`` or CI must test the change being landed, not whichever
examples hypothesis happens to draw on that machine (issue #19: a fresh clone drew a device ID
no run before it had). So the ``ci`` profile is loaded unless ``KUBEDEVICE_HYPOTHESIS_PROFILE``
names another: each test's seed is fixed (``derandomize``: a hash of the test's source) and no
example database is read, so a stale ``.hypothesis/`` cannot change what runs. No wall-clock
deadline either: on a loaded machine it would make the outcome depend on the load; a test that
wants one (``tests/dra/test_cel_fuzz.py``) names its own.

``scripts/fuzz.sh`` loads ``explore``: a random seed per run and the database under
``.hypothesis/``, where every failure is kept and replayed first by the next run.

A test's own ``@settings(...)`` keeps its ``max_examples`` and ``deadline``; what it does not name
it takes from the profile loaded when the settings object is created. pytest imports this file
before any test module, so module-level ``FUZZ = settings(...)`` objects inherit the profile.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

PROFILE_VARIABLE = "KUBEDEVICE_HYPOTHESIS_PROFILE"
EXAMPLES = Path(__file__).resolve().parent.parent / ".hypothesis" / "examples"

# Both start from hypothesis' own defaults, not the current profile: hypothesis loads its
# built-in "ci" profile by itself when the CI variable is set, and explore must not inherit it.
_BASE = settings.get_profile("default")
settings.register_profile(
    "ci",
    _BASE,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore",
    _BASE,
    derandomize=False,
    database=DirectoryBasedExampleDatabase(EXAMPLES),
    max_examples=1000,  # for tests that do not name their own; scripts/fuzz.sh repeats the rest
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)

_PROFILE = os.environ.get(PROFILE_VARIABLE) or "ci"
if _PROFILE not in ("ci", "explore"):
    raise pytest.UsageError(f"{PROFILE_VARIABLE}={_PROFILE!r}: expected ci or explore")
settings.load_profile(_PROFILE)
