"""A checked-in token budget: the regions of every transcript and prompt file, and how much each
may grow before a pull request fails (`count --save-baseline`, `guard --baseline`, `count --diff`).

A baseline file is JSON (sorted keys, one key per line, so a change to it reads well in review):

    {"ctxkit_baseline": 1, "tokenizer": "cl100k_base", "count_options": {...},
     "allow": {"*": "2%", "tools": "0"},
     "entries": {"prompts/system.md": {"kind": "prompt", "system": 1256, ..., "sections": [...]}}}

Each entry holds the tokens of each region (system, tools, summary, history, unlogged) and the
total under the named tokenizer; a prompt file also its sections (name, line, tokens), so a diff
can say which section grew and where. `allow` is the budget: per region, the growth that still
passes, in tokens (`200`) or percent of the baseline (`5%`); `*` is every region but `total`,
which is gated only when named. A region over its allowance is a regression: `guard` exits 7.

    >>> a = Entry("p.md", "prompt", "prompt", {"system": 1000, "total": 1000})
    >>> b = Entry("p.md", "prompt", "prompt", {"system": 1500, "total": 1500})
    >>> d = compare_entry(a, b, {"*": Allowance(percent=2.0)})
    >>> d.status, [(r.region, r.delta, r.limit, r.status) for r in d.regions if r.delta]
    ('over', [('system', 500, 20, 'over'), ('total', 500, None, 'grew')])
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.errors import InputError, UsageError
from ctxkit.model import Transcript
from ctxkit.tokens import CountOptions, Tokenizer

MARKER = "ctxkit_baseline"
VERSION = 1
GATED_REGIONS = ("system", "tools", "summary", "history", "unlogged")
REGION_KEYS = (*GATED_REGIONS, "total")
EXIT_REGRESSION = 7  # `guard --baseline`: a region grew beyond its allowance


# --- allowances --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Allowance:
    """How much a region may grow over its baseline: `tokens`, or `percent` of the baseline."""

    tokens: int | None = None
    percent: float | None = None

    @classmethod
    def parse(cls, spec: str, where: str = "--allow") -> Allowance:
        """`200` (tokens) or `5%` (of the baseline); a bad value names `where`."""
        text = str(spec).strip()
        try:
            if text.endswith("%"):
                pct = float(text[:-1])
                if not math.isfinite(pct) or pct < 0:
                    raise ValueError
                return cls(percent=pct)
            tokens = int(text)
            if tokens < 0:
                raise ValueError
            return cls(tokens=tokens)
        except ValueError:
            raise UsageError(
                f"{where}: {spec!r} is not an allowance; give tokens (200) or a percent of the "
                "baseline (5%), zero or more"
            ) from None

    def limit(self, before: int) -> int:
        """The growth in tokens that still passes over a baseline of `before` tokens."""
        if self.percent is not None:
            return math.floor(before * self.percent / 100)
        return self.tokens or 0

    def __str__(self) -> str:
        if self.percent is not None:
            return f"{self.percent:g}%"
        return str(self.tokens or 0)


DEFAULT_ALLOW: dict[str, Allowance] = {"*": Allowance(percent=2.0)}


def parse_allow(items: Sequence[str], where: str = "--allow") -> dict[str, Allowance]:
    """`REGION=SPEC` items (`system=200`, `tools=5%`, `*=0`; a bare `SPEC` is `*=SPEC`)."""
    out: dict[str, Allowance] = {}
    for item in items:
        region, sep, spec = item.partition("=")
        if not sep:
            region, spec = "*", item
        region = region.strip()
        if region not in ("*", *REGION_KEYS):
            raise UsageError(
                f"{where}: unknown region {region!r}; known: *, {', '.join(REGION_KEYS)}"
            )
        out[region] = Allowance.parse(spec, f"{where} {item}")
    return out


def allowance_for(allow: Mapping[str, Allowance], region: str) -> Allowance | None:
    """The allowance of a region: its own, else `*` (which never covers `total`)."""
    if region in allow:
        return allow[region]
    return allow.get("*") if region != "total" else None


# --- entries and baselines ---------------------------------------------------------------------


@dataclass(frozen=True)
class SectionCount:
    """Tokens of one section of a prompt, and the line where it starts."""

    name: str
    line: int
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "line": self.line, "tokens": self.tokens}


@dataclass(frozen=True)
class Entry:
    """The measured regions of one transcript or prompt file."""

    key: str
    kind: str  # transcript | prompt
    format: str | None
    regions: dict[str, int]
    sections: tuple[SectionCount, ...] = ()
    line: int | None = None  # the conversation's line in a dataset file

    @property
    def path(self) -> str:
        return self.key.rsplit(":", 1)[0] if self.line is not None else self.key

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "format": self.format}
        d.update({k: self.regions.get(k, 0) for k in REGION_KEYS})
        if self.sections:
            d["sections"] = [s.to_dict() for s in self.sections]
        return d

    @classmethod
    def from_dict(cls, key: str, d: Mapping[str, Any]) -> Entry:
        sections = tuple(
            SectionCount(str(s["name"]), int(s.get("line", 1)), int(s["tokens"]))
            for s in d.get("sections") or ()
        )
        head, _, tail = key.rpartition(":")
        line = int(tail) if head and tail.isdigit() else None
        regions = {k: int(d.get(k) or 0) for k in REGION_KEYS}
        return cls(key, str(d.get("kind", "transcript")), d.get("format"), regions, sections, line)


@dataclass(frozen=True)
class Baseline:
    """Entries measured under one tokenizer, and the allowances that gate them."""

    tokenizer: str
    entries: dict[str, Entry]
    allow: dict[str, Allowance] = field(default_factory=lambda: dict(DEFAULT_ALLOW))
    count_options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            MARKER: VERSION,
            "tokenizer": self.tokenizer,
            "count_options": dict(self.count_options),
            "allow": {k: str(v) for k, v in self.allow.items()},
            "entries": {k: e.to_dict() for k, e in sorted(self.entries.items())},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "baseline") -> Baseline:
        if d.get(MARKER) != VERSION:
            raise InputError(where, None, f"not a ctxkit baseline (no \"{MARKER}\": {VERSION})")
        entries = d.get("entries")
        if not isinstance(entries, dict):
            raise InputError(where, None, "\"entries\" must be an object of file -> regions")
        allow_raw = d.get("allow") or {}
        if not isinstance(allow_raw, dict):
            raise InputError(where, None, "\"allow\" must be an object of region -> allowance")
        try:
            allow = parse_allow([f"{k}={v}" for k, v in allow_raw.items()], f"{where}: allow")
            parsed = {str(k): Entry.from_dict(str(k), v) for k, v in entries.items()}
        except UsageError as exc:
            raise InputError(where, None, str(exc).split(": ", 1)[-1]) from None
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise InputError(where, None, f"an entry is malformed ({exc})") from None
        return cls(
            tokenizer=str(d.get("tokenizer") or ""),
            entries=parsed,
            allow=allow,
            count_options=dict(d.get("count_options") or {}),
        )

    def dumps(self) -> bytes:
        import orjson

        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def entry_key(t: Transcript) -> str:
    """A transcript's key in a baseline: its path as given, normalised (`./a//b` is `a/b`), with
    `:line` for a conversation of a dataset."""
    from ctxkit.counting import transcript_label

    label = transcript_label(t)
    path = t.path or "<stdin>"
    if path in ("-", "<stdin>"):
        return label
    norm = os.path.normpath(path).replace(os.sep, "/")
    return norm + label[len(path) :]


def measure(
    t: Transcript, tok: Tokenizer, opts: CountOptions = CountOptions(), *, use_usage: bool = True
) -> Entry:
    """The entry of one transcript or prompt file: its regions (`counting.count_row`: recorded
    usage gives `unlogged`) and, for a prompt, the tokens of each section."""
    from ctxkit.counting import count_row

    return entry_of(t, count_row(t, tok, opts, usage=use_usage), tok)


def entry_of(t: Transcript, row: Mapping[str, Any], tok: Tokenizer) -> Entry:
    """The entry of a transcript from its `count` row (`counting.region_row`)."""
    from ctxkit.gates.prompts import PROMPT_FORMAT, sections_of

    regions = {k: int(row.get(k) or 0) for k in REGION_KEYS}
    kind = "prompt" if t.source_format == PROMPT_FORMAT else "transcript"
    sections: tuple[SectionCount, ...] = ()
    if kind == "prompt":
        found = sections_of(t)
        counts = tok.count_many([s.content for s in found]) if found else []
        sections = tuple(SectionCount(s.name, s.line, n) for s, n in zip(found, counts, strict=True))
    line = t.line if t.layout == "dataset" else None
    return Entry(entry_key(t), kind, t.source_format, regions, sections, line)


def count_options_of(opts: CountOptions) -> dict[str, Any]:
    """The counting constants a baseline records (a check with other ones would not compare)."""
    return {"image_tokens": opts.image_tokens, "tool_schema_scale": opts.tool_schema_scale}


def is_baseline_file(path: str) -> bool:
    """Whether a file is a ctxkit baseline (a JSON object with the marker key)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and f'"{MARKER}"'.encode() in head


