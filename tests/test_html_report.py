"""The compaction page (`compact --html`, `ctxkit report`): built from the JSON report alone,
rendered in headless Chromium (Debian's `chromium`, driven by playwright, nothing downloaded)
with no console errors, every unit in the DOM, counts equal to the report's, and transcript
text shown as text, never run as markup."""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.compaction import compact
from ctxkit.compaction.trace import STATUSES, detailed_report, unit_trace
from ctxkit.errors import CtxkitError
from ctxkit.formats import read_path
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.report.html import render_html
from ctxkit.simulate import generate
from ctxkit.tokens import count_transcript

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
CHROMIUM = "/usr/bin/chromium"
# every real transcript file; those of formats ctxkit does not read yet are skipped by the test
REAL_FILES = sorted(
    str(p.relative_to(REALDATA))
    for p in REALDATA.glob("*/*")
    if p.is_file() and not p.name.startswith(".")
)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
XSS = "</textarea><script>window.__xss = 1</script><img src=x onerror=\"window.__xss = 2\">"


def _run(args: list[str]) -> Any:
    return CliRunner().invoke(cli, args, catch_exceptions=False)


# ------------------------------------------------------------------ the report, without a browser


def test_trace_follows_every_unit_and_matches_the_counts() -> None:
    r = compact(generate("agent_session", seed=3), limit=6000)
    doc = unit_trace(r)
    assert [u["id"] for u in doc["before"]] == [u.id for u in r.original.units]
    assert [u["id"] for u in doc["after"]] == [u.id for u in r.transcript.units]
    assert len(doc["after"]) == r.units_after
    assert sum(doc["counts"].values()) == r.units_before
    assert set(doc["counts"]) == set(STATUSES)
    after = {u["id"]: u for u in doc["after"]}
    for u in doc["before"]:
        if u["status"] == "kept":
            assert u["ref"] is None and after[u["id"]]["content"] == u["content"]
        else:
            assert u["ref"].startswith("ref-")  # every change is archived under a ref
        if u["status"] == "summarized":
            assert after[u["to"]]["type"] == "summary" and u["id"] in after[u["to"]]["from"]
    # the ground truth the scenario carries: P1 units and needles are marked
    truth = doc["truth"]
    assert truth is not None and truth["needles"]
    assert all(u["p1"] for u in doc["before"] if u["id"] in truth["p1_ids"])
    marked = {x for u in doc["before"] for x in u.get("needles", [])}
    assert marked and marked <= {n["id"] for n in truth["needles"]}


