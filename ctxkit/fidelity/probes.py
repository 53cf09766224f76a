"""Probes: what a model reading a compacted transcript can still answer about the task.

Facts are taken from the ORIGINAL transcript, without a model, in the spirit of Factory's
probe-based compaction evaluation; a compacted transcript (ctxkit's, a peer's, an agent's own)
is then scored by which of them it still holds. One probe is one fact with a key string:

| category | taken from the original | kept when |
|---|---|---|
| intent | every user request (harness notes such as "[Request interrupted by user]" aside) | its text is in the context, or 80% of its words are (long requests) |
| artifact | files the agent read, edited or created: tool-call path arguments, paths in shell commands and patches | the path is in the context; for an edit, also said to be edited (an edit call on it, or an edit word on a line naming it) |
| error | the error line of each failing tool output in the last 30% of the run (a tool's tagged error: its first line): the log's own error flag, a non-zero exit, a traceback | the line is in the context; a line that only gives an exit status (`Exit code 143`) also when the context gives that status in other words (`exit 143`, `exited with code 143`) |
| identifier | ids, names and numbers in the last request and the last three assistant messages that also appear earlier | the token is in the context |
| continuation | the last tool call (its command, path or arguments) and the first line of its result | each is in the context |
| todo | unfinished items of the last todo list (TodoWrite, update_plan) | the item is in the context |

The probes are deliberately simple and independent of ctxkit's summarizer: they say what a
reader would look for, not what ctxkit writes. Matching is on text with whitespace collapsed;
tool-call arguments count both as their JSON text and as their decoded strings, so a command
quoted in a summary is found either way.

    >>> from ctxkit.model import Transcript, ToolCall, Unit
    >>> t = Transcript([
    ...     Unit("u1", "user", content="Fix the failing test in src/app.py"),
    ...     Unit("a1", "assistant", tool_calls=[ToolCall("c1", "bash", '{"command": "pytest -x"}')]),
    ...     Unit("r1", "tool", tool_call_id="c1", content="E   KeyError: 'user_id'\\n1 failed\\n<returncode>1</returncode>"),
    ... ])
    >>> probes = extract(t)
    >>> sorted({p.category for p in probes})
    ['continuation', 'error', 'intent']
    >>> score(probes, t).recall
    1.0
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.call_effects import call_effects
from ctxkit.log_events import (
    arg_strings,
    decoded_args,
    last_todo_list,
    main_value,
    named,
    outcome,
    output_record,
    todo_text,
    without_bodies,
)
from ctxkit.memo import UnitMemo
from ctxkit.model import Transcript, Unit
from ctxkit.structure import is_request, request_text

CATEGORIES = ("intent", "artifact", "error", "identifier", "continuation", "todo")
LATE_SHARE = 0.3  # error probes come from the last 30% of the run
RECENT_ASSISTANT = 3  # identifier probes: the last request and this many assistant messages
MOST_WORDS = 0.8  # a long request is kept when this share of its words is in the context
LONG_REQUEST_WORDS = 12  # requests with more distinct words than this may be kept by words
KEY_CHARS = 160  # keys longer than this are matched on their head
MAX_IDENTIFIERS = 24

# --- text a model reads ---------------------------------------------------------------------------



def norm(text: str) -> str:
    """Whitespace collapsed to single spaces, trimmed: the form every match is made on."""
    # `str.split` splits on what `\s` matches (`str.isspace`), in a third of the regex's time
    return " ".join(text.split())


def _decoded(arguments: str) -> list[str]:
    """The strings of a call's JSON arguments (none when they are not JSON)."""
    try:
        value = json.loads(arguments) if arguments.strip() else None
    except ValueError:
        return []
    return arg_strings(value)


def unit_texts(u: Unit) -> list[str]:
    """Everything a model reads in a unit: content, reasoning, each call's name, JSON
    arguments and their decoded strings."""
    out = [u.content, u.reasoning]
    for c in u.tool_calls:
        out.append(c.name)
        out.append(c.arguments)
        out.extend(_decoded(c.arguments))
    return [x for x in out if x]


