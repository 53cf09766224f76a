"""The real agents as instruments: how to install each, point it at the recording provider, run
it once or resume a log in it, and find the log it wrote.

Every agent runs with a dummy key and a base URL on 127.0.0.1 (the recording provider), in a
home of its own (a temporary folder) unless `here` is asked for: then the user's own project is
the working directory and the agent's configuration (its settings, instructions such as
CLAUDE.md, MCP servers, skills) is copied from the user's home into the temporary one, so what
the user's setup costs per call is measured without writing into their home.

The agents install from npm into a cache outside any checkout (`agents_dir()`:
`$CTXKIT_AGENTS_DIR`, else `$XDG_CACHE_HOME/ctxkit/agents`); the versions are pinned here, and
the measured overheads of these versions are `ctxkit/budget/agents.toml`.
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
from typing import Any

from ctxkit.agents.provider import Step, ToolCall
from ctxkit.errors import CtxkitError, UsageError, unknown_name

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


def _copy_config(src: Path, dst: Path, skip: Sequence[str] = ()) -> None:
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


def _user_home() -> Path:
    return Path(os.path.expanduser("~"))


# --- Claude Code ------------------------------------------------------------------------------


def _claude_project_dir(home: Home) -> Path:
    # Claude Code keeps a project's sessions under its working directory with every character
    # but letters and digits written as `-`
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(home.workdir))
    return home.root / ".claude" / "projects" / slug


def _claude_configure(home: Home, url: str, model: str, here: bool) -> None:
    if here:
        _copy_config(_user_home() / ".claude", home.root / ".claude", skip=("projects", "todos",
                     "shell-snapshots", "statsig", "ide", "logs", "debug", "file-history"))
        user_json = _user_home() / ".claude.json"
        if user_json.is_file():
            try:
                data = json.loads(user_json.read_text())
            except ValueError:
                data = {}
            keep = {k: data[k] for k in ("mcpServers", "projects") if k in data}
            (home.root / ".claude.json").write_text(json.dumps(keep))
    home.env.update(
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY=DUMMY_KEY,
        ANTHROPIC_MODEL=model,
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        # Claude Code 2.1 connects MCP servers in the background and sends the first request
        # without those not up yet (a Python server under load): the first request is the one
        # measured, so it waits for them
        MCP_CONNECTION_NONBLOCKING="0",
    )


def _claude_trust(home: Home) -> None:
    """Onboarding done, the folder trusted, the dummy key approved: what a first start asks."""
    path = home.root / ".claude.json"
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        data = {}
    data["hasCompletedOnboarding"] = True
    data.setdefault("projects", {}).setdefault(str(home.workdir), {})["hasTrustDialogAccepted"] = True
    data.setdefault("customApiKeyResponses", {}).setdefault("approved", []).append(DUMMY_KEY[-20:])
    path.write_text(json.dumps(data))


def _claude_place(home: Home, log: Path) -> str:
    session = ""
    with open(log, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("sessionId"), str):
                session = rec["sessionId"]
                break
    if not session:
        raise AgentError(f"{log}: no sessionId in any record: not a Claude Code session log")
    folder = _claude_project_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, folder / f"{session}.jsonl")
    return session


def _claude_logs(home: Home) -> list[Path]:
    folder = _claude_project_dir(home)
    return sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []


def _claude_script(workdir: Path) -> list[Step]:
    path = str(workdir / "notes.txt")
    return [
        Step.calls(ToolCall("Write", {"file_path": path, "content": "alpha\nbeta\n"}),
                   text="I'll write the file first."),
        Step.calls(ToolCall("Read", {"file_path": path})),
        Step.calls(ToolCall("Edit", {"file_path": path, "old_string": "beta", "new_string": "gamma"})),
        Step.calls(ToolCall("Bash", {"command": "cat notes.txt && ls", "description": "Show the file"})),
        Step(text="notes.txt now holds alpha and gamma."),
    ]


CLAUDE_CODE = Agent(
    name="claude-code",
    label="Claude Code",
    package="@anthropic-ai/claude-code",
    version="2.1.328",
    binary="claude",
    api="anthropic",
    log_format="claude-code",
    model="claude-opus-5-5",
    configure=_claude_configure,
    run_args=lambda prompt: ["-p", prompt, "--allowedTools", "Bash,Read,Write,Edit"],
    resume_args=lambda session, prompt: [
        "-p", prompt, "--resume", session, "--allowedTools", "Bash,Read,Write,Edit",
    ],
    place_log=_claude_place,
    logs=_claude_logs,
    script=_claude_script,
    interactive_args=lambda prompt: [prompt],
    trust=_claude_trust,
    source="ANTHROPIC_BASE_URL and a dummy ANTHROPIC_API_KEY; sessions in "
    "~/.claude/projects/<cwd, non-alphanumerics as ->/<sessionId>.jsonl (measured)",
    stream_args=lambda prompt: [
        "-p", prompt, "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash,Read,Write,Edit",
    ],
    stream_format="claude-code-stream",
)


# --- Codex -------------------------------------------------------------------------------------


def _codex_configure(home: Home, url: str, model: str, here: bool) -> None:
    codex_home = home.root / ".codex"
    user_config = ""
    if here:
        _copy_config(_user_home() / ".codex", codex_home,
                     skip=("sessions", "archived_sessions", "log", "logs_2.sqlite", "history.jsonl",
                           "auth.json", "config.toml"))
        src = _user_home() / ".codex" / "config.toml"
        if src.is_file():
            user_config = _without_provider(src.read_text())
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{model}"\nmodel_provider = "{CODEX_PROVIDER}"\n'
        + user_config
        + f"\n[model_providers.{CODEX_PROVIDER}]\n"
        'name = "ctxkit recording provider"\n'
        f'base_url = "{url}/v1"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
    )
    home.env.update(CODEX_HOME=str(codex_home), OPENAI_API_KEY=DUMMY_KEY)


def _without_provider(toml: str) -> str:
    """A user's Codex config without what would send requests elsewhere: its top-level `model`
    and `model_provider`, and its `[model_providers.*]` tables (the MCP servers, instructions and
    the rest stay)."""
    out: list[str] = []
    skipping = False
    top = True
    for line in toml.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            top = False
            skipping = stripped.startswith("[model_providers")
        if skipping:
            continue
        if top and re.match(r"(model|model_provider|profile)\s*=", stripped):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


CODEX_PROVIDER = "ctxkit_recorder"
# Off for every run (as -c overrides, so a user's own config.toml under --here needs no merging):
# without them Codex 0.169 looks up ab.chatgpt.com (metrics), chatgpt.com and api.github.com (the
# curated plugins) on start, measured with strace.
_CODEX_OFFLINE = (
    "-c", "analytics.enabled=false",
    "-c", "features.plugins=false",
    "-c", "check_for_update_on_startup=false",
)


def _codex_trust(home: Home) -> None:
    with open(home.root / ".codex" / "config.toml", "a", encoding="utf-8") as f:
        f.write(f'\n[projects."{home.workdir}"]\ntrust_level = "trusted"\n')


def _codex_place(home: Home, log: Path) -> str:
    """Copy a rollout where Codex finds it. Codex resumes a thread only under the provider it
    was started with, so the copy's `session_meta` names the recording provider (the one field
    changed; every other line is the log's own)."""
    session = ""
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    for i, line in enumerate(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        payload = rec.get("payload") if isinstance(rec, dict) else None
        if rec.get("type") == "session_meta" and isinstance(payload, dict):
            session = str(payload.get("id") or "")
            if "model_provider" in payload:
                payload["model_provider"] = CODEX_PROVIDER
                lines[i] = json.dumps(rec, ensure_ascii=False) + "\n"
            break
    if not session:
        raise AgentError(f"{log}: no session_meta record with an id: not a Codex rollout")
    folder = home.root / ".codex" / "sessions" / "2026" / "01" / "01"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rollout-2026-01-01T00-00-00-{session}.jsonl").write_text("".join(lines), encoding="utf-8")
    return session


def _codex_logs(home: Home) -> list[Path]:
    root = home.root / ".codex" / "sessions"
    return sorted(root.rglob("rollout-*.jsonl"), key=lambda p: p.stat().st_mtime) if root.is_dir() else []


def _codex_script(workdir: Path) -> list[Step]:
    # Codex offers apply_patch only to the models of its own catalog (gpt-5.5 and newer in
    # 0.169); gpt-5.4, the model run here, gets exec_command alone, so the file is written by it
    return [
        Step.calls(ToolCall("exec_command", {"cmd": "ls -la", "workdir": str(workdir)}),
                   text="Looking around first."),
        Step.calls(ToolCall("exec_command", {"cmd": "printf 'alpha\\nbeta\\n' > notes.txt",
                                             "workdir": str(workdir)})),
        Step.calls(ToolCall("exec_command", {"cmd": "cat notes.txt", "workdir": str(workdir)})),
        Step(text="notes.txt holds alpha and beta."),
    ]


CODEX = Agent(
    name="codex",
    label="Codex",
    package="@openai/codex",
    version="0.169.0",
    binary="codex",
    api="responses",
    log_format="codex",
    model="gpt-5.4",
    configure=_codex_configure,
    run_args=lambda prompt: [
        "exec", *_CODEX_OFFLINE, "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
        prompt,
    ],
    resume_args=lambda session, prompt: [
        "exec", *_CODEX_OFFLINE, "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
        "resume", session, prompt,
    ],
    place_log=_codex_place,
    logs=_codex_logs,
    script=_codex_script,
    interactive_args=lambda prompt: [*_CODEX_OFFLINE, prompt],
    trust=_codex_trust,
    source="$CODEX_HOME/config.toml with a model_providers entry (wire_api responses); "
    "rollouts in $CODEX_HOME/sessions/YYYY/MM/DD/ (measured)",
    stream_args=lambda prompt: [
        "exec", *_CODEX_OFFLINE, "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--json",
        prompt,
    ],
    stream_format="codex-exec",
)


# --- Gemini CLI --------------------------------------------------------------------------------


def _gemini_configure(home: Home, url: str, model: str, here: bool) -> None:
    gemini_home = home.root / ".gemini"
    settings: dict[str, Any] = {}
    if here:
        _copy_config(_user_home() / ".gemini", gemini_home, skip=("tmp", "history", "oauth_creds.json"))
        try:
            settings = json.loads((gemini_home / "settings.json").read_text())
        except (OSError, ValueError):
            settings = {}
    gemini_home.mkdir(parents=True, exist_ok=True)
    settings.setdefault("security", {}).setdefault("auth", {})["selectedType"] = "gemini-api-key"
    settings.setdefault("general", {})["disableAutoUpdate"] = True
    settings.setdefault("privacy", {})["usageStatisticsEnabled"] = False
    (gemini_home / "settings.json").write_text(json.dumps(settings, indent=2))
    home.env.update(
        GEMINI_API_KEY=DUMMY_KEY,
        GOOGLE_GEMINI_BASE_URL=url,
        GEMINI_CLI_TRUST_WORKSPACE="true",
        GEMINI_MODEL=model,
    )


def _gemini_project(home: Home) -> Path:
    # Gemini CLI names a project's folder under ~/.gemini/tmp by its working directory's name
    # (projects.json maps the path to it)
    return home.root / ".gemini" / "tmp" / home.workdir.name


def _gemini_place(home: Home, log: Path) -> str:
    text = log.read_text(encoding="utf-8")
    try:
        first = json.loads(text.splitlines()[0]) if log.suffix == ".jsonl" else json.loads(text)
    except (ValueError, IndexError):
        raise AgentError(f"{log}: not a Gemini CLI session (no JSON header)") from None
    session = str(first.get("sessionId") or "") if isinstance(first, dict) else ""
    if not session:
        raise AgentError(f"{log}: no sessionId: not a Gemini CLI session")
    folder = _gemini_project(home) / "chats"
    folder.mkdir(parents=True, exist_ok=True)
    projects = home.root / ".gemini" / "projects.json"
    projects.write_text(json.dumps({"projects": {str(home.workdir): home.workdir.name}}))
    shutil.copyfile(log, folder / f"session-2026-01-01T00-00-{session[:8]}{log.suffix}")
    return session


def _gemini_logs(home: Home) -> list[Path]:
    folder = _gemini_project(home) / "chats"
    if not folder.is_dir():
        return []
    return sorted(
        (p for p in folder.iterdir() if p.name.startswith("session-")), key=lambda p: p.stat().st_mtime
    )


def _gemini_script(workdir: Path) -> list[Step]:
    path = str(workdir / "notes.txt")
    return [
        Step.calls(ToolCall("write_file", {"file_path": path, "content": "alpha\nbeta\n"}),
                   text="Writing the file."),
        Step.calls(ToolCall("read_file", {"file_path": path})),
        Step.calls(ToolCall("run_shell_command", {"command": "cat notes.txt", "description": "show"})),
        Step(text="notes.txt holds alpha and beta."),
    ]


GEMINI_CLI = Agent(
    name="gemini-cli",
    label="Gemini CLI",
    package="@google/gemini-cli",
    version="0.61.0",
    binary="gemini",
    api="gemini",
    log_format="gemini-cli",
    model="gemini-3.1-pro-preview",
    configure=_gemini_configure,
    run_args=lambda prompt: ["-p", prompt, "--yolo"],
    resume_args=lambda session, prompt: ["--resume", session, "-p", prompt, "--yolo"],
    place_log=_gemini_place,
    logs=_gemini_logs,
    script=_gemini_script,
    interactive_args=lambda prompt: ["-i", prompt],
    trust=lambda home: None,  # GEMINI_CLI_TRUST_WORKSPACE
    source="GOOGLE_GEMINI_BASE_URL, gemini-api-key auth in ~/.gemini/settings.json; chats in "
    "~/.gemini/tmp/<project>/chats/session-*.jsonl (measured)",
)


# --- OpenCode ----------------------------------------------------------------------------------

# Off for every run: the models.dev catalog fetch, the update check, language servers downloaded
# on first use, session sharing (measured with strace: models.opencode.ai without the first).
_OPENCODE_OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}
_OPENCODE_PLUGIN = "@opencode-ai/plugin"


