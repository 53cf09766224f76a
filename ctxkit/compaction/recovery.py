"""Recovery when the chain cannot reach its goal: fresh_start and truncate."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ctxkit import structure
from ctxkit.compaction.cleared import since_clear
from ctxkit.compaction.cut import MIN_CUT_NOTE_TOKENS, cut_text, fit_text
from ctxkit.model import Unit
from ctxkit.strategies.base import (
    State,
    archive_unit,
    archived_as,
    refs_hint,
    user_messages_kept,
)
from ctxkit.strategies.summarize_old import (
    CHECK_MIN_TOKENS,
    CHECK_SHARE,
    current_names,
    preamble,
    verbatim_section,
    with_missing_facts,
)

if TYPE_CHECKING:
    from ctxkit.tokens import Tokenizer


class ChainOptions(Protocol):
    """What a recovery reads of `compaction.options.ChainOptions` (which imports this module's
    default, so it is not imported here)."""

    @property
    def handover_tokens(self) -> int: ...


def _last_request_index(units: Sequence[Unit]) -> int | None:
    found = structure.request_indices(units)
    return found[-1] if found else None


def _first_request_index(units: Sequence[Unit]) -> int | None:
    return structure.first_request_index(units)


def archive_line(refs: Sequence[str]) -> str:
    """The shortest handover: one line naming the first ref (the rest stay in its meta and in
    the archive)."""
    more = f" and {len(refs) - 1:,} more" if len(refs) > 1 else ""
    return f"[earlier messages {archived_as(refs[:1])}{more}]" if refs else "[earlier messages archived]"


def smallest_form(original: Sequence[Unit], tok: Tokenizer) -> list[Unit]:
    """The least a fresh start comes down to (`minimal_fresh_start`, then `_squeezed`): the
    system units, one line naming the archive of what it drops, and the last request, cut to
    its note when long. Refs are sized by `REF_PROBE`. Nothing smaller carries the work on and
    says where the rest went, so a limit that cannot hold it (beside what every call carries)
    is refused before the chain runs."""
    from ctxkit.archive.store import REF_PROBE

    last_i = _last_request_index(original)
    kept = [u for u in original if u.role == "system"]
    dropped = sum(1 for i, u in enumerate(original) if u.role != "system" and i != last_i)
    if dropped:
        kept.append(_handover_unit(archive_line([REF_PROBE] * dropped), []))
    if last_i is not None:
        request = original[last_i]
        if tok.count(request.content) > 2 * MIN_CUT_NOTE_TOKENS:
            request = request.replace(content=cut_text(request.content, 0, "request", REF_PROBE))
        kept.append(request)
    return kept


MIN_HANDOVER_TOKENS = 120  # below this a handover says too little to be worth the room


MAX_SUFFIX_TRIES = 8  # shorter recent runs tried before the minimal form


def fresh_start(state: State, original: Sequence[Unit], options: ChainOptions) -> State:
    """System units, the first request, a handover of everything dropped (every P1 unit named),
    then the most recent work that still fits, from the last user request on at least.

    The handover's facts (files, failures, tasks, the user's words) get their share of the room
    first (`_handover_reserve`); the recent run fills the rest and always holds the last action
    and what came back. The first request leads word for word when it fits beside them (the
    task in the user's words, then what became of it); else the handover quotes it. When even
    the last request and a small handover do not fit, this is the spec's minimal form: the
    handover and the last request (offloaded with a ref if it alone is too big).
    """
    system = [u for u in original if u.role == "system"]
    since = since_clear(state, original, system)
    if since is not None:
        return since
    first_i = _first_request_index(original)
    first = original[first_i] if first_i is not None else None
    reserve = _handover_reserve(state, original, options)
    first_cost = state.with_units([first]).units_tokens()[0] if first is not None else 0
    # with the handover's share: the longest recent run that fits beside it; without it: only
    # the latest steps (the last action and what came back), the handover taking the rest
    attempts = [
        (with_first, room_for_handover, shortest)
        for room_for_handover, shortest in ((reserve, False), (MIN_HANDOVER_TOKENS, True))
        for with_first in (True, False)
    ]
    room = state.target - state.with_units(system).tokens()
    if first is not None and first_cost <= room * FIRST_REQUEST_SHARE:
        # the task in the user's words stays whole whenever it takes at most a quarter of the
        # room: the handover shrinks before it goes, and the minimal form (which keeps it when a
        # small handover fits beside it) comes before a form without it
        attempts = [a for a in attempts if a[0]]
    for with_first, room_for_handover, shortest in attempts:
        lead = first_cost if with_first else 0
        tails = list(_recent_suffixes(state, original, room_for_handover + lead))
        for tail in tails[-1:] if shortest else tails:
            head: list[Unit] = []
            if first is not None and tail and tail[0].id == first.id:
                tail, head = tail[1:], [first]  # it is the last request too: it must stay
            elif first is not None and first.id not in {u.id for u in tail}:
                if with_first:
                    head = [first]
            elif not with_first:
                continue  # tried already
            if not tail:
                continue
            # a placeholder kept in the tail still stands for the run it removed: that run is
            # not the handover's to tell again (out of its place, before the placeholder)
            ids = {u.id for u in tail} | {u.id for u in head} | set(stood_for(tail))
            dropped = [u for u in original if u.role != "system" and u.id not in ids]
            fitted = _with_handover(state, original, [*system, *head], dropped, tail, options)
            if fitted is not None:
                return fitted
    return minimal_fresh_start(state, original, options)


HANDOVER_SHARE = 0.5  # at most this share of the room goes to the handover, the rest to the tail
FIRST_REQUEST_SHARE = 0.25  # a first request within this share of the room is always kept whole


def _handover_reserve(state: State, original: Sequence[Unit], options: ChainOptions) -> int:
    """Tokens kept for the handover before the tail is chosen: what a handover of the whole
    history says (its files, failures, tasks, the user's words), up to half the room; at least
    `MIN_HANDOVER_TOKENS`. Facts are dense, so a tight goal gives them their share first."""
    from ctxkit.summarizers.extractive import handover

    system = [u for u in original if u.role == "system"]
    room = state.target - state.with_units(system).tokens()
    cap = int(max(0, room) * HANDOVER_SHARE)
    if cap <= MIN_HANDOVER_TOKENS:
        return MIN_HANDOVER_TOKENS
    last_i = _last_request_index(original)
    body = [u for i, u in enumerate(original) if u.role != "system" and i != last_i]
    text = handover(
        body, target_tokens=min(cap, max(options.handover_tokens, cap // 2)),
        p1_units=[u for u in body if u.is_p1], tok=state.ctx.tokenizer, include_last_request=False,
    )
    return max(MIN_HANDOVER_TOKENS, min(cap, state.ctx.tokenizer.count(text) + 80))


def _recent_suffixes(
    state: State, original: Sequence[Unit], reserve: int = MIN_HANDOVER_TOKENS
) -> Iterator[list[Unit]]:
    """Runs of the chain's latest units, cut at block boundaries and holding the last user
    request, longest first, that leave `reserve` tokens for a handover naming the P1 units they
    drop."""
    last_i = _last_request_index(original)
    # a summary the chain wrote is no recent message: the handover stands for what it covered
    # (one summary per compaction; it now stands after a request it kept, at the tail)
    current = [u for u in state.units if u.role != "system" and not _chain_summary(u)]
    # no request of the user's (a log that opens with an agent's summary and goes on from it):
    # the runs of the latest units that hold the last action (the last unit, when none acted)
    acted_at = [k for k, u in enumerate(current) if u.tool_calls] or [len(current) - 1]
    request_at: int | None = acted_at[-1] if last_i is None else next(
        (k for k, u in enumerate(current) if u.id == original[last_i].id), None
    )
    if request_at is None or request_at < 0:
        return
    tok = state.ctx.tokenizer
    sizes = state.with_units(current).units_tokens()
    system_tokens = state.with_units([u for u in state.units if u.role == "system"]).tokens()
    p1 = [u for u in original if u.is_p1 and u.role != "system"]
    room = state.target - system_tokens

    def fits(tail: list[Unit], tokens: int) -> bool:
        kept = {u.id for u in tail}
        # The handover must name every P1 unit it drops: at least its id on a line.
        p1_cost = sum(tok.count(u.id) + 4 for u in p1 if u.id not in kept)
        return tokens + p1_cost + reserve <= room

    tries = 0
    spans = structure.blocks(current)
    for start, _end in spans:  # longest suffix first
        if start > request_at or tries >= MAX_SUFFIX_TRIES:
            break
        if fits(current[start:], sum(sizes[start:])):
            tries += 1
            yield current[start:]
    if last_i is None:
        return
    # The work since the last request is larger than the goal (one long agent turn): keep the
    # request and the latest steps of that turn that fit; the handover covers the steps between.
    request = current[request_at]
    # the latest steps always hold the last action and what came back (what to continue from)
    from ctxkit.log_events import acted

    acts = [k for k, u in enumerate(current) if u.tool_calls or acted(current, k)]
    latest = next((s for s, e in spans if acts and s <= acts[-1] < e), len(current))
    tries = 0
    for start, _end in spans:
        if start <= request_at or start > latest:
            continue
        if tries >= MAX_SUFFIX_TRIES:
            return
        tail = [request, *current[start:]]
        if fits(tail, sizes[request_at] + sum(sizes[start:])):
            tries += 1
            yield tail


def _chain_summary(u: Unit) -> bool:
    """A summary a strategy of this run wrote (no record of the log; a placeholder that stands
    for one tool output stays, with its call)."""
    return u.type == "summary" and u.raw is None and u.tool_call_id is None and "strategy" in u.meta


def _with_handover(
    state: State,
    original: Sequence[Unit],
    system: list[Unit],
    dropped: list[Unit],
    tail: list[Unit],
    options: ChainOptions,
) -> State | None:
    """system + handover(dropped) + tail, the handover shrunk until the whole fits."""
    from ctxkit.summarizers.extractive import handover, superseded
    from ctxkit.summarizers.sections import WORK_TITLE, without_sections

    tok = state.ctx.tokenizer
    refs = [archive_unit(state, u) for u in dropped]
    p1 = [u for u in dropped if u.is_p1]
    fixed = state.with_units([*system, *tail]).tokens() + state.ctx.count_opts.tokens_per_message
    size = max(min(options.handover_tokens, state.target - fixed), int((state.target - fixed) * 0.6))
    dropped_tokens = sum(state.with_units(dropped).units_tokens())
    head = preamble(len(dropped), dropped_tokens, refs)
    # the user's own words are quoted newest first within half the room; the handover's
    # sections share the rest (the room is the goal less the system prompt and the tail)
    quoted = _quoted(state, original, dropped, max(0, (state.target - fixed) // 2))
    stale = superseded(tail)
    names = current_names(state, dropped, [*system, *tail])  # as summarize_old checks its summary
    first_i = _first_request_index(original)
    # the request that opened the task, kept word for word before it: the handover states no other
    task = first_i is None or original[first_i].id not in {u.id for u in system}

    def checked(text: str, quotes: str, size: int, spare: int = 0, names: Sequence[str] = names) -> State:
        # checked against the dropped messages' own facts, as summarize_old checks its summary
        text = with_missing_facts(text, quotes, dropped, [*system, *tail], size, state, spare, names=names)
        summary = _handover_unit("\n".join(p for p in (head, text, quotes) if p), refs)
        return State(
            units=tuple(placed(original, system, tail, summary, dropped)),
            target=state.target, ctx=state.ctx, in_recovery=True,
        )

    def fitted(size: int, quoted: list[Unit], named: Sequence[str]) -> tuple[State, str] | None:
        while size >= 16:
            text = handover(
                dropped, target_tokens=size, p1_units=p1, tok=tok, include_last_request=False, task=task,
                quoted={u.content for u in quoted},
            )
            # what the messages kept after it show is newer (a later task list, the next steps)
            text = without_sections(text, stale)
            quotes = verbatim_section(quoted, len(structure.own_request_indices(dropped)))
            candidate = checked(text, quotes, size, names=named)
            over = candidate.tokens() - state.target
            if over <= 0:
                if names and over < 0:
                    # what the goal leaves beside it goes to the facts and names the check left out
                    fuller = checked(text, quotes, size, max(CHECK_MIN_TOKENS, size // CHECK_SHARE) - over)
                    if fuller.fits():
                        return fuller, text
                return candidate, text
            if quoted and size <= 64:
                quoted = quoted[1:]  # the oldest quote goes before the sections get any smaller
                continue
            size -= over + 8
        return None

    found = fitted(size, quoted, names)
    if names and found is not None and WORK_TITLE not in found[1]:
        # the names are not worth where the work stood (the last actions and what came back):
        # without them, in what the handover leaves of the room
        plain = fitted(size, quoted, ())
        if plain is not None and WORK_TITLE in plain[1]:
            found = plain
    return found[0] if found is not None else None


def placed(
    original: Sequence[Unit], system: Sequence[Unit], kept: Sequence[Unit], summary: Unit,
    dropped: Sequence[Unit],
) -> list[Unit]:
    """`system`, then the kept units in their order with the summary where what it stands for
    ended: every unit after it came after the last unit it summarizes (a request kept verbatim
    whose answer was handed over goes before the handover, not after it as if still open)."""
    at = {u.id: k for k, u in enumerate(original)}
    # a session command dropped after the last kept message (aider's `/diff` at the end) is no
    # event the summary tells: it does not move the summary after the last answer
    last = max((at.get(u.id, -1) for u in dropped if not structure.is_session_command(u)), default=-1)

    def where(u: Unit) -> int:
        """Its place in the original; a placeholder's, that of the last unit it stands for."""
        return max((at.get(i, -1) for i in (u.id, *stood_for([u]))), default=-1) if u.id not in at else at[u.id]

    before = [u for u in kept if -1 < where(u) < last]
    after = [u for u in kept if not -1 < where(u) < last]
    return [*system, *before, summary, *after]


def stood_for(units: Sequence[Unit]) -> list[str]:
    """The ids of the original units that placeholders and summaries among `units` stand for."""
    return [str(i) for u in units for key in ("removed_ids", "summarized_ids") for i in u.meta.get(key, ())]


def _handover_unit(text: str, refs: list[str]) -> Unit:
    """The fresh start's handover: one summary unit carrying the refs of what it stands for."""
    return Unit(
        id="ctxkit-handover",
        role="user",
        type="summary",
        content=text,
        meta={"refs": refs, "strategy": "fresh_start"},
    )


def _quoted(state: State, original: Sequence[Unit], dropped: Sequence[Unit], room: int) -> list[Unit]:
    """The dropped user messages a handover quotes word for word: those the user-message
    budget keeps (`user_messages_kept`, over the original), newest first within `room` tokens
    (a message sent again costs nothing but where it was last sent)."""
    from ctxkit.summarizers.extractive import distinct_sizes, newest_within

    whole = state.with_units(list(original))
    kept = {original[i].id for i in user_messages_kept(whole)}
    quoted = [u for u in dropped if u.id in kept]
    tok = state.ctx.tokenizer
    sizes = distinct_sizes([u.content for u in quoted], [tok.count(u.content) + 3 for u in quoted])
    return [quoted[k] for k in newest_within(sizes, room)]


def minimal_fresh_start(state: State, original: Sequence[Unit], options: ChainOptions) -> State:
    """System units + a handover naming every P1 unit + the last user request verbatim."""

    system = [u for u in original if u.role == "system"]
    last_i = _last_request_index(original)
    first_i = _first_request_index(original)
    tok = state.ctx.tokenizer
    base = state.with_units(system)
    room = state.target - base.tokens() - 2 * state.ctx.count_opts.tokens_per_message
    request = None
    if last_i is not None:
        # The request keeps priority over the handover, which needs only a little room; a
        # request larger than most of the room (a task statement with pages of instructions) is
        # cut in the middle to `REQUEST_SHARE` of it, so the handover and the last action, what
        # the work stands at, still have theirs (as Codex cuts the messages it keeps).
        share = int(room * REQUEST_SHARE) if _has_work(state, original, last_i) else room
        request = fit_text(
            state, original[last_i], max(0, min(share, room - min(options.handover_tokens, 160)))
        )
        room -= tok.count(request.content)
    # The first request leads, word for word, when a small handover still fits after it;
    # else the handover stands for it too.
    leads: list[list[Unit]] = [[]]
    if first_i is not None and first_i != last_i:
        size_first = state.with_units([original[first_i]]).units_tokens()[0]
        if size_first + MIN_HANDOVER_TOKENS // 2 <= room:
            leads.insert(0, [original[first_i]])
    # The last action and what came back (as the chain left them: an offloaded output is its
    # head) stay too when they take at most half of what is left: what to continue from.
    action = _last_action_units(state, original, {last_i, first_i}) or _last_reply(state, original, last_i)
    if action:
        # the assistant's last word after its last action (the answer it ended on) stays with
        # it: summarized, the handover would have to stand after it, at the very end
        action = [*action, *_closing_reply(state, original, action)]
    # the user's own words come before the last action's cut text: a few tokens each, they tell
    # what was asked all along (what users most miss after a compaction); the action is archived
    quote_room = _quote_room(state, original, {last_i, first_i}, room)
    if action:
        # cut to half of what the quotes leave, and no more than what the quotes leave beside
        # the first request that leads and the handover's opening line and least sections: cut
        # text of the last answer is worth less than the user's requests it would crowd out
        share = (room - quote_room) // 2
        if quote_room:
            first_cost = sum(state.with_units(leads[0]).units_tokens()) if leads[0] else 0
            share = min(share, room - quote_room - first_cost - QUOTED_FLOOR - OPENING_TOKENS)
        action = _cut_to(state, action, max(0, share))
    action_cost = sum(state.with_units(action).units_tokens()) if action else 0
    room -= action_cost
    candidate = state
    for lead in leads:
        candidate = _minimal(state, original, options, system, lead, request, last_i, first_i,
                             room - sum(state.with_units(lead).units_tokens()) if lead else room,
                             action, quote_room)
        if candidate.fits():
            break
    if not candidate.fits() and request is not None:
        candidate = _squeezed(state, candidate, original[last_i])  # type: ignore[index]
    if candidate.fits() and action and any(u.meta.get("offloaded_request") for u in action):
        candidate = _refilled(state, candidate, action)
    return candidate


REQUEST_SHARE = 0.6  # of the minimal form's room, at most, for a long last request


def _quote_room(state: State, original: Sequence[Unit], skip: set[int | None], room: int) -> int:
    """Tokens the minimal form's handover may spend quoting the user's own words: those of the
    newest that fit a quarter of `room` (none in a room the handover's sections need all of)."""
    if room < 2 * MIN_HANDOVER_TOKENS:
        return 0
    body = [u for i, u in enumerate(original) if u.role != "system" and i not in skip]
    quoted = _quoted(state, original, body, room // 4)
    return sum(state.ctx.tokenizer.count(u.content) + 3 for u in {u.content.strip(): u for u in quoted}.values())


def _has_work(state: State, original: Sequence[Unit], last_i: int | None) -> bool:
    """Whether there is more to the session than its last request: messages besides the
    system prompt and that request (what a handover and a last action would carry)."""
    request_id = original[last_i].id if last_i is not None else None
    return any(u.role != "system" and u.id != request_id for u in original)


def _refilled(state: State, candidate: State, action: list[Unit]) -> State:
    """The minimal form with what it left of the goal given back to the last action's cut
    messages (they were cut to half the room before the handover took its part)."""
    spare = state.target - candidate.tokens()
    if spare <= 2 * MIN_CUT_NOTE_TOKENS:
        return candidate
    originals = {u.id: u for u in state.units}
    whole = [originals.get(u.id, u) for u in action]
    cost = sum(state.with_units(action).units_tokens())
    for give in (spare - 16, spare // 2):
        longer = _cut_to(state, whole, cost + give)
        if not longer:
            continue
        by_id = {u.id: u for u in longer}
        units = tuple(by_id.get(u.id, u) for u in candidate.units)
        refilled = State(units=units, target=state.target, ctx=state.ctx, in_recovery=True)
        if refilled.fits():
            return refilled
    return candidate


def _cut_to(state: State, units: list[Unit], room: int) -> list[Unit]:
    """The last action's units within `room`: whole when they fit; else its messages' text cut in
    the middle (each archived whole, with its ref), the calls' arguments never edited; none when
    the calls alone do not fit."""
    sizes = state.with_units(units).units_tokens()
    if sum(sizes) <= room:
        return units
    # what cannot be cut: a message with tool calls (its arguments stay whole), and what every
    # message costs besides its text
    fixed = [k for k, u in enumerate(units) if u.tool_calls or not u.content]
    text_tokens = {k: state.ctx.tokenizer.count(units[k].content) for k in range(len(units)) if k not in fixed}
    spare = room - sum(sizes) + sum(text_tokens.values())
    if not text_tokens or spare < 2 * MIN_CUT_NOTE_TOKENS * len(text_tokens):
        return []
    total = sum(text_tokens.values())
    out = list(units)
    for k, n in text_tokens.items():
        share = spare * n // total
        out[k] = fit_text(state, units[k], share, "message" if units[k].role != "tool" else "output")
    return out if sum(state.with_units(out).units_tokens()) <= room else []


def _closing_reply(state: State, original: Sequence[Unit], action: Sequence[Unit]) -> list[Unit]:
    """The assistant message (no tool call) of the log that ends the session after `action`,
    if it is the last unit: what the agent said it had done (never a summary the chain wrote)."""
    ids = {u.id for u in action}
    logged = {u.id for u in original}
    at = max((k for k, u in enumerate(state.units) if u.id in ids), default=-1)
    rest = list(state.units[at + 1 :])
    if (
        len(rest) == 1 and rest[0].id in logged and rest[0].type not in ("summary", "placeholder")
        and rest[0].role == "assistant" and not rest[0].tool_calls and rest[0].content.strip()
    ):
        return rest
    return []


def _last_reply(state: State, original: Sequence[Unit], last_i: int | None) -> list[Unit]:
    """In a session without actions (a chat, an aider history of whole-file replies): the newest
    assistant message after the last request, as the chain left it (what the work stands at)."""
    after = {u.id for u in original[(last_i if last_i is not None else -1) + 1 :]}
    for u in reversed(state.units):
        if u.role == "assistant" and u.content and not u.tool_calls and u.id in after:
            return [u]
    return []


def _last_action_units(state: State, original: Sequence[Unit], skip: set[int | None]) -> list[Unit]:
    """The units of the last action block as the chain's state holds them (none when that block
    holds a request the minimal form keeps anyway, or is gone from the state)."""
    from ctxkit.strategies.base import last_action

    at = sorted(last_action(state))
    if not at:
        return []
    units = [state.units[i] for i in at]
    ids = {u.id for u in units}
    if any(original[i].id in ids for i in skip if i is not None):
        return []
    return units


def _squeezed(state: State, candidate: State, request: Unit) -> State:
    """The minimal form made to fit when its estimate was short: the last request cut further
    (archived whole) by what is still over, a few times; the handover stays."""
    tok = state.ctx.tokenizer
    units = list(candidate.units)
    at = next((k for k, u in enumerate(units) if u.id == request.id), None)
    if at is None:
        return candidate
    for _ in range(4):
        over = candidate.tokens() - state.target
        if over <= 0:
            break
        room = max(0, tok.count(units[at].content) - over - 8)
        units[at] = fit_text(state, request, room)
        candidate = State(units=tuple(units), target=state.target, ctx=state.ctx, in_recovery=True)
    if candidate.fits():
        return candidate
    # The request is as short as it gets: the handover shrinks to one line with one ref (the
    # rest of the refs stay in its meta and in the archive). It never goes: without it the
    # output would not say that anything was left out, nor where it went (a limit that cannot
    # hold it is refused before the chain runs: `smallest_form`).
    handover_at = next((k for k, u in enumerate(units) if u.id == "ctxkit-handover"), None)
    if handover_at is not None:
        old = units[handover_at]
        line = archive_line([str(r) for r in old.meta.get("refs", ())])
        units[handover_at] = old.replace(content=line, meta=old.meta)
        candidate = State(units=tuple(units), target=state.target, ctx=state.ctx, in_recovery=True)
    return candidate


def _minimal(
    state: State,
    original: Sequence[Unit],
    options: ChainOptions,
    system: list[Unit],
    lead: list[Unit],
    request: Unit | None,
    last_i: int | None,
    first_i: int | None,
    room: int,
    action: Sequence[Unit] = (),
    quote_room: int = 0,
) -> State:
    """The minimal form with this lead: the handover shrunk until the whole fits (or 16); the
    last action (`action`, kept whole) after the request when it came after it, else before."""
    skip = {last_i, first_i if lead else None}
    kept_ids = {u.id for u in action}
    body = [
        u for i, u in enumerate(original)
        if u.role != "system" and i not in skip and u.id not in kept_ids
    ]
    if not body:  # nothing to hand over: the requests alone
        kept = [*system, *lead, *([request] if request is not None else []), *action]
        return State(units=tuple(kept), target=state.target, ctx=state.ctx, in_recovery=True)
    refs = [archive_unit(state, u) for u in body]
    p1 = [u for u in body if u.is_p1]
    tok = state.ctx.tokenizer
    # The names of the current work that neither the handover nor what stays beside it says
    # are added on a line of their own, as the fuller handover and summarize_old add theirs:
    # in what the handover leaves of the room, else in a smaller handover that still hands
    # something over, else as many as the room leaves (none at worst). Not the handed-over
    # facts: the handover's own sections hold its files and failures first, and a check's
    # share of this small room would shrink them to re-add a few.
    rest = [*system, *lead, *([request] if request is not None else []), *action]
    names = current_names(state, body, rest)
    body_tokens = sum(state.with_units(body).units_tokens())
    opening = preamble(len(body), body_tokens, refs)
    # in a room that the usual opening line would take a third of, the short one
    short = 3 * tok.count(opening) > room
    if short:
        opening = preamble(len(body), body_tokens, refs, short=True)
    # the last action goes after the request when it came after it, else before
    at_action = next((k for k, u in enumerate(original) if action and u.id == action[0].id), 0)
    after = bool(action) and (last_i is None or at_action > last_i)

    # the user's own words in what it hands over, newest first within `quote_room` (what users
    # most miss after a compaction), before the sections shrink
    quoted = _quoted(state, original, body, quote_room)

    handover = _MinimalHandover(
        state, original, system, lead, request, action, after, body, refs, p1, rest, names,
        opening, short, body_tokens, min(options.handover_tokens, room), quoted,
    )
    plain, head, body_text = handover.shrunk(checked=False)
    if not (names and body_text and plain.fits()):
        return plain
    return _with_names(handover, plain, head, body_text)


QUOTED_FLOOR = MIN_HANDOVER_TOKENS  # the minimal handover's sections beside its quotes, at least
OPENING_TOKENS = 56  # about what a handover's opening line takes (its counts and three refs)


@dataclass
class _MinimalHandover:
    """The minimal form's handover of `body` with the units that stay around it: built for a
    head and a text, shrunk until the whole fits."""

    state: State
    original: Sequence[Unit]
    system: list[Unit]
    lead: list[Unit]
    request: Unit | None
    action: Sequence[Unit]  # the last action, kept whole
    after: bool  # it goes after the request (it came after it)
    body: list[Unit]  # the units handed over
    refs: list[str]  # and their refs
    p1: list[Unit]
    rest: list[Unit]  # what stays beside the handover
    names: list[str]  # the names of the current work neither says
    opening: str
    short: bool  # the short opening (a tiny room)
    body_tokens: int
    size: int  # the handover's first size: its own, at most the room
    quotable: list[Unit]  # the user's own words it may quote, newest first
    quoted: list[Unit] = field(default_factory=list)  # those it quotes as last shrunk
    earlier: bool = True  # it states an earlier request (the head of a long one) as last shrunk

    def built(self, head: str, body_text: str) -> State:
        """The minimal form with this handover text."""
        asked = len(structure.own_request_indices(self.body))
        text = "\n".join(p for p in (head, body_text, verbatim_section(self.quoted, asked)) if p)
        summary = _handover_unit(text, self.refs)
        kept = [*self.lead, *([self.request] if self.request is not None else [])]
        if self.action:
            at = len(kept) if self.after or self.request is None else len(kept) - 1
            kept[at:at] = list(self.action)
        units = placed(self.original, self.system, kept, summary, self.body)
        return State(units=tuple(units), target=self.state.target, ctx=self.state.ctx, in_recovery=True)

    def shrunk(self, checked: bool) -> tuple[State, str, str]:
        """The handover gets what the system prompt and the last request leave, up to its own
        size; the summarizer's length is approximate, so it shrinks until the whole fits (the
        oldest quote goes first). `checked` adds the names of the current work."""
        from ctxkit.summarizers.extractive import handover

        state, body, refs = self.state, self.body, self.refs
        size = max(16, self.size)
        candidate = state
        head, body_text = self.opening, ""
        self.quoted, self.earlier = self.quotable, True
        for _ in range(9 + len(self.quoted)):
            # the real last request follows the handover: the handover must not quote another
            body_text = handover(
                body, target_tokens=size, p1_units=self.p1, tok=state.ctx.tokenizer, include_last_request=False,
                current_first=not self.action, task=not self.lead, quoted={u.content for u in self.quoted},
                earlier=self.earlier,
            ).strip()
            if not body_text:
                # nothing handed over but where the messages went: in a tiny room, the shortest
                # line that says so (the least a fresh start leaves, `smallest_form`)
                head = archive_line(refs) if self.short else preamble(
                    len(body), self.body_tokens, refs, summarized=False)
            candidate = self.built(
                head, with_missing_facts(body_text, "", (), self.rest, size, state, names=self.names)
                if checked and body_text else body_text)
            over = candidate.tokens() - state.target
            if over <= 0:
                break
            if size > QUOTED_FLOOR or not self.quoted:
                if size <= 16:
                    break
                # the sections shrink to their floor before a quote goes: a quote is the user's
                # words, a few tokens that tell what was asked; the sections' lines are longer
                size = max(QUOTED_FLOOR if self.quoted else 16, size - over - 8)
                continue
            if self.earlier and self.lead:
                # then the head of an earlier long request goes: the short ones are quoted whole
                self.earlier = False
                continue
            self.quoted = self.quoted[1:]  # then the oldest quote goes
        return candidate, head, body_text


def _with_names(handover: _MinimalHandover, plain: State, head: str, body_text: str) -> State:
    """The minimal form with the names of the current work in what the handover leaves of the
    room, as many as fit; when not all do, the handover shrinks for them if it still hands
    something over, not at the cost of where the work stood (the last actions and what came
    back)."""
    from ctxkit.summarizers.sections import WORK_TITLE

    state, names = handover.state, handover.names
    left = state.target - plain.tokens()
    fitting = plain
    for k in range(len(names), 0, -1):
        named = handover.built(
            head, with_missing_facts(body_text, "", (), handover.rest, 0, state, spare=left, names=names[:k]))
        if named.fits():
            if k == len(names):
                return named
            fitting = named
            break
    candidate, _, shorter = handover.shrunk(checked=True)
    if candidate.fits() and shorter and (WORK_TITLE in shorter or WORK_TITLE not in body_text):
        return candidate
    return fitting


def _truncate_marker(state: State, dropped: Sequence[Unit]) -> Unit:
    """One placeholder for the dropped turns, with their refs (the units go to the archive)."""
    refs = [archive_unit(state, u) for u in dropped]
    return Unit(
        id="ctxkit-truncated",
        role="user",
        type="placeholder",
        content=f"[{len(dropped):,} earlier messages {refs_hint(refs)}]",
        meta={"refs": refs, "strategy": "truncate"},
    )


def truncate(state: State, original: Sequence[Unit], options: ChainOptions) -> State:
    """Drop the oldest whole turns (archived, one placeholder) until the rest fits."""
    units = list(state.units)
    system = [u for u in units if u.role == "system"]
    rest = [u for u in units if u.role != "system"]
    turn_starts = sorted({t.start for t in structure.turns(rest)} | {len(rest)})
    for cut in turn_starts:
        if cut == 0:
            continue
        dropped = rest[:cut]
        kept = rest[cut:]
        if not kept:
            break
        marker = _truncate_marker(state, dropped)
        candidate = State(
            units=tuple([*system, marker, *kept]),
            target=state.target,
            ctx=state.ctx,
            in_recovery=True,
        )
        if candidate.fits():
            return candidate
    # One turn alone is too big: keep only the last user request (as picoclaw does).
    last_i = _last_request_index(rest)
    marker = _truncate_marker(state, [u for i, u in enumerate(rest) if i != last_i])
    base = State(
        units=tuple([*system, marker]), target=state.target, ctx=state.ctx, in_recovery=True
    )
    if last_i is None:
        return base
    room = state.target - base.tokens() - state.ctx.count_opts.tokens_per_message
    request = fit_text(state, rest[last_i], room)
    return State(
        units=tuple([*system, marker, request]),
        target=state.target,
        ctx=state.ctx,
        in_recovery=True,
    )


# The recovery modes, by config name: what runs when the chain cannot reach its goal (`error`
# runs nothing and fails the run).
RECOVERY: dict[str, Callable[[State, Sequence[Unit], ChainOptions], State] | None] = {
    "fresh_start": fresh_start,
    "truncate": truncate,
    "error": None,
}
RECOVERY_MODES = tuple(RECOVERY)
DEFAULT_RECOVERY = "fresh_start"
