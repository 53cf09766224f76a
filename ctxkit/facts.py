"""What a transcript says happened, read from its structure: the user's requests, each tool call
with the files it acted on and its outcome, the failures, the todo list.

Summaries, placeholders and handovers are written from these facts, so they say what the log
says and nothing else: a tool output failed when the log marks it (an error flag, a non-zero exit
code, a traceback, a tool's own error status line, a shell diagnostic), never because its text
contains the word "error"; a file was edited when an edit tool, an in-place command (`sed -i`,
a redirect, `apply_patch`) or a patch header says so.

What one event says (an output's outcome and error line, a call's main argument, a todo entry)
is read by `ctxkit.log_events`, which the evaluation reads too; this module reads a span.

Each unit is read once per process (`unit_facts`, cached by identity), so a summary of a longer
span costs the new units only.

    >>> from ctxkit.model import ToolCall, Unit
    >>> units = [
    ...     Unit("a1", "assistant", tool_calls=[ToolCall("c1", "Bash", '{"command": "sed -i s/a/b/ src/x.py"}')]),
    ...     Unit("r1", "user", type="tool_result", tool_call_id="c1", content="Traceback (most recent call last):\\n  ...\\nKeyError: 'k'"),
    ... ]
    >>> f = calls(units)[0]
    >>> f.paths, f.failed, f.error
    ((('src/x.py', 'edited'),), True, "KeyError: 'k'")
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ctxkit.call_effects import Effects, call_effects, open_file_of, text_effects
from ctxkit.log_events import (
    Outcome,
    acted,
    arg_strings,
    decoded_args,
    is_output,
    last_todo_list,
    main_arg,
    named,
    one_line,
    outcome,
    text_action,
    todo_text,
)
from ctxkit.memo import UnitMemo
from ctxkit.model import Unit
from ctxkit.structure import is_request, request_text

ARGS_CHARS = 120



def short_args(arguments: str, chars: int = ARGS_CHARS) -> str:
    """What a call did, in a few words: its command or path, else its arguments."""
    return one_line(main_arg(arguments), chars)



# --- files a call acted on ----------------------------------------------------------------------

_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")
# an extension has a letter: `Mozilla/5.0`, `Googlebot/2.1` and a task's `60.2/60.10` are no files
_HAS_EXT = re.compile(r"\.(?=[A-Za-z0-9]{0,7}[A-Za-z])[A-Za-z0-9]{1,8}$")
_SWE_EDIT = re.compile(r"^(edit\s+\d+:\d+)\s*$", re.MULTILINE)


def _paths(effects: Effects) -> tuple[tuple[str, str], ...]:
    """(path, action) in the order the call names them: what it wrote (created, edited,
    deleted, moved), then what it ran, read (a reading tool or program showed it) or used
    (listed, searched, passed to a command)."""
    found: dict[str, str] = {}
    for path, how in effects.writes:
        found.setdefault(path, how)
    for path in effects.uses:
        found.setdefault(path, "ran" if path in effects.runs else "read" if path in effects.reads else "used")
    return tuple(found.items())


def call_paths(name: str, arguments: str) -> tuple[tuple[str, str], ...]:
    """(path, action) for each file a call acted on (`ctxkit.call_effects`, the reading the
    claims checker holds a summary to): created, edited, deleted, moved, ran, read, used."""
    return _paths(call_effects(name, arguments))


# --- per unit, cached ---------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitFacts:
    """What one unit contributes: a request's text, the calls it makes (name, short arguments,
    files), a text action, its outcome as a tool output, an open file it reports."""

    request: str | None = None
    calls: tuple[tuple[str, str, str, tuple[tuple[str, str], ...]], ...] = ()  # (id, name, args, paths)
    whole: tuple[str, ...] = ()  # each call's main argument as written (`main_arg`)
    action: str | None = None
    action_paths: tuple[tuple[str, str], ...] = ()
    outcome: Outcome | None = None
    open_file: str | None = None
    searches: frozenset[str] = frozenset()  # ids of its calls whose command is a search (`is_search`)
    action_search: bool = False  # its text action is a search


def unit_facts(u: Unit) -> UnitFacts:
    """The facts of one unit, read once (cached by identity and content, `ctxkit.memo`)."""
    return _CACHE(u)


def _read(u: Unit) -> UnitFacts:
    if is_request(u):
        return UnitFacts(request=request_text(u))
    if is_output(u):
        return UnitFacts(outcome=outcome(u), open_file=open_file_of(u.content))
    if u.tool_calls:
        written = [main_arg(c.arguments) for c in u.tool_calls]  # one decode a call
        whole = [one_line(w, 1 << 30) for w in written]
        return UnitFacts(
            whole=tuple(written),
            calls=tuple(
                (c.id, c.name, one_line(w, ARGS_CHARS), call_paths(c.name, c.arguments))
                for c, w in zip(u.tool_calls, whole, strict=True)
            ),
            searches=frozenset(c.id for c, w in zip(u.tool_calls, whole, strict=True) if is_search(w)),
        )
    action = text_action(u)
    if action is not None:
        paths = _paths(text_effects(action, None))
        return UnitFacts(
            action=one_line(action, ARGS_CHARS), action_paths=tuple(paths), action_search=is_search(action),
            whole=(action,),
        )
    return UnitFacts()


_SEARCH = re.compile(r"(?:sudo\s+)?(?:grep|egrep|fgrep|rg|ag|ack|git\s+grep)\b")


def is_search(command: str) -> bool:
    """Whether a shell command's exit status is a search's: its last segment (after `&&`, `;`
    or `|`, quoted patterns aside) runs grep, rg, ag or ack, whose exit 1 means nothing matched."""
    last = re.split(r"&&|\|\||;|\|", _QUOTED.sub(" ", command))[-1]
    return bool(_SEARCH.match(last.strip()))


def _searched(found: Outcome | None) -> Outcome | None:
    """A search's outcome: exit 1 with nothing but the harness's lines is no match, not a
    failure (grep and rg exit 2 on an error)."""
    if found is not None and found.failed and found.exit_code == 1 and not found.news:
        return Outcome(False, 1, "", "")
    return found


_SHELL_TOOLS = ("bash", "shell", "exec", "run", "command", "terminal", "powershell", "cmd")


def _is_shell(name: str) -> bool:
    """A shell tool, or a command written as text (`$`)."""
    lname = name.lower()
    return name == "$" or any(k in lname for k in _SHELL_TOOLS)


def _reads_only(name: str, paths: tuple[tuple[str, str], ...]) -> bool:
    """A call that only reads files (Read, view, glob), not a shell: what it shows is a file's
    content, whose words say nothing of the call's own outcome."""
    lname = name.lower()
    return bool(paths) and all(a == "read" for _, a in paths) and not any(k in lname for k in _SHELL_TOOLS)


