"""Summaries a model can trust (issue 38, points 1-4), on real transcripts.

Each test is a false or misplaced statement found by reading ctxkit's compactions of real logs
as the agent continuing the task would; it fails if the statement comes back. The logs are in
../shared/realdata (the tests skip without it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxkit import facts as F
from ctxkit import log_events
from ctxkit.archive.store import Archive
from ctxkit.compaction import CompactSettings, compact
from ctxkit.errors import UsageError
from ctxkit.fidelity import claims as C
from ctxkit.formats import read_path
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.structure import is_request, pairs_intact, request_indices
from ctxkit.summarizers.extractive import command_label, summarize_extractive, task_quote
from ctxkit.summarizers.sections import file_items
from ctxkit.tokens import count_transcript, get_tokenizer

TOK = get_tokenizer("cl100k_base")
SHARES = (3, 6, 10)

DJANGO = "mini-swe-agent/SWE-agent__mini-swe-agent__PR-814__django__django-11039.traj.json"
DMUX = "claude-code/applab-nl__dmux__logs-chat-json@eef6c282__session-a9185eb7.jsonl"
BOX = "claude-code/daniifrim__10-box-os__logs-chat-json@39f97266__session-fafb1fb2.jsonl"
PONYC = "openhands/All-Hands-AI__OpenHands__multi_swe_bench-example-output__line0_ponylang__ponyc-4595.json"
CODEX = "codex/AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
GATOMIA = "opencode/eitatech__gatomia-vscode__checkpoints-v1__0f-1be78a364c-1@56c98fe2.export.json"
TEMPLAR = "claude-code/conneroisu__templar__logs-chat-json@7c1b6b43__session-5fa42961.jsonl"
# logs of five agents, compacted at each share for the placement and wording checks
SEVERAL = (DJANGO, DMUX, BOX, PONYC, CODEX, TEMPLAR,
           "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx033_task33_trial0_reward0.json",
           # at a tenth a fresh start ran after summarize_old had put its summary after the last
           # request: the handover and that summary both stood in the context
           "aider/Aider-AI__aider__chat-history__session0013_2024-08-06T085514.md",
           # and there a handover that left the chain's masked outputs out split two calls
           # from their results
           "mini-swe-agent/SWE-agent__mini-swe-agent__PR-814__sqlfluff__sqlfluff-1763.traj.json")


def _read(realdata: Path, rel: str) -> Transcript:
    (t,) = list(read_path(str(realdata / rel)))
    return t


def _compact(t: Transcript, share: int, tmp_path: Path) -> Transcript:
    limit = count_transcript(t, TOK).total // share
    with Archive(str(tmp_path / f"a{share}.db")) as archive:
        try:
            result = compact(t, CompactSettings(limit=limit, tokenizer=TOK, use_usage=False), archive=archive)
        except UsageError:  # a limit below the system prompt and the least a compaction leaves
            return Transcript(units=[])
    assert result.fits and result.invariants["ok"]
    return result.transcript


def _written(t: Transcript) -> str:
    """What the compaction wrote: its summaries and handovers."""
    return "\n".join(u.content for u in t.units if u.type == "summary" and "strategy" in u.meta)


# --- 1. only true statements ----------------------------------------------------------------


def test_a_backup_copy_is_written_not_edited(realdata: Path, tmp_path: Path) -> None:
    """mini-swe-agent backed up sqlmigrate.py with `cp x x.backup && sed -i ... x`: summaries
    said `sqlmigrate.py.backup (edited)`. The copy is created; its source is read; the file
    `sed -i` changed is edited."""
    t = _read(realdata, DJANGO)
    done = F.files(t.units)
    assert done["django/core/management/commands/sqlmigrate.py.backup"][0] == "created"
    assert "edited" in done["django/core/management/commands/sqlmigrate.py"]
    for share in SHARES:
        text = _written(_compact(t, share, tmp_path))
        assert "sqlmigrate.py.backup (edited" not in text, share


@pytest.mark.parametrize(("command", "found"), [
    ("cp src/a.py src/a.py.bak", [("src/a.py.bak", "created"), ("src/a.py", "used")]),
    ("mv old.txt new.txt", [("new.txt", "created"), ("old.txt", "moved")]),
    ("sed -i 's|Mozilla/5.0|Googlebot/2.1|' conf/ua.txt", [("conf/ua.txt", "edited")]),
    ("perl -pi -e 's/a/b/' f.txt", [("f.txt", "edited")]),
    ("sed -n 1,20p src/a.py | head", [("src/a.py", "read")]),
    ('curl -A "Mozilla/5.0 (X11)" https://x.org/a', []),
    ("task-master set-status --id=60.2/60.3/60.10 --status=done", []),
    ("claude --system-prompt.md x", []),
    ('test -f a.js && echo "a => import"', [("a.js", "used")]),  # a quoted arrow is no redirect
    ("ls > out.txt", [("out.txt", "created")]),
    ("python scripts/run.py data/in.csv", [("scripts/run.py", "ran"), ("data/in.csv", "used")]),
    ("head -40 src/app.py && wc -l src/app.py", [("src/app.py", "read")]),
    ('grep -rn "migration.atomic" django/db/x.py', [("django/db/x.py", "used")]),  # the pattern is no file
    # a shell comment names no file (FSM1's summaries listed `used: 500/403/etc`); a `#` inside
    # a word or quotes begins none
    ("# capture stderr to see the 500/403/etc\nnpx playwright test tests/a.spec.ts 2>&1 | tail -80",
     [("tests/a.spec.ts", "ran")]),
    ('grep -n "#include" src/a.c && cat notes#1.txt  # and/or', [("src/a.c", "used"), ("notes#1.txt", "read")]),
    # an output option writes its file (a summary said `used: media/logo.png` of what sips made);
    # `grep -o` takes no file
    ("sips -s format png media/logo.svg --out media/logo.png", [("media/logo.png", "created"), ("media/logo.svg", "used")]),
    ("gcc -o build/app src/main.c && curl -sSLo data/x.json https://x.io",
     [("build/app", "created"), ("data/x.json", "created"), ("src/main.c", "used")]),
    ('grep -o "foo/bar" src/x.py', [("src/x.py", "used")]),
])
def test_what_a_shell_command_wrote(command: str, found: list[tuple[str, str]]) -> None:
    """A file is edited only where a call wrote it, and a string is a path only if it is one:
    a user agent (`Mozilla/5.0`), a task number (`60.2/60.10`), an option are not files. The
    summaries read a call as the claims checker does (`ctxkit.call_effects`)."""
    assert list(F.call_paths("Bash", json.dumps({"command": command}))) == found


def test_a_path_with_spaces_is_one_path(tmp_path: Path) -> None:
    """Claude Code read `backlog/tasks/task-152 - Add editor.md`: the summary named its tail
    `Add-editor.md (edited, read)`, which no call wrote. The path is kept whole, in backticks,
    and the claims checker reads it whole."""
    path = "/repo/backlog/tasks/task-152 - Add editor.md"
    units = [
        Unit("u1", "user", content="Look at the task file and start on it."),
        Unit("a1", "assistant", tool_calls=[ToolCall("c1", "Read", json.dumps({"file_path": path}))]),
        Unit("r1", "user", type="tool_result", tool_call_id="c1", content="# task 152"),
    ]
    assert F.files(units) == {path: ["read"]}
    items, _ = file_items(F.files(units))
    assert items == [f"read: `{path}`"]
    verdicts = C.check(Transcript(units=units, id="t"), Transcript(units=[
        Unit("s", "user", type="summary", content=f"## Files and code\n- `{path}` (read)\n- `{path}` (edited)"),
    ], id="t"))
    assert [(c.text.split("(")[-1], c.true) for c in verdicts.claims if c.kind == "file"] == [
        ("read)", True), ("edited)", False)]


def test_a_read_of_a_file_that_mentions_a_failure_is_no_error() -> None:
    """A successful Read of a script whose text says `exit code 259` and prints a traceback was
    shown as the error `exit 259`; the log's own flag says the call went through. A Bash call
    the log flags `is_error: false` did not fail either, whatever its output says."""
    script = "#!/bin/sh\necho \"FATAL: no config\"\nexit code 259\nTraceback (most recent call last):\n  boom"
    units = [
        Unit("a", "assistant", tool_calls=[ToolCall("c1", "Read", json.dumps({"file_path": "run.sh"})),
                                           ToolCall("c2", "Bash", json.dumps({"command": "cat crash.log"}))]),
        Unit("r1", "user", type="tool_result", tool_call_id="c1", content=script),
        Unit("r2", "user", type="tool_result", tool_call_id="c2", content=script, raw={
            "message": {"content": [{"type": "tool_result", "tool_use_id": "c2", "is_error": False}]}}),
    ]
    assert [c.failed for c in F.calls(units)] == [False, False]
    assert "## Errors and fixes" not in summarize_extractive(units, 300, tok=TOK)


def test_a_file_written_over_was_not_created() -> None:
    """session-bridge's Write of media/logo.svg, which an earlier Read had shown: `(created)`
    said the file was new; it was written over."""
    units = [Unit("a1", "assistant", tool_calls=[ToolCall("c1", "Read", json.dumps({"file_path": "media/logo.svg"}))]),
             Unit("r1", "user", type="tool_result", tool_call_id="c1", content="<svg/>"),
             Unit("a2", "assistant", tool_calls=[ToolCall("c2", "Write", json.dumps({"file_path": "media/logo.svg", "content": "<svg></svg>"}))]),
             Unit("r2", "user", type="tool_result", tool_call_id="c2", content="File written")]
    assert F.files(units) == {"media/logo.svg": ["written", "read"]}


def test_a_write_that_failed_changed_nothing() -> None:
    """opencode's apply_patch of eleven files failed ("The previous patch didn't land any
    files"): its files were listed as created."""
    patch = "*** Begin Patch\n*** Add File: src/new.ts\n+x\n*** End Patch"
    units = [Unit("a", "assistant", tool_calls=[ToolCall("c", "apply_patch", json.dumps({"patchText": patch}))]),
             Unit("r", "tool", tool_call_id="c", content="apply_patch verification failed", meta={"is_error": True})]
    assert F.files(units) == {}