def test_report_keeps_its_keys_and_rebuilds_the_same_page(tmp_path: Path) -> None:
    src = tmp_path / "chat.json"
    src.write_bytes(_repo_file("sample_transcripts/tau-bench-airline.json"))
    report, page = tmp_path / "r.json", tmp_path / "a.html"
    r = _run(
        ["compact", str(src), "--limit", "4000", "-o", str(tmp_path / "out.json"),
         "--report", str(report), "--html", str(page)]
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(report.read_bytes())
    old_keys = {"transcript", "changed", "fits", "limit", "target", "tokens", "units", "steps",
                "strategies", "recovery", "refs", "p1", "invariants", "coherence", "time_ms",
                "archive", "dry_run"}  # fmt: skip
    assert old_keys <= set(doc)
    assert {"input", "budget", "unit_records", "final_prompt"} <= set(doc)
    assert len(doc["unit_records"]["before"]) == doc["units"]["before"] == 62
    assert len(doc["unit_records"]["after"]) == doc["units"]["after"]
    assert doc["final_prompt"]["text"] == (tmp_path / "out.json").read_text()
    again = tmp_path / "b.html"
    r = _run(["report", str(report), "--html", str(again)])
    assert r.exit_code == 0, r.stderr
    assert again.read_bytes() == page.read_bytes()


def test_needles_from_a_simulate_sidecar_are_marked(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    r = _run(["simulate", "-s", "agent_session", "--tokens", "12000", "-o", str(src)])
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "s.truth.jsonl").exists()
    r = _run(
        ["compact", str(src), "--limit", "5000", "-o", str(tmp_path / "o.jsonl"),
         "--report", str(tmp_path / "r.json"), "--html", str(tmp_path / "p.html")]
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    recs = orjson.loads((tmp_path / "r.json").read_bytes())["unit_records"]
    truth = recs["truth"]
    assert truth is not None and truth["needles"] and truth["p1_ids"]
    assert {n["status"] for n in truth["needles"]} <= {"present", "recallable", "absent"}
    page = (tmp_path / "p.html").read_text()
    holding = [u for side in ("before", "after") for u in recs[side] if u.get("needles")]
    assert holding and page.count('class="badge needle"') == len(holding)
    assert {n for u in holding for n in u["needles"]} == {n["id"] for n in truth["needles"]}
    assert "Needles (ground truth)" in page


def test_report_of_an_old_report_is_one_line(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text('{"transcript": "t", "tokens": {}}')
    r = _run(["report", str(old), "--html", str(tmp_path / "x.html")])
    assert r.exit_code == 1
    assert "has no unit records" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.html").exists()


def test_a_tampered_report_is_escaped_or_refused(tmp_path: Path) -> None:
    """`ctxkit report` reads a JSON file from anywhere: every field of it is text."""
    doc = detailed_report(compact(generate("long_chat", seed=2), limit=5000))
    evil = '"><img src=x onerror="window.__xss=1">'
    doc["transcript"] = evil
    doc["unit_records"]["before"][0]["status"] = evil
    doc["unit_records"]["after"][0]["status"] = evil
    doc["unit_records"]["before"][1]["id"] = evil
    doc["steps"][0]["strategy"] = evil
    doc["tokens"]["regions_after"][evil] = 5
    report = tmp_path / "r.json"
    report.write_bytes(orjson.dumps(doc))
    r = _run(["report", str(report), "--html", str(tmp_path / "p.html")])
    assert r.exit_code == 0, r.stderr
    page = (tmp_path / "p.html").read_text()
    assert "<img" not in page and "&lt;img src=x onerror=" in page
    del doc["unit_records"]["before"][2]["status"]
    report.write_bytes(orjson.dumps(doc))
    r = _run(["report", str(report), "--html", str(tmp_path / "q.html")])
    assert r.exit_code == 1
    assert r.stderr.startswith(f"Error: {report}: not a ctxkit compaction report (KeyError")
    assert not (tmp_path / "q.html").exists()


def test_page_escapes_transcript_text() -> None:
    t = generate("long_chat", seed=2)
    t.units[1] = t.units[1].replace(content=XSS + t.units[1].content)
    page = render_html([detailed_report(compact(t, limit=5000))])
    assert "<script>window.__xss" not in page and "<img src=x" not in page
    assert "&lt;/textarea&gt;&lt;script&gt;window.__xss" in page
    assert page.count("<script") == 1  # ours, allowed by its hash in the CSP
    assert "http://" not in page.split("</style>")[0] and "src=" not in page.split("<body>")[1][:200]


def test_passes_end_where_the_compaction_ends() -> None:
    """Offload masks every big output; the last one comes back once the target has room.
    That is the give_back step (tokens saved negative), so the passes table ends at the
    page's own `after` figure."""
    units = [Unit(id="s", role="system", content="You are helpful."), Unit(id="q", role="user", content="Go.")]
    for k in range(6):
        units.append(Unit(id=f"a{k}", role="assistant", content="",
                          tool_calls=[ToolCall(f"c{k}", "bash", '{"cmd": "cat f.py"}')]))
        units.append(Unit(id=f"r{k}", role="tool", tool_call_id=f"c{k}", name="bash",
                          content="\n".join(f"<div>line {j}</div> & stuff {k}" for j in range(150))))
        units.append(Unit(id=f"n{k}", role="user", content=f"next {k}"))
    result = compact(Transcript(id="t", units=units), limit=5000)
    doc = detailed_report(result)
    last = doc["steps"][-1]
    assert last["strategy"] == "give_back" and last["tokens_saved"] < 0  # what this test is about
    page = render_html([doc])
    table = page.split('<table class="steps">')[1].split("</table>")[0]
    last_row = table.split("<tr")[-1]
    assert f'<td class="num">{doc["tokens"]["after"]:,}</td>' in last_row
    assert "give_back" in last_row or "as written" in last_row


def _repo_file(rel: str) -> bytes:
    return (Path(__file__).resolve().parents[1] / rel).read_bytes()


# ------------------------------------------------------------------ in Chromium


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Debian's chromium under playwright; a fresh profile and temp dir in pytest's tmp."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not os.path.exists(CHROMIUM) and not shutil.which("chromium"):
        pytest.skip(f"chromium not found at {CHROMIUM} (apt-get install chromium)")
    root = tmp_path_factory.mktemp("chromium")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", str(root))  # the playwright driver's own temp files
        with sync_api.sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                str(root / "profile"),
                executable_path=CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium"),
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1400, "height": 1000},
            )
            try:
                yield context
            finally:
                context.close()


def _open(browser: Any, page_path: Path) -> tuple[Any, list[str]]:
    page = browser.new_page()
    problems: list[str] = []
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}")
        if m.type in ("error", "warning", "assert")
        else None,
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on(
        "request",
        lambda req: None
        if req.url.startswith(("file:", "data:"))
        else problems.append(f"request {req.url}"),
    )
    page.goto(page_path.as_uri(), wait_until="load")
    return page, problems


