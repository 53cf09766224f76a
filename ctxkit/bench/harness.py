"""The bench harness: the suites' sizes and targets, timing helpers, machine notes, standard
inputs (simulated, real logs, chained, tiny messages). The records are `bench.records`."""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from ctxkit.bench.records import REALDATA
from ctxkit.errors import CtxkitError, InputError
from ctxkit.model import Transcript
from ctxkit.tokens import DEFAULT_TOKENIZER

PACKAGES = ("tiktoken", "sentence-transformers", "torch", "langchain-core", "numpy", "matplotlib")


SCALE_SIZES = (1_000, 10_000, 100_000, 1_000_000)


# growing_session and agent_session grow their turns with the size (about 200 units at any
# size); long_chat keeps turns short, so its unit count grows with the tokens (10k units at 1M).
SCALE_SCENARIOS = ("growing_session", "agent_session", "long_chat")


QUICK_SCENARIOS = ("agent_session", "long_chat", "parallel_tools", "giant_tool_output")


# The other two axes of the scale suite: real logs chained to a size (tokens), and a chat of
# many tiny messages (messages: compaction must be linear in them too, not only in tokens).
REAL_CHAIN = "real_chain"
TINY_MESSAGES = "tiny_messages"
REAL_CHAIN_SIZES = (10_000, 100_000, 1_000_000)
MESSAGE_SIZES = (25_000, 50_000, 100_000, 200_000)
QUICK_MESSAGE_SIZES = (2_500, 5_000, 10_000)
PASS_TARGET = 3.0  # compaction within 3 tiktoken passes over the same texts (issue 23)


REAL_MIN_TOKENS = 5_000


# The spec's 50-unit chain target: agent_session, seed 3, at 10k tokens has 51 units.
STANDARD = ("agent_session", 3, 10_000)


def machine_notes() -> dict[str, Any]:
    """Cores, Python, platform, package versions and the load average right now."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        ctxkit_version = metadata.version("ctxkit")
    except metadata.PackageNotFoundError:
        ctxkit_version = None
    return {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu_count": os.cpu_count(),
        "cpu": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "ctxkit": ctxkit_version,
        "packages": versions,
        "load_average_start": _loadavg(),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this process, result) of one call."""
    cpu = time.process_time()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, time.process_time() - cpu, result


def _repeat(
    fn: Callable[[], Any], n: int, before: Callable[[], None] | None = None
) -> dict[str, float]:
    """Time `fn` n times (running `before` untimed first each time): mean, median, best, CPU."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(max(1, n)):
        if before is not None:
            before()
        wall, cpu, _ = _timed(fn)
        walls.append(wall)
        cpus.append(cpu)
    return {
        "mean_s": statistics.fmean(walls),
        "median_s": statistics.median(walls),
        "best_s": min(walls),
        "cpu_best_s": min(cpus),
        "runs": len(walls),
    }


def raw_encoding(name: str | None = None) -> Any:
    """Raw tiktoken for `name` (default the default tokenizer): an encoding with a bundled
    offline copy from it, o200k_base built from bpe-openai's copy of tiktoken's file; no ctxkit
    code around it."""
    import tiktoken

    from ctxkit.tokens.encodings import OFFLINE_ENCODINGS, tiktoken_encoding
    from ctxkit.tokens.loaders import DEFAULT_TOKENIZER

    name = name or DEFAULT_TOKENIZER
    if name in OFFLINE_ENCODINGS:
        return tiktoken.get_encoding(OFFLINE_ENCODINGS[name])
    return tiktoken_encoding(name)


def _tok() -> Any:
    from ctxkit.tokens import get_tokenizer

    return get_tokenizer(DEFAULT_TOKENIZER)


def _clear() -> None:
    from ctxkit.tokens import clear_caches

    clear_caches()


def cold_copy(t: Transcript) -> Transcript:
    """A copy of `t` that nothing has read yet: new unit objects (the per-unit caches of
    `ctxkit.memo` key by identity), and every cache keyed by content emptied (token counts,
    error lines, refs, call paths), for a compaction timed cold again in the same process."""
    import copy
    import gc

    from ctxkit import memo
    from ctxkit.archive import store
    from ctxkit.fidelity import probes
    from ctxkit.summarizers import extractive

    fresh = copy.deepcopy(t)
    _clear()
    memo.forget()
    extractive.error_line.cache_clear()
    store._ref_number.cache_clear()
    probes._call_paths.cache_clear()
    gc.collect()
    return fresh


def standard_transcript() -> Transcript:
    """The spec's 50-unit, ~10k-token transcript (simulated agent session with ground truth)."""
    from ctxkit.simulate import generate

    scenario, seed, tokens = STANDARD
    return generate(scenario, seed=seed, tokens=tokens)


