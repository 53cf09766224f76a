"""What happened to each unit of a compaction: the records the JSON report and the HTML page
(`ctxkit.report.html`) show, one per unit before and one per unit after.

A unit before is `kept` (verbatim), `condensed` (same id, shorter content), `masked` (same id,
a one-line placeholder), `summarized` (inside a summary) or `archived` (removed; a placeholder
names its ref). Where it went is found from what compaction leaves behind, never from strategy
names: every removed or shortened unit is archived under a ref made from its scope, id and
content (`archive.make_ref`), and the unit standing for it carries that ref in its meta
(`ref`, `refs`) and its text; summaries and run placeholders also list the ids they replace
(`summarized_ids`, `removed_ids`).

Records carry each unit's whole text (content, reasoning, tool calls): the report is meant to
rebuild the page alone (`ctxkit report REPORT.json --html`), so it is about as large as the
transcript before and after together, plus the final prompt.

Example:
    >>> from ctxkit.compaction import compact
    >>> from ctxkit.simulate import generate
    >>> r = compact(generate("long_chat", seed=1), limit=5000)
    >>> doc = unit_trace(r)
    >>> len(doc["before"]) == r.units_before, len(doc["after"]) == r.units_after
    (True, True)
    >>> sorted(doc["counts"])
    ['archived', 'condensed', 'kept', 'masked', 'summarized']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxkit.archive.store import REF_DIGITS, make_ref, ref_scope
from ctxkit.model import Transcript, Unit

STATUSES = ("kept", "condensed", "masked", "summarized", "archived")
_REF = re.compile(rf"ref-\d{{{REF_DIGITS},}}")


def _tail(ref: str) -> str:
    """The last REF_DIGITS digits: a ref the archive lengthened (a clash) ends with the short one."""
    return ref[-REF_DIGITS:]


def _refs_of(u: Unit) -> list[str]:
    out: list[str] = []
    if "ref" in u.meta:
        out.append(str(u.meta["ref"]))
    out.extend(str(r) for r in u.meta.get("refs", ()))
    out.extend(_REF.findall(u.content))
    return list(dict.fromkeys(out))


def _text_of(u: Unit) -> str:
    parts = [u.content, u.reasoning, *(c.arguments for c in u.tool_calls)]
    return "\n".join(p for p in parts if p)


def clean(text: str) -> str:
    """`text` as valid UTF-8 (a lone surrogate, which JSON allows and UTF-8 does not, becomes
    U+FFFD): the report and the page show text, they do not restore it (`ctxkit expand` does)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _record(u: Unit, tokens: int | None) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": clean(u.id),
        "role": u.role,
        "type": u.type,
        "tokens": tokens,
        "p1": u.is_p1,
        "content": clean(u.content),
    }
    if u.name is not None:
        d["name"] = clean(u.name)
    if u.reasoning:
        d["reasoning"] = clean(u.reasoning)
    if u.tool_calls:
        d["tool_calls"] = [
            {"id": clean(c.id), "name": clean(c.name), "arguments": clean(c.arguments)}
            for c in u.tool_calls
        ]
    if u.tool_call_id is not None:
        d["tool_call_id"] = u.tool_call_id
    if u.images:
        d["images"] = u.images
    return d


def _same(a: Unit, b: Unit) -> bool:
    return (
        a.content == b.content
        and a.tool_calls == b.tool_calls
        and a.reasoning == b.reasoning
        and a.type == b.type
    )


def unit_trace(
    result: Any,
    truth: Mapping[str, Any] | None = None,
    archive: Any = None,
) -> dict[str, Any]:
    """Per-unit records of a `CompactResult`: {"before": [...], "after": [...], "counts": {...},
    "truth": {...} or None}.

    `truth` is the transcript's ground truth (`p1_ids`, `needles` with `pattern`), from
    `metadata["ground_truth"]` when not given: P1 units and needles are marked on both sides.
    With the run's `archive`, a unit whose placeholder was itself summarized later in the chain
    is traced through that placeholder (archived too) to the summary that holds it.
    """
    original: Transcript = result.original if result.original is not None else result.transcript
    before_units = list(original.units)
    after_units = list(result.transcript.units)
    tokens_before = list(result.unit_tokens_before) or [None] * len(before_units)
    tokens_after = list(result.unit_tokens_after) or [None] * len(after_units)
    truth = truth if truth is not None else original.metadata.get("ground_truth") or None

    # where each unit of the result came from
    after_by_id: dict[str, int] = {}
    carrier_by_ref: dict[str, int] = {}
    carrier_by_id: dict[str, int] = {}
    for k, u in enumerate(after_units):
        after_by_id.setdefault(u.id, k)
        for r in _refs_of(u):
            carrier_by_ref.setdefault(_tail(r), k)
        for key in ("summarized_ids", "removed_ids"):
            for uid in u.meta.get(key, ()):
                carrier_by_id.setdefault(str(uid), k)

    if archive is not None and result.changed:
        _through_archive(archive, original, carrier_by_ref, carrier_by_id)

    scope = ref_scope(original) if result.changed else ""
    before: list[dict[str, Any]] = []
    to_index: list[int | None] = []  # the unit of the result each unit went to
    sources: dict[int, list[str]] = {}
    for i, u in enumerate(before_units):
        rec = _record(u, tokens_before[i])
        j: int | None = after_by_id.get(u.id)
        status, ref = "kept", None
        if j is not None and _same(u, after_units[j]):
            pass
        else:
            ref = make_ref(scope, u.id, u.content)
            if j is not None:
                status = "masked" if after_units[j].type == "placeholder" else "condensed"
            else:
                j = carrier_by_ref.get(_tail(ref), carrier_by_id.get(u.id))
                if j is None:
                    status = "archived"  # no unit of the result names it (recall finds it)
                else:
                    status = "summarized" if after_units[j].type == "summary" else "archived"
            if j is not None:
                found = [r for r in _refs_of(after_units[j]) if _tail(r) == _tail(ref)]
                ref = found[0] if found else ref
        rec["status"] = status
        rec["ref"] = ref
        rec["to"] = clean(after_units[j].id) if j is not None else None
        if j is not None:
            sources.setdefault(j, []).append(rec["id"])
        to_index.append(j)
        before.append(rec)

    after: list[dict[str, Any]] = []
    before_by_id = {u.id: r for u, r in zip(before_units, before, strict=True)}
    for j, u in enumerate(after_units):
        rec = _record(u, tokens_after[j])
        src = before_by_id.get(u.id)
        if src is not None and src["status"] in ("kept", "condensed", "masked"):
            rec["status"] = src["status"]
            rec["p1"] = rec["p1"] or src["p1"]
        else:
            rec["status"] = "summary" if u.type == "summary" else "placeholder"
        rec["from"] = sources.get(j, [])
        rec["refs"] = [clean(r) for r in _refs_of(u)]
        if "strategy" in u.meta:
            rec["strategy"] = str(u.meta["strategy"])
        after.append(rec)
    for rec, dest in zip(before, to_index, strict=True):
        if dest is not None and "strategy" in after[dest] and rec["status"] != "kept":
            rec["strategy"] = after[dest]["strategy"]

    marks = _truth_marks(truth, before_units, after_units, before, after)
    counts = dict.fromkeys(STATUSES, 0)
    for rec in before:
        counts[rec["status"]] += 1
    return {"before": before, "after": after, "counts": counts, "truth": marks}


