"""The `history` policy: detect distraction (too much history) and compress it, cache-stably.

Detection: the history (messages after the system prompt) over `max_messages`
or `max_tokens` is a distraction, MEDIUM, or HIGH beyond twice a limit; it is reported as an
action, a metric and a warning log.

Mitigation, while distracted or when the budget asks for compression (`ex.pressure`):
1. trim units older than `max_age_s` (only when the client sends timestamps);
2. summarize the oldest span into one summary message: the system prompt stays first and
   verbatim, the last `keep_recent` messages (and the current user message) stay verbatim,
   tool-call exchanges are summarized whole. Summaries are blocks cached by the hash of the span
   they cover (blocks.py): the next turn forwards the same system + summary prefix with no
   summarizer call, until the verbatim tail outgrows its budget; then a new block is appended and
   the earlier ones stay as they were. Too many blocks are merged into one (`max_summaries`);
3. under budget pressure: `compress` summarizes further until the request fits `ex.target_tokens`
   (merging the summaries under a cap as a last resort); `aggressive` summarizes everything but
   the system prompt and the current turn. Tool results are the archive policy's, which runs next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from ..base import BasePolicy, Exchange, PolicyConfig, Services, Verdict
from ..cache import LRU
from ..messages import Message, last_user_index, system_prefix_length
from ..text.tokens import REPLY_PRIMING
from .blocks import SummaryBlock, SummaryIndex, span_key
from .layout import Body, Segment, assemble, layout_size, walk
from .recall import ensure_recall_tool, recall_recorder
from .scratchpad import refs_in, shared_scratchpad, span_ref
from .summarizer import Summarizer, SummaryResult, render_transcript
from .timestamps import message_times

log = logging.getLogger("ctxwarden.history")


class HistoryConfig(PolicyConfig):
    max_messages: int = Field(20, ge=1)
    max_tokens: int = Field(2000, ge=1)
    keep_recent: int = Field(6, ge=0)
    max_age_s: float = Field(3600, gt=0)
    summarizer_model: str | None = None
    summarizer_timeout_s: float = Field(20, gt=0)
    block_min_messages: int = Field(8, ge=1)
    block_min_tokens: int = Field(1000, ge=1)
    max_summaries: int = Field(4, ge=1)
    archive_spans: bool = True
    fallback_retry_s: float = Field(300, ge=0)
    cache_blocks: int = Field(20_000, ge=10)


@dataclass
class Distraction:
    messages: int
    tokens: int
    severity: str  # MEDIUM | HIGH


@dataclass
class _Work:
    """One request's layout while it is being decided."""

    ex: Exchange
    system: list[Message]
    body: Body
    segments: list[Segment]
    role: str
    tenant: str | None
    fixed_tokens: int = 0  # system prompt + tools + reply priming: what no layout changes
    new_keys: set[str] = field(default_factory=set)  # blocks made (not reused) for this request
    notes: dict[str, Any] = field(default_factory=dict)

    def messages(self) -> list[Message]:
        return assemble(self.system, self.body, self.segments, self.role)


def detect(body: Body, cfg: HistoryConfig) -> Distraction | None:
    messages, tokens = len(body.messages), sum(body.tokens)
    if messages <= cfg.max_messages and tokens <= cfg.max_tokens:
        return None
    high = messages > 2 * cfg.max_messages or tokens > 2 * cfg.max_tokens
    return Distraction(messages, tokens, "HIGH" if high else "MEDIUM")


