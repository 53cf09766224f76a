"""Datasets from scored trials: RL log rows, DPO and SFT records, JSONL or Parquet."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager as ContextManager
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

import orjson

from ctxkit.errors import CtxkitError, UsageError
from ctxkit.fileio import atomic_writer, check_writable
from ctxkit.model import TYPES, Transcript
from ctxkit.rl.run import Trial

EXPORTS = ("rl", "dpo", "sft")


FORMATS = ("jsonl", "parquet")


SFT_INSTRUCTION = (
    "You compact an LLM agent's context to fit its token budget. You receive the transcript, "
    "one JSON unit per line, and the budget. Answer with the compacted transcript in the same "
    "form: keep the system prompt, the first and last user requests and every P1 unit "
    "verbatim; keep each tool call with its result; replace what you drop with a placeholder."
)


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


def _polars() -> Any:
    """polars, or a usage error that says how to get it (it is the `[parquet]` extra)."""
    try:
        import polars
    except ImportError as e:
        raise UsageError(
            "Parquet needs polars, which the light install leaves out: "
            "pip install 'ctxkit[parquet]', or use --format jsonl"
        ) from e
    return polars


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
