"""What one event of a log says, read the same way by every side: a call's arguments as data and
its main argument, a tool output's text, exit code and outcome (failed by the log's own signals,
its error line, the line that says what came back), a command written as text, the last todo list.

This is neutral reading of the unit model (`ctxkit.model`): the summaries (`ctxkit.facts`,
`ctxkit.summarizers`), the strategies and the evaluation (`ctxkit.fidelity`) all take these
readings as data; what each side makes of them (a summary's sections, a probe, a claim's
evidence) stays with that side. It imports nothing of ctxkit but the model.

    >>> from ctxkit.model import Unit
    >>> o = outcome(Unit("r1", "user", type="tool_result", tool_call_id="c1",
    ...                  content="Traceback (most recent call last):\\n  ...\\nKeyError: 'k'"))
    >>> o.failed, o.error
    (True, "KeyError: 'k'")
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.model import Unit

LINE_CHARS = 200  # an error or first line is kept up to this many characters

# --- text helpers -------------------------------------------------------------------------------


def one_line(text: str, chars: int = LINE_CHARS) -> str:
    """Whitespace collapsed; longer than `chars` ends in "...". """
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 3].rstrip() + "..."


def named(name: str, text: str) -> bool:
    """Whether `text` holds `name` as a whole name: not inside a longer word, path or number
    (no letter, digit, `_` or `-` either side), found by `str.find` (a pattern made per name
    cost a long log a scan of its whole text for every name)."""
    at = text.find(name)
    while at >= 0:
        before = text[at - 1] if at else " "
        end = at + len(name)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before in "_-") and not (after.isalnum() or after in "_-"):
            return True
        at = text.find(name, at + 1)
    return False


HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n.*?^\s*\2\s*$", re.DOTALL | re.MULTILINE)
_QUOTED_SCRIPT = re.compile(r"(['\"])(?:\d*,?\d*[spy]|/).*?\1")  # sed/awk programs: 's/a/b/', '/x/d'


def without_bodies(text: str) -> str:
    """A command or an argument as it names files: escaped new lines made real, heredoc bodies
    and quoted sed/awk programs blanked out (what they hold is content, not a file acted on)."""
    return _QUOTED_SCRIPT.sub(" ", HEREDOC.sub(" ", text.replace("\\n", "\n")))


# --- a call's arguments -------------------------------------------------------------------------


def decoded_args(arguments: str) -> Any:
    """A call's arguments as data (JSON decoded), or the text itself when it is not JSON."""
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments


