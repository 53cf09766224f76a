"""What a transcript's model calls cost on a model's `models.toml` prices, with prompt caching
(`ctxkit count --cost`, `guard`, the agent replays)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ctxkit.budget.models import call_cost
from ctxkit.counting import provider_calls
from ctxkit.model import Transcript


@dataclass(frozen=True)
class Cost:
    """What a transcript's model calls cost on one model's price list (USD).

    With recorded calls the log's own cache reads and writes are priced where it records them
    (Claude Code, Codex); where it does not, each call is taken to read the previous call's
    input from the cache and write the rest, as prefix caching does. `usd_no_cache` prices every
    input token as uncached input. `next_call_*` is one more call with the context as it stands:
    cold (nothing cached) and warm (the last recorded input read from the cache).
    """

    model: str
    calls: int
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    usd: float
    usd_no_cache: float
    next_call_cold_usd: float
    next_call_warm_usd: float

    def to_dict(self) -> dict[str, Any]:
        """The fields in order, the dollar figures rounded to a millionth."""
        return {
            **asdict(self),
            "usd": round(self.usd, 6),
            "usd_no_cache": round(self.usd_no_cache, 6),
            "next_call_cold_usd": round(self.next_call_cold_usd, 6),
            "next_call_warm_usd": round(self.next_call_warm_usd, 6),
        }


def transcript_cost(t: Transcript, model: Any, context_tokens: int) -> Cost:
    """The cost of `t`'s recorded calls on `model` (see `Cost`); `context_tokens` is the context
    as it stands now (the guard's `used`), for the next call."""
    calls = provider_calls(t)
    writes_billed = model.cache_write_per_mtok is not None  # Anthropic bills writes; others don't
    totals = {"input": 0, "read": 0, "write": 0, "output": 0}
    usd = usd_no_cache = 0.0
    previous = 0
    for c in calls:
        inp, out = int(c["input_tokens"]), int(c.get("output_tokens") or 0)
        if "cache_read_tokens" in c:
            read = int(c["cache_read_tokens"])
            write = int(c.get("cache_write_tokens") or 0)
        else:
            read = min(previous, inp) if model.cached_input_per_mtok is not None else 0
            write = inp - read if writes_billed else 0
        uncached = max(0, inp - read - write)
        usd += call_cost(model, uncached, read, write, out)
        usd_no_cache += call_cost(model, inp, 0, 0, out)
        totals["input"] += inp
        totals["read"] += read
        totals["write"] += write
        totals["output"] += out
        previous = inp
    cold = call_cost(model, context_tokens, 0, 0, 0)
    prefix = min(previous, context_tokens)
    rest = context_tokens - prefix
    warm = call_cost(model, 0 if writes_billed else rest, prefix, rest if writes_billed else 0, 0)
    return Cost(
        model=model.name,
        calls=len(calls),
        input_tokens=totals["input"],
        cache_read_tokens=totals["read"],
        cache_write_tokens=totals["write"],
        output_tokens=totals["output"],
        usd=usd,
        usd_no_cache=usd_no_cache,
        next_call_cold_usd=cold,
        next_call_warm_usd=warm,
    )
