"""ATIF (Harbor's Agent Trajectory Interchange Format): every real transcript ctxkit reads,
converted to ATIF, reads back to the same units and writes again to the same JSON; a
hand-written trajectory with every field reads and writes back exactly, compacts to valid ATIF
and expands to its original."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from conftest import REALDATA
from hypothesis import given, settings
from hypothesis import strategies as st
from proptest import examples

from ctxkit.cli import cli
from ctxkit.errors import InputError
from ctxkit.formats import read_path, read_text, write_transcripts
from ctxkit.formats.atif import _usage_by_unit
from ctxkit.formats.common import tools_as
from ctxkit.formats.sdk import problems
from ctxkit.model import ToolCall, Transcript, Unit

# Every file of every folder: formats added later are taken in as soon as ctxkit reads them.
REAL = sorted(
    str(p.relative_to(REALDATA)) for p in REALDATA.glob("*/*") if p.is_file()
) if REALDATA.is_dir() else []


def written(ts: list[Transcript], fmt: str | None = None) -> str:
    buf = io.StringIO()
    write_transcripts(ts, buf, fmt)
    return buf.getvalue()


def units_of(t: Transcript) -> list[tuple[Any, ...]]:
    """What ATIF must carry of each unit: role, text, calls with ids, pairing, reasoning."""
    return [(u.role, u.content, [c.to_dict() for c in u.tool_calls], u.tool_call_id, u.reasoning) for u in t.units]


def usage_of(t: Transcript) -> list[tuple[int, ...]]:
    """Recorded calls at the reply each one produced, with their figures."""
    return sorted((i, c["input_tokens"], c.get("output_tokens", 0), c.get("cache_read_tokens", 0),
                   c.get("cache_write_tokens", 0)) for i, c in _usage_by_unit(t).items())


def _run(args: list[str], stdin: bytes | None = None):
    return CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)


# ---------------------------------------------------------------- every real transcript


@pytest.mark.parametrize("name", REAL)
def test_real_transcript_through_atif_is_lossless(realdata: Path, name: str) -> None:
    path = realdata / name
    try:
        ts = list(read_path(str(path)))
    except InputError as err:
        pytest.skip(f"ctxkit reads no {path.parent.name} file yet: {err}")
    for t in ts:
        text = written([t], "atif")
        assert problems("atif", text) == [], t.id
        (back,) = read_text(text)
        assert back.source_format == "atif"
        assert units_of(back) == units_of(t)
        assert [u.content for u in back.units if u.role == "system"] == [u.content for u in t.units if u.role == "system"]
        assert back.tools == tools_as("openai", t.tools)
        assert usage_of(back) == usage_of(t)
        assert written([back]) == text  # and again: the same JSON, byte for byte


def test_a_dataset_becomes_a_dataset_of_trajectories(realdata: Path) -> None:
    path = realdata / "sharegpt" / "hiyouga__LLaMA-Factory__data_glaive_toolcall_en_demo.json"
    ts = list(read_path(str(path)))[:5]
    text = written(ts, "atif")
    assert [obj["session_id"] for obj in orjson.loads(text)] == [t.id for t in ts]  # an array, as it was
    back = read_text(text)
    assert [units_of(b) for b in back] == [units_of(t) for t in ts]
    assert problems("atif", text) == []


# ---------------------------------------------------------------- a trajectory with every field


FULL: dict[str, Any] = {
    "schema_version": "ATIF-v1.6",
    "session_id": "run-42",
    "agent": {
        "name": "terminus-2",
        "version": "2.0.0",
        "model_name": "gpt-5",
        "tool_definitions": [{"type": "function", "function": {
            "name": "bash", "description": "Run a command", "parameters": {
                "type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}],
        "extra": {"parser": "json"},
    },
    "notes": "hand-written: every field of the RFC",
    "steps": [
        {"step_id": 1, "timestamp": "2025-10-11T10:30:00Z", "source": "system",
         "message": "You are a careful agent.", "extra": {"origin": "template"}},
        {"step_id": 2, "timestamp": "2025-10-11T10:30:01Z", "source": "user",
         "message": [{"type": "text", "text": "Why does the build fail? See the screenshot."},
                     {"type": "image", "source": {"media_type": "image/png", "path": "images/shot.png"}}]},
        {"step_id": 3, "timestamp": "2025-10-11T10:30:02Z", "source": "agent", "model_name": "gpt-5",
         "reasoning_effort": "medium", "message": "I will look at the log and the tests.",
         "reasoning_content": "Two reads, in parallel.",
         "tool_calls": [
             {"tool_call_id": "call_1", "function_name": "bash", "arguments": {"cmd": "cat build.log"}},
             {"tool_call_id": "call_2", "function_name": "bash", "arguments": {"cmd": "pytest -x"}}],
         "observation": {"results": [
             {"source_call_id": "call_1", "content": "error: missing header foo.h\n" * 40},
             {"source_call_id": "call_2", "content": "FAILED test_build.py::test_foo\n" + "ok\n" * 60}]},
         "metrics": {"prompt_tokens": 520, "completion_tokens": 80, "cached_tokens": 200, "cost_usd": 0.00045,
                     "prompt_token_ids": [1, 2, 3], "completion_token_ids": [7, 8], "logprobs": [-0.1, -0.2],
                     "extra": {"cache_creation_input_tokens": 64, "reasoning_tokens": 12}}},
        {"step_id": 4, "timestamp": "2025-10-11T10:30:05Z", "source": "agent", "message": "Delegating the fix.",
         "tool_calls": [{"tool_call_id": "call_3", "function_name": "delegate", "arguments": {}}],
         "observation": {"results": [
             {"source_call_id": "call_3", "subagent_trajectory_ref": [
                 {"session_id": "sub-1", "trajectory_path": "sub-1.json", "extra": {"exit": 0}}]},
             {"content": "terminal output without a call id"}]},
         "metrics": {"prompt_tokens": 900, "completion_tokens": 30}, "is_copied_context": False},
        {"step_id": 5, "timestamp": "2025-10-11T10:30:09Z", "source": "system", "message": "Context trimmed.",
         "observation": {"results": [{"content": "2 steps summarized"}]}},
        {"step_id": 6, "timestamp": "2025-10-11T10:30:10Z", "source": "agent",
         "message": "The header foo.h is missing; add it to the include path.",
         "metrics": {"prompt_tokens": 1100, "completion_tokens": 20}, "extra": {"final": True}},
    ],
    "final_metrics": {"total_prompt_tokens": 2520, "total_completion_tokens": 130, "total_cached_tokens": 200,
                      "total_cost_usd": 0.002, "total_steps": 6, "extra": {"reward": 1.0}},
    "continued_trajectory_ref": "run-42-part2.json",
    "extra": {"task": "build"},
}


def test_every_field_reads_into_units() -> None:
    (t,) = read_text(json.dumps(FULL))
    assert t.source_format == "atif" and t.id == "run-42" and t.metadata["model"] == "gpt-5"
    assert t.tools == FULL["agent"]["tool_definitions"]
    assert [(u.role, u.tool_call_id) for u in t.units] == [
        ("system", None), ("user", None), ("assistant", None), ("tool", "call_1"), ("tool", "call_2"),
        ("assistant", None), ("tool", "call_3"), ("tool", None), ("system", None), ("tool", None), ("assistant", None)]
    user, call = t.units[1], t.units[2]
    assert user.content == "Why does the build fail? See the screenshot." and user.images == 1
    assert call.reasoning == "Two reads, in parallel."
    assert call.tool_calls == [ToolCall("call_1", "bash", '{"cmd":"cat build.log"}'),
                               ToolCall("call_2", "bash", '{"cmd":"pytest -x"}')]
    assert t.units[3].name == "bash"
    assert "sub-1.json" in t.units[6].content  # a subagent reference is what that result holds
    assert t.metadata["provider_usage"]["calls"] == [
        {"after_unit": 1, "input_tokens": 520, "cache_read_tokens": 200, "output_tokens": 80, "cache_write_tokens": 64},
        {"after_unit": 4, "input_tokens": 900, "cache_read_tokens": 0, "output_tokens": 30},
        {"after_unit": 9, "input_tokens": 1100, "cache_read_tokens": 0, "output_tokens": 20}]


def test_every_field_writes_back_the_same_json(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    path.write_bytes(orjson.dumps(FULL, option=orjson.OPT_INDENT_2) + b"\n")
    assert problems("atif", path.read_text()) == []
    ts = list(read_path(str(path)))
    assert written(ts).encode() == path.read_bytes()
    # a unit rebuilt from its fields (raw dropped) still writes its step from the step it came from
    rebuilt = ts[0].replace(units=[u.replace() for u in ts[0].units])
    assert orjson.loads(written([rebuilt])) == FULL


def test_recorded_metrics_are_the_count_s_truth(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    path.write_bytes(orjson.dumps(FULL))
    r = _run(["count", str(path)])
    assert r.exit_code == 0, r.stderr
    row = orjson.loads(r.stdout.splitlines()[0])
    assert row["format"] == "atif" and row["recorded"] == 1100


def test_compacted_trajectory_is_valid_atif_and_expands(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    path.write_bytes(orjson.dumps(FULL, option=orjson.OPT_INDENT_2) + b"\n")
    small, archive = tmp_path / "small.json", tmp_path / "a.db"
    r = _run(["compact", str(path), "--limit", "500", "--no-usage", "-o", str(small), "--archive", str(archive)])
    assert r.exit_code == 0, r.stderr
    out = orjson.loads(small.read_bytes())
    assert problems("atif", out) == []
    assert [s["step_id"] for s in out["steps"]] == list(range(1, len(out["steps"]) + 1))
    assert out["agent"] == FULL["agent"] and out["session_id"] == "run-42"
    assert len(small.read_bytes()) < len(path.read_bytes())
    restored = tmp_path / "restored.json"
    r = _run(["expand", str(small), "--archive", str(archive), "-o", str(restored)])
    assert r.exit_code == 0, r.stderr
    assert restored.read_bytes() == path.read_bytes()


def test_trajectories_as_jsonl_and_as_an_array() -> None:
    second = {**FULL, "session_id": "run-43"}
    lines = orjson.dumps(FULL).decode() + "\n" + orjson.dumps(second).decode() + "\n"
    ts = read_text(lines)
    assert [t.id for t in ts] == ["run-42", "run-43"] and written(ts) == lines
    array = json.dumps([FULL, second])
    assert [t.id for t in read_text(array)] == ["run-42", "run-43"]


# ---------------------------------------------------------------- writing other formats


def test_results_the_rfc_cannot_pair_keep_their_ids() -> None:
    units = [
        Unit(id="u0", role="tool", content="orphan at the start", tool_call_id="c0"),
        Unit(id="u1", role="user", content="go", timestamp=1_700_000_000.25),
        Unit(id="u2", role="assistant", content="", tool_calls=[ToolCall("c1", "ls", '{"a": 1}')]),
        Unit(id="u3", role="assistant", content="", tool_calls=[ToolCall("c2", "cat", "{}")]),
        Unit(id="u4", role="tool", content="from ls", tool_call_id="c1"),
        Unit(id="u5", role="tool", content="from cat", tool_call_id="c2"),
        Unit(id="u6", role="assistant", content="", reasoning="thinking only"),
        Unit(id="u7", role="user", type="summary", content="Earlier: ...", meta={"join": True}),
    ]
    t = Transcript(units=units, source_format="openai")
    text = written([t], "atif")
    obj = orjson.loads(text)
    assert problems("atif", obj) == []
    assert obj["schema_version"] == "ATIF-v1.4" and obj["agent"] == {"name": "unknown", "version": "unknown"}
    steps = obj["steps"]
    assert steps[0]["extra"] == {"ctxkit": {"observation_only": True, "call_ids": ["c0"]}}
    assert steps[1]["timestamp"] == "2023-11-14T22:13:20.250000Z"
    assert steps[2]["extra"] == {"ctxkit": {"arguments": {"c1": '{"a": 1}'}}}  # the source's own text
    # c1 answered after c2 was called: its result sits in c2's step, its id kept beside
    assert steps[3]["observation"]["results"] == [{"content": "from ls"}, {"source_call_id": "c2", "content": "from cat"}]
    assert steps[3]["extra"] == {"ctxkit": {"call_ids": ["c1"]}}
    assert steps[4] == {"step_id": 5, "source": "agent", "message": "", "reasoning_content": "thinking only"}
    assert steps[5]["extra"] == {"ctxkit": {"type": "summary", "join": True}}
    (back,) = read_text(text)
    assert units_of(back) == units_of(t)
    assert back.units[-1].type == "summary" and back.units[-1].meta["join"] is True


def test_usage_becomes_step_metrics_and_final_metrics() -> None:
    units = [Unit(id="u0", role="user", content="hi"), Unit(id="u1", role="assistant", content="hello")]
    usage = {"source": "claude-code", "calls": [
        {"after_unit": 0, "input_tokens": 900, "cache_read_tokens": 500, "cache_write_tokens": 100, "output_tokens": 7}]}
    t = Transcript(units=units, source_format="claude-code", metadata={"provider_usage": usage, "session_id": "s1"})
    obj = orjson.loads(written([t], "atif"))
    assert obj["agent"]["name"] == "claude-code" and obj["session_id"] == "s1"
    assert obj["steps"][1]["metrics"] == {"prompt_tokens": 900, "completion_tokens": 7, "cached_tokens": 500,
                                          "extra": {"cache_creation_input_tokens": 100}}
    assert obj["final_metrics"] == {"total_prompt_tokens": 900, "total_completion_tokens": 7, "total_cached_tokens": 500}


# ---------------------------------------------------------------- refusing


def test_a_bad_step_is_a_clear_error() -> None:
    bad = copy.deepcopy(FULL)
    bad["steps"][2]["source"] = "robot"
    with pytest.raises(InputError, match=r"record 3: expected an ATIF step \{step_id, source: system\|user\|agent"):
        read_text(json.dumps(bad))


@pytest.mark.parametrize(("change", "problem"), [
    (lambda o: o["steps"][1].update(step_id=7), "step 2: step_id 7, expected 2"),
    (lambda o: o["steps"][1].update(reasoning_content="x"), "step 2: `reasoning_content` only applies to agent steps"),
    (lambda o: o["steps"][2]["observation"]["results"][0].update(source_call_id="nope"),
     "source_call_id 'nope' is not a tool call of its step"),
    (lambda o: o["steps"][2]["tool_calls"][0].update(arguments="cat"), "tool_calls[0].arguments: expected dict"),
    (lambda o: o.update(schema_version="ATIF-v2.0"), "is not ATIF-v1.0 to ATIF-v1.6"),
    (lambda o: o["agent"].pop("version"), "agent: missing `version`"),
    (lambda o: o["steps"][0].update(thought="x"), "step 1: unknown field `thought`"),
    (lambda o: o["steps"][1]["message"][1].update(text="x"), "an image part needs `source`"),
    (lambda o: o["steps"][0].update(timestamp="yesterday"), "is not ISO 8601"),
])
def test_the_checker_refuses_what_the_rfc_refuses(change: Any, problem: str) -> None:
    bad = copy.deepcopy(FULL)
    change(bad)
    assert any(problem in p for p in problems("atif", bad)), problems("atif", bad)


# ---------------------------------------------------------------- property: any units, any order

_TEXT = st.text(max_size=30)
_ARGS = st.one_of(st.just("{}"), st.just('{"a": 1}'), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)
                  .map(lambda d: json.dumps(d, separators=(",", ":"))), st.just("not json"))


@st.composite
def _units(draw: Any) -> list[Unit]:
    """Units in any order: results before, after or far from their calls, orphans, reasoning
    alone, summaries and joins."""
    out: list[Unit] = []
    ids: list[str] = []
    for i in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["system", "user", "assistant", "call", "tool", "summary"]))
        if kind == "call":
            calls = [ToolCall(f"c{i}_{k}", draw(st.sampled_from(["ls", "cat"])), draw(_ARGS))
                     for k in range(draw(st.integers(1, 2)))]
            ids.extend(c.id for c in calls)
            out.append(Unit(id=f"u{i}", role="assistant", content=draw(_TEXT), tool_calls=calls,
                            reasoning=draw(_TEXT)))
        elif kind == "tool":
            cid = draw(st.one_of(st.sampled_from(ids), st.none(), st.just("gone"))) if ids else None
            out.append(Unit(id=f"u{i}", role="tool", content=draw(_TEXT), tool_call_id=cid))
        elif kind == "summary":
            out.append(Unit(id=f"u{i}", role="user", type="summary", content=draw(_TEXT),
                            meta={"join": True} if draw(st.booleans()) else {}))
        else:
            out.append(Unit(id=f"u{i}", role=kind, content=draw(_TEXT),
                            reasoning=draw(_TEXT) if kind == "assistant" else ""))
    return out


@settings(max_examples=examples(200), deadline=None)
@given(_units())
def test_any_units_through_atif_come_back(units: list[Unit]) -> None:
    t = Transcript(units=units, source_format="openai")
    text = written([t], "atif")
    assert problems("atif", text) == [] or not units  # no step at all: the RFC wants one
    (back,) = read_text(text)
    assert units_of(back) == units_of(t)
    assert [u.type == "summary" for u in back.units] == [u.type == "summary" for u in units]
    assert written([back]) == text