def test_a_task_list_says_each_item_as_last_updated(realdata: Path, tmp_path: Path) -> None:
    """dmux at a sixth: the summary said `[in_progress] Test the implementation` and `Next
    step: Test the implementation`, while the TodoWrite kept after it marks every item done. A
    summary's task list and next step give way to a newer list kept after it."""
    t = _read(realdata, DMUX)
    for share in (6, 10):
        out = _compact(t, share, tmp_path)
        ids = [u.id for u in out.units]
        for s in (u for u in out.units if u.type == "summary"):
            later = out.units[ids.index(s.id) + 1 :]
            newer = any("todo" in c.name.lower() for u in later for c in u.tool_calls)
            if newer:
                assert "[in_progress]" not in s.content and "[pending]" not in s.content
            assert "## Next step\n- Test the implementation" not in s.content


def test_template_text_is_no_pending_work(realdata: Path, tmp_path: Path) -> None:
    """A Codex rollout's AGENTS.md (`**Recommended Next Steps**`, `task_id, title, status, next
    step`) was listed under pending tasks: instructions are not the user's work."""
    t = _read(realdata, CODEX)
    for share in SHARES:
        text = _written(_compact(t, share, tmp_path))
        assert "Recommended Next Steps" not in text and "task_id, title, status" not in text


