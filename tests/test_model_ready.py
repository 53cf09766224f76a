"""scripts/model_ready.py: a smoke run on one scenario, and its dataset split."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "model_ready.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("model_ready", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_on_one_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "realdata"
    empty.mkdir()
    out = tmp_path / "figures.json"
    argv = ["--realdata", str(empty), "--sim-formats", "openai", "-s", "long_chat"]
    code = _script().main([*argv, "--keep", str(tmp_path / "work"), "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    (entry,) = data["files"]
    (run,) = entry["runs"]
    assert run["file"] == "sim/openai/long_chat-0.json" and run["format"] == "openai"
    assert run["target"] == run["tokens"] // 3
    assert run["format_ok"] is True and run["expand_ok"] is True and run["cli_same"] is True
    fid = run["fidelity"]
    assert fid["needles"]["total"] > 0 and fid["user_verbatim"]["all"]["total"] > 1
    assert fid["target_ratio"] == run["tokens_after"] / run["target"]
    s = data["summary"]
    assert s["transcripts"] == s["simulated"] == 1 and s["expand_ok"] == {"kept": 1, "total": 1}
    text = capsys.readouterr().out
    assert "sim/openai/long_chat-0.json" in text
    assert "1 transcript (0 real, 1 simulated) in 1 file" in text
    assert "expand round-trip equals the input:  1/1 (100%)" in text


def test_a_dataset_is_split_into_its_largest_conversations(tmp_path: Path) -> None:
    convs = [
        {"conversations": [{"from": "human", "value": "hi" * n}, {"from": "gpt", "value": "ok"}]}
        for n in (1, 30, 5, 20)
    ]
    path = tmp_path / "data.json"
    path.write_text(json.dumps(convs))
    parts = _script().split_dataset(str(path), str(tmp_path / "split"), keep=2)
    assert [Path(p).name for p in parts] == ["conv00001.json", "conv00003.json"]
    assert json.loads(Path(parts[0]).read_text()) == [convs[1]]
