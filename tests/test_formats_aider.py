"""aider's chat history markdown: every real history read, counted, compacted and expanded
exactly; the shape aider writes (`aider/io.py`) and the edges that shape has."""

from __future__ import annotations

import io
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
from ctxkit.formats import expand_paths, read_path, read_text, write_transcripts
from ctxkit.formats.sdk import problems
from ctxkit.model import ToolCall, Transcript, Unit

REAL = sorted(p.name for p in (REALDATA / "aider").glob("*.md")) if REALDATA.is_dir() else []


def _run(args: list[str], stdin: bytes | None = None):
    return CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)


def written(ts: list[Transcript], fmt: str | None = None) -> str:
    buf = io.StringIO()
    write_transcripts(ts, buf, fmt)
    return buf.getvalue()


def roles(text: str) -> list[tuple[str, str]]:
    return [(u.role, u.content) for t in read_text(text) for u in t.units]


SESSION = (
    "\n# aider chat started at 2024-08-06 08:55:14\n\n"
    "> /usr/bin/aider app.py  \n"
    "> Added app.py to the chat.  \n"
    "\n#### fix the bug  \n"
    "\nDone. Here is the change:\n\napp.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n\n"
    "> Tokens: 7,373 sent, 764 received. Cost: $0.03 request, $0.03 session.  \n"
    "> Applied edit to app.py  \n"
)


# ---------------------------------------------------------------- real histories


@pytest.mark.parametrize("name", REAL)
def test_real_history_reads_and_writes_back_byte_for_byte(realdata: Path, name: str) -> None:
    path = realdata / "aider" / name
    ts = list(read_path(str(path)))
    assert ts and all(t.source_format == "aider" for t in ts)
    units = [u for t in ts for u in t.units]
    assert {u.role for u in units} == {"user", "assistant"}
    assert all(u.content and "\r" not in u.content for u in units)
    assert written(ts).encode() == path.read_bytes()


@pytest.mark.parametrize("name", REAL)
def test_real_history_counted_compacted_and_expanded(realdata: Path, name: str, tmp_path: Path) -> None:
    path = realdata / "aider" / name
    counted = _run(["count", str(path)])
    assert counted.exit_code == 0, counted.stderr
    row = orjson.loads(counted.stdout.splitlines()[0])
    assert row["format"] == "aider" and row["history"] > 0
    limit = row["history"] // 3
    small = tmp_path / "small.md"
    archive = tmp_path / "a.db"
    result = _run(["compact", str(path), "--limit", str(limit), "-o", str(small), "--archive", str(archive)])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("Context reduced ")
    text = small.read_text(encoding="utf-8")
    assert problems("aider", text) == []
    again = orjson.loads(_run(["count", str(small)]).stdout.splitlines()[0])
    assert again["format"] == "aider" and again["history"] <= limit
    assert "ref-" in text  # what was taken out says where it went
    restored = tmp_path / "restored.md"
    r = _run(["expand", str(small), "--archive", str(archive), "-o", str(restored)])
    assert r.exit_code == 0, r.stderr
    assert restored.read_bytes() == path.read_bytes()


def test_real_history_usage_is_the_token_reports(realdata: Path) -> None:
    path = realdata / "aider" / "Aider-AI__aider__chat-history__session0013_2024-08-06T085514.md"
    (t,) = read_path(str(path))
    calls = t.metadata["provider_usage"]["calls"]
    assert calls[0] == {"after_unit": 0, "input_tokens": 7373, "cache_read_tokens": 0,
                        "cache_write_tokens": 0, "output_tokens": 764}
    assert all(t.units[c["after_unit"] + 1].role == "assistant" for c in calls)


# ---------------------------------------------------------------- the shape aider writes


def test_a_session_as_units_and_notices() -> None:
    (t,) = read_text(SESSION)
    assert t.source_format == "aider" and t.metadata["started_at"] == "2024-08-06 08:55:14"
    assert [(u.role, u.content.split("\n")[0]) for u in t.units] == [
        ("user", "fix the bug"), ("assistant", "Done. Here is the change:")]
    assert t.units[1].content.endswith(">>>>>>> REPLACE\n```")
    assert written([t]) == SESSION


