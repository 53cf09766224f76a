"""CI gates: baselines (`count --save-baseline`, `guard --baseline`, `count --diff`), prompt files,
and the CI renderings (GitHub annotations, JUnit XML, Markdown) of the same check records."""

from __future__ import annotations

import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.errors import InputError, UsageError
from ctxkit.gates.baseline import (
    Allowance,
    Entry,
    SectionCount,
    compare_entry,
    parse_allow,
)
from ctxkit.gates.cases import Case
from ctxkit.gates.prompts import is_prompt_file, read_sections, split_sections
from ctxkit.report.ci import annotation, escape_data, escape_property, render_junit, render_markdown
from ctxkit.tokens import get_tokenizer

ROOT = Path(__file__).parents[1]
SAMPLES = ROOT / "sample_transcripts"
XSD = Path(__file__).parent / "data" / "ci" / "junit-10.xsd"
# The documented workflow-command syntax: ::error file={name},line={line},title={title}::{message}
ANNOTATION = re.compile(
    r"^::(?P<level>error|warning|notice) file=(?P<file>[^,:]+),line=(?P<line>\d+),title=(?P<title>[^,:]+)::(?P<message>.+)$"
)


def run(args: list[str], cwd: Path) -> object:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        os.chdir(old)


def validate_junit(text: str) -> ET.Element:
    """Parse JUnit XML and validate it against the JUnit schema pytest checks its reports with."""
    import xmlschema

    xmlschema.XMLSchema(str(XSD)).validate(text)
    return ET.fromstring(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository to gate: a system prompt in markdown and two fixture transcripts."""
    policy = json.loads((SAMPLES / "tau-bench-airline.json").read_text())[0]["content"]
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "system.md").write_text("# Airline agent\n\n" + policy + "\n")
    (tmp_path / "fixtures").mkdir()
    shutil.copy(SAMPLES / "tau-bench-airline.json", tmp_path / "fixtures" / "airline.json")
    shutil.copy(SAMPLES / "claude-code-session.jsonl", tmp_path / "fixtures" / "session.jsonl")
    return tmp_path


def grow_by(path: Path, tokens: int, heading: str = "## Refund rules") -> int:
    """Append a section that adds exactly `tokens` tokens (cl100k_base) to a prompt file; the
    line where the section starts."""
    tok = get_tokenizer("cl100k_base")
    text = path.read_text()
    start = text.count("\n") + 1
    for k in range(tokens):
        extra = f"{heading}\n" + " refund" * k + "\n"
        if tok.count(text + extra) - tok.count(text) == tokens:
            path.write_text(text + extra)
            return start
    raise AssertionError("no text of that many tokens")


GATE = ["guard", "prompts/system.md", "fixtures/airline.json", "fixtures/session.jsonl",
        "--model", "claude-sonnet-4", "--baseline", "ctx-baseline.json"]


def test_prompt_grown_by_500_tokens_fails_the_gate(repo: Path) -> None:
    saved = run(["count", "prompts/system.md", "fixtures/airline.json", "fixtures/session.jsonl",
                 "--save-baseline", "ctx-baseline.json", "--format", "jsonl"], repo)
    assert saved.exit_code == 0, saved.stderr
    assert "baseline: 3 entries (cl100k_base) written to ctx-baseline.json; allow *=2%" in saved.stderr
    baseline = json.loads((repo / "ctx-baseline.json").read_text())
    before = baseline["entries"]["prompts/system.md"]["system"]

    clean = run(GATE, repo)
    assert clean.exit_code == 0, clean.stdout
    assert "baseline verdict: no region grew beyond its allowance" in clean.stdout

    line = grow_by(repo / "prompts" / "system.md", 500)
    table = run(GATE, repo)
    assert table.exit_code == 7
    rows = [r.split() for r in table.stdout.splitlines() if r.startswith("prompts/system.md  system")]
    assert rows == [["prompts/system.md", "system", f"{before:,}", f"{before + 500:,}", "500",
                     f"{100 * 500 / before:.1f}", f"+{before * 2 // 100}", "(2%)", "over"]]
    assert "baseline verdict: 1 over their allowance, exit 7" in table.stdout

    github = run([*GATE, "--format", "github"], repo)
    assert github.exit_code == 7
    annotations = [ANNOTATION.match(x) for x in github.stdout.splitlines() if x.startswith("::")]
    assert len(annotations) == 1 and annotations[0] is not None
    a = annotations[0]
    assert (a["level"], a["file"], int(a["line"]), a["title"]) == (
        "error", "prompts/system.md", line, "ctxkit baseline (cl100k_base)")
    assert a["message"].startswith(f"system +500 tokens ({before:,} -> {before + 500:,}")
    assert "section 'Refund rules'" in a["message"]
    assert github.stdout.splitlines()[-1] == "ctxkit guard: 6 checks, 1 failed, 0 skipped; exit 7"

    junit = run([*GATE, "--format", "junit", "--junit", "report.xml", "--summary", "summary.md"], repo)
    assert junit.exit_code == 7
    root = validate_junit(junit.stdout)
    assert (repo / "report.xml").read_text() == junit.stdout
    assert root.tag == "testsuites" and root.get("tests") == "6" and root.get("failures") == "1"
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    assert set(cases) == {
        (f, n) for f in ("prompts/system.md", "fixtures/airline.json", "fixtures/session.jsonl")
        for n in ("claude-sonnet-4", "baseline (cl100k_base)")
    }
    failure = cases[("prompts/system.md", "baseline (cl100k_base)")].find("failure")
    assert failure is not None and failure.get("type") == "regression"
    assert failure.get("message", "").startswith("system +500 tokens")
    assert [c.find("failure") for k, c in cases.items() if k[1] != "baseline (cl100k_base)"] == [None] * 3

    summary = (repo / "summary.md").read_text()
    assert summary.startswith("### ❌ ctxkit guard: 1 of 6 checks failed (exit 7)")
    assert "| prompts/system.md | system |" in summary

    allowed = run([*GATE, "--allow", "system=500"], repo)
    assert allowed.exit_code == 0
    assert run([*GATE, "--allow", "system=499"], repo).exit_code == 7
    assert run([*GATE, "--allow", "*=50%"], repo).exit_code == 0


def test_a_fixture_that_no_longer_fits_fails_as_overflow_with_its_junit_case(repo: Path) -> None:
    result = run(["guard", "fixtures/airline.json", "--model", "gpt-4", "--format", "junit"], repo)
    assert result.exit_code == 5
    root = validate_junit(result.stdout)
    (case,) = root.iter("testcase")
    assert (case.get("classname"), case.get("name")) == ("fixtures/airline.json", "gpt-4")
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "overflow"
    assert failure.get("message") == "gpt-4: overflow, 8,130 of 3,072 tokens (264.6%, bound by model), exit 5"


def test_targets_after_the_chosen_one_are_skipped_cases(repo: Path) -> None:
    args = ["guard", "fixtures/airline.json", "--model", "gpt-4", "--model", "gpt-4-turbo",
            "--model", "claude-sonnet-4"]
    junit = run([*args, "--format", "junit"], repo)
    assert junit.exit_code == 0
    root = validate_junit(junit.stdout)
    outcome = {
        c.get("name"): ("failed" if c.find("failure") is not None else "skipped" if c.find("skipped") is not None else "passed")
        for c in root.iter("testcase")
    }
    assert outcome == {"gpt-4": "skipped", "gpt-4-turbo": "passed", "claude-sonnet-4": "skipped"}
    assert run([*args, "--format", "github"], repo).stdout.count("::") == 0


def test_count_diff_of_two_prompt_files_and_against_a_baseline(repo: Path) -> None:
    shutil.copy(repo / "prompts" / "system.md", repo / "old.md")
    grow_by(repo / "prompts" / "system.md", 120)
    result = run(["count", "--diff", "old.md", "prompts/system.md", "--format", "jsonl"], repo)
    assert result.exit_code == 0
    rows = {r["region"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert set(rows) == {"system", "tools", "summary", "history", "unlogged", "total"}
    assert rows["system"]["delta"] == 120 and rows["system"]["status"] == "over"
    assert rows["system"]["file"] == "old.md -> prompts/system.md"
    assert rows["tools"]["status"] == "same"
    run(["count", "old.md", "--save-baseline", "b.json"], repo)
    again = run(["count", "--diff", "b.json", "old.md", "--format", "jsonl"], repo)
    assert again.exit_code == 0 and "no region changed" in again.stderr


def test_baseline_keeps_its_allowances_and_refuses_other_counting(repo: Path) -> None:
    run(["count", "prompts/system.md", "--save-baseline", "b.json", "--allow", "system=10%"], repo)
    run(["count", "prompts/system.md", "--save-baseline", "b.json"], repo)
    assert json.loads((repo / "b.json").read_text())["allow"] == {"*": "2%", "system": "10%"}
    other = run(["guard", "prompts/system.md", "--baseline", "b.json", "--tokenizer", "approx"], repo)
    assert other.exit_code == 2
    assert "--tokenizer approx differs from cl100k_base, which b.json was recorded with" in other.stderr
    scale = run(["guard", "prompts/system.md", "--baseline", "b.json", "--tool-schema-scale", "2"], repo)
    assert scale.exit_code == 2 and "--tool-schema-scale 2 differs from the 1" in scale.stderr
    clash = run(["count", "prompts/system.md", "--save-baseline", "prompts/system.md"], repo)
    assert clash.exit_code == 2
    assert run(["guard", "prompts/system.md", "--allow", "system=5"], repo).exit_code == 2


def test_bad_baseline_files_name_the_file_and_line(repo: Path) -> None:
    (repo / "bad.json").write_text('{"ctxkit_baseline": 1,\n "entries": [}\n')
    result = run(["guard", "prompts/system.md", "--baseline", "bad.json"], repo)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: bad.json:2: not valid JSON")
    (repo / "other.json").write_text('{"entries": {}}')
    result = run(["guard", "prompts/system.md", "--baseline", "other.json"], repo)
    assert result.exit_code == 1 and 'other.json: not a ctxkit baseline' in result.stderr
    (repo / "allow.json").write_text('{"ctxkit_baseline": 1, "entries": {}, "allow": {"system": "lots"}}')
    result = run(["guard", "prompts/system.md", "--baseline", "allow.json"], repo)
    assert result.exit_code == 1 and "allow.json:" in result.stderr and "'lots' is not an allowance" in result.stderr


def test_new_and_missing_entries_warn_without_failing(repo: Path) -> None:
    run(["count", "fixtures/airline.json", "--save-baseline", "b.json"], repo)
    result = run(["guard", "prompts/system.md", "--baseline", "b.json", "--format", "github"], repo)
    assert result.exit_code == 0
    (warning,) = [x for x in result.stdout.splitlines() if x.startswith("::")]
    assert warning.startswith("::warning file=prompts/system.md,line=1,")
    assert "not in the baseline" in warning


# --- records and renderers ----------------------------------------------------------------------


def test_allowances() -> None:
    assert Allowance.parse("200").limit(10_000) == 200
    assert Allowance.parse("5%").limit(1_261) == 63
    assert parse_allow(["system=0", "10%"]) == {"system": Allowance(tokens=0), "*": Allowance(percent=10.0)}
    for bad in ("-3", "x", "nan%", "1e9999%"):
        with pytest.raises(UsageError, match="is not an allowance"):
            Allowance.parse(bad)
    with pytest.raises(UsageError, match="unknown region 'prompt'"):
        parse_allow(["prompt=5"])


def test_compare_points_at_the_section_that_grew_most() -> None:
    before = Entry("p.md", "prompt", "prompt", {"system": 300, "total": 300},
                   (SectionCount("a", 1, 100), SectionCount("b", 9, 200)))
    after = Entry("p.md", "prompt", "prompt", {"system": 420, "total": 420},
                  (SectionCount("a", 1, 110), SectionCount("b", 9, 190), SectionCount("c", 30, 120)))
    d = compare_entry(before, after, {"system": Allowance(tokens=100)})
    assert d.status == "over" and d.at_line == 30
    assert [(s.name, s.delta) for s in d.sections] == [("a", 10), ("b", -10), ("c", 120)]
    assert compare_entry(before, after, {"system": Allowance(tokens=120)}).status == "ok"


def test_github_escaping_follows_the_actions_toolkit() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a,b:c%") == "a%2Cb%3Ac%25"
    case = Case("dir,x/p:1.md", "baseline (cl100k_base)", "failed", "grew 5%\nmore", "dir,x/p:1.md", 3, "error")
    assert annotation(case) == "::error file=dir%2Cx/p%3A1.md,line=3,title=ctxkit baseline (cl100k_base)::grew 5%25%0Amore"
    assert annotation(Case("f", "gpt-4o", "passed", "ok", "f", 1)) is None


def test_junit_escapes_and_stays_valid() -> None:
    cases = [
        Case("a&b.json", "gpt-4o", "failed", 'used <"all"> \x07', "a&b.json", 1, "error", "overflow", ("x\x00y",)),
        Case("a&b.json", "check", "passed", "fine", "a&b.json", 1, "warning", "", ("note",)),
        Case("c.json", "gpt-4", "skipped", "skipped: gpt-4o was chosen", "c.json", 1),
    ]
    root = validate_junit(render_junit(cases, "ctxkit guard"))
    assert [s.get("name") for s in root] == ["a&b.json", "c.json"]
    assert root.find("testsuite/testcase/failure").get("message") == 'used <"all"> \ufffd'  # type: ignore[union-attr]
    assert root[1].get("skipped") == "1"


def test_markdown_summary_carries_the_table_and_the_diff() -> None:
    rows = ({"file": "p.md", "region": "system", "before": 10, "after": 20, "delta": 10, "status": "over"},)
    text = render_markdown([Case("p|q.md", "baseline (x)", "failed", "system +10 | more", "p.md", 1, "error", "regression", (), rows)], "ctxkit guard", "exit 7")
    assert text.splitlines()[0] == "### ❌ ctxkit guard: 1 of 1 check failed (exit 7)"
    assert "| ❌ | `p\\|q.md` | baseline (x) | system +10 \\| more |" in text
    assert "| file | region | before | after | delta | status |\n|---|---|---:|---:|---:|---|" in text


# --- prompt files -------------------------------------------------------------------------------


def test_sections_of_text_and_yaml_prompts(tmp_path: Path) -> None:
    text = "Intro.\n\n## Rules\nNo.\n```\n# not a heading\n```\n### Tools\nUse.\n"
    assert [(s.name, s.line) for s in split_sections(text)] == [("(preamble)", 1), ("Rules", 3), ("Tools", 8)]
    assert "".join(s.content for s in split_sections(text)) == text
    p = tmp_path / "system.yaml"
    p.write_text("sections:\n  - name: role\n    content: You help.\n  - name: today\n    content: It is Monday.\n    cacheable: false\n")
    assert [(s.name, s.line, s.cacheable) for s in read_sections(str(p))] == [("role", 2, True), ("today", 4, False)]
    p.write_text("- name: a\n  content: x\n  cachable: false\n")
    with pytest.raises(InputError, match=r"system.yaml:1: section 'a': unknown key 'cachable'"):
        read_sections(str(p))
    p.write_text("- name: a\n  content: [x\n")
    with pytest.raises(InputError, match=r"system.yaml:3: not valid YAML or JSON"):
        read_sections(str(p))


def test_prompt_files_and_aider_histories_are_told_apart(tmp_path: Path, realdata: Path) -> None:
    (tmp_path / "p.txt").write_text("You help.\n")
    assert is_prompt_file(str(tmp_path / "p.txt"))
    assert not is_prompt_file(str(tmp_path / "p.json"))
    aider = next((realdata / "aider").glob("*.md"))
    assert not is_prompt_file(str(aider))


def test_count_by_section_and_the_cache_layout_cost(tmp_path: Path) -> None:
    """Hand-checkable: approx counts ceil(chars / 4); claude-sonnet-4 lists $3 input, $0.30
    cached input and $3.75 cache writes per million tokens."""
    doc = {"sections": [
        {"name": "role", "content": "r" * 6000},
        {"name": "today", "content": "d" * 400, "cacheable": False},
        {"name": "policy", "content": "p" * 8000},
    ]}
    (tmp_path / "system.yaml").write_text(yaml.safe_dump(doc))
    by = run(["count", "system.yaml", "--by", "section", "--tokenizer", "approx", "--format", "jsonl"], tmp_path)
    rows = [json.loads(x) for x in by.stdout.splitlines()]
    assert [(r["section"], r["tokens"], r["cached"]) for r in rows] == [
        ("role", 1500, True), ("today", 100, False), ("policy", 2000, False)]
    cost = run(["count", "system.yaml", "--cost", "claude-sonnet-4", "--tokenizer", "approx", "--format", "jsonl"], tmp_path)
    (row,) = [json.loads(x) for x in cost.stdout.splitlines()]
    assert row["cached prefix"] == 1500 and row["lost to the break"] == 2000
    assert row["break at"] == "today (line 4)"
    assert row["$ per call"] == pytest.approx((1500 * 0.3 + 2100 * 3) / 1e6)
    assert row["$ without break"] == pytest.approx((3500 * 0.3 + 100 * 3) / 1e6)
    assert row["$ first call"] == pytest.approx((1500 * 3.75 + 2100 * 3) / 1e6)
    assert row["$ uncached"] == pytest.approx(3600 * 3 / 1e6)
    assert row["$ saved per 1k calls"] == pytest.approx(1000 * 2000 * 2.7 / 1e6)
