"""Forensics of the compactions already in agent logs: what each one lost and what it cost.

A log read with `include_compacted` holds the agent's own compaction summaries where they were
written (Claude Code `isCompactSummary` records, Codex `compacted` records, OpenHands
condensations, and whatever other readers mark as a `summary` unit). For each one:

- tokens before and after: as the log records them (Claude Code `compactMetadata.preTokens` /
  `postTokens`, else the input of the last call before and the first call after), and as ctxkit
  counts the context before (the previous compaction's summary and kept messages, plus every
  message since) and after (the summary plus the messages the agent kept: Claude Code's
  `preservedMessages`, Codex's `replacement_history`);
- the probes (`fidelity.probes`) of the messages before it that neither the summary nor the kept
  messages carry;
- re-reads: files read after it (up to the next compaction) that had been read before it;
- the summary's size, so growth across repeated compactions shows;
- what it cost, from the log's own usage priced on `models.toml` (`recipes.economics`).

Over many logs, sessions are ordered by what they lost, then by what they cost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.facts import calls as fact_calls
from ctxkit.fidelity.probes import ProbeScore, extract
from ctxkit.formats import FORMATS
from ctxkit.formats.base import recorded_model
from ctxkit.model import Transcript, Unit
from ctxkit.recipes.economics import CompactionEconomics, compaction_economics, points_economics
from ctxkit.recipes.probing import score_in, session_cwd
from ctxkit.tokens import DEFAULT_TOKENIZER, CountOptions, Tokenizer, count_units, get_tokenizer

READ_ACTIONS = ("read",)


@dataclass
class LogCompaction:
    """One compaction the agent made, as its log shows it."""

    number: int  # 1-based, in the session
    unit_index: int  # the summary's index in the units read with include_compacted
    summary_id: str
    trigger: str | None  # auto / manual, where the log says
    recorded_before: int | None  # input tokens as the log records them
    recorded_after: int | None
    tokens_before: int  # ctxkit's count of the context before
    tokens_after: int  # ... and of the summary plus the kept messages
    summary_tokens: int
    kept_messages: int
    history_in_log: bool  # False: the log starts (nearly) at this compaction
    probes: ProbeScore | None
    rereads: list[str] = field(default_factory=list)  # files read again after it
    reread_calls: int = 0
    economics: CompactionEconomics | None = None
    summary_readable: bool = True  # False: the summary is encrypted (Codex remote compaction)

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "unit_index": self.unit_index,
            "summary_id": self.summary_id,
            "trigger": self.trigger,
            "recorded_tokens_before": self.recorded_before,
            "recorded_tokens_after": self.recorded_after,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summary_tokens": self.summary_tokens,
            "summary_readable": self.summary_readable,
            "kept_messages": self.kept_messages,
            "history_in_log": self.history_in_log,
            "probes": self.probes.to_dict() if self.probes is not None else None,
            "rereads": self.rereads,
            "reread_calls": self.reread_calls,
            "economics": self.economics.to_dict() if self.economics is not None else None,
        }


@dataclass
class SessionForensics:
    """Every compaction of one session."""

    transcript_id: str
    source: str
    source_format: str
    model: str | None  # the model the log names
    priced_as: str | None  # the models.toml row that priced it (None: unpriced)
    compactions: list[LogCompaction]
    points: list[dict[str, Any]] = field(default_factory=list)  # compacting at each call
    note: str = ""

    @property
    def lost(self) -> int | None:
        """Probes the compactions lost; None when none could be probed (the history before
        each is not in the log): not the same as nothing lost."""
        probed = [c for c in self.compactions if c.probes is not None]
        return sum(len(c.probes.lost) for c in probed if c.probes is not None) if probed else None

    @property
    def usd(self) -> float:
        return sum(c.economics.usd_cost for c in self.compactions if c.economics is not None)

    @property
    def rereads(self) -> int:
        return sum(len(c.rereads) for c in self.compactions)

    @property
    def summary_growth(self) -> list[int]:
        return [c.summary_tokens for c in self.compactions]

    def to_dict(self) -> dict[str, Any]:
        return {
            "transcript": self.transcript_id,
            "source": self.source,
            "format": self.source_format,
            "model": self.model,
            "priced_as": self.priced_as,
            "compactions": [c.to_dict() for c in self.compactions],
            "lost_probes": self.lost,
            "rereads": self.rereads,
            "summary_tokens": self.summary_growth,
            "usd": round(self.usd, 6),
            "compaction_points": self.points,
            "note": self.note,
        }


# --- what the log says about each compaction ----------------------------------------------------


def kept_records(t: Transcript) -> list[Any]:
    """The log's records that are no units, in file order (`formats.kept`)."""
    kept = t.metadata.get("kept")
    records = kept.get("records") if isinstance(kept, dict) else None
    return [r[2] for r in records or [] if isinstance(r, list) and len(r) == 3]


