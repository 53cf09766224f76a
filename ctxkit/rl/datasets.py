"""Datasets from scored trials: RL log rows, DPO and SFT records, JSONL or Parquet."""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager as ContextManager
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from ctxkit.atomic import atomic_writer
from ctxkit.errors import CtxkitError, UsageError, unknown_name
from ctxkit.fileio import check_writable
from ctxkit.formats.prompt import api_format, render
from ctxkit.model import TYPES
from ctxkit.refs import REFS_IN_TEXT
from ctxkit.rl.run import Trial
from ctxkit.tokens import Tokenizer

EXPORTS = ("rl", "dpo", "sft")

# The layouts of a preference pair: OpenAI's preference fine-tuning line (the default), or
# TRL's conversational preference columns.
OPENAI_DPO = "openai"
DPO_SHAPES = (OPENAI_DPO, "trl")

FORMATS = ("jsonl", "parquet")


SFT_INSTRUCTION = (
    "You compact an LLM agent's context to fit a token budget. You receive the agent's "
    "transcript as JSON in its provider's message format (one message per line) and the budget. "
    "Answer with the compacted transcript in exactly that JSON form and nothing else: keep the "
    "system prompt, the first and the last user request verbatim; keep every tool call together "
    "with its result; shorten or summarize older messages, and replace what you drop with a "
    "short bracketed note that says what it was (archived content is cited as ref-1, ref-2, ...)."
)


def plain_refs(text: str, refs: dict[str, str]) -> str:
    """`text` with archive refs (hashes a model cannot predict or resolve) numbered in order of
    appearance: ref-1, ref-2, ... `refs` maps each ref seen so far to its number and grows."""

    def number(m: re.Match[str]) -> str:
        return refs.setdefault(m.group(0), f"ref-{len(refs) + 1}")

    return REFS_IN_TEXT.sub(number, text)


def _prompt(trial: Trial, refs: dict[str, str]) -> list[dict[str, str]]:
    """The messages the compaction policy sees: the instruction, then the budget and the
    over-budget transcript."""
    s = trial.state_before
    user = (
        f"Budget: {s['limit']:,} tokens; the transcript takes {s['tokens']:,}.\n\n"
        + plain_refs(render(trial.original), refs)
    )
    return [{"role": "system", "content": SFT_INSTRUCTION}, {"role": "user", "content": user}]


def _answer(trial: Trial, fmt: str, refs: dict[str, str]) -> dict[str, str]:
    """The policy's answer: the compacted transcript, refs numbered after the prompt's."""
    return {"role": "assistant", "content": plain_refs(render(trial.result, fmt), dict(refs))}


def _over_budget(trials: Sequence[Trial]) -> bool:
    return any(tr.outcome.compactions > 0 for tr in trials)


def best_and_worst(trials: Sequence[Trial]) -> tuple[Trial, Trial]:
    """The highest- and lowest-reward trials (ties: the earlier action)."""
    best = max(trials, key=lambda tr: (tr.outcome.reward, -trials.index(tr)))
    worst = min(trials, key=lambda tr: (tr.outcome.reward, trials.index(tr)))
    return best, worst


def dpo_record(trials: Sequence[Trial], shape: str = OPENAI_DPO) -> dict[str, Any] | None:
    """A preference pair, best vs worst compaction of one over-budget transcript, in OpenAI's
    preference fine-tuning shape (`input`, `preferred_output`, `non_preferred_output`) or TRL's
    conversational one (`prompt`, `chosen`, `rejected` and the rewards); None when there is no
    preference (fewer than two actions, equal rewards, every compaction scored below the best
    the same as it, the best one failed, or nothing needed compacting). The rejected answer is
    the lowest-scored compaction whose context differs from the best's."""
    if shape not in DPO_SHAPES:
        raise unknown_name("DPO shape", shape, DPO_SHAPES)
    if len(trials) < 2 or not _over_budget(trials):
        return None
    best, worst = best_and_worst(trials)
    if best.outcome.reward <= worst.outcome.reward or not best.outcome.success:
        return None
    refs: dict[str, str] = {}
    prompt = _prompt(best, refs)
    fmt = api_format(best.original)
    chosen = _answer(best, fmt, refs)
    # the worst compaction that differs from the best: two actions can leave the same context
    # (a recovery that ends where another chain ends) and score apart, which prefers nothing
    below = sorted(
        (tr for tr in trials if tr.outcome.reward < best.outcome.reward),
        key=lambda tr: (tr.outcome.reward, trials.index(tr)),
    )
    for worst in below:
        rejected = _answer(worst, fmt, refs)
        if rejected["content"] != chosen["content"]:
            break
    else:
        return None
    if shape == OPENAI_DPO:
        return {
            "input": {"messages": prompt},
            "preferred_output": [chosen],
            "non_preferred_output": [rejected],
        }
    return {
        "prompt": prompt,
        "chosen": [chosen],
        "rejected": [rejected],
        "transcript": best.original.id,
        "chosen_action": best.action.name,
        "rejected_action": worst.action.name,
        "chosen_reward": round(best.outcome.reward, 6),
        "rejected_reward": round(worst.outcome.reward, 6),
    }


