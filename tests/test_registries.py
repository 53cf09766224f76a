"""A strategy and a bench suite are each a module plus its line in a registry: everything else
(the CLI's choices, `config --init`, the chain, score-rl's actions, the bench) follows.

The test copies the package, adds a toy strategy and a toy suite the way a contributor would
(a module each, and the module in its registry's `_MODULES`), and runs the copy's CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ctxkit

SAMPLE = Path(__file__).resolve().parents[1] / "sample_transcripts" / "tau-bench-airline.json"

TOY_STRATEGY = '''"""`toy`: a strategy that never helps (a registry test's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxkit.fields import integer, setting
from ctxkit.strategies.base import State

NAME = "toy"
LABEL = "Toying with the context"


@dataclass(frozen=True)
class Params:
    """A knob nobody turns."""

    knob: int = setting(7, integer(0), "the toy's knob")


def toy(state: State, params: Mapping[str, Any]) -> State | None:
    """Cannot help."""
    return None
'''

TOY_SUITE = '''"""The toy suite: one figure (a registry test's)."""

from __future__ import annotations

from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult

NAME = "toy"


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """One figure."""
    res = SuiteResult(NAME)
    res.figures.append(Figure("toy figure", 42.0, "toys"))
    return res
'''


def _register(init: Path, package: str, module: str, alias: str, after: str) -> None:
    """Add `module` to the registry in `init` as a contributor would: its import, its line."""
    text = init.read_text(encoding="utf-8")
    anchor = f"from {package} import {after} as "
    assert anchor in text, f"{init}: no import of {after}"
    text = text.replace(anchor, f"from {package} import {module} as {alias}\n{anchor}", 1)
    head, tail = text.split("_MODULES: tuple[ModuleType, ...] = (", 1)
    text = head + "_MODULES: tuple[ModuleType, ...] = (\n    " + alias + "," + tail
    init.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def extended(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package with a toy strategy and a toy bench suite registered."""
    root = tmp_path_factory.mktemp("extended")
    pkg = root / "ctxkit"
    shutil.copytree(Path(ctxkit.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "strategies" / "toy.py").write_text(TOY_STRATEGY, encoding="utf-8")
    _register(pkg / "strategies" / "__init__.py", "ctxkit.strategies", "toy", "_toy", "offload")
    (pkg / "bench" / "suites" / "toy.py").write_text(TOY_SUITE, encoding="utf-8")
    _register(pkg / "bench" / "suites" / "__init__.py", "ctxkit.bench.suites", "toy", "_toy", "count")
    return root


def _ctxkit(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run(
        [sys.executable, "-m", "ctxkit", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_the_copy_is_the_one_imported(extended: Path) -> None:
    out = _ctxkit(extended, "score-rl", "--list-actions").stdout
    assert "toy\ttoy\t" in out  # each strategy alone is an action


def test_a_new_strategy_is_in_the_help_the_config_and_the_chain(extended: Path) -> None:
    assert "toy" in _ctxkit(extended, "compact", "--help").stdout
    _ctxkit(extended, "config", "--init", str(extended / "c.yaml"))
    config = (extended / "c.yaml").read_text(encoding="utf-8")
    assert "  toy:\n" in config and "knob: 7" in config
    run = _ctxkit(
        extended, "compact", str(SAMPLE), "--limit", "4000", "--chain", "toy,summarize_old",
        "-o", str(extended / "small.json"), "--explain", "-v",
    )
    assert "Toying with the context" in run.stderr  # its label, as the phase runs
    assert "pass 1 toy: cannot help" in run.stderr


def test_a_new_suite_is_a_choice_and_runs_in_the_bench(extended: Path) -> None:
    choices = "".join(_ctxkit(extended, "bench", "--help").stdout.split())
    assert "[toy|count|guard|embed|compact|quality|fidelity|scale|startup|archive|ray|all]" in choices
    report = json.loads(_ctxkit(extended, "bench", "--suite", "toy", "--json").stdout)
    assert report["suites"]["toy"]["figures"][0]["value"] == 42.0
