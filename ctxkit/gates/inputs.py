"""What `count` and `guard` read: transcripts, and prompt files beside them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ctxkit.formats import ReadOptions, ReadStats, expand_paths, read_path
from ctxkit.gates import PROMPT_SUFFIXES
from ctxkit.model import Transcript


def read_inputs(
    paths: Sequence[str], read_opts: ReadOptions, stats: ReadStats | None = None
) -> Iterator[Transcript]:
    """Transcripts of every path (globs and folders expanded, none = stdin); a text, markdown or
    YAML file that no transcript format recognises is a prompt file (`gates.prompts`), unless
    `--from` forces a format."""
    stats = stats if stats is not None else ReadStats()
    for path in expand_paths(list(paths)):
        if path != "-" and read_opts.format is None and path.lower().endswith(PROMPT_SUFFIXES):
            from ctxkit.gates.prompts import is_prompt_file, read_prompt

            if is_prompt_file(path):
                stats.files += 1
                stats.records += 1
                yield read_prompt(path)
                continue
        yield from read_path(path, read_opts, stats=stats)
