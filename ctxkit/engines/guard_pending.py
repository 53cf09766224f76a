"""Pending tool outputs (`guard --pending`): read from a file, and planned against the room a
target leaves: which to keep, cut or offload (the offload strategy's own stub)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ctxkit.budget import status_for
from ctxkit.config.file import Config
from ctxkit.errors import InputError
from ctxkit.model import Unit
from ctxkit.tokens import CountOptions, Tokenizer, count_units


@dataclass(frozen=True)
class PendingOutput:
    """A tool output about to be appended."""

    name: str
    content: str


@dataclass
class PendingItem:
    """What to do with one pending output: keep, cut (to `tokens_after`) or offload (a stub)."""

    index: int
    name: str
    bytes: int
    tokens: int
    action: str = "keep"
    tokens_after: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PendingPlan:
    """Pending outputs against the room left: whether they fit raw, and what to cut or offload."""

    items: list[PendingItem]
    room: int
    tokens: int
    tokens_after: int
    fits_raw: bool
    fits_after: bool
    status_after: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "room": self.room,
            "tokens": self.tokens,
            "tokens_after_plan": self.tokens_after,
            "fits_as_is": self.fits_raw,
            "fits_after_plan": self.fits_after,
            "status_after_plan": self.status_after,
            "items": [i.to_dict() for i in self.items],
        }


def _pending_unit(index: int, p: PendingOutput, content: str | None = None) -> Unit:
    return Unit(
        id=f"pending-{index}",
        role="tool",
        type="tool_result",
        content=p.content if content is None else content,
        name=p.name or None,
    )


def offload_stub(p: PendingOutput, preview_chars: int) -> str:
    """The stub that would replace an offloaded output: the offload strategy's own, with a ref
    of the same size as the one the archive will give it."""
    from ctxkit.archive.store import REF_PROBE
    from ctxkit.strategies.offload import preview_of, stub_text

    size = len(p.content.encode("utf-8"))
    return stub_text(p.name or "tool", size, preview_of(p.content, preview_chars), REF_PROBE)


def plan_pending(
    pending: Sequence[PendingOutput],
    used_tokens: int,
    limit: int,
    tok: Tokenizer,
    opts: CountOptions,
    config: Config,
) -> PendingPlan:
    """Decide which pending outputs must be cut or offloaded so the total stays within `limit`.

    Largest first: an output over `offload.threshold_bytes` is offloaded (replaced by a stub),
    a smaller one is cut by what is still over, or offloaded when the cut would leave less than
    its stub.
    """
    off = config.breaking_strategy.offload
    units = [_pending_unit(i, p) for i, p in enumerate(pending)]
    counts = [c.total for c in count_units(units, tok, opts)]
    stubs = [
        c.total
        for c in count_units(
            [
                _pending_unit(i, p, offload_stub(p, off.preview_chars))
                for i, p in enumerate(pending)
            ],
            tok,
            opts,
        )
    ]
    items = [
        PendingItem(i, p.name, len(p.content.encode("utf-8")), n, "keep", n)
        for i, (p, n) in enumerate(zip(pending, counts, strict=True))
    ]
    room = limit - used_tokens
    total = sum(counts)
    excess = total - room
    for item in sorted(items, key=lambda it: (-it.tokens, it.index)):
        if excess <= 0:
            break
        stub = stubs[item.index]
        if stub < item.tokens and (item.bytes > off.threshold_bytes or item.tokens - excess < stub):
            item.action, item.tokens_after = "offload", stub
        else:
            # a small output (or one shorter than its stub) is cut, down to nothing if need be
            item.action, item.tokens_after = "cut", max(0, item.tokens - excess)
        excess -= item.tokens - item.tokens_after
    after = sum(i.tokens_after for i in items)
    thresholds = config.thresholds
    return PendingPlan(
        items=items,
        room=room,
        tokens=total,
        tokens_after=after,
        fits_raw=total <= room,
        fits_after=after <= room,
        status_after=status_for(used_tokens + after, limit, thresholds),
    )



def load_pending(path: str) -> list[PendingOutput]:
    """Pending tool outputs: a JSON list of strings or {name, content}, or JSONL of either."""
    import orjson

    from ctxkit.formats.extras import read_text_file

    text = read_text_file(path)
    items: list[tuple[int | None, Any]]
    try:
        data = orjson.loads(text)
        if not isinstance(data, list):
            data = [data]
        items = [(None, d) for d in data]
    except orjson.JSONDecodeError:
        items = []
        for n, text_line in enumerate(text.splitlines(), 1):
            if not text_line.strip():
                continue
            try:
                items.append((n, orjson.loads(text_line)))
            except orjson.JSONDecodeError as exc:
                raise InputError(path, n, f"not valid JSON: {exc.msg}", text_line) from None
    out = []
    for i, (line, item) in enumerate(items):
        if isinstance(item, str):
            out.append(PendingOutput(name=f"output{i + 1}", content=item))
        elif isinstance(item, dict) and isinstance(item.get("content"), str):
            out.append(
                PendingOutput(
                    name=str(item.get("name") or f"output{i + 1}"), content=item["content"]
                )
            )
        else:
            raise InputError(
                path,
                line,
                f'pending output #{i + 1}: expected a string or {{"name", "content"}} with string content',
            )
    return out

