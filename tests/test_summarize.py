"""The extractive summarizer and the fresh-start handover, on fixtures and real transcripts.

The real-data test measures what survives a 300-token summary (file paths, error lines, user
requests, found by regexes independent of the summarizer's own) against the "first N
sentences" baseline, and asserts ours keeps more.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxkit.compress import split_sentences
from ctxkit.errors import UsageError
from ctxkit.model import ToolCall, Unit
from ctxkit.strategies.summarize_old import _smallest_fitting, bisect_floor
from ctxkit.structure import is_request, is_user_request
from ctxkit.summarizers import SUMMARIZERS, get_summarizer
from ctxkit.summarizers.extractive import (
    commands_run,
    files_touched,
    handover,
    open_items,
    summarize_extractive,
)
from ctxkit.tokens import get_tokenizer

TOK = get_tokenizer("cl100k_base")


def session() -> list[Unit]:
    todos = {"todos": [
        {"content": "reproduce the bug", "status": "completed"},
        {"content": "write a regression test", "status": "in_progress"},
        {"content": "update the changelog", "status": "pending"},
    ]}
    return [
        Unit("u1", "user", content="The CSV export in app/export/csv_writer.py drops the last row. Please fix it."),
        Unit("a1", "assistant", content="I'll reproduce it first.", tool_calls=[ToolCall("c1", "bash", json.dumps({"command": "python -m pytest tests/test_export.py"}))]),
        Unit("r1", "tool", content="<returncode>1</returncode>\n<output>\nFAILED tests/test_export.py::test_last_row\nAssertionError: 2 != 3\n</output>", tool_call_id="c1"),
        Unit("a2", "assistant", content="The root cause is an off-by-one in the loop bound. I will change range(n - 1) to range(n).",
             tool_calls=[ToolCall("c2", "Edit", json.dumps({"file_path": "app/export/csv_writer.py", "old": "n - 1", "new": "n"}))]),
        Unit("r2", "tool", content="File edited.", tool_call_id="c2"),
        Unit("a3", "assistant", content="", tool_calls=[ToolCall("c3", "TodoWrite", json.dumps(todos))]),
        Unit("r3", "tool", content="Todos updated.", tool_call_id="c3"),
        Unit("p1", "user", content="Never change the public column order.", priority=1),
        Unit("u2", "user", content="Also add a test for an empty export, then stop."),
    ]


def test_registry() -> None:
    assert SUMMARIZERS["extractive"] is summarize_extractive
    assert get_summarizer("extractive") is summarize_extractive
    with pytest.raises(UsageError):
        get_summarizer("abstractive")


def test_sections_on_a_session() -> None:
    text = summarize_extractive(session(), 400, tok=TOK)
    assert TOK.count(text) <= 400
    for title in ("## Primary request and intent", "## Files and code", "## Errors and fixes",
                  "## Task list (each item as last updated)", "## Where the work stood", "## Next step",
                  "## Findings and decisions"):
        assert title in text
    # no tallies of tools, no headlines of what the assistant was about to do
    for retired in ("## Key technical concepts", "tools used", "## Problem solving", "## Commands run"):
        assert retired not in text
    assert '"The CSV export in app/export/csv_writer.py drops the last row. Please fix it."' in text
    assert "bash(python -m pytest tests/test_export.py) -> exit 1: AssertionError: 2 != 3" in text
    assert "app/export/csv_writer.py (edited)" in text
    assert "Edit(app/export/csv_writer.py) -> ok" in text
    assert "The root cause is an off-by-one in the loop bound." in text
    # every item of the list in its latest state, done ones done
    assert "[completed] reproduce the bug\n- [in_progress] write a regression test\n- [pending] update the changelog" in text
    assert "## Next step\n- write a regression test" in text
    assert summarize_extractive(session(), 400, tok=TOK) == text  # deterministic


def test_extractors() -> None:
    units = session()
    assert files_touched(units)[0] == "app/export/csv_writer.py"
    assert "tests/test_export.py" in files_touched(units)
    # a failure names its exit code and the exception line
    assert [c.split(" -> ")[1] for c in commands_run(units)] == ["exit 1: AssertionError: 2 != 3", "ok"]
    items = open_items(units)
    assert items[:2] == ["[in_progress] write a regression test", "[pending] update the changelog"]
    assert items[-1].startswith("unanswered: Also add a test for an empty export")


def test_prose_is_no_pending_task() -> None:
    """A line of prose that says TODO or "next step" (an instruction file's template, a plan the
    work has since carried out) is not work still to do: only the todo list and a request
    nothing answered are."""
    said = [Unit("u", "user", content="Fix the login.\n\n**Recommended Next Steps**\n- [ ] task_id, title, status, next step"),
            Unit("a", "assistant", content="TODO: wire the cli. Next step: rerun the tests."),
            Unit("u2", "user", content="thanks, now add the logout too")]
    assert open_items(said) == ["unanswered: thanks, now add the logout too"]


@given(st.lists(st.sampled_from([
    "exit code 2", "EXITED WITH STATUS: 1", "Process exited with code 3", "[exit code=4]",
    "<returncode>5</returncode>", "<RETURNCODE> 6 </RETURNCODE>", "exit_code: 7", "exits", "ok",
    "Traceback (most recent call last):", "  Traceback (most recent call last)", "é", "\n",
]), max_size=6).map(" ".join))
def test_quick_tests_never_hide_what_the_patterns_find(text: str) -> None:
    """An output whose exit code or traceback the patterns find passes the quick test first."""
    from ctxkit import log_events as events

    if events._EXIT.search(text):
        assert events._may_say_exit(text)
    if events._TRACEBACK.search(text):
        assert events._TRACEBACK_LINE in text


@given(st.lists(st.sampled_from([
    "ValueError: bad", "an Exception:", "SystemExit", "KeyboardInterrupt", "FAILED tests", "ERROR x",
    "error[E0308]: mismatched", "fatal: not a repo", "panic: nil", "thread 'main' panicked",
    "npm ERR! code", "<tool_use_error>", "make: *** [all] Error 2", "bash: foo: command not found",
    "(eval):1: command not found: psql", "zsh:1: permission denied: ./x",
    "exit code 1", "Traceback (most recent call last):", "all good", "  ", "\n", "é",
]), max_size=5).map("\n".join))
def test_the_quick_failure_test_never_hides_a_failure(text: str) -> None:
    """A message whose failure or exception line the patterns find passes the quick test."""
    from ctxkit import log_events as events
    from ctxkit.model import Unit

    probe = Unit("x", "tool", content=text, tool_call_id="x")
    lines = text.splitlines()
    if events.outcome(probe).failed or any(events._EXCEPTION.match(ln) for ln in lines):
        assert events.may_say_failure(text)


def test_tight_budget_keeps_the_primary_request_and_the_files() -> None:
    text = summarize_extractive(session(), 80, tok=TOK)
    assert TOK.count(text) <= 80
    assert "CSV export" in text and "app/export/csv_writer.py (edited)" in text


def test_the_primary_request_is_not_an_acknowledgement() -> None:
    units = [Unit("y", "user", content="yes"), *session()]
    text = summarize_extractive(units, 400, tok=TOK)
    assert text.split("\n")[1] == '- "The CSV export in app/export/csv_writer.py drops the last row. Please fix it."'


def test_a_listing_of_files_named_error_is_no_error() -> None:
    """`ls` of src/ast (OpenHands, a real run) lists error.c: a file name, not a failure."""
    from ctxkit.summarizers.extractive import error_line

    listing = ("total 24\n-rw-r--r-- 1 root root 6744 Apr 30 08:32 error.c\n"
               "-rw-r--r-- 1 root root 1203 Apr 30 08:32 failed-tests.txt\n")
    assert error_line(listing) is None
    assert error_line("make: *** [all] Error 2\n") == "make: *** [all] Error 2"
    # a word is not a failure: only the log's own signals are (an exit code, a status line)
    assert error_line("Build failed.\n") is None
    assert error_line("Build failed.\n<returncode>2</returncode>") == "Build failed."


def test_error_lines_are_the_exception_not_the_traceback_header() -> None:
    from ctxkit.summarizers.extractive import error_line

    trace = "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    f()\nKeyError: 'price'\n"
    assert error_line(trace) == "KeyError: 'price'"
    assert error_line("Traceback (most recent call last):\n") is None
    assert error_line("all good\n") is None


def test_paths_in_json_escaped_output_are_not_glued_to_newlines() -> None:
    out = Unit("r", "tool", content=json.dumps({"output": "README.md\npackage.json\n", "metadata": {"exit_code": 0}}), tool_call_id="c")
    call = Unit("a", "assistant", tool_calls=[ToolCall("c", "shell", json.dumps({"command": ["bash", "-lc", "ls"]}))])
    # a listing names files; it does not touch them
    assert files_touched([call, out]) == []
    assert commands_run([call, out]) == ["shell(ls) -> ok"]


def test_previous_summary_is_rolled_forward() -> None:
    previous = "## Goal and user requests\n- \"Migrate the billing tables to Postgres.\""
    text = summarize_extractive(session(), 400, previous_summary=previous, tok=TOK)
    assert text.startswith("## Earlier summary") and "billing tables to Postgres" in text
    assert "[...]" not in text


def test_handover_names_p1_and_ends_with_the_last_request() -> None:
    units = session()
    text = handover(units, 200, tok=TOK)
    assert text.endswith("## Last request (verbatim)\nAlso add a test for an empty export, then stop.")
    assert "p1 (message): Never change the public column order." in text
    assert "## Task" in text and "CSV export" in text
    body = text.split("## Last request (verbatim)")[0]
    assert TOK.count(body) <= 200
    named = handover(units, 200, p1_units=[units[0]], tok=TOK)
    assert "u1 (message): The CSV export" in named and "p1 (message)" not in named


def test_a_reused_call_id_gets_its_own_result() -> None:
    """tau-bench's gpt-4o logs use a call id again turns later: each call's outcome is the result
    after it, not the first result of that id (the summary's last action said the first
    search's flights for the last search, which found none)."""
    from ctxkit import facts as F

    def call(uid: str, where: str) -> Unit:
        args = json.dumps({"origin": where})
        return Unit(uid, "assistant", tool_calls=[ToolCall("call_1", "search_flights", args)])

    units = [
        Unit("u0", "user", content="Find me flights."),
        call("a1", "MSP"),
        Unit("r1", "tool", tool_call_id="call_1", content="HAT141 MSP to EWR, 14:00"),
        call("a2", "ORD"),
        Unit("r2", "tool", tool_call_id="call_1", content="no flights on that day"),
    ]
    found = F.calls(units)
    assert [(c.args, c.outcome.news if c.outcome else None) for c in found] == [
        ("origin=MSP", "HAT141 MSP to EWR, 14:00"),
        ("origin=ORD", "no flights on that day"),
    ]
    assert "search_flights(origin=ORD) -> ok: no flights on that day" in summarize_extractive(units, 300, tok=TOK)
    # a result before any call of its id (out of order) still goes to that call
    early = [units[0], units[2], units[1]]
    assert F.calls(early)[0].outcome is not None


def test_a_search_that_found_nothing_is_no_failure() -> None:
    """grep and rg exit 1 when nothing matched (2 on an error): a summary listed `rg -n OLLAMA`
    under errors, with the harness's `Wall time: 0.1 seconds` as its error line, where finding
    nothing was the news (no reference left). A search whose output says something else (a `cd`
    that failed before it) still failed, and an output of harness lines alone has no error line."""
    from ctxkit import facts as F
    from ctxkit.log_events import Outcome

    def run(uid: str, command: str, output: str) -> list[Unit]:
        call = ToolCall(f"c{uid}", "shell", json.dumps({"command": command}))
        return [Unit(f"a{uid}", "assistant", tool_calls=[call]), Unit(f"r{uid}", "tool", tool_call_id=f"c{uid}", content=output)]

    units = [
        Unit("u0", "user", content="Remove every Ollama reference."),
        *run("1", 'rg -n "OLLAMA" src', "Exit code: 1\nWall time: 0.1 seconds\nOutput:\n"),
        *run("2", 'grep -rn "ollama" src | grep -v test', "<returncode>1</returncode>\n<output>\n</output>"),
        *run("3", "cd missing && grep -n x f.py", "Exit code: 1\nOutput:\nbash: cd: missing: No such file or directory"),
        *run("4", "pytest -x", "Exit code: 1\nWall time: 2.0 seconds\nOutput:\n"),
    ]
    found = {c.args: c.outcome for c in F.calls(units)}
    assert found['rg -n "OLLAMA" src'] == Outcome(False, 1, "", "")
    assert not found['grep -rn "ollama" src | grep -v test'].failed
    assert found["cd missing && grep -n x f.py"].failed
    assert found["pytest -x"].failed and found["pytest -x"].label == "exit 1"
    text = summarize_extractive(units, 400, tok=TOK)
    assert "Wall time" not in text and "<returncode>" not in text
    errors = text.split("## Errors and fixes\n", 1)[1].split("\n## ", 1)[0]
    assert "OLLAMA" not in errors and "ollama" not in errors
    assert "cd missing && grep -n x f.py) -> exit 1: bash: cd: missing: No such file or directory" in errors


# ------------------------------------------------------------------------------------------
# measured on real transcripts against "first N sentences"

PATH = re.compile(r"[\w./-]+/[\w.-]+\.(?:py|ts|tsx|js|go|json|md|toml|yaml|yml|rs|sh|txt)\b")
ERROR = re.compile(r"\b\w*(?:Error|Exception)\b|\berror:|Traceback|FAILED")


def _norm(text: str) -> str:
    return " ".join(text.split())


def facts(units: Sequence[Unit]) -> list[list[str]]:
    """Paths, error lines (first 40 chars) and user requests (first 40 chars) in the units."""
    paths: dict[str, None] = {}
    errors: dict[str, None] = {}
    requests: dict[str, None] = {}
    for u in units:
        for text in [u.content, *(c.arguments for c in u.tool_calls)]:
            for m in PATH.finditer(text):
                paths.setdefault(m.group(0), None)
        for line in u.content.splitlines():
            if ERROR.search(line) and len(line.strip()) > 10:
                errors.setdefault(_norm(line)[:40], None)
        if is_user_request(u) and u.content.strip():
            requests.setdefault(_norm(u.content)[:40], None)
    return [list(paths), list(errors), list(requests)]


def first_sentences(units: Sequence[Unit], target: int) -> str:
    """The baseline: sentences from the start until the budget is spent."""
    out = ""
    for s in (s for u in units for s in split_sentences(u.content)):
        if TOK.count(out + s) > target:
            break
        out += s
    return out


def kept(text: str, groups: list[list[str]]) -> int:
    flat = _norm(text)
    return sum(1 for group in groups for fact in group if fact in flat)


REAL = [
    "claude-code/applab-nl__dmux__logs-chat-json@eef6c282__session-a9185eb7.jsonl",
    "claude-code/conneroisu__templar__logs-chat-json@a46211b7__session-b9712494.jsonl",
    "claude-code/pattern-stack__task-patterns__logs-chat-json@df54b22d__session-263940d8.jsonl",
    "mini-swe-agent/SWE-agent__mini-swe-agent__PR-814__django__django-11039.traj.json",
    "mini-swe-agent/SWE-agent__mini-swe-agent__PR-814__sqlfluff__sqlfluff-1763.traj.json",
    "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx003_task3_trial0_reward0.json",
    "codex/AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl",
]


@pytest.mark.slow
def test_extractive_keeps_more_than_first_sentences(realdata: Path) -> None:
    from ctxkit.formats import read_path

    ours_total = base_total = 0
    for rel in REAL:
        transcript = next(iter(read_path(str(realdata / rel))))
        units = [u for u in transcript.units if u.role != "system"]
        groups = facts(units)
        summary = summarize_extractive(units, 300, tok=TOK)
        assert TOK.count(summary) <= 300 * 1.02
        ours, base = kept(summary, groups), kept(first_sentences(units, 300), groups)
        assert ours >= base, (rel, ours, base)
        ours_total += ours
        base_total += base
    assert ours_total >= 1.5 * base_total, (ours_total, base_total)


@pytest.mark.slow
def test_handover_on_real_transcripts(realdata: Path) -> None:
    from ctxkit.formats import read_path

    for rel in REAL:
        units = next(iter(read_path(str(realdata / rel)))).units
        last = [u for u in units if is_request(u)][-1]
        text = handover(units, 500, tok=TOK)
        assert text.endswith(last.content)
        assert TOK.count(text.split("## Last request (verbatim)")[0]) <= 500


def _many_p1(n: int) -> list[Unit]:
    units = session()
    for i in range(n):
        units.insert(
            1 + i,
            Unit(f"p1-{i:02d}", "user", content=f"Constraint {i}: keep the column named col_{i} stable in every CSV export\nmore", priority=1),
        )
    return units


def test_handover_names_every_p1_unit_under_a_tight_budget() -> None:
    units = _many_p1(12)
    p1 = [u for u in units if u.is_p1]
    text = handover(units, 150, p1_units=p1, tok=TOK)
    for u in p1:
        assert u.id in text
    # tight: just the ids, one line each
    assert "- p1-00\n" in text


def test_handover_p1_lines_carry_type_and_head_when_there_is_room() -> None:
    units = _many_p1(3)
    text = handover(units, 600, tok=TOK)
    assert "- p1-01 (message): Constraint 1: keep the column named col_1 stable in every" in text
    assert "more" not in text.split("## Priority items")[1].split("##")[0]
    # the P1 section is never cut, even when it alone passes the target
    many = _many_p1(40)
    small = handover(many, 60, tok=TOK)
    assert all(u.id in small for u in many if u.is_p1)
    assert "## Last request (verbatim)" in small


def test_handover_without_the_last_request() -> None:
    units = session()
    with_last = handover(units, 300, tok=TOK)
    assert "## Last request (verbatim)\nAlso add a test for an empty export, then stop." in with_last
    without = handover(units, 300, tok=TOK, include_last_request=False)
    assert "## Last request" not in without
    assert "p1" in without and TOK.count(without) <= 300


def test_a_file_named_short_and_in_full_is_one_file() -> None:
    edit = Unit("a", "assistant", tool_calls=[ToolCall("c", "Edit", json.dumps(
        {"file_path": "/repo/src/utils/pane.ts", "old_string": "import x from './pane.ts'", "new_string": "y"}))])
    read = Unit("b", "assistant", tool_calls=[ToolCall("d", "Read", json.dumps({"file_path": "/repo/src/types.ts"}))])
    assert files_touched([edit, read]) == ["/repo/src/utils/pane.ts", "/repo/src/types.ts"]


def test_relative_short_names_fold_into_their_full_path_once() -> None:
    call = Unit("a", "assistant", tool_calls=[ToolCall("c", "Edit", json.dumps(
        {"file_path": "/repo/src/types.js", "old_string": "from '../types.js' and './types.js' and types.js", "new_string": ""}))])
    assert files_touched([call]) == ["/repo/src/types.js"]


# --- summarize_old's search for the smallest span that reaches the goal -------------------------

@given(
    steps=st.lists(st.integers(0, 400), min_size=1, max_size=300),
    summary=st.integers(0, 500),
    total=st.integers(0, 50_000),
    target=st.integers(0, 50_000),
)
def test_search_finds_the_first_fitting_cut_in_few_builds(
    steps: list[int], summary: int, total: int, target: int
) -> None:
    """With a summary of one size at every cut (the predicate is monotone), the search with
    floors finds the first cut that fits, the cut a plain scan finds, in a handful of builds."""
    removed = [sum(steps[: k + 1]) for k in range(len(steps))]
    floors = [total - r for r in removed]
    built: list[int] = []

    class Built:
        def __init__(self, k: int) -> None:
            self.k = k

        def tokens(self) -> int:
            return floors[self.k] + summary

    def build(cut: int) -> Built:
        built.append(cut)
        return Built(cut)

    cuts = list(range(len(steps)))
    expected = next((c for c in cuts if floors[c] + summary <= target), None)
    assert _smallest_fitting(cuts, build, target, 64, floors) == expected
    # the guess from the first build's summary lands on the answer: it is built, then the cut
    # before it, to show it is the first
    assert len(built) <= 3


@given(
    floors=st.lists(st.integers(-100, 10_000), max_size=50).map(lambda xs: sorted(xs, reverse=True)),
    limit=st.integers(-200, 10_200),
)
def test_bisect_floor_is_the_first_floor_within_the_limit(floors: list[int], limit: int) -> None:
    expected = next((k for k, f in enumerate(floors) if f <= limit), len(floors))
    assert bisect_floor(floors, limit) == expected


@given(
    steps=st.lists(st.integers(0, 400), min_size=1, max_size=300),
    summary=st.integers(0, 500),
    guess=st.integers(0, 1_000),
    total=st.integers(0, 50_000),
    target=st.integers(0, 50_000),
)
def test_a_guessed_summary_size_changes_the_builds_not_the_answer(
    steps: list[int], summary: int, guess: int, total: int, target: int
) -> None:
    """The search may start where a summary of a guessed size would fit (summarize_old guesses
    from the quotes and the preamble): too big a guess lands past the answer and the summary
    it built leads back; whatever the guess, the answer is the first fitting cut, and a right
    guess finds it in two builds (the cut, then the one before it)."""
    removed = [sum(steps[: k + 1]) for k in range(len(steps))]
    floors = [total - r for r in removed]

    class Built:
        def __init__(self, k: int) -> None:
            self.k = k

        def tokens(self) -> int:
            return floors[self.k] + summary

    def search(size: int) -> tuple[int | None, int]:
        built: list[int] = []

        def build(cut: int) -> Built:
            built.append(cut)
            return Built(cut)

        return _smallest_fitting(cuts, build, target, 64, floors, size), len(built)

    cuts = list(range(len(steps)))
    expected = next((c for c in cuts if floors[c] + summary <= target), None)
    found, builds = search(guess)
    assert found == expected and builds <= 4
    assert search(summary)[1] <= 2


def _names_session() -> list[Unit]:
    """A session whose last request is followed by an edit naming what an earlier read showed
    (RETRY_BACKOFF_MS, HttpSession), a long diff and the last action."""

    def call(i: int, name: str, **args: str) -> Unit:
        return Unit(f"a{i}", "assistant", tool_calls=[ToolCall(f"c{i}", name, json.dumps(args))])

    def result(i: int, text: str) -> Unit:
        return Unit(f"r{i}", "tool", content=text, tool_call_id=f"c{i}")

    code = ("def fetch_remote_config(url):\n    session = HttpSession(timeout=5)\n"
            "    time.sleep(RETRY_BACKOFF_MS / 1000)\n" + "# a line of the module\n" * 150)
    units = [Unit("s", "system", content="You are a coding agent."),
             Unit("q", "user", content="The retry logic of the config loader is broken; please fix it."),
             call(0, "Read", file_path="src/net_client.py"), result(0, code)]
    for k in range(1, 8):
        units += [call(k, "Bash", command=f"grep -rn loader tests/part{k}"),
                  result(k, f"tests/part{k}/test_x.py: ok line\n" * 80)]
    return [*units, Unit("q2", "user", content="Good. Now make it wait between tries."),
            call(19, "Edit", file_path="src/net_client.py", old_string="        return session.get(url)",
                 new_string="        time.sleep(RETRY_BACKOFF_MS / 1000)\n        session = HttpSession(timeout=5)"),
            result(19, "The file src/net_client.py has been updated."),
            call(20, "Bash", command="git diff"),
            result(20, "\n".join(f"+ line {k}: cfg_{k} = load_part({k})" for k in range(150))),
            call(21, "Bash", command="pytest -q"), result(21, "3 passed")]


def test_the_compactor_does_not_read_its_judge() -> None:
    """Issue 35: summaries were checked against, and topped up from, the fidelity probes that
    score them (a line of the probes' own names). A compaction, with a summary and with a fresh
    start, imports nothing of `ctxkit.fidelity`."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ctxkit.compaction import ChainOptions, CompactSettings, compact\n"
        "from ctxkit.model import Transcript\n"
        "from tests.test_summarize import _names_session\n"
        "t = Transcript(id='t', units=_names_session())\n"
        "anyway = {'summarize_old': {'min_coherence': 0.0}}\n"
        "for opts in (ChainOptions(chain=('summarize_old',), params=anyway), ChainOptions(chain=('summarize_old',))):\n"
        "    r = compact(t, CompactSettings(limit=1500, options=opts))\n"
        "    assert any(u.type == 'summary' for u in r.transcript.units)\n"
        "print(sorted(m for m in sys.modules if m.startswith('ctxkit.fidelity')))\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_current_work_gives_the_last_result_not_only_ok() -> None:
    """The last action's line carries the first line of what came back (the commit's id); the
    earlier ones, and a failed one, keep their outcome label."""
    from ctxkit.summarizers.extractive import current_work

    def pair(i: int, command: str, output: str) -> list[Unit]:
        return [Unit(f"a{i}", "assistant", tool_calls=[ToolCall(f"c{i}", "Bash", json.dumps({"command": command}))]),
                Unit(f"r{i}", "tool", content=output, tool_call_id=f"c{i}")]

    units = [*pair(1, "ls", "a.py\nb.py"), *pair(2, "git commit -am fix", "[main 4f86393] fix: retry\n 1 file changed")]
    lines = current_work(units)
    assert lines[-2] == "then: Bash(ls) -> ok"
    assert lines[-1] == "then: Bash(git commit -am fix) -> ok: [main 4f86393] fix: retry (and 1 more line)"
    failed = current_work([*units, *pair(3, "pytest", "FAILED test_a.py::t - AssertionError\nexit code 1")])
    assert failed[-1].startswith("then: Bash(pytest) -> ") and "ok" not in failed[-1]


@pytest.mark.parametrize(("output", "news"), [
    ("[main 4f86393] fix: retry\n 1 file changed", "[main 4f86393] fix: retry"),
    ("Chunk ID: 68d813\nWall time: 0.5 seconds\nProcess exited with code 0\nOutput:\nsrc/a.ts | 3 +++",
     "src/a.ts | 3 +++"),  # Codex's exec_command
    ("<returncode>0</returncode>\n<output>\n3 passed in 0.12s\n</output>", "3 passed in 0.12s"),
    ("Command: make\nDirectory: (root)\nOutput: built dist/app.js\nError: (none)\nExit Code: 0",
     "built dist/app.js"),  # Gemini CLI's run_shell_command
    ("warning: in the working copy of 'a.json', CRLF will be replaced by LF\nM a.json", "M a.json"),
    ("WARNING: Running pip as the 'root' user can result in broken permissions.\n"
     "[notice] A new release of pip is available: 24.0 -> 25.1\nSuccessfully installed pytz-2024.1",
     "Successfully installed pytz-2024.1"),
    ("Success. Updated the following files:\nM src/a.py", "Success. Updated the following files: M src/a.py"),
    ("     1→import os\n     2→import sys", ""),  # a file read: its first line is no news
    ("{\n  \"a\": 1\n}", ""),
    ("The file /r/a.go has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n"
     "     1→package a", "The file /r/a.go has been updated."),
    ("Exit code: 0\n\n", ""),
])
def test_the_news_of_a_result_is_past_the_harness_lines(output: str, news: str) -> None:
    """What a summary quotes of the last action's result: the first line past the harness's own
    (exit code, chunk id, wall time, `Output:`), nothing when that line starts a listing."""
    from ctxkit.log_events import news_line

    assert news_line(output) == news


def test_current_work_keeps_the_last_action_before_older_ones() -> None:
    """A short budget keeps the assistant's last words and the last action (with its result),
    not the oldest `then:` line, which would read as the last action."""
    def pair(i: int, command: str, output: str) -> list[Unit]:
        return [Unit(f"a{i}", "assistant", tool_calls=[ToolCall(f"c{i}", "Bash", json.dumps({"command": command}))]),
                Unit(f"r{i}", "tool", content=output, tool_call_id=f"c{i}")]

    units = [Unit("q", "user", content="Fix the stash mess and show me the diff."),
             *pair(1, "git stash pop", "error: Your local changes would be overwritten by merge\nexit code 1"),
             *pair(2, "git checkout . && git stash pop", "On branch main"),
             Unit("m", "assistant", content="The stash is applied again; here is the diff of the two files."),
             *pair(3, "git diff --stat", " src/a.py | 4 ++--\n 1 file changed")]
    text = summarize_extractive(units, 120, tok=TOK)
    work = text.split("## Where the work stood\n", 1)[1].split("\n## ", 1)[0]
    assert "git diff --stat) -> ok: src/a.py | 4 ++--" in work
    assert "then: Bash(git stash pop) -> exit 1" not in work


def test_findings_are_causes_and_choices_not_intentions() -> None:
    """A finding states a cause, a fix or a choice; an intention ("I'm checking X because..."),
    a question or a fragment ("Actually, wait.") is none. A refused SWE-agent edit is a failure,
    not 'ok'."""
    from ctxkit.log_events import outcome
    from ctxkit.summarizers.extractive import decisions

    said = [Unit("a1", "assistant", content="Actually, wait. I'm checking the bridge first, because the cards need it. "
                                            "The root cause is that the tooltip reads the percent, not aider_total. "
                                            "Let me look at why, because it matters? Updating App.tsx functionality")]
    assert decisions(said) == ["The root cause is that the tooltip reads the percent, not aider_total."]
    refused = Unit("r", "tool", tool_call_id="c", content=(
        "Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry your edit commmand.\n"
        "ERRORS:\n- E999 IndentationError: unexpected indent"))
    assert outcome(refused).failed


def test_a_merge_conflict_is_the_error_line_of_a_failed_run() -> None:
    """A failed script's progress lines say nothing of what went wrong; git's CONFLICT does."""
    from ctxkit.log_events import error_line

    out = "Exit code 1\ngroup ok: 1 commits\ngroup ok: 1 commits\nCONFLICT at c5e51bab (refactor: one data file)\n    src/a.go"
    assert error_line(out) == "CONFLICT at c5e51bab (refactor: one data file)"


def test_an_agents_numbered_summary_is_read_by_section_and_its_user_messages_kept() -> None:
    """context-evaluator in the loop: Claude Code's own summary lists "6. All user messages:"
    as indented items; read as one line cut at 300 characters, its second message ("Make these
    two button 'List / Tree' more visible") was lost when ctxkit summarized it again. Numbered
    headings are sections, indented `- ` lines items, and an agent's user messages (words the
    log no longer holds) stay as earlier-summary lines; ctxkit's own quotes are quoted again from
    the log."""
    from ctxkit.summarizers.sections import EARLIER_TITLE, Section, merge_previous, parse_sections

    claude = "\n".join([
        "This session is being continued from a previous conversation that ran out of context.",
        "",
        "4. Errors and fixes:",
        "   - **ChakraProvider error**: fixed by using Ark UI's TreeView",
        "6. All user messages:",
        '   - **Message 1**: "Implement the following plan: [detailed Tree View plan]"',
        "   - **Message 2**: \"Make these two button 'List / Tree' more visible, on the left side\"",
        "7. Pending Tasks:",
        "   - Fix the duplicate key warnings in `buildContextTree`",
    ])
    parsed = parse_sections(claude)
    assert parsed["All user messages"] == [
        '**Message 1**: "Implement the following plan: [detailed Tree View plan]"',
        "**Message 2**: \"Make these two button 'List / Tree' more visible, on the left side\"",
    ]
    assert parsed["Pending Tasks"] == ["Fix the duplicate key warnings in `buildContextTree`"]
    merged = merge_previous([Section("Errors and fixes", [])], claude)
    earlier = next(s for s in merged if s.title == EARLIER_TITLE).items
    assert any("List / Tree" in line for line in earlier)
    ours = "[This session continues ...]\n## User messages (verbatim, oldest first)\n- fix the tree view"
    assert not any(s.title == EARLIER_TITLE for s in merge_previous([Section("Errors and fixes", [])], ours))


def test_a_zsh_command_not_found_is_a_failure_even_when_a_pipe_exits_0() -> None:
    """A FSM1 summary, read by a model: `psql ... | head -5 -> ok: (eval):1: command not found:
    psql`. zsh's own diagnostic is the shell's, as bash's is: the call failed."""
    from ctxkit import log_events as events

    for text in ("(eval):1: command not found: psql", "zsh:1: permission denied: ./run.sh"):
        out = events.outcome(Unit("r", "tool", content=text, tool_call_id="c"))
        assert out.failed, text
    assert not events.outcome(Unit("r", "tool", content="psql is at /usr/bin/psql", tool_call_id="c")).failed


