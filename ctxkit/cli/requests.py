"""Flags as the frozen records the engines take: the count options of every command that counts,
the Ray options of --engine ray, guard's `GuardSettings` and targets, compact's `CompactRequest`,
score-rl's `ScoreRequest`. One place, so each command reads a flag the same way."""

from __future__ import annotations

from typing import Any

import click

from ctxkit.counting import count_options as count_opts  # compact_settings builds with it too
from ctxkit.errors import UsageError


def guard_settings(f: dict[str, Any], trace: Any = None) -> Any:
    """The flags as one `GuardSettings` (config with the threshold flags, the files read)."""
    from ctxkit.config.file import load_config
    from ctxkit.engines.guard import GuardSettings, load_pending
    from ctxkit.formats.extras import load_tools, read_text_file

    config = with_threshold_flags(
        load_config(f["config_path"]), f["warn_threshold"], f["compact_threshold"], f["block_threshold"]
    )
    if trace:
        trace(f"config: {config.source or 'defaults'}")
    return GuardSettings(
        config=config,
        system=read_text_file(f["system_file"]) if f["system_file"] else None,
        tools=tuple(load_tools(f["tools_file"])) if f["tools_file"] else None,
        pending=tuple(load_pending(f["pending_file"])) if f["pending_file"] else (),
        replay=f["do_replay"],
        check=f["do_check"],
        fail_on=f["fail_on"],
        count_opts=count_opts(f["image_tokens"], f["tool_schema_scale"]),
        use_usage=not f["no_usage"],
        as_agents=tuple(f["as_agents"]),
        tool_threshold=f["tool_threshold"],
        archive=f["archive_path"],
        from_log=not f["models"] and budget_request(config, f).from_log,
    )


def budget_request(config: Any, f: dict[str, Any]) -> Any:
    """The budget flags (all but --model) and the configuration as one `BudgetRequest`."""
    from ctxkit.budget.resolve import BudgetRequest

    return BudgetRequest(
        context_window=f["window"],
        max_output_tokens=f["max_output"],
        buffer_tokens=f["buffer"],
        limit=f["limit"],
        agent=f["agent"],
        llm=f["llm"],
        tokenizer=f["tokenizer"],
        config=config,
    )


def guard_targets(config: Any, f: dict[str, Any]) -> list[Any]:
    """The targets in order of preference: each --model, else the one the flags and config give
    (`budget.resolve.resolve_budget`)."""
    from ctxkit.budget.resolve import resolve_budget

    request = budget_request(config, f)
    return [resolve_budget(request.for_model(m)) for m in f["models"]] or [resolve_budget(request)]


def with_threshold_flags(
    config: Any, warn: float | None, compact: float | None, block: float | None
) -> Any:
    """The config with threshold flags applied; a bad value names the flag."""
    from ctxkit.config.file import ROOT
    from ctxkit.errors import ConfigError, UsageError

    try:
        return config.with_overrides(
            warning_threshold=warn, compact_threshold=compact, block_threshold=block
        )
    except ConfigError as exc:
        text = str(exc)
        for key, flag in (
            ("warning_threshold", "--warn-threshold"),
            ("compact_threshold", "--compact-threshold"),
            ("block_threshold", "--block-threshold"),
        ):
            text = text.replace(f"{ROOT}.{key}", flag).replace(key, flag)
        raise UsageError(text) from None


def ray_options(
    engine: str, address: str | None, workers: int | None, task_mb: int | None, shard_mb: float
) -> Any:
    """The `engines.ray.RayOptions` of --engine ray and its flags; None on another engine, where
    the Ray flags are refused."""
    if engine != "ray":
        if address is not None or workers is not None or task_mb is not None:
            raise click.UsageError("--ray-address, --ray-workers and --ray-task-mb go with --engine ray")
        return None
    from ctxkit.engines.ray import RayOptions

    return RayOptions(
        address=address,
        workers=workers,
        shard_bytes=max(1, int(shard_mb * 2**20)),
        report=True,
        task_mb=task_mb,
    )


