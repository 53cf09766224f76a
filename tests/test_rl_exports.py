"""`score-rl --export dpo|sft`: training lines in OpenAI's and TRL's shapes, model-readable.

Every line is checked against the OpenAI SDK's message types (pydantic validates the
TypedDicts) and against the documented line shapes: OpenAI preference fine-tuning
`{input: {messages, tools?, parallel_tool_calls?}, preferred_output: [assistant],
non_preferred_output: [assistant]}`, OpenAI chat fine-tuning `{messages, tools?}`, TRL's
conversational preference `{prompt, chosen, rejected}`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from ctxkit.cli import cli
from ctxkit.formats import read_path
from ctxkit.rl import (
    Exporter,
    ExportOptions,
    builtin_actions,
    dpo_record,
    example_tokens,
    plain_refs,
    score,
    sft_record,
)
from ctxkit.simulate import generate
from ctxkit.tokens import get_tokenizer

SMALL = ["--tokens", "2000"]
ACTIONS = ["--action", "default", "--action", "summarize_old", "--action", "mask_observations"]
HASHED_REF = re.compile(r"ref-\d{8,}|ctx://")

# Real transcripts of each provider shape, small enough to score three actions quickly, and a
# limit that is about half of what each logs.
REAL = {
    "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx065_task15_trial1_reward0.json": 2000,
    "anthropic-messages/DERIVED__d-kimuson__claude-code-viewer__mock-sample-project@64fdb7f2__fe5e1c67-53e7-4862-81ae-d0e013e3270b.messages.json": 3500,
    # its recorded usage leaves 15,827 tokens unlogged: the limit leaves the units about 1,270
    "claude-code/d-kimuson__claude-code-viewer__mock-sample-project@64fdb7f2__1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl": 18000,
}


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["score-rl", *args], catch_exceptions=False)


def lines(text: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


# --------------------------------------------------------------------------- shape checks


def _adapter(kind: str) -> Any:
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionMessageParam,
    )
    from pydantic import TypeAdapter

    return TypeAdapter(
        ChatCompletionAssistantMessageParam if kind == "assistant" else ChatCompletionMessageParam
    )


def check_text(text: str) -> None:
    """Model-facing text: the provider's request as JSON, no hashed refs, no units records."""
    assert text.strip(), "empty content"
    assert not HASHED_REF.search(text), HASHED_REF.search(text)
    assert '"signature"' not in text and '"encrypted_content"' not in text
    for line in text.splitlines():
        rec = line.rstrip(",")
        if rec.startswith("{") and rec.endswith("}"):
            obj = orjson.loads(rec)
            assert not {"id", "type", "role"} <= set(obj), f"a units record: {rec[:80]}"


def check_message(m: dict[str, Any], roles: tuple[str, ...]) -> None:
    """A chat message the OpenAI SDK accepts, with a role from `roles` and text content."""
    assert set(m) == {"role", "content"}, m.keys()
    assert m["role"] in roles
    assert isinstance(m["content"], str) and m["content"].strip()
    kind = "assistant" if m["role"] == "assistant" else "any"
    assert _adapter(kind).validate_python(m) == m


def check_openai_dpo(line: dict[str, Any]) -> None:
    assert list(line) == ["input", "preferred_output", "non_preferred_output"]
    assert set(line["input"]) <= {"messages", "tools", "parallel_tool_calls"}
    assert "messages" in line["input"]
    for m in line["input"]["messages"]:
        check_message(m, ("system", "user", "assistant"))
    assert line["input"]["messages"][-1]["role"] == "user"
    for key in ("preferred_output", "non_preferred_output"):
        (answer,) = line[key]
        check_message(answer, ("assistant",))
    assert line["preferred_output"] != line["non_preferred_output"]
    for m in [*line["input"]["messages"][1:], *line["preferred_output"], *line["non_preferred_output"]]:
        check_text(m["content"].split("\n\n", 1)[-1])


def check_trl_dpo(line: dict[str, Any]) -> None:
    for key in ("prompt", "chosen", "rejected"):
        assert isinstance(line[key], list) and line[key]
        for m in line[key]:
            check_message(m, ("system", "user", "assistant"))
    assert [m["role"] for m in line["chosen"]] == [m["role"] for m in line["rejected"]] == ["assistant"]
    assert line["chosen_reward"] > line["rejected_reward"]


