"""Summarizers: turn a run of units into one short text that keeps the task alive.

`extractive` is the offline default: deterministic, no model. It writes a structured handover
(the user's requests in their own words, decisions, files touched, commands and outcomes,
errors seen, open items) filled from the units, then adds the most central sentences until
the target length. The `llm` summarizer (an OpenAI-compatible endpoint) is registered by
`ctxkit.summarizers.llm`.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ctxkit.compress import sentence_scores, split_sentences, words
from ctxkit.model import Unit

if TYPE_CHECKING:
    from ctxkit.tokens import Tokenizer

Summarizer = Callable[..., str]

# The user's own messages are what users most miss after a compaction: summaries quote them
# word for word, newest first, up to this many tokens (Codex keeps 20k tokens of them), and
# never more than this share of the goal (the rest of the goal is the work itself).
USER_MESSAGE_TOKENS = 20_000
USER_MESSAGE_SHARE = 0.25


def user_message_budget(goal: int) -> int:
    """Tokens of user messages kept word for word in a compacted transcript of `goal` tokens."""
    return min(USER_MESSAGE_TOKENS, int(goal * USER_MESSAGE_SHARE))


def newest_within(sizes: Sequence[int], budget: int) -> list[int]:
    """Indices of the newest items whose sizes add up to at most `budget`, oldest first; the
    first that does not fit stops the count (as Codex keeps user messages).

    >>> newest_within([5, 3, 4], 7)
    [1, 2]
    >>> newest_within([3, 9, 4], 10)
    [2]
    >>> newest_within([5, 3, 4], 12)
    [0, 1, 2]
    """
    out: list[int] = []
    for k in range(len(sizes) - 1, -1, -1):
        if sizes[k] > budget:
            break
        budget -= sizes[k]
        out.append(k)
    return out[::-1]


REQUEST_CHARS = 240  # a request longer than this is quoted head and tail
ITEM_CHARS = 160
GROUP_ARGS_CHARS = 48

_PATH = re.compile(
    r"(?<![\w/.~-])(?:~|\.{1,2})?(?:/?[\w.@+-]+/)+[\w.@+-]+\.\w{1,8}\b"  # a/b/c.ext, /abs/x.py
    r"|(?<![\w/.-])[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|java|kt|c|cc|cpp|h|hpp|rb|php|cs|swift|"
    r"md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|sh|sql|html|css|lock)\b"
)
_NOT_PATH = re.compile(r"^(?:\d+(?:\.\d+)+|[\w.]+\.(?:com|org|net|io)(?:/.*)?|[A-Z]\w*\.js)$")
_ERROR = re.compile(
    # a word, not a file name: error.c, failed-tests.txt
    r"(?:\b(?:error|exception|traceback|failed|failure|fatal|panic)\b(?![.-]\w)|\w+Error\b|\w+Exception\b|"
    r"exit (?:code|status) [1-9]|command not found|no such file|permission denied)",
    re.IGNORECASE,
)
_EXCEPTION_LINE = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Exit)\b:?|FAILED\b|E\s{2,})")
_EXCEPTION_NAME = re.compile(r"^\s*(?:E\s+)?[\w.]*(?:Error|Exception)\b")
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):?\s*$")
_CODE_LISTING = re.compile(
    r"^\s*\d+(?:→|\t|[-:] )|^\s*(?:import|from|throw|raise|catch|except|class|def|function)\b|^\s*}\s*catch\b"
)
_DECISION = re.compile(
    r"\b(?:I will|I'm going to|we'll|we should|decided|decision|instead|"
    r"the (?:fix|issue|problem|cause|root cause|bug) (?:is|was)|because|plan is|approach)\b",
    re.IGNORECASE,
)
_OPEN = re.compile(
    r"(?:\bTODO\b|\bFIXME\b|^\s*[-*] \[ \]|\bstill need|\bnext step|\bremaining\b)",
    re.IGNORECASE | re.MULTILINE,
)
_RETURNCODE = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>|\bexit(?:ed)? (?:code|status)[:= ]+(-?\d+)",
    re.IGNORECASE,
)
_BASH_BLOCK = re.compile(r"```(?:bash|sh|shell|console)\s*\n(.*?)```", re.DOTALL)
_ARG_KEYS = ("command", "cmd", "file_path", "path", "pattern", "query", "url", "filename", "name")


def _tok(tok: Tokenizer | None) -> Tokenizer:
    if tok is not None:
        return tok
    from ctxkit.tokens import get_tokenizer

    return get_tokenizer()


def _one_line(text: str, chars: int = ITEM_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 3].rstrip() + "..."


def _quote(text: str, chars: int = REQUEST_CHARS) -> str:
    """A request in its own words; a long one keeps its head and tail."""
    flat = " ".join(text.split())
    if len(flat) <= chars:
        return flat
    head = flat[: chars * 2 // 3].rstrip()
    tail = flat[-(chars // 3) :].lstrip()
    return f"{head} [...] {tail}"


def _is_request(u: Unit) -> bool:
    from ctxkit.structure import is_user_request

    return is_user_request(u) and bool(u.content.strip())


# --------------------------------------------------------------------------------------------
# extraction


def user_requests(units: Sequence[Unit]) -> list[Unit]:
    """The user's own requests, in order."""
    return [u for u in units if _is_request(u)]


