"""Fidelity: what a compacted transcript kept of the original, measured one way everywhere.

Pure functions over the original `Transcript` and the compacted one (as the engine or a peer
returns it, meta included). `ctxkit bench --suite quality` puts four of them beside its peers
(needles, files-touched trail, user messages verbatim, last request verbatim) and
`scripts/model_ready.py` reports them all on the real transcripts and the simulate scenarios.

- `needles`: the ground truth's needles still in the context (`truth.needle_retention`).
- `files_trail`: of the files the removed or changed units touched (named in tool-call
  arguments, by the engine's `files_touched`), the share named in the summary (anywhere in the
  context when there is no summary).
- `user_verbatim`: the original's user requests whose full text is still there, word for word
  (in a user message, or quoted in a summary); also over the newest requests that fit a token
  budget (Codex keeps 20k tokens of them).
- `last_request_verbatim`: the last request is still a user message, unchanged.
- `longer_placeholders`: placeholders (and compressed units) longer than what they replace.
- `broken_json`: tool outputs that were JSON before and are not after (placeholders aside).
- `edited_calls`: tool calls whose arguments (or name) changed under the same call id.
- `new_same_role`: consecutive messages of one role that were not consecutive in the input.
- `summary_after_first_request`: the first new summary comes after the first request.

The engine's own rules these judge against (which files units touched, which newest user
requests its budget keeps) come in as `EngineRules`, built outside the evaluation package
(`ctxkit.engines.methods.ENGINE_RULES`), so it imports no summarizer.

Example:
    >>> from ctxkit.engines.methods import ENGINE_RULES as rules
    >>> from ctxkit.model import Transcript, Unit
    >>> before = Transcript([Unit("u1", "user", content="fix a.py"), Unit("a1", "assistant", content="ok")])
    >>> after = Transcript([Unit("u1", "user", content="fix a.py")])
    >>> user_verbatim(before, after, rules).ratio, last_request_verbatim(before, after)
    (1.0, True)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.model import Transcript, Unit
from ctxkit.structure import is_user_request


@dataclass(frozen=True)
class EngineRules:
    """The compacting engine's rules the measures judge against, passed in by its caller."""

    files_touched: Callable[[Sequence[Unit]], Sequence[str]]  # files units' calls touched
    newest_within: Callable[[Sequence[int], int], list[int]]  # newest sizes within a budget
    user_message_budget: Callable[[int], int]  # user-message tokens kept for a goal
    user_message_tokens: int  # the budget of user messages without a goal


@dataclass(frozen=True)
class Share:
    """`kept` of `total`; `ratio` is 1.0 when there was nothing to keep."""

    kept: int
    total: int

    @property
    def ratio(self) -> float:
        return self.kept / self.total if self.total else 1.0

    def __add__(self, other: Share) -> Share:
        return Share(self.kept + other.kept, self.total + other.total)

    def to_dict(self) -> dict[str, int]:
        return {"kept": self.kept, "total": self.total}


def unit_text(u: Unit) -> str:
    """All the text a model reads in a unit: content, reasoning, tool-call arguments."""
    parts = [u.content, u.reasoning, *(c.arguments for c in u.tool_calls)]
    return "\n".join(p for p in parts if p)


def _context_text(t: Transcript) -> str:
    return "\n".join(unit_text(u) for u in t.units)


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


# --- what was kept ----------------------------------------------------------------------------


def needles(compacted: Transcript, truth: Mapping[str, Any] | None) -> Share | None:
    """Needles of the ground truth still in the compacted context, not counting what the
    archive could give back (None without ground truth or needles)."""
    from ctxkit.fidelity.truth import needle_retention

    if not truth or not truth.get("needles"):
        return None
    kept = needle_retention(compacted, truth)
    return Share(kept["present"], kept["total"])


def changed_units(original: Transcript, compacted: Transcript) -> list[Unit]:
    """The original's units that are gone from the compacted transcript or not kept as they were
    (removed, summarized, replaced by a placeholder, shortened)."""
    after = {u.id: u for u in compacted.units}
    out = []
    for u in original.units:
        v = after.get(u.id)
        if v is None or v.content != u.content or v.tool_calls != u.tool_calls:
            out.append(u)
    return out


def summary_units(original: Transcript, compacted: Transcript) -> list[Unit]:
    """Summaries the compaction made (type summary, not already in the original)."""
    before = {u.id for u in original.units if u.type == "summary"}
    return [u for u in compacted.units if u.type == "summary" and u.id not in before]


def files_trail(original: Transcript, compacted: Transcript, rules: EngineRules) -> Share:
    """Files touched by the units compaction removed or changed that the summary still names
    (the whole compacted context when there is no summary, as for a peer that only drops).

    Touched means named in a tool call's arguments (read, edited, run): a path that only
    appears in some output (a grep hit, a stack trace) is not part of the trail.
    """
    calls = [
        Unit(u.id, u.role, tool_calls=u.tool_calls) for u in changed_units(original, compacted)
    ]
    files = rules.files_touched([u for u in calls if u.tool_calls])
    summaries = summary_units(original, compacted)
    text = "\n".join(unit_text(u) for u in summaries) if summaries else _context_text(compacted)
    return Share(sum(1 for f in files if f in text), len(files))


