"""`summarize_old`: the oldest part of the history becomes one summary, just enough of it to
reach the goal (at most `old_threshold` of the history, by tokens).

The span starts after the system units and ends at a safe cut point (no call split from its
result). Its units go to the archive; one summary unit takes their place, right after the first
request (kept verbatim, as every protected unit in the span is). The summary opens with a
continuation preamble, holds the summarizer's sections (about `summary_length` tokens) and then
the user's own messages from the span word for word, newest first within the user-message
budget (`summarize.user_message_budget`). A previous ctxkit summary in the span is rolled in.
Its role (a user turn joined to the first request, or an assistant turn between two user turns)
is settled by `compaction.arrange` once the chain is done.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.fields import integer, number, plain, setting
from ctxkit.model import Unit
from ctxkit.strategies._common import fmt_refs
from ctxkit.strategies.base import (
    State,
    archive_unit,
    fmt_int,
    make_ref,
    merged,
    protected,
    where_work_stands,
)

NAME = "summarize_old"
LABEL = "Summarizing old context"  # what a progress event says while it runs
DEPTH = 1  # it summarizes the oldest history (`strategies.DEPTHS`)


@dataclass(frozen=True)
class Params:
    """Summarize the oldest history, at most `old_threshold` of it, in `summary_length` tokens."""

    old_threshold: float = setting(1.0, number(0.0, 1.0), "largest share of history summarized")
    summary_length: int = setting(300, integer(1), "tokens, at least")
    summary_share: float = setting(
        0.1, number(0.0, 0.5), "of the goal the summary may take when that is more"
    )
    min_coherence: float = setting(0.7, number(0.0, 1.0), "undo the step below this coherence")
    retry_threshold: float = setting(
        0.6, number(0.0, 1.0), "largest share summarized again when a longer summary was undone"
    )


DEFAULTS: dict[str, Any] = plain(Params())
SUMMARY_ID = "ctxkit-summary-"  # a summary unit's id: this and a digest of what it stands for
MAX_BUILDS = 12  # summaries built while searching for the smallest span that reaches the goal
MERGED_SHARE = 0.25  # of the goal, at most, for a summary that merges an earlier one
MERGED_TOKENS = 6_000  # and at most this many (a summary that only grew would crowd the goal out)


def _longest_cut(state: State, first: int, share: int, tokens: list[int]) -> int:
    """The furthest turn boundary whose span from `first` fits `share`; a safe cut point inside
    a turn when no turn boundary covers at least half the share (one long turn)."""
    from ctxkit.structure import safe_cut_points, turns

    units = state.units
    safe = sorted(set(safe_cut_points(units)))
    starts = {t.start for t in turns(units)} | {len(units)}

    def furthest(candidates: list[int]) -> tuple[int, int]:
        best, covered, running, prev = first, 0, 0, first
        for cut in candidates:
            if cut <= first:
                continue
            running += sum(tokens[prev:cut])
            prev = cut
            if running > share:
                break
            best, covered = cut, running
        return best, covered

    by_turn, turn_covered = furthest([c for c in safe if c in starts])
    if turn_covered >= share / 2:
        return by_turn
    by_block, block_covered = furthest(safe)
    return by_block if block_covered > turn_covered else by_turn


def preamble(
    n_units: int, n_tokens: int, refs: Sequence[str], *, summarized: bool = True, short: bool = False,
    later: bool = False,
) -> str:
    """The line that opens a summary: what this is, for a model reading the context cold
    (`summarized` False: nothing follows it, the messages are only archived). `short`: the same
    in half the tokens, one ref named (the rest in the unit's meta), for a room where every
    token the line takes is one the summary loses. `later`: it follows an earlier summary left
    as it was (a loop's pinned head), and stands for what came after that one."""
    what = "message" if n_units == 1 else "messages"
    how = "are summarized below and archived" if summarized else "are archived"
    if short:
        return f"[Compacted: {n_units} earlier {what} ({fmt_int(n_tokens)} tokens) {how} as {fmt_refs(list(refs), limit=1)}.]"
    opening = (
        "Later work, compacted to fit the context after the summary above"
        if later else "This session continues from earlier work that was compacted to fit the context"
    )
    return (
        f"[{opening}: {n_units} earlier {what} ({fmt_int(n_tokens)} tokens) {how} as "
        f"{fmt_refs(list(refs), limit=3)}. What follows is verbatim unless marked.]"
    )


_COUNTS = re.compile(r"(\d[\d,]*) earlier messages? \(([\d,]+) tokens\)")


def covered(unit: Unit, tokens: int) -> tuple[int, int]:
    """(messages, tokens) a unit stands for: an earlier summary the messages and tokens it
    summarized (from its record, or its opening line when read back from a file), any other
    unit itself."""
    if unit.type != "summary":
        return 1, tokens
    counts = unit.meta.get("summarized")
    if isinstance(counts, (list, tuple)) and len(counts) == 2:
        return int(counts[0]), int(counts[1])
    m = _COUNTS.search(unit.content[:400])
    if m:
        return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))
    return 1, tokens