def _boundaries(t: Transcript, path: str | None) -> dict[str, dict[str, Any]]:
    """Claude Code `compact_boundary` records by uuid (their `compactMetadata`): from the records
    the reader kept, else from the file."""
    out: dict[str, dict[str, Any]] = {}
    for rec in kept_records(t):
        if isinstance(rec, dict) and rec.get("subtype") == "compact_boundary" and rec.get("uuid"):
            meta = rec.get("compactMetadata")
            out[str(rec["uuid"])] = meta if isinstance(meta, dict) else {}
    if out or not path or path == "-":
        return out
    try:
        with open(path, "rb") as f:
            for line in f:
                if b"compact_boundary" not in line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if (
                    isinstance(rec, dict)
                    and rec.get("subtype") == "compact_boundary"
                    and rec.get("uuid")
                ):
                    meta = rec.get("compactMetadata")
                    out[str(rec["uuid"])] = meta if isinstance(meta, dict) else {}
    except OSError:
        return {}
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text") or "")
            for b in content
            if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


def _replacement(raw: Any, stem: str) -> list[Unit]:
    """The messages of a Codex `replacement_history` (the encrypted compaction item left out)."""
    payload = raw.get("payload") if isinstance(raw, dict) else None
    items = payload.get("replacement_history") if isinstance(payload, dict) else None
    out = []
    for k, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, dict) or item.get("type") != "message":
            continue
        role = str(item.get("role") or "user")
        out.append(
            Unit(
                f"{stem}#{k}",
                "system" if role == "developer" else role,
                content=_text(item.get("content")),
            )
        )
    return out


def _encrypted(raw: Any) -> bool:
    payload = raw.get("payload") if isinstance(raw, dict) else None
    items = payload.get("replacement_history") if isinstance(payload, dict) else None
    return isinstance(items, list) and any(
        isinstance(i, dict) and i.get("type") == "compaction" for i in items
    )


def _kept(t: Transcript, summary: Unit, meta: dict[str, Any]) -> list[Unit]:
    """The messages the agent kept beside its summary."""
    if t.source_format == "codex":
        return _replacement(summary.raw, summary.id)
    preserved = meta.get("preservedMessages") if isinstance(meta, dict) else None
    uuids = set(preserved.get("uuids") or []) if isinstance(preserved, dict) else set()
    if uuids:
        return [u for u in t.units if u.id.split("#")[0] in uuids and u is not summary]
    return []


def _trigger(meta: dict[str, Any]) -> str | None:
    value = meta.get("trigger") if isinstance(meta, dict) else None
    return str(value) if value else None


def log_model(t: Transcript) -> str | None:
    """The model the log names (its format's `Format.model`: the newest it records), or None."""
    fmt = FORMATS.get(t.source_format)
    return fmt.model(t) if fmt is not None else recorded_model(t)


_SEARCH_WORDS = frozenset(("grep", "glob", "search", "list", "ls", "find", "dir", "directory"))


def file_reads(actions: Sequence[Any]) -> list[tuple[int, str]]:
    """(unit index, path) of each file a call read: the read action of `facts`, not a search
    tool (grep, glob, ls: they look, they do not read a file) and not a directory (a path that
    other paths of the session lie under)."""
    every = {p for c in actions for p, _ in c.paths}
    dirs = {p for p in every if any(q.startswith(p.rstrip("/") + "/") for q in every if q != p)}
    out: list[tuple[int, str]] = []
    for c in actions:
        if _SEARCH_WORDS & set(re.split(r"[^a-z]+", c.name.lower())):
            continue
        out.extend((c.index, p) for p, act in c.paths if act in READ_ACTIONS and p not in dirs)
    return out


