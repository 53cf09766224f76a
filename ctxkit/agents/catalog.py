"""The pinned agents, one section each: how it is pointed at the recording provider (its
configuration in a temporary home), where its logs are and how a log is put back for a resume,
the short scripted session it is run through, and its entry in the registry `AGENTS`.

How an agent is installed and run is `ctxkit.agents.drivers`; the measured overheads of these
versions are `ctxkit/budget/agents.toml`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ctxkit.agents.drivers import (
    DUMMY_KEY,
    Agent,
    AgentError,
    Home,
    copy_config,
    require,
    user_home,
)
from ctxkit.agents.provider import Step, ToolCall
from ctxkit.errors import registered

# --- what several agents share ------------------------------------------------------------------

NOTES = "alpha\nbeta\n"  # what each scripted session writes to notes.txt


def _notes_session(
    write: ToolCall, read: ToolCall, edit: ToolCall | None, show: ToolCall, *, first: str = "Writing the file."
) -> list[Step]:
    """The scripted session: write notes.txt, read it, edit beta to gamma (when the agent's
    model has an edit tool), show it, and say what it holds."""
    holds = "now holds alpha and gamma" if edit is not None else "holds alpha and beta"
    edits = [Step.calls(edit)] if edit is not None else []
    return [Step.calls(write, text=first), Step.calls(read), *edits, Step.calls(show), Step(text=f"notes.txt {holds}.")]


def _json_or_empty(path: Path) -> dict[str, Any]:
    """A JSON settings file, or {} when it is missing or unreadable (the agent writes it anew)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _first_session(log: Path, session_of: Callable[[dict[str, Any]], str | None]) -> str:
    """The session id `session_of` gives the first JSONL record it does not skip (None skips);
    "" when it skips them all."""
    with open(log, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                session = session_of(rec)
                if session is not None:
                    return session
    return ""


def _oldest_first(paths: Iterable[Path]) -> list[Path]:
    """Logs by modification time, oldest first."""
    return sorted(paths, key=lambda p: p.stat().st_mtime)


# --- Claude Code ------------------------------------------------------------------------------


def _claude_project_dir(home: Home) -> Path:
    # Claude Code keeps a project's sessions under its working directory with every character
    # but letters and digits written as `-`
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(home.workdir))
    return home.root / ".claude" / "projects" / slug


def _claude_configure(home: Home, url: str, model: str, here: bool) -> None:
    if here:
        copy_config(user_home() / ".claude", home.root / ".claude", skip=("projects", "todos",
                     "shell-snapshots", "statsig", "ide", "logs", "debug", "file-history"))
        user_json = user_home() / ".claude.json"
        if user_json.is_file():
            data = _json_or_empty(user_json)
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
    data = _json_or_empty(path)
    data["hasCompletedOnboarding"] = True
    data.setdefault("projects", {}).setdefault(str(home.workdir), {})["hasTrustDialogAccepted"] = True
    data.setdefault("customApiKeyResponses", {}).setdefault("approved", []).append(DUMMY_KEY[-20:])
    path.write_text(json.dumps(data))


def _claude_place(home: Home, log: Path) -> str:
    session = _first_session(log, lambda rec: rec["sessionId"] if isinstance(rec.get("sessionId"), str) else None)
    if not session:
        raise AgentError(f"{log}: no sessionId in any record: not a Claude Code session log")
    folder = _claude_project_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, folder / f"{session}.jsonl")
    return session


def _claude_logs(home: Home) -> list[Path]:
    folder = _claude_project_dir(home)
    return _oldest_first(folder.glob("*.jsonl")) if folder.is_dir() else []


def _claude_script(workdir: Path) -> list[Step]:
    path = str(workdir / "notes.txt")
    return _notes_session(
        ToolCall("Write", {"file_path": path, "content": NOTES}),
        ToolCall("Read", {"file_path": path}),
        ToolCall("Edit", {"file_path": path, "old_string": "beta", "new_string": "gamma"}),
        ToolCall("Bash", {"command": "cat notes.txt && ls", "description": "Show the file"}),
        first="I'll write the file first.",
    )


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
        copy_config(user_home() / ".codex", codex_home,
                     skip=("sessions", "archived_sessions", "log", "logs_2.sqlite", "history.jsonl",
                           "auth.json", "config.toml"))
        src = user_home() / ".codex" / "config.toml"
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
    return _oldest_first(root.rglob("rollout-*.jsonl")) if root.is_dir() else []


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
        copy_config(user_home() / ".gemini", gemini_home, skip=("tmp", "history", "oauth_creds.json"))
        settings = _json_or_empty(gemini_home / "settings.json")
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
    return _oldest_first(p for p in folder.iterdir() if p.name.startswith("session-"))


def _gemini_script(workdir: Path) -> list[Step]:
    path = str(workdir / "notes.txt")
    return _notes_session(
        ToolCall("write_file", {"file_path": path, "content": NOTES}),
        ToolCall("read_file", {"file_path": path}),
        None,
        ToolCall("run_shell_command", {"command": "cat notes.txt", "description": "show"}),
    )


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
        copy_config(user_home() / ".config" / "opencode", config_dir)
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
    return _notes_session(
        ToolCall("write", {"filePath": path, "content": NOTES}),
        ToolCall("read", {"filePath": path}),
        ToolCall("edit", {"filePath": path, "oldString": "beta", "newString": "gamma"}),
        ToolCall("bash", {"command": "cat notes.txt", "description": "Show the file"}),
    )


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
        copy_config(user_home() / ".copilot", copilot_home,
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
    data = _json_or_empty(path)
    data.setdefault("trusted_folders", []).append(str(home.workdir))
    path.write_text(json.dumps(data))


def _copilot_place(home: Home, log: Path) -> str:
    session = _first_session(
        log, lambda rec: str((rec.get("data") or {}).get("sessionId") or "") if rec.get("type") == "session.start" else None
    )
    if not session:
        raise AgentError(f"{log}: no session.start event with a sessionId: not a Copilot CLI log")
    folder = home.root / ".copilot" / "session-state" / session
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, folder / "events.jsonl")
    return session


def _copilot_logs(home: Home) -> list[Path]:
    root = home.root / ".copilot" / "session-state"
    return _oldest_first(root.glob("*/events.jsonl")) if root.is_dir() else []


def _copilot_script(workdir: Path) -> list[Step]:
    path = str(workdir / "notes.txt")
    return _notes_session(
        ToolCall("create", {"path": path, "file_text": NOTES}),
        ToolCall("view", {"path": path}),
        ToolCall("edit", {"path": path, "old_str": "beta", "new_str": "gamma"}),
        ToolCall("bash", {"command": "cat notes.txt", "description": "Show the file"}),
    )


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
        copy_config(user_home() / ".qwen", qwen_home,
                     skip=("projects", "tmp", "usage", "usage_record.jsonl", "oauth_creds.json",
                           "installation_id", "extension-store"))
        settings = _json_or_empty(qwen_home / "settings.json")
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
    return _oldest_first(folder.glob("*.jsonl")) if folder.is_dir() else []


def _qwen_script(workdir: Path) -> list[Step]:
    path = str(workdir / "notes.txt")
    return _notes_session(
        ToolCall("write_file", {"file_path": path, "content": NOTES}),
        ToolCall("read_file", {"file_path": path}),
        ToolCall("edit", {"file_path": path, "old_string": "beta", "new_string": "gamma"}),
        ToolCall("run_shell_command", {"command": "cat notes.txt"}),
    )


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
    return registered(AGENTS, "agent", name)
