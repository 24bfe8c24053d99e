"""What the tools policy tells about a request: actions (x-ctxwarden-actions, span events) and metrics."""

from __future__ import annotations

import json
import logging

from ..base import BasePolicy, Exchange
from ..messages import Tool
from .ranking import ToolSetIndex
from .selection import Selection
from .text import tool_name

log = logging.getLogger("ctxwarden.tools")


def report_selection(policy: BasePolicy, ex: Exchange, tools: list[Tool], s: Selection) -> None:
    metrics = policy.services.metrics
    before = int(s.tool_tokens.sum())
    after = int(s.tool_tokens[s.kept].sum()) if s.kept else 0
    policy.record(ex, "confusion", tool_count=len(tools), threshold=policy.config.max_tools, tool_tokens=before)
    metrics.add("ctxwarden.tools.confusion", 1, model=ex.model)
    if s.degraded:
        policy.record(ex, "degraded", reason=s.degraded)
    if s.catalog.store_error:
        policy.record(ex, "store_failed", error=s.catalog.store_error)
    if s.catalog.embedded:
        policy.record(ex, "catalog_add", tools=s.catalog.embedded)
    if s.skipped:
        policy.record(ex, "skipped", reason=s.skipped)
    if len(s.kept) < len(tools):
        policy.record(
            ex, "filter", tools_in=len(tools), tools_out=len(s.kept), kept=[str(tool_name(tools[i])) for i in s.kept],
            forced=s.forced, k=s.k, reused=s.k is None, query=s.query, relevance=json.dumps(s.relevance),
            tokens_before=before, tokens_after=after, tokens_saved=before - after,
        )
    if s.change is not None:
        c = s.change
        policy.record(ex, "list_changed", reason=c.reason, added=list(c.added), removed=list(c.removed))
        metrics.add("ctxwarden.tools.list_changes", 1, model=ex.model, reason=c.reason)
    metrics.record("ctxwarden.tools.out", len(s.kept), model=ex.model)
    metrics.record("ctxwarden.tools.saved_tokens", before - after, model=ex.model)
    if s.k is not None:
        metrics.record("ctxwarden.tools.k", s.k, model=ex.model)
        for score in s.relevance.values():
            metrics.record("ctxwarden.tools.relevance", score, model=ex.model)


def warn_uncached(index: ToolSetIndex, share: int) -> None:
    """A tool set whose index is bigger than its cache share is rebuilt at every request (its vectors
    read again: ~200 ms for 525 tools from Chroma): said with the setting that fixes it (once per process)."""
    log.warning("tools: the index of a %d-tool set (%.1f MB) exceeds its cache share (%.1f MB) and is rebuilt at "
                "every request; raise server.cache_mb", len(index.names), index.nbytes / 2**20, share / 2**20)