def _opencode_configure(home: Home, url: str, model: str, here: bool) -> None:
    config_dir = home.root / ".config" / "opencode"
    if here:
        _copy_config(_user_home() / ".config" / "opencode", config_dir)
    config_dir.mkdir(parents=True, exist_ok=True)
    # OpenCode installs its plugin package from npm into a config folder that has none, in the
    # background, on every start: the package and lock files say it is there (the folder holds
    # no plugin or custom tool that would import it)
    if not (config_dir / "node_modules").is_dir():
        deps = {"dependencies": {_OPENCODE_PLUGIN: OPENCODE.version}}
        (config_dir / "node_modules").mkdir()
        (config_dir / "package.json").write_text(json.dumps(deps))
        (config_dir / "package-lock.json").write_text(json.dumps({"packages": {"": deps}}))
    provider, _, model_id = model.rpartition("/")
    # the inline config outranks the user's own files (kept under --here), so only the provider
    # and model are replaced
    config = {
        "provider": {provider or "anthropic": {"options": {"baseURL": f"{url}/v1", "apiKey": DUMMY_KEY}}},
        "model": f"{provider or 'anthropic'}/{model_id}",
        "autoupdate": False,
        "share": "disabled",
    }
    home.env.update(_OPENCODE_OFFLINE, OPENCODE_CONFIG_CONTENT=json.dumps(config))
    # Bun takes the working directory from $PWD: OpenCode would file the session under the
    # caller's folder
    home.env["PWD"] = str(home.workdir)