def context_text(t: Transcript) -> str:
    """The whole context as one normalised text (units, in order)."""
    # the norm of texts joined by a space is the norms of those that hold anything joined by
    # one: each unit's is made once (a compaction checks its summary against the same units
    # again at every step, a bench scores many compactions of one original)
    return " ".join(x for u in t.units for x in _NORMS(u))


_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what `str.splitlines` splits on


def _edit_lines(u: Unit) -> tuple[str, ...]:
    """The lines of a unit that say an edit (`Context.edited`), read once per unit (a summary
    names every file it lists: each edited file asked for read all its lines again)."""
    return _EDITS(u)[0]


def _edit_text(u: Unit) -> str:
    """`_edit_lines` joined by newlines: one search finds a path in any of them."""
    return _EDITS(u)[1]


def _read_edits(u: Unit) -> tuple[tuple[str, ...], str]:
    words = _DONE_EDIT_WORDS if is_request(u) else _EDIT_WORDS
    lines = tuple(line for line in u.content.splitlines() if words.search(line))
    return lines, "\n".join(lines)


def _read_norms(u: Unit) -> tuple[str, ...]:
    """`norm` of each of a unit's texts that holds anything."""
    return tuple(n for n in (norm(x) for x in unit_texts(u)) if n)


# each unit's, read once (`ctxkit.memo`)
_EDITS = UnitMemo(_read_edits)
_NORMS = UnitMemo(_read_norms)


# --- probes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One fact a model should still find: `key` in the context (see the module table)."""

    category: str
    key: str
    unit_id: str  # where the fact is in the original
    position: int  # that unit's index in the original
    detail: str = ""  # the action on an artifact, the call that failed, the result's call
    words: tuple[str, ...] = ()  # an intent's distinct words (the 80% rule)

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "key": self.key,
            "unit_id": self.unit_id,
            "position": self.position,
            "detail": self.detail,
        }


def _key(text: str) -> str:
    text = norm(text)
    return text if len(text) <= KEY_CHARS else text[:KEY_CHARS]


_WORD = re.compile(r"[^\W_]{3,}")


def _words(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(w.lower() for w in _WORD.findall(text)))


def intents(units: Sequence[Unit]) -> list[Probe]:
    """Every user request."""
    out = []
    for i, u in enumerate(units):
        if is_request(u):
            text = request_text(u)
            out.append(Probe("intent", norm(text), u.id, i, words=_words(text)))
    return out


# --- artifacts ----------------------------------------------------------------------------------

_PATH = re.compile(
    r"(?<![\w/.~@-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+"  # dir/file, /abs/dir/file
    r"|(?<![\w/.-])[\w-]+\.(?:py|pyi|js|jsx|mjs|ts|tsx|go|rs|java|kt|c|cc|cpp|h|hpp|rb|php|cs|"
    r"swift|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|sh|sql|html|css|scss|vue|svelte|lock|"
    r"xml|gradle|proto|ex|exs|erl|hs|ml|scala|lua|pl|r|dart|zig|nim|pony|svg|png|gif)\b"
)
_NOT_PATH = re.compile(
    r"^(?:https?:|www\.|\d+(?:\.\d+)*$|[\w.-]+\.(?:com|org|net|io|dev)\b|/dev/null$|/tmp/?$|"
    r"[\w.-]*\.\.\.)"
)
_EDIT_WORDS = re.compile(
    r"\b(?:edit|edited|edits|modif|wrote|write|written|creat|added|add|chang|updat|fix|patch|"
    r"renam|delet|remov|replac|insert|sed -i|apply_patch)",
    re.IGNORECASE,
)
# In a user's message only an edit said as done counts ("fix x.py" asks for one): a summary an
# agent or ctxkit joined to the request message says "x.py (edited)"
_DONE_EDIT_WORDS = re.compile(
    r"\b(?:edited|modified|wrote|written|created|added|changed|updated|fixed|patched|renamed|"
    r"deleted|removed|replaced|inserted)\b",
    re.IGNORECASE,
)


_HAS_EXT = re.compile(r"\.[A-Za-z0-9]{1,8}$")