# --- 2. in the right place -----------------------------------------------------------------


def test_a_handover_does_not_tell_again_what_a_kept_placeholder_stands_for(realdata: Path, tmp_path: Path) -> None:
    """mini-swe-agent's sqlfluff run at a tenth: a placeholder the chain kept stood for messages
    #192-193 and the fresh start's handover told them again, placed before it, so the context
    read #194-#197, the handover, then #192 (put back) as if it came later. What a kept
    placeholder stands for is no part of the handover, and every kept message is in its order."""
    t = _read(realdata, "mini-swe-agent/SWE-agent__mini-swe-agent__PR-814__sqlfluff__sqlfluff-1763.traj.json")
    at = {u.id: i for i, u in enumerate(t.units)}
    small = _compact(t, 10, tmp_path)
    kept = [at[u.id] for u in small.units if u.id in at]
    assert kept == sorted(kept) and any(u.id == "ctxkit-handover" for u in small.units)
    assert not [c for c in C.check(t, small).false_claims if c.kind == "order"]


def test_a_session_command_is_not_the_request(realdata: Path, tmp_path: Path) -> None:
    """10-box-os opens with `/clear`: it was taken for the first request (kept verbatim, the
    summary before it, the task after: the context read as cleared and the task as new)."""
    t = _read(realdata, BOX)
    first = t.units[request_indices(t.units)[0]]
    assert first.content.startswith("Okay, let's work on the style guide")
    assert not any(is_request(u) for u in t.units if "<command-name>/clear" in u.content)
    for share in SHARES:
        out = _compact(t, share, tmp_path)
        assert first.id in [u.id for u in out.units]
        assert not any("<command-name>/clear" in u.content for u in out.units if u.type != "summary")


def test_an_observation_is_no_request() -> None:
    """OpenHands logs an error observation that answers no action as a user message (`Parameter
    'command' is expected to be one of ...`): it was left as the current request."""
    error = Unit("u9", "user", content="Parameter `command` is expected to be one of [view, create]",
                 raw={"observation": "error", "content": "..."})
    asked = Unit("u1", "user", content="Fix the segfault in the parser.", raw={"action": "message", "source": "user"})
    assert is_request(asked) and not is_request(error)


@pytest.mark.parametrize("rel", SEVERAL)
def test_a_summary_stands_where_its_span_ended(realdata: Path, tmp_path: Path, rel: str) -> None:
    """Every message after a summary came after everything the summary stands for, and a
    compaction writes one summary (a re-compaction merges). An old request placed after a
    summary of what answered it read as still open (tau-bench's "Yes, please go ahead with all
    the downgrades")."""
    t = _read(realdata, rel)
    order = {u.id: k for k, u in enumerate(t.units)}
    for share in SHARES:
        out = _compact(t, share, tmp_path)
        ids = [u.id for u in out.units]
        assert pairs_intact(t.units, out.units) == [], share
        summaries = [u for u in out.units if u.type == "summary" and "strategy" in u.meta]
        assert len(summaries) <= 1, (share, [s.id for s in summaries])
        for s in summaries:
            placeholders = {x for u in out.units for x in u.meta.get("removed_ids", ())}
            stands_for = s.meta.get("summarized_ids") or [
                u.id for u in t.units if u.id not in ids and u.id not in placeholders
            ]
            last = max(order[x] for x in stands_for if x in order)
            after = [x for x in ids[ids.index(s.id) + 1 :] if x in order]
            assert all(order[x] > last for x in after), (share, s.id)
        # the context never ends on a summary read as the assistant's own turn
        assert not out.units or not (out.units[-1].type == "summary" and out.units[-1].role == "assistant")


