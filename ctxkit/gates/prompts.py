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

from ctxkit.errors import InputError
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


def is_prompt_file(path: str) -> bool:
    """Whether a path names a prompt file: a text, markdown or YAML file that is no transcript."""
    if not path.lower().endswith(PROMPT_SUFFIXES):
        return False
    from ctxkit.formats import is_text_transcript

    return not (path.lower().endswith((".md", ".markdown")) and is_text_transcript(path))


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