def check_sft(line: dict[str, Any]) -> None:
    assert set(line) <= {"messages", "tools"} and "messages" in line
    for m in line["messages"]:
        check_message(m, ("system", "user", "assistant"))
    assert [m["role"] for m in line["messages"]] == ["system", "user", "assistant"]
    check_text(line["messages"][2]["content"])


def _body(m: dict[str, Any]) -> Any:
    """The transcript a prompt or answer holds, parsed."""
    return orjson.loads(m["content"].split("\n\n", 1)[-1])


# --------------------------------------------------------------------------- library


def _trials(name: str = "long_chat", seed: int = 1) -> list[Any]:
    t = generate(name, seed=seed, tokens=3000)
    actions = [a for a in builtin_actions() if a.name in ("default", "summarize_old", "offload")]
    (trials,) = score([t], actions, limit_for=lambda _: 1500)
    return trials


def test_openai_pair_is_the_best_and_worst_compaction_as_provider_json() -> None:
    trials = _trials()
    line = dpo_record(trials)
    assert line is not None
    check_openai_dpo(line)
    prompt, preferred = line["input"]["messages"][1], line["preferred_output"][0]
    assert prompt["content"].startswith("Budget: 1,500 tokens; the transcript takes 3,000.")
    original, compacted = _body(prompt), _body(preferred)
    assert [m["role"] for m in original["messages"]][:2] == ["system", "user"]
    # the compaction keeps the system prompt and the first request, and is shorter
    assert compacted["messages"][:2] == original["messages"][:2]
    assert len(preferred["content"]) < len(prompt["content"])


def test_refs_are_numbered_in_order_not_hashed() -> None:
    trials = _trials()
    line = dpo_record(trials, "trl")
    assert line is not None
    texts = [line["chosen"][0]["content"], line["rejected"][0]["content"]]
    assert any("ref-1" in t for t in texts)
    for text in texts:
        found = re.findall(r"ref-(\d+)", text)
        assert found and not HASHED_REF.search(text)
        seen = list(dict.fromkeys(int(n) for n in found))
        assert seen == list(range(1, len(seen) + 1))


def test_plain_refs_keeps_one_number_per_ref() -> None:
    refs: dict[str, str] = {}
    a, b = "ref-123456789012345678", "ref-876543210987654321"
    text = plain_refs(f"[x archived as {a}] then {b} and {a} again", refs)
    assert text == "[x archived as ref-1] then ref-2 and ref-1 again"
    assert plain_refs(f"{b} / ctx://t/u7", dict(refs)) == "ref-2 / ref-3"


def test_sft_is_prompt_and_best_compaction() -> None:
    trials = _trials()
    line = sft_record(trials)
    assert line is not None
    check_sft(line)
    pair = dpo_record(trials)
    assert pair is not None
    assert line["messages"][:2] == pair["input"]["messages"]
    assert line["messages"][2] == pair["preferred_output"][0]


def test_budget_skips_examples_over_it_and_counts_them() -> None:
    trials = _trials()
    line = sft_record(trials)
    assert line is not None
    size = example_tokens(line, get_tokenizer(None))
    assert size > 1500  # the prompt holds the 3,000-token transcript
    tight = Exporter(ExportOptions(kind="sft", max_example_tokens=size - 1))
    assert tight.rows(trials) == [] and tight.over_budget == 1
    roomy = Exporter(ExportOptions(kind="sft", max_example_tokens=size))
    assert roomy.rows(trials) == [line] and roomy.over_budget == 0


def test_a_pair_counts_its_prompt_with_its_longer_answer() -> None:
    pair = dpo_record(_trials())
    assert pair is not None
    tok = get_tokenizer(None)
    prompt = example_tokens({"messages": pair["input"]["messages"]}, tok)
    longest = max(
        example_tokens({"messages": pair[k]}, tok)
        for k in ("preferred_output", "non_preferred_output")
    )
    assert example_tokens(pair, tok) == prompt + longest


