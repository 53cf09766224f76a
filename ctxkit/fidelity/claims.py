"""Precision: every claim a compaction's own text makes, checked against the ORIGINAL log.

A model believes what a summary says. This module reads the text a compaction put into the
context (summaries, fresh-start recaps, placeholders: every unit that is not in the original,
and the lines a compaction added to a unit it changed), takes out each statement a model would
act on, and verifies it against the original transcript as `fidelity.evidence` reads it:

| kind | the claim | true when the original shows |
|---|---|---|
| file | `path (edited)`, `(created)`, `(written)`, `(deleted)`, `(read)`, `(ran)`; `read: a, b`; "edited x.py" | the string is a path (written as one, or a call acted on it) and a call wrote it (edited: modified a file that was there; created: made it), deleted it, named it, ran it |
| error | `tool(command) -> exit N: line`, `-> error: line`, `error: line`, `reported by the user: line` | that command's result flagged as failed (is_error, that exit code), with that line in it |
| command | `tool(command) -> ok[: line[ (and N more lines)]]`, `-> no match (exit 1)` | that command ran and its result was not failed (and shows the line, with N more lines of text) |
| fix | `(fixed: ...)` after an error | a later run of the same call that did not fail |
| task | `[pending] item`, `[in_progress]`, `[completed]`, items under a pending or next-step heading | the item's latest state in the todo lists agrees; an item in no list was said by the user or the assistant, not text of a file or of injected instructions |
| quote | the user's requests, the assistant's words (request, task, current-work, notes sections) | the text (each part of a `[...]` cut) is in a message of that role |
| current | the text under a "current / last request" heading | it is the last request the user typed before the summary's place, not a command record, a slash command or a tool error |
| order | a summary's place ("what follows is verbatim unless marked") | no message kept after it happened before an event it summarizes or speaks of |
| placeholder | `[tool output, N bytes, exit 1: line, archived as ref]` in place of a tool's output | that output was that tool's, of N bytes, and failed so when it says so |

Precision is true claims over all claims; a claim the log cannot back is false. Nothing here
imports `ctxkit.facts`, `ctxkit.summarizers` or `ctxkit.strategies`: the judge does not share
code with what it judges (a test checks the imports).

    >>> from ctxkit.model import Transcript, ToolCall, Unit
    >>> orig = Transcript([
    ...     Unit("u1", "user", content="Fix the test"),
    ...     Unit("a1", "assistant", tool_calls=[ToolCall("c1", "bash", '{"command": "cp a.py a.py.bak"}')]),
    ...     Unit("r1", "tool", tool_call_id="c1", content="<returncode>0</returncode>"),
    ...     Unit("a2", "assistant", content="Done."),
    ... ])
    >>> small = Transcript([
    ...     Unit("u1", "user", content="Fix the test"),
    ...     Unit("s", "user", type="summary", content="## Files and code\\n- a.py.bak (edited)\\n- a.py (read)"),
    ...     Unit("a2", "assistant", content="Done."),
    ... ])
    >>> score = check(orig, small)
    >>> score.total, score.false, [c.text for c in score.false_claims]
    (3, 1, ['a.py.bak (edited)'])
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.call_effects import clean_path, looks_like_path, same_path
from ctxkit.fidelity.evidence import Act, Log, is_typed_request, norm, read_log
from ctxkit.log_events import is_output, text_lines
from ctxkit.model import Transcript, Unit

KINDS = ("file", "error", "command", "fix", "task", "quote", "current", "order", "placeholder")
QUOTE_CHARS = 200  # a claim or an evidence quote is cut to this many characters


def _cut(text: str, chars: int = QUOTE_CHARS) -> str:
    flat = norm(text)
    return flat if len(flat) <= chars else flat[: chars - 3].rstrip() + "..."


@dataclass(frozen=True)
class Claim:
    """One statement of a compaction's text and the verdict on it."""

    kind: str
    text: str  # the claim as the compacted context says it
    unit: str  # the id of the compacted unit that says it
    position: int  # that unit's index in the compacted transcript
    true: bool
    why: str  # what backs it, or why it is false
    evidence: str = ""  # the original's words that show it
    at: tuple[int, ...] = ()  # indices of the original units that show it

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "claim": self.text, "true": self.true, "why": self.why,
                "evidence": self.evidence, "unit": self.unit, "position": self.position,
                "at": list(self.at)}


