"""The process's memory as gauges on /metrics: what it holds resident, and how much of that is the
caches' (their contents by their own sizes, against the `server.cache_mb` budget).

A proxy that has served varied traffic for a while holds more than it did after its first requests:
its caches fill within their budget (by design: each cached analysis is a request's work not done
again), and the heap keeps some of what big bodies needed at their peak. Read side by side, the two
gauges tell those apart from a leak: resident memory that rises while the caches stay level is the
allocator's, resident memory that follows the caches is the budget's (lower `server.cache_mb`).

Read when /metrics is scraped (`Metrics.refresh_with`), never on the request path: summing the caches'
counters takes a few microseconds, reading /proc/self/statm a few more.
"""

from __future__ import annotations

import os

from ctxwarden.policies.cache import cached_bytes

from .metrics import Metrics

RESIDENT = "ctxwarden.process.resident_bytes"
CACHED = "ctxwarden.cache.bytes"
BUDGET = "ctxwarden.cache.budget_bytes"


def resident_bytes() -> int | None:
    """This process's resident set in bytes (Linux's /proc), None where there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def memory_figures(budget_bytes: int) -> dict[str, int | None]:
    """The three figures now, for the dashboard: resident (None where unknown), cached, budget."""
    return {"resident_bytes": resident_bytes(), "cache_bytes": cached_bytes(), "cache_budget_bytes": budget_bytes}


def memory_gauges(budget_bytes: int):
    """A refresher for `Metrics.refresh_with` that sets the three gauges (resident only where known)."""

    def refresh(metrics: Metrics) -> None:
        figures = memory_figures(budget_bytes)
        if figures["resident_bytes"] is not None:
            metrics.gauge(RESIDENT, figures["resident_bytes"])
        metrics.gauge(CACHED, figures["cache_bytes"])
        metrics.gauge(BUDGET, budget_bytes)

    return refresh
