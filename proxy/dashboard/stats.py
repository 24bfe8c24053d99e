"""GET /admin/stats: the dashboard's figures over a window, from the per-minute rows."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Callable

Price = Callable[[str], float | None]  # model → USD per input token, None when unknown

# window → (minutes covered, minutes per bucket)
WINDOWS = {"1h": (60, 1), "1d": (24 * 60, 15), "1w": (7 * 24 * 60, 120)}


def window_range(window: str, now: float | None = None) -> tuple[int, int, int]:
    """(first minute, step in minutes, number of buckets) of a window ending with the current minute."""
    span, step = WINDOWS[window]
    current = int((now if now is not None else time.time()) // 60)
    buckets = span // step
    first = current - buckets * step + 1
    return first, step, buckets


def summarize(rows: list[tuple[int, str, str, float]], window: str, now: float | None = None) -> dict[str, Any]:
    """The series and totals of every metric: {"buckets": [...], "totals": {(metric, label): n}, "series": ...}."""
    first, step, n = window_range(window, now)
    totals: dict[tuple[str, str], float] = defaultdict(float)
    series: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0] * n)
    for minute, metric, label, value in rows:
        slot = (minute - first) // step
        if 0 <= slot < n:
            totals[(metric, label)] += value
            series[(metric, label)][slot] += value
    return {"first": first, "step": step, "n": n, "totals": totals, "series": series}


def _by(totals: dict[tuple[str, str], float], metric: str, prefix: str = "") -> dict[str, float]:
    out = {label[len(prefix):]: v for (m, label), v in totals.items() if m == metric and label and label.startswith(prefix)}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _tokens_by(totals: dict[tuple[str, str], float], prefix: str) -> dict[str, dict[str, float]]:
    received, forwarded = _by(totals, "tokens_in", prefix), _by(totals, "tokens_out", prefix)
    return {k: {"received": v, "forwarded": forwarded.get(k, 0.0), "saved": v - forwarded.get(k, 0.0)}
            for k, v in received.items()}


def cost_saved(by_model: dict[str, dict[str, float]], price: Price | None) -> float | None:
    """Tokens saved × the model's input price, summed over the models with a known price (each
    model's share is added to its row as `cost_saved_usd`); None when no model has a price."""
    total: float | None = None
    for model, row in by_model.items():
        per_token = price(model) if price else None
        row["cost_saved_usd"] = None if per_token is None else round(row["saved"] * per_token, 6)
        if per_token is not None:
            total = (total or 0.0) + row["saved"] * per_token
    return None if total is None else round(total, 6)


def build(rows: list[tuple[int, str, str, float]], window: str, *, alert_rate: float | None,
          min_samples: int = 1, now: float | None = None, price: Price | None = None) -> dict[str, Any]:
    s = summarize(rows, window, now)
    totals, series, n = s["totals"], s["series"], s["n"]
    zero = [0.0] * n

    def line(metric: str, label: str = "") -> list[float]:
        return series[(metric, label)] if (metric, label) in series else zero

    requests = totals[("requests", "")]
    received, forwarded = totals[("tokens_in", "")], totals[("tokens_out", "")]
    checked, blocked = totals[("poisoning_checked", "")], totals[("poisoning_blocked", "")]
    rate = blocked / checked if checked else 0.0
    actions = _by(totals, "action")
    by_policy: dict[str, float] = defaultdict(float)
    for label, v in actions.items():
        by_policy[label.split(".", 1)[0]] += v
    clashes = _by(totals, "clash")
    by_type: dict[str, float] = defaultdict(float)
    by_resolution: dict[str, float] = defaultdict(float)
    for label, v in clashes.items():
        kind, _, resolution = label.partition("/")
        by_type[kind] += v
        by_resolution[resolution] += v
    tokens_by_model = _tokens_by(totals, "model:")
    return {
        "window": window,
        "step_s": s["step"] * 60,
        "buckets": [(s["first"] + i * s["step"]) * 60 for i in range(n)],
        "requests": {
            "total": requests, "per_minute": round(requests / (n * s["step"]), 3), "series": line("requests"),
            "by_model": _by(totals, "requests", "model:"), "by_tenant": _by(totals, "requests", "tenant:"),
            "by_outcome": _by(totals, "requests", "outcome:"), "by_api": _by(totals, "requests", "api:"),
        },
        "tokens": {
            "received": received, "forwarded": forwarded, "saved": received - forwarded,
            "series": {"received": line("tokens_in"), "forwarded": line("tokens_out")},
            "by_model": tokens_by_model, "by_tenant": _tokens_by(totals, "tenant:"),
        },
        "cost_saved_usd": cost_saved(tokens_by_model, price),
        "actions": {"total": actions, "by_policy": dict(by_policy),
                    "series": {label: line("action", label) for label in list(actions)[:8]}},
        "poisoning": {
            "checked": checked, "blocked": blocked, "quarantined": totals[("poisoning_quarantined", "")],
            "blocked_rate": round(rate, 4), "alert_rate": alert_rate,
            "alert": alert_rate is not None and checked >= min_samples and rate > alert_rate,
            "series": {"checked": line("poisoning_checked"), "blocked": line("poisoning_blocked"),
                       "quarantined": line("poisoning_quarantined")},
        },
        "clashes": {"total": sum(clashes.values()), "by_type": dict(by_type), "by_resolution": dict(by_resolution),
                    "by_type_and_resolution": clashes},
        "loops": {"stopped": sum(_by(totals, "loops_stopped").values()), "by_kind": _by(totals, "loops_stopped")},
    }
