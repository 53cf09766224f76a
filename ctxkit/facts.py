"""What a transcript says happened, read from its structure: the user's requests, each tool call
with the files it acted on and its outcome, the failures, the todo list.

Summaries, placeholders and handovers are written from these facts, so they say what the log
says and nothing else: a tool output failed when the log marks it (an error flag, a non-zero exit
code, a traceback, a tool's own error status line, a shell diagnostic), never because its text
contains the word "error"; a file was edited when an edit tool, an in-place command (`sed -i`,
a redirect, `apply_patch`) or a patch header says so.

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

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.memo import UnitMemo
from ctxkit.model import Unit
from ctxkit.structure import is_request, request_text

LINE_CHARS = 200  # an error or first line is kept up to this many characters
ARGS_CHARS = 120

# --- text helpers -------------------------------------------------------------------------------


def one_line(text: str, chars: int = LINE_CHARS) -> str:
    """Whitespace collapsed; longer than `chars` ends in "...". """
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 3].rstrip() + "..."


def decoded_args(arguments: str) -> Any:
    """A call's arguments as data (JSON decoded), or the text itself when it is not JSON."""
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments


_MAIN_KEYS = ("command", "cmd", "file_path", "path", "pattern", "query", "url", "filename",
              "notebook_path", "absolute_path", "description", "name", "input", "code")


def short_args(arguments: str, chars: int = ARGS_CHARS) -> str:
    """What a call did, in a few words: its command or path, else its arguments."""
    return one_line(main_arg(arguments), chars)


def main_arg(arguments: str) -> str:
    """A call's main argument as written (new lines kept): its command or path, else its
    arguments."""
    data = decoded_args(arguments)
    if isinstance(data, dict):
        for key in _MAIN_KEYS:
            value = data.get(key)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                # an argv: ["bash", "-lc", "the command"] is the command
                value = value[-1] if len(value) == 3 and value[1] in ("-c", "-lc") else " ".join(value)
            if isinstance(value, str) and value.strip():
                return value.strip()
        return ", ".join(f"{k}={v}" for k, v in data.items())
    return str(data).strip()


def output_text(text: str) -> tuple[str, int | None]:
    """A tool output's text and exit code: outputs logged as JSON (Codex's
    `{"output", "metadata": {"exit_code"}}`, OpenHands') are decoded first."""
    stripped = text.lstrip()
    if stripped.startswith("{") and '"output"' in stripped[:2000]:
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("output"), str):
            meta = data.get("metadata")
            code = data.get("exit_code", meta.get("exit_code") if isinstance(meta, dict) else None)
            return data["output"], code if isinstance(code, int) and not isinstance(code, bool) else None
    head = text[:3000] + "\n" + text[-3000:] if len(text) > 6000 else text
    m = _EXIT.search(head) if _may_say_exit(head) else None
    return text, (int(next(g for g in m.groups() if g is not None)) if m else None)


# What a text must hold for `outcome` to find a failure or `error_line` an exception line:
# a word of `_EXCEPTION` or `_STATUS`, a traceback, an exit code (`_may_say_exit`).
_FAILURE_WORDS = (
    "rror", "RROR", "xception", "nterrupt", "FAILED", "fatal:", "panic", "ERR!", "Traceback",
    "make", "sh:",
)


def may_say_failure(text: str) -> bool:
    """False when neither `outcome` nor an exception line can find a failure in `text` (an
    ASCII text without any of the words the patterns need): a user's message, read for an error
    they pasted, is checked in one pass instead of the patterns' line by line."""
    if not text.isascii():
        return True
    return any(w in text for w in _FAILURE_WORDS) or _may_say_exit(text)


def _may_say_exit(text: str) -> bool:
    """False when `_EXIT` cannot match: every one of its patterns says "exit" or "returncode",
    which an ASCII text shows lower-cased (the pattern, tried at every position, was most of
    the time to read an output)."""
    if not text.isascii():
        return True
    lowered = text.lower()
    return "exit" in lowered or "returncode" in lowered