def test_a_summary_quotes_the_users_words_not_the_files_an_at_path_pasted() -> None:
    # Gemini CLI pastes the file an `@path` names after the user's words; a summary quoted the
    # README it pasted (and went on to edit) in the user's request
    readme = "# Session Bridge\n" + "An unofficial VS Code extension for browsing checkpoints. " * 40
    asked = ("Update @README.md linking the gifs to the right feature\n--- Content from referenced files ---\n"
             f"Content from @README.md:\n{readme}\n--- End of content ---")
    units = [
        Unit("u1", "user", content=asked),
        Unit("a1", "assistant", tool_calls=[ToolCall("c1", "replace", json.dumps({"file_path": "README.md"}))]),
        Unit("r1", "tool", content="Successfully modified file: README.md", tool_call_id="c1"),
        Unit("u2", "user", content="Add a callout that it is unofficial\n<system-reminder>Use the todo list.</system-reminder>"),
    ]
    text = summarize_extractive(units, 300, tok=TOK)
    assert '"Update @README.md linking the gifs to the right feature"' in text
    assert 'then: "Add a callout that it is unofficial"' in text
    assert "unofficial VS Code extension" not in text and "Content from" not in text and "todo list" not in text


def test_an_agents_summary_is_merged_without_its_notes_and_its_then_current_work() -> None:
    """templar and medianator: Claude Code's summary, summarized again, carried its `Analysis:`
    notes ("Currently working on fixing compilation errors from leftover rustface references",
    fixed long before), its "8. Current Work" and "9. Optional Next Step" (with Claude Code's
    "Please continue the conversation ..."), and its "Key Technical Concepts" (a tally the
    summary retired, missed for its capitals) under "Earlier summary"; its "1. Primary Request and
    Intent" is the summary's own section."""
    from ctxkit.summarizers.sections import EARLIER_TITLE, WORK_TITLE, Section, merge_previous

    claude = "\n".join([
        "This session is being continued from a previous conversation that ran out of context.",
        "Analysis:",
        "Looking through the conversation chronologically:",
        "- Currently working on fixing compilation errors from leftover rustface references",
        "",
        "Summary:",
        "1. Primary Request and Intent:",
        "   - Add a proper ML-based face detection model",
        "2. Key Technical Concepts:",
        "   - Axum web framework",
        "4. Errors and fixes:",
        "   - Address already in use: killed the old server",
        "8. Current Work:",
        "   Removing the broken FaceDetector code",
        "9. Optional Next Step:",
        "   Remove the broken FaceDetector implementation",
    ])
    new = [
        Section("Primary request and intent", []),
        Section("Errors and fixes", []),
        Section(WORK_TITLE, ["then: Write(src/db/face_grouping.rs) -> ok"]),
    ]
    merged = {s.title: s.items for s in merge_previous(new, claude)}
    assert merged["Primary request and intent"] == ["Add a proper ML-based face detection model"]
    assert merged["Errors and fixes"] == ["Address already in use: killed the old server"]
    text = "\n".join(line for items in merged.values() for line in items)
    for stale in ("rustface", "Axum", "Removing the broken", "Remove the broken", "chronologically"):
        assert stale not in text
    assert merged.get(EARLIER_TITLE, []) == ["This session is being continued from a previous conversation that ran out of context."]
    # with no newer word on where the work stands, the agent's stays
    kept = {s.title: s.items for s in merge_previous([Section("Errors and fixes", [])], claude)}
    assert "Removing the broken FaceDetector code" in kept[EARLIER_TITLE]
