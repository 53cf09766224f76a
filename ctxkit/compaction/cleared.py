"""The fresh start of a log in which the user cleared the conversation (`/clear`): the agent's
own context since then beside one line naming where the rest went, with what the user had
asked before the clear, word for word, as far as the room holds it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ctxkit import structure
from ctxkit.compaction.cut import fit_text
from ctxkit.model import Unit
from ctxkit.strategies.base import State, archive_unit, refs_hint

BEFORE = "those before the user last cleared the conversation"
QUOTE_SHARE = 4  # the quotes of what came before the clear get up to 1/4 of the room
ANSWER_KEPT = 0.5  # an answer since the clear is cut for them to no less than half of it


def since_clear(state: State, original: Sequence[Unit], system: list[Unit]) -> State | None:
    """After the user's last `/clear` the agent itself held only what came since: when that fits
    beside one line naming where the rest went, it is the context (a handover would spend the
    room telling what the agent had dropped). The line quotes what the user had asked before
    the clear (`_quoted`): in what the goal leaves beside the messages since, else in a quarter
    of the room, the longest answer since cut (its middle archived) to no less than half; the
    session commands since (`/add f`, `/drop f`) stay, archived only when nothing else fits."""
    start = structure.conversation_start(original)
    before = [u for u in original[:start] if u.role != "system"]
    after = [u for u in original[start:] if u.role != "system"]
    if not start or not before or not after:
        return None
    room = state.target - state.with_units(system).tokens()
    # the requests (commands to the agent, `/add f` or `/undo`, would take the room of the
    # requests they came between, and a `/clear` sent twice reads as one)
    asked = [u for u in before if structure.is_request(u)]
    wanted = len(_quoted(asked, room // QUOTE_SHARE, state)[1])
    whole = _Form(state, system, before, after, BEFORE).fitted(room // QUOTE_SHARE, asked)
    if whole is not None and whole.quoted >= wanted:
        return whole.built()
    cut = _answer_cut(state, system, before, after, asked, room // QUOTE_SHARE)
    if cut is not None:
        return cut.built()
    if whole is not None:
        return whole.built()
    commands = [u for u in after if structure.is_session_command(u)]
    if commands:
        # the commands since: archived with the rest (the agent ran them; the model got none)
        rest = [u for u in after if u not in commands]
        form = _Form(state, system, [*before, *commands], rest, f"{BEFORE}, and the commands since")
        found = form.fitted(room // QUOTE_SHARE, asked)
        if found is not None:
            return found.built()
    return None


@dataclass
class _Form:
    """System units, the line naming where `before` went (`what` they are) with `text` quoting
    the user's words before the clear, then `after`."""

    state: State
    system: list[Unit]
    before: list[Unit]
    after: list[Unit]
    what: str
    text: str = ""
    quoted: int = 0

    def with_refs(self, refs: list[str]) -> State:
        line = Unit(
            id="ctxkit-cleared",
            role="user",
            type="placeholder",
            content=f"[{len(self.before):,} earlier messages ({self.what}) {refs_hint(refs, 1)}]{self.text}",
            meta={"refs": refs, "strategy": "fresh_start", "removed_ids": [u.id for u in self.before]},
        )
        units = (*self.system, line, *self.after)
        return State(units=units, target=self.state.target, ctx=self.state.ctx, in_recovery=True)

    def probe(self) -> State:
        from ctxkit.archive.store import REF_PROBE

        return self.with_refs([REF_PROBE] * len(self.before))

    def fitted(self, cap: int, asked: Sequence[Unit]) -> _Form | None:
        """This form with the quotes that fit in what it leaves of the goal, at most `cap`
        tokens; None when it does not fit without them."""
        self.text, self.quoted = "", 0
        bare = self.probe()
        if not bare.fits():
            return None
        self.text, kept = _quoted(asked, min(cap, self.state.target - bare.tokens()), self.state)
        self.quoted = len(kept)
        return self

    def built(self) -> State:
        """The form with the real refs (what came before archived)."""
        return self.with_refs([archive_unit(self.state, u) for u in self.before])


def _answer_cut(
    state: State, system: list[Unit], before: list[Unit], after: list[Unit], asked: list[Unit], cap: int
) -> _Form | None:
    """The form with the quotes in `cap` and the longest answer since the clear (an assistant
    message without calls) cut in the middle to make room for them, to no less than
    `ANSWER_KEPT` of it; None when that does not fit."""
    answers = [u for u in after if u.role == "assistant" and not u.tool_calls and u.content]
    if not answers:
        return None
    tok = state.ctx.tokenizer
    answer = max(answers, key=lambda u: tok.count(u.content))
    size = tok.count(answer.content)
    form = _Form(state, system, before, [u for u in after if u is not answer], BEFORE)
    form.text, kept = _quoted(asked, cap, state)
    form.quoted = len(kept)
    room = state.target - form.probe().tokens() - state.ctx.count_opts.tokens_per_message
    for _ in range(4):
        if room < size * ANSWER_KEPT:
            return None
        shortened = fit_text(state, answer, room, "message")
        form.after = [shortened if u is answer else u for u in after]
        over = form.probe().tokens() - state.target
        if over <= 0:
            return form
        room -= over + 8
    return None


def _quoted(asked: Sequence[Unit], room: int, state: State) -> tuple[str, list[int]]:
    """What the user had asked before the clear, word for word, oldest first: the newest of
    those that fit in `room` (one too long to fit is left out, archived with the rest; a
    message sent again is quoted once, where it was last sent); and which. ("", []) when none
    fits."""
    from ctxkit.summarizers.extractive import distinct_sizes, newest_within

    if not asked:
        return "", []
    tok = state.ctx.tokenizer
    title = "\n## User messages before the clear (verbatim, oldest first{})"
    room -= tok.count(title.format("; 99 of 99, the others archived"))
    # (a message sent again costs its "(N times)" too; its earlier copies cost nothing)
    sizes = distinct_sizes([u.content for u in asked], [tok.count(u.content) + 6 for u in asked])
    quoted = [k for k in newest_within(sizes, room) if sizes[k]]
    if not quoted:
        return "", []
    distinct = sum(1 for n in sizes if n)
    some = f"; {len(quoted)} of {distinct}, the others archived" if len(quoted) < distinct else ""
    times = Counter(u.content.strip() for u in asked)

    def line(u: Unit) -> str:
        n = times[u.content.strip()]
        return f"\n- {u.content.strip()}" + (f" ({n} times)" if n > 1 else "")

    return title.format(some) + "".join(line(asked[k]) for k in quoted), quoted
