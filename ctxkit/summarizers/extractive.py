"""The offline summarizer: a structured handover written from what the log says happened.

`summarize_extractive` is deterministic and needs no model. Its sections follow Claude Code's
compaction prompt and are filled from the transcript's structure (`ctxkit.facts`): the task in
the user's words, every file acted on and how (created, edited, read, ran), each failure with
its error line and whether a later run fixed it, the actions and their outcomes, the open todo
items, and where the work stood. Nothing is inferred from words alone: an output is a failure
when the log says so, a file was edited when an edit tool or an in-place command touched it.

Within the token target the sections share the room by what a model continuing the task needs
most: the task, edited files, the latest errors, pending tasks and current work first, then
read files, older actions and the assistant's own notes. A previous summary (`previous_summary`,
ctxkit's own or an agent's) is merged section by section, so repeated compaction keeps one
summary with true counts instead of stacking them.

`handover` is the fresh-start form: the same sections, every P1 unit named, and optionally the
last request verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from ctxkit import facts as F
from ctxkit import log_events
from ctxkit.compress import split_sentences
from ctxkit.compress.text import iter_sentences
from ctxkit.model import Unit
from ctxkit.structure import conversation_start, is_clear, is_session_command, request_text
from ctxkit.summarizers.sections import (
    ACTIONS_TITLE,
    FINDINGS_TITLE,
    TASKS_TITLE,
    WORK_TITLE,
    Section,
    file_items,
    fit_sections,
    merge_previous,
)

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
    """Indices of the items taken newest first while their sizes add up to at most `budget`,
    oldest first; one larger than what is left is passed over and the count goes on (a paste of
    33,000 tokens of console warnings no longer keeps every older request out: Codex stops at
    it, after cutting it to what is left).

    >>> newest_within([5, 3, 4], 7)
    [1, 2]
    >>> newest_within([3, 9, 4], 10)
    [0, 2]
    >>> newest_within([5, 3, 4], 12)
    [0, 1, 2]
    """
    out: list[int] = []
    for k in range(len(sizes) - 1, -1, -1):
        if sizes[k] > budget:
            continue
        budget -= sizes[k]
        out.append(k)
    return out[::-1]


def distinct_sizes(texts: Sequence[str], sizes: Sequence[int]) -> list[int]:
    """`sizes` with 0 for a text sent again later: a quote of the user's messages gives a
    message once, where it was last sent (`verbatim_section`), so only that one takes room.

    >>> distinct_sizes(["/undo", "fix it", "/undo"], [2, 3, 2])
    [0, 3, 2]
    """
    seen: set[str] = set()
    out = list(sizes)
    for k in range(len(texts) - 1, -1, -1):
        key = texts[k].strip()
        if key in seen:
            out[k] = 0
        seen.add(key)
    return out


REQUEST_CHARS = 240  # a request longer than this is quoted head and tail
ITEM_CHARS = 160
# a sentence that says what was found or chosen: a cause, a fix, a decision and its reason
_DECISION = re.compile(
    r"\b(?:decided|decision|instead of|the (?:fix|issue|problem|cause|root cause|bug|reason) (?:is|was)|"
    r"because|caused by|turns out|the culprit)\b",
    re.IGNORECASE,
)
# what a finding must not be: an intention or a step ("Let me check why, because ..."), a
# question, a heading
_NOT_FINDING = re.compile(
    r"^(?:let me|let's|now|next|first|then|i'll|i will|i need|we need|ok|okay|actually|"
    r"i['’]m|i am|i['’]ll|i want|i should|we['’]ll|we should)\b|[?:]$",
    re.IGNORECASE,
)
_BASH_BLOCK = re.compile(r"```(?:bash|sh|shell|console)?\s*\n(.*?)```", re.DOTALL)


def _tok(tok: Tokenizer | None) -> Tokenizer:
    if tok is not None:
        return tok
    from ctxkit.tokens import get_tokenizer

    return get_tokenizer()


def _one_line(text: str, chars: int = ITEM_CHARS) -> str:
    return log_events.one_line(text, chars)


def _quote(text: str, chars: int = REQUEST_CHARS) -> str:
    """A request in its own words; a long one keeps its head and tail."""
    flat = " ".join(text.split())
    if len(flat) <= chars:
        return flat
    head = flat[: chars * 2 // 3].rstrip()
    tail = flat[-(chars // 3) :].lstrip()
    return f"{head} [...] {tail}"


# the part of a task message that states the problem, inside a harness's instructions
# (OpenHands' and SWE-bench's `<issue_description>`, `<pr_description>`, `<problem_statement>`)
_STATEMENT = re.compile(
    r"<(issue_description|pr_description|problem_statement|issue|task|description)>\s*(.*?)\s*</\1>",
    re.DOTALL | re.IGNORECASE,
)


def task_quote(text: str, chars: int) -> str:
    """The task in the user's words within `chars`: whole when it fits; else, when the message
    wraps a problem statement in a harness's instructions, the statement whole (or its head)
    after the message's opening line, the instructions left out and said so; else its head and
    tail. The statement is what the work is about; the instructions around it are boilerplate."""
    flat = " ".join(text.split())
    if len(flat) <= chars:
        return flat
    m = _STATEMENT.search(text)
    if m and m.group(2).strip():
        statement = " ".join(m.group(2).split())
        opening = " ".join(text[: m.start()].split())
        opening = re.sub(r"<[^>]+>", " ", opening).strip()
        lead = f"{_sentences_within(opening, 160)} " if opening else ""
        note = " [the harness's instructions around it left out]"
        room = chars - len(lead) - len(note)
        if len(statement) > room:
            statement = _sentences_within(statement, max(80, room))
        return f"{lead}<{m.group(1)}> {statement} </{m.group(1)}>{note}"
    return _quote(text, chars)


# --------------------------------------------------------------------------------------------
# extraction (thin views over `ctxkit.facts`)


def user_requests(units: Sequence[Unit]) -> list[Unit]:
    """The user's own requests, in order: harness notes ("[Request interrupted by user]",
    Codex's `<environment_context>`) and demonstrations are not requests."""
    return F.requests(units)


