"""Relay a streamed chat completion to the client without buffering it whole.

Three modes, chosen per request:
- pass-through: bytes go to the client as they arrive, untouched (no policy reads the stream);
- gated: the stream validators judge the text sentence by sentence; of a sentence still being
  streamed, what they clear (`releasable`) goes out at once, the rest waits for the judgement
  (original chunks are released as soon as all of their text is judged or cleared, so framing
  and timing are kept); a block ends its choice with the notice and finish_reason content_filter
  (the other choices of an n > 1 request go on; once every choice is blocked the stream ends);
- proxy tools: tool-call deltas are held until the round ends; when the model only called tools
  the proxy answers itself (context_recall), the proxy answers them and streams the next round.
A stream the upstream cuts, or breaks with an event that is not JSON (pass-through) or not a chat
chunk (parsed modes), ends with an in-stream error event, never a hang; what broke it never goes out.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

import httpx

from ctxwarden.policies.base import Answer, Block, Exchange, Reject
from ctxwarden.policies.poisoning.assess import MAX_CLAIM_CHARS
from ctxwarden.policies.text.sentences import piece_end

from ..answers import BLOCKED_MARK, estimated_usage
from ..errors import ProxyError
from ..genai import model_of
from ..proxy_tools import Calls, ProxyToolRounds, add_usage
from . import sse
from .rounds import OneStream
from .toolcalls import add_tool_deltas, assemble, finish_as_stop

log = logging.getLogger("ctxwarden.streaming")


Validate = Callable[[Exchange, Answer], Awaitable[Any]]  # returns a Verdict or None
Releasable = Callable[[Exchange, str], int]  # an unfinished sentence → how much of it may go out unjudged


@dataclass
class _ChoiceText:
    text: str = ""
    validated: int = 0  # text[:validated] passed the validators
    cleared: int = 0  # text[:cleared] may go out unjudged: the validators saw nothing to judge in it
    released: int = 0  # text[:released] reached the client
    blocked: bool = False  # ended by a verdict: the rest of this choice never reaches the client

    @property
    def release_limit(self) -> int:
        """Text up to here may reach the client: judged, or cleared by the validators."""
        return max(self.validated, self.cleared)


@dataclass
class _Held:
    raw: bytes
    ends: dict[int, int] = field(default_factory=dict)  # choice index → end offset of its text in this chunk
    tool_delta: bool = False  # a tool-call delta: settled at the round's end (_flush_tool_calls)


class StreamRelay:
    def __init__(self, ex: Exchange, validate: Validate | None, releasable: Releasable | None = None,
                 tools: ProxyToolRounds | None = None, on_finish: Callable[[str], Awaitable[None]] | None = None) -> None:
        self.ex = ex
        self.validate = validate
        self.releasable = releasable  # None: every sentence is held until it is judged
        self.tools = tools  # the proxy-tool rounds, when the proxy added tools to this request
        self.on_finish = on_finish
        self.choices: dict[int, _ChoiceText] = {}
        self.held: list[_Held] = []
        self.template: dict[str, Any] = {}
        self.usage: dict[str, int] = {}  # summed over the proxy-tool rounds: the client sees one answer
        self.round_usage: dict[str, int] = {}  # the round in flight's: its own call's (chat_rounds.py)
        self.outcome = "ok"
        self.ended = False  # the stream is over for the client (cut, broken, or every choice blocked)
        n = ex.body.get("n")
        self.n = n if isinstance(n, int) and n > 1 else 1
        self.first_chunk_at: float | None = None
        self.tail = b""  # the last bytes received (the model and usage are read from them at the end)
        self.strip_usage = ex.notes.usage_added  # the proxy asked for usage the client did not want
        self.one_stream = OneStream()  # later proxy-tool rounds' chunks as part of the first round's stream

    # ------------------------------------------------------------------ pass-through

    async def passthrough(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """Whole events as they complete, each as it came; an error event if the upstream sends an
        event that is neither JSON nor [DONE] (it and the rest never go out) or stops before [DONE]."""
        try:
            guard = sse.PassGuard(self.strip_usage)
            async for chunk in response.aiter_bytes():
                if self.first_chunk_at is None:
                    self.first_chunk_at = time.perf_counter()
                self.tail = (self.tail + chunk)[-2048:]
                out = guard.feed(chunk)
                if guard.problem:
                    yield b"".join([out, *self._broken(guard.problem)])
                    return
                if out:
                    yield out
            if b"[DONE]" not in self.tail[-32:]:
                self.outcome = "cut"
                yield sse.error_event("The upstream ended the stream before it was complete.", "upstream_stream_cut")
                return
            out = guard.rest()
            if guard.problem:
                yield b"".join(self._broken(guard.problem))
            elif out:
                yield out
        except Exception as exc:
            yield self._cut(exc)
        finally:
            await self._close(response)

    def _cut(self, exc: Exception) -> bytes:
        """The in-stream error event that ends a stream the upstream (or something unforeseen) broke off."""
        self.outcome = "cut"
        self.ended = True
        if isinstance(exc, ProxyError):
            log.warning("stream %s cut: %s", self.ex.request_id, exc.message)
            return sse.error_event(exc.message, exc.code)
        if not isinstance(exc, httpx.HTTPError):
            log.error("stream %s failed unexpectedly", self.ex.request_id, exc_info=exc)
        return sse.error_event(f"The upstream stream failed: {type(exc).__name__}.", "upstream_stream_cut")

    async def _close(self, response: httpx.Response) -> None:
        await response.aclose()
        if self.on_finish:
            await self.on_finish(self.outcome)

    # ------------------------------------------------------------------ parsed modes

    async def relay(self, response: httpx.Response) -> AsyncIterator[bytes]:
        try:
            while True:
                calls: Calls = []
                finish_events: list[bytes] = []
                round_ok = False
                async for out in self._round(response, calls, finish_events):
                    if out is None:
                        round_ok = True
                        continue
                    yield out
                await response.aclose()
                if self.ended:
                    return
                if not round_ok:
                    for out in self._cut_short():
                        yield out
                    return
                proxy_calls, client_calls = self.tools.split(calls) if self.tools else ([], calls)
                if self.tools and self.tools.may_continue(proxy_calls, client_calls):
                    assistant = {"role": "assistant", "content": None, "tool_calls": calls}
                    self.tools.end_round(self.round_usage, model_of(self.tail))
                    self.round_usage = {}
                    response = await self.tools.continue_with(assistant, proxy_calls)
                    self.held = [h for h in self.held if not h.tool_delta]  # drop the answered tool-call deltas
                    self.one_stream.next_round()
                    continue
                for out in self._end(proxy_calls, client_calls, finish_events):
                    yield out
                return
        except Exception as exc:
            yield self._cut(exc)
        finally:
            await self._close(response)

    def _cut_short(self) -> list[bytes]:
        """The upstream ended a round before [DONE]: what was validated, then an error event."""
        self.outcome = "cut"
        self.ended = True
        return [*self._release(final=True),
                sse.error_event("The upstream ended the stream before it was complete.", "upstream_stream_cut")]

    def _end(self, proxy_calls: Calls, client_calls: Calls, finish_events: list[bytes]) -> list[bytes]:
        """The last round is settled: the client's tool calls, the finish chunks, [DONE]."""
        if proxy_calls and self.tools:
            self.tools.report_dropped(proxy_calls)
        out = self._flush_tool_calls(proxy_calls, client_calls)
        only_dropped = bool(proxy_calls) and not client_calls
        blocked = self._blocked_indexes()
        for event in finish_events:  # a blocked choice already had its finish chunk
            kept = sse.without_choices(event, blocked) if blocked else event
            if kept is not None:
                out.append(finish_as_stop(kept) if only_dropped else kept)
        out.append(sse.DONE)
        return out

    async def _round(self, response: httpx.Response, calls: Calls, finish_events: list[bytes]) -> AsyncIterator[bytes | None]:
        """One upstream stream. Yields bytes for the client; yields None once [DONE] arrived."""
        splitter = sse.EventSplitter()
        tool_deltas: dict[int, dict[str, Any]] = {}
        async for chunk in response.aiter_bytes():
            if self.first_chunk_at is None:
                self.first_chunk_at = time.perf_counter()
            self.tail = (self.tail + chunk)[-2048:]  # the answering model and usage are read from it at the end
            for event in splitter.feed(chunk):
                if event.is_done:
                    for out in await self._validate_pending(final=True):
                        yield out
                    if self.ended:
                        return
                    for out in self._release(final=True):
                        yield out
                    calls.extend(assemble(tool_deltas))
                    yield None
                    return
                for out in await self._take(event, tool_deltas, finish_events):
                    yield out
                if self.ended:
                    return

    async def _take(self, event: sse.Event, tool_deltas: dict[int, dict[str, Any]], finish_events: list[bytes]) -> list[bytes]:
        """One event of a round: hold it, validate what it completes, return what may go out now."""
        obj = event.json()
        if obj is None and event.data.strip():
            return self._broken(f"an event's data is not valid JSON: {event.data[:120]!r}")
        if not isinstance(obj, dict) or "choices" not in obj:
            return [event.raw]  # keep-alives, comments, errors: relay as they are
        problem = sse.chunk_problem(obj)
        if problem:
            return self._broken(f"a chunk is not a chat-completion chunk: {problem}")
        blocked = self._blocked_indexes()
        if blocked and any(c.get("index", 0) in blocked for c in obj["choices"]):
            raw = sse.without_choices(event.raw, blocked)  # the rest of a blocked choice is dropped
            if raw is None:
                return []
            event = sse.Event(raw, event.data)
            obj = {**obj, "choices": [c for c in obj["choices"] if c.get("index", 0) not in blocked]}
        if (joined := self.one_stream.chunk(obj)) is not None:
            obj, event = joined, sse.Event(sse.encode(joined), "")
        self.template = {k: obj[k] for k in ("id", "object", "created", "model", "system_fingerprint") if k in obj}
        if obj.get("usage"):
            self._add_usage(obj["usage"])
            if not obj["choices"]:
                if not self.strip_usage:
                    finish_events.append(sse.encode({**obj, "usage": self.usage}))
                return []
        ends, has_tool_delta, is_finish = self._read_choices(obj["choices"], tool_deltas)
        if has_tool_delta:
            self.held.append(_Held(event.raw, tool_delta=True))  # tool-call chunks wait for the round's end
            return []
        if is_finish and not ends and (self.ex.proxy_tools or self.validate):
            finish_events.append(event.raw)  # the finish chunk goes out after the round is settled
            return []
        self.held.append(_Held(event.raw, ends))
        out = await self._validate_pending(final=False)
        if self.ended:
            return out
        return out + self._release(final=False)

    def _broken(self, problem: str) -> list[bytes]:
        """The upstream sent what is not a stream event we can read: what was validated, then an error event."""
        log.warning("stream %s from the upstream is broken: %s", self.ex.request_id, problem)
        self.outcome = "cut"
        self.ended = True
        message = f"The upstream sent a stream ctxwarden cannot read: {problem}"
        return [*self._release(final=False), sse.error_event(message, "upstream_invalid_stream")]

    def _blocked_indexes(self) -> set[int]:
        return {idx for idx, state in self.choices.items() if state.blocked}

    def _read_choices(self, choices: list[dict[str, Any]], tool_deltas: dict[int, dict[str, Any]]) -> tuple[dict[int, int], bool, bool]:
        """Add a chunk's text and tool-call deltas to the round: (text ends per choice, had tool deltas, finishes)."""
        ends: dict[int, int] = {}
        has_tool_delta = False
        is_finish = False
        for choice in choices:
            delta = choice.get("delta") or {}
            if delta.get("tool_calls") and self.ex.proxy_tools:
                has_tool_delta = True
                add_tool_deltas(tool_deltas, delta["tool_calls"])
            if choice.get("finish_reason"):
                is_finish = True
            text = delta.get("content")
            if text and self.validate:
                idx = choice.get("index", 0)
                state = self.choices.setdefault(idx, _ChoiceText())
                state.text += text
                ends[idx] = len(state.text)
        return ends, has_tool_delta, is_finish

    def _add_usage(self, usage: dict[str, Any]) -> None:
        """The counts summed (`add_usage`, as the other APIs' rounds are); the details as the first round gave them."""
        for total in (self.usage, self.round_usage):
            add_usage(total, usage)
            for key, value in usage.items():
                total.setdefault(key, value)

    async def _validate_pending(self, final: bool) -> list[bytes]:
        """Validate every complete sentence not yet validated (all remaining text when final)."""
        if not self.validate:
            return []
        out: list[bytes] = []
        for idx, state in list(self.choices.items()):
            if state.blocked or state.validated >= len(state.text):
                continue
            end = len(state.text) if final else piece_end(state.text, state.validated, MAX_CLAIM_CHARS)
            if end <= state.validated:
                continue
            piece = state.text[state.validated:end]
            verdict = await self.validate(
                self.ex, Answer(text=piece, partial=True, prior_text=state.text[: state.validated], finish_reason=None)
            )
            if isinstance(verdict, (Block, Reject)):
                out += self._blocked(idx, verdict)
                if self.ended:
                    return out
                continue
            state.validated = end
        if not final and self.releasable is not None:
            for state in self.choices.values():
                pending = state.text[state.validated:]
                if pending and not state.blocked:
                    state.cleared = max(state.cleared, state.validated + self.releasable(self.ex, pending))
        return out

    def _release(self, final: bool) -> list[bytes]:
        """Held chunks whose text is all judged or cleared, in order; stop at the first that is not."""
        out: list[bytes] = []
        while self.held:
            head = self.held[0]
            if head.tool_delta:
                break
            if any(end > self.choices[idx].release_limit for idx, end in head.ends.items()):
                break
            self.held.pop(0)
            for idx, end in head.ends.items():
                self.choices[idx].released = end
            out.append(head.raw)
        return out

    def _blocked(self, idx: int, verdict: Block | Reject) -> list[bytes]:
        """End choice `idx`: its validated remainder, the notice, finish_reason content_filter; the
        rest of its text never goes out. Once every choice is blocked, the stream ends."""
        self.outcome = "blocked"
        out = self._release(final=False)
        state = self.choices[idx]
        state.blocked = True
        chunks: list[dict[str, Any]] = []
        remainder = state.text[state.released : state.validated]
        if remainder.strip():
            chunks.append(self._chunk(idx, {"content": remainder.rstrip()}))
        notice = verdict.notice if isinstance(verdict, Block) else verdict.message
        prefix = "\n\n" if state.text[: state.validated].strip() else ""
        chunks.append({**self._chunk(idx, {"content": prefix + notice}), "ctxwarden": BLOCKED_MARK})
        chunks.append(self._chunk(idx, {}, finish_reason="content_filter"))
        out += [sse.encode(c) for c in chunks]
        if len(self._blocked_indexes()) < self.n:
            self._drop_held_text(idx)
            return out + self._release(final=False)
        self.ended = True
        self.held.clear()
        if not self.usage:  # the upstream's comes last: the proxy's estimate, marked as such
            said = "".join(state.text for state in self.choices.values())
            self.usage = self.round_usage = estimated_usage(self.ex, said)
        if self.usage and not self.strip_usage:
            out.append(sse.encode({**self.template, "object": "chat.completion.chunk", "choices": [], "usage": self.usage}))
        out.append(sse.DONE)
        return out

    def _drop_held_text(self, idx: int) -> None:
        """Take a blocked choice out of the held chunks: its unjudged text never goes out."""
        kept: list[_Held] = []
        for held in self.held:
            if idx in held.ends:
                raw = sse.without_choices(held.raw, {idx})
                if raw is None:
                    continue
                held = _Held(raw, {k: v for k, v in held.ends.items() if k != idx}, held.tool_delta)
            kept.append(held)
        self.held = kept

    def _chunk(self, idx: int, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        base = {"id": "chatcmpl-ctxwarden", "object": "chat.completion.chunk", "created": int(time.time()), "model": self.ex.model}
        base.update(self.template)
        base["object"] = "chat.completion.chunk"
        return {**base, "choices": [{"index": idx, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}

    def _flush_tool_calls(self, proxy_calls: Calls, client_calls: Calls) -> list[bytes]:
        """Release held tool-call deltas; calls the proxy cannot answer now are left out."""
        held_tools = [h for h in self.held if h.tool_delta]
        self.held = [h for h in self.held if not h.tool_delta]
        out = self._release(final=True)
        if not held_tools:
            return out
        if not proxy_calls:
            return out + [h.raw for h in held_tools]
        if not client_calls:
            return out
        out.append(sse.encode(self._chunk(0, {"tool_calls": [
            {"index": i, "id": c["id"], "type": "function", "function": c["function"]} for i, c in enumerate(client_calls)
        ]})))
        return out

