"""The format contract: what a format module gives the registry, and all the registry reads.

A format module ends with one record, `FORMAT = Format.of_module(__name__, ...)` (its parts
found by their conventional names, `CONVENTIONS`, and the rest declared), and
`ctxkit.formats.registry` lists the modules, one line each, in detection order. Everything
else (the CLI's `--from`/`--to` choices, detection, the readers' and writers' layouts,
`ctxkit.formats.sdk.problems`, the notes `guard` prints) is built from these records; nothing
outside a format's module names it.

Four shapes of file, each with its own `read` and `write`:

- `messages`: a list of message records, laid out as a JSON array, as JSONL (one record per
  line), as a conversation object holding them under `key` (other keys kept as the envelope),
  or as a dataset (a JSON array or JSONL of conversation objects). `read(records, src)` gives a
  `Transcript`; `write(t)` gives `(records, extras)`, extras being keys of the conversation
  object (a system prompt, tools).
- `log`: an agent's own log, one record per line, one session per file (several sessions are
  written one after the other). `read(records, src)` and `write(t)` as for `messages`.
- `object`: one JSON object per transcript (a dataset: a JSON array or JSONL of them).
  `read(obj, src)` gives a `Transcript`; `write(t)` gives the object.
- `text`: a text file of one or more sessions. `read(text, src)` gives a list of `Transcript`s;
  `write(t)` gives the text of one session.

Detection asks every format, in registry order, and the first that claims the input reads it:
`detect(records)` for a list of records (a JSONL file, a JSON array), `detect_object(obj)` for
a JSON object (a whole transcript or a conversation object), `sniff(line)` for a text file's
first non-blank line. A conversation object no format claims is tried as its records: the
formats whose `key` it holds are asked with the list under that key.

What no format claims is refused, never read as something else: the refusal names what was
found and, where a format knows the file (`hint`: its agent's UI log, headless stream or
markdown export), what it is and the file or `--from` that reads it. A markdown or text file is
a prompt (`gates.prompts`) only when nothing else fits: not JSON, not claimed or known by a
format, and with no run of chat turns in it.

`validate(data)` lists what the app or provider would refuse in written output (the text, or
the parsed records); [] means it loads.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ctxkit.formats.common import Source
from ctxkit.model import Transcript

__all__ = ["CONVENTIONS", "SHAPES", "Format", "Shape", "ToolShape", "agents", "never", "newest_model", "no_hint", "recorded_model"]

Shape = Literal["messages", "log", "object", "text"]
SHAPES: tuple[Shape, ...] = ("messages", "log", "object", "text")
ToolShape = Literal["openai", "anthropic"]  # OpenAI `function` or Anthropic `input_schema` tool schemas


def never(_: Any) -> bool:
    """A detector that claims nothing (a format without objects, or without a text form)."""
    return False


def no_hint(_: Any) -> str | None:
    """A format that knows no file beside its own (see `Format.hint`)."""
    return None


def recorded_model(t: Transcript) -> str | None:
    """The model a transcript's reader found in its file (`metadata["model"]`), or None."""
    return newest_model(t, (), never)


def newest_model(t: Transcript, records: Iterable[Any], name_in: Callable[[dict[str, Any]], Any]) -> str | None:
    """The model a transcript's reader recorded, else the newest its source records name
    (`name_in(record)`, asked from the last record back), else None."""
    found = t.metadata.get("model")
    if isinstance(found, str):
        return found
    for rec in reversed(list(records)):
        if isinstance(rec, dict) and isinstance(model := name_in(rec), str):
            return model
    return None