def test_render_leaves_out_opaque_blobs_and_log_fields() -> None:
    from ctxkit.formats import read_text
    from ctxkit.formats.prompt import render

    doc = {
        "system": "sys",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "EqQBCkYIBxgCKkD" * 20},
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy" * 20},
                {"type": "text", "text": "a"},
            ], "id": "msg_1", "usage": {"input_tokens": 3}},
        ],
    }
    (t,) = read_text(orjson.dumps(doc).decode(), "anthropic")
    shown = orjson.loads(render(t))
    assert shown == {
        "system": "sys",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "a"}]},
        ],
    }


def test_unknown_dpo_shape_lists_the_known() -> None:
    with pytest.raises(Exception, match="openai, trl"):
        dpo_record(_trials(), "axolotl")


# --------------------------------------------------------------------------- CLI


def test_cli_openai_and_trl_shapes() -> None:
    r = run("-s", "long_chat", "-s", "log_heavy", *SMALL, *ACTIONS, "--action", "discard_low_rel", "--export", "dpo")
    assert r.exit_code == 0, r.stderr
    pairs = lines(r.stdout)
    assert len(pairs) == 2
    for p in pairs:
        check_openai_dpo(p)
    r = run("-s", "long_chat", *SMALL, *ACTIONS, "--export", "dpo", "--dpo-shape", "trl")
    assert r.exit_code == 0, r.stderr
    (p,) = lines(r.stdout)
    check_trl_dpo(p)


def test_cli_sft_budget_reports_what_it_skipped() -> None:
    r = run("-s", "long_chat", "-s", "code_heavy", *SMALL, *ACTIONS, "--export", "sft")
    assert r.exit_code == 0, r.stderr
    sizes = [example_tokens(line, get_tokenizer(None)) for line in lines(r.stdout)]
    assert len(sizes) == 2
    for line in lines(r.stdout):
        check_sft(line)
    budget = min(sizes)
    r = run("-s", "long_chat", "-s", "code_heavy", *SMALL, *ACTIONS, "--export", "sft",
            "--max-example-tokens", str(budget))
    assert r.exit_code == 0, r.stderr
    kept = lines(r.stdout)
    assert len(kept) == 1 and example_tokens(kept[0], get_tokenizer(None)) == budget
    assert r.stderr.splitlines()[-2:] == [
        f"1 fine-tuning line over --max-example-tokens {budget:,} skipped",
        "1 fine-tuning line written to stdout (oneshot, 3 actions)",
    ]


@pytest.mark.parametrize("name", REAL, ids=[p.split("/")[0] for p in REAL])
def test_real_transcripts_give_valid_lines(realdata: Path, name: str, tmp_path: Path) -> None:
    path = realdata / name
    (t,) = read_path(str(path))
    args = [str(path), "--limit", str(REAL[name]), *ACTIONS]
    r = run(*args, "--export", "dpo", "-o", str(tmp_path / "dpo.jsonl"))
    assert r.exit_code == 0, r.stderr
    r = run(*args, "--export", "sft", "-o", str(tmp_path / "sft.jsonl"))
    assert r.exit_code == 0, r.stderr
    (sft,) = lines((tmp_path / "sft.jsonl").read_text())
    check_sft(sft)
    body = _body(sft["messages"][1])
    # shown in its provider's API shape: Anthropic's for Claude Code logs
    assert set(body) <= {"system", "tools", "messages"}
    for m in body["messages"]:
        allowed = {"role", "content"} if t.source_format in ("anthropic", "claude-code") else {
            "role", "content", "name", "tool_calls", "tool_call_id"}
        assert set(m) <= allowed
    (pair,) = lines((tmp_path / "dpo.jsonl").read_text())
    check_openai_dpo(pair)
    assert pair["input"]["messages"] == sft["messages"][:2]


def test_parquet_output_by_its_suffix(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    out = tmp_path / "pairs.parquet"
    r = run("-s", "long_chat", *SMALL, *ACTIONS, "--export", "dpo", "-o", str(out))
    assert r.exit_code == 0, r.stderr
    assert out.read_bytes()[:4] == b"PAR1"
    (row,) = pl.read_parquet(out).to_dicts()
    check_openai_dpo(row)
