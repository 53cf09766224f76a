"""Outcomes, rewards and datasets: the evidence `ctxkit score-rl` turns compaction into.

An *action* is one way to compact (a strategy alone, a chain, a parameter set, a recovery
mode). `run_action` applies it to a transcript, one-shot (the whole transcript compacted once)
or replayed (an agent loop, see `ctxkit.replay`), and records the spec's outcome; `reward`
scores that outcome exactly as the spec does:

    +1 on success (fits and every invariant holds), -1 on failure
    +0.5 x coherence_delta          coherence of the result vs the original, in [0, 1]
    +0.3 x reduction ratio          tokens_reduced / original_tokens
    +0.2 x priority_preserved       share of P1 units kept verbatim (1.0 when there are none)
    -0.7 if recovery was used
    -0.1 per second above 500 ms    -0.1 x max(0, time_ms - 500) / 1000
    clamped to [-2, 2]

Rows are written as they are produced (JSONL, or Parquet through a JSONL spool that polars
streams into the Parquet file), so a large dataset runs in bounded memory.

Example:
    >>> trial = run_action(generate("long_chat", seed=1), builtin_actions()[0], limit=5000)
    >>> trial.outcome.reward
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager as ContextManager
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from ctxkit.archive import Archive
from ctxkit.budget import Thresholds, compaction_target, used_fraction
from ctxkit.compaction import RECOVERY_MODES, ChainOptions, expand_chain
from ctxkit.compaction import compact as run_chain
from ctxkit.errors import CtxkitError, InputError, UsageError
from ctxkit.fileio import atomic_writer, check_writable
from ctxkit.model import TYPES, Transcript
from ctxkit.strategies import DEFAULT_CHAIN, STRATEGIES
from ctxkit.tokens import CountOptions, Tokenizer, count_transcript, get_tokenizer

MODES = ("oneshot", "replay")
EXPORTS = ("rl", "dpo", "sft")
FORMATS = ("jsonl", "parquet")
SLOW_MS = 500.0
REWARD_MIN, REWARD_MAX = -2.0, 2.0
DEFAULT_THRESHOLDS = Thresholds()

SFT_INSTRUCTION = (
    "You compact an LLM agent's context to fit its token budget. You receive the transcript, "
    "one JSON unit per line, and the budget. Answer with the compacted transcript in the same "
    "form: keep the system prompt, the first and last user requests and every P1 unit "
    "verbatim; keep each tool call with its result; replace what you drop with a placeholder."
)


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Action:
    """One way to compact: a chain of strategies, their parameters and a recovery mode."""

    name: str
    chain: tuple[str, ...]
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    recovery_mode: str = "fresh_start"

    def options(self, seed: int = 0) -> ChainOptions:
        """The chain options this action runs with."""
        return ChainOptions(
            chain=expand_chain(self.chain),
            params={k: dict(v) for k, v in self.params.items()},
            recovery_mode=self.recovery_mode,
            seed=seed,
        )

    def to_dict(self) -> dict[str, Any]:
        """{name, chain, params, recovery_mode}; params as a JSON string (one schema for all)."""
        return {
            "name": self.name,
            "chain": list(self.chain),
            "params": orjson.dumps(
                {k: dict(v) for k, v in self.params.items()}, option=orjson.OPT_SORT_KEYS
            ).decode(),
            "recovery_mode": self.recovery_mode,
        }

    @classmethod
    def from_dict(cls, d: Any, *, path: str | None = None, index: int | None = None) -> Action:
        """Validate one entry of an actions file: names, chain, params and recovery mode."""
        where = f"action {index + 1}" if index is not None else "action"

        def bad(problem: str) -> InputError:
            return InputError(path, None, f"{where}: {problem}")

        if not isinstance(d, Mapping):
            raise bad(f"expected a mapping with name and chain, got {type(d).__name__}")
        unknown = sorted(set(d) - {"name", "chain", "params", "recovery_mode"})
        if unknown:
            raise bad(f"unknown key {unknown[0]!r}; allowed: chain, name, params, recovery_mode")
        chain_value = d.get("chain")
        if isinstance(chain_value, str):
            chain_value = [c.strip() for c in chain_value.split(",") if c.strip()]
        if not chain_value or not isinstance(chain_value, list):
            raise bad("`chain` must be a non-empty list of strategy names")
        known = sorted([*STRATEGIES, "hybrid"])
        for name in chain_value:
            if name not in known:
                raise bad(f"unknown strategy {name!r} in chain; known: {', '.join(known)}")
        params = d.get("params") or {}
        if not isinstance(params, Mapping):
            raise bad("`params` must map strategy names to their parameters")
        for key, value in params.items():
            if key not in STRATEGIES:
                raise bad(f"params for unknown strategy {key!r}; known: {', '.join(STRATEGIES)}")
            if not isinstance(value, Mapping):
                raise bad(f"params of {key} must be a mapping")
        recovery = d.get("recovery_mode") or "fresh_start"
        if recovery not in RECOVERY_MODES:
            raise bad(f"unknown recovery_mode {recovery!r}; known: {', '.join(RECOVERY_MODES)}")
        name = str(d.get("name") or "+".join(chain_value))
        _check_params(
            params, lambda problem: InputError(path, None, f"{where} ({name}): {problem}")
        )
        return cls(
            name=name,
            chain=tuple(str(c) for c in chain_value),
            params={str(k): dict(v) for k, v in params.items()},
            recovery_mode=str(recovery),
        )


_CONFIG_PREFIX = "context_config.breaking_strategy."


def _check_params(
    params: Mapping[str, Mapping[str, Any]], bad: Callable[[str], InputError]
) -> None:
    """Check an action's params with the configuration's own rules (ranges, types, keys), so
    an actions file accepts exactly what ctxkit.yaml accepts."""
    from ctxkit.config import Config
    from ctxkit.errors import ConfigError

    for strategy, values in params.items():
        data = {"context_config": {"breaking_strategy": {strategy: dict(values)}}}
        try:
            Config.from_dict(data)
        except ConfigError as exc:
            problem = str(exc)
            if problem.startswith(_CONFIG_PREFIX):
                problem = "params." + problem[len(_CONFIG_PREFIX) :]
            raise bad(problem) from None


def builtin_actions() -> list[Action]:
    """Each strategy alone, the default chain, and a few parameter and recovery variants."""
    actions = [Action(name, (name,)) for name in STRATEGIES]
    actions += [
        Action("default", DEFAULT_CHAIN),
        Action("default:truncate", DEFAULT_CHAIN, recovery_mode="truncate"),
        Action(
            "summarize_old:short",
            ("summarize_old",),
            {"summarize_old": {"old_threshold": 0.8, "summary_length": 150}},
        ),
        Action(
            "mask_observations:keep1",
            ("mask_observations",),
            {"mask_observations": {"keep_last_turns": 1}},
        ),
        Action("offload:2k", ("offload",), {"offload": {"threshold_bytes": 2048}}),
        Action(
            "discard_low_rel:50",
            ("discard_low_rel",),
            {"discard_low_rel": {"discard_percent": 0.5}},
        ),
    ]
    return actions


def load_actions(path: str) -> list[Action]:
    """Read a YAML or JSON list of actions ({name, chain, params, recovery_mode})."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(
            path, line, f"not valid YAML or JSON: {getattr(exc, 'problem', exc)}"
        ) from None
    if isinstance(data, Mapping) and "actions" in data:
        data = data["actions"]
    if not isinstance(data, list) or not data:
        raise InputError(path, None, "expected a non-empty list of actions (or {actions: [...]})")
    actions = [Action.from_dict(d, path=path, index=i) for i, d in enumerate(data)]
    names = [a.name for a in actions]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(path, None, f"action name {dupes[0]!r} is used twice; names must differ")
    return actions