_EXIT = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>|\bexit(?:ed)?(?: with)? (?:code|status)[:= ]+(-?\d+)"
    r"|\bProcess exited with code (-?\d+)|\[exit code[:= ]+(-?\d+)\]|\bexit_code\W{1,3}(-?\d+)",
    re.IGNORECASE,
)
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\)", re.MULTILINE)
_TRACEBACK_LINE = "Traceback (most recent call last)"  # what `_TRACEBACK` finds, looked for first
# a tool's own status line (OpenHands' editor "ERROR:", Claude Code's <tool_use_error>) or a
# shell's diagnostic ("bash: x: command not found", "/bin/sh: 1: cd: can't cd to ...")
_STATUS = re.compile(
    r"^\s*(?:ERROR:|Error:|error:|<tool_use_error>|fatal:|make(?:\[\d+\])?: \*\*\* |npm ERR!|"
    r"(?:/bin/)?(?:ba|z)?sh:(?: line)? \d*:? ?.*(?:command not found|No such file or directory|"
    r"Permission denied|can't cd|syntax error)|"
    r"Your proposed edit has introduced new syntax error)"  # SWE-agent's edit, refused
)
_EXCEPTION = re.compile(
    r"^\s*(?:E\s+)?(?:[\w.]*\w(?:Error|Exception|Exit|Interrupt)\b(?!\()|(?:Error|Exception)(?::|$)|FAILED\b|ERROR\b|"
    r"error(?:\[\w+\])?:|fatal:|panic:|thread '.*' panicked|npm ERR!)"
)
_CODE_LISTING = re.compile(
    r"^\s*\d+(?:→|\t|[-:] )|^\s*(?:import|from|throw|raise|catch|except|class|def|function)\b"
)
_ERROR_WORD = re.compile(r"\b(?:error|failed|failure|exception|fatal|panic|conflict)\b", re.IGNORECASE)


def _raw_exit_code(raw: Any, depth: int = 0) -> int | None:
    """An `exit_code` the source record holds (OpenHands keeps it in the observation's extras)."""
    if not isinstance(raw, dict) or depth > 3:
        return None
    code = raw.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    for key in ("extras", "metadata", "toolUseResult", "state"):
        found = _raw_exit_code(raw.get(key), depth + 1)
        if found is not None:
            return found
    return None


def error_line(text: str) -> str:
    """The line that says what went wrong: the last exception line of a traceback or a test
    run, else the first tool status or shell diagnostic, else the first line with an error
    word, else the first line ("" for an empty output)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not _TRACEBACK.match(ln)]
    named = [
        ln for ln in lines
        if _EXCEPTION.match(ln) and not _CODE_LISTING.match(ln) and ln not in ("ERROR:", "Error:")
    ]
    if named:
        exceptions = [ln for ln in named if re.match(r"^(?:E\s+)?[\w.]*(?:Error|Exception)\b(?!\()", ln)]
        return one_line((exceptions or named)[-1])
    for k, ln in enumerate(lines):
        if _STATUS.match(ln):
            # a bare "ERROR:" status says what went wrong on the next line
            bare = ln in ("ERROR:", "Error:", "error:") and k + 1 < len(lines)
            return one_line(f"{ln} {lines[k + 1]}" if bare else ln)
    worded = [ln for ln in lines if _ERROR_WORD.search(ln) and not _EXIT.search(ln)]
    if worded:
        return one_line(worded[0])
    # not a harness's own line (`Wall time: 0.1 seconds`, `<returncode>1</returncode>`): a
    # failure that printed nothing else has no error line
    said = [ln for ln in lines if not _PASSED_OVER.fullmatch(ln)]
    plain = [ln for ln in said if not _EXIT.fullmatch(ln) and not ln.startswith("<")]
    return one_line((plain or said or [""])[0])


# --- one result ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What a tool output says: failed or not (by the log's own signals), its exit code, the
    error line of a failure, the line that says what came back (`news_line`)."""

    failed: bool
    exit_code: int | None
    error: str
    news: str
    signal: str = ""  # what said it failed: flag, exit, traceback, status

    @property
    def label(self) -> str:
        """`ok`, `exit 2: <line>`, `error: <line>`, or `no match (exit 1)` for a search that found
        nothing (`_searched`: the one outcome not failed with an exit code other than 0)."""
        if not self.failed:
            return f"no match (exit {self.exit_code})" if self.exit_code else "ok"
        line = f": {self.error}" if self.error else ""
        return f"exit {self.exit_code}{line}" if self.exit_code else f"error{line}"


