"""The real agents as instruments: what every agent shares (its record, a temporary home with a
scrubbed environment, its configuration copied under `here`), and how one is installed, run once
or in its terminal UI, and stopped. The pinned agents themselves are `ctxkit.agents.catalog`.

Every agent runs with a dummy key and a base URL on 127.0.0.1 (the recording provider), in a
home of its own (a temporary folder) unless `here` is asked for: then the user's own project is
the working directory and the agent's configuration (its settings, instructions such as
CLAUDE.md, MCP servers, skills) is copied from the user's home into the temporary one, so what
the user's setup costs per call is measured without writing into their home.

The agents install from npm into a cache outside any checkout (`agents_dir()`:
`$CTXKIT_AGENTS_DIR`, else `$XDG_CACHE_HOME/ctxkit/agents`); the versions are pinned in
`ctxkit/agents/catalog.py`, and the measured overheads of these versions are
`ctxkit/budget/agents.toml`.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ctxkit.agents.provider import Step
from ctxkit.errors import CtxkitError, UsageError

DUMMY_KEY = "sk-ctxkit-dummy-not-a-key"
# Environment an agent must not inherit: real keys and endpoints that would send a request
# anywhere but the recording provider.
_SCRUB = re.compile(
    r"^(ANTHROPIC_|OPENAI_|CODEX_|GEMINI_|GOOGLE_|CLAUDE_|AWS_BEARER|AZURE_OPENAI|OPENCODE_|"
    r"COPILOT_|GH_TOKEN$|GITHUB_TOKEN$|QWEN_|DASHSCOPE_|HTTP_PROXY$|HTTPS_PROXY$|http_proxy$|"
    r"https_proxy$|ALL_PROXY$|all_proxy$)"
)


class AgentError(CtxkitError):
    """An agent that is not installed, will not start, or did not do what was asked."""


def agents_dir() -> Path:
    """Where the pinned agents are installed: `$CTXKIT_AGENTS_DIR`, else the user's cache."""
    given = os.environ.get("CTXKIT_AGENTS_DIR")
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "ctxkit" / "agents"


@dataclass
class Home:
    """Where one run of an agent lives: its home, its working directory, its environment."""

    root: Path  # the temporary home
    workdir: Path  # the working directory the agent runs in
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Agent:
    """One agent: its npm package and pinned version, the API it speaks, the format of its log,
    and how to run it."""

    name: str
    label: str
    package: str
    version: str
    binary: str
    api: str  # anthropic, responses, gemini, chat
    log_format: str  # the ctxkit format of the log it writes
    model: str  # the model it is run with (the provider answers any)
    configure: Callable[[Home, str, str, bool], None]
    run_args: Callable[[str], list[str]]
    resume_args: Callable[[str, str], list[str]]
    place_log: Callable[[Home, Path], str]  # puts a log where the agent finds it; its session id
    logs: Callable[[Home], list[Path]]  # the logs it wrote, oldest first
    script: Callable[[Path], list[Step]]  # a short scripted session with real tool use
    interactive_args: Callable[[str], list[str]]  # its terminal UI, started on a prompt
    trust: Callable[[Home], None]  # what its first interactive start would ask, answered
    source: str = ""  # how its config and logs were learned (its own source, a measurement)
    # its headless run printing JSON events on stdout (what CI keeps), and their ctxkit format
    stream_args: Callable[[str], list[str]] | None = None
    stream_format: str | None = None

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"

    def executable(self) -> Path | None:
        """The installed binary, or None."""
        path = agents_dir() / "node_modules" / ".bin" / self.binary
        return path if path.exists() else None


def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _SCRUB.match(k)}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        XDG_CACHE_HOME=str(home / ".cache"),
        NO_COLOR="1",
        CI="1",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    return env