def _opencode_words(prompt: str) -> list[str]:
    # `opencode run` joins its words with spaces and quotes a word that holds one: word by
    # word, after `--`, the prompt arrives as given
    return ["--", *prompt.split(" ")]


def _opencode(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(require(OPENCODE)), *args], cwd=home.workdir, env=home.env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60,
    )


def _opencode_place(home: Home, log: Path) -> str:
    """Import an `opencode export` file into the home's database; its session id. OpenCode
    continues a session with the model of its last user message, so the copy imported names
    the recording provider's model in its user messages (the one field changed)."""
    try:
        export = json.loads(log.read_text(encoding="utf-8"))
        session = str(export["info"]["id"])
    except (OSError, ValueError, KeyError, TypeError):
        raise AgentError(f"{log}: not an OpenCode export (no info.id)") from None
    provider, _, model_id = json.loads(home.env["OPENCODE_CONFIG_CONTENT"])["model"].partition("/")
    for message in export.get("messages") or []:
        info = message.get("info") if isinstance(message, dict) else None
        if isinstance(info, dict) and info.get("role") == "user":
            info["model"] = {"providerID": provider, "modelID": model_id}
    copy = home.root / "opencode-import.json"
    copy.write_text(json.dumps(export), encoding="utf-8")
    done = _opencode(home, "import", str(copy))
    if done.returncode != 0:
        raise AgentError(f"opencode import {log} failed: {(done.stderr or done.stdout).strip()[-200:]}")
    return session