def _explicit_flag(result: Unit) -> bool | None:
    """The error flag the record itself gives this result (Claude Code and the Messages API
    write `is_error` on a result block, `false` included), None when it gives none."""
    if result.meta.get("is_error"):
        return True
    raw = result.raw
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("is_error"), bool):
        return bool(raw["is_error"])
    message = raw.get("message")
    blocks = message.get("content") if isinstance(message, dict) else raw.get("content")
    if isinstance(blocks, list):
        for block in blocks:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_result"
                and block.get("tool_use_id") == result.tool_call_id
                and isinstance(block.get("is_error"), bool)
            ):
                return bool(block["is_error"])
    return None


def outcome(result: Unit) -> Outcome:
    """The outcome of one tool output (see the module docstring for what counts as failed).
    Where the record says itself whether the call failed (`is_error`, `false` included), that
    is the answer: a `cat` of a log full of tracebacks went through."""
    text, code = output_text(result.content)
    if code is None:
        code = _raw_exit_code(result.raw)
    flag = _explicit_flag(result)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if flag is not None:
        failed, signal = flag, "flag"
    else:
        failed, signal = code is not None and code != 0, "exit"
        if not failed and code is None:
            if _TRACEBACK_LINE in text and bool(_TRACEBACK.search(text)):
                failed, signal = True, "traceback"
            elif _STATUS.match(first):
                failed, signal = True, "status"
    return Outcome(failed, code, error_line(text) if failed else "", news_line(text), signal if failed else "")


# A harness's own line around a tool's output (Codex's `Chunk ID:`, `Wall time:` and `Process
# exited with code 0`, its shell's `Exit code: 0`, mini-swe-agent's `<returncode>0</returncode>`,
# Gemini CLI's `Command:` ... `Output:`), a banner (`=== Run 1 ===`), git's line-ending warning
# or pip's warning to root and its notices: the line after it says what came back.
_PASSED_OVER = re.compile(
    r"(?:exit code:?\s*-?\d+|process exited with code -?\d+|wall time:.*|chunk id:\s*\S+|"
    r"total output lines:\s*\d+|output:|</?returncode>(?:-?\d+</returncode>)?|</?output>|"
    r"process group pgid:?.*|original token count:.*|command:.*|directory:.*|"
    r"={2,} .* ={2,}|-{2,} .* -{2,}|warning: in the working copy of .*|"
    r"warning: running pip as the 'root' user.*|\[notice\] .*)",
    re.IGNORECASE,
)
# A first line that is the start of what was shown, not news of what happened: a file's
# numbered lines, a viewer's header, JSON's opening, a rule, a truncation notice.
_NOT_NEWS = re.compile(
    r"\s*\d+\s*(?:→|\t)|here's the result of running `cat -n`|<path>|\[file: |"
    r"[\[\]{}()\"'`]+,?$|[=\-#*_~]{3,}$|important: the file content has been truncated",
    re.IGNORECASE,
)
NEWS_LINES = 8  # the non-empty lines `news_line` looks at