def _read_real(root: Path) -> Iterator[Transcript]:
    """The transcripts ctxkit reads under `root` (skipping other formats), in path order, as
    they are read."""
    from ctxkit.formats import read_path

    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.parent != root):
        try:
            found = list(read_path(str(path)))
        except (InputError, CtxkitError):
            continue
        for t in found:
            if t.units:
                t.metadata.setdefault("bench_source", f"{path.parent.name}/{path.name}")
                yield t


# what real_transcripts read, by folder: every suite of a run reads the same files once
_REAL: dict[str, list[tuple[Transcript, int]]] = {}


def real_transcripts(root: Path | None, min_tokens: int = 0) -> list[Transcript]:
    """Every transcript ctxkit reads under `root` (skipping other formats), at least min_tokens.

    The folder is read once per process; each call gets units of its own (the per-unit caches
    of `ctxkit.memo` key by identity, so what one suite computed is not warm for the next)."""
    from ctxkit.tokens import count_transcript

    if root is None or not root.is_dir():
        return []
    key = str(root.resolve())
    if key not in _REAL:
        _REAL[key] = [(t, count_transcript(t, _tok()).total) for t in _read_real(root)]
    return [
        t.replace(units=[u.replace(raw=u.raw) for u in t.units])
        for t, tokens in _REAL[key]
        if tokens >= min_tokens
    ]


def real_chain(tokens: int, root: Path | None = None) -> Transcript | None:
    """A long real log: the real transcripts under `root` (all of them, in path order, again
    from the first when they run out) chained into one session of about `tokens` tokens, as if
    one agent had done all that work; ids are prefixed per log and copy, so every unit keeps an
    id of its own and calls pair as they did.
    None when there are no real transcripts."""
    from ctxkit.model import ToolCall
    from ctxkit.tokens import count_units

    folder = root if root is not None else REALDATA
    if not folder.is_dir():
        return None
    read = _read_real(folder)  # read as far as the size needs (a fresh process per size)
    corpus: list[Transcript] = []

    def logs() -> Iterator[Transcript]:
        yield from corpus
        for t in read:
            corpus.append(t)
            yield t

    tok = _tok()
    units: list[Any] = []
    total = 0
    copy = 0
    while total < tokens:
        if copy and not corpus:
            return None
        for k, t in enumerate(logs()):
            prefix = f"c{copy}.{k}-"
            for u in t.units:
                if u.role == "system" and units:
                    continue  # one system prompt, the first log's
                u = u.replace(
                    id=prefix + u.id,
                    tool_call_id=None if u.tool_call_id is None else prefix + u.tool_call_id,
                    tool_calls=[ToolCall(prefix + c.id, c.name, c.arguments) for c in u.tool_calls],
                )
                units.append(u)
                total += count_units([u], tok)[0].total
                if total >= tokens:
                    break
            if total >= tokens:
                break
        copy += 1
    return Transcript(units=units, id=f"real-chain-{tokens}", source_format="units")


_TINY_WORDS = "ok go on yes no done fixed run the tests again looks good next file check logs retry thanks".split()