def _opencode_logs(home: Home) -> list[Path]:
    """OpenCode keeps its sessions in SQLite: each one exported (`opencode export`), oldest first."""
    if not (home.root / ".local" / "share" / "opencode").is_dir():
        return []
    listed = _opencode(home, "session", "list", "--format", "json")
    try:
        sessions = sorted(json.loads(listed.stdout or "[]"), key=lambda s: s.get("created", 0))
    except ValueError:
        return []
    folder = home.root / "opencode-export"
    folder.mkdir(exist_ok=True)
    logs = []
    for s in sessions:
        exported = _opencode(home, "export", str(s["id"]))
        if exported.returncode == 0 and exported.stdout.strip():
            path = folder / f"{s['id']}.json"
            path.write_text(exported.stdout, encoding="utf-8")
            logs.append(path)
    return logs


def _opencode_script(workdir: Path) -> list[Step]:
    path = str(workdir / "notes.txt")
    return [
        Step.calls(ToolCall("write", {"filePath": path, "content": "alpha\nbeta\n"}), text="Writing the file."),
        Step.calls(ToolCall("read", {"filePath": path})),
        Step.calls(ToolCall("edit", {"filePath": path, "oldString": "beta", "newString": "gamma"})),
        Step.calls(ToolCall("bash", {"command": "cat notes.txt", "description": "Show the file"})),
        Step(text="notes.txt now holds alpha and gamma."),
    ]


