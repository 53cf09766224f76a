"""How to compact: the chain of strategies, their parameters and the recovery mode."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.budget import Target, Thresholds, compaction_ceiling, compaction_goal
from ctxkit.compaction.recovery import DEFAULT_RECOVERY
from ctxkit.errors import unknown_name
from ctxkit.model import Transcript
from ctxkit.strategies import DEFAULT_CHAIN, DEFAULT_PARAMS, STRATEGIES
from ctxkit.tokens import DEFAULT_TOKENIZER, CountOptions, Tokenizer, get_tokenizer


@dataclass(frozen=True)
class ChainOptions:
    """How to compact: the chain, each strategy's parameters, recovery."""

    chain: tuple[str, ...] = DEFAULT_CHAIN
    # the registry's defaults, which are also the default configuration's (`config --init`)
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: dict(DEFAULT_PARAMS))
    max_iterations: int = 3
    recovery_mode: str = DEFAULT_RECOVERY
    handover_tokens: int = 500
    seed: int = 0

    def strategy_params(self, name: str) -> dict[str, Any]:
        merged = dict(DEFAULT_PARAMS.get(name, {}))
        merged.update(self.params.get(name, {}))
        return merged


def expand_chain(names: Sequence[str]) -> tuple[str, ...]:
    """Validate strategy names; `hybrid` stands for the default chain."""
    out: list[str] = []
    for name in names:
        if name == "hybrid":
            out.extend(n for n in DEFAULT_CHAIN if n not in out)
        elif name in STRATEGIES:
            out.append(name)
        else:
            raise unknown_name("strategy", name, [*STRATEGIES, "hybrid"])
    return tuple(out)