def tiny_messages(messages: int) -> Transcript:
    """A chat of `messages` tiny alternating user and assistant messages (one to six words and
    a number, ~10 tokens each) after a one-line system prompt: the case where per-message costs,
    not per-token costs, decide the time."""
    import random

    from ctxkit.model import Unit

    rnd = random.Random(0)
    units = [Unit(id="s", role="system", content="You are a helpful coding agent.")]
    for i in range(messages):
        words = " ".join(rnd.choice(_TINY_WORDS) for _ in range(rnd.randint(1, 6)))
        units.append(Unit(id=f"m{i}", role="user" if i % 2 == 0 else "assistant", content=f"{words} {i}"))
    return Transcript(units=units, id=f"tiny-{messages}", source_format="units")


def _label(t: Transcript) -> str:
    src = t.metadata.get("bench_source")
    if src:
        name = str(src).split("/", 1)[-1]
        return name if len(name) <= 48 else name[:45] + "..."
    return t.id


def _raw_pass(enc: Any, texts: list[str]) -> None:
    enc.encode_ordinary_batch(texts, num_threads=os.cpu_count() or 1)


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of log(y) on log(x): 1.0 is linear growth, 2.0 quadratic."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if not sxx:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def _settings(limit: int) -> Any:
    """The default configuration's settings at `limit`, with the default embedder."""
    from ctxkit.config.file import Config
    from ctxkit.config.settings import compact_settings

    return compact_settings(limit=limit, config=Config()).replace(embedder=None)


def _mean(xs: Sequence[float]) -> float | None:
    return round(statistics.fmean(xs), 4) if xs else None


def _median(xs: Sequence[float]) -> float | None:
    return round(statistics.median(xs), 4) if xs else None


def torch_threads() -> int | None:
    """torch's thread count when torch is loaded (a note beside the embedding figures)."""
    import sys

    if "torch" not in sys.modules:
        return None
    return int(sys.modules["torch"].get_num_threads())


def limit_for(t: Transcript) -> int:
    """A limit that forces compaction: the ground truth's, else half the transcript, with room
    for 1,500 tokens of history under the goal beside what no compaction removes. Both as the
    one figure gives them (`counting.measure`): a log's recorded usage counts, its fixed part
    with the system prompt and schemas."""
    from ctxkit.budget import Thresholds
    from ctxkit.counting import measure
    from ctxkit.tokens import count_transcript

    truth = t.metadata.get("ground_truth")
    if truth:
        return int(truth["limit"])
    measured = measure(t, _tok())
    system = count_transcript(
        t.replace(units=[u for u in t.units if u.role == "system"]), _tok()
    ).total
    # the system prompt, schemas and the fixed part cannot be cut; the goal (at least the warn
    # threshold of the limit) leaves 1,500 tokens beside them
    fixed = system + measured.unlogged
    return max(measured.total // 2, int((fixed + 1500) / Thresholds().warn) + 1)


def python_subprocess(code: str, timeout_s: float) -> Any:
    """`python -c code` in a fresh process that imports this very ctxkit, whatever the working
    directory holds (`-c` puts the working directory first on sys.path: a checkout named
    `ctxkit/` there would be imported instead)."""
    import subprocess
    import sys

    import ctxkit

    home = os.path.dirname(os.path.dirname(os.path.abspath(ctxkit.__file__)))
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        cwd=home,
    )


@contextmanager
def cache_dir_env(cache_dir: str) -> Iterator[None]:
    """$CTXKIT_CACHE_DIR set to `cache_dir` inside the block (an embedder's SQLite cache there,
    not in the user's cache), restored after."""
    old = os.environ.get("CTXKIT_CACHE_DIR")
    os.environ["CTXKIT_CACHE_DIR"] = cache_dir
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CTXKIT_CACHE_DIR", None)
        else:
            os.environ["CTXKIT_CACHE_DIR"] = old