# --------------------------------------------------------------------------- reward


def reward_terms(
    *,
    success: bool,
    coherence_delta: float,
    reduction_ratio: float,
    priority_preserved: float,
    used_recovery: bool,
    time_ms: float,
) -> dict[str, float]:
    """Each term of the spec's reward, before the clamp."""
    return {
        "success": 1.0 if success else -1.0,
        "coherence": 0.5 * coherence_delta,
        "reduction": 0.3 * reduction_ratio,
        "priority": 0.2 * priority_preserved,
        "recovery": -0.7 if used_recovery else 0.0,
        "time": -0.1 * max(0.0, time_ms - SLOW_MS) / 1000.0,
    }


def reward(
    *,
    success: bool,
    coherence_delta: float,
    reduction_ratio: float,
    priority_preserved: float,
    used_recovery: bool,
    time_ms: float,
) -> float:
    """The spec's reward: the sum of `reward_terms`, clamped to [-2, 2]."""
    total = sum(
        reward_terms(
            success=success,
            coherence_delta=coherence_delta,
            reduction_ratio=reduction_ratio,
            priority_preserved=priority_preserved,
            used_recovery=used_recovery,
            time_ms=time_ms,
        ).values()
    )
    return max(REWARD_MIN, min(REWARD_MAX, total))


