"""The compaction page: one self-contained HTML file built from detailed JSON reports
(`compaction.trace.detailed_report`), so `compact --html` and `ctxkit report REPORT.json --html`
give the same page.

It shows each transcript before and after, unit by unit (kept, condensed with a diff, masked,
summarized into which summary, archived with its ref), each strategy pass with the tokens it
saved and its time, the regions before and after as bars, P1 units and needles marked, and the
final prompt as it is written. No network: the CSS and the one script are inline, and the page's
Content-Security-Policy allows nothing else (the script by its hash). Transcript text is
untrusted: all of it is HTML-escaped, and long text is folded so a page of thousands of units
stays usable.

Example:
    >>> from ctxkit.compaction import compact
    >>> from ctxkit.compaction.trace import detailed_report
    >>> from ctxkit.simulate import generate
    >>> page = render_html([detailed_report(compact(generate("long_chat", seed=1), limit=5000))])
    >>> page.startswith("<!doctype html>"), "<script src" in page
    (True, False)
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import html
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from ctxkit.compaction.trace import STATUSES
from ctxkit.errors import InputError

PREVIEW_CHARS = 400  # text shown before "show all"
DIFF_MAX_LINES = 3000  # a longer unit is diffed on its first lines (difflib is quadratic)
RECORD_PREVIEW_CHARS = 160
_AFTER_STATUSES = ("kept", "condensed", "masked", "summary", "placeholder")
_REGION_ORDER = ("system", "tools", "summary", "history", "unlogged", "reserved output")


def esc(value: Any) -> str:
    """Text as HTML (quotes too: safe in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def reports_of(doc: Any, source: str = "report") -> list[dict[str, Any]]:
    """The detailed reports in a `compact --report` document (one transcript, or a dataset's
    `{"transcripts": [...]}`); an error when they lack the per-unit records."""
    items = doc.get("transcripts") if isinstance(doc, dict) and "transcripts" in doc else [doc]
    if not isinstance(items, list) or not all(isinstance(r, dict) for r in items):
        raise InputError(source, None, "not a ctxkit compaction report (compact --report)")
    if isinstance(doc, dict) and "transcripts" in doc:
        # a dataset's report names its archive once, for all its transcripts
        items = [{**r, "archive": r.get("archive", doc.get("archive"))} for r in items]
    for r in items:
        if "unit_records" not in r:
            raise InputError(
                source,
                None,
                f"report of {r.get('transcript', '?')} has no unit records (written by an older "
                "ctxkit); run `ctxkit compact ... --report FILE` again",
            )
    return items


def read_reports(path: str) -> list[dict[str, Any]]:
    """The detailed reports in a `compact --report` file (`-` is stdin)."""
    from ctxkit.fileio import read_file_limited

    data = read_file_limited(path)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, None, f"not valid JSON ({str(exc).split(':', 1)[0]})") from None
    return reports_of(doc, path)


def render_file(path: str) -> str:
    """The page of a `compact --report` file; a report of the wrong shape is one error line."""
    reports = read_reports(path)
    try:
        return render_html(reports)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(
            path, None, f"not a ctxkit compaction report ({type(exc).__name__}: {exc})"
        ) from None


def render_html(reports: Sequence[Mapping[str, Any]], title: str = "ctxkit compaction") -> str:
    """The whole page for one or more detailed reports (one section per transcript)."""
    parts = [f"<header><h1>{esc(title)}</h1>"]
    parts.append(
        '<div class="controls">show: '
        + "".join(
            f'<label><input type="checkbox" data-status="{s}" checked> {s}</label> '
            for s in STATUSES
        )
        + '<button type="button" data-action="open">expand all</button> '
        '<button type="button" data-action="close">collapse all</button></div>'
    )
    if len(reports) > 1:
        parts.append('<nav><ol class="toc">')
        for k, r in enumerate(reports):
            parts.append(
                f'<li><a href="#t{k}">{esc(r.get("transcript"))}</a> '
                f"{_int(r['tokens']['before'])} &rarr; {_int(r['tokens']['after'])} tokens</li>"
            )
        parts.append("</ol></nav>")
    parts.append("</header><main>")
    for k, r in enumerate(reports):
        parts.extend(_section(k, r))
    parts.append("</main>")
    body = "\n".join(parts)
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'"
    )
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}\n"
        f"<script>{_SCRIPT}</script>\n</body></html>\n"
    )


