"""What the ORIGINAL log shows happened, read by the evaluator itself: each call (a tool call or
a command written as text), the files it wrote and read, whether the log flags its result as
failed, the user's requests, the todo lists and each item's latest state.

This is the claim checker's own reading of the unit model (`ctxkit.model`), written apart from
`ctxkit.facts`, which the summarizer uses: a bug there must not make a summary's claim look
backed here (a test checks that nothing in `ctxkit.fidelity` imports `ctxkit.facts`,
`ctxkit.summarizers` or `ctxkit.strategies`). Only the neutral reading of one event is shared,
as data (`ctxkit.log_events`: a call's arguments decoded, an output's JSON record, a command
written as text, whether a unit is an output). It is deliberately literal:

- a file is **written** only by a call that writes it: an editor's write commands (Write, Edit,
  MultiEdit, str_replace_editor create/str_replace/insert, write_file, replace, apply_patch),
  a patch header (`*** Update File:`, `+++ b/` of an applied diff), `sed -i`/`perl -i`, a
  redirect (`>`, `>>`, `tee`), `cp`/`mv`/`install` as their target, `touch`; **created** only
  by the ones that make a file (a write tool, create, a redirect, a copy, `touch`, `*** Add
  File:`); **deleted** by `rm` or `*** Delete File:`;
- a result **failed** only when the log says so: its error flag (`is_error`), a non-zero exit
  code it records (`<returncode>`, `Exit code`, `Process exited with code`, an `exit_code`
  field), or, in a log that records neither for it, a Python traceback or the tool's own
  error status line (a log that records `is_error: false` is believed);
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

import fnmatch
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.log_events import (
    arg_strings,
    decoded_args,
    is_output,
    outcome,
    output_text,
    path_values,
    text_action,
)
from ctxkit.model import Unit

PATH_KEYS = ("file_path", "filePath", "path", "filename", "notebook_path", "file", "target_file",
             "absolute_path", "target", "dir_path")
COMMAND_KEYS = ("command", "cmd", "script", "commands")
# argument keys whose text a call writes or says, not what it acts on
TEXT_KEYS = frozenset(
    "content new_string old_string new_str old_str text description prompt message body file_text "
    "thought reason summary old new edits".split()
)
EDITOR_COMMANDS = {"create": "created", "write": "created", "str_replace": "edited", "insert": "edited",
                   "undo_edit": "edited", "append": "edited", "view": "", "read": ""}
_CREATE_NAMES = ("write", "create", "save")
_EDIT_NAMES = ("edit", "replace", "patch", "insert", "notebookedit", "apply_diff", "search_replace")
_SHELL_NAMES = ("bash", "shell", "exec", "terminal", "run", "command", "powershell", "execute", "sh")


def norm(text: str) -> str:
    """Whitespace collapsed, trimmed: the form every comparison is made on."""
    return " ".join(text.split())


# --- files ---------------------------------------------------------------------------------------

_URL = re.compile(r"^[a-z][a-z0-9+.-]*://|^www\.", re.IGNORECASE)
_EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9_-]{0,9}$")
_VERSIONISH = re.compile(r"^[\d.]+$|^[A-Za-z][\w-]*/\d+(?:\.\d+)*$")  # 60.2, Mozilla/5.0, Googlebot/2.1


def looks_like_path(text: str) -> bool:
    """Whether a string is written as a file path: no spaces, not an option, a URL, a number or
    a `product/version` token; a directory part or a file extension.

    >>> [looks_like_path(s) for s in ("src/a.py", "Mozilla/5.0", "-prompt.md", "60.2", "README")]
    [True, False, False, False, False]
    """
    s = text.strip()
    if len(s) < 2 or any(c.isspace() for c in s) or s.startswith(("-", "<", "$", "{", "(")):
        return False
    if _URL.match(s) or _VERSIONISH.match(s) or s.endswith(("...", "…")):
        return False
    if any(c in s for c in "*?|;&<>\"'`(){}[],=") :
        return False
    body = s.rstrip("/")
    return "/" in body or bool(_EXT.search(body))


_DRIVE = re.compile(r"^([A-Za-z]):[\\/]")


def clean_path(text: str) -> str:
    """A path as written, without quotes, a leading `./` or a trailing slash; a Windows path
    with forward slashes and its drive as Git Bash writes it (`D:\\a\\b` is `/d/a/b`)."""
    s = text.strip().strip("`'\"").rstrip(",;:").strip("`'\"")
    if s.endswith(".") and s.strip(".") and not s.endswith(".."):
        s = s[:-1]  # a sentence's full stop, not `.` or `..`
    if "\\" in s and "/" not in s.replace("\\", ""):
        s = s.replace("\\", "/")
    m = _DRIVE.match(s)
    if m:
        s = f"/{m.group(1).lower()}/{s[3:]}"
    while s.startswith("./") and len(s) > 2:
        s = s[2:]
    return s.rstrip("/") or s


def same_path(a: str, b: str) -> bool:
    """Two spellings of one file: equal, or one the other's tail at a `/` (an absolute path and
    the relative one, a bare name and its full path).

    >>> same_path("src/x.py", "/repo/src/x.py"), same_path("x.py", "ax.py")
    (True, False)
    """
    a, b = clean_path(a), clean_path(b)
    if not a or not b:
        return False
    if a == b:
        return True
    if "*" in a or "*" in b:  # a glob a command was given (`rm -rf /tmp/x*`)
        pattern, name = (a, b) if "*" in a else (b, a)
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, "*/" + pattern.lstrip("/"))
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return long_.endswith("/" + short)


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
    writes: set[tuple[str, str]] = field(default_factory=set)  # (path, created|edited|deleted)
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


NOT_NAMING = TEXT_KEYS | {"code", "patch", "patchText", "input", "script", "command", "cmd"}


def _command_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        if len(value) >= 3 and value[-2] in ("-c", "-lc", "-Command", "/c"):
            return value[-1]
        return " ".join(shlex.quote(v) for v in value)
    return ""


def read_call(index: int, name: str, arguments: str) -> Act:
    """What one tool call did to files, from its name and arguments."""
    args = decoded_args(arguments)
    act = Act(index, name, arguments)
    lname = name.lower()
    if isinstance(args, dict):
        act.strings = tuple(arg_strings(args))
        sub = args.get("command")
        editor = isinstance(sub, str) and sub in EDITOR_COMMANDS and any(
            isinstance(args.get(k), str) for k in PATH_KEYS
        )
        paths = [clean_path(v) for v in path_values(args, PATH_KEYS)]
        if editor:
            how = EDITOR_COMMANDS[str(sub)]
        elif "todo" in lname or "plan" in lname:
            how = ""
        elif any(k in lname for k in _CREATE_NAMES):
            how = "created"
        elif any(k in lname for k in _EDIT_NAMES):
            how = "edited"
        else:
            how = ""
        for p in paths:
            if how:
                act.writes.add((p, how))
            else:
                act.uses.add(p)
        if not editor:
            for key in COMMAND_KEYS:
                command = _command_of(args.get(key))
                if command.strip():
                    act.command = command
                    break
        texts = arg_strings(args, TEXT_KEYS)
    else:
        act.strings = (str(args),)
        texts = [str(args)]
        if any(k in lname for k in _SHELL_NAMES) and "patch" not in lname:
            act.command = str(args)
    for text in texts:
        act.writes.update(patch_writes(text, applied="patch" in lname or "apply" in lname))
        if "(" in text:  # OpenHands' agent skills, called from IPython
            for m in _SKILL.finditer(text):
                path = clean_path(m.group(2))
                if m.group(1) == "open_file":
                    act.uses.add(path)
                else:
                    act.writes.add((path, "created" if m.group(1) == "create_file" else "edited"))
    if act.command:
        writes, uses = shell_effects(act.command)
        act.writes.update(writes)
        act.uses.update(uses)
    # what names a path: its path and option arguments and its command line, not a file's
    # contents (a heredoc's body, a patch, code an IPython call runs, an edit's new text)
    lines = [_without_heredocs(act.command)[0]] if act.command else []
    if isinstance(args, dict):
        lines += [t for k, v in args.items() if k not in NOT_NAMING for t in arg_strings(v, TEXT_KEYS)
                  if t is not act.command and "\n" not in t.strip()]
    act.named = tuple(lines)
    return act


_SKILL = re.compile(
    r"\b(create_file|edit_file_by_replace|append_file|insert_content_at_line|edit_file|open_file)\(\s*"
    r"(?:file_name=|path=)?[rf]?['\"]([^'\"\n]+)['\"]"
)
_PATCH_HEADER = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
_DIFF_TARGET = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.MULTILINE)
_APPLIES_DIFF = re.compile(r"\bgit\s+apply\b|\bpatch\s+-p|\bpatch\s+<|\bapply_patch\b")


def patch_writes(text: str, applied: bool = False) -> set[tuple[str, str]]:
    """Files a patch in `text` writes: apply_patch headers always; a unified diff's `+++` lines
    only when the text applies it (`git apply`, `patch`, an apply tool)."""
    out: set[tuple[str, str]] = set()
    if "*** " in text and ("*** Begin Patch" in text or "File: " in text):
        for verb, path, moved in _PATCH_HEADER.findall(text):
            p = clean_path(path or moved)
            if p:
                out.add((p, "created" if verb == "Add" or moved else "deleted" if verb == "Delete" else "edited"))
    if "+++ " in text and (applied or _APPLIES_DIFF.search(text)):
        for path in _DIFF_TARGET.findall(text):
            if path != "/dev/null":
                out.add((clean_path(path), "edited"))
    return out


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;"})
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
_RUNNERS = frozenset({"python", "python3", "node", "bash", "sh", "zsh", "ruby", "perl", "php", "deno",
                      "bun", "tsx", "ts-node", "go", "pytest", "npx", "cargo", "make", "uv"})


def _without_heredocs(command: str) -> tuple[str, list[str]]:
    """The command with heredoc bodies taken out (`cat > f <<EOF` stays), and the bodies."""
    lines = command.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    bodies: list[str] = []
    k = 0
    while k < len(lines):
        line = lines[k]
        out.append(line)
        k += 1
        for m in _HEREDOC.finditer(line):
            tag = m.group(2)
            body: list[str] = []
            while k < len(lines) and lines[k].strip() != tag:
                body.append(lines[k])
                k += 1
            k += 1  # the terminator
            bodies.append("\n".join(body))
    return "\n".join(out), bodies


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: the words as they are
        return line.split()


def _segments(tokens: list[str]) -> Iterator[tuple[list[str], list[str]]]:
    """(argv, redirect targets) of each simple command."""
    argv: list[str] = []
    targets: list[str] = []
    k = 0
    while k < len(tokens):
        tok = tokens[k]
        if tok in _SEPARATORS:
            yield argv, targets
            argv, targets = [], []
        elif tok in _REDIRECTS or (tok.endswith((">", ">>")) and tok.rstrip(">").isdigit()):
            if k + 1 < len(tokens) and not tokens[k + 1].startswith("&"):
                targets.append(tokens[k + 1])
                k += 1
        elif tok in ("<", "<<", "<<<", "<<-", ">&", "<&"):
            k += 1  # the input or the heredoc tag
        elif tok.isdigit() and k + 1 < len(tokens) and tokens[k + 1] in (">", ">>", ">&"):
            pass  # the fd of a redirect
        else:
            argv.append(tok)
        k += 1
    yield argv, targets


def _sed_files(argv: list[str]) -> list[str]:
    args = argv[1:]
    explicit = any(a in ("-e", "--expression", "-f") or a.startswith("--expression=") for a in args)
    files: list[str] = []
    script_taken = explicit
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-e", "--expression", "-f"):
            skip = True
            continue
        if a.startswith("-"):
            continue
        if not script_taken:
            script_taken = True
            continue
        files.append(a)
    return files


def shell_effects(command: str) -> tuple[set[tuple[str, str]], set[str]]:
    """(files written with how, files used) by a shell command.

    >>> w, u = shell_effects("cat > t.py <<'EOF'\\nprint(1) > x.txt\\nEOF\\npython t.py && mv a.txt b/")
    >>> sorted(w), sorted(u)
    ([('b/a.txt', 'created'), ('t.py', 'created')], ['a.txt', 't.py'])
    """
    writes: set[tuple[str, str]] = set()
    uses: set[str] = set()
    text, bodies = _without_heredocs(command)
    for body in bodies:
        writes.update(patch_writes(body, applied=bool(_APPLIES_DIFF.search(text))))
    text = re.sub(r"\\\n", " ", text)
    for line in text.split("\n"):
        for argv, targets in _segments(_tokens(line)):
            for t in targets:
                if len(t) > 1 and not t.startswith(("/dev/", "$", "&", "-")):
                    writes.add((clean_path(t), "created"))
            while argv and (re.match(r"^\w+=", argv[0]) or argv[0] in ("sudo", "env", "time", "nohup", "command")):
                argv = argv[1:]
            if not argv:
                continue
            prog = argv[0].rsplit("/", 1)[-1]
            rest = [a for a in argv[1:] if not a.startswith("-")]
            if prog in ("sed", "perl", "gsed") and any(
                a == "-i" or a.startswith(("-i", "--in-place")) or (a.startswith("-") and not a.startswith("--") and "i" in a[1:] and prog == "perl")
                for a in argv[1:]
            ):
                for f in (_sed_files(argv) if prog != "perl" else rest[1:]):
                    if looks_like_path(f) or "/" not in f:
                        writes.add((clean_path(f), "edited"))
                continue
            if prog in ("cp", "mv", "install", "rsync", "ln") and len(rest) >= 2:
                target = clean_path(rest[-1])
                into_dir = rest[-1].endswith("/") or len(rest) > 2 or rest[-1] in (".", "..")
                if not into_dir:
                    writes.add((target, "created"))
                for src in rest[:-1]:
                    uses.add(clean_path(src))
                    if into_dir:
                        name = clean_path(src).rsplit("/", 1)[-1]
                        writes.add((name if target in (".", "") else f"{target}/{name}", "created"))
                continue
            if prog == "git" and len(argv) > 1:
                sub = argv[1]
                files = [clean_path(a) for a in argv[2:] if not a.startswith("-") and looks_like_path(a)]
                if sub == "mv" and len(files) >= 2:
                    writes.add((files[-1], "created"))
                elif sub == "rm":
                    writes.update((f, "deleted") for f in files)
                elif sub in ("checkout", "restore") and ("--" in argv or sub == "restore"):
                    writes.update((f, "edited") for f in files)
                else:
                    uses.update(files)
                continue
            if prog == "tee":
                writes.update((clean_path(f), "created") for f in rest)
                continue
            if prog == "touch":
                writes.update((clean_path(f), "created") for f in rest)
                continue
            if prog in ("rm", "unlink"):
                writes.update((clean_path(f), "deleted") for f in rest)
                continue
            if prog == "truncate":
                writes.update((clean_path(f), "edited") for f in rest if looks_like_path(f))
                continue
            if prog == "dd":
                writes.update((clean_path(a[3:]), "created") for a in argv[1:] if a.startswith("of="))
                continue
            if prog in _RUNNERS or prog.startswith("python"):
                uses.update(clean_path(a) for a in rest if looks_like_path(a))
                continue
            uses.update(clean_path(a) for a in argv[1:] if looks_like_path(a))
    return writes, uses


# --- text actions --------------------------------------------------------------------------------

_SWE_CREATE = re.compile(r"^create\s+(\S+)", re.MULTILINE)
_SWE_EDIT = re.compile(r"^edit\s+\d+:\d+", re.MULTILINE)
_SWE_OPEN = re.compile(r"^(?:open|search_file|find_file)\s+\"?([^\s\"]+)", re.MULTILINE)
_OPEN_FILE = re.compile(r"\(Open file: ([^)\n]+)\)")


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
            m = _OPEN_FILE.search(u.content[-400:])
            if m:
                open_file = clean_path(m.group(1))
        command = text_action(u)
        if command is not None and i + 1 < len(units) and is_output(units[i + 1]) and units[i + 1].tool_call_id is None:
            act = Act(i, "$", command, command=command, strings=(command,), named=(_without_heredocs(command)[0],))
            swe_create = _SWE_CREATE.findall(command)
            if swe_create or _SWE_EDIT.search(command) or _SWE_OPEN.search(command):
                act.writes.update((clean_path(p), "created") for p in swe_create)
                if _SWE_EDIT.search(command) and open_file:
                    act.writes.add((open_file, "edited"))
                act.uses.update(clean_path(p) for p in _SWE_OPEN.findall(command))
            else:
                writes, uses = shell_effects(command)
                act.writes.update(writes)
                act.uses.update(uses)
            act.result = read_result(i + 1, units[i + 1])
            acts.append(act)
    return Log(units, acts, requests, todo_lists)