def news_line(text: str) -> str:
    """The first line of a tool's output that says what came back, past the harness's own
    lines (`_PASSED_OVER`); "" when that line is the start of a listing or a document, not
    news (`_NOT_NEWS`). A line ending in a colon takes the one after it (`Success. Updated the
    following files:` / `M src/a.py`), unless that one is a heading."""
    lines = (ln.strip() for ln in text.splitlines())
    looked = 0
    for line in lines:
        if not line:
            continue
        looked += 1
        if looked > NEWS_LINES:
            return ""
        if _PASSED_OVER.fullmatch(line):
            continue
        line = line.removeprefix("Output: ").strip()
        if not line or _NOT_NEWS.match(line):
            return ""
        # Claude Code's edit confirmation goes on to the listing it shows: the confirmation is
        # the news ("The file a.py has been updated.")
        line = line.split(" Here's the result of running `cat -n`", 1)[0].strip()
        if line.endswith(":"):
            after = next((x for x in lines if x), "")
            if after and not after.startswith("#") and not _NOT_NEWS.match(after):
                line = f"{line} {after}"
        return one_line(line)
    return ""


# --- files a call acted on ----------------------------------------------------------------------

PATH_KEYS = (
    "file_path", "path", "filename", "notebook_path", "file", "target_file", "absolute_path",
    "filePath", "notebookPath", "absolutePath", "targetFile", "dir_path", "dirPath",  # opencode, Gemini CLI
)
# what a call writes or says, not what it acts on
TEXT_KEYS = frozenset(
    "content new_string old_string new_str old_str text description prompt message body "
    "file_text thought reason summary old new".split()
)
_CREATE_TOOLS = ("write", "create")
_EDIT_TOOLS = ("edit", "replace", "patch", "insert", "multiedit", "apply", "str_replace", "notebookedit")
_READ_TOOLS = ("read", "view", "cat", "open", "glob", "grep", "search", "list", "ls", "find")
_PATH = re.compile(
    r"(?<![\w/.~@$-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+"
    r"|(?<![\w/.$-])[\w-]+\.(?:py|pyi|js|jsx|mjs|cjs|ts|tsx|go|rs|java|kt|c|cc|cpp|h|hpp|rb|php|cs|"
    r"swift|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|sh|sql|html|css|scss|vue|svelte|lock|xml|"
    r"gradle|proto|ex|exs|hs|ml|scala|lua|dart|zig|pony|svg|png|gif|env|conf|tf|mod|sum)\b"
)
_NOT_PATH = re.compile(
    r"^(?:https?:|www\.|\d+(?:\.\d+)*$|[\w.-]+\.(?:com|org|net|io|dev)\b|/dev/null$|/tmp/?$|.*\.\.\.)"
)
# an extension has a letter: `Mozilla/5.0`, `Googlebot/2.1` and a task's `60.2/60.10` are no files
_HAS_EXT = re.compile(r"\.(?=[A-Za-z0-9]{0,7}[A-Za-z])[A-Za-z0-9]{1,8}$")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n.*?^\s*\2\s*$", re.DOTALL | re.MULTILINE)
_QUOTED_SCRIPT = re.compile(r"(['\"])(?:\d*,?\d*[spy]|/).*?\1")
_PATCH_FILE = re.compile(
    r"^\*\*\* (Update|Add|Delete) File: (.+)$|^\+\+\+ (?:b/)?(\S+)", re.MULTILINE
)
# a redirect (not an arrow: `=> import`, `-> x`) or tee, and what it writes
_WRITE_TARGET = re.compile(r"(?:(?<![=\-<>])>>?|\btee(?:\s+-a)?)\s*['\"]?([\w./~@+-]+)")
_DELETE = re.compile(r"\brm\s+(?:-\w+\s+)*")
_RUN = re.compile(r"^\s*(?:python3?|pytest|node|npx|go\s+(?:run|test)|cargo|npm|pnpm|yarn|make|bash|sh)\b")