# ------------------------------------------------------------------------------ one transcript


def _int(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else esc(n)


def _section(k: int, r: Mapping[str, Any]) -> Iterator[str]:
    recs = r["unit_records"]
    before, after = recs["before"], recs["after"]
    tokens = r["tokens"]
    inp = r.get("input") or {}
    yield (
        f'<section class="transcript" id="t{k}" data-transcript="{esc(r.get("transcript"))}" '
        f'data-units-before="{len(before)}" data-units-after="{len(after)}">'
    )
    yield f"<h2>{esc(r.get('transcript'))}</h2>"
    where = inp.get("path") or ""
    if inp.get("line"):
        where += f", line {inp['line']}"
    verdict = (
        "unchanged (fits)"
        if not r.get("changed")
        else ("fits the target" if r.get("fits") else "over the target")
    )
    yield (
        f'<p class="lead">{esc(where)} &middot; {esc(inp.get("format"))} &rarr; '
        f"{esc(r['final_prompt']['format'])} &middot; <b>{_int(tokens['before'])} &rarr; "
        f"{_int(tokens['after'])}</b> tokens (limit {_int(r.get('limit'))}, target "
        f"{_int(r.get('target'))}) &middot; {esc(verdict)}</p>"
    )
    facts = [
        ("units", f"{len(before):,} &rarr; {len(after):,}"),
        ("strategies", esc(", ".join(r.get("strategies") or ()) or "none")),
        ("time", f"{float(r.get('time_ms') or 0):,.1f} ms"),
        (
            "coherence",
            "n/a" if r.get("coherence") is None else f"{float(r['coherence']):.3f}",
        ),
        ("P1 kept", f"{_int(r['p1']['kept'])} / {_int(r['p1']['total'])}"),
        ("invariants", "ok" if r["invariants"].get("ok") else esc("; ".join(r["invariants"]["violations"]))),
        ("archive", esc(r.get("archive") or "none")),
    ]
    if r.get("recovery"):
        facts.append(("recovery", esc(r["recovery"])))
    yield '<p class="facts">' + "".join(
        f'<span class="fact"><span class="k">{a}</span> <b>{b}</b></span>' for a, b in facts
    ) + "</p>"
    yield from _regions(r)
    yield from _steps(r.get("steps") or [], (r.get("tokens") or {}).get("after"))
    yield from _truth(recs.get("truth"))
    yield from _units_before(k, before, after)
    yield from _units_after(k, before, after)
    yield from _prompt(r["final_prompt"])
    yield "</section>"


def _regions(r: Mapping[str, Any]) -> Iterator[str]:
    tokens = r["tokens"]
    budget = r.get("budget") or {}
    reserved = int(budget.get("max_output_tokens") or 0)
    # The model's reserved output is drawn beside the limit when the model's window set the
    # limit (limit + buffer + reserved = window); a policy limit well below it is not its share.
    drawn = bool(reserved) and budget.get("bound_by") in ("model", "agent")
    rows = []
    for label, regions in (("before", tokens["regions_before"]), ("after", tokens["regions_after"])):
        parts = {n: int(v) for n, v in regions.items()}
        if drawn:
            parts["reserved output"] = reserved
        rows.append((label, parts))
    limit = int(r.get("limit") or 0)
    scale = max([sum(p.values()) for _, p in rows] + [limit + (reserved if drawn else 0), 1])
    yield '<h3>Regions</h3><div class="regions">'
    for label, parts in rows:
        names = [n for n in _REGION_ORDER if n in parts] + sorted(
            n for n in parts if n not in _REGION_ORDER
        )
        segs = "".join(
            f'<span class="seg rg-{esc(n.replace(" ", "-"))}" '
            f'style="width:{100 * parts[n] / scale:.3f}%" title="{esc(n)}: {parts[n]:,} tokens">'
            "</span>"
            for n in names
            if parts[n] > 0
        )
        marks = ""
        for what in ("limit", "target"):
            v = r.get(what)
            if isinstance(v, int) and v > 0:
                marks += (
                    f'<span class="mark mk-{what}" style="left:{100 * v / scale:.3f}%" '
                    f'title="{what} {v:,}"></span>'
                )
        legend = " ".join(
            f'<span class="key rg-{esc(n.replace(" ", "-"))}"></span>{esc(n)} {parts[n]:,}'
            for n in names
        )
        total = sum(v for n, v in parts.items() if n != "reserved output")
        yield (
            f'<div class="bar-row"><span class="bar-label">{label} ({total:,})</span>'
            f'<div class="bar">{segs}{marks}</div><div class="legend">{legend}</div></div>'
        )
    if drawn:
        tail = f"; reserved output is the model's maximum answer ({esc(budget.get('name'))})."
    elif reserved:
        tail = (
            f"; the model's reserved output ({reserved:,} tokens) lies beyond the policy "
            "limit and is not drawn."
        )
    else:
        tail = "."
    yield (
        '<p class="note">Bars share one scale (tokens); the red line is the limit, the dashed '
        f"one the target{tail}</p></div>"
    )


def _steps(steps: Sequence[Mapping[str, Any]], final: Any = None) -> Iterator[str]:
    yield "<h3>Strategy passes</h3>"
    if not steps:
        yield '<p class="note">No pass ran: the transcript already fits.</p>'
        return
    yield (
        '<table class="steps"><thead><tr><th>pass</th><th>strategy</th><th>tokens before</th>'
        "<th>after</th><th>saved</th><th>time (ms)</th><th>refs</th><th>note</th></tr></thead><tbody>"
    )
    for s in steps:
        saved = int(s.get("tokens_saved") or 0)
        cls = "applied" if s.get("applied") and saved > 0 else "idle"
        yield (
            f'<tr class="{cls}"><td>{esc(s.get("iteration"))}</td><td>{esc(s.get("strategy"))}</td>'
            f'<td class="num">{_int(s.get("tokens_before"))}</td>'
            f'<td class="num">{_int(s.get("tokens_after"))}</td>'
            f'<td class="num">{_int(saved)}</td>'
            f'<td class="num">{float(s.get("time_ms") or 0):,.1f}</td>'
            f'<td class="num">{len(s.get("refs") or ())}</td><td>{esc(s.get("note"))}</td></tr>'
        )
    last = steps[-1].get("tokens_after")
    if isinstance(final, int) and isinstance(last, int) and final != last:
        # After the passes (give_back among them, when it put anything back) the messages are
        # arranged and counted as the output file reads back: the table ends at the
        # transcript's own `after` figure.
        what, note = "as written", "neighbouring placeholders merged, counted as the output file reads back"
        yield (
            f'<tr class="idle"><td></td><td>{what}</td><td class="num">{_int(last)}</td>'
            f'<td class="num">{_int(final)}</td><td class="num">{_int(last - final)}</td><td></td><td></td>'
            f"<td>{note}</td></tr>"
        )
    yield "</tbody></table>"


def _truth(truth: Mapping[str, Any] | None) -> Iterator[str]:
    if not truth or not truth.get("needles"):
        return
    yield (
        '<h3>Needles (ground truth)</h3><table class="needles"><thead><tr><th>needle</th>'
        "<th>pattern</th><th>status</th><th>in units before</th><th>in units after</th></tr>"
        "</thead><tbody>"
    )
    for n in truth["needles"]:
        yield (
            f'<tr class="nd-{esc(n["status"])}"><td>{esc(n["id"])}</td><td><code>{esc(n["pattern"])}'
            f'</code></td><td>{esc(n["status"])}</td><td>{esc(", ".join(n["before"]))}</td>'
            f'<td>{esc(", ".join(n["after"]))}</td></tr>'
        )
    yield "</tbody></table>"


def _badges(rec: Mapping[str, Any]) -> str:
    out = ""
    if rec.get("p1"):
        out += ' <span class="badge p1" title="priority 1: kept verbatim">P1</span>'
    if rec.get("needles"):
        out += (
            f' <span class="badge needle" title="needles: {esc(", ".join(rec["needles"]))}">'
            "needle</span>"
        )
    return out


def _who(rec: Mapping[str, Any]) -> str:
    name = f" &middot; {esc(rec['name'])}" if rec.get("name") else ""
    return f'<span class="role r-{esc(rec["role"])}">{esc(rec["role"])}</span> {esc(rec["type"])}{name}'


def unit_text(rec: Mapping[str, Any]) -> str:
    """A unit record as one text: reasoning, content and tool calls."""
    parts = []
    if rec.get("reasoning"):
        parts.append(f"[reasoning]\n{rec['reasoning']}\n[/reasoning]")
    if rec.get("content"):
        parts.append(str(rec["content"]))
    for c in rec.get("tool_calls") or ():
        parts.append(f"-> {c.get('name')}({c.get('arguments')})  [call {c.get('id')}]")
    if rec.get("images"):
        parts.append(f"[{rec['images']} image(s)]")
    return "\n".join(parts)


def _text(text: str) -> str:
    """Escaped text, folded after PREVIEW_CHARS behind a "show all" switch."""
    if len(text) <= PREVIEW_CHARS:
        return f'<pre class="text">{esc(text)}</pre>'
    return (
        f'<details class="long"><summary><pre class="text preview">{esc(text[:PREVIEW_CHARS])}'
        f'&hellip;</pre><span class="more">show all {len(text):,} characters</span></summary>'
        f'<pre class="text">{esc(text)}</pre></details>'
    )


def _diff(old: str, new: str) -> str:
    a, b = old.splitlines(), new.splitlines()
    cut = len(a) > DIFF_MAX_LINES or len(b) > DIFF_MAX_LINES
    lines = difflib.unified_diff(a[:DIFF_MAX_LINES], b[:DIFF_MAX_LINES], "before", "after", lineterm="", n=1)
    out = []
    for line in lines:
        cls = "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
        if line.startswith("@@"):
            cls = "hunk"
        out.append(f'<span class="{cls}">{esc(line)}</span>')
    if cut:
        out.append(f'<span class="hunk">(diff of the first {DIFF_MAX_LINES:,} lines)</span>')
    return (
        '<details class="diff-box"><summary>diff</summary><pre class="diff">'
        + "\n".join(out)
        + "</pre></details>"
    )


def _units_before(
    k: int, before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> Iterator[str]:
    index = {rec["id"]: j for j, rec in enumerate(after)}
    counts = dict.fromkeys(STATUSES, 0)
    for rec in before:
        counts[rec["status"]] = counts.get(rec["status"], 0) + 1
    yield '<h3>Before, unit by unit</h3><p class="counts">' + " ".join(
        f'<span class="badge st-{esc(s)}" data-count-status="{esc(s)}" data-count="{n}">'
        f"{esc(s)} {n:,}</span>"
        for s, n in counts.items()
    ) + "</p>"
    yield (
        '<table class="units"><colgroup><col class="c-n"><col class="c-unit"><col class="c-tok">'
        '<col class="c-how"><col></colgroup><thead><tr><th>#</th><th>unit</th><th>tokens</th>'
        "<th>what happened</th><th>content</th></tr></thead><tbody>"
    )
    for i, rec in enumerate(before):
        st = esc(rec["status"])  # the report may come from anywhere: every field is escaped
        j = index.get(rec.get("to")) if rec.get("to") is not None else None
        target = ""
        if j is not None and st != "kept":
            a = after[j]
            label = {"summarized": "into summary", "archived": "named in"}.get(st, "now")
            target = f' {label} <a href="#t{k}-a{j}">{esc(a["id"])}</a> ({_int(a.get("tokens"))} tokens)'
        how = f'<span class="badge st-{st}">{st}</span>'
        if rec.get("strategy"):
            how += f' <span class="by">by {esc(rec["strategy"])}</span>'
        how += target
        if rec.get("ref"):
            how += f'<div class="ref">{esc(rec["ref"])}</div>'
        extra = ""
        if j is not None and st == "condensed":
            extra = _diff(str(rec.get("content") or ""), str(after[j].get("content") or ""))
        elif j is not None and st == "masked":
            extra = '<div class="now">now: ' + _text(unit_text(after[j])) + "</div>"
        yield (
            f'<tr class="unit before-unit st-{st}" id="t{k}-b{i}" data-unit-id="{esc(rec["id"])}" '
            f'data-status="{st}"><td class="num">{i}</td><td>{esc(rec["id"])}<br>{_who(rec)}'
            f'{_badges(rec)}</td><td class="num">{_int(rec.get("tokens"))}</td><td>{how}</td>'
            f"<td>{_text(unit_text(rec))}{extra}</td></tr>"
        )
    yield "</tbody></table>"


def _units_after(
    k: int, before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> Iterator[str]:
    index = {rec["id"]: i for i, rec in enumerate(before)}
    counts: dict[str, int] = dict.fromkeys(_AFTER_STATUSES, 0)
    for rec in after:
        counts[rec["status"]] = counts.get(rec["status"], 0) + 1
    yield '<h3>After: the compacted transcript</h3><p class="counts">' + " ".join(
        f'<span class="badge st-{esc(s)}">{esc(s)} {n:,}</span>' for s, n in counts.items() if n
    ) + "</p>"
    yield '<ol class="after" start="0">'
    for j, rec in enumerate(after):
        st = esc(rec["status"])
        i = index.get(rec["id"])
        origin = ""
        if st == "kept" and i is not None:
            body = (
                f'<div class="same">verbatim, as <a href="#t{k}-b{i}">#{i}</a> before: '
                f"{esc(unit_text(rec)[:RECORD_PREVIEW_CHARS])}&hellip;</div>"
                if len(unit_text(rec)) > RECORD_PREVIEW_CHARS
                else _text(unit_text(rec))
            )
        else:
            body = _text(unit_text(rec))
        if rec.get("from") and st in ("summary", "placeholder"):
            links = ", ".join(
                f'<a href="#t{k}-b{index[x]}">{esc(x)}</a>' if x in index else esc(x)
                for x in rec["from"][:50]
            )
            more = f" and {len(rec['from']) - 50:,} more" if len(rec["from"]) > 50 else ""
            origin = f'<div class="from">stands for {len(rec["from"]):,} unit(s): {links}{more}</div>'
        by = f' <span class="by">by {esc(rec["strategy"])}</span>' if rec.get("strategy") else ""
        yield (
            f'<li class="unit after-unit st-{st}" id="t{k}-a{j}" data-unit-id="{esc(rec["id"])}" '
            f'data-status="{st}"><div class="head">{esc(rec["id"])} &middot; {_who(rec)}'
            f'{_badges(rec)} &middot; {_int(rec.get("tokens"))} tokens &middot; '
            f'<span class="badge st-{st}">{st}</span>{by}</div>{origin}{body}</li>'
        )
    yield "</ol>"


# ------------------------------------------------------------------------------ final prompt


def prompt_records(text: str) -> list[Any]:
    """The written transcript as records: a JSON document's messages (with the rest of the
    envelope first), an array's items, or one record per JSON line."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        out: list[Any] = []
        for line in text.splitlines():
            if line.strip():
                try:
                    out.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    out.append(line)
        return out
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in ("messages", "conversations", "units"):
            if isinstance(doc.get(key), list):
                head = {k: v for k, v in doc.items() if k != key}
                return ([head] if head else []) + list(doc[key])
    return [doc]


def _label(rec: Any) -> str:
    if not isinstance(rec, dict):
        return type(rec).__name__
    bits = []
    for key in ("type", "role", "from"):
        if isinstance(rec.get(key), str):
            bits.append(rec[key])
    for key in ("message", "payload"):
        inner = rec.get(key)
        if isinstance(inner, dict):
            for sub in ("role", "type"):
                if isinstance(inner.get(sub), str) and inner[sub] not in bits:
                    bits.append(inner[sub])
    return " / ".join(bits) or "record"


def readable(value: Any, pad: str = "") -> list[str]:
    """A JSON value as indented lines people read: keys, `- ` items, multi-line strings as
    `| ` lines (no escaped newlines)."""
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        lines = []
        for key, v in value.items():
            if _scalar(v):
                lines.append(f"{pad}{key}: {_show(v)}")
            else:
                lines.append(f"{pad}{key}:")
                lines.extend(readable(v, pad + "  "))
        return lines
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        lines = []
        for v in value:
            if _scalar(v):
                lines.append(f"{pad}- {_show(v)}")
            else:
                sub = readable(v, pad + "  ")
                lines.append(pad + "- " + sub[0][len(pad) + 2 :])
                lines.extend(sub[1:])
        return lines
    if isinstance(value, str) and "\n" in value:
        return [f"{pad}| {line}" for line in value.split("\n")]
    return [pad + _show(value)]


def _scalar(v: Any) -> bool:
    return not isinstance(v, (dict, list)) and not (isinstance(v, str) and "\n" in v) or v in ({}, [])


def _show(v: Any) -> str:
    if isinstance(v, str):
        return v
    if v == {} or v == []:
        return "{}" if isinstance(v, dict) else "[]"
    return orjson.dumps(v).decode()


_GIST_KEYS = frozenset(("content", "text", "value", "output", "arguments", "summary", "thinking", "input"))


def gist(rec: Any, limit: int = RECORD_PREVIEW_CHARS) -> str:
    """What a record says, for its one-line preview: the text under content-like keys (a
    message's content, a tool call's arguments), not the envelope (ids, timestamps, paths)."""
    found: list[str] = []
    size = 0

    def walk(v: Any, under: bool) -> None:
        nonlocal size
        if size > limit:
            return
        if isinstance(v, dict):
            for k, x in v.items():
                if under and (k == "type" or k.lower().endswith("id")):
                    continue  # a block's kind and ids say nothing to a reader
                walk(x, under or k in _GIST_KEYS)
        elif isinstance(v, list):
            for x in v:
                walk(x, under)
        elif under and isinstance(v, str) and v.strip():
            found.append(v)
            size += len(v)
        elif under and isinstance(v, (int, float)) and not isinstance(v, bool):
            found.append(str(v))

    walk(rec, False)
    flat = " ".join(" ".join(found).split()) if found else " ".join(readable(rec)[:8])
    flat = " ".join(flat.split())
    return flat[:limit] + ("…" if len(flat) > limit else "")


def _prompt(prompt: Mapping[str, Any]) -> Iterator[str]:
    records = prompt_records(str(prompt.get("text") or ""))
    yield (
        f"<h3>Final prompt, as written ({esc(prompt.get('format'))}, {len(records):,} records)</h3>"
        '<ol class="prompt" start="0">'
    )
    for rec in records:
        text = "\n".join(readable(rec))
        short = gist(rec)
        yield (
            f'<li class="record"><details><summary><b>{esc(_label(rec))}</b> {esc(short)}</summary>'
            f'<pre class="text">{esc(text)}</pre></details></li>'
        )
    yield "</ol>"


_CSS = """
:root{--bg:#fff;--fg:#1d2329;--mute:#5f6b76;--line:#dde3e8;--kept:#e8f1fb;--condensed:#fff4d6;
--masked:#f0e8fb;--summarized:#e4f6ea;--archived:#fbe6e6;--summary:#d2f0dc;--placeholder:#f6dada}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,
sans-serif;color:var(--fg);background:var(--bg)}header{position:sticky;top:0;z-index:5;
background:#f7f9fb;border-bottom:1px solid var(--line);padding:8px 16px}h1{font-size:18px;margin:0 0 4px}
h2{font-size:17px;margin:24px 0 4px;word-break:break-all}h3{font-size:15px;margin:18px 0 6px}
main{padding:0 16px 40px}.controls label{margin-right:6px}.controls button{margin-left:4px}
.toc{margin:6px 0 0;max-height:120px;overflow:auto}.lead{margin:2px 0 8px;color:var(--mute)}
.facts{display:flex;flex-wrap:wrap;gap:4px 18px;margin:0}.facts .k{color:var(--mute)}
.facts b{overflow-wrap:anywhere}.steps{width:auto}.steps td,.steps th{padding:3px 12px}.regions{max-width:1000px}
.bar-row{display:grid;grid-template-columns:130px 1fr;gap:2px 8px;align-items:center;margin:6px 0}
.bar{position:relative;height:22px;background:#f1f3f5;border:1px solid var(--line);display:flex}
.seg{height:100%}.mark{position:absolute;top:-4px;bottom:-4px;border-left:2px solid #d0312d}
.mk-target{border-left:2px dashed #d0312d}.legend{grid-column:2;font-size:12px;color:var(--mute)}
.key{display:inline-block;width:10px;height:10px;margin:0 3px 0 8px}
.rg-system{background:#4e79a7}.rg-tools{background:#f28e2b}.rg-summary{background:#59a14f}
.rg-history{background:#76b7b2}.rg-unlogged{background:#bab0ac}.rg-reserved-output{background:
repeating-linear-gradient(45deg,#e15759,#e15759 4px,#f4b6b7 4px,#f4b6b7 8px)}
.note{color:var(--mute);font-size:12px}table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top}
.units{table-layout:fixed}.units col.c-n{width:48px}.units col.c-unit{width:230px}
.units col.c-tok{width:80px}.units col.c-how{width:240px}
.units tbody tr,li.unit,li.record{content-visibility:auto;contain-intrinsic-size:auto 60px}
th{background:#f7f9fb;position:sticky;top:0}.num{text-align:right;white-space:nowrap}
.steps tr.idle{color:var(--mute)}.units td:nth-child(2){overflow-wrap:anywhere}
.units td:nth-child(4){overflow-wrap:anywhere}[id]{scroll-margin-top:90px}
pre{margin:0;white-space:pre-wrap;word-break:break-word;font:12px/1.4 ui-monospace,SFMono-Regular,
Menlo,Consolas,monospace}pre.text{max-height:480px;overflow:auto}details.long>summary{list-style:none;
cursor:pointer}details.long[open]>summary .preview{display:none}.more{color:#2a6fb0;font-size:12px}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;border:1px solid var(--line)}
.st-kept{background:var(--kept)}.st-condensed{background:var(--condensed)}.st-masked{background:var(--masked)}
.st-summarized{background:var(--summarized)}.st-archived{background:var(--archived)}
.st-summary{background:var(--summary)}.st-placeholder{background:var(--placeholder)}
tr.unit.st-kept{background:none}.p1{background:#ffd54f;font-weight:700}.needle{background:#ff8a65}
.role{font-weight:600}.r-user{color:#1f6feb}.r-assistant{color:#8250df}.r-tool{color:#9a6700}
.r-system{color:#cf222e}.ref,.by{color:var(--mute);font-size:12px}.diff .add{color:#116329;
background:#dafbe1;display:block}.diff .del{color:#82071e;background:#ffebe9;display:block}
.diff .hunk{color:#8250df;display:block}.diff .ctx{display:block}.now{margin-top:4px}
ol.after,ol.prompt{padding-left:44px}li.unit{border-bottom:1px solid var(--line);padding:3px 4px}
li.unit.st-kept{background:none}.head{font-size:12px}.from{font-size:12px;margin:2px 0}
.same{color:var(--mute);font-size:12px}li.record summary{cursor:pointer;white-space:nowrap;
overflow:hidden;text-overflow:ellipsis}.hide-kept .st-kept.unit,.hide-condensed .st-condensed.unit,
.hide-masked .st-masked.unit,.hide-summarized .st-summarized.unit,.hide-archived .st-archived.unit{display:none}
"""

_SCRIPT = """
(function(){
  var body=document.body;
  document.querySelectorAll('.controls input[data-status]').forEach(function(box){
    box.addEventListener('change',function(){
      body.classList.toggle('hide-'+box.getAttribute('data-status'),!box.checked);
    });
  });
  document.querySelectorAll('.controls button[data-action]').forEach(function(b){
    b.addEventListener('click',function(){
      var open=b.getAttribute('data-action')==='open';
      document.querySelectorAll('main details').forEach(function(d){d.open=open;});
    });
  });
})();
"""
