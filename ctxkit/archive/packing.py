"""How the archive stores records: compact JSON, compressed, each long text once.

An archive holds every original transcript whole and, again, every unit compaction removed, and
a unit's source record repeats its text (an OpenAI message is `{"role", "content"}`), so stored
as plain JSON an archive came to 5.5 times its input. Here a record (a unit, or a transcript
with its units) is packed as:

- every string of `INLINE_MAX_CHARS` characters or more that is a unit's content, reasoning or
  call arguments is replaced, wherever it stands as a whole string value (the unit's field, its
  source records), by a marker naming its digest, and stored once in the archive's `texts`
  table (the same text in the original transcript and in the archived unit is one row);
- what is left is compact JSON (orjson; the standard library for what orjson refuses: integers
  past 64 bits, lone surrogates, other types as their `str`), compressed with Zstandard's
  fastest level when that makes it smaller (layout 3; layout 2 wrote zlib, which is still
  read).

A marker is a JSON string of NUL and 32 hex digits. A record holding a real string that starts
with NUL is stored without markers, so a marker can never be mistaken for text. Unpacking
gives back the same JSON values.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

if sys.version_info >= (3, 14):
    from compression import zstd
else:  # the standard library's module, backported
    from backports import zstd

# Texts shorter than this stay inside their record, whose compression sees a copy of them within
# its 32 KB window (a unit's content and the same text in its source record); longer ones would
# be stored twice, compressed. Compressing the texts of a transcript together also beats
# compressing each alone (0.19 against 0.26 of the JSON on simulated conversations).
INLINE_MAX_CHARS = 8192
# A system prompt (and the tool schemas) recur in every conversation of a dataset: those are
# stored apart, once, from this length.
SHARED_MIN_CHARS = 512
# Zstandard's fastest level: 0.14 of the size of real logs' JSON at ~900 MB/s, where zlib's
# fastest gave 0.23 at ~160 MB/s (and 20 us to set up for each small record): the archive is
# written on every compaction, so its compression was a third of a long log's compaction.
LEVEL = 1
_MIN_COMPRESS = 64  # bytes: below this a frame's header costs more than it saves

# first byte of a packed record: JSON, zlib'd JSON (layout 2) or zstd'd JSON, with or without
# text markers
_JSON, _ZJSON, _XJSON = b"j", b"z", b"x"
_JSON_MARKED, _ZJSON_MARKED, _XJSON_MARKED = b"J", b"Z", b"X"
# first byte of a stored text: plain, zlib'd (layout 2) or zstd'd
_TEXT, _ZTEXT, _XTEXT = b"t", b"z", b"x"
_MARKED = (_JSON_MARKED, _ZJSON_MARKED, _XJSON_MARKED)

_LOCAL = threading.local()  # a compressor per thread: it keeps its tables from frame to frame


def _zstd(data: bytes) -> bytes:
    """`data` as one Zstandard frame (level `LEVEL`)."""
    compressor = getattr(_LOCAL, "compressor", None)
    if compressor is None:
        compressor = _LOCAL.compressor = zstd.ZstdCompressor(level=LEVEL)
    return bytes(compressor.compress(data, zstd.ZstdCompressor.FLUSH_FRAME))

_NUL_STRING = b'"\\u0000'  # how both JSON writers start a string that starts with NUL
_MARKER = re.compile("\x00[0-9a-f]{32}")

Dumps = Callable[[Any], bytes]


def digest(text: str) -> bytes:
    """16 bytes of SHA-256 over the text's UTF-8: a stored text's name."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def _orjson(value: Any) -> bytes:
    return orjson.dumps(value)


