"""Generated tool outputs: source files, grep hits, test/build/server logs, JSON responses."""

from __future__ import annotations

import random
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from ctxkit.simulate.vocabulary import ADJS, ATTRS, LOCALES, NOUNS, PKGS, VARS, VERBS


class Builder(Protocol):
    """What the generators use of `simulate.builder.Builder`: its seeded random stream and
    fakers, its clock, its repository name, and its sizing helpers."""

    rng: random.Random
    fake: Any
    clock: float
    repo: str

    def faker(self, locale: str) -> Any: ...

    def pick(self, seq: Sequence[Any]) -> Any: ...

    def count(self, text: str) -> int: ...

    def stamp(self, ts: float | None = None) -> str: ...


def fill(
    b: Builder,
    budget: int,
    more: Callable[[], str],
    *,
    head: Sequence[str] = (),
    tail: str = "",
    misses: int = 3,
) -> str:
    """Join `head`, then blocks from `more()` while they fit `budget` (`b.count`'s tokens), then
    `tail` (`fitting_blocks`)."""
    blocks = fitting_blocks(b, budget, more, head=head, used=b.count(tail), misses=misses)
    return "".join([*blocks, tail])


def fitting_blocks(
    b: Builder,
    budget: int,
    more: Callable[[], str],
    *,
    head: Sequence[str] = (),
    used: int = 0,
    misses: int = 3,
    joiner_tokens: int = 0,
) -> list[str]:
    """`head`, then blocks from `more()`, while they fit `budget` with `used` tokens spent and
    `joiner_tokens` more for each block, until `misses` blocks did not fit.

    Blocks are counted one by one as they are made, so the text lands just under the
    budget without generating and discarding a large excess.
    """
    parts: list[str] = []
    for block in head:
        n = b.count(block) + joiner_tokens
        if parts and used + n > budget:
            break
        parts.append(block)
        used += n
    missed = 0
    smallest: tuple[int, str] | None = None
    while missed < misses:
        block = more()
        n = b.count(block) + joiner_tokens
        if used + n > budget:
            missed += 1
            if smallest is None or n < smallest[0]:
                smallest = (n, block)
            continue
        parts.append(block)
        used += n
    if not parts and smallest is not None:
        parts.append(smallest[1])  # never empty: one block over budget beats no output
    return parts


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
    return path, fill(b, budget, lambda: _py_block(b, const), head=[head])


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


def _fields(b: Builder, declare: Callable[[str], str]) -> str:
    """The field lines of a record type: 3 to 6 attributes drawn from ATTRS, each declared."""
    return "".join(declare(f_) for f_ in b.rng.sample(ATTRS, b.rng.randint(3, 6)))


def _ts_block(b: Builder) -> str:
    noun = b.pick(NOUNS)
    k = b.rng.randrange(4)
    if k == 0:
        body = _fields(
            b,
            lambda f_: f"  {_lower_camel(f_)}{'?' if b.rng.random() < 0.3 else ''}: {b.pick(('string', 'number', 'Date', 'boolean'))};\n",
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
    return path, fill(b, budget, lambda: _ts_block(b), head=[head])


def _go_block(b: Builder) -> str:
    noun, verb = b.pick(NOUNS), b.pick(VERBS)
    k = b.rng.randrange(3)
    if k == 0:
        body = _fields(b, lambda f_: f'\t{_camel(f_)} {b.pick(("string", "int64", "time.Time", "*string"))} `json:"{f_}"`\n')
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
    return path, fill(b, budget, lambda: _go_block(b), head=[head])


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

    text = fill(b, budget, hit, misses=2)
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

    text = fill(b, budget - 20 - 12 * 4, failure, head=head, misses=2)
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
    text = fill(b, budget, chunk, head=head, tail=tail, misses=2)
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

    text = fill(b, budget, line, misses=2)
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

    def item() -> str:
        return textwrap.indent(
            orjson.dumps(_json_item(b, fake, kind), option=orjson.OPT_INDENT_2).decode(), "    "
        )

    # a token more for each item: the comma and newline between items
    used = b.count(open_) + b.count(close)
    kept = fitting_blocks(b, budget, item, used=used, joiner_tokens=1)
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

    text = fill(b, min(budget, 400), entry, misses=1)
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
