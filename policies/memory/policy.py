"""The `memory` policy: WRITE what users say that should last, SELECT what bears on a request,
ISOLATE by tenant → user → task (see docs/ARCHITECTURE.md, "Memory").

Per request with a user (x-ctxwarden-user, else the OpenAI `user` field; nothing at all happens
without one, or with x-ctxwarden-memory: off):
  1. the latest user message is read for durable memories (extract.py, or the judge model with
     `extract: llm`), compared with the user's live memories (supersede.py) and stored (writer.py):
     actions memory.write, memory.supersede, memory.ask_user; with `strategy: ask_user` a contradicting
     memory is answered by the proxy with a question (ask.py), and the next turn settles it
     (memory.user_answer, memory.supersede with reason "user"); a memory the tenant's knowledge base
     contradicts is not stored (memory.rejected; the poisoning policy's check, via Services.shared);
     With `tool_results: true`, the tool results after that message are read too (source "tool",
     only `tool_result_kinds`; an ask_user contradiction from a tool keeps both, unasked);
  2. the user's memories visible to the task are scored against that message (select.py), the chosen
     ones read again by a second embedder (confirm.py, confirm_with), and those both readers keep go,
     as one `Relevant context:` block, at the start of that message (inject.py): memory.select.
Blocks are remembered per session (session.py; carried between replicas by a shared state backend)
and put back in the same place on later turns (prefix stability).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..base import BasePolicy, Embedder, Exchange, Reject, Respond, Services, Verdict, run_cpu
from ..cache import stable_hash
from ..errors import CtxwardenError
from ..messages import content_text, last_user_index
from ..state import SessionLRU
from ..text.prepared import PreparedOnce, other_embedder
from ..text.statements.match import Matcher
from ..text.window import analysis_windows
from .admin import MemoryAdmin
from .ask import parse_choice, question
from .calibrate import Calibration, fit
from .config import MemoryConfig
from .confirm import confirm, read_ahead
from .extract import Candidate, candidates
from .hints import HintError, Owner, owner_of
from .index import UserIndex
from .inject import block_text, user_message_keys
from .llm_extract import LLMExtractError, LLMExtractor
from .select import select
from .session import Given, OwnerBlocks, Pending, SessionState, decode, encode
from .store import MemoryStore
from .writer import Provenance, WriteReport, settle, write

log = logging.getLogger("ctxwarden.memory")
TOOL_RESULT_CHARS = 4000  # of a tool result read for memories (extraction costs ~4 µs a character)
# a memory's vector is read with its turn (config.context_weight) when the turn is at most this long
CONTEXT_CHARS = 2000
KB_CHECK = "kb_contradiction"  # Services.shared: the poisoning policy's KB check (poisoning/kb_gate.py)
# The second reader's work (confirm.py) runs on one thread of its own: the model serializes its runs anyway,
# and its transient buffers then stay in one malloc arena instead of one per worker thread.
SECOND_READER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-confirm")


class MemoryPolicy(BasePolicy):
    name = "memory"
    Config = MemoryConfig

    def __init__(self, config: MemoryConfig, services: Services) -> None:
        super().__init__(config, services)
        self.sessions: SessionLRU[SessionState] = SessionLRU(config.max_sessions, config.session_ttl_s,
                                                             encode=encode, decode=decode)
        self.session_states = self.sessions  # carried between replicas by a shared state backend
        self._store: MemoryStore | None = None
        self._calibration: Calibration | None = None
        # the confirm_with embedder, calibrated (confirm.py), once per process
        self._second: PreparedOnce[tuple[Embedder, Calibration]] = PreparedOnce(self._prepare_second,
                                                                                "memory-confirm-prepare")
        self._llm = LLMExtractor(services, config.judge_model, config.judge_timeout_s) if config.extract == "llm" else None

    # ------------------------------------------------------------------ services

    @property
    def store(self) -> MemoryStore:
        if self._store is None:
            if self.services.store is None or self.services.embedder is None:
                raise MemoryUnavailable("memory needs the store and an embedder (Services.store, Services.embedder)")
            self._store = MemoryStore(self.services.store, self.services.embedder, self.config.max_users,
                                      self.services.versions)
        return self._store

    async def calibration(self) -> Calibration:
        if self._calibration is None:
            self._calibration = await asyncio.to_thread(fit, self.services.embedder)
            log.info("memory: relevance calibrated for %s (0.7 at cosine %.3f)", self._calibration.embedder,
                     self._calibration.cosine_for(0.7))
        return self._calibration

    async def second_reader(self) -> tuple[Embedder, Calibration] | None:
        """The confirm_with embedder and its calibration; None when there is none to read with."""
        if self._second.ready:
            return self._second.value
        return await asyncio.to_thread(self._second.get)

    def _prepare_second(self) -> tuple[Embedder, Calibration] | None:
        wanted = self.config.confirm_with
        try:
            embedder = other_embedder(self.services, wanted)
            if embedder is None:
                return None
            calibration = fit(embedder, background=False)  # its relevance is the test (confirm.py)
        except Exception as exc:  # a model that cannot load: select as without it, and say so once
            log.error("memory: confirm_with %s is not available, so chosen memories are not read again: %s", wanted, exc)
            return None
        log.info("memory: chosen memories are read again with %s (0.7 at cosine %.3f)", calibration.embedder,
                 calibration.cosine_for(0.7))
        return embedder, calibration

    # ------------------------------------------------------------------ request

    async def on_request(self, ex: Exchange) -> Verdict | None:
        try:
            owner = owner_of(ex)
        except HintError as exc:
            return Reject(400, "invalid_request", str(exc), param=exc.param)
        if owner is None:
            return None
        latest = last_user_index(ex.messages)
        if latest < 0:
            return None
        keys = user_message_keys(ex.messages)
        given = self.sessions.get_or_create(ex.session_key, SessionState).of(owner)
        key = keys[latest]
        # the user's own words: what earlier policies appended for the model (a clash note) is no memory
        own = last_user_index(ex.original_messages)
        text = content_text(ex.original_messages[own] if own >= 0 else ex.messages[latest])
        if key not in given.written:
            given.mark_written(key)
            answering = given.pending is not None and given.pending.asked != key
            settled = answering and await self._settle(ex, owner, given, text)
            report = None if settled else await self._write(ex, owner, text, key)
            if report is not None and report.unsettled and self.config.strategy == "ask_user":
                older, newer = report.unsettled[0]
                given.pending = Pending(older.id, newer.id, older.text, newer.text, key)
                self.services.metrics.add("ctxwarden.memory.asked", 1)
        if self.config.tool_results:
            await self._write_tool_results(ex, owner, given, latest)
        if given.pending is not None and given.pending.asked == key:  # asked now, or the same turn sent again
            return Respond(question(given.pending.older_text, given.pending.newer_text), reason="memory.ask_user")
        index = await self._index(owner)
        given.drop_missing(lambda mid: index.get(mid) is not None)  # deleted since: chosen again
        if key not in given.blocks:
            given.give(key, await self._select(ex, owner, index, text, keys))
        edited = given.apply(ex.messages, keys)
        if edited is not None:
            ex.messages = edited
        return None

    async def _settle(self, ex: Exchange, owner: Owner, given: OwnerBlocks, reply: str) -> bool:
        """Read the user's turn after an ask_user question as its answer; whether it settled it (then
        the turn is not read for memories: it restates one of the two)."""
        pending, given.pending = given.pending, None
        assert pending is not None
        choice = await run_cpu(len(reply) > 300, parse_choice, reply, pending.older_text, pending.newer_text,
                               Matcher(self.services.embedder))
        self.record(ex, "user_answer", choice=choice or "unclear", older=pending.older, newer=pending.newer)
        if choice is None:
            return False  # not an answer: both memories stay live, and the turn is read as any other
        if choice == "both":
            return True
        loser, winner = (pending.newer, pending.older) if choice == "older" else (pending.older, pending.newer)
        gone = await asyncio.to_thread(settle, self.store, owner, loser, winner)
        if gone is not None:
            self.record(ex, "supersede", older=loser, newer=winner, strategy="ask_user", reason="user")
            self.services.metrics.add("ctxwarden.memory.superseded", 1, strategy="ask_user")
        return True

    async def _write_tool_results(self, ex: Exchange, owner: Owner, given: OwnerBlocks, latest: int) -> None:
        """`tool_results: true`: the tool results after the latest user message, each read once per
        session; only `tool_result_kinds` are stored (source "tool"). A contradiction is settled by
        the strategy, except ask_user: the user is not asked about what a tool said (both stay live)."""
        for message in ex.messages[latest + 1 :]:
            if message.get("role") != "tool":
                continue
            text = content_text(message)[:TOOL_RESULT_CHARS]
            key = f"{stable_hash(text)}#tool:{message.get('tool_call_id') or ''}"
            if not text.strip() or key in given.written:
                continue
            given.mark_written(key)
            await self._write(ex, owner, text, key, source="tool")

    async def _write(self, ex: Exchange, owner: Owner, text: str, key: str,
                     source: str = "conversation") -> WriteReport | None:
        found = None
        if self._llm is not None:
            try:
                found = await self._llm.candidates(ex, text)
            except LLMExtractError as exc:  # the local reading stands in
                self.record(ex, "extract_fallback", error=str(exc)[:200])
        if found is None:
            found = await run_cpu(len(text) >= 300, _bounded_candidates, text, self.config.analysis_max_chars)
        if source == "tool":
            found = [c for c in found if c.kind in self.config.tool_result_kinds]
        found = await self._consistent_with_kb(ex, found)
        if not found:
            return None
        origin = Provenance(ex.session_id, key.split("#", 1)[0], source)
        context = text if len(text) <= CONTEXT_CHARS else ""  # a pasted document is no turn to read a sentence in
        report = await asyncio.to_thread(write, self.store, owner, found, self.config.strategy, origin,
                                         Matcher(self.services.embedder), None, context, self.config.context_weight)
        self._report_write(ex, report, asks=source != "tool")
        self._read_ahead([m.text for m in report.written])
        return report

    def _read_ahead(self, texts: list[str]) -> None:
        """New memories read by the second embedder now (confirm.read_ahead); the first write of the
        process starts preparing that embedder in the background, so selection rarely waits for it."""
        if not texts or self.config.confirm_with == "none":
            return
        if not self._second.ready:
            self._second.start()  # once: later writes while it loads are not read ahead
        elif self._second.value is not None:  # not awaited: the request that wrote them does not wait for it
            done = asyncio.get_running_loop().run_in_executor(SECOND_READER, read_ahead, self._second.value[0], texts)
            done.add_done_callback(_log_failure)

    async def _consistent_with_kb(self, ex: Exchange, found: list[Candidate]) -> list[Candidate]:
        """The write gate's consistency with the knowledge base (RF-005): a memory the tenant's KB
        contradicts is not stored (memory.rejected). The check is the poisoning policy's, found in
        Services.shared under "kb_contradiction" (absent when that policy is off: no check)."""
        check = self.services.shared.get(KB_CHECK)
        if check is None or not found:
            return found
        kept: list[Candidate] = []
        for candidate in found:
            try:
                clash = await check(ex, candidate.text)
            except Exception as exc:  # the KB could not be read: store it, and say so
                self.record(ex, "kb_check_failed", error=f"{type(exc).__name__}: {exc}"[:200])
                clash = None
            if clash is None:
                kept.append(candidate)
                continue
            self.record(ex, "rejected", text=candidate.text, reason="contradicts the knowledge base",
                        evidence=clash.get("evidence"), kind=clash.get("kind"), confidence=clash.get("confidence"))
            self.services.metrics.add("ctxwarden.memory.rejected", 1, reason="kb")
        return kept

    def _report_write(self, ex: Exchange, report: WriteReport, asks: bool = True) -> None:
        if report.written:
            self.record(ex, "write", count=len(report.written), ids=[m.id for m in report.written],
                        kinds=[m.kind for m in report.written], merged=len(report.merged))
            self.services.metrics.add("ctxwarden.memory.written", len(report.written))
        for older, newer in report.superseded:
            self.record(ex, "supersede", older=older.id, newer=newer.id, strategy=self.config.strategy,
                        reason=f"{older.text!r} contradicted by {newer.text!r}")
            self.services.metrics.add("ctxwarden.memory.superseded", 1, strategy=self.config.strategy)
        for older, newer in report.unsettled if asks else ():
            self.record(ex, "ask_user", older=older.text, newer=newer.text)

    async def _index(self, owner: Owner) -> UserIndex:
        index = self.store.cached(owner.tenant, owner.user)
        if index is None:
            return await asyncio.to_thread(self.store.index, owner.tenant, owner.user)
        published = self.store.published(owner.tenant)
        if published != index.published:  # a replica wrote in this tenant (Services.versions): look now
            index.published = published
            await self._refresh(owner, index)
            fresh = self.store.cached(owner.tenant, owner.user)  # reloaded: a new index (an empty one is falsy)
            return index if fresh is None else fresh
        self._maybe_refresh(owner, index)
        return index

    async def _select(self, ex: Exchange, owner: Owner, index: UserIndex, text: str, keys: dict[int, str]) -> Given:
        if not len(index):
            return Given()
        calibration = await self.calibration()
        query = np.asarray(self.services.embedder.embed([text])[0], dtype=np.float32)
        in_conversation = {k.split("#", 1)[0] for k in keys.values()}
        held: dict[str, int] = {}
        chosen = select(index, query, owner.task, self.config, calibration,
                        lambda t: self.services.tokens.count_text(t, ex.model), in_conversation, held=held)
        second = await self.second_reader() if chosen else None
        if second is not None:
            confirmed = await asyncio.get_running_loop().run_in_executor(
                SECOND_READER, confirm, *second, text, chosen, self.config)
            chosen, held["confirm"] = confirmed.kept, len(confirmed.dropped)
        for gate, count in held.items():  # what the chance gates kept out: the figures to tune them by
            if count:
                self.services.metrics.add("ctxwarden.memory.held_back", count, gate=gate)
        if not chosen:
            return Given()
        self.record(ex, "select", count=len(chosen), ids=[s.memory.id for s in chosen],
                    scores=[round(s.score, 3) for s in chosen])
        self.services.metrics.record("ctxwarden.memory.selected", len(chosen))
        return Given(block_text([s.memory.text for s in chosen]), tuple(s.memory.id for s in chosen))

    def _maybe_refresh(self, owner: Owner, index: Any) -> None:
        """Every refresh_s, look in the background for writes by another process; reload if any (the
        fallback when no state backend carries versions between replicas, or a publish was lost)."""
        if index.checking or time.monotonic() - index.loaded_at < self.config.refresh_s or self.config.refresh_s == 0:
            return
        index.checking = True
        asyncio.get_running_loop().create_task(self._refresh(owner, index))

    async def _refresh(self, owner: Owner, index: Any) -> None:
        """Reload the user's memories when the store's version token moved since they were loaded."""
        try:
            if await asyncio.to_thread(self.store.stale, owner.tenant, owner.user):
                await asyncio.to_thread(self.store.reload, owner.tenant, owner.user)
            index.loaded_at = time.monotonic()
        except Exception as exc:  # the cached memories stay in use
            log.warning("memory: refresh of %s failed: %s", owner.user, exc)
        finally:
            index.checking = False

    # ------------------------------------------------------------------ admin

    def admin_routes(self) -> list[Any]:
        return MemoryAdmin(self).routes()


class MemoryUnavailable(CtxwardenError, RuntimeError):
    """The policy has no store or no embedder to work with (a wiring error, reported as memory.failed)."""


def _log_failure(done: asyncio.Future) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.warning("memory: reading new memories with the second embedder failed: %s", done.exception())


def _bounded_candidates(text: str, max_chars: int) -> list:
    """The memories of a text, reading a long one by its head and its tail (linear, bounded cost)."""
    return [c for _, piece in analysis_windows(text, max_chars) for c in candidates(piece)]
