"""Type-aware compressors: shrink one text to about a token target, keeping what matters.

Code loses comments and blank lines first (indentation untouched, so Python still parses),
then becomes an outline of signatures. Logs collapse repeats and keep the head, every
error/warning/traceback line and the tail. JSON keeps every key and elides long arrays and
strings. Prose keeps its most informative sentences, in order. Every compressor is
deterministic and returns the best it can when the target is out of reach.
"""

from __future__ import annotations

from ctxkit.compress.base import TOLERANCE, Line, TokenCounter
from ctxkit.compress.code import compress_code
from ctxkit.compress.json import compress_json
from ctxkit.compress.kinds import COMPRESSORS, KINDS, compress, detect_kind
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
    "sentence_scores",
    "split_sentences",
    "words",
]
