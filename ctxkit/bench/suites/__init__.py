"""The bench suites, by name (a registry, as the strategies are): count, guard, embed, compact,
quality, fidelity, scale, startup, archive, ray; and `run`.

Each suite is a module with `NAME` and `measure(opts, say) -> SuiteResult`, and optionally
`tables(result)`: the tables `bench` prints under its figures. A new suite is a module and one
line in `_MODULES`; `--suite` and `all` follow from the registry.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import ModuleType

from ctxkit.bench.harness import _loadavg, machine_notes
from ctxkit.bench.records import BenchOptions, BenchReport, Progress, SuiteResult, Table
from ctxkit.bench.suites import archive as _archive
from ctxkit.bench.suites import compact as _compact
from ctxkit.bench.suites import count as _count
from ctxkit.bench.suites import embed as _embed
from ctxkit.bench.suites import fidelity as _fidelity
from ctxkit.bench.suites import guard as _guard
from ctxkit.bench.suites import quality as _quality
from ctxkit.bench.suites import ray as _ray
from ctxkit.bench.suites import scale as _scale
from ctxkit.bench.suites import startup as _startup
from ctxkit.errors import UsageError, unknown_name

# The registry: one line per suite module, in the order `all` runs them.
_MODULES: tuple[ModuleType, ...] = (
    _count,
    _guard,
    _embed,
    _compact,
    _quality,
    _fidelity,
    _scale,
    _startup,
    _archive,
    _ray,
)

# Suites `--quick` leaves out of `all` (each still runs when named): why, for the report
QUICK_LEAVES_OUT = {
    "ray": "Ray's start-up alone takes 10-20 s; --suite ray --quick runs it",
}

SUITES: dict[str, Callable[[BenchOptions, Progress], SuiteResult]] = {
    m.NAME: m.measure for m in _MODULES
}
TABLES: dict[str, Callable[[SuiteResult], list[Table]]] = {
    m.NAME: m.tables for m in _MODULES if hasattr(m, "tables")
}


def run(
    suites: Sequence[str], options: BenchOptions | None = None, progress: Progress | None = None
) -> BenchReport:
    """Run the named suites ("all" for every one) and return their figures."""
    opts = options or BenchOptions()
    say = progress or (lambda _m: None)
    names: list[str] = []
    left_out: dict[str, str] = {}
    for name in suites:
        if name == "all":
            for n in SUITES:
                if opts.quick and n in QUICK_LEAVES_OUT:
                    left_out[n] = QUICK_LEAVES_OUT[n]
                elif n not in names:
                    names.append(n)
        elif name in SUITES:
            if name not in names:
                names.append(name)
        else:
            raise unknown_name("suite", name, [*SUITES, "all"])
    if not names:
        raise UsageError("no suite to run; pick one of " + ", ".join([*SUITES, "all"]))
    from ctxkit.embedders import DEFAULT_EMBEDDER

    report = BenchReport(
        machine=machine_notes(),
        options={
            "suites": names,
            "quick": opts.quick,
            "realdata": str(opts.realdata) if opts.realdata and opts.realdata.is_dir() else None,
            "embedder": DEFAULT_EMBEDDER,  # what ctxkit's chain scores relevance with
            "left_out": {n: why for n, why in left_out.items() if n not in names},
        },
        suites={},
    )
    for name in names:
        say(f"bench: {name}")
        start = time.perf_counter()
        result = SUITES[name](opts, say)
        result.time_s = time.perf_counter() - start
        report.suites[name] = result
    report.machine["load_average_end"] = _loadavg()
    return report
