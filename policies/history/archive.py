"""The `archive` policy: when a request is still over budget, move big tool results to the scratchpad.

The history policy compacts old turns at rare events (tool results in them become digests inside
summary blocks). This policy is the budget's last resort for what is left verbatim: when the
request still passes the budget's `compress` mark after history ran, tool results above
`min_tokens` are replaced, oldest first, until it is under `target`; past the `aggressive` mark
every result whose stub is smaller goes. The results the model just asked for (after its last
turn) stay verbatim unless the request would still pass the `reject` mark without them. The
forwarded tool message keeps its `tool_call_id` (pairs stay intact) and
a stub: the ref and a digest of the result by content type (digest.py), with no look-ahead, so the
same result always gives the same stub. Whenever the forwarded context holds refs, the proxy offers
`context_recall` (by ref or by query) and answers it from the scratchpad, for at most
`max_recall_rounds` rounds per request.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pydantic import Field

from ..base import BasePolicy, Exchange, PolicyConfig, Services, Verdict, run_cpu
from ..cache import LRU
from ..messages import Message, content_text, heavy, last_user_index, message_token_list, tools_tokens
from ..text.tokens import REPLY_PRIMING
from .digest import digest
from .recall import RECALL_TOOL, ensure_recall_tool, recall_recorder
from .scratchpad import STUB_PREFIX, archive_ref, owner_of, refs_in, shared_scratchpad, stub_text

STUB_FLOOR_TOKENS = 80  # aggressive mode: results this small are cheaper kept than stubbed


class ArchiveConfig(PolicyConfig):
    min_tokens: int = Field(500, ge=1)
    max_recall_rounds: int = Field(3, ge=0)
    digest_tokens: int = Field(200, ge=20, le=4000)
    memory_entries: int = Field(2000, ge=10)
    retention_days: float = Field(7, gt=0)  # archived texts older than this are deleted (and never served)
    max_items: int = Field(10_000, ge=10)  # archived texts kept per tenant; the oldest go first


@dataclass
class _Candidate:
    index: int
    tokens: int
    text: str
    ref: str


@dataclass
class _Known:
    """What one archived result costs to recompute: its size, stub and gist, remembered by ref."""

    tokens: int
    stub: str = ""
    gist: str = ""
    stub_tokens: int = 0


def _text_only(message: Message) -> bool:
    content = message.get("content")
    if content is None or isinstance(content, str):
        return True
    return all(isinstance(p, dict) and p.get("type") == "text" for p in content)


def _known_size(ref: str, known: _Known) -> int:
    """An entry's bytes, about: the object, its ref, stub and gist (measured ~3.5 KB in bench/memory.py)."""
    return 400 + len(ref) + len(known.stub) + len(known.gist)