# --------------------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    """What one action did to one transcript: the spec's outcome plus needle retention."""

    transcript_id: str
    action: str
    mode: str
    success: bool
    fits: bool
    invariants_ok: bool
    used_recovery: bool
    coherence_delta: float
    tokens_reduced: int
    original_tokens: int
    final_tokens: int
    limit: int
    time_ms: float
    priority_preserved: float
    compactions: int
    tokens_sent: int | None = None  # replay only: the session's cost
    needles_total: int | None = None  # None without ground truth
    needles_present: int | None = None
    needles_recallable: int | None = None
    retention: float | None = None
    retention_with_recall: float | None = None
    error: str | None = None

    @property
    def reduction_ratio(self) -> float:
        """tokens_reduced / original_tokens (0 for an empty transcript)."""
        return self.tokens_reduced / self.original_tokens if self.original_tokens else 0.0

    @property
    def terms(self) -> dict[str, float]:
        """The reward's terms for this outcome."""
        return reward_terms(
            success=self.success,
            coherence_delta=self.coherence_delta,
            reduction_ratio=self.reduction_ratio,
            priority_preserved=self.priority_preserved,
            used_recovery=self.used_recovery,
            time_ms=self.time_ms,
        )

    @property
    def reward(self) -> float:
        """The spec's reward for this outcome."""
        return max(REWARD_MIN, min(REWARD_MAX, sum(self.terms.values())))

    def to_dict(self) -> dict[str, Any]:
        return {
            "transcript": self.transcript_id,
            "action": self.action,
            "mode": self.mode,
            "success": self.success,
            "fits": self.fits,
            "invariants_ok": self.invariants_ok,
            "used_recovery": self.used_recovery,
            "coherence_delta": round(self.coherence_delta, 6),
            "tokens_reduced": self.tokens_reduced,
            "original_tokens": self.original_tokens,
            "final_tokens": self.final_tokens,
            "limit": self.limit,
            "time_ms": round(self.time_ms, 3),
            "priority_preserved": round(self.priority_preserved, 6),
            "compactions": self.compactions,
            "tokens_sent": self.tokens_sent,
            "needles_total": self.needles_total,
            "needles_present": self.needles_present,
            "needles_recallable": self.needles_recallable,
            "retention": self.retention,
            "retention_with_recall": self.retention_with_recall,
            "error": self.error,
        }


def state_features(
    t: Transcript, limit: int, tokenizer: Tokenizer, count_opts: CountOptions
) -> dict[str, Any]:
    """The compact state an RL log records: tokens, limit, units, P1 count, type histogram."""
    tokens = count_transcript(t, tokenizer, count_opts).total
    types = dict.fromkeys(TYPES, 0)
    for u in t.units:
        types[u.type if u.type in types else "other"] += 1
    return {
        "tokens": tokens,
        "limit": limit,
        "used_fraction": round(used_fraction(tokens, limit), 6),
        "units": len(t.units),
        "p1": sum(1 for u in t.units if u.is_p1),
        "types": types,
    }


def coherence(original: Transcript, result: Transcript, embedder: Any = None) -> float:
    """The chain's coherence figure (`chain.coherence`), so reports and rewards agree."""
    from ctxkit.compaction import coherence as chain_coherence

    return chain_coherence(original.units, result.units, embedder)


