"""Gemini API histories: `Content[]`, `{role: user|model, parts: [...]}` (`generateContent`).

A part is `{text}` (with `thought: true` a thought summary), `{functionCall: {name, args,
id?}}`, `{functionResponse: {name, response, id?}}`, `{inlineData}` / `{fileData}` (an image or
file), `{executableCode}` / `{codeExecutionResult}`. The same layouts as the chat formats: a
JSON array, one Content per line, a request object `{contents, systemInstruction, tools}`, or a
dataset of those (one per line).

Read: a `model` Content is an assistant unit (its text, its thoughts as reasoning, its function
calls as tool calls); a `user` Content is a user unit for its text and one tool unit per
`functionResponse` (paired by `id`, else with the oldest open call of that name);
`systemInstruction` is the system prompt and `tools[].functionDeclarations` the tool schemas.

Written: untouched Contents as they were, tool results of one turn in one `user` Content,
function calls in the `model` Content of their text; a system prompt goes in
`systemInstruction`, tools in `tools[0].functionDeclarations`.
"""

from __future__ import annotations

import re
from typing import Any

from ctxkit.formats.base import Format
from ctxkit.formats.checks import MAX_PROBLEMS, parsed
from ctxkit.formats.common import (
    Source,
    args_object,
    args_text,
    dumps,
    finish,
    joins,
    link_group_sizes,
    raw_groups,
)
from ctxkit.formats.gemini_cli import function_responses, parts_text, response_text
from ctxkit.model import ToolCall, Transcript, Unit

NAME = "gemini"
KEY = "contents"
_ROLES = ("user", "model")
_PART_KEYS = frozenset({"text", "functionCall", "functionResponse", "inlineData", "fileData", "executableCode",
                        "codeExecutionResult", "thought", "thoughtSignature", "videoMetadata", "partMetadata"})


def _is_content(rec: Any) -> bool:
    return (isinstance(rec, dict) and rec.get("role", "user") in _ROLES and isinstance(rec.get("parts"), list)
            and set(rec) <= {"role", "parts"})


def detect(records: list[Any]) -> bool:
    """Contents: `{role: user|model, parts: [...]}` and nothing else."""
    head = records[:50]
    return bool(head) and all(_is_content(r) for r in head)


def detect_object(obj: dict[str, Any]) -> bool:
    """A `generateContent` request: `contents` (Contents) beside `systemInstruction`, `tools`,
    `generationConfig`..."""
    contents = obj.get(KEY)
    return isinstance(contents, list) and all(_is_content(c) for c in contents[:50])


def _tools(value: Any) -> list[dict[str, Any]]:
    """Function declarations as function schemas (what is counted as the tools region)."""
    out: list[dict[str, Any]] = []
    for tool in value if isinstance(value, list) else []:
        if isinstance(tool, dict):
            for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
                if isinstance(decl, dict):
                    out.append({"type": "function", "function": decl})
    return out