def test_the_reply_that_ends_the_session_stays_after_the_summary(realdata: Path, tmp_path: Path) -> None:
    """OpenHands ponyc at a sixth: the agent's closing message came after its last action; it
    was summarized, so the summary stood last, after the action, and the context ended on it.
    The closing reply stays with the last action, and the summary stands before both."""
    t = _read(realdata, PONYC)
    closing = t.units[-1]
    assert closing.role == "assistant" and not closing.tool_calls
    out = _compact(t, 6, tmp_path)
    assert out.units[-1].id == closing.id and out.units[-1].content == closing.content
    ids = [u.id for u in out.units]
    summary = next(u for u in out.units if u.type == "summary")
    assert ids.index(summary.id) < ids.index(t.units[-3].id)  # before the last action


# --- 3. the task first, whole ----------------------------------------------------------------


def test_the_issue_is_kept_whole_when_it_fits(realdata: Path, tmp_path: Path) -> None:
    """OpenHands' ponyc task (the issue inside the harness's instructions) was cut head and
    tail (`Consider the followi [...] ur changes`) though it fits: the first request is kept
    verbatim wherever it takes at most a quarter of the room."""
    t = _read(realdata, PONYC)
    first = t.units[request_indices(t.units)[0]]
    system = sum(TOK.count(u.content) for u in t.units if u.role == "system")
    for share in SHARES:
        limit = count_transcript(t, TOK).total // share
        out = _compact(t, share, tmp_path)
        if TOK.count(first.content) <= (limit - system) // 4:
            assert [u.content for u in out.units if u.id == first.id] == [first.content], share


def test_a_long_task_keeps_its_problem_statement_not_its_boilerplate() -> None:
    """Cut, a task loses the harness's instructions around the issue, never the issue."""
    issue = "ponyc segfaults when trying to match using a single element tuple form. " * 6
    text = (
        "<uploaded_files>\n/workspace/ponyc\n</uploaded_files>\nI've uploaded a C code repository. "
        f"Consider the following issue description:\n\n<issue_description>\n{issue}\n</issue_description>\n\n"
        + "Follow these steps to resolve the issue: 1. explore 2. reproduce 3. fix 4. rerun. " * 12
    )
    quoted = task_quote(text, 700)
    assert " ".join(issue.split()) in quoted and "Follow these steps" not in quoted
    assert "instructions around it left out" in quoted and len(quoted) <= 700


# --- 4. worth its tokens ------------------------------------------------------------------


_TALLY = re.compile(r"\b\w+ x\d+\b")


@pytest.mark.parametrize("rel", [DMUX, GATOMIA, TEMPLAR, CODEX])
def test_no_tallies_headlines_or_cut_commands(realdata: Path, tmp_path: Path, rel: str) -> None:
    """`tools used: Read x6, TodoWrite x4`, 2,354 tokens of `shell(apply_patch *** Begin
    Patch...) -> ok`, headline lists ("Updating App.tsx functionality"), fragments ("Actually,
    wait."): none of it is a fact a model acts on."""
    t = _read(realdata, rel)
    for share in (6, 10):
        text = _written(_compact(t, share, tmp_path))
        for retired in ("tools used", "## Key technical concepts", "## Problem solving", "## Commands run",
                        "*** Begin Patch", "Actually, wait"):
            assert retired not in text, (share, retired)
        assert not _TALLY.search(text.replace("x86", "")), share
        # a command is whole, or its head then ` ...`: never cut in the middle of a word
        for m in re.finditer(r"\w\((.*?)\) -> ", text):
            assert not m.group(1).endswith("...") or m.group(1).endswith(" ..."), (share, m.group(0))


def test_a_command_is_named_whole_or_said_to_be_cut() -> None:
    """A command is quoted whole, or its head then ` ...`: a heredoc's body, a patch's hunks
    and SWE-agent's edit body are not quoted, never cut in the middle as if whole."""
    heredoc = "cat > /tmp/t.js << 'EOF'\nconst a = 1;\nconsole.log(a);\nEOF\nnode /tmp/t.js"
    call = F.Call(0, "Bash", log_events.one_line(heredoc, 120), (("/tmp/t.js", "written"),), None, heredoc)
    assert command_label(call) == "Bash(cat > /tmp/t.js << 'EOF' ...)"
    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-a\n+b\n*** End Patch"
    call = F.Call(0, "apply_patch", "x", (("src/a.py", "edited"),), None, patch)
    assert command_label(call) == "apply_patch(*** Update File: src/a.py ...)"
    assert command_label(F.Call(0, "$", "x", (), None, "edit 287:295\n    x = 1\nend_of_edit")) == "$ edit 287:295 ..."
    long = "ls " + "a " * 150
    assert command_label(F.Call(0, "Bash", "x", (), None, long)).endswith(" a ...)")
    assert command_label(F.Call(0, "Bash", "x", (), None, "git status")) == "Bash(git status)"


def test_earlier_actions_say_what_came_back(realdata: Path, tmp_path: Path) -> None:
    """templar's sub-agent analyses and the GitHub issues it filed: `Bash(gh issue create ...)
    -> ok` said nothing of the issue made; the line says what came back (its URL)."""
    t = _read(realdata, TEMPLAR)
    text = _written(_compact(t, 3, tmp_path))
    assert "-> ok: https://github.com/conneroisu/templar/issues/" in text


