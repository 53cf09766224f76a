"""Runs of the real agents against the recording provider: a probe (what one prompt sends), a
resume (what resuming a log sends, and whether it carries the log's messages in order with tool
pairs intact), and a scripted session (a real log of the current version, tool calls included).

The provider reports as each request's input tokens ctxkit's own count of it, so a log an agent
writes here carries usage that `ctxkit count` can check exactly.

    >>> from ctxkit.agents.session import ProbeOptions
    >>> ProbeOptions().prompt
    'Say hi.'
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxkit.agents.drivers import Agent, AgentError, Home, Run, new_home, run, run_interactive
from ctxkit.agents.provider import Recorded, RecordingProvider, Step
from ctxkit.agents.regions import RequestCount, count_request
from ctxkit.atomic import write_bytes_atomic
from ctxkit.model import Transcript, Unit
from ctxkit.tokens import CountOptions, Tokenizer, get_tokenizer

# headless (-p, exec), the agent's terminal UI in tmux, or headless printing its JSON events
# (`claude -p --output-format stream-json --verbose`, `codex exec --json`: what CI keeps)
MODES = ("print", "interactive", "stream")


@dataclass(frozen=True)
class ProbeOptions:
    """How to run an agent: the prompt, the model it asks for, the user's own setup or not."""

    prompt: str = "Say hi."
    mode: str = "print"  # print (headless, -p / exec), interactive (its terminal UI, in tmux) or stream
    model: str | None = None  # None: the agent's own default here (Agent.model)
    here: bool = False  # the user's project and configuration (copied into a temporary home)
    tokenizer: str | None = None
    timeout_s: float = 180.0
    keep: str | None = None  # a folder to keep the requests (JSON) and the agent's logs in


@dataclass
class AgentReport:
    """What a run sent: every request, the main ones counted, and the agent's own logs."""

    agent: str
    label: str
    version: str
    model: str
    mode: str
    requests: list[Recorded]
    counts: list[RequestCount]  # one per main request, in order
    run: Run
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def first(self) -> RequestCount:
        if not self.counts:
            raise AgentError(
                f"{self.label} sent no request to the recording provider (exit "
                f"{self.run.returncode}): {_tail(self.run.stderr) or _tail(self.run.stdout)}"
            )
        return self.counts[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "version": self.version,
            "model": self.model,
            "mode": self.mode,
            "requests": len(self.requests),
            "main_requests": len(self.counts),
            "calls": [c.to_dict() for c in self.counts],
            "exit": self.run.returncode,
            "seconds": round(self.seconds, 2),
            **self.extra,
        }


def _tail(text: str) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def _usage_counter(tok: Tokenizer, opts: CountOptions):
    def usage(rec: Recorded) -> int:
        if rec.api == "other":
            return 0
        try:
            return count_request(rec.api, rec.body, tok, opts).total
        except Exception:  # a side request of a shape we do not count: a plain size
            return len(json.dumps(rec.body)) // 4 if rec.body else 0

    return usage


def _count_requests(provider: RecordingProvider, tok: Tokenizer, opts: CountOptions) -> list[RequestCount]:
    """Each main request the provider recorded, counted by region (its model as recorded when
    the body names none)."""
    counts = []
    for rec in provider.main_requests():
        rc = count_request(rec.api, rec.body, tok, opts)
        rc.model = rc.model or rec.model
        counts.append(rc)
    return counts


def _headless(agent: Agent, options: ProbeOptions, prompt: str) -> list[str]:
    """The arguments of a headless run on `prompt`: its JSON event stream in the stream mode."""
    if options.mode != "stream":
        return agent.run_args(prompt)
    if agent.stream_args is None:
        raise AgentError(f"{agent.label} has no JSON event stream here: --mode print or interactive")
    return agent.stream_args(prompt)