@dataclass
class ClaimScore:
    """Every claim of one compacted transcript with its verdict."""

    claims: list[Claim] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.claims)

    @property
    def false_claims(self) -> list[Claim]:
        return [c for c in self.claims if not c.true]

    @property
    def false(self) -> int:
        return len(self.false_claims)

    @property
    def precision(self) -> float:
        """True claims over all claims; 1.0 when the text makes none."""
        return 1.0 - self.false / self.total if self.total else 1.0

    def by_kind(self) -> dict[str, tuple[int, int]]:
        """kind -> (claims, false claims)."""
        total = Counter(c.kind for c in self.claims)
        bad = Counter(c.kind for c in self.claims if not c.true)
        return {k: (total[k], bad[k]) for k in KINDS if total[k]}

    def to_dict(self, claims: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "total": self.total,
            "false": self.false,
            "precision": round(self.precision, 4),
            "by_kind": {k: {"claims": n, "false": f} for k, (n, f) in self.by_kind().items()},
        }
        if claims:
            d["false_claims"] = [c.to_dict() for c in self.false_claims]
        return d


# --- what a compaction wrote ---------------------------------------------------------------------


def inserted(original: Transcript, compacted: Transcript) -> list[tuple[int, Unit, str]]:
    """(position, unit, text) of what the compaction wrote: whole units the original does not
    have, and the lines a compaction added to a unit it changed."""
    by_id: dict[str, Unit] = {}
    for u in original.units:
        by_id.setdefault(u.id, u)
    contents = {u.content for u in original.units}
    out = []
    for pos, u in enumerate(compacted.units):
        o = by_id.get(u.id)
        if o is not None and o.content == u.content:
            continue
        if o is None and u.content in contents and u.type != "summary":
            continue  # a kept message under another id (a format that numbers its units)
        if o is None:
            text = u.content
        else:
            old = norm(o.content)
            text = "\n".join(line for line in u.content.splitlines() if line.strip() and norm(line) not in old)
        if text.strip():
            out.append((pos, u, text))
    return out


# --- reading claims out of text ------------------------------------------------------------------

_ACTS = r"created|edited|written|wrote|read|ran|run|executed|deleted|removed|moved|modified|updated|viewed|changed|used"
_ACTION_OF = {"wrote": "written", "run": "ran", "executed": "ran", "removed": "deleted", "modified": "edited",
              "updated": "edited", "changed": "edited", "viewed": "read", "used": "read"}
_CALL = re.compile(
    r"^(?:then:\s+)?(?:(?P<name>[\w.:/-]+|\$)(?: x(?P<times>\d+))?\((?P<args>.*?)|\$ (?P<cmd>.+?))"
    r" -> (?P<out>ok|error|failed|exit (?P<code>-?\d+)|no match \(exit (?P<nm>-?\d+)\))"
    r"(?::\s?(?P<line>.*?))?(?P<of> \(and (?P<more>\d+) more lines?\))?(?P<fixed> \(fixed[^)]*\))?$"
)
_MORE = re.compile(r"\s*\(and \d+ more\)$")


def _call_args(text: str) -> str:
    """A call's arguments as a summary prints them: `(and N more)` and the closing paren off
    (a cut argument list lost its paren: `Bash(pnpm test | ta... (and 1 more)`)."""
    t = _MORE.sub("", text.strip())
    return t[:-1] if t.endswith(")") else t


# a path, or one in backticks (which may hold spaces: `tasks/task-152 - Add editor.md`)
_FILE = re.compile(
    rf"(?:`(?P<quoted>[^`\n]+)`|(?<![\w(])(?P<path>[^\s()`\"',]+)`?)\s+\((?P<acts>(?:{_ACTS})(?:,\s*(?:{_ACTS}))*)\)"
)
# `read: a, b`; `used: a, b` (listed, searched, passed to a command): a call named each
_READ_LIST = re.compile(r"^(?:read|used|files read|read files):\s+(?P<paths>.+)$", re.IGNORECASE)
_PROSE_FILE = re.compile(
    r"\b(?P<verb>[Ee]dited|[Cc]reated|[Ww]rote|[Mm]odified|[Dd]eleted|[Pp]atched)\s+(?:the\s+)?(?:file\s+)?"
    r"`?(?P<path>[\w./~@+-]+\.[A-Za-z]\w{0,9}|[\w.~@+-]*/[\w./~@+-]+)`?"
)
_ERROR = re.compile(r"^(?:error|failed):\s+(?P<line>.+)$")
_ERROR_CALL = re.compile(r"^(?:error|failed):\s+(?P<name>[\w.:/-]+|\$)\((?P<args>.*?) -> (?P<line>.*)$")
_USER_ERROR = re.compile(r"^reported by the user:\s+(?P<line>.+)$")
_TASK = re.compile(
    r"^(?:todo:\s+)?(?:\[(?P<st>pending|in_progress|in progress|completed|done|cancelled| |x|X)\]\s+)(?P<text>.+)$"
)
_UNANSWERED = re.compile(r"^unanswered:\s+(?P<text>.+)$")
_HEADING = re.compile(r"^\s*(?:#{1,6}\s+(?P<h>.+?)\s*#*\s*$|\*\*(?P<b>[^*]{2,60}?):?\*\*:?\s*$|(?P<n>\d+\.\s+[A-Z][^:]{2,60}):\s*$)")
_ITEM = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)")
_ORDER_WORDS = re.compile(
    r"messages after this summary|after this summary are verbatim|continues from earlier work"
    r"|what follows is verbatim",
    re.I,
)
# where a quote was cut: `[...]`, or a bracketed note that says so ("[the harness's
# instructions around it left out]", "[1,200 more characters]")
_CUT_MARK = re.compile(
    r"\s*\[(?:\.\.\.|…|[^\]\n]{0,80}\b(?:left out|cut|omitted|truncated|elided|more)\b[^\]\n]{0,80})\]\s*|…"
)


