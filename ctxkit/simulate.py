"""Overflow scenarios: agent-like transcripts generated with faker, with ground truth.

A scenario is a named recipe (`SCENARIOS`) that fills a transcript to a token size with the
kinds of content an agent accumulates: user tasks, assistant turns with (parallel) tool calls,
file reads of Python/TypeScript/Go, grep hits, test and build logs with stack traces, JSON API
responses, plan references and a P1 To Do List. Some facts (*needles*: an order id, a file
path, a decision, a constraint) are planted early and asked for by a later user request without
being repeated there, so a compaction that loses them can be caught.

Everything is drawn from one `random.Random` and seeded faker instances, never global random
state or the clock: the same scenario, seed and size give the same transcript, byte for byte.
The ground truth rides along in `Transcript.metadata["ground_truth"]`:

    {"scenario", "seed", "limit", "tokens", "needles": [{"id", "fact", "unit_id",
     "needed_by_unit_id", "pattern"}], "p1_ids", "final_request_id", "misclassified"}

`pattern` is a regular expression (for generated needles also a literal substring) that is
found in the planting unit and nowhere else in the generated transcript.

Example:

    >>> t = generate("long_chat", seed=7)
    >>> t.metadata["ground_truth"]["limit"]
    5000
"""

from __future__ import annotations

