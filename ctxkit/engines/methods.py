"""Any method, ctxkit's chain or a peer, run on one transcript and checked the same way.

`run_method` is the one place that runs "ctxkit or a peer": ctxkit through `compaction.run`
(the one compaction run, archive in memory), a peer through its recipe (`ctxkit.recipes`),
each at the same token budget on what the log holds. `check` says what both `ctxkit fidelity`
and `ctxkit bench --suite quality` ask of any result: within the budget, no tool call split
from its result, the system prompt, every P1 unit and the last request kept word for word.
`ENGINE_RULES` hands the measures of `ctxkit.fidelity` the engine's own rules as data, so the
evaluation imports no summarizer.

    >>> from ctxkit.simulate import generate
    >>> run = run_method("drop_oldest", generate("agent_session", seed=0, tokens=6000), 2000)
    >>> run.error, run.checks.fits, run.checks.broken_pairs
    (None, True, 0)
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ctxkit.archive.store import Archive, ArchivedUnit
from ctxkit.compaction import CompactSettings
from ctxkit.compaction.result import CompactResult, Failure
from ctxkit.compaction.run import run
from ctxkit.counting import Fit
from ctxkit.errors import CtxkitError, unknown_name
from ctxkit.fidelity.measures import EngineRules
from ctxkit.model import Transcript, Unit
from ctxkit.recipes import RECIPES
from ctxkit.structure import pairs_intact, request_indices
from ctxkit.summarizers.extractive import (
    USER_MESSAGE_TOKENS,
    files_touched,
    newest_within,
    user_message_budget,
)
from ctxkit.tokens import Tokenizer, count_transcript

CTXKIT = "ctxkit"

# what the measures judge a compaction against: the engine's own reading and promises
ENGINE_RULES = EngineRules(
    files_touched=files_touched,
    newest_within=newest_within,
    user_message_budget=user_message_budget,
    user_message_tokens=USER_MESSAGE_TOKENS,
)


def all_methods() -> tuple[str, ...]:
    """ctxkit and every registered peer, in table order."""
    return (CTXKIT, *RECIPES)


def label(method: str) -> str:
    """A method's label in tables (peers say when ctxkit's summarizer stands in for theirs)."""
    return "ctxkit (default)" if method == CTXKIT else RECIPES[method].label


def available(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(methods that can run here, notes for those that cannot: a peer's optional package)."""
    ok, skipped = [], []
    for name in names:
        need = RECIPES[name].requires if name in RECIPES else ""
        if need:
            try:
                __import__(need)
            except ImportError:
                skipped.append(f"{name}: {need} is not installed (pip install ctxkit[bench])")
                continue
        ok.append(name)
    return ok, skipped


@dataclass(frozen=True)
class Checks:
    """What any compaction of `original` must hold, checked on its result."""

    tokens_after: int
    fits: bool  # within the budget
    broken_pairs: int  # tool pairing problems the compaction made
    system_kept: bool  # every system unit kept word for word
    p1_total: int
    p1_kept: int  # P1 units kept word for word
    last_request_kept: bool  # the last user request kept word for word

    @property
    def pairs_intact(self) -> bool:
        return not self.broken_pairs


def check(original: Transcript, result: Transcript, budget: int, tok: Tokenizer) -> Checks:
    """The checks of `result`, a compaction of `original` to `budget` tokens counted by `tok`."""
    after = count_transcript(result, tok).total
    kept = {u.id: u for u in result.units}

    def verbatim(u: Unit) -> bool:
        return u.id in kept and kept[u.id].content == u.content

    p1 = [u for u in original.units if u.is_p1]
    requests = request_indices(original.units)
    return Checks(
        tokens_after=after,
        fits=after <= budget,
        broken_pairs=len(pairs_intact(original.units, result.units)),
        system_kept=all(verbatim(u) for u in original.units if u.role == "system"),
        p1_total=len(p1),
        p1_kept=sum(1 for u in p1 if verbatim(u)),
        last_request_kept=bool(requests) and verbatim(original.units[requests[-1]]),
    )


@dataclass(frozen=True)
class Archived:
    """What a run's archive held of its transcript, kept after the in-memory archive closed:
    answers `list` as the archive did (`fidelity.truth.needle_retention` asks it)."""

    units: tuple[ArchivedUnit, ...]

    def list(self, transcript_id: str | None = None) -> builtins.list[ArchivedUnit]:
        """The archived units, in the order they were stored."""
        return [*self.units]


@dataclass
class MethodRun:
    """One method on one transcript: its result (None when it refused, with the error), the
    time it took, the checks, and what ctxkit archived of it (peers keep no archive)."""

    method: str
    budget: int
    tokens_before: int
    result: Transcript | None = None
    error: str | None = None
    time_ms: float = 0.0
    checks: Checks | None = None
    archived: Archived | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def _compact(t: Transcript, settings: CompactSettings) -> tuple[Transcript, Archived]:
    """`t` through the one compaction run, archive in memory: the result and what it archived."""
    got: list[tuple[Transcript, Archived]] = []

    def keep(item: CompactResult | Failure, archive: Archive) -> None:
        if isinstance(item, CompactResult):
            got.append((item.transcript, Archived(tuple(archive.list(t.id)))))

    run([t], settings, on_result=keep)
    return got[0]


def run_method(
    method: str, t: Transcript, budget: int, settings: CompactSettings | None = None
) -> MethodRun:
    """Run `method` on `t` at `budget` tokens and check the result.

    A peer gets `budget`; ctxkit runs with `settings` (default: the default chain aiming at
    `budget` itself, the room every peer fills, rather than one token under the guard's compact
    threshold of it as `compact --limit` does), whose limit or target the caller sets. The
    budget is on what the log holds, for every method alike: a peer never sees the recorded
    usage of the unlogged region, so ctxkit leaves it out here too."""
    s = settings if settings is not None else CompactSettings(limit=budget, target=budget)
    tok = s.tok
    out = MethodRun(method, budget, 0)
    started = time.perf_counter()
    try:
        if method == CTXKIT:
            out.result, out.archived = _compact(t, s.replace(use_usage=False))
        else:
            peer = RECIPES.get(method)
            if peer is None:
                raise unknown_name("method", method, all_methods())
            out.result = peer.run(t, budget, Fit(tok))
            out.meta.update({k: v for k, v in out.result.metadata.items() if k == "summary_by"})
    except CtxkitError as exc:
        out.error = str(exc)
    out.time_ms = (time.perf_counter() - started) * 1000
    out.tokens_before = count_transcript(t, tok).total  # after the clock: the run starts cold
    if out.result is not None:
        out.checks = check(t, out.result, budget, tok)
    return out

