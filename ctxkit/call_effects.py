"""What one call of a log did to files, read the same way by every side: the files it
created, edited or deleted, and the ones it read, listed or ran; the shell command it ran and
the arguments that name what it acts on.

Like `ctxkit.log_events` (what one event says), this is neutral reading of the unit model: the
summaries (`ctxkit.facts`) say "a.py (edited)" from it and the claims checker
(`ctxkit.fidelity.evidence`) holds every summary, ctxkit's or a peer's, to it; what each side
makes of it stays with that side. It is deliberately literal:

- a file is **written** only by a call that writes it: an editor's write commands (Write, Edit,
  MultiEdit, str_replace_editor create/str_replace/insert, write_file, replace, apply_patch),
  a patch header (`*** Update File:`, `+++ b/` of an applied diff), `sed -i`/`perl -i`, a
  redirect (`>`, `>>`, `tee`), `cp`/`mv`/`install` as their target, `touch`, an output option
  (`--out`, `--output`, `-o` of a compiler, `curl`, `sort`); **created** only by the ones that
  make a file (a write tool, create, a redirect, a copy, `touch`, an output option, `*** Add
  File:`); **deleted** by `rm` or `*** Delete File:`;
- a string is a path only where it is written as one (`looks_like_path`): not a user agent's
  `Mozilla/5.0`, an option, a task number; a path argument is taken whole, spaces and all.

    >>> e = call_effects("bash", '{"command": "cp a.py a.py.bak && sed -i s/x/y/ a.py"}')
    >>> e.writes, e.uses
    ((('a.py.bak', 'created'), ('a.py', 'edited')), ('a.py',))
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ctxkit.log_events import arg_strings, decoded_args, path_values

PATH_KEYS = ("file_path", "filePath", "path", "filename", "notebook_path", "file", "target_file",
             "absolute_path", "target", "dir_path")
COMMAND_KEYS = ("command", "cmd", "script", "commands")
# argument keys whose text a call writes or says, not what it acts on
TEXT_KEYS = frozenset(
    "content new_string old_string new_str old_str text description prompt message body file_text "
    "thought reason summary old new edits".split()
)
EDITOR_COMMANDS = {"create": "created", "write": "created", "str_replace": "edited", "insert": "edited",
                   "undo_edit": "edited", "append": "edited", "view": "", "read": ""}
_CREATE_NAMES = ("write", "create", "save")
_EDIT_NAMES = ("edit", "replace", "patch", "insert", "notebookedit", "apply_diff", "search_replace")
_READ_NAMES = ("read", "view", "cat", "open")  # tools that show a file's text
_SHELL_NAMES = ("bash", "shell", "exec", "terminal", "run", "command", "powershell", "execute", "sh")



# --- files ---------------------------------------------------------------------------------------

_URL = re.compile(r"^[a-z][a-z0-9+.-]*://|^www\.", re.IGNORECASE)
_EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9_-]{0,9}$")
_VERSIONISH = re.compile(r"^[\d.]+$|^[A-Za-z][\w-]*/\d+(?:\.\d+)*$")  # 60.2, Mozilla/5.0, Googlebot/2.1


def _expanded(word: str) -> bool:
    """A shell word holding a variable the shell expands (`"$f"`, `${f%.gif}-temp.gif`): the
    file it names is not written in the command."""
    return "$" in word


def looks_like_path(text: str) -> bool:
    """Whether a string is written as a file path: no spaces, not an option, a URL, a number or
    a `product/version` token; a directory part or a file extension.

    >>> [looks_like_path(s) for s in ("src/a.py", "Mozilla/5.0", "-prompt.md", "60.2", "README")]
    [True, False, False, False, False]
    """
    s = text.strip()
    if len(s) < 2 or any(c.isspace() for c in s) or s.startswith(("-", "<", "$", "{", "(")):
        return False
    if _URL.match(s) or _VERSIONISH.match(s) or s.endswith(("...", "…")):
        return False
    if any(c in s for c in "*?|;&<>\"'`(){}[],=") :
        return False
    body = s.rstrip("/")
    return "/" in body or bool(_EXT.search(body))


_DRIVE = re.compile(r"^([A-Za-z]):[\\/]")


def clean_path(text: str) -> str:
    """A path as written, without quotes, a leading `./` or a trailing slash; a Windows path
    with forward slashes and its drive as Git Bash writes it (`D:\\a\\b` is `/d/a/b`)."""
    s = text.strip().strip("`'\"").rstrip(",;:").strip("`'\"")
    if s.endswith(".") and s.strip(".") and not s.endswith(".."):
        s = s[:-1]  # a sentence's full stop, not `.` or `..`
    if "\\" in s and "/" not in s.replace("\\", ""):
        s = s.replace("\\", "/")
    m = _DRIVE.match(s)
    if m:
        s = f"/{m.group(1).lower()}/{s[3:]}"
    while s.startswith("./") and len(s) > 2:
        s = s[2:]
    return s.rstrip("/") or s


def same_path(a: str, b: str) -> bool:
    """Two spellings of one file: equal, or one the other's tail at a `/` (an absolute path and
    the relative one, a bare name and its full path).

    >>> same_path("src/x.py", "/repo/src/x.py"), same_path("x.py", "ax.py")
    (True, False)
    """
    a, b = clean_path(a), clean_path(b)
    if not a or not b:
        return False
    if a == b:
        return True
    if "*" in a or "*" in b:  # a glob a command was given (`rm -rf /tmp/x*`)
        pattern, name = (a, b) if "*" in a else (b, a)
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, "*/" + pattern.lstrip("/"))
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return long_.endswith("/" + short)


NOT_NAMING = TEXT_KEYS | {"code", "patch", "patchText", "input", "script", "command", "cmd"}


def _command_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        if len(value) >= 3 and value[-2] in ("-c", "-lc", "-Command", "/c"):
            return value[-1]
        return " ".join(shlex.quote(v) for v in value)
    return ""



@dataclass(frozen=True)
class Effects:
    """What one call did, in the order its arguments say it."""

    command: str = ""  # the shell command it ran, if any
    strings: tuple[str, ...] = ()  # every string argument
    named: tuple[str, ...] = ()  # the arguments that name what it acts on (no file contents)
    writes: tuple[tuple[str, str], ...] = ()  # (path, created|edited|deleted|moved)
    uses: tuple[str, ...] = ()  # paths read, listed or run
    runs: tuple[str, ...] = ()  # of those, the scripts a runner ran (`python x.py`, `bash s.sh`)
    reads: tuple[str, ...] = ()  # of those, the files a reading tool or program showed (Read, cat, sed -n)


def call_effects(name: str, arguments: str) -> Effects:
    """What one tool call did to files, from its name and arguments."""
    args = decoded_args(arguments)
    writes: dict[tuple[str, str], None] = {}  # ordered sets
    uses: dict[str, None] = {}
    command = ""
    lname = name.lower()
    if isinstance(args, dict):
        strings = tuple(arg_strings(args))
        sub = args.get("command")
        editor = isinstance(sub, str) and sub in EDITOR_COMMANDS and any(
            isinstance(args.get(k), str) for k in PATH_KEYS
        )
        if editor:
            how = EDITOR_COMMANDS[str(sub)]
        elif "todo" in lname or "plan" in lname:
            how = ""
        elif any(k in lname for k in _CREATE_NAMES):
            how = "created"
        elif any(k in lname for k in _EDIT_NAMES):
            how = "edited"
        else:
            how = ""
        for p in (clean_path(v) for v in path_values(args, PATH_KEYS)):
            if how:
                writes[(p, how)] = None
            else:
                uses[p] = None
        if not editor:
            command = next((c for c in (_command_of(args.get(k)) for k in COMMAND_KEYS) if c.strip()), "")
        texts = arg_strings(args, TEXT_KEYS)
    else:
        strings = (str(args),)
        texts = [str(args)]
        if any(k in lname for k in _SHELL_NAMES) and "patch" not in lname:
            command = str(args)
    for text in texts:
        writes.update(dict.fromkeys(patch_writes(text, applied="patch" in lname or "apply" in lname)))
        if "(" in text:  # OpenHands' agent skills, called from IPython
            for m in _SKILL.finditer(text):
                path = clean_path(m.group(2))
                if m.group(1) == "open_file":
                    uses[path] = None
                else:
                    writes[(path, "created" if m.group(1) == "create_file" else "edited")] = None
    shell = shell_effects(command) if command else Effects()
    writes.update(dict.fromkeys(shell.writes))
    uses.update(dict.fromkeys(shell.uses))
    # what names a path: its path and option arguments and its command line, not a file's
    # contents (a heredoc's body, a patch, code an IPython call runs, an edit's new text)
    lines = [_without_heredocs(command)[0]] if command else []
    if isinstance(args, dict):
        lines += [t for k, v in args.items() if k not in NOT_NAMING for t in arg_strings(v, TEXT_KEYS)
                  if t is not command and "\n" not in t.strip()]
    shows = any(k in lname for k in _READ_NAMES) or (isinstance(args, dict) and args.get("command") in ("view", "read"))
    shown = [p for p in uses if p not in shell.uses] if shows else []
    return Effects(command, strings, tuple(lines), tuple(writes), tuple(uses), shell.runs, (*shown, *shell.reads))


def text_effects(command: str, open_file: str | None) -> Effects:
    """What a command written as text did (SWE-agent's `create`/`edit N:M`/`open`, else a shell
    command); `open_file`: the file the agent's last output said was open, which `edit N:M`
    edits."""
    writes: dict[tuple[str, str], None] = {}
    uses: dict[str, None] = {}
    shell = Effects()
    swe_create = _SWE_CREATE.findall(command)
    if swe_create or _SWE_EDIT.search(command) or _SWE_OPEN.search(command):
        writes.update(dict.fromkeys((clean_path(p), "created") for p in swe_create))
        if _SWE_EDIT.search(command) and open_file:
            writes[(open_file, "edited")] = None
        uses.update(dict.fromkeys(clean_path(p) for p in _SWE_OPEN.findall(command)))
    else:
        shell = shell_effects(command)
        writes.update(dict.fromkeys(shell.writes))
        uses.update(dict.fromkeys(shell.uses))
    shown = [p for p in uses if p not in shell.uses]  # `open x`, SWE-agent's viewer
    return Effects(command, (command,), (_without_heredocs(command)[0],), tuple(writes), tuple(uses), shell.runs,
                   (*shown, *shell.reads))


def open_file_of(output: str) -> str | None:
    """The file a SWE-agent output says is open (`(Open file: path)` at its end), else None."""
    m = _OPEN_FILE.search(output[-400:])
    return clean_path(m.group(1)) if m else None


_SKILL = re.compile(
    r"\b(create_file|edit_file_by_replace|append_file|insert_content_at_line|edit_file|open_file)\(\s*"
    r"(?:file_name=|path=)?[rf]?['\"]([^'\"\n]+)['\"]"
)
_PATCH_HEADER = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
_DIFF_TARGET = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.MULTILINE)
_APPLIES_DIFF = re.compile(r"\bgit\s+apply\b|\bpatch\s+-p|\bpatch\s+<|\bapply_patch\b")


def patch_writes(text: str, applied: bool = False) -> list[tuple[str, str]]:
    """Files a patch in `text` writes: apply_patch headers always; a unified diff's `+++` lines
    only when the text applies it (`git apply`, `patch`, an apply tool)."""
    out: dict[tuple[str, str], None] = {}  # an ordered set
    if "*** " in text and ("*** Begin Patch" in text or "File: " in text):
        for verb, path, moved in _PATCH_HEADER.findall(text):
            p = clean_path(path or moved)
            if p:
                out[(p, "created" if verb == "Add" or moved else "deleted" if verb == "Delete" else "edited")] = None
    if "+++ " in text and (applied or _APPLIES_DIFF.search(text)):
        for path in _DIFF_TARGET.findall(text):
            if path != "/dev/null":
                out[(clean_path(path), "edited")] = None
    return list(out)


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;"})
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
_RUNNERS = frozenset({"python", "python3", "node", "bash", "sh", "zsh", "ruby", "perl", "php", "deno",
                      "bun", "tsx", "ts-node", "go", "pytest", "npx", "cargo", "make", "uv"})


def _without_heredocs(command: str) -> tuple[str, list[str]]:
    """The command with heredoc bodies taken out (`cat > f <<EOF` stays), and the bodies."""
    lines = command.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    bodies: list[str] = []
    k = 0
    while k < len(lines):
        line = lines[k]
        out.append(line)
        k += 1
        for m in _HEREDOC.finditer(line):
            tag = m.group(2)
            body: list[str] = []
            while k < len(lines) and lines[k].strip() != tag:
                body.append(lines[k])
                k += 1
            k += 1  # the terminator
            bodies.append("\n".join(body))
    return "\n".join(out), bodies


def _uncommented(line: str) -> str:
    """`line` without its shell comment: from a `#` that begins a word outside quotes (`# see
    the 500/403/etc` names no file; `grep "#include" a.c` and `a#1` keep theirs).

    >>> _uncommented('npx test a.spec.ts  # see the 500/403/etc'), _uncommented('grep "#x" a.c')
    ('npx test a.spec.ts  ', 'grep "#x" a.c')
    """
    if "#" not in line:
        return line
    quote = ""
    escaped = False
    for k, c in enumerate(line):
        if escaped:
            escaped = False
        elif c == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (k == 0 or line[k - 1].isspace() or line[k - 1] in ";&|("):
            return line[:k]
    return line


def _tokens(line: str) -> list[str]:
    line = _uncommented(line)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: the words as they are
        return line.split()


def _segments(tokens: list[str]) -> Iterator[tuple[list[str], list[str]]]:
    """(argv, redirect targets) of each simple command."""
    argv: list[str] = []
    targets: list[str] = []
    k = 0
    while k < len(tokens):
        tok = tokens[k]
        if tok in _SEPARATORS:
            yield argv, targets
            argv, targets = [], []
        elif tok in _REDIRECTS or (tok.endswith((">", ">>")) and tok.rstrip(">").isdigit()):
            if k + 1 < len(tokens) and not tokens[k + 1].startswith("&"):
                targets.append(tokens[k + 1])
                k += 1
        elif tok in ("<", "<<", "<<<", "<<-", ">&", "<&"):
            k += 1  # the input or the heredoc tag
        elif tok.isdigit() and k + 1 < len(tokens) and tokens[k + 1] in (">", ">>", ">&"):
            pass  # the fd of a redirect
        else:
            argv.append(tok)
        k += 1
    yield argv, targets


def _sed_files(argv: list[str]) -> list[str]:
    args = argv[1:]
    explicit = any(a in ("-e", "--expression", "-f") or a.startswith("--expression=") for a in args)
    files: list[str] = []
    script_taken = explicit
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-e", "--expression", "-f"):
            skip = True
            continue
        if a.startswith("-"):
            continue
        if not script_taken:
            script_taken = True
            continue
        files.append(a)
    return files


_SEARCHES = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack"})
# programs that show a file's text
_READERS = frozenset({"cat", "head", "tail", "less", "more", "sed", "awk", "nl", "bat", "view", "jq", "yq", "diff",
                      "wc", "xxd", "od", "strings", "sort", "uniq", "cut", "column"})
# a search's options that take the next word as their value
_VALUED = frozenset({"-A", "-B", "-C", "-m", "-g", "-t", "-T", "-d", "-D", "--glob", "--type", "--max-count",
                     "--context", "--after-context", "--before-context", "--include", "--exclude"})


def _searched_files(argv: list[str]) -> list[str]:
    """The files and folders a search looks in: its operands but the pattern (the first, unless
    `-e` or `-f` gave it), option values aside (`grep -n "x.atomic" src` looks in src)."""
    files: list[str] = []
    pattern_given = skip = False
    for a in argv[1:]:
        if skip:
            skip = False
        elif a in ("-e", "-f", "--regexp", "--file"):
            pattern_given = skip = True
        elif a in _VALUED:
            skip = True
        elif a.startswith("-"):
            pattern_given = pattern_given or a.startswith(("--regexp=", "--file="))
        elif not pattern_given:
            pattern_given = True
        else:
            files.append(a)
    return files


# an option whose value is the file a program writes: any program's long one, `-o` of the
# programs where it names the output (a compiler, `curl`, `sort`, `pandoc`), `wget -O`
_OUTPUT_LONG = frozenset({"--out", "--output", "--outfile", "--out-file", "--output-file"})
_OUTPUT_SHORT = frozenset({"cc", "gcc", "g++", "clang", "clang++", "rustc", "go", "nvcc", "curl", "sort", "pandoc"})


def _outputs(prog: str, argv: list[str]) -> list[str]:
    """The files `argv` names as its output (`sips a.svg --out a.png`, `gcc -o app a.c`,
    `curl -o x.json URL`).

    >>> _outputs("sips", ["sips", "-s", "format", "png", "a.svg", "--out", "a.png"]), _outputs("grep", ["grep", "-o", "a/b", "c.txt"])
    (['a.png'], [])
    """
    found: list[str] = []
    for k, a in enumerate(argv[1:], 1):
        name, eq, value = a.partition("=")
        if name in _OUTPUT_LONG:
            value = value if eq else (argv[k + 1] if k + 1 < len(argv) else "")
        elif (
            (a == "-o" and prog in _OUTPUT_SHORT) or (a == "-O" and prog == "wget")
            or (prog == "curl" and re.fullmatch(r"-[A-Za-z]+o", a))  # `curl -sSLo x.json`
        ):
            value = argv[k + 1] if k + 1 < len(argv) else ""
        else:
            continue
        if value and looks_like_path(value) and not _expanded(value):
            found.append(value)
    return found


def shell_effects(command: str) -> Effects:
    """What a shell command did to files: what it wrote, and what it used, ran and read.

    >>> e = shell_effects("cat > t.py <<'EOF'\\nprint(1) > x.txt\\nEOF\\npython t.py && mv a.txt b/ && head -5 c.md")
    >>> e.writes, e.uses, e.runs, e.reads
    ((('t.py', 'created'), ('a.txt', 'moved'), ('b/a.txt', 'created')), ('t.py', 'c.md'), ('t.py',), ('c.md',))
    """
    writes: list[tuple[str, str]] = []
    uses: list[str] = []
    runs: list[str] = []
    reads: list[str] = []
    text, bodies = _without_heredocs(command)
    for body in bodies:
        writes.extend(patch_writes(body, applied=bool(_APPLIES_DIFF.search(text))))
    text = re.sub(r"\\\n", " ", text)
    for line in text.split("\n"):
        for argv, targets in _segments(_tokens(line)):
            for t in targets:
                if len(t) > 1 and not t.startswith(("/dev/", "&", "-")) and not _expanded(t):
                    writes.append((clean_path(t), "created"))
            while argv and (re.match(r"^\w+=", argv[0]) or argv[0] in ("sudo", "env", "time", "nohup", "command")):
                argv = argv[1:]
            if not argv:
                continue
            prog = argv[0].rsplit("/", 1)[-1]
            made = _outputs(prog, argv)
            if made:
                writes.extend((clean_path(f), "created") for f in made)
                argv = [a for a in argv if a not in made]
            rest = [a for a in argv[1:] if not a.startswith("-")]
            if prog in ("sed", "perl", "gsed") and any(
                a == "-i" or a.startswith(("-i", "--in-place")) or (a.startswith("-") and not a.startswith("--") and "i" in a[1:] and prog == "perl")
                for a in argv[1:]
            ):
                for f in (_sed_files(argv) if prog != "perl" else rest[1:]):
                    if (looks_like_path(f) or "/" not in f) and not _expanded(f):
                        writes.append((clean_path(f), "edited"))
                continue
            # a word the shell expands (`"$f"`, `${f%.gif}-temp.gif`) names no one file
            rest = [a for a in rest if not _expanded(a)] if prog in ("cp", "mv", "install", "rsync", "ln") else rest
            if prog in ("cp", "mv", "install", "rsync", "ln") and len(rest) >= 2:
                target = clean_path(rest[-1])
                into_dir = rest[-1].endswith("/") or len(rest) > 2 or rest[-1] in (".", "..")
                if not into_dir:
                    writes.append((target, "created"))
                for src in rest[:-1]:
                    if prog == "mv":
                        writes.append((clean_path(src), "moved"))  # gone from there
                    else:
                        uses.append(clean_path(src))
                    if into_dir:
                        name = clean_path(src).rsplit("/", 1)[-1]
                        writes.append((name if target in (".", "") else f"{target}/{name}", "created"))
                continue
            if prog == "git" and len(argv) > 1:
                sub = argv[1]
                files = [clean_path(a) for a in argv[2:] if not a.startswith("-") and looks_like_path(a)]
                if sub == "mv" and len(files) >= 2:
                    writes.append((files[-1], "created"))
                    writes.extend((f, "moved") for f in files[:-1])
                elif sub == "rm":
                    writes.extend((f, "deleted") for f in files)
                elif sub in ("checkout", "restore") and ("--" in argv or sub == "restore"):
                    writes.extend((f, "edited") for f in files)
                else:
                    uses.extend(files)
                continue
            if prog == "tee":
                writes.extend((clean_path(f), "created") for f in rest)
                continue
            if prog == "touch":
                writes.extend((clean_path(f), "created") for f in rest)
                continue
            if prog in ("rm", "unlink"):
                writes.extend((clean_path(f), "deleted") for f in rest)
                continue
            if prog == "truncate":
                writes.extend((clean_path(f), "edited") for f in rest if looks_like_path(f))
                continue
            if prog == "dd":
                writes.extend((clean_path(a[3:]), "created") for a in argv[1:] if a.startswith("of="))
                continue
            if prog in _RUNNERS or prog.startswith("python"):
                scripts = [clean_path(a) for a in rest if looks_like_path(a)]
                uses.extend(scripts)
                runs.extend(scripts[:1])
                continue
            files = [clean_path(a) for a in (_searched_files(argv) if prog in _SEARCHES else argv[1:])
                     if looks_like_path(a)]
            uses.extend(files)
            if prog in _READERS:
                reads.extend(files)
    once = dict.fromkeys  # in order, once each
    return Effects(command, (), (), tuple(once(writes)), tuple(once(uses)), tuple(once(runs)), tuple(once(reads)))


# --- text actions --------------------------------------------------------------------------------

_SWE_CREATE = re.compile(r"^create\s+(\S+)", re.MULTILINE)
_SWE_EDIT = re.compile(r"^edit\s+\d+:\d+", re.MULTILINE)
_SWE_OPEN = re.compile(r"^(?:open|search_file|find_file)\s+\"?([^\s\"]+)", re.MULTILINE)
_OPEN_FILE = re.compile(r"\(Open file: ([^)\n]+)\)")


