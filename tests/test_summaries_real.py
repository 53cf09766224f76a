"""Summaries that do not mislead, on real transcripts (issue "Keep what the next turn needs").

Each test is one way a summary misled a model reading it, found by reading compacted real
transcripts, checked on a transcript of ../shared/realdata that has the same shape.
"""

from __future__ import annotations

from pathlib import Path

from ctxkit.archive.store import Archive
from ctxkit.compaction import ChainOptions, CompactSettings, compact
from ctxkit.facts import calls, outcome
from ctxkit.formats import ReadOptions, read_path
from ctxkit.model import Transcript, Unit
from ctxkit.structure import is_request
from ctxkit.summarizers.extractive import summarize_extractive
from ctxkit.tokens import CountOptions, count_transcript, get_tokenizer

TOK = get_tokenizer("cl100k_base")


def _read(realdata: Path, rel: str, **opts: bool) -> Transcript:
    (t,) = list(read_path(str(realdata / rel), ReadOptions(**opts)))
    return t


def _compact(t: Transcript, share: int, tmp_path: Path) -> tuple[Transcript, Archive]:
    limit = count_transcript(t, TOK).total // share
    archive = Archive(str(tmp_path / "a.db"))
    # a share of what the log holds: the summaries are the subject, not the unlogged region
    result = compact(t, CompactSettings(limit=limit, tokenizer=TOK, use_usage=False), archive=archive)
    assert result.fits and result.invariants["ok"]
    return result.transcript, archive


# summarize_old's cap before it became the whole history: one pass leaves 40% of it verbatim
# for the later strategies, and the next pass summarizes what they shortened
SIXTY_PERCENT = ChainOptions(params={"summarize_old": {"old_threshold": 0.6}})


def _made_up(t: Transcript) -> list[Unit]:
    return [u for u in t.units if u.type == "summary"]


def _section(text: str, title: str) -> str:
    """The lines of one `## title` section of a summary ("" when there is none)."""
    if f"## {title}" not in text:
        return ""
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_a_sub_agent_report_that_says_error_is_no_failure(realdata: Path) -> None:
    """Claude Code's Task result 'Based on my comprehensive analysis... Error Information
    Disclosure' is a sub-agent's report: no error flag, no exit code, no traceback."""
    t = _read(realdata, "claude-code/conneroisu__templar__logs-chat-json@7c1b6b43__session-5fa42961.jsonl")
    report = next(u for u in t.units if "Error Information Disclosure" in u.content)
    assert not outcome(report).failed
    text = summarize_extractive(t.units, 2000, tok=TOK)
    assert "Error Information Disclosure" not in _section(text, "Errors and fixes")
    assert "Task(" not in _section(text, "Errors and fixes")


SWE = "swe-agent/princeton-nlp__SWE-agent__gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__pydicom__pydicom-1458.traj"


def test_a_demonstration_is_not_the_task_and_its_edits_stay(realdata: Path, tmp_path: Path) -> None:
    """SWE-agent's few-shot demonstration was quoted as the task, its files listed as touched,
    and the run's own `edit 287:296 ... end_of_edit` actions cut to `[...]`."""
    t = _read(realdata, SWE)
    demo = next(u for u in t.units if u.meta.get("demo"))
    issue = next(u for u in t.units if is_request(u))
    assert "solving the following issue" in issue.content
    out, _ = _compact(t, 6, tmp_path)
    text = "\n".join(u.content for u in _made_up(out))
    assert demo.content[:200] not in text
    assert "Here is a demonstration" not in text
    # the issue is the task: kept as it was, or quoted in the handover
    assert any(u.id == issue.id for u in out.units) or issue.content.split("\n")[0][:60] in text
    # the edits are credited to the file SWE-agent had open, and an action is never cut
    actions = calls(t.units)
    edited = {p for c in actions for p, a in c.paths if a == "edited"}
    assert "/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py" in edited
    for u in out.units:
        if u.role == "assistant" and "edit 2" in u.content and u.type != "summary":
            assert "end_of_edit" in u.content and "[...]" not in u.content
    # a summary names a failed edit by its command line, not by a body cut in the middle
    for u in _made_up(out):
        for line in u.content.splitlines():
            if "$ edit 2" in line:
                assert "$ edit 287:295 ... " in line and "end_of_edit" not in line