def compaction_points(t: Transcript) -> list[tuple[int, Unit, bool]]:
    """The agent's own compactions in a log read with `include_compacted`, in order: (where it
    sits in the units, its summary, whether that summary is one of the units). A summary unit
    sits at its own index; a compaction the reader kept as a record (Codex's remote compaction,
    whose summary is encrypted) sits after the unit before it, its summary made from its
    `message` (empty when there is none)."""
    out = [(i, u, True) for i, u in enumerate(t.units) if u.type == "summary" and u.raw is not None]
    index = {u.id: i for i, u in enumerate(t.units)}
    kept = t.metadata.get("kept")
    for rec in (kept.get("records") if isinstance(kept, dict) else None) or []:
        if not (isinstance(rec, list) and len(rec) == 3 and isinstance(rec[2], dict)):
            continue
        at, anchor, raw = rec
        if raw.get("type") != "compacted":
            continue
        payload = raw.get("payload") if isinstance(raw.get("payload"), dict) else {}
        message = payload.get("message")
        text = message if isinstance(message, str) else ""
        pos = index[anchor] + 1 if anchor in index else 0
        out.append(
            (pos, Unit(f"compacted@{at}", "user", type="summary", content=text, raw=raw), False)
        )
    out.sort(key=lambda p: p[0])
    return out


# --- the analysis -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForensicsRequest:
    """How to count and price: the tokenizer, and a model to price with when the log's own is
    not in models.toml (or to override it)."""

    tokenizer: Tokenizer | None = None
    count_opts: CountOptions = CountOptions()
    model: str | None = None  # price as this model (models.toml)
    window: int | None = None  # for "could it have carried on": the model's window


def _price(name: str | None, override: str | None) -> Any:
    from ctxkit.budget.models import find_model

    for candidate in (override, name):
        if not candidate:
            continue
        info, _ = find_model(candidate)
        if (
            info is not None
            and info.input_per_mtok is not None
            and info.output_per_mtok is not None
        ):
            return info
        if candidate == override:
            from ctxkit.budget.models import priced_model

            return priced_model(override, "--model")  # a usage error naming the fix
    return None


def analyze(
    t: Transcript, request: ForensicsRequest = ForensicsRequest(), path: str | None = None
) -> SessionForensics:
    """The forensics of one session read with `include_compacted` (see the module doc)."""
    from ctxkit.counting import provider_calls

    tok = request.tokenizer or get_tokenizer(DEFAULT_TOKENIZER)
    units = list(t.units)
    sizes = [c.total for c in count_units(units, tok, request.count_opts)]
    index_of = {id(u): i for i, u in enumerate(units)}
    boundaries = _boundaries(t, path) if t.source_format == "claude-code" else {}
    model = log_model(t)
    price = _price(model, request.model)
    window = request.window
    if window is None:
        from ctxkit.budget.models import find_model

        info, _ = find_model(model or "")
        window = info.context_window if info is not None else None
    usage = provider_calls(t)
    actions = fact_calls(units)
    reads = file_reads(actions)

    cwd = session_cwd(t)
    points = compaction_points(t)
    out: list[LogCompaction] = []
    prev_after: list[Unit] = []
    resume = 0  # the first unit after the previous compaction
    for k, (idx, summary, in_units) in enumerate(points):
        parent = summary.raw.get("parentUuid") if isinstance(summary.raw, dict) else None
        meta = boundaries.get(str(parent), {}) if parent else {}
        kept = _kept(t, summary, meta)
        since = [u for u in units[resume:idx] if u.type != "summary"]
        before_ctx = [*prev_after, *since]
        after_ctx = [summary, *kept]
        history = len([u for u in since if u.role != "system"]) >= 2
        probes = _probes_kept(t, before_ctx, after_ctx, cwd) if history else None
        nxt = points[k + 1][0] if k + 1 < len(points) else len(units)
        rereads, reread_calls = _rereads(reads, idx, nxt)
        count = lambda us: t.replace(units=list(us))  # noqa: E731
        tokens_before = _count(count(before_ctx), tok, request.count_opts)
        tokens_after = _count(count(after_ctx), tok, request.count_opts)
        readable = not _encrypted(summary.raw)
        summary_tokens = (
            0
            if not readable
            else sizes[index_of[id(summary)]]
            if in_units
            else _count(count([summary]), tok, request.count_opts)
        )
        rec_before, rec_after, first_after = _recorded_around(meta, usage, idx)
        horizon = [c for c in first_after if int(c.get("after_unit", -1)) < nxt]
        econ = None
        if price is not None and rec_before is not None and horizon:
            econ = compaction_economics(price, rec_before, summary_tokens, horizon, window)
        out.append(
            LogCompaction(
                number=k + 1,
                unit_index=idx,
                summary_id=summary.id,
                trigger=_trigger(meta),
                recorded_before=rec_before,
                recorded_after=rec_after,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                summary_tokens=summary_tokens,
                kept_messages=len(kept),
                history_in_log=history,
                probes=probes,
                rereads=rereads,
                reread_calls=reread_calls,
                economics=econ,
                summary_readable=readable,
            )
        )
        prev_after, resume = after_ctx, idx + 1 if in_units else idx
    note = _price_note(model, price, request.model)
    pts: list[dict[str, Any]] = []
    if price is not None and usage:
        pts = points_economics(
            price,
            usage,
            [p[0] for p in points],
            summary_tokens=_median([c.summary_tokens for c in out]) or 3_000,
            after_tokens=_median([c.recorded_after for c in out if c.recorded_after]),
            window=window,
        )
    return SessionForensics(
        t.id,
        path or t.path or "",
        t.source_format,
        model,
        price.name if price is not None else None,
        out,
        pts,
        note,
    )


