"""The prompt-cache layout of a system prompt given as sections: how much of it a provider can
serve from its cache, where a dynamic section breaks that, and what each call costs.

Providers cache exact prefixes: a call reads from the cache the longest prefix that an earlier
call wrote, up to the first token that differs (Anthropic caches up to a `cache_control`
breakpoint, OpenAI any prefix from 1,024 tokens on). A section that changes per call (a date, a
user name, retrieved notes) therefore ends the cacheable prefix where it stands, and every
cacheable section after it is paid in full on every call. Moving dynamic sections to the end
keeps the rest cached.

    >>> from ctxkit.gates.prompts import Section
    >>> from ctxkit.tokens import get_tokenizer
    >>> parts = [Section("rules", "r" * 8000), Section("date", "d" * 400, cacheable=False),
    ...          Section("tools", "t" * 8000)]
    >>> lay = cache_layout(parts, get_tokenizer("approx"))
    >>> lay.prefix_tokens, lay.break_at.name, lay.lost_tokens, lay.fixed_prefix_tokens
    (2000, 'date', 2000, 4000)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ctxkit.tokens import Tokenizer

# The shortest prefix a provider caches (Anthropic: 1,024 tokens on Sonnet and Opus, more on
# some Haiku and Opus models; OpenAI: 1,024). A prefix below it is not cached at all. A models.toml
# row may say otherwise (`min_cacheable_tokens`).
DEFAULT_MIN_CACHEABLE = 1024



class Section(Protocol):
    """What the layout reads of a prompt section (`gates.prompts.Section` has it; the budget
    stays a leaf below the gates, so it is not imported here)."""

    @property
    def name(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def cacheable(self) -> bool: ...

    @property
    def line(self) -> int: ...

@dataclass(frozen=True)
class SectionLayout:
    """One section: its tokens, where it starts (tokens before it) and whether it is cached."""

    name: str
    line: int
    cacheable: bool
    tokens: int
    start: int
    cached: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "section": self.name,
            "line": self.line,
            "cacheable": self.cacheable,
            "tokens": self.tokens,
            "start": self.start,
            "cached": self.cached,
        }


@dataclass(frozen=True)
class CacheLayout:
    """The sections in order, the cacheable prefix, and the first dynamic section (`break_at`)."""

    sections: tuple[SectionLayout, ...]
    min_cacheable: int

    @property
    def total_tokens(self) -> int:
        return sum(s.tokens for s in self.sections)

    @property
    def break_at(self) -> SectionLayout | None:
        """The first section that is not cacheable and has cacheable sections after it."""
        for i, s in enumerate(self.sections):
            if not s.cacheable:
                return s if any(x.cacheable for x in self.sections[i + 1 :]) else None
        return None

    @property
    def _prefix(self) -> int:
        out = 0
        for s in self.sections:
            if not s.cacheable:
                break
            out += s.tokens
        return out

    @property
    def prefix_tokens(self) -> int:
        """Tokens served from the cache as laid out (0 below the provider's minimum)."""
        n = self._prefix
        return n if n >= self.min_cacheable else 0

    @property
    def lost_tokens(self) -> int:
        """Cacheable tokens after the break, paid in full on every call."""
        b = self.break_at
        return sum(s.tokens for s in self.sections if s.cacheable and s.start > b.start) if b else 0

    @property
    def fixed_prefix_tokens(self) -> int:
        """Tokens served from the cache once every dynamic section is moved to the end."""
        n = sum(s.tokens for s in self.sections if s.cacheable)
        return n if n >= self.min_cacheable else 0

    def rows(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.sections]

    def to_dict(self) -> dict[str, Any]:
        b = self.break_at
        return {
            "total_tokens": self.total_tokens,
            "prefix_tokens": self.prefix_tokens,
            "break_at": {"section": b.name, "line": b.line} if b else None,
            "lost_tokens": self.lost_tokens,
            "fixed_prefix_tokens": self.fixed_prefix_tokens,
            "min_cacheable": self.min_cacheable,
            "sections": self.rows(),
        }


def cache_layout(
    sections: Sequence[Section], tok: Tokenizer, min_cacheable: int = DEFAULT_MIN_CACHEABLE
) -> CacheLayout:
    """Count each section (alone) and mark what a prefix cache keeps."""
    counts = tok.count_many([s.content for s in sections]) if sections else []
    out = []
    start = 0
    prefix_open = True
    for s, n in zip(sections, counts, strict=True):
        prefix_open = prefix_open and s.cacheable
        out.append(SectionLayout(s.name, s.line, s.cacheable, n, start, prefix_open))
        start += n
    layout = CacheLayout(tuple(out), min_cacheable)
    if layout._prefix < min_cacheable:  # too short to be cached at all
        layout = CacheLayout(tuple(_uncached(x) for x in out), min_cacheable)
    return layout


def _uncached(s: SectionLayout) -> SectionLayout:
    return SectionLayout(s.name, s.line, s.cacheable, s.tokens, s.start, False)


@dataclass(frozen=True)
class LayoutCost:
    """USD per call for the system prompt on one model: as laid out (warm cache), with the
    dynamic sections moved to the end (warm), the first call (cold) and with no cache at all."""

    model: str
    as_laid_out: float
    fixed: float
    cold: float
    uncached: float

    @property
    def saving(self) -> float:
        """What moving the dynamic sections to the end saves on each call."""
        return self.as_laid_out - self.fixed

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "usd_per_call": round(self.as_laid_out, 8),
            "usd_per_call_without_break": round(self.fixed, 8),
            "usd_saved_per_1k_calls": round(1000 * self.saving, 6),
            "usd_first_call": round(self.cold, 8),
            "usd_per_call_uncached": round(self.uncached, 8),
        }


def layout_cost(layout: CacheLayout, model: Any) -> LayoutCost:
    """Price a layout on `model` (a `budget.models.ModelInfo` with prices): a warm call reads the
    cached prefix at the cached-input price and pays the rest as input; the first call writes
    the prefix (Anthropic bills cache writes; OpenAI and Google bill them as input)."""
    from ctxkit.budget.models import call_cost

    total = layout.total_tokens
    warm = call_cost(model, total - layout.prefix_tokens, layout.prefix_tokens, 0, 0)
    fixed = call_cost(model, total - layout.fixed_prefix_tokens, layout.fixed_prefix_tokens, 0, 0)
    if model.cache_write_per_mtok is not None:
        cold = call_cost(model, total - layout.prefix_tokens, 0, layout.prefix_tokens, 0)
    else:
        cold = call_cost(model, total, 0, 0, 0)
    return LayoutCost(model.name, warm, fixed, cold, call_cost(model, total, 0, 0, 0))


def min_cacheable_for(model: Any) -> int:
    """The shortest prefix a model caches: its models.toml row's, else 1,024."""
    value = getattr(model, "min_cacheable_tokens", None)
    return int(value) if value else DEFAULT_MIN_CACHEABLE


def layout_row(label: str, layout: CacheLayout, cost: LayoutCost) -> dict[str, Any]:
    """`count --cost` for a prompt file: one row per model."""
    b = layout.break_at
    return {
        "prompt": label,
        "model": cost.model,
        "tokens": layout.total_tokens,
        "cached prefix": layout.prefix_tokens,
        "break at": f"{b.name} (line {b.line})" if b else None,
        "lost to the break": layout.lost_tokens,
        "$ per call": round(cost.as_laid_out, 6),
        "$ without break": round(cost.fixed, 6),
        "$ saved per 1k calls": round(1000 * cost.saving, 4),
        "$ first call": round(cost.cold, 6),
        "$ uncached": round(cost.uncached, 6),
    }