_PATH_KEYS = ("file_path", "path", "filename", "notebook_path", "file", "target_file")
_EDIT_TOOLS = ("edit", "write", "create", "replace", "patch", "insert", "str_replace", "multiedit")


def _arguments(text: str) -> Any:
    """A call's arguments as data (JSON decoded), or the text itself when it is not JSON."""
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text


def _strings(value: Any) -> list[str]:
    """Every string inside decoded arguments (commands, paths, patches), in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _paths_in(text: str) -> list[str]:
    out = []
    # JSON-escaped text (a tool output kept as JSON) must not glue "\n" to the next path
    for m in _PATH.finditer(text.replace("\\n", "\n").replace("\\/", "/")):
        path = m.group(0).rstrip(".")
        if len(path) > 3 and not _NOT_PATH.match(path):
            out.append(path)
    return out


def file_actions(units: Sequence[Unit]) -> dict[str, list[str]]:
    """path -> what the agent did to it ("read", "edited", "ran"...), from the tool calls'
    decoded arguments (a path key names the file the tool acted on; paths inside a command or
    patch were used by it), then paths only mentioned in tool output or messages ("mentioned")."""
    actions: dict[str, list[str]] = {}

    def add(path: str, action: str) -> None:
        done = actions.setdefault(path, [])
        if action not in done:
            done.append(action)

    for u in units:
        for c in u.tool_calls:
            args = _arguments(c.arguments)
            name = c.name.lower()
            verb = "edited" if any(k in name for k in _EDIT_TOOLS) else "read" if "read" in name or "view" in name else "used"
            if isinstance(args, dict):
                for key in _PATH_KEYS:
                    if isinstance(args.get(key), str) and args[key].strip():
                        add(args[key].strip(), verb)
            for text in _strings(args):
                for path in _paths_in(text):
                    add(path, "used" if verb != "edited" else "edited")
    for u in units:
        if u.tool_calls and not u.content:
            continue
        for path in _paths_in(u.content):
            if path not in actions:
                add(path, "mentioned")
    # "paneCreation.ts" beside "/repo/src/utils/paneCreation.ts" is the same file: one line
    full = [p for p in actions if "/" in p.lstrip("./")]
    for short in [p for p in actions if "/" not in p.lstrip("./")]:
        name = short.lstrip("./")
        owner = next((p for p in full if p.endswith("/" + name)), None)
        if owner is not None:
            for action in actions.pop(short):
                if action not in actions[owner]:
                    actions[owner].append(action)
    return actions


def files_touched(units: Sequence[Unit]) -> list[str]:
    """File paths the units touched: those the tool calls acted on first (edited before read
    before used), then those only mentioned; in order of first appearance within each rank."""
    actions = file_actions(units)
    rank = {"edited": 0, "read": 1, "used": 2, "mentioned": 3}
    order = {p: i for i, p in enumerate(actions)}
    return sorted(actions, key=lambda p: (min(rank[a] for a in actions[p]), order[p]))


def _short_args(arguments: str) -> str:
    try:
        data: Any = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return _one_line(arguments, 100)
    if isinstance(data, dict):
        for key in _ARG_KEYS:
            value = data.get(key)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                # an argv: ["bash", "-lc", "the command"] is the command
                value = value[-1] if len(value) == 3 and value[1] in ("-c", "-lc") else " ".join(value)
            if isinstance(value, str) and value.strip():
                return _one_line(value, 100)
        return _one_line(", ".join(f"{k}={v}" for k, v in data.items()), 100)
    return _one_line(str(data), 100)


def error_line(text: str) -> str | None:
    """The line that says what went wrong in a tool output: the exception line of a traceback
    (never the bare "Traceback (most recent call last):"), else the first error line, else the
    last line of an output that holds a traceback; None when nothing failed."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    specific = [ln for ln in lines if _EXCEPTION_LINE.search(ln) and not _CODE_LISTING.match(ln)]
    # the exception itself ("ValueError: ...") says more than a test runner's "FAILED x::y"
    named = [ln for ln in specific if _EXCEPTION_NAME.search(ln)]
    if named or specific:
        return _one_line((named or specific)[-1], 120)
    plain = [
        ln
        for ln in lines
        if _ERROR.search(ln) and not _CODE_LISTING.match(ln) and not _TRACEBACK.match(ln)
    ]
    if plain:
        return _one_line(plain[0], 120)
    if any(_TRACEBACK.match(ln) for ln in lines):
        return _one_line(lines[-1], 120) if not _TRACEBACK.match(lines[-1]) else None
    return None


