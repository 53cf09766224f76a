"""Breakdowns of a count (by role, type, turn, message, tool), the calls a log records with their
provider's count, and the one measure of a transcript that `count`, `guard` and `compact` share.

Calibration against the recorded calls is `ctxkit.calibration`, their cost `ctxkit.costs`:
modules of their own, so that a plain count does not build their records at start-up."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxkit import lazy_names
from ctxkit.errors import CtxkitError
from ctxkit.model import Transcript, Unit
from ctxkit.tokens.accounting import (
    CountOptions,
    TranscriptCount,
    _count_parts,
    attachment_texts,
    count_tool_schemas,
    count_units,
)
from ctxkit.tokens.base import Tokenizer

if TYPE_CHECKING:
    from ctxkit.budget.fit import UsageFit

BREAKDOWNS = ("role", "type", "turn", "message", "tool")


_PARTS = ("content", "tool_calls", "reasoning", "overhead", "images")


def count_options(
    image_tokens: int | None = None, tool_schema_scale: float | None = None
) -> CountOptions:
    """The `CountOptions` of --image-tokens and --tool-schema-scale (None: the default): one
    builder for every command that counts."""
    defaults = CountOptions()
    return CountOptions(
        image_tokens=defaults.image_tokens if image_tokens is None else image_tokens,
        tool_schema_scale=defaults.tool_schema_scale if tool_schema_scale is None else tool_schema_scale,
    )


def transcript_label(t: Transcript) -> str:
    """A transcript's name in count rows: its path (`<stdin>` for stdin), `path:line` for one
    conversation of a dataset."""
    path = t.path or "<stdin>"
    if path == "-":
        path = "<stdin>"
    if t.layout == "dataset" and t.line is not None:
        return f"{path}:{t.line}"
    return path


def region_row(t: Transcript, measured: Measure) -> dict[str, Any]:
    """`ctxkit count`'s row for one transcript: its regions, the provider usage the local count
    misses (`unlogged`) and the total (`measure`)."""
    usage = measured.usage
    return {
        "transcript": transcript_label(t),
        "format": t.source_format,
        "units": len(t.units),
        **measured.counted.regions,
        "unlogged": measured.unlogged,
        "unseen": measured.unseen,
        "excess": measured.excess,
        "total": measured.total,
        "recorded": usage.fit.last_recorded if usage is not None else None,
    }


def count_row(
    t: Transcript,
    tok: Tokenizer,
    opts: CountOptions = CountOptions(),
    *,
    usage: bool = True,
    archive: ArchiveRef = None,
) -> dict[str, Any]:
    """`region_row` of a transcript, counted here (`usage=False`: ignore recorded usage)."""
    return region_row(t, measure(t, tok, opts, usage=usage, archive=archive))


def preview(unit: Unit, width: int = 60) -> str:
    """A one-line glimpse of a unit for tables: its text, else its tool calls."""
    text = unit.content or unit.reasoning
    if not text and unit.tool_calls:
        text = ", ".join(f"{c.name}({c.arguments})" for c in unit.tool_calls)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _aggregate(rows: dict[str, dict[str, Any]], key_name: str, key: str) -> dict[str, Any]:
    row = rows.get(key)
    if row is None:
        row = rows[key] = {key_name: key, "units": 0, **dict.fromkeys(_PARTS, 0), "tokens": 0}
    return row


class Breakdown:
    """Accumulates count rows by role, type, turn, message or tool over many transcripts.

    Role and type rows (plus tool-schema and reply-priming rows) sum to the total; tool rows
    cover tool calls and results only; turn and message rows are per transcript.
    """

    def __init__(self, by: str, tok: Tokenizer, opts: CountOptions = CountOptions()):
        if by not in BREAKDOWNS:
            raise ValueError(f"unknown breakdown {by!r}; known: {', '.join(BREAKDOWNS)}")
        self.by = by
        self.tok = tok
        self.opts = opts
        self.total = 0
        self.transcripts = 0
        self._groups: dict[str, dict[str, Any]] = {}
        self._rows: list[dict[str, Any]] = []
        self._schemas = 0
        self._priming = 0

    def add(self, t: Transcript, counted: TranscriptCount, label: str) -> None:
        """Add one counted transcript (`label` names it in turn and message rows)."""
        self.transcripts += 1
        self.total += counted.total
        self._schemas += counted.regions.get("tools", 0)
        self._priming += self.opts.reply_priming if t.units else 0
        if self.by in ("role", "type"):
            for u, uc in zip(t.units, counted.units, strict=True):
                row = _aggregate(self._groups, self.by, u.role if self.by == "role" else u.type)
                row["units"] += 1
                for part in _PARTS:
                    row[part] += getattr(uc, part)
                row["tokens"] += uc.total
        elif self.by == "tool":
            self._add_tools(t, counted)
        elif self.by == "turn":
            self._add_turns(t, counted, label)
        else:
            self._add_messages(t, counted, label)

    def _add_tools(self, t: Transcript, counted: TranscriptCount) -> None:
        names: dict[str, str] = {}
        for u, uc in zip(t.units, counted.units, strict=True):
            for call in u.tool_calls:
                names[call.id] = call.name
                row = self._tool_row(call.name)
                row["calls"] += 1
                row["call_tokens"] += sum(self.tok.count_many([call.name, call.arguments]))
            if u.tool_call_id is not None or u.type == "tool_result":
                name = names.get(u.tool_call_id or "") or u.name or "(unknown)"
                row = self._tool_row(name)
                row["results"] += 1
                row["result_tokens"] += uc.total

    def _tool_row(self, name: str) -> dict[str, Any]:
        row = self._groups.get(name)
        if row is None:
            row = self._groups[name] = {
                "tool": name,
                "calls": 0,
                "call_tokens": 0,
                "results": 0,
                "result_tokens": 0,
            }
        return row

    def _add_turns(self, t: Transcript, counted: TranscriptCount, label: str) -> None:
        from ctxkit.structure import is_user_request, turns

        cumulative = counted.regions.get("tools", 0)
        for turn in turns(t.units):
            tokens = sum(uc.total for uc in counted.units[turn.start : turn.end])
            cumulative += tokens
            first = t.units[turn.start]
            self._rows.append(
                {
                    "transcript": label,
                    # Turn 0 is whatever comes before the first request (the system prompt).
                    "turn": turn.index + 1,
                    "start": turn.start,
                    "units": turn.end - turn.start,
                    "tokens": tokens,
                    "cumulative": cumulative,
                    "request": preview(first) if is_user_request(first) else f"({first.role})",
                }
            )

    def _add_messages(self, t: Transcript, counted: TranscriptCount, label: str) -> None:
        cumulative = counted.regions.get("tools", 0)
        for i, (u, uc) in enumerate(zip(t.units, counted.units, strict=True)):
            cumulative += uc.total
            self._rows.append(
                {
                    "transcript": label,
                    "index": i,
                    "id": u.id,
                    "role": u.role,
                    "type": u.type,
                    "name": u.name,
                    **{part: getattr(uc, part) for part in _PARTS},
                    "tokens": uc.total,
                    "cumulative": cumulative,
                    "preview": preview(u),
                }
            )

    def rows(self) -> list[dict[str, Any]]:
        """The rows, with share of the total in percent, ending in a total row where it adds up."""
        total = self.total or 1
        if self.by in ("role", "type"):
            rows = sorted(self._groups.values(), key=lambda r: -r["tokens"])
            extra = []
            if self._schemas:
                extra.append({self.by: "(tool schemas)", "units": 0, "tokens": self._schemas})
            if self._priming:
                extra.append({self.by: "(reply priming)", "units": 0, "tokens": self._priming})
            rows = rows + extra
            for r in rows:
                r["share_pct"] = round(100.0 * r["tokens"] / total, 1)
            total_row: dict[str, Any] = {self.by: "total", "units": sum(r["units"] for r in rows)}
            for part in _PARTS:
                total_row[part] = sum(r.get(part, 0) for r in rows)
            total_row["tokens"] = sum(r["tokens"] for r in rows)
            total_row["share_pct"] = 100.0
            return rows + [total_row]
        if self.by == "tool":
            rows = list(self._groups.values())
            for r in rows:
                r["tokens"] = r["call_tokens"] + r["result_tokens"]
                r["share_pct"] = round(100.0 * r["tokens"] / total, 1)
            rows.sort(key=lambda r: -r["tokens"])
            if rows:
                tools_total: dict[str, Any] = {"tool": "total"}
                for key in ("calls", "call_tokens", "results", "result_tokens", "tokens"):
                    tools_total[key] = sum(r[key] for r in rows)
                tools_total["share_pct"] = round(100.0 * tools_total["tokens"] / total, 1)
                rows.append(tools_total)
            return rows
        rows = self._rows
        if self.transcripts <= 1:
            rows = [{k: v for k, v in r.items() if k != "transcript"} for r in rows]
        return rows


def provider_calls(t: Transcript) -> list[dict[str, Any]]:
    """The provider usage calls a reader found in the transcript (may be empty), up to its last
    unit.

    In a compacted transcript the records that carry usage were mostly written before the
    compaction, for a context that no longer exists: only the calls that saw no unit compaction
    changed or made (`archive.refs.first_compacted`) still describe this context."""
    usage = t.metadata.get("provider_usage") or {}
    calls = usage.get("calls") if isinstance(usage, dict) else None
    # a call made after the transcript's last unit (a prefix of a log, as `replay` feeds it)
    # saw messages this transcript does not hold
    n = len(t.units)
    out = [
        c
        for c in calls or []
        if isinstance(c, dict) and "input_tokens" in c and int(c.get("after_unit", n - 1)) < n
    ]
    if not out:
        return out
    from ctxkit.archive.refs import first_compacted

    first = first_compacted(t.units)
    if first is None:
        return out
    return [c for c in out if int(c.get("after_unit", len(t.units) - 1)) < first]


def estimate_calls(t: Transcript, tok: Tokenizer, opts: CountOptions = CountOptions()) -> list[int]:
    """ctxkit's estimate of the input of each provider call: the context the model had then.

    That is the units up to the call, starting again at the latest summary unit (a compaction
    summary, e.g. Claude Code's, replaces what came before it; system units stay), less the
    reasoning of turns before the latest request (the providers drop it: Anthropic strips the
    thinking of earlier turns, Gemini CLI never sends its thoughts back, measured by resuming
    real logs in the agents), plus the tool schemas and the reply priming. Does not touch
    `unit.tokens`.
    """
    calls = provider_calls(t)
    if not calls:
        return []
    return _context_at(t, tok, opts, [int(c.get("after_unit", len(t.units) - 1)) for c in calls])


def _context_at(
    t: Transcript, tok: Tokenizer, opts: CountOptions, afters: Sequence[int]
) -> list[int]:
    """The context at each of `afters` (the last unit a call saw), as `estimate_calls` says."""
    from ctxkit.archive.refs import carries_ref
    from ctxkit.structure import is_user_request

    parts, totals = _count_parts(t.units, tok, opts)
    prefix = [0]  # prefix[i] = tokens of units[:i]
    system_prefix = [0]  # the same, for system units only
    thought = [0]  # the same, for reasoning only
    last_summary: list[int] = []  # last_summary[i] = index of the latest summary unit <= i, or -1
    last_request: list[int] = []  # the same, for the latest user request
    latest = request = -1
    for i, (u, part, total) in enumerate(zip(t.units, parts, totals, strict=True)):
        prefix.append(prefix[-1] + total)
        system_prefix.append(system_prefix[-1] + (total if u.role == "system" else 0))
        thought.append(thought[-1] + part.reasoning)
        if u.type == "summary" and not carries_ref(u):
            # an agent's compaction summary starts the context it sends; one ctxkit wrote (it
            # names its archive) stands among what is sent, the first request before it too
            latest = i
        if u.role == "user" and is_user_request(u):
            request = i
        last_summary.append(latest)
        last_request.append(request)
    fixed = count_tool_schemas(t.tools, tok, opts) + opts.reply_priming
    attached = attachment_texts(t)
    attached_tokens = tok.count_many([text for _, text in attached]) if attached else []
    out = []
    for given in afters:
        after = min(max(given, -1), len(totals) - 1)
        shown = sum(n for (at, _), n in zip(attached, attached_tokens, strict=True) if at <= after)
        start = last_summary[after] if after >= 0 else -1
        if start > 0:
            seen = system_prefix[start] + prefix[after + 1] - prefix[start]
        else:
            seen = prefix[after + 1]
        turn = last_request[after] if after >= 0 else -1
        if turn > max(start, 0):
            seen -= thought[turn] - thought[max(start, 0)]
        out.append(seen + fixed + shown)
    return out


def context_tokens(t: Transcript, tok: Tokenizer, opts: CountOptions = CountOptions()) -> int:
    """The context the transcript is now: `estimate_calls`' measure at its last unit."""
    return _context_at(t, tok, opts, [len(t.units) - 1])[0] if t.units else _context_at(t, tok, opts, [-1])[0]


# --- provider-recorded usage: truth over estimates -----------------------------------------------


def unit_key(u: Unit) -> str:
    """A unit as a file holds it, whatever ids a reader gives it: role, text, the calls it
    makes or answers (a format may number its units anew when a compacted file is read back)."""
    calls = ",".join(c.id for c in u.tool_calls)
    return f"{u.role}\x00{u.tool_call_id or ''}\x00{calls}\x00{u.content}"


@dataclass(frozen=True)
class RecordedUsage:
    """What the provider counted at the calls a log records, fitted against ctxkit's count of
    the same contexts (`budget.fit`): `fixed` (what every call carries and the log never shows,
    anchored at the log's first call), `ratio` (the provider's tokens per counted token), steps
    the two cannot explain, and how well the fit holds.

    For a file ctxkit compacted, the calls are its original's (`origin` says where it was
    found): the records the compacted file keeps describe a context that no longer exists, but
    what they measured still holds."""

    source: str
    fit: UsageFit
    origin: str = ""  # "" (the transcript itself) or where its original was found
    # what the log does not hold, by the unit it came with (`unit_key`)
    unseen_units: tuple[tuple[str, int], ...] = ()

    def kept_unseen(self, units: Sequence[Unit]) -> int:
        """What the log does not hold that `units` still carry: the unseen content of the
        original units they keep unchanged (found by role and text: a format may number its
        units anew when a compacted file is read back)."""
        if not self.unseen_units:
            return 0
        left: dict[str, int] = {}
        for u in units:
            key = unit_key(u)
            left[key] = left.get(key, 0) + 1
        kept = 0
        for key, n in self.unseen_units:
            if left.get(key, 0) > 0:
                left[key] -= 1
                kept += n
        return kept

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "calls": len(self.fit.calls),
            "recorded": self.fit.last_recorded,
            "estimated": self.fit.last_counted,
            "after_unit": self.fit.after_unit,
            "unlogged": self.fit.fixed,
            "fit": self.fit.to_dict(),
            "origin": self.origin or None,
        }

    def explain(self) -> str:
        """One line for people: what is fixed, what grows, what the fit cannot explain."""
        f = self.fit
        calls = len(f.calls)
        line = (
            f"recorded usage of {calls:,} call{'s' if calls != 1 else ''}: "
            f"{f.fixed:,} fixed (what every call carries and the log never shows: system prompt, "
            f"tools, instructions), content x{f.ratio:.2f} (the provider's tokens per counted "
            f"token, {f.ratio_source})"
        )
        grew = [x for x in f.steps if x.tokens > 0]
        fell = [x for x in f.steps if x.tokens < 0]
        for steps, what in (
            (grew, "content the calls carried that the log does not hold"),
            (fell, "content the agent left out of its calls (pruned, cleared or cut)"),
        ):
            if steps:
                parts = [f"{x.tokens:+,} at call {x.call + 1}" for x in steps[:3]]
                more = f" and {len(steps) - 3} more" if len(steps) > 3 else ""
                line += f"; {', '.join(parts)}{more}: {what}"
        bad = f.unexplained()
        if bad:
            line += (
                f"; {len(bad):,} call{'s' if len(bad) != 1 else ''} off by more than 5% "
                f"(worst {f.worst:.1%}, call {max(bad, key=lambda i: abs(f.residuals[i])) + 1})"
            )
        else:
            line += f"; every call within {max(f.worst, 0.001):.1%}"
        return line