def paths_in(text: str) -> list[str]:
    """File paths written in a command, an argument or a patch (URLs, version numbers, heredoc
    bodies and sed programs aside); a path without an extension counts only when it is written
    as one (`/abs`, `./rel`, `~/home`)."""
    text = without_bodies(text)
    out = []
    for m in _PATH.finditer(text):
        path = m.group(0).rstrip(".,:;'\")]")
        if len(path) < 4 or _NOT_PATH.match(path) or "/" not in path and "." not in path:
            continue
        if not _HAS_EXT.search(path) and not path.startswith(("/", "./", "../", "~/")):
            continue
        out.append(path)
    return out


@functools.lru_cache(maxsize=65_536)
def _call_paths(name: str, arguments: str) -> list[tuple[str, bool]]:
    """(path, edited) for each file a call acted on, as `ctxkit.call_effects` reads it: written
    (created, edited, deleted) or only read, listed or run (cached: scoring asks it per probe;
    callers only read the list)."""
    effects = call_effects(name, arguments)
    found = {path: True for path, _ in effects.writes}
    for path in effects.uses:
        found.setdefault(path, False)
    return list(found.items())


def artifacts(units: Sequence[Unit]) -> list[Probe]:
    """Files the agent's tool calls acted on (one probe per file; edited wins over read)."""
    first: dict[str, tuple[str, int]] = {}
    edited: dict[str, bool] = {}
    for i, u in enumerate(units):
        for c in u.tool_calls:
            for path, edit in _call_paths(c.name, c.arguments):
                first.setdefault(path, (u.id, i))
                edited[path] = edited.get(path, False) or edit
    return [
        Probe("artifact", path, uid, i, detail="edited" if edited[path] else "read")
        for path, (uid, i) in first.items()
    ]


# --- errors -------------------------------------------------------------------------------------

_EXIT = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>|\bexit(?:ed)?(?: with)? (?:code|status)[:= ]+(-?\d+)"
    r"|\"exit_code\"\s*:\s*(-?\d+)|\bProcess exited with code (-?\d+)",
    re.IGNORECASE,
)
_EXCEPTION = re.compile(
    r"^\s*(?:E\s+)?(?:[\w.]*(?:Error|Exception|Exit|Interrupt)\b:?|FAILED\b|ERROR\b|error(?:\[\w+\])?:|"
    r"fatal:|panic:|thread '.*' panicked)"
)
_ERRORISH = re.compile(r"\berror\b|\bfailed\b|\bfailure\b|\bexception\b", re.IGNORECASE)


def failed(result: Unit) -> bool:
    """The log says this tool output failed (`log_events.outcome`: its error flag, else a
    non-zero exit code, else a traceback or a tool's error status); the word "error" in the text
    is not enough."""
    return outcome(result).failed


def output_text(text: str) -> str:
    """A tool output's text: agents that log results as JSON (Codex's `{"output", "metadata"}`)
    are decoded first."""
    record = output_record(text, 200)
    return text if record is None else record[0]


_TAG = re.compile(r"</?[\w-]+>")
# lines a harness puts around an output, the same for every call: Codex's exec_command header
_HARNESS_LINE = re.compile(
    r"^(?:Chunk ID|Wall time|Original token count|Total output lines|Process exited with code)\b.*$"
    r"|^Output:\s*$",
    re.IGNORECASE,
)


def says_something(line: str) -> bool:
    """A line that says something of this output: not markup alone (`<output>`,
    `<returncode>1</returncode>`), not a harness header (`Chunk ID: 166895`)."""
    return bool(re.search(r"[A-Za-z]{2}", _TAG.sub("", line))) and not _HARNESS_LINE.match(line.strip())


# a tool's own error, wrapped in a tag (Claude Code): its first line is what went wrong; what
# follows echoes the call's input (`String: <the text it looked for>`)
_ERROR_TAG = re.compile(r"\A\s*<tool_use_error>\s*(?P<line>[^\n]*?)\s*(?:</tool_use_error>)?\s*(?:\n|\Z)")