def _go(
    agent: Agent,
    options: ProbeOptions,
    args_for: Any,
    script: list[Step],
    prepare: Any = None,
) -> tuple[AgentReport, Home]:
    tok = get_tokenizer(options.tokenizer)
    opts = CountOptions()
    home = new_home(options.here)
    model = options.model or agent.model
    started = time.perf_counter()
    with RecordingProvider(script, usage=_usage_counter(tok, opts)) as provider:
        agent.configure(home, provider.url, model, options.here)
        session = prepare(home) if prepare is not None else ""
        if options.mode == "interactive":
            done = run_interactive(
                agent, home, agent.interactive_args(options.prompt),
                lambda: bool(provider.main_requests()), timeout_s=options.timeout_s,
            )
        else:
            done = run(agent, home, args_for(session), timeout_s=options.timeout_s)
        done.session = session
    seconds = time.perf_counter() - started
    counts = _count_requests(provider, tok, opts)
    report = AgentReport(
        agent=agent.name,
        label=agent.label,
        version=agent.version,
        model=model,
        mode=options.mode,
        requests=list(provider.requests),
        counts=counts,
        run=done,
        seconds=seconds,
    )
    if options.keep:
        _keep(report, Path(options.keep))
    return report, home


def _keep(report: AgentReport, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for rec in report.requests:
        (folder / f"request-{rec.index:03d}.json").write_text(json.dumps(rec.to_dict(), indent=1))
    for log in report.run.logs:
        shutil.copyfile(log, folder / log.name)


def probe(agent: Agent, options: ProbeOptions = ProbeOptions()) -> AgentReport:
    """Run the agent once on a prompt and count what it sends."""
    args = _headless(agent, options, options.prompt)
    report, home = _go(agent, options, lambda _: args, [Step(text="Hi.")])
    shutil.rmtree(home.root, ignore_errors=True)
    report.first  # noqa: B018  (raises with the agent's own last line when nothing came)
    return report


def drive(agent: Agent, out: str | Path, options: ProbeOptions = ProbeOptions()) -> AgentReport:
    """Drive the agent through its scripted session (real tool calls, run by the agent) and
    copy the log it wrote to `out` (a file, or a folder for it); in the stream mode, the JSON
    events it printed instead (`<agent>-stream.jsonl` in a folder)."""
    prompt = options.prompt if options.prompt != ProbeOptions.prompt else (
        "Write notes.txt with alpha and beta, check it, then tell me what it holds."
    )
    report, home = _go_scripted(agent, options, prompt)
    logs = report.run.logs
    try:
        if options.mode == "stream":
            _keep_stream(report, out, f"{agent.name}-stream.jsonl")
            return report
        if not logs:
            raise AgentError(
                f"{agent.label} wrote no log (exit {report.run.returncode}): {_tail(report.run.stderr)}"
            )
        target = Path(out)
        if target.is_dir() or str(out).endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            target = target / logs[-1].name
        shutil.copyfile(logs[-1], target)
        report.extra["log"] = str(target)
    finally:
        shutil.rmtree(home.root, ignore_errors=True)
    return report


def _keep_stream(report: AgentReport, out: str | Path, name: str) -> None:
    """Write the events a stream-mode run printed to `out` (a file, or a folder for `name`:
    one that exists, or a path ending in /), atomically."""
    if not report.run.ok() or not report.run.stdout.strip():
        raise AgentError(
            f"{report.label} printed no events (exit {report.run.returncode}): {_tail(report.run.stderr)}"
        )
    path = Path(out)
    if path.is_dir() or str(out).endswith("/"):
        path.mkdir(parents=True, exist_ok=True)
        path = path / name
    write_bytes_atomic(path, report.run.stdout.encode("utf-8"))
    report.extra["log"] = str(path)


def _go_scripted(agent: Agent, options: ProbeOptions, prompt: str) -> tuple[AgentReport, Home]:
    args = _headless(agent, options, prompt)
    tok = get_tokenizer(options.tokenizer)
    opts = CountOptions()
    home = new_home(options.here)
    model = options.model or agent.model
    started = time.perf_counter()
    with RecordingProvider(agent.script(home.workdir), usage=_usage_counter(tok, opts)) as provider:
        agent.configure(home, provider.url, model, options.here)
        done = run(agent, home, args, timeout_s=options.timeout_s)
    counts = _count_requests(provider, tok, opts)
    report = AgentReport(
        agent.name, agent.label, agent.version, model, "stream" if options.mode == "stream" else "print",
        list(provider.requests), counts, done,
        time.perf_counter() - started,
    )
    report.extra["steps_used"] = provider.steps_used()
    if options.keep:
        _keep(report, Path(options.keep))
    return report, home


# --- resuming a log ----------------------------------------------------------------------------


@dataclass
class Carried:
    """How the request that resumed a log carries the log's messages."""

    log_units: int  # the log's messages as ctxkit reads them (the context it would resume)
    found: int  # of them, found in the request, in order
    out_of_order: int
    missing: list[str]  # a few of the ones not found, for people
    orphan_results: int  # tool results in the request with no call before them
    unanswered_calls: int  # tool calls in the request with no result after them

    @property
    def in_order(self) -> bool:
        return self.out_of_order == 0

    @property
    def pairs_intact(self) -> bool:
        return self.orphan_results == 0 and self.unanswered_calls == 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "in_order": self.in_order, "pairs_intact": self.pairs_intact}