NAMES_LINE = "- names in the current work: "


@pytest.mark.parametrize(
    ("rel", "share", "name"),
    [
        # a fresh start of an airline chat: the reservations the agent was changing when the
        # room ran out (its last messages name them; the handover's sections do not)
        ("openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx033_task33_trial0_reward0.json", 6, "H8Q05L"),
        # summarize_old of an aider chat resizing a chart: the code names its last reply edits
        ("aider/Aider-AI__aider__chat-history__session0618_2024-08-13T134245.md", 6, "blameData"),
    ],
)
def test_a_summary_names_the_ids_of_the_current_work(
    realdata: Path, tmp_path: Path, rel: str, share: int, name: str
) -> None:
    """Issue 38 / issue 33 point 4: a summary keeps the ids and names of the current work that
    the last request and the latest assistant messages use, on one line, read from the log by
    `ctxkit.facts` (not the judge's probes, issue 35). Each name on it is one the summarized
    messages say, and none is said anywhere else in the context: without the line it is lost."""
    t = _read(realdata, rel)
    out = _compact(t, share, tmp_path)
    lines = [(u, line) for u in out.units if u.type == "summary"
             for line in u.content.splitlines() if line.startswith(NAMES_LINE)]
    assert len(lines) == 1
    summary, line = lines[0]
    names = line[len(NAMES_LINE):].split(", ")
    assert name in names and 0 < len(names) <= F.MAX_NAMES and len(set(names)) == len(names)
    # the current work: the last request and the latest assistant messages say the id
    recent = "\n".join(x for i in F.latest_positions(list(t.units)) for x in F.unit_words(t.units[i]))
    assert log_events.named(name, recent)
    # true of the log: every name is said by the messages the compaction took out of the context
    kept_ids = {u.id for u in out.units}
    span = "\n".join(x for u in t.units if u.id not in kept_ids for x in F.unit_words(u))
    assert all(log_events.named(n, span) for n in names), [n for n in names if not log_events.named(n, span)]
    # worth its tokens: no name the context already says elsewhere
    elsewhere = "\n".join([*(x for u in out.units if u is not summary for x in F.unit_words(u)),
                           summary.content.replace(line, "")])
    assert not [n for n in names if n in elsewhere]


def test_the_names_of_the_current_work_are_read_from_the_latest_messages() -> None:
    """`facts.current_names`: ids, code names, files and URLs the last request and the latest
    assistant messages use that the conversation had used before them; not the words of the
    prose, not a name the latest messages made up, not a name inside a longer one listed."""
    units = [
        Unit("u1", "user", content="Order #W2378156 failed in `place_order`; see https://x.example/o/1"),
        Unit("a1", "assistant", tool_calls=[ToolCall("c1", "Read", json.dumps({"file_path": "src/shop/orders.py"}))]),
        Unit("r1", "tool", content="def place_order(order_id): ...", tool_call_id="c1"),
        Unit("a2", "assistant", content="I found the function."),
        Unit("a3", "assistant", content="It has no retry."),
        Unit("a4", "assistant", content="place_order in src/shop/orders.py raises for #W2378156 (see "
                                        "https://x.example/o/1); I will add retry_order, a new helper."),
        Unit("u2", "user", content="Go ahead, and keep the commit small."),
    ]
    names = F.current_names(units)
    assert names == ["place_order", "#W2378156", "src/shop/orders.py", "https://x.example/o/1"]
    assert "retry_order" not in names  # the latest message made it up: no name the work used before
    # plain words, `n/a`, `UI/UX` and the `/canvas` of `</canvas>` are no names; ids and hashes are
    assert F.names_in("The `main` one: n/a UI/UX </canvas> ZFA04Y 4f86393 HAT170.") == ["ZFA04Y", "4f86393", "HAT170"]


def test_a_failure_is_fixed_only_by_a_later_run_of_the_same_call() -> None:
    """tau-bench: booking flight HAT213 failed (no seats); a booking of other flights passed
    later. The two calls' labels share their first 120 characters, and the summary said the
    first was "(fixed: a later run passed)", which no run of it did."""
    from ctxkit.summarizers.extractive import errors_seen

    head = {"user_id": "mia_li_3668", "origin": "EWR", "destination": "SEA", "flight_type": "one_way",
            "cabin": "economy"}

    def booking(cid: str, flight: str) -> Unit:
        args = {**head, "flights": [{"flight_number": flight, "date": "2024-05-20"}]}
        return Unit(f"a{cid}", "assistant", tool_calls=[ToolCall(cid, "book_reservation", json.dumps(args))])

    units = [
        Unit("u1", "user", content="Book me a one-way flight to Seattle."),
        booking("c1", "HAT213"), Unit("r1", "tool", tool_call_id="c1", content="Error: not enough seats on flight HAT213"),
        booking("c2", "HAT231"), Unit("r2", "tool", tool_call_id="c2", content='{"reservation_id": "HATHAT"}'),
    ]
    (line,) = errors_seen(units)
    assert "HAT213" in line and "not enough seats" in line and "(fixed" not in line
    units.append(booking("c3", "HAT213"))
    units.append(Unit("r3", "tool", tool_call_id="c3", content='{"reservation_id": "HATHAU"}'))
    assert errors_seen(units)[0].endswith("(fixed: a later run passed)")