def load_baseline(path: str) -> Baseline:
    """A baseline file, or an `InputError` naming the file, the line and what is wrong."""
    import orjson

    from ctxkit.formats.extras import line_of, read_text_file

    text = read_text_file(path)
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, line_of(text, exc.pos), f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise InputError(path, None, "not a ctxkit baseline (expected a JSON object)")
    return Baseline.from_dict(data, path)


def save_baseline(path: str, baseline: Baseline) -> None:
    """Write a baseline atomically (an interrupted run leaves the old file whole)."""
    from ctxkit.atomic import write_output

    write_output(path, baseline.dumps())


def save_entries(
    path: str,
    entries: Sequence[Entry],
    tokenizer: str | None,
    opts: CountOptions,
    allow: Mapping[str, Allowance] | None = None,
) -> Baseline:
    """`count --save-baseline`: write the entries measured with `tokenizer` (a spec; None is the
    default); the allowances already in `path` are kept, `allow` overrides them."""
    from ctxkit.tokens import DEFAULT_TOKENIZER

    kept = load_baseline(path).allow if os.path.exists(path) and is_baseline_file(path) else DEFAULT_ALLOW
    baseline = Baseline(
        tokenizer=tokenizer or DEFAULT_TOKENIZER,
        entries={e.key: e for e in entries},
        allow={**kept, **(allow or {})},
        count_options=count_options_of(opts),
    )
    save_baseline(path, baseline)
    return baseline