@dataclass
class Trial:
    """One (transcript, action) run: the outcome, both states, and the result for datasets."""

    original: Transcript
    result: Transcript
    action: Action
    outcome: Outcome
    state_before: dict[str, Any]
    state_after: dict[str, Any]

    def row(self) -> dict[str, Any]:
        """The RL log line: {state_before, action, reward, state_after} plus the outcome."""
        return {
            "transcript": self.original.id,
            "mode": self.outcome.mode,
            "state_before": self.state_before,
            "action": self.action.to_dict(),
            "reward": round(self.outcome.reward, 6),
            "state_after": self.state_after,
            "outcome": self.outcome.to_dict(),
        }


def run_action(
    t: Transcript,
    action: Action,
    *,
    limit: int,
    mode: str = "oneshot",
    target: int | None = None,
    tokenizer: Tokenizer | None = None,
    count_opts: CountOptions | None = None,
    embedder: Any = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    seed: int = 0,
) -> Trial:
    """Apply one action to one transcript (one-shot or replayed) and measure the outcome."""
    from ctxkit.simulate import needle_retention

    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    tok = tokenizer or get_tokenizer()
    copts = count_opts or CountOptions()
    goal = target if target is not None else compaction_target(limit, thresholds)
    options = action.options(seed)
    truth = t.metadata.get("ground_truth")
    if truth:
        from ctxkit.replay import truth_priorities

        t = truth_priorities(t, truth)
    before = state_features(t, limit, tok, copts)
    with Archive(":memory:") as archive:
        if mode == "replay":
            from ctxkit.replay import replay

            r = replay(
                t,
                limit=limit,
                target=goal,
                options=options,
                tokenizer=tok,
                count_opts=copts,
                archive=archive,
                thresholds=thresholds,
                truth=truth,
                embedder=embedder,
            )
            result_t = r.transcript
            retention: dict[str, Any] | None = r.retention if truth else None
            outcome = Outcome(
                transcript_id=t.id,
                action=action.name,
                mode=mode,
                success=r.fits and r.invariants_ok,
                fits=r.fits,
                invariants_ok=r.invariants_ok,
                used_recovery=r.used_recovery,
                coherence_delta=coherence(t, result_t, embedder),
                tokens_reduced=max(0, r.original_tokens - r.final_tokens),
                original_tokens=r.original_tokens,
                final_tokens=r.final_tokens,
                limit=limit,
                time_ms=r.compaction_time_ms,
                priority_preserved=r.p1_kept / r.p1_total if r.p1_total else 1.0,
                compactions=r.compactions,
                tokens_sent=r.tokens_sent,
                error=r.errors[0] if r.errors else None,
            )
        else:
            try:
                c = run_chain(
                    t,
                    limit=limit,
                    target=goal,
                    options=options,
                    tokenizer=tok,
                    count_opts=copts,
                    archive=archive,
                    embedder=embedder,
                )
            except CtxkitError as exc:
                # No context came out: nothing of the original is usable, so no coherence,
                # reduction or priority credit.
                result_t = t
                original_tokens = before["tokens"]
                outcome = Outcome(
                    transcript_id=t.id,
                    action=action.name,
                    mode=mode,
                    success=False,
                    fits=False,
                    invariants_ok=True,
                    used_recovery=False,
                    coherence_delta=0.0,
                    tokens_reduced=0,
                    original_tokens=original_tokens,
                    final_tokens=original_tokens,
                    limit=limit,
                    time_ms=0.0,
                    priority_preserved=0.0,
                    compactions=1,
                    error=str(exc),
                )
                retention = None
            else:
                result_t = c.transcript
                outcome = Outcome(
                    transcript_id=t.id,
                    action=action.name,
                    mode=mode,
                    success=c.fits and bool(c.invariants["ok"]),
                    fits=c.fits,
                    invariants_ok=bool(c.invariants["ok"]),
                    used_recovery=c.recovery is not None,
                    coherence_delta=coherence(t, result_t, embedder),
                    tokens_reduced=max(0, c.tokens_before - c.tokens_after),
                    original_tokens=c.tokens_before,
                    final_tokens=c.tokens_after,
                    limit=limit,
                    time_ms=c.time_ms,
                    priority_preserved=c.p1_kept / c.p1_total if c.p1_total else 1.0,
                    compactions=1 if c.changed else 0,
                )
                retention = needle_retention(result_t, truth, archive) if truth else None
        if retention is not None:
            outcome.needles_total = int(retention["total"])
            outcome.needles_present = int(retention["present"])
            outcome.needles_recallable = int(retention["recallable"])
            outcome.retention = float(retention["retention"])
            outcome.retention_with_recall = float(retention["retention_with_recall"])
    after = state_features(result_t, limit, tok, copts)
    return Trial(t, result_t, action, outcome, before, after)


