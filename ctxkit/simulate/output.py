"""Writing generated transcripts: one file per scenario or a dataset, with the truth sidecar."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ctxkit.errors import unknown_name
from ctxkit.formats import FORMATS, WRITABLE
from ctxkit.model import Transcript
from ctxkit.truth import write_truth

OUTPUT_FORMATS = WRITABLE
_EXTENSIONS = {name: FORMATS[name].EXTENSION for name in WRITABLE}


TRUTH_NAME = "truth.jsonl"


def for_output(t: Transcript, fmt: str) -> Transcript:
    """A copy to write: ground truth taken out of the metadata (it goes to the sidecar).

    A single openai/anthropic transcript is written as a JSON document, units as JSONL.
    """
    metadata = {k: v for k, v in t.metadata.items() if k != "ground_truth"}
    return t.replace(metadata=metadata, layout="lines" if fmt == "units" else "array")


def is_dir_target(out: str) -> bool:
    """`-o` names a directory when it is one already or ends with a path separator."""
    return out.endswith(("/", os.sep)) or Path(out).is_dir()


def truth_path_for(out: str) -> Path:
    """Where the sidecar goes: `DIR/truth.jsonl`, or `<stem>.truth.jsonl` beside a file."""
    if is_dir_target(out):
        return Path(out) / TRUTH_NAME
    p = Path(out)
    return p.with_name(p.name.split(".")[0] + ".truth.jsonl")


def save(
    transcripts: Sequence[Transcript],
    out: str,
    fmt: str = "units",
    truth: str | None = None,
) -> list[Path]:
    """Write transcripts to a file or a directory (one file each) plus the ground-truth sidecar.

    Returns the paths written, sidecar last. Every file is written atomically.
    """
    from ctxkit.formats import write_path

    if fmt not in OUTPUT_FORMATS:
        raise unknown_name("output format", fmt, OUTPUT_FORMATS)
    written: list[Path] = []
    files: list[str | None] | None = None
    if is_dir_target(out):
        directory = Path(out)
        directory.mkdir(parents=True, exist_ok=True)
        for t in transcripts:
            path = directory / f"{t.id}{_EXTENSIONS[fmt]}"
            write_path([for_output(t, fmt)], str(path), fmt)
            written.append(path)
        files = [p.name for p in written]
    else:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_path([for_output(t, fmt) for t in transcripts], out, fmt)
        written.append(Path(out))
    sidecar = Path(truth) if truth else truth_path_for(out)
    write_truth(transcripts, sidecar, files)
    written.append(sidecar)
    return written