def _output(text: str) -> tuple[str, int | None]:
    """A tool output's text and exit code: agents that log results as JSON (Codex's
    `{"output", "metadata": {"exit_code"}}`, OpenHands') are decoded first."""
    stripped = text.lstrip()
    if stripped.startswith("{") and '"output"' in stripped[:2000]:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("output"), str):
            meta = data.get("metadata")
            code = data.get("exit_code", meta.get("exit_code") if isinstance(meta, dict) else None)
            return data["output"], code if isinstance(code, int) and not isinstance(code, bool) else None
    m = _RETURNCODE.search(text)
    return text, (int(m.group(1) or m.group(2)) if m else None)


def _outcome(result: Unit | None) -> str:
    """ok, or what failed: the exit code and the error line, from the result's structure (its
    exit code or error flag) before its words."""
    if result is None:
        return "no result"
    text, code = _output(result.content)
    if code is not None and code != 0:
        line = error_line(text)
        return f"exit {code}" + (f": {_one_line(line, 90)}" if line else "")
    failed = bool(result.meta.get("is_error") or (isinstance(result.raw, dict) and result.raw.get("is_error")))
    if code == 0 and not failed:
        return "ok"
    from ctxkit.compress import detect_kind

    if not failed and detect_kind(text) == "code":
        return "ok"  # a file listing mentions errors without being one
    line = error_line(text)
    if line and (failed or _EXCEPTION_LINE.search(line) or not _CODE_LISTING.match(line)):
        return "error: " + _one_line(line, 90)
    return "error" if failed else "ok"


