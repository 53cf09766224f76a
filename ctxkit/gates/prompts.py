"""Prompt files: a system prompt kept in a repository, as text or as a list of sections.

A prompt file is counted, gated and priced like a transcript whose only unit is that system
prompt, so `count`, `guard --baseline` and the CI reports treat it as one more input. Its
sections say where in the file a change is: a text or markdown prompt is cut at its markdown
headings (outside code fences), a YAML or JSON prompt is a list of `{name, content, cacheable}`
(`cacheable` defaults to true; a section that changes per call, such as today's date or the
user's name, is `cacheable: false`).

    >>> [(s.name, s.line) for s in split_sections("You help.\\n\\n## Tools\\nUse them.\\n")]
    [('(preamble)', 1), ('Tools', 3)]
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from ctxkit.errors import CtxkitError, InputError
from ctxkit.gates import PROMPT_SUFFIXES
from ctxkit.model import Transcript, Unit

# Files read as prompts when no transcript format recognises them (a `.md` file that is an aider
# chat history stays a transcript). YAML and JSON prompts are section lists.
SECTION_SUFFIXES = (".yaml", ".yml", ".json")
SECTION_JOIN = "\n\n"  # how the sections of a YAML/JSON prompt are put together
PROMPT_FORMAT = "prompt"  # `Transcript.source_format` of a prompt file

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Section:
    """One named part of a system prompt, and the line of its file where it starts."""

    name: str
    content: str
    cacheable: bool = True
    line: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "line": self.line, "cacheable": self.cacheable}


# A prompt is a prompt only when nothing else fits. A `.prompt`, `.yaml` or `.yml` file says it
# is one; a text or markdown file is one when it is not JSON, no format reads it or knows it
# (`formats.known_file`), and it holds no run of chat turns (`chat_turns`): a chat saved as
# markdown in a layout no format reads is refused, never counted as a 300k-token system prompt.
_SAYS_PROMPT = (".prompt", ".yaml", ".yml")
_HEAD = 256 * 1024  # what is looked at for chat turns
_MIN_TURNS = 3  # of each side: a few-shot example in a prompt has fewer
_USER = r"user|human|you|me|customer"
_AI = r"assistant|ai|model|gemini|claude|agent|bot|chatgpt|gpt|copilot|codex|cursor|qwen|llm"
# A line that is only a speaker's name: `## User`, `**Assistant:**`, `_**User (time)**_`,
# `🧑‍💻 ## USER`, `### 🤖 Assistant`, `Human:`
_TURN = re.compile(
    rf"^[ \t]{{0,3}}(?:#{{1,6}}[ \t]*)?(?:[^\w\s]{{1,4}}[ \t]*)?(?:#{{1,6}}[ \t]*)?(?:[^\w\s]{{1,4}}[ \t]*)?"
    rf"[*_]{{0,3}}[ \t]*(?:(?P<user>{_USER})|(?P<ai>{_AI}))(?:[ \t]*\([^)\n]*\))?[ \t]*:?[ \t]*[*_]{{0,3}}:?[ \t]*\r?$",
    re.I | re.M,
)


def chat_turns(text: str) -> str | None:
    """What makes a text a chat rather than a prompt, in words ("12 user and 11 assistant
    headings"), when it holds at least three lines of each side that only name a speaker."""
    users = ais = 0
    fence: str | None = None
    for line in text.splitlines():
        mark = _FENCE.match(line)
        if mark:
            fence = mark.group(1)[0] if fence is None else (None if mark.group(1)[0] == fence else fence)
            continue
        if fence is not None:
            continue
        m = _TURN.match(line)
        if m:
            users += m.group("user") is not None
            ais += m.group("ai") is not None
    if users >= _MIN_TURNS and ais >= _MIN_TURNS:
        return f"{users} user and {ais} assistant headings"
    return None


def is_prompt_file(path: str) -> bool:
    """Whether a path names a prompt file: a `.prompt` or YAML file, or a text or markdown file
    that nothing else fits (see above). A text or markdown file that is a chat no format reads,
    or a file a format knows it does not read, is refused (InputError) with what was found."""
    lower = path.lower()
    if not lower.endswith(PROMPT_SUFFIXES):
        return False
    if lower.endswith(_SAYS_PROMPT):
        return True
    from ctxkit.formats import FORMATS, is_text_transcript, known_file, read_text

    if lower.endswith((".md", ".markdown")) and is_text_transcript(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return True  # reading it as a prompt says why it cannot be read
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):
        return False  # JSON: a transcript format decides, or says why none does
    text = head.decode("utf-8", "replace")
    said = known_file(text[:8192])
    if said:
        raise InputError(path, None, f"not a prompt: {said}")
    chat = chat_turns(text)
    if chat is None:
        return True
    readers = []
    for fmt in FORMATS.values():
        if fmt.shape != "text":
            continue
        try:
            if sum(len(t.units) for t in read_text(text, fmt.name)) >= 2 * _MIN_TURNS:
                readers.append(fmt.name)
        except CtxkitError:
            continue
    flag = f"try --from {readers[0]}" if readers else "no format reads its layout"
    raise InputError(path, None, f"not a prompt: a chat transcript ({chat}) that no format is sure of; "
                                 f"{flag} (a prompt after all: name it *.prompt)")


def split_sections(text: str) -> list[Section]:
    """A text prompt cut at its markdown headings; the text before the first is `(preamble)`."""
    sections: list[Section] = []
    name, start = "(preamble)", 1
    lines: list[str] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        body = line.rstrip("\r\n")
        mark = _FENCE.match(body)
        if mark:
            if fence is None:
                fence = mark.group(1)[0]
            elif mark.group(1)[0] == fence:
                fence = None
        heading = _HEADING.match(body) if fence is None else None
        if heading:
            if lines or sections:
                sections.append(Section(name, "".join(lines), True, start))
            name, start, lines = heading.group(2), number, [line]
            continue
        lines.append(line)
    if lines or not sections:
        sections.append(Section(name, "".join(lines), True, start))
    return [s for s in sections if s.content.strip() or len(sections) == 1]


def read_sections(path: str) -> list[Section]:
    """The sections of a prompt file (text cut at headings, or a YAML/JSON section list)."""
    from ctxkit.formats.extras import read_text_file

    text = read_text_file(path)
    if path.lower().endswith(SECTION_SUFFIXES):
        return _section_list(path, text)
    return split_sections(text)


def prompt_text(sections: list[Section], path: str) -> str:
    """The system prompt a model reads: the file's text, or the sections joined by a blank line."""
    if path.lower().endswith(SECTION_SUFFIXES):
        return SECTION_JOIN.join(s.content for s in sections)
    return "".join(s.content for s in sections)


def read_prompt(path: str) -> Transcript:
    """A prompt file as a transcript of one system unit; its sections in `metadata`."""
    sections = read_sections(path)
    unit = Unit(id="prompt", role="system", content=prompt_text(sections, path))
    return Transcript(
        units=[unit],
        id=os.path.basename(path),
        source_format=PROMPT_FORMAT,
        layout="object",
        path=path,
        metadata={"prompt_sections": sections},
    )


def sections_of(t: Transcript) -> list[Section]:
    """The sections of a transcript's system prompt: a prompt file's own, else each system unit
    cut at its markdown headings."""
    given = t.metadata.get("prompt_sections")
    if given:
        return list(given)
    out: list[Section] = []
    for u in t.system_units:
        out.extend(split_sections(u.content))
    return out


# --- YAML / JSON section lists -----------------------------------------------------------------


def _section_list(path: str, text: str) -> list[Section]:
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise InputError(path, line, f"not valid YAML or JSON: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(path, None, f"not valid YAML or JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("sections"), list):
        data = data["sections"]
        root = next(v for k, v in getattr(root, "value", ()) if k.value == "sections")
    if not isinstance(data, list) or not data:
        raise InputError(
            path, None, "expected a list of sections {name, content, cacheable} (or {sections: [...]})"
        )
    nodes = list(getattr(root, "value", []))
    sections = []
    for i, item in enumerate(data):
        line = nodes[i].start_mark.line + 1 if i < len(nodes) else None
        if not isinstance(item, dict):
            raise InputError(path, line, f"section #{i + 1} is not a mapping with name and content")
        name, content = item.get("name"), item.get("content")
        if not isinstance(content, str):
            raise InputError(path, line, f"section #{i + 1} has no text `content`")
        if name is None:
            name = f"#{i + 1}"
        cacheable = item.get("cacheable", True)
        if not isinstance(cacheable, bool):
            raise InputError(path, line, f"section {name!r}: cacheable must be true or false")
        unknown = sorted(set(item) - {"name", "content", "cacheable"})
        if unknown:
            raise InputError(
                path, line, f"section {name!r}: unknown key {unknown[0]!r} (known: name, content, cacheable)"
            )
        sections.append(Section(str(name), content, cacheable, line or 1))
    return sections


def section_rows(t: Transcript, tok: Any, label: str, min_cacheable: int | None = None) -> list[dict[str, Any]]:
    """`count --by section`: a row per section of the system prompt (a prompt file's own
    sections, else each system message cut at its headings), with its share and whether a
    prefix cache keeps it as laid out."""
    from ctxkit.budget.cache import DEFAULT_MIN_CACHEABLE, cache_layout

    layout = cache_layout(sections_of(t), tok, min_cacheable or DEFAULT_MIN_CACHEABLE)
    total = layout.total_tokens or 1
    return [
        {
            "transcript": label,
            "section": s.name,
            "line": s.line,
            "cacheable": s.cacheable,
            "tokens": s.tokens,
            "share_pct": round(100 * s.tokens / total, 1),
            "cached": s.cached,
        }
        for s in layout.sections
    ]
