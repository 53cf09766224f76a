"""Codex CLI rollout JSONL (read only): `{timestamp, type, payload}` per line."""

from __future__ import annotations

from typing import Any

from ctxkit.formats.common import Source, args_text, blocks_text, dumps, finish, timestamp_of
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "codex"
APP_LABEL = "Codex rollout"

_KINDS = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_TEXT_BLOCKS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")


def detect(obj: Any) -> bool:
    """Records shaped `{type: session_meta|response_item|event_msg|turn_context, payload}`."""
    records = obj if isinstance(obj, list) else [obj]
    hits = 0
    for rec in records[:20]:
        if not isinstance(rec, dict):
            return False
        if rec.get("type") in _KINDS and isinstance(rec.get("payload"), dict):
            hits += 1
    return hits > 0 and hits >= min(len(records), 20) // 2


def read(records: list[Any], src: Source) -> Transcript:
    """Response items as units; event_msg duplicates, turn context and snapshots skipped and
    counted; token_count events become provider usage."""
    units: list[Unit] = []
    names: dict[str, str] = {}
    usage_calls: list[dict[str, Any]] = []
    last_total: Any = None
    session: str | None = None
    model: str | None = None
    stats = src.stats

    def add(unit: Unit) -> None:
        units.append(finish(unit))

    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or not isinstance(rec.get("payload"), dict):
            src.bad(i, "expected a Codex rollout record {timestamp, type, payload}", rec)
            continue
        kind = rec.get("type")
        payload = rec["payload"]
        ptype = payload.get("type")
        ts = timestamp_of(rec.get("timestamp"))
        uid = f"u{len(units)}"
        if kind == "session_meta":
            session = session or (str(payload["id"]) if payload.get("id") else None)
            stats.skip("session_meta")
            continue
        if kind == "turn_context":
            model = payload.get("model") if isinstance(payload.get("model"), str) else model
            stats.skip("turn_context")
            continue
        if kind == "event_msg":
            stats.skip(f"event_msg:{ptype}")
            info = payload.get("info")
            if ptype == "token_count" and isinstance(info, dict):
                total = info.get("total_token_usage")
                last = info.get("last_token_usage")
                # Codex repeats the same count after each tool output; a new total is a new call.
                if isinstance(last, dict) and total != last_total:
                    last_total = total
                    usage_calls.append(
                        {
                            "after_unit": len(units) - 1,
                            # input_tokens already includes cached_input_tokens.
                            "input_tokens": int(last.get("input_tokens") or 0),
                            "cache_read_tokens": int(last.get("cached_input_tokens") or 0),
                            "output_tokens": int(last.get("output_tokens") or 0),
                        }
                    )
            continue
        if kind == "compacted":
            text = payload.get("message")
            if isinstance(text, str):
                add(Unit(id=uid, role="user", type="summary", content=text, timestamp=ts, raw=rec, group=i))
            else:
                stats.skip("compacted")
            continue
        if kind != "response_item":
            stats.skip(str(kind))
            continue
        if ptype == "message":
            role = payload.get("role")
            meta: dict[str, Any] = {}
            if role not in ("user", "assistant", "system"):
                meta["source_role"] = role
                role = "system" if role == "developer" else "user"
            text, images = blocks_text(payload.get("content"), _TEXT_BLOCKS, src)
            add(Unit(id=uid, role=str(role), content=text, timestamp=ts, images=images, raw=rec, group=i, meta=meta))
        elif ptype in _CALLS:
            cid = str(payload.get("call_id") or payload.get("id") or f"call_{i}")
            name = str(payload.get("name") or ("local_shell" if ptype == "local_shell_call" else ""))
            args = payload.get("arguments", payload.get("input", payload.get("action")))
            names[cid] = name
            add(Unit(id=uid, role="assistant", content="", timestamp=ts,
                     tool_calls=[ToolCall(cid, name, args_text(args))], raw=rec, group=i))
        elif ptype in _OUTPUTS:
            cid = str(payload.get("call_id") or "")
            output = payload.get("output")
            if not isinstance(output, str):
                text, _ = blocks_text(output.get("content") if isinstance(output, dict) else output, _TEXT_BLOCKS, src)
                output = text or (dumps(output) if output is not None else "")
            if cid not in names:
                src.warn(i, f"tool output {cid} has no matching call before it")
            add(Unit(id=uid, role="tool", content=output, timestamp=ts, tool_call_id=cid, name=names.get(cid),
                     raw=rec, group=i))
        elif ptype == "reasoning":
            text, _ = blocks_text(payload.get("summary"), _TEXT_BLOCKS, src)
            body, _ = blocks_text(payload.get("content"), _TEXT_BLOCKS, src)
            text = "\n".join(p for p in (text, body) if p)
            if text:
                add(Unit(id=uid, role="assistant", type="reasoning", content="", reasoning=text, timestamp=ts,
                         raw=rec, group=i))
            else:
                # Only encrypted content: nothing readable to count.
                stats.skip("response_item:reasoning")
        else:
            stats.skip(f"response_item:{ptype}")
    metadata: dict[str, Any] = {}
    if usage_calls:
        metadata["provider_usage"] = {"source": NAME, "calls": usage_calls}
    if session:
        metadata["session_id"] = session
    if model:
        metadata["model"] = model
    return Transcript(
        units=units,
        id=session or src.tid,
        source_format=NAME,
        layout=src.layout,
        envelope=dict(src.envelope),
        line=src.line,
        metadata=metadata,
    )