def file_actions(units: Sequence[Unit]) -> dict[str, list[str]]:
    """path -> what was done to it (created, edited, written, deleted, ran, read, used)."""
    return F.files(units)


def files_touched(units: Sequence[Unit]) -> list[str]:
    """Files the actions touched: changed ones first (created, edited, written, deleted), then
    those run, then those read; in order of first appearance within each rank."""
    actions = F.files(units)
    order = {p: i for i, p in enumerate(actions)}
    return sorted(actions, key=lambda p: (F.ACTION_RANK.get(actions[p][0], 9), order[p]))


@lru_cache(maxsize=65_536)  # every probe of summarize_old asks again for each request of its span
def error_line(text: str) -> str | None:
    """The line that says what went wrong in a failing output (see `facts.error_line`); None
    when the text holds no failure (a listing of files named error.c is none)."""
    if not log_events.may_say_failure(text):
        return None
    probe = Unit("x", "tool", content=text, tool_call_id="x")
    out = log_events.outcome(probe)
    if out.failed:
        return out.error or None
    line = log_events.error_line(text)
    return line if line and log_events._EXCEPTION.match(line) and not log_events._CODE_LISTING.match(line) else None


COMMAND_CHARS = 200  # a command longer than this is named by its head
LAST_COMMAND_CHARS = 1000  # the last action's command, heredoc and all, up to this length


def command_label(call: F.Call, chars: int = COMMAND_CHARS) -> str:
    """How a summary names an action: `name(command)`, the command whole when it is one line of
    at most `COMMAND_CHARS`; else its head, up to a heredoc's body, the end of its first line
    or a word near `chars`, then ` ...` (the convention a reader and the claim checker read as
    "cut here"), never a string cut in the middle as if whole. A patch is named by the first
    file it changes (`apply_patch(*** Update File: src/a.py ...)`). With `chars` above
    `COMMAND_CHARS` (the last action), a command of that length is quoted whole."""
    args = (call.args_whole or call.args).strip()
    lines = [ln for ln in args.splitlines() if ln.strip()]
    head = args
    if len(" ".join(args.split())) <= chars and chars > COMMAND_CHARS and "*** Begin Patch" not in args:
        pass  # the last action, whole: what the work continues from
    elif "*** Begin Patch" in args:
        changed = next((ln.strip() for ln in lines if ln.startswith(("*** Update File:", "*** Add File:", "*** Delete File:"))), "")
        head = changed or lines[0]
    elif len(lines) > 1:
        heredoc = _HEREDOC_OPEN.search(args)
        head = args[: heredoc.end()] if heredoc else lines[0]
    head = " ".join(head.split())
    if len(head) > chars:
        head = head[:chars].rsplit(" ", 1)[0]
    text = head if head == " ".join(args.split()) else f"{head} ..."
    return f"$ {text}" if call.name == "$" else f"{call.name}({text})"