ArchiveRef = Any  # an open `archive.store.Archive`, a path to one, or None


def recorded_usage(
    t: Transcript,
    tok: Tokenizer,
    opts: CountOptions = CountOptions(),
    *,
    archive: ArchiveRef = None,
) -> RecordedUsage | None:
    """The log's recorded calls fitted against ctxkit's count of the same contexts, or None
    when the log records no usage.

    A transcript that ctxkit compacted is measured on its original (`usage_original`): the
    archive given, else the one `compact` wrote beside the file. Without it, only the calls
    that saw no unit compaction changed still describe it (`provider_calls`)."""
    from ctxkit.budget.fit import fit_usage

    source, origin = t, ""
    original, where = usage_original(t, archive)
    if original is not None:
        source, origin = original, where
    calls = provider_calls(source)
    if not calls:
        return None
    estimates = estimate_calls(source, tok, opts)
    usage = source.metadata.get("provider_usage") or {}
    first = usage.get("first") if isinstance(usage, dict) else None
    anchor = None
    if isinstance(first, dict) and isinstance(first.get("input_tokens"), int):
        texts = [x for x in first.get("texts") or [] if isinstance(x, str)]
        seen = sum(tok.count_many(texts)) + opts.tokens_per_message * max(1, len(texts))
        anchor = (int(first["input_tokens"]), seen)
    fit = fit_usage(
        [
            (int(c["input_tokens"]), e, int(c.get("after_unit", len(source.units) - 1)))
            for c, e in zip(calls, estimates, strict=True)
        ],
        first=anchor,
    )
    units = source.units
    unseen = tuple(
        (unit_key(units[i]), n) for i, n in fit.unseen_at().items() if 0 <= i < len(units)
    )
    return RecordedUsage(
        source=str(usage.get("source") or source.source_format), fit=fit, origin=origin,
        unseen_units=unseen,
    )