OPENCODE = Agent(
    name="opencode",
    label="OpenCode",
    package="opencode-ai",
    version="1.18.33",
    binary="opencode",
    api="anthropic",
    log_format="opencode",
    model="anthropic/claude-sonnet-4-5",
    configure=_opencode_configure,
    run_args=lambda prompt: ["run", "--auto", *_opencode_words(prompt)],
    resume_args=lambda session, prompt: ["run", "--auto", "--session", session, *_opencode_words(prompt)],
    place_log=_opencode_place,
    logs=_opencode_logs,
    script=_opencode_script,
    interactive_args=lambda prompt: ["--prompt", prompt],
    trust=lambda home: None,
    source="OPENCODE_CONFIG_CONTENT with the anthropic provider's options.baseURL; sessions in "
    "SQLite (~/.local/share/opencode/opencode.db), read by `opencode export` (measured)",
)


# --- Copilot CLI -------------------------------------------------------------------------------


def _copilot_configure(home: Home, url: str, model: str, here: bool) -> None:
    copilot_home = home.root / ".copilot"
    if here:
        _copy_config(_user_home() / ".copilot", copilot_home,
                     skip=("session-state", "logs", "session-store.db", "session-store.db-wal",
                           "session-store.db-shm", "pkg"))
    copilot_home.mkdir(parents=True, exist_ok=True)
    home.env.update(
        # offline mode: no GitHub sign-in, telemetry, web tools, GitHub MCP server or update;
        # the model is a provider of one's own (BYOK), here the recording provider
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=url,
        COPILOT_PROVIDER_TYPE="anthropic",
        COPILOT_PROVIDER_API_KEY=DUMMY_KEY,
        COPILOT_MODEL=model,
        COPILOT_AUTO_UPDATE="false",
    )


def _copilot_trust(home: Home) -> None:
    path = home.root / ".copilot" / "config.json"
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        data = {}
    data.setdefault("trusted_folders", []).append(str(home.workdir))
    path.write_text(json.dumps(data))


def _copilot_place(home: Home, log: Path) -> str:
    session = ""
    with open(log, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("type") == "session.start":
                session = str((rec.get("data") or {}).get("sessionId") or "")
                break
    if not session:
        raise AgentError(f"{log}: no session.start event with a sessionId: not a Copilot CLI log")
    folder = home.root / ".copilot" / "session-state" / session
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, folder / "events.jsonl")
    return session


def _copilot_logs(home: Home) -> list[Path]:
    root = home.root / ".copilot" / "session-state"
    found = root.glob("*/events.jsonl") if root.is_dir() else []
    return sorted(found, key=lambda p: p.stat().st_mtime)


def _copilot_script(workdir: Path) -> list[Step]:
    path = str(workdir / "notes.txt")
    return [
        Step.calls(ToolCall("create", {"path": path, "file_text": "alpha\nbeta\n"}), text="Writing the file."),
        Step.calls(ToolCall("view", {"path": path})),
        Step.calls(ToolCall("edit", {"path": path, "old_str": "beta", "new_str": "gamma"})),
        Step.calls(ToolCall("bash", {"command": "cat notes.txt", "description": "Show the file"})),
        Step(text="notes.txt now holds alpha and gamma."),
    ]