_HEREDOC_OPEN = re.compile(r"<<-?\s*(['\"]?)\w+\1")


def _read_only(call: F.Call) -> bool:
    """An action that only read files (a Read, a view, a `cat` or `grep` of paths) and went
    through: the files section says what was read."""
    return bool(call.paths) and all(a == "read" for _, a in call.paths) and not call.failed


def _action_lines(actions: Sequence[F.Call], news: bool = False, whole: bool = False) -> list[str]:
    """`name(args) -> outcome` per action (with `news`, an action that went through says what
    came back: `-> ok: https://github.com/o/r/issues/71`); consecutive short calls of one tool
    one line each. Todo-list writes are the task list's."""
    rows = [
        (c.name, command_label(c, LAST_COMMAND_CHARS if whole else COMMAND_CHARS), _outcome_label(c, news))
        for c in actions
        if "todo" not in c.name.lower()
    ]
    return [f"{args} -> {label}" for _, args, label in rows]


def _outcome_label(call: F.Call, news: bool) -> str:
    if call.outcome is None:
        return "no result"
    if news and not call.outcome.failed and not call.outcome.exit_code and call.outcome.news:
        return f"ok: {_news(call.outcome)}"
    return call.outcome.label


def _news(outcome: log_events.Outcome) -> str:
    """The line that says what came back; when it is a name or a heading of a few words (the
    first entry of a listing, a document's title) and the output had more, how many more lines
    (`anthropic (and 9 more lines)`: read blind, the first entry passed for all it listed). A
    line that says what happened (`[main 4f86393] fix: retry`) stands alone."""
    line = _one_line(outcome.news, LAST_RESULT_CHARS)
    more = outcome.more
    if not more or len(line.split()) > ENTRY_WORDS:
        return line
    return f"{line} (and {more} more line{'s' if more > 1 else ''})"


ENTRY_WORDS = 4  # a result line of at most this many words may be one entry of many


def commands_run(units: Sequence[Unit]) -> list[str]:
    """`name(args) -> outcome` for each action (tool calls and commands written as text)."""
    return _action_lines(F.calls(units))


def _failures(actions: Sequence[F.Call]) -> list[str]:
    """`call -> error line` per distinct failure, oldest first; "(fixed: a later run passed)"
    when the same call later went through."""
    # the calls that went through at or after each position, read from the end: one pass
    passed_later: set[tuple[str, str]] = set()
    fixed_at: list[bool] = [False] * len(actions)
    for k in range(len(actions) - 1, -1, -1):
        d = actions[k]
        # the same call: its arguments whole, not the label's first 120 characters (two
        # bookings of other flights share them)
        same = (d.name, d.args_whole or d.args)
        fixed_at[k] = same in passed_later
        if d.outcome is not None and not d.outcome.failed:
            passed_later.add(same)
    by_error: dict[str, list[tuple[F.Call, bool]]] = {}
    for k, c in enumerate(actions):
        if not c.failed:
            continue
        assert c.outcome is not None
        by_error.setdefault(c.outcome.label, []).append((c, fixed_at[k]))
    out = []
    for label, runs in by_error.items():
        first, _ = runs[0]
        again = f" (and {len(runs) - 1} more)" if len(runs) > 1 else ""
        note = " (fixed: a later run passed)" if all(f for _, f in runs) else ""
        out.append(f"{command_label(first)}{again} -> {label}{note}")
    return out


def failures(units: Sequence[Unit]) -> list[str]:
    """`call -> error line` per distinct failure of the calls among `units`, oldest first."""
    return _failures(F.calls(units))


def errors_seen(units: Sequence[Unit]) -> list[str]:
    """What failed, in order (the log's own failures only), then error lines the user pasted."""
    out = failures(units)
    for u in user_requests(units):
        line = error_line(u.content)
        if line:
            out.append(f"reported by the user: {line}")
    return list(dict.fromkeys(out))


def decisions(units: Sequence[Unit]) -> list[str]:
    """Assistant sentences that state a plan, a cause or a choice."""
    out: dict[str, None] = {}
    for u in units:
        if u.role != "assistant" or not u.content:
            continue
        for s in split_sentences(_BASH_BLOCK.sub("", u.content)):
            text = s.strip().lstrip("-*# ").replace("**", "")
            if _DECISION.search(text) and 40 <= len(text) <= 400 and not _NOT_FINDING.search(text):
                out.setdefault(_one_line(text, 400), None)
    return list(out)


