"""How other agents and simple baselines compact, and when agents do.

`RECIPES` (a registry, as strategies are): each entry compacts a transcript into a token
budget the way that peer would (`baselines`: drop the oldest messages, mask old tool outputs,
clear all but the newest tool results, LangChain's trim_messages; `agents`: Codex CLI's and
Gemini CLI's own recipes, with ctxkit's summarizer standing in for their LLM). `triggers`: when
each coding agent auto-compacts (`ctxkit guard --as`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxkit import plugins
from ctxkit.counting import Fit
from ctxkit.errors import registered
from ctxkit.recipes import agents, baselines
from ctxkit.recipes.baselines import Recipe


@dataclass(frozen=True)
class Peer:
    """One registered recipe: its function, its label in tables, and what it needs."""

    run: Recipe
    label: str
    requires: str = ""  # a module that must import (an optional extra), "" when none
    summarizes: bool = False  # writes a summary (ctxkit's summarizer standing in)


RECIPES: dict[str, Peer] = {
    "drop_oldest": Peer(baselines.drop_oldest, "drop oldest messages (pairs kept)"),
    "observation_masking": Peer(baselines.mask_observations, "observation masking (newest kept)"),
    "clear_tool_uses": Peer(baselines.clear_tool_uses, "clear_tool_uses (keep newest 3)"),
    "langchain_trim": Peer(
        baselines.langchain_trim, "LangChain trim_messages", requires="langchain_core"
    ),
    "codex_cli": Peer(agents.codex, "Codex CLI recipe*", summarizes=True),
    "gemini_cli": Peer(agents.gemini_cli, "Gemini CLI recipe*", summarizes=True),
}

# Peers of other distributions: entry points of the group `ctxkit.peers` (see `ctxkit.plugins`).
RECIPES.update(plugins.load("ctxkit.peers", lambda obj: isinstance(obj, Peer), "a ctxkit.recipes.Peer"))


def get_recipe(name: str) -> Peer:
    """The recipe registered under `name`; unknown names list the known ones."""
    return registered(RECIPES, "recipe", name)


__all__ = ["RECIPES", "Fit", "Peer", "Recipe", "get_recipe"]