def _read_result(found: Outcome | None) -> Outcome | None:
    """A read's outcome: failed only by the log's own flag or the tool's status line (`ERROR:
    Invalid path`, `<tool_use_error>`), never by an exit code or traceback in the file it
    showed (a script that says `exit 259`, a log of a crash)."""
    if found is not None and found.failed and found.signal in ("exit", "traceback"):
        return Outcome(False, None, "", found.news, more=found.more)
    return found


_CACHE = UnitMemo(_read)


# --- over a span --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One action and its outcome: a tool call, or a command written as text."""

    index: int  # the unit that made it
    name: str
    args: str
    paths: tuple[tuple[str, str], ...]
    outcome: Outcome | None  # None: no result in these units
    args_whole: str = ""  # the main argument as written, new lines kept (`main_arg`)

    @property
    def failed(self) -> bool:
        return self.outcome is not None and self.outcome.failed

    @property
    def error(self) -> str:
        return self.outcome.error if self.outcome is not None else ""

    @property
    def label(self) -> str:
        return f"{self.name}({self.args})" if self.name != "$" else f"$ {self.args}"


def calls(units: Sequence[Unit]) -> list[Call]:
    """Every action in `units`, in order, with the outcome of its result when it is there.

    SWE-agent's `edit N:M` is credited to the file the previous output said was open. A result
    goes to the latest call of its id before it, as `structure` pairs them: ids are not always
    unique (tau-bench's gpt-4o logs use a call's id again turns later), and the first result of
    an id would give a later call an earlier call's outcome.
    """
    read = [unit_facts(u) for u in units]  # each unit's facts looked up once
    results: dict[tuple[int, str], Outcome] = {}  # (call's unit, id) -> its result's outcome
    early: dict[str, Outcome] = {}  # a result before any call of its id (out of order)
    latest: dict[str, int] = {}  # id -> the unit of its latest call so far
    for i, (u, f) in enumerate(zip(units, read, strict=True)):
        cid = u.tool_call_id
        if cid is not None and f.outcome is not None:
            if cid in latest:
                results.setdefault((latest[cid], cid), f.outcome)  # a second result: the first stays
            else:
                early.setdefault(cid, f.outcome)
        for call in f.calls:
            latest[call[0]] = i
    out: list[Call] = []
    open_file: str | None = None
    for i, u in enumerate(units):
        f = read[i]
        if f.open_file:
            open_file = f.open_file
        for k, (cid, name, args, paths) in enumerate(f.calls):
            found = results.get((i, cid)) or early.get(cid)
            if cid in f.searches:
                found = _searched(found)
            elif _reads_only(name, paths):
                found = _read_result(found)
            out.append(Call(i, name, args, paths, found, f.whole[k] if k < len(f.whole) else ""))
        if f.action is not None and acted(units, i):
            result = read[i + 1].outcome or outcome(units[i + 1])
            if f.action_search:
                result = _searched(result) or result
            paths = f.action_paths
            if not paths and open_file and _SWE_EDIT.search(u.content):
                paths = ((open_file, "edited"),)
            out.append(Call(i, "$", f.action, paths, result, f.whole[0] if f.whole else ""))
    return out