import os
import random
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from ctxkit.errors import UsageError, unknown_name
from ctxkit.fileio import atomic_writer
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.tokens import (
    CountOptions,
    Tokenizer,
    count_transcript,
    get_tokenizer,
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


SCENARIOS: dict[str, Scenario] = {}


# ---------------------------------------------------------------------------------------------
# vocabulary

NOUNS = (
    "invoice", "order", "customer", "session", "payment", "account", "report", "ticket",
    "cart", "shipment", "user", "profile", "message", "event", "job", "queue", "cache",
    "metric", "record", "batch", "webhook", "refund", "product", "inventory", "price",
    "discount", "address", "schedule", "task", "worker", "lease", "snapshot", "policy",
    "audit", "ledger", "tenant", "coupon", "subscription", "notification", "export",
)  # fmt: skip
VERBS = (
    "load", "save", "build", "parse", "validate", "compute", "fetch", "sync", "render",
    "apply", "resolve", "merge", "refresh", "publish", "dispatch", "normalize", "serialize",
    "reconcile", "allocate", "archive", "retry", "filter", "collect", "emit", "prune",
)  # fmt: skip
ADJS = ("pending", "active", "stale", "raw", "cached", "remote", "local", "default", "primary",
        "legacy", "batched", "partial", "expired", "visible")  # fmt: skip
PKGS = ("billing", "accounts", "orders", "inventory", "notifications", "search", "auth",
        "reporting", "shipping", "catalog", "payments", "analytics")  # fmt: skip
ATTRS = ("id", "status", "amount_cents", "updated_at", "owner_id", "tenant_id", "created_at",
         "currency", "retries", "expires_at")  # fmt: skip
VARS = ("result", "rows", "batch", "pending", "seen", "payload", "matches", "totals", "items",
        "records", "chunk", "out")  # fmt: skip
EMOJI = ("🚀", "✅", "❌", "🔥", "🤔", "👍", "🙏", "⚠️", "🐛", "📦", "🎉", "💡", "😅", "🧪",
         "📈", "👩‍💻", "🇯🇵", "🇩🇪", "🤷‍♂️", "🫠")  # fmt: skip
NEEDLE_KINDS = ("order", "path", "decision", "constraint", "contact", "slo", "flag")
LOCALES = (
    "ja_JP",
    "ru_RU",
    "ar_AA",
    "de_DE",
    "zh_CN",
    "fr_FR",
    "es_ES",
    "he_IL",
    "el_GR",
    "th_TH",
    "uk_UA",
    "fa_IR",
    "vi_VN",
    "bn_BD",
)

_FAKERS: dict[str, Any] = {}  # locale -> Faker; a cache, re-seeded on every use


def _faker(locale: str, seed: int) -> Any:
    """A faker for one locale, seeded for this transcript (instances are cached, not shared state)."""
    fake = _FAKERS.get(locale)
    if fake is None:
        from faker import Faker

        fake = _FAKERS[locale] = Faker(locale)
    fake.seed_instance(seed)
    return fake


def _camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def _lower_camel(snake: str) -> str:
    c = _camel(snake)
    return c[:1].lower() + c[1:]


def _plain(text: str) -> str:
    """Text safe inside a quoted string or a docstring of generated code."""
    return re.sub(r"[\"'\\`$]", "", text)


@dataclass
class Output:
    """One tool result: the call that produced it and what it printed."""

    tool: str
    args: dict[str, Any]
    content: str
    type: str
    delay_s: tuple[float, float] = (0.2, 3.0)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Needle:
    id: str
    kind: str
    pattern: str
    fact: str
    need: str
    unit_id: str = ""
    needed_by_unit_id: str = ""


# ---------------------------------------------------------------------------------------------
# the builder


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

    def fill(
        self,
        budget: int,
        more: Callable[[], str],
        *,
        head: Sequence[str] = (),
        tail: str = "",
        misses: int = 3,
    ) -> str:
        """Join `head`, then blocks from `more()` while they fit `budget`, then `tail`.

        Blocks are counted one by one as they are made, so the text lands just under the
        budget without generating and discarding a large excess.
        """
        parts: list[str] = []
        used = self.count(tail)
        for block in head:
            n = self.count(block)
            if parts and used + n > budget:
                break
            parts.append(block)
            used += n
        missed = 0
        smallest: tuple[int, str] | None = None
        while missed < misses:
            block = more()
            n = self.count(block)
            if used + n > budget:
                missed += 1
                if smallest is None or n < smallest[0]:
                    smallest = (n, block)
                continue
            parts.append(block)
            used += n
        if not parts and smallest is not None:
            parts.append(smallest[1])  # never empty: one block over budget beats no output
        parts.append(tail)
        return "".join(parts)

    def sentences(self, budget: int, fake: Any = None, emoji: float = 0.0) -> str:
        """Prose of about `budget` tokens (one sentence at least)."""
        fake = fake or self.fake

        def sentence() -> str:
            s = str(fake.sentence(nb_words=self.rng.randint(6, 16)))
            if emoji and self.rng.random() < emoji:
                s += " " + self.pick(EMOJI)
            return s + " "

        text = self.fill(budget, sentence, head=[sentence()], misses=2)
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
        return self.add("system", "message", self.fill(budget, rule, head=head, misses=3).strip())

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

        return self.fill(budget, sentence, head=[sentence()], misses=2).strip()

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

        return self.assistant("", "reasoning", reasoning=self.fill(budget, step, head=head).strip())

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
        if kind == "order":
            lit = f"ORD-{self.rng.randint(10000, 99999)}"
            fact = f"The escalation is about order {lit}; the refund has to go against exactly that order."
            need = "issue the refund against the order from the escalation I mentioned at the start"
        elif kind == "path":
            lit = f"src/{pkg}/{verb}_{noun}_v{self.rng.randint(2, 9)}.py"
            fact = f"The bug lives in {lit}; the rest of the module is fine."
            need = "put the fix in the file where I said the bug lives"
        elif kind == "decision":
            n = self.rng.randint(1000, 9999)
            lit = f"advisory lock {n}"
            fact = f"Decision: the {noun} job is serialised with PostgreSQL {lit} instead of a Redis mutex."
            need = "use the locking approach we decided on, with the same lock number"
        elif kind == "constraint":
            lit = "never touch migrations/"
            fact = (
                f"Hard constraint from the DBA team: {lit} (schema changes go through their queue)."
            )
            need = "apply the constraint we agreed on to the cleanup script as well"
        elif kind == "contact":
            lit = f"{self.fake.user_name()}.{self.rng.randint(10, 99)}@{self.fake.domain_name()}"
            fact = f"When this is done, send the incident summary to {lit}."
            need = "draft the incident summary for the person I said should receive it"
        elif kind == "slo":
            lit = f"p99 under {self.rng.randint(120, 900)} ms"
            fact = f"The SLO we agreed on for the {pkg} API is {lit} at peak load."
            need = "check the benchmark numbers against the latency target we agreed on"
        elif kind == "flag":
            lit = f"{noun.upper()}_{self.pick(ADJS).upper()}_ROLLOUT_{self.rng.randint(2, 99)}"
            fact = f"Constraint: the feature flag {lit} must stay off in production until QA signs off."
            need = "make sure the production config respects the rollout constraint I gave you"
        else:
            raise ValueError(f"unknown needle kind {kind!r}")
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


# ---------------------------------------------------------------------------------------------
# tool outputs: source files


def _py_statement(b: Builder, ind: str, names: Sequence[str], in_method: bool, const: str) -> str:
    a = b.pick(names) if names else "items"
    v, it, attr = b.pick(VARS), b.pick(("item", "row", "entry", "rec", "obj")), b.pick(ATTRS)
    verb, noun = b.pick(VERBS), b.pick(NOUNS)
    client = "self._client" if in_method else "client"
    k = b.rng.randrange(9)
    if k == 0:
        lines = [f"if not {a}:", f'    raise ValueError("{a} must not be empty")']
    elif k == 1:
        lines = [
            f"{v} = []",
            f"for {it} in {a}:",
            f"    if {it}.{attr} is None:",
            "        continue",
            f"    {v}.append({it}.{attr})",
        ]
    elif k == 2:
        lines = [
            "try:",
            f"    {v} = {client}.{verb}({a}, timeout={b.rng.choice((5, 10, 30))})",
            "except TimeoutError as exc:",
            f'    log.warning("{verb} timed out for %s: %s", {a}, exc)',
            f"    {v} = None",
        ]
    elif k == 3:
        lines = [f'log.info("{verb} %d {noun} records", len({a}))']
    elif k == 4:
        lines = [f"{v} = {{{it}.id: {it} for {it} in {a} if {it}.{attr}}}"]
    elif k == 5:
        lines = [
            f'with open("data/{noun}s.json", encoding="utf-8") as fh:',
            f"    {v} = json.load(fh)",
        ]
    elif k == 6:
        lines = [f"{v} = sorted({a}, key=lambda {it}: ({it}.{attr}, {it}.id))"]
    elif k == 7:
        lines = [f"if {a} and len({a}) > {const}:", f"    {a} = {a}[:{const}]"]
    else:
        lines = [
            f"while {v} and {v}[-1].{attr} is not None:",
            f"    {v}.pop()",
            f"    {b.pick(VARS)} += 1",
        ]
    return "".join(f"{ind}{line}\n" for line in lines)


def _py_def(b: Builder, ind: str, in_method: bool, const: str) -> str:
    verb, noun = b.pick(VERBS), b.pick(NOUNS)
    name = f"{verb}_{noun}" if b.rng.random() < 0.7 else f"_{verb}_{b.pick(ADJS)}_{noun}"
    params = b.rng.sample(
        [
            (f"{noun}s", f"list[{_camel(noun)}]"),
            ("limit", "int"),
            ("tenant_id", "str"),
            ("dry_run", "bool"),
            ("timeout_s", "float"),
            ("since", "datetime | None"),
        ],
        b.rng.randint(1, 3),
    )
    names = [p for p, _ in params]
    sig = ", ".join(f"{p}: {t}" for p, t in params)
    if in_method:
        sig = "self, " + sig
    ret = b.pick(("None", "int", f"list[{_camel(noun)}]", "dict[str, Any]", "bool"))
    out = ""
    if in_method and b.rng.random() < 0.15:
        out += f"{ind}@retry(attempts={b.rng.randint(2, 5)})\n"
    out += f"{ind}def {name}({sig}) -> {ret}:\n"
    out += f'{ind}    """{_plain(b.fake.sentence(nb_words=b.rng.randint(5, 12)))}"""\n'
    for _ in range(b.rng.randint(2, 5)):
        out += _py_statement(b, ind + "    ", names, in_method, const)
    out += f"{ind}    return {b.pick(VARS) if ret != 'None' else 'None'}\n"
    return out


def _py_block(b: Builder, const: str) -> str:
    k = b.rng.randrange(10)
    noun = b.pick(NOUNS)
    if k < 4:
        return "\n\n" + _py_def(b, "", False, const)
    if k < 6:
        cls = _camel(noun) + b.pick(("Record", "Event", "Snapshot", "Row"))
        fields = b.rng.sample(ATTRS, b.rng.randint(3, 6))
        body = [
            "\n\n@dataclass(frozen=True)\n",
            f"class {cls}:\n",
            f'    """{_plain(b.fake.sentence(nb_words=8))}"""\n\n',
        ]
        for f_ in fields:
            body.append(
                f"    {f_}: {b.pick(('str', 'int', 'float | None', 'datetime'))}"
                + (f" = {b.pick(('None', '0', '0.0'))}" if f_ == fields[-1] else "")
                + "\n"
            )
        body.append("    tags: tuple[str, ...] = field(default_factory=tuple)\n")
        return "".join(body)
    cls = _camel(noun) + b.pick(("Service", "Repository", "Client", "Manager", "Worker"))
    out = [
        f"\n\nclass {cls}:\n",
        f'    """{_plain(b.fake.sentence(nb_words=b.rng.randint(6, 14)))}"""\n\n',
        f"    def __init__(self, client: {_camel(b.pick(NOUNS))}Client, *, retries: int = {b.rng.randint(2, 6)}) -> None:\n",
        "        self._client = client\n",
        "        self._retries = retries\n",
        "        self._cache: dict[str, Any] = {}\n",
    ]
    for _ in range(b.rng.randint(2, 4)):
        out.append("\n" + _py_def(b, "    ", True, const))
    return "".join(out)


def _python_file(b: Builder, budget: int) -> tuple[str, str]:
    pkg, noun = b.pick(PKGS), b.pick(NOUNS)
    path = f"src/{pkg}/{noun}_{b.pick(('service', 'repository', 'handlers', 'utils', 'models', 'client'))}.py"
    const = f"MAX_{b.pick(NOUNS).upper()}_ITEMS"
    head = (
        f'"""{_camel(noun)} {b.pick(("service", "helpers", "storage"))}: {_plain(b.fake.sentence(nb_words=9))}"""\n\n'
        "from __future__ import annotations\n\n"
        "import json\n"
        "import logging\n"
        f"import {b.pick(('time', 'itertools', 'functools', 'os'))}\n"
        "from dataclasses import dataclass, field\n"
        "from datetime import datetime\n"
        "from typing import Any\n\n"
        f"from {pkg}.{b.pick(NOUNS)}s import {_camel(b.pick(NOUNS))}Client, retry\n\n"
        "log = logging.getLogger(__name__)\n\n"
        f"{const} = {b.rng.choice((100, 250, 500, 1000))}\n"
    )
    if b.count(head) > budget:
        head = f'"""{_camel(noun)} helpers."""\n\nimport logging\n\nlog = logging.getLogger(__name__)\n'
    return path, b.fill(budget, lambda: _py_block(b, const), head=[head])


def _ts_statement(b: Builder, ind: str, in_class: bool = True) -> str:
    v, noun, verb = _lower_camel(b.pick(VARS)), b.pick(NOUNS), b.pick(VERBS)
    attr = _lower_camel(b.pick(ATTRS))
    me = "this." if in_class else ""  # a plain function has no `this`
    k = b.rng.randrange(6)
    if k == 0:
        lines = [f"const {v} = await {me}client.get<{_camel(noun)}[]>(`/api/{noun}s/${{id}}`);"]
    elif k == 1:
        lines = [f"if (!{v}?.length) {{", f'  throw new Error("no {noun}s for " + id);', "}"]
    elif k == 2:
        lines = [
            f"for (const row of {v}) {{",
            f"  if (row.{attr} == null) continue;",
            f"  {me}cache.set(row.id, row);",
            "}",
        ]
    elif k == 3:
        lines = [
            "try {",
            f"  await {me}client.post(`/api/{noun}s/{verb}`, {{ id, limit: opts.limit ?? 50 }});",
            "} catch (err) {",
            f'  console.warn("{verb} failed", err);',
            "  throw err;",
            "}",
        ]
    elif k == 4:
        lines = [
            f'const {v} = rows.filter((r) => r.status === "{b.pick(ADJS)}").map((r) => r.{attr});'
        ]
    else:
        lines = [
            f"{me}logger.debug(`{verb} ${{{v}.length}} {noun}s in ${{Date.now() - started}}ms`);"
        ]
    return "".join(f"{ind}{line}\n" for line in lines)


def _ts_block(b: Builder) -> str:
    noun = b.pick(NOUNS)
    k = b.rng.randrange(4)
    if k == 0:
        fields = b.rng.sample(ATTRS, b.rng.randint(3, 6))
        body = "".join(
            f"  {_lower_camel(f_)}{'?' if b.rng.random() < 0.3 else ''}: {b.pick(('string', 'number', 'Date', 'boolean'))};\n"
            for f_ in fields
        )
        return f"\nexport interface {_camel(noun)}Record {{\n  id: string;\n{body}}}\n"
    if k == 1:
        verb = b.pick(VERBS)
        fn = (
            f"\nexport async function {verb}{_camel(noun)}s(\n"
            f"  client: HttpClient,\n  logger: Logger,\n  cache: Map<string, {_camel(noun)}Record>,\n"
            f"  id: string,\n  rows: {_camel(noun)}Record[],\n"
            f"  opts: {{ limit?: number }} = {{ limit: {b.rng.randint(10, 500)} }},\n"
            "): Promise<number> {\n  const started = Date.now();\n"
        )
        for _ in range(b.rng.randint(2, 4)):
            fn += _ts_statement(b, "  ", in_class=False)
        return fn + "  return rows.length;\n}\n"
    cls = _camel(noun) + b.pick(("Service", "Store", "Controller"))
    out = [
        "\n@Injectable()\n",
        f"export class {cls} {{\n",
        f"  private readonly cache = new Map<string, {_camel(noun)}Record>();\n\n",
        "  constructor(private readonly client: HttpClient, private readonly logger: Logger) {}\n",
    ]
    for _ in range(b.rng.randint(2, 4)):
        verb = b.pick(VERBS)
        out.append(
            f"\n  async {verb}{_camel(b.pick(NOUNS))}(id: string, opts: {{ limit?: number }} = {{}}): Promise<{_camel(noun)}Record[]> {{\n"
            "    const started = Date.now();\n"
        )
        for _ in range(b.rng.randint(2, 4)):
            out.append(_ts_statement(b, "    "))
        out.append("    return [...this.cache.values()];\n  }\n")
    out.append("}\n")
    return "".join(out)


def _typescript_file(b: Builder, budget: int) -> tuple[str, str]:
    pkg, noun = b.pick(PKGS), b.pick(NOUNS)
    path = f"web/src/{pkg}/{_camel(noun)}{b.pick(('Service', 'Table', 'Store', 'Api'))}.ts"
    head = (
        'import { Injectable, Logger } from "@nestjs/common";\n'
        'import { HttpClient } from "../http/client";\n'
        f'import type {{ {_camel(b.pick(NOUNS))}Record }} from "../{b.pick(PKGS)}/types";\n'
        f"\nconst DEFAULT_LIMIT = {b.rng.choice((20, 50, 100))};\n"
    )
    return path, b.fill(budget, lambda: _ts_block(b), head=[head])


def _go_block(b: Builder) -> str:
    noun, verb = b.pick(NOUNS), b.pick(VERBS)
    k = b.rng.randrange(3)
    if k == 0:
        fields = b.rng.sample(ATTRS, b.rng.randint(3, 6))
        body = "".join(
            f'\t{_camel(f_)} {b.pick(("string", "int64", "time.Time", "*string"))} `json:"{f_}"`\n'
            for f_ in fields
        )
        return f'\n// {_camel(noun)} {_plain(b.fake.sentence(nb_words=7)).lower()}\ntype {_camel(noun)} struct {{\n\tID string `json:"id"`\n{body}}}\n'
    recv = b.pick(("s", "r", "h"))
    typ = _camel(b.pick(NOUNS)) + b.pick(("Store", "Service", "Handler"))
    attr = b.pick(ATTRS)
    lines = [
        f"\n// {_camel(verb)}{_camel(noun)} {_plain(b.fake.sentence(nb_words=8)).lower()}",
        f"func ({recv} *{typ}) {_camel(verb)}{_camel(noun)}(ctx context.Context, id string) (*{_camel(noun)}, error) {{",
        f"\tctx, cancel := context.WithTimeout(ctx, {recv}.timeout)",
        "\tdefer cancel()",
        f'\trow := {recv}.db.QueryRowContext(ctx, "SELECT id, {attr} FROM {noun}s WHERE id = $1", id)',
        f"\tvar out {_camel(noun)}",
        f"\tif err := row.Scan(&out.ID, &out.{_camel(attr)}); err != nil {{",
        "\t\tif errors.Is(err, sql.ErrNoRows) {",
        f'\t\t\treturn nil, fmt.Errorf("{noun} %s: %w", id, ErrNotFound)',
        "\t\t}",
        f'\t\treturn nil, fmt.Errorf("{verb} {noun} %s: %w", id, err)',
        "\t}",
    ]
    if b.rng.random() < 0.5:
        lines += [
            f"\tfor i := 0; i < {recv}.retries; i++ {{",
            f"\t\tif err := {recv}.publish(ctx, &out); err == nil {{",
            "\t\t\tbreak",
            "\t\t}",
            f"\t\ttime.Sleep(time.Duration(i+1) * {b.rng.choice((50, 100, 250))} * time.Millisecond)",
            "\t}",
        ]
    lines.append("\treturn &out, nil\n}")
    return "\n".join(lines) + "\n"


def _go_file(b: Builder, budget: int) -> tuple[str, str]:
    pkg = b.pick(PKGS)
    path = f"internal/{pkg}/{b.pick(NOUNS)}_{b.pick(('store', 'service', 'handler'))}.go"
    head = (
        f"package {pkg}\n\n"
        'import (\n\t"context"\n\t"database/sql"\n\t"errors"\n\t"fmt"\n\t"time"\n)\n\n'
        'var ErrNotFound = errors.New("not found")\n'
    )
    return path, b.fill(budget, lambda: _go_block(b), head=[head])


def _read_python(b: Builder, budget: int) -> Output:
    path, text = _python_file(b, budget)
    return Output("read_file", {"path": path}, text, "code", meta={"language": "python"})


def _read_typescript(b: Builder, budget: int) -> Output:
    path, text = _typescript_file(b, budget)
    return Output("read_file", {"path": path}, text, "code", meta={"language": "typescript"})


def _read_go(b: Builder, budget: int) -> Output:
    path, text = _go_file(b, budget)
    return Output("read_file", {"path": path}, text, "code", meta={"language": "go"})


def _grep(b: Builder, budget: int) -> Output:
    noun, verb = b.pick(NOUNS), b.pick(VERBS)
    symbol = f"{verb}_{noun}"

    def hit() -> str:
        pkg = b.pick(PKGS)
        ext = b.pick((".py", ".py", ".ts", ".go"))
        path = f"{'tests' if b.rng.random() < 0.3 else 'src/' + pkg}/{b.pick(NOUNS)}_{b.pick(('service', 'utils', 'views', 'tasks'))}{ext}"
        line = b.rng.randint(3, 900)
        text = b.pick(
            (
                f"def {symbol}(self, {b.pick(VARS)}: list[{_camel(noun)}]) -> None:",
                f"    {b.pick(VARS)} = {symbol}({b.pick(VARS)}, limit={b.rng.randint(1, 500)})",
                f"from {pkg}.{noun}_service import {symbol}",
                f"        return self.{symbol}(tenant_id=tenant_id)",
                f"    # TODO: {symbol} should not swallow TimeoutError",
                f"  const {_lower_camel(b.pick(VARS))} = await {_lower_camel(symbol)}(id);",
                f"\tif err := s.{_camel(symbol)}(ctx, id); err != nil {{",
            )
        )
        return f"{path}:{line}:{text}\n"

    text = b.fill(budget, hit, misses=2)
    return Output("grep", {"pattern": symbol, "path": "."}, text.rstrip("\n"), "tool_result")


def _pytest_log(b: Builder, budget: int) -> Output:
    files = [f"tests/test_{b.pick(NOUNS)}.py" for _ in range(b.rng.randint(3, 8))]
    collected = b.rng.randint(40, 900)
    head = [
        "============================= test session starts ==============================\n"
        f"platform linux -- Python 3.11.{b.rng.randint(4, 9)}, pytest-8.{b.rng.randint(0, 3)}.1, pluggy-1.5.0\n"
        f"rootdir: /home/dev/{b.repo}\nconfigfile: pyproject.toml\nplugins: cov-5.0.0, xdist-3.6.1\n"
        f"collected {collected} items\n\n",
        "".join(
            f"{f} {''.join(b.pick('......F.s') for _ in range(b.rng.randint(5, 40)))}"
            f"{' ' * 8}[{min(99, (i + 1) * 100 // len(files)):3d}%]\n"
            for i, f in enumerate(files)
        ),
        "\n=================================== FAILURES ===================================\n",
    ]
    failed: list[str] = []

    def failure() -> str:
        verb, n2 = b.pick(VERBS), b.pick(NOUNS)
        test = f"test_{verb}_{n2}_{b.pick(ADJS)}"
        path = b.pick(files)
        failed.append(f"{path}::{test}")
        ln = b.rng.randint(10, 400)
        v = b.pick(VARS)
        if b.rng.random() < 0.5:
            want = b.rng.randint(2, 50)
            body = (
                f"\n    def {test}(db, {n2}_factory):\n"
                f'        {v} = {verb}_{n2}([{n2}_factory(status="{b.pick(ADJS)}") for _ in range({want})])\n'
                f">       assert len({v}) == {want}\n"
                f"E       AssertionError: assert {want - 1} == {want}\n"
                f"E        +  where {want - 1} = len([<{_camel(n2)} id={b.rng.randint(1, 9999)}>, ...])\n\n"
                f"{path}:{ln}: AssertionError\n"
            )
        else:
            src = f"src/{b.pick(PKGS)}/{n2}_service.py"
            key = b.pick(ATTRS)
            body = (
                f"\n    def {test}(client):\n"
                f'>       resp = client.post("/api/{n2}s", json=payload)\n\n'
                f"{path}:{ln}: \n"
                "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n"
                f"{src}:{b.rng.randint(20, 600)}: in {verb}_{n2}\n"
                f"    {v} = self._client.{verb}(payload, timeout=10)\n"
                f"src/{b.pick(PKGS)}/client.py:{b.rng.randint(20, 300)}: in {verb}\n"
                f'    return payload["{key}"]\n'
                f"E   KeyError: '{key}'\n"
            )
        repeats = b.rng.randint(0, 12)
        if repeats:
            line = f"WARNING  {b.pick(PKGS)}.{n2}:{n2}_service.py:{b.rng.randint(10, 300)} retrying {verb} after timeout\n"
            body += (
                "------------------------------ Captured log call -------------------------------\n"
                + line * repeats
            )
        title = f" {test} "
        return f"{title.center(80, '_')}\n{body}"

    def tail() -> str:
        lines = [
            "=========================== short test summary info ============================\n"
        ]
        lines += [f"FAILED {f} - AssertionError\n" for f in failed]
        n_failed = max(1, len(failed))
        summary = f" {n_failed} failed, {collected - n_failed} passed, {b.rng.randint(0, 9)} skipped in {b.rng.uniform(1, 90):.2f}s "
        lines.append(summary.center(80, "=") + "\n")
        return "".join(lines)

    text = b.fill(budget - 20 - 12 * 4, failure, head=head, misses=2)
    text += tail()
    cmd = f"pytest -x {b.pick(files)}" if b.rng.random() < 0.5 else "pytest -q"
    return Output("run_command", {"command": cmd}, text, "log", delay_s=(3.0, 90.0))


def _npm_log(b: Builder, budget: int) -> Output:
    app = f"{b.pick(PKGS)}-web"
    head = [
        f"\n> {app}@{b.rng.randint(0, 3)}.{b.rng.randint(0, 20)}.{b.rng.randint(0, 9)} build\n"
        "> tsc -p tsconfig.json && vite build\n\n",
    ]

    def chunk() -> str:
        k = b.rng.randrange(4)
        noun = _camel(b.pick(NOUNS))
        f = f"src/{b.pick(PKGS)}/{noun}{b.pick(('Table', 'Form', 'Service', 'Store'))}.tsx"
        if k == 0:
            return (
                f"{f}({b.rng.randint(1, 400)},{b.rng.randint(1, 60)}): error TS2345: Argument of type "
                f"'string | undefined' is not assignable to parameter of type 'string'.\n"
                "  Type 'undefined' is not assignable to type 'string'.\n"
            )
        if k == 1:
            line = f"{f}\n  {b.rng.randint(1, 99)}:{b.rng.randint(1, 40)}  warning  'React' is defined but never used  no-unused-vars\n"
            return line * b.rng.randint(2, 10)
        if k == 2:
            return (
                f"{f}({b.rng.randint(1, 400)},{b.rng.randint(1, 60)}): error TS2322: Type '{noun}Record[]' "
                f"is not assignable to type '{noun}Record'.\n"
            )
        return "(!) Some chunks are larger than 500 kB after minification.\n" * b.rng.randint(1, 4)

    tail = (
        f"Error: Build failed with {b.rng.randint(1, 9)} errors:\n"
        "    at failureErrorWithLog (/app/node_modules/esbuild/lib/main.js:1651:15)\n"
        "    at /app/node_modules/esbuild/lib/main.js:1059:25\n"
        "    at runOnEndCallbacks (/app/node_modules/esbuild/lib/main.js:1486:45)\n"
        "    at buildResponseToResult (/app/node_modules/esbuild/lib/main.js:1057:7)\n"
        "npm ERR! code 2\nnpm ERR! path /app\nnpm ERR! command failed\n"
        "npm ERR! command sh -c tsc -p tsconfig.json && vite build\n"
    )
    text = b.fill(budget, chunk, head=head, tail=tail, misses=2)
    return Output("run_command", {"command": "npm run build"}, text, "log", delay_s=(5.0, 60.0))


def _server_log(b: Builder, budget: int) -> Output:
    pkg = b.pick(PKGS)
    t = [b.clock - b.rng.uniform(600, 3600)]

    def line() -> str:
        t[0] += b.rng.uniform(0.001, 2.0)
        when = b.stamp(t[0])
        worker = f"{pkg}-worker-{b.rng.randint(1, 8)}"
        k = b.rng.randrange(10)
        if k < 4:
            return f"{when} INFO  [{worker}] processed batch {b.rng.randint(1, 9999)} ({b.rng.randint(1, 500)} {b.pick(NOUNS)}s) in {b.rng.randint(3, 900)}ms\n"
        if k < 7:
            rep = f"{when} WARN  [{worker}] connection pool exhausted, waiting 250ms (in_use=20 max=20)\n"
            return rep * b.rng.randint(1, 6)
        if k < 9:
            return f"{when} DEBUG [{worker}] GET /api/{pkg}/{b.pick(NOUNS)}s?page={b.rng.randint(1, 40)} 200 {b.rng.randint(2, 400)}ms\n"
        noun, verb = b.pick(NOUNS), b.pick(VERBS)
        return (
            f"{when} ERROR [{worker}] unhandled exception in {verb}_{noun}\n"
            "Traceback (most recent call last):\n"
            f'  File "/srv/app/src/{pkg}/{noun}_service.py", line {b.rng.randint(20, 600)}, in {verb}_{noun}\n'
            f"    {b.pick(VARS)} = self._client.{verb}(payload, timeout=10)\n"
            '  File "/srv/app/.venv/lib/python3.11/site-packages/httpx/_client.py", line 1054, in send\n'
            "    response = self._send_handling_auth(\n"
            '  File "/srv/app/.venv/lib/python3.11/site-packages/httpx/_transports/default.py", line 86, in map_httpcore_exceptions\n'
            "    raise mapped_exc(message) from exc\n"
            "httpx.ReadTimeout: timed out\n"
        )

    text = b.fill(budget, line, misses=2)
    cmd = f"kubectl logs deploy/{pkg}-worker --since=1h --tail={b.rng.choice((200, 500, 2000))}"
    return Output("run_command", {"command": cmd}, text.rstrip("\n"), "log", delay_s=(1.0, 8.0))


def _json_item(b: Builder, fake: Any, k: int) -> dict[str, Any]:
    if k == 0:
        return {
            "id": f"cus_{b.rng.getrandbits(48):012x}",
            "name": fake.name(),
            "email": fake.email(),
            "address": {
                "street": fake.street_address(),
                "city": fake.city(),
                "postcode": fake.postcode(),
                "country": fake.country_code(),
            },
            "tags": b.rng.sample(ADJS, b.rng.randint(0, 3)),
            "orders": [
                {
                    "id": f"SO-{b.rng.randint(100000, 999999)}",
                    "amount_cents": b.rng.randint(100, 500_000),
                    "currency": b.pick(("EUR", "USD", "JPY", "GBP")),
                    "status": b.pick(ADJS),
                }
                for _ in range(b.rng.randint(0, 4))
            ],
        }
    if k == 1:
        return {
            "event": f"{b.pick(NOUNS)}.{b.pick(('created', 'updated', 'deleted', 'failed'))}",
            "id": f"evt_{b.rng.getrandbits(64):016x}",
            "at": b.stamp(b.clock - b.rng.uniform(0, 86400)),
            "data": {
                "object": b.pick(NOUNS),
                "attempt": b.rng.randint(1, 6),
                "latency_ms": round(b.rng.uniform(1, 2000), 2),
                "ok": b.rng.random() < 0.8,
            },
        }
    return {
        "sku": f"{b.pick(NOUNS)[:3].upper()}-{b.rng.randint(1000, 9999)}",
        "title": fake.catch_phrase() if hasattr(fake, "catch_phrase") else fake.word(),
        "price": {"amount": round(b.rng.uniform(1, 999), 2), "currency": b.pick(("EUR", "USD"))},
        "stock": [
            {"warehouse": fake.city(), "qty": b.rng.randint(0, 500)}
            for _ in range(b.rng.randint(1, 3))
        ],
    }


def _json_response(b: Builder, budget: int, fake: Any = None) -> Output:
    fake = fake or b.fake
    pkg = b.pick(PKGS)
    kind = b.rng.randrange(3)
    noun = ("customer", "event", "product")[kind]
    open_ = '{\n  "data": [\n'
    close = '\n  ],\n  "pagination": {"page": 1, "per_page": 100, "total": 1000}\n}'
    used = b.count(open_) + b.count(close)
    kept: list[str] = []
    smallest: tuple[int, str] | None = None
    missed = 0
    while missed < 3:
        item = textwrap.indent(
            orjson.dumps(_json_item(b, fake, kind), option=orjson.OPT_INDENT_2).decode(), "    "
        )
        n = b.count(item) + 1  # the comma and newline between items
        if used + n > budget:
            missed += 1
            if smallest is None or n < smallest[0]:
                smallest = (n, item)
            continue
        kept.append(item)
        used += n
    if not kept and smallest is not None:
        kept.append(smallest[1])
    total = len(kept) + b.rng.randint(0, 5000)
    text = (
        open_
        + ",\n".join(kept)
        + f'\n  ],\n  "pagination": {{"page": 1, "per_page": {max(1, len(kept))}, "total": {total}}}\n}}'
    )
    url = f"https://api.internal/{pkg}/v2/{noun}s?limit={max(1, len(kept))}"
    return Output("http_request", {"method": "GET", "url": url}, text, "tool_result")


def _list_dir(b: Builder, budget: int) -> Output:
    pkg = b.pick(PKGS)

    def entry() -> str:
        if b.rng.random() < 0.2:
            return f"drwxr-xr-x  {b.rng.randint(2, 9)} dev dev   4096  {b.pick(NOUNS)}s/\n"
        ext = b.pick((".py", ".py", ".ts", ".go", ".md", ".json"))
        return f"-rw-r--r--  1 dev dev {b.rng.randint(120, 90000):6d}  {b.pick(NOUNS)}_{b.pick(('service', 'utils', 'models', 'test'))}{ext}\n"

    text = b.fill(min(budget, 400), entry, misses=1)
    return Output("list_dir", {"path": f"src/{pkg}"}, text.rstrip("\n"), "tool_result")


def _edit_file(b: Builder, budget: int) -> Output:
    noun, verb, pkg = b.pick(NOUNS), b.pick(VERBS), b.pick(PKGS)
    path = f"src/{pkg}/{noun}_service.py"
    old = f"    {b.pick(VARS)} = self._client.{verb}({noun}s)\n"
    new = f"    {b.pick(VARS)} = self._client.{verb}({noun}s, timeout=self._timeout_s)\n"
    text = f"Edited {path}: replaced 1 occurrence (lines {b.rng.randint(10, 300)}-{b.rng.randint(301, 320)})."
    return Output("edit_file", {"path": path, "old": old, "new": new}, text, "tool_result")


def _exit_status(b: Builder, budget: int) -> Output:
    cmd = b.pick(("git status --short", "ruff check .", "make lint", "git diff --stat"))
    text = b.pick(
        (
            "exit status 0",
            "All checks passed!",
            f" {b.rng.randint(1, 9)} files changed, {b.rng.randint(1, 200)} insertions(+), {b.rng.randint(1, 90)} deletions(-)",
            f" M src/{b.pick(PKGS)}/{b.pick(NOUNS)}_service.py",
        )
    )
    return Output("run_command", {"command": cmd}, text, "tool_result", delay_s=(0.2, 2.0))


def _localized_json(b: Builder, budget: int) -> Output:
    return _json_response(b, budget, b.faker(b.pick(LOCALES)))


KINDS: dict[str, Callable[[Builder, int], Output]] = {
    "python": _read_python,
    "typescript": _read_typescript,
    "go": _read_go,
    "grep": _grep,
    "pytest": _pytest_log,
    "npm": _npm_log,
    "server_log": _server_log,
    "json": _json_response,
    "json_i18n": _localized_json,
    "list_dir": _list_dir,
    "edit": _edit_file,
    "status": _exit_status,
}

MIX = {
    "python": 3.0, "typescript": 1.0, "go": 1.0, "grep": 2.0, "pytest": 1.5, "npm": 0.7,
    "server_log": 0.7, "json": 1.2, "list_dir": 0.6, "edit": 1.2, "status": 0.6,
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# scenarios


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


@scenario(
    "agent_session", "A typical coding-agent session: reads, greps, tests, edits.", 20_000, 8_000
)
def _agent_session(b: Builder) -> None:
    _opening(b, needles=3)
    b.session(MIX, turn_tokens=_typical(b, 0.05, 0.15), chat=0.1)


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


@scenario("all_p1", "Every unit is P1: nothing may be dropped or shortened.", 6_000, 4_000, 1.0)
def _all_p1(b: Builder) -> None:
    _opening(b, needles=2)
    b.session(MIX, turn_tokens=_typical(b, 0.08, 0.2))


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


@scenario(
    "parallel_tools", "Assistant turns that fan out into 3-8 parallel tool calls.", 12_000, 6_000
)
def _parallel(b: Builder) -> None:
    _opening(b, needles=2)
    kinds = {"python": 2, "grep": 3, "go": 1, "list_dir": 1, "json": 1, "status": 1}
    b.session(kinds, turn_tokens=_typical(b, 0.1, 0.2), steps=(1, 2), parallel=(3, 8))


@scenario("code_heavy", "File reads of Python, TypeScript and Go dominate.", 16_000, 8_000)
def _code_heavy(b: Builder) -> None:
    _opening(b, needles=2)
    kinds = {"python": 4, "typescript": 2, "go": 2, "grep": 1, "edit": 1}
    b.session(kinds, turn_tokens=_typical(b, 0.06, 0.15))


@scenario(
    "log_heavy", "Test runs, build failures and server logs with repeated lines.", 16_000, 8_000
)
def _log_heavy(b: Builder) -> None:
    _opening(b, needles=2)
    kinds = {"pytest": 3, "npm": 2, "server_log": 3, "status": 1}
    b.session(kinds, turn_tokens=_typical(b, 0.06, 0.15))


@scenario("json_heavy", "Large nested JSON API responses with long arrays.", 16_000, 8_000)
def _json_heavy(b: Builder) -> None:
    _opening(b, needles=2, where="tool")
    b.session({"json": 5, "grep": 1, "python": 1}, turn_tokens=_typical(b, 0.06, 0.15))


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


@scenario("nearly_full", "Filled to 99% of the limit: one more message overflows.", 7_920, 8_000)
def _nearly_full(b: Builder) -> None:
    _opening(b, needles=2)
    b.session(MIX, turn_tokens=_typical(b, 0.05, 0.12))


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


@scenario("deep_reasoning", "Long reasoning units before most tool calls.", 12_000, 6_000)
def _deep_reasoning(b: Builder) -> None:
    _opening(b, needles=2)
    b.session(MIX, turn_tokens=_typical(b, 0.08, 0.2), reasoning=0.8)


@scenario(
    "system_heavy",
    "A big system prompt (rules, conventions, tool schemas) takes a third of the window.",
    10_000,
    6_000,
)
def _system_heavy(b: Builder) -> None:
    _opening(b, needles=2, system_share=0.35, tool_docs=True)
    b.session(MIX, turn_tokens=_typical(b, 0.06, 0.15))


def _tool_schemas() -> list[dict[str, Any]]:
    """OpenAI-style function schemas for the tools the generated agent uses."""

    def fn(name: str, description: str, props: dict[str, str]) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": {
                        k: {"type": "string", "description": v} for k, v in props.items()
                    },
                    "required": list(props),
                },
            },
        }

    return [
        fn("read_file", "Read a file from the repository.", {"path": "Path relative to the root."}),
        fn("grep", "Search files with a regex.", {"pattern": "Regex.", "path": "Where to search."}),
        fn("run_command", "Run a shell command.", {"command": "The command line."}),
        fn(
            "edit_file",
            "Replace text in a file.",
            {"path": "File.", "old": "Exact text to replace.", "new": "Replacement."},
        ),
        fn("http_request", "Call an internal HTTP API.", {"method": "GET or POST.", "url": "URL."}),
        fn("list_dir", "List a directory.", {"path": "Directory."}),
    ]