def error_line(text: str, noise: Collection[str] = ()) -> str:
    """The line that says what went wrong: the first line of a tool's tagged error, else the
    last exception line, else the first line with an error word, else the first line that says
    something ("" when none does). A line in `noise`, one the same call also printed when it
    passed (a certificate-store warning every test run prints), is not what went wrong, unless
    nothing else is said."""
    text = output_text(text)
    tagged = _ERROR_TAG.match(text)
    if tagged and says_something(tagged.group("line")):
        return tagged.group("line")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and says_something(ln)]
    lines = [ln for ln in lines if ln not in noise] or lines
    named = [ln for ln in lines if _EXCEPTION.match(ln)]
    # an exit status (`Exit code: 1`) is no exception line where the output names one
    named = [ln for ln in named if not _EXIT.fullmatch(ln)] or named
    if named:
        return named[-1]
    worded = [ln for ln in lines if _ERRORISH.search(ln) and not _EXIT.search(ln)]
    if worded:
        return worded[0]
    plain = [ln for ln in lines if not _EXIT.fullmatch(ln)]
    return (plain or lines or [""])[0]


def _calls_by_id(units: Sequence[Unit]) -> dict[str, tuple[int, Any]]:
    return {c.id: (i, c) for i, u in enumerate(units) for c in u.tool_calls}


def _call_key(call: tuple[int, Any] | None) -> tuple[str, str] | None:
    return (call[1].name, call[1].arguments) if call else None


def _passing_lines(
    units: Sequence[Unit], calls: dict[str, tuple[int, Any]], outputs: dict[int, bool]
) -> dict[tuple[str, str] | None, set[str]]:
    """The lines each call (name and arguments) printed in an output that did not fail
    (`outputs`: each output's index and whether it failed)."""
    out: dict[tuple[str, str] | None, set[str]] = {}
    for i, bad in outputs.items():
        call = calls.get(units[i].tool_call_id or "")
        if call is None or bad:
            continue
        out.setdefault(_call_key(call), set()).update(ln.strip() for ln in output_text(units[i].content).splitlines())
    return out


def errors(units: Sequence[Unit], late_share: float = LATE_SHARE) -> list[Probe]:
    """The error line of each failing tool output in the last `late_share` of the run (one per
    line)."""
    start = int(len(units) * (1 - late_share))
    calls = _calls_by_id(units)
    # each tool output read once: whether it failed
    outputs = {i: failed(u) for i, u in enumerate(units) if u.tool_call_id is not None or u.role == "tool"}
    passed = _passing_lines(units, calls, outputs)
    out: dict[str, Probe] = {}
    for i in range(start, len(units)):
        if not outputs.get(i):
            continue
        u = units[i]
        call = calls.get(u.tool_call_id or "")
        line = _key(error_line(u.content, passed.get(_call_key(call), ())))
        if not line or line in out:
            continue
        out[line] = Probe("error", line, u.id, i, detail=call[1].name if call else "")
    return list(out.values())


# --- identifiers --------------------------------------------------------------------------------

_IDENT = re.compile(
    r"(?<![\w-])(?:"
    r"[A-Za-z][A-Za-z0-9]*(?:[_.-][A-Za-z0-9]+)*[_-][A-Za-z0-9]+"  # snake_case, kebab-case, a.b_c
    r"|[a-z]+(?:[A-Z][a-z0-9]*)+"  # camelCase
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"  # PascalCase
    r"|[A-Z0-9]*\d[A-Z0-9]*[A-Z][A-Z0-9]*|[A-Z]+\d[A-Z0-9]*"  # booking codes, ids: ZFA04Y, HAT170
    r"|#?\d{3,}(?:\.\d+)?"  # numbers of 3+ digits, #123
    r"|[0-9a-f]{7,}"  # hashes
    r")(?![\w-])"
)
_BORING = frozenset(
    "e.g i.e utf-8 utf8 http https json yaml true false null none self this that".split()
)


