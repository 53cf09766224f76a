"""The startup suite: `ctxkit count` of a two-message file, the whole process, against
`python -c "import tiktoken"` (issue 23: within 2x)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ctxkit.bench.processes import run_timed
from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult
from ctxkit.bench.suites.count import O200K
from ctxkit.tokens.loaders import DEFAULT_TOKENIZER

NAME = "startup"
STARTUP_TARGET = 2.0  # a count of a two-message file within 2x `python -c "import tiktoken"`

TWO_MESSAGES = (
    '[{"role": "user", "content": "What does the build script do?"},'
    ' {"role": "assistant", "content": "It compiles the sources and runs the tests."}]\n'
)


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """`ctxkit count` of a two-message file, whole process, against `python -c "import
    tiktoken"`: medians of interleaved runs, bytecode compiled first (as `pip install` does),
    the tokenizer's rank table written by a first run (as any later run finds it)."""
    import ctxkit

    res = SuiteResult("startup")
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(ctxkit.__file__).parent)], check=False
    )
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as tmp:
        chat = Path(tmp) / "two.json"
        chat.write_text(TWO_MESSAGES)
        env = {**os.environ, "CTXKIT_CACHE_DIR": str(Path(tmp) / "cache")}
        commands = {
            "import tiktoken": [sys.executable, "-c", "import tiktoken"],
            DEFAULT_TOKENIZER: [sys.executable, "-m", "ctxkit", "count", str(chat)],
            O200K: [sys.executable, "-m", "ctxkit", "count", str(chat), "--tokenizer", O200K],
        }
        for cmd in commands.values():  # warm: files in the page cache, rank tables written
            run_timed(cmd, env)
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
        n = opts.repeats(11)
        say(f"startup: {n} rounds")
        for _ in range(n):
            for key, cmd in commands.items():
                runs[key].append(run_timed(cmd, env))
    wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    base = "import tiktoken"
    for name in (DEFAULT_TOKENIZER, O200K):
        res.figures.append(
            Figure(
                f"`ctxkit count` of a 2-message file / `import tiktoken` ({name})",
                wall[name] / wall[base],
                "x",
                STARTUP_TARGET,
                note=f"whole process, median of {n}: {wall[name] * 1000:.0f} ms against "
                f"{wall[base] * 1000:.0f} ms; CPU {cpu[name] * 1000:.0f} against "
                f"{cpu[base] * 1000:.0f} ms ({cpu[name] / cpu[base]:.2f}x)",
                detail={"wall_s": wall, "cpu_s": cpu, "runs": n},
            )
        )
    return res
