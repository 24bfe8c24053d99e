"""Summaries of conversation spans: an LLM through the upstream, or extractive (local).

With a summarizer model, a span becomes a short prompt to that model (through `services.complete`,
so the same upstream and credentials as the request). Any failure or timeout falls back to the
extractive summary, and the caller records that it did.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..base import Exchange, Services
from ..messages import Message, content_text
from ..text.calls import call_parts
from .extractive import Line, lines_of_summary, select_lines, summarize_messages

log = logging.getLogger("ctxwarden.summarize")

SUMMARY_PROMPT = (
    "You compress the earlier part of a conversation between a user and an AI agent, so the agent can "
    "continue without it. Write a compact plain-text summary (short bullet points) that keeps: decisions "
    "and their reasons; the user's preferences and constraints; open tasks and pending questions; every "
    "name, number, date, amount and identifier; what tool calls returned that matters; any ref=... "
    "references verbatim. Drop greetings, filler and repetition. Never invent anything. No preamble. "
    "At most {words} words."
)
MERGE_PROMPT = (
    "Merge these summaries of consecutive parts of one conversation into one summary, oldest first. Keep "
    "every decision, preference, open task, name, number, date, identifier and ref=... reference. No "
    "preamble. At most {words} words."
)
TRANSCRIPT_MESSAGE_CHARS = 2000  # per message, so one huge tool result cannot flood the summarizer


@dataclass(frozen=True)
class SummaryResult:
    text: str
    mode: str  # "extractive" | "llm" | "fallback" (extractive after the LLM failed)
    error: str | None = None
    duration_ms: float = 0.0


def render_transcript(messages: Sequence[Message], limit: int = TRANSCRIPT_MESSAGE_CHARS) -> str:
    """The span as plain lines for the summarizer model."""
    names: dict[str, str] = {}
    lines: list[str] = []
    for msg in messages:
        role = msg.get("role", "")
        text = " ".join(content_text(msg).split())
        if len(text) > limit:
            text = text[:limit] + f" … [{len(text) - limit} more characters]"
        if role == "tool":
            lines.append(f"tool {names.get(msg.get('tool_call_id', ''), msg.get('name') or '')} result: {text}")
            continue
        if text:
            lines.append(f"{role}: {text}")
        for call in msg.get("tool_calls") or []:
            name, args = call_parts(call)
            names[call.get("id", "")] = name or ""
            lines.append(f"{role} called {name}({args or ''})")
    return "\n".join(lines)


def word_budget(source_tokens: int, max_tokens: int | None) -> int:
    """Words to ask for: about a quarter of the span, within [60, 400], and within a token cap."""
    words = max(60, min(400, source_tokens // 5))
    if max_tokens is not None:
        words = max(30, min(words, int(max_tokens * 0.7)))
    return words


class Summarizer:
    def __init__(self, services: Services, model: str | None, timeout_s: float, max_words: int | None = None) -> None:
        self.services = services
        self.model = model
        self.timeout_s = timeout_s
        self.max_words = max_words

    def _count(self, model: str):
        return lambda text: self.services.tokens.count_text(text, model)

    async def span(self, messages: Sequence[Message], ex: Exchange, source_tokens: int, max_tokens: int | None = None) -> SummaryResult:
        """Summarize original messages."""
        result = await self._try_llm(SUMMARY_PROMPT, lambda: render_transcript(messages), ex, source_tokens, max_tokens)
        if result is not None and result.error is None:
            return result
        started = time.perf_counter()
        text = await asyncio.to_thread(summarize_messages, messages, max_tokens, self._count(ex.model))
        return self._extractive(text, started, result)

    async def merge(self, texts: Sequence[str], ex: Exchange, source_tokens: int, max_tokens: int | None = None) -> SummaryResult:
        """One summary from the summaries of consecutive spans (roll-up, or a cap under pressure)."""
        result = await self._try_llm(MERGE_PROMPT, lambda: "\n\n".join(texts), ex, source_tokens, max_tokens)
        if result is not None and result.error is None:
            return result
        started = time.perf_counter()
        lines: list[Line] = []
        for text in texts:
            lines += [Line(len(lines), l.text, l.score) for l in lines_of_summary(text)]
        merged = await asyncio.to_thread(select_lines, lines, max_tokens, self._count(ex.model))
        return self._extractive(merged, started, result)

    async def _try_llm(self, system_prompt: str, content: Callable[[], str], ex: Exchange, source_tokens: int,
                       max_tokens: int | None) -> SummaryResult | None:
        """The LLM's summary (its `error` set when it failed), or None when no summarizer model is set."""
        if not self.model:
            return None
        words = word_budget(source_tokens, max_tokens)
        prompt = [{"role": "system", "content": system_prompt.format(words=words)}, {"role": "user", "content": content()}]
        return await self._llm(prompt, ex)

    def _extractive(self, text: str, started: float, failed: SummaryResult | None) -> SummaryResult:
        mode = "fallback" if failed is not None else "extractive"
        result = SummaryResult(text, mode, failed.error if failed else None, (time.perf_counter() - started) * 1000)
        self.services.metrics.add("ctxwarden.summarizer.calls", 1, mode=mode, outcome="ok")
        self.services.metrics.record("ctxwarden.summarizer.duration_ms", result.duration_ms, mode=mode)
        return result

    async def _llm(self, prompt: list[dict[str, Any]], ex: Exchange) -> SummaryResult:
        started = time.perf_counter()
        error: str | None = None
        text = ""
        if self.services.complete is None:
            error = "no_complete_service"
        else:
            try:
                text = await asyncio.wait_for(self.services.complete(self.model, prompt, exchange=ex), self.timeout_s)
                if not text.strip():
                    error = "empty_summary"
            except asyncio.TimeoutError:
                error = "timeout"
            except Exception as exc:  # any upstream failure → extractive fallback, reported by the caller
                error = f"{type(exc).__name__}: {exc}"[:200]
        elapsed = (time.perf_counter() - started) * 1000
        outcome = "ok" if error is None else "error"
        self.services.metrics.add("ctxwarden.summarizer.calls", 1, mode="llm", outcome=outcome)
        self.services.metrics.record("ctxwarden.summarizer.duration_ms", elapsed, mode="llm")
        if error:
            log.warning("summarizer %s failed (%s); using the extractive summary", self.model, error)
        return SummaryResult(text.strip(), "llm", error, elapsed)
