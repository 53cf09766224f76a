"""Cache economics of compaction, from a log's recorded usage: what compacting cost against
carrying the tokens on, prompt caching included.

A provider's prompt cache serves the prefix a call shares with the call before; compaction
rewrites the context, so the first call after it writes its whole context to the cache again
(billed as a cache write where the provider bills one, Anthropic at 1.25x input) instead of
reading it (0.1x). Compacting also costs the summarizing call itself: the context read once more
(from the cache) and the summary written as output. What it buys: every later call carries
fewer tokens. So a compaction pays for itself only when enough calls follow it.

For a compaction in the log (`compaction_economics`) the calls after it are priced as recorded,
and against them the same calls had nothing been compacted: each `D` tokens larger (the tokens
the compaction removed, measured from the recorded inputs before and after), the first one
reading the old prefix from the cache and writing only what is new. `points_economics` asks the
same of every recorded call: had the agent compacted there, to the size its compactions leave,
what would it have saved by the next compaction or the end of the session?

Prices are `models.toml`'s (`costs.call_cost`); output tokens are the same either way and are
priced only for the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.budget.models import call_cost


@dataclass
class CompactionEconomics:
    """What one compaction cost and saved (USD on `model`)."""

    model: str
    tokens_removed: int  # D: the recorded input before less the first recorded input after
    summary_call_usd: (
        float  # the summarizing call: the context read from the cache, the summary out
    )
    rewrite_usd: float  # the first call after, over what it would have cost carrying on
    cache_write_after: int  # tokens written to the cache by the first call after
    cache_read_after: int  # tokens it read from the cache
    calls_after: int  # recorded calls until the next compaction or the end
    saved_usd: float  # carrying on would have cost this much more (negative: it cost more)
    break_even_calls: int | None  # calls after it until it had paid for itself; None: never
    carry_overflow_call: int | None  # the first call after it that could not have carried on

    @property
    def usd_cost(self) -> float:
        """What compacting itself cost: the summarizing call and the cache rewrite."""
        return self.summary_call_usd + max(0.0, self.rewrite_usd)

    @property
    def paid_back(self) -> bool:
        return self.break_even_calls is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "tokens_removed": self.tokens_removed,
            "summary_call_usd": round(self.summary_call_usd, 6),
            "rewrite_usd": round(self.rewrite_usd, 6),
            "usd_cost": round(self.usd_cost, 6),
            "cache_write_after": self.cache_write_after,
            "cache_read_after": self.cache_read_after,
            "calls_after": self.calls_after,
            "saved_usd": round(self.saved_usd, 6),
            "paid_back": self.paid_back,
            "break_even_calls": self.break_even_calls,
            "carry_overflow_call": self.carry_overflow_call,
        }


def _recorded(model: Any, c: dict[str, Any]) -> float:
    """One recorded call on `model`'s prices: its cache reads and writes as recorded."""
    inp = int(c["input_tokens"])
    read = int(c.get("cache_read_tokens") or 0)
    write = int(c.get("cache_write_tokens") or 0) if model.cache_write_per_mtok is not None else 0
    return call_cost(
        model, max(0, inp - read - write), read, write, int(c.get("output_tokens") or 0)
    )


def _shifted(model: Any, c: dict[str, Any], extra: int, first: bool, previous: int) -> float:
    """The same call with `extra` more input tokens: read from the cache when they were already
    in the call before (`first`: the call before had `previous` tokens, all cached)."""
    inp = int(c["input_tokens"]) + extra
    writes = model.cache_write_per_mtok is not None
    if first:
        read = min(previous, inp)
        write = inp - read if writes else 0
    else:
        read = min(inp, int(c.get("cache_read_tokens") or 0) + extra)
        write = min(inp - read, int(c.get("cache_write_tokens") or 0)) if writes else 0
    return call_cost(
        model, max(0, inp - read - write), read, write, int(c.get("output_tokens") or 0)
    )