def _todo_items(units: Sequence[Unit]) -> list[str]:
    return [f"[{status}] {text}" for status, text in F.todos(units)]


def open_items(units: Sequence[Unit], requests: Sequence[Unit] | None = None) -> list[str]:
    """Unfinished items of the last todo list, and the last request if nothing answered it
    (`requests`: the units' `user_requests`, when the caller has them). A line of prose that
    says TODO or "next step" is not one: an instruction file's template (`**Recommended Next
    Steps**`) or a plan the work has since carried out would read as work still to do."""
    items: dict[str, None] = dict.fromkeys(_todo_items(units))
    if requests is None:
        requests = user_requests(units)
    if requests:
        last = requests[-1]
        at = next(i for i, u in enumerate(units) if u is last)
        if not any(u.role == "assistant" and (u.content.strip() or u.tool_calls) for u in units[at + 1 :]):
            items.setdefault("unanswered: " + _quote(request_text(last), 200), None)
    return list(items)


def primary_request(units: Sequence[Unit], requests: Sequence[Unit] | None = None) -> Unit | None:
    """The request that states the task: the first user request of four words or more (a bare
    "yes" or "continue" answers something; it is not the goal), else the longest
    (`requests`: the units' `user_requests`, when the caller has them)."""
    if requests is None:
        requests = user_requests(units)
    # since the user last cleared the conversation (`/clear`): what came before is done with
    start = conversation_start(units)
    if start:
        ids = {u.id for u in units[start:]}
        requests = [u for u in requests if u.id in ids] or requests
    for u in requests:
        if len(u.content.split()) >= 4:
            return u
    return max(requests, key=lambda u: len(u.content), default=None)


def current_work(
    units: Sequence[Unit], actions: Sequence[F.Call] | None = None, chars: int = 0
) -> list[str]:
    """Where the work stood at the end of these units: the assistant's last message with prose
    and the last actions it took, with their outcomes. The message is quoted whole, its lines
    kept (the code it wrote, as Claude Code's summary quotes the current work's snippets),
    when it is at most `chars` long (`LAST_WORDS_CHARS` at least), else its first sentences.
    Actions after those words are `then:` lines; when none came after, the last actions before
    them stand first, as what the words answer."""
    before, words, then = _work_parts(units, actions, chars)
    return [*before, *words, *then]


def _work_parts(
    units: Sequence[Unit], actions: Sequence[F.Call] | None, chars: int
) -> tuple[list[str], list[str], list[str]]:
    """`current_work`'s items: (the actions before the last words, the words, `then:` lines)."""
    words: list[str] = []
    said_at = next((i for i in range(len(units) - 1, -1, -1)
                    if units[i].role == "assistant" and units[i].content.strip()), -1)
    last = units[said_at] if said_at >= 0 else None
    if last is not None:
        text = _BASH_BLOCK.sub("", last.content).strip() if last.tool_calls else last.content.strip()
        text = text or last.content.strip()
        limit = max(LAST_WORDS_CHARS, chars)
        if len(text) <= limit and "\n" in text:
            words.append("\n".join(f"  {ln}" if k else ln for k, ln in enumerate(text.splitlines()) if ln.strip()))
        else:
            said = _sentences_within(text, limit)
            if said:
                words.append(said)
    done = [c for c in (actions if actions is not None else F.calls(units)) if "todo" not in c.name.lower()]
    after = [c for c in done if c.index >= said_at]
    shown = after or done
    # the last action on a line of its own, with its own result, not only that it worked: the
    # id a commit printed, the path a write reports
    lines = _action_lines(shown[:-1]) + _action_lines(shown[-1:], whole=True)
    came = shown[-1].outcome if shown else None
    if came is not None and not came.failed and came.news:
        lines[-1] += f": {_news(came)}"
    # the commands the user typed after those words (`/undo` took the edit back, `/clear` left
    # it behind, `/drop f` took a file out of the chat), word for word, the newest few
    note = [f"then: {c}" for c in _typed(units[max(said_at, 0) + 1 :])[-TYPED:]]
    if after:
        return [], words, [*[f"then: {c}" for c in lines[-3:]], *note]
    return lines[-3:], words, note


EARLIER_REQUEST = "An earlier request"  # the handover's task, when the task's own words lead


