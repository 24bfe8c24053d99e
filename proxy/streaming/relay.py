"""Relay a streamed chat completion to the client without buffering it whole.

Three modes, chosen per request:
- pass-through: bytes go to the client as they arrive, untouched (no policy reads the stream);
- gated: content is held back sentence by sentence until the stream validators passed it
  (original chunks are released as soon as all of their text is validated, so framing and
  timing are kept); a block ends the stream with the notice and finish_reason content_filter;
- proxy tools: tool-call deltas are held until the round ends; when the model only called tools
  the proxy answers itself (context_recall), the proxy answers them and streams the next round.
A stream the upstream cuts ends with an in-stream error event, never a hang.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

import httpx

from ctxwarden.policies.base import Answer, Block, Exchange, Reject

from ..errors import ProxyError
from . import sse

log = logging.getLogger("ctxwarden.streaming")

# A sentence ends at . ! ? (with closing quotes/brackets) followed by white space, or at a newline.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*\s+|\n+")

Validate = Callable[[Exchange, Answer], Awaitable[Any]]  # returns a Verdict or None
NextRound = Callable[[list[dict[str, Any]]], Awaitable[httpx.Response]]  # extra messages → new stream
AnswerTools = Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]  # tool calls → tool messages


@dataclass
class _ChoiceText:
    text: str = ""
    validated: int = 0  # text[:validated] passed the validators
    released: int = 0  # text[:released] reached the client


@dataclass
class _Held:
    raw: bytes
    ends: dict[int, int] = field(default_factory=dict)  # choice index → end offset of its text in this chunk
    tool_delta: bool = False  # a tool-call delta: settled at the round's end (_flush_tool_calls)


class StreamRelay:
    def __init__(
        self,
        ex: Exchange,
        validate: Validate | None,
        answer_tools: AnswerTools | None,
        next_round: NextRound | None,
        max_rounds: int = 3,
        on_finish: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.ex = ex
        self.validate = validate
        self.answer_tools = answer_tools
        self.next_round = next_round
        self.max_rounds = max_rounds
        self.on_finish = on_finish
        self.choices: dict[int, _ChoiceText] = {}
        self.held: list[_Held] = []
        self.template: dict[str, Any] = {}
        self.usage: dict[str, int] = {}
        self.outcome = "ok"
        self.first_chunk_at: float | None = None
        self.tail = b""  # the last bytes passed through (usage is read from them at the end)

    # ------------------------------------------------------------------ pass-through

    async def passthrough(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """Bytes as they arrive; an error event if the upstream stops before [DONE]."""
        try:
            async for chunk in response.aiter_bytes():
                if self.first_chunk_at is None:
                    self.first_chunk_at = time.perf_counter()
                self.tail = (self.tail + chunk)[-2048:]
                yield chunk
            if b"[DONE]" not in self.tail[-32:]:
                self.outcome = "cut"
                yield sse.error_event("The upstream ended the stream before it was complete.", "upstream_stream_cut")
        except httpx.HTTPError as exc:
            yield self._cut(exc)
        finally:
            await self._close(response)

    def _cut(self, exc: Exception) -> bytes:
        """The in-stream error event that ends a stream the upstream broke off."""
        self.outcome = "cut"
        if isinstance(exc, ProxyError):
            return sse.error_event(exc.message, exc.code)
        return sse.error_event(f"The upstream stream failed: {type(exc).__name__}.", "upstream_stream_cut")

    async def _close(self, response: httpx.Response) -> None:
        await response.aclose()
        if self.on_finish:
            await self.on_finish(self.outcome)

    # ------------------------------------------------------------------ parsed modes

    async def relay(self, response: httpx.Response) -> AsyncIterator[bytes]:
        rounds = 0
        try:
            while True:
                calls, finish_events, round_ok = [], [], False
                async for out in self._round(response, calls, finish_events):
                    if out is None:
                        round_ok = True
                        continue
                    yield out
                await response.aclose()
                if self.outcome != "ok":
                    return
                if not round_ok:
                    self.outcome = "cut"
                    for out in self._release(final=True):
                        yield out
                    yield sse.error_event("The upstream ended the stream before it was complete.", "upstream_stream_cut")
                    return
                proxy_calls = [c for c in calls if c["function"]["name"] in self.ex.proxy_tools]
                if proxy_calls and len(proxy_calls) == len(calls) and rounds < self.max_rounds and self.next_round:
                    rounds += 1
                    assistant = {"role": "assistant", "content": None, "tool_calls": calls}
                    answers = await self.answer_tools(calls) if self.answer_tools else []
                    response = await self.next_round([assistant, *answers])
                    self.held = [h for h in self.held if not h.tool_delta]  # drop the answered tool-call deltas
                    continue
                if proxy_calls:
                    self.ex.record("archive", "recall_dropped", calls=len(proxy_calls))
                for out in self._flush_tool_calls(calls, proxy_calls):
                    yield out
                only_dropped = bool(proxy_calls) and len(proxy_calls) == len(calls)
                for out in finish_events:
                    yield _finish_as_stop(out) if only_dropped else out
                yield sse.DONE
                return
        except (ProxyError, httpx.HTTPError) as exc:
            yield self._cut(exc)
        finally:
            await self._close(response)

    async def _round(self, response: httpx.Response, calls: list, finish_events: list) -> AsyncIterator[bytes | None]:
        """One upstream stream. Yields bytes for the client; yields None once [DONE] arrived."""
        splitter = sse.EventSplitter()
        tool_deltas: dict[int, dict[str, Any]] = {}
        async for chunk in response.aiter_bytes():
            if self.first_chunk_at is None:
                self.first_chunk_at = time.perf_counter()
            for event in splitter.feed(chunk):
                if event.is_done:
                    await_blocks = await self._validate_pending(final=True)
                    for out in await_blocks:
                        yield out
                    if self.outcome != "ok":
                        return
                    for out in self._release(final=True):
                        yield out
                    calls.extend(_assemble(tool_deltas))
                    yield None
                    return
                obj = event.json()
                if not isinstance(obj, dict) or "choices" not in obj:
                    yield event.raw  # keep-alives, comments, errors: relay as they are
                    continue
                self.template = {k: obj[k] for k in ("id", "object", "created", "model", "system_fingerprint") if k in obj}
                if obj.get("usage"):
                    self._add_usage(obj["usage"])
                    if not obj["choices"]:
                        finish_events.append(sse.encode({**obj, "usage": self.usage}))
                        continue
                ends: dict[int, int] = {}
                has_tool_delta = False
                is_finish = False
                for choice in obj["choices"]:
                    idx = choice.get("index", 0)
                    delta = choice.get("delta") or {}
                    if delta.get("tool_calls") and self.ex.proxy_tools:
                        has_tool_delta = True
                        for tc in delta["tool_calls"]:
                            slot = tool_deltas.setdefault(tc.get("index", 0), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                            slot["id"] = tc.get("id") or slot["id"]
                            fn = tc.get("function") or {}
                            slot["function"]["name"] += fn.get("name") or ""
                            slot["function"]["arguments"] += fn.get("arguments") or ""
                    if choice.get("finish_reason"):
                        is_finish = True
                    text = delta.get("content")
                    if text and self.validate:
                        state = self.choices.setdefault(idx, _ChoiceText())
                        state.text += text
                        ends[idx] = len(state.text)
                if has_tool_delta:
                    self.held.append(_Held(event.raw, tool_delta=True))  # tool-call chunks wait for the round's end
                    continue
                if is_finish and not ends and (self.ex.proxy_tools or self.validate):
                    finish_events.append(event.raw)  # the finish chunk goes out after the round is settled
                    continue
                self.held.append(_Held(event.raw, ends))
                for out in await self._validate_pending(final=False):
                    yield out
                if self.outcome != "ok":
                    return
                for out in self._release(final=False):
                    yield out

    def _add_usage(self, usage: dict[str, Any]) -> None:
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            if isinstance(usage.get(key), int):
                self.usage[key] = self.usage.get(key, 0) + usage[key]
        for key, value in usage.items():
            self.usage.setdefault(key, value)

    async def _validate_pending(self, final: bool) -> list[bytes]:
        """Validate every complete sentence not yet validated (all remaining text when final)."""
        if not self.validate:
            return []
        for idx, state in self.choices.items():
            if state.validated >= len(state.text):
                continue
            end = len(state.text) if final else _last_sentence_end(state.text, state.validated)
            if end <= state.validated:
                continue
            piece = state.text[state.validated:end]
            verdict = await self.validate(
                self.ex, Answer(text=piece, partial=True, prior_text=state.text[: state.validated], finish_reason=None)
            )
            if isinstance(verdict, (Block, Reject)):
                return self._blocked(idx, verdict)
            state.validated = end
        return []

    def _release(self, final: bool) -> list[bytes]:
        """Held chunks whose text is all validated, in order; stop at the first that is not."""
        out: list[bytes] = []
        while self.held:
            head = self.held[0]
            if head.tool_delta:
                break
            if any(end > self.choices[idx].validated for idx, end in head.ends.items()):
                break
            self.held.pop(0)
            for idx, end in head.ends.items():
                self.choices[idx].released = end
            out.append(head.raw)
        return out

    def _blocked(self, idx: int, verdict: Block | Reject) -> list[bytes]:
        """End the stream: the validated remainder, the notice, finish_reason content_filter."""
        self.outcome = "blocked"
        out = self._release(final=False)
        state = self.choices[idx]
        chunks: list[dict[str, Any]] = []
        remainder = state.text[state.released : state.validated]
        if remainder.strip():
            chunks.append(self._chunk(idx, {"content": remainder.rstrip()}))
        notice = verdict.notice if isinstance(verdict, Block) else verdict.message
        prefix = "\n\n" if state.text[: state.validated].strip() else ""
        chunks.append(self._chunk(idx, {"content": prefix + notice}))
        chunks.append(self._chunk(idx, {}, finish_reason="content_filter"))
        self.held.clear()
        out += [sse.encode(c) for c in chunks]
        if self.usage:
            out.append(sse.encode({**self.template, "object": "chat.completion.chunk", "choices": [], "usage": self.usage}))
        out.append(sse.DONE)
        return out

    def _chunk(self, idx: int, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        base = {"id": "chatcmpl-ctxwarden", "object": "chat.completion.chunk", "created": int(time.time()), "model": self.ex.model}
        base.update(self.template)
        base["object"] = "chat.completion.chunk"
        return {**base, "choices": [{"index": idx, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}

    def _flush_tool_calls(self, calls: list[dict[str, Any]], proxy_calls: list[dict[str, Any]]) -> list[bytes]:
        """Release held tool-call deltas; calls the proxy cannot answer now are left out."""
        held_tools = [h for h in self.held if h.tool_delta]
        self.held = [h for h in self.held if not h.tool_delta]
        out = self._release(final=True)
        if not held_tools:
            return out
        if not proxy_calls:
            return out + [h.raw for h in held_tools]
        kept = [c for c in calls if c not in proxy_calls]
        if not kept:
            return out
        out.append(sse.encode(self._chunk(0, {"tool_calls": [
            {"index": i, "id": c["id"], "type": "function", "function": c["function"]} for i, c in enumerate(kept)
        ]})))
        return out


def _finish_as_stop(raw: bytes) -> bytes:
    """A finish chunk announcing tool calls that were all dropped (recall rounds used up) ends as "stop"."""
    event = next(iter(sse.EventSplitter().feed(raw)), None)
    obj = event.json() if event else None
    if not isinstance(obj, dict) or not any(c.get("finish_reason") == "tool_calls" for c in obj.get("choices") or []):
        return raw
    for choice in obj["choices"]:
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
    return sse.encode(obj)


def _assemble(tool_deltas: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    return [tool_deltas[i] for i in sorted(tool_deltas)]


def _last_sentence_end(text: str, start: int) -> int:
    end = start
    for match in _SENTENCE_END.finditer(text, start):
        end = match.end()
    return end


def parse_arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
