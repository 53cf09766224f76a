"""Prose: sentences ranked by salience, cut at sentence boundaries; the word splitter relevance shares."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence

from ctxkit.compress.base import TokenCounter, _count_lines

# A sentence ends at a run of . ! ? followed by whitespace or the end, or at a run of newlines.
# A run followed by anything else ("v1.2", "a.b", "?x") is inside the sentence: the pattern takes
# it in its stride (one pass), where a pattern that failed at it and tried again from the next
# character took time quadratic in a long line with dots (534 ms against 10 ms on real logs).
_SENTENCE = re.compile(r"[^\n.!?]*(?:[.!?]+(?=[^\s.!?])[^\n.!?]*)*(?:[.!?]+(?=\s|$)|\n+|$)")


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{2,}")


STOPWORDS = frozenset(
    """the and for that this with you are was have has not but from they will would there
    their what which when where who into then than them these those been being its our your
    can could should just also about more some such only over very any all one out get
    let use used using make made here were had did does doing done how why""".split()
)


def split_sentences(text: str) -> list[str]:
    """Sentences with their trailing whitespace, so joining them gives the text back."""
    return list(iter_sentences(text))


def iter_sentences(text: str) -> Iterator[str]:
    """`split_sentences`, one at a time (a caller after the first few reads no further)."""
    held: str | None = None  # a piece waits for the whitespace-only pieces that glue onto it
    for piece in _pieces(text):
        if held is not None and not piece.strip():
            held += piece
            continue
        if held is not None:
            yield held
        held = piece
    if held is not None:
        yield held


def _pieces(text: str) -> Iterator[str]:
    n = len(text)
    pos = 0
    for m in _SENTENCE.finditer(text):
        if m.end() == m.start():
            if m.end() >= n:
                break
            continue
        end = m.end()
        while end < n and text[end] in " \t":
            end += 1
        yield text[pos:end]
        pos = end
    if pos < n:
        yield text[pos:]


def words(text: str) -> list[str]:
    """Lower-cased content words (paths and identifiers kept whole)."""
    if text.isascii():  # the pattern's letters are ASCII of either case: lower-case first
        found = (w.strip("./-") for w in _WORD.findall(text.lower()))
    else:  # lower-casing other letters may make ASCII ones ("İ" -> "i̇"): match first
        found = (m.lower().strip("./-") for m in _WORD.findall(text))
    return [w for w in found if w and w not in STOPWORDS]


def sentence_scores(sentences: Sequence[str]) -> list[float]:
    """TF-IDF weight of each sentence, first and last sentences boosted."""
    bags = [Counter(words(s)) for s in sentences]
    n = len(sentences)
    df: Counter[str] = Counter()
    tf: Counter[str] = Counter()
    for bag in bags:
        df.update(bag.keys())
        tf.update(bag)
    scores = []
    for i, bag in enumerate(bags):
        if not bag:
            scores.append(0.0)
            continue
        weight = sum(math.log(1 + tf[w]) * math.log(1 + n / df[w]) for w in bag)
        score = weight / math.sqrt(sum(bag.values()) + 1)
        if i == 0:
            score *= 1.5
        if i == n - 1:
            score *= 1.25
        scores.append(score)
    return scores


def compress_text(text: str, target_tokens: int, tok: TokenCounter) -> str:
    """The most informative sentences (TF-IDF, first/last boosted), in their original order.

    Cuts fall between sentences or lines only, and the first sentence that has words is always
    kept, so the reader still sees what the text was about; a text of one sentence stays whole.
    A fenced code block (```) is kept or left out whole, so the markdown stays balanced.
    """
    sentences = _merge_fences(split_sentences(text))
    head = next((i for i, s in enumerate(sentences) if _HAS_WORD.search(s)), None)
    if len(sentences) <= 1 or head is None:
        return text
    counts = _count_lines(tok, sentences)
    scores = sentence_scores(sentences)
    order = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))
    budget = target_tokens - 4
    keep: set[int] = {head}
    used = counts[head]
    seen: set[str] = {_key(sentences[head])}
    for i in order:
        key = _key(sentences[i])
        if key in seen or used + counts[i] > budget:
            continue  # a repeated sentence says nothing new
        seen.add(key)
        keep.add(i)
        used += counts[i]
    out: list[str] = []
    prev = -1
    for i in sorted(keep):
        if i != prev + 1:
            # a piece that started a line (a fence, a list item) still starts one
            out.append("[...]\n" if sentences[i - 1].endswith("\n") else "[...] ")
        out.append(sentences[i])
        prev = i
    if prev != len(sentences) - 1:
        out.append(" [...]")
    return "".join(out).rstrip()


_HAS_WORD = re.compile(r"[^\W_]")
_FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)


def _merge_fences(pieces: list[str]) -> list[str]:
    """Pieces with every fenced code block (from its opening ``` line to its closing one)
    joined into one, so a cut never falls inside it."""
    out: list[str] = []
    open_fence = False
    for piece in pieces:
        if open_fence:
            out[-1] += piece
        else:
            out.append(piece)
        # a piece may hold several fence lines (a fence inside a sentence's text): count them
        if len(_FENCE.findall(piece)) % 2:
            open_fence = not open_fence
    return out


def _key(sentence: str) -> str:
    return " ".join(sentence.split()).lower()