_MAX_ARCHIVE_DEPTH = 16


@dataclass
class Fit:
    """How a budget is judged: tokenizer, counting options, and each unit's cost, cached.

    Where a log records the provider's usage, `extra` is what every call carries that the log
    never shows (the fixed part of its fit), `ratio` the provider's tokens per counted token,
    and `unseen` what the log does not hold, by the unit it came with (`unit_key`):
    a unit costs its count at the ratio, plus its unseen content while it is kept unchanged."""

    tok: Tokenizer
    copts: CountOptions = CountOptions()
    extra: int = 0  # tokens every call carries that the log never shows (a system prompt)
    ratio: float = 1.0
    unseen: dict[str, int] = field(default_factory=dict)
    _costs: dict[int, tuple[Unit, float]] = field(default_factory=dict)

    def unit(self, u: Unit) -> float:
        """One unit's tokens (message overhead included) at the ratio, its unseen content
        added, cached for that very unit; a whole number without recorded usage."""
        hit = self._costs.get(id(u))
        if hit is None or hit[0] is not u:
            n: float = count_units([u], self.tok, self.copts)[0].total
            if self.ratio != 1.0:
                n *= self.ratio
            if self.unseen:
                n += self.unseen.get(unit_key(u), 0)
            hit = self._costs[id(u)] = (u, n)
        return hit[1]

    def fixed(self, t: Transcript) -> float:
        """Tokens no message removal changes: tool schemas, reply priming and `extra`."""
        local = count_tool_schemas(t.tools, self.tok, self.copts) + (
            self.copts.reply_priming if t.units else 0
        )
        return self.extra + local * self.ratio

    def total(self, t: Transcript, units: Sequence[Unit] | None = None) -> int:
        """A context's tokens: the fixed part and every unit, rounded once."""
        units = t.units if units is None else units
        return round(self.fixed(t) + sum(self.unit(u) for u in units))

    @classmethod
    def recorded(cls, t: Transcript, tok: Tokenizer, copts: CountOptions = CountOptions()) -> Fit:
        """The fit of `t`'s recorded usage (`recorded_usage`), or a plain count."""
        usage = recorded_usage(t, tok, copts)
        if usage is None:
            return cls(tok, copts)
        return cls(tok, copts, usage.fit.fixed, usage.fit.ratio, dict(usage.unseen_units))