def commands_run(units: Sequence[Unit]) -> list[str]:
    """`name(args) -> outcome` for each tool call, and the shell blocks agents write as text;
    consecutive short calls of one tool with one outcome share a line: `name x3(a; b; c) -> ok`."""
    results: dict[str, Unit] = {}
    for u in units:
        if u.tool_call_id is not None:
            results.setdefault(u.tool_call_id, u)
    calls: list[tuple[str, str, str]] = []  # (name, short args, outcome)
    for i, u in enumerate(units):
        for c in u.tool_calls:
            if "todo" in c.name.lower():
                continue  # the todo list is reported under open items
            calls.append((c.name, _short_args(c.arguments), _outcome(results.get(c.id))))
        if u.role == "assistant" and not u.tool_calls:
            for block in _BASH_BLOCK.findall(u.content):
                nxt = units[i + 1] if i + 1 < len(units) else None
                calls.append(("$", _one_line(block, 100), _outcome(nxt)))
    out: list[str] = []
    k = 0
    while k < len(calls):
        name, args, outcome = calls[k]
        j = k + 1
        # short lookups (ids, paths) group well; long commands each keep their own line
        while (
            j < len(calls)
            and calls[j][0] == name
            and calls[j][2] == outcome
            and max(len(args), len(calls[j][1])) <= GROUP_ARGS_CHARS
        ):
            j += 1
        if name == "$" and j == k + 1:
            out.append(f"$ {args} -> {outcome}")
        elif j == k + 1:
            out.append(f"{name}({args}) -> {outcome}")
        else:
            joined = _one_line("; ".join(c[1] for c in calls[k:j]), 200)
            out.append(f"{name} x{j - k}({joined}) -> {outcome}")
        k = j
    return out


def errors_seen(units: Sequence[Unit]) -> list[str]:
    """What failed, in order: `call -> the error line` for each tool call whose result failed
    (non-zero exit, an error flag, an exception), with "(fixed: a later call succeeded)" when
    the same call later went through; then error lines the user pasted."""
    results: dict[str, Unit] = {}
    for u in units:
        if u.tool_call_id is not None:
            results.setdefault(u.tool_call_id, u)
    calls = [(c.name, _short_args(c.arguments), _outcome(results.get(c.id))) for u in units for c in u.tool_calls]
    failures: dict[str, list[tuple[str, bool]]] = {}  # outcome -> (call, fixed later)
    for k, (name, args, outcome) in enumerate(calls):
        if outcome in ("ok", "no result"):
            continue
        fixed = any(n == name and a == args and o == "ok" for n, a, o in calls[k + 1 :])
        failures.setdefault(outcome, []).append((f"{name}({_one_line(args, 80)})", fixed))
    seen: dict[str, None] = {}
    for outcome, runs in failures.items():  # one line per distinct failure, first seen first
        first, fixed = runs[0]
        again = f" (and {len(runs) - 1} more call{'s' if len(runs) > 2 else ''})" if len(runs) > 1 else ""
        note = " (fixed: a later run succeeded)" if all(f for _, f in runs) else ""
        seen[f"{first}{again} -> {outcome}{note}"] = None
    for u in units:
        if _is_request(u):
            line = error_line(u.content)
            if line:
                seen.setdefault(f"reported by the user: {line}", None)
    return list(seen)


def decisions(units: Sequence[Unit]) -> list[str]:
    """Assistant sentences that state a plan, a cause or a choice."""
    out: dict[str, None] = {}
    for u in units:
        if u.role != "assistant" or not u.content:
            continue
        for s in split_sentences(u.content):
            if _DECISION.search(s) and 20 <= len(s.strip()) <= 400:
                out.setdefault(_one_line(s), None)
    return list(out)


def _todo_items(units: Sequence[Unit]) -> list[str]:
    """Unfinished entries of the last todo-list tool call (Claude Code's TodoWrite and kin)."""
    for u in reversed(units):
        for c in reversed(u.tool_calls):
            if "todo" not in c.name.lower():
                continue
            try:
                todos = json.loads(c.arguments).get("todos")
            except (ValueError, AttributeError):
                continue
            if isinstance(todos, list):
                return [
                    f"[{t.get('status', 'pending')}] {_one_line(str(t.get('content', '')))}"
                    for t in todos
                    if isinstance(t, dict) and t.get("status") != "completed"
                ]
    return []