CHANGES = frozenset({"created", "written", "edited", "deleted", "moved"})  # what a file's change is called
ACTION_RANK = {"created": 0, "written": 1, "edited": 1, "deleted": 2, "moved": 2, "ran": 3, "read": 4, "used": 5}


def files(units: Sequence[Unit], actions: Sequence[Call] | None = None) -> dict[str, list[str]]:
    """path -> what was done to it (created, edited, written, deleted, ran, read, used), in
    order of first appearance; a bare name that is the tail of a full path joins that path."""
    out: dict[str, list[str]] = {}
    for c in actions if actions is not None else calls(units):
        for path, action in c.paths:
            if c.failed and action in CHANGES and not _is_shell(c.name):
                # an edit tool's write that failed changed nothing (a patch that did not
                # apply); a shell command's exit code may be a later step's (`cat > t.py <<
                # EOF ... EOF && python t.py` wrote t.py, then the run failed)
                continue
            done = out.setdefault(path, [])
            if action == "created" and done:
                action = "written"  # written over a file an earlier call had named: it was there
            if action not in done:
                done.append(action)
    full = [p for p in out if "/" in p.lstrip("./")]
    for short in [p for p in out if "/" not in p.lstrip("./")]:
        owner = next((p for p in full if p.endswith("/" + short.lstrip("./"))), None)
        if owner is not None:
            for action in out.pop(short):
                if action not in out[owner]:
                    out[owner].append(action)
    return {p: sorted(a, key=lambda x: ACTION_RANK.get(x, 9)) for p, a in out.items() if a}


def requests(units: Sequence[Unit]) -> list[Unit]:
    """The user's own requests, in order (harness notes and demonstrations aside)."""
    return [u for u in units if unit_facts(u).request]


def todo_list(units: Sequence[Unit]) -> list[tuple[str, str]]:
    """(status, item) of every entry of the last todo list (TodoWrite, update_plan), in its
    order: each item as last updated, done ones too."""
    found = last_todo_list(units)
    items = found[1] if found is not None else []
    return [
        (str(item.get("status", "pending")), one_line(text))
        for item in items if (text := todo_text(item)) is not None
    ]


def todos(units: Sequence[Unit]) -> list[tuple[str, str]]:
    """(status, item) of the unfinished entries of the last todo list (TodoWrite, update_plan)."""
    return [(status, text) for status, text in todo_list(units) if status != "completed"]



# --- the names of the current work ------------------------------------------------------------

RECENT_REPLIES = 3  # the assistant messages, newest first, whose names are the current work's
MAX_NAMES = 20  # names of the current work read from the log

# what a model continuing the work refers to by name: a URL, a path or file name, a code name
# (snake_case, camelCase, PascalCase, kebab-case, dotted), an id that mixes letters and digits
# (ZFA04Y, W2378156, a commit hash), an issue or order number (#123, 4521), a `quoted` name
_URL = re.compile(r"https?://[^\s<>\"'`)\]}]+")
_BACKTICKED = re.compile(r"`([^`\n]{3,40})`")
_TOKEN = re.compile(r"(?:~?/\.?|\.\.?/|#)?[A-Za-z0-9_][\w./@-]*[A-Za-z0-9_]")
_CODE_NAME = re.compile(
    r"[A-Za-z_]\w*_\w+"  # snake_case
    r"|[a-z][a-z0-9]*[A-Z]\w*"  # camelCase
    r"|[A-Z][a-z0-9]+[A-Z]\w*"  # PascalCase
    r"|[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+"  # kebab-case
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"  # dotted: a module, a file name
)
_ID = re.compile(r"#?(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{4,}|#?\d{3,}(?:\.\d+)?")
_TEMPLATE = re.compile(r"[<>{}$]")  # `python <script_name>.py`, `${label}`: a template, no name
_PLAIN = frozenset(
    "e.g i.e etc. utf-8 utf8 http https json yaml true false null none self this that".split()
)


