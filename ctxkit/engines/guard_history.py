"""The log as it grew, for `guard --replay` and the agents' forecasts: what each unit added
(`walk_tokens`) and the statuses a check after each unit would have given (`threshold_history`)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.budget import STATUSES, Thresholds, status_for, status_rank
from ctxkit.model import Transcript, Unit

OVER_HITS_WINDOW_S = 3600
OVER_HITS_TRIGGER = 2  # the spec: more than 2 over-hits in 1 hour


@dataclass
class ThresholdHistory:
    """`guard --replay`: the transcript walked message by message against one target's limit (not
    the agent-loop replay of `ctxkit.replay`, which compacts as it goes)."""

    checks: int
    by_status: dict[str, int]
    first: dict[str, dict[str, Any] | None]
    fires: int
    over_hits: int
    max_over_hits_per_hour: int | None
    trigger: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "checks": self.checks,
            "by_status": dict(self.by_status),
            "first": dict(self.first),
            "fires": self.fires,
            "over_hits": self.over_hits,
            "max_over_hits_per_hour": self.max_over_hits_per_hour,
            "trigger": self.trigger,
        }


def threshold_history(
    units: Sequence[Unit],
    unit_tokens: Sequence[int],
    fixed_tokens: int,
    limit: int,
    thresholds: Thresholds,
    fail_on: str = "compact",
) -> ThresholdHistory:
    """Walk the transcript as it grew: the first unit at which each status was reached, how
    many checks would have fired (status at or above `fail_on`), and over-hits (checks over the
    limit) within any one hour of timestamps, with the spec's "more than 2 in 1 hour" trigger."""
    by_status = dict.fromkeys(STATUSES, 0)
    first: dict[str, dict[str, Any] | None] = dict.fromkeys(STATUSES[1:], None)
    fires = 0
    over_times: list[float] = []
    over_hits = 0
    trigger: dict[str, Any] | None = None
    max_per_hour = 0
    used = fixed_tokens
    for i, (u, n) in enumerate(zip(units, unit_tokens, strict=True)):
        used += n
        status = status_for(used, limit, thresholds)
        by_status[status] += 1
        rank = status_rank(status)
        for name in STATUSES[1 : rank + 1]:
            if first[name] is None:
                first[name] = {
                    "message": i + 1,
                    "unit_id": u.id,
                    "tokens": used,
                    "timestamp": u.timestamp,
                }
        if rank >= status_rank(fail_on):
            fires += 1
        if status == "overflow":
            over_hits += 1
            if u.timestamp is not None:
                now = float(u.timestamp)
                bisect.insort(over_times, now)
                in_hour = bisect.bisect_right(over_times, now) - bisect.bisect_left(
                    over_times, now - OVER_HITS_WINDOW_S
                )
                max_per_hour = max(max_per_hour, in_hour)
                if trigger is None and in_hour > OVER_HITS_TRIGGER:
                    trigger = {
                        "message": i + 1,
                        "unit_id": u.id,
                        "timestamp": u.timestamp,
                        "over_hits_in_hour": in_hour,
                    }
    return ThresholdHistory(
        checks=len(units),
        by_status=by_status,
        first=first,
        fires=fires,
        over_hits=over_hits,
        max_over_hits_per_hour=max_per_hour if over_times or not over_hits else None,
        trigger=trigger,
    )



def walk_tokens(t: Transcript, tc: Any, measured: Any, fixed: int, tok: Any) -> list[int]:
    """What each unit adds to the context as the log grew, for `guard --replay` and the
    agents' forecasts: its count at the fitted ratio, the agent's reminders where the log shows
    them, and, where the log recorded a call, what the provider counted: the walk is at each
    recorded call's figure after the unit it followed (content the agent pruned shows as a
    fall), and at the verdict's figure (`measured.total`) after the last unit."""
    from ctxkit.tokens.accounting import attachment_texts

    usage = measured.usage
    ratio = measured.ratio
    out = [round(u.total * ratio) for u in tc.units] if ratio != 1.0 else [u.total for u in tc.units]
    if not out:
        return out
    last = len(out) - 1
    for after, text in attachment_texts(t):
        out[min(max(after, 0), last)] += round(ratio * tok.count(text))
    # an agent's own compaction inside the log (`--include-compacted`): the calls after it saw
    # another context, so the walk goes on with the log's content, as if it had not compacted
    # (what `--as` forecasts from)
    cut = len(out)
    if usage is not None and not usage.origin:
        cut = next((i for i, u in enumerate(t.units) if i and u.type == "summary"), cut)
        prefix = list(itertools.accumulate(out))
        shift, previous = 0, -1  # what the anchors before added; the last anchored unit
        for recorded, _, after in usage.fit.calls:  # in call order: after_unit never falls
            if previous <= after < cut:
                delta = recorded - fixed - (prefix[after] + shift)
                out[after] += delta
                shift += delta
                previous = after
    if cut == len(out):
        out[last] += measured.total - fixed - sum(out)
    return out