def test_a_sed_in_place_edit_is_an_edit(realdata: Path) -> None:
    """mini-swe-agent fixed django's sqlmigrate.py with `sed -i`: that is an edit, not a use."""
    t = _read(realdata, "mini-swe-agent/SWE-agent__mini-swe-agent__PR-814__django__django-11039.traj.json")
    text = summarize_extractive(t.units, 1500, tok=TOK)
    files = _section(text, "Files and code")
    assert "django/core/management/commands/sqlmigrate.py (edited" in files


def test_repeated_compaction_merges_its_summaries_with_true_counts(realdata: Path, tmp_path: Path) -> None:
    """A summary of a summary stacked sections ("## Key technical concepts" twice) and counted
    only the last pass's messages."""
    t = _read(realdata, "claude-code/pattern-stack__task-patterns__logs-chat-json@df54b22d__session-263940d8.jsonl")
    out, _ = _compact(t, 10, tmp_path)
    (summary,) = _made_up(out)
    for title in ("Files and code", "Where the work stood", "Errors and fixes"):
        assert summary.content.count(f"## {title}\n") <= 1, title
    for retired in ("Key technical concepts", "Commands run", "tools used"):
        assert retired not in summary.content
    assert "## Earlier summary" not in summary.content
    kept = {u.id for u in out.units}
    gone = [u for u in t.units if u.id not in kept]
    n, tokens = summary.meta["summarized"]
    # every message the summary stands for is gone from the context (some went to placeholders
    # of other strategies: they are counted there, not here)
    assert n <= len(gone) and n >= len(gone) // 2
    assert f"{n:,} earlier messages ({tokens:,} tokens)" in summary.content



def test_a_summary_of_a_summary_names_each_file_once(tmp_path: Path) -> None:
    """django-11039 at 4,000 tokens, at most 60% of the history summarized per pass, is
    summarized twice: the second pass listed
    'test_sqlmigrate_issue.py (written, ran)' from the first and 'test_sqlmigrate_issue.py
    (edited)' from its own span, and the read-only files on three lines."""
    from ctxkit.summarizers.sections import merged_file_items, parse_sections

    sample = Path(__file__).resolve().parents[1] / "sample_transcripts" / "mini-swe-agent-django-11039.traj.json"
    (t,) = list(read_path(str(sample)))
    settings = CompactSettings(limit=4000, tokenizer=TOK, options=SIXTY_PERCENT)
    result = compact(t, settings, archive=Archive(str(tmp_path / "a.db")))
    (summary,) = _made_up(result.transcript)
    assert sum(s.strategy == "summarize_old" and s.saved > 0 for s in result.steps) >= 2
    files = parse_sections(summary.content)["Files and code"]
    paths = [f.rsplit(" (", 1)[0] for f in files if not f.startswith("read: ")]
    paths += [p for f in files if f.startswith("read: ") for p in f[6:].split(", ")]
    assert len(paths) == len(set(paths))
    # the merge itself: one line per path, every action, changed files before read ones
    assert merged_file_items(["a.py (written, ran)", "read: b.py, c.py"], ["a.py (edited)", "b.py (edited)"]) == [
        "a.py (written, edited, ran)", "b.py (edited, read)", "read: c.py"]
    assert merged_file_items(["Refactored the parser"], ["a.py (edited)"]) is None