def compaction_economics(
    model: Any,
    tokens_before: int,
    summary_tokens: int,
    after: Sequence[dict[str, Any]],
    window: int | None = None,
) -> CompactionEconomics:
    """One compaction: `tokens_before` the recorded input before it, `after` the recorded calls
    after it (up to the next compaction or the end of the session)."""
    first = after[0]
    removed = max(0, tokens_before - int(first["input_tokens"]))
    summary_call = call_cost(model, 0, tokens_before, 0, summary_tokens)
    running = -summary_call
    saved = 0.0
    break_even = None
    rewrite = 0.0
    overflow = None
    for k, c in enumerate(after):
        actual = _recorded(model, c)
        carried = _shifted(model, c, removed, k == 0, tokens_before)
        if k == 0:
            rewrite = actual - carried
        saved += carried - actual
        running += carried - actual
        if break_even is None and running >= 0:
            break_even = k + 1
        if overflow is None and window is not None and int(c["input_tokens"]) + removed > window:
            overflow = k + 1
    return CompactionEconomics(
        model=model.name,
        tokens_removed=removed,
        summary_call_usd=summary_call,
        rewrite_usd=rewrite,
        cache_write_after=int(first.get("cache_write_tokens") or 0),
        cache_read_after=int(first.get("cache_read_tokens") or 0),
        calls_after=len(after),
        saved_usd=saved - summary_call,
        break_even_calls=break_even,
        carry_overflow_call=overflow,
    )


def points_economics(
    model: Any,
    calls: Sequence[dict[str, Any]],
    compactions: Sequence[int],
    *,
    summary_tokens: int,
    after_tokens: int | None = None,
    window: int | None = None,
) -> list[dict[str, Any]]:
    """Had the agent compacted right after each recorded call (to `after_tokens`, else the first
    call's input plus the summary), what would it have saved by the next compaction in the log
    or the end of the session? One row per call that was larger than that size.

    The calls after the point keep their recorded growth, each `D` tokens smaller; the first
    one reads only the stable prefix (the first call's cache read) and writes the rest."""
    if not calls:
        return []
    prefix = int(calls[0].get("cache_read_tokens") or 0)
    size = after_tokens if after_tokens else int(calls[0]["input_tokens"]) + summary_tokens
    writes = model.cache_write_per_mtok is not None
    rows = []
    for j, c in enumerate(calls):
        here = int(c["input_tokens"])
        if here <= size:
            continue
        unit = int(c.get("after_unit", -1))
        nxt = min((s for s in compactions if s > unit), default=None)
        horizon = [x for x in calls[j + 1 :] if nxt is None or int(x.get("after_unit", -1)) < nxt]
        if not horizon:
            continue
        removed = here - size
        running = -call_cost(model, 0, here, 0, summary_tokens)
        break_even = None
        for k, x in enumerate(horizon):
            inp = max(1, int(x["input_tokens"]) - removed)
            if k == 0:
                read = min(prefix, inp)
                write = inp - read if writes else 0
            else:
                read = max(0, min(inp, int(x.get("cache_read_tokens") or 0) - removed))
                write = min(inp - read, int(x.get("cache_write_tokens") or 0)) if writes else 0
            compacted = call_cost(
                model, max(0, inp - read - write), read, write, int(x.get("output_tokens") or 0)
            )
            running += _recorded(model, x) - compacted
            if break_even is None and running >= 0:
                break_even = k + 1
        rows.append(
            {
                "call": j,
                "after_unit": unit,
                "input_tokens": here,
                "net_usd": round(running, 6),
                "break_even_calls": break_even,
                "calls_after": len(horizon),
                "until": "end" if nxt is None else "compaction",
                "over_window": window is not None and here > window,
            }
        )
    return rows


def best_point(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The call where compacting would have saved the most by the end (None: no row)."""
    return max(rows, key=lambda r: r["net_usd"], default=None)


__all__ = ["CompactionEconomics", "best_point", "compaction_economics", "points_economics"]
