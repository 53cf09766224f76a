"""The scenarios (a registry of recipes) and `generate`, which builds one to a token size."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ctxkit.errors import UsageError, unknown_name
from ctxkit.model import Transcript
from ctxkit.simulate.builder import (
    MAX_TOKENS,
    MIN_TOKENS,
    MIN_TURN_TOKENS,
    Builder,
    Scenario,
    _Needle,
)
from ctxkit.simulate.content import MIX, _pytest_log, _python_file
from ctxkit.simulate.vocabulary import LOCALES
from ctxkit.tokens import (
    Tokenizer,
    count_transcript,
    get_tokenizer,
)

SCENARIOS: dict[str, Scenario] = {}


def scenario(
    name: str, description: str, default_tokens: int, limit: int, p1_ratio: float | None = None
) -> Callable[[Callable[[Builder], None]], Callable[[Builder], None]]:
    """Register a recipe in `SCENARIOS`."""

    def register(build: Callable[[Builder], None]) -> Callable[[Builder], None]:
        SCENARIOS[name] = Scenario(name, description, default_tokens, limit, build, p1_ratio)
        return build

    return register


def _opening(
    b: Builder,
    needles: int = 2,
    system_share: float = 0.04,
    where: str = "user",
    tool_docs: bool = False,
) -> None:
    """System prompt, first task with needles, the P1 To Do List."""
    size = int(b.target * system_share)
    b.system_prompt(size if tool_docs else max(60, min(500, size)), tool_docs=tool_docs)
    planted = [b.needle() for _ in range(needles)]
    task = b.task_text()
    if planted and where == "user":
        task += " " + " ".join(n.fact for n in planted)
        u = b.user(task)
        for n in planted:
            n.unit_id = u.id
    else:
        b.user(task)
        if planted:
            b.plant(planted, where)
    b.todo_list(done=0)
    b.open_request = True


def _typical(b: Builder, lo: float, hi: float) -> tuple[int, int]:
    """Turn sizes as fractions of the target, kept within sane absolute bounds."""
    return max(150, int(b.target * lo)), max(300, int(b.target * hi))


def _one_session(
    kinds: Mapping[str, float],
    share: tuple[float, float],
    opening: dict[str, Any] | None = None,
    **session: Any,
) -> Callable[[Builder], None]:
    """The recipe most scenarios are: the opening (`_opening`'s options), then one session of
    the tool outputs `kinds`, its turns `share` (low, high) of the target, with `session`'s
    options (chat, reasoning, steps, parallel)."""

    def build(b: Builder) -> None:
        _opening(b, **(opening or {}))
        b.session(kinds, turn_tokens=_typical(b, *share), **session)

    return build


scenario("agent_session", "A typical coding-agent session: reads, greps, tests, edits.", 20_000, 8_000)(
    _one_session(MIX, (0.05, 0.15), {"needles": 3}, chat=0.1)
)


@scenario("long_chat", "Mostly conversation, 10k tokens against a 5k limit.", 10_000, 5_000)
def _long_chat(b: Builder) -> None:
    _opening(b, needles=2)
    b.session({"python": 1, "grep": 1, "json": 1, "status": 1}, turn_tokens=(150, 500), chat=0.75)


@scenario(
    "giant_tool_output", "One tool result takes about two thirds of the context.", 20_000, 8_000
)
def _giant(b: Builder) -> None:
    _opening(b, needles=2)
    b.session(MIX, turn_tokens=_typical(b, 0.05, 0.1), until=0.15)
    b.user("Pull the full worker logs for the last hour, I want to see everything.")
    b.tool_step({"server_log": 1.0}, int(b.target * 0.66), preface="Fetching the logs.")
    b.assistant(b.reply_text(60))
    b.session(MIX, turn_tokens=_typical(b, 0.03, 0.06))


@scenario(
    "irreducible_turn",
    "The final request pastes a log bigger than the limit: no cut can make it fit.",
    10_000,
    4_000,
)
def _irreducible(b: Builder) -> None:
    _opening(b, needles=1)
    paste = _pytest_log(b, int(b.target * 0.5)).content
    b.final_extra = paste
    b.reserve = b.count(paste) + 160
    b.session(MIX, turn_tokens=_typical(b, 0.08, 0.15))


scenario("all_p1", "Every unit is P1: nothing may be dropped or shortened.", 6_000, 4_000, 1.0)(
    _one_session(MIX, (0.08, 0.2))
)


@scenario(
    "fragmented", "Hundreds of tiny units: short replies, one-line tool results.", 6_000, 3_000
)
def _fragmented(b: Builder) -> None:
    _opening(b, needles=2, system_share=0.02)
    shorts = ("ok", "go on", "yes", "👍", "next?", "sure", "do it", "hmm, and then?", "right")
    while b.room() > 30:
        k = b.rng.randrange(4)
        if k == 0:
            b.user(b.pick(shorts))
            b.assistant(b.sentences(b.rng.randint(6, 20)))
        elif k == 1:
            b.tool_step({"status": 3.0, "edit": 1.0}, 60, preface="")
        else:
            b.user(b.pick(shorts))
            b.tool_step({"status": 2.0, "list_dir": 0.3}, 50)
            b.assistant(b.pick(("Done.", "OK.", "Fixed.", "Clean.", "Next one.")))


scenario("parallel_tools", "Assistant turns that fan out into 3-8 parallel tool calls.", 12_000, 6_000)(
    _one_session(
        {"python": 2, "grep": 3, "go": 1, "list_dir": 1, "json": 1, "status": 1},
        (0.1, 0.2),
        steps=(1, 2),
        parallel=(3, 8),
    )
)
scenario("code_heavy", "File reads of Python, TypeScript and Go dominate.", 16_000, 8_000)(
    _one_session({"python": 4, "typescript": 2, "go": 2, "grep": 1, "edit": 1}, (0.06, 0.15))
)
scenario("log_heavy", "Test runs, build failures and server logs with repeated lines.", 16_000, 8_000)(
    _one_session({"pytest": 3, "npm": 2, "server_log": 3, "status": 1}, (0.06, 0.15))
)
scenario("json_heavy", "Large nested JSON API responses with long arrays.", 16_000, 8_000)(
    _one_session({"json": 5, "grep": 1, "python": 1}, (0.06, 0.15), {"where": "tool"})
)


@scenario(
    "multilingual_emoji",
    "Japanese, Russian, Arabic, German, Chinese... mixed with emoji and ZWJ sequences.",
    8_000,
    4_000,
)
def _multilingual(b: Builder) -> None:
    _opening(b, needles=2)
    while b.room() > MIN_TURN_TOKENS:
        if not b.open_request and b.rng.random() < 0.6:
            b.chat_pair(min(b.rng.randint(100, 400), b.room()), b.pick(LOCALES), emoji=0.5)
        else:
            budget = min(b.rng.randint(200, 600), b.room())
            fake = b.faker(b.pick(LOCALES))
            b.task_turn(
                {"json_i18n": 3, "grep": 1, "status": 1},
                budget=budget,
                steps=(1, 2),
                request=b.sentences(40, fake, emoji=0.7),
            )


scenario("nearly_full", "Filled to 99% of the limit: one more message overflows.", 7_920, 8_000)(
    _one_session(MIX, (0.05, 0.12))
)


@scenario(
    "growing_session",
    "A long session that needs repeated compaction; needles are planted and needed throughout.",
    60_000,
    16_000,
)
def _growing(b: Builder) -> None:
    _opening(b, needles=2)
    early = list(b.needles)
    later: list[_Needle] = []

    def plant_more() -> None:
        fresh = [b.needle(), b.needle()]
        later.extend(fresh)
        b.plant(fresh, b.pick(("user", "tool")))
        b.assistant("Noted.")

    def ask_early() -> None:
        b.ask(early[:1])
        b.assistant(b.reply_text(40))

    def ask_later() -> None:
        if later:
            b.ask(later[:1])
            b.assistant(b.reply_text(40))

    b.session(
        MIX,
        turn_tokens=_typical(b, 0.02, 0.05),
        chat=0.15,
        hooks={0.25: plant_more, 0.45: ask_early, 0.6: plant_more, 0.8: ask_later},
    )


@scenario(
    "misclassified",
    "Content typed wrongly: code labelled message, logs labelled tool_result, JSON labelled log.",
    12_000,
    6_000,
)
def _misclassified(b: Builder) -> None:
    _opening(b, needles=2)

    def paste() -> None:
        # A user pastes a module without a word around it: code, typed as a plain message.
        _, code = _python_file(b, min(400, max(80, b.target // 30)))
        u = b.add("user", "message", code, meta={"language": "python"})
        b.misclassified.append({"unit_id": u.id, "labelled": "message", "actual": "code"})
        b.assistant(b.reply_text(40))

    b.session(MIX, turn_tokens=_typical(b, 0.06, 0.15), hooks={0.5: paste})
    wrong = {"code": "message", "log": "tool_result"}
    for i, u in enumerate(b.units):
        if u.role != "tool":
            continue
        labelled = wrong.get(u.type)
        if labelled is None and u.type == "tool_result" and u.content.startswith("{"):
            labelled = "log"
        if labelled and b.rng.random() < 0.8:
            b.misclassified.append({"unit_id": u.id, "labelled": labelled, "actual": u.type})
            b.units[i] = u.replace(type=labelled)


@scenario(
    "needle_early",
    "Several facts planted in the first messages, then a long stretch of unrelated work.",
    20_000,
    6_000,
)
def _needle_early(b: Builder) -> None:
    _opening(b, needles=3)
    more = [b.needle(), b.needle()]
    b.plant(more, "tool")
    b.session(MIX, turn_tokens=_typical(b, 0.04, 0.1))


scenario("deep_reasoning", "Long reasoning units before most tool calls.", 12_000, 6_000)(
    _one_session(MIX, (0.08, 0.2), reasoning=0.8)
)
scenario(
    "system_heavy",
    "A big system prompt (rules, conventions, tool schemas) takes a third of the window.",
    10_000,
    6_000,
)(_one_session(MIX, (0.06, 0.15), {"system_share": 0.35, "tool_docs": True}))


def _apply_p1_ratio(b: Builder, ratio: float) -> None:
    """Mark about `ratio` of the units P1, a tool call always together with its results."""
    if not 0.0 <= ratio <= 1.0:
        raise UsageError(f"--p1-ratio must be between 0 and 1, got {ratio}")
    units = b.units
    owner: dict[str, int] = {}
    groups: list[list[int]] = []
    for i, u in enumerate(units):
        if u.tool_call_id is not None and u.tool_call_id in owner:
            groups[owner[u.tool_call_id]].append(i)
            continue
        groups.append([i])
        for c in u.tool_calls:
            owner[c.id] = len(groups) - 1
    want = round(ratio * len(units))
    first = [g for g in groups if any(units[i].is_p1 for i in g)]
    rest = [g for g in groups if g not in first]
    b.rng.shuffle(rest)
    chosen: set[int] = set()
    for g in first + rest:
        # Take a group when it brings the count closer to the wanted number of P1 units.
        if abs(len(chosen) + len(g) - want) < abs(len(chosen) - want):
            chosen.update(g)
        if len(chosen) == want:
            break
    for i, u in enumerate(units):
        p = 1 if i in chosen else None
        if u.priority != p:
            units[i] = u.replace(priority=p)


def ground_truth(t: Transcript) -> dict[str, Any]:
    """The ground truth a generated transcript carries (KeyError for other transcripts)."""
    return dict(t.metadata["ground_truth"])


def generate(
    scenario: str,
    *,
    seed: int = 0,
    tokens: int | None = None,
    p1_ratio: float | None = None,
    tokenizer: Tokenizer | str | None = None,
) -> Transcript:
    """One transcript of `scenario`, about `tokens` tokens (default: the scenario's size).

    Example: `generate("long_chat", seed=3, tokens=20_000)`.
    """
    scn = SCENARIOS.get(scenario)
    if scn is None:
        raise unknown_name("scenario", scenario, SCENARIOS)
    target = scn.default_tokens if tokens is None else int(tokens)
    if target < MIN_TOKENS:
        raise UsageError(f"--tokens must be at least {MIN_TOKENS}, got {target}")
    if target > MAX_TOKENS:
        raise UsageError(f"--tokens must be at most {MAX_TOKENS:,}, got {target:,}")
    limit = max(1, round(scn.limit * target / scn.default_tokens))
    tok = tokenizer if tokenizer is not None and not isinstance(tokenizer, str) else None
    tok = tok or get_tokenizer(tokenizer if isinstance(tokenizer, str) else None)
    b = Builder(scn, seed, target, limit, tok)
    scn.build(b)
    b.finish()
    ratio = scn.p1_ratio if p1_ratio is None else p1_ratio
    if ratio is not None:
        _apply_p1_ratio(b, ratio)
    t = Transcript(units=b.units, id=f"{scn.name}-{seed}", source_format="units", layout="lines")
    truth = {
        "scenario": scn.name,
        "seed": seed,
        "limit": limit,
        "tokens": count_transcript(t, tok).total,
        "needles": [
            {
                "id": n.id,
                "fact": n.fact,
                "unit_id": n.unit_id,
                "needed_by_unit_id": n.needed_by_unit_id,
                "pattern": n.pattern,
            }
            for n in b.needles
        ],
        "p1_ids": [u.id for u in b.units if u.is_p1],
        "final_request_id": b.units[-1].id,
        "misclassified": b.misclassified,
    }
    t.metadata["ground_truth"] = truth
    return t


def generate_many(
    scenarios: Iterable[str],
    *,
    seed: int = 0,
    count: int = 1,
    tokens: int | None = None,
    p1_ratio: float | None = None,
) -> Iterator[Transcript]:
    """`count` transcripts per scenario, with seeds `seed`, `seed + 1`, ..."""
    for name in scenarios:
        for i in range(count):
            yield generate(name, seed=seed + i, tokens=tokens, p1_ratio=p1_ratio)
