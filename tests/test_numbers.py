"""Numbers survive read -> compact -> write -> expand exactly (issue 16, item 9).

orjson reads an integer beyond 64 bits as a float and will not write one; ctxkit's readers and
writers fall back to the standard library for those records.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.formats import read_text, write_transcripts
from ctxkit.formats.common import dumps, loads

BIG = 123456789012345678901234567890
INTS = [BIG, -BIG, 2**64, 2**64 - 1, -(2**63) - 1, -(2**63), 10**100, 0, -1]
FLOATS = [
    0.1,
    1.10,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    -0.0,
    1e22,
    123456789.12345679,
    1.2345678901234568e29,
]


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types all the way down (1 == 1.0 is not enough here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


@pytest.mark.parametrize("value", INTS + FLOATS)
def test_loads_and_dumps_keep_numbers_exact(value: float) -> None:
    doc = {"n": value, "in": [value, {"deep": value}], "id": "order-12345678901234567890"}
    text = json.dumps(doc)
    for data in (text, text.encode()):
        assert same(loads(data), json.loads(text))
    for indent in (False, True):
        assert same(loads(dumps(doc, indent=indent)), doc)


def test_orjson_alone_would_turn_a_big_integer_into_a_float() -> None:
    # the reason for the fallback: if this ever fails, orjson has learnt big integers
    assert isinstance(orjson.loads(str(BIG)), float)


def test_dumps_matches_orjson_when_orjson_can() -> None:
    doc = {"a": [1, 2.5, "é", None, True], "b": {"c": -0.0}}
    assert dumps(doc) == orjson.dumps(doc).decode()
    assert dumps({**doc, "big": BIG}) == orjson.dumps(doc).decode()[:-1] + f',"big":{BIG}}}'


def transcript() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Tally the ledger."},
    ]
    for i in range(12):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "ledger", "arguments": json.dumps({"n": BIG + i})},
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": [{"type": "text", "text": f"total {BIG + i}\n" + "row ok\n" * 120}],
                "balance": BIG + i,
                "debt": -BIG,
                "rate": 1.10,
                "tiny": 5e-324,
                "huge": 1.7976931348623157e308,
            }
        )
    messages.append({"role": "user", "content": "And the total?"})
    return {"model": "gpt-4o", "messages": messages, "seed": BIG, "temperature": 1.10}


@pytest.mark.parametrize("layout", ["document", "dataset"])
def test_big_integers_and_floats_round_trip_through_compact_and_expand(
    tmp_path: Path, layout: str
) -> None:
    doc = transcript()
    src = tmp_path / ("in.json" if layout == "document" else "in.jsonl")
    if layout == "document":
        src.write_text(json.dumps(doc, indent=2))
    else:
        src.write_text(json.dumps(doc) + "\n" + json.dumps({**doc, "seed": BIG + 1}) + "\n")
    small, back, db = (
        tmp_path / f"small{src.suffix}",
        tmp_path / f"back{src.suffix}",
        tmp_path / "a.db",
    )
    runner = CliRunner()
    r = runner.invoke(
        cli,
        [
            "compact",
            str(src),
            "--limit",
            "1500",
            "-o",
            str(small),
            "--archive",
            str(db),
            "--embedder",
            "lexical",
        ],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    # a document says what it did; a dataset gives one line for all its conversations
    assert ("Context reduced" if layout == "document" else "2 conversations: 2 compacted") in r.output
    r = runner.invoke(
        cli, ["expand", str(small), "--archive", str(db), "-o", str(back)], catch_exceptions=False
    )
    assert r.exit_code == 0, r.output
    if layout == "document":
        compacted = json.loads(small.read_text())
        assert same(compacted["seed"], BIG) and same(compacted["temperature"], 1.10)
        assert same(json.loads(back.read_text()), doc)
    else:
        lines = [json.loads(line) for line in back.read_text().splitlines()]
        assert same(lines, [doc, {**doc, "seed": BIG + 1}])


def test_anthropic_tool_input_keeps_a_big_integer() -> None:
    t = read_text(json.dumps(transcript()), path="in.json")[0]
    buf = io.StringIO()
    write_transcripts([t], buf, "anthropic")
    out = json.loads(buf.getvalue())
    inputs = [
        b["input"]
        for m in out["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]
    assert inputs and same(inputs[0], {"n": BIG})


def test_a_number_beyond_double_range_is_refused_clearly(tmp_path: Path) -> None:
    src = tmp_path / "inf.json"
    src.write_text(json.dumps(transcript()).replace('"temperature": 1.1', '"temperature": 1e400'))
    out = tmp_path / "out.json"
    r = CliRunner().invoke(cli, ["compact", str(src), "--limit", "1500", "-o", str(out)])
    assert r.exit_code == 1
    assert "not valid JSON (number is infinity when parsed as double)" in r.output
    assert not out.exists() and not (tmp_path / "out.json.ctx.db").exists()
