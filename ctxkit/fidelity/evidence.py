"""What the ORIGINAL log shows happened, as the claim checker reads it: each call (a tool call or
a command written as text) with the files it wrote and read and its result, the user's
requests, the todo lists and each item's latest state.

What one event says and what one call did to files are read once, for every side, as data:
`ctxkit.log_events.outcome` (a result failed or not, by the log's own flag first) and
`ctxkit.call_effects` (the files a call created, edited or deleted, and the ones it read). The
summaries say what those readings say; this checker holds them, and every peer's summary, to the
same. What the checker makes of them is its own, written apart from `ctxkit.facts` (a test
checks that nothing in `ctxkit.fidelity` imports `ctxkit.facts`, `ctxkit.summarizers` or
`ctxkit.strategies`): which messages the user typed, each todo item's latest state, whether a
claim's path, action, error or order is backed. It is deliberately literal:

- a file is created only if no call named it before its first write (`Log`), edited only by a
  write to a file that was there;
- a **request** is a user message the user typed: not a tool result, not a command record
  (`<command-name>`), a slash command (`/clear`), a harness note or injected instructions.

    >>> from ctxkit.model import ToolCall, Unit
    >>> log = read_log([
    ...     Unit("u1", "user", content="Fix it"),
    ...     Unit("a1", "assistant", tool_calls=[ToolCall("c1", "bash", '{"command": "cp a.py a.py.bak && sed -i s/x/y/ a.py"}')]),
    ...     Unit("r1", "tool", tool_call_id="c1", content="<returncode>0</returncode>"),
    ... ])
    >>> sorted(log.acts[0].writes)
    [('a.py', 'edited'), ('a.py.bak', 'created')]
    >>> log.acts[0].failed, log.requests
    (False, [0])
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.call_effects import (
    call_effects,
    clean_path,
    open_file_of,
    same_path,
    text_effects,
)
from ctxkit.log_events import decoded_args, is_output, outcome, output_text, text_action
from ctxkit.model import Unit


def norm(text: str) -> str:
    """Whitespace collapsed, trimmed: the form every comparison is made on."""
    return " ".join(text.split())


# --- a result: failed or not ---------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """A tool output as the log records it."""

    index: int
    text: str
    failed: bool
    exit_code: int | None
    flagged: bool  # the log's own error flag
    how: str  # why it counts as failed: "is_error", "exit N", "traceback", or ""


_HOW = {"flag": "is_error", "traceback": "traceback", "status": "the tool's error status"}


def read_result(i: int, u: Unit) -> Result:
    """A tool output as the log records it, failed or not as `log_events.outcome` reads it (the
    one reading the summaries take too)."""
    found = outcome(u)
    how = f"exit {found.exit_code}" if found.signal == "exit" else _HOW.get(found.signal, "")
    return Result(i, output_text(u.content)[0], found.failed, found.exit_code, found.signal == "flag", how)


# --- calls ---------------------------------------------------------------------------------------


@dataclass
class Act:
    """One action of the original: a tool call, or a command an agent wrote as text and got an
    output for (SWE-agent, mini-swe-agent's text mode)."""

    index: int  # the unit that made it
    name: str  # the tool's name; "$" for a command written as text
    args: str  # its arguments as the log has them
    command: str = ""  # the shell command it ran, if any
    strings: tuple[str, ...] = ()  # every string argument
    named: tuple[str, ...] = ()  # the arguments that name what it acts on (no file contents)
    writes: set[tuple[str, str]] = field(default_factory=set)  # (path, created|edited|deleted|moved)
    uses: set[str] = field(default_factory=set)  # paths read, listed or run
    result: Result | None = None

    @property
    def failed(self) -> bool:
        return self.result is not None and self.result.failed

    @property
    def label(self) -> str:
        """The call as a quote: its tool and its command (else its arguments), on one line."""
        body = norm(self.command or self.args)
        body = body if len(body) <= 150 else body[:147].rstrip() + "..."
        return f"{self.name}({body})" if self.name != "$" else f"$ {body}"


def read_call(index: int, name: str, arguments: str) -> Act:
    """What one tool call did to files (`call_effects`), as an act of the original."""
    e = call_effects(name, arguments)
    return Act(index, name, arguments, e.command, e.strings, e.named, set(e.writes), set(e.uses))


# --- requests ------------------------------------------------------------------------------------

# a whole message the harness wrote, not the user
_NOT_TYPED = re.compile(
    r"^\s*(?:\[Request interrupted|# AGENTS\.md instructions|<INSTRUCTIONS>|<user_instructions>|"
    r"<permissions instructions>|This session is being continued from a previous conversation|"
    r"Base directory for this skill|<turn_aborted>)",
)
# blocks the harness puts into a user's message (a command record, a reminder, local output)
_HARNESS_BLOCK = re.compile(
    r"<(command-name|command-message|command-args|local-command-stdout|local-command-stderr|"
    r"local-command-caveat|system-reminder|environment_context|bash-input|bash-stdout|bash-stderr|"
    r"task-notification|user_shell_command|ide_opened_file|ide_selection)>.*?</\1>|"
    r"^Caveat: The messages below were generated by the user while running local commands\.[^\n]*$",
    re.DOTALL | re.MULTILINE,
)
_SLASH = re.compile(r"^\s*/[\w:-]+\s*$")
_TOOL_ERROR = re.compile(r"^\s*(?:<tool_use_error>|Tool call failed|Parameter '\w+' is expected|ERROR:)")


def typed_text(u: Unit) -> str:
    """What the user typed in a user message: the message without the blocks the harness put in
    it; "" for a result, a harness record, injected instructions, a bare slash command or a tool
    error.

    >>> [typed_text(Unit("u", "user", content=c)) for c in ("fix it", "/clear", "<command-name>/model</command-name>")]
    ['fix it', '', '']
    """
    if u.role != "user" or is_output(u) or u.type in ("summary", "placeholder", "tool_result", "tool_call"):
        return ""
    if u.meta.get("is_meta") or u.meta.get("demo"):
        return ""
    text = u.content.strip()
    if not text or _NOT_TYPED.match(text) or _TOOL_ERROR.match(text):
        return ""
    text = _HARNESS_BLOCK.sub(" ", text).strip()
    return "" if _SLASH.match(text) else text


def is_typed_request(u: Unit) -> bool:
    """A user message with words the user typed (`typed_text`)."""
    return bool(typed_text(u))


# --- todo lists ----------------------------------------------------------------------------------

DONE = frozenset({"completed", "complete", "done", "finished", "cancelled", "canceled"})
_CHECKBOX = re.compile(r"^\s*[-*]\s*\[([ xX~-])\]\s+(.+)$", re.MULTILINE)


def _todo_items(args: Any) -> list[tuple[str, str]] | None:
    if isinstance(args, dict):
        for key in ("todos", "plan", "todoList", "items", "tasks"):
            value = args.get(key)
            if isinstance(value, list):
                out = []
                for item in value:
                    if not isinstance(item, dict):
                        continue
                    text = next((item[k] for k in ("content", "step", "description", "title", "text", "task")
                                 if isinstance(item.get(k), str) and item[k].strip()), None)
                    if text is None:
                        continue
                    status = item.get("status")
                    if not isinstance(status, str):
                        status = "completed" if item.get("completed") is True or item.get("done") is True else "pending"
                    out.append((norm(text), status.lower().replace(" ", "_")))
                return out
            if isinstance(value, str) and _CHECKBOX.search(value):
                return [(norm(t), "pending" if mark == " " else "in_progress" if mark in "~-" else "completed")
                        for mark, t in _CHECKBOX.findall(value)]
    return None


@dataclass(frozen=True)
class Todo:
    """One todo item's state at one list."""

    index: int  # the unit of the list
    text: str
    status: str

    @property
    def open(self) -> bool:
        return self.status not in DONE


# --- the log -------------------------------------------------------------------------------------


@dataclass
class Log:
    """The original transcript, read for evidence."""

    units: list[Unit]
    acts: list[Act]
    requests: list[int]  # units the user typed
    todo_lists: list[list[Todo]]  # every todo list, in order

    def writes_of(self, path: str) -> list[tuple[Act, str]]:
        """Calls that wrote the path, and how; an editor's call the log flags as failed wrote
        nothing (a shell command's failure may come from a later part of it, so it counts)."""
        return [(a, how) for a in self.acts if not (a.failed and not a.command)
                for p, how in a.writes if same_path(p, path)]

    def uses_of(self, path: str) -> list[Act]:
        """Calls that named the path: read it, listed it, ran it, or wrote it."""
        return [
            a for a in self.acts
            if any(same_path(p, path) for p in a.uses) or any(same_path(p, path) for p, _ in a.writes)
            or _names_path(a, path)
        ]

    def todo_states(self, text: str) -> list[Todo]:
        """Each list's entry for an item (matched on its text; a claim cut with "..." on its head)."""
        key = _item_key(text)
        out = []
        for todos in self.todo_lists:
            for t in todos:
                if _item_matches(key, t.text):
                    out.append(t)
                    break
        return out


def _names_path(a: Act, path: str) -> bool:
    """Whether a call's arguments name the path as a whole (not `x.py` in `x.py.bak`)."""
    p = clean_path(path)
    if len(p) < 3:
        return False
    named = re.compile(rf"(?<![\w.~-]){re.escape(p)}(?![\w-]|\.\w|/[\w.])")
    return any(p in s and named.search(s) for s in a.named)


def _item_key(text: str) -> str:
    t = norm(text).rstrip(".")
    return t[:-3].rstrip() if t.endswith("...") else t


def _item_matches(key: str, item: str) -> bool:
    item = norm(item).rstrip(".")
    return bool(key) and (item == key or (len(key) >= 20 and item.startswith(key)))


def read_log(units: Sequence[Unit]) -> Log:
    """Read the original's units once: calls with their results, requests, todo lists."""
    units = list(units)
    acts: list[Act] = []
    latest: dict[str, Act] = {}
    todo_lists: list[list[Todo]] = []
    requests: list[int] = []
    open_file: str | None = None
    for i, u in enumerate(units):
        if is_typed_request(u):
            requests.append(i)
        for c in u.tool_calls:
            act = read_call(i, c.name, c.arguments)
            acts.append(act)
            latest[c.id] = act
            items = _todo_items(decoded_args(c.arguments)) if ("todo" in c.name.lower() or "plan" in c.name.lower()) else None
            if items is not None:
                todo_lists.append([Todo(i, t, s) for t, s in items])
        if is_output(u):
            if u.tool_call_id is not None and u.tool_call_id in latest and latest[u.tool_call_id].result is None:
                latest[u.tool_call_id].result = read_result(i, u)
            open_file = open_file_of(u.content) or open_file
        command = text_action(u)
        if command is not None and i + 1 < len(units) and is_output(units[i + 1]) and units[i + 1].tool_call_id is None:
            e = text_effects(command, open_file)
            act = Act(i, "$", command, e.command, e.strings, e.named, set(e.writes), set(e.uses))
            act.result = read_result(i + 1, units[i + 1])
            acts.append(act)
    return Log(units, acts, requests, todo_lists)
