"""CI-native renderings of check records (`gates.cases.Case`): GitHub Actions workflow commands,
JUnit XML and a Markdown summary for a pull-request comment or `$GITHUB_STEP_SUMMARY`.

GitHub annotations follow the documented workflow-command syntax
(`::error file={name},line={line},title={title}::{message}`), escaped as `@actions/core` escapes
them: `%`, CR and LF in the message; also `:` and `,` in properties. JUnit XML has the shape CI
systems read (`testsuites/testsuite/testcase` with `failure` or `skipped`), valid against the
common JUnit schema (the `junit-10.xsd` pytest checks its own reports against): one suite per
file, a case per check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ctxkit.english import counted
from ctxkit.gates.cases import Case, tally
from ctxkit.report.tables import format_cell, render_table

CI_FORMATS = ("github", "junit", "markdown")

_ICONS = {"passed": "✅", "failed": "❌", "skipped": "⏭️"}
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


# --- the table for people ---------------------------------------------------------------------


def render_baseline(diffs: Sequence[Any], path: str, tokenizer: str, code: int) -> str:
    """`guard --baseline`'s block: counts per status, the diff table, a line per entry that is
    not plainly ok, and the verdict."""
    from ctxkit.gates.baseline import diff_rows

    counts = {s: sum(d.status == s for d in diffs) for s in ("ok", "over", "new", "missing")}
    head = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines = [f"baseline {path} ({tokenizer}): {len(diffs)} entries, {head}"]
    rows = diff_rows(diffs, changed_only=True)
    if rows:
        lines.append(render_table(rows))
    lines += [f"baseline {d.status}: {d.key}:{d.at_line}: {d.summary()}" for d in diffs if d.status != "ok"]
    lines.append(
        f"baseline verdict: {counts['over']} over their allowance, exit {code}"
        if counts["over"]
        else "baseline verdict: no region grew beyond its allowance"
    )
    return "\n".join(lines) + "\n"


# --- GitHub Actions ----------------------------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as `@actions/core` does."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (file, title), escaped as `@actions/core` does."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(case: Case) -> str | None:
    """The workflow command of one case, or None when it has nothing to say."""
    if not case.level:
        return None
    props = []
    if case.file:
        props.append(f"file={escape_property(case.file)}")
        if case.line:
            props.append(f"line={case.line}")
    props.append(f"title={escape_property(f'ctxkit {case.name}')}")
    body = case.message
    extra = list(case.details) + [_row_line(r) for r in case.rows]
    if extra:
        body += "\n" + "\n".join(extra)
    return f"::{case.level} {','.join(props)}::{escape_data(body)}"


def _row_line(row: dict[str, Any]) -> str:
    """A diff row as one line (annotations are not shown in a fixed-width font)."""
    if row.get("delta") is None:
        return f"{row.get('region')}: {row.get('status')}"
    line = f"{row['region']}: {format_cell(row['before'])} -> {format_cell(row['after'])} ({row['delta']:+,})"
    if row.get("allowed"):
        line += f", allowed {row['allowed']}"
    return f"{line}: {row['status']}"


def render_github(cases: Sequence[Case], summary: str = "") -> str:
    """One annotation per failed or warning case, then a plain summary line."""
    lines = [a for a in (annotation(c) for c in cases) if a]
    if summary:
        lines.append(summary)
    return "\n".join(lines) + ("\n" if lines else "")


# --- JUnit XML ---------------------------------------------------------------------------------


def _xml_text(text: str) -> str:
    return _XML_BAD.sub("\ufffd", text)


def render_junit(cases: Sequence[Case], name: str = "ctxkit") -> str:
    """JUnit XML: `testsuites` > a `testsuite` per file > a `testcase` per check."""
    import xml.etree.ElementTree as ET

    counts = tally(cases)
    root = ET.Element(
        "testsuites",
        name=name,
        tests=str(len(cases)),
        failures=str(counts["failed"]),
        errors="0",
        time="0",
    )
    suites: dict[str, list[Case]] = {}
    for c in cases:
        suites.setdefault(c.file or c.classname, []).append(c)
    for suite_name, members in suites.items():
        sc = tally(members)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=_xml_text(suite_name),
            tests=str(len(members)),
            failures=str(sc["failed"]),
            errors="0",
            skipped=str(sc["skipped"]),
            time="0",
        )
        for c in members:
            tc = ET.SubElement(
                suite, "testcase", classname=_xml_text(c.classname), name=_xml_text(c.name), time="0"
            )
            body = list(c.details)
            if c.rows:
                body.append(render_table(list(c.rows)))
            where = f"{c.file}:{c.line}" if c.file and c.line else (c.file or "")
            if c.outcome == "failed":
                fail = ET.SubElement(tc, "failure", type=c.kind or "failure", message=_xml_text(c.message))
                fail.text = _xml_text("\n".join(([where] if where else []) + body))
            elif c.outcome == "skipped":
                ET.SubElement(tc, "skipped", message=_xml_text(c.message))
            elif c.level:  # a passing case with a warning (tool schemas over the threshold, a new entry)
                out = ET.SubElement(tc, "system-out")
                out.text = _xml_text("\n".join([c.message, *body]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# --- Markdown ----------------------------------------------------------------------------------


def _md_cell(value: Any) -> str:
    text = format_cell(value)
    return text.replace("|", "\\|").replace("\n", " ") if text else ""


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """A GitHub-flavoured Markdown table (numbers right-aligned)."""
    from ctxkit.report.tables import columns_of

    cols = columns_of(rows)
    if not cols:
        return ""
    numeric = [
        all(r.get(c) is None or (isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool))
            for r in rows)
        for c in cols
    ]
    head = "| " + " | ".join(cols) + " |"
    rule = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    body = ["| " + " | ".join(_md_cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def render_markdown(cases: Sequence[Case], title: str = "ctxkit", summary: str = "") -> str:
    """A summary a pull-request comment can carry: a headline, a row per check, and the diff
    table in a collapsed block."""
    counts = tally(cases)
    failed = counts["failed"]
    head = f"### {'❌' if failed else '✅'} {title}: "
    head += (
        f"{failed} of {counted(len(cases), 'check')} failed" if failed
        else f"{counted(len(cases), 'check')} passed"
    )
    if summary:
        head += f" ({summary})"
    rows = [
        {
            "": _ICONS[c.outcome] + (" ⚠️" if c.level == "warning" else ""),
            "file": f"`{c.classname}`",
            "check": c.name,
            "result": c.message,
        }
        for c in cases
    ]
    parts = [head, "", markdown_table(rows)]
    diff = [r for c in cases for r in c.rows]
    if diff:
        parts += ["", "<details><summary>Token diff against the baseline</summary>", "",
                  markdown_table(diff), "", "</details>"]
    notes = [
        f"- `{c.classname}` {c.name}: {d}"
        for c in cases
        if c.outcome == "failed" or c.level
        for d in c.details
    ]
    if notes:
        parts += ["", "<details><summary>Details</summary>", "", *notes, "", "</details>"]
    return "\n".join(parts) + "\n"
