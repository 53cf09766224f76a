"""One home for each decision: source checks that fail when a name list or a default is copied
(issue "One engine, one source of truth")."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import ctxkit
from ctxkit.compaction.recovery import RECOVERY_MODES
from ctxkit.formats import FORMATS
from ctxkit.strategies import STRATEGIES

SRC = Path(ctxkit.__file__).parent


@functools.cache
def _parsed() -> tuple[tuple[str, ast.Module], ...]:
    return tuple(
        (str(path.relative_to(SRC)), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(SRC.rglob("*.py"))
    )


def _modules() -> Iterator[tuple[str, ast.Module]]:
    yield from _parsed()


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _strings(tree: ast.Module) -> Iterator[ast.Constant]:
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node


def _places(value: str) -> list[str]:
    return [name for name, tree in _modules() for n in _strings(tree) if n.value == value]


def test_no_click_choice_copies_a_list() -> None:
    """Every `click.Choice` takes a registry's names (or a named tuple), never a literal list."""
    found = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "Choice"
                and node.args
                and isinstance(node.args[0], ast.List)
                and all(isinstance(e, ast.Constant) for e in node.args[0].elts)
            ):
                found.append(f"{name}:{node.lineno}")
    assert found == []


def test_the_default_tokenizer_is_named_once() -> None:
    # the bundled data (OFFLINE_ENCODINGS) and tiktoken's file name, the fast counters', DEFAULT_TOKENIZER
    assert _places("cl100k_base") == ["tokens/encodings.py"] * 2 + ["tokens/fast.py", "tokens/loaders.py"]


def test_one_compaction_goal() -> None:
    """The goal is decided by `budget.compaction_goal` alone: no other code multiplies a limit
    by the warn threshold."""
    defs = [
        name
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in ("compaction_goal", "compaction_target")
    ]
    assert defs == ["budget/__init__.py"]
    products = [
        name
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mult)
        and any(isinstance(s, ast.Attribute) and s.attr == "warn" for s in (node.left, node.right))
    ]
    assert products == ["budget/__init__.py", "budget/__init__.py"]  # Thresholds.bounds and compaction_goal


def test_registry_names_live_in_their_registry() -> None:
    """Strategy, recovery and format names are spelled in their own module; elsewhere code
    refers to the registry. The listed exceptions are decisions about one named member."""
    allowed = {
        # an undone discard gives way to a summary; fresh_start announces its handover
        "compaction/chain.py": {"discard_low_rel", "summarize_old", "fresh_start"},
        "compaction/recovery.py": set(RECOVERY_MODES),  # the registry itself
        "compaction/cleared.py": {"fresh_start"},  # a form of fresh_start: its placeholder says so
        # the builtin actions: deliberate parameter variants of named strategies
        "rl/actions.py": {"summarize_old", "mask_observations", "offload", "discard_low_rel", "truncate"},
        "bench/suites/embed.py": {"claude-code"},  # real Claude Code logs to embed
        "engines/guard_pending.py": {"offload"},  # a pending output's planned action
        # the agents of those names (guard --as)
        "budget/triggers.py": {"claude-code", "codex", "aider", "gemini-cli", "opencode", "cline"},
        # the agent policy registry (ctxkit replay --as), its edits named as the agents name them
        "recipes/policies.py": {"claude-code", "codex", "gemini-cli", "openhands", "opencode"},
        # each policy reads its own agent's trigger; Gemini CLI's "truncate" edit
        "recipes/anthropic_policies.py": {"claude-code"},
        "recipes/open_source_policies.py": {"codex", "gemini-cli", "opencode", "truncate"},
        # the log shapes forensics reads: Claude Code's compact_boundary, Codex's replacement_history
        "recipes/forensics.py": {"claude-code", "codex"},
        "rl/datasets.py": {"openai"},  # OpenAI's preference fine-tuning shape, not the format
        # the agents registries (the real agents, each agent's own budget): an agent is named
        # as its log format is
        # (and the APIs they speak, and the providers opencode and Copilot CLI are pointed at)
        "agents/catalog.py": {
            "claude-code", "codex", "gemini-cli", "opencode", "copilot-cli", "qwen-code", "anthropic",
            "gemini", "openai",
            "claude-code-stream", "codex-exec",  # the JSON events their headless runs print
        },
        "budget/agents.py": {"claude-code", "codex", "gemini-cli", "gemini-cli-jsonl", "opencode"},
        # the provider APIs the recording provider speaks, named as the providers name them
        "agents/provider.py": {"anthropic", "gemini"},
        "agents/regions.py": {"anthropic", "gemini"},
        "budget/models.py": {"gemini"},  # a model family
        "budget/resolve.py": {"codex"},  # Codex records the window it allows
        "call_effects.py": {"truncate"},  # the shell command (`truncate -s 0 f` writes f)

    }
    # "error" and "units" are also ordinary words (severities, token units)
    names = {*STRATEGIES, "fresh_start", "truncate", *(n for n in FORMATS if n != "units")}
    found = []
    for name, tree in _modules():
        home = name.startswith(("strategies/", "formats/"))
        for node in _strings(tree):
            if node.value in names and not home and node.value not in allowed.get(name, ()):
                found.append(f"{name}:{node.lineno} {node.value!r}")
    assert found == []