def copy_config(src: Path, dst: Path, skip: Sequence[str] = ()) -> None:
    """Copy an agent's configuration folder, leaving out its logs and caches (`skip`)."""
    if not src.is_dir():
        return
    dst.mkdir(parents=True, exist_ok=True)
    for entry in src.iterdir():
        if entry.name in skip:
            continue
        target = dst / entry.name
        try:
            if entry.is_dir():
                shutil.copytree(entry, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(entry, target)
        except OSError:
            continue  # a socket or an unreadable file: not configuration


def user_home() -> Path:
    """The user's own home, whose agent configuration `here` copies."""
    return Path(os.path.expanduser("~"))

# --- installing and running --------------------------------------------------------------------


def npm() -> str:
    """The npm executable; an AgentError says what to install when there is none."""
    found = shutil.which("npm")
    if not found or not shutil.which("node"):
        raise AgentError("node and npm are needed to install the agents (Node.js 20 or newer)")
    return found


def install(agents: Sequence[Agent], *, quiet: bool = True) -> Path:
    """Install the pinned versions from npm into `agents_dir()` (already installed ones are
    left as they are); the folder."""
    target = agents_dir()
    target.mkdir(parents=True, exist_ok=True)
    missing = [a for a in agents if not is_installed(a)]
    if missing:
        cmd = [npm(), "install", "--no-audit", "--no-fund", "--prefix", str(target),
               *[a.spec for a in missing]]
        done = subprocess.run(cmd, capture_output=quiet, text=True)
        if done.returncode != 0:
            tail = (done.stderr or "").strip().splitlines()[-1:] if quiet else []
            raise AgentError(
                f"npm install of {', '.join(a.spec for a in missing)} failed"
                + (f": {tail[0]}" if tail else "")
            )
    return target


def installed_version(agent: Agent) -> str | None:
    """The version installed in `agents_dir()`, or None."""
    manifest = agents_dir() / "node_modules" / agent.package / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def is_installed(agent: Agent) -> bool:
    """Whether the pinned version is installed (and its executable there)."""
    return installed_version(agent) == agent.version and agent.executable() is not None


def require(agent: Agent) -> Path:
    """The pinned agent's executable; an AgentError with the command to install it."""
    exe = agent.executable()
    version = installed_version(agent)
    if exe is None or version is None:
        raise AgentError(
            f"{agent.label} is not installed in {agents_dir()}: run `ctxkit agent install "
            f"{agent.name}` (npm {agent.spec})"
        )
    return exe


def new_home(here: bool = False) -> Home:
    """A temporary home, with the working directory inside it (or the current directory when
    `here`)."""
    root = Path(tempfile.mkdtemp(prefix="ctxkit-agent-"))
    workdir = Path.cwd() if here else root / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    return Home(root=root, workdir=workdir, env=_clean_env(root))


@dataclass
class Run:
    """What one run of an agent did: its exit code, output, and the logs it wrote."""

    agent: str
    returncode: int
    stdout: str
    stderr: str
    logs: list[Path]
    session: str = ""

    def ok(self) -> bool:
        return self.returncode == 0


def run(agent: Agent, home: Home, args: Sequence[str], *, timeout_s: float = 40.0) -> Run:
    """Run the agent with `args` in `home` (configured already); its logs after."""
    exe = require(agent)
    try:
        done = subprocess.run(
            [str(exe), *args],
            cwd=home.workdir,
            env=home.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as e:
        raise AgentError(f"{agent.label} did not finish in {timeout_s:.0f} s") from e
    finally:
        stop_leftovers(home)
    return Run(agent.name, done.returncode, done.stdout, done.stderr, agent.logs(home))


def stop_leftovers(home: Home, *, grace_s: float = 3.0) -> list[int]:
    """Stop the processes a run left behind: those whose $HOME is this run's temporary home
    (no other process has it). Gemini CLI's terminal UI outlives its tmux session, Codex's starts
    an app-server daemon, a timed-out run leaves its children. Linux (/proc) only; the pids."""
    import signal
    import time

    proc = Path("/proc")
    if not proc.is_dir():
        return []
    marker = f"HOME={home.root}".encode()
    pids = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue  # gone, or not ours to read
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                alive.append(pid)
            except (ProcessLookupError, PermissionError):
                continue
        deadline = time.monotonic() + grace_s
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [pid for pid in alive if _running(pid)]
        if not alive:
            break
    return pids


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited (its parent, init or us, reaps it)


def run_interactive(
    agent: Agent,
    home: Home,
    args: Sequence[str],
    done: Callable[[], bool],
    *,
    timeout_s: float = 60.0,
    settle_s: float = 1.5,
) -> Run:
    """Run the agent's terminal UI in a detached tmux session until `done()` holds (then
    `settle_s` more, for it to write its log), and stop it."""
    import shlex
    import time

    exe = require(agent)
    tmux = shutil.which("tmux")
    if tmux is None:
        raise AgentError("the interactive mode needs tmux (apt install tmux); --mode print runs without it")
    agent.trust(home)
    name = f"ctxkit-{os.getpid()}-{home.root.name}"
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in home.env.items() if k != "TERM")
    line = (
        f"cd {shlex.quote(str(home.workdir))} && exec env -i {env} TERM=xterm-256color "
        + " ".join(shlex.quote(x) for x in [str(exe), *args])
    )
    subprocess.run([tmux, "new-session", "-d", "-s", name, "-x", "200", "-y", "50", line], check=True)
    screen = ""
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not done():
            time.sleep(0.2)
        finished = done()
        time.sleep(settle_s)
        screen = subprocess.run(
            [tmux, "capture-pane", "-p", "-t", name], capture_output=True, text=True
        ).stdout
    finally:
        subprocess.run([tmux, "kill-session", "-t", name], capture_output=True)
        stop_leftovers(home)
    if not finished:
        raise AgentError(
            f"{agent.label} sent nothing in {timeout_s:.0f} s in its terminal UI; its screen ends: "
            + " | ".join(ln.strip() for ln in screen.strip().splitlines()[-3:] if ln.strip())
        )
    return Run(agent.name, 0, screen, "", agent.logs(home))


def check_local(url: str) -> None:
    """Refuse a provider URL that is not on 127.0.0.1: agents talk to nothing else."""
    if not url.startswith("http://127.0.0.1:"):
        raise UsageError(f"{url}: the recording provider must be on 127.0.0.1")