def recent_positions(units: Sequence[Unit]) -> list[int]:
    """The positions whose names `identifiers` reads: the last request and the last three
    assistant messages, in order."""
    recent: list[int] = []
    last_request = next((i for i in range(len(units) - 1, -1, -1) if is_request(units[i])), None)
    if last_request is not None:
        recent.append(last_request)
    assistant = [i for i, u in enumerate(units) if u.role == "assistant" and (u.content or u.tool_calls)]
    recent.extend(assistant[-RECENT_ASSISTANT:])
    return sorted(set(recent))


def identifiers(units: Sequence[Unit]) -> list[Probe]:
    """Ids, names and numbers in the last request and the last three assistant messages that
    also appear earlier in the transcript (the names of the current work)."""
    recent = recent_positions(units)
    if not recent:
        return []
    earliest = min(recent)
    # not normalised: a name holds no white space, so the words either side of it are the same
    before = "\n".join(x for u in units[:earliest] for x in unit_texts(u))
    out: dict[str, Probe] = {}
    absent: set[str] = set()  # each name is looked for once, in the whole earlier text
    for i in recent:
        u = units[i]
        for text in (u.content, *(s for c in u.tool_calls for s in _decoded(c.arguments))):
            for m in _IDENT.finditer(text):
                token = m.group(0)
                if token in out or token in absent or len(token) < 3 or token.lower() in _BORING:
                    continue
                if not named(token, before):
                    absent.add(token)
                    continue
                out[token] = Probe("identifier", token, u.id, i)
                if len(out) == MAX_IDENTIFIERS:
                    return list(out.values())
    return list(out.values())


# --- continuation and todos ---------------------------------------------------------------------

_MAIN_ARGS = ("command", "cmd", "file_path", "path", "pattern", "query", "url", "code", "input")


def call_key(arguments: str) -> str:
    """What a call did, as a reader would quote it: its command or path, else its arguments."""
    args = decoded_args(arguments)
    value = main_value(args, _MAIN_ARGS) if isinstance(args, dict) else None
    if value is not None:
        return _key(value)
    strings = [s for s in arg_strings(args) if s.strip()]
    return _key(strings[0]) if strings else _key(arguments)


def continuation(units: Sequence[Unit]) -> list[Probe]:
    """The last tool call and the first line of its result."""
    calls = [(i, c) for i, u in enumerate(units) for c in u.tool_calls]
    if not calls:
        return []
    i, call = calls[-1]
    out = []
    key = call_key(call.arguments)
    if key:
        out.append(Probe("continuation", key, units[i].id, i, detail=f"last call {call.name}"))
    for j in range(i + 1, len(units)):
        r = units[j]
        if r.tool_call_id == call.id:
            first = next((ln for ln in output_text(r.content).splitlines() if says_something(ln)), "")
            if first.strip():
                out.append(Probe("continuation", _key(first), r.id, j, detail=f"result of {call.name}"))
            break
    return out


def todos(units: Sequence[Unit]) -> list[Probe]:
    """Unfinished items of the last todo list an agent wrote (TodoWrite, update_plan, ...)."""
    found = last_todo_list(units)
    if found is None:
        return []
    i, items = found
    return [
        Probe("todo", _key(text), units[i].id, i, detail=str(item.get("status", "")))
        for item in items if (text := todo_text(item)) is not None and item.get("status") != "completed"
    ]


def span_facts(units: Sequence[Unit]) -> list[Probe]:
    """The facts of a span that a summary of it must carry: the files acted on, every failure's
    error line (not only late ones) and the open todos (what `summarize_old` checks)."""
    return [*artifacts(units), *errors(units, late_share=1.0), *todos(units)]


def extract(t: Transcript | Sequence[Unit]) -> list[Probe]:
    """Every probe of a transcript, by category in `CATEGORIES` order."""
    units = list(t.units if isinstance(t, Transcript) else t)
    return [
        *intents(units),
        *artifacts(units),
        *errors(units),
        *identifiers(units),
        *continuation(units),
        *todos(units),
    ]


# --- scoring ------------------------------------------------------------------------------------


