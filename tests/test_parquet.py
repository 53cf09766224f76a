"""Parquet conversation datasets: one conversation per row, messages as a list column.

Read lazily (row groups streamed), written atomically, lossless both ways; the shapes of the
public SWE trajectory datasets read as they are.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from ctxkit.cli import cli
from ctxkit.errors import InputError, UsageError
from ctxkit.formats import (
    FORMATS,
    ReadOptions,
    ReadStats,
    dataset_item,
    expand_paths,
    read_path,
    read_text,
    write_path,
)
from ctxkit.formats.parquet import (
    ParquetWriter,
    read_parquet,
    read_rows,
    row_to_conversation,
    rows_to_transcripts,
    transcript_to_row,
    write_parquet,
)
from ctxkit.simulate import generate

pl = pytest.importorskip("polars")

# Every folder of ../shared/realdata whose files this branch reads.
REAL_DIRS = [
    "aider", "anthropic-messages", "claude-code", "codex", "mini-swe-agent", "openai-chat",
    "openhands", "sharegpt", "swe-agent",
]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def items(path: str | Path) -> list[Any]:
    return [dataset_item(t) for t in read_path(str(path))]


def _real_files(realdata: Path) -> list[Path]:
    return [f for d in REAL_DIRS for f in sorted((realdata / d).iterdir()) if f.is_file()]


# --------------------------------------------------------------------------- round trips


def test_every_real_transcript_round_trips(realdata: Path, tmp_path: Path) -> None:
    files = _real_files(realdata)
    assert len(files) >= 15
    for f in files:
        ts = list(read_path(str(f)))
        out = tmp_path / (f.name + ".parquet")
        assert write_parquet(ts, str(out)) == len(ts)
        back = list(read_path(str(out)))
        # a format written as text (aider) is stored as its chat messages
        fmt = None if isinstance(dataset_item(ts[0]), dict) else "openai"
        assert [dataset_item(t, fmt) for t in back] == [dataset_item(t, fmt) for t in ts], f.name
        # and Parquet -> Parquet gives the same rows
        again = tmp_path / "again.parquet"
        write_parquet(back, str(again))
        assert read_rows(again) == read_rows(out), f.name


def test_compact_with_nothing_to_do_gives_the_same_rows(realdata: Path, tmp_path: Path) -> None:
    src = realdata / "sharegpt" / "hiyouga__LLaMA-Factory__data_glaive_toolcall_en_demo.json"
    r = run("compact", str(src), "--limit", "1000000", "-o", str(tmp_path / "x.parquet"))
    assert r.exit_code == 0, r.stderr
    assert items(tmp_path / "x.parquet") == items(src)
    r = run("compact", str(tmp_path / "x.parquet"), "--limit", "1000000", "-o", str(tmp_path / "y.parquet"))
    assert r.exit_code == 0, r.stderr
    assert read_rows(tmp_path / "y.parquet") == read_rows(tmp_path / "x.parquet")
    # to JSONL: the dataset as JSON lines, not the Parquet bytes
    r = run("compact", str(tmp_path / "x.parquet"), "--limit", "1000000", "-o", str(tmp_path / "x.jsonl"))
    assert r.exit_code == 0, r.stderr
    rows = [orjson.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert rows == orjson.loads(src.read_bytes())


def test_compact_then_expand_restores_the_rows(tmp_path: Path) -> None:
    ts = [generate(name, seed=2, tokens=3000) for name in ("long_chat", "log_heavy", "parallel_tools")]
    for t in ts:
        t.id = ""  # ids from the file, as any dataset's
    write_path(ts, str(tmp_path / "in.jsonl"), "openai")
    run("compact", str(tmp_path / "in.jsonl"), "--limit", "10000000", "-o", str(tmp_path / "in.parquet"))
    r = run("compact", str(tmp_path / "in.parquet"), "--limit", "1500", "-o", str(tmp_path / "small.parquet"))
    assert r.exit_code == 0, r.stderr
    assert "3 conversations: 3 compacted, 0 unchanged; " in r.stderr
    small = read_rows(tmp_path / "small.parquet")
    assert len(small) == 3 and small != read_rows(tmp_path / "in.parquet")
    r = run("expand", str(tmp_path / "small.parquet"), "-o", str(tmp_path / "back.parquet"))
    assert r.exit_code == 0, r.stderr
    assert read_rows(tmp_path / "back.parquet") == read_rows(tmp_path / "in.parquet")
    assert not list(tmp_path.glob(".ctxkit-*")) and not list(tmp_path.glob("*.tmp*"))


def test_values_of_every_kind_round_trip(tmp_path: Path) -> None:
    lines = [
        {"messages": [{"role": "user", "content": "a"}], "instance_id": "x-1", "n": 3, "ok": True,
         "score": 0.5, "meta": {"k": [1, None]}, "maybe": None},
        {"messages": [
            {"role": "system", "content": [{"type": "text", "text": "parts"}]},
            {"role": "user", "content": "q", "name": "ann", "weight": 0},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            {"role": "assistant", "content": "odd call", "tool_calls": [{"id": "c2", "function": {"name": "g", "arguments": {"x": 1}}}]},
        ], "instance_id": "x-2", "n": "three", "extra_only_here": [1, "two"]},
        {"messages": [], "instance_id": "x-3"},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(orjson.dumps(line).decode() + "\n" for line in lines))
    write_parquet(read_path(str(src)), str(tmp_path / "x.parquet"))
    assert items(tmp_path / "x.parquet") == lines
    schema = pl.read_parquet_schema(tmp_path / "x.parquet")
    assert schema["instance_id"] == pl.String and schema["score"] == pl.Float64
    assert schema["ok"] == pl.Boolean and schema["n"] == pl.String  # 3 and "three": JSON text
    message = schema["messages"].inner
    assert {f.name for f in message.fields} >= {"role", "content", "tool_calls", "extra"}


# every format of the registry (a text format has no dataset: its rows are chat messages)
@pytest.mark.parametrize("fmt", [f.name for f in FORMATS.values() if f.shape != "text"])
def test_every_dataset_format_round_trips(tmp_path: Path, fmt: str) -> None:
    ts = [generate(name, seed=3, tokens=2000) for name in ("parallel_tools", "log_heavy")]
    write_path(ts, str(tmp_path / "in.jsonl"), fmt)
    src = list(read_path(str(tmp_path / "in.jsonl")))
    write_parquet(src, str(tmp_path / "x.parquet"))
    back = list(read_path(str(tmp_path / "x.parquet")))
    assert [dataset_item(t) for t in back] == [dataset_item(t) for t in src]


def test_empty_dataset_writes_a_file_with_the_messages_column(tmp_path: Path) -> None:
    assert write_parquet([], str(tmp_path / "e.parquet")) == 0
    assert "messages" in pl.read_parquet_schema(tmp_path / "e.parquet")
    assert list(read_path(str(tmp_path / "e.parquet"))) == []


def test_failed_write_leaves_the_target_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "out.parquet"
    target.write_bytes(b"old")
    (t,) = read_text('[{"role": "user", "content": "hi"}]')
    with pytest.raises(RuntimeError), ParquetWriter(str(target)) as w:
        w.write(t)
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert list(tmp_path.iterdir()) == [target]


def test_library_functions_for_other_engines() -> None:
    (t,) = read_text('{"messages": [{"role": "user", "content": "Hi"}], "split": "train"}')
    row = transcript_to_row(t)
    assert row_to_conversation(row) == {"messages": [{"role": "user", "content": "Hi"}], "split": "train"}
    (back,) = rows_to_transcripts([row], "part-0.parquet", start=7)
    assert back.id == "part-0#7" and dataset_item(back) == dataset_item(t)


# --------------------------------------------------------------------------- laziness


def test_reader_yields_the_first_row_before_it_reads_the_last_row_group(tmp_path: Path) -> None:
    """Damage the file's last row group after the first transcript came out: a reader that
    had read everything first would not notice; a streaming one fails on that row group."""
    pq = pytest.importorskip("pyarrow.parquet")  # to find the row groups' bytes
    t = generate("long_chat", seed=1, tokens=1500)
    path = tmp_path / "many.parquet"
    write_parquet((t for _ in range(400)), str(path), row_group_rows=8)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == 50
    reader = read_parquet(str(path), batch_rows=8)
    first = next(reader)
    assert first.id == t.id and [u.content for u in first.units] == [u.content for u in t.units]
    last = meta.row_group(meta.num_row_groups - 1)
    start = min(last.column(i).data_page_offset for i in range(last.num_columns))
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(b"\xff" * 64)
    with pytest.raises(InputError) as e:
        for _ in reader:
            pass
    assert str(e.value).startswith(f"{path}:")
    assert "cannot read as Parquet" in str(e.value)


# --------------------------------------------------------------------------- other datasets


def _write(path: Path, rows: list[dict[str, Any]], schema: dict[str, Any] | None = None) -> Path:
    pl.DataFrame(rows, schema=schema).write_parquet(path)
    return path


def test_swe_gym_messages_column(tmp_path: Path) -> None:
    path = _write(tmp_path / "train-00000-of-00001.parquet", [
        {"instance_id": "django__django-1", "messages": [
            {"role": "system", "content": "You are OpenHands."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "Done."}], "resolved": True},
    ])
    (t,) = read_path(str(path))
    assert t.id == "django__django-1"  # the row's own id, as for a JSONL line
    assert [(u.role, u.content) for u in t.units] == [
        ("system", "You are OpenHands."), ("user", "Fix the bug."), ("assistant", "Done.")]
    assert t.envelope == {"instance_id": "django__django-1", "resolved": True}


def test_trajectory_column_with_tool_calls_and_nulls(tmp_path: Path) -> None:
    """NVIDIA / nebius OpenHands trajectories: struct fields a message lacks are nulls."""
    path = _write(tmp_path / "t.parquet", [
        {"instance_id": "a__b-1", "trajectory": [
            {"role": "user", "content": "go", "name": None, "tool_call_id": None, "tool_calls": None},
            {"role": "assistant", "content": "", "name": None, "tool_call_id": None, "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
            {"role": "tool", "content": "a.py", "name": "bash", "tool_call_id": "t1", "tool_calls": None}]},
    ])
    (t,) = read_path(str(path))
    assert [u.role for u in t.units] == ["user", "assistant", "tool"]
    assert t.units[1].tool_calls[0].name == "bash" and t.units[2].tool_call_id == "t1"
    write_parquet([t], str(tmp_path / "out.parquet"))
    (row,) = read_rows(tmp_path / "out.parquet")
    assert list(row)[:2] == ["instance_id", "trajectory"]  # the column keeps its name


def test_nebius_swe_agent_text_and_ai_roles(tmp_path: Path) -> None:
    path = _write(tmp_path / "n.parquet", [
        {"instance_id": "x__y-2", "model_name": "m", "target": False, "trajectory": [
            {"cutoff_date": None, "mask": False, "role": "system", "system_prompt": "sys", "text": "You are SWE-agent."},
            {"cutoff_date": None, "mask": False, "role": "user", "system_prompt": None, "text": "Issue: it fails."},
            {"cutoff_date": None, "mask": True, "role": "ai", "system_prompt": None, "text": "ls\n"}]},
    ])
    (t,) = read_path(str(path))
    assert [(u.role, u.content) for u in t.units] == [
        ("system", "You are SWE-agent."), ("user", "Issue: it fails."), ("assistant", "ls\n")]


def test_nebius_system_prompt_field_is_the_system_message(tmp_path: Path) -> None:
    """nebius keeps the system prompt in `system_prompt` (its `text` null): it is the content."""
    path = _write(tmp_path / "n.parquet", [
        {"instance_id": "x__y-3", "trajectory": [
            {"cutoff_date": "01.01.2023", "mask": False, "role": "system",
             "system_prompt": "SETTING: You are an autonomous programmer.", "text": None},
            {"cutoff_date": None, "mask": False, "role": "user", "system_prompt": None, "text": "Issue: it fails."},
            {"cutoff_date": None, "mask": True, "role": "ai", "system_prompt": None, "text": "ls\n"}]},
    ])
    (t,) = read_path(str(path))
    assert [(u.role, u.content) for u in t.units] == [
        ("system", "SETTING: You are an autonomous programmer."), ("user", "Issue: it fails."),
        ("assistant", "ls\n")]


def test_messages_and_tools_as_json_text(tmp_path: Path) -> None:
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    path = _write(tmp_path / "c.parquet", [
        {"trajectory_id": "r1", "messages": orjson.dumps(msgs).decode(), "tools": orjson.dumps(tools).decode()}])
    (t,) = read_path(str(path))
    assert [u.content for u in t.units] == ["hi", "yo"]
    assert t.tools == tools


def test_rows_with_numpy_arrays_as_ray_data_and_pandas_give_them() -> None:
    np = pytest.importorskip("numpy")
    calls = np.array([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])
    row = {
        "instance_id": "a-1",
        "turns": np.int64(2),
        "messages": np.array([
            {"role": "user", "content": "go", "tool_calls": None},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "content": "ok", "tool_call_id": "c1", "tool_calls": None},
        ]),
    }
    (t,) = rows_to_transcripts([row], "shard.parquet")
    assert [u.role for u in t.units] == ["user", "assistant", "tool"]
    assert t.units[1].tool_calls[0].name == "f"
    assert t.envelope["turns"] == 2 and type(t.envelope["turns"]) is int


def test_parquet_is_known_by_its_magic_and_found_in_directories(tmp_path: Path) -> None:
    (t,) = read_text('[{"role": "user", "content": "hi"}]')
    write_parquet([t], str(tmp_path / "d.parquet"))
    (tmp_path / "d.parquet").rename(tmp_path / "d.bin")
    (back,) = read_path(str(tmp_path / "d.bin"))
    assert back.units[0].content == "hi"
    (tmp_path / "d.bin").rename(tmp_path / "d.parquet")
    assert expand_paths([str(tmp_path)]) == [str(tmp_path / "d.parquet")]


def test_parquet_on_stdin(tmp_path: Path) -> None:
    (t,) = read_text('[{"role": "user", "content": "hi"}]')
    write_parquet([t, t], str(tmp_path / "d.parquet"))
    r = CliRunner().invoke(cli, ["count"], input=(tmp_path / "d.parquet").read_bytes(), catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout.splitlines()[-1])["transcript"] == "total (2 conversations)"


# --------------------------------------------------------------------------- errors


def test_a_row_that_is_not_a_conversation_names_file_and_row(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.parquet", [
        {"messages": [{"role": "user", "content": "ok"}], "note": None},
        {"messages": None, "note": "no messages here"},
    ], schema={"messages": pl.List(pl.Struct({"role": pl.String, "content": pl.String})), "note": pl.String})
    with pytest.raises(InputError) as e:
        list(read_path(str(path)))
    assert str(e.value).startswith(f"{path}:2: not a conversation: a row needs a messages list column")
    stats = ReadStats()
    ts = list(read_path(str(path), ReadOptions(skip_invalid=True), stats=stats))
    assert len(ts) == 1 and stats.skipped_invalid == 1
    r = run("count", str(path))
    assert r.exit_code == 1 and f"{path}:2: not a conversation" in r.stderr


def test_a_file_that_is_not_parquet_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "fake.parquet"
    path.write_text("[]")
    r = run("count", str(path))
    assert r.exit_code == 1
    assert r.stderr.startswith(f"Error: {path}: cannot read as Parquet")


def test_without_polars_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (t,) = read_text('[{"role": "user", "content": "hi"}]')
    write_parquet([t], str(tmp_path / "d.parquet"))
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(UsageError, match=r"pip install 'ctxkit\[parquet\]'"):
        list(read_path(str(tmp_path / "d.parquet")))
    with pytest.raises(UsageError, match="polars"):
        write_parquet([t], str(tmp_path / "e.parquet"))


def test_compacted_rows_keep_text_content_for_readers_without_ctxkit(tmp_path: Path) -> None:
    """A summary joined to a user message makes its content a list of text parts; the file
    still gives that message's text as `content` (pandas, datasets and polars users read that
    column), and ctxkit reads the parts back from `extra`."""
    import polars

    msgs = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix issue 7."}]
    for s in range(6):
        msgs += [{"role": "assistant", "content": f"step {s}: cat f{s}.py"},
                 {"role": "user", "content": "\n".join(f"line {j} of f{s}.py" for j in range(150))}]
    msgs.append({"role": "assistant", "content": "Done."})
    src = _write(tmp_path / "d.parquet", [{"instance_id": "a__b-7", "messages": msgs}])
    out = tmp_path / "small.parquet"
    r = CliRunner().invoke(cli, ["compact", str(src), "--limit", "3000", "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    (row,) = polars.read_parquet(out).to_dicts()
    assert all(isinstance(m["content"], str) for m in row["messages"] if m["role"] != "assistant")
    assert "Fix issue 7." in row["messages"][1]["content"]
    (t,) = read_path(str(out))
    parts = orjson.loads(row["messages"][1]["extra"])["content"]
    assert isinstance(parts, list) and dataset_item(t, "openai")["messages"][1]["content"] == parts