def usage_original(
    t: Transcript, archive: ArchiveRef = None, _depth: int = 0
) -> tuple[Transcript | None, str]:
    """The original whose recorded usage describes a transcript ctxkit compacted, and where it
    was found; (None, "") for a transcript that shows no compaction or whose archive is not at
    hand.

    The original is looked up in `archive` (an open Archive or a path), then in the archive
    `compact` writes beside its output (`<file>.ctx.db`). A file compacted again from a
    compacted input finds the first original through the input's own archive, beside the
    input's path that the archive records."""
    from ctxkit.archive.refs import default_archive_path, first_compacted, piped_archive

    if _depth > _MAX_ARCHIVE_DEPTH or first_compacted(t.units) is None:
        return None, ""
    candidates: list[Any] = [archive] if archive is not None else []
    if t.path and t.path != "-":
        candidates.append(default_archive_path(t.path))
    if archive is None:
        candidates.append(piped_archive())  # a file compact wrote to stdout
    for candidate in candidates:
        original, where = _restored(candidate, t)
        if original is None:
            continue
        if not provider_calls(original) and first_compacted(original.units) is not None:
            # compacted from a compacted input: that input's archive holds the first original
            deeper, further = usage_original(original, None, _depth + 1)
            if deeper is not None:
                return deeper, further
        return original, where
    return None, ""


