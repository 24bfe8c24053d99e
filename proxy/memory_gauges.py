"""The process's memory as gauges on /metrics: what it holds resident, and how much of that is the
caches' (their contents by their own sizes, against the `server.cache_mb` budget).

A proxy that has served varied traffic for a while holds more than it did after its first requests:
its caches fill within their budget (by design: each cached analysis is a request's work not done
again), and the heap keeps some of what big bodies needed at their peak. Read side by side, the two
gauges tell those apart from a leak: resident memory that rises while the caches stay level is the
allocator's, resident memory that follows the caches is the budget's (lower `server.cache_mb`).

Read when /metrics is scraped (`Metrics.refresh_with`), never on the request path: summing the caches'
counters takes a few microseconds, reading /proc/self/status a few more.
"""

from __future__ import annotations

from ctxwarden.policies.cache import cache_budget_bytes, cached_bytes

from .metrics import Metrics
from .processes import resident_kb

RESIDENT = "ctxwarden.process.resident_bytes"
CACHED = "ctxwarden.cache.bytes"
BUDGET = "ctxwarden.cache.budget_bytes"


def resident_bytes() -> int | None:
    """This process's resident set in bytes, None where there is no /proc to read it from."""
    try:
        kb = resident_kb("self")
    except OSError:
        return None
    return None if kb is None else kb * 1024


def memory_figures() -> dict[str, int | None]:
    """The three figures now, for the dashboard: resident (None where unknown), cached, budget."""
    return {"resident_bytes": resident_bytes(), "cache_bytes": cached_bytes(), "cache_budget_bytes": cache_budget_bytes()}


def refresh_memory_gauges(metrics: Metrics) -> None:
    """For `Metrics.refresh_with`: set the three gauges (resident only where known)."""
    figures = memory_figures()
    if figures["resident_bytes"] is not None:
        metrics.gauge(RESIDENT, figures["resident_bytes"])
    metrics.gauge(CACHED, figures["cache_bytes"])
    metrics.gauge(BUDGET, figures["cache_budget_bytes"])