def test_the_user_messages_title_says_when_some_are_left_out() -> None:
    """A summary's list of the user's messages was titled "All user messages" while the room had
    left the oldest ten of them out: a reader took the list as complete."""
    from ctxkit.strategies.summarize_old import verbatim_section

    assert verbatim_section(["fix x", "now y"]).splitlines()[0] == "## User messages (verbatim, oldest first)"
    head = verbatim_section(["fix x", "now y"], total=12).splitlines()[0]
    assert head == "## User messages (verbatim, oldest first; 2 of 12, the others archived)"


def test_a_session_command_is_no_request_and_a_clear_starts_anew() -> None:
    """aider's `/add`, `/drop`, `/undo` were taken for requests (a summary's "Next step" was
    `/add aider/main.py`), and the first request before a `/clear` was kept at the top as if
    open. A session command is no request; after `/clear` the task is the first request since;
    a summary of what came before says the user cleared it."""
    from ctxkit import structure
    from ctxkit.summarizers.extractive import current_work

    units = [
        Unit("u1", "user", content="cache the repomap on a key of the file lists"),
        Unit("a1", "assistant", content="Done: the maps are cached in self.map_cache."),
        Unit("u2", "user", content="/add aider/main.py"),
        Unit("u3", "user", content="/clear"),
        Unit("u4", "user", content="/drop aider/commands.py"),
        Unit("u5", "user", content="pass args.map_refresh into Coder and then to RepoMap"),
        Unit("a2", "assistant", content="Here are the edits."),
    ]
    assert [u.id for u in units if is_request(u)] == ["u1", "u5"]
    assert is_request(Unit("q", "user", content="/ask how does the repo map get its ranks?"))
    assert structure.conversation_start(units) == 4 and structure.first_request_index(units) == 5
    keep = structure.protected_indices(units)
    assert 5 in keep and 0 not in keep
    assert current_work(units[:4])[-1] == "then: /clear"


def test_where_the_work_stood_keeps_the_order_of_events() -> None:
    """A summary said `You're right! ... Let me fix this.`, then `then: Bash(python x.py) -> ok`,
    though that run came before those words (and prompted them). Only what came after the
    last words is a `then:` line; the actions before them stand before them."""
    from ctxkit.summarizers.extractive import current_work

    def call(cid: str, command: str) -> Unit:
        return Unit(f"a{cid}", "assistant", tool_calls=[ToolCall(cid, "Bash", json.dumps({"command": command}))])

    units = [
        Unit("u1", "user", content="Make the music less church-like."),
        call("c1", "python diverse.py"), Unit("r1", "tool", tool_call_id="c1", content="organ, waltz"),
        Unit("a2", "assistant", content="You're right! It still sounds like a church. Let me fix this."),
    ]
    lines = current_work(units)
    assert lines[0].startswith("Bash(python diverse.py) -> ok") and lines[-1].startswith("You're right!")
    assert not [ln for ln in lines if ln.startswith("then:")]
    units += [call("c2", "python radical.py"), Unit("r2", "tool", tool_call_id="c2", content="flute")]
    assert current_work(units)[-1].startswith("then: Bash(python radical.py) -> ok")


def test_files_only_listed_are_not_said_to_be_read() -> None:
    """`ls app/api` listed a folder; the summary said `read: app/api`. What a reading tool or
    program showed is read; what a call only listed, searched or passed on is used."""
    items, _ = file_items({"src/a.py": ["read"], "app/api": ["used"], "b.py": ["edited", "read"]})
    assert items == ["b.py (edited, read)", "read: src/a.py", "used: app/api"]


def test_after_a_clear_the_context_is_what_the_agent_held(tmp_path: Path) -> None:
    """aider after `/clear`, at a sixth: the handover told the history the user had cleared and
    cut the last answer (an edit) in the middle to make room for it; dropping the oldest turns
    kept the answer whole and read better. When what came since the clear fits beside one line
    naming where the rest went, that is the context, and nothing is lost (`expand`)."""
    from ctxkit.archive.originals import restore

    words = "the repo map caches its ranked tags per file list and token budget".split()
    prose = lambda n, salt: " ".join(f"{words[k % len(words)]}{salt}" for k in range(n))  # noqa: E731
    units = [
        Unit("s", "system", content="You are a coding assistant."),
        Unit("u1", "user", content="cache the repomap on a key of the file lists and the token budget"),
        Unit("a1", "assistant", content=prose(900, "a")),
        Unit("u2", "user", content="now time how long the uncached call takes"),
        Unit("a2", "assistant", content=prose(700, "b")),
        Unit("u3", "user", content="/clear"),
        Unit("u4", "user", content="/add aider/main.py"),
        Unit("u5", "user", content="pass args.map_refresh into Coder and then to RepoMap"),
        Unit("a3", "assistant", content=prose(420, "c")),
    ]
    t = Transcript(units=units, id="t")
    since = count_transcript(Transcript(units=units[:1] + units[5:], id="t"), TOK).total
    limit = int((since + 80) / 0.9)  # what came since the clear, a line, under the goal (0.95 of it)
    with Archive(str(tmp_path / "a.db")) as archive:
        result = compact(t, CompactSettings(limit=limit, tokenizer=TOK, use_usage=False), archive=archive)
        assert result.fits
        out = result.transcript.units
        assert [u.id for u in out if u.id != "ctxkit-cleared"][-3:] == ["u4", "u5", "a3"]
        assert out[-1].content == units[-1].content  # the last answer whole
        line = next(u for u in out if u.id == "ctxkit-cleared").content
        assert line.startswith("[5 earlier messages (those before the user last cleared the conversation)")
        back = restore(archive, result.transcript)
    assert [u.content for u in back.units] == [u.content for u in units]


