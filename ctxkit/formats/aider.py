"""aider's chat history markdown (`.aider.chat.history.md`), one transcript per session.

aider appends to the file as it goes (`aider/io.py`): `\\n# aider chat started at <time>\\n\\n`
opens a session; each line of a user input is `#### <line>  ` (an empty input is `<blank>`);
the model's reply is `\\n<reply>\\n\\n`; its own notices (`/run` and `/test` output, files added,
edits applied, commits, token and cost reports, questions and answers) are `> <line>  `.

What the model sees: when aider restores a chat (`--restore-chat-history`,
`utils.split_chat_history_markdown`) it sends the `#### ` lines as user messages and the text
between as assistant messages, and leaves the `> ` lines out. So do we: user lines and replies
are units; `> ` blocks are aider's terminal log, not context, and are kept verbatim beside the
unit they follow (counted as `aider:output` records, never as tokens), as are the session
header and anything before the first marker (a website page's front matter and
`<div class="chat-transcript">` wrappers). A `> Tokens: N sent, M received` report is the
provider's count of the call that produced the reply before it (exact figures only: newer
aider rounds them to `2.4k`, which is left out).

aider ends every line it marks with two spaces: a `#### ` or `> ` line of a reply that lacks
them is a heading or quote of the reply (a markdown file being edited), and a marked line is a
marker even inside a code fence, as aider's own parser reads it (a reply cut off by the user
leaves its fence open, and the next input must not become part of it). In a file whose
trailing spaces were trimmed (by an editor) the markers are all there is, and lines inside a
fenced code block of a reply are reply text when its closing fence comes before the next
session.

Written back: an untouched session is its own text, byte for byte; a changed unit is rendered
in aider's shape (`#### ` lines, a reply between blank lines); a unit of another format's tool
output or system prompt becomes `> ` lines, a tool call a line of the reply.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from ctxkit.errors import InputError
from ctxkit.formats.base import Format
from ctxkit.formats.common import Source, finish, is_reasoning_only, joins, text_lines
from ctxkit.model import Transcript, Unit

NAME = "aider"
APP_LABEL = "aider chat history"
OMITS = "aider's system prompt, repo map and the files added to the chat"
SUFFIX = ".aider.chat.history.md"

HEADER = "# aider chat started at "
_WRAPPER_OPEN = '<div class="chat-transcript" markdown="1">'
_WRAPPERS = (_WRAPPER_OPEN, "</div>")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_VERSION = re.compile(r"^> Aider v(\S+)")
_MODEL = re.compile(r"^> (?:Main model|Models?): (\S+)")
_TOKENS = re.compile(
    r"^> Tokens: (?P<sent>[\d,]+(?:\.\d+)?k?) sent"
    r"(?:, (?P<write>[\d,]+(?:\.\d+)?k?) cache write)?"
    r"(?:, (?P<hit>[\d,]+(?:\.\d+)?k?) cache hit)?"
    r", (?P<recv>[\d,]+(?:\.\d+)?k?) received"
)


def sniff(first_line: bytes) -> bool:
    """Whether a file whose first non-blank line is this one looks like an aider history."""
    line = first_line.lstrip()
    return (
        line.startswith(HEADER.encode())
        or line.startswith(b"#### ")
        or line.startswith(b"> ")
        or line.rstrip() in (b"---", b">")
        or line.startswith(_WRAPPER_OPEN.encode())
    )


_MARKED_USER = re.compile(rb"^#### .*  \r?$", re.M)


def looks_like(head: bytes) -> bool:
    """Whether the start of a `*.md` file in a directory argument is an aider history: a
    session header, aider's website wrapper, or a `#### ` line as aider writes it (front matter
    alone, common to markdown pages, is not enough)."""
    return HEADER.encode() in head or _WRAPPER_OPEN.encode() in head or _MARKED_USER.search(head) is not None


# ---------------------------------------------------------------- reading


def _body(line: str) -> str:
    return line.rstrip("\r\n")


def _is_tool(body: str) -> bool:
    return body.startswith("> ") or body.rstrip() == ">"


def _closing_fence(bodies: list[str], start: int, mark: str, unclosed: dict[tuple[str, int], int]) -> int | None:
    """The index of the fence that closes the one opened at `start`, before the next session.

    `unclosed` remembers where a search found none (the next header), so that a reply full of
    unclosed fences is not searched to the end of its session again and again."""
    char, size = mark[0], len(mark)
    for (c, n), stop in unclosed.items():
        if c == char and n <= size and start < stop:
            return None
    for j in range(start + 1, len(bodies)):
        body = bodies[j]
        if body[:1] not in (" ", char, "#"):
            continue
        if body.startswith(HEADER):
            unclosed[(char, size)] = j
            return None
        m = _FENCE.match(body)
        if m and m.group(1)[0] == char and len(m.group(1)) >= size and not m.group(2).strip():
            return j
    unclosed[(char, size)] = len(bodies)
    return None


def _segments(lines: list[str]) -> list[tuple[str, list[str]]]:
    """The file cut into (kind, lines): head, header, user, assistant, tool, wrapper. Blank
    lines go to the segment they belong to in aider's writing: a reply or header keeps one
    after it, the rest lead the next segment."""
    bodies = [line.rstrip("\r\n") for line in lines]
    wrapped = any(body.strip() == _WRAPPER_OPEN for body in bodies if body[:1] in ("<", " "))
    # aider ends every line it marks with two spaces (a markdown line break): a `#### ` heading
    # or `> ` quote in a reply has none. A file whose trailing spaces were trimmed (by an
    # editor) is read by the markers alone.
    marked = any(body.endswith("  ") and body.startswith(("#### ", "> ")) for body in bodies if body[:1] in ("#", ">"))
    segs: list[tuple[str, list[str]]] = []
    blanks: list[str] = []
    fence_end = -1
    unclosed: dict[tuple[str, int], int] = {}
    i = 0
    n = len(lines)

    def start(kind: str, line: str) -> None:
        nonlocal blanks
        if segs and blanks and segs[-1][0] in ("assistant", "header"):
            segs[-1][1].append(blanks[0])
            blanks = blanks[1:]
        segs.append((kind, [*blanks, line]))
        blanks = []

    while i < n:
        line = lines[i]
        body = bodies[i]
        cur = segs[-1][0] if segs else None
        if i <= fence_end:
            segs[-1][1].extend(blanks)
            segs[-1][1].append(line)
            blanks = []
            i += 1
            continue
        if not body.strip():
            blanks.append(line)
            i += 1
            continue
        first = body[0]
        if first not in "#><" and cur == "assistant":
            kind = "assistant"  # the common case, a line of a reply
        elif body.startswith(HEADER):
            kind = "header"
        elif (body.startswith("#### ") or body.rstrip() == "####") and (body.endswith("  ") or not marked):
            kind = "user"
        elif _is_tool(body) and (body.endswith("  ") or not marked):
            kind = "tool"
        elif wrapped and body.strip() in _WRAPPERS:
            kind = "wrapper"
        elif cur == "tool" and not blanks:
            kind = "tool"  # a notice of several lines: aider marks only its first
        elif cur is None or cur == "head":
            kind = "head"
        else:
            kind = "assistant"
        if kind == "assistant" and not marked and first in "`~ ":
            m = _FENCE.match(body)
            if m:
                end = _closing_fence(bodies, i, m.group(1), unclosed)
                if end is not None:
                    fence_end = end
        if kind in ("assistant", "head", "tool") and cur == kind and (kind != "tool" or not blanks):
            segs[-1][1].extend(blanks)
            segs[-1][1].append(line)
            blanks = []
        elif kind == "user" and cur == "user" and not blanks:
            segs[-1][1].append(line)
        else:
            start(kind, line)
        i += 1
    if blanks:
        if segs:
            segs[-1][1].extend(blanks)
        else:
            segs.append(("head", blanks))
    return segs


def _content_line(line: str, newline: str) -> str:
    """A line of a message without its end: a file written with `\n` keeps a `\r` of the text."""
    return _body(line) if newline == "\r\n" else line.removesuffix("\n")


def _user_text(lines: list[str], newline: str = "\r\n") -> str:
    out = []
    for line in lines:
        body = _content_line(line, newline)
        if not body.strip():
            continue
        text = body[5:] if body.startswith("#### ") else ""
        out.append(text[:-2] if text.endswith("  ") else text)
    return "\n".join(out)


def _reply_text(lines: list[str], newline: str = "\r\n") -> str:
    bodies = [_content_line(line, newline) for line in lines]
    while bodies and not bodies[0].strip():
        bodies.pop(0)
    while bodies and not bodies[-1].strip():
        bodies.pop()
    return "\n".join(bodies)


def _count(text: str | None) -> int | None:
    """An exact token figure (`7,373`), or None for a rounded one (`2.4k`)."""
    if text is None or text.endswith("k"):
        return None
    try:
        return int(text.replace(",", ""))
    except ValueError:
        return None


def read_text(text: str, src: Source) -> list[Transcript]:
    """The sessions of a chat history, one transcript each."""
    segs = _segments(text_lines(text))
    if not any(kind in ("header", "user", "tool") for kind, _ in segs):
        raise InputError(
            src.path,
            1,
            "not an aider chat history: no `# aider chat started at` line, no `#### ` user "
            "line and no `> ` notice (use --from to force another format)",
            text[:60],
        )
    # The file's line ends are its first line's (a reply may hold a "\r\n" of its own).
    first_end = text.find("\n")
    newline = "\r\n" if first_end > 0 and text[first_end - 1] == "\r" else "\n"
    sessions: list[list[tuple[str, list[str]]]] = [[]]
    for seg in segs:
        if seg[0] == "header":
            sessions.append([])
        sessions[-1].append(seg)
    first, rest = sessions[0], sessions[1:]
    if rest and not any(kind in ("user", "assistant") for kind, _ in first):
        rest[0][:0] = first  # text before the first header (front matter, blank lines)
        sessions = rest
    elif not first:
        sessions = rest
    out = []
    line_no = 1
    keys: dict[str, int] = {}
    for k, session in enumerate(sessions):
        at = line_no  # the session's header line, or its first line
        for kind, seg_lines in session:
            if kind == "header":
                at += next(n for n, x in enumerate(seg_lines) if x.strip())
                break
            at += len(seg_lines)
        else:
            at = line_no
        # A session is named by when it started (its header), not by where it sits: compaction
        # moves every later session up, the archive must still tell them apart.
        key = _session_key(session) or str(at)
        keys[key] = keys.get(key, 0) + 1
        if keys[key] > 1:
            key = f"{key}.{keys[key]}"
        tid = src.tid if len(sessions) == 1 else f"{src.tid}#{key}"
        out.append(_session(session, src, tid, newline, at))
        line_no += sum(len(seg_lines) for _, seg_lines in session)
        if k == 0 and text.startswith("\ufeff"):
            out[0].metadata["bom"] = True
    return out


def _session_key(segs: list[tuple[str, list[str]]]) -> str | None:
    """When a session started, from its header (`2024-08-06T08:55:14`); None without one."""
    for kind, seg_lines in segs:
        if kind == "header":
            line = next((x for x in seg_lines if x.startswith(HEADER)), "")
            stamp = line[len(HEADER):].strip()
            return stamp.replace(" ", "T") or None
    return None


def _session(segs: list[tuple[str, list[str]]], src: Source, tid: str, newline: str, line_no: int) -> Transcript:
    units: list[Unit] = []
    head: list[str] = []
    after: dict[str, list[str]] = {}
    calls: list[dict[str, Any]] = []
    started: str | None = None
    about: dict[str, str] = {}  # aider's version and model, from its start-up notices
    for index, (kind, seg_lines) in enumerate(segs):
        chunk = "".join(seg_lines)
        src.stats.records += 1
        if kind in ("user", "assistant"):
            uid = f"u{len(units)}"
            content = _user_text(seg_lines, newline) if kind == "user" else _reply_text(seg_lines, newline)
            units.append(finish(Unit(id=uid, role=kind, content=content, raw=chunk, group=index)))
            continue
        if kind == "header":
            started = started or _body(next(x for x in seg_lines if x.strip()))[len(HEADER):].strip()
        if kind == "tool":
            src.stats.skip("aider:output")
            for line in seg_lines:
                for pattern, key in ((_VERSION, "version"), (_MODEL, "model")):
                    found = pattern.match(_body(line))
                    if found and key not in about:
                        about[key] = found.group(1).rstrip(",")
                m = _TOKENS.match(_body(line))
                if m and units and units[-1].role == "assistant":
                    sent = _count(m.group("sent"))
                    if sent:
                        calls.append({
                            "after_unit": len(units) - 2,
                            "input_tokens": sent,
                            "cache_read_tokens": _count(m.group("hit")) or 0,
                            "cache_write_tokens": _count(m.group("write")) or 0,
                            "output_tokens": _count(m.group("recv")) or 0,
                        })
        else:
            src.stats.skip(f"aider:{kind}")
        if units:
            after.setdefault(units[-1].id, []).append(chunk)
        else:
            head.append(chunk)
    metadata: dict[str, Any] = {"aider_text": {"head": "".join(head), "after": {k: "".join(v) for k, v in after.items()}}}
    if newline != "\n":
        metadata["newline"] = newline
    if started:
        metadata["started_at"] = started
    metadata.update(about)
    if calls:
        metadata["provider_usage"] = {"source": NAME, "calls": calls}
    return Transcript(
        units=units,
        id=tid,
        source_format=NAME,
        layout="lines",
        line=line_no if tid != src.tid else None,
        metadata=metadata,
    )


# ---------------------------------------------------------------- writing


def _started(t: Transcript) -> str:
    stamp = t.metadata.get("started_at")
    if isinstance(stamp, str) and stamp:
        return stamp
    ts = next((u.timestamp for u in t.units if u.timestamp is not None), None)
    return datetime.fromtimestamp(ts or 0.0, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _user(text: str) -> str:
    lines = text.rstrip().split("\n") if text.strip() else ["<blank>"]
    return "\n" + "".join(f"#### {line}  \n" for line in lines)


def _notice(text: str) -> str:
    lines = text.strip().split("\n")
    return "".join(f"> {line.strip()}".rstrip() + "  \n" for line in lines)


def _reply(text: str) -> str:
    return "\n" + text.strip() + "\n\n"


def _render(u: Unit) -> tuple[str, str]:
    """(kind, text) of a unit in aider's shape."""
    if u.role == "user":
        return "user", u.content
    if u.role == "assistant":
        calls = [f"[tool call {c.id}: {c.name} {c.arguments}]".rstrip() for c in u.tool_calls]
        return "assistant", "\n\n".join(p for p in (u.content.strip(), *calls) if p)
    label = f"{u.name}: " if u.role == "tool" and u.name else ""
    return "tool", label + u.content


