"""Example counts for property tests: the full count in a full run, fewer in a fast one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import settings


def examples(n: int) -> int:
    """`n` under the "ci" profile (`make test`); a quarter, at least 10, under "fast" (`-m "not slow"`).

    The profile is chosen in conftest.py before the test modules are imported.
    """
    if settings.get_current_profile_name() == "fast":
        return max(10, n // 4)
    return n


def sweep(values: Iterable[Any], fast: Iterable[Any]) -> list[Any]:
    """Parameters for a sweep: every value runs in `make test`; only `fast` ones (a
    representative few) in `make test-fast`, the rest are marked slow."""
    keep = set(fast)
    return [v if v in keep else pytest.param(v, marks=pytest.mark.slow) for v in values]
