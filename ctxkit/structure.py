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
- `duplicate_id` (error): two units with the same id, or two calls with the same call id.
- `duplicate_result` (error): two results answering the same call.
- `empty_message` (warning): a unit with no content, no tool calls, no reasoning and no images.
  A tool result with empty output is not empty: "the command printed nothing" is an answer.
- `bad_ending` (warning): a model answers after a user request or a tool result. A transcript
  that is empty, or ends with a system unit, gives it nothing to answer; one that ends with an
  assistant reply (no pending calls) would be continued as a prefill, not answered. Ending with
  an assistant unit whose calls are pending is reported as `pending_call` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctxkit.model import Transcript, Unit

# kind -> (severity, meaning); severities: error, warning, info
KINDS: dict[str, tuple[str, str]] = {
    "orphan_result": ("error", "a tool result without its call before it"),
    "missing_result": ("error", "a tool call without its result"),
    "pending_call": ("info", "a tool call at the end still waiting for its result"),
    "duplicate_id": ("error", "two units, or two tool calls, share an id"),
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


def is_tool_result(u: Unit) -> bool:
    """True for a unit that answers a tool call (it names the call it answers)."""
    return u.tool_call_id is not None


def is_user_request(u: Unit) -> bool:
    """True for a user message that asks something: not a tool result, summary or placeholder."""
    return u.role == "user" and u.tool_call_id is None and u.type not in _NOT_REQUEST_TYPES


def turns(units: Sequence[Unit]) -> list[Turn]:
    """Split units into turns at each user request; leading units form turn -1 (preamble)."""
    starts = [i for i, u in enumerate(units) if is_user_request(u)]
    out: list[Turn] = []
    if not units:
        return out
    if not starts or starts[0] > 0:
        out.append(Turn(-1, 0, starts[0] if starts else len(units)))
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(units)
        out.append(Turn(k, start, end))
    return out


def pairs(units: Sequence[Unit]) -> dict[str, tuple[int, int | None]]:
    """Call id -> (index of the unit making the call, index of its first result or None)."""
    calls: dict[str, int] = {}
    for i, u in enumerate(units):
        for c in u.tool_calls:
            calls.setdefault(c.id, i)
    results: dict[str, int] = {}
    for i, u in enumerate(units):
        if u.tool_call_id is not None and u.tool_call_id in calls:
            results.setdefault(u.tool_call_id, i)
    return {cid: (ci, results.get(cid)) for cid, ci in calls.items()}


def _spans(units: Sequence[Unit]) -> list[tuple[int, int]]:
    """Inclusive [lo, hi] index ranges that must stay together: each call with all its results."""
    calls: dict[str, int] = {}
    for i, u in enumerate(units):
        for c in u.tool_calls:
            calls.setdefault(c.id, i)
    lo_hi: dict[str, list[int]] = {cid: [i, i] for cid, i in calls.items()}
    for i, u in enumerate(units):
        cid = u.tool_call_id
        if cid is not None and cid in lo_hi:
            # Every result of a call (duplicates too) is tied to it, wherever it sits.
            span = lo_hi[cid]
            span[0] = min(span[0], i)
            span[1] = max(span[1], i)
    return [(lo, hi) for lo, hi in lo_hi.values() if hi > lo]


def blocks(units: Sequence[Unit]) -> list[tuple[int, int]]:
    """Atomic [start, end) spans covering all units; a span never splits a call from its result."""
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
    return out


def safe_cut_points(units: Sequence[Unit]) -> list[int]:
    """Indices i in 0..len(units) where units[:i] and units[i:] split no call from its result."""
    return [0] + [end for _, end in blocks(units)]


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
        if u.id in seen_units:
            problems.append(
                Problem("duplicate_id", u.id, f"unit id {u.id!r} appears more than once")
            )
        seen_units.add(u.id)

    call_at: dict[str, int] = {}
    for i, u in enumerate(units):
        for c in u.tool_calls:
            if c.id in call_at:
                problems.append(
                    Problem(
                        "duplicate_id",
                        u.id,
                        f"tool call id {c.id!r} is used again (first by unit {units[call_at[c.id]].id!r})",
                    )
                )
            else:
                call_at[c.id] = i

    answered: dict[str, int] = {}
    for i, u in enumerate(units):
        cid = u.tool_call_id
        if cid is None:
            continue
        if cid not in call_at:
            problems.append(
                Problem(
                    "orphan_result",
                    u.id,
                    f"result for tool call {cid!r}, which is not in the transcript",
                )
            )
        elif call_at[cid] > i:
            problems.append(
                Problem(
                    "orphan_result",
                    u.id,
                    f"result for tool call {cid!r} comes before its call (unit {units[call_at[cid]].id!r})",
                )
            )
        elif cid in answered:
            problems.append(
                Problem(
                    "duplicate_result",
                    u.id,
                    f"second result for tool call {cid!r} (first is unit {units[answered[cid]].id!r})",
                )
            )
        else:
            answered[cid] = i

    pending_from = _pending_from(units)
    for cid, i in call_at.items():
        if cid in answered:
            continue
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

    A call that was pending in `before` (no result there either) may stay pending in `after`.
    Placeholders that replace a result must keep its `tool_call_id`, so they count as results.
    """
    answered_before = {u.tool_call_id for u in before if u.tool_call_id is not None}
    problems: list[Problem] = []
    call_at: dict[str, int] = {}
    for i, u in enumerate(after):
        for c in u.tool_calls:
            call_at.setdefault(c.id, i)
    answered: set[str] = set()
    for i, u in enumerate(after):
        cid = u.tool_call_id
        if cid is None:
            continue
        if cid not in call_at:
            problems.append(
                Problem("orphan_result", u.id, f"result for tool call {cid!r} lost its call")
            )
        elif call_at[cid] > i:
            problems.append(
                Problem(
                    "orphan_result", u.id, f"result for tool call {cid!r} now comes before its call"
                )
            )
        answered.add(cid)
    for cid, i in call_at.items():
        if cid not in answered and cid in answered_before:
            problems.append(
                Problem("missing_result", after[i].id, f"tool call {cid!r} lost its result")
            )
    return problems
