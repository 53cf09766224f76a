"""`ctxkit bench`: report shape, measured figures, the peers' behaviour, slope and plot.

Speeds are never asserted: a benchmark measures them, a test checks that it does.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxkit import bench
from ctxkit.cli import cli
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.recipes import RECIPES, Fit
from ctxkit.structure import pairs_intact
from ctxkit.tokens import CountOptions, count_transcript, get_tokenizer

NO_REALDATA = Path("/nonexistent/ctxkit-realdata")


def assert_measured(report: dict[str, Any]) -> None:
    """Every figure is a finite number; every timing is above zero."""
    for name, suite in report["suites"].items():
        assert suite["figures"], f"suite {name} measured nothing"
        for f in suite["figures"]:
            assert isinstance(f["value"], (int, float)) and not isinstance(f["value"], bool)
            assert math.isfinite(f["value"]), f
            if f["unit"] in ("ms", "ms/call", "ms/unit", "s", "tokens/s", "ratio", "x"):
                assert f["value"] > 0, f
            if f["target"] is not None:
                assert f["passed"] in (True, False)
            else:
                assert f["passed"] is None


@pytest.mark.slow  # runs two bench suites
def test_cli_quick_count_and_guard_json() -> None:
    result = CliRunner().invoke(
        cli,
        ["bench", "--suite", "count", "--suite", "guard", "--quick", "--repeat", "1", "--json"],
        catch_exceptions=False,
    )
    report = json.loads(result.stdout)
    # a missed target (a throughput ratio on a loaded machine) is exit 3, as the report says
    assert result.exit_code == (3 if report["targets"]["missed"] else 0), result.stderr
    assert set(report) == {"machine", "options", "suites", "targets"}
    assert list(report["suites"]) == ["count", "guard"]
    machine = report["machine"]
    assert machine["cpu_count"] >= 1
    assert machine["packages"]["tiktoken"]
    assert machine["python"].count(".") == 2
    assert_measured(report)
    figures = {f["name"]: f for f in report["suites"]["count"]["figures"]}
    for name in ("cl100k_base", "o200k_base"):
        ratio = figures[f"count throughput / raw tiktoken ({name})"]
        # ctxkit's totals are the same tokens tiktoken counts, or the ratio would compare nothing
        assert ratio["detail"]["tokens_identical"] is True
        assert ratio["target"] == 5.0 and ratio["better"] == "higher"
    assert "bench: count" in result.stderr


def test_cli_table_goes_to_stdout_and_output_file(tmp_path: Path) -> None:
    out = tmp_path / "bench.txt"
    result = CliRunner().invoke(
        cli,
        ["bench", "--suite", "guard", "--quick", "--repeat", "1", "-o", str(out)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    text = out.read_text()
    assert "== guard" in text and "guard decision" in text


def test_cli_bad_flags_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["bench", "--suite", "nope"])
    assert result.exit_code == 2
    result = runner.invoke(cli, ["bench", "--suite", "count", "--plot", str(tmp_path / "x.txt")])
    assert result.exit_code == 2
    assert result.stderr == f"Error: --plot {tmp_path / 'x.txt'}: give a .png or .svg file name\n"
    result = runner.invoke(cli, ["bench", "--suite", "count", "--plot", str(tmp_path / "x.png")])
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: --plot charts the scale and quality suites; add --suite scale or quality\n"
    )
    assert not (tmp_path / "x.png").exists()


def test_unknown_suite_lists_known() -> None:
    with pytest.raises(Exception) as info:
        bench.run(["fast"])
    assert "count" in str(info.value) and "scale" in str(info.value)


def test_loglog_slope() -> None:
    xs = [1_000, 10_000, 100_000, 1_000_000]
    assert bench.loglog_slope(xs, [x * 3e-6 for x in xs]) == pytest.approx(1.0)
    assert bench.loglog_slope(xs, [x * x for x in xs]) == pytest.approx(2.0)
    assert bench.loglog_slope([10], [1.0]) is None


def _tool_transcript() -> Transcript:
    big = "line of build output\n" * 300
    units = [
        Unit(id="s", role="system", content="You are a careful coding agent."),
        Unit(id="u1", role="user", content="Fix the failing build in billing/api.py please."),
        Unit(
            id="a1",
            role="assistant",
            content="Running the build.",
            tool_calls=[ToolCall(id="c1", name="bash", arguments='{"command": "make"}')],
        ),
        Unit(id="r1", role="tool", type="tool_result", content=big, tool_call_id="c1", name="bash"),
        Unit(id="a2", role="assistant", content="The build fails in billing/api.py line 40."),
        Unit(id="u2", role="user", content="Good, now fix it."),
    ]
    return Transcript(units=units, id="tools")


def test_drop_oldest_keeps_pairs_and_fits() -> None:
    t = _tool_transcript()
    tok = get_tokenizer()
    total = count_transcript(t, tok).total
    goal = total - 20  # the call and its result go together, with the request before them
    out = RECIPES["drop_oldest"].run(t, goal, Fit(tok))
    assert [u.id for u in out.units] == ["s", "a2", "u2"]
    assert count_transcript(out, tok).total <= goal
    assert pairs_intact(t.units, out.units) == []


def test_langchain_trim_keeps_pairs_and_budget() -> None:
    pytest.importorskip("langchain_core")
    t = _tool_transcript()
    tok = get_tokenizer()
    goal = count_transcript(t, tok).total - 20
    out = RECIPES["langchain_trim"].run(t, goal, Fit(tok))
    assert out.units[0].id == "s"
    assert out.units[1].role == "user"  # start_on="human"
    assert count_transcript(out, tok).total <= goal
    assert pairs_intact(t.units, out.units) == []
    # the counter handed to LangChain counts exactly as ctxkit does
    enc = bench.raw_encoding()
    raw = sum(bench.raw_unit_tokens(u, enc, CountOptions()) for u in t.units) + 3
    assert raw == count_transcript(t, tok).total


def test_ctxkit_among_peers_is_held_to_what_the_log_holds() -> None:
    """The sample Claude Code log records 15,507 tokens of usage it never shows. Peers see only
    what the log holds; ctxkit among them does too (it used to count that unlogged region
    against the same limit, and refused a log every peer fitted)."""
    from ctxkit.bench.harness import limit_for
    from ctxkit.bench.peers import run_peer
    from ctxkit.engines.methods import CTXKIT
    from ctxkit.formats import read_path

    (t,) = read_path(str(Path(__file__).parents[1] / "sample_transcripts" / "claude-code-session.jsonl"))
    row = run_peer(CTXKIT, t, limit_for(t), [])
    assert row.get("error") is None and row["fits"] and row["tokens_after"] <= row["goal"]


def test_quality_suite_on_one_scenario() -> None:
    opts = bench.BenchOptions(quick=True, realdata=NO_REALDATA, scenarios=("agent_session",))
    report = bench.run(["quality"], opts)
    suite = report.suites["quality"]
    peers = {r["peer"]: r for r in suite.rows}
    assert set(peers) == set(bench.PEERS)
    ours = peers["ctxkit"]
    assert ours["fits"] is True and ours["broken_pairs"] == 0
    assert ours["p1_kept"] == ours["p1_total"] > 0
    assert ours["needles_present"] + ours["needles_recallable"] == ours["needles_total"] > 0
    for r in suite.rows:
        assert 0.0 <= r["coherence_lexical"] <= 1.0
        assert r["time_ms"] > 0
    assert "real transcripts: not found" in suite.skipped
    # the fidelity table: ctxkit keeps the last request and user messages a dropping peer loses
    assert ours["last_request_verbatim"] is True
    assert ours["user_verbatim_total"] == peers["drop_oldest"]["user_verbatim_total"] > 1
    assert peers["drop_oldest"]["user_verbatim_kept"] < ours["user_verbatim_total"]
    fid = {line["peer"]: line for line in suite.summary}
    assert set(fid["ctxkit"]) >= {"files_trail", "user_verbatim", "last_request_verbatim"}
    assert_measured(report.to_dict())
    text = bench.render_table(report)
    assert "LangChain trim_messages" in text and "drop oldest messages (pairs kept)" in text
    assert "files-touched trail" in text and "user msgs verbatim" in text


@pytest.mark.slow  # fresh processes per size: the bench's own machinery, run in make test
def test_scale_suite_small_sizes_in_subprocesses() -> None:
    opts = bench.BenchOptions(sizes=(1_000, 10_000), scale_scenarios=("long_chat",))
    report = bench.run(["scale"], opts)
    suite = report.suites["scale"]
    assert [r["tokens_asked"] for r in suite.rows] == [1_000, 10_000]
    for r in suite.rows:
        assert r["compact_s"] > 0 and r["tiktoken_pass_s"] > 0
        assert r["compact_heap_peak_mb"] > 0
        assert r["fits"] is True
    assert suite.rows[1]["units"] > suite.rows[0]["units"]
    measures = {x["measure"] for x in suite.summary}
    assert "compaction time" in measures
    # from 10k tokens on, the input as a file: `ctxkit compact` and a tiktoken pass, processes
    assert "process_over_tiktoken_cpu" not in suite.rows[0]
    at_10k = suite.rows[1]
    assert at_10k["file_bytes"] > 10_000 * 3
    assert at_10k["process_over_tiktoken_cpu"] == round(
        at_10k["process_compact_cpu_s"] / at_10k["process_tiktoken_cpu_s"], 2
    )
    names = [f.name for f in suite.figures]
    assert (
        "long_chat: `ctxkit compact` of the file at 10,000 tokens / one tiktoken pass over the "
        "same file, whole processes (CPU)"
    ) in names
    assert "processes x (CPU)" in bench.render_table(report)
    assert_measured(report.to_dict())


def test_process_pair_compacts_and_encodes_the_file(tmp_path: Path) -> None:
    """Each timed compaction is a real `ctxkit compact` that writes its output and archive; a
    compaction that fails raises with its error."""
    from ctxkit.bench.suites.scale import REPEATS, _process_pair

    data = tmp_path / "chat.jsonl"
    made = CliRunner().invoke(cli, ["simulate", "-s", "long_chat", "--tokens", "3000", "-o", str(data)])
    assert made.exit_code == 0, made.output
    got = _process_pair(str(data), 1_500, str(tmp_path))
    assert got["file_bytes"] == data.stat().st_size
    assert got["process_compact_cpu_s"] > 0 and got["process_tiktoken_cpu_s"] > 0
    for i in range(REPEATS + 1):
        out = tmp_path / f"out-{i}.jsonl"
        assert out.read_bytes() and (tmp_path / f"out-{i}.jsonl.ctx.db").is_file()
    with pytest.raises(RuntimeError, match="failed"):
        _process_pair(str(tmp_path / "missing.jsonl"), 1_500, str(tmp_path))


def test_run_tree_reads_the_command(tmp_path: Path) -> None:
    """`run_tree` times a ctxkit command (here with --jobs 2) and lists it first, with its peak
    memory under its command line; a failed command raises."""
    from ctxkit.bench.processes import run_tree

    if not Path("/proc/self").is_dir():
        pytest.skip("reads /proc")
    data = tmp_path / "two.jsonl"
    made = CliRunner().invoke(cli, ["simulate", "-s", "long_chat", "--count", "2", "--tokens", "3000",
                                    "--format", "openai", "-o", str(data)], catch_exceptions=False)
    assert made.exit_code == 0, made.output
    run = run_tree("compact", str(data), "--limit", "1500", "--jobs", "2", "-o", str(tmp_path / "out.jsonl"))
    assert run.wall_s > 0 and run.cpu_s > 0
    names, peak = run.processes[0]
    assert any("compact" in n for n in names) and peak > 0  # the command itself comes first
    with pytest.raises(RuntimeError, match="ctxkit compact .*missing.jsonl.* failed"):
        run_tree("compact", str(tmp_path / "missing.jsonl"), "--limit", "1500")


def test_run_command_tree_lists_the_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The processes a command starts, and theirs, are listed after it with their peaks. The
    grandchild here waits until run_command_tree has read /proc three times with it alive (a
    process is listed once its parent is known, and /proc may list it before its parent), so
    nothing depends on timing."""
    from ctxkit.bench import processes

    if not Path("/proc/self").is_dir():
        pytest.skip("reads /proc")
    seen = tmp_path / "seen"
    # at most a minute, so a run_command_tree that never lists it fails rather than hangs
    wait = (f"import os, time\nend = time.time() + 60\n"
            f"while not os.path.exists({str(seen)!r}) and time.time() < end: time.sleep(0.01)\n")
    child = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {wait!r}, 'grandchild'], check=True)\n"
    parent = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {child!r}, 'child'], check=True)\n"
    read = processes._processes
    readings = []

    def reading_thrice(tick: int) -> list[tuple[int, int, float, float, str]]:
        now = read(tick)
        readings.append(any(name.endswith("grandchild") for *_, name in now))
        if sum(readings) >= 3:
            seen.touch()
        return now

    monkeypatch.setattr(processes, "_processes", reading_thrice)
    run = processes.run_command_tree([sys.executable, "-c", parent, "parent"], name="parent")
    assert seen.exists()
    tags = [{n.rsplit(" ", 1)[-1] for n in names} for names, _ in run.processes]
    # in order: the command, then as found; a process read before its exec shows its parent's line
    assert len(tags) == 3 and all(tag in got for tag, got in zip(["parent", "child", "grandchild"], tags, strict=True))
    assert len(run.peaks_mb()) == 2 and all(mb > 0 for mb in run.peaks_mb(root=True))
    with pytest.raises(RuntimeError, match="^parent failed: .*ZeroDivisionError"):
        processes.run_command_tree([sys.executable, "-c", "1/0"], name="parent")


