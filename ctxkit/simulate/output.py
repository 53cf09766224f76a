"""Writing generated transcripts: one file per scenario or a dataset, with the truth sidecar."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from ctxkit.atomic import atomic_set
from ctxkit.errors import CtxkitError, unknown_name
from ctxkit.fidelity.truth import truth_lines
from ctxkit.formats import FORMATS, WRITABLE
from ctxkit.model import Transcript

# The formats that hold a generated transcript whole, those that name an extension for it: an
# app log has no place for the system prompt (Claude Code) and ShareGPT renumbers tool calls,
# so the ground truth would not match.
_EXTENSIONS = {name: ext for name in WRITABLE if (ext := FORMATS[name].extension) is not None}
OUTPUT_FORMATS = tuple(_EXTENSIONS)


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

    Returns the paths written, sidecar last. The set is atomic: every file and the sidecar, or
    none of them (a transcript is never left without its truth). Folders are not created,
    except a directory target `DIR/` itself (its parent must exist).
    """
    from ctxkit.formats import write_transcripts

    if fmt not in OUTPUT_FORMATS:
        raise unknown_name("output format", fmt, OUTPUT_FORMATS)
    targets: list[tuple[Path, list[Transcript]]] = []
    files: list[str | None] | None = None
    made: Path | None = None
    if is_dir_target(out):
        directory = Path(out)
        if not directory.is_dir():
            parent = directory.absolute().parent
            if not parent.is_dir():
                raise CtxkitError(
                    f"cannot write output {out}: the directory {parent} does not exist"
                )
            try:
                directory.mkdir()
            except OSError as exc:
                raise CtxkitError(f"cannot write output {out}: {exc.strerror or exc}") from None
            made = directory
        targets = [(directory / f"{t.id}{_EXTENSIONS[fmt]}", [t]) for t in transcripts]
        files = [p.name for p, _ in targets]
    else:
        targets = [(Path(out), list(transcripts))]
    sidecar = Path(truth) if truth else truth_path_for(out)
    try:
        with atomic_set() as fileset:
            for path, items in targets:
                with fileset.open(path) as stream:
                    write_transcripts([for_output(t, fmt) for t in items], stream, fmt)
            with fileset.open(sidecar, "wb") as stream:
                for line in truth_lines(transcripts, files):
                    stream.write(line)
    except BaseException:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise
    return [p for p, _ in targets] + [sidecar]