@dataclass(frozen=True)
class CompactSettings:
    """Everything a compaction needs besides the transcript, built once and passed whole (as
    black passes `mode=`): `compact(t, CompactSettings(limit=8000))`.

    The CLI builds one from flags and the configuration (`ctxkit.config.settings.compact_settings`), the
    library from keywords; both aim at the same goal (`budget.compaction_goal`).

    >>> CompactSettings(limit=5000).goal
    4749
    """

    limit: int
    target: int | None = None  # None: one token under the compact threshold (budget.compaction_goal)
    thresholds: Thresholds = Thresholds()
    options: ChainOptions = field(default_factory=ChainOptions)
    tokenizer: Tokenizer | None = None  # None: the default tokenizer
    tokenizer_label: str = DEFAULT_TOKENIZER
    count_opts: CountOptions = CountOptions()
    embedder: Any = None  # relevance and coherence; None: embedders.DEFAULT_EMBEDDER
    summarizer: Callable[..., str] | None = None  # None: extractive
    budget: Target | None = None  # where the limit came from, when resolved from a model or config
    # tool schemas the output adds to the transcript's own (`--recall-tool`): counted in the
    # budget, written with a compacted transcript, never part of the archived original
    added_tools: tuple[dict[str, Any], ...] = ()
    # False: fit the transcript's own count alone, as `--no-usage` does; True: the unlogged
    # region of the provider's recorded usage is a fixed region the units are fitted around
    use_usage: bool = True
    # the limit stands for "what the log names": a log that records its model is compacted to
    # that model's budget under its agent (`budget.resolve.resolve_budget`), the given limit else
    from_log: bool = False
    # the configuration a log's own target is resolved under (the thresholds it sets); None:
    # the defaults
    config: Any = None
    # how the output file reads a compacted transcript back (`counting.as_written` in its
    # format): the figures after are counted on that, what `count` gives of the file (a format
    # may join a summary to the request before it); None: on the transcript as compacted
    as_written: Callable[[Transcript], Transcript] | None = None
    # a simulated scenario's own limit, from the ground truth `simulate` wrote beside it
    # (`with_truth_limits`): where the limit stands for "what the log names", its log names it
    truth_limits: dict[str, int] = field(default_factory=dict)
    # leading units every strategy leaves as they are (an agent loop's cached prefix: the first
    # request and the summaries its earlier compactions left, which the prompt cache holds); a
    # summary goes after them; a recovery alone may rewrite them
    pinned: int = 0

    @property
    def goal(self) -> int:
        """What the chain aims for (see `budget.compaction_goal`)."""
        return compaction_goal(self.limit, self.target, self.thresholds)

    @property
    def ceiling(self) -> int:
        """The most tokens the result may keep: what `guard` at the same limit passes (see
        `budget.compaction_ceiling`)."""
        return compaction_ceiling(self.limit, self.target, self.thresholds)

    @property
    def tok(self) -> Tokenizer:
        """The tokenizer in use."""
        return self.tokenizer if self.tokenizer is not None else get_tokenizer()

    @classmethod
    def given(
        cls, settings: CompactSettings | None, limit: int | None, caller: str
    ) -> CompactSettings:
        """The settings an engine call runs with: `settings`, with `limit` in place of its own
        when given; `limit` alone is shorthand for `CompactSettings(limit=limit)`."""
        if settings is None:
            if limit is None:
                raise TypeError(f"{caller}() needs settings or a limit")
            return cls(limit=limit)
        return settings if limit is None else settings.replace(limit=limit)

    def with_added_tools(self, *tools: dict[str, Any]) -> CompactSettings:
        """A copy whose compacted transcripts also carry `tools` (`--recall-tool`), counted in
        the budget; a tool of a name already there is not added twice."""
        from ctxkit.archive.recall_tool import add_tools

        return self.replace(added_tools=tuple(add_tools(list(self.added_tools), list(tools))))

    def with_output_format(self, fmt: str | None) -> CompactSettings:
        """A copy whose figures after are counted on the output as a file in `fmt` reads back
        (None: the transcript's own format), as `count` of that file gives them."""
        import functools

        from ctxkit.counting import as_written

        return self.replace(as_written=functools.partial(as_written, fmt=fmt))

    def with_truth_limits(self, records: Iterable[Mapping[str, Any]]) -> CompactSettings:
        """A copy that compacts each transcript a ground-truth record names (`simulate`'s
        sidecar: by id, or by file and line) to the record's limit when no limit was given
        (`from_log`)."""
        limits = dict(self.truth_limits)
        for r in records:
            limit = (r.get("ground_truth") or {}).get("limit")
            if isinstance(limit, int) and limit > 0:
                limits[f"id:{r.get('id')}"] = limit
                if r.get("file") or r.get("line") is not None:  # no file: the sidecar's own
                    limits[f"at:{r.get('file') or '*'}:{r.get('line')}"] = limit
        return self.replace(truth_limits=limits)

    def truth_limit(self, t: Transcript) -> int | None:
        """The limit `t`'s ground truth records, when no limit was given; else None."""
        if not self.from_log or not self.truth_limits:
            return None
        import os

        name = os.path.basename(t.path) if t.path else "*"
        return (
            self.truth_limits.get(f"id:{t.id}")
            or self.truth_limits.get(f"at:{name}:{t.line}")
            or self.truth_limits.get(f"at:*:{t.line}")
        )

    def for_transcript(self, t: Transcript) -> CompactSettings:
        """The settings `t` is compacted with: these, or (`from_log`) the budget its log names
        (a simulated scenario's own limit, `with_truth_limits`)."""
        if not self.from_log:
            return self
        own = self.truth_limit(t)
        if own is not None:
            return self.replace(limit=own, budget=None, from_log=False)
        from ctxkit.budget.limits import BudgetConfig
        from ctxkit.budget.resolve import BudgetRequest, resolve_budget

        flagged = self.tokenizer_label if self.tokenizer_label != DEFAULT_TOKENIZER else None
        request = BudgetRequest(tokenizer=flagged, config=self.config or BudgetConfig())
        named = resolve_budget(request, t)
        if named == resolve_budget(request):  # the log names no model it knows: these hold
            return self
        return self.replace(limit=named.limit, thresholds=named.thresholds, budget=named, from_log=False)

    def replace(self, **changes: Any) -> CompactSettings:
        """A copy with some fields changed (a replay at another limit, an action's chain)."""
        return dataclasses.replace(self, **changes)