def _restored(archive: ArchiveRef, t: Transcript) -> tuple[Transcript | None, str]:
    """`t`'s original from an open archive or the archive file at a path (None when it holds
    none), and where it was found."""
    from ctxkit.archive.store import Archive

    if not isinstance(archive, str):
        return _original_in(archive, t), str(getattr(archive, "path", "the archive"))
    if not os.path.isfile(archive):
        return None, ""
    try:
        with Archive(archive, readonly=True, create=False) as opened:
            return _original_in(opened, t), archive
    except CtxkitError:
        return None, ""


def _original_in(archive: Any, t: Transcript) -> Transcript | None:
    try:
        original = archive.restore(t)
    except CtxkitError:
        return None
    return None if original is t else original


def as_written(t: Transcript, fmt: str | None = None) -> Transcript:
    """`t` as it reads back from a file written in `fmt` (default: its own format): what `count`
    of that file sees. A format may join a summary to the request before it, or leave out what it
    cannot carry (reasoning in chat-completions), so this is what a figure about an output is
    measured on."""
    import io

    from ctxkit.formats import read_text, write_transcripts

    buf = io.StringIO()
    write_transcripts([t], buf, fmt)
    try:
        back = read_text(buf.getvalue())
    except CtxkitError:  # a writer's output its reader refuses: the figure stays the one in hand
        return t
    return back[0] if len(back) == 1 else t