def test_after_a_clear_what_was_asked_before_it_and_the_commands_stay() -> None:
    """Tighter goals: what the user had asked before the clear (a few tokens, the whole story)
    and the commands since (`/add f`: which files the agent holds) stay; the last answer is cut
    in the middle for them (archived whole), to no less than half of it, and stays whole when
    the goal leaves room for both (aider 0747 at a sixth: the reader missed the `/add` lines)."""
    words = "the repo map caches its ranked tags per file list and token budget".split()
    units = [
        Unit("s", "system", content="You are a coding assistant."),
        Unit("u1", "user", content="cache the repomap on a key of the file lists and the token budget"),
        Unit("a1", "assistant", content=" ".join(f"{words[k % len(words)]}a" for k in range(900))),
        Unit("u3", "user", content="/clear"),
        Unit("u4", "user", content="/add aider/main.py"),
        Unit("u5", "user", content="pass args.map_refresh into Coder and then to RepoMap"),
        Unit("a3", "assistant", content=" ".join(f"{words[k % len(words)]}c" for k in range(420))),
    ]
    t = Transcript(units=units, id="t")
    since = count_transcript(Transcript(units=[units[0], *units[4:]], id="t"), TOK).total
    forms = set()
    for extra in range(-150, 48, 6):  # (from about 54 on, the chain fits before a fresh start)
        result = compact(t, CompactSettings(limit=int((since + extra) / 0.95), tokenizer=TOK, use_usage=False))
        out = result.transcript.units
        line = next((u.content for u in out if u.id == "ctxkit-cleared"), None)
        assert result.fits and line is not None, extra
        assert line.startswith("[3 earlier messages (those before the user last cleared the conversation)")
        assert f"\n- {units[1].content}" in line  # the request before the clear, word for word
        from ctxkit.fidelity.claims import check

        quotes = [c for c in check(t, result.transcript).claims if c.kind == "quote"]
        assert quotes and all(c.true for c in quotes)  # the checker reads them as the user's words
        assert [u.id for u in out][-3:] == ["u4", "u5", "a3"]
        answer = out[-1].content
        if answer == units[-1].content:
            forms.add("whole")
        else:
            assert "is larger than the context allows" in answer and out[-1].meta["ref"]
            assert TOK.count(answer) >= TOK.count(units[-1].content) // 2
            forms.add("cut")
    assert "cut" in forms


def test_a_trailing_session_command_does_not_put_the_summary_last() -> None:
    """aider's log ended on `/diff` after the last answer; the handover, placed after the last
    message it stood for, came after that answer and read as the current state. A session
    command is no event the summary tells: it stands before the last request and its answer."""
    from ctxkit.compaction.recovery import placed

    units = [
        Unit("u0", "user", content="add a commit_before_message variable"),
        Unit("a0", "assistant", content="Added it."),
        Unit("u1", "user", content="use get_head in cmd_diff"),
        Unit("a1", "assistant", content="Here is the edit."),
        Unit("u2", "user", content="/diff"),
    ]
    summary = Unit("ctxkit-handover", "user", type="summary", content="## Task\n- add a variable")
    out = placed(units, [], [units[0], units[2], units[3]], summary, [units[1], units[4]])
    assert [u.id for u in out] == ["u0", "ctxkit-handover", "u1", "a1"]


_ASKS = [
    "change cmd_diff to show a diff of everything since commit_before_message",
    "again, catch ValueError on .head",
    "make a Repo.get_head() method that returns the hexsha or None",
    "use that in show_undo_hint",
    "use it in init_before_message",
    "and get_tracked_files",
]


def _short_asks_session(earlier: Sequence[str] = ()) -> Transcript:
    """An aider-like session: a first request, `earlier` requests, six short ones (`_ASKS`),
    each answered at length, and a last request with a long answer."""
    words = "the head commit may be missing in a brand new repository so catch it".split()
    prose = lambda n, salt: " ".join(f"{words[k % len(words)]}{salt}" for k in range(n))  # noqa: E731
    units = [Unit("s", "system", content="You are a coding assistant."),
             Unit("u0", "user", content="add a Coder.commit_before_message variable"),
             Unit("a0", "assistant", content=prose(300, "z"))]
    for k, ask in enumerate([*earlier, *_ASKS]):
        units += [Unit(f"u{k + 1}", "user", content=ask), Unit(f"a{k + 1}", "assistant", content=prose(300, str(k)))]
    units += [Unit("ul", "user", content="use get_head in cmd_diff"), Unit("al", "assistant", content=prose(700, "l"))]
    return Transcript(units=units, id="t")


