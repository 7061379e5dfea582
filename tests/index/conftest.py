"""Every index test starts and ends with an empty, enabled index."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from adk_fastcompact import _native


@pytest.fixture(autouse=True)
def _fresh_index() -> Iterator[None]:
    _native.index_configure(enabled=True, max_sessions=64)
    _native.index_clear()
    yield
    _native.index_configure(enabled=True, max_sessions=64)
    _native.index_clear()