@dataclass(frozen=True)
class Measure:
    """The one figure `count`, `guard` and `compact` decide on: ctxkit's count by region, and,
    where the log records the provider's usage, what the fit of it adds (`budget.fit`):

    - the transcript the usage was recorded on: the provider's count at the last call, plus the
      content since at the fitted ratio;
    - a transcript ctxkit compacted (measured on its original): the fixed part plus its content
      at the ratio (what the log never held, such as an @-mentioned file, is not sent again).

    Regions: ctxkit's own, `unlogged` (the fixed part), `unseen` (changes the log does not show,
    at the last call) and `excess` (the rest of the provider's count: its tokenizer against ours,
    reasoning of earlier turns it does not send)."""

    counted: TranscriptCount
    usage: RecordedUsage | None = None
    note: str = ""  # why recorded usage was left out, when it was
    context: int | None = None  # the context now (counted, less reasoning the provider drops)
    kept: int = 0  # a compacted transcript: what the log does not hold that its units still carry

    @property
    def unlogged(self) -> int:
        """The fixed part: every call carries it and the log never shows it."""
        return self.usage.fit.fixed if self.usage is not None else 0

    @property
    def ratio(self) -> float:
        """The provider's tokens per counted token (`budget.fit`; 1 without recorded usage)."""
        return self.usage.fit.ratio if self.usage is not None else 1.0

    @property
    def unseen(self) -> int:
        """What the log does not hold and the context still carries: every change the fit
        found (the transcript it was fitted on), or the growth that came with the units a
        compaction kept unchanged."""
        if self.usage is None:
            return 0
        return self.kept if self.usage.origin else self.usage.fit.unseen

    @property
    def local(self) -> int:
        """ctxkit's own count of what the transcript holds."""
        return self.counted.total

    @property
    def total(self) -> int:
        """The context as the provider sees it (see the class doc)."""
        if self.usage is None:
            return self.counted.total
        fit = self.usage.fit
        now = self.context if self.context is not None else self.counted.total
        if self.usage.origin:
            return fit.fixed + math.ceil(fit.ratio * now - 1e-9) + self.kept
        return fit.last_recorded + math.ceil(fit.ratio * (now - fit.last_counted) - 1e-9)

    @property
    def excess(self) -> int:
        return self.total - self.counted.total - self.unlogged - self.unseen

    @property
    def regions(self) -> dict[str, int]:
        """The local regions, plus `unlogged`, `unseen` and `excess` when recorded usage adds them."""
        regions = dict(self.counted.regions)
        if self.usage is not None:
            for key, value in (("unlogged", self.unlogged), ("unseen", self.unseen), ("excess", self.excess)):
                if value:
                    regions[key] = value
        return regions

    def provider_total(self, local: int) -> int:
        """What a context of `local` counted tokens comes to at this fit (a compaction's result)."""
        if self.usage is None:
            return local
        fit = self.usage.fit
        return fit.fixed + math.ceil(fit.ratio * local - 1e-9)

    def local_budget(self, total: int) -> int:
        """The most counted tokens a context may hold to come to `total` at this fit."""
        if self.usage is None:
            return total
        fit = self.usage.fit
        return math.floor((total - fit.fixed) / fit.ratio + 1e-9)


