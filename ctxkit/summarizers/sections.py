"""A summary's sections as text: their titles, a `Section` of items in the order worth
keeping, a written summary parsed back into sections, a previous summary merged into new ones,
and the sections fitted within a token budget (`fit_sections`). The offline summarizer
(`extractive`) fills them from the log; the LLM summarizer asks for the same titles.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxkit.facts import ACTION_RANK
from ctxkit.log_events import one_line

if TYPE_CHECKING:
    from ctxkit.tokens import Tokenizer

READ_PER_LINE = 6  # files only read are listed this many to an item

# The sections of Claude Code's compaction prompt, filled from the transcript's structure.
SECTIONS = (
    "Primary request and intent",
    "Files and code",
    "Errors and fixes",
    "Task list (each item as last updated)",
    "Where the work stood",
    "Next step",
    "Findings and decisions",
    "Earlier actions and what came back",
)
USER_MESSAGES_TITLE = "User messages"
OLD_USER_MESSAGES_TITLE = "All user messages"  # what summaries written before 2026-11 call it
EARLIER_TITLE = "Earlier summary"
# what a summary lost of its span and the check added back (`summarize_old`): files, errors, todos
CHECK_TITLE = "Also in the archived messages"
TASKS_TITLE = "Task list (each item as last updated)"
WORK_TITLE = "Where the work stood"
# sections earlier versions wrote that say nothing a model acts on (tool tallies, command
# strings, headlines): a summary that merges one leaves them out
_RETIRED = frozenset({"Key technical concepts", "Problem solving", "Commands run", "Key points", "Decisions"})
FINDINGS_TITLE = "Findings and decisions"
ACTIONS_TITLE = "Earlier actions and what came back"
# Sections whose items a newer summary replaces rather than adds to.
_LATEST_ONLY = frozenset({WORK_TITLE, "Current work", "Next step", TASKS_TITLE, "Pending tasks"})
# An agent's sections of where its work stood then (Claude Code's "8. Current Work", "9. Optional
# Next Step"): a newer summary that says where the work stands replaces them, whatever it titles
# its own ("Currently working on fixing the rustface imports", long since fixed, read as current).
_THEN_CURRENT = frozenset({"current work", "optional next step", "next step", "next steps"})
# the notes an agent wrote before its summary (Claude Code's `Analysis:`, then `Summary:`): the
# conversation retold in order, its "currently working on" long past; the summary says it again
_ANALYSIS = re.compile(r"^Analysis:[ \t]*\n.*?^Summary:[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass
class Section:
    """A titled list of items and the order in which they are worth keeping."""

    title: str
    items: list[str]
    first: int = 0  # this many items (in preference order) are taken before the round-robin
    preference: list[int] | None = None  # indices, most worth keeping first (None: in order)
    keep_all: bool = False

    def order(self) -> list[int]:
        return self.preference if self.preference is not None else list(range(len(self.items)))


def shown(path: str) -> str:
    """A path as a summary writes it: in backticks when it holds a space (`task-152 - Add.md`),
    so that it reads, and is checked, as one path."""
    if any(c.isspace() for c in path) and not (path.startswith("`") and path.endswith("`")):
        return f"`{path}`"
    return path


def file_items(actions: dict[str, list[str]]) -> tuple[list[str], list[int]]:
    """Changed files one per line with what was done (`path (created, ran)`), then the files only
    read or used, several to a line; preference: changed first (those still there before those
    deleted: a scratch script made, run and removed says less of the work than the file it
    fixed), newest last."""
    changed = [p for p, a in actions.items() if a[0] not in ("read", "used", "ran")]
    ran = [p for p, a in actions.items() if a[0] == "ran"]
    items = [f"{shown(p)} ({', '.join(actions[p])})" for p in changed]
    items += [f"{shown(p)} ({', '.join(actions[p])})" for p in ran]
    # read: a reading tool or program showed it; used: listed, searched or passed to a command
    for how in ("read", "used"):
        seen = [p for p, a in actions.items() if a[0] == how]
        for k in range(0, len(seen), READ_PER_LINE):
            items.append(f"{how}: " + ", ".join(shown(p) for p in seen[k : k + READ_PER_LINE]))
    gone = [k for k, p in enumerate(changed) if "deleted" in actions[p]]
    kept = [k for k in range(len(items)) if k not in gone]
    return items, [*kept[: len(changed) - len(gone)], *gone, *kept[len(changed) - len(gone) :]]


_FILE_ITEM = re.compile(r"^(?P<path>\S.*?) \((?P<actions>[a-z]+(?:, [a-z]+)*)\)$")


def merged_file_items(old: Sequence[str], new: Sequence[str]) -> list[str] | None:
    """Files of an earlier summary and of this one as one list, one line per path with every
    action (`x.py (written, ran)` then `x.py (edited)` is `x.py (written, edited, ran)`); None
    when a line is not a file line (a summary not written by ctxkit)."""
    actions: dict[str, list[str]] = {}
    for item in [*old, *new]:
        if item.startswith(("read: ", "used: ")):
            how, _, listed = item.partition(": ")
            pairs = [(p, how) for p in listed.split(", ") if p]
        else:
            m = _FILE_ITEM.match(item)
            if m is None:
                return None
            pairs = [(m.group("path"), a) for a in m.group("actions").split(", ")]
        for path, action in pairs:
            done = actions.setdefault(path, [])
            if action not in done:
                done.append(action)
    ranked = {p: sorted(a, key=lambda x: ACTION_RANK.get(x, 9)) for p, a in actions.items()}
    return file_items(ranked)[0]


_NUMBERED = re.compile(r"^\d{1,2}\.\s+(?P<title>[A-Z][^:\n]{2,60}):\s*$")  # Claude Code's `6. All user messages:`


def parse_sections(text: str) -> dict[str, list[str]]:
    """A summary's `## Title` sections (and an agent's numbered ones: Claude Code's `6. All
    user messages:`) and their `- item` lines, indented or not (continuation lines join the
    item before); lines outside a section go under the earlier-summary title."""
    out: dict[str, list[str]] = {}
    title = EARLIER_TITLE
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        numbered = _NUMBERED.match(line)
        if line.startswith("## ") or numbered:
            title = numbered.group("title").strip() if numbered else line[3:].split(" (verbatim")[0].strip()
            out.setdefault(title, [])
            continue
        if line.lstrip().startswith("[") and line.rstrip().endswith("]") and title == EARLIER_TITLE:
            continue  # ctxkit's preamble: the new summary writes its own
        items = out.setdefault(title, [])
        if line.lstrip().startswith("- "):
            items.append(line.lstrip()[2:])
        elif items and raw.startswith((" ", "\t")):
            items[-1] += " " + line.strip()
        else:
            items.append(line.strip())
    return out


def _earlier_lines(lines: Sequence[str]) -> list[str]:
    """Lines of a summary not in ctxkit's sections (an agent's own summary, an LLM's): those
    that say something, whole."""
    out = []
    for line in lines:
        text = line.strip().removeprefix("- ")
        if len(text) < 12 or text.endswith(":") or text.lower().startswith(("let me", "analysis")):
            continue
        out.append(one_line(text, 300))
    return out


def merge_previous(sections: list[Section], previous: str | None) -> list[Section]:
    """Fold a previous summary into these sections: its items come first in each section of the
    same title (the newer items win for the latest-only sections); files merge by path; what
    fits no section is kept as earlier-summary lines."""
    if not previous:
        return sections
    old = parse_sections(_ANALYSIS.sub("", previous))
    by_title = {s.title.lower(): s for s in sections}  # an agent's "Primary Request and Intent" too
    extra: list[str] = []
    checked = old.pop(CHECK_TITLE, [])
    for item in checked:  # back to the sections they belong to
        if item.startswith("error: "):
            old.setdefault("Errors and fixes", []).append(item.removeprefix("error: "))
        elif item.startswith("todo: "):
            old.setdefault(TASKS_TITLE, []).append(item.removeprefix("todo: "))
        else:
            old.setdefault("Files and code", []).append(item)
    # ctxkit's own summary quotes the user from the log, which the caller quotes again; an
    # agent's (Claude Code's "All user messages") holds words the log no longer has
    ours = previous.lstrip().startswith(("[", "## "))
    stands = any(s.items for s in sections if s.title == WORK_TITLE)
    for title, items in old.items():
        if (ours and title in (USER_MESSAGES_TITLE, OLD_USER_MESSAGES_TITLE)) or title.capitalize() in _RETIRED:
            continue  # quoted again by the caller from its own record; or a tally, not a fact
        if stands and title.lower() in _THEN_CURRENT:
            continue  # where the work stood then: the newer summary says where it stands
        section = by_title.get(title.lower())
        if section is None:
            extra.extend(_earlier_lines(items))
            continue
        if title in _LATEST_ONLY and section.items:
            continue
        if title == "Files and code":
            files = merged_file_items(items, section.items)
            if files is not None:
                # one line per path: the older files first, as they came, the newer after
                section.items, section.preference = files, None
                continue
        fresh = [i for i in items if i not in section.items]
        shift = len(fresh)
        section.items = [*fresh, *section.items]
        if section.preference is not None:
            # older items are worth less than the newer ones of the same section
            section.preference = [i + shift for i in section.preference] + list(range(shift))
        section.first = section.first  # unchanged: the first picks stay the new items
    if extra:
        sections.insert(0, Section(EARLIER_TITLE, list(dict.fromkeys(extra)), first=3))
    return sections


def fit_sections(
    sections: Sequence[Section],
    target_tokens: int,
    tok: Tokenizer,
    fixed_tail: str = "",
    filler: Iterable[str] = (),
    leading: Sequence[str] = (),
) -> str:
    """Take every item of the keep-all sections, then each section's first picks, then items
    round-robin across sections in preference order until the budget is spent, then filler
    sentences; render each section's chosen items in their own order. The sections titled in
    `leading` take their first pick before the others take any (in that order)."""
    budget = target_tokens - (tok.count(fixed_tail) if fixed_tail else 0)
    used = 0
    chosen: list[set[int]] = [set() for _ in sections]
    counts = [tok.count_many([f"- {it}\n" for it in s.items]) if s.items else [] for s in sections]
    header = [tok.count(f"## {s.title}\n") if s.items else 0 for s in sections]
    opened = [False] * len(sections)

    def take(k: int, j: int, force: bool = False) -> bool:
        nonlocal used
        cost = counts[k][j] + (0 if opened[k] else header[k])
        if not force and used + cost > budget:
            return False
        chosen[k].add(j)
        opened[k] = True
        used += cost
        return True

    # an item says its thing once: a line already in an earlier section is left out of later
    # ones (the assistant's words land in several sections: its plan, its decisions, a todo)
    seen: set[str] = set()
    orders = []
    for s in sections:
        fresh = []
        for j in s.order():
            key = " ".join(s.items[j].lower().split())
            if key in seen and not s.keep_all:
                continue
            seen.add(key)
            fresh.append(j)
        orders.append(fresh)
    starts = [0] * len(sections)
    for k, s in enumerate(sections):
        if s.keep_all:
            for j in orders[k]:
                take(k, j, force=True)
            starts[k] = len(orders[k])
        else:
            starts[k] = min(s.first, len(orders[k]))
    # the first picks go one per section at a time: a tight budget holds the newest failure and
    # the next step beside the first files, not twelve files and nothing else
    rank = {title: r for r, title in enumerate(leading)}
    ahead = sorted((k for k, s in enumerate(sections) if s.title in rank), key=lambda k: rank[sections[k].title])
    for k in ahead:
        if not sections[k].keep_all and starts[k]:
            take(k, orders[k][0])
    for depth in range(max((starts[k] for k, s in enumerate(sections) if not s.keep_all), default=0)):
        for k, s in enumerate(sections):
            if not s.keep_all and depth < starts[k] and not (depth == 0 and k in ahead):
                take(k, orders[k][depth])
    # no item costs less than this: once less is left, nothing more is taken (a long span's
    # sections hold thousands of items, and the round robin went through them all)
    cheapest = min((c for section_counts in counts for c in section_counts), default=0)
    depth = 0
    progress = True
    while progress and budget - used >= cheapest:
        progress = False
        for k in range(len(sections)):
            at = starts[k] + depth
            if at < len(orders[k]):
                progress = True
                take(k, orders[k][at])
        depth += 1
    extra: list[str] = []
    for sentence in filler:
        if used >= budget:  # a sentence costs a token at least
            break
        if " ".join(sentence.lower().split()) in seen or sentence.lstrip().startswith("#"):
            continue  # said already, or a markdown heading with nothing under it here
        n = tok.count(sentence + " ")
        if used + n > budget:
            continue
        extra.append(sentence)
        used += n
        if used >= budget - 8:
            break
    parts = []
    for s, picked in zip(sections, chosen, strict=True):
        if picked:
            parts.append(f"## {s.title}\n" + "\n".join(f"- {s.items[j]}" for j in sorted(picked)))
    if extra:
        parts.append("## Key points\n" + " ".join(extra))
    if fixed_tail:
        parts.append(fixed_tail)
    return "\n".join(parts)


def without_sections(text: str, titles: Iterable[str]) -> str:
    """A rendered summary without the `## Title` sections named (a newer task list or what
    the messages after it show has replaced what they said)."""
    drop = set(titles)
    out: list[str] = []
    skipping = False
    for line in text.splitlines():
        if line.startswith("## "):
            skipping = line[3:].split(" (verbatim")[0].strip() in drop
        if not skipping:
            out.append(line)
    return "\n".join(out)