class ArchivePolicy(BasePolicy):
    name = "archive"
    Config = ArchiveConfig

    def __init__(self, config: ArchiveConfig, services: Services) -> None:
        super().__init__(config, services)
        self.scratchpad = shared_scratchpad(services, config.memory_entries, config.retention_days * 86_400,
                                            config.max_items)
        self._known: LRU[str, _Known] = LRU(20_000, max_bytes=32 * 2**20, sizeof=_known_size)  # by ref
        self._record_recall = recall_recorder(services)

    async def on_request(self, ex: Exchange) -> Verdict | None:
        started = time.perf_counter()
        messages = list(ex.messages)
        archived, total = await self._archive(ex, messages)
        if archived:
            ex.messages = messages
        if refs_in(ex.messages):
            ensure_recall_tool(ex, self.scratchpad, self._record_recall, rounds=self.config.max_recall_rounds)
        if total is not None and ex.target_tokens is not None and total > ex.target_tokens:
            self.record(ex, "target_missed", tokens=total, target_tokens=ex.target_tokens)
        if archived:
            self._metrics(ex, archived, started)
        return None

    async def aclose(self) -> None:
        """Persist archived texts still waiting for Chroma."""
        await self.scratchpad.flush()

    # ------------------------------------------------------------------ choosing

    def _candidates(self, ex: Exchange, messages: list[Message], aggressive: bool) -> tuple[list[_Candidate], list[_Candidate], list[_Candidate]]:
        """Tool results by phase: earlier turns, current turn already answered, current turn unanswered."""
        cfg: ArchiveConfig = self.config
        last_user = last_user_index(messages)
        last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        floor = STUB_FLOOR_TOKENS if aggressive else cfg.min_tokens
        earlier, answered, unanswered, skipped = [], [], [], 0
        for i, msg in enumerate(messages):
            if msg.get("role") != "tool":
                continue
            text = content_text(msg)
            if text.startswith(STUB_PREFIX):
                continue
            ref = archive_ref(text, str(msg.get("tool_call_id", "")))
            tokens = self._remember(ref, msg, ex.model).tokens
            if tokens <= floor:
                continue
            if not _text_only(msg):
                skipped += 1  # an image cannot come back as text: it stays in place
                continue
            cand = _Candidate(i, tokens, text, ref)
            if i < last_user and tokens > cfg.min_tokens:
                earlier.append(cand)
            elif i < last_assistant:
                answered.append(cand)
            else:
                unanswered.append(cand)
        if skipped:
            self.record(ex, "skip_non_text", messages=skipped)
        return earlier, answered, unanswered

    def _remember(self, ref: str, message: Message, model: str) -> _Known:
        known = self._known.get(ref)
        if known is None:
            known = _Known(self.services.tokens.count_message(message, model))
            self._known.put(ref, known)
        return known

    async def _archive(self, ex: Exchange, messages: list[Message]) -> tuple[list[_Candidate], int | None]:
        """Stub the chosen results in `messages` (a new list) when history left the request over the
        compress mark, down to the target. Returns what was archived and the request's tokens
        afterwards (None: not under pressure).

        Between compaction events the forwarded history only grows, and every stub written then
        would change a prefix the provider has cached: the history policy's next event is what
        makes room, at the compress mark. So the archive starts at that same mark (not at the
        target, which a growing history passes many steps before its event) and acts only on what
        history left there (a verbatim tail too big, a first request that arrives big). The results
        the model just asked for go verbatim unless the request would otherwise be refused."""
        cfg: ArchiveConfig = self.config
        note = ex.notes.budget
        if ex.pressure == "none" or note is None or note.target_at is None:
            return [], None
        total = await run_cpu(heavy(ex), self._request_tokens, ex, messages)
        if total <= (note.compress_at if note.compress_at is not None else note.target_at):
            return [], total
        aggressive = note.aggressive_at is not None and total >= note.aggressive_at
        earlier, answered, unanswered = await run_cpu(ex.heavy, self._candidates, ex, messages, aggressive)
        done: list[_Candidate] = []
        if aggressive:
            await self._stub(ex, messages, earlier + answered, done)
        else:
            for cand in [c for c in earlier + answered if c.tokens > cfg.min_tokens]:
                if total <= note.target_at:
                    break
                await self._stub(ex, messages, [cand], done)
                known = self._known.get(cand.ref)
                total -= cand.tokens - (known.stub_tokens if known else 0)
        if done:  # exact figure: the first stub also adds the context_recall definition
            total = await run_cpu(heavy(ex), self._request_tokens, ex, messages)
        if unanswered and note.reject_at is not None and total >= note.reject_at:
            # the newest results alone would get the request refused: a stub (and recall) beats a 400
            newest = len(done)
            await self._stub(ex, messages, unanswered, done)
            if len(done) > newest:
                self.record(ex, "newest_archived", results=len(done) - newest)
            total = await run_cpu(heavy(ex), self._request_tokens, ex, messages)
        return done, total

    def _request_tokens(self, ex: Exchange, messages: list[Message]) -> int:
        tokens = self.services.tokens
        extra = ex.proxy_tool_definitions()  # forwarded_tools() is these and ex.tools (counted apart: tools_tokens)
        if refs_in(messages) and RECALL_TOOL["function"]["name"] not in ex.proxy_tools:
            extra.append(RECALL_TOOL)
        known = ex.notes.message_tokens  # what history counted of the list it forwarded (this one, unstubbed)
        same = known is not None and known[0] == messages  # the same objects: a pointer compare each
        counted = (known[1] if same else sum(message_token_list(tokens, messages, ex.model))) + REPLY_PRIMING
        return counted + tools_tokens(tokens, ex.tools, ex.model, extra)

    # ------------------------------------------------------------------ stubbing

    async def _stub(self, ex: Exchange, messages: list[Message], cands: list[_Candidate], done: list[_Candidate]) -> None:
        if not cands:
            return
        knowns = await asyncio.to_thread(self._make_stubs, messages, cands, ex.model)
        owner = owner_of(ex)
        for cand, known in zip(cands, knowns):
            original = messages[cand.index]
            self.scratchpad.put(ex.tenant, cand.ref, cand.text, owner, kind="tool_result",
                                tool_call_id=original.get("tool_call_id", ""), tokens=cand.tokens, gist=known.gist)
            replaced: Message = {"role": "tool", "tool_call_id": original.get("tool_call_id"), "content": known.stub}
            if original.get("name"):
                replaced["name"] = original["name"]
            messages[cand.index] = replaced
            done.append(cand)

    def _make_stubs(self, messages: list[Message], cands: list[_Candidate], model: str) -> list[_Known]:
        out = []
        for cand in cands:
            known = self._remember(cand.ref, messages[cand.index], model)
            if not known.stub:  # digests are not free: made once per ref
                count = lambda text: self.services.tokens.count_text(text, model)  # noqa: E731
                known.gist = digest(cand.text, self.config.digest_tokens, count=count, recall_hint=f"ref={cand.ref}")
                known.stub = stub_text(cand.ref, cand.tokens, known.gist)
                known.stub_tokens = self.services.tokens.count_message({"role": "tool", "content": known.stub}, model)
            out.append(known)
        return out

    def _metrics(self, ex: Exchange, archived: list[_Candidate], started: float) -> None:
        archived_tokens = sum(c.tokens for c in archived)
        stub_tokens = sum(getattr(self._known.get(c.ref), "stub_tokens", 0) for c in archived)
        freed = archived_tokens - stub_tokens
        self.record(ex, "archive", results=len(archived), tokens_freed=freed, mode=ex.pressure,
                    refs=[c.ref for c in archived][:10])
        metrics = self.services.metrics
        metrics.add("ctxwarden.archive.archived", len(archived), mode=ex.pressure)
        metrics.add("ctxwarden.compression.triggered", 1, policy=self.name, mode=ex.pressure)
        metrics.record("ctxwarden.compression.freed_tokens", freed, policy=self.name)
        metrics.record("ctxwarden.compression.ratio", archived_tokens / max(1, stub_tokens), policy=self.name)
        metrics.record("ctxwarden.compression.duration_ms", (time.perf_counter() - started) * 1000, policy=self.name)