def measure(
    t: Transcript,
    tok: Tokenizer,
    opts: CountOptions = CountOptions(),
    *,
    usage: bool = True,
    archive: ArchiveRef = None,
    counted: TranscriptCount | None = None,
) -> Measure:
    """Count `t` the way every command decides on it: `count`'s total, `guard`'s used tokens and
    `compact`'s before and after are all `measure(...).total`.

    `usage=False` ignores recorded usage; `archive` is where a compacted transcript's original
    is (default: beside its file); `counted` reuses a count of `t` already made.

    >>> from ctxkit.formats import read_text
    >>> from ctxkit.tokens import get_tokenizer
    >>> (t,) = read_text('[{"role": "user", "content": "hello"}]')
    >>> measure(t, get_tokenizer()).total
    8
    """
    from ctxkit.tokens import count_transcript

    if counted is None:
        counted = count_transcript(t, tok, opts)
    recorded = recorded_usage(t, tok, opts, archive=archive) if usage else None
    note = ""
    if usage and recorded is None and _logged_calls(t):
        from ctxkit.archive.refs import archives_for

        looked = archives_for(t.path, archive if isinstance(archive, str) else None)
        note = (
            f"{transcript_label(t)}: compacted by ctxkit, and its original is in none of "
            f"{', '.join(looked)}: what the log never shows is not counted (the usage its "
            "records carry predates the compaction); give --archive"
        )
    context = context_tokens(t, tok, opts) if recorded is not None else None
    kept = recorded.kept_unseen(t.units) if recorded is not None and recorded.origin else 0
    return Measure(counted, recorded, note, context, kept)


def _logged_calls(t: Transcript) -> list[Any]:
    usage = t.metadata.get("provider_usage") or {}
    calls = usage.get("calls") if isinstance(usage, dict) else None
    return [c for c in calls or [] if isinstance(c, dict) and "input_tokens" in c]


def next_call_errors(
    t: Transcript, tok: Tokenizer, opts: CountOptions = CountOptions()
) -> list[int]:
    """How far off a prediction of each call's input is, when it is made from the previous
    call's recorded usage plus ctxkit's count of what was added since (the way `guard` carries
    recorded usage forward): predicted - recorded, per call after the first."""
    calls = provider_calls(t)
    estimates = estimate_calls(t, tok, opts)
    out = []
    for i in range(1, len(calls)):
        predicted = int(calls[i - 1]["input_tokens"]) + estimates[i] - estimates[i - 1]
        out.append(predicted - int(calls[i]["input_tokens"]))
    return out


# Names that moved to their own modules (see the module doc), importable from here as before.
_MOVED = {
    "CALIBRATION_TOKENIZERS": "ctxkit.calibration",
    "Calibration": "ctxkit.calibration",
    "calibrate_usage": "ctxkit.calibration",
    "Cost": "ctxkit.costs",
    "call_cost": "ctxkit.costs",
    "transcript_cost": "ctxkit.costs",
}


__getattr__ = lazy_names("ctxkit.counting", _MOVED)