def test_several_sessions_are_several_transcripts() -> None:
    text = SESSION + SESSION.replace("08:55:14", "09:00:00").replace("fix the bug", "and the test")
    ts = read_text(text, path="h.aider.chat.history.md")
    # named by when each started, not where it sits (compaction moves later sessions up)
    assert [t.id for t in ts] == ["h.aider.chat.history#2024-08-06T08:55:14", "h.aider.chat.history#2024-08-06T09:00:00"]
    twice = read_text(SESSION + SESSION, path="h.md")
    assert [t.id for t in twice] == ["h#2024-08-06T08:55:14", "h#2024-08-06T08:55:14.2"]
    assert [t.units[0].content for t in ts] == ["fix the bug", "and the test"]
    assert written(ts) == text


def test_an_empty_session_is_a_transcript_without_units() -> None:
    text = "\n# aider chat started at 2024-08-06 08:55:14\n\n" + SESSION
    ts = read_text(text)
    assert [len(t.units) for t in ts] == [0, 2]
    assert written(ts) == text
    r = _run(["count", "-"], stdin=text.encode())
    assert r.exit_code == 0, r.stderr
    rows = [orjson.loads(line) for line in r.stdout.splitlines()]
    assert [row["units"] for row in rows if row["format"]] == [0, 2]


def test_a_multi_line_input_is_one_message() -> None:
    # aider/io.py user_input: every line gets `#### ` and two trailing spaces, an empty line too
    text = "\n# aider chat started at 2024-08-06 08:55:14\n\n\n#### first line  \n####   \n#### third   line  \n\n#### next  \n"
    (t,) = read_text(text)
    assert [u.content for u in t.units] == ["first line\n\nthird   line", "next"]
    assert written([t]) == text
    rebuilt = t.replace(units=[u.replace() for u in t.units])
    assert written([rebuilt]) == text  # a changed unit is written in aider's own shape


def test_markers_inside_a_code_fence_are_reply_text_when_trailing_spaces_were_trimmed() -> None:
    # an editor trimmed aider's two trailing spaces: the markers are all there is, and a
    # fenced block that closes is the reply's
    reply = "Here is the README:\n\n```markdown\n#### Usage\n> quoted\n\n> more\n```\n\nDone."
    text = "\n# aider chat started at 2024-08-06 08:55:14\n\n#### write the readme\n\n" + reply + "\n\n> Applied edit to README.md\n"
    (t,) = read_text(text)
    assert [(u.role, u.content) for u in t.units] == [("user", "write the readme"), ("assistant", reply)]
    assert written([t]) == text


def test_a_reply_cut_off_in_its_code_fence_does_not_swallow_the_next_inputs() -> None:
    """A reply the user interrupted leaves its fence open; the inputs after it are the user's
    (aider marks them with two trailing spaces, and its own parser reads them so), even when a
    later reply's closing fence would pair with the open one."""
    text = ("\n# aider chat started at 2024-08-06 08:55:14\n\n#### add tests  \n\n"
            "Sure:\n```python\nimport os\nfrom x import (\n\n"
            "#### /clear  \n\n#### add tests again  \n\n"
            "Here:\n```python\nimport os\n```\n\nDone.\n\n")
    (t,) = read_text(text)
    assert [u.role for u in t.units] == ["user", "assistant", "user", "user", "assistant"]
    assert [u.content for u in t.units if u.role == "user"] == ["add tests", "/clear", "add tests again"]
    assert written([t]) == text


def test_a_heading_or_quote_in_a_reply_is_text_but_a_notice_is_not() -> None:
    # aider ends the lines it marks with two spaces; a reply's markdown has none
    reply = "#### Plan\n\n> note: keep it small\n\nSteps follow."
    text = "\n# aider chat started at 2024-08-06 08:55:14\n\n#### plan it  \n\n" + reply + "\n\n> Tokens: 1,000 sent, 20 received.  \n"
    (t,) = read_text(text)
    assert [(u.role, u.content) for u in t.units] == [("user", "plan it"), ("assistant", reply)]
    assert t.metadata["provider_usage"]["calls"][0]["input_tokens"] == 1000


