"""What every compaction strategy shares: the run context, the state it transforms, and helpers.

A strategy is a pure function `(state, params) -> state | None`; None means it cannot help.
It never drops a unit without storing it whole in the archive first (`archive_unit`) and
leaving a placeholder or summary that carries the ref, so `recall` can bring it back.

Placeholders are written for the model that reads the compacted transcript: they name what was
there and how big, end with "archived as ref-…" (`archived_as`), carry no shell instruction,
and are never longer than what they replace (`smaller_than`), in tokens or in bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ctxkit.archive.store import REF_PROBE
from ctxkit.model import Unit
from ctxkit.strategies._common import is_compacted, is_tool_output, tool_name, tool_names

if TYPE_CHECKING:
    from ctxkit.archive.store import Archive
    from ctxkit.tokens import CountOptions, Tokenizer

Summarizer = Callable[..., str]


@dataclass(frozen=True)
class Context:
    """What stays fixed for one compaction run."""

    tokenizer: Tokenizer
    count_opts: CountOptions
    archive: Archive | None  # None = dry run: refs are computed, nothing is stored
    transcript_id: str
    query: str  # the task query that relevance is measured against
    tools: tuple[dict[str, Any], ...] = ()  # tool schemas, counted as their own region
    embedder: Any = None  # a relevance Embedder, or None for embedders.DEFAULT_EMBEDDER
    summarizer: Summarizer | None = None  # (units, target_tokens, previous_summary) -> str
    seed: int = 0
    ref_scope: str = ""  # what refs are made from (archive.ref_scope); "" = the transcript id
    # id(unit) -> (unit, its UnitCount): every state of a run shares most of its units with the
    # state before, so each unit is counted once per run, not once per state (see `unit_counts`)
    counts: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)
    originals: Mapping[str, Unit] = field(default_factory=dict)  # the units as read, by id
    # what a strategy reads of the whole transcript as read, once per run (`current_names`)
    once: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # the transcript's own regions beside its units and tools that no strategy touches (the
    # attachments an agent put into the context: `tokens.accounting.count_attachments`)
    reminders: int = 0
    pinned: int = 0  # leading units no strategy touches (`CompactSettings.pinned`)

    def original(self, unit: Unit) -> Unit:
        """`unit` as it was read: a unit an earlier step shortened or masked (same id) is its
        original, whose text still holds what the step cut (the error line of an output)."""
        return self.originals.get(unit.id, unit)


@dataclass(frozen=True)
class State:
    """The units at one step of the chain, the whole-transcript token goal and the context."""

    units: tuple[Unit, ...]
    target: int  # token goal for the WHOLE transcript (all regions)
    ctx: Context = field(compare=False)
    in_recovery: bool = False

    @cached_property
    def _total(self) -> int:
        from ctxkit.tokens import count_tool_schemas

        ctx = self.ctx
        tools = ctx.counts.get(-1)  # the tool schemas: the same in every state
        if tools is None:
            tools = count_tool_schemas(list(ctx.tools), ctx.tokenizer, ctx.count_opts)
            ctx.counts[-1] = tools
        # the sum `tokens.count_transcript` makes: units, tool schemas, reply priming, reminders
        priming = ctx.count_opts.reply_priming if self.units else 0
        return sum(c.total for c in unit_counts(self)) + tools + priming + ctx.reminders

    def tokens(self) -> int:
        """Total tokens: units, tool schemas, reply priming and reminders, as
        `tokens.count_transcript`."""
        return self._total

    @cached_property
    def refs(self) -> frozenset[str]:
        """The refs this state's units carry (placeholders and summaries name what they hold),
        read once per state: the chain reports each step's new ones."""
        out: set[str] = set()
        for u in self.units:
            meta = u.meta
            if meta:
                if "ref" in meta:
                    out.add(str(meta["ref"]))
                out.update(str(r) for r in meta.get("refs", ()))
        return frozenset(out)

    def fits(self) -> bool:
        """True when the whole transcript is at or under the target."""
        return self.tokens() <= self.target

    def with_units(self, units: Sequence[Unit]) -> State:
        """The same state with other units (token total recomputed lazily)."""
        return dataclasses.replace(self, units=tuple(units))

    def unit_tokens(self, index: int) -> int:
        """Tokens of one unit (cached on the unit by `tokens.count_units`)."""
        return self.units_tokens()[index]

    def units_tokens(self) -> list[int]:
        """Tokens of every unit, in order."""
        return [c.total for c in unit_counts(self)]