def read(records: list[Any], src: Source) -> Transcript:
    """Units from Contents (see the module doc)."""
    units: list[Unit] = []
    envelope = dict(src.envelope)
    system = envelope.get("systemInstruction") or envelope.get("system_instruction")
    if system is not None:
        text, _ = parts_text(system.get("parts") if isinstance(system, dict) else system, src)
        units.append(Unit(id="system", role="system", content=text))
    open_calls: list[tuple[str, str]] = []  # (id, name) of calls not answered yet
    for i, rec in enumerate(records):
        if not _is_content(rec):
            src.bad(i, "expected a Gemini Content {role: user|model, parts: [...]}", rec)
            continue
        parts = [p for p in rec["parts"] if isinstance(p, dict)]
        uid = f"c{i}"
        if rec.get("role", "user") == "model":
            texts = [p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought")]
            thoughts = [p["text"] for p in parts if isinstance(p.get("text"), str) and p.get("thought")]
            calls = []
            for k, p in enumerate(parts):
                fc = p.get("functionCall")
                if isinstance(fc, dict):
                    cid = str(fc.get("id") or f"call_{i}_{k}")
                    calls.append(ToolCall(cid, str(fc.get("name") or ""), args_text(fc.get("args"))))
                    open_calls.append((cid, calls[-1].name))
                elif "executableCode" in p or "codeExecutionResult" in p:
                    texts.append(dumps(p))
            images = sum(1 for p in parts if "inlineData" in p or "fileData" in p)
            units.append(finish(Unit(id=uid, role="assistant", content="\n".join(texts), reasoning="\n".join(thoughts),
                                     tool_calls=calls, images=images, raw=rec, group=i)))
            continue
        responses, rest = function_responses(parts)
        for k, fr in enumerate(responses):
            name = str(fr.get("name") or "")
            cid = str(fr["id"]) if fr.get("id") else next((c for c, n in open_calls if n == name), f"call_{i}_{k}")
            if (cid, name) in open_calls:
                open_calls.remove((cid, name))
            else:
                open_calls[:] = [(c, n) for c, n in open_calls if c != cid]
            failed = isinstance(fr.get("response"), dict) and "error" in fr["response"]
            units.append(finish(Unit(id=uid if k == 0 else f"{uid}#{k}", role="tool", content=response_text(fr),
                                     tool_call_id=cid, name=name or None, raw=rec, group=i,
                                     meta={"is_error": True} if failed else {})))
        k = len(responses)  # the user's own parts follow the results
        if rest or not parts:
            text, images = parts_text(rest, src)
            units.append(finish(Unit(id=uid if k == 0 else f"{uid}#{k}", role="user", content=text, images=images,
                                     raw=rec, group=i)))
    link_group_sizes(units)
    tools = _tools(envelope.get("tools"))
    return Transcript(units=units, id=src.tid, source_format=NAME, layout=src.layout, tools=tools,
                      envelope=envelope, line=src.line)


# ---------------------------------------------------------------- writing


def _part_of(u: Unit) -> list[dict[str, Any]]:
    if u.role == "tool":
        key = "error" if u.meta.get("is_error") else "output"
        response: dict[str, Any] = {"name": u.name or "", "response": {key: u.content}}
        if u.tool_call_id:
            response["id"] = u.tool_call_id
        return [{"functionResponse": response}]
    parts: list[dict[str, Any]] = [{"text": u.content}] if u.content or not u.tool_calls else []
    for c in u.tool_calls:
        call: dict[str, Any] = {"id": c.id, "name": c.name, "args": args_object(c.arguments)}
        parts.append({"functionCall": call})
    return parts


def write(t: Transcript) -> tuple[list[Any], dict[str, Any]]:
    """Contents for a transcript, and the request's other keys (see the module doc)."""
    same = t.source_format == NAME
    out: list[dict[str, Any]] = []
    extras: dict[str, Any] = {}
    system = [u.content for u in t.units if u.role == "system"]
    if system and not (same and "systemInstruction" in t.envelope):
        extras["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    if t.tools and not (same and "tools" in t.envelope):
        decls = [tool.get("function", tool) for tool in t.tools if isinstance(tool, dict)]
        extras["tools"] = [{"functionDeclarations": decls}]
    for raw, run in raw_groups([u for u in t.units if u.role != "system"]):
        if same and raw is not None and not any(joins(u) for u in run):
            out.append(raw)
            continue
        for u in run:
            if u.role == "assistant" and not (u.content or u.tool_calls):
                continue
            role = "model" if u.role == "assistant" else "user"
            last = out[-1] if out else None
            # one Content per turn: the calls of a response (written one unit each by some
            # formats) together, a turn's results together, a joining unit in the one before
            same_turn = last is not None and last["role"] == role and (
                joins(u) or role == "model" or u.role == "tool" and all("functionResponse" in p for p in last["parts"]))
            if same_turn and last is not None:
                out[-1] = {**last, "parts": [*last["parts"], *_part_of(u)]}
            else:
                out.append({"role": role, "parts": _part_of(u)})
    return out, extras


# ---------------------------------------------------------------- validating


def _problems(contents: Any, where: str) -> list[str]:
    """What `generateContent` refuses: roles user/model, parts of one known kind each, no empty
    Content, the history opening with the user, every function call answered in the next user
    Content."""
    if not isinstance(contents, list):
        return [f"{where}contents: not a list"]
    out: list[str] = []
    waiting: list[str] = []
    for i, c in enumerate(contents):
        at = f"{where}content {i + 1}"
        if not isinstance(c, dict) or c.get("role", "user") not in _ROLES or not isinstance(c.get("parts"), list):
            out.append(f"{at}: expected {{role: user|model, parts: [...]}}")
            continue
        if not c["parts"]:
            out.append(f"{at}: no parts")
        if i == 0 and c.get("role", "user") != "user":
            out.append(f"{at}: the first Content must be the user's")
        for p in c["parts"]:
            if not isinstance(p, dict) or not (set(p) & _PART_KEYS) or set(p) - _PART_KEYS:
                out.append(f"{at}: a part of no known kind ({', '.join(sorted(p)) if isinstance(p, dict) else p!r})")
        answers = [str(p["functionResponse"].get("name")) for p in c["parts"]
                   if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
        if waiting and c.get("role", "user") == "user":
            for name in waiting:
                if name not in answers:
                    out.append(f"{at}: the function call {name} before has no functionResponse here")
            waiting = []
        elif waiting:
            out.append(f"{at}: function calls before ({', '.join(waiting)}) got no response")
            waiting = []
        if c.get("role") == "model":
            waiting = [str(p["functionCall"].get("name")) for p in c["parts"]
                       if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)]
        elif answers and i > 0 and not any(isinstance(p, dict) and "functionCall" in p
                                           for p in contents[i - 1].get("parts") or [] if isinstance(contents[i - 1], dict)):
            out.append(f"{at}: a functionResponse answers no call of the Content before")
    return out


def validate(data: Any) -> list[str]:
    """The Gemini API's rules on written Contents (a request, an array, lines, a dataset)."""
    found = parsed(data)
    if isinstance(found, dict):
        items = [found]
    elif isinstance(found, list) and found and all(isinstance(x, dict) and KEY in x for x in found):
        items = found
    else:
        items = [{KEY: found}]
    out: list[str] = []
    for n, obj in enumerate(items):
        where = f"conversation {n + 1}: " if len(items) > 1 else ""
        out.extend(_problems(obj.get(KEY), where))
    return out[:MAX_PROBLEMS]


# Gemini CLI's `/chat share x.md` (serializeHistoryToMarkdown): each Content as an icon and
# `## USER` or `## MODEL`, its parts run together, between `---` lines
_SHARED_MARKDOWN = re.compile(r"(?m)^\S{1,4} ## (USER|MODEL)[ \t]*\r?$")


def hint(found: Any) -> str | None:
    """Gemini CLI's markdown share of a chat: the same Contents ctxkit reads shared as JSON."""
    if isinstance(found, str) and {m.group(1) for m in _SHARED_MARKDOWN.finditer(found)} == {"USER", "MODEL"}:
        return ("Gemini CLI's markdown share of a chat (/chat share x.md: its tool calls and "
                "results run into the text): share it as JSON (/chat share x.json) and read that "
                "(--from gemini)")
    return None


FORMAT = Format.of_module(__name__, label="Gemini API contents", shape="messages", key=KEY,
                          also_keys=("history",))