@pytest.mark.slow  # starts Ray twice and compacts a 2 MB dataset four times
def test_ray_suite_one_quick_round() -> None:
    pytest.importorskip("ray")
    report = bench.run(["ray"], bench.BenchOptions(quick=True, repeat=1))
    figures = {f.name: f for f in report.suites["ray"].figures}
    main = figures["ray throughput per core / --jobs"]
    assert main.detail["identical"] is True  # Ray's shards, in order, are --jobs' output
    assert len(main.detail["ray_s"]) == len(main.detail["jobs_s"]) == 1
    assert figures["ray CPU / --jobs CPU"].value > 0
    assert figures["ray worker peak memory"].value > 0  # the workers found by their title


@pytest.mark.slow  # runs long: two suites and matplotlib, the slowest test of the fast run
def test_plot_png_and_svg(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    opts = bench.BenchOptions(
        quick=True,
        repeat=1,  # the chart is under test, not the timings
        realdata=NO_REALDATA,
        scenarios=("long_chat",),
        sizes=(1_000, 2_000),
        scale_scenarios=("long_chat",),
    )
    report = bench.run(["scale", "quality"], opts)
    png = tmp_path / "b.png"
    bench.plot(report, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "b.svg"
    bench.plot(report, str(svg))
    assert "<svg" in svg.read_text()[:2000]


def test_plot_needs_scale_or_quality(tmp_path: Path) -> None:
    report = bench.BenchReport(machine={}, options={}, suites={})
    with pytest.raises(Exception, match="scale and quality"):
        bench.plot(report, str(tmp_path / "x.png"))


def test_import_is_light() -> None:
    code = (
        "import sys, ctxkit.bench\n"
        "heavy = {'click', 'matplotlib', 'langchain_core', 'torch', 'sentence_transformers'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_embed_suite_measures_minilm() -> None:
    pytest.importorskip("sentence_transformers")
    report = bench.run(["embed"], bench.BenchOptions(quick=True, repeat=1))
    suite = report.suites["embed"]
    if any(s.startswith("minilm") for s in suite.skipped):
        pytest.skip(f"minilm unavailable: {suite.skipped}")
    names = [f.name for f in suite.figures]
    assert any(n.startswith("minilm load") for n in names)
    assert any(n.startswith("minilm embedding per unit, batch") for n in names)
    assert_measured(report.to_dict())


def test_a_saved_report_charts_again(tmp_path: Path, repo_root: Path) -> None:
    """`scripts/plot_bench.py`: docs/benchmarks.json read back whole, and charted from it."""
    pytest.importorskip("matplotlib")
    import orjson

    saved = orjson.loads((repo_root / "docs" / "benchmarks.json").read_bytes())
    report = bench.BenchReport.from_dict(saved)
    again = report.to_dict()
    assert again.pop("targets")["total"] > 0  # derived from the figures, so never read back
    assert again == saved
    png = tmp_path / "again.png"
    bench.plot(report, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fresh_processes_import_this_ctxkit_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A working directory holding a checkout named `ctxkit/` is not what the bench's fresh
    processes import (`python -c` puts the working directory first on sys.path)."""
    import ctxkit
    from ctxkit.bench.harness import python_subprocess

    (tmp_path / "ctxkit" / "ctxkit").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    out = python_subprocess("import ctxkit; print(ctxkit.__file__)", timeout_s=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ctxkit.__file__


def _report(*figures: tuple[str, bench.Figure], left_out: dict[str, str] | None = None) -> bench.BenchReport:
    """A report of the given (suite, figure) pairs, as a run would return it."""
    suites: dict[str, bench.SuiteResult] = {}
    for name, f in figures:
        suites.setdefault(name, bench.SuiteResult(name)).figures.append(f)
    machine = {
        "date_utc": "2026-11-29T00:00:00Z", "cpu_count": 2, "cpu": "test", "python": "3.11.7",
        "packages": {}, "load_average_start": None, "load_average_end": None,
    }
    return bench.BenchReport(machine, {"left_out": left_out or {}}, suites)


MET = ("guard", bench.Figure("guard decision", 0.5, "ms", 2.0))
NO_TARGET = ("count", bench.Figure("raw tiktoken throughput", 3e6, "tokens/s"))
MISSED_LOW = ("startup", bench.Figure("`ctxkit count` / `import tiktoken`", 2.31, "x", 2.0))
MISSED_HIGH = ("count", bench.Figure("count throughput / raw tiktoken", 4.2, "ratio", 5.0, "higher"))


def test_summary_line_counts_targets_and_names_each_missed() -> None:
    from ctxkit.bench.records import summary_line, targets

    report = _report(MET, NO_TARGET, MISSED_LOW, MISSED_HIGH)
    total, missed = targets(report)
    assert total == 3  # a figure without a target is not one
    assert [(s, f.name) for s, f in missed] == [  # in report order: suites, then figures
        ("count", MISSED_HIGH[1].name), ("startup", MISSED_LOW[1].name)
    ]
    assert summary_line(report) == (
        "bench: 1 of 3 targets met; missed: "
        "count: count throughput / raw tiktoken 4.20 ratio (target >= 5.00); "
        "startup: `ctxkit count` / `import tiktoken` 2.31 x (target < 2.00)"
    )
    assert summary_line(_report(MET)) == "bench: 1 of 1 target met"
    assert summary_line(_report(NO_TARGET)) == "bench: 0 of 0 targets met"
    left = _report(MET, left_out={"ray": "Ray's start-up alone takes 10-20 s"})
    assert summary_line(left) == (
        "bench: 1 of 1 target met; left out by --quick: ray (Ray's start-up alone takes 10-20 s)"
    )
    d = _report(MET, MISSED_LOW).to_dict()["targets"]
    assert d["total"] == 2 and d["met"] == 1
    assert d["missed"] == [{"suite": "startup", "figure": MISSED_LOW[1].name}]


@pytest.mark.parametrize(
    ("figures", "code"), [((MET, NO_TARGET), 0), ((MET, MISSED_LOW), 3), ((MISSED_HIGH,), 3)]
)
def test_cli_ends_with_the_summary_and_exits_3_on_a_missed_target(
    figures: tuple[tuple[str, bench.Figure], ...], code: int, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's results are set here: the exit code and the last line follow from them alone."""
    from ctxkit.bench.records import summary_line

    report = _report(*figures)
    monkeypatch.setattr(bench, "run", lambda *_a, **_k: report)
    for args in ([], ["--json"], ["-o", str(tmp_path / "b.txt")]):
        result = CliRunner().invoke(cli, ["bench", "--quick", *args], catch_exceptions=False)
        assert result.exit_code == code, result.stderr
        assert result.stderr.splitlines()[-1] == summary_line(report)
    printed = json.loads(CliRunner().invoke(cli, ["bench", "--json"]).stdout)
    assert printed["targets"] == report.to_dict()["targets"]


def test_quick_leaves_ray_out_of_all_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxkit.bench import suites

    ran: list[str] = []

    def fake(name: str) -> Any:
        def measure(_opts: bench.BenchOptions, _say: Any) -> bench.SuiteResult:
            ran.append(name)
            return bench.SuiteResult(name)

        return measure

    for name in list(suites.SUITES):
        monkeypatch.setitem(suites.SUITES, name, fake(name))
    report = bench.run(["all"], bench.BenchOptions(quick=True, realdata=NO_REALDATA))
    assert "ray" not in ran and "ray" not in report.suites and "scale" in ran
    assert list(report.options["left_out"]) == ["ray"]
    assert "== ray: left out by --quick (" in bench.render_table(report)
    ran.clear()
    report = bench.run(["ray"], bench.BenchOptions(quick=True, realdata=NO_REALDATA))
    assert ran == ["ray"] and report.options["left_out"] == {}  # named, it runs
    ran.clear()
    bench.run(["all"], bench.BenchOptions(realdata=NO_REALDATA))
    assert ran == list(suites.SUITES)  # the full run keeps every suite


@pytest.mark.slow  # every quick suite, fresh processes included: about a minute on 2 cores
def test_cli_quick_on_a_tiny_corpus_ends_with_its_summary(tmp_path: Path, repo_root: Path) -> None:
    """`bench --quick` end to end, on two real logs (the bundled Claude Code and tau-bench
    samples): every suite but Ray runs, the last line is the summary, the exit code is whether
    a target missed (which depends on the machine, so it is read from the report, never
    assumed)."""
    for folder, name in (("claude-code", "claude-code-session.jsonl"), ("openai-chat", "tau-bench-airline.json")):
        logs = tmp_path / "realdata" / folder
        logs.mkdir(parents=True)
        (logs / name).write_bytes((repo_root / "sample_transcripts" / name).read_bytes())
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(
        cli,
        ["bench", "--quick", "--repeat", "1", "--realdata", str(tmp_path / "realdata"),
         "--json", "-o", str(out)],
        catch_exceptions=False,
    )
    report = json.loads(out.read_text())
    assert set(report["suites"]) == {n for n in bench.SUITES if n != "ray"}
    assert report["options"]["left_out"].keys() == {"ray"}
    assert_measured(report)
    missed = report["targets"]["missed"]
    assert result.exit_code == (3 if missed else 0), result.stderr
    last = result.stderr.splitlines()[-1]
    assert last == report["targets"]["summary"]
    assert last.startswith(f"bench: {report['targets']['met']} of {report['targets']['total']} targets met")
    assert all(f"{m['suite']}: {m['figure']}" in last for m in missed)
    # what the quick run measured it on is in the report: the two real logs
    count = {f["name"]: f for f in report["suites"]["count"]["figures"]}
    assert count["raw tiktoken throughput (cl100k_base)"]["note"].startswith("2 real transcripts (quick")