def open_items(units: Sequence[Unit]) -> list[str]:
    """Unfinished todos, TODO/FIXME lines and unchecked checkboxes in messages, and the last
    request if nothing answered it."""
    items: dict[str, None] = dict.fromkeys(_todo_items(units))
    for u in units:
        if u.role not in ("user", "assistant") or u.tool_call_id is not None:
            continue
        for line in u.content.splitlines():
            if _OPEN.search(line):
                items.setdefault(_one_line(line), None)
    last = max((i for i, u in enumerate(units) if _is_request(u)), default=None)
    if last is not None and not any(
        u.role == "assistant" and (u.content.strip() or u.tool_calls) for u in units[last + 1 :]
    ):
        items.setdefault("unanswered: " + _quote(units[last].content, 200), None)
    return list(items)


def central_sentences(units: Sequence[Unit]) -> list[str]:
    """Message sentences ordered by TF-IDF centrality (most central first)."""
    sentences: list[str] = []
    for u in units:
        if u.role in ("user", "assistant") and u.tool_call_id is None and u.content:
            sentences.extend(
                s.strip() for s in split_sentences(u.content) if 30 <= len(s.strip()) <= 500
            )
    if not sentences:
        return []
    scores = sentence_scores(sentences)
    # centrality: how much a sentence shares the vocabulary of all the others
    vocab = Counter(w for s in sentences for w in dict.fromkeys(words(s)))
    central = []
    for s, base in zip(sentences, scores, strict=True):
        bag = list(dict.fromkeys(words(s)))  # ordered: float sums must not depend on hash seeds
        shared = sum(math.log(1 + vocab[w]) for w in bag if vocab[w] > 1)
        central.append(base + shared / math.sqrt(len(bag) + 1))
    order = sorted(range(len(sentences)), key=lambda i: (-central[i], i))
    seen: set[str] = set()
    out = []
    for i in order:
        key = _one_line(sentences[i], 400)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


# --------------------------------------------------------------------------------------------
# fitting sections to a budget


def _fit(
    sections: list[tuple[str, list[str]]],
    filler: Iterable[str],
    target_tokens: int,
    tok: Tokenizer,
    fixed_tail: str = "",
    first_take: dict[str, int] | None = None,
    keep_all: frozenset[str] = frozenset(),
) -> str:
    """Take every item of the `keep_all` sections (even over budget), the `first_take` leading
    items of the named sections, then items round-robin across sections (earlier sections
    first) until the budget is spent, then central sentences; render in section order."""
    budget = target_tokens - (tok.count(fixed_tail) if fixed_tail else 0)
    headers = sum(tok.count(f"## {title}\n") for title, items in sections if items)
    used = headers
    chosen: list[list[str]] = [[] for _ in sections]
    counts = [
        tok.count_many([f"- {it}\n" for it in items]) if items else [] for _, items in sections
    ]
    start = [0] * len(sections)
    for k, (title, items) in enumerate(sections):
        if title in keep_all:
            chosen[k] = list(items)
            used += sum(counts[k])
            start[k] = len(items)
            continue
        for j in range(min(len(items), (first_take or {}).get(title, 0))):
            start[k] = j + 1
            if used + counts[k][j] <= budget:
                chosen[k].append(items[j])
                used += counts[k][j]
    depth = 0
    progress = True
    while progress:
        progress = False
        for k, (_title, items) in enumerate(sections):
            at = start[k] + depth
            if at < len(items):
                progress = True
                if used + counts[k][at] <= budget:
                    chosen[k].append(items[at])
                    used += counts[k][at]
        depth += 1
    extra: list[str] = []
    for sentence in filler:
        n = tok.count(sentence + " ")
        if used + n > budget:
            continue
        extra.append(sentence)
        used += n
        if used >= budget - 8:
            break
    parts = []
    for (title, _), items in zip(sections, chosen, strict=True):
        if items:
            parts.append(f"## {title}\n" + "\n".join(f"- {it}" for it in items))
    if extra:
        parts.append("## Key points\n" + " ".join(extra))
    if fixed_tail:
        parts.append(fixed_tail)
    return "\n".join(parts)


