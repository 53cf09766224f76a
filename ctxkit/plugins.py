"""Plugins: formats, strategies and peers that other distributions add through entry points.

A distribution declares them in its `pyproject.toml`, one group per registry, as `llm`'s plugins
do:

    [project.entry-points."ctxkit.formats"]
    toy = "ctxkit_toy.format:FORMAT"      # a `formats.base.Format`
    [project.entry-points."ctxkit.strategies"]
    toy = "ctxkit_toy.strategy"           # a module with NAME, LABEL, Params and the function
    [project.entry-points."ctxkit.peers"]
    toy = "ctxkit_toy.peer:PEER"          # a `recipes.Peer`

Each registry loads its group once, when it is first imported, and registers what it finds
after its own entries. A plugin that does not load, or names something else, is left out with
one line on stderr that names it; the rest of ctxkit works without it.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["GROUPS", "load", "rescan"]

GROUPS = ("ctxkit.formats", "ctxkit.strategies", "ctxkit.peers")


@functools.cache
def _installed() -> list[Any]:
    """Every entry point of the groups above, looked up once for the three registries."""
    if not _declared():
        return []
    import importlib.metadata  # here: 100+ ms of start-up, paid only where a plugin is installed

    return [ep for group in GROUPS for ep in importlib.metadata.entry_points(group=group)]


def _declared() -> bool:
    """Whether a distribution on sys.path declares an entry point of ours: a glance at the
    entry_points.txt files (a few ms), which are what importlib.metadata reads them from."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(entry or ".", name, "entry_points.txt"), "rb") as f:
                        if b"[ctxkit." in f.read():
                            return True
                except OSError:
                    continue
    return False


def rescan() -> None:
    """Forget the installed entry points, so the next `load` looks again (after an install)."""
    _installed.cache_clear()


def load(group: str, accepts: Callable[[Any], bool], what: str) -> list[tuple[str, Any]]:
    """(name, object) of each entry point of `group` whose object `accepts`; `what` names the
    object a plugin must give, in the line that reports one that does not."""
    found: list[tuple[str, Any]] = []
    for ep in (ep for ep in _installed() if ep.group == group):
        dist = f", from {ep.dist.name} {ep.dist.version}" if ep.dist is not None else ""
        where = f"ctxkit: plugin {ep.name!r} ({group} = {ep.value}{dist})"
        try:
            obj = ep.load()
        except Exception as exc:  # a plugin's own bug must not stop ctxkit: report it, go on
            problem = str(exc).splitlines()[0] if str(exc) else ""
            sys.stderr.write(f"{where} not loaded: {type(exc).__name__}: {problem}\n")
            continue
        if not accepts(obj):
            sys.stderr.write(f"{where} not loaded: it is a {type(obj).__name__}, not {what}\n")
            continue
        found.append((ep.name, obj))
    return found
