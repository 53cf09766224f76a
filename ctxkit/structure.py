"""Structure of a transcript: turns, atomic blocks, safe cut points and tool-call pairing.

Every source format (OpenAI `tool_calls`/`tool_call_id`, Anthropic `tool_use`/`tool_result`,
Codex `function_call`/`function_call_output`) arrives here as units: an assistant unit carries
`tool_calls` (each with an id) and a result is a unit whose `tool_call_id` names its call. So
everything below works on units only.

A *turn* is a user request and everything up to the next user request; units before the first
request (system prompt, preamble) form a preamble turn with index -1. A *block* is the smallest
span that can be kept or dropped whole: an assistant unit with tool calls together with all of
their results (and whatever lies between them), or any other unit alone. Strategies cut only at
block boundaries, which is what `safe_cut_points` returns.

`check` rules (each kind's severity is in `KINDS`):

- `orphan_result` (error): a result whose call is not in the transcript, or comes after it.
- `missing_result` (error): a call without a result, while the conversation went on after it.
- `pending_call` (info): a call without a result at the very end, where only tool results and
  other tool-calling assistant units follow it: the harness still has to run the tool. This is
  how a live agent's context looks between the model's call and the tool's answer.
- `duplicate_id` (error): two units with the same id, or a call id used again while its first
  call still waits for its result (which call a result answers is then ambiguous).
- `reused_call_id` (warning): a call id used again after its earlier call was answered, as
  tau-bench's gpt-4o logs do. Results pair with calls in order, as the APIs read them, but
  Anthropic's API rejects repeated `tool_use` ids.
- `duplicate_result` (error): a second result for a call that was already answered.
- `empty_message` (warning): a unit with no content, no tool calls, no reasoning and no images.
  A tool result with empty output is not empty: "the command printed nothing" is an answer.
- `bad_ending` (warning): a model answers after a user request or a tool result. A transcript
  that is empty, or ends with a system unit, gives it nothing to answer; one that ends with an
  assistant reply (no pending calls) would be continued as a prefill, not answered. Ending with
  an assistant unit whose calls are pending is reported as `pending_call` instead.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ctxkit.model import Transcript, Unit

_T = TypeVar("_T")
MEMO_MAX = 16  # unit sequences whose structure is kept: a chain's states, its original


def _by_identity(fn: Callable[..., _T]) -> Callable[..., _T]:
    """`fn(units, *args)` read once per tuple of units: a compaction asks for the blocks, turns
    and protected units of each state many times (every strategy, every check), and a state's
    units are a tuple no one changes. A list is read afresh every time (it may change). The
    answer is shared: callers never change what these functions return in place."""
    memo: OrderedDict[tuple[int, tuple[Any, ...]], tuple[Sequence[Unit], _T]] = OrderedDict()

    @functools.wraps(fn)
    def read(units: Sequence[Unit], *args: Any) -> _T:
        if type(units) is not tuple:
            return fn(units, *args)
        key = (id(units), args)
        hit = memo.get(key)
        if hit is not None and hit[0] is units:
            return hit[1]
        out = fn(units, *args)
        memo[key] = (units, out)
        if len(memo) > MEMO_MAX:
            memo.popitem(last=False)
        return out

    return read

# kind -> (severity, meaning); severities: error, warning, info
KINDS: dict[str, tuple[str, str]] = {
    "orphan_result": ("error", "a tool result without its call before it"),
    "missing_result": ("error", "a tool call without its result"),
    "pending_call": ("info", "a tool call at the end still waiting for its result"),
    "duplicate_id": ("error", "two units share an id, or a call id is reused while still open"),
    "reused_call_id": ("warning", "a call id used again after its earlier call was answered"),
    "duplicate_result": ("error", "two results answer the same tool call"),
    "empty_message": ("warning", "a unit with no content, tool calls, reasoning or images"),
    "bad_ending": ("warning", "the conversation does not end where a model can answer"),
}

# Roles/types that are not the user asking for something even when the role is `user`.
_NOT_REQUEST_TYPES = frozenset({"summary", "placeholder", "tool_result", "tool_call"})


@dataclass(frozen=True)
class Turn:
    """A user request and everything until the next one: `units[start:end]`; index -1 is the preamble."""

    index: int
    start: int
    end: int

    @property
    def is_preamble(self) -> bool:
        return self.index < 0

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Problem:
    """One structural problem found by `check` or `pairs_intact`."""

    kind: str
    unit_id: str
    message: str

    @property
    def severity(self) -> str:
        """error, warning or info (see `KINDS`)."""
        return KINDS.get(self.kind, ("error", ""))[0]

    def __str__(self) -> str:
        return f"{self.kind} [{self.unit_id}]: {self.message}"


def is_user_request(u: Unit) -> bool:
    """True for a user message that asks something: not a tool result, summary or placeholder."""
    return u.role == "user" and u.tool_call_id is None and u.type not in _NOT_REQUEST_TYPES


# User-role records the harness wrote, not the user: Claude Code's notes around local commands
# and interruptions, Codex's environment and instruction blocks, system reminders.
_HARNESS_NOTE = re.compile(
    r"^\s*(?:\[Request interrupted by user|Caveat: The messages below were generated by the user"
    r"|<local-command-(?:stdout|stderr|caveat)>|<system-reminder>|# AGENTS\.md instructions for "
    r"|<(?:environment_context|user_instructions|INSTRUCTIONS|turn_aborted|user_shell_command"
    r"|RUNTIME_INFORMATION|EXTRA_INFO)>"
    r"|<[a-z_]+[ _]instructions>"
    # Claude Code's record of a session command (`/clear`, `/model`, `/compact`) and of the
    # user's own shell (`!pwd`): what the harness did, not work asked for
    r"|(?:<command-message>[^<]*</command-message>\s*)?<command-name>/(?:clear|compact|model|mcp|resume|"
    r"exit|quit|cost|status|help|config|login|logout|memory|context|usage|doctor|permissions|agents|"
    r"hooks|ide|vim|theme|add-dir|export|rewind|statusline|terminal-setup|bashes|todos|release-notes|"
    r"upgrade|privacy-settings|output-style)</command-name>"
    r"|<bash-(?:input|stdout|stderr)>"
    r"|[^\n]*\? \(Y\)es/\(N\)o)",  # aider's confirm prompt, answered: "Add file to the chat? (Y)es/(N)o/...: skip"
)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
# the files an `@path` names, which Gemini CLI pastes after the user's words
# (`handleAtCommand`); its own history shows the prompt without them
_REFERENCED = re.compile(r"\n?--- Content from referenced files ---\n.*?(?:\n--- End of content ---|\Z)", re.DOTALL)
# A session command typed to the agent, not a request to the model: aider's (`/add f`, `/drop`,
# `/undo`, `/diff`, `/run cmd`, `/test` ...; aider.chat/docs/usage/commands.html), Gemini CLI's
# and Codex's (`/compress`, `/new`, `/model`, `/approvals`). A command that carries a request
# (aider's `/ask`, `/code`, `/architect`; Claude Code's `/init` or a custom command, which it
# expands into a prompt) stays one.
_SESSION_COMMAND = re.compile(
    r"^/(?:add|drop|clear|reset|new|undo|diff|commit|ls|tokens|models?|map|map-refresh|read-only|run|git|"
    r"exit|quit|lint|test|web|paste|copy|copy-context|save|load|settings|chat-mode|editor|multiline-mode|"
    r"voice|think-tokens|reasoning-effort|report|weak-model|editor-model|compress|chat|memory|stats|"
    r"tools|mcp|auth|theme|about|bug|docs|extensions|privacy|restore|vim|directory|approvals|status|"
    r"mention|compact|resume)(?:[ \t]+[^\n]*)?$"
)
# A session command that starts the conversation anew: what came before it is no longer in the
# agent's context (aider's and Gemini CLI's `/clear`, aider's `/reset`, Codex's `/new`, Claude
# Code's record of `/clear`).
_CLEAR = re.compile(
    r"^(?:/(?:clear|reset|new)\s*|(?:<command-message>[^<]*</command-message>\s*)?"
    r"<command-name>/clear</command-name>[\s\S]*)$"
)


def request_text(u: Unit) -> str:
    """A user message's own words: system reminders and the contents of the files an `@path`
    names, which a harness appended, are not the user's.

    >>> request_text(Unit("u", "user", content="Fix @a.py\\n--- Content from referenced files ---\\nContent from @a.py:\\nx = 1\\n--- End of content ---"))
    'Fix @a.py'
    """
    text = u.content
    if "<system-reminder>" in text:
        text = _REMINDER.sub("", text)
    if "--- Content from referenced files ---" in text:
        text = _REFERENCED.sub("", text)
    return text.strip()


def is_request(u: Unit) -> bool:
    """A user request the user wrote: `is_user_request`, with words of the user's own (not a
    harness note such as "[Request interrupted by user]" or Codex's `<environment_context>`,
    not a demonstration)."""
    if not is_user_request(u) or u.meta.get("demo") or u.meta.get("is_meta") or _observation(u):
        # a demonstration (SWE-agent's few-shot example) is not the task; a record the harness
        # marks as its own (Claude Code's `isMeta`: a slash command's expanded template) is
        # not the user's words
        return False
    text = request_text(u)
    return bool(text) and not _HARNESS_NOTE.match(text) and not _SESSION_COMMAND.match(text)


def is_session_command(u: Unit) -> bool:
    """A command the user typed to the agent (`/add f`, `/clear`), not a request to the model."""
    return is_user_request(u) and bool(_SESSION_COMMAND.match(request_text(u)))


def is_clear(u: Unit) -> bool:
    """The user cleared the conversation here (`/clear`, `/reset`, `/new`): the agent went on
    without what came before."""
    return is_user_request(u) and bool(_CLEAR.match(request_text(u)))


def conversation_start(units: Sequence[Unit]) -> int:
    """Where the conversation the agent holds begins: after the last `is_clear`, else 0."""
    return next((i + 1 for i in range(len(units) - 1, -1, -1) if is_clear(units[i])), 0)


def first_request_index(units: Sequence[Unit]) -> int | None:
    """The request that opens the task: the first of the user's requests (`request_indices`)
    since the conversation last began anew (`conversation_start`), else the first of all."""
    found = _request_indices(units)
    start = conversation_start(units)
    return next((i for i in found if i >= start), found[0] if found else None)


def _observation(u: Unit) -> bool:
    """A tool's or the runtime's output logged as a user message: OpenHands' observation that
    answers no action (an error of a malformed call, the workspace's recall), a text agent's
    observation (`source_role` tool). Never the user's request."""
    return u.meta.get("source_role") == "tool" or (isinstance(u.raw, dict) and "observation" in u.raw)


def request_indices(units: Sequence[Unit]) -> list[int]:
    """Indices of the user's own requests (`is_request`); the harness's user messages only when
    the user wrote none."""
    return list(_request_indices(units))


@_by_identity
def _request_indices(units: Sequence[Unit]) -> tuple[int, ...]:
    return own_request_indices(units) or tuple(
        i for i, u in enumerate(units) if is_user_request(u)
    )


@_by_identity
def own_request_indices(units: Sequence[Unit]) -> tuple[int, ...]:
    """Indices of the user's own requests (`is_request`), none when the user wrote none."""
    return tuple(i for i, u in enumerate(units) if is_request(u))


def turns(units: Sequence[Unit]) -> list[Turn]:
    """Split units into turns at each user request; leading units form turn -1 (preamble)."""
    return list(_turns(units))


@_by_identity
def _turns(units: Sequence[Unit]) -> tuple[Turn, ...]:
    starts = [i for i, u in enumerate(units) if is_user_request(u)]
    out: list[Turn] = []
    if not units:
        return ()
    if not starts or starts[0] > 0:
        out.append(Turn(-1, 0, starts[0] if starts else len(units)))
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(units)
        out.append(Turn(k, start, end))
    return tuple(out)


@dataclass
class _Scan:
    """Calls and results matched in order, as an API pairs them."""

    links: list[tuple[int, int]] = field(default_factory=list)  # (call index, result index)
    first: dict[str, tuple[int, int | None]] = field(default_factory=dict)  # id -> first pairing
    reused: list[tuple[int, str]] = field(default_factory=list)  # call reusing an answered id
    clashes: list[tuple[int, str, int]] = field(default_factory=list)  # id reused while open
    orphans: list[tuple[int, str, int | None]] = field(
        default_factory=list
    )  # result, id, later call
    extra_results: list[tuple[int, str, int]] = field(default_factory=list)  # result, id, first
    unanswered: list[tuple[int, str]] = field(default_factory=list)  # call index, id


@_by_identity
def _scan(units: Sequence[Unit]) -> _Scan:
    """Pair each result with the latest call of its id before it.

    Ids are not always unique: tau-bench's gpt-4o logs reuse a call id in a later turn once the
    first call was answered. Matching in order pairs each use with its own result, so one reuse
    does not glue two distant turns into one block.
    """
    scan = _Scan()
    calls_by_id: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        for c in u.tool_calls:
            calls_by_id.setdefault(c.id, []).append(i)
    open_calls: dict[str, int] = {}  # id -> index of the call still waiting
    last_call: dict[str, int] = {}  # id -> index of the latest call so far
    answered_by: dict[str, int] = {}  # id -> result index of its latest call
    for i, u in enumerate(units):
        cid = u.tool_call_id
        if cid is not None:
            if cid in open_calls:
                ci = open_calls.pop(cid)
                scan.links.append((ci, i))
                answered_by[cid] = i
                if scan.first.get(cid) == (ci, None):
                    scan.first[cid] = (ci, i)
            elif cid in last_call:
                # a second result for an answered call: it stays with that call
                scan.links.append((last_call[cid], i))
                scan.extra_results.append((i, cid, answered_by[cid]))
            else:
                later = next((ci for ci in calls_by_id.get(cid, []) if ci > i), None)
                if later is not None:
                    scan.links.append((i, later))  # out of order, but the two belong together
                scan.orphans.append((i, cid, later))
        for c in u.tool_calls:
            if c.id in open_calls:
                scan.clashes.append((i, c.id, open_calls[c.id]))
                scan.unanswered.append((open_calls[c.id], c.id))
            elif c.id in last_call:
                scan.reused.append((i, c.id))
            open_calls[c.id] = i
            last_call[c.id] = i
            scan.first.setdefault(c.id, (i, None))
    scan.unanswered.extend((ci, cid) for cid, ci in open_calls.items())
    # a call whose only result came before it is reported once, as that orphan result
    answered_early = {later for _, _, later in scan.orphans if later is not None}
    scan.unanswered = sorted(x for x in scan.unanswered if x[0] not in answered_early)
    return scan


def pairs(units: Sequence[Unit]) -> dict[str, tuple[int, int | None]]:
    """Call id -> (index of the unit making the call, index of its result or None).

    For an id used by more than one call (it happens in real logs), the first call's pairing;
    `blocks` and `check` pair every use in order.
    """
    return dict(_scan(units).first)


def _spans(units: Sequence[Unit]) -> list[tuple[int, int]]:
    """Inclusive [lo, hi] index ranges that must stay together: each call with its results."""
    return [(min(a, b), max(a, b)) for a, b in _scan(units).links]


def blocks(units: Sequence[Unit]) -> list[tuple[int, int]]:
    """Atomic [start, end) spans covering all units; a span never splits a call from its result."""
    return list(_blocks(units))


@_by_identity
def _blocks(units: Sequence[Unit]) -> tuple[tuple[int, int], ...]:
    n = len(units)
    # reach[i]: the furthest index that must stay with a span starting at or before i.
    reach = list(range(n))
    for lo, hi in _spans(units):
        if hi > reach[lo]:
            reach[lo] = hi
    out: list[tuple[int, int]] = []
    start = 0
    furthest = -1
    for i in range(n):
        furthest = max(furthest, reach[i])
        if furthest == i:
            out.append((start, i + 1))
            start = i + 1
    return tuple(out)


def safe_cut_points(units: Sequence[Unit]) -> list[int]:
    """Indices i in 0..len(units) where units[:i] and units[i:] split no call from its result."""
    return [0] + [end for _, end in _blocks(units)]


def _as_units(t: Transcript | Sequence[Unit]) -> Sequence[Unit]:
    return t.units if isinstance(t, Transcript) else t


def _is_empty(u: Unit) -> bool:
    return (
        not u.content.strip()
        and not u.tool_calls
        and not u.reasoning.strip()
        and not u.images
        and u.tool_call_id is None
    )


def _pending_from(units: Sequence[Unit]) -> int:
    """First index of the trailing stretch where calls may still be pending.

    That stretch is the last run of units made only of tool results and tool-calling assistant
    units (Claude Code writes one response as several assistant records, one call each).
    """
    i = len(units)
    while i > 0:
        u = units[i - 1]
        if u.tool_call_id is not None or (u.role == "assistant" and u.tool_calls):
            i -= 1
        else:
            break
    return i


def check(t: Transcript | Sequence[Unit]) -> list[Problem]:
    """Structural problems of a transcript, in unit order (see the module docstring for the rules)."""
    units = _as_units(t)
    problems: list[Problem] = []

    seen_units: set[str] = set()
    for u in units:
        stated = u.meta.get("stated_id", u.id) if u.meta else u.id  # as the file gave it
        if stated in seen_units:
            problems.append(
                Problem("duplicate_id", stated, f"unit id {stated!r} appears more than once")
            )
        seen_units.add(stated)

    scan = _scan(units)
    for i, cid, first in scan.clashes:
        problems.append(
            Problem(
                "duplicate_id",
                units[i].id,
                f"tool call id {cid!r} is used again while its first call "
                f"(unit {units[first].id!r}) still waits for a result",
            )
        )
    for i, cid in scan.reused:
        problems.append(
            Problem(
                "reused_call_id",
                units[i].id,
                f"tool call id {cid!r} is used again after its earlier call was answered; "
                "results pair with calls in order",
            )
        )
    for i, cid, later in scan.orphans:
        if later is None:
            text = f"result for tool call {cid!r}, which is not in the transcript"
        else:
            text = f"result for tool call {cid!r} comes before its call (unit {units[later].id!r})"
        problems.append(Problem("orphan_result", units[i].id, text))
    for i, cid, first in scan.extra_results:
        problems.append(
            Problem(
                "duplicate_result",
                units[i].id,
                f"second result for tool call {cid!r} (first is unit {units[first].id!r})",
            )
        )
    pending_from = _pending_from(units)
    for i, cid in scan.unanswered:
        u = units[i]
        name = next((c.name for c in u.tool_calls if c.id == cid), "")
        if i >= pending_from:
            problems.append(
                Problem(
                    "pending_call", u.id, f"tool call {cid!r} ({name}) is waiting for its result"
                )
            )
        else:
            problems.append(
                Problem("missing_result", u.id, f"tool call {cid!r} ({name}) has no result")
            )

    for u in units:
        if _is_empty(u):
            problems.append(
                Problem(
                    "empty_message",
                    u.id,
                    f"{u.role} unit has no content, tool calls, reasoning or images",
                )
            )

    ending = _ending_problem(units)
    if ending is not None:
        problems.append(ending)

    order = {u.id: i for i, u in reversed(list(enumerate(units)))}
    problems.sort(key=lambda p: order.get(p.unit_id, len(units)))
    return problems


def _ending_problem(units: Sequence[Unit]) -> Problem | None:
    if not units:
        return Problem("bad_ending", "", "the transcript has no units: there is nothing to answer")
    last = units[-1]
    if last.tool_call_id is not None or is_user_request(last):
        return None
    if last.role == "user":
        return None  # a summary or placeholder in a user message still hands the turn to the model
    if last.role == "assistant" and last.tool_calls:
        return None  # reported as pending_call: the tools run next, then the model
    if last.role == "system":
        return Problem(
            "bad_ending",
            last.id,
            "the transcript ends with a system unit: there is no request to answer",
        )
    return Problem(
        "bad_ending",
        last.id,
        f"the transcript ends with an {last.role} reply: a model would continue it, not answer a request",
    )


def pairs_intact(before: Sequence[Unit], after: Sequence[Unit]) -> list[Problem]:
    """Pairing problems in `after` (a compacted `before`): results need calls, calls need results.

    A call that was pending in `before` (no result there either) may stay pending in `after`,
    and a result that was an orphan in `before` may stay one. Placeholders that replace a result must keep its `tool_call_id`, so they count as results.
    """
    answered_before, orphans_before = _pairing(before)
    scan = _scan(after)
    problems: list[Problem] = []
    for i, cid, later in scan.orphans:
        if (after[i].id, cid) in orphans_before:
            continue
        text = "lost its call" if later is None else "now comes before its call"
        problems.append(
            Problem("orphan_result", after[i].id, f"result for tool call {cid!r} {text}")
        )
    for i, cid in scan.unanswered:
        if (after[i].id, cid) in answered_before:
            problems.append(
                Problem("missing_result", after[i].id, f"tool call {cid!r} lost its result")
            )
    return problems


@_by_identity
def _pairing(units: Sequence[Unit]) -> tuple[frozenset[tuple[str, str | None]], frozenset[tuple[str, str]]]:
    """(call unit id, call id) of each call answered in order, and (unit id, call id) of each
    result that is an orphan: what `pairs_intact` holds a compacted transcript against."""
    scan = _scan(units)
    answered = frozenset((units[ci].id, units[ri].tool_call_id) for ci, ri in scan.links if ci < ri)
    # a result that was already an orphan in the original is not the compaction's doing
    orphans = frozenset((units[i].id, cid) for i, cid, _ in scan.orphans)
    return answered, orphans


def protected_indices(units: Sequence[Unit], *, in_recovery: bool = False) -> set[int]:
    """Indices that must survive compaction verbatim: system units, the first and last requests
    the user wrote (`is_request`), P1 units, and every unit of the atomic block (call + results) that holds one.

    In recovery only the system units and the last user request are protected: recovery may
    move P1 units to the archive (the handover names them).
    """
    return set(_protected(units, in_recovery))


@_by_identity
def _protected(units: Sequence[Unit], in_recovery: bool) -> frozenset[int]:
    keep: set[int] = {i for i, u in enumerate(units) if u.role == "system"}
    # the user's own requests; harness notes (Codex's environment block, OpenHands' runtime
    # information) only when the user wrote none
    requests = _request_indices(units)
    if requests:
        keep.add(requests[-1])
        first = first_request_index(units)
        if not in_recovery and first is not None:
            keep.add(first)
    if not in_recovery:
        keep.update(i for i, u in enumerate(units) if u.is_p1)
    for start, end in _blocks(units):
        if end - start > 1 and any(i in keep for i in range(start, end)):
            keep.update(range(start, end))
    return frozenset(keep)