def score(
    transcripts: Iterable[Transcript],
    actions: Sequence[Action],
    *,
    limit_for: Callable[[Transcript], int],
    mode: str = "oneshot",
    target: int | None = None,
    tokenizer: Tokenizer | None = None,
    count_opts: CountOptions | None = None,
    embedder: Any = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    seed: int = 0,
) -> Iterator[list[Trial]]:
    """For each transcript (read lazily), the trials of every action, in action order."""
    tok = tokenizer or get_tokenizer()
    for t in transcripts:
        limit = limit_for(t)
        yield [
            run_action(
                t,
                a,
                limit=limit,
                mode=mode,
                target=target,
                tokenizer=tok,
                count_opts=count_opts,
                embedder=embedder,
                thresholds=thresholds,
                seed=seed,
            )
            for a in actions
        ]


# --------------------------------------------------------------------------- datasets


def render(t: Transcript) -> str:
    """A transcript as text a model reads and writes: one compact JSON unit per line."""
    lines = []
    for u in t.units:
        d: dict[str, Any] = {"id": u.id, "role": u.role, "type": u.type}
        if u.priority:
            d["priority"] = f"P{u.priority}"
        if u.tool_call_id is not None:
            d["tool_call_id"] = u.tool_call_id
        if u.tool_calls:
            d["tool_calls"] = [c.to_dict() for c in u.tool_calls]
        d["content"] = u.content
        lines.append(orjson.dumps(d).decode())
    return "\n".join(lines)


def _prompt(trial: Trial) -> str:
    s = trial.state_before
    return f"Budget: {s['limit']:,} tokens; the transcript takes {s['tokens']:,}.\n\n" + render(
        trial.original
    )


def _over_budget(trials: Sequence[Trial]) -> bool:
    return any(tr.outcome.compactions > 0 for tr in trials)


def best_and_worst(trials: Sequence[Trial]) -> tuple[Trial, Trial]:
    """The highest- and lowest-reward trials (ties: the earlier action)."""
    best = max(trials, key=lambda tr: (tr.outcome.reward, -trials.index(tr)))
    worst = min(trials, key=lambda tr: (tr.outcome.reward, trials.index(tr)))
    return best, worst


def dpo_record(trials: Sequence[Trial]) -> dict[str, Any] | None:
    """A preference pair (TRL's conversational layout), best vs worst action; None when there
    is no preference (fewer than two actions, equal rewards, or nothing needed compacting)."""
    if len(trials) < 2 or not _over_budget(trials):
        return None
    best, worst = best_and_worst(trials)
    if best.outcome.reward <= worst.outcome.reward or not best.outcome.success:
        return None
    return {
        "prompt": [
            {"role": "system", "content": SFT_INSTRUCTION},
            {"role": "user", "content": _prompt(best)},
        ],
        "chosen": [{"role": "assistant", "content": render(best.result)}],
        "rejected": [{"role": "assistant", "content": render(worst.result)}],
        "transcript": best.original.id,
        "chosen_action": best.action.name,
        "rejected_action": worst.action.name,
        "chosen_reward": round(best.outcome.reward, 6),
        "rejected_reward": round(worst.outcome.reward, 6),
    }


def sft_record(trials: Sequence[Trial]) -> dict[str, Any] | None:
    """An OpenAI fine-tuning line pairing the over-budget context with its best compaction;
    None when nothing needed compacting or no action succeeded."""
    if not trials or not _over_budget(trials):
        return None
    best, _ = best_and_worst(trials)
    if not best.outcome.success:
        return None
    return {
        "messages": [
            {"role": "system", "content": SFT_INSTRUCTION},
            {"role": "user", "content": _prompt(best)},
            {"role": "assistant", "content": render(best.result)},
        ]
    }


def export_rows(trials: Sequence[Trial], kind: str) -> list[dict[str, Any]]:
    """The dataset rows one transcript's trials give for an export kind (rl, dpo, sft)."""
    if kind == "rl":
        return [tr.row() for tr in trials]
    record = dpo_record(trials) if kind == "dpo" else sft_record(trials)
    return [record] if record is not None else []