def _typed(units: Sequence[Unit]) -> list[str]:
    """The session commands among `units` (`/undo`, `/add f`, a `/clear` in any agent's form),
    word for word, a command typed again in a row once."""
    out: list[str] = []
    for u in units:
        if is_clear(u):
            found = _CLEAR_WORD.search(u.content)
            command = found.group(0) if found else ""
        else:
            command = request_text(u) if is_session_command(u) else ""
        if command and (not out or out[-1] != command):
            out.append(command)
    return out


_CLEAR_WORD = re.compile(r"/(?:clear|reset|new)\b")
TYPED = 4  # the newest session commands after the last words, in a summary's current work
FINDINGS = 4  # the newest findings a summary states
LAST_RESULT_CHARS = 160  # the first line of the last action's result, in a summary's current work
LAST_WORDS_CHARS = 400  # the assistant's last words, in whole sentences up to this length


def _sentences_within(text: str, chars: int) -> str:
    """The first sentences of `text` that fit `chars` (whitespace collapsed), whole; the first
    sentence cut at a word, marked, when even it is longer; "" for a text with no words."""
    flat = " ".join(text.replace("**", "").split())
    if len(flat) <= chars:
        return flat
    out = ""
    for sentence in iter_sentences(flat):
        sentence = sentence.strip()
        if not sentence:
            continue
        if len(out) + len(sentence) + 1 > chars:
            break
        out = f"{out} {sentence}".strip()
    if out:
        return out + " [...]"
    return flat[:chars].rsplit(" ", 1)[0] + " [...]"


def _current_work_section(parts: tuple[list[str], list[str], list[str]], action_first: bool = False) -> Section:
    """Current work, kept in this order when the budget is short: the assistant's last words,
    the last action (with its result), then the actions before it, newest first (taken in
    order, the oldest line stayed and read as the last action). `action_first`: the last action
    before the words."""
    before, words, then = parts
    items = [*before, *words, *then]
    actions = [*range(len(before)), *range(len(before) + len(words), len(items))]
    prose = list(range(len(before), len(before) + len(words)))
    newest = list(reversed(actions))
    order = [*newest[:1], *prose, *newest[1:]] if action_first else [*prose, *newest]
    return Section(WORK_TITLE, items, first=2, preference=order)


def _changed_since_todo(units: Sequence[Unit]) -> bool:
    """Whether a file was changed after the last todo-list update (the item it marked in
    progress may be done: the list was not updated to say so)."""
    at = max((i for i, u in enumerate(units) if any(_todo_call(c) for c in u.tool_calls)), default=-1)
    if at < 0:
        return False
    changed = ("created", "edited", "written", "deleted", "moved")
    return any(a in changed for c in F.calls(units[at:]) for _, a in c.paths)


def superseded(after: Sequence[Unit]) -> list[str]:
    """The sections of a summary that the messages kept after it supersede: its task list
    when they hold a newer one; its next step when they hold any step of the assistant (the
    work went on past it)."""
    titles: list[str] = []
    if any(_todo_call(c) for u in after for c in u.tool_calls):
        titles.append(TASKS_TITLE)
    if any(u.role == "assistant" for u in after):
        titles.append("Next step")
    return titles


def _todo_call(call: object) -> bool:
    name = str(getattr(call, "name", "")).lower()
    return "todo" in name or "plan" in name


def next_step(units: Sequence[Unit], items: Sequence[str] | None = None) -> list[str]:
    """The step the units end on: a todo in progress, else a request nothing answered yet
    (`items`: the units' `open_items`, when the caller has them)."""
    doing = [t for t in _todo_items(units) if t.startswith("[in_progress]")]
    if doing and not _changed_since_todo(units):
        return [doing[0].removeprefix("[in_progress] ")]
    if doing:
        return []  # the work went on after the list said so: which step is next, it does not say
    unanswered = [t for t in (open_items(units) if items is None else items) if t.startswith("unanswered: ")]
    return [unanswered[-1].removeprefix("unanswered: ")] if unanswered else []


def _newest_first(n: int) -> list[int]:
    return list(range(n - 1, -1, -1))


