"""Type-aware compressors: shrink one text to about a token target, keeping what matters.

Code loses comments and blank lines first (indentation untouched, so Python still parses),
then becomes an outline of signatures. Logs collapse repeats and keep the head, every
error/warning/traceback line and the tail. JSON elides long arrays, very large objects and long
strings with marker elements and still parses. Prose keeps its most informative sentences, in
order. Cuts fall between lines or sentences, and a result always keeps some of its text (never
only `[...]`). Every compressor is deterministic and returns the best it can when the target is
out of reach.
"""

from __future__ import annotations

from ctxkit.compress.base import TOLERANCE, Line, TokenCounter, says_something
from ctxkit.compress.code import compress_code
from ctxkit.compress.kinds import COMPRESSORS, KINDS, compress, compress_json, detect_kind
from ctxkit.compress.log import collapse_repeats, compress_log
from ctxkit.compress.text import STOPWORDS, compress_text, sentence_scores, split_sentences, words

__all__ = [
    "COMPRESSORS",
    "KINDS",
    "Line",
    "STOPWORDS",
    "TOLERANCE",
    "TokenCounter",
    "collapse_repeats",
    "compress",
    "compress_code",
    "compress_json",
    "compress_log",
    "compress_text",
    "detect_kind",
    "says_something",
    "sentence_scores",
    "split_sentences",
    "words",
]