COPILOT_CLI = Agent(
    name="copilot-cli",
    label="Copilot CLI",
    package="@github/copilot",
    version="1.0.102",
    binary="copilot",
    api="anthropic",
    log_format="copilot-cli",
    model="claude-sonnet-4.5",
    configure=_copilot_configure,
    run_args=lambda prompt: ["-p", prompt, "--allow-all-tools"],
    resume_args=lambda session, prompt: [f"--resume={session}", "-p", prompt, "--allow-all-tools"],
    place_log=_copilot_place,
    logs=_copilot_logs,
    script=_copilot_script,
    interactive_args=lambda prompt: ["-i", prompt],
    trust=_copilot_trust,
    source="COPILOT_OFFLINE and a BYOK provider (COPILOT_PROVIDER_BASE_URL, _TYPE anthropic, _API_KEY; "
    "`copilot help environment`); sessions in ~/.copilot/session-state/<id>/events.jsonl (measured)",
)


# --- Qwen Code ---------------------------------------------------------------------------------


def _qwen_configure(home: Home, url: str, model: str, here: bool) -> None:
    qwen_home = home.root / ".qwen"
    settings: dict[str, Any] = {}
    if here:
        _copy_config(_user_home() / ".qwen", qwen_home,
                     skip=("projects", "tmp", "usage", "usage_record.jsonl", "oauth_creds.json",
                           "installation_id", "extension-store"))
        try:
            settings = json.loads((qwen_home / "settings.json").read_text())
        except (OSError, ValueError):
            settings = {}
    qwen_home.mkdir(parents=True, exist_ok=True)
    settings.setdefault("security", {}).setdefault("auth", {})["selectedType"] = "openai"
    # the memory agents run after a turn as requests of their own, with tools (they would take
    # scripted steps); usage statistics go to Alibaba's RUM endpoint
    settings.setdefault("memory", {}).update(enableManagedAutoMemory=False, enableManagedAutoDream=False)
    settings.setdefault("privacy", {})["usageStatisticsEnabled"] = False
    settings.setdefault("general", {})["enableAutoUpdate"] = False
    (qwen_home / "settings.json").write_text(json.dumps(settings, indent=2))
    home.env.update(OPENAI_BASE_URL=f"{url}/v1", OPENAI_API_KEY=DUMMY_KEY, OPENAI_MODEL=model)


def _qwen_project_dir(home: Home) -> Path:
    # as Claude Code: the working directory with every character but letters and digits as `-`
    return home.root / ".qwen" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(home.workdir))


def _qwen_place(home: Home, log: Path) -> str:
    try:
        first = json.loads(log.read_text(encoding="utf-8").splitlines()[0])
        session = str(first["sessionId"])
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        raise AgentError(f"{log}: no sessionId in its first record: not a Qwen Code chat") from None
    folder = _qwen_project_dir(home) / "chats"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, folder / f"{session}.jsonl")
    return session


def _qwen_logs(home: Home) -> list[Path]:
    folder = _qwen_project_dir(home) / "chats"
    return sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []


def _qwen_script(workdir: Path) -> list[Step]:
    path = str(workdir / "notes.txt")
    return [
        Step.calls(ToolCall("write_file", {"file_path": path, "content": "alpha\nbeta\n"}), text="Writing the file."),
        Step.calls(ToolCall("read_file", {"file_path": path})),
        Step.calls(ToolCall("edit", {"file_path": path, "old_string": "beta", "new_string": "gamma"})),
        Step.calls(ToolCall("run_shell_command", {"command": "cat notes.txt"})),
        Step(text="notes.txt now holds alpha and gamma."),
    ]


QWEN_CODE = Agent(
    name="qwen-code",
    label="Qwen Code",
    package="@qwen-code/qwen-code",
    version="0.24.4",
    binary="qwen",
    api="chat",
    log_format="qwen-code",
    model="qwen3.7-max",
    configure=_qwen_configure,
    run_args=lambda prompt: ["-p", prompt, "--yolo"],
    resume_args=lambda session, prompt: ["--resume", session, "-p", prompt, "--yolo"],
    place_log=_qwen_place,
    logs=_qwen_logs,
    script=_qwen_script,
    interactive_args=lambda prompt: ["-i", prompt],
    trust=lambda home: None,
    source="OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL with openai auth in ~/.qwen/settings.json; "
    "chats in ~/.qwen/projects/<cwd, non-alphanumerics as ->/chats/<sessionId>.jsonl (measured)",
)


AGENTS: dict[str, Agent] = {
    a.name: a for a in (CLAUDE_CODE, CODEX, GEMINI_CLI, OPENCODE, COPILOT_CLI, QWEN_CODE)
}


def get_agent(name: str) -> Agent:
    """The agent registered under `name`; an unknown name lists the known ones."""
    try:
        return AGENTS[name]
    except KeyError:
        raise unknown_name("agent", name, AGENTS) from None


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