def sft_record(trials: Sequence[Trial]) -> dict[str, Any] | None:
    """An OpenAI chat fine-tuning line: the prompt (instruction, budget, over-budget transcript)
    and the best compaction as the assistant's answer; None when nothing needed compacting or
    no action succeeded."""
    if not trials or not _over_budget(trials):
        return None
    best, _ = best_and_worst(trials)
    if not best.outcome.success:
        return None
    refs: dict[str, str] = {}
    prompt = _prompt(best, refs)
    return {"messages": [*prompt, _answer(best, api_format(best.original), refs)]}


def no_example_reason(
    trials: Sequence[Trial], kind: str, shape: str = OPENAI_DPO, tok: Tokenizer | None = None
) -> str:
    """Why one transcript's trials gave no DPO pair or SFT line, and what to pass instead, with
    the numbers (`Exporter` says it per transcript): too few actions, nothing to compact at its
    limit (and a --limit that makes it compact), no action fit, or no preference."""
    if not trials:
        return "no action ran"
    first = trials[0]
    o = first.outcome
    at = f"limit {o.limit:,} ({first.limit_source})" if first.limit_source else f"limit {o.limit:,}"
    if kind == "dpo" and len(trials) < 2:
        return f"a preference pair needs two actions or more, and {len(trials)} ran: give --action twice or more"
    if not _over_budget(trials):
        return _fits_reason(first, at, tok)
    best, worst = best_and_worst(trials)
    if not best.outcome.success:
        errors = [tr.outcome.error for tr in trials if tr.outcome.error]
        why = f": {errors[0]}" if errors else ""
        return f"no action fit it within {at}{why}"
    if best.outcome.reward <= worst.outcome.reward:
        return (
            f"every action scored the same reward ({best.outcome.reward:+.3f}) at {at}: no "
            "preference between them; a smaller --limit, or other actions (--list-actions), "
            "tells them apart"
        )
    return (
        f"every compaction that scored below the best ({best.action.name}) at {at} came out the "
        "same as it: no preference; other actions (--list-actions) may leave another context"
    )


def _fits_reason(trial: Trial, at: str, tok: Tokenizer | None) -> str:
    """A transcript no action compacted: its tokens against its limit, and the --limit that
    makes it compact (`compacting_limit`), or why none does."""
    from ctxkit.budget import Thresholds

    o = trial.outcome
    why = f"fits its {at}: {o.original_tokens:,} tokens, nothing to compact"
    thresholds = Thresholds()
    fixed = _fixed_tokens(trial.original, tok)
    suggest = compacting_limit(o.original_tokens, fixed, thresholds)
    if suggest is None:
        return (
            f"{why}; and no --limit makes it compact: {fixed:,} of its tokens are what no "
            f"compaction removes (system prompt, tools, what the log never shows)"
        )
    return f"{why}; give --limit {suggest:,} to score compactions of it"


def _fixed_tokens(t: Any, tok: Tokenizer | None) -> int:
    """What no compaction removes: the system prompt and schemas, and the fixed part of the
    fit of the log's recorded usage (`counting.measure`)."""
    from ctxkit.counting import measure
    from ctxkit.tokens import count_transcript, get_tokenizer

    tok = tok or get_tokenizer(None)
    system = count_transcript(t.replace(units=[u for u in t.units if u.role == "system"]), tok)
    return int(system.total + measure(t, tok).unlogged)


# what a compaction needs to leave beside what no compaction removes, for the --limit suggested
# (the bench's rule: `bench.harness.limit_for`)
ROOM_TOKENS = 1_500