# --- comparison --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegionDiff:
    """One region of one entry, before and after."""

    region: str
    before: int
    after: int
    allowed: Allowance | None  # None: shown, not gated

    @property
    def delta(self) -> int:
        return self.after - self.before

    @property
    def pct(self) -> float | None:
        return round(100 * self.delta / self.before, 1) if self.before else None

    @property
    def limit(self) -> int | None:
        """The growth that passes, in tokens (None when the region is not gated)."""
        return self.allowed.limit(self.before) if self.allowed is not None else None

    @property
    def status(self) -> str:
        """same, shrank, grew (within the allowance, or not gated) or over."""
        if self.delta == 0:
            return "same"
        if self.delta < 0:
            return "shrank"
        limit = self.limit
        return "over" if limit is not None and self.delta > limit else "grew"

    def to_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "before": self.before,
            "after": self.after,
            "delta": self.delta,
            "delta_pct": self.pct,
            "allowed": self.limit,
            "allowance": str(self.allowed) if self.allowed is not None else None,
            "status": self.status,
        }


@dataclass(frozen=True)
class SectionDiff:
    """One section of a prompt, before and after (None: added or removed)."""

    name: str
    line: int
    before: int | None
    after: int | None

    @property
    def delta(self) -> int:
        return (self.after or 0) - (self.before or 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "line": self.line,
            "before": self.before,
            "after": self.after,
            "delta": self.delta,
        }


@dataclass(frozen=True)
class EntryDiff:
    """An entry against its baseline: `ok`, `over` (a region beyond its allowance), `new` (not in
    the baseline) or `missing` (in the baseline, not checked)."""

    key: str
    kind: str
    status: str
    regions: tuple[RegionDiff, ...] = ()
    sections: tuple[SectionDiff, ...] = ()
    line: int | None = None

    @property
    def path(self) -> str:
        return self.key.rsplit(":", 1)[0] if self.line is not None else self.key

    @property
    def over(self) -> list[RegionDiff]:
        return [r for r in self.regions if r.status == "over"]

    @property
    def at_line(self) -> int:
        """The line to point at: the start of the section that grew most, else the
        conversation's line in its dataset, else 1."""
        grown = [s for s in self.sections if s.delta > 0]
        if grown:
            return max(grown, key=lambda s: (s.delta, -s.line)).line
        return self.line or 1

    def summary(self) -> str:
        """One line for people and annotations."""
        if self.status == "new":
            return "not in the baseline (save a new baseline to gate it)"
        if self.status == "missing":
            return "in the baseline but not checked"
        parts = []
        for r in self.over or [r for r in self.regions if r.delta and r.region != "total"]:
            pct = f", {r.pct:+.1f}%" if r.pct is not None else ""
            part = f"{r.region} {r.delta:+,} tokens ({r.before:,} -> {r.after:,}{pct})"
            if r.status == "over":
                part += f", allowed +{r.limit:,} ({r.allowed})"
            parts.append(part)
        grown = sorted((s for s in self.sections if s.delta > 0), key=lambda s: -s.delta)
        if grown and self.over:
            s = grown[0]
            parts.append(
                f"section {s.name!r} (line {s.line}) "
                + (f"{s.delta:+,}" if s.before is not None else f"added, {s.delta:,} tokens")
            )
        return "; ".join(parts) if parts else "unchanged"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "status": self.status,
            "line": self.at_line,
            "regions": [r.to_dict() for r in self.regions],
            "sections": [s.to_dict() for s in self.sections if s.delta],
        }


