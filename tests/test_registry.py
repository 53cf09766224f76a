"""A new format or strategy is its module plus one registry line: registered through the real
registries (in a fixture, taken out afterwards), a toy format is detected, read, written, found
in folders, carried through Parquet, asked for its model by forensics and counted by `ctxkit
count`; a toy strategy runs in `compact --chain`, the config and the strategy listing. Plugins
of other distributions register through entry points (a dist-info folder on sys.path: what
importlib.metadata finds for an installed distribution)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxkit import plugins, strategies
from ctxkit.archive.recall_tool import recall_tool_for
from ctxkit.cli import cli
from ctxkit.fields import integer, setting
from ctxkit.formats import FORMATS, dataset_item, expand_paths, read_path, read_text, write_path
from ctxkit.formats import registry as formats_registry
from ctxkit.formats.base import Format, newest_model
from ctxkit.formats.common import Source
from ctxkit.model import Transcript, Unit
from ctxkit.recipes.forensics import log_model
from ctxkit.strategies.base import State

SAMPLE = Path(__file__).resolve().parents[1] / "sample_transcripts" / "tau-bench-airline.json"


# ------------------------------------------------------------------ a toy format


def _detect(records: list[Any]) -> bool:
    return bool(records) and all(
        isinstance(r, dict) and {"who", "said"} <= set(r) <= {"who", "said", "model"} for r in records[:20]
    )


def _read(records: list[Any], src: Source) -> Transcript:
    units = [Unit(id=f"u{i}", role=r["who"], content=r["said"], raw=r, group=i) for i, r in enumerate(records)]
    return Transcript(units=units, id=src.tid, source_format="toy", layout=src.layout)


def _write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    own = t.source_format == "toy"
    return [u.raw if own and u.raw else {"who": u.role, "said": u.content} for u in t.units], {}


def _validate(data: Any) -> list[str]:
    lines = data.splitlines() if isinstance(data, str) else []
    return [f"line {n + 1}: not a toy record" for n, line in enumerate(lines) if line and '"who"' not in line]


def _model(t: Transcript) -> str | None:
    return newest_model(t, (u.raw for u in t.units), lambda rec: rec.get("model"))


TOY = Format(name="toy", label="toy log", shape="log", detect=_detect, read=_read, write=_write,
             validate=_validate, suffixes=(".chat",), tool_shape="anthropic", model=_model)
TOY_LOG = '{"who":"user","said":"hi"}\n{"who":"assistant","said":"hello","model":"toy-1"}\n'


@pytest.fixture
def toy_format() -> Iterator[Format]:
    formats_registry.register(TOY)
    try:
        yield TOY
    finally:
        formats_registry.unregister("toy")


def test_a_registered_format_is_detected_read_and_written(toy_format: Format, tmp_path: Path) -> None:
    (t,) = read_text(TOY_LOG)
    assert t.source_format == "toy" and [u.content for u in t.units] == ["hi", "hello"]
    write_path([t], str(tmp_path / "out.jsonl"))
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == TOY_LOG
    write_path([t], str(tmp_path / "as-openai.json"), "openai")
    (back,) = read_path(str(tmp_path / "as-openai.json"))
    write_path([back], str(tmp_path / "again.jsonl"), "toy")
    (again,) = read_path(str(tmp_path / "again.jsonl"))
    assert again.source_format == "toy" and [u.content for u in again.units] == ["hi", "hello"]


def test_a_registered_format_is_found_in_folders_by_its_suffix(toy_format: Format, tmp_path: Path) -> None:
    (tmp_path / "a.chat").write_text(TOY_LOG, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a transcript", encoding="utf-8")
    assert expand_paths([str(tmp_path)]) == [str(tmp_path / "a.chat")]
    (t,) = read_path(str(tmp_path / "a.chat"))
    assert t.source_format == "toy"


def test_a_folder_of_nothing_known_names_the_registered_suffixes(toy_format: Format, tmp_path: Path) -> None:
    from ctxkit.errors import InputError

    with pytest.raises(InputError, match=r"holds no \*\.json, \*\.jsonl, \*\.traj, \*\.chat, \*\.parquet or"):
        expand_paths([str(tmp_path)])


def test_a_registered_format_goes_through_parquet(toy_format: Format, tmp_path: Path) -> None:
    pytest.importorskip("polars")
    from ctxkit.formats.parquet import write_parquet

    (t,) = read_text(TOY_LOG)
    write_parquet([t, t], str(tmp_path / "x.parquet"))
    back = list(read_path(str(tmp_path / "x.parquet")))
    assert [b.source_format for b in back] == ["toy", "toy"]
    assert [dataset_item(b) for b in back] == [dataset_item(t)] * 2


def test_forensics_and_the_recall_tool_ask_the_format(toy_format: Format) -> None:
    (t,) = read_text(TOY_LOG)
    assert log_model(t) == "toy-1"  # what the format says its log records
    tool = recall_tool_for("toy")
    assert tool is not None and "input_schema" in tool  # the format's tool_shape


def test_ctxkit_count_reads_a_registered_format(toy_format: Format, tmp_path: Path) -> None:
    (tmp_path / "a.chat").write_text(TOY_LOG, encoding="utf-8")
    result = CliRunner().invoke(cli, ["count", str(tmp_path / "a.chat")], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["format"] == "toy"


def test_unregistering_leaves_the_registry_as_it_was() -> None:
    before = list(FORMATS)
    formats_registry.register(TOY)
    with pytest.raises(Exception, match="registered already"):
        formats_registry.register(TOY)
    formats_registry.unregister("toy")
    assert list(FORMATS) == before


# ------------------------------------------------------------------ a toy strategy


@dataclass(frozen=True)
class _ToyParams:
    """A knob nobody turns."""

    knob: int = setting(7, integer(0), "the toy's knob")


def _toy(state: State, params: Mapping[str, Any]) -> State | None:
    """Cannot help."""
    return None


@pytest.fixture
def toy_strategy() -> Iterator[types.ModuleType]:
    module = types.ModuleType("toy_strategy", "`toy`: a strategy that never helps (a registry test's).")
    module.NAME, module.LABEL, module.Params, module.toy = "toy", "Toying with the context", _ToyParams, _toy  # type: ignore[attr-defined]
    strategies.register(module)
    try:
        yield module
    finally:
        strategies.unregister("toy")


def test_a_registered_strategy_runs_in_the_chain(toy_strategy: types.ModuleType, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, [
        "compact", str(SAMPLE), "--limit", "4000", "--chain", "toy,summarize_old",
        "-o", str(tmp_path / "small.json"), "--explain", "-v",
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "Toying with the context" in result.stderr  # its label, as the phase runs
    assert "pass 1 toy: cannot help" in result.stderr


def test_a_registered_strategy_is_in_the_config_and_the_listing(toy_strategy: types.ModuleType,
                                                                 tmp_path: Path) -> None:
    runner = CliRunner()
    made = runner.invoke(cli, ["config", "--init", str(tmp_path / "c.yaml")], catch_exceptions=False)
    assert made.exit_code == 0, made.stderr
    config = (tmp_path / "c.yaml").read_text(encoding="utf-8")
    assert "  toy:\n" in config and "knob: 7" in config
    listed = runner.invoke(cli, ["score-rl", "--list-actions"], catch_exceptions=False)
    assert "toy\ttoy\t" in listed.stdout  # each strategy alone is an action


# ------------------------------------------------------------------ plugins (entry points)

PLUGIN = {
    "__init__.py": '"""A distribution\'s format, strategy and peer (a registry test\'s)."""\n',
    "format.py": '''"""A plugged-in format: one {"said"} object per line."""

from ctxkit.formats.base import Format
from ctxkit.model import Transcript, Unit


def detect(records):
    return bool(records) and all(isinstance(r, dict) and set(r) == {"said"} for r in records)


def read(records, src):
    units = [Unit(id=f"u{i}", role="user", content=r["said"], raw=r, group=i) for i, r in enumerate(records)]
    return Transcript(units=units, id=src.tid, source_format="plugged", layout=src.layout)


def write(t):
    return [{"said": u.content} for u in t.units], {}


FORMAT = Format(name="plugged", label="plugged chat", shape="log", detect=detect, read=read, write=write,
                validate=lambda data: [])
''',
    "strategy.py": '''"""`plugged`: a plugged-in strategy that never helps."""

from dataclasses import dataclass

from ctxkit.fields import integer, setting

NAME = "plugged"
LABEL = "A plugged-in strategy"


@dataclass(frozen=True)
class Params:
    """Nothing to set."""

    knob: int = setting(1, integer(0), "a knob")


def plugged(state, params):
    """Cannot help."""
    return None
''',
    "peer.py": '''"""A plugged-in peer: drop-oldest under another name."""

from ctxkit.recipes import Peer
from ctxkit.recipes.baselines import drop_oldest

PEER = Peer(drop_oldest, "a plugged-in peer")
''',
}