def test_a_short_budget_keeps_the_last_action_and_quotes_no_wrong_last_request(
    realdata: Path, tmp_path: Path
) -> None:
    """tau-bench at 1/6: a summary's "Last request (verbatim)" mixed two user messages with the
    agent's words, and the context ended on an update call with no result, the later updates
    (which had succeeded) dropped."""
    t = _read(realdata, "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx033_task33_trial0_reward0.json")
    out, _ = _compact(t, 3, tmp_path)
    for u in _made_up(out):
        assert "## Last request (verbatim)" not in u.content
    last_call = [u for u in t.units if u.tool_calls][-1]
    ids = {c.id for c in last_call.tool_calls}
    assert any(u.id == last_call.id for u in out.units)
    assert {u.tool_call_id for u in out.units if u.tool_call_id in ids} == ids  # with its results
    # every call kept has its result: the context never ends on a call with none
    answered = {u.tool_call_id for u in out.units if u.tool_call_id}
    assert all(c.id in answered for u in out.units for c in u.tool_calls)


FSM1 = "claude-code/FSM1__cipher-box__checkpoints-v1__af-1dd25ebb3e-8@9db16e5e.jsonl"


def test_harness_notes_are_not_quoted_as_the_users_words(realdata: Path, tmp_path: Path) -> None:
    """Claude Code's `<local-command-caveat>... DO NOT respond to these messages...` joined a
    summary as a user message, telling the model to ignore it."""
    t = _read(realdata, FSM1, include_compacted=True)
    assert "<local-command-caveat>" in t.units[0].content
    out, _ = _compact(t, 6, tmp_path)
    for u in _made_up(out):
        assert "DO NOT respond to these messages" not in u.content
        assert "<local-command-stdout>" not in _section(u.content, "User messages")


def test_failing_runs_keep_their_reason_and_created_files_stay_named(
    realdata: Path, tmp_path: Path
) -> None:
    """Failing test runs showed only `[bash output, 906 bytes, archived as ref-...]`; the Write
    calls that created modules were gone and the summary named none of them."""
    t = _read(realdata, FSM1)
    failed = {u.id: outcome(u) for u in t.units if u.tool_call_id and outcome(u).failed}
    assert failed
    out, _ = _compact(t, 6, tmp_path)
    for u in out.units:
        if u.id in failed and u.type == "placeholder":
            assert f"exit {failed[u.id].exit_code}" in u.content or "error" in u.content
    p = _read(realdata, "claude-code/pattern-stack__task-patterns__logs-chat-json@df54b22d__session-263940d8.jsonl")
    created = {path for c in calls(p.units) for path, a in c.paths if a == "created"}
    assert len(created) >= 5
    (tmp_path / "p").mkdir()
    out, _ = _compact(p, 6, tmp_path / "p")
    text = "\n".join(
        [u.content for u in out.units] + [c.arguments for u in out.units for c in u.tool_calls]
    )
    assert sum(1 for path in created if path in text) >= len(created) * 0.8




def test_a_shortened_output_keeps_the_line_a_later_edit_changed(realdata: Path) -> None:
    """A compressed `sed -n '219,248p'` output lost exactly the line the agent then fixed: an
    output that shows what a later edit changed is never cut in the middle."""
    import re

    t = _read(realdata, "mini-swe-agent/SWE-agent__mini-swe-agent__PR-814__django__django-11039.traj.json")
    seds = [
        (k, m.group(2).replace("\\", ""))
        for k, u in enumerate(t.units)
        for c in u.tool_calls
        for m in re.finditer(r"sed\s+-i[^'\"]*['\"]\d*s(.)(.+?)\1", c.arguments.replace("\\\"", "\""))
    ]
    anchors = [a for _, a in seds if len(a) >= 12]
    assert anchors
    # the outputs read before the edit that show the line it changed
    shows = {
        u.id
        for i, u in enumerate(t.units)
        if u.tool_call_id and any(a in u.content and i < k for k, a in seds)
    }
    assert shows
    # chunking asked for far more than it can give: every output it may cut, it cuts
    from ctxkit.strategies import STRATEGIES, Context, State

    ctx = Context(tokenizer=TOK, count_opts=CountOptions(), archive=None, transcript_id=t.id, query="")
    state = State(units=tuple(t.units), target=100, ctx=ctx)
    after = STRATEGIES["content_type_chunking"](state, {})
    assert after is not None
    cut = {u.id for u in after.units if u.meta.get("strategy") == "content_type_chunking"}
    assert cut and not cut & shows