def _name_kind(token: str) -> bool:
    """Whether `token` (a run of name characters) is a name a model would refer to."""
    if "/" in token:
        # a path: from the root, home or here, of three parts, or with a part no word says (a
        # file name, `deberta-v3`); not `</canvas>`'s `/canvas`, `n/a`, `UI/UX` or `read/write`
        parts = [p for p in token.split("/") if p not in ("", ".", "..", "~")]
        if not parts or not any(c.isalpha() for c in token):
            return False
        rooted = token.startswith(("/", "~", "./", "../")) and (len(parts) >= 2 or "." in parts[0])
        return rooted or len(parts) >= 3 or any(not p.isalpha() for p in parts)
    return bool(_CODE_NAME.fullmatch(token) or _ID.fullmatch(token))


def names_in(text: str) -> list[str]:
    """The names `text` mentions, in order, each once: URLs, `quoted` names, paths and file
    names, code names, ids and numbers of three digits or more."""
    out: dict[str, None] = {}
    for m in _URL.finditer(text):
        out[m.group(0).rstrip(".,;:!?")] = None
    for m in _BACKTICKED.finditer(text):
        inner = m.group(1).strip()
        # a quoted name, not a plain word (`main`, `false`) nor a sentence
        if len(inner.split()) <= 3 and inner.lower() not in _PLAIN and not _TEMPLATE.search(inner) and (
            not inner.isalpha() or _name_kind(inner)
        ):
            out[inner] = None
    rest = _URL.sub(" ", text)
    for m in _TOKEN.finditer(rest):
        token = m.group(0).rstrip(".-")
        if len(token) >= 3 and token.lower() not in _PLAIN and _name_kind(token):
            out[token] = None
    return list(out)


def unit_words(u: Unit) -> list[str]:
    """A unit's text as the model reads it: its content and the string values of its calls'
    arguments (a command, a path, an id; not the tool's name, which is no name of the work)."""
    out = [u.content] if u.content else []
    for c in u.tool_calls:
        out.extend(arg_strings(decoded_args(c.arguments), numbers=True))
    return out


def latest_positions(units: Sequence[Unit]) -> list[int]:
    """The messages that say what the work is now: the last request and the last
    `RECENT_REPLIES` assistant messages, newest first after the request."""
    request = next((i for i in range(len(units) - 1, -1, -1) if is_request(units[i])), None)
    replies = [i for i, u in enumerate(units) if u.role == "assistant" and (u.content or u.tool_calls)]
    out = [] if request is None else [request]
    out += [i for i in reversed(replies[-RECENT_REPLIES:]) if i != request]
    return out


def _name_cost(name: str) -> int:
    """0 for an id, a number or a code name, 1 for a path or a file name, 2 for a URL or a
    quoted phrase."""
    if "://" in name or " " in name:
        return 2
    return 1 if "/" in name or _HAS_EXT.search(name) else 0


def current_names(units: Sequence[Unit], limit: int = 3 * MAX_NAMES) -> list[str]:
    """The names of the current work: those the last request and the latest assistant messages
    mention that the conversation had used before them (an id, a file, a function the work is
    about, not one it just made up), none part of a longer one listed, at most `limit`. The
    short ones first (an id, a function: a line holds many), then paths and file names, then
    URLs and quoted phrases; in each, the request's first, then the newest message's.

    >>> current_names([
    ...     Unit("u1", "user", content="Cancel reservation ZFA04Y, please."),
    ...     Unit("a1", "assistant", content="Reservation ZFA04Y holds flight HAT170; cancel it?"),
    ...     Unit("u2", "user", content="Yes, cancel ZFA04Y and keep HAT001."),
    ... ])
    ['ZFA04Y']
    """
    positions = latest_positions(units)
    if not positions:
        return []
    earliest = min(positions)
    before = "\n".join(t for u in units[:earliest] for t in unit_words(u))
    found: dict[str, None] = {}
    for i in positions:
        u = units[i]
        texts = [request_text(u)] if u.role == "user" else unit_words(u)
        for text in texts:
            for name in names_in(text):
                if name not in found and named(name, before):
                    found[name] = None
    names = sorted(found, key=_name_cost)
    # a name inside a longer one listed says less (`v2` of `model-v2`, `Foo` of `Foo.bar`)
    names = [n for n in names if not any(n != o and n in o for o in names)]
    return names[:limit]