_FENCED = re.compile(r"```.*?```", re.DOTALL)
# a tool output's placeholder (masked or offloaded): `[bash output, 1,234 bytes, exit 1: line,
# archived as ref-...]`
_HELD = re.compile(
    r"^\[(?P<tool>[^\[\],]+?) output, (?P<bytes>[\d,]+) bytes(?:, (?P<fail>(?:exit -?\d+|error)(?::.*?)?))?"
    r", archived\b"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\s+-\s+(?=\S)")


def _loose(text: str) -> str:
    """Text without markdown's marks (backticks, emphasis stars, heading hashes): a quote
    that lost them still says the same words."""
    return norm(re.sub(r"(?:^|\s)#{1,6}(?=\s)", " ", re.sub(r"[`*]+", "", text)))


def _section(heading: str) -> str:
    h = heading.lower()
    if re.search(r"\b(?:current|last|latest) (?:user )?request", h):
        return "current"
    if re.search(r"pending|remaining|todo|to do|next step|open items|open tasks", h):
        return "pending"
    if re.search(r"user messages|request|intent|\btask\b", h):
        return "user"
    if re.search(r"current work|problem solving|key points|decisions|findings|notes|earlier summary|"
                 r"where .* st(?:an|oo)d", h):
        return "words"
    return ""


def _pieces(text: str) -> list[str]:
    """The parts of a quote to look for: split at a `[...]` cut, trailing `...` taken off."""
    t = text.strip()
    if len(t) >= 2 and t[0] in "\"'“" and t[-1] in "\"'”":
        t = t[1:-1]
    t = re.sub(r"\s*\((?:\d+|two|three) times\)$", "", t)
    out = []
    for p in _CUT_MARK.split(t):
        p = norm(p)
        if p.endswith("..."):
            p = p[:-3].rstrip()
        if len(p) >= 4:
            out.append(p)
    return out


class _Checker:
    def __init__(self, original: Transcript, compacted: Transcript) -> None:
        self.original = original
        self.compacted = compacted
        self.log: Log = read_log(original.units)
        self.texts = [norm(u.content + ("\n" + u.reasoning if u.reasoning else "")) for u in original.units]
        # the same without fenced code blocks: a summary quotes an assistant's prose without them
        self.prose = [norm(_FENCED.sub(" ", u.content)) if "```" in u.content else t
                      for u, t in zip(original.units, self.texts, strict=True)]
        # and without backticks: a quote that lost a fence's marks still says the same words
        self.loose = [_loose(t) + " \n " + _loose(p) if p is not t else _loose(t)
                      for t, p in zip(self.texts, self.prose, strict=True)]
        self.index: dict[str, int] = {}
        for i, u in enumerate(original.units):
            self.index.setdefault(u.id, i)
        self.origin = _origins(original, compacted)  # compacted position -> original index
        self.kept = {self.original.units[i].id: k for k, i in self.origin.items()}
        self.claims: list[Claim] = []

    # --- helpers
    def where(self, piece: str, roles: Iterable[str] | None = None) -> list[int]:
        roles = tuple(roles) if roles is not None else None
        return [i for i, t in enumerate(self.texts) if piece in t
                and (roles is None or self.original.units[i].role in roles)]

    def add(self, kind: str, text: str, unit: Unit, pos: int, true: bool, why: str,
            evidence: str = "", at: Sequence[int] = ()) -> None:
        self.claims.append(Claim(kind, _cut(text), unit.id, pos, true, why, _cut(evidence), tuple(at)))

    def matching_acts(self, name: str, args: str) -> list[Act]:
        want = norm(args)
        if want.endswith("..."):
            want = want[:-3].rstrip()
        out = []
        for a in self.log.acts:
            if name != "$" and a.name != "$" and a.name.lower() != name.lower():
                continue
            forms = [norm(a.command), norm(a.args), *(norm(s) for s in a.strings), *_arg_forms(a.args)]
            if not want:
                out.append(a)
            elif any(f == want or f.startswith(want) or (len(want) >= 12 and want in f) for f in forms if f):
                out.append(a)
        return out

    # --- claims of one text
    def read_text(self, pos: int, unit: Unit, text: str) -> None:
        section = ""
        lines = text.splitlines()
        k = 0
        while k < len(lines):
            raw = lines[k]
            k += 1
            line = raw.strip()
            if not line:
                continue
            m = _HEADING.match(raw)
            if m:
                heading = m.group("h") or m.group("b") or m.group("n") or ""
                section = _section(heading)
                if section == "current":
                    body = []
                    while k < len(lines) and not _HEADING.match(lines[k]):
                        body.append(lines[k])
                        k += 1
                    self.current_request(pos, unit, "\n".join(body))
                    section = ""
                continue
            held = _HELD.match(line)
            if held:
                self.placeholder_claim(pos, unit, line, held)
                continue
            if line.startswith("[") and line.endswith("]") and not _TASK.match(line):
                continue  # a compaction's own note (what was archived where)
            item = _ITEM.sub("", raw).strip()
            self.read_item(pos, unit, item, section, is_item=bool(_ITEM.match(raw)))

    def read_item(self, pos: int, unit: Unit, item: str, section: str, is_item: bool) -> None:
        call = _CALL.match(item)
        if call:
            self.call_claim(pos, unit, item, call)
            return
        task = _TASK.match(item)
        if task:
            st = task.group("st").lower().replace(" ", "_")
            status = {"x": "completed", "done": "completed", "": "pending"}.get(st.strip(), st.strip() or "pending")
            self.task_claim(pos, unit, item, task.group("text"), status)
            return
        m = _UNANSWERED.match(item)
        if m:
            self.unanswered_claim(pos, unit, item, m.group("text"))
            return
        m = _ERROR_CALL.match(item)
        if m:  # `error: Bash(go build) -> the line`: that call failed with that line
            said = _CALL.match(f"{m.group('name')}({m.group('args')} -> error: {m.group('line')}")
            if said:
                self.call_claim(pos, unit, item, said)
                return
        m = _ERROR.match(item)
        if m:
            self.error_line_claim(pos, unit, item, m.group("line"))
            return
        m = _USER_ERROR.match(item)
        if m:
            self.quote_claim(pos, unit, item, m.group("line"), ("user",), "the user's words")
            return
        m = _READ_LIST.match(item)
        if m:
            for p in m.group("paths").split(", "):
                if p.strip() and not p.strip().endswith("..."):
                    self.file_claim(pos, unit, f"{p.strip()} (read)", p.strip(), "read")
            return
        if section == "pending" and is_item:
            text = re.sub(r"^then:\s+", "", item)
            self.task_claim(pos, unit, item, text, "pending")
            return
        if section in ("user", "words"):
            text = re.sub(r"^then:\s+", "", item)
            roles = ("user",) if section == "user" else ("assistant", "user", "tool", "system")
            self.quote_claim(pos, unit, item, text, roles, "the user's words" if section == "user" else "the log's words")
            return
        found = False
        for fm in _FILE.finditer(item):
            found = True
            for act in re.split(r",\s*", fm.group("acts")):
                self.file_claim(pos, unit, fm.group(0), fm.group("quoted") or fm.group("path"), _ACTION_OF.get(act, act))
        if not found:
            for pm in _PROSE_FILE.finditer(item):
                verb = pm.group("verb").lower()
                action = {"wrote": "written", "modified": "edited", "patched": "edited"}.get(verb, verb)
                self.file_claim(pos, unit, pm.group(0), pm.group("path"), action)

    # --- verdicts
    def file_claim(self, pos: int, unit: Unit, text: str, path: str, action: str) -> None:
        path = clean_path(path)
        writes = self.log.writes_of(path)
        uses = self.log.uses_of(path)
        if not writes and not uses and not looks_like_path(path):
            self.add("file", text, unit, pos, False, "not a path: no call acts on it and it is not written as one")
            return
        if action in ("edited", "created", "written", "deleted", "moved"):
            if action in ("deleted", "moved"):
                backing = [(a, h) for a, h in writes if h == action]
            elif action == "written":
                backing = [(a, h) for a, h in writes if h not in ("deleted", "moved")]
            elif action == "created":
                backing = [(a, h) for a, h in writes if h == "created" and not self.named_before(path, a.index)]
            else:
                backing = [(a, h) for a, h in writes if h == "edited" or (h == "created" and self.named_before(path, a.index))]
            if backing:
                a = backing[0][0]
                self.add("file", text, unit, pos, True, f"{backing[0][1]} by a call", a.label, [b.index for b, _ in backing])
                return
            if writes:
                a, how = writes[0]
                hows = {h for _, h in writes}
                if action == "created":
                    why = ("it was there before the first write (an earlier call named it)" if "created" in hows
                           else "it was there before: the log only edits or deletes it")
                elif action == "edited":
                    why = ("created by the log (a new file, a copy, an output), never edited" if "created" in hows
                           else "the log only deletes it")
                else:
                    why = f"no call {'moves' if action == 'moved' else 'deletes'} it"
                self.add("file", text, unit, pos, False, why, a.label, [a.index])
                return
            if uses:
                self.add("file", text, unit, pos, False, f"no call writes it; it was only named ({len(uses)} call(s))",
                         uses[0].label, [uses[0].index])
                return
            self.add("file", text, unit, pos, False, "no call in the log acts on this path")
            return
        if action == "ran":
            ran = [a for a in uses if a.command and clean_path(path).rsplit("/", 1)[-1] in a.command]
            if ran:
                self.add("file", text, unit, pos, True, "named in a command", ran[0].label, [a.index for a in ran])
            else:
                self.add("file", text, unit, pos, False, "no command in the log runs it",
                         uses[0].label if uses else "", [uses[0].index] if uses else [])
            return
        if uses or writes:
            acts = uses or [a for a, _ in writes]
            self.add("file", text, unit, pos, True, "a call names it", acts[0].label, [a.index for a in acts])
        else:
            self.add("file", text, unit, pos, False, "no call in the log reads or names it")

    def named_before(self, path: str, index: int) -> bool:
        """Whether a call before `index` named the path and did not fail (the file was there)."""
        for a in self.log.acts:
            if a.index >= index:
                break
            if a.failed:
                continue
            if any(same_path(p, path) for p in a.uses) or any(same_path(p, path) for p, _ in a.writes):
                return True
        return False

    def call_claim(self, pos: int, unit: Unit, item: str, m: re.Match[str]) -> None:
        name = m.group("name") or "$"
        args = _call_args(m.group("args")) if m.group("name") else _MORE.sub("", m.group("cmd") or "")
        if m.group("times"):  # `Read x3(a; b; c) -> ok`: each of them
            parts = [p for p in args.split("; ") if p.strip()]
            acts = [a for p in parts for a in self.matching_acts(name, p)]
            missing = [p for p in parts if not self.matching_acts(name, p) and not p.endswith("...")]
            if missing:
                self.add("command", item, unit, pos, False, f"no {name} call in the log on {missing[0]!r}")
                return
            args = parts[0] if parts else ""
        out = m.group("out")
        line = (m.group("line") or "").strip()
        acts = self.matching_acts(name, args)
        failure = out in ("error", "failed") or out.startswith("exit")
        kind = "error" if failure else "command"
        if not acts:
            self.add(kind, item, unit, pos, False, "no call in the log has this tool and command")
            return
        with_result = [a for a in acts if a.result is not None]
        if failure:
            code = int(m.group("code")) if m.group("code") else None
            failed = [a for a in with_result if a.failed and (code is None or a.result is not None and a.result.exit_code == code)]
            if not failed:
                a = with_result[0] if with_result else acts[0]
                res = a.result
                said = ("no result" if res is None else
                        f"exit {res.exit_code}, no error flag" if res.exit_code is not None else
                        ("flagged as failed without an exit code" if res.failed else "no error flag, no exit code"))
                why = ("the log does not flag this call as failed" if not any(x.failed for x in with_result)
                       else f"its failure in the log has another exit code than {code}")
                self.add(kind, item, unit, pos, False, f"{why} ({said})", _first_line(res.text) if res else a.label, [a.index])
                return
            if line and not self.line_in(line, failed):
                self.add(kind, item, unit, pos, False, "the error line is not in that call's output",
                         _first_line(failed[0].result.text) if failed[0].result else "", [failed[0].index])
                return
            backing = failed
            self.add(kind, item, unit, pos, True, f"flagged as failed ({failed[0].result.how if failed[0].result else ''})",
                     failed[0].label, [a.index for a in failed])
        else:
            if out == "ok":
                ok = [a for a in with_result if not a.failed]
            else:
                code = int(m.group("nm"))
                ok = [a for a in with_result if a.result is not None and a.result.exit_code == code]
            if not ok:
                a = with_result[0] if with_result else acts[0]
                res = a.result
                if not with_result:
                    why = "no result in the log"
                elif out != "ok":
                    said = f"exit {res.exit_code}" if res is not None and res.exit_code is not None else "no exit code"
                    why = f"no run of it ended with {out.removeprefix('no match (').rstrip(')')} in the log ({said})"
                else:
                    why = f"the log flags this call as failed ({res.how if res is not None else ''})"
                self.add(kind, item, unit, pos, False, why, _first_line(a.result.text) if a.result else a.label, [a.index])
                return
            if line and not self.line_in(line, ok):
                self.add(kind, item, unit, pos, False, "the result line is not in that call's output",
                         _first_line(ok[0].result.text) if ok[0].result else "", [ok[0].index])
                return
            # the line shown is one of the output's lines (two, when it ran on after a colon)
            if m.group("more") and not any(
                a.result is not None and text_lines(a.result.text) - int(m.group("more")) in (1, 2) for a in ok
            ):
                n = text_lines(ok[0].result.text) if ok[0].result else 0
                self.add(kind, item, unit, pos, False, f"that call's output has {n} lines with text, not {m.group('more')} more",
                         _first_line(ok[0].result.text) if ok[0].result else "", [ok[0].index])
                return
            backing = ok
            self.add(kind, item, unit, pos, True, "the call ran and did not fail", ok[0].label, [a.index for a in ok])
        if m.group("fixed"):
            first = min(a.index for a in backing)
            later = [a for a in self.log.acts if a.index > first and a.result is not None and not a.failed
                     and a.name.lower() == (name.lower() if name != "$" else a.name.lower())
                     and a in self.matching_acts(name, args)]
            if later:
                self.add("fix", item, unit, pos, True, "a later run of the call passed", later[0].label, [later[0].index])
            else:
                self.add("fix", item, unit, pos, False, "no later run of this call passed in the log")

    def placeholder_claim(self, pos: int, unit: Unit, line: str, m: re.Match[str]) -> None:
        """A placeholder in place of a tool output names the tool, the output's size and, for a
        failed one, what failed: each checked against the output it replaced."""
        i = self.index.get(unit.id)
        text = _cut(line, 160)
        if i is None or not is_output(self.original.units[i]):
            self.add("placeholder", text, unit, pos, False, "it stands where the original has no tool output")
            return
        o = self.original.units[i]
        act = next((a for a in self.log.acts if a.result is not None and a.result.index == i), None)
        # a command written as text (SWE-agent) has no tool name: any name stands for it
        names = set() if act is not None and act.name == "$" else {
            n.lower() for n in (o.name, act.name if act else None) if n}
        tool = m.group("tool").strip()
        size = int(m.group("bytes").replace(",", ""))
        real = len(o.content.encode())
        if names and tool.lower() not in names:
            self.add("placeholder", text, unit, pos, False, f"it replaced the output of {sorted(names)[0]}, not {tool}",
                     o.content[:120], [i])
        elif abs(size - real) > max(16, real // 50):
            self.add("placeholder", text, unit, pos, False, f"the output it replaced is {real:,} bytes", "", [i])
        elif m.group("fail") and not (act is not None and act.failed and self._failed_as(act, m.group("fail"))):
            self.add("placeholder", text, unit, pos, False, "the log does not flag that output as failed so",
                     _first_line(o.content), [i])
        else:
            self.add("placeholder", text, unit, pos, True, "the tool, the size and the outcome of the output it replaced",
                     _first_line(o.content), [i])

    def _failed_as(self, act: Act, said: str) -> bool:
        code, _, line = said.partition(":")
        if code.startswith("exit") and act.result is not None and act.result.exit_code != int(code.split()[1]):
            return False
        return self.line_in(line.strip(), [act]) if line.strip() else True

    def line_in(self, line: str, acts: Sequence[Act]) -> bool:
        pieces = _pieces(line)
        if not pieces:
            return True
        for a in acts:
            if a.result is None:
                continue
            text = norm(a.result.text)
            if all(p in text for p in pieces):
                return True
        return False

    def error_line_claim(self, pos: int, unit: Unit, item: str, line: str) -> None:
        pieces = _pieces(line)
        if not pieces:
            return
        failed = [a for a in self.log.acts if a.failed and self.line_in(line, [a])]
        if failed:
            self.add("error", item, unit, pos, True, f"in a failed output ({failed[0].result.how if failed[0].result else ''})",
                     failed[0].label, [a.index for a in failed])
            return
        ok = [a for a in self.log.acts if a.result is not None and self.line_in(line, [a])]
        if ok:
            res = ok[0].result
            said = f"exit {res.exit_code}" if res is not None and res.exit_code is not None else "no error flag"
            self.add("error", item, unit, pos, False, f"the output with this line is not flagged as failed ({said})",
                     ok[0].label, [a.index for a in ok])
            return
        found = self.where(pieces[0])
        if found:
            role = self.original.units[found[0]].role
            self.add("error", item, unit, pos, False, f"no tool output says it; a {role} message does",
                     self.texts[found[0]], found[:1])
        else:
            self.add("error", item, unit, pos, False, "not in the log")

    def quote_claim(self, pos: int, unit: Unit, item: str, text: str, roles: Sequence[str], whose: str) -> None:
        pieces = _pieces(text)
        if roles != ("user",):  # notes and key points join sentences of several messages
            pieces = [q for p in pieces for q in _SENTENCE_END.split(p) if len(q) >= 12] or pieces
        if not pieces:
            return
        units = self.original.units
        if roles == ("user",):
            for i, (t, alt) in enumerate(zip(self.texts, self.prose, strict=True)):
                if units[i].role == "user" and not is_output(units[i]) and (
                    all(p in t for p in pieces) or all(p in alt for p in pieces)
                ):
                    self.add("quote", item, unit, pos, True, whose, t, [i])
                    return
        else:
            found = [next((i for i, (t, alt, loose) in enumerate(zip(self.texts, self.prose, self.loose, strict=True))
                           if p in t or p in alt or _loose(p) in loose), None) for p in pieces]
            if all(i is not None for i in found):
                at = sorted({i for i in found if i is not None})
                self.add("quote", item, unit, pos, True, whose, self.texts[at[0]], at)
                return
        anywhere = [i for i, t in enumerate(self.texts) if all(p in t for p in pieces)]
        if anywhere:
            u = units[anywhere[0]]
            what = "a tool output" if is_output(u) else f"a {u.role} message"
            self.add("quote", item, unit, pos, False, f"said to be {whose}, but it is {what}",
                     self.texts[anywhere[0]], anywhere[:1])
        else:
            self.add("quote", item, unit, pos, False, f"not in the log as {whose} (not found word for word)")

    def task_claim(self, pos: int, unit: Unit, item: str, text: str, status: str) -> None:
        states = self.log.todo_states(text)
        claimed_open = status not in ("completed", "cancelled")
        if states:
            # the state where the summary stands, and the latest one unless the compacted
            # context shows the message that changed it after the summary
            boundary = self.boundary(pos)
            before = [t for t in states if t.index < boundary]
            final = states[-1]
            shown = self.kept.get(self.original.units[final.index].id, -1) > pos  # after the summary
            at = before[-1] if before else None
            if at is not None and at.open == claimed_open and (final.open == claimed_open or shown):
                self.add("task", item, unit, pos, True, f"{at.status} at this point in the log", at.text, [at.index])
            elif final.open == claimed_open and shown:
                # the state a message kept right after it sets: what the model reads next agrees
                self.add("task", item, unit, pos, True, f"{final.status} in message #{final.index}, kept after it",
                         final.text, [final.index])
            elif at is None:
                self.add("task", item, unit, pos, False,
                         f"the item first appears in the log after this point (message #{states[0].index})",
                         f"[{states[0].status}] {states[0].text}", [states[0].index])
            elif at.open != claimed_open:
                self.add("task", item, unit, pos, False,
                         f"said to be {status}, but at this point the log has it {at.status} (message #{at.index})",
                         f"[{at.status}] {at.text}", [at.index])
            else:
                self.add("task", item, unit, pos, False,
                         f"said to be {status}, but the log later marks it {final.status} (message #{final.index}), "
                         "and the compacted context does not show that",
                         f"[{final.status}] {final.text}", [final.index])
            return
        pieces = _pieces(text)
        if not pieces:
            return
        units = self.original.units
        found = [i for i, t in enumerate(self.texts) if all(p in t for p in pieces)]
        said = [i for i in found if (units[i].role == "assistant" and not is_output(units[i])) or is_typed_request(units[i])]
        if said and claimed_open:
            self.add("task", item, unit, pos, True, f"said by the {units[said[-1]].role}, in no todo list", self.texts[said[-1]], [said[-1]])
        elif said:
            self.add("task", item, unit, pos, True, f"said done by the {units[said[-1]].role}", self.texts[said[-1]], [said[-1]])
        elif found:
            u = units[found[0]]
            what = ("a tool output (a file's or a command's text)" if is_output(u) else
                    "the system prompt" if u.role == "system" else "injected instructions or a harness record")
            self.add("task", item, unit, pos, False, f"not a task: the text is from {what}", self.texts[found[0]], found[:1])
        else:
            self.add("task", item, unit, pos, False, "in no todo list and not said in the log")

    def unanswered_claim(self, pos: int, unit: Unit, item: str, text: str) -> None:
        pieces = _pieces(text)
        if not pieces:
            return
        units = self.original.units
        found = [i for i in self.log.requests if all(p in self.texts[i] for p in pieces)]
        if not found:
            self.quote_claim(pos, unit, item, text, ("user",), "the user's words")
            return
        i = found[-1]
        answer = next((j for j in range(i + 1, len(units)) if units[j].role == "assistant" and
                       (units[j].content.strip() or units[j].tool_calls)), None)
        if answer is None:
            self.add("task", item, unit, pos, True, "nothing answered it in the log", self.texts[i], [i])
        else:
            self.add("task", item, unit, pos, False, f"said unanswered, but the assistant answered at message #{answer}",
                     self.texts[answer] or units[answer].tool_calls[0].name, [i, answer])

    def current_request(self, pos: int, unit: Unit, body: str) -> None:
        pieces = _pieces(body.strip().splitlines()[0] if body.strip() else "")
        if not pieces:
            return
        head = body.strip().splitlines()[0]
        boundary = self.boundary(pos)
        requests = [i for i in self.log.requests if i < boundary]
        last = requests[-1] if requests else None
        found = [i for i, t in enumerate(self.texts) if all(p in t for p in pieces)]
        if last is not None and last in found:
            self.add("current", head, unit, pos, True, "the last request the user typed before this point", self.texts[last], [last])
            return
        users = [i for i in found if self.original.units[i].role == "user"]
        if users and not any(is_typed_request(self.original.units[i]) for i in users):
            why = "not a request the user typed (a command record, a slash command, a tool error or a harness note)"
        elif found:
            why = "an earlier request; the user asked something after it" if last is not None else "no request before this point"
        else:
            why = "not in the log word for word"
        evidence = self.texts[last] if last is not None else ""
        self.add("current", head, unit, pos, False, why + (f" (the last request: message #{last})" if last is not None else ""),
                 evidence, [last] if last is not None else [])

    def boundary(self, pos: int) -> int:
        """The original index the text at `pos` stands for: just after the span it summarizes
        (its `summarized_ids`), else that of the first kept message after it (the end of the
        original when none is)."""
        covered = [self.index[i] for i in self.compacted.units[pos].meta.get("summarized_ids", []) if i in self.index]
        if covered:
            return max(covered) + 1
        for k in range(pos + 1, len(self.compacted.units)):
            if k in self.origin:
                return self.origin[k]
        return len(self.original.units)

    def order(self, pos: int, unit: Unit, text: str, mine: Sequence[Claim]) -> None:
        """A summary stands where its span stood: every message kept after it came after the
        events it summarizes (its `summarized_ids`) and the earliest event each of its true
        claims rests on."""
        covered = [self.index[i] for i in unit.meta.get("summarized_ids", []) if i in self.index]
        events = [(max(covered), "it summarizes it")] if covered else []
        events += [(min(c.at), f"it says {c.text!r}") for c in mine if c.true and c.at and c.kind != "order"]
        if not events and not _ORDER_WORDS.search(text):
            return
        latest, because = max(events) if events else (-1, "")
        words = _ORDER_WORDS.search(text)
        said = _cut(words.group(0)) if words else "(its place)"
        for k in range(pos + 1, len(self.compacted.units)):
            i = self.origin.get(k)
            u = self.compacted.units[k]
            if i is None or u.role == "system":
                continue
            if i < latest:
                self.add("order", f"{said} — then {u.role} message #{i}: {_cut(u.content, 80)}", unit, pos, False,
                         f"message #{i} came before message #{latest}, and {because}",
                         self.texts[latest], [i, latest])
                return
        self.add("order", said, unit, pos, True, "every message after it came after what it summarizes",
                 "", [latest] if latest >= 0 else [])


def _origins(original: Transcript, compacted: Transcript) -> dict[int, int]:
    """Which original message each kept one is: by id when the id and the text agree, else the
    first unused original of that role and text (a file read back numbers its units anew)."""
    by_id = {u.id: i for i, u in reversed(list(enumerate(original.units)))}
    by_text: dict[tuple[str, str], list[int]] = {}
    for n, o in enumerate(original.units):
        by_text.setdefault((o.role, o.content), []).append(n)
    used: set[int] = set()
    out: dict[int, int] = {}
    for k, u in enumerate(compacted.units):
        i = by_id.get(u.id)
        if i is None or original.units[i].content != u.content or i in used:
            i = next((j for j in by_text.get((u.role, u.content), []) if j not in used), None)
        if i is not None and u.type != "summary" and (u.content.strip() or u.tool_calls):
            out[k] = i
            used.add(i)
    return out


def _arg_forms(arguments: str) -> list[str]:
    """A call's arguments as a summary may print them when no command or path names the call:
    `key=value, key=value`."""
    try:
        data = json.loads(arguments) if arguments.strip().startswith("{") else None
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    return [norm(", ".join(f"{k}={v}" for k, v in data.items()))]


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def check(original: Transcript, compacted: Transcript) -> ClaimScore:
    """Every claim the compaction's text makes in `compacted`, verified against `original`."""
    c = _Checker(original, compacted)
    for pos, unit, text in inserted(original, compacted):
        start = len(c.claims)
        c.read_text(pos, unit, text)
        if unit.type == "summary" or unit.meta.get("summarized_ids") or _ORDER_WORDS.search(text):
            c.order(pos, unit, text, c.claims[start:])
    return ClaimScore(c.claims)


__all__ = ["KINDS", "Claim", "ClaimScore", "check", "inserted"]