def verbatim_section(requests: Sequence[Unit] | Sequence[str], total: int = 0) -> str:
    """The user's own messages, word for word, oldest first; `total`: how many the span held,
    when the room left the oldest of them out (the title says so: not "all")."""
    from ctxkit.summarizers.sections import USER_MESSAGES_TITLE

    if not requests:
        return ""
    texts = [r if isinstance(r, str) else r.content for r in requests]
    # a message sent again is quoted once, where it was last sent, with how often it was sent
    # (an aider user's `/undo` five times, a request repeated after each `/clear`)
    times = Counter(text.strip() for text in texts)
    lines: list[str] = []
    for text in reversed(texts):
        n = times.pop(text.strip(), 0)
        if n:
            lines.append(f"- {text.rstrip()} ({n} times)" if n > 1 else f"- {text}")
    body = "\n".join(reversed(lines))
    left = f"; {len(texts)} of {total}, the others archived" if total > len(texts) else ""
    return f"## {USER_MESSAGES_TITLE} (verbatim, oldest first{left})\n{body}"


def _quoted(
    units: Sequence[Unit], first: int, gone: Sequence[int], cut: int, previous: Sequence[Unit], state: State
) -> tuple[list[tuple[str, str]], int]:
    """(id, text) of the user messages a summary quotes word for word: those of the span and
    those an earlier summary in the span quoted, as far as the user-message budget holds them
    counting newest first over every user message of the conversation (`newest_within`); and
    how many the span holds."""
    from ctxkit.structure import own_request_indices
    from ctxkit.summarizers.extractive import distinct_sizes, newest_within, user_message_budget

    def requests(indices: Sequence[int]) -> list[tuple[str, str]]:
        return [(units[i].id, units[i].content) for i in indices]

    # the state's requests are found once (`structure`), not once per unit per probe
    asked = own_request_indices(units)
    at = bisect.bisect_left(asked, gone[0])
    gone_set = set(gone)
    earlier = requests(asked[bisect.bisect_left(asked, first) : at])
    carried = [(str(q[0]), str(q[1])) for u in previous for q in u.meta.get("verbatim", ())]
    span = requests([i for i in asked[at:] if i in gone_set])
    later = requests([i for i in asked[at:] if i not in gone_set])
    sequence = [*earlier, *carried, *span, *later]
    tok = state.ctx.tokenizer
    texts = [text for _, text in sequence]
    sizes = distinct_sizes(texts, [tok.count(text) for text in texts])
    chosen = set(newest_within(sizes, user_message_budget(state.target)))
    lo = len(earlier)
    return [sequence[k] for k in range(lo, lo + len(carried) + len(span)) if k in chosen], len(carried) + len(span)