def test_a_summary_of_outputs_an_earlier_step_shortened_keeps_their_error_lines(tmp_path: Path) -> None:
    """mini-swe-agent django-11039 at 4,000 tokens, at most 60% of the history summarized per
    pass: content_type_chunking shortens the late test outputs, then summarize_old's second pass
    summarizes them. The summary is made from the
    outputs as the log has them, so the error line chunking cut ('ModuleNotFoundError: No module
    named 'django.db.connections'') is in it, not '[... 1 lines omitted]'."""
    from ctxkit.fidelity import probes as P

    sample = Path(__file__).resolve().parents[1] / "sample_transcripts" / "mini-swe-agent-django-11039.traj.json"
    (t,) = list(read_path(str(sample)))
    archive = Archive(str(tmp_path / "a.db"))
    result = compact(t, CompactSettings(limit=4000, tokenizer=TOK, options=SIXTY_PERCENT), archive=archive)
    assert result.fits and "summarize_old" in result.strategies_applied
    errors = [p for p in P.extract(t) if p.category == "error"]
    assert any("django.db.connections" in p.key for p in errors)
    context = P.Context.of(result.transcript)
    assert [p.key for p in errors if not P.kept(p, context)] == []
    summary = "\n".join(u.content for u in _made_up(result.transcript))
    assert "omitted]" not in _section(summary, "Errors and fixes")


def test_a_fresh_start_keeps_the_last_reply_cut_rather_than_none_of_it(realdata: Path, tmp_path: Path) -> None:
    """An aider chat has no tool calls: its last action is the last reply. When the recent run
    cannot fit, the fresh start kept only the request and a handover (nothing of where the work
    stood); it now keeps the last reply cut in the middle, archived whole under its ref."""
    t = _read(realdata, "aider/Aider-AI__aider__chat-history__session0013_2024-08-06T085514.md")
    last = next(u for u in reversed(t.units) if u.role == "assistant" and u.content)
    out, archive = _compact(t, 15, tmp_path)
    kept = next(u for u in out.units if u.id == last.id)
    assert kept.content != last.content and "this message is larger than the context allows" in kept.content
    assert kept.content.startswith(last.content[:40])
    ref = kept.meta["ref"]
    assert ref in kept.content and archive.get(ref).content == last.content


def test_the_minimal_fresh_start_leaves_its_check_out_rather_than_not_fit(
    realdata: Path, tmp_path: Path
) -> None:
    """A tau-bench chat at a sixth of its tokens leaves about 200 tokens beside its system
    prompt: a names line (a check section takes at least 40 tokens) kept even the smallest
    handover from fitting, and the run fell to a bare truncation that lost the user's first
    request. The minimal form then leaves the names out."""
    t = _read(realdata, "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx033_task33_trial0_reward0.json")
    out, _ = _compact(t, 6, tmp_path)
    first = next(u for u in t.units if u.role == "user")
    assert [u.content for u in out.units if u.id == first.id] == [first.content]
    assert any(u.id == "ctxkit-handover" for u in out.units)


def test_a_message_sent_again_is_quoted_once(realdata: Path, tmp_path: Path) -> None:
    """An aider user re-sends the same request after each `/clear` and types `/undo` five
    times: the summary's verbatim section quoted each copy, and at a tenth of the chat's tokens
    the copies crowded out 8 of its 22 messages. A message sent again is quoted once, where it
    was last sent, with how often; all but one of them are then in the context. (`/undo` and
    `/add` are commands to aider, not requests: they are not quoted as the user's messages.)"""
    from ctxkit.strategies.summarize_old import verbatim_section

    assert verbatim_section(["/undo", "fix it", "/undo"]).splitlines()[1:] == [
        "- fix it",
        "- /undo (2 times)",
    ]
    from ctxkit.fidelity import probes as P

    t = _read(realdata, "aider/Aider-AI__aider__chat-history__session0013_2024-08-06T085514.md")
    out, _ = _compact(t, 10, tmp_path)
    summary = next(u for u in out.units if u.type == "summary").content
    quoted = summary[summary.index("## User messages"):].splitlines()[1:]
    assert len(quoted) == len(set(quoted))
    assert not [q for q in quoted if q.startswith(("- /undo", "- /add", "- /drop"))]  # commands to aider, no requests
    lost = [p for p in P.score(P.extract(t), out).lost if p.category == "intent"]
    assert len(lost) <= 1  # 8 of 22 before; the one left is an older `/add` of two files