def user_requests(t: Transcript) -> list[Unit]:
    """The user requests with text (what `user_verbatim` counts), oldest first."""
    return [u for u in t.units if is_user_request(u) and u.content.strip()]


def newest_within(
    requests: Sequence[Unit], budget_tokens: int, count: Callable[[str], int], rules: EngineRules
) -> list[Unit]:
    """The newest requests within `budget_tokens`, oldest first: the engine's own rule
    (`rules.newest_within`), so "in budget" means what compaction promises to keep."""
    sizes = [count(u.content) for u in requests]
    return [requests[k] for k in rules.newest_within(sizes, budget_tokens)]


@dataclass(frozen=True)
class UserVerbatim:
    """User requests kept word for word: all of them, and those within the budget."""

    all: Share
    in_budget: Share
    budget_tokens: int

    @property
    def ratio(self) -> float:
        return self.all.ratio

    def to_dict(self) -> dict[str, Any]:
        return {
            "all": self.all.to_dict(),
            "in_budget": self.in_budget.to_dict(),
            "budget_tokens": self.budget_tokens,
        }


def user_verbatim(
    original: Transcript,
    compacted: Transcript,
    rules: EngineRules,
    budget_tokens: int | None = None,
    count: Callable[[str], int] | None = None,
) -> UserVerbatim:
    """The original's user requests whose full text is still in the compacted transcript, in a
    user message or quoted in a summary, whole (not inside a longer word: "ok" is not kept by
    "look"); `count` counts tokens (default cl100k_base) for the budget (default the engine's
    `rules.user_message_tokens`)."""
    if budget_tokens is None:
        budget_tokens = rules.user_message_tokens
    if count is None:
        from ctxkit.tokens import get_tokenizer

        count = get_tokenizer().count
    requests = user_requests(original)
    texts = [u.content for u in compacted.units if u.role == "user" or u.type == "summary"]

    def found(text: str) -> bool:
        whole = re.compile(rf"(?<!\w){re.escape(text)}(?!\w)")
        return any(text in x and whole.search(x) for x in texts)

    def kept(units: Iterable[Unit]) -> Share:
        units = list(units)
        return Share(sum(1 for u in units if found(u.content)), len(units))

    return UserVerbatim(
        all=kept(requests),
        in_budget=kept(newest_within(requests, budget_tokens, count, rules)),
        budget_tokens=budget_tokens,
    )


def last_request_verbatim(original: Transcript, compacted: Transcript) -> bool:
    """The original's last user request is still a user message with the same text (True when
    there is no request)."""
    last = next((u for u in reversed(original.units) if is_user_request(u)), None)
    if last is None:
        return True
    return any(u.role == "user" and u.content == last.content for u in compacted.units)


# --- what was damaged -------------------------------------------------------------------------


def longer_placeholders(
    original: Transcript, compacted: Transcript, size: Callable[[str], int] = _size
) -> list[str]:
    """Ids of units that stand for original content and are longer than it: a placeholder or
    compressed unit (meta `ref`) against the unit of its id, a run placeholder (meta
    `removed_ids`) against the units it removed. Whole units are compared (content, reasoning,
    tool-call arguments): a note added to the content of a unit whose call was shortened is
    not growth. `size` measures text (default UTF-8 bytes)."""
    before = {u.id: u for u in original.units}

    def text_size(u: Unit) -> int:
        return size(unit_text(u))

    out = []
    for u in compacted.units:
        if "ref" in u.meta and u.id in before:
            if text_size(u) > text_size(before[u.id]):
                out.append(u.id)
        elif u.meta.get("removed_ids"):
            gone = [before[i] for i in u.meta["removed_ids"] if i in before]
            if gone and text_size(u) > sum(text_size(g) for g in gone):
                out.append(u.id)
    return out


def is_tool_result(u: Unit) -> bool:
    """A unit that carries a tool's output (role tool, or a result in a user record)."""
    return u.tool_call_id is not None or u.role == "tool"


def _is_json(text: str) -> bool:
    text = text.strip()
    if not text.startswith(("{", "[")):
        return False  # a bare number or string is JSON too, but not a JSON output
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def broken_json(original: Transcript, compacted: Transcript) -> list[str]:
    """Ids of tool outputs that were a JSON object or array and are no longer valid JSON; a
    placeholder that replaced the whole output is not counted (it says what was there)."""
    before = {u.id: u for u in original.units}
    out = []
    for u in compacted.units:
        old = before.get(u.id)
        if old is None or not is_tool_result(old) or u.type == "placeholder":
            continue
        if u.content != old.content and _is_json(old.content) and not _is_json(u.content):
            out.append(u.id)
    return out