def summarize_old(state: State, params: Mapping[str, Any]) -> State | None:
    """Replace the oldest history by one summary, the smallest span that reaches the goal
    (up to `old_threshold` of the history); None when it would not help."""
    from ctxkit.structure import safe_cut_points

    p = merged(DEFAULTS, params)
    threshold = float(p["old_threshold"])
    # a larger goal holds a fuller summary: every file and failure of a long session
    length = max(int(p["summary_length"]), int(state.target * float(p.get("summary_share", 0.0))))
    units = state.units
    tokens = state.units_tokens()
    first = 0
    while first < len(units) and units[first].role == "system":
        first += 1
    history = sum(tokens[first:])
    longest = _longest_cut(state, first, int(history * threshold), tokens)
    if longest <= first:
        return None
    # a summary that merges an earlier one says at least what that one said (in a loop, each
    # compaction summarizes the last summary again: with the same length, the older files and
    # failures went to make room for the newer), within a quarter of the goal and MERGED_TOKENS
    # the last action (in a chat, the last reply) stays after the summary, as protected units
    # from the span do (a pinned summary among them is not merged)
    keep = protected(state) | where_work_stands(state)
    earlier = sum(tokens[i] for i in range(first, longest) if units[i].type == "summary" and i not in keep)
    length = max(length, min(earlier + length // 2, int(state.target * MERGED_SHARE), MERGED_TOKENS))
    spans = _Spans(state, first, keep, length, tokens)

    # The smallest span that reaches the goal: estimate from the tokens removed, then build.
    cuts = [c for c in sorted(set(safe_cut_points(units))) if first < c <= longest]
    if not cuts:
        return None
    floors = spans.floors(cuts)
    chosen = _smallest_fitting(
        cuts, lambda c: spans.build(c, spans.dry_ref), state.target, MAX_BUILDS, floors,
        spans.guess(cuts[min(len(cuts) - 1, bisect_floor(floors, state.target))]),
    )
    if chosen is None:
        chosen = longest
    # what the cut leaves of the goal (cuts fall between blocks) may go to the facts the
    # summary lost; should the check's lines then overrun the goal, they take their own share
    spare = max(0, state.target - spans.sizes[chosen]) if chosen in spans.sizes else 0
    new = None
    if spare > CHECK_MIN_TOKENS and offline(state.ctx.summarizer):
        new = spans.build(chosen, lambda u: archive_unit(state, u), check=True, spare=spare, fuller=True)
    if new is None or not new.fits():
        new = spans.build(chosen, lambda u: archive_unit(state, u), check=True, spare=spare)
    if spare and new is not None and not new.fits():
        new = spans.build(chosen, lambda u: archive_unit(state, u), check=True)
    return new if new is not None and new.tokens() < state.tokens() else None


@dataclass(frozen=True)
class _Frame:
    """What a summary of the span up to a cut holds beside the summarizer's text."""

    gone: list[int]  # the units it takes
    previous: list[Unit]  # the earlier summaries among them
    quoted: list[tuple[str, str]]  # the user's messages it quotes (id, text)
    n_gone: int  # the messages it stands for
    gone_tokens: int  # and their tokens
    quotes: str  # the quotes' section


@dataclass
class _Spans:
    """The summaries `summarize_old` builds of the history's spans, each ending at a cut: the
    summarizer's text of a span is made once, the size of each state the search built kept."""

    state: State
    first: int  # the first unit after the system units
    keep: set[int]  # the units that stay (protected, the last action)
    length: int  # the summarizer's tokens
    tokens: list[int]  # each unit's
    texts: dict[int, str] = field(default_factory=dict)  # cut -> the summarizer's text of its span
    sizes: dict[int, int] = field(default_factory=dict)  # cut -> the tokens of the state built there
    dry: dict[int, str] = field(default_factory=dict)  # each unit's ref, made once for the search

    def frame(self, cut: int) -> _Frame:
        """The units, earlier summaries, quotes and counts of the span up to `cut`."""
        units, tokens = self.state.units, self.tokens
        gone = [i for i in range(self.first, cut) if i not in self.keep]
        previous = [units[i] for i in gone if units[i].type == "summary"]
        quoted, total = _quoted(units, self.first, gone, cut, previous, self.state) if len(gone) >= 2 else ([], 0)
        # an earlier summary counts for the messages it stood for: the counts stay true
        n_gone = sum(covered(units[i], tokens[i])[0] for i in gone)
        gone_tokens = sum(covered(units[i], tokens[i])[1] for i in gone)
        return _Frame(gone, previous, quoted, n_gone, gone_tokens, verbatim_section([t for _, t in quoted], total))

    def dry_ref(self, unit: Unit) -> str:
        """A unit's ref for a trial build (nothing archived)."""
        ref = self.dry.get(id(unit))
        if ref is None:
            ref = self.dry[id(unit)] = make_ref(self.state.ctx.ref_scope or self.state.ctx.transcript_id, unit)
        return ref

    def floors(self, cuts: Sequence[int]) -> list[int]:
        """What stays after each cut at least, what the span does not hold: a cut whose rest
        alone exceeds the goal cannot fit, whatever its summary (never rising)."""
        removed, running, at = [], 0, self.first
        for c in cuts:
            running += sum(self.tokens[i] for i in range(at, c) if i not in self.keep)
            at = c
            removed.append(running)
        total = self.state.tokens()
        return [total - r for r in removed]

    def guess(self, cut: int) -> int:
        """The summary's size, guessed before any is built from what it holds beside the
        summarizer's text at the first cut that can fit, and `length` for that text: the search
        starts where that size fits, and needs two builds when the guess is right."""
        f = self.frame(cut)
        tok = self.state.ctx.tokenizer
        guess = tok.count(preamble(f.n_gone, f.gone_tokens, [self.dry_ref(self.state.units[i]) for i in f.gone]))
        return guess + self.length + tok.count(f.quotes) + self.state.ctx.count_opts.tokens_per_message

    def text(self, cut: int, f: _Frame, spare: int, fuller: bool) -> str:
        """The summarizer's text of the span: made once for the search, or, `fuller`, again in
        what the cut leaves of the goal (an offline summarizer only: a model's summary is not
        asked for twice)."""
        units, state = self.state.units, self.state
        previous_text = "\n\n".join(u.content for u in f.previous) or None
        quoted_ids = {uid for uid, _ in f.quoted}
        # a unit an earlier step shortened or masked is summarized as it was read: its facts
        # (the error line, the file it showed) were cut from the shortened text, not from the log
        body = [state.ctx.original(units[i]) for i in f.gone
                if units[i].type != "summary" and units[i].id not in quoted_ids]
        if fuller:
            return _summarize(state.ctx.summarizer, body, self.length + spare * 9 // 10, previous_text, state)
        text = self.texts.get(cut)
        if text is None:  # the search's summary of this span is the one kept: made once
            text = self.texts[cut] = _summarize(state.ctx.summarizer, body, self.length, previous_text, state)
        return text

    def build(self, cut: int, refs_of: Any, check: bool = False, spare: int = 0, fuller: bool = False) -> State | None:
        """The state with the span up to `cut` summarized (None for a span of fewer than two
        units); `check` adds what the span's log says and neither the summary nor the messages
        that stay carry."""
        from ctxkit.summarizers.extractive import superseded
        from ctxkit.summarizers.sections import TASKS_TITLE, without_sections

        units, state, first = self.state.units, self.state, self.first
        f = self.frame(cut)
        if len(f.gone) < 2:
            return None
        text = self.text(cut, f, spare, fuller)
        if fuller:
            spare = 0
        refs = [refs_of(units[i]) for i in f.gone]
        stale = superseded(units[cut:])
        if stale:
            # what the messages kept after it show is newer: a later task list, the next steps
            text = without_sections(text, stale)
        # after a pinned summary (a loop's cached head), it says it stands for what came since
        later = any(u.type == "summary" for u in units[first:min(state.ctx.pinned, len(units))])
        head = preamble(f.n_gone, f.gone_tokens, refs, summarized=bool(text.strip() or f.quotes), later=later)
        # what the summarizer wrote (a model's output, where a model writes it): the opening
        # line, the quotes and the facts the check adds are ctxkit's, copied from the log; counted
        # for the summary that is kept (the search's builds are sized, not kept)
        written = state.ctx.tokenizer.count(text.strip()) if check and text.strip() else 0
        if check:
            # checked against what the span's log says happened (the files it changed, its
            # failures, its open items): what neither the summary nor the messages that stay
            # carry is added
            rest = [u for k, u in enumerate(units) if k < first or k >= cut or k in self.keep]
            span_units = [state.ctx.original(units[i]) for i in f.gone]
            text = with_missing_facts(
                text, f.quotes, span_units, rest, self.length, state, spare, todos=TASKS_TITLE not in stale,
                names=current_names(state, span_units, rest),
            )
        summary = _summary_unit(units, f, refs, [head, text.strip(), f.quotes], written)
        built = state.with_units(_placed(units, first, cut, self.keep, f.gone, summary))
        if not check:
            self.sizes[cut] = built.tokens()
        return built


def _summary_unit(units: Sequence[Unit], f: _Frame, refs: list[str], parts: list[str], written: int) -> Unit:
    """The summary unit of a span: its parts, the refs of what it archived (an earlier
    summary's carried), the ids and counts it stands for, the quotes it holds, and the tokens
    of it the summarizer wrote."""
    carried = [str(r) for u in f.previous for r in u.meta.get("refs", ())]
    digest = hashlib.sha1("\x1f".join(units[i].id for i in f.gone).encode()).hexdigest()[:8]
    return Unit(
        id=f"{SUMMARY_ID}{digest}",
        role="user",
        type="summary",
        content="\n".join(part for part in parts if part),
        timestamp=units[f.gone[0]].timestamp,
        meta={
            "refs": list(dict.fromkeys(refs + carried)),
            "strategy": NAME,
            "summarized_ids": [units[i].id for i in f.gone],
            "summarized": [f.n_gone, f.gone_tokens],
            "verbatim": [[uid, text] for uid, text in f.quoted],
            "written": written,
        },
    )


def _placed(units: Sequence[Unit], first: int, cut: int, keep: set[int], gone: list[int], summary: Unit) -> list[Unit]:
    """The units with the summary where what it summarizes ended.

    The protected units of the span from before its last summarized unit (the first request, a
    last request, P1 units) precede it, those after it (the last action and the reply that
    ends the session) follow, so every message after it came after what it summarizes (a
    request placed after a summary of its answer would read as not yet answered). A user's
    message brought next to another one joins its turn, as the writers put joined units in one
    message."""
    span = range(first, cut)
    before = _joined([*units[:first], *[units[i] for i in span if i in keep and i < gone[-1]]])[first:]
    after = [units[i] for i in span if i in keep and i > gone[-1]]
    return [*units[:first], *before, summary, *after, *units[cut:]]


def _summarize(summarizer: Any, body: list[Unit], length: int, previous: str | None, state: State) -> str:
    """The summarizer's text of `body` in about `length` tokens (the extractive one when the
    context names none)."""
    if summarizer is None:
        from ctxkit.summarizers.extractive import summarize_extractive

        return summarize_extractive(body, length, previous, state.ctx.tokenizer)
    return str(summarizer(body, length, previous))


def offline(summarizer: Any) -> bool:
    """Whether a summarizer runs offline and cheaply (the extractive one): it may be asked
    again for a fuller text."""
    return summarizer is None or bool(getattr(summarizer, "offline", False))


def _joined(units: list[Unit]) -> list[Unit]:
    """`units` with each user's message that follows another user's message marked to join its
    turn (`meta["join"]`): requests a summary's placement brought together."""
    out = list(units)
    for k in range(1, len(out)):
        a, b = out[k - 1], out[k]
        if a.role == "user" and b.role == "user" and b.tool_call_id is None and a.tool_call_id is None:
            if not b.meta.get("join"):
                out[k] = b.replace(meta={**b.meta, "join": True}, source=b.source)
    return out


def with_missing_facts(
    text: str,
    quotes: str,
    span: Sequence[Unit],
    rest: Sequence[Unit],
    length: int,
    state: State,
    spare: int = 0,
    *,
    todos: bool = True,
    names: Sequence[str] = (),
) -> str:
    """The summary with the span's facts it lost that no message staying in the context
    carries either, added in a section of their own within a third of the summary's length,
    or within `spare` (what the goal leaves beside the summary) when that is more: the files
    the span changed (`facts.files`), its failures with their error lines, (`todos`) the open
    items of its last todo list, then the `names` of the current work (`current_names`) on one
    line, then the files it only read or ran. Read from the log (`ctxkit.facts`), as the summary
    is, so what is added is as true as the summary; Gemini CLI has the model verify its snapshot."""
    from ctxkit import facts as F
    from ctxkit.summarizers.extractive import command_label
    from ctxkit.summarizers.sections import CHECK_TITLE

    actions = F.calls(span)
    changed = {
        p: a for p, a in F.files(span, actions).items()
        if any(x in ("created", "edited", "written", "deleted", "moved") for x in a)
    }
    looked_at = [p for p, a in F.files(span, actions).items() if p not in changed and a[0] in ("read", "ran", "used")]
    failures = [c for c in actions if c.failed and c.error]
    open_todos = F.todos(span) if todos else []
    said = f"{text}\n{quotes}"
    names = [n for n in names if n not in said]
    if not (changed or failures or open_todos or looked_at or names):
        return text
    rest_actions = F.calls(rest)
    rest_changed = {
        p for c in rest_actions for p, a in c.paths if a in ("created", "edited", "written", "deleted", "moved")
    }
    rest_text: str | None = None

    def in_rest(key: str) -> bool:
        nonlocal rest_text
        if rest_text is None:  # built only when the summary itself misses something
            rest_text = "\n".join(u.content for u in rest)
        return key in rest_text

    lines: list[tuple[int, str]] = []  # (rank, line): failures and changed files first
    for c in reversed(failures):  # the newest failure first
        if c.error not in said and not in_rest(c.error):
            lines.append((0, f"- error: {command_label(c)} -> {c.error}"))
    for path, done in changed.items():
        if path not in said and path not in rest_changed:
            lines.append((0, f"- {path} ({', '.join(done)})"))
    for status, item in open_todos:
        if item not in said and not in_rest(item):
            lines.append((1, f"- todo: [{status}] {item}"))
    if names:
        lines.append((2, NAMES))  # filled below with the names the room holds
    unread = [p for p in looked_at if p not in said and not in_rest(p)]
    for k in range(0, len(unread), 6):
        lines.append((3, "- read: " + ", ".join(unread[k : k + 6])))
    if not lines:
        return text
    lines = sorted(dict.fromkeys(lines), key=lambda x: x[0])
    tok = state.ctx.tokenizer
    room = max(CHECK_MIN_TOKENS, length // CHECK_SHARE, spare)
    used = tok.count(f"## {CHECK_TITLE}\n")
    chosen: list[str] = []
    for _, line in lines:
        if line == NAMES:
            line = _names_line(names, room - used, tok)
            if not line:
                continue
        n = tok.count(line + "\n")
        if used + n > room:
            continue
        chosen.append(line)
        used += n
    if not chosen:
        return text
    return f"{text.rstrip()}\n## {CHECK_TITLE}\n" + "\n".join(chosen)


NAMES = "- names in the current work: "  # the check's one line of names (`current_names`)


def current_names(state: State, span: Sequence[Unit], rest: Sequence[Unit]) -> list[str]:
    """The names of the current work (`facts.current_names`: ids, files, code names the last
    request and the latest assistant messages of the transcript as read use, which the
    conversation had used before them) that `span` says (or the messages an earlier summary in
    it stands for) and no message of `rest` does, at most `facts.MAX_NAMES`, in their order.
    The transcript's names are read once per run: an earlier step may have cut the messages
    that say them."""
    from ctxkit import facts as F
    from ctxkit.log_events import named

    ctx = state.ctx
    names = ctx.once.get("current_names")
    if names is None:
        read = list(ctx.originals.values()) or [ctx.original(u) for u in state.units]
        names = ctx.once["current_names"] = F.current_names(read)
    if not names:
        return []
    # an earlier summary in the span stands for the messages it summarized: their names are
    # the span's too
    inner = [ctx.originals[i] for u in span if u.type == "summary"
             for i in u.meta.get("summarized_ids", ()) if i in ctx.originals]
    span_text = "\n".join(t for u in [*span, *inner] for t in F.unit_words(u))
    out = [n for n in names if named(n, span_text)]
    if out:
        rest_text = "\n".join(t for u in rest for t in F.unit_words(u))
        out = [n for n in out if n not in rest_text]
    return out[: F.MAX_NAMES]


def _names_line(names: Sequence[str], room: int, tok: Any) -> str:
    """The names line with as many of `names`, in their order, as `room` tokens hold; empty
    when not even one does."""
    line = ""
    for k in range(1, len(names) + 1):
        longer = NAMES + ", ".join(names[:k])
        if tok.count(longer + "\n") > room:
            break
        line = longer
    return line


CHECK_SHARE = 3  # the facts a check adds take at most a third of the summary's length
CHECK_MIN_TOKENS = 40  # and at least this much, whatever the length


def _smallest_fitting(
    cuts: list[int],
    build: Any,
    target: int,
    budget: int,
    floors: Sequence[int] | None = None,
    guess: int = 0,
) -> int | None:
    """The first cut whose built state fits `target`, or None when the longest does not fit
    either (a longer span never makes the result larger, give or take the summary's size).

    `floors[i]` is a lower bound of the tokens left at `cuts[i]` (what the span leaves out),
    never rising. Cuts whose floor exceeds the goal are skipped unbuilt; the first build is
    where a summary of `guess` tokens would fit, and each build then guesses the next from the
    summary it made (the summary's size changes little with the span), back or on, and checks
    the cut before a fit; halving takes over when guesses miss: the answer is the binary
    search's, in a few builds instead of one per halving of every cut.
    """
    floors = list(floors) if floors is not None else [0] * len(cuts)
    lo, hi = bisect_floor(floors, target), len(cuts) - 1
    found: int | None = None
    builds = 0
    probe: int | None = bisect_floor(floors, target - guess)  # where a summary that size fits
    guesses = 2  # misses guessed again from the summary's size before halving takes over
    stepped_back = False
    while lo <= hi and builds < budget:
        mid = (lo + hi) // 2 if probe is None else min(hi, max(lo, probe))
        built = build(cuts[mid])
        builds += 1
        if built is not None and built.tokens() <= target:
            found, hi = cuts[mid], mid - 1
            again = bisect_floor(floors, target - (built.tokens() - floors[mid]))
            if again < mid and guesses > 0:
                # the summary is smaller than the guess took it for: an earlier cut may fit
                guesses -= 1
                probe, stepped_back = again, False
                continue
            # the cut just before: when it does not fit, this one is the answer
            probe = None if stepped_back else hi
            stepped_back = True
            continue
        lo = mid + 1
        stepped_back = False
        if built is not None and guesses > 0:
            guesses -= 1
            probe = bisect_floor(floors, target - (built.tokens() - floors[mid]))
        else:
            probe = None
    return found


def bisect_floor(floors: Sequence[int], limit: int) -> int:
    """The first index whose floor is at most `limit` (floors never rise); len when none is."""
    lo, hi = 0, len(floors)
    while lo < hi:
        mid = (lo + hi) // 2
        if floors[mid] <= limit:
            hi = mid
        else:
            lo = mid + 1
    return lo
