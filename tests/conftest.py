"""Shared test configuration.

Hypothesis runs derandomized and without an example database, so a test run
is a pure function of the code: the same examples every time, on every
machine. `HYPOTHESIS_PROFILE=dev` explores more (random, still no database).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import adk_fastcompact
import pytest
from hypothesis import HealthCheck, settings

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=_SUPPRESSED,
)
settings.register_profile(
    "dev",
    derandomize=False,
    database=None,
    deadline=None,
    suppress_health_check=_SUPPRESSED,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _never_leave_installed() -> Iterator[None]:
    """No test sees, or leaves behind, a patched google-adk."""
    adk_fastcompact.uninstall()
    yield
    adk_fastcompact.uninstall()
