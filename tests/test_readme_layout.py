"""The README's Layout section matches the tree: every package and top-level module of ctxkit/
is named there, and every .py file or package it names exists.

The section's fenced block lists `ctxkit/`'s entries two spaces in, one per line, each with what
it holds; a line indented further continues the entry above. Names inside a package's entry
(`store.py`, `suites/`) are its own files; a name with a slash (`budget/policy.py`) may also be
relative to ctxkit/.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ctxkit"

# A module or data file (`store.py`, `bench/suites/__init__.py`, `models.toml`) or a folder
# (`suites/`) named in an entry's text; prose such as "DPO/SFT" or "x.parquet" is neither.
_FILE = re.compile(r"(?<![\w./<>:-])([A-Za-z_][\w/]*\.(?:py|toml))(?![\w.])")
_FOLDER = re.compile(r"(?<![\w./<>:-])([A-Za-z_]\w*(?:/\w+)*/)(?![\w.])")
_BACKTICKED = re.compile(r"`([A-Za-z_][\w/]*\.py)`")
_LINK = re.compile(r"\]\(([^)#:]+)\)")


def layout_section(readme: str) -> str:
    """The text of README's "## Layout" section, up to the next "## " heading."""
    start = readme.index("\n## Layout\n")
    end = readme.find("\n## ", start + 1)
    return readme[start : end if end != -1 else len(readme)]


def tree_block(section: str) -> list[str]:
    """The lines of the section's fenced block that list ctxkit/'s entries."""
    fenced = section.split("```")[1].splitlines()
    start = next(i for i, line in enumerate(fenced) if line.rstrip() == "ctxkit/") + 1
    lines: list[str] = []
    for line in fenced[start:]:
        if line and not line.startswith(" "):
            break  # back at the left margin: tests/, scripts/, ... are outside the package
        lines.append(line)
    return lines


def entries(lines: list[str]) -> dict[str, str]:
    """Each entry's name (`cli/`, `model.py`) and the text that describes it."""
    found: dict[str, str] = {}
    name = None
    for line in lines:
        if not line.strip():
            continue
        if line.startswith("  ") and not line.startswith("   "):
            name, _, text = line.strip().partition(" ")
            assert name not in found, f"README Layout names {name} twice"
            found[name] = text
        else:
            assert name is not None, f"README Layout: a continuation line before any entry: {line!r}"
            found[name] += " " + line.strip()
    return found


def named_in(text: str) -> list[str]:
    """The files and folders an entry's text names."""
    return _FILE.findall(text) + _FOLDER.findall(text)


def resolves(name: str, package: Path | None) -> bool:
    """Whether `name` (named in `package`'s entry, or a top-level module's) exists."""
    places = [package] if package is not None else []
    if package is None or "/" in name.rstrip("/"):
        places.append(PACKAGE)
    for place in places:
        path = place / name
        if path.is_dir() if name.endswith("/") else path.is_file():
            return True
    return False


def _packages() -> set[str]:
    return {p.parent.name + "/" for p in PACKAGE.glob("*/__init__.py")}


def _modules() -> set[str]:
    return {p.name for p in PACKAGE.glob("*.py")}


def _layout() -> tuple[str, dict[str, str]]:
    section = layout_section((ROOT / "README.md").read_text(encoding="utf-8"))
    return section, entries(tree_block(section))


def test_every_package_and_top_level_module_is_named() -> None:
    _, listed = _layout()
    missing = sorted((_packages() | _modules()) - set(listed))
    assert missing == [], f"README Layout does not name {missing}: add a line for each"


def test_every_subpackage_is_named_in_its_package() -> None:
    _, listed = _layout()
    missing = []
    for init in sorted(PACKAGE.glob("*/*/__init__.py")):
        sub, parent = init.parent.name, init.parent.parent.name
        text = listed.get(parent + "/", "")
        if sub + "/" not in named_in(text) and f"{parent}/{sub}/" not in named_in(text):
            missing.append(f"{parent}/{sub}/")
    assert missing == [], f"README Layout's package entries do not name {missing}"


def test_every_name_in_the_layout_exists() -> None:
    section, listed = _layout()
    gone = []
    for name, text in listed.items():
        if not resolves(name, None):
            gone.append(name)
            continue
        package = PACKAGE / name if name.endswith("/") else None
        gone += [f"{name} {n}" for n in named_in(text) if not resolves(n, package)]
    table = section.split("```")[-1]  # the prose and the table after the block
    gone += [f"`{n}`" for n in _BACKTICKED.findall(table) if not resolves(n, None)]
    gone += [f"({link})" for link in _LINK.findall(section) if not (ROOT / link).exists()]
    assert gone == [], f"README Layout names what the tree does not hold: {gone}"


def test_the_parser_reads_nested_names() -> None:
    """The parser itself: entries, continuation lines, and names that are not files."""
    lines = [
        "  cli/             pages; options.py the flags",
        "                   (DPO/SFT examples, -o x.parquet), suites/ and budget/policy.py",
        "  model.py         records",
    ]
    listed = entries(lines)
    assert list(listed) == ["cli/", "model.py"]
    assert named_in(listed["cli/"]) == ["options.py", "budget/policy.py", "suites/"]
    assert resolves("budget/policy.py", PACKAGE / "cli/")
    assert not resolves("store.py", PACKAGE / "cli/")
    assert not resolves("store.py", None)