def paths_in(text: str) -> list[str]:
    """File paths written in a command or an argument: heredoc bodies and sed programs aside; a
    path without an extension counts only when written as one (`/abs`, `./rel`, `~/x`)."""
    text = _QUOTED_SCRIPT.sub(" ", _HEREDOC.sub(" ", text.replace("\\n", "\n")))
    out: list[str] = []
    for m in _PATH.finditer(text):
        path = m.group(0).strip("'\"`").rstrip(".,:;'\")]")
        if len(path) < 4 or _NOT_PATH.match(path) or ("/" not in path and "." not in path):
            continue
        if path.startswith(("-", "+", "@")) or _VERSIONED.search(path):
            continue  # an option (`--system-prompt.md` cut), a user agent's `Name/1.2`
        if not _HAS_EXT.search(path) and not path.startswith(("/", "./", "../", "~/")):
            continue
        if path not in out:
            out.append(path)
    return out


_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")
_VERSIONED = re.compile(r"(?:^|/)\d+(?:\.\d+)+(?:/|$)")  # a segment that is a version: `5.0`, `60.2`


def _words(segment: str) -> list[str]:
    """A shell segment's words, quotes removed (split on blanks when it does not parse)."""
    try:
        return shlex.split(segment, posix=True)
    except ValueError:
        return segment.split()


def _operands(words: Sequence[str]) -> list[str]:
    """The words after the command that are not options."""
    return [w for w in words[1:] if not w.startswith("-")]


def _file_word(word: str) -> str | None:
    """`word` when it reads as a file path (`paths_in`), else None."""
    found = paths_in(word)
    return found[0] if len(found) == 1 and found[0] == word.strip("'\"") else None


def _in_place_targets(words: Sequence[str]) -> list[str]:
    """The files `sed -i` or `perl -i` edits: the operands after its script (the first operand,
    unless `-e` gave the script)."""
    scripted = any(w == "-e" or (w.startswith("-") and not w.startswith("--") and w.endswith("e")) for w in words[1:])
    rest: list[str] = []
    skip = False
    for w in words[1:]:
        if skip:
            skip = False
            continue
        if w in ("-e", "-f", "--expression", "--file"):
            skip = True
            continue
        if w.startswith("-"):
            continue
        rest.append(w)
    files = rest if scripted else rest[1:]
    return [p for p in (_file_word(w) for w in files) if p]


_COPY = frozenset({"cp", "mv", "install", "rsync", "ln"})
_SEGMENT = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'|(&&|\|\||;|\||\n)")


def _segments(command: str) -> list[str]:
    """A command line's simple commands: split at `&&`, `||`, `;`, `|` and new lines outside
    quotes (a sed script's `s|a|b|` is one word)."""
    out, start = [], 0
    for m in _SEGMENT.finditer(command):
        if m.group(1):
            out.append(command[start : m.start()])
            start = m.end()
    out.append(command[start:])
    return [x for x in out if x.strip()]


def _in_place(words: Sequence[str]) -> bool:
    """`sed` or `perl` told to edit in place: `-i`, `-i.bak`, `-pi`, `--in-place`."""
    return any(
        w.startswith("--in-place") or (w.startswith("-") and not w.startswith("--") and "i" in w[1:].split(".")[0])
        for w in words[1:]
    )


