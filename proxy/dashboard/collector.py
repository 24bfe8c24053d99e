"""The pipeline listener: each finished chat request becomes a few per-minute counts (in memory,
flushed to the MinuteStore every few seconds off the event loop) and one line of the recent log."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

from ctxwarden.policies.base import Exchange

from .store import MinuteStore

MAX_LABEL_VALUES = 50  # distinct models (and tenants) per process; any further one counts as "other"
MAX_LABEL_LENGTH = 64
RECENT = 50
CONTENT_CHARS = 400
POISONING_BLOCKED = frozenset({"blocked", "input_rejected", "input_dropped"})
POISONING_QUARANTINED = frozenset({"quarantined", "input_quarantined"})
CLASH_DECISIONS = frozenset({"decided", "correction", "user_answer", "unresolved", "ask_user"})  # one each, when made


def printable(value: Any) -> str:
    """At most MAX_LABEL_LENGTH characters, each non-printable one (newline, tab, surrogate…) as "?"."""
    return "".join(c if c.isprintable() else "?" for c in str(value)[:MAX_LABEL_LENGTH])


class Bounded:
    """Label values, at most `limit` distinct ones kept; later newcomers become "other"."""

    def __init__(self, limit: int = MAX_LABEL_VALUES) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def __call__(self, value: Any, empty: str = "-") -> str:
        if not value:
            return empty
        text = printable(value)
        if text in self.seen:
            return text
        if len(self.seen) >= self.limit:
            return "other"
        self.seen.add(text)
        return text


def request_counts(ex: Exchange, outcome: str, model: str, tenant: str) -> dict[tuple[str, str], float]:
    """What one request adds: {(metric, label): value}."""
    out: dict[tuple[str, str], float] = {}

    def add(metric: str, label: str = "", value: float = 1) -> None:
        out[(metric, label)] = out.get((metric, label), 0) + value

    for label in ("", f"model:{model}", f"tenant:{tenant}", f"outcome:{outcome}", f"api:{ex.notes.api}"):
        add("requests", label)
    budget = ex.notes.budget
    if budget is not None:
        after = budget.tokens_before if budget.tokens_after is None else budget.tokens_after
        for label in ("", f"model:{model}", f"tenant:{tenant}"):
            add("tokens_in", label, budget.tokens_before)
            add("tokens_out", label, after)
    poisoning_seen = ex.notes.answer_checked
    for action in ex.actions:
        add("action", action.label[:MAX_LABEL_LENGTH])
        if action.policy == "poisoning":
            poisoning_seen = True
            if action.name in POISONING_BLOCKED:
                add("poisoning_blocked")
            elif action.name in POISONING_QUARANTINED:
                add("poisoning_quarantined")
        elif action.policy == "clash" and action.name in CLASH_DECISIONS:
            add("clash", f"{str(action.detail.get('type', '?'))[:32]}/{action.name}")
        elif action.label == "loops.stop":
            add("loops_stopped", str(action.detail.get("kind", "?"))[:32])
    if poisoning_seen:
        add("poisoning_checked")
    return out


def last_user_text(ex: Exchange) -> str:
    for message in reversed(ex.original_messages or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")[:CONTENT_CHARS]
    return ""


class Collector:
    """`observe(ex, outcome)` is the listener (microseconds, on the event loop); `flush()` blocks."""

    def __init__(self, store: MinuteStore, show_content: bool = False,
                 model_label: Callable[[Any], str] | None = None) -> None:
        self.store = store
        self.show_content = show_content
        # Models neither configured nor in litellm's map count as "other", as on /metrics.
        self.model_label = model_label or (lambda model: model)
        self.models = Bounded()
        self.tenants = Bounded()
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self._pending: dict[tuple[int, str, str], float] = {}
        self._lock = threading.Lock()  # guards _pending and recent
        self._flush_lock = threading.Lock()  # a flush and a read of store + pending never interleave

    def observe(self, ex: Exchange, outcome: str) -> None:
        now = time.time()
        # No model: a request refused before its body could be read ("-", like a request without a tenant).
        model = self.models(self.model_label(ex.model)) if ex.model else "-"
        tenant = self.tenants(ex.tenant)
        minute = int(now // 60)
        counts = request_counts(ex, outcome, model, tenant)
        budget = ex.notes.budget
        line: dict[str, Any] = {
            "id": ex.request_id, "time": round(now, 3), "model": printable(ex.model), "tenant": tenant, "api": ex.notes.api,
            "outcome": outcome,
            "stream": ex.stream, "actions": ex.action_labels(),
            "latency_ms": round((time.perf_counter() - ex.notes.started) * 1000, 1) if ex.notes.started else None,
            "tokens_before": budget.tokens_before if budget else None,
            "tokens_after": (budget.tokens_before if budget.tokens_after is None else budget.tokens_after) if budget else None,
        }
        if self.show_content:
            line["content"] = last_user_text(ex)
        with self._lock:
            for (metric, label), value in counts.items():
                key = (minute, metric, label)
                self._pending[key] = self._pending.get(key, 0) + value
            self.recent.appendleft(line)

    def flush(self) -> None:
        with self._flush_lock:
            with self._lock:
                pending, self._pending = self._pending, {}
            try:
                self.store.add(pending)
            except Exception:
                with self._lock:  # keep the counts for the next try
                    for key, value in pending.items():
                        self._pending[key] = self._pending.get(key, 0) + value
                raise

    def rows(self, since_minute: int, step_minutes: int) -> list[tuple[int, str, str, float]]:
        """The store's rows plus what is not flushed yet, bucketed alike."""
        with self._flush_lock:
            rows = list(self.store.rows(since_minute, step_minutes))
            with self._lock:
                pending = list(self._pending.items())
        for (minute, metric, label), value in pending:
            if minute >= since_minute:
                rows.append((minute - (minute - since_minute) % step_minutes, metric, label, value))
        return rows

    def recent_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.recent)