def _distribution(site: Path, entry_points: str) -> None:
    """An installed distribution as importlib.metadata finds it: its dist-info on sys.path."""
    info = site / "ctxkit_plugged-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxkit-plugged\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    (site / "ctxkit_plugged").mkdir()
    for name, text in PLUGIN.items():
        (site / "ctxkit_plugged" / name).write_text(text, encoding="utf-8")


ENTRY_POINTS = """[ctxkit.formats]
plugged = ctxkit_plugged.format:FORMAT

[ctxkit.strategies]
plugged = ctxkit_plugged.strategy

[ctxkit.peers]
plugged = ctxkit_plugged.peer:PEER
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for distributions, looked at afresh; forgotten afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    plugins.rescan()
    yield folder
    monkeypatch.undo()
    for name in [m for m in sys.modules if m.split(".")[0] == "ctxkit_plugged"]:
        del sys.modules[name]
    plugins.rescan()


def test_installed_plugins_register_in_every_registry(site: Path) -> None:
    _distribution(site, ENTRY_POINTS)
    try:
        assert formats_registry.load_plugins() == ["plugged"]
        assert strategies.load_plugins() == ["plugged"]
        assert FORMATS["plugged"].label == "plugged chat" and "plugged" in strategies.STRATEGIES
        assert formats_registry.load_plugins() == [] and strategies.load_plugins() == []  # once
    finally:
        formats_registry.unregister("plugged")
        strategies.unregister("plugged")


def test_a_new_process_sees_installed_plugins_everywhere(site: Path, tmp_path: Path) -> None:
    _distribution(site, ENTRY_POINTS)
    show = ("import json, ctxkit.cli; from ctxkit.formats import FORMATS, WRITABLE; "
            "from ctxkit.strategies import STRATEGIES; from ctxkit.recipes import RECIPES; "
            "from ctxkit.bench.peers import PEERS; "
            "print(json.dumps(['plugged' in x for x in (FORMATS, WRITABLE, STRATEGIES, RECIPES, PEERS)]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    seen = subprocess.run([sys.executable, "-c", show], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout) == [True] * 5
    assert seen.stderr == ""


def test_a_bad_plugin_is_one_line_that_names_it(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _distribution(site, "[ctxkit.formats]\nbroken = ctxkit_missing:FORMAT\nodd = ctxkit_plugged.strategy:NAME\n")
    assert formats_registry.load_plugins() == []
    assert capsys.readouterr().err.splitlines() == [
        "ctxkit: plugin 'broken' (ctxkit.formats = ctxkit_missing:FORMAT, from ctxkit-plugged 0.1) not loaded: "
        "ModuleNotFoundError: No module named 'ctxkit_missing'",
        "ctxkit: plugin 'odd' (ctxkit.formats = ctxkit_plugged.strategy:NAME, from ctxkit-plugged 0.1) not loaded: "
        "it is a str, not a ctxkit.formats.base.Format of a new name",
    ]