def settings_spec(f: dict[str, Any], **more: Any) -> Any:
    """The budget and token flags every compacting command takes (`budget_options`,
    `tokenizer_options`), with `more` of its own, as one `SettingsSpec`."""
    from ctxkit.budget.resolve import BudgetRequest
    from ctxkit.config.settings import SettingsSpec

    return SettingsSpec(
        budget=BudgetRequest(model=f["model"], limit=f["limit"], tokenizer=f["tokenizer"]),
        target=f["target"],
        config_path=f["config_path"],
        image_tokens=f["image_tokens"],
        tool_schema_scale=f["tool_schema_scale"],
        **more,
    )


def compact_request(paths: tuple[str, ...], read_opts: Any, f: dict[str, Any], progress: bool) -> Any:
    """The flags as one `CompactRequest` (whose checks refuse a bad combination); `progress`:
    whether to show a progress bar."""
    from ctxkit.engines.request import CompactRequest
    from ctxkit.formats import expand_paths

    settings = settings_spec(
        f,
        chain=f["chain"],
        recovery=f["recovery"],
        embedder=f["embedder"],
        embedder_model=f["embedder_model"],
        embedding_cache=False if f["no_cache"] else None,
        summarizer=f["summarizer"],
        llm_url=f["llm_url"],
        llm_model=f["summarizer_model"],
        use_usage=not f["no_usage"],
    )
    return CompactRequest(
        inputs=tuple(expand_paths(paths)),  # globs and directories, as count and guard take them
        output=f["output"],
        settings=settings,
        read_opts=read_opts,
        to_format=f["to_format"],
        archive=f["archive_path"],
        recall_tool=f["recall_tool"],
        dry_run=f["dry_run"],
        jobs=f["jobs"],
        engine=f["engine"],
        ray=f["ray_opts"],
        report=f["report_path"],
        html=f["html_path"],
        events=f["events_path"],
        explain=f["explain"],
        verbose=f["verbose"],
        progress=progress,
        replay=f["replay"],
        cost_models=tuple(f["cost_models"]),
    )


def score_request(
    paths: tuple[str, ...], read_opts: Any, f: dict[str, Any], actions: tuple[Any, ...], progress: bool
) -> Any:
    """The flags of `score-rl` as one `ScoreRequest`, with the actions selected and whether to
    show a progress bar."""
    from ctxkit.engines.request import ScoreRequest
    from ctxkit.formats import expand_paths

    output = f["output"]
    return ScoreRequest(
        inputs=tuple(expand_paths(list(paths))) if paths else (),
        scenarios=tuple(scenario_names(f["scenario"], f["scenarios"])),
        actions=actions,
        actions_file=f["actions_path"],
        settings=settings_spec(f, seed=f["seed"]),
        read_opts=read_opts,
        truth=f["truth_path"],
        seed=f["seed"],
        count=f["count"],
        tokens=f["tokens"],
        p1_ratio=f["p1_ratio"],
        mode=f["mode"],
        embedder=f["embedder"],
        export=f["export"],
        dpo_shape=f["dpo_shape"],
        max_example_tokens=f["max_example_tokens"],
        fmt=f["fmt"] or ("parquet" if output.endswith(".parquet") else "jsonl"),
        output=output,
        engine=f["engine"],
        ray=f["ray_opts"],
        progress=progress,
    )


def scenario_names(values: tuple[str, ...], scenarios: str | None = None) -> list[str]:
    """The simulator's scenarios named by --scenario (repeatable) and --scenarios (a comma list),
    `all` for every one, each once, in order; an unknown name lists the known ones."""
    from ctxkit.simulate import SCENARIOS

    wanted = list(values)
    if scenarios:
        wanted += [s.strip() for s in scenarios.split(",") if s.strip()]
    names: list[str] = []
    for v in wanted:
        if v != "all" and v not in SCENARIOS:
            known = ", ".join(sorted(SCENARIOS))
            raise UsageError(f"unknown scenario {v!r}; known: {known}, all")
        for name in sorted(SCENARIOS) if v == "all" else [v]:
            if name not in names:
                names.append(name)
    return names