def unit_counts(state: State) -> list[Any]:
    """`tokens.count_units` of the state's units, each unit counted once per run: a unit is
    never changed in place (strategies make new ones with `Unit.replace`), so its count is kept
    in the run's context by identity, the unit held so its id is not reused."""
    from ctxkit.tokens import count_units

    memo = state.ctx.counts
    units = state.units
    out: list[Any] = [None] * len(units)
    missing = []
    for i, u in enumerate(units):
        hit = memo.get(id(u))
        if hit is not None and hit[0] is u:
            out[i] = hit[1]
        else:
            missing.append(i)
    if missing:
        fresh = [units[i] for i in missing]
        counted = count_units(fresh, state.ctx.tokenizer, state.ctx.count_opts)
        for i, u, c in zip(missing, fresh, counted, strict=True):
            out[i] = c
            memo[id(u)] = (u, c)
    return out


Strategy = Callable[[State, Mapping[str, Any]], "State | None"]


def merged(defaults: Mapping[str, Any], params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Defaults overlaid with the given params (unknown keys are kept; the config checks them)."""
    out = dict(defaults)
    if params:
        out.update({k: v for k, v in params.items() if v is not None})
    return out


def protected(state: State) -> set[int]:
    """Indices that must survive verbatim (see `structure.protected_indices`), and the pinned
    leading units outside a recovery (`CompactSettings.pinned`)."""
    from ctxkit.structure import protected_indices

    keep = protected_indices(state.units, in_recovery=state.in_recovery)
    if state.ctx.pinned and not state.in_recovery:
        keep |= set(range(min(state.ctx.pinned, len(state.units))))
    return keep


def user_messages_kept(state: State) -> set[int]:
    """Indices of the user's requests kept word for word: the newest first, while the
    user-message budget of the goal (`summarize.user_message_budget`) holds them. Strategies that
    shorten or drop units leave them alone; `summarize_old` may move them into its summary, where
    it quotes them word for word."""
    from ctxkit.structure import is_request
    from ctxkit.summarizers.extractive import newest_within, user_message_budget

    at = [i for i, u in enumerate(state.units) if is_request(u)]
    tok = state.ctx.tokenizer
    sizes = [tok.count(state.units[i].content) for i in at]
    return {at[k] for k in newest_within(sizes, user_message_budget(state.target))}


def untouchable(state: State) -> set[int]:
    """What strategies that shorten or drop units must leave as it is: the protected units and
    the user's messages within their budget."""
    return protected(state) | user_messages_kept(state)


def last_action(state: State) -> set[int]:
    """The last thing the agent did and what came back: the last tool call's unit with its
    results, or the last command an agent wrote as text with the output after it. Strategies
    that remove units (summarize, mask, discard) leave it; those that shorten an output keep
    its head (offload, chunking), where its first line is."""
    from ctxkit.log_events import acted
    from ctxkit.structure import blocks

    units = state.units
    for i in range(len(units) - 1, -1, -1):
        u = units[i]
        if u.tool_calls:
            for start, end in blocks(units):
                if start <= i < end:
                    return set(range(start, end))
            return {i}
        if acted(units, i):
            return {i, i + 1}
    return set()


def last_reply(state: State) -> set[int]:
    """In a session without actions (a chat, an aider history of whole-file replies): the
    newest assistant message, where the work stands, though a request came after it (aider's
    `/exit`, a question not answered yet); empty when there is none."""
    units = state.units
    for i in range(len(units) - 1, -1, -1):
        u = units[i]
        if u.role == "assistant" and u.content and not u.tool_calls:
            return {i}
    return set()


def where_work_stands(state: State) -> set[int]:
    """What no strategy that removes units may take: the last action and what came back
    (`last_action`) with the assistant's reply that ends the session after it (what it said it
    had done: summarized, the summary would stand after the action, at the very end), or in a
    session without actions the last reply (`last_reply`)."""
    action = last_action(state)
    if not action:
        return last_reply(state)
    units = state.units
    end = len(units) - 1
    if end > max(action) and units[end].role == "assistant" and not units[end].tool_calls and units[end].content:
        return action | {end}
    return action


def make_ref(scope: str, unit: Unit) -> str:
    """The short ref the archive gives this unit (computed without storing, for dry runs)."""
    from ctxkit.archive import store as archive_module

    return archive_module.make_ref(scope, unit.id, unit.content)


def archive_unit(state: State, unit: Unit, summary: str = "") -> str:
    """Store the unit whole (unless dry run) and return its short ref `ref-` + 18 digits."""
    scope = state.ctx.ref_scope or state.ctx.transcript_id
    if state.ctx.archive is None:
        return make_ref(scope, unit)
    return state.ctx.archive.put(
        state.ctx.transcript_id, unit, summary=summary, tokens=unit.tokens, scope=scope
    )


def placeholder(unit: Unit, ref: str, text: str, strategy: str) -> Unit:
    """A stand-in for `unit`: same id, role and pairing, content `text`, the ref in meta."""
    return unit.replace(
        type="placeholder",
        content=text,
        reasoning="",
        images=0,
        relevance=None,
        meta={"ref": ref, "strategy": strategy, "original_type": unit.type},
    )


def run_placeholder(removed: Sequence[Unit], refs: Sequence[str], text: str, strategy: str) -> Unit:
    """One new unit standing for a run of removed units (role user, type placeholder)."""
    first = removed[0]
    digest = hashlib.sha1("\x1f".join(u.id for u in removed).encode()).hexdigest()[:8]
    return Unit(
        id=f"ctxkit-removed-{digest}",
        role="user",
        type="placeholder",
        content=text,
        timestamp=first.timestamp,
        meta={
            "refs": list(refs),
            "strategy": strategy,
            "removed_ids": [u.id for u in removed],
        },
    )


def fmt_int(n: int) -> str:
    """1234 -> '1,234' (placeholders are read by people and models alike)."""
    return f"{n:,}"


def archived_as(refs: Sequence[str]) -> str:
    """'archived as ref-a ref-b': how every placeholder names its refs, all of them.

    Every ref stays in the text, not only in meta: a round trip through a chat format drops
    meta, and `recall` / `expand` find refs in the text.
    """
    return "archived as " + " ".join(refs) if refs else "archived"


def refs_hint(refs: Sequence[str], limit: int | None = 8) -> str:
    """'archived as ref-a ref-b' (`archived_as`), the first `limit` refs and 'and N more'
    (the rest then only in meta); `limit=None` names every ref."""
    if limit is None or len(refs) <= limit:
        return archived_as(refs)
    return f"{archived_as(refs[:limit])} and {len(refs) - limit} more"


def unit_text(unit: Unit) -> str:
    """Everything a model reads of a unit: content, reasoning, tool calls (name and arguments)."""
    parts = [unit.content, unit.reasoning]
    parts.extend(f"{c.name} {c.arguments}" for c in unit.tool_calls)
    return "\n".join(p for p in parts if p)


def smaller_than(text: str, units: Sequence[Unit], tok: Tokenizer) -> bool:
    """True when `text` is shorter than what `units` hold, in tokens AND in bytes: a
    placeholder that is not is never written (the units stay as they are)."""
    originals = [unit_text(u) for u in units]
    if len(text.encode()) >= sum(len(o.encode()) for o in originals):
        return False
    return tok.count(text) < sum(tok.count(o) for o in originals if o)


def replace_tool_outputs(
    state: State,
    stub: Callable[[Unit, str, str], str],
    strategy: str,
    *,
    keep: set[int],
    end: int | None = None,
) -> State | None:
    """Each tool output before `end` that `keep` does not hold and no rule compacted yet goes to
    the archive behind the text `stub(unit, tool, ref)` gives, unless that text would not be
    smaller. None when no output was replaced."""
    names = tool_names(state.units)
    tok = state.ctx.tokenizer
    out = list(state.units)
    changed = False
    for i, unit in enumerate(state.units[:end]):
        if i in keep or not is_tool_output(unit) or is_compacted(unit):
            continue
        tool = tool_name(unit, names)
        # measured with a probe ref first: an output goes to the archive only when replaced
        if not smaller_than(stub(unit, tool, REF_PROBE), [unit], tok):
            continue
        ref = archive_unit(state, unit)
        out[i] = placeholder(unit, ref, stub(unit, tool, ref), strategy)
        changed = True
    return state.with_units(out) if changed else None