def write_text(t: Transcript) -> str:
    """The markdown of one session (see the module doc)."""
    same = t.source_format == NAME
    kept = t.metadata.get("aider_text") if same else None
    if not isinstance(kept, dict):
        kept = {"head": f"\n{HEADER}{_started(t)}\n\n", "after": {}}
    after = kept.get("after") or {}
    parts: list[tuple[str, str]] = []  # (kind, text); kind "raw" is text written as it is
    for u in t.units:
        raw_ok = same and isinstance(u.raw, str) and not joins(u)
        if raw_ok:
            parts.append(("raw", u.raw))
        elif not is_reasoning_only(u):
            kind, text = _render(u)
            last = parts[-1] if parts else None
            if joins(u) and last is not None and last[0] == kind:
                parts[-1] = (kind, f"{last[1].rstrip()}\n\n{text.strip()}")
            elif text.strip() or kind != "assistant":
                parts.append((kind, text))
        if same and u.source is not None and u.id in after:
            parts.append(("raw", after[u.id]))
    newline = t.metadata.get("newline") if same else None
    out = [kept.get("head") or ""]
    if same and t.metadata.get("bom"):
        out[0] = "\ufeff" + out[0]
    for kind, text in parts:
        if kind == "raw":
            out.append(text)
            continue
        built = _user(text) if kind == "user" else _reply(text) if kind == "assistant" else _notice(text)
        out.append(built.replace("\n", "\r\n") if newline == "\r\n" else built)
    return "".join(out)


# ---------------------------------------------------------------- validating


def validate(data: Any) -> list[str]:
    """The text reads as aider chat history sessions, each opened by its header."""
    from ctxkit.errors import InputError
    from ctxkit.formats import read_text

    text = data.decode("utf-8") if isinstance(data, bytes) else str(data)
    try:
        sessions = read_text(text, "aider")
    except InputError as err:
        return [str(err)]
    headers = sum(1 for line in text.split("\n") if line.startswith(HEADER))
    # a page of aider's website holds one session and no header
    return [] if headers in (len(sessions), len(sessions) - 1) else [
        f"{len(sessions)} session(s) but {headers} `{HEADER.strip()}` line(s)"]


# suffixes: its *.md files are told by their first bytes
FORMAT = Format.of_module(__name__, shape="text", read=read_text, write=write_text, agent="aider",
                          holds_tools=False, suffixes=())