def primary_request(units: Sequence[Unit]) -> Unit | None:
    """The request that states the task: the first user request of four words or more (a bare
    "yes" or "continue" answers something; it is not the goal), else the longest."""
    requests = user_requests(units)
    for u in requests:
        if len(u.content.split()) >= 4:
            return u
    return max(requests, key=lambda u: len(u.content), default=None)


def tools_used(units: Sequence[Unit]) -> list[str]:
    """`name xN` per tool called, most called first."""
    counts = Counter(c.name for u in units for c in u.tool_calls if c.name)
    return [f"{name} x{n}" if n > 1 else name for name, n in counts.most_common()]


def narration(units: Sequence[Unit]) -> list[str]:
    """What the assistant said it was doing, in order: the first sentence of each of its
    messages that has prose (the text beside its tool calls, its explanations)."""
    out: dict[str, None] = {}
    for u in units:
        if u.role != "assistant" or not (u.content.strip() or u.reasoning.strip()):
            continue
        # its words to the user, else its reasoning summary (Codex logs little else)
        prose = _BASH_BLOCK.sub("", u.content).strip() or u.reasoning.replace("**", "").strip()
        first = next((s.strip() for s in split_sentences(prose) if len(s.strip()) >= 12), "")
        if first:
            out.setdefault(_one_line(first, 200), None)
    return list(out)


def current_work(units: Sequence[Unit]) -> list[str]:
    """Where the work stood at the end of these units: the assistant's last message with prose
    and the last calls it made."""
    items: list[str] = []
    last = next((u for u in reversed(units) if u.role == "assistant" and u.content.strip()), None)
    if last is not None:
        items.append(_quote(last.content, 300))
    items.extend(f"then: {c}" for c in commands_run(units)[-3:])
    return items


def next_step(units: Sequence[Unit]) -> list[str]:
    """The step the units end on: a todo in progress, else a request nothing answered yet."""
    doing = [t for t in _todo_items(units) if t.startswith("[in_progress]")]
    if doing:
        return [doing[0].removeprefix("[in_progress] ")]
    unanswered = [t for t in open_items(units) if t.startswith("unanswered: ")]
    return [unanswered[-1].removeprefix("unanswered: ")] if unanswered else []


def _earlier(previous: str, budget: int, tok: Tokenizer) -> list[str]:
    """An earlier summary carried forward as whole lines (its header and verbatim user
    messages left out: the new summary has its own), up to `budget` tokens."""
    lines: list[str] = []
    used = 0
    skipping = False
    for line in previous.splitlines():
        text = line.strip()
        if not text or (text.startswith("[") and text.endswith("]") and not lines):
            continue
        if text.startswith("## "):
            skipping = text.lower().startswith(USER_MESSAGES_TITLE.lower())
            continue
        if skipping:
            continue
        n = tok.count(text) + 1
        if used + n > budget:
            break
        lines.append(text.removeprefix("- "))
        used += n
    return lines


# The sections of Claude Code's compaction prompt, filled from the transcript's structure
# (who asked, which tools ran on which files, what failed, what the agent said it was doing).
SECTIONS = (
    "Primary request and intent",
    "Key technical concepts",
    "Files and code",
    "Errors and fixes",
    "Problem solving",
    "Pending tasks",
    "Current work",
    "Next step",
)
USER_MESSAGES_TITLE = "All user messages"


