"""The words simulated transcripts draw on: nouns, verbs and names for generated code and
prose, emoji, the needle kinds and the faker locales."""

from __future__ import annotations

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
