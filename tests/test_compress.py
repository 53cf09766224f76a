"""Type-aware compressors on real code (site-packages), logs, JSON, prose and real tool output."""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import click
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from proptest import examples, sweep

from ctxkit import compress as cmod
from ctxkit.compress import (
    collapse_repeats,
    compress,
    compress_code,
    compress_json,
    compress_log,
    compress_text,
    detect_kind,
    says_something,
    split_sentences,
)
from ctxkit.compress.json import is_json, with_note
from ctxkit.tokens import get_tokenizer

TOK = get_tokenizer("cl100k_base")
TOL = 1 + cmod.TOLERANCE

# real Python files: click's own sources and the stdlib json decoder
CODE_FILES = [
    Path(click.__file__).parent / "core.py",
    Path(click.__file__).parent / "_compat.py",
    Path(click.__file__).parent / "termui.py",
    Path(json.__file__).parent / "decoder.py",
]


@pytest.mark.parametrize("path", CODE_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("ratio", sweep([0.8, 0.5, 0.2, 0.05], (0.5, 0.05)))
def test_python_code_still_parses_and_shrinks(path: Path, ratio: float) -> None:
    source = path.read_text()
    ast.parse(source)
    out = compress(source, "code", ratio, TOK)
    ast.parse(out)  # never breaks indentation or a statement
    before, after = TOK.count(source), TOK.count(out)
    assert after < before
    if ratio >= 0.2:
        assert after <= before * ratio * TOL


def test_code_steps_keep_signatures_and_drop_comments() -> None:
    source = (Path(json.__file__).parent / "decoder.py").read_text()
    stripped = compress_code(source, int(TOK.count(source) * 0.9), TOK)
    assert not any(line.lstrip().startswith("#") for line in stripped.splitlines())
    assert "" not in stripped.splitlines()
    outline = compress_code(source, 500, TOK)
    assert "def decode(self, s, _w=WHITESPACE.match):" in outline or "def decode(" in outline
    assert "class JSONDecoder(object):" in outline
    ast.parse(outline)


def test_small_functions_stay_whole_while_big_ones_collapse() -> None:
    source = (Path(click.__file__).parent / "_compat.py").read_text()
    out = compress_code(source, int(TOK.count(source) * 0.5), TOK)
    tree = ast.parse(out)
    bodies = [n.body for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    collapsed = sum(
        1
        for b in bodies
        if len(b) == 1
        and isinstance(b[0], ast.Expr)
        and isinstance(b[0].value, ast.Constant)
        and b[0].value.value is Ellipsis
    )
    assert 0 < collapsed < len(bodies)


@pytest.mark.parametrize("sep", ["\t", "→"])
def test_numbered_lines_keep_their_numbers(sep: str) -> None:
    lines = (Path(json.__file__).parent / "decoder.py").read_text().split("\n")
    numbered = "\n".join(f"{i + 1:6}{sep}{line}" for i, line in enumerate(lines))
    out = compress(numbered, "code", 0.4, TOK)
    assert TOK.count(out) <= TOK.count(numbered) * 0.4 * TOL
    bodies = []
    for line in out.split("\n"):
        m = re.match(rf"^\s*(\d*){re.escape(sep)}(.*)$", line)
        assert m, f"line lost its prefix: {line!r}"
        number, body = m.groups()
        if number:
            assert lines[int(number) - 1].startswith(body), (number, body)
        else:
            assert body.strip() in ("...", "") or body.lstrip().startswith("#")
        bodies.append(body)
    ast.parse("\n".join(bodies))


def test_generic_code_drops_comments() -> None:
    js = "\n".join(
        ["// header comment", "/* block", " * more", " */", "function add(a, b) {", "  // why", "  return a + b;", "}", ""] * 20
    )
    out = compress(js, "code", 0.6, TOK)
    assert "//" not in out and "/*" not in out and "function add(a, b) {" in out


def test_log_collapses_repeats_and_keeps_errors_head_tail() -> None:
    lines = ["starting build"] + [f"compiling module {i}" for i in range(200)]
    lines += ["warning: unused variable x", "Traceback (most recent call last):", '  File "a.py", line 3, in f', "KeyError: 'b'"]
    lines += [f"step {i} done" for i in range(300)] + ["ERROR: build failed", "finished in 12s"]
    text = "\n".join(lines)
    collapsed = "\n".join(collapse_repeats(lines))
    assert "[x200 similar] compiling module 0 (numbers vary)" in collapsed and "[last] compiling module 199" in collapsed
    assert "[x300 similar] step 0 done (numbers vary)" in collapsed
    assert collapse_repeats(["ok", "ok", "ok", "x"]) == ["[x3] ok", "x"]
    noisy = "\n".join(f"{i}: {w}" for i, w in enumerate(("request ok", "cache miss for key", "user logged in") * 150))
    noisy += "\nwarning: disk 91% full\nTraceback (most recent call last):\n  File \"a.py\", line 3\nKeyError: 'b'\nfinished"
    out = compress_log(noisy, int(TOK.count(noisy) * 0.2), TOK)
    assert TOK.count(out) <= TOK.count(noisy) * 0.2 * TOL
    for needed in ("0: request ok", "warning: disk 91% full", "Traceback (most recent call last):", "KeyError: 'b'", "finished"):
        assert needed in out
    assert re.search(r"\[\.\.\. \d+ lines omitted\]", out)
    assert compress(text, "log", 0.4, TOK).startswith("starting build")


def test_json_keeps_keys_and_elides() -> None:
    data = {
        "rows": [{"id": i, "name": f"item {i}", "notes": "x" * 500} for i in range(120)],
        "meta": {"total": 120, "query": "select *"},
    }
    text = json.dumps(data, indent=2)
    out = compress_json(text, int(TOK.count(text) * 0.1), TOK)
    assert TOK.count(out) <= TOK.count(text) * 0.1 * TOL
    back = json.loads(out)
    assert set(back) == {"rows", "meta"} and back["meta"] == {"total": 120, "query": "select *"}
    assert set(back["rows"][0]) == {"id", "name", "notes"}
    assert any(isinstance(r, str) and re.fullmatch(r"\.\.\. \d+ more items", r) for r in back["rows"])
    assert "more chars)" in back["rows"][0]["notes"]
    assert detect_kind(text) == "json"


def test_text_keeps_informative_sentences_in_order() -> None:
    text = (
        "The deploy failed on the payments service. "
        + "It was a normal day otherwise. " * 3
        + "The root cause was an expired TLS certificate on payments-db. "
        + "Lunch was fine. " * 3
        + "We rotated the certificate and added an alert for expiry."
    )
    out = compress_text(text, int(TOK.count(text) * 0.6), TOK)
    assert TOK.count(out) <= TOK.count(text) * 0.6 * TOL
    assert out.startswith("The deploy failed on the payments service.")
    assert "expired TLS certificate" in out
    kept = [s.strip() for s in split_sentences(out.replace("[...]", "")) if s.strip()]
    positions = [text.index(s) for s in kept]
    assert positions == sorted(positions)


def test_split_sentences_round_trips() -> None:
    text = "One. Two!  Three?\nFour\n\nFive. "
    assert "".join(split_sentences(text)) == text


# The first sentence pattern: correct, and quadratic in a long line with dots (kept here as the
# reference the linear one must split exactly as).
_FIRST_SENTENCE = re.compile(r"[^\n.!?]*(?:[.!?]+(?=\s|$)|\n+|$)")


def _reference_split(text: str) -> list[str]:
    parts: list[str] = []
    pos = 0
    for m in _FIRST_SENTENCE.finditer(text):
        if m.end() == m.start():
            if m.end() >= len(text):
                break
            continue
        end = m.end()
        while end < len(text) and text[end] in " \t":
            end += 1
        parts.append(text[pos:end])
        pos = end
    if pos < len(text):
        parts.append(text[pos:])
    out: list[str] = []
    for p in parts:
        if out and not p.strip():
            out[-1] += p
        else:
            out.append(p)
    return out


@given(st.text(alphabet=st.sampled_from("ab .!?\n\t\x0b\xa0é\u2028"), max_size=40))
def test_split_sentences_splits_as_the_reference(text: str) -> None:
    assert split_sentences(text) == _reference_split(text)


def test_split_sentences_on_a_long_line_with_dots() -> None:
    """A line of dotted names (a log, a minified file) is one sentence, split in linear time
    (the reference takes quadratic time on it: not run here at this size)."""
    line = "module.sub.name " * 20_000 + "end. Next"
    assert split_sentences(line) == [line[:-4], "Next"]


def test_compress_dispatch_rules() -> None:
    text = "alpha beta. " * 100
    assert compress(text, "plan_ref", 0.1, TOK) == text
    assert compress(text, "text", 1.0, TOK) == text
    assert compress("", "code", 0.1, TOK) == ""
    assert detect_kind("2024-01-01 10:00:00 INFO start\n2024-01-01 10:00:01 ERROR x\n2024-01-01 10:00:02 INFO y") == "log"
    assert detect_kind("def f(x):\n    return x\n\nclass A:\n    pass") == "code"
    assert detect_kind("This is prose. It has sentences that are long enough to read as such, clearly.") == "text"


def _tool_outputs(realdata: Path) -> list[str]:
    from ctxkit.formats import read_path

    out = []
    for rel in (
        "mini-swe-agent/SWE-agent__mini-swe-agent__PR-814__django__django-11039.traj.json",
        "claude-code/applab-nl__dmux__logs-chat-json@eef6c282__session-a9185eb7.jsonl",
    ):
        for t in read_path(str(realdata / rel)):
            out += [u.content for u in t.units if u.tool_call_id is not None and len(u.content) > 400]
    return out


def test_real_tool_outputs_shrink_and_mostly_hit_the_target(realdata: Path) -> None:
    outputs = _tool_outputs(realdata)
    assert len(outputs) >= 20
    hits = 0
    for text in outputs:
        before = TOK.count(text)
        out = compress(text, detect_kind(text), 0.4, TOK)
        after = TOK.count(out)
        assert after <= before
        hits += after <= before * 0.4 * TOL
    assert hits / len(outputs) >= 0.8


# ------------------------------------------------------------------------------------------
# cost grows linearly with the number of lines


class CountingTokenizer:
    """Wraps a real tokenizer and records how much work is asked of it."""

    def __init__(self) -> None:
        self.calls = 0
        self.chars = 0

    def count(self, text: str) -> int:
        self.calls += 1
        self.chars += len(text)
        return TOK.count(text)

    def count_many(self, texts: list[str]) -> list[int]:
        self.calls += 1
        self.chars += sum(len(t) for t in texts)
        return TOK.count_many(texts)


def c_source(lines: int) -> str:
    out: list[str] = []
    for i in range(lines // 5):
        out += [f"int func_{i}(int x) {{", f"    int y = x * {i};", f"    // step {i}", f"    return y + {i};", "}"]
    return "\n".join(out)


def py_source(lines: int, numbered: bool = False) -> str:
    out: list[str] = []
    for i in range(lines // 5):
        out += [f"def func_{i}(x):", f"    y = x * {i}", f"    # step {i}", f"    return y + {i}", ""]
    if numbered:
        out = [f"{k + 1:6d}\t{line}" for k, line in enumerate(out)]
    return "\n".join(out)


def test_compress_code_on_50000_lines_asks_the_tokenizer_linear_work() -> None:
    text = c_source(50_000)
    tok = CountingTokenizer()
    out = compress_code(text, TOK.count(text) // 10, tok)
    assert "more lines" in out and TOK.count(out) <= TOK.count(text) // 10 * TOL
    # a fixed number of passes, each over the text once: not one count per line per line
    assert tok.calls <= 20
    assert tok.chars <= 6 * len(text)


def _python_calls(fn: Callable[[], object]) -> int:
    """Python function calls (generator resumes included) made inside ctxkit.compress."""
    calls = 0
    here = cmod.__file__

    def prof(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" and frame.f_code.co_filename == here:
            calls += 1

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(c_source, id="c", marks=pytest.mark.slow),
        pytest.param(py_source, id="python"),
        pytest.param(lambda n: py_source(n, numbered=True), id="numbered", marks=pytest.mark.slow),
    ],
)
def test_compress_code_work_grows_linearly(make: Callable[[int], str]) -> None:
    small, large = make(1_000), make(2_000)
    work_small = _python_calls(lambda: compress_code(small, TOK.count(small) // 10, TOK))
    work_large = _python_calls(lambda: compress_code(large, TOK.count(large) // 10, TOK))
    # twice the lines: about twice the work (quadratic code would do four times as much)
    assert work_large <= 2.6 * work_small


APP_LOG = "\n".join(
    [
        "May 01 10:00:01 web-3 app[123]: INFO connected {db=main, pool=10}",
        "May 01 10:00:02 web-3 app[123]: WARN pool exhausted {waiting=3}",
        "May 01 10:00:03 web-3 app[123]: INFO request done;",
        "2024-05-01 10:00:04,551 WARN  [http-1] c.e.Api - slow request {path=/api/orders, ms=812}",
        "[INFO] Handler registered {route: /health}",
        "[WARN] Config key deprecated: use server.port instead;",
    ]
    * 5
)


def test_an_application_log_with_levels_is_a_log() -> None:
    assert detect_kind(APP_LOG) == "log"
    # code that mentions levels stays code
    code = "\n".join(["import logging", "log = logging.getLogger(__name__)", "def f(x):", "    log.setLevel(logging.INFO)", "    return x;"])
    assert detect_kind(code) == "code"


def pytest_log(n: int) -> str:
    out = ["============================= test session starts ==============================",
           "platform linux -- Python 3.11.9, pytest-8.2.0, pluggy-1.5.0", f"collected {n} items", ""]
    for i in range(n):
        status = "FAILED" if i in (1234, 4321) else "PASSED"
        out.append(f"tests/test_orders.py::test_order_total[case{i}] {status} [{100 * i // n:3d}%]")
    out += ["", "=================================== FAILURES ===================================",
            ">       assert total(case) == expected(case)", "E       AssertionError: assert 1299 == 1300",
            "FAILED tests/test_orders.py::test_order_total[case1234] - AssertionError: assert 1299 == 1300",
            f"===================== 2 failed, {n - 2} passed in 41.20s ====================="]
    return "\n".join(out)


def test_log_runs_that_differ_in_numbers_say_so() -> None:
    lines = [f"GET /api/orders/{1000 + i} 200 {5 + i % 40}ms" for i in range(200)]
    collapsed = collapse_repeats(lines)
    assert collapsed == ["[x200 similar] GET /api/orders/1000 200 5ms (numbers vary)", "[last] GET /api/orders/1199 200 44ms"]
    out = compress_log("\n".join(lines), 60, TOK)
    assert "similar]" in out and "(numbers vary)" in out and "[x200] " not in out


@pytest.mark.parametrize("ratio", [0.4, 0.1])
def test_log_compression_aims_at_its_target(ratio: float) -> None:
    text = pytest_log(6000)
    target = int(TOK.count(text) * ratio)
    out = compress(text, "log", ratio, TOK)
    # collapsing alone would give ~150 tokens; the spare budget goes to verbatim head/tail/errors
    assert target * (1 - cmod.TOLERANCE) <= TOK.count(out) <= target * TOL
    for needed in ("test session starts", "[case1234] FAILED", "[case4321] FAILED", "AssertionError: assert 1299 == 1300", "2 failed, 5998 passed"):
        assert needed in out
    assert out.startswith("=====") and out.endswith("=====")


# ------------------------------------------------------------------------------------------
# properties: cut at boundaries, never only markers, JSON stays JSON

SENTENCE = st.builds(
    lambda words, end: " ".join(words).capitalize() + end,
    st.lists(st.sampled_from(["deploy", "cache", "the", "error", "models.py", "value", "runs", "x", "ok", "日本語"]), min_size=1, max_size=12),
    st.sampled_from([".", "!", "?", ":", ""]),
)
MARKER_RE = re.compile(r"\[\.\.\.\]")


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(SENTENCE, min_size=1, max_size=30), st.sampled_from([" ", "\n", "\n\n"]), st.floats(0.01, 0.9))
def test_text_cuts_between_sentences_and_keeps_the_first(sentences: list[str], sep: str, ratio: float) -> None:
    text = sep.join(sentences)
    out = compress(text, "text", ratio, TOK)
    assert says_something(out)
    if out == text:
        return
    pieces = [s.strip() for s in split_sentences(text)]
    kept = [p.strip() for p in MARKER_RE.split(out) if p.strip()]
    # every kept piece is whole sentences of the original, in order; the first sentence is kept
    assert kept[0].startswith(next(p for p in pieces if re.search(r"[^\W_]", p)))
    pos = 0
    for k in kept:
        at = text.find(k, pos)
        assert at >= 0, (k, text)
        pos = at + len(k)


@settings(max_examples=examples(100), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["deploy", "cache", "the", "error", "models.py", "value"]), min_size=20, max_size=80), st.floats(0.01, 0.9))
def test_one_sentence_stays_whole(words: list[str], ratio: float) -> None:
    text = ", ".join(words) + "."
    assert len(split_sentences(text)) == 1
    assert compress(text, "text", ratio, TOK) == text


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=40) | st.dictionaries(st.text(max_size=8), inner, max_size=40),
    max_leaves=300,
)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES, st.sampled_from(list(cmod.KINDS) + ["other"]), st.floats(0.01, 0.9), st.sampled_from([None, 2]))
def test_json_stays_json_whatever_the_kind_asked(value: object, kind: str, ratio: float, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    out = compress(text, "json", ratio, TOK)
    json.loads(out)
    assert TOK.count(out) <= TOK.count(text)
    noted = with_note(out, "[note]")
    if isinstance(value, list | dict):
        assert noted is not None and json.loads(noted) is not None
    else:
        assert noted is None


@settings(max_examples=examples(100), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["", "   ", "....", "x = 1", "    return y", "ERROR boom", "ok"]), min_size=2, max_size=60), st.sampled_from(["code", "log", "text"]), st.floats(0.01, 0.5))
# blank lines collapse to "[x8]    ", whose x8 once passed for the log's first line with words
@example(["", "", *["   "] * 6, "x = 1", "x = 1", "....", *["   "] * 3, *["x = 1"] * 4, "ERROR boom"], "log", 0.5)
def test_compressors_never_leave_only_markers(lines: list[str], kind: str, ratio: float) -> None:
    text = "\n".join(lines)
    out = compress(text, kind, ratio, TOK)
    assert says_something(out) or not says_something(text)
    first = next((ln.strip() for ln in lines if re.search(r"[^\W_]", ln)), None)
    if kind in ("log", "text") and first is not None:
        assert first in out  # the head that says what this was


def test_large_objects_elide_keys_with_a_marker_key() -> None:
    data = {f"key{i}": i for i in range(500)}
    out = compress_json(json.dumps(data), 50, TOK)
    back = json.loads(out)
    assert back["..."].endswith(" more keys") and "key0" in back


def test_with_note_avoids_taken_keys() -> None:
    assert json.loads(with_note('{"_note": 1}', "n") or "") == {"_note": 1, "__note": "n"}
    assert with_note('"just a string"', "n") is None and with_note("not json", "n") is None
    assert is_json(' [1, 2] ') and is_json("42") and not is_json("[INFO] started") and not is_json("")


def test_text_keeps_fenced_code_blocks_whole() -> None:
    code = "```python\n" + "\n".join(f"x{i} = compute({i})  # step {i}" for i in range(30)) + "\n```\n"
    text = (
        "The deploy failed on the payments service. " + "It was a normal day otherwise. " * 4 + "\n"
        + code + "We rotated the certificate. " + "Lunch was fine. " * 4 + "\n" + code + "The end."
    )
    out = compress_text(text, int(TOK.count(text) * 0.3), TOK)
    assert out.count("```") % 2 == 0 and out.startswith("The deploy failed")
    assert TOK.count(out) < TOK.count(text)
    wider = compress_text(text, int(TOK.count(text) * 0.7), TOK)
    assert "```python\nx0 = compute(0)" in wider and wider.count("```") % 2 == 0
    # a kept fence still opens a line, so it is still a fence
    assert all(line.startswith("```") for line in wider.splitlines() if "```" in line)


def test_a_cut_log_keeps_the_exception_line_of_its_traceback() -> None:
    from ctxkit.compress.log import compress_log
    from ctxkit.tokens import get_tokenizer

    tok = get_tokenizer("cl100k_base")
    frames = "".join(f'  File "/app/mod{i}.py", line {i}, in f{i}\n    call_{i}()\n' for i in range(40))
    log = "running tests\n" + "\n".join(f"step {i} ok" for i in range(60)) + "\nTraceback (most recent call last):\n" + frames + "ModuleNotFoundError: No module named 'django.db.connections'\n" + "\n".join(f"warning: cleanup step {i} failed, retrying" for i in range(30))
    short = compress_log(log, 60, tok)
    assert "ModuleNotFoundError: No module named 'django.db.connections'" in short


def test_a_message_cut_inside_its_code_fence_closes_the_fence() -> None:
    """A reply cut in the middle of its code block gets the fence closed after the marker, so
    what follows (a note, the next message) is not read as code."""
    body = "\n".join(f"const value{i} = computeSomethingLong(argument{i}, other{i});" for i in range(80))
    text = "Here is the fix:\nsrc/app.js\n```js\n<<<<<<< SEARCH\n" + body + "\n=======\n" + body + "\n>>>>>>> REPLACE\n```"
    out = cmod.compress_code(text, 200, TOK)
    assert "more lines" in out
    fences = [line for line in out.split("\n") if line.strip().startswith("```")]
    assert fences == ["```js", "```"] and out.endswith("more lines\n```")
    # a head that closed its block needs no extra fence
    short = "Here:\n```js\nlet a = 1;\n```\n" + "\n".join(f"Note {i}: this line explains more." for i in range(80))
    assert cmod.compress_code(short, 60, TOK).count("```") == 2