def agents(names: list[str]) -> str:
    """Agent names as words: "A", "A and B", "A, B and C"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# The names a format module gives its parts by convention, each the `Format` field it fills
# (`Format.of_module`): a module defines `NAME`, `read`, `write` and `validate`, and whichever
# of the others it has.
CONVENTIONS: dict[str, str] = {
    "NAME": "name",
    "APP_LABEL": "label",
    "detect": "detect",
    "read": "read",
    "write": "write",
    "validate": "validate",
    "detect_object": "detect_object",
    "MESSAGES_KEY": "key",
    "sniff": "sniff",
    "looks_like": "looks_like",
    "SUFFIX": "suffix",
    "OMITS": "omits",
    "EXTENSION": "extension",
    "hint": "hint",
    "TOOL_SHAPE": "tool_shape",
    "named_model": "model",
}


# eq=False: a format is one object of the registry, the same by identity; comparing 24 fields (and
# compiling the method that does, 1 ms of every start-up) buys nothing.
@dataclass(frozen=True, eq=False)
class Format:
    """One transcript format, as the registry sees it (see the module doc for the shapes)."""

    name: str  # the --from/--to name
    label: str  # what a file of it is called in messages ("Claude Code log")
    shape: Shape
    detect: Callable[[list[Any]], bool]  # does this list of records belong to the format?
    read: Callable[[Any, Source], Transcript | list[Transcript]]
    write: Callable[[Transcript], Any]
    validate: Callable[[Any], list[str]]  # problems of written output; [] = valid
    detect_object: Callable[[dict[str, Any]], bool] = never
    # messages: the key of the records in a conversation object; bare=False: only found inside
    # one (ShareGPT turns, a SWE-agent history), never as a bare list of records
    key: str = "messages"
    # the key of the records in a conversation object of the format's own (`write_object`, an
    # object format's whole transcript) when it is not `key`: ctxkit's units record holds
    # `units`, an ATIF trajectory `steps`. A dataset's messages column (Parquet) is one of the
    # formats' keys and item keys.
    item_key: str | None = None
    # messages: other keys a conversation object of the format may hold its records under (Gemini
    # CLI's `/chat save` checkpoint, `{history: Content[]}`), written back under the one read
    also_keys: tuple[str, ...] = ()
    bare: bool = True
    lines: bool = False  # messages: always written one record per line (a JSONL file of its own)
    array: bool = False  # messages: always written as one JSON array of its records (a task file)
    # messages: a conversation object of the format's own (ctxkit's units dataset line), read
    # and written whole instead of as envelope + records
    read_object: Callable[[dict[str, Any], Source], Transcript] | None = None
    write_object: Callable[[Transcript], dict[str, Any]] | None = None
    # text: how a file is recognised (its first non-blank line; the first 8 KB of a *.md file
    # found in a folder) and the file-name suffix that marks one
    sniff: Callable[[bytes], bool] = never
    looks_like: Callable[[bytes], bool] = never
    suffix: str | None = None
    strict: bool = False  # forced with --from, a file none of whose records it detects is refused
    agent: str | None = None  # the agent app whose own file this is ("Claude Code"); None for an API's
    holds_tools: bool = True  # False: an agent's own file, no tool schemas in it (the app serves them)
    omits: str | None = None  # what the model saw that the file never holds (guard says so)
    sidechains: bool = False  # has sub-agent records `--include-sidechains` brings in
    compaction: bool = False  # reads its agent's own compaction (`--include-compacted` reads past it)
    extension: str | None = None  # the file extension `simulate` gives a transcript written in it
    # A file of the format's agent that the format does not read (a UI log, a headless stream,
    # a markdown export), told by what was found: the parsed first record or object, or a text
    # file's first 8 KB (str). Says what it is and what to read instead ("Cline's UI messages:
    # read api_conversation_history.json beside it (--from cline)"); None when it is none.
    hint: Callable[[Any], str | None] = no_hint
    # the shape its tool schemas are written in (`common.tools_as`); None: kept as they came
    tool_shape: ToolShape | None = None
    # the file suffixes a folder argument expands to (a text format's *.md files are found by
    # `looks_like` instead); Parquet datasets (*.parquet) hold any format and are found as well
    suffixes: tuple[str, ...] = (".json", ".jsonl")
    # the model a transcript read from the format names (the newest it records), or None
    model: Callable[[Transcript], str | None] = recorded_model

    @classmethod
    def of_module(cls, module: str, **declared: Any) -> Format:
        """The format a module declares at its end: the parts it names by convention
        (`CONVENTIONS`; `detect` is `never` where it has none), and `declared`, the fields it
        has no conventional name for or names otherwise.

            FORMAT = Format.of_module(__name__, label="Pi session", shape="log", agent="Pi")
        """
        names = vars(sys.modules[module])
        found = {field: names[name] for name, field in CONVENTIONS.items() if name in names}
        return cls(**{"detect": never, **found, **declared})

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"format {self.name!r}: shape {self.shape!r} is not one of {', '.join(SHAPES)}")