def compacting_limit(tokens: int, fixed: int, thresholds: Any = None) -> int | None:
    """A --limit at which a transcript of `tokens` tokens, `fixed` of them beyond any
    compaction, is compacted: about half of it, rounded down to a thousand, with room for
    ROOM_TOKENS of history under the warn threshold beside the fixed part (rounded up to a
    thousand); None when that room
    leaves nothing to compact (the limit it takes is at or above where compaction starts).

    >>> compacting_limit(78_635, 30_820)
    41000
    >>> compacting_limit(9_949, 7_322) is None
    True
    """
    from ctxkit.budget import Thresholds

    th = thresholds or Thresholds()
    least = math.floor((fixed + ROOM_TOKENS) / th.warn) + 1
    limit = max(math.ceil(least / 1_000) * 1_000, tokens // 2 // 1_000 * 1_000)
    if tokens < th.bounds(limit)["compact"]:
        return None
    return limit


def example_tokens(record: dict[str, Any], tok: Tokenizer) -> int:
    """Tokens of a training example as a chat model reads it: every message's text plus 4 per
    message (role and separators); a pair counts its prompt with its longer answer."""

    def size(messages: Iterable[dict[str, Any]]) -> int:
        return sum(tok.count(str(m.get("content") or "")) + 4 for m in messages)

    if "messages" in record:
        return size(record["messages"])
    if "input" in record:
        prompt, answers = record["input"]["messages"], (
            record["preferred_output"],
            record["non_preferred_output"],
        )
    else:
        prompt, answers = record["prompt"], (record["chosen"], record["rejected"])
    return size(prompt) + max(size(a) for a in answers)


@dataclass(frozen=True)
class ExportOptions:
    """How dataset rows are made: the kind (rl, dpo, sft), the DPO shape, and a token budget
    per training example (None: no budget; examples over it are skipped, never cut, since a
    cut transcript is no longer the compaction that was scored)."""

    kind: str = "rl"
    dpo_shape: str = OPENAI_DPO
    max_example_tokens: int | None = None


class Exporter:
    """Turns each transcript's trials into dataset rows, counting what it leaves out."""

    def __init__(self, opts: ExportOptions, tok: Tokenizer | None = None) -> None:
        if opts.kind not in EXPORTS:
            raise unknown_name("export", opts.kind, EXPORTS)
        if opts.dpo_shape not in DPO_SHAPES:
            raise unknown_name("DPO shape", opts.dpo_shape, DPO_SHAPES)
        self.opts = opts
        self.tok = tok
        self.over_budget = 0  # examples skipped for --max-example-tokens
        self.no_example = 0  # transcripts that gave no example (see dpo_record / sft_record)
        # (transcript, why) for each of them (`no_example_reason`)
        self.reasons: list[tuple[str, str]] = []

    def rows(self, trials: Sequence[Trial]) -> list[dict[str, Any]]:
        """The rows one transcript's trials give."""
        if self.opts.kind == "rl":
            return [tr.row() for tr in trials]
        if self.opts.kind == "dpo":
            record = dpo_record(trials, self.opts.dpo_shape)
        else:
            record = sft_record(trials)
        if record is None:
            self.no_example += 1
            if trials:
                from ctxkit.counting import transcript_label

                t = trials[0].original
                label = transcript_label(t) if t.path else t.id
                why = no_example_reason(trials, self.opts.kind, self.opts.dpo_shape, self.tok)
                self.reasons.append((label, why))
            return []
        limit = self.opts.max_example_tokens
        if limit is not None:
            from ctxkit.tokens import get_tokenizer

            tok = self.tok or get_tokenizer(None)
            if example_tokens(record, tok) > limit:
                self.over_budget += 1
                return []
        return [record]


def export_rows(
    trials: Sequence[Trial], kind: str, dpo_shape: str = OPENAI_DPO
) -> list[dict[str, Any]]:
    """The dataset rows one transcript's trials give for an export kind (rl, dpo, sft)."""
    return Exporter(ExportOptions(kind=kind, dpo_shape=dpo_shape)).rows(trials)


def _polars() -> Any:
    """polars for an RL dataset, or a usage error that names the extra and --format jsonl."""
    from ctxkit.formats.parquet import polars

    return polars("Parquet needs", ", or use --format jsonl")


def rl_schema() -> Any:
    """The polars schema of an RL log row (fixed, so Parquet files from any run agree)."""
    pl = _polars()

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
            "priority_preserved": pl.Float64,
            "compactions": pl.Int64,
            "tokens_sent": pl.Int64,
            "needles_total": pl.Int64,
            "needles_present": pl.Int64,
            "needles_recallable": pl.Int64,
            "retention": pl.Float64,
            "retention_with_recall": pl.Float64,
            "error": pl.String,
            "fidelity": pl.Float64,
            "false_claims": pl.Int64,
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
        if fmt == "parquet":
            _polars()  # say it before the run, not after
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
        pl = _polars()

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
        pl = _polars()

        return list(pl.read_parquet(p).to_dicts())
    with open(p, "rb") as f:
        return [orjson.loads(line) for line in f if line.strip()]