def _section_diffs(before: Sequence[SectionCount], after: Sequence[SectionCount]) -> list[SectionDiff]:
    """Sections matched by name, in order (a name used twice matches in turn)."""
    pool: dict[str, list[SectionCount]] = {}
    for s in before:
        pool.setdefault(s.name, []).append(s)
    out = []
    for s in after:
        match = pool.get(s.name)
        old = match.pop(0) if match else None
        out.append(SectionDiff(s.name, s.line, old.tokens if old else None, s.tokens))
    for rest in pool.values():
        out.extend(SectionDiff(s.name, s.line, s.tokens, None) for s in rest)
    return out


def compare_entry(
    before: Entry | None, after: Entry | None, allow: Mapping[str, Allowance]
) -> EntryDiff:
    """One entry against its baseline entry (either may be missing)."""
    if after is None and before is None:
        raise ValueError("compare_entry needs an entry")
    if before is None:
        assert after is not None
        regions = tuple(
            RegionDiff(k, 0, after.regions.get(k, 0), None) for k in REGION_KEYS
        )
        return EntryDiff(after.key, after.kind, "new", regions, (), after.line)
    if after is None:
        regions = tuple(RegionDiff(k, before.regions.get(k, 0), 0, None) for k in REGION_KEYS)
        return EntryDiff(before.key, before.kind, "missing", regions, (), before.line)
    regions = tuple(
        RegionDiff(k, before.regions.get(k, 0), after.regions.get(k, 0), allowance_for(allow, k))
        for k in REGION_KEYS
    )
    both = before.sections and after.sections  # a transcript against a prompt has no sections to match
    sections = tuple(_section_diffs(before.sections, after.sections)) if both else ()
    status = "over" if any(r.status == "over" for r in regions) else "ok"
    return EntryDiff(after.key, after.kind, status, regions, sections, after.line)


def compare(
    baseline: Baseline, entries: Sequence[Entry], allow: Mapping[str, Allowance] | None = None
) -> list[EntryDiff]:
    """Each measured entry against the baseline, in order, then the baseline's entries that were
    not measured (`missing`); `allow` overrides the baseline's allowances region by region."""
    rules = {**baseline.allow, **(allow or {})}
    seen = set()
    out = []
    for e in entries:
        seen.add(e.key)
        out.append(compare_entry(baseline.entries.get(e.key), e, rules))
    for key, e in baseline.entries.items():
        if key not in seen:
            out.append(compare_entry(e, None, rules))
    return out


def diff_rows(diffs: Sequence[EntryDiff], *, changed_only: bool = True) -> list[dict[str, Any]]:
    """The diff table: a row per region of each entry (with `changed_only`, the regions that
    changed, and only the total of a new or missing entry)."""
    rows = []
    for d in diffs:
        measured = d.status in ("ok", "over")
        for r in d.regions:
            if changed_only and (r.delta == 0 if measured else r.region != "total"):
                continue
            rows.append(
                {
                    "file": d.key,
                    "region": r.region,
                    "before": r.before if d.status != "new" else None,
                    "after": r.after if d.status != "missing" else None,
                    "delta": r.delta if measured else None,
                    "delta %": r.pct if measured else None,
                    "allowed": f"+{r.limit:,} ({r.allowed})" if measured and r.limit is not None else None,
                    "status": r.status if measured else d.status,
                }
            )
    return rows


# --- runs --------------------------------------------------------------------------------------


def resolve_counting(
    recorded: Mapping[str, Any], image_tokens: int | None, tool_schema_scale: float | None, where: str
) -> CountOptions:
    """The counting constants of a check against a baseline: the recorded ones, and a flag that
    sets another value is an error (the counts would not compare)."""
    defaults = CountOptions()
    opts = CountOptions(
        image_tokens=int(recorded.get("image_tokens", defaults.image_tokens)),
        tool_schema_scale=float(recorded.get("tool_schema_scale", defaults.tool_schema_scale)),
    )
    for flag, given, kept in (
        ("--image-tokens", image_tokens, opts.image_tokens),
        ("--tool-schema-scale", tool_schema_scale, opts.tool_schema_scale),
    ):
        if given is not None and given != kept:
            raise UsageError(
                f"{flag} {given:g} differs from the {kept:g} {where} was recorded with; the "
                "counts would not compare (save a new baseline to change it)"
            )
    return opts