def test_an_unclosed_fence_does_not_swallow_the_session() -> None:
    text = "\n# aider chat started at 2024-08-06 08:55:14\n\n#### go  \n\nStart:\n```python\nx = 1\n\n> ^C KeyboardInterrupt  \n\n#### again  \n"
    (t,) = read_text(text)
    assert [u.role for u in t.units] == ["user", "assistant", "user"]


def test_crlf_history_round_trips_and_changes_keep_crlf() -> None:
    text = SESSION.replace("\n", "\r\n")
    (t,) = read_text(text)
    assert [u.content for u in t.units][0] == "fix the bug"
    assert all("\r" not in u.content for u in t.units)
    assert written([t]) == text
    changed = t.replace(units=[t.units[0].replace(content="fix both bugs"), t.units[1]])
    out = written([changed])
    assert "#### fix both bugs  \r\n" in out and "\n" not in out.replace("\r\n", "")


def test_a_bom_and_leading_blank_lines_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # compact from stdin keeps its archive in the working directory
    data = b"\xef\xbb\xbf\n\n" + SESSION.lstrip("\n").encode()
    (t,) = read_text(data.decode("utf-8").lstrip("\ufeff"))
    assert written([t]).encode() == data[3:]
    r = _run(["compact", "-", "--limit", "100000"], stdin=data)
    assert r.exit_code == 0, r.stderr
    assert r.stdout_bytes == data  # fits: written as read


def test_rounded_token_reports_are_not_taken_as_usage() -> None:
    text = SESSION.replace("7,373 sent", "7.4k sent")
    (t,) = read_text(text)
    assert "provider_usage" not in t.metadata


def test_the_website_variant_keeps_its_page() -> None:
    page = "---\nparent: Examples\n---\n\n# A change\n\nSome notes.\n\n<div class=\"chat-transcript\" markdown=\"1\">\n"
    text = page + "\n> $ aider app.py  \n\n#### hi  \n\nHello.\n\n</div>\n"
    (t,) = read_text(text)
    assert [(u.role, u.content) for u in t.units] == [("user", "hi"), ("assistant", "Hello.")]
    assert written([t]) == text


# ---------------------------------------------------------------- other formats as aider


def test_another_format_written_as_aider_history() -> None:
    units = [
        Unit(id="s", role="system", content="Be brief."),
        Unit(id="u0", role="user", content="List files.\n\nThen stop."),
        Unit(id="a0", role="assistant", content="Listing.", tool_calls=[ToolCall("c1", "ls", '{"path":"."}')]),
        Unit(id="r0", role="tool", content="a.py\nb.py", tool_call_id="c1", name="ls"),
        Unit(id="a1", role="assistant", content="Two files."),
    ]
    t = Transcript(units=units, source_format="openai")
    text = written([t], "aider")
    assert text.startswith("\n# aider chat started at 1970-01-01 00:00:00\n\n")
    assert "> Be brief.  \n" in text and "#### List files.  \n####   \n#### Then stop.  \n" in text
    assert "> ls: a.py  \n> b.py  \n" in text
    assert roles(text) == [("user", "List files.\n\nThen stop."),
                           ("assistant", 'Listing.\n\n[tool call c1: ls {"path":"."}]'),
                           ("assistant", "Two files.")]
    assert problems("aider", text) == []


# ---------------------------------------------------------------- finding and refusing


def test_a_directory_takes_aider_histories_but_not_other_markdown(tmp_path: Path) -> None:
    (tmp_path / ".aider.chat.history.md").write_text(SESSION, encoding="utf-8")
    (tmp_path / "other.md").write_text(SESSION.lstrip("\n"), encoding="utf-8")
    (tmp_path / "README.md").write_text("# My project\n\nNotes.\n", encoding="utf-8")
    (tmp_path / "page.md").write_text("---\ntitle: A page\n---\n\n#### A heading\n", encoding="utf-8")
    (tmp_path / "t.json").write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    assert [Path(p).name for p in expand_paths([str(tmp_path)])] == [".aider.chat.history.md", "other.md", "t.json"]