def _command_paths(command: str) -> list[tuple[str, str]]:
    """(path, action) for a shell command: what it writes or deletes, else what it uses. A file
    is edited by `sed -i` or `perl -i` as an operand after the script, written by a redirect,
    `tee` or as the target of `cp`/`mv`; a `cp` source is read, a `mv` source moved."""
    found: dict[str, str] = {}
    body = _HEREDOC.sub(" ", command)
    unquoted = _QUOTED.sub(" ", body)
    for m in _WRITE_TARGET.finditer(unquoted):
        target = m.group(1)
        if unquoted[m.end() : m.end() + 1] in ("$", "{", "`", "*"):
            continue  # a name a variable or a glob completes (`> /tmp/paths.$g`): no one file
        if target not in ("/dev/null", "&1", "&2") and not target.isdigit() and len(target) > 2:
            found[target] = "written"
    for segment in _segments(body):
        seg_paths = paths_in(segment)
        words = _words(segment.strip())
        while words and (words[0] in ("sudo", "env", "command", "time") or "=" in words[0]):
            words = words[1:]
        verb = words[0].rsplit("/", 1)[-1] if words else ""
        if _DELETE.match(segment.strip()):
            for p in seg_paths:
                found.setdefault(p, "deleted")
        elif verb in ("sed", "perl") and _in_place(words):
            for p in _in_place_targets(words):
                found[p] = "edited"
            for p in seg_paths:
                found.setdefault(p, "read")
        elif verb in _COPY:
            operands = [p for p in (_file_word(w) for w in _operands(words)) if p]
            if len(operands) >= 2:
                for p in operands[:-1]:
                    found.setdefault(p, "moved" if verb == "mv" else "read")
                found[operands[-1]] = "written"
            else:
                for p in seg_paths:
                    found.setdefault(p, "read")
        elif _RUN.match(segment):
            for p in seg_paths:
                found.setdefault(p, "ran")
        else:
            for p in seg_paths:
                found.setdefault(p, "read")
    return list(found.items())


def _strings_acted_on(args: Any) -> list[str]:
    if isinstance(args, dict):
        return [s for k, v in args.items() if k not in TEXT_KEYS for s in _strings_acted_on(v)]
    if isinstance(args, list):
        return [s for v in args for s in _strings_acted_on(v)]
    return [args] if isinstance(args, str) else []


def call_paths(name: str, arguments: str) -> tuple[tuple[str, str], ...]:
    """(path, action) for each file a call acted on: created, edited, written, deleted, read,
    ran; a patch names its files in its headers."""
    args = decoded_args(arguments)
    lname = name.lower()
    found: dict[str, str] = {}
    if any(k in lname for k in _CREATE_TOOLS):
        tool_action = "created"
    elif any(k in lname for k in _EDIT_TOOLS):
        tool_action = "edited"
    elif any(k in lname for k in _READ_TOOLS):
        tool_action = "read"
    else:
        tool_action = ""
    if isinstance(args, dict):
        command = args.get("command")
        # OpenHands' str_replace_editor: {"command": "create" | "str_replace" | "view", "path"}
        if isinstance(command, str) and command in ("create", "str_replace", "insert", "undo_edit", "view"):
            tool_action = {"create": "created", "view": "read"}.get(command, "edited")
        for key in PATH_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value.strip() and "\n" not in value.strip():
                found[value.strip()] = tool_action or "used"
    for text in _strings_acted_on(args):
        patch = _PATCH_FILE.findall(text)
        if patch:
            for verb, path, plus in patch:
                p = (path or plus).strip()
                if p and p != "/dev/null":
                    found[p] = {"Add": "created", "Delete": "deleted"}.get(verb, "edited")
            continue
        if text in found:
            continue
        if tool_action in ("created", "edited", "read"):
            continue  # the path keys said it; other strings are patterns and options
        for path, action in _command_paths(text):
            found.setdefault(path, action)
    return tuple(found.items())


# --- text actions (SWE-agent, mini-swe-agent, aider: the command is in the message) -------------

_CODE_BLOCK = re.compile(r"```[ \t]*(\w*)[ \t]*\n(.*?)```", re.DOTALL)
_SWE_EDIT = re.compile(r"^(edit\s+\d+:\d+)\s*$", re.MULTILINE)
_SWE_FILE_CMD = re.compile(r"^(create|open|search_file|find_file)\s+(\S+)", re.MULTILINE)
_OPEN_FILE = re.compile(r"\(Open file: ([^)\n]+)\)")


def acted(units: Sequence[Unit], i: int) -> bool:
    """The assistant message at `i` is a command written as text: it made no tool call, holds a
    code block, and an output came back right after it (a code block in a reply to the user
    is an example, not an action)."""
    return (
        i + 1 < len(units)
        and is_output(units[i + 1])
        and units[i + 1].tool_call_id is None
        and text_action(units[i]) is not None
    )


