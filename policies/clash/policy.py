"""The `clash` policy: find statements in the conversation that contradict each other, and
resolve them before the model reads them (see docs/ARCHITECTURE.md, "Clash").

Per request: the user messages' statements are extracted (cached per message text), a
detector pairs the ones that clash (the local rule-based detector, or an LLM judge when
`judge_model` is set), and the resolver decides by strategy, answer or memory what to do.
Only statements of two messages clash: values within one message are a range, a comparison, a
conversion or a plan. The default strategy (`note`) changes no word of the user's: it appends a
short note for the model to the message that said the later value, naming both statements.
The strategies that rewrite the user's words (prefer_recent, merge, keep_existing) or answer in
the model's place (ask_user) act only when the user chose them. Decisions and notes are
remembered per session, so every later turn forwards the same prefix.

Cost is bounded (invariant 7): past `analysis_max_chars` a message is read by its head and tail
(text/window.py), and past `budget_ms` of work the policy stops, changes nothing it had not
already settled, and reports `clash.skipped_budget`; a client that disconnects stops it too.

Metrics (scenario 20): ctxwarden.clash.detected{type,detector}, ctxwarden.clash.resolved
{type,strategy,by=auto|user}, ctxwarden.clash.needs_user{type,reason}, ctxwarden.clash.unresolved
{type,reason}; totals and shares at GET /admin/clash/stats.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from itertools import compress
from typing import Any, Literal

from pydantic import Field

from ..base import BasePolicy, Exchange, PolicyConfig, Respond, Services, Verdict, run_cpu
from ..cache import LRU
from ..deadline import Deadline, OverBudget
from ..messages import Message, is_role, message_values, role_of, with_note
from ..state import SessionLRU
from ..text.statements.extract import extract as extract_statements
from ..text.statements.extract import statements_size
from ..text.statements.frames import frame_statements
from ..text.statements.match import Matcher
from ..text.statements.model import Statement
from ..text.window import analysis_windows
from .detect import AgentTurns, Clash, Located, local_clashes, text_keys
from .edit import apply_losses
from .evidence import CONVERSATIONAL_CHARS, strong
from .judge import Judge, JudgeError
from .question import Texts, note_line
from .resolve import Resolution, resolve
from .state import SessionState, decode, encode, merge_state

log = logging.getLogger("ctxwarden.clash")

STATEMENT_CACHE_BYTES = 8 * 2**20  # statements per text hash (extract() memo aside): fresh text fills it
INLINE_STATEMENTS = 3  # statements compared on the event loop; more go to a worker thread
OFFLOAD_CHARS = 300  # uncached user text above this is extracted in a worker thread (~4 µs a char: ≈1 ms)


class ClashConfig(PolicyConfig):
    strategy: Literal["note", "prefer_recent", "ask_user", "merge", "keep_existing"] = "note"
    analysis_max_chars: int = Field(8_000, ge=200)  # longer messages: their head and tail are read
    budget_ms: float | None = Field(1000, gt=0)  # the policy's CPU time per request; None: no limit
    # strong: only clashes with strong evidence (evidence.py) are acted on, the others are reported (clash.weak);
    # any: every clash the detector finds is acted on
    evidence: Literal["strong", "any"] = "strong"
    conversational_chars: int = Field(CONVERSATIONAL_CHARS, ge=1)  # longer messages count as pasted material
    judge_model: str | None = None
    judge_timeout_s: float = Field(10, gt=0)
    max_sessions: int = Field(10_000, ge=1)
    session_ttl_s: float = Field(86_400, gt=0)
    cache_size: int = Field(20_000, ge=1)


def extract(text: str, max_chars: int | None = None) -> tuple[Statement, ...]:
    """The statements the clash detector compares: the typed ones and the action frames; of a text
    longer than `max_chars`, those of its head and its tail, at their places in the whole text."""
    if max_chars is None or len(text) <= max_chars:
        return extract_statements(text) + frame_statements(text)
    found: list[Statement] = []
    for offset, piece in analysis_windows(text, max_chars):
        found += [_shifted(st, offset) for st in extract_statements(piece) + frame_statements(piece)]
    return tuple(found)


def _shifted(st: Statement, offset: int) -> Statement:
    """A statement read in a window, placed in the whole text (sentence numbers stay distinct and
    in order: a window's first sentence starts at or after its offset)."""
    if not offset:
        return st
    return replace(st, start=st.start + offset, end=st.end + offset, vstart=st.vstart + offset,
                   vend=st.vend + offset, sentence=st.sentence + offset)


def user_texts(messages: list[Message]) -> Texts:
    """Every text the user wrote: (message index, part index or -1 for string content) → text. The
    user's messages are found in the request's carried roles (at C speed: an agent's long run of tool
    results is not walked in Python at every step)."""
    texts: Texts = {}
    roles = message_values("role", messages, role_of)
    for i in compress(range(len(messages)), map(is_role("user"), roles)):
        m = messages[i]
        content = m.get("content")
        if isinstance(content, str):
            texts[(i, -1)] = content
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                    texts[(i, j)] = part["text"]
    return texts


class ClashPolicy(BasePolicy):
    name = "clash"
    Config = ClashConfig

    def __init__(self, config: ClashConfig, services: Services) -> None:
        super().__init__(config, services)
        self.memory: SessionLRU[SessionState] = SessionLRU(config.max_sessions, config.session_ttl_s, encode=encode, decode=decode,
                                                             merge=merge_state)
        self.session_states = self.memory  # carried between replicas by a shared state backend
        self.judge = Judge(config.judge_model, services, config.judge_timeout_s) if config.judge_model else None
        self._statements: LRU[str, tuple[Statement, ...]] = LRU(  # per text hash; ~0.8-4.5 KB a statement
            max(1, config.cache_size), max_bytes=STATEMENT_CACHE_BYTES,
            sizeof=lambda key, found: 100 + len(key) + statements_size(found))
        self.stats: Counter[str] = Counter()

    # ------------------------------------------------------------------ request

    async def on_request(self, ex: Exchange) -> Verdict | None:
        texts = user_texts(ex.messages)
        if len(texts) < 2:  # a clash needs two user messages (or two parts)
            return None
        state = self.memory.get_or_create(ex.session_key, SessionState)
        deadline = Deadline(self.config.budget_ms / 1000 if self.config.budget_ms else None, ex.notes.cancelled)
        try:
            found = await self._locate(texts, deadline)
            clashes = await self._detect(ex, texts, found, state, deadline)
        except OverBudget as exc:
            # what was settled on earlier turns still holds (the same bytes as before); nothing new
            self.record(ex, "skipped_budget", reason=str(exc), budget_ms=self.config.budget_ms,
                        chars=sum(len(t) for t in texts.values()))
            self.services.metrics.add("ctxwarden.clash.skipped_budget", 1)
            self._apply_notes(ex, texts, state)
            return None
        clashes = self._weigh(ex, clashes, texts, state)
        if clashes:
            self._report_duplicates(ex, clashes, state)
            res = resolve(clashes, self.config.strategy, state, ex.messages, texts)
            self._report_decisions(ex, res, state)
            if res.ask:
                return self._ask(ex, res, state)
            if res.losses:
                ex.messages, stats = apply_losses(ex.messages, res.losses, found, texts)
                self.record(ex, "resolve", strategy=self.config.strategy, superseded=len(res.losses),
                            removed=stats.removed, marked=stats.marked, merged=stats.merged, remembered=res.remembered)
                if stats.merge_fallbacks:
                    self.record(ex, "merge_fallback", count=stats.merge_fallbacks)
            for c in res.noted:
                lines = state.notes.setdefault(c.newer.text_hash, [])
                line = note_line(c, texts)
                if line not in lines:
                    lines.append(line)
        self._apply_notes(ex, texts, state)
        return None

    def _weigh(self, ex: Exchange, clashes: list[Clash], texts: Texts, state: SessionState) -> list[Clash]:
        """The clashes to act on; the weak ones are reported, once each, and left alone."""
        if self.config.evidence == "any":
            return clashes
        keep, weak = [], []
        for c in clashes:
            (keep if c.duplicate or strong(c, texts, self.config.conversational_chars) else weak).append(c)
        new = [c for c in weak if c.key not in state.seen_weak]
        if new:
            state.seen_weak.update(c.key for c in new)
            self.services.metrics.add("ctxwarden.clash.weak", len(new))
            self.record(ex, "weak", count=len(new), slots=[c.label for c in new][:10])
        return keep

    def _apply_notes(self, ex: Exchange, texts: Texts, state: SessionState) -> None:
        """The `note` strategy's notes, each in the message that said the later value: every turn the
        same note in the same place (the cached prefix holds); the user's own words unchanged."""
        if not state.notes:
            return
        keys = text_keys(texts)
        per_message: dict[int, list[str]] = {}
        for (message, _part), key in sorted(keys.items()):
            per_message.setdefault(message, []).extend(state.notes.get(key, ()))
        noted = 0
        messages = list(ex.messages)
        for message, lines in per_message.items():
            if lines:  # one note per message, after its last part
                messages[message] = with_note(messages[message], "[ctxwarden note: " + " ".join(lines) + "]")
                noted += 1
        if noted:
            ex.messages = messages
            self.record(ex, "note", messages=noted, notes=sum(len(v) for v in state.notes.values()))

    async def _locate(self, texts: Texts, deadline: Deadline) -> list[Located]:
        keys = text_keys(texts)
        hashes = {where: key.split("#", 1)[0] for where, key in keys.items()}
        known = {h: self._statements.get(h) for h in set(hashes.values())}
        missing = {h: texts[w] for w, h in hashes.items() if known[h] is None}
        if missing:
            limit = self.config.analysis_max_chars
            work = sum(min(len(t), limit) for t in missing.values())

            def read_all() -> dict[str, tuple[Statement, ...]]:
                out: dict[str, tuple[Statement, ...]] = {}
                for h, t in missing.items():
                    deadline.check()
                    out[h] = statements = extract(t, limit)
                    self._statements.put(h, statements)  # kept even if the budget runs out later
                return out

            extracted = await run_cpu(work > OFFLOAD_CHARS, read_all)
            known.update(extracted)
        found: list[Located] = []
        for (message, part), h in sorted(hashes.items()):
            found += [Located(message, part, keys[(message, part)], st) for st in known[h] or ()]
        return found

    async def _detect(self, ex: Exchange, texts: Texts, found: list[Located], state: SessionState,
                      deadline: Deadline) -> list[Clash]:
        if self.judge is not None:
            try:
                return await self.judge.clashes(ex, texts, state)
            except JudgeError as exc:
                log.warning("clash judge failed (%s); request %s uses the local detector", exc, ex.request_id)
                self.services.metrics.add("ctxwarden.clash.judge_failures", 1, model=self.config.judge_model)
                self.record(ex, "judge_failed", error=str(exc)[:200], fallback="local")
        agent = AgentTurns(ex.messages)
        if self.services.embedder is None:
            return local_clashes(found, agent=agent, deadline=deadline)
        # subjects with no word in common are matched by embeddings, as in find_clashes; off the loop
        # (a pair of statements or two on the event loop: a thread hop would cost more than they do)
        return await run_cpu(len(found) > INLINE_STATEMENTS, local_clashes, found, Matcher(self.services.embedder), agent,
                             deadline)

    def find_clashes(self, messages: list[Message]) -> list[Clash]:
        """The local detector on a conversation, synchronously (benches, tests): no memory, no edits."""
        texts = user_texts(messages)
        keys = text_keys(texts)
        found = [Located(m, p, keys[(m, p)], st) for (m, p), text in sorted(texts.items())
                 for st in extract(text, self.config.analysis_max_chars)]
        clashes = local_clashes(found, Matcher(self.services.embedder), AgentTurns(messages))
        if self.config.evidence == "any":
            return clashes
        return [c for c in clashes if c.duplicate or strong(c, texts, self.config.conversational_chars)]

    # ------------------------------------------------------------------ reporting

    def _report_duplicates(self, ex: Exchange, clashes: list[Clash], state: SessionState) -> None:
        new = [c for c in clashes if c.duplicate and c.key not in state.seen_duplicates]
        for c in new:
            state.seen_duplicates.add(c.key)
            self._count("detected", c)
        if new:
            self.record(ex, "duplicate", count=len(new), slots=[c.label for c in new])

    def _report_decisions(self, ex: Exchange, res: Resolution, state: SessionState) -> None:
        for c, d in res.decided:
            if c.key not in state.asked:  # a clash we asked about was counted when asked
                self._count("detected", c)
            if d.how == "user":
                self._count("resolved", c, strategy="ask_user", by="user")
                self.record(ex, "user_answer", type=c.type, label=c.label, choice=d.winner)
            elif d.how == "correction":
                self._count("resolved", c, strategy="prefer_recent", by="correction")
                self.record(ex, "correction", type=c.type, label=c.label, older=c.older.st.display,
                            newer=c.newer.st.display, resolved_as="prefer_recent")
            elif d.winner == "both":
                self._count("unresolved", c, reason=d.how)
                self.record(ex, "unresolved", type=c.type, label=c.label, reason=d.how)
            else:
                self._count("resolved", c, strategy=d.how, by="auto")
                self.record(ex, "decided", type=c.type, label=c.label, winner=d.winner, strategy=d.how)
        if res.decided:
            log.info("session %s: %d new clash decision(s): %s", ex.session_id, len(res.decided),
                     "; ".join(f"{c.type} {c.label} {c.older.st.value!r}→{c.newer.st.value!r}: {d.winner} ({d.how})"
                               for c, d in res.decided))

    def _ask(self, ex: Exchange, res: Resolution, state: SessionState) -> Respond:
        c = res.ask
        assert c is not None
        reason = "ask_user"
        if c.key not in state.asked:
            state.asked.add(c.key)
            self._count("detected", c)
            self._count("needs_user", c, reason=reason)
        self.record(ex, "ask_user", type=c.type, label=c.label, reason=reason,
                    older=c.older.st.display, newer=c.newer.st.display)
        return Respond(res.question, reason=f"clash.{reason}")

    def _count(self, what: str, c: Clash, **attrs: Any) -> None:
        attributes = {"type": c.type, **({"detector": c.detector} if what == "detected" else {}), **attrs}
        self.services.metrics.add(f"ctxwarden.clash.{what}", 1, **attributes)
        self.stats[what] += 1
        self.stats[f"{what}.type.{c.type}"] += 1
        for key in ("strategy", "reason"):
            if key in attrs:
                self.stats[f"{what}.{key}.{attrs[key]}"] += 1

    # ------------------------------------------------------------------ admin

    def admin_routes(self) -> list[tuple[str, str, Any]]:
        return [("/admin/clash/stats", "GET", self._stats_route)]

    async def _stats_route(self, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
        return 200, clash_stats(self.stats, self.config.strategy, len(self.memory))


def clash_stats(stats: Counter[str], strategy: str, sessions: int) -> dict[str, Any]:
    """Scenario 20's figures: totals, shares, the types seen and the strategies used."""
    auto = stats["resolved"] - stats["resolved.strategy.ask_user"]
    # every contradiction is settled automatically, asked about, or (unordered, in the history) left as is
    contradictions = auto + stats["needs_user"] + stats["unresolved.reason.unordered"]
    duplicates = stats["detected.type.DUPLICATE_FACTS"]

    def share(n: int) -> float:
        return round(n / contradictions, 4) if contradictions else 0.0

    def section(prefix: str) -> dict[str, int]:
        return {k[len(prefix):]: v for k, v in sorted(stats.items()) if k.startswith(prefix)}

    return {
        "strategy": strategy,
        "sessions": sessions,
        "total_clashes_detected": stats["detected"],
        "contradictions": contradictions,
        "duplicates": duplicates,
        "auto_resolved": auto,
        "auto_resolved_share": share(auto),
        "user_intervention_required": stats["needs_user"],
        "user_intervention_share": share(stats["needs_user"]),
        "resolved_by_user": stats["resolved.strategy.ask_user"],
        "unresolved": stats["unresolved"],
        "by_type": section("detected.type."),
        "resolution_strategies_used": section("resolved.strategy."),
    }