def test_markdown_that_is_no_aider_history_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\nNothing here.\n", encoding="utf-8")
    r = _run(["count", str(path), "--from", "aider"])
    assert r.exit_code == 1
    assert "not an aider chat history: no `# aider chat started at` line" in r.stderr
    with pytest.raises(InputError, match="not valid JSON"):
        list(read_path(str(path)))  # not detected as aider: read as JSON, as before


def test_json_forced_as_aider_and_bad_bytes_are_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    r = _run(["count", str(path), "--from", "aider"])
    assert r.exit_code == 1 and "not an aider chat history: the file is JSON" in r.stderr
    bad = tmp_path / "h.md"
    bad.write_bytes(b"# aider chat started at 2024-08-06 08:55:14\n\n#### caf\xe9  \n")
    r = _run(["count", str(bad)])
    assert r.exit_code == 1 and "invalid UTF-8" in r.stderr


# ---------------------------------------------------------------- property: what aider keeps comes back

_LINE = st.text(alphabet=st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=20)
_REPLY_LINE = st.one_of(
    _LINE.filter(lambda s: not s.startswith(("#", ">", "`", "~", " ", "<"))),
    _LINE.map(lambda s: "#### " + s.strip()),  # a heading: no trailing spaces
    _LINE.map(lambda s: "> " + s.strip()),  # a quote
)
# a reply's markdown: headings and quotes without aider's two trailing spaces (with them, aider
# itself reads the line as a marker, fence or not)
_FENCED = st.lists(st.one_of(_LINE.map(lambda s: "#### " + s.rstrip()), _LINE.map(lambda s: "> " + s.rstrip()),
                             _LINE.filter(lambda s: not s.lstrip().startswith(("```", "~~~", "# aider")))), max_size=4)


@st.composite
def _reply(draw: Any) -> str:
    lines = draw(st.lists(_REPLY_LINE, min_size=1, max_size=4))
    if draw(st.booleans()):
        lines += ["```markdown", *draw(_FENCED), "```"]
    return "\n".join(lines).strip()


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.text(max_size=40), _reply()), max_size=4))
def test_any_messages_through_aider_come_back(turns: list[tuple[str, str]]) -> None:
    units = [u for i, (ask, reply) in enumerate(turns) for u in (
        Unit(id=f"q{i}", role="user", content=ask), Unit(id=f"a{i}", role="assistant", content=reply),
        Unit(id=f"r{i}", role="tool", content="done", tool_call_id=None))]
    t = Transcript(units=units, source_format="openai")
    text = written([t], "aider")
    back = [(u.role, u.content) for b in read_text(text, "aider") for u in b.units]
    expected = []
    for ask, reply in turns:
        expected.append(("user", ask.rstrip() if ask.strip() else "<blank>"))
        if reply.strip():
            expected.append(("assistant", reply.strip()))
    assert back == expected


def test_a_full_history_is_found_without_from_and_comes_back_whole(realdata: Path, tmp_path: Path) -> None:
    """aider's own chat history opens with an editor's mode line, holds many sessions, and
    compaction shortens some: it is detected, and expand gives every session back in place."""
    from ctxkit.tokens import count_transcript

    sessions = [p.read_text(encoding="utf-8") for p in sorted((realdata / "aider").glob("*chat-history*.md"))]
    text = "-*- mode: fundamental -*-\n" + "".join(sessions * 2)  # a session twice: the same start
    src = tmp_path / "chat.md"
    src.write_text(text, encoding="utf-8", newline="")
    ts = list(read_path(str(src)))
    assert [t.source_format for t in ts] == ["aider"] * 4 and len({t.id for t in ts}) == 4
    run = CliRunner().invoke
    limit = str(max(count_transcript(t).total for t in ts) // 3)
    small, back = tmp_path / "small.md", tmp_path / "back.md"
    assert run(cli, ["compact", str(src), "--limit", limit, "-o", str(small)], catch_exceptions=False).exit_code == 0
    assert small.read_text(encoding="utf-8") != text
    assert run(cli, ["expand", str(small), "-o", str(back)], catch_exceptions=False).exit_code == 0
    assert back.read_text(encoding="utf-8") == text