_DOM = """() => Array.from(document.querySelectorAll('section.transcript')).map(s => ({
  before: Array.from(s.querySelectorAll('.before-unit')).map(e => [e.dataset.unitId, e.dataset.status]),
  after: Array.from(s.querySelectorAll('.after-unit')).map(e => e.dataset.unitId),
  counts: Object.fromEntries(Array.from(s.querySelectorAll('[data-count-status]'))
    .map(e => [e.dataset.countStatus, +e.dataset.count])),
}))"""


def _check_page(page: Any, doc: Any) -> None:
    """Every unit of every transcript in the DOM, in order, with the report's statuses."""
    reports = doc["transcripts"] if "transcripts" in doc else [doc]
    sections = page.evaluate(_DOM)  # one round trip: a dataset page has hundreds of sections
    assert len(sections) == len(reports)
    for got, r in zip(sections, reports, strict=True):
        recs = r["unit_records"]
        assert got["before"] == [[u["id"], u["status"]] for u in recs["before"]]
        assert len(got["before"]) == r["units"]["before"]
        assert got["after"] == [u["id"] for u in recs["after"]]
        assert len(got["after"]) == r["units"]["after"]
        assert got["counts"] == recs["counts"]
        assert sum(recs["counts"].values()) == r["units"]["before"]


