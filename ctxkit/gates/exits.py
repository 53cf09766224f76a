"""The exit codes of a guard run, which CI reads: per status against the `fail_on` bar, for
structural errors (`--check`) and baseline regressions, and the worst of several.

    >>> exit_code_for("warn"), exit_code_for("warn", fail_on="warn"), exit_code_for("overflow")
    (0, 3, 5)
    >>> combine_exit_codes([0, 7, 3])
    3
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxkit.budget import STATUSES, status_rank
from ctxkit.gates.baseline import EXIT_REGRESSION

FAIL_ON = STATUSES[1:]  # any status but ok can fail a run
EXIT_CODES = {"ok": 0, "warn": 3, "compact": 3, "block": 4, "overflow": 5}
EXIT_PROBLEMS = 6


def exit_code_for(status: str, fail_on: str = "compact") -> int:
    """The exit code of a status: 0 below the `fail_on` bar, else 3 (warn, compact), 4, 5."""
    if status_rank(status) < status_rank(fail_on):
        return 0
    return EXIT_CODES[status]



def combine_exit_codes(codes: Sequence[int]) -> int:
    """The worst exit code over several transcripts and gates (5 > 4 > 3 > 7 > 6 > 0)."""
    order = {
        0: 0,
        EXIT_PROBLEMS: 1,
        EXIT_REGRESSION: 2,
        EXIT_CODES["warn"]: 3,
        EXIT_CODES["block"]: 4,
        EXIT_CODES["overflow"]: 5,
    }
    return max(codes, key=lambda c: order.get(c, len(order)))