def _probes_kept(
    t: Transcript, before: Sequence[Unit], after: Sequence[Unit], cwd: str | None
) -> ProbeScore:
    """The fidelity probes of the context before a compaction, scored in the context after it."""
    probes = extract([u for u in before if u.type != "summary"])
    return score_in(probes, t.replace(units=list(after)), cwd)


def _rereads(reads: Sequence[tuple[int, str]], idx: int, nxt: int) -> tuple[list[str], int]:
    """The files read again between the compaction at unit `idx` and the next (at `nxt`) that
    were read before it, and how many calls read them."""
    earlier = {p for i, p in reads if i < idx}
    again = [(i, p) for i, p in reads if idx <= i < nxt and p in earlier]
    return sorted({p for _, p in again}), len(again)


def _recorded_around(
    meta: dict[str, Any], usage: Sequence[dict[str, Any]], idx: int
) -> tuple[int | None, int | None, list[dict[str, Any]]]:
    """What the provider counted around the compaction at unit `idx`: Claude Code's boundary
    (`preTokens`, `postTokens`), else the last recorded call before it and the first after;
    and the recorded calls from it on."""
    last_before = [c for c in usage if int(c.get("after_unit", -1)) < idx]
    first_after = [c for c in usage if int(c.get("after_unit", -1)) >= idx]
    rec_before = (
        meta.get("preTokens")
        if isinstance(meta.get("preTokens"), int)
        else (int(last_before[-1]["input_tokens"]) if last_before else None)
    )
    rec_after = (
        meta.get("postTokens")
        if isinstance(meta.get("postTokens"), int)
        else (int(first_after[0]["input_tokens"]) if first_after else None)
    )
    return rec_before, rec_after, first_after


def _price_note(model: str | None, price: Any, override: str | None) -> str:
    """For people: a log's model that has no prices, or the --model it was priced as."""
    if model and price is None:
        return f"{model} has no prices in models.toml: give --model to price it"
    if price is not None and model and price.name not in (model or "") and override:
        return f"priced as {price.name} (--model)"
    return ""


def _count(t: Transcript, tok: Tokenizer, opts: CountOptions) -> int:
    from ctxkit.tokens import count_transcript

    return count_transcript(t, tok, opts).total


def _median(values: Sequence[int | None]) -> int | None:
    xs = sorted(v for v in values if v is not None)
    return xs[len(xs) // 2] if xs else None


def read_sessions(paths: Iterable[str], read_opts: Any = None) -> Iterator[tuple[str, Transcript]]:
    """(path, session) for every session of every path, read with `include_compacted`, so what
    the agent's own compactions replaced is there (`forensics`, `replay`)."""
    from dataclasses import replace

    from ctxkit.formats import expand_paths, read_path
    from ctxkit.formats.common import ReadOptions

    opts = (
        replace(read_opts, include_compacted=True)
        if read_opts is not None
        else ReadOptions(include_compacted=True)
    )
    for path in expand_paths(list(paths)):
        for t in read_path(path, opts):
            yield path, t


def analyze_paths(
    paths: Iterable[str],
    request: ForensicsRequest = ForensicsRequest(),
    *,
    read_opts: Any = None,
) -> list[SessionForensics]:
    """Forensics of every session in `paths` that holds a compaction, the sessions that lost
    the most probes first, then the costliest."""
    out = [analyze(t, request, path) for path, t in read_sessions(paths, read_opts) if compaction_points(t)]
    out.sort(key=lambda s: (-(s.lost or 0), -s.usd, s.source))
    return out


__all__ = [
    "ForensicsRequest",
    "LogCompaction",
    "SessionForensics",
    "analyze",
    "analyze_paths",
    "read_sessions",
    "compaction_points",
    "log_model",
]
