"""The `history` policy: detect distraction (too much history) and compact it at rare, frozen events.

Detection (RF-006): the history (messages after the system prompt) over `max_messages` or
`max_tokens` is a distraction, MEDIUM, or HIGH beyond twice a limit; it is reported as an action
and a metric on every request, and as a warning log once per session.

Mitigation is cache-stable. Providers' prompt caches hit only while each request starts with the
previous one's bytes, so the history is rewritten only at compaction events (events.py): when the
budget's `compress` mark is passed (compacting down to `target`), when a distracting history has
enough to compact (`event_min_exchanges` / `event_min_tokens`), or when units grow older than
`max_age_s`. An event turns everything before the verbatim tail (the last `keep_recent`
messages; the current user message stays too) into summary blocks (compose.py: a summary of what
was said, a digest per tool result, refs to the archived originals), forwarded in user turns, never
as a late system message (placement.py). Blocks are frozen: later
requests forward them byte for byte and append after them. Which events happened is replayed
from the content on every request, so a restart or another replica forwards the same bytes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from pydantic import Field

from ..base import BasePolicy, Exchange, PolicyConfig, Services, Verdict, run_cpu
from ..cache import LRU
from ..deadline import Deadline, OverBudget
from ..messages import Message, heavy, message_token_list, system_prefix_length, tools_tokens
from ..text.tokens import REPLY_PRIMING
from .blocks import BlockCache, SummaryBlock, span_key
from .columns import Columns
from .compose import Sizing, UnitCosts, mentions_after, result_lines, split_span
from .events import Marks, Plan, PlannedSegment, Replay, resumed_plan
from .forwarded import Front, front_of
from .layout import Body
from .placement import Gap, Item, Note, place
from .recall import RECALL_TOOL, ensure_recall_tool, recall_recorder
from .scratchpad import NO_OWNER, REF_RE, owner_of, refs_in, shared_scratchpad, span_ref
from .summarizer import Summarizer, SummaryResult, render_transcript
from .timestamps import message_times

log = logging.getLogger("ctxwarden.history")
WRITE_WAIT_S = 2.0  # an event waits this long, at most, for its archive's write (HistoryPolicy._written)
WARNED_SESSIONS = 10_000  # sessions whose distraction was logged (least recently used forgotten first)


class HistoryConfig(PolicyConfig):
    max_messages: int = Field(20, ge=1)
    max_tokens: int = Field(2000, ge=1)
    keep_recent: int = Field(6, ge=0)
    # A budget event (the request at the compress mark) also compacts the verbatim tail down to this share
    # of the window, the newest exchange always kept: in a tight window it is what makes events rare
    tail_share: float = Field(0.10, gt=0, le=1)
    # ... and rolls the summary blocks up to this share of the window when they hold more
    blocks_share: float = Field(0.05, gt=0, le=1)
    max_age_s: float = Field(3600, gt=0)
    summarizer_model: str | None = None
    summarizer_timeout_s: float = Field(20, gt=0)
    event_min_exchanges: int = Field(14, ge=1)
    event_min_tokens: int = Field(32_000, ge=1)
    summary_ratio: float = Field(1.0, gt=0, le=1)
    summary_max_tokens: int = Field(2000, ge=40)
    digest_ratio: float = Field(0.08, gt=0, le=1)
    digest_max_tokens: int = Field(250, ge=40)
    max_summaries: int = Field(6, ge=1)
    archive_spans: bool = True
    fallback_retry_s: float = Field(300, ge=0)
    cache_blocks: int = Field(20_000, ge=10)
    # The work of one request (the extractive summaries of a long history replayed: ~0.3 ms a message);
    # past it the request goes on unchanged, and the blocks made so far are cached for the next try.
    # Not applied with summarizer_model (its calls have summarizer_timeout_s). None: no limit.
    budget_ms: float | None = Field(2000, gt=0)

    def sizing(self) -> Sizing:
        return Sizing(self.summary_ratio, self.summary_max_tokens, self.digest_ratio, self.digest_max_tokens,
                      roll_up_max_tokens=2 * self.summary_max_tokens)


@dataclass
class Distraction:
    messages: int
    tokens: int
    severity: str  # MEDIUM | HIGH


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
        self.blocks = BlockCache(config.cache_blocks)
        self.summarizer = Summarizer(services, config.summarizer_model, config.summarizer_timeout_s)
        self.scratchpad = shared_scratchpad(services)
        self._inflight: dict[str, asyncio.Future] = {}  # block key → the block being made for it
        # Per session, where the planner's replay of the last request stood (events.Replay)
        self._replays: LRU[tuple[str | None, str], Replay] = LRU(
            WARNED_SESSIONS, max_bytes=8 * 2**20, sizeof=lambda key, replay: len(key[1]) + replay.bytes())
        # Per session, the planner's per-unit view of the last body (columns.py: Columns.bytes)
        self._columns: LRU[tuple[str | None, str], Columns] = LRU(
            WARNED_SESSIONS, max_bytes=8 * 2**20, sizeof=lambda key, view: len(key[1]) + view.bytes())
        # Per session, the forwarded messages in front of the verbatim tail since the last event (forwarded.py)
        self._fronts: LRU[tuple[str | None, str], Front] = LRU(
            WARNED_SESSIONS, max_bytes=8 * 2**20, sizeof=lambda key, front: len(key[1]) + front.size)
        self._warned: LRU[tuple[str | None, str], bool] = LRU(  # sessions told of their distraction; a session id
            WARNED_SESSIONS, max_bytes=4 * 2**20, sizeof=lambda key, _: 250 + len(key[1]))  # may be 64 KB long

    # ------------------------------------------------------------------ entry

    async def on_request(self, ex: Exchange) -> Verdict | None:
        cfg: HistoryConfig = self.config
        started = time.perf_counter()
        n_sys = system_prefix_length(ex.messages)
        body_messages = ex.messages[n_sys:]
        if not body_messages:
            return None
        times = message_times(ex.messages, ex.original_messages, ex.headers)[n_sys:]
        body = await run_cpu(heavy(ex), Body.of_request, ex.messages, n_sys, self.services.tokens, ex.model, times,
                             self._columns.get(ex.session_key))
        if body.columns is not None:
            self._columns.put(ex.session_key, body.columns)
        distraction = detect(body, cfg)
        if distraction:
            self._report(ex, distraction)
        if len(body_messages) < 2:  # only the current message, which always stays verbatim: nothing to plan
            return None
        system = ex.messages[:n_sys]
        system_tokens = sum(message_token_list(self.services.tokens, system, ex.model))
        fixed = self._fixed_tokens(ex, system_tokens)
        layout = await run_cpu(heavy(ex), self._plan, ex, body, fixed, times.count(None) < len(times))
        if layout.frontier == 0:
            return None
        made: list[str] = []
        front = self._fronts.get(ex.session_key)
        scope = (owner_of(ex), ex.model)  # whose archive the blocks name; the tokenizer their digests were sized by
        if front is None or not front.matches(layout.segments, scope, body.hashes):
            try:
                front = await self._front(ex, body, layout, scope, made, started)
            except OverBudget as exc:  # invariant 7: forwarded as it came; what was made is cached for the next turn
                self.record(ex, "skipped_budget", reason=str(exc), budget_ms=cfg.budget_ms, messages=len(body_messages),
                            new_blocks=len(made))
                self.services.metrics.add("ctxwarden.history.skipped_budget", 1)
                return None
        if made:  # an event: its archived texts are written before the refs to them are forwarded, and
            await self._written()  # Chroma's commit (holding the GIL) is not left to the next steps
        ex.messages = [*system, *front.messages(body.messages), *body.messages[front.tail_from:]]
        forwarded = front.tokens + sum(body.tokens[front.tail_from:])  # the tail: counted with the body
        ex.notes.message_tokens = (list(ex.messages), system_tokens + forwarded)
        self._finish(ex, body, layout, fixed, made, started, front, forwarded)
        return None

    async def _front(self, ex: Exchange, body: Body, layout: Plan, scope: tuple, made: list[str],
                     started: float) -> Front:
        """The forwarded messages in front of the verbatim tail (forwarded.py), made from the
        planned segments and kept for the session's next requests (not with an LLM summarizer: a
        block it failed to write is retried later)."""
        cfg: HistoryConfig = self.config
        budget_s = cfg.budget_ms / 1000 if cfg.budget_ms and not cfg.summarizer_model else None
        deadline = Deadline(None if budget_s is None else budget_s - (time.perf_counter() - started), ex.notes.cancelled)
        with self.scratchpad.gathered():  # what new blocks archive goes in one write, awaited by the caller
            frozen = [await self._materialize(ex, body, seg, made, deadline) for seg in layout.segments]
        front = front_of(layout.segments, scope, body, [m for part in frozen for m in part], layout.frontier,
                         lambda placed: sum(message_token_list(self.services.tokens, placed, ex.model)))
        if not cfg.summarizer_model:
            self._fronts.put(ex.session_key, front)
        return front

    async def _written(self) -> None:
        """Wait for the archive's writes, at most WRITE_WAIT_S: a store that is slow to commit delays
        the event that long, then the write goes on behind the request (as every write did before)."""
        try:
            await asyncio.wait_for(asyncio.shield(self.scratchpad.flush()), WRITE_WAIT_S)
        except asyncio.TimeoutError:
            self.services.metrics.add("ctxwarden.scratchpad.slow_writes", 1)

    async def aclose(self) -> None:
        """Persist archived texts still waiting for Chroma."""
        await self.scratchpad.flush()

    def _fixed_tokens(self, ex: Exchange, system_tokens: int) -> int:
        """What no layout changes: the system prompt, the tools (with context_recall, which blocks
        bring along when archiving is on) and the reply priming."""
        recall = [RECALL_TOOL] if self.config.archive_spans and self.services.store is not None else []
        return system_tokens + tools_tokens(self.services.tokens, ex.tools, ex.model, recall) + REPLY_PRIMING

    def _plan(self, ex: Exchange, body: Body, fixed: int, timed: bool) -> Plan:
        cfg: HistoryConfig = self.config
        note = ex.notes.budget
        high = note.compress_at - fixed if note is not None and note.compress_at is not None else None
        low = note.target_at - fixed if note is not None and note.target_at is not None else None
        window = note.window if note is not None and note.window else None
        tail = int(cfg.tail_share * window) if window else None
        blocks = int(cfg.blocks_share * window) if window else None
        marks = Marks(cfg.max_messages, cfg.max_tokens, cfg.keep_recent, cfg.event_min_exchanges, cfg.event_min_tokens,
                      cfg.max_summaries, high, low, cfg.max_age_s if timed else None, tail, blocks)
        costs, sizing, units = UnitCosts.of(body), cfg.sizing(), body.plan_units()

        def read(k: int) -> tuple:  # all the replay reads of units [0, k): the last request's replay resumes if equal
            columns = (units.starts, units.messages, units.tokens, units.is_user, units.ends_request, units.times, costs.said)
            return (marks, sizing, *(tuple(column[:k]) for column in columns), tuple(map(tuple, costs.results[:k])))

        layout, replay = resumed_plan(units, marks, lambda a, b: costs.estimate(sizing, a, b), sizing.roll_up,
                                      self._replays.get(ex.session_key), read)
        if replay is not None:
            self._replays.put(ex.session_key, replay)
        return layout

    def _report(self, ex: Exchange, d: Distraction) -> None:
        """Reported (action, metric) on every request; logged once per session, since a long history
        stays long: a WARNING on every step of an agent would drown the log."""
        cfg: HistoryConfig = self.config
        self.record(ex, "distraction", severity=d.severity, messages=d.messages, tokens=d.tokens,
                    max_messages=cfg.max_messages, max_tokens=cfg.max_tokens)
        self.services.metrics.add("ctxwarden.history.distraction", 1, severity=d.severity)
        key = ex.session_key
        if self._warned.get(key):
            return
        self._warned.put(key, True)
        log.warning(
            "DISTRACTION severity=%s request=%s: history of %d messages / %d tokens exceeds %d messages / %d tokens; "
            "recommended action: summarize or slide the window (logged once per session; counted in "
            "ctxwarden.history.distraction)", d.severity, ex.request_id, d.messages, d.tokens,
            cfg.max_messages, cfg.max_tokens,
        )

    # ------------------------------------------------------------------ blocks

    async def _materialize(self, ex: Exchange, body: Body, seg: PlannedSegment, made: list[str],
                           deadline: Deadline) -> list[Item]:
        """A segment's items: its messages (kept), the block's note (placement.py puts it on the
        user's side), or a gap (trimmed)."""
        if seg.kind == "trim":
            n = body.message_count(seg.start, seg.end)
            return [Gap(f"[ctxwarden: {n} earlier message{'s' if n != 1 else ''} older than "
                        f"{self.config.max_age_s:g} s left out]")]
        if seg.kind == "keep":
            start, end = body.span(seg.start, seg.end)
            return body.messages[start:end]
        block = await self._block(ex, body, seg, made, deadline)
        return [Note(block.content())]

    def _key(self, ex: Exchange, body: Body, seg: PlannedSegment) -> str:
        """Span + the event boundary (digests look ahead to it) + the children of a roll-up."""
        start, end = body.span(seg.start, seg.end)
        at_end = body.span(seg.at, seg.at)[0]  # the first message after the event boundary (span handles the end)
        shape = f"{end - start}|{at_end}|" + ",".join(f"{c.kind}{c.start}-{c.end}@{c.at}" for c in seg.children)
        owner = owner_of(ex)  # a block archives its span for one user and task: theirs alone to recall
        scope = [] if owner == NO_OWNER else [f"owner:{owner[0]}\x00{owner[1]}"]
        return span_key(ex.tenant, [*scope, shape, *body.hashes[start:at_end]])

    async def _block(self, ex: Exchange, body: Body, seg: PlannedSegment, made: list[str],
                     deadline: Deadline) -> SummaryBlock:
        """The block for a planned segment: cached, being made by a concurrent request, or made now."""
        deadline.check()
        key = self._key(ex, body, seg)
        cached = self.blocks.get(key)
        if cached is not None and not self._retry_due(cached):
            return cached
        pending = self._inflight.get(key)
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except Exception:
                pass  # the other request failed to make it: make it here
        task = asyncio.ensure_future(self._make(ex, body, seg, key, deadline))
        self._inflight[key] = task
        try:
            block = await asyncio.shield(task)
            made.append(key)
            return block
        finally:
            if self._inflight.get(key) is task:
                del self._inflight[key]

    def _retry_due(self, block: SummaryBlock) -> bool:
        """A summary made by the fallback after the LLM failed is retried after `fallback_retry_s`."""
        cfg: HistoryConfig = self.config
        return bool(cfg.summarizer_model) and block.mode == "fallback" and time.time() - block.created >= cfg.fallback_retry_s

    async def _make(self, ex: Exchange, body: Body, seg: PlannedSegment, key: str, deadline: Deadline) -> SummaryBlock:
        block = await (self._roll_up(ex, body, seg, key, deadline) if seg.children else self._summarize(ex, body, seg, key))
        self.blocks.put(block)
        return block

    async def _roll_up(self, ex: Exchange, body: Body, seg: PlannedSegment, key: str, deadline: Deadline) -> SummaryBlock:
        """One block from the frozen layout it replaces: earlier blocks' texts and kept messages."""
        texts: list[str] = []
        refs: list[str] = []
        source = 0
        for child in seg.children:
            if child.kind == "block":
                block = await self._block(ex, body, child, [], deadline)
                texts.append(block.text)
                refs += block.refs
                source += block.source_tokens
            else:
                start, end = body.span(child.start, child.end)
                texts.append(render_transcript(body.messages[start:end]))
                source += body.token_count(child.start, child.end)
        result = await self.summarizer.merge(texts, ex, source, max(40, seg.tokens - 40))
        self._note_fallback(ex, result)
        return SummaryBlock(key, body.message_count(seg.start, seg.end), result.text, "merged", source, tuple(refs))

    async def _summarize(self, ex: Exchange, body: Body, seg: PlannedSegment, key: str) -> SummaryBlock:
        cfg: HistoryConfig = self.config
        sizing = cfg.sizing()
        start, end = body.span(seg.start, seg.end)
        at_end = body.span(seg.at, seg.at)[0]  # the first message after the event boundary (span handles the end)
        messages = body.messages[start:end]
        said, results = split_span(messages)
        said_tokens = sum(body.tokens[i] for i in range(start, end) if body.messages[i].get("role") != "tool")
        result = await self.summarizer.span(said, ex, said_tokens, sizing.text_budget(said_tokens))
        self._note_fallback(ex, result)
        count = lambda text: self.services.tokens.count_text(text, ex.model)  # noqa: E731
        mentions = mentions_after(body.messages[end:at_end])
        archived = cfg.archive_spans and self.services.store is not None
        lines = await asyncio.to_thread(result_lines, results, sizing, mentions, count, archived)
        refs = self._archive(ex, key, said, results)
        text = result.text + (f"\nTool results:\n{lines}" if lines else "")
        return SummaryBlock(key, end - start, text, result.mode, sum(body.tokens[start:end]), refs)

    def _archive(self, ex: Exchange, key: str, said: list[Message], results: list) -> tuple[str, ...]:
        """Archive the span's transcript and each tool result whole (the recall tool's sources)."""
        cfg: HistoryConfig = self.config
        if not cfg.archive_spans or self.services.store is None:
            return ()
        owner = owner_of(ex)
        for r in results:
            self.scratchpad.put(ex.tenant, r.ref, r.text, owner, kind="tool_result", tool_call_id=r.tool_call_id)
        ref = span_ref(key)
        transcript = render_transcript(said, limit=10**9)
        if results:  # what recall searches through this span's ref, once a roll-up has dropped their lines
            transcript += "\n[tool results of this span: " + ", ".join(f"ref={r.ref}" for r in results) + "]"
        self.scratchpad.put(ex.tenant, ref, transcript, owner, kind="history_span", messages=len(said))
        return (ref,)

    def _note_fallback(self, ex: Exchange, result: SummaryResult) -> None:
        if result.mode == "fallback":
            self.record(ex, "summarizer_fallback", model=self.config.summarizer_model, error=result.error or "")

    # ------------------------------------------------------------------ result

    def _finish(self, ex: Exchange, body: Body, layout: Plan, fixed: int, made: list[str], started: float,
                front: Front, forwarded: int) -> None:
        before, after = fixed + sum(body.tokens), fixed + forwarded
        last = layout.events[-1]
        if last.at == len(body.units):  # this request is itself a compaction event
            # What the event bought: the growth the request can take before the compress mark fires the next one
            note = ex.notes.budget
            headroom = note.compress_at - after if note is not None and note.compress_at is not None else None
            self.record(ex, "compaction", reason=last.reason, events=len(layout.events), frontier_messages=body.span(last.end, last.end)[0],
                        merged=last.merged, tokens_before=before, tokens_after=after, headroom_tokens=headroom)
            self.services.metrics.add("ctxwarden.compaction.events", 1, reason=last.reason)
            if last.merged:
                self.record(ex, "merge", blocks=sum(1 for s in layout.segments if s.kind == "block"))
        trimmed = [s for s in layout.segments if s.kind == "trim"]
        if trimmed:
            n = sum(body.message_count(s.start, s.end) for s in trimmed)
            self.record(ex, "trim", messages=n, max_age_s=self.config.max_age_s)
        blocks = [s for s in layout.segments if s.kind == "block"]
        if blocks:
            covered = sum(body.message_count(s.start, s.end) for s in blocks)
            self.record(ex, "summarize", blocks=len(blocks), new_blocks=len(made), reused_blocks=max(0, len(blocks) - len(made)),
                        messages_summarized=covered, tokens_before=before, tokens_after=after,
                        non_text_parts=front.non_text)  # images etc.: "[image]" in the summary
        ex.notes.history = {"tokens_before": before, "tokens_after": after, "blocks": len(blocks), "events": len(layout.events)}
        if front.noted or refs_in(ex.messages):  # the summaries' refs are refs_in's too: its scan is needed without them
            ensure_recall_tool(ex, self.scratchpad, recall_recorder(self.services))
        metrics = self.services.metrics
        metrics.add("ctxwarden.compression.triggered", 1, policy=self.name, mode=last.reason)
        metrics.record("ctxwarden.compression.freed_tokens", max(0, before - after), policy=self.name)
        metrics.record("ctxwarden.compression.ratio", before / max(1, after), policy=self.name)
        metrics.record("ctxwarden.compression.duration_ms", (time.perf_counter() - started) * 1000, policy=self.name)
