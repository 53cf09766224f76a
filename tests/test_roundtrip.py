"""Every real transcript through `compact` (to a third of its tokens) and `expand`: expand gives
every record of the file back, and the written outputs stay what they were (SHA-256 goldens
under tests/data/roundtrip, one per file; rewrite with `pytest --regen-goldens` after an
intended change)."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REALDATA

from ctxkit.cli import cli
from ctxkit.formats import WRITABLE, read_path, write_transcripts
from ctxkit.tokens import count_transcript, get_tokenizer

GOLDEN = Path(__file__).parent / "data" / "roundtrip"
REAL_FILES = sorted(
    f"{p.parent.name}/{p.name}" for p in REALDATA.glob("*/*") if p.is_file()
) if REALDATA.is_dir() else []


def records(data: bytes) -> object:
    """A file's records: its JSON document, its JSONL lines, or (text) its bytes."""
    try:
        return json.loads(data)
    except ValueError:
        pass
    try:
        return [json.loads(line) for line in data.splitlines() if line.strip()]
    except ValueError:
        return data


def _compact_expand(path: Path, tmp: Path) -> tuple[bytes, bytes]:
    """The compacted file (a third of the largest conversation's tokens) and its expansion."""
    tok = get_tokenizer("cl100k_base")
    limit = max(count_transcript(t, tok).total for t in read_path(str(path)))
    src = tmp / ("in" + path.suffix)
    src.write_bytes(path.read_bytes())
    small, back = tmp / ("small" + path.suffix), tmp / ("back" + path.suffix)
    run = CliRunner().invoke
    result = run(cli, ["compact", str(src), "--limit", str(limit), "--target", str(max(limit // 3, 1)), "-o", str(small)],
                 catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    result = run(cli, ["expand", str(small), "-o", str(back)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return small.read_bytes(), back.read_bytes()


@pytest.mark.parametrize("name", REAL_FILES)
def test_realdata_compact_and_expand_outputs_are_unchanged(
    realdata: Path, tmp_path: Path, name: str, golden: Callable[[Path, str | bytes], None]
) -> None:
    small, back = _compact_expand(realdata / name, tmp_path)
    original = (realdata / name).read_bytes()
    assert records(back) == records(original)  # every record back
    if name.endswith(".jsonl") or name.endswith(".md"):
        assert back == original  # byte for byte
    digests = f"compacted {hashlib.sha256(small).hexdigest()}\nexpanded {hashlib.sha256(back).hexdigest()}\n"
    golden(GOLDEN / f"{name}.sha256", digests)


@pytest.mark.parametrize("name", REAL_FILES)
def test_realdata_written_in_every_format_is_unchanged(
    realdata: Path, name: str, golden: Callable[[Path, str | bytes], None]
) -> None:
    ts = list(read_path(str(realdata / name)))
    lines = []
    for fmt in (None, *WRITABLE):
        buf = io.StringIO()
        write_transcripts(ts, buf, fmt)
        lines.append(f"{fmt or 'own'} {hashlib.sha256(buf.getvalue().encode('utf-8')).hexdigest()}\n")
    golden(GOLDEN / f"{name}.written.sha256", "".join(lines))