def _limit_for(path: str) -> int:
    """About a third of the largest conversation, but room for what no strategy removes (the
    system prompt, and the unlogged region of a log's recorded usage)."""
    from ctxkit.counting import measure
    from ctxkit.tokens import get_tokenizer

    ts = list(read_path(path))
    tok = get_tokenizer()
    total = max(measure(t, tok).total for t in ts)
    floor = max(
        count_transcript(t.replace(units=t.system_units)).total + measure(t, tok).unlogged
        for t in ts
    )
    return max(total // 3, math.ceil(floor * 1.5) + 800)


def test_chromium_renders_the_xss_case_as_text(browser: Any, tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": "Fix the form. " + XSS},
    ]
    for i in range(12):
        messages.append({"role": "assistant", "content": f"Step {i}: {XSS} " + "looked at it. " * 60})
        messages.append({"role": "user", "content": f"go on {i} " + "more detail please " * 30})
    src = tmp_path / "xss.json"
    src.write_bytes(orjson.dumps(messages))
    report, html_path = tmp_path / "r.json", tmp_path / "xss.html"
    r = _run(
        ["compact", str(src), "--limit", "1500", "-o", str(tmp_path / "out.json"),
         "--report", str(report), "--html", str(html_path)]
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    page, problems = _open(browser, html_path)
    assert problems == []
    assert page.evaluate("window.__xss") is None  # neither the script nor the onerror ran
    assert page.locator("section img").count() == 0
    first_user = page.locator(".before-unit").nth(1)
    assert XSS in first_user.inner_text()
    doc = orjson.loads(report.read_bytes())
    _check_page(page, doc)
    # the status filter hides kept units
    page.locator('.controls input[data-status="kept"]').uncheck()
    assert page.locator(".before-unit.st-kept").first.is_hidden()
    page.screenshot(path=str(tmp_path / "xss.png"))
    page.close()


def test_chromium_renders_a_dataset_compacted_in_parallel(browser: Any, tmp_path: Path) -> None:
    """One section per conversation; workers' results trace their units like a serial run."""
    src = _repo_file("sample_transcripts/sharegpt-glaive-toolcall.json")
    (tmp_path / "data.json").write_bytes(src)
    records = {}
    for jobs in ("1", "2"):
        out = tmp_path / jobs
        out.mkdir()
        r = _run(
            ["compact", str(tmp_path / "data.json"), "--limit", "450", "--jobs", jobs,
             "-o", str(out / "o.json"), "--report", str(out / "r.json"),
             "--html", str(out / "p.html")]
        )  # fmt: skip
        assert r.exit_code == 0, r.stderr
        doc = orjson.loads((out / "r.json").read_bytes())
        records[jobs] = [(t["unit_records"], t["final_prompt"]) for t in doc["transcripts"]]
        r = _run(["report", str(out / "r.json"), "--html", str(out / "again.html")])
        assert r.exit_code == 0, r.stderr
        assert (out / "again.html").read_bytes() == (out / "p.html").read_bytes()
        assert len(doc["transcripts"]) == 20
        assert any(t["changed"] for t in doc["transcripts"])
        _every_change_is_traced(doc)
    assert records["1"] == records["2"]  # the same units, statuses and output either way
    page, problems = _open(browser, tmp_path / "2" / "p.html")
    assert problems == []
    _check_page(page, orjson.loads((tmp_path / "2" / "r.json").read_bytes()))
    page.close()


def _every_change_is_traced(doc: Any) -> None:
    """Every unit not kept verbatim names the unit of the result that stands for it."""
    for r in doc["transcripts"] if "transcripts" in doc else [doc]:
        lost = [u["id"] for u in r["unit_records"]["before"] if u["status"] != "kept" and not u["to"]]
        assert lost == [], r["transcript"]


@pytest.mark.slow
@pytest.mark.parametrize("rel", REAL_FILES or ["(no realdata)"], ids=REAL_FILES or None)
def test_chromium_renders_every_real_transcript(browser: Any, rel: str, tmp_path: Path) -> None:
    if not REALDATA.is_dir():
        pytest.skip(f"real transcripts not found at {REALDATA}")
    path = str(REALDATA / rel)
    try:
        limit = _limit_for(path)
    except CtxkitError as exc:  # a format no reader of this build detects
        pytest.skip(f"ctxkit does not read this file yet: {str(exc)[:120]}")
    report, html_path = tmp_path / "r.json", tmp_path / "page.html"
    r = _run(
        ["compact", path, "--limit", str(limit), "-o", str(tmp_path / "out"),
         "--archive", str(tmp_path / "a.db"), "--report", str(report), "--html", str(html_path)]
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    page, problems = _open(browser, html_path)
    assert problems == []
    doc = orjson.loads(report.read_bytes())
    _check_page(page, doc)
    _every_change_is_traced(doc)
    page.screenshot(path=str(tmp_path / "page.png"))
    page.close()