def test_a_tiny_room_goes_to_the_work_not_to_the_opening_line(realdata: Path, tmp_path: Path) -> None:
    """A tau-bench chat at a sixth of its tokens leaves about 100 tokens for the handover. Its
    opening line (three refs, 65 tokens) took two thirds of them. In a room the usual line
    would take a third of, the line is the short one (one ref, the counts a later compaction
    reads back), and the room goes to the work: the last actions and what came back."""
    from ctxkit.strategies.summarize_old import covered, preamble

    t = _read(realdata, "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx033_task33_trial0_reward0.json")
    out, archive = _compact(t, 6, tmp_path)
    handover = next(u for u in out.units if u.id == "ctxkit-handover")
    assert handover.content.startswith("[Compacted: 59 earlier messages (7,588 tokens)")
    assert TOK.count(handover.content.splitlines()[0]) < 40
    assert "then: search_direct_flight(origin=ORD, destination=PHL, date=2024-05-10) -> ok" in handover.content
    short = preamble(59, 7588, ["ref-1", "ref-2"], short=True)
    assert covered(Unit("s", "assistant", type="summary", content=short), 30) == (59, 7588)
    assert "ref-1 and 1 more" in short


def test_a_request_is_never_placed_after_a_summary_of_its_answer(realdata: Path, tmp_path: Path) -> None:
    """The same chat: "Yes, please go ahead and upgrade all the remaining reservations" stood
    after a handover of the cancellations and searches that answered it, so the context read as
    if the request were still open. The handover stands where what it stands for ended: after
    the request, joined to the user's turn (the context does not end on an assistant turn)."""
    t = _read(realdata, "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx033_task33_trial0_reward0.json")
    out, _ = _compact(t, 6, tmp_path)
    ids = [u.id for u in out.units]
    request = next(u for u in t.units if u.content.startswith("Yes, please go ahead and upgrade all the remaining"))
    assert ids.index(request.id) < ids.index("ctxkit-handover")
    order = {u.id: k for k, u in enumerate(t.units)}
    handover = next(u for u in out.units if u.id == "ctxkit-handover")
    # every message after the handover came after the last one it stands for
    gone = [order[u.id] for u in t.units if u.id not in set(ids)]
    assert all(order[x] > max(gone) for x in ids[ids.index("ctxkit-handover") + 1 :])
    assert handover.role == "user" and handover.meta.get("join")


def test_a_small_handover_names_the_file_fixed_before_the_scratch_script(
    realdata: Path, tmp_path: Path
) -> None:
    """A SWE-agent run at a sixth of its tokens: the handover's files section had room for one
    line, and took reproduce.py (created, edited, deleted, ran), a scratch script gone by the
    end, over src/marshmallow/fields.py (edited), the fix itself. Files still there come first.
    With nothing recent after it, the handover also says the last action and what came back."""
    t = _read(realdata, "swe-agent/princeton-nlp__SWE-agent__replay__marshmallow-code__marshmallow-1867__"
                        "default__t-0.20___marshmallow-code__marshmallow-1867.traj")
    out, _ = _compact(t, 6, tmp_path)
    handover = next(u for u in out.units if u.id == "ctxkit-handover").content
    assert "/src/marshmallow/fields.py (edited)" in _section(handover, "Files and code")
    assert "- $ rm reproduce.py -> ok" in _section(handover, "Where the work stood")  # before its last words