def _module_name(rel: str) -> str:
    parts = ["ctxkit", *rel.removesuffix(".py").split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Which ctxkit module imports which: every import statement, at module level, inside a
    function or under TYPE_CHECKING alike (`from pkg import sub` names the submodule)."""
    modules = {_module_name(rel): (rel, tree) for rel, tree in _modules()}

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        while parts:
            if ".".join(parts) in modules:
                return ".".join(parts)
            parts.pop()
        return None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, (rel, tree) in modules.items():
        package = module if rel.endswith("__init__.py") else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                names = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                target = resolve(name) if name.startswith("ctxkit") else None
                if target is not None and target != module:
                    graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_cycle_counting_lazy_and_type_checking_imports() -> None:
    """Layers: no module imports (even inside a function) one that imports it back."""
    assert _cycles(_import_graph()) == []


def test_the_cycle_check_sees_lazy_imports() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = _import_graph()
    assert "ctxkit.engines.compact" in graph["ctxkit.cli.compact"]  # inside the command
    assert "ctxkit.engines.ray" in graph["ctxkit.engines.compact"]  # inside a function


def _package_graph() -> dict[str, set[str]]:
    """The import graph between packages: `ctxkit.<first part>` (a top-level module is its own
    node), every import counted as in `_import_graph`."""
    graph: dict[str, set[str]] = {}
    for module, targets in _import_graph().items():
        node = ".".join(module.split(".")[:2])
        graph.setdefault(node, set())
        for target in targets:
            other = ".".join(target.split(".")[:2])
            graph.setdefault(other, set())
            if other != node:
                graph[node].add(other)
    return graph


def test_no_package_cycle() -> None:
    """No package imports one that imports it back. The layers, each importing only those
    below it (issue 35, "A house to live in"):

    1. leaves: errors, model, fields (typed settings), refs, fileio, memo, structure, classify,
       compress, log_events and call_effects (what the log says happened, read once)
    2. tokens, embedders, facts, summarizers, formats
    3. archive; budget (window arithmetic, models.toml and prices, the agents' own budgets and
       triggers, and its own keys of the configuration: `budget.limits.BudgetConfig`);
       fidelity (the evaluation: it judges logs and imports nothing that compacts)
    4. counting (the one measure, `Fit`), strategies, simulate, agents
    5. costs, calibration, compaction, gates
    6. config (the YAML file, built from the strategy, embedder and summarizer registries, and
       the settings of one run), replay (the engine of `compact --replay`), report
    7. recipes (peers, the agents' policies, `ctxkit replay` and forensics), rl
    8. engines, bench, cli
    """
    assert _cycles(_package_graph()) == []


def test_the_package_graph_merges_modules_into_packages() -> None:
    graph = _package_graph()
    assert "ctxkit.budget" in graph["ctxkit.counting"]  # ctxkit.counting -> ctxkit.budget.fit
    assert "ctxkit.config" not in graph["ctxkit.budget"]  # the budget reads BudgetConfig


def test_evaluation_is_independent() -> None:
    """The evaluation (`ctxkit.fidelity`: probes, claims, measures, truth) imports nothing of
    what it judges (strategies, summarizers, compaction), and none of them imports it; running
    methods and scoring them side by side is the engines' (`engines.methods`, `engines.fidelity`)."""
    judged = ("ctxkit.strategies", "ctxkit.summarizers", "ctxkit.compaction")

    def within(module: str, packages: tuple[str, ...]) -> bool:
        return any(module == p or module.startswith(p + ".") for p in packages)

    graph = _import_graph()
    evaluation = ("ctxkit.fidelity",)
    edges = [
        f"{a} -> {b}"
        for a, targets in sorted(graph.items())
        for b in sorted(targets)
        if (within(a, evaluation) and within(b, judged)) or (within(a, judged) and within(b, evaluation))
    ]
    assert edges == []
    # the graph does see both sides: the engine of `ctxkit fidelity` imports them all
    assert {"ctxkit.fidelity.probes", "ctxkit.fidelity.claims"} <= graph["ctxkit.engines.fidelity"]
    assert "ctxkit.compaction.run" in graph["ctxkit.engines.methods"]