def rl_schema() -> Any:
    """The polars schema of an RL log row (fixed, so Parquet files from any run agree)."""
    import polars as pl

    state = pl.Struct(
        {
            "tokens": pl.Int64,
            "limit": pl.Int64,
            "used_fraction": pl.Float64,
            "units": pl.Int64,
            "p1": pl.Int64,
            "types": pl.Struct({t: pl.Int64 for t in TYPES}),
        }
    )
    outcome = pl.Struct(
        {
            "transcript": pl.String,
            "action": pl.String,
            "mode": pl.String,
            "success": pl.Boolean,
            "fits": pl.Boolean,
            "invariants_ok": pl.Boolean,
            "used_recovery": pl.Boolean,
            "coherence_delta": pl.Float64,
            "tokens_reduced": pl.Int64,
            "original_tokens": pl.Int64,
            "final_tokens": pl.Int64,
            "limit": pl.Int64,
            "time_ms": pl.Float64,
            "priority_preserved": pl.Float64,
            "compactions": pl.Int64,
            "tokens_sent": pl.Int64,
            "needles_total": pl.Int64,
            "needles_present": pl.Int64,
            "needles_recallable": pl.Int64,
            "retention": pl.Float64,
            "retention_with_recall": pl.Float64,
            "error": pl.String,
        }
    )
    action = pl.Struct(
        {
            "name": pl.String,
            "chain": pl.List(pl.String),
            "params": pl.String,
            "recovery_mode": pl.String,
        }
    )
    columns: dict[str, Any] = {
        "transcript": pl.String,
        "mode": pl.String,
        "state_before": state,
        "action": action,
        "reward": pl.Float64,
        "state_after": state,
        "outcome": outcome,
    }
    return pl.Schema(columns)