def _work_sections(
    units: Sequence[Unit], requests: Sequence[Unit], action_first: bool = False, chars: int = 0
) -> list[Section]:
    """The sections every summary shares: files, errors, actions, tasks, current work (with
    `action_first`, its last action before the assistant's last words)."""
    actions = F.calls(units)
    listed, file_pref = file_items(F.files(units, actions))
    errors = _failures(actions)
    for u in requests:
        line = error_line(u.content)
        if line:
            errors.append(f"reported by the user: {line}")
    errors = list(dict.fromkeys(errors))
    items = open_items(units, requests)
    tasks = [f"[{status}] {text}" for status, text in F.todo_list(units)]
    # what was done and what came back, reads aside (the files section lists what was read):
    # the older actions, the newest ones being the current work's `then:` lines
    done = _action_lines([c for c in actions[:-3] if not _read_only(c)], news=True)
    found = decisions(units)
    return [
        Section("Files and code", listed, first=12, preference=file_pref),
        Section("Errors and fixes", errors, first=4, preference=_newest_first(len(errors))),
        Section(TASKS_TITLE, tasks, first=8),
        _current_work_section(_work_parts(units, actions, chars), action_first),
        Section("Next step", next_step(units, items), first=1),
        Section(FINDINGS_TITLE, found[-FINDINGS:], preference=_newest_first(len(found[-FINDINGS:]))),
        Section(ACTIONS_TITLE, done, preference=_newest_first(len(done))),
    ]


def summarize_extractive(
    units: Sequence[Unit],
    target_tokens: int,
    previous_summary: str | None = None,
    tok: Tokenizer | None = None,
) -> str:
    """A structured summary of `units` in about `target_tokens` tokens (deterministic, offline),
    in the sections of Claude Code's compaction prompt; `previous_summary` is merged in."""
    tok = _tok(tok)
    requests = user_requests(units)
    primary = primary_request(units, requests)
    intent = [f'"{task_quote(request_text(primary), max(REQUEST_CHARS, target_tokens))}"'] if primary is not None else []
    intent += [f'then: "{_quote(request_text(u), 160)}"' for u in requests if u is not primary]
    sections = [
        Section("Primary request and intent", intent, first=1),
        *_work_sections(units, requests, chars=target_tokens * 4 // 3),
    ]
    return fit_sections(merge_previous(sections, previous_summary), target_tokens, tok)


def handover(
    units: Sequence[Unit],
    target_tokens: int = 500,
    p1_units: Sequence[Unit] | None = None,
    tok: Tokenizer | None = None,
    *,
    include_last_request: bool = True,
    current_first: bool = False,
    task: bool = True,
    quoted: Collection[str] = (),
    earlier: bool = True,
) -> str:
    """The fresh-start handover: the task, every P1 unit named, what was done and what remains,
    then (unless `include_last_request` is False) the last user request verbatim.

    With `current_first`, the last action and what came back, the first changed file, then the
    task, are picked before the other sections' first items: for a handover that nothing recent
    follows, in a room too small for all of them. Without `task` the request it would state as
    the task is titled as an earlier one: the caller keeps the request that opened the task,
    word for word, before it (a later request, or one before a `/clear`, is no task of its own);
    none when it is among the messages the caller `quoted`, or without `earlier` (a room where
    the user's short messages, quoted whole, tell more than the head of a long one).

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
    primary = primary_request(units, requests)
    if not task and primary is not None and (primary.content in quoted or not earlier):
        primary = None  # the caller quotes it word for word among the user's messages, or omits it
    sections = [
        Section("Task" if task else EARLIER_REQUEST, [f'"{task_quote(request_text(primary), max(REQUEST_CHARS, target_tokens))}"'] if primary is not None else [], first=1),
        Section(P1_TITLE, named, keep_all=True),
        *_work_sections(units, requests, action_first=current_first, chars=target_tokens * 4 // 3),
    ]
    leading = (WORK_TITLE, "Files and code", "Task", EARLIER_REQUEST) if current_first else ()
    return fit_sections(sections, target_tokens, tok, fixed_tail=tail, leading=leading)


P1_TITLE = "Priority items (archived; recall by id)"
P1_CHARS = 60


def p1_line(unit: Unit) -> str:
    """`id (type): head of the first line` naming one P1 unit in a handover."""
    first = next(iter(unit.content.strip().splitlines()), "")
    head = _one_line(first, P1_CHARS)
    return f"{unit.id} ({unit.type}): {head}" if head else f"{unit.id} ({unit.type})"


__all__ = [
    "P1_TITLE",
    "USER_MESSAGE_TOKENS",
    "Summarizer",
    "commands_run",
    "decisions",
    "error_line",
    "errors_seen",
    "failures",
    "file_actions",
    "files_touched",
    "handover",
    "newest_within",
    "open_items",
    "primary_request",
    "summarize_extractive",
    "user_message_budget",
    "user_requests",
]
