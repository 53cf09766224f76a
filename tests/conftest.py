"""Shared fixtures and the suite's own rules.

- Isolation: $HOME and every cache the code or its libraries write (the embedding cache,
  Hugging Face's, tiktoken's, XDG dirs) point into a session tmp dir; hypothesis' and
  matplotlib's derived-data caches live beside pytest's numbered tmp dirs (kept between runs);
  pytest's own cache is off (`-p no:cacheprovider`). The run fails if the checkout (git status,
  bytecode aside) or $HOME gained files (see `pytest_sessionfinish`).
- Speed: a test that is not marked `slow` must not import torch (it fails if it does), so
  `pytest -m "not slow"` never pays for the embedding model.
- Golden files: `pytest --regen-goldens` rewrites them; the `golden` fixture is the one switch.
- Hypothesis: no example database; `-m "not slow"` runs the "fast" profile (fewer examples),
  any other run the "ci" one (each test's full count); `--hypothesis-profile` overrides.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from chatserver import ChatServer, Reply
from hypothesis import HealthCheck, settings

REPO_ROOT = Path(__file__).resolve().parents[1]
REALDATA = REPO_ROOT.parent / "shared" / "realdata"
HEAVY = ("torch", "sentence_transformers")  # what only `slow` tests may import

# No example database (it would be `.hypothesis/` in the checkout). "ci" keeps each test's own
# example count; "fast" (chosen for `-m "not slow"`) runs fewer, see `proptest.examples`.
settings.register_profile("ci", database=None, deadline=None)
settings.register_profile(
    "fast",
    database=None,
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    # `make test-fast` (-m "not slow") runs the fast profile unless --hypothesis-profile says else
    if not config.getoption("--hypothesis-profile", None):
        fast = "not slow" in (config.getoption("markexpr", "") or "")
        settings.load_profile("fast" if fast else "ci")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-goldens",
        action="store_true",
        default=False,
        help="rewrite the golden files under tests/data from the current output (review the diff)",
    )


# --------------------------------------------------------------------------- isolation

# Cache and config locations of ctxkit and of the libraries it uses; all go to a session tmp dir.
_CACHE_ENV = (
    "CTXKIT_CACHE_DIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "MPLCONFIGDIR",
    "HF_HOME",
    "TORCH_HOME",
    "TIKTOKEN_CACHE_DIR",
)


def _checkout_listing() -> set[str]:
    """Paths git sees as new, changed or ignored in the checkout (bytecode caches aside)."""
    try:
        out = subprocess.run(
            # not -uall: a checkout's own .venv would list every installed file
            ["git", "status", "--porcelain", "--ignored"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return set()  # not a git checkout (an sdist): nothing to compare
    return {line for line in out.splitlines() if "__pycache__" not in line}


def _home_listing(home: Path) -> set[str]:
    """Entries of $HOME and of its cache/config folders, two levels down."""
    seen: set[str] = set()
    for top in (home, home / ".cache", home / ".config", home / ".local" / "share"):
        try:
            for entry in top.iterdir():
                seen.add(str(entry))
                if entry.is_dir() and top != home:
                    seen.update(str(p) for p in entry.iterdir())
        except OSError:
            continue
    return seen


_BEFORE = pytest.StashKey[tuple[set[str], set[str], Path]]()
_ENV = pytest.StashKey[pytest.MonkeyPatch]()


@pytest.hookimpl(trylast=True)  # after pytest's tmpdir plugin has set up its factory
def pytest_sessionstart(session: pytest.Session) -> None:
    """Note what the checkout and $HOME hold, then point every cache and $HOME itself at a
    session tmp dir, before collection (subprocesses inherit it)."""
    from hypothesis.configuration import set_hypothesis_home_dir

    config = session.config
    config.stash[_BEFORE] = (_checkout_listing(), _home_listing(Path.home()), Path.home())
    factory = config._tmp_path_factory  # type: ignore[attr-defined]
    root = factory.mktemp("env")
    mp = config.stash[_ENV] = pytest.MonkeyPatch()
    for name in (*_CACHE_ENV, "HOME"):
        path = root / name.lower()
        path.mkdir()
        mp.setenv(name, str(path))
    # Caches of derived data only (hypothesis' charmap and constants, matplotlib's font list) are
    # kept between runs beside pytest's numbered tmp dirs: rebuilding them costs seconds a run.
    keep = factory.getbasetemp().parent if config.option.basetemp is None else root
    set_hypothesis_home_dir(keep / "ctxkit-hypothesis")  # not ./.hypothesis
    mp.setenv("MPLCONFIGDIR", str(keep / "ctxkit-matplotlib"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if it wrote into the checkout or $HOME, or if a fast run imported torch."""
    env = session.config.stash.get(_ENV, None)
    if env is not None:
        env.undo()
    before = session.config.stash.get(_BEFORE, None)
    problems: list[str] = []
    if before is not None:
        checkout, home_entries, home = before
        gained = sorted(_checkout_listing() - checkout)
        if session.config.getoption("--regen-goldens"):
            gained = [p for p in gained if not p[3:].startswith("tests/data/")]
        problems += [f"the checkout gained: {p}" for p in gained]
        problems += [f"$HOME gained: {p}" for p in sorted(_home_listing(home) - home_entries)]
    items = getattr(session, "items", [])
    if items and not any(item.get_closest_marker("slow") for item in items):
        problems += [f"a run without slow tests imported {m}" for m in HEAVY if m in sys.modules]
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_sep("=", "isolation broken", red=True)
        for line in problems:
            if reporter is not None:
                reporter.write_line(line, red=True)
            else:
                print(f"isolation broken: {line}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _no_torch_unless_slow(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test not marked `slow` that imports torch or sentence-transformers fails."""
    already = [m for m in HEAVY if m in sys.modules]
    yield
    if request.node.get_closest_marker("slow") or already:
        return  # once a slow test has loaded the model, later imports cannot be told apart
    loaded = [m for m in HEAVY if m in sys.modules]
    if loaded:
        pytest.fail(f"imported {', '.join(loaded)} (loads the embedding model): mark it slow")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout's root directory."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def realdata() -> Path:
    """`../shared/realdata` (real transcripts); the test is skipped when the folder is absent."""
    if not REALDATA.is_dir():
        pytest.skip(f"real transcripts not found at {REALDATA}")
    return REALDATA


@pytest.fixture(scope="session")
def regen_goldens(pytestconfig: pytest.Config) -> bool:
    """True under `pytest --regen-goldens`."""
    return bool(pytestconfig.getoption("--regen-goldens"))


@pytest.fixture
def golden(regen_goldens: bool) -> Callable[[Path, str | bytes], None]:
    """`golden(path, actual)`: assert `actual` equals the file exactly, or rewrite it under
    `--regen-goldens`. Text compares as text (so a failure shows a readable diff)."""

    def check(path: Path, actual: str | bytes) -> None:
        if regen_goldens:
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(actual, bytes):
                path.write_bytes(actual)
            else:
                path.write_text(actual, encoding="utf-8", newline="")
        assert path.exists(), f"golden file {path} is missing: run pytest --regen-goldens"
        if isinstance(actual, bytes):
            assert actual == path.read_bytes(), f"differs from {path}"
        else:
            assert actual == path.read_bytes().decode("utf-8"), f"differs from {path}"

    return check


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[int], Reply]], ChatServer]]:
    servers: list[ChatServer] = []

    def start(script: Callable[[int], Reply]) -> ChatServer:
        server = ChatServer(script).__enter__()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.__exit__(None, None, None)
