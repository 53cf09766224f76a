"""The transcript builder: one seeded random source, faker, token sizing, needles and P1 units."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import orjson

from ctxkit.model import ToolCall, Unit
from ctxkit.simulate.content import KINDS, _camel, _faker, _tool_schemas, fill
from ctxkit.simulate.vocabulary import ADJS, ATTRS, EMOJI, NEEDLE_KINDS, NOUNS, PKGS, VARS, VERBS
from ctxkit.tokens import (
    CountOptions,
    Tokenizer,
    speaker_name,
    unit_texts,
)

# Token cost of one message besides its text (role, separators), as `ctxkit.tokens` charges it.
MESSAGE_OVERHEAD = 4


_COUNT_OPTIONS = CountOptions()


REPLY_PRIMING = _COUNT_OPTIONS.reply_priming


# Smallest size worth a turn of its own; below it the session ends and the rest is padding.
MIN_TURN_TOKENS = 60


MIN_TOKENS = 1000
# About twice the largest context window in models.toml (1M): a bigger transcript would
# take hours to generate and fits no model it could test.
MAX_TOKENS = 2_000_000


HOOK_TOKENS = 160  # what one mid-session hook (plant or ask a needle) adds, roughly


@dataclass(frozen=True)
class Scenario:
    """A named recipe: `build` fills a `Builder` up to its target size."""

    name: str
    description: str
    default_tokens: int
    limit: int
    build: Callable[[Builder], None]
    p1_ratio: float | None = None  # default fraction of P1 units (None: only the To Do List)


@dataclass
class _Needle:
    id: str
    kind: str
    pattern: str
    fact: str
    need: str
    unit_id: str = ""
    needed_by_unit_id: str = ""


# Each needle kind: its literal, drawn from the builder's random stream (builder, noun, verb,
# package); the fact that states it ({lit}, {noun}, {pkg}); what a later request asks of it.
_NEEDLES: dict[str, tuple[Callable[[Any, str, str, str], str], str, str]] = {
    "order": (
        lambda b, noun, verb, pkg: f"ORD-{b.rng.randint(10000, 99999)}",
        "The escalation is about order {lit}; the refund has to go against exactly that order.",
        "issue the refund against the order from the escalation I mentioned at the start",
    ),
    "path": (
        lambda b, noun, verb, pkg: f"src/{pkg}/{verb}_{noun}_v{b.rng.randint(2, 9)}.py",
        "The bug lives in {lit}; the rest of the module is fine.",
        "put the fix in the file where I said the bug lives",
    ),
    "decision": (
        lambda b, noun, verb, pkg: f"advisory lock {b.rng.randint(1000, 9999)}",
        "Decision: the {noun} job is serialised with PostgreSQL {lit} instead of a Redis mutex.",
        "use the locking approach we decided on, with the same lock number",
    ),
    "constraint": (
        lambda b, noun, verb, pkg: "never touch migrations/",
        "Hard constraint from the DBA team: {lit} (schema changes go through their queue).",
        "apply the constraint we agreed on to the cleanup script as well",
    ),
    "contact": (
        lambda b, noun, verb, pkg: f"{b.fake.user_name()}.{b.rng.randint(10, 99)}@{b.fake.domain_name()}",
        "When this is done, send the incident summary to {lit}.",
        "draft the incident summary for the person I said should receive it",
    ),
    "slo": (
        lambda b, noun, verb, pkg: f"p99 under {b.rng.randint(120, 900)} ms",
        "The SLO we agreed on for the {pkg} API is {lit} at peak load.",
        "check the benchmark numbers against the latency target we agreed on",
    ),
    "flag": (
        lambda b, noun, verb, pkg: f"{noun.upper()}_{b.pick(ADJS).upper()}_ROLLOUT_{b.rng.randint(2, 99)}",
        "Constraint: the feature flag {lit} must stay off in production until QA signs off.",
        "make sure the production config respects the rollout constraint I gave you",
    ),
}


class Builder:
    """Appends units to a transcript under construction and keeps the token total.

    Scenario recipes call its methods; every random choice goes through `self.rng` or the
    seeded fakers, so a recipe is deterministic as long as it only uses those.
    """

    def __init__(
        self, scenario: Scenario, seed: int, target_tokens: int, limit: int, tokenizer: Tokenizer
    ) -> None:
        self.scenario = scenario
        self.seed = seed
        self.target = target_tokens
        self.limit = limit
        self.tokenizer = tokenizer
        self.rng = random.Random(f"ctxkit-simulate:{scenario.name}:{seed}")
        self.fake = self.faker("en_US")
        self.units: list[Unit] = []
        self.total = REPLY_PRIMING  # what count_transcript adds once per transcript
        self.reserve = 160  # kept free for the final request
        self.needles: list[_Needle] = []
        self.misclassified: list[dict[str, str]] = []
        self.final_extra = ""  # pasted material the final request carries (irreducible_turn)
        self.open_request = False  # a user request is waiting for its first task turn
        self._call_ids: set[str] = set()
        # A fixed epoch plus a seeded offset: realistic dates, never the current time.
        self.clock = 1_735_689_600.0 + self.rng.randrange(0, 300 * 86400)
        self.repo = f"{self.pick(PKGS)}-{self.pick(('service', 'api', 'platform', 'app'))}"

    # -- primitives ---------------------------------------------------------------------------

    def faker(self, locale: str) -> Any:
        """A faker for `locale`, seeded from this builder's random stream."""
        return _faker(locale, self.rng.getrandbits(32))

    def pick(self, seq: Sequence[Any]) -> Any:
        """One element of `seq`."""
        return seq[self.rng.randrange(len(seq))]

    def count(self, text: str) -> int:
        """Tokens of `text` under the generator's tokenizer."""
        return self.tokenizer.count(text) if text else 0

    def room(self) -> int:
        """Tokens left before the final request's reserve."""
        return self.target - self.total - self.reserve

    def progress(self) -> float:
        """How full the transcript is, as a fraction of the target."""
        return self.total / self.target

    def call_id(self) -> str:
        """A fresh tool-call id, unique in this transcript."""
        while True:
            cid = "call_" + "".join(
                self.pick("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
                for _ in range(24)
            )
            if cid not in self._call_ids:
                self._call_ids.add(cid)
                return cid

    def ts(self, lo: float, hi: float) -> float:
        """Advance the clock by a random delay and return the new time."""
        self.clock += self.rng.uniform(lo, hi)
        return round(self.clock, 3)

    def stamp(self, ts: float | None = None) -> str:
        """An ISO-8601 time for log lines."""
        moment = datetime.fromtimestamp(self.clock if ts is None else ts, tz=timezone.utc)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"

    def unit_cost(self, u: Unit) -> int:
        """Tokens one unit adds, as `ctxkit.tokens.count_units` counts it.

        Text by text, because one batch per unit would start tiktoken's thread pool for every
        message; `generate` reports `count_transcript`'s own total in the ground truth.
        """
        opts = _COUNT_OPTIONS
        texts, _ = unit_texts([u])
        n = sum(self.count(text) for text in texts) + opts.tokens_per_message
        if speaker_name(u):
            n += opts.tokens_per_name
        return n + u.images * opts.image_tokens

    def add(
        self,
        role: str,
        type_: str,
        content: str,
        *,
        delay_s: tuple[float, float] | None = None,
        **fields: Any,
    ) -> Unit:
        """Append a unit with the next id and a timestamp after the previous one."""
        if delay_s is None:
            delay_s = {"user": (15.0, 240.0), "assistant": (2.0, 25.0), "system": (0.0, 0.0)}.get(
                role, (0.2, 4.0)
            )
        u = Unit(
            id=f"u{len(self.units)}",
            role=role,
            type=type_,
            content=content,
            timestamp=self.ts(*delay_s),
            **fields,
        )
        self.units.append(u)
        self.total += self.unit_cost(u)
        return u

    def sentences(self, budget: int, fake: Any = None, emoji: float = 0.0) -> str:
        """Prose of about `budget` tokens (one sentence at least)."""
        fake = fake or self.fake

        def sentence() -> str:
            s = str(fake.sentence(nb_words=self.rng.randint(6, 16)))
            if emoji and self.rng.random() < emoji:
                s += " " + self.pick(EMOJI)
            return s + " "

        text = fill(self, budget, sentence, head=[sentence()], misses=2)
        return text.strip()

    # -- messages -----------------------------------------------------------------------------

    def system_prompt(self, budget: int, tool_docs: bool = False) -> Unit:
        """The system prompt: role, rules, tool notes, repository conventions."""
        agent = self.pick(("Atlas", "Forge", "Pilot", "Scout", "Relay"))
        head = [
            f"You are {agent}, an autonomous coding agent working in the `{self.repo}` "
            f"repository on behalf of {self.fake.company()}.\n\n",
            "# Rules\n"
            "- Read files before editing them; never guess at code you have not seen.\n"
            "- Run the relevant tests after every change and report the result honestly.\n"
            "- Keep changes minimal and explain each edit in one sentence.\n"
            "- Ask the user before deleting files or rewriting history.\n\n",
            "# Tools\n"
            "read_file(path), grep(pattern, path), run_command(command), "
            "edit_file(path, old, new), http_request(method, url), list_dir(path).\n\n",
        ]

        def rule() -> str:
            kind = self.rng.randrange(4)
            if kind == 0:
                return f"- {self.fake.sentence(nb_words=self.rng.randint(8, 18))}\n"
            if kind == 1:
                p = self.pick(PKGS)
                return (
                    f"- Code in `src/{p}/` follows the {self.pick(('repository', 'service', 'adapter'))} "
                    f"pattern; {self.fake.sentence(nb_words=10).lower()}\n"
                )
            if kind == 2:
                return (
                    f"\n## {self.fake.catch_phrase()}\n"
                    f"{self.fake.paragraph(nb_sentences=self.rng.randint(2, 5))}\n"
                )
            return f"- Style: {self.fake.bs()}; {self.fake.sentence(nb_words=8).lower()}\n"

        if tool_docs:
            schemas = orjson.dumps(_tool_schemas(), option=orjson.OPT_INDENT_2).decode()
            head.append(f"# Tool schemas\n```json\n{schemas}\n```\n\n")
        return self.add("system", "message", fill(self, budget, rule, head=head, misses=3).strip())

    def user(self, text: str) -> Unit:
        """A user message."""
        return self.add("user", "message", text)

    def assistant(self, text: str, type_: str = "message", **fields: Any) -> Unit:
        """An assistant message."""
        return self.add("assistant", type_, text, **fields)

    def task_text(self) -> str:
        """A user's request, the way people write them."""
        noun, verb, pkg = self.pick(NOUNS), self.pick(VERBS), self.pick(PKGS)
        n = self.rng.choice((50, 100, 500, 1000, 10_000))
        text = self.pick(
            (
                f"The nightly {noun} export fails for tenants with more than {n} records. Can you find out why and fix it?",
                f"Add pagination to the /api/{pkg}/{noun}s endpoint; it returns everything at once and times out.",
                f"Tests in tests/test_{noun}.py started failing after the last merge. Please investigate.",
                f"Refactor {verb}_{noun} so it stops hitting the database once per item.",
                f"The frontend build is broken on main ({_camel(noun)}Table.tsx). Please fix it.",
                f"We get intermittent timeouts from the {pkg} worker in production. Look at the logs and tell me what is going on.",
                f"Can you add a retry with backoff around {verb}_{noun}? It fails when the upstream is slow.",
                f"Write a regression test for the {noun} rounding bug a customer reported.",
            )
        )
        if self.rng.random() < 0.5:
            text += " " + self.fake.sentence(nb_words=self.rng.randint(6, 14))
        return text

    def reply_text(self, budget: int = 80) -> str:
        """An assistant's wrap-up after some tool work."""
        opener = self.pick(
            (
                "I found the problem.",
                "Done.",
                "Here is what I changed.",
                "The root cause is in the retry loop.",
                "Tests pass now.",
                "I could reproduce it.",
                "Short summary:",
            )
        )
        return opener + " " + self.prose(max(10, budget - 6))

    def tech_sentence(self) -> str:
        """A sentence about the code base, the way an agent reports findings."""
        noun, verb, attr, pkg = (
            self.pick(NOUNS),
            self.pick(VERBS),
            self.pick(ATTRS),
            self.pick(PKGS),
        )
        return self.pick(
            (
                f"The {attr} field is dropped in {verb}_{noun} when the cache returns a stale {noun}.",
                f"I changed src/{pkg}/{noun}_service.py to re-read {attr} after the retry.",
                f"{self.rng.randint(2, 40)} tests in tests/test_{noun}.py exercise this path and all of them pass now.",
                f"The timeout comes from the {pkg} client: it waits {self.rng.choice((5, 10, 30))}s per {noun} and never gives up early.",
                f"{verb}_{noun} is called once per item, which explains the {self.rng.randint(200, 5000)} queries per request.",
                f"The build fails because {_camel(noun)}Record changed shape in the last merge.",
                f"I left {verb}_{noun} untouched; the bug is in the caller, which ignores {attr}.",
                f"Next I would add a regression test for the empty-{noun} case.",
            )
        )

    def prose(self, budget: int) -> str:
        """Assistant prose: findings about the code mixed with filler sentences."""

        def sentence() -> str:
            if self.rng.random() < 0.5:
                return self.tech_sentence() + " "
            return str(self.fake.sentence(nb_words=self.rng.randint(6, 16))) + " "

        return fill(self, budget, sentence, head=[sentence()], misses=2).strip()

    def todo_list(self, done: int = 1) -> Unit:
        """The P1 To Do List (plan_ref, priority 1)."""
        noun, verb, pkg = self.pick(NOUNS), self.pick(VERBS), self.pick(PKGS)
        steps = [
            f"Reproduce the failing {noun} test locally",
            f"Find where {verb}_{noun} loses the {self.pick(ATTRS)} field",
            f"Fix src/{pkg}/{noun}_service.py and keep the public API unchanged",
            "Add a regression test next to the existing ones",
            "Run the full suite and the linters",
            "Update CHANGELOG.md and summarise the change for review",
        ][: self.rng.randint(4, 6)]
        lines = ["To Do List"] + [
            f"{i}. [{'x' if i <= done else ' '}] {s}" for i, s in enumerate(steps, 1)
        ]
        return self.assistant("\n".join(lines), "plan_ref", priority=1)

    def plan_ref(self) -> Unit:
        """A reference to the plan the agent follows (not P1)."""
        noun = self.pick(NOUNS)
        total = self.rng.randint(4, 8)
        step = self.rng.randint(1, total)
        lines = [f"Following docs/plans/{noun}-refactor.md, step {step}/{total}:"]
        for i in range(self.rng.randint(2, 4)):
            lines.append(f"  {step + i}. {self.fake.sentence(nb_words=self.rng.randint(6, 12))}")
        return self.assistant("\n".join(lines), "plan_ref")

    # -- tool turns ---------------------------------------------------------------------------

    def tool_step(
        self,
        kinds: Mapping[str, float],
        budget: int,
        parallel: int = 1,
        preface: str | None = None,
    ) -> list[Unit]:
        """One assistant unit with `parallel` tool calls, followed by their results."""
        parallel = max(1, min(parallel, (budget - 30) // 60))
        per = max(20, (budget - 30 - 25 * parallel) // parallel)
        names, weights = zip(*kinds.items(), strict=True)
        outs = [
            KINDS[self.rng.choices(names, weights=weights)[0]](self, per) for _ in range(parallel)
        ]
        calls = [
            ToolCall(id=self.call_id(), name=o.tool, arguments=orjson.dumps(o.args).decode())
            for o in outs
        ]
        if preface is None:
            preface = self.pick(
                (
                    "",
                    "",
                    "Let me look at the code first.",
                    "Checking the current state.",
                    f"Running {parallel} lookups in parallel." if parallel > 1 else "One moment.",
                    "I'll reproduce the failure before changing anything.",
                )
            )
        units = [self.assistant(preface, "tool_call", tool_calls=calls)]
        for c, o in zip(calls, outs, strict=True):
            units.append(
                self.add(
                    "tool",
                    o.type,
                    o.content,
                    tool_call_id=c.id,
                    name=o.tool,
                    delay_s=o.delay_s,
                    meta=dict(o.meta),
                )
            )
        return units

    def task_turn(
        self,
        kinds: Mapping[str, float],
        *,
        budget: int,
        steps: tuple[int, int] = (1, 3),
        parallel: tuple[int, int] = (1, 1),
        request: str | None = None,
        reasoning: float = 0.0,
        plan: float = 0.1,
    ) -> None:
        """A user request, a few tool steps within `budget`, and the assistant's wrap-up."""
        start = self.total
        if self.open_request:
            self.open_request = False
        else:
            self.user(request if request is not None else self.task_text())
        n = self.rng.randint(*steps)
        for i in range(n):
            left = min(budget - (self.total - start), self.room()) - 60
            if left < MIN_TURN_TOKENS:
                break
            if plan and left > 3 * MIN_TURN_TOKENS and self.rng.random() < plan:
                self.plan_ref()
            if reasoning and left > 3 * MIN_TURN_TOKENS and self.rng.random() < reasoning:
                self.thinking(min(left // 3, self.rng.randint(150, 700)))
            left = min(budget - (self.total - start), self.room()) - 60
            if left < MIN_TURN_TOKENS:
                break
            share = left // (n - i)
            self.tool_step(kinds, share, parallel=self.rng.randint(*parallel))
        wrap = min(self.rng.randint(25, 55), max(12, self.room()))
        self.assistant(self.reply_text(wrap))

    def thinking(self, budget: int) -> Unit:
        """A reasoning unit: the model thinking aloud before it acts."""
        noun, verb = self.pick(NOUNS), self.pick(VERBS)
        head = [
            f"Let me think about why {verb}_{noun} misbehaves. ",
            f"The {self.pick(ATTRS)} field is set before the retry, so the second attempt "
            f"should see it; unless the cache returns a stale {noun}. ",
        ]

        def step() -> str:
            return self.pick(
                (
                    f"If {self.pick(VARS)} is empty the loop never runs and we return early. ",
                    f"Option {self.rng.randint(1, 4)}: {self.fake.sentence(nb_words=12)} ",
                    f"But wait, {self.fake.sentence(nb_words=10).lower()} ",
                    f"So the invariant is that every {noun} keeps its {self.pick(ATTRS)}. ",
                    f"{self.fake.sentence(nb_words=14)} ",
                )
            )

        return self.assistant("", "reasoning", reasoning=fill(self, budget, step, head=head).strip())

    def session(
        self,
        kinds: Mapping[str, float],
        *,
        turn_tokens: tuple[int, int],
        steps: tuple[int, int] = (1, 3),
        parallel: tuple[int, int] = (1, 1),
        chat: float = 0.0,
        reasoning: float = 0.0,
        until: float = 1.0,
        hooks: Mapping[float, Callable[[], None]] | None = None,
    ) -> None:
        """Task turns (and chat, with probability `chat`) until `until` of the target is used.

        `hooks` maps a fill fraction to a callback run once when the session passes it (to
        plant or ask for needles in the middle of a session).
        """
        pending = sorted((hooks or {}).items())

        def free() -> int:
            # Hooks not run yet keep room for themselves, so small targets still land on size.
            return self.room() - int((1.0 - until) * self.target) - HOOK_TOKENS * len(pending)

        while free() > MIN_TURN_TOKENS:
            while pending and self.progress() >= pending[0][0]:
                pending.pop(0)[1]()
            lo, hi = turn_tokens
            budget = min(self.rng.randint(lo, hi), free())
            if budget <= MIN_TURN_TOKENS:
                break
            if chat and not self.open_request and self.rng.random() < chat:
                self.chat_pair(budget)
            else:
                self.task_turn(
                    kinds, budget=budget, steps=steps, parallel=parallel, reasoning=reasoning
                )
        for _, hook in pending:
            hook()

    def chat_pair(self, budget: int, locale: str | None = None, emoji: float = 0.0) -> None:
        """A user question and an assistant answer in prose (optionally in another language)."""
        fake = self.faker(locale) if locale else self.fake
        q_budget = min(self.rng.randint(15, 60), max(10, budget // 5))
        if locale:
            question = self.sentences(q_budget, fake, emoji)
        else:
            noun, verb = self.pick(NOUNS), self.pick(VERBS)
            question = self.pick(
                (
                    f"Quick question: why does {verb}_{noun} take a {noun} list instead of ids?",
                    f"Also, is the {self.pick(PKGS)} client thread-safe?",
                    f"Hmm. What happens to {self.pick(ADJS)} {noun}s when the job restarts?",
                    f"Can you explain how {_camel(noun)}Service caches results?",
                    f"Why did the {self.pick(PKGS)} tests pass locally but fail in CI?",
                )
            )
            if self.rng.random() < 0.4:
                question += " " + self.fake.sentence(nb_words=self.rng.randint(6, 14))
        self.user(question)
        a_budget = max(12, min(budget - self.count(question) - 2 * MESSAGE_OVERHEAD, self.room()))
        self.assistant(self.sentences(a_budget, fake, emoji) if locale else self.prose(a_budget))

    # -- needles ------------------------------------------------------------------------------

    def needle(self, kind: str | None = None) -> _Needle:
        """A new fact worth remembering, with the phrase a later request uses to ask for it."""
        if kind is None:
            used = {n.kind for n in self.needles}
            fresh = [k for k in NEEDLE_KINDS if k not in used] or list(NEEDLE_KINDS)
            kind = self.pick(fresh)
        nid = f"n{len(self.needles) + 1}"
        noun, verb, pkg = self.pick(NOUNS), self.pick(VERBS), self.pick(PKGS)
        if kind not in _NEEDLES:
            raise ValueError(f"unknown needle kind {kind!r}")
        literal, fact_text, need = _NEEDLES[kind]
        lit = literal(self, noun, verb, pkg)
        fact = fact_text.format(lit=lit, noun=noun, pkg=pkg)
        n_ = _Needle(id=nid, kind=kind, pattern=lit, fact=fact, need=need)
        self.needles.append(n_)
        return n_

    def plant(self, needles: Sequence[_Needle], where: str = "user") -> Unit:
        """Put needle facts into the transcript: a user note, or a ticket the agent looks up."""
        if where == "tool":
            ticket = self.rng.randint(1000, 9999)
            body = {
                "ticket": {
                    "id": ticket,
                    "status": "open",
                    "priority": self.pick(("high", "urgent")),
                    "reporter": self.fake.name(),
                    "notes": [n.fact for n in needles],
                    "created_at": self.stamp(),
                }
            }
            call = ToolCall(
                id=self.call_id(),
                name="http_request",
                arguments=orjson.dumps({"method": "GET", "url": f"/api/tickets/{ticket}"}).decode(),
            )
            self.assistant("Let me pull up the ticket.", "tool_call", tool_calls=[call])
            u = self.add(
                "tool",
                "tool_result",
                orjson.dumps(body, option=orjson.OPT_INDENT_2).decode(),
                tool_call_id=call.id,
                name="http_request",
            )
            self.assistant(f"Got it. {self.sentences(30)}")
        else:
            lead = self.pick(("Note for later: ", "Before you start: ", "Keep this in mind: ", ""))
            u = self.user(lead + " ".join(n.fact for n in needles))
        for n in needles:
            n.unit_id = u.id
        return u

    def ask(self, needles: Sequence[_Needle], text: str | None = None) -> Unit:
        """A user request that depends on earlier needles (without restating them)."""
        needs = [n.need for n in needles]
        body = needs[0] if len(needs) == 1 else ", ".join(needs[:-1]) + ", and " + needs[-1]
        u = self.user(text or f"Before we go on: {body}.")
        for n in needles:
            n.needed_by_unit_id = u.id
        return u

    def final_text(self) -> str:
        """The last user request: asks for every needle not asked for yet."""
        pending = [n for n in self.needles if not n.needed_by_unit_id]
        opener = self.pick(("Great, thanks.", "OK, last thing.", "Nice work so far.", "Thanks."))
        if pending:
            needs = [n.need for n in pending]
            body = needs[0] if len(needs) == 1 else ", ".join(needs[:-1]) + ", and " + needs[-1]
            text = f"{opener} Now {body}."
        else:
            text = f"{opener} Now {self.task_text()[:1].lower()}{self.task_text()[1:]}"
        if self.final_extra:
            text += "\n\nHere is the full output I got:\n\n" + self.final_extra
        return text

    def finish(self) -> Unit:
        """Pad the last answer so the total lands on the target, then add the final request."""
        text = self.final_text()
        final_cost = MESSAGE_OVERHEAD + self.count(text)
        gap = self.target - self.total - final_cost
        last = self.units[-1]
        if gap > 8 and not (last.role == "assistant" and last.type == "message"):
            last = self.assistant(self.pick(("Done.", "OK.", "Understood.")))
            gap = self.target - self.total - final_cost
        if gap > 2:
            extra = self.prose(gap) if gap > 12 else ""
            content = (last.content + " " + extra).strip()
            # Top up with single words: sentences alone stop up to a sentence short.
            base = self.unit_cost(last)
            while True:
                word = " " + str(self.fake.word())
                grown = last.replace(content=content + word)
                if self.unit_cost(grown) - base > gap:
                    break
                content += word
            self.total -= base
            self.units[-1] = last.replace(content=content)
            self.total += self.unit_cost(self.units[-1])
        u = self.add("user", "message", text)
        for n in self.needles:
            if not n.needed_by_unit_id:
                n.needed_by_unit_id = u.id
        return u