def arg_strings(value: Any, skip: frozenset[str] = frozenset(), numbers: bool = False) -> list[str]:
    """Every string in decoded arguments, in order, leaving out the values of the keys in `skip`
    (text a call writes or says, not what it acts on); with `numbers`, numbers too as text."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k not in skip for s in arg_strings(v, skip, numbers)]
    if isinstance(value, list):
        return [s for v in value for s in arg_strings(v, skip, numbers)]
    return [str(value)] if numbers and isinstance(value, (int, float)) and not isinstance(value, bool) else []


def main_value(data: dict[str, Any], keys: Sequence[str]) -> str | None:
    """The first of `keys` in decoded arguments that holds a non-blank string or an argv (the
    command of `["bash", "-lc", "the command"]`, else its words joined), stripped."""
    for key in keys:
        value = data.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = value[-1] if len(value) == 3 and value[1] in ("-c", "-lc") else " ".join(value)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def path_values(data: dict[str, Any], keys: Sequence[str]) -> list[str]:
    """The paths decoded arguments give under `keys`, in that order: each a non-blank string on
    one line, stripped (a value with a new line is content, not a path)."""
    return [v.strip() for k in keys if isinstance(v := data.get(k), str) and v.strip() and "\n" not in v.strip()]


_MAIN_KEYS = ("command", "cmd", "file_path", "path", "pattern", "query", "url", "filename",
              "notebook_path", "absolute_path", "description", "name", "input", "code")


def main_arg(arguments: str) -> str:
    """A call's main argument as written (new lines kept): its command or path, else its
    arguments."""
    data = decoded_args(arguments)
    if isinstance(data, dict):
        value = main_value(data, _MAIN_KEYS)
        return value if value is not None else ", ".join(f"{k}={v}" for k, v in data.items())
    return str(data).strip()


# --- a tool output ------------------------------------------------------------------------------


def output_record(text: str, look_chars: int) -> tuple[str, int | None] | None:
    """The output and exit code of a tool output logged as JSON (Codex's `{"output", "metadata":
    {"exit_code"}}`, OpenHands'), when its first `look_chars` name `"output"`; None otherwise."""
    stripped = text.lstrip()
    if not (stripped.startswith("{") and '"output"' in stripped[:look_chars]):
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if not (isinstance(data, dict) and isinstance(data.get("output"), str)):
        return None
    meta = data.get("metadata")
    code = data.get("exit_code", meta.get("exit_code") if isinstance(meta, dict) else None)
    return data["output"], code if isinstance(code, int) and not isinstance(code, bool) else None


def output_ends(text: str, chars: int) -> str:
    """The first and the last `chars` of a long output joined by a new line (where a harness
    prints an exit code), a short output whole."""
    return text if len(text) <= 2 * chars else text[:chars] + "\n" + text[-chars:]


def output_text(text: str) -> tuple[str, int | None]:
    """A tool output's text and exit code: outputs logged as JSON (Codex's
    `{"output", "metadata": {"exit_code"}}`, OpenHands') are decoded first."""
    record = output_record(text, 4000)
    if record is not None:
        return record
    head = output_ends(text, 3000)
    m = _EXIT.search(head) if _may_say_exit(head) else None
    return text, (int(next(g for g in m.groups() if g is not None)) if m else None)



# What a text must hold for `outcome` to find a failure or `error_line` an exception line:
# a word of `_EXCEPTION` or `_STATUS`, a traceback, an exit code (`_may_say_exit`).
_FAILURE_WORDS = (
    "rror", "RROR", "xception", "nterrupt", "FAILED", "fatal:", "panic", "ERR!", "Traceback",
    "make", "sh:", "(eval):",
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
# shell's diagnostic ("bash: x: command not found", "/bin/sh: 1: cd: can't cd to ...", zsh's
# "(eval):1: command not found: psql")
_STATUS = re.compile(
    r"^\s*(?:ERROR:|Error:|error:|<tool_use_error>|fatal:|make(?:\[\d+\])?: \*\*\* |npm ERR!|"
    r"(?:/bin/)?(?:ba|z)?sh:(?: line)? \d*:? ?.*(?:command not found|No such file or directory|"
    r"Permission denied|can't cd|syntax error)|"
    r"(?:\(eval\)|zsh):\d+: (?:command not found|no such file or directory|permission denied): |"
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


def raw_field(raw: Any, key: str, depth: int = 0) -> Any:
    """`key` in a source record or in one of the nested records a format keeps a result's
    status in (OpenHands' `extras`, Claude Code's `toolUseResult`, Copilot's `data`, ...)."""
    if not isinstance(raw, dict) or depth > 3:
        return None
    if key in raw:
        return raw[key]
    for sub in ("extras", "metadata", "toolUseResult", "state", "result", "payload", "data", "toolTelemetry",
                "metrics"):
        found = raw_field(raw.get(sub), key, depth + 1)
        if found is not None:
            return found
    return None


def _raw_exit_code(raw: Any) -> int | None:
    """An `exit_code` field of the source record (OpenHands keeps it in the observation's extras)."""
    code = raw_field(raw, "exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


_ERROR_TAG = re.compile(r"</?tool_use_error>")


def error_line(text: str) -> str:
    """The line that says what went wrong: the last exception line of a traceback or a test
    run, else the first tool status or shell diagnostic, else the first line with an error
    word, else the first line ("" for an empty output). A tool's error tag (Claude Code's
    `<tool_use_error>`) is markup, not what it says."""
    if "tool_use_error>" in text:
        text = _ERROR_TAG.sub("", text)
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
    more: int = 0  # the output's lines with text besides those of the news

    @property
    def label(self) -> str:
        """`ok`, `exit 2: <line>`, `error: <line>`, or `no match (exit 1)` for a search that found
        nothing (`_searched`: the one outcome not failed with an exit code other than 0)."""
        if not self.failed:
            return f"no match (exit {self.exit_code})" if self.exit_code else "ok"
        line = f": {self.error}" if self.error else ""
        return f"exit {self.exit_code}{line}" if self.exit_code else f"error{line}"


def recorded_flag(result: Unit) -> bool | None:
    """The error flag the log records for this result, `false` included, None when it records
    none: `is_error` on the record, a nested record or the result block (Claude Code, the
    Messages API), Copilot's `success`."""
    if result.meta.get("is_error"):
        return True
    raw = result.raw
    if not isinstance(raw, dict):
        return None
    flag = raw_field(raw, "is_error")
    if isinstance(flag, bool):
        return flag
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
    success = raw_field(raw, "success")
    return (not success) if isinstance(success, bool) else None


def _structured_code(result: Unit) -> bool:
    """Whether the exit code comes from a field (the output's JSON, the source record), not
    from a line of text."""
    stripped = result.content.lstrip()
    return (stripped.startswith("{") and '"exit_code"' in stripped[:4000]) or _raw_exit_code(result.raw) is not None


def outcome(result: Unit) -> Outcome:
    """The outcome of one tool output: the one reading of "failed" that every side takes (the
    summaries say it, the claims checker holds them to it, the probes ask for its error line).

    The log's own error flag where it records one, `false` included: a `cat` of a log full of
    tracebacks went through, and an exit code printed in such an output is not the call's. Else
    a non-zero exit code (a field, or a harness's line); else, where the log records neither, a
    traceback, or a tool's error status or a shell's diagnostic on the first line."""
    text, code = output_text(result.content)
    if code is None:
        code = _raw_exit_code(result.raw)
    flag = recorded_flag(result)
    if flag is False and code is not None and not _structured_code(result):
        code = None  # "Exit status 1" printed by a program whose call the log says passed
    if flag:
        failed, signal = True, "flag"
    else:
        failed, signal = code is not None and code != 0, "exit"
        if not failed and code is None and flag is None:
            first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
            if _TRACEBACK_LINE in text and bool(_TRACEBACK.search(text)):
                failed, signal = True, "traceback"
            elif _STATUS.match(first):
                failed, signal = True, "status"
    news, took = _news(text)
    more = max(0, text_lines(text) - took) if news else 0
    return Outcome(failed, code, error_line(text) if failed else "", news, signal if failed else "", more)


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


def text_lines(text: str) -> int:
    """A tool output's lines with text, the harness's own lines (`_PASSED_OVER`: exit code,
    wall time) aside: how many lines it showed."""
    return sum(1 for ln in text.splitlines() if ln.strip() and not _PASSED_OVER.fullmatch(ln.strip()))


def news_line(text: str) -> str:
    """The first line of a tool's output that says what came back, past the harness's own
    lines (`_PASSED_OVER`); "" when that line is the start of a listing or a document, not
    news (`_NOT_NEWS`). A line ending in a colon takes the one after it (`Success. Updated the
    following files:` / `M src/a.py`), unless that one is a heading."""
    return _news(text)[0]


def _news(text: str) -> tuple[str, int]:
    """`news_line` and how many of the output's lines it took (1, or 2 with the one after a
    colon); ("", 0) when there is none."""
    lines = (ln.strip() for ln in text.splitlines())
    looked = 0
    for line in lines:
        if not line:
            continue
        looked += 1
        if looked > NEWS_LINES:
            return "", 0
        if _PASSED_OVER.fullmatch(line):
            continue
        line = line.removeprefix("Output: ").strip()
        if not line or _NOT_NEWS.match(line):
            return "", 0
        # Claude Code's edit confirmation goes on to the listing it shows: the confirmation is
        # the news ("The file a.py has been updated.")
        line = line.split(" Here's the result of running `cat -n`", 1)[0].strip()
        took = 1
        if line.endswith(":"):
            after = next((x for x in lines if x), "")
            if after and not after.startswith("#") and not _NOT_NEWS.match(after):
                line, took = f"{line} {after}", 2
        return one_line(line), took
    return "", 0


# --- a command written as text (SWE-agent, mini-swe-agent, aider: the command is in the message) ---

_CODE_BLOCK = re.compile(r"```[ \t]*(\w*)[ \t]*\n(.*?)```", re.DOTALL)


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


# --- todo lists ---------------------------------------------------------------------------------


def todo_entries(name: str, arguments: str) -> list[Any] | None:
    """The entries of a todo-list call (TodoWrite's `todos`, update_plan's `plan`), None for
    another call."""
    lname = name.lower()
    if "todo" not in lname and "plan" not in lname:
        return None
    args = decoded_args(arguments)
    items = (args.get("todos") or args.get("plan")) if isinstance(args, dict) else None
    return items if isinstance(items, list) else None


def last_todo_list(units: Sequence[Unit]) -> tuple[int, list[Any]] | None:
    """The unit and the entries of the last todo-list call in `units`, None when none made one."""
    for i in range(len(units) - 1, -1, -1):
        for c in reversed(units[i].tool_calls):
            items = todo_entries(c.name, c.arguments)
            if items is not None:
                return i, items
    return None


def todo_text(item: Any) -> str | None:
    """A todo entry's text (its content, step or description), None when it has none."""
    if not isinstance(item, dict):
        return None
    text = item.get("content") or item.get("step") or item.get("description")
    return text if isinstance(text, str) and text.strip() else None