def _key(u: Unit) -> str:
    text = " ".join((u.content or "").split())
    if not text and u.tool_calls:
        text = " ".join(c.name for c in u.tool_calls)
    return text[:160]


def _holds(u: Unit) -> str:
    text = " ".join((u.content or "").split())
    return " ".join([text, *(c.name for c in u.tool_calls)])


def carried(log: Transcript, sent: Transcript | None) -> Carried:
    """Which of the log's units the request carries, in order (an agent may join consecutive
    messages of one role into one: a unit is carried where a sent message holds its text); its
    tool pairs."""
    from ctxkit.structure import check

    units = [u for u in log.units if u.role != "system" and _key(u)]
    sent_units = list(sent.units) if sent is not None else []
    texts = [_holds(u) for u in sent_units]
    position = 0
    found = out_of_order = 0
    missing: list[str] = []
    for u in units:
        k = _key(u)
        at = next((i for i in range(position, len(texts)) if k in texts[i]), -1)
        if at >= 0:
            found += 1
            position = at  # the next unit may be in the same message
            continue
        if any(k in x for x in texts):
            found += 1
            out_of_order += 1
        elif len(missing) < 5:
            missing.append(f"{u.role}: {k[:60]}")
    problems = check(sent_units) if sent_units else []
    orphans = sum(1 for p in problems if p.kind in ("orphan_result", "duplicate_result"))
    unanswered = sum(1 for p in problems if p.kind == "missing_result")
    return Carried(len(units), found, out_of_order, missing, orphans, unanswered)


def resume(
    agent: Agent, log: str | Path, options: ProbeOptions = ProbeOptions(prompt="Continue.")
) -> AgentReport:
    """Resume `log` in the agent with one prompt; the request it sends, counted, and how it
    carries the log's messages (`extra["carried"]`)."""
    from ctxkit.formats import ReadOptions, read_path

    if options.mode == "stream":
        raise AgentError("a resume is measured in the print or interactive mode, not stream")
    path = Path(log)
    if not path.is_file():
        raise AgentError(f"{log}: no such file")
    found = list(read_path(str(path), ReadOptions()))[:1]
    if not found:
        raise AgentError(f"{log}: no transcript in it")
    transcript = found[0]
    report, home = _go(
        agent,
        options,
        lambda session: agent.resume_args(session, options.prompt),
        [Step(text="Continuing.")],
        prepare=lambda h: agent.place_log(h, path),
    )
    shutil.rmtree(home.root, ignore_errors=True)
    first = report.first
    report.extra["carried"] = carried(transcript, first.transcript).to_dict()
    report.extra["log"] = str(path)
    return report
