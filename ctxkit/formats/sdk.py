"""Schema checks of written transcripts against the providers' own SDK parameter types.

    >>> problems("openai", '[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""}]')
    ['message 2: empty assistant message']

`problems(fmt, data)` takes what a writer produced (the text, or the parsed records) and lists
what a provider would refuse; [] means valid. It is each format's own `validate` (its module
holds the rules; `formats.checks` what they share). The types are the official SDKs' request
parameters, checked with pydantic's `TypeAdapter` (the `openai` and `anthropic` packages are
development dependencies, imported only when a check runs):

- openai: `list[ChatCompletionMessageParam]`, tools as `ChatCompletionToolUnionParam`;
- anthropic: `list[MessageParam]`, `system` as text or text blocks, tools as `ToolUnionParam`;
- claude-code: each record's `message` as an anthropic `MessageParam`, and the messages Claude
  Code sends (consecutive records of one role merged) under the anthropic rules;
- codex: each response item as `openai.types.responses.ResponseInputItemParam`;
- sharegpt: the turns' shape, then the conversation converted to openai messages;
- atif: Harbor's ATIF (RFC 0001, v1.0 to v1.6) as its reference pydantic models define it,
  written out here as rules (no harbor dependency): required fields and types, no unknown keys,
  step ids 1, 2, ..., agent-only fields only on agent steps, each `source_call_id` a call of its
  own step;
- aider: the text reads as aider chat history sessions, each opened by its header.
- openhands, swe-agent: no SDK type; the structure their own loaders rely on (event ids and
  `cause` links, condensations; history roles, message types and tool call ids).

A TypedDict cannot say everything the APIs enforce, so the rules are checked beside it: a tool
result answers a call of the message just before (and every call gets its result), Anthropic's
first message is the user's and no content is empty (but a final assistant turn's), an
assistant message is not `""`, and keys a provider refuses (`reasoning_content` in chat
messages) are reported, since pydantic drops unknown keys of a TypedDict without a word.
"""

from __future__ import annotations

from typing import Any

__all__ = ["problems"]


def problems(fmt: str, data: Any) -> list[str]:
    """What the provider of `fmt` would refuse in a written transcript (text or parsed); [] if none."""
    from ctxkit.errors import unknown_name
    from ctxkit.formats.registry import FORMATS

    if fmt not in FORMATS:
        raise unknown_name("format to check", fmt, FORMATS)
    return list(FORMATS[fmt].validate(data))
