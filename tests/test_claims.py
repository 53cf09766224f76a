"""The claim checker (`ctxkit.fidelity.claims` over `ctxkit.fidelity.evidence`): claims of a
compaction's text verified against the original log.

The summaries here are written by hand, line by line, against real logs (the mini-swe-agent
django run in sample_transcripts, and ../shared/realdata), and each verdict was checked by
reading the log: so the tests judge the checker, not whatever ctxkit's summarizer writes today.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxkit.call_effects import shell_effects
from ctxkit.cli import cli
from ctxkit.fidelity import claims as C
from ctxkit.fidelity import evidence as E
from ctxkit.formats import read_path
from ctxkit.model import ToolCall, Transcript, Unit

ROOT = Path(__file__).resolve().parents[1]
DJANGO = ROOT / "sample_transcripts" / "mini-swe-agent-django-11039.traj.json"
BOX_OS = "claude-code/daniifrim__10-box-os__logs-chat-json@39f97266__session-fafb1fb2.jsonl"
PONYC = "openhands/All-Hands-AI__OpenHands__multi_swe_bench-example-output__line0_ponylang__ponyc-4595.json"
TAU = "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx003_task3_trial0_reward0.json"
CODEX = "codex/AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"


def _read(path: Path | str) -> Transcript:
    return list(read_path(str(path)))[0]


def _compacted(t: Transcript, text: str, upto: int, keep_before: int = 0, keep_after: tuple[int, ...] = ()) -> Transcript:
    """The original with units [keep_before, upto] replaced by one summary saying `text`; units
    in `keep_after` (original indices) placed right after the summary, before the rest."""
    covered = [u.id for u in t.units[keep_before: upto + 1]]
    summary = Unit("ctxkit-summary-t", "user", type="summary", content=text, meta={"summarized_ids": covered})
    extra = [t.units[i] for i in keep_after]
    rest = [u for i, u in enumerate(t.units[upto + 1:], upto + 1) if i not in keep_after]
    return t.replace(units=[*t.units[:keep_before], summary, *extra, *rest])


def _verdicts(t: Transcript, text: str, upto: int, **kw: object) -> dict[str, tuple[str, bool, str]]:
    score = C.check(t, _compacted(t, text, upto, **kw))  # type: ignore[arg-type]
    return {c.text: (c.kind, c.true, c.why) for c in score.claims}


def _realdata(realdata: Path, name: str) -> Transcript:
    path = realdata / name
    if not path.exists():
        pytest.skip(f"{name} not in {realdata}")
    return _read(path)


# --- the rule that keeps the judge apart -----------------------------------------------------------

JUDGE = ("ctxkit/fidelity/claims.py", "ctxkit/fidelity/evidence.py")
FORBIDDEN = ("ctxkit.facts", "ctxkit.summarizers", "ctxkit.strategies")


def _ctxkit_imports(path: Path) -> set[str]:
    """Every ctxkit module `path` imports, at the top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("ctxkit"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ctxkit"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _module_file(name: str) -> Path | None:
    base = ROOT / Path(*name.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.exists():
            return p
    return None


def test_the_checker_imports_nothing_of_what_it_judges() -> None:
    """No import of facts, summarizers or strategies, directly or through another ctxkit module
    (package `__init__`s aside: ctxkit's are lazy), so a bug in the summarizer's fact reading
    cannot make a false claim look backed."""
    seen: set[str] = set()
    todo = [str(Path(p).with_suffix("")).replace("/", ".") for p in JUDGE]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _module_file(name)
        if path is None or path.name == "__init__.py" and name not in todo:
            continue
        for imp in _ctxkit_imports(path):
            assert not imp.startswith(FORBIDDEN), f"{path.relative_to(ROOT)} imports {imp}"
            if _module_file(imp) is not None and not str(_module_file(imp)).endswith("__init__.py"):
                todo.append(imp)
    assert "ctxkit.model" in seen  # it did follow the imports


def test_the_import_rule_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from ctxkit.facts import calls\n    return calls\n")
    assert any(i.startswith(FORBIDDEN) for i in _ctxkit_imports(bad))


# --- files and what was done to them (mini-swe-agent, django 11039) --------------------------------


def test_file_claims_on_the_django_run() -> None:
    """u38 runs `cp sqlmigrate.py sqlmigrate.py.backup && sed -i ... sqlmigrate.py`; u54 cats
    sqlflush.py; u28 writes test_sqlmigrate_issue.py with a heredoc and runs it."""
    t = _read(DJANGO)
    text = "\n".join([
        "## Files and code",
        "- ./django/core/management/commands/sqlmigrate.py (edited, read)",
        "- ./django/core/management/commands/sqlmigrate.py.backup (edited)",
        "- ./django/core/management/commands/sqlmigrate.py.backup (created)",
        "- test_sqlmigrate_issue.py (created, ran)",
        "- ./django/core/management/commands/sqlflush.py (edited)",
        "- read: ./django/db/migrations/executor.py, ./django/db/backends/base/schema.py",
        "- Mozilla/5.0 (edited)",
        "- django/utils/never_touched.py (read)",
    ])
    v = _verdicts(t, text, upto=69, keep_before=2)
    assert v["./django/core/management/commands/sqlmigrate.py (edited, read)"][1]
    backup = v["./django/core/management/commands/sqlmigrate.py.backup (edited)"]
    assert not backup[1] and "never edited" in backup[2]  # a cp target is a new file
    assert v["./django/core/management/commands/sqlmigrate.py.backup (created)"][1]
    assert v["test_sqlmigrate_issue.py (created, ran)"][1]
    sqlflush = v["./django/core/management/commands/sqlflush.py (edited)"]
    assert not sqlflush[1] and "only named" in sqlflush[2]  # only read with cat
    assert v["./django/db/migrations/executor.py (read)"][1]
    assert v["Mozilla/5.0 (edited)"][:2] == ("file", False) and "not a path" in v["Mozilla/5.0 (edited)"][2]
    assert not v["django/utils/never_touched.py (read)"][1]


def test_error_and_command_claims_on_the_django_run() -> None:
    """u30 `pip install pytz -q && python test_sqlmigrate_issue.py` exits 1 with
    "No module named 'sqlparse'"; u54 `cat sqlflush.py` exits 0."""
    t = _read(DJANGO)
    text = "\n".join([
        "## Errors and fixes",
        "- bash(pip install pytz -q && python test_sqlmigrate_issue.py) -> exit 1: ModuleNotFoundError: No module named 'sqlparse'",
        "- bash(pip install pytz -q && python test_sqlmigrate_issue.py) -> exit 2: ModuleNotFoundError: No module named 'sqlparse'",
        "- bash(pip install pytz -q && python test_sqlmigrate_issue.py) -> exit 1: KeyError: 'user_id'",
        "- bash(cat ./django/core/management/commands/sqlflush.py) -> exit 1: boom",
        "- bash(cat ./django/core/management/commands/sqlf...) -> ok",
        "- bash(rm -rf /) -> ok",
        "- error: ModuleNotFoundError: No module named 'pytz'",
    ])
    v = _verdicts(t, text, upto=69, keep_before=2)
    assert v["bash(pip install pytz -q && python test_sqlmigrate_issue.py) -> exit 1: ModuleNotFoundError: No module named 'sqlparse'"][:2] == ("error", True)
    assert not v["bash(pip install pytz -q && python test_sqlmigrate_issue.py) -> exit 2: ModuleNotFoundError: No module named 'sqlparse'"][1]
    wrong_line = v["bash(pip install pytz -q && python test_sqlmigrate_issue.py) -> exit 1: KeyError: 'user_id'"]
    assert not wrong_line[1] and "line is not in" in wrong_line[2]
    assert "does not flag" in v["bash(cat ./django/core/management/commands/sqlflush.py) -> exit 1: boom"][2]
    assert v["bash(cat ./django/core/management/commands/sqlf...) -> ok"][:2] == ("command", True)  # a cut command
    assert not v["bash(rm -rf /) -> ok"][1]
    assert v["error: ModuleNotFoundError: No module named 'pytz'"][1]


def test_order_on_the_django_run() -> None:
    """A summary of u2..u69 with u70 onwards after it stands in place; the same summary with
    u30 (which it covers) put after it does not."""
    t = _read(DJANGO)
    text = "[The messages after this summary are verbatim.]\n## Files and code\n- test_fix.py (created)"
    good = C.check(t, _compacted(t, text, upto=69, keep_before=2))
    assert [c.true for c in good.claims if c.kind == "order"] == [True]
    bad = C.check(t, _compacted(t, text, upto=69, keep_before=2, keep_after=(30,)))
    order = [c for c in bad.claims if c.kind == "order"]
    assert len(order) == 1 and not order[0].true and "message #30 came before message #69" in order[0].why


def test_a_file_read_back_matches_kept_messages_by_text(tmp_path: Path) -> None:
    """Written out and read back, units are numbered anew; the checker finds what was kept by
    its text, and the claims of the summary written into the first request's message."""
    t = _read(DJANGO)
    small = _compacted(t, "## Files and code\n- ./django/core/management/commands/sqlmigrate.py.backup (edited)",
                       upto=69, keep_before=2)
    small.units[2].meta["join"] = True
    out = tmp_path / "small.json"
    from ctxkit.formats import write_path

    write_path([small], str(out), "openai")
    back = _read(out)
    score = C.check(t, back)
    assert [c.text for c in score.false_claims] == ["./django/core/management/commands/sqlmigrate.py.backup (edited)"]


# --- tasks, requests, order (Claude Code: daniifrim/10-box-os) --------------------------------------


def test_task_and_request_claims_on_a_claude_code_log(realdata: Path) -> None:
    """TodoWrite at #51 (Analyze ... in_progress), #68 (Analyze completed, Create ... in_progress),
    #72 (Create ... completed); the user's requests end with #50 before #70; #1 is `/clear`."""
    t = _realdata(realdata, BOX_OS)
    text = "\n".join([
        "## Pending tasks",
        "- [in_progress] Create new theme-warm-orange theme class in globals.css",
        "- [pending] Analyze current color/styling architecture in codebase",
        "- [pending] Make the coffee",
        "## Current request",
        "Ok, go ahead, keep the ultrathink activated",
    ])
    v = _verdicts(t, text, upto=69, keep_before=3)
    assert v["[in_progress] Create new theme-warm-orange theme class in globals.css"][:2] == ("task", True)
    done = v["[pending] Analyze current color/styling architecture in codebase"]
    assert not done[1] and "completed (message #68)" in done[2]
    assert not v["[pending] Make the coffee"][1]
    assert v["Ok, go ahead, keep the ultrathink activated"][:2] == ("current", True)
    # the same summary where no list that shows the item completed (#72, #76) follows it
    hidden = {t.units[72].id, t.units[76].id}
    no_update = _compacted(t, text, upto=69, keep_before=3)
    no_update = no_update.replace(units=[u for u in no_update.units if u.id not in hidden])
    late = {c.text: c for c in C.check(t, no_update).claims}
    assert "later marks it completed" in late["[in_progress] Create new theme-warm-orange theme class in globals.css"].why
    # a command record or an earlier request is not the current one
    v = _verdicts(t, "## Current request\n<command-name>/clear</command-name>", upto=69, keep_before=3)
    assert "not a request the user typed" in v["<command-name>/clear</command-name>"][2]
    v = _verdicts(t, "## Current request\nLet's modify the link button to be classic blue link color", upto=69, keep_before=3)
    assert "an earlier request" in v["Let's modify the link button to be classic blue link color"][2]


def test_an_old_request_kept_after_a_summary_of_its_answer(realdata: Path) -> None:
    t = _realdata(realdata, BOX_OS)
    text = "[The messages after this summary are verbatim.]"
    score = C.check(t, _compacted(t, text, upto=69, keep_before=3, keep_after=(50,)))
    (order,) = [c for c in score.claims if c.kind == "order"]
    assert not order.true and "#50" in order.text


# --- other formats ---------------------------------------------------------------------------------


def test_a_failed_edit_is_no_edit(realdata: Path) -> None:
    """OpenHands ponyc: the str_replace on parser.c at #25 failed ("No replacement was
    performed"), the one at #29 worked; the make at #35 exits 2."""
    t = _realdata(realdata, PONYC)
    parser = "- /workspace/ponylang__ponyc__0.1/src/libponyc/ast/parser.c (edited)"
    make = ("- execute_bash(cd /workspace/ponylang__ponyc__0.1 && make) -> exit 2: /bin/sh: 1: cd: can't cd to "
            "/workspace/ponylang__ponyc__0.1/build/build_release")
    upto_28 = t.replace(units=t.units[:28])  # the log as it stood before the second edit
    v = _verdicts(upto_28, parser, upto=26, keep_before=3)
    assert not v[parser[2:]][1]
    v = _verdicts(t, f"{parser}\n{make}", upto=36, keep_before=3)
    assert v[parser[2:]][1] and v[make[2:]][1]


def test_an_api_tool_error_and_key_value_arguments(realdata: Path) -> None:
    """tau-bench: a tool answers "Error: ..." (no exit codes in these logs); a summary names a
    call by its arguments as `key=value`."""
    t = _realdata(realdata, TAU)
    log = E.read_log(t.units)
    failed = [a for a in log.acts if a.failed]
    assert failed and all(a.result is not None and a.result.text.startswith("Error") for a in failed)
    a = failed[0]
    args = ", ".join(f"{k}={v}" for k, v in json.loads(a.args).items())
    line = a.result.text.splitlines()[0] if a.result else ""
    text = f"- {a.name}({args[:60]}...) -> error: {line}\n- {a.name}(no_such_arg=1) -> ok"
    v = _verdicts(t, text, upto=len(t.units) - 2, keep_before=2)
    assert [(k, ok) for k, ok, _ in v.values() if k != "order"] == [("error", True), ("command", False)]


def test_codex_exit_codes(realdata: Path) -> None:
    """Codex rollout: `ls lib/ai` exits 2 (the JSON output's metadata.exit_code)."""
    t = _realdata(realdata, CODEX)
    text = "- shell(ls lib/ai) -> exit 2: ls: cannot access 'lib/ai': No such file or directory\n- shell(ls lib/ai) -> ok"
    v = _verdicts(t, text, upto=40, keep_before=2)
    assert [(k, ok) for k, ok, _ in v.values() if k != "order"] == [("error", True), ("command", False)]


# --- the reading of calls --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "writes"),
    [
        ("sed -i 's/a/b/' src/x.py", {("src/x.py", "edited")}),
        ("echo hi > out.txt 2>&1", {("out.txt", "created")}),
        ("cat a.py | tee -a log.txt", {("log.txt", "created")}),
        ("cp a.py a.py.bak", {("a.py.bak", "created")}),
        ("mv a.py b/", {("b/a.py", "created"), ("a.py", "moved")}),
        ("git checkout -- src/x.py", {("src/x.py", "edited")}),
        ("rm -rf build/out.js", {("build/out.js", "deleted")}),
        ("grep -n foo src/x.py > /dev/null", set()),
        ("python - <<'EOF'\nopen('x.txt', 'w')\nEOF", set()),
        # a word the shell expands names no file: a summary said `$f (created)` (Gemini CLI)
        ('for f in media/demo/*.gif; do ffmpeg -i "$f" -y "${f%.gif}-t.gif" && mv "${f%.gif}-t.gif" "$f"; done', set()),
        ('echo done > "$out" && sed -i s/a/b/ "$f"', set()),
    ],
)
def test_shell_writes(command: str, writes: set[tuple[str, str]]) -> None:
    assert set(shell_effects(command).writes) == writes


def test_editor_calls_and_patches() -> None:
    def act(name: str, **args: object) -> E.Act:
        return E.read_call(0, name, json.dumps(args))

    assert act("str_replace_editor", command="view", path="/w/a.py").writes == set()
    assert act("str_replace_editor", command="create", path="/w/a.py", file_text="x").writes == {("/w/a.py", "created")}
    assert act("Edit", file_path="/w/a.py", old_string="a", new_string="b").writes == {("/w/a.py", "edited")}
    assert act("TodoWrite", todos=[{"content": "write docs", "status": "pending"}]).writes == set()
    assert act("Read", file_path="D:\\repo\\src\\a.go").uses == {"/d/repo/src/a.go"}
    patch = "*** Begin Patch\n*** Add File: new.py\n+x\n*** Update File: old.py\n@@\n-a\n+b\n*** End Patch"
    assert E.read_call(0, "apply_patch", patch).writes == {("new.py", "created"), ("old.py", "edited")}
    code = "edit_file_by_replace('/workspace/src/App.tsx', to_replace='a', new_content='b')"
    assert act("run_ipython", code=code).writes == {("/workspace/src/App.tsx", "edited")}


def test_a_result_fails_only_when_the_log_says_so() -> None:
    def failed(content: str, **meta: object) -> bool:
        return E.read_result(0, Unit("r", "tool", content=content, meta=dict(meta))).failed

    assert failed("x", is_error=True)
    assert failed("<returncode>2</returncode>\nusage: ...")
    assert failed('{"output": "rg: src: No such file", "metadata": {"exit_code": 2}}')
    assert failed("Traceback (most recent call last):\n  File ...\nKeyError: 'k'")
    assert not failed("<returncode>0</returncode>\nError running sqlfluff: [Errno 2] No such file")
    assert not failed("     1\techo \"FATAL: disk full\"\n     2\texit 1")  # a file that mentions an error


# --- the command ------------------------------------------------------------------------------------


def test_fidelity_lists_false_claims_in_text_and_json(tmp_path: Path) -> None:
    t = _read(DJANGO)
    small = _compacted(t, "## Files and code\n- ./django/core/management/commands/sqlmigrate.py.backup (edited)\n"
                       "- test_fix.py (created)", upto=69, keep_before=2)
    out = tmp_path / "small.json"
    from ctxkit.formats import write_path

    write_path([small], str(out), "openai")
    runner = CliRunner()
    res = runner.invoke(cli, ["fidelity", str(DJANGO), str(out), "--format", "table"])
    assert res.exit_code == 0, res.output
    assert "precision" in res.stdout and " 1/2 " in res.stdout  # 2 file claims, 1 false
    assert "false file claim './django/core/management/commands/sqlmigrate.py.backup (edited)'" in res.stderr
    assert "never edited" in res.stderr and "cp ./django" in res.stderr
    res = runner.invoke(cli, ["fidelity", str(DJANGO), str(out), "--format", "json"])
    (row,) = json.loads(res.stdout)
    assert row["precision"] == 0.5
    (false,) = row["claims"]["false_claims"]
    assert false["kind"] == "file" and false["evidence"].startswith("bash(")


def test_no_inserted_text_no_claims() -> None:
    t = Transcript([Unit("u1", "user", content="fix it"), Unit("a1", "assistant", tool_calls=[ToolCall("c", "bash", "{}")])])
    score = C.check(t, t)
    assert (score.total, score.precision) == (0, 1.0)


def test_placeholder_claims_on_the_django_run() -> None:
    """u31 is the output of `pip install pytz -q && python test_sqlmigrate_issue.py` (exit 1,
    "No module named 'sqlparse'"); u55 the output of `cat sqlflush.py` (exit 0)."""
    t = _read(DJANGO)
    size = len(t.units[31].content.encode())

    def verdict(index: int, text: str) -> tuple[bool, str]:
        small = t.replace(units=[u.replace(content=text) if i == index else u for i, u in enumerate(t.units)])
        (claim,) = [c for c in C.check(t, small).claims if c.kind == "placeholder"]
        return claim.true, claim.why

    line = "No module named 'sqlparse'"
    assert verdict(31, f"[bash output, {size:,} bytes, exit 1: ModuleNotFoundError: {line}, archived as ref-1]")[0]
    assert "not python" in verdict(31, f"[python output, {size:,} bytes, archived as ref-1]")[1]
    assert "bytes" in verdict(31, f"[bash output, {size * 3:,} bytes, archived as ref-1]")[1]
    sqlflush = len(t.units[55].content.encode())
    assert "not flag" in verdict(55, f"[bash output, {sqlflush:,} bytes, exit 1: boom, archived as ref-1]")[1]


def test_the_report_script_on_one_log(tmp_path: Path) -> None:
    out, rows = tmp_path / "report.md", tmp_path / "rows.json"
    import subprocess
    import sys

    subprocess.run([sys.executable, str(ROOT / "scripts" / "claims_report.py"), str(DJANGO), "--budgets", "6",
                    "--json", str(rows), "-o", str(out)], check=True, capture_output=True, cwd=tmp_path)
    text = out.read_text()
    for heading in ("## By budget", "## The first request", "## False claims by kind", "## Per log"):
        assert heading in text
    (row,) = json.loads(rows.read_text())
    assert row["share"] == 6 and row["claims"]["total"] > 0 and 0.0 <= row["claims"]["precision"] <= 1.0


def test_a_path_is_named_whole() -> None:
    """`x.py (read)` is not backed by a call that named only `x.py.bak` or `ax.py`."""
    cmd = "cp x.py.bak y.py && grep -r foo ./tests/ src/a.py; cat ax.py"
    log = E.read_log([Unit("a", "assistant", tool_calls=[ToolCall("c", "bash", json.dumps({"command": cmd}))])])
    named = [p for p in ("x.py.bak", "y.py", "tests", "a.py", "ax.py", "x.py", "src/b.py") if log.uses_of(p)]
    assert named == ["x.py.bak", "y.py", "tests", "a.py", "ax.py"]


def test_compare_gives_precision_beside_recall() -> None:
    """ctxkit and a peer on one real log: each row carries its claims; a peer that writes
    nothing of its own makes no claim (precision 1.0); the summary line counts them."""
    from ctxkit.engines import fidelity as compare
    from ctxkit.tokens import count_transcript, get_tokenizer

    t = _read(DJANGO)
    budget = count_transcript(t, get_tokenizer()).total // 6
    rows = compare.compare(t, budget, methods=("ctxkit", "drop_oldest"))
    by = {r.method: r for r in rows}
    assert by["ctxkit"].claims is not None and by["ctxkit"].claims.total > 0
    drop = by["drop_oldest"].claims
    assert drop is not None and drop.total == 0 and by["drop_oldest"].precision == 1.0
    lines = {line["method"]: line for line in compare.summarize(rows)}
    assert lines["ctxkit"]["claims"] == by["ctxkit"].claims.total
    assert lines["ctxkit"]["precision"] == round(by["ctxkit"].claims.precision, 3)
    assert "false_claims" not in by["ctxkit"].to_dict(claims=False)["claims"]


def test_a_state_the_next_kept_message_sets(realdata: Path) -> None:
    """10-box-os: "Create new theme..." is in_progress at #68 and completed at #72. A summary of
    #3-#69 that says it is completed is true when #72 is kept after it (what the model reads
    next agrees), false when no list after it shows that."""
    t = _realdata(realdata, BOX_OS)
    text = "## Pending tasks\n- [completed] Create new theme-warm-orange theme class in globals.css"
    claim = "[completed] Create new theme-warm-orange theme class in globals.css"
    v = _verdicts(t, text, upto=69, keep_before=3)
    assert v[claim][1] and "kept after it" in v[claim][2]
    hidden = {t.units[72].id, t.units[76].id}
    small = _compacted(t, text, upto=69, keep_before=3)
    small = small.replace(units=[u for u in small.units if u.id not in hidden])
    (c,) = [c for c in C.check(t, small).claims if c.kind == "task"]
    assert not c.true and "in_progress (message #68)" in c.why


@pytest.mark.parametrize(
    ("content", "raw", "expected"),
    [
        # an exit code a program printed, in a call Claude Code says passed (`| tail` ate it)
        ("ELIFECYCLE  Command failed with exit code 1.",
         {"message": {"content": [{"type": "tool_result", "tool_use_id": "c", "is_error": False}]}}, (False, None)),
        ("Exit code 2\nboom", {"message": {"content": [{"type": "tool_result", "tool_use_id": "c", "is_error": True}]}},
         (True, 2)),
        ("done", {"type": "tool.execution_complete", "data": {"success": False}}, (True, None)),  # Copilot CLI
        ('{"output": "x", "metadata": {"exit_code": 2}}', {}, (True, 2)),  # Codex, as a field
        ("<returncode>1</returncode>\n<output>\n</output>", {}, (True, 1)),  # mini-swe-agent
        ("Error: gift card balance is not enough", {}, (True, None)),  # tau-bench's tool status
        ("Traceback (most recent call last):\n  File \"x.py\"\nKeyError: 'k'", {}, (True, None)),
        ("all 12 tests passed", {}, (False, None)),
    ],
)
def test_summaries_checker_and_probes_read_one_outcome(content: str, raw: dict, expected: tuple) -> None:
    """What failed is read once (`log_events.outcome`): the summaries' `-> exit 1`, the
    checker's evidence and the error probes cannot disagree on it."""
    from ctxkit.fidelity import probes as P
    from ctxkit.log_events import outcome

    u = Unit("r", "user", type="tool_result", tool_call_id="c", content=content, raw=raw)
    said, held = outcome(u), E.read_result(0, u)
    assert (said.failed, said.exit_code) == (held.failed, held.exit_code) == expected
    assert P.failed(u) is said.failed


def test_the_first_line_of_a_listing_says_how_many_lines_it_had() -> None:
    """Read blind, `ls app/api/chat -> ok: anthropic` made a listing of ten look like one entry.
    A summary says `(and N more lines)` when the output had more lines than the one it shows,
    and the checker holds it to that count."""
    from ctxkit.summarizers.extractive import commands_run

    listing = "\n".join(["anthropic", "azure", "custom", "google", "groq"])
    units = [
        Unit("u1", "user", content="what providers are there?"),
        Unit("a1", "assistant", tool_calls=(ToolCall("c1", "bash", '{"command": "ls app/api/chat"}'),)),
        Unit("t1", "tool", content=f"Exit code: 0\nWall time: 0.1 seconds\nOutput:\n{listing}\n", tool_call_id="c1"),
        Unit("a2", "assistant", tool_calls=(ToolCall("c2", "bash", '{"command": "git rev-parse HEAD"}'),)),
        Unit("t2", "tool", content="4f86393\n", tool_call_id="c2"),
        Unit("a3", "assistant", content="Five providers."),
    ]
    from ctxkit.facts import calls
    from ctxkit.summarizers.extractive import _action_lines

    lines = _action_lines(calls(units), news=True)
    assert lines == ["bash(ls app/api/chat) -> ok: anthropic (and 4 more lines)", "bash(git rev-parse HEAD) -> ok: 4f86393"]
    assert commands_run(units)[0] == "bash(ls app/api/chat) -> ok"
    t = Transcript(units=units, id="t")
    text = "\n".join(["## Earlier actions and what came back", f"- {lines[0]}",
                      "- bash(ls app/api/chat) -> ok: anthropic (and 8 more lines)"])
    v = _verdicts(t, text, upto=4, keep_before=1)
    assert v[f"- {lines[0]}"[2:]][:2] == ("command", True)
    wrong = v["bash(ls app/api/chat) -> ok: anthropic (and 8 more lines)"]
    assert not wrong[1] and "has 5 lines with text, not 8 more" in wrong[2]