def edited_calls(original: Transcript, compacted: Transcript) -> list[str]:
    """Call ids present in both whose name or arguments differ (a call id used again is
    compared with every call of that id)."""
    before: dict[str, set[tuple[str, str]]] = {}
    for u in original.units:
        for c in u.tool_calls:
            before.setdefault(c.id, set()).add((c.name, c.arguments))
    return [
        c.id
        for u in compacted.units
        for c in u.tool_calls
        if c.id in before and (c.name, c.arguments) not in before[c.id]
    ]


def message_role(u: Unit) -> str:
    """The role a unit's message has for a model: tool results count as `tool`."""
    return "tool" if is_tool_result(u) else u.role


def messages(units: Sequence[Unit]) -> list[list[Unit]]:
    """Units grouped into the messages a writer makes: a unit with meta `join` goes into the
    message of the unit before it."""
    out: list[list[Unit]] = []
    for u in units:
        if u.meta.get("join") and out:
            out[-1].append(u)
        else:
            out.append([u])
    return out


def new_same_role(original: Transcript, compacted: Transcript) -> list[tuple[str, str]]:
    """Pairs of consecutive messages of one role that the input did not have: (last unit id of
    the first, first unit id of the second). A pair is the input's when both units are
    original units that were next to each other there."""
    position = {u.id: i for i, u in enumerate(original.units)}
    msgs = messages(compacted.units)
    out = []
    for a, b in zip(msgs, msgs[1:], strict=False):
        if message_role(a[0]) != message_role(b[0]):
            continue
        x, y = a[-1], b[0]
        if x.id in position and y.id in position and position[y.id] == position[x.id] + 1:
            continue
        out.append((x.id, y.id))
    return out


def summary_after_first_request(original: Transcript, compacted: Transcript) -> bool:
    """The original's first request comes before the first new summary (True without one)."""
    summaries = {id(u) for u in summary_units(original, compacted)}
    if not summaries:
        return True
    first = next((u for u in original.units if is_user_request(u)), None)
    opening = next((u for u in original.units if u.role != "system"), None)
    for u in compacted.units:
        if id(u) in summaries:
            # A transcript that opens with an earlier compaction's summary (Claude Code's, read
            # from its last compaction on) has no request before it: the new summary rolls it
            # in and takes its place at the top.
            return opening is not None and opening.type == "summary" and opening.id not in {
                v.id for v in compacted.units
            }
        if (
            first is not None
            and u.role == "user"
            and (u.id == first.id or u.content == first.content)
        ):
            return True
    return False


# --- all of them ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fidelity:
    """Every measure for one compaction; `to_dict` is what reports carry."""

    needles: Share | None
    files_trail: Share
    user_verbatim: UserVerbatim
    last_request_verbatim: bool
    longer_placeholders: list[str]
    broken_json: list[str]
    edited_calls: list[str]
    new_same_role: list[tuple[str, str]]
    summary_after_first_request: bool
    tokens_after: int | None = None
    target: int | None = None

    @property
    def target_ratio(self) -> float | None:
        """Tokens after / target (None when either is unknown)."""
        if self.tokens_after is None or not self.target:
            return None
        return self.tokens_after / self.target

    def to_dict(self) -> dict[str, Any]:
        return {
            "needles": self.needles.to_dict() if self.needles else None,
            "files_trail": self.files_trail.to_dict(),
            "user_verbatim": self.user_verbatim.to_dict(),
            "last_request_verbatim": self.last_request_verbatim,
            "longer_placeholders": self.longer_placeholders,
            "broken_json": self.broken_json,
            "edited_calls": self.edited_calls,
            "new_same_role": [list(p) for p in self.new_same_role],
            "summary_after_first_request": self.summary_after_first_request,
            "tokens_after": self.tokens_after,
            "target": self.target,
            "target_ratio": self.target_ratio,
        }


def measure(
    original: Transcript,
    compacted: Transcript,
    rules: EngineRules,
    *,
    truth: Mapping[str, Any] | None = None,
    target: int | None = None,
    tokens_after: int | None = None,
    user_budget_tokens: int | None = None,
    count: Callable[[str], int] | None = None,
) -> Fidelity:
    """Every fidelity measure of one compaction; `truth` defaults to the original's ground truth.
    The user-message budget defaults to the engine's for `target` (`rules.user_message_budget`)."""
    truth = truth if truth is not None else original.metadata.get("ground_truth")
    if user_budget_tokens is None and target is not None:
        user_budget_tokens = rules.user_message_budget(target)
    return Fidelity(
        needles=needles(compacted, truth),
        files_trail=files_trail(original, compacted, rules),
        user_verbatim=user_verbatim(original, compacted, rules, user_budget_tokens, count),
        last_request_verbatim=last_request_verbatim(original, compacted),
        longer_placeholders=longer_placeholders(original, compacted),
        broken_json=broken_json(original, compacted),
        edited_calls=edited_calls(original, compacted),
        new_same_role=new_same_role(original, compacted),
        summary_after_first_request=summary_after_first_request(original, compacted),
        tokens_after=tokens_after,
        target=target,
    )