# ---------------------------------------------------------------------------------------------
# public API


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


def truth_record(t: Transcript, file: str | None = None, line: int | None = None) -> dict[str, Any]:
    """One line of the sidecar file: the transcript id, where it was written, its ground truth.

    `file` is the transcript's file name (directory output), `line` its line in a file of
    several transcripts; formats without transcript ids (openai, anthropic) are matched by them.
    """
    return {"id": t.id, "file": file, "line": line, "ground_truth": t.metadata["ground_truth"]}


def write_truth(
    transcripts: Iterable[Transcript],
    path: str | os.PathLike[str],
    files: Sequence[str | None] | None = None,
) -> int:
    """Write the ground-truth sidecar (one JSON line per transcript) atomically; returns lines.

    With `files` (one name per transcript) each record names its file; without, records
    number the transcripts' lines in the one file they share (when there are several).
    """
    items = list(transcripts)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with atomic_writer(target, "wb") as fh:
        for i, t in enumerate(items):
            if files is not None:
                rec = truth_record(t, file=files[i])
            else:
                rec = truth_record(t, line=i + 1 if len(items) > 1 else None)
            fh.write(orjson.dumps(rec) + b"\n")
            n += 1
    return n


def read_truth(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Read a sidecar file back: transcript id -> ground truth."""
    out: dict[str, dict[str, Any]] = {}
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                rec = orjson.loads(line)
                out[str(rec["id"])] = rec["ground_truth"]
    return out


def _unit_text(u: Unit) -> str:
    parts = [u.content, u.reasoning]
    parts += [c.arguments for c in u.tool_calls]
    return "\n".join(p for p in parts if p)


def needle_retention(
    t: Transcript,
    truth: Mapping[str, Any] | None = None,
    archive: Any = None,
    *,
    transcript_id: str | None = None,
) -> dict[str, Any]:
    """Which needles are still in `t` (or recallable from `archive`), by their patterns.

    `truth` defaults to `t.metadata["ground_truth"]`; `archive` is anything with
    `.list(transcript_id)` returning items that have `.content`, asked for `transcript_id`
    (default `t.id`; pass the original id when `t` was read back from a renamed file).
    """
    truth = truth if truth is not None else t.metadata.get("ground_truth", {})
    text = "\n".join(_unit_text(u) for u in t.units)
    archived: str | None = None
    if archive is not None:
        items = archive.list(transcript_id or t.id)
        archived = "\n".join(str(getattr(item, "content", "")) for item in items)
    rows = []
    for n in truth.get("needles", []):
        rx = re.compile(n["pattern"])
        present = rx.search(text) is not None
        recallable = not present and archived is not None and rx.search(archived) is not None
        rows.append({"id": n["id"], "present": present, "recallable": recallable})
    total = len(rows)
    present_n = sum(r["present"] for r in rows)
    recall_n = sum(r["recallable"] for r in rows)
    return {
        "total": total,
        "present": present_n,
        "recallable": recall_n,
        "lost": total - present_n - recall_n,
        "retention": present_n / total if total else 1.0,
        "retention_with_recall": (present_n + recall_n) / total if total else 1.0,
        "needles": rows,
    }


def pair_problems(t: Transcript) -> list[str]:
    """Tool pairing problems: duplicate ids, calls without results, results without calls."""
    problems: list[str] = []
    seen_units: set[str] = set()
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, u in enumerate(t.units):
        if u.id in seen_units:
            problems.append(f"{u.id}: duplicate unit id")
        seen_units.add(u.id)
        for c in u.tool_calls:
            if c.id in calls:
                problems.append(f"{u.id}: duplicate call id {c.id}")
            calls[c.id] = i
        if u.tool_call_id is not None:
            if u.tool_call_id not in calls:
                problems.append(f"{u.id}: result without its call {u.tool_call_id}")
            elif u.tool_call_id in answered:
                problems.append(f"{u.id}: second result for {u.tool_call_id}")
            answered.add(u.tool_call_id)
    problems += [f"call {cid} has no result" for cid in calls if cid not in answered]
    return problems


# ---------------------------------------------------------------------------------------------
# writing

OUTPUT_FORMATS = ("units", "openai", "anthropic")
_EXTENSIONS = {"units": ".jsonl", "openai": ".json", "anthropic": ".json"}
TRUTH_NAME = "truth.jsonl"


def for_output(t: Transcript, fmt: str) -> Transcript:
    """A copy to write: ground truth taken out of the metadata (it goes to the sidecar).

    A single openai/anthropic transcript is written as a JSON document, units as JSONL.
    """
    metadata = {k: v for k, v in t.metadata.items() if k != "ground_truth"}
    return t.replace(metadata=metadata, layout="lines" if fmt == "units" else "array")


def is_dir_target(out: str) -> bool:
    """`-o` names a directory when it is one already or ends with a path separator."""
    return out.endswith(("/", os.sep)) or Path(out).is_dir()


def truth_path_for(out: str) -> Path:
    """Where the sidecar goes: `DIR/truth.jsonl`, or `<stem>.truth.jsonl` beside a file."""
    if is_dir_target(out):
        return Path(out) / TRUTH_NAME
    p = Path(out)
    return p.with_name(p.name.split(".")[0] + ".truth.jsonl")


def save(
    transcripts: Sequence[Transcript],
    out: str,
    fmt: str = "units",
    truth: str | None = None,
) -> list[Path]:
    """Write transcripts to a file or a directory (one file each) plus the ground-truth sidecar.

    Returns the paths written, sidecar last. Every file is written atomically.
    """
    from ctxkit.formats import write_path

    if fmt not in OUTPUT_FORMATS:
        raise unknown_name("output format", fmt, OUTPUT_FORMATS)
    written: list[Path] = []
    files: list[str | None] | None = None
    if is_dir_target(out):
        directory = Path(out)
        directory.mkdir(parents=True, exist_ok=True)
        for t in transcripts:
            path = directory / f"{t.id}{_EXTENSIONS[fmt]}"
            write_path([for_output(t, fmt)], str(path), fmt)
            written.append(path)
        files = [p.name for p in written]
    else:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_path([for_output(t, fmt) for t in transcripts], out, fmt)
        written.append(Path(out))
    sidecar = Path(truth) if truth else truth_path_for(out)
    write_truth(transcripts, sidecar, files)
    written.append(sidecar)
    return written