def resolve_tokenizer(recorded: str, given: str | None, where: str) -> str:
    """The tokenizer of a check against a baseline: the recorded one (another is an error)."""
    if given is not None and given != recorded:
        raise UsageError(
            f"--tokenizer {given} differs from {recorded}, which {where} was recorded with; the "
            "counts would not compare (save a new baseline to change it)"
        )
    return recorded


@dataclass
class BaselineCheck:
    """A run of `guard --baseline`: transcripts measured as they come, compared at the end."""

    baseline: Baseline
    path: str
    tok: Tokenizer
    opts: CountOptions
    allow: dict[str, Allowance] = field(default_factory=dict)
    use_usage: bool = True
    entries: list[Entry] = field(default_factory=list)

    @classmethod
    def open(
        cls,
        path: str,
        *,
        allow: Mapping[str, Allowance] | None = None,
        tokenizer: str | None = None,
        image_tokens: int | None = None,
        tool_schema_scale: float | None = None,
        use_usage: bool = True,
    ) -> BaselineCheck:
        """Load the baseline and the tokenizer it was recorded with (flags must agree)."""
        from ctxkit.tokens import get_tokenizer

        baseline = load_baseline(path)
        spec = resolve_tokenizer(baseline.tokenizer, tokenizer, path)
        opts = resolve_counting(baseline.count_options, image_tokens, tool_schema_scale, path)
        return cls(baseline, path, get_tokenizer(spec), opts, dict(allow or {}), use_usage)

    def add(self, t: Transcript) -> Entry:
        entry = measure(t, self.tok, self.opts, use_usage=self.use_usage)
        self.entries.append(entry)
        return entry

    def diffs(self) -> list[EntryDiff]:
        return compare(self.baseline, self.entries, self.allow)


def diff_sides(
    a: str,
    b: str,
    read: Any,
    *,
    tokenizer: str | None = None,
    image_tokens: int | None = None,
    tool_schema_scale: float | None = None,
    allow: Mapping[str, Allowance] | None = None,
    use_usage: bool = True,
) -> tuple[list[EntryDiff], str]:
    """`count --diff A B`: each side a baseline file or an input (transcript or prompt file)
    measured here; entries pair by key, or in order when the two sides share no key. `read`
    turns a path into transcripts. Returns the diffs and the tokenizer they were counted with."""
    from ctxkit.tokens import DEFAULT_TOKENIZER, get_tokenizer

    baselines = {p: load_baseline(p) for p in (a, b) if is_baseline_file(p)}
    recorded = {bl.tokenizer for bl in baselines.values()}
    if len(recorded) > 1:
        raise UsageError(f"{a} and {b} were recorded with different tokenizers ({', '.join(sorted(recorded))})")
    spec = resolve_tokenizer(recorded.pop(), tokenizer, "the baseline") if recorded else (tokenizer or DEFAULT_TOKENIZER)
    counting = next(iter(baselines.values())).count_options if baselines else {}
    opts = resolve_counting(counting, image_tokens, tool_schema_scale, "the baseline")
    tok = get_tokenizer(spec)

    def side(p: str) -> list[Entry]:
        if p in baselines:
            return list(baselines[p].entries.values())
        return [measure(t, tok, opts, use_usage=use_usage) for t in read(p)]

    before, after = side(a), side(b)
    rules = {**(baselines[a].allow if a in baselines else DEFAULT_ALLOW), **(allow or {})}
    keys_a = {e.key: e for e in before}
    if any(e.key in keys_a for e in after):
        diffs = [compare_entry(keys_a.get(e.key), e, rules) for e in after]
        if b in baselines:  # a file checked against a baseline leaves the rest of it alone
            seen = {e.key for e in after}
            diffs += [compare_entry(e, None, rules) for e in before if e.key not in seen]
        return diffs, spec
    diffs = []
    for i in range(max(len(before), len(after))):
        old = before[i] if i < len(before) else None
        new = after[i] if i < len(after) else None
        if old is not None and new is not None and old.key != new.key:
            key = f"{old.key} -> {new.key}"
            old = Entry(key, old.kind, old.format, old.regions, old.sections, new.line)
            new = Entry(key, new.kind, new.format, new.regions, new.sections, new.line)
        diffs.append(compare_entry(old, new, rules))
    return diffs, spec


def regression_exit(diffs: Sequence[EntryDiff]) -> int:
    """7 when any entry is over its allowance, else 0."""
    return EXIT_REGRESSION if any(d.status == "over" for d in diffs) else 0
