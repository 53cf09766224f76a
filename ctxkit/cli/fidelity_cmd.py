"""`ctxkit fidelity`: what a compacted transcript still holds of the original, probe by probe,
and whether what its summaries say is true, claim by claim."""

from __future__ import annotations

import sys
from typing import Any

import click

from ctxkit.cli.budget_options import budget_options
from ctxkit.cli.options import echo_err, input_options
from ctxkit.cli.output import format_option
from ctxkit.errors import UsageError
from ctxkit.formats import ReadOptions
from ctxkit.report.tables import default_format, write_rows


@click.command("fidelity")
@input_options
@budget_options
@click.option(
    "--peer",
    "peers",
    multiple=True,
    metavar="NAME",
    help="With --limit: the peers to run beside ctxkit (repeatable; default every peer).",
)
@click.option("--lost", is_flag=True, help="List every probe lost, with where it was.")
@format_option()
def fidelity(
    paths: tuple[str, ...],
    read_opts: ReadOptions,
    limit: int | None,
    model: str | None,
    target: int | None,
    config_path: str | None,
    peers: tuple[str, ...],
    lost: bool,
    fmt: str | None,
) -> None:
    """Score compactions by what a model can still answer about the task, and by whether what
    they wrote is true.

    Probes are taken from ORIGINAL (every user request, the files acted on, the errors late in
    the run, the ids of the current work, the last action and its result, open todos) and
    looked for in each COMPACTED file (recall). Every claim of the text a compaction wrote (a
    file and what was done to it, an error and its command, a task and its state, a quote, the
    summary's place) is checked against ORIGINAL (precision); false claims are listed with
    their quote, why they are false and the original's words. With --limit instead of compacted
    files, ctxkit and every peer compact ORIGINAL to that budget and are scored side by side.

    \b
    Examples:
      ctxkit fidelity session.jsonl small.jsonl --lost
      ctxkit fidelity session.jsonl --limit 8000
      ctxkit fidelity session.jsonl --limit 8000 --peer drop_oldest --peer codex_cli --format json
    """
    from ctxkit.engines import fidelity as compare

    if not paths:
        raise UsageError("give the original transcript (and compacted files, or --limit)")
    original, compacted = paths[0], list(paths[1:])
    if compacted and (limit or model):
        raise UsageError("give compacted files or --limit/--model, not both")
    if compacted:
        rows = compare.score_files(original, compacted, read_opts)
    elif limit or model:
        from ctxkit.config.settings import compact_settings

        settings = compact_settings(limit=limit, model=model, target=target, config_path=config_path, warn=echo_err)
        t = compare.one_transcript(original, read_opts)
        names, missing = compare.available(["ctxkit", *(peers or compare.all_methods()[1:])])
        for note in missing:
            echo_err(f"skipped {note}")
        rows = compare.compare(t, settings.limit, names, settings)
    else:
        raise UsageError("give compacted files to score, or --limit N to run ctxkit and its peers")
    fmt = fmt or default_format()
    if fmt == "table":
        write_rows([_table_row(r) for r in rows], fmt, sys.stdout)
        if lost:
            for r in rows:
                for p in r.score.lost if r.score is not None else ():
                    echo_err(f"{r.method}: lost {p.category} {p.key!r} (unit {p.unit_id}, #{p.position})")
        for r in rows:
            for c in r.claims.false_claims if r.claims is not None else ():
                echo_err(false_claim_line(r.method, c))
        if any(r.meta.get("summary_by") for r in rows):
            echo_err("* ctxkit's extractive summarizer stands in for the agent's own LLM summary")
    else:
        write_rows([r.to_dict(lost=lost) for r in rows], fmt, sys.stdout)


def false_claim_line(method: str, c: Any) -> str:
    """One false claim on one line: whose, what kind, the claim quoted, why, the evidence."""
    line = f"{method}: false {c.kind} claim {c.text!r} (unit {c.unit}): {c.why}"
    return line + (f"; the log: {c.evidence!r}" if c.evidence else "")


def _table_row(r: Any) -> dict[str, Any]:
    from ctxkit.engines.fidelity import label
    from ctxkit.fidelity.probes import CATEGORIES

    row: dict[str, Any] = {
        "compaction": label(r.method) if "/" not in r.method and "." not in r.method else r.method,
        "tokens": r.tokens_after,
        "valid": "yes" if r.valid else ("refused" if r.error else "no"),
        "recall": f"{r.recall:.3f}",
        "precision": "" if r.claims is None else f"{r.claims.precision:.3f}",
        "false claims": "" if r.claims is None else f"{r.claims.false}/{r.claims.total}",
    }
    for cat in CATEGORIES:
        if r.score is not None and r.score.total.get(cat):
            row[cat] = f"{r.score.kept.get(cat, 0)}/{r.score.total[cat]}"
    return row