def _quoted_asks(result: Any) -> list[str]:
    """The short requests the handover quotes word for word: the newest, oldest first."""
    handover = next(u.content for u in result.transcript.units if u.id == "ctxkit-handover")
    quoted = [ask for ask in _ASKS if f"\n- {ask}" in handover]
    assert quoted == _ASKS[-len(quoted):], handover
    return quoted


def test_a_small_room_quotes_the_users_words_before_the_last_answer_whole() -> None:
    """aider 0342 at a sixth: the minimal form kept 600 tokens of the last answer (an edit the
    file already holds) and quoted none of the user's ten short requests, the whole story of
    the session. The quotes get their quarter of the room first, the sections shrink to their
    floor before a quote goes, and the answer is cut (archived whole) to what is left."""
    result = compact(_short_asks_session(), CompactSettings(limit=850, tokenizer=TOK, use_usage=False))
    assert result.fits
    assert len(_quoted_asks(result)) >= 4
    assert "is larger than the context allows" in result.transcript.units[-1].content  # cut, archived whole


@pytest.mark.parametrize(("limit", "least"), [(300, 5), (340, 6)])
def test_a_tiny_room_quotes_the_short_requests_before_the_head_of_a_long_one(limit: int, least: int) -> None:
    """aider 0342 at a tenth (494 tokens): the last answer was cut to half of what the quotes
    left, which left the handover's least sections no room beside the quotes, and the head of
    an earlier pasted traceback stayed while every short request went (probes 0.41 against the
    Codex recipe's 0.61). The answer is now cut to what the quotes, the first request and the
    least handover leave, and the head of the long request goes before a short one does."""
    trace = "handle a brand new repo case: " + " ".join(
        f'File "aider/coders/base_coder.py", line {600 + k}, in init_before_message' for k in range(8)
    ) + " ValueError: Reference at 'refs/heads/main' does not exist"
    settings = CompactSettings(limit=limit, tokenizer=TOK, use_usage=False)
    result = compact(_short_asks_session([trace]), settings)
    assert result.fits and result.recovery == "fresh_start"
    assert len(_quoted_asks(result)) >= least


def test_the_commands_after_the_last_words_and_no_second_task() -> None:
    """aider 0342, read blind: "Where the work stood" showed an edit the user had then taken back
    with `/undo`, and "## Task" named the second request although the first, the task, stood
    word for word above the summary. The commands typed after the last words are `then:` lines,
    word for word; a handover whose task leads verbatim titles its request as an earlier one."""
    from ctxkit.summarizers.extractive import EARLIER_REQUEST, current_work, handover

    units = [
        Unit("u1", "user", content="handle a brand new repo case where head has no commit"),
        Unit("a1", "assistant", content="I'll modify get_tracked_files to use get_head()."),
        Unit("u2", "user", content="/undo"),
        Unit("u3", "user", content="/drop aider/coders/base_coder.py"),
        Unit("u4", "user", content="/undo"),
    ]
    work = current_work(units)
    assert work[0].startswith("I'll modify get_tracked_files")
    assert work[1:] == ["then: /undo", "then: /drop aider/coders/base_coder.py", "then: /undo"]
    text = handover(units, target_tokens=300, include_last_request=False, task=False)
    assert f"## {EARLIER_REQUEST}\n- \"handle a brand new repo case" in text and "## Task" not in text
    assert "## Task\n" in handover(units, target_tokens=300, include_last_request=False)


def test_a_huge_paste_does_not_keep_the_older_requests_out() -> None:
    """context-evaluator in the loop: the user pasted 33,558 tokens of console warnings; counted
    newest first, the quotes stopped at it and the shorter requests before it ("Make these two
    button 'List / Tree' more visible...") were quoted nowhere. A message larger than what is
    left is passed over (it is archived) and the count goes on."""
    from ctxkit.summarizers.extractive import newest_within

    sizes = [1346, 30, 853, 33_558, 17, 1]
    assert newest_within(sizes, 13_000) == [0, 1, 2, 4, 5]
    assert newest_within(sizes, 100) == [1, 4, 5]


def test_the_first_request_that_fits_a_quarter_is_never_traded_for_a_handover() -> None:
    """A Qwen Code log at a goal of 150 tokens: the fresh start tried the forms with the first
    request, none fit, and then a form without it did (handover, the mid-turn message, the last
    answer): the task went to the archive although it takes 17 of the room's 150. When it fits a
    quarter of the room, the minimal form, which keeps it, comes before any form without it."""
    from ctxkit.formats import read_path

    (t,) = read_path(str(Path(__file__).parent / "data" / "agent_logs" / "qwen-code-0.24.4-branches.jsonl"))
    first = next(u for u in t.units if u.role == "user")
    result = compact(t, CompactSettings(limit=400, target=150, tokenizer=TOK, use_usage=False))
    assert result.fits
    assert [u.content for u in result.transcript.units if u.id == first.id] == [first.content]
