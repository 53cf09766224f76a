"""`ctxkit replay`: what would each agent have kept of this session? (see `recipes.session`)"""

from __future__ import annotations

import click

from ctxkit.cli.budget_options import max_output_option, model_option, window_option
from ctxkit.cli.options import count_option, echo_err, input_options, tokenizer_option
from ctxkit.cli.output import check_report, report_options, write_report
from ctxkit.recipes.session import AGENTS, DEFAULT_AGENTS, ReplayOptions
from ctxkit.summarizers import SUMMARIZER_NAMES


@click.command("replay")
@input_options
@click.option(
    "--as",
    "agents",
    multiple=True,
    type=click.Choice((*AGENTS, "all")),
    help=f"Replay under this agent's policy (repeatable; `all` for every one). Default: "
    f"{', '.join(DEFAULT_AGENTS)}.",
)
@model_option("The model's window, max output and prices (models.toml). Default: the model the log names.")
@window_option("Context window in tokens (instead of --model).")
@max_output_option("Max output tokens (default: the model's, else window/4).")
@tokenizer_option("How tokens are counted (default cl100k_base).")
@click.option(
    "--summarizer",
    type=click.Choice(SUMMARIZER_NAMES),
    default=None,
    help="What writes the agents' LLM summaries: extractive (offline, the default stand-in) or llm "
    "(an OpenAI-compatible endpoint, --llm-url / --llm-model).",
)
@click.option("--llm-url", default=None, help="Chat-completions base URL (or CTXKIT_LLM_URL).")
@click.option("--llm-model", default=None, help="Model for --summarizer llm (or CTXKIT_LLM_MODEL).")
@count_option("--unlogged", "Tokens every call carries that the log never shows (system prompt, tools). Default: "
    "from the log's recorded usage, else 0.", least=0)
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="FILE",
    help="YAML configuration for ctxkit's own chain.",
)
@report_options("one object per session per line")
def replay(
    paths: tuple[str, ...],
    read_opts: object,
    agents: tuple[str, ...],
    model: str | None,
    window: int | None,
    max_output: int | None,
    tokenizer: str | None,
    summarizer: str | None,
    llm_url: str | None,
    llm_model: str | None,
    unlogged: int | None,
    config_path: str | None,
    fmt: str,
    html_path: str | None,
) -> None:
    """Replay a session turn by turn under each agent's own compaction policy and ctxkit's
    chain: how often each compacts, the tokens it sends, its peak, and which fidelity probes
    survive each compaction.

    \b
    Examples:
      ctxkit replay session.jsonl --model claude-sonnet-4
      ctxkit replay session.jsonl --as claude-code --as codex --window 128000 --format json
      ctxkit replay session.jsonl --as all --html replay.html
    """
    from ctxkit.recipes.session import replay_paths
    from ctxkit.report.agents import replay_page, replay_text

    check_report(paths, html_path, fmt)
    names = (
        tuple(dict.fromkeys(a for n in agents for a in (AGENTS if n == "all" else (n,))))
        or DEFAULT_AGENTS
    )
    options = ReplayOptions(
        agents=names, model=model, window=window, max_output=max_output, tokenizer=tokenizer,
        summarizer=summarizer, llm_url=llm_url, llm_model=llm_model, unlogged=unlogged,
        config_path=config_path,
    )  # fmt: skip
    tables = [t.to_dict() for t in replay_paths(paths, options, read_opts, warn=echo_err)]
    write_report(
        tables, fmt, html_path, replay_page,
        lambda ts: "".join(("\n" if k else "") + replay_text(t) for k, t in enumerate(ts)),
    )  # fmt: skip
