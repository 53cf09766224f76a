"""Calibration: every tokenizer's estimate of each call a log records beside the provider's own
input count (`ctxkit count --calibrate`).

    >>> from ctxkit.calibration import Calibration
    >>> Calibration(tokenizers=["cl100k_base"]).summary()
    []
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.counting import estimate_calls, provider_calls
from ctxkit.errors import CtxkitError, TokenizerError
from ctxkit.model import Transcript
from ctxkit.tokens.accounting import CountOptions
from ctxkit.tokens.base import Tokenizer
from ctxkit.tokens.loaders import DEFAULT_TOKENIZER, get_tokenizer

CALIBRATION_TOKENIZERS = (DEFAULT_TOKENIZER, "o200k_base", "approx", f"max:{DEFAULT_TOKENIZER}")


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return 0.0
    mid = n // 2
    return float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


@dataclass
class Calibration:
    """Provider-reported input tokens per call beside each tokenizer's estimate.

    `calls` rows carry `provider` and, per tokenizer, `est:<name>` and `err_pct:<name>`;
    `summary` has one row per tokenizer: mean absolute error (tokens and percent), mean signed
    error in percent, and the same after removing each transcript's median offset (the
    provider's count includes a system prompt and tool schemas the log never shows).
    """

    tokenizers: list[str]
    calls: list[dict[str, Any]] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    _errors: dict[str, list[tuple[int, float, int]]] = field(default_factory=dict)
    _labels: list[str] = field(default_factory=list)

    def add(
        self,
        t: Transcript,
        toks: dict[str, Tokenizer],
        label: str,
        opts: CountOptions = CountOptions(),
    ) -> int:
        """Add one transcript's calls (returns how many); no usage means nothing is added."""
        calls = provider_calls(t)
        if not calls:
            return 0
        estimates = {name: estimate_calls(t, tok, opts) for name, tok in toks.items()}
        source = str((t.metadata.get("provider_usage") or {}).get("source", ""))
        tindex = len(self._labels)
        self._labels.append(label)
        for k, c in enumerate(calls):
            provider = int(c["input_tokens"])
            row: dict[str, Any] = {
                "transcript": label,
                "call": k + 1,
                "after_unit": c.get("after_unit"),
                "source": source,
                "provider": provider,
            }
            for name in self.tokenizers:
                if name not in estimates:
                    continue
                est = estimates[name][k]
                row[f"est:{name}"] = est
                row[f"err_pct:{name}"] = _pct(est - provider, provider)
                self._errors.setdefault(name, []).append((tindex, float(est - provider), provider))
            self.calls.append(row)
        return len(calls)

    def _offsets(self, name: str) -> dict[int, float]:
        """Per transcript, the median of (estimate - provider) for one tokenizer."""
        errs = self._errors.get(name, [])
        return {
            tindex: _median([e[1] for e in errs if e[0] == tindex])
            for tindex in {e[0] for e in errs}
        }

    def call_rows(self) -> list[dict[str, Any]]:
        """The calls, each with `adj_err_pct:<name>`: the error once its session's offset is removed."""
        rows = [dict(r) for r in self.calls]
        for name in self.tokenizers:
            errs = self._errors.get(name)
            if not errs:
                continue
            offsets = self._offsets(name)
            for row, (tindex, err, provider) in zip(rows, errs, strict=True):
                row[f"adj_err_pct:{name}"] = _pct(err - offsets[tindex], provider)
        return rows

    def sessions(self) -> list[dict[str, Any]]:
        """One row per transcript: calls, and per tokenizer its offset and adjusted |error| %."""
        rows: list[dict[str, Any]] = []
        for tindex, label in enumerate(self._labels):
            row: dict[str, Any] = {"transcript": label}
            for name in self.tokenizers:
                errs = [e for e in self._errors.get(name, []) if e[0] == tindex]
                if not errs:
                    continue
                row["calls"] = len(errs)
                offset = _median([e[1] for e in errs])
                row[f"offset:{name}"] = round(-offset)
                row[f"adj_abs_err_pct:{name}"] = round(
                    sum(abs(_pct(err - offset, prov)) for _, err, prov in errs) / len(errs), 1
                )
            rows.append(row)
        return rows

    def summary(self) -> list[dict[str, Any]]:
        """One row per tokenizer: raw error, the median offset, and error after removing it."""
        rows: list[dict[str, Any]] = []
        for name in self.tokenizers:
            if name in self.unavailable:
                rows.append({"tokenizer": name, "calls": 0, "note": self.unavailable[name]})
                continue
            errs = self._errors.get(name, [])
            if not errs:
                continue
            offsets = self._offsets(name)
            adjusted = [(err - offsets[ti], prov) for ti, err, prov in errs]
            n = len(errs)
            rows.append(
                {
                    "tokenizer": name,
                    "calls": n,
                    "mean_abs_err": round(sum(abs(e[1]) for e in errs) / n),
                    "mean_abs_err_pct": round(sum(abs(_pct(e[1], e[2])) for e in errs) / n, 1),
                    "mean_err_pct": round(sum(_pct(e[1], e[2]) for e in errs) / n, 1),
                    "median_offset": round(_median([-o for o in offsets.values()])),
                    "mean_abs_err_adj": round(sum(abs(a) for a, _ in adjusted) / n),
                    "mean_abs_err_pct_adj": round(sum(abs(_pct(a, p)) for a, p in adjusted) / n, 1),
                    "mean_err_pct_adj": round(sum(_pct(a, p) for a, p in adjusted) / n, 1),
                }
            )
        return rows


def _pct(diff: float, base: int) -> float:
    return round(100.0 * diff / base, 1) if base else float("nan")


def calibrate_usage(
    transcripts: Iterable[Transcript],
    tokenizer: str | None = None,
    opts: CountOptions = CountOptions(),
    *,
    label: Callable[[Transcript], str] = lambda t: t.id,
) -> Calibration:
    """Every calibration tokenizer's estimate (and `tokenizer`'s, when given) against the usage
    the transcripts record; a tokenizer that cannot load offline is listed as unavailable."""
    names = list(CALIBRATION_TOKENIZERS)
    if tokenizer and tokenizer not in names:
        names.insert(0, tokenizer)
    cal = Calibration(tokenizers=names)
    toks: dict[str, Tokenizer] = {}
    for name in names:
        try:
            toks[name] = get_tokenizer(name)
        except TokenizerError as exc:
            head, sep, _ = str(exc).partition(". ")
            cal.unavailable[name] = f"unavailable offline: {head}{'.' if sep else ''}"
    n_calls = 0
    for t in transcripts:
        n_calls += cal.add(t, toks, label(t), opts)
    if not n_calls:
        raise CtxkitError(
            "no provider usage found in the input: --calibrate needs transcripts that record "
            "the provider's token counts (Claude Code `usage`, Codex `token_count`, "
            "mini-swe-agent model stats)"
        )
    return cal