class DatasetWriter:
    """Writes rows as they come to `path` ("-" = stdout), atomically; Parquet via a JSONL spool.

    Use as a context manager; on an exception the partial file is removed and the target is
    left as it was. A path that cannot be written (a directory, a missing directory) is a
    `CtxkitError` when the writer is entered, before any work is done.
    """

    def __init__(self, path: str, fmt: str = "jsonl", kind: str = "rl") -> None:
        if fmt not in FORMATS:
            raise UsageError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
        if fmt == "parquet" and path == "-":
            raise UsageError("--format parquet needs -o FILE (Parquet is not written to stdout)")
        self.path = path
        self.fmt = fmt
        self.kind = kind
        self.rows = 0
        self._stack = ExitStack()
        self._spool: str | None = None
        self._out: IO[bytes]

    def _cannot_write(self, exc: OSError) -> CtxkitError:
        return CtxkitError(f"cannot write dataset {self.path}: {exc.strerror or exc}")

    def __enter__(self) -> DatasetWriter:
        import sys

        if self.path == "-":
            self._out = sys.stdout.buffer
            return self
        check_writable(self.path, "dataset")
        try:
            if self.fmt == "parquet":
                # The spool is scratch (private is right); the Parquet file itself goes through
                # atomic_writer at the end, with the permissions of any other output.
                spool = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed by the stack
                    prefix=".ctxkit-",
                    suffix=".spool.jsonl",
                )
                self._out = self._stack.enter_context(spool)
                self._spool = spool.name
            else:
                self._out = self._stack.enter_context(self._open_target())
        except OSError as exc:
            self._stack.close()
            raise self._cannot_write(exc) from None
        return self

    def _open_target(self) -> ContextManager[IO[Any]]:
        # atomic_writer writes a device or a pipe in place instead of renaming over it.
        return atomic_writer(self.path, "wb")

    def write(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append rows (one JSON object per line)."""
        for row in rows:
            self._out.write(orjson.dumps(row) + b"\n")
            self.rows += 1
        if self.path == "-":
            self._out.flush()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.path == "-":
            return
        try:
            if exc_type is None and self._spool is not None:
                self._out.flush()
                self._to_parquet(self._spool)
        except BaseException as err:
            self._stack.close()  # only the spool is open here
            if isinstance(err, OSError):
                raise self._cannot_write(err) from None
            raise
        try:
            self._stack.__exit__(exc_type, exc, tb)
        except OSError as err:
            if exc_type is not None:
                raise
            raise self._cannot_write(err) from None

    def _to_parquet(self, spool: str) -> None:
        import polars as pl

        with self._open_target() as out:
            if self.rows == 0:
                empty = pl.DataFrame(schema=rl_schema()) if self.kind == "rl" else pl.DataFrame()
                empty.write_parquet(out)
            elif self.kind == "rl":
                pl.scan_ndjson(spool, schema=rl_schema()).sink_parquet(out)
            else:
                pl.scan_ndjson(spool, infer_schema_length=None).sink_parquet(out)


def read_dataset(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a dataset file written by `DatasetWriter` (JSONL, or Parquet through polars)."""
    p = Path(path)
    if p.suffix == ".parquet":
        import polars as pl

        return list(pl.read_parquet(p).to_dicts())
    with open(p, "rb") as f:
        return [orjson.loads(line) for line in f if line.strip()]


# --------------------------------------------------------------------------- summary


@dataclass
class _Tally:
    n: int = 0
    reward: float = 0.0
    fits: int = 0
    success: int = 0
    recovery: int = 0
    time_ms: float = 0.0
    needles: int = 0
    present: int = 0
    recallable: int = 0
    coherence: float = 0.0
    reduction: float = 0.0


class Summary:
    """Running per-action totals (bounded memory): mean reward, fit rate, retention, time."""

    def __init__(self) -> None:
        self._by: dict[str, _Tally] = {}

    def add(self, trial: Trial) -> None:
        """Count one trial."""
        o = trial.outcome
        s = self._by.setdefault(o.action, _Tally())
        s.n += 1
        s.reward += o.reward
        s.fits += o.fits
        s.success += o.success
        s.recovery += o.used_recovery
        s.time_ms += o.time_ms
        s.coherence += o.coherence_delta
        s.reduction += o.reduction_ratio
        if o.needles_total:
            s.needles += o.needles_total
            s.present += o.needles_present or 0
            s.recallable += o.needles_recallable or 0

    def rows(self) -> list[dict[str, Any]]:
        """One row per action, best mean reward first."""
        out: list[dict[str, Any]] = []
        for name, s in self._by.items():
            out.append(
                {
                    "action": name,
                    "n": s.n,
                    "mean_reward": s.reward / s.n,
                    "fit_rate": s.fits / s.n,
                    "success_rate": s.success / s.n,
                    "recovery_rate": s.recovery / s.n,
                    "mean_coherence": s.coherence / s.n,
                    "mean_reduction": s.reduction / s.n,
                    "retention": s.present / s.needles if s.needles else None,
                    "retention_with_recall": (s.present + s.recallable) / s.needles
                    if s.needles
                    else None,
                    "mean_time_ms": s.time_ms / s.n,
                }
            )
        out.sort(key=lambda r: -r["mean_reward"])
        return out

    def table(self) -> str:
        """The rows as an aligned text table."""
        head = (
            "action",
            "n",
            "reward",
            "fit",
            "recovery",
            "coherence",
            "reduced",
            "retention",
            "+recall",
            "time ms",
        )
        body = []
        for r in self.rows():

            def pct(v: float | None) -> str:
                return "-" if v is None else f"{v:.0%}"

            body.append(
                (
                    r["action"],
                    str(r["n"]),
                    f"{r['mean_reward']:+.3f}",
                    pct(r["fit_rate"]),
                    pct(r["recovery_rate"]),
                    f"{r['mean_coherence']:.3f}",
                    pct(r["mean_reduction"]),
                    pct(r["retention"]),
                    pct(r["retention_with_recall"]),
                    f"{r['mean_time_ms']:.1f}",
                )
            )
        widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
        lines = []
        for row in [head, *body]:
            cells = [row[0].ljust(widths[0])] + [
                c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
            ]
            lines.append("  ".join(cells))
        return "\n".join(lines)


__all__ = [
    "Action",
    "DatasetWriter",
    "Outcome",
    "Summary",
    "Trial",
    "best_and_worst",
    "builtin_actions",
    "coherence",
    "dpo_record",
    "export_rows",
    "load_actions",
    "read_dataset",
    "render",
    "reward",
    "reward_terms",
    "run_action",
    "score",
    "sft_record",
    "state_features",
]