def text_action(u: Unit) -> str | None:
    """The command in an assistant message that made no tool call: the last code block
    (SWE-agent's actions, ```bash blocks); `acted` says whether it was run."""
    if u.role != "assistant" or u.tool_calls:
        return None
    blocks = _CODE_BLOCK.findall(u.content)
    if not blocks:
        return None
    lang, body = blocks[-1]
    if lang and lang not in ("bash", "sh", "shell", "console", "zsh"):
        return None
    return body.strip() or None


def is_output(u: Unit) -> bool:
    """A tool's output: a tool message, a result block, or an observation a text agent got back
    (SWE-agent's, read as a user message of type tool_result)."""
    return u.tool_call_id is not None or u.role == "tool" or u.type == "tool_result" or (
        u.meta.get("source_role") == "tool"
    )


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
        m = _OPEN_FILE.search(u.content[-400:])
        return UnitFacts(outcome=outcome(u), open_file=m.group(1).strip() if m else None)
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
        paths: list[tuple[str, str]] = []
        for m in _SWE_FILE_CMD.finditer(action):
            paths.append((m.group(2), "created" if m.group(1) == "create" else "read"))
        if not paths and not _SWE_EDIT.search(action):
            paths = list(_command_paths(action))
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
        return Outcome(False, None, "", found.news)
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
    for u in reversed(units):
        for c in reversed(u.tool_calls):
            items = _todo_items(c.name, c.arguments)
            if items is None:
                continue
            out = []
            for item in items:
                if not isinstance(item, dict):
                    continue
                text = item.get("content") or item.get("step") or item.get("description")
                if isinstance(text, str) and text.strip():
                    out.append((str(item.get("status", "pending")), one_line(text)))
            return out
    return []


def _todo_items(name: str, arguments: str) -> list[Any] | None:
    """The entries of a todo-list call (TodoWrite's `todos`, update_plan's `plan`), None for
    another call."""
    lname = name.lower()
    if "todo" not in lname and "plan" not in lname:
        return None
    args = decoded_args(arguments)
    items = (args.get("todos") or args.get("plan")) if isinstance(args, dict) else None
    return items if isinstance(items, list) else None


def todos(units: Sequence[Unit]) -> list[tuple[str, str]]:
    """(status, item) of the unfinished entries of the last todo list (TodoWrite, update_plan)."""
    for u in reversed(units):
        for c in reversed(u.tool_calls):
            name = c.name.lower()
            if "todo" not in name and "plan" not in name:
                continue
            args = decoded_args(c.arguments)
            items = (args.get("todos") or args.get("plan")) if isinstance(args, dict) else None
            if not isinstance(items, list):
                continue
            out = []
            for item in items:
                if not isinstance(item, dict) or item.get("status") == "completed":
                    continue
                text = item.get("content") or item.get("step") or item.get("description")
                if isinstance(text, str) and text.strip():
                    out.append((str(item.get("status", "pending")), one_line(text)))
            return out
    return []


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


def named(name: str, text: str) -> bool:
    """Whether `text` holds `name` as a whole name: not inside a longer word, path or number."""
    at = text.find(name)
    while at >= 0:
        before = text[at - 1] if at else " "
        end = at + len(name)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before in "_-") and not (after.isalnum() or after in "_-"):
            return True
        at = text.find(name, at + 1)
    return False


def unit_words(u: Unit) -> list[str]:
    """A unit's text as the model reads it: its content and the string values of its calls'
    arguments (a command, a path, an id; not the tool's name, which is no name of the work)."""
    out = [u.content] if u.content else []
    for c in u.tool_calls:
        out.extend(_arg_strings(decoded_args(c.arguments)))
    return out


def _arg_strings(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for v in data.values() for s in _arg_strings(v)]
    if isinstance(data, list):
        return [s for v in data for s in _arg_strings(v)]
    return [str(data)] if isinstance(data, (int, float)) and not isinstance(data, bool) else []


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