def _stdlib(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")


def dumps(value: Any) -> tuple[bytes, Dumps]:
    """Compact JSON bytes of `value`, and the writer that made them (so a text inside is
    written the same way)."""
    try:
        data = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: a huge integer, a lone surrogate, a date
        return _stdlib(value), _stdlib
    # orjson writes inf and nan as null: where it wrote no null there was none (no walk)
    if b"null" in data and not _finite(value):
        return _stdlib(value), _stdlib
    return data, _orjson


# what orjson would write its own way where the standard library writes str(x): left to it
_CANONICAL = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def canonical(value: Any) -> bytes:
    """One text for one value, keys sorted, to digest: orjson's compact JSON, or the standard
    library's (sorted, `str` of what JSON has no type for) for what orjson cannot write as
    JSON of its own (a huge integer, a lone surrogate, inf or nan, a key that is not text)."""
    try:
        data = orjson.dumps(value, option=_CANONICAL)
    except TypeError:
        data = None
    if data is None or (b"null" in data and not _finite(value)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str).encode(
            "utf-8", "surrogatepass"
        )
    return data


def _finite(value: Any, _float: type = float, _dict: type = dict, _list: type = list) -> bool:
    """False when `value` holds an infinite or NaN float (a walk in a third of orjson's time)."""
    kind = type(value)
    if kind is _dict:
        items: Any = value.values()
    elif kind is _list:
        items = value
    else:
        return kind is not _float or math.isfinite(value)
    for x in items:
        kind = type(x)
        if kind is _float:
            if not math.isfinite(x):
                return False
        elif (kind is _dict or kind is _list) and not _finite(x):
            return False
    return True


def loads(data: bytes) -> Any:
    """JSON bytes to Python, numbers and lone surrogates as they were written."""
    from ctxkit.formats.common import loads as exact_loads

    try:
        return exact_loads(data)
    except ValueError:  # lone surrogates: not UTF-8, written by the standard library
        return json.loads(data.decode("utf-8", "surrogatepass"))


# Fields of a unit record (`records.unit_record`) that `Unit.from_dict` reads as None when absent:
# a stored record leaves them out when they are None.
_OPTIONAL = (
    "timestamp",
    "priorityTag",
    "relevanceScore",
    "tokenCount",
    "raw",
    "group",
    "name",
    "tool_call_id",
)


def stored(record: dict[str, Any]) -> dict[str, Any]:
    """A unit record as stored: its None-valued optional fields left out."""
    return {k: v for k, v in record.items() if v is not None or k not in _OPTIONAL}


def holds_nul_string(data: bytes) -> bool:
    """True when JSON `data` holds a string that starts with NUL (as a marker does)."""
    return _NUL_STRING in data


def long_texts(record: Mapping[str, Any]) -> list[str]:
    """The texts of a unit record stored apart: content, reasoning, call arguments, when long
    (a system prompt from `SHARED_MIN_CHARS`)."""
    least = SHARED_MIN_CHARS if record.get("role") == "system" else INLINE_MAX_CHARS
    texts = [record.get("content"), record.get("reasoning")]
    texts += [c.get("arguments") for c in record.get("tool_calls") or () if isinstance(c, dict)]
    found = [t for t in texts if isinstance(t, str) and len(t) >= least]
    return list(dict.fromkeys(found))


def pack_unit(record: dict[str, Any]) -> tuple[bytes, dict[bytes, str]]:
    """A unit record (`records.unit_record`) as stored, and the long texts it names by marker
    (to store in `texts`), by digest."""
    data, moved = unit_json(record)
    return pack(data, marked=bool(moved)), moved or {}


def unit_json(record: dict[str, Any]) -> tuple[bytes, dict[bytes, str] | None]:
    """A unit record's JSON with its long texts replaced by markers wherever one stands as a
    whole string (its own fields, its source records), and the texts moved, by digest; None
    instead of them when the record holds a real string that starts with NUL (then nothing is
    replaced, and a record this one is part of must carry no marker either)."""
    texts = long_texts(record)
    if not texts:
        data = dumps(record)[0]
        return data, None if holds_nul_string(data) else {}
    keys = {t: digest(t) for t in texts}
    markers = {t: "\x00" + k.hex() for t, k in keys.items()}
    used: dict[bytes, str] = {}
    placed = 0

    least = min(map(len, texts))

    def sub(value: Any) -> Any:
        nonlocal placed
        if isinstance(value, str):
            marker = markers.get(value) if len(value) >= least else None
            if marker is None:
                return value
            used[keys[value]] = value
            placed += 1
            return marker
        if isinstance(value, dict):
            return {k: sub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [sub(v) for v in value]
        return value

    data = dumps(sub(record))[0]
    # every string that starts with NUL must be a marker
    if data.count(_NUL_STRING) != placed:
        return dumps(record)[0], None
    return data, used


def records_json(records: Sequence[dict[str, Any]]) -> tuple[bytes | None, dict[bytes, str]]:
    """A JSON array of unit records, each as `unit_json` writes it (long texts by marker), and
    the texts moved, by digest; (None, {}) when a record holds a real string that starts with
    NUL. Records without long texts are written together, in one call (a transcript of many
    short messages spent most of its packing time calling the writer once a record)."""
    parts: list[bytes] = []
    moved: dict[bytes, str] = {}
    plain: list[dict[str, Any]] = []

    def flush() -> bool:
        if plain:
            data, writer = dumps(plain)
            if holds_nul_string(data):
                return False
            if writer is _orjson:
                parts.append(data[1:-1])
            else:  # a record the standard library writes: each written as it would be alone
                parts.extend(dumps(record)[0] for record in plain)
            plain.clear()
        return True

    for record in records:
        if not long_texts(record):
            plain.append(record)
            continue
        data, used = unit_json(record)
        if used is None or not flush():
            return None, {}
        parts.append(data)
        moved.update(used)
    if not flush():
        return None, {}
    return b"[" + b",".join(parts) + b"]", moved


def _unzstd(body: bytes) -> bytes:
    try:
        return bytes(zstd.decompress(body))
    except zstd.ZstdError as exc:  # a damaged row: the archive's callers catch ValueError
        raise ValueError(f"damaged Zstandard frame: {exc}") from None


def pack(data: bytes, marked: bool) -> bytes:
    """A record's JSON as stored: tagged, compressed when that makes it smaller."""
    if len(data) >= _MIN_COMPRESS:
        packed = _zstd(data)
        if len(packed) < len(data):
            return (_XJSON_MARKED if marked else _XJSON) + packed
    return (_JSON_MARKED if marked else _JSON) + data


def unpack(blob: bytes, text_of: Callable[[bytes], str]) -> Any:
    """The record `pack` stored (or layout 2 did), its markers replaced by their texts
    (`text_of(digest)`)."""
    tag, body = blob[:1], blob[1:]
    if tag in (_XJSON, _XJSON_MARKED):
        body = _unzstd(body)
    elif tag in (_ZJSON, _ZJSON_MARKED):
        body = zlib.decompress(body)
    elif tag not in (_JSON, _JSON_MARKED):
        raise ValueError(f"unknown record tag {tag!r}")
    value = loads(body)
    if tag in _MARKED:
        value = _unmark(value, text_of)
    return value


def _unmark(value: Any, text_of: Callable[[bytes], str]) -> Any:
    if isinstance(value, str):
        if len(value) == 33 and _MARKER.fullmatch(value):
            return text_of(bytes.fromhex(value[1:]))
        return value
    if isinstance(value, dict):
        return {k: _unmark(v, text_of) for k, v in value.items()}
    if isinstance(value, list):
        return [_unmark(v, text_of) for v in value]
    return value


def pack_text(text: str) -> bytes:
    """A long text as stored in `texts`: UTF-8, compressed when that makes it smaller."""
    data = text.encode("utf-8", "surrogatepass")
    packed = _zstd(data)
    return _XTEXT + packed if len(packed) < len(data) else _TEXT + data


def unpack_text(blob: bytes) -> str:
    """Inverse of `pack_text` (and of layout 2's, which used zlib)."""
    tag, body = blob[:1], blob[1:]
    if tag == _XTEXT:
        body = _unzstd(body)
    elif tag == _ZTEXT:
        body = zlib.decompress(body)
    elif tag != _TEXT:
        raise ValueError(f"unknown text tag {tag!r}")
    return body.decode("utf-8", "surrogatepass")