def summarize_extractive(
    units: Sequence[Unit],
    target_tokens: int,
    previous_summary: str | None = None,
    tok: Tokenizer | None = None,
) -> str:
    """A structured summary of `units` in about `target_tokens` tokens (deterministic, offline),
    in the sections of Claude Code's compaction prompt."""
    tok = _tok(tok)
    primary = primary_request(units)
    requests = [u for u in user_requests(units) if u is not primary]
    intent = [f'"{_quote(primary.content)}"'] if primary is not None else []
    intent += [f'then: "{_quote(u.content, 160)}"' for u in requests]
    actions = file_actions(units)
    files = [f"{p} ({', '.join(actions[p])})" for p in files_touched(units)]
    concepts = []
    used = tools_used(units)
    if used:
        concepts.append("tools used: " + ", ".join(used[:12]))
    sections: list[tuple[str, list[str]]] = []
    if previous_summary:
        sections.append(("Earlier summary", _earlier(previous_summary, max(20, target_tokens // 3), tok)))
    sections += [
        ("Primary request and intent", intent),
        ("Key technical concepts", concepts),
        ("Files and code", files),
        ("Errors and fixes", errors_seen(units)),
        ("Problem solving", narration(units)),
        ("Commands run", commands_run(units)),
        ("Pending tasks", [t for t in open_items(units) if not t.startswith("unanswered: ")]),
        ("Current work", current_work(units)),
        ("Next step", next_step(units)),
    ]
    return _fit(
        sections,
        (),
        target_tokens,
        tok,
        first_take={
            "Earlier summary": 3,
            "Primary request and intent": 1,
            "Files and code": 6,
            "Errors and fixes": 2,
            "Current work": 1,
            "Pending tasks": 3,
            "Next step": 1,
        },
    )


def handover(
    units: Sequence[Unit],
    target_tokens: int = 500,
    p1_units: Sequence[Unit] | None = None,
    tok: Tokenizer | None = None,
    *,
    include_last_request: bool = True,
) -> str:
    """The fresh-start handover: the task, every P1 unit named, what was done and what remains,
    then (unless `include_last_request` is False) the last user request verbatim.

    The P1 section is never cut: one line per P1 unit (id, type and the head of its first line;
    just the id when that would take over half the budget), even past `target_tokens` (the
    caller sizes the budget). The other sections share what is left. The last request stays
    outside the budget; a caller that keeps the real last request after the handover passes
    only the dropped units and `include_last_request=False`.
    """
    tok = _tok(tok)
    requests = user_requests(units)
    p1 = list(p1_units) if p1_units is not None else [u for u in units if u.is_p1]
    tail = ""
    if include_last_request and requests:
        tail = "## Last request (verbatim)\n" + requests[-1].content
    room = target_tokens - (tok.count(tail) if tail else 0)
    named = [p1_line(u) for u in p1]
    if named and sum(tok.count_many([f"- {n}\n" for n in named])) > room // 2:
        named = [u.id for u in p1]
    done = commands_run(units)
    sections: list[tuple[str, list[str]]] = [
        ("Task", [f'"{_quote(requests[0].content)}"'] if requests else []),
        (P1_TITLE, named),
        ("Remaining", open_items(units)),
        ("Errors seen", errors_seen(units)[-10:]),
        ("Done so far", done[-20:]),
        ("Files touched", files_touched(units)),
        ("Decisions", decisions(units)),
    ]
    return _fit(
        sections,
        central_sentences(units),
        target_tokens,
        tok,
        fixed_tail=tail,
        keep_all=frozenset({P1_TITLE}),
    )


P1_TITLE = "Priority items (archived; recall by id)"
P1_CHARS = 60


def p1_line(unit: Unit) -> str:
    """`id (type): head of the first line` naming one P1 unit in a handover."""
    first = next(iter(unit.content.strip().splitlines()), "")
    head = _one_line(first, P1_CHARS)
    return f"{unit.id} ({unit.type}): {head}" if head else f"{unit.id} ({unit.type})"