class HistoryPolicy(BasePolicy):
    name = "history"
    Config = HistoryConfig

    def __init__(self, config: HistoryConfig, services: Services) -> None:
        super().__init__(config, services)
        self.index = SummaryIndex(config.cache_blocks)
        self.summarizer = Summarizer(services, config.summarizer_model, config.summarizer_timeout_s)
        self.scratchpad = shared_scratchpad(services)
        self._tokens: LRU[tuple[str, str], int] = LRU(100_000)  # shared by concurrent requests' threads
        self._inflight: dict[str, asyncio.Future] = {}  # span key → the summary being made for it

    # ------------------------------------------------------------------ entry

    async def on_request(self, ex: Exchange) -> Verdict | None:
        cfg: HistoryConfig = self.config
        started = time.perf_counter()
        n_sys = system_prefix_length(ex.messages)
        body_messages = ex.messages[n_sys:]
        if not body_messages:
            return None
        times = message_times(body_messages, ex.original_messages, ex.headers)
        body = await asyncio.to_thread(Body.build, body_messages, self._counter(ex), times)
        distraction = detect(body, cfg)
        if distraction:
            self._report(ex, distraction)
        if distraction is None and ex.pressure == "none":
            return None
        role = ex.messages[0].get("role", "system") if n_sys else "system"
        work = await self._layout(ex, ex.messages[:n_sys], body, role, times)
        await self._finish(ex, work, started)
        return None

    async def aclose(self) -> None:
        """Persist archived texts still waiting for Chroma."""
        await self.scratchpad.flush()

    def _counter(self, ex: Exchange):
        """Token counts: the budget's per-request memo (same dicts), then ours by message key (the
        shared counter re-hashes a message's JSON on every call), then the counter itself."""
        model = ex.model
        memo = ex.notes.token_memo

        def count(message: Message, key: str) -> int:
            seen = memo.get(id(message))
            if seen is not None and seen[0] is message:
                return seen[1]
            cache_key = (model, key)
            hit = self._tokens.get(cache_key)
            if hit is None:
                hit = self.services.tokens.count_message(message, model)
                self._tokens.put(cache_key, hit)
            return hit

        return count

    def _report(self, ex: Exchange, d: Distraction) -> None:
        cfg: HistoryConfig = self.config
        self.record(ex, "distraction", severity=d.severity, messages=d.messages, tokens=d.tokens,
                    max_messages=cfg.max_messages, max_tokens=cfg.max_tokens)
        self.services.metrics.add("ctxwarden.history.distraction", 1, severity=d.severity)
        log.warning(
            "DISTRACTION severity=%s request=%s: history of %d messages / %d tokens exceeds %d messages / %d tokens; "
            "recommended action: summarize or slide the window", d.severity, ex.request_id, d.messages, d.tokens,
            cfg.max_messages, cfg.max_tokens,
        )

    # ------------------------------------------------------------------ layout

    async def _layout(self, ex: Exchange, system: list[Message], body: Body, role: str, times: list) -> _Work:
        cfg: HistoryConfig = self.config
        cutoff = time.time() - cfg.max_age_s if any(t is not None for t in times) else None
        last_user = last_user_index(body.messages)
        pinned = body.unit_starting_at(last_user) if last_user >= 0 else None
        if ex.pressure == "aggressive" and pinned is not None:
            protect, pin = pinned, None  # everything before the current turn may go
        else:
            protect = body.protected_from(cfg.keep_recent)
            pin = pinned if pinned is not None and pinned < protect else None
        segments = await asyncio.to_thread(walk, body, self.index, ex.tenant, protect, pin, cutoff)
        tokens = self.services.tokens
        work = _Work(ex, system, body, segments, role, ex.tenant,
                     fixed_tokens=sum(tokens.count_message(m, ex.model) for m in system)
                     + tokens.count_tools(ex.tools, ex.model) + REPLY_PRIMING)
        await self._refresh_fallbacks(work)
        await self._summarize_if_distracted(work)
        if ex.pressure != "none":
            await self._summarize_to_target(work, everything=ex.pressure == "aggressive")
        if sum(1 for s in work.segments if s.kind == "block") > cfg.max_summaries:
            await self._merge(work, cap=None)
        if ex.pressure != "none" and self._over_target(work):
            await self._merge(work, cap=self._room_for_summaries(work))
        return work

    def _history_size(self, work: _Work) -> tuple[int, int]:
        count = lambda b: self.services.tokens.count_message(b.message(work.role), work.ex.model)  # noqa: E731
        return layout_size(work.body, work.segments, count)

    def _request_tokens(self, work: _Work) -> int:
        return work.fixed_tokens + self._history_size(work)[1]

    def _over_target(self, work: _Work) -> bool:
        target = work.ex.target_tokens
        return target is not None and self._request_tokens(work) > target

    async def _summarize_if_distracted(self, work: _Work) -> None:
        """New blocks only when the forwarded history is still distracting and the unsummarized
        part is big enough to be worth one (fewer, larger blocks → fewer summarizer calls)."""
        cfg: HistoryConfig = self.config
        messages, tokens = self._history_size(work)
        if messages <= cfg.max_messages and tokens <= cfg.max_tokens:
            return
        runs = [s for s in work.segments if s.kind == "run" and work.body.message_count(s.start, s.end) >= 2]
        run_messages = sum(work.body.message_count(s.start, s.end) for s in runs)
        run_tokens = sum(work.body.token_count(s.start, s.end) for s in runs)
        if run_messages >= cfg.block_min_messages or run_tokens >= cfg.block_min_tokens:
            await self._summarize_runs(work, runs)

    async def _summarize_to_target(self, work: _Work, everything: bool) -> None:
        """Under pressure: summarize the remaining runs, oldest first, until the request fits."""
        for seg in [s for s in work.segments if s.kind == "run"]:
            if not everything and not self._over_target(work):
                return
            await self._summarize_runs(work, [seg])

    async def _summarize_runs(self, work: _Work, runs: list[Segment]) -> None:
        blocks = await asyncio.gather(*(self._block_for(work, seg) for seg in runs))
        for seg, block in zip(runs, blocks):
            seg.kind, seg.block = "block", block

    async def _block_for(self, work: _Work, seg: Segment) -> SummaryBlock:
        """The block for a run: cached, being made by a concurrent request (shared), or made now."""
        start, end = work.body.span(seg.start, seg.end)
        key = span_key(work.tenant, work.body.hashes[start:end])
        cached = self.index.get(key)
        if cached is not None:
            return cached
        pending = self._inflight.get(key)
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except Exception:
                pass  # the other request failed to make it: make it here
        task = asyncio.ensure_future(self._make_block(work, key, start, end))
        self._inflight[key] = task
        try:
            return await asyncio.shield(task)
        finally:
            if self._inflight.get(key) is task:
                del self._inflight[key]

    async def _make_block(self, work: _Work, key: str, start: int, end: int) -> SummaryBlock:
        body = work.body
        messages = body.messages[start:end]
        source_tokens = sum(body.tokens[start:end])
        result = await self.summarizer.span(messages, work.ex, source_tokens)
        block = SummaryBlock(key, body.hashes[start], end - start, result.text, result.mode, source_tokens,
                             self._archive_span(work, key, messages))
        self._note_result(work, result)
        self.index.put(work.tenant, block)
        work.new_keys.add(key)
        return block

    def _archive_span(self, work: _Work, key: str, messages: list[Message]) -> tuple[str, ...]:
        cfg: HistoryConfig = self.config
        if not cfg.archive_spans or self.services.store is None:
            return ()
        ref = span_ref(key)
        self.scratchpad.put(work.tenant, ref, render_transcript(messages, limit=10**9), kind="history_span",
                            messages=len(messages))
        return (ref,)

    def _note_result(self, work: _Work, result: SummaryResult) -> None:
        if result.mode == "fallback":
            self.record(work.ex, "summarizer_fallback", model=self.config.summarizer_model, error=result.error or "")
        work.notes.setdefault("modes", set()).add(result.mode)

    async def _refresh_fallbacks(self, work: _Work) -> None:
        """A summary made by the fallback after the LLM failed is retried after `fallback_retry_s`."""
        cfg: HistoryConfig = self.config
        if not cfg.summarizer_model:
            return
        now = time.time()
        for seg in work.segments:
            block = seg.block
            if seg.kind != "block" or block is None or block.mode != "fallback" or now - block.created < cfg.fallback_retry_s:
                continue
            start, end = work.body.span(seg.start, seg.end)
            result = await self.summarizer.span(work.body.messages[start:end], work.ex, block.source_tokens)
            self._note_result(work, result)
            fresh = SummaryBlock(block.key, block.first, block.n_messages, result.text, result.mode,
                                 block.source_tokens, block.refs)
            self.index.put(work.tenant, fresh)
            seg.block = fresh
            work.new_keys.add(fresh.key)

    # ------------------------------------------------------------------ merging

    def _room_for_summaries(self, work: _Work) -> int:
        """Tokens the summaries may take for the request to fit its target."""
        target = work.ex.target_tokens or 0
        summaries = sum(
            self.services.tokens.count_message(s.block.message(work.role), work.ex.model)
            for s in work.segments if s.kind == "block" and s.block is not None
        )
        return max(64, target - (self._request_tokens(work) - summaries))

    async def _merge(self, work: _Work, cap: int | None) -> None:
        """Merge the longest sequence of adjacent blocks (trimmed units between them included) into
        one block: a roll-up (cap None) or, under pressure, a summary held to `cap` tokens."""
        best: tuple[int, int, int] | None = None  # (blocks, first segment, end segment)
        i = 0
        segs = work.segments
        while i < len(segs):
            j = i
            while j < len(segs) and segs[j].kind in ("block", "trim"):
                j += 1
            blocks = sum(1 for s in segs[i:j] if s.kind == "block")
            if blocks >= (1 if cap is not None else 2) and (best is None or blocks > best[0]):
                best = (blocks, i, j)
            i = max(j, i + 1)
        if best is None:
            return
        _, i, j = best
        while segs[j - 1].kind == "trim":
            j -= 1
        while segs[i].kind == "trim":
            i += 1
        children = [s.block for s in segs[i:j] if s.kind == "block" and s.block is not None]
        start, end = work.body.span(segs[i].start, segs[j - 1].end)
        key = span_key(work.tenant, work.body.hashes[start:end])
        merged = self.index.get(key)
        if cap is not None:  # the cap is for the whole message: the header and framing take their share
            refs = tuple(r for c in children for r in c.refs)
            frame = SummaryBlock(key, "", end - start, "", "merged", 0, refs).message(work.role)
            cap = max(16, cap - self.services.tokens.count_message(frame, work.ex.model) - 1)
        if merged is None or (cap is not None and self.services.tokens.count_text(merged.text, work.ex.model) > cap):
            merged = await self._merged_block(work, children, key, work.body.hashes[start], end - start, cap)
        segs[i:j] = [Segment("block", segs[i].start, segs[j - 1].end, merged)]
        self.record(work.ex, "merge" if cap is None else "cap", blocks=len(children), max_tokens=cap or 0)

    async def _merged_block(self, work: _Work, children: list[SummaryBlock], key: str, first: str, n: int,
                            cap: int | None) -> SummaryBlock:
        source_tokens = sum(c.source_tokens for c in children)
        result = await self.summarizer.merge([c.text for c in children], work.ex, source_tokens, cap)
        self._note_result(work, result)
        refs = tuple(r for c in children for r in c.refs)
        block = SummaryBlock(key, first, n, result.text, "merged", source_tokens, refs)
        self.index.put(work.tenant, block)
        work.new_keys.add(key)
        return block

    # ------------------------------------------------------------------ result

    async def _finish(self, ex: Exchange, work: _Work, started: float) -> None:
        new_messages = work.messages()
        if len(new_messages) == len(ex.messages) and all(a is b for a, b in zip(new_messages, ex.messages)):
            return
        before = work.fixed_tokens + sum(work.body.tokens)
        after = self._request_tokens(work)
        trimmed = [s for s in work.segments if s.kind == "trim"]
        if not trimmed and after >= before:
            # Short messages full of names and numbers can summarize to more than they were:
            # forwarding that would cost tokens and the cache prefix for nothing.
            self.record(ex, "summary_not_smaller", tokens_before=before, tokens_after=after)
            return
        if trimmed:
            n = sum(work.body.message_count(s.start, s.end) for s in trimmed)
            freed = sum(work.body.token_count(s.start, s.end) for s in trimmed)
            self.record(ex, "trim", messages=n, tokens_freed=freed, max_age_s=self.config.max_age_s)
            log.info("request %s: trimmed %d messages older than %ss (%d tokens)", ex.request_id, n,
                     self.config.max_age_s, freed)
        blocks = [s for s in work.segments if s.kind == "block"]
        if blocks:
            covered = sum(work.body.message_count(s.start, s.end) for s in blocks)
            new = sum(1 for s in blocks if s.block is not None and s.block.key in work.new_keys)
            self.record(ex, "summarize", blocks=len(blocks), new_blocks=new, reused_blocks=len(blocks) - new,
                        messages_summarized=covered, tokens_before=before, tokens_after=after,
                        non_text_parts=_non_text_parts(work.body, blocks),  # images etc.: "[image]" in the summary
                        mode=",".join(sorted(work.notes.get("modes", {"cached"}))))
        ex.messages = new_messages
        ex.notes.history = {"tokens_before": before, "tokens_after": after, "blocks": len(blocks)}
        if refs_in(m for s in blocks if s.block for m in [s.block.message(work.role)]):
            ensure_recall_tool(ex, self.scratchpad, recall_recorder(self.services))
        metrics = self.services.metrics
        mode = ex.pressure if ex.pressure != "none" else "distraction"
        metrics.add("ctxwarden.compression.triggered", 1, policy=self.name, mode=mode)
        metrics.record("ctxwarden.compression.tokens_freed", max(0, before - after), policy=self.name)
        metrics.record("ctxwarden.compression.ratio", before / max(1, after), policy=self.name)
        metrics.record("ctxwarden.compression.duration_ms", (time.perf_counter() - started) * 1000, policy=self.name)


def _non_text_parts(body: Body, segments: list[Segment]) -> int:
    """Images, audio and files inside summarized messages (the summary marks each one)."""
    count = 0
    for seg in segments:
        start, end = body.span(seg.start, seg.end)
        for msg in body.messages[start:end]:
            content = msg.get("content")
            if isinstance(content, list):
                count += sum(1 for p in content if isinstance(p, dict) and p.get("type") not in ("text", "refusal"))
    return count