@dataclass
class ProbeScore:
    """Which probes a compacted transcript kept: per category, and the lost ones."""

    kept: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    lost: list[Probe] = field(default_factory=list)

    def category(self, name: str) -> float | None:
        """Share of `name` kept (None when the original had none)."""
        n = self.total.get(name, 0)
        return self.kept.get(name, 0) / n if n else None

    @property
    def recall(self) -> float:
        """Mean over the categories the original had (1.0 when it had no probe): a category of
        many identifiers weighs as much as the one last action."""
        shares = [s for s in (self.category(c) for c in CATEGORIES) if s is not None]
        return sum(shares) / len(shares) if shares else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "recall": round(self.recall, 4),
            "categories": {
                c: {"kept": self.kept.get(c, 0), "total": self.total[c]}
                for c in CATEGORIES
                if self.total.get(c)
            },
            "lost": [p.to_dict() for p in self.lost],
        }


@dataclass
class Context:
    """A compacted transcript as probes see it: its normalised text, and its words on demand."""

    transcript: Transcript
    text: str = ""
    _words: frozenset[str] | None = None
    _edited_by_calls: frozenset[str] | None = None
    _called: frozenset[str] | None = None

    @classmethod
    def of(cls, t: Transcript) -> Context:
        return cls(t, context_text(t))

    @property
    def words(self) -> frozenset[str]:
        if self._words is None:
            self._words = frozenset(_words(self.text))
        return self._words

    def called(self, path: str) -> bool:
        """A call the context holds acted on `path`, as the artifact probes read calls
        (`call_effects`: a Windows `D:\\x` is `/d/x` there, as the call wrote it here)."""
        if self._called is None:
            self._called = frozenset(
                p for u in self.transcript.units for c in u.tool_calls
                for p, _ in _call_paths(c.name, c.arguments)
            )
        return path in self._called

    def edited(self, path: str) -> bool:
        """The context says `path` was changed: an edit call on it, or an edit word on a line
        that names it."""
        if self._edited_by_calls is None:  # read once for every path asked
            self._edited_by_calls = frozenset(
                p
                for u in self.transcript.units
                for c in u.tool_calls
                for p, edit in _call_paths(c.name, c.arguments)
                if edit
            )
        if path in self._edited_by_calls:
            return True
        if any(ch in path for ch in _LINE_BREAKS):  # no line holds it (checked line by line)
            return any(
                path in line for u in self.transcript.units if path in u.content
                for line in _edit_lines(u)
            )
        # a line holds the path when the lines joined do: no line holds a line break
        return any(path in u.content and path in _edit_text(u) for u in self.transcript.units)


def _exit_status(key: str) -> re.Pattern[str] | None:
    """For an error line that only gives an exit status, the pattern of any wording of that
    status (`exit 143`, `Exit code: 143`, `exited with code 143`); None for any other line."""
    m = _EXIT.fullmatch(key.strip())
    code = next((g for g in m.groups() if g is not None), None) if m else None
    if code is None:
        return None
    return re.compile(rf"\bexit(?:ed)?(?: with)?(?: (?:code|status))?[:= ]+{re.escape(code)}(?!\d)", re.IGNORECASE)


def kept(probe: Probe, ctx: Context) -> bool:
    """Whether the context still holds `probe` (see the module table)."""
    if probe.category == "error" and probe.key not in ctx.text:
        status = _exit_status(probe.key)
        return status is not None and status.search(ctx.text) is not None
    if probe.key in ctx.text or probe.category == "artifact" and ctx.called(probe.key):
        if probe.category == "artifact" and probe.detail == "edited":
            return ctx.edited(probe.key)
        return True
    if probe.category == "intent" and len(probe.words) > LONG_REQUEST_WORDS:
        return sum(1 for w in probe.words if w in ctx.words) >= MOST_WORDS * len(probe.words)
    return False


def score(probes: Iterable[Probe], compacted: Transcript) -> ProbeScore:
    """Score a compacted transcript (any compaction's) against probes of its original."""
    ctx = Context.of(compacted)
    out = ProbeScore()
    for p in probes:
        out.total[p.category] = out.total.get(p.category, 0) + 1
        if kept(p, ctx):
            out.kept[p.category] = out.kept.get(p.category, 0) + 1
        else:
            out.lost.append(p)
    return out