def _through_archive(
    archive: Any,
    original: Transcript,
    carrier_by_ref: dict[str, int],
    carrier_by_id: dict[str, int],
) -> None:
    """Extend the carrier maps with what units made and then replaced during the run stood
    for: a run placeholder summarized later names its units in the archive, not in the result."""
    ids = {u.id for u in original.units}
    made = []
    for row in archive.list(archive.key_for(original)):
        if row.unit_id in ids:
            continue
        u = row.unit()
        named = [_tail(r) for r in _refs_of(u)]
        named_ids = [str(x) for k in ("summarized_ids", "removed_ids") for x in u.meta.get(k, ())]
        made.append((_tail(row.ref), u.id, named, named_ids))
    for _ in range(8):  # a placeholder inside a summary inside a summary: a few levels at most
        grew = False
        for ref, uid, named, named_ids in made:
            j = carrier_by_ref.get(ref, carrier_by_id.get(uid))
            if j is None:
                continue
            for r in named:
                if r not in carrier_by_ref:
                    carrier_by_ref[r] = j
                    grew = True
            for x in named_ids:
                if x not in carrier_by_id:
                    carrier_by_id[x] = j
                    grew = True
        if not grew:
            return


def _truth_marks(
    truth: Mapping[str, Any] | None,
    before_units: Sequence[Unit],
    after_units: Sequence[Unit],
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
) -> dict[str, Any] | None:
    """Mark P1 units and the units holding each needle; the needles' fate, for the page."""
    if not truth:
        return None
    p1 = {str(x) for x in truth.get("p1_ids") or ()}
    for rec in before:
        if rec["id"] in p1:
            rec["p1"] = True
    for rec in after:
        if rec["id"] in p1:
            rec["p1"] = True
    needles = []
    for n in truth.get("needles") or ():
        try:
            rx = re.compile(str(n["pattern"]))
        except (KeyError, re.error):
            continue
        nid = str(n.get("id", ""))
        hits: dict[str, list[str]] = {"before": [], "after": []}
        for side, units, recs in (("before", before_units, before), ("after", after_units, after)):
            for u, rec in zip(units, recs, strict=True):
                if rx.search(_text_of(u)):
                    rec.setdefault("needles", []).append(nid)
                    hits[side].append(u.id)
        kept = bool(hits["after"])
        needles.append(
            {
                "id": nid,
                "pattern": str(n["pattern"]),
                "before": hits["before"],
                "after": hits["after"],
                "status": "present" if kept else ("recallable" if hits["before"] else "absent"),
            }
        )
    return {"p1_ids": sorted(p1), "needles": needles}


def final_prompt(t: Transcript, fmt: str | None = None) -> dict[str, Any]:
    """The compacted transcript as it is written (`fmt`, else its own format): what the model is
    given, {"format", "text"}."""
    import io

    from ctxkit.formats import output_format_for, write_transcripts

    out = io.StringIO()
    name = output_format_for(t, fmt)
    write_transcripts([t], out, name)
    return {"format": name, "text": clean(out.getvalue())}


def detailed_report(
    result: Any,
    *,
    output_format: str | None = None,
    truth: Mapping[str, Any] | None = None,
    archive: Any = None,
) -> dict[str, Any]:
    """`result.report()` plus what the HTML page shows: the per-unit records (`unit_trace`), the
    final prompt, the formats, the model's budget and the transcript's file (`archive`: the
    run's, to trace units through placeholders summarized later). Existing keys are
    unchanged; the new ones are `input`, `budget`, `unit_records`, `final_prompt`."""
    original = result.original if result.original is not None else result.transcript
    doc: dict[str, Any] = result.report()
    doc["input"] = {
        "path": original.path,
        "line": original.line,
        "format": original.source_format,
    }
    doc["budget"] = result.budget
    doc["unit_records"] = unit_trace(result, truth, archive)
    doc["final_prompt"] = final_prompt(result.transcript, output_format)
    return doc
