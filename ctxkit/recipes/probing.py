"""The fidelity probes (`fidelity.probes`) as the agent replay and the forensics score them: the
same probes and the same score, with one allowance for how agents write paths.

Artifact probes key on the path as the tools used it, usually absolute
(`/Users/me/app/frontend/src/App.tsx`). Agents' summaries name files relative to the working
directory (`frontend/src/App.tsx`), which names the same file for the model that reads it. So an
artifact probe under the session's working directory also counts as kept when the context names
it relative to that directory (and, for an edit, says it was edited).
"""

from __future__ import annotations

from collections.abc import Iterable

from ctxkit.fidelity.probes import Context, Probe, ProbeScore, score
from ctxkit.model import Transcript


def session_cwd(t: Transcript) -> str | None:
    """The working directory the log records (Claude Code `cwd`, opencode `path.cwd`, Codex
    `session_meta` / `turn_context` cwd), or None."""
    for u in t.units:
        raw = u.raw if isinstance(u.raw, dict) else None
        if raw and isinstance(raw.get("cwd"), str) and raw["cwd"].startswith("/"):
            return str(raw["cwd"]).rstrip("/")
        where = (
            (raw.get("info") or {}).get("path")
            if raw and isinstance(raw.get("info"), dict)
            else None
        )
        if (
            isinstance(where, dict)
            and isinstance(where.get("cwd"), str)
            and where["cwd"].startswith("/")
        ):
            return str(where["cwd"]).rstrip("/")  # opencode
    kept = t.metadata.get("kept")
    for rec in (kept.get("records") if isinstance(kept, dict) else None) or []:
        r = rec[2] if isinstance(rec, list) and len(rec) == 3 else None
        payload = r.get("payload") if isinstance(r, dict) else None
        if (
            isinstance(payload, dict)
            and isinstance(payload.get("cwd"), str)
            and payload["cwd"].startswith("/")
        ):
            return str(payload["cwd"]).rstrip("/")
    return None


def score_in(probes: Iterable[Probe], compacted: Transcript, cwd: str | None = None) -> ProbeScore:
    """`fidelity.probes.score`, with artifacts under `cwd` also kept when named relative to it."""
    out = score(probes, compacted)
    if not cwd or not any(p.category == "artifact" for p in out.lost):
        return out
    ctx = Context.of(compacted)
    still: list[Probe] = []
    for p in out.lost:
        rel = (
            p.key[len(cwd) + 1 :]
            if p.category == "artifact" and p.key.startswith(cwd + "/")
            else ""
        )
        if rel and rel in ctx.text and (p.detail != "edited" or ctx.edited(rel)):
            out.kept["artifact"] = out.kept.get("artifact", 0) + 1
        else:
            still.append(p)
    out.lost = still
    return out


__all__ = ["score_in", "session_cwd"]
