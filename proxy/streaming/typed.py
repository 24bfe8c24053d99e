"""Relay a typed-event stream (Responses, Messages) through the answer checker's gate.

Every upstream event is read (a stream whose event is not JSON ends with the API's error event,
never relayed as garbage), held in the gate with the text it carries, and released once the text
before it is judged or cleared. A block ends the answer with the notice in the API's own closing
events (the dialect writes them) and the rest of the upstream stream is dropped. The wire details
live in the dialects (wire/responses_gate.py, wire/anthropic_gate.py); this loop is shared.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, AsyncIterator, Protocol

import httpx

from ..answers import estimated_usage
from . import sse
from .gate import TextGate

log = logging.getLogger("ctxwarden.streaming")


class Dialect(Protocol):
    """What one API's stream means to the gate."""

    def read(self, event: dict[str, Any]) -> tuple[str, bool]:
        """The answer text an event adds, and whether it closes the text (all of it must be judged first)."""

    @property
    def ended(self) -> bool:
        """The stream's last event (completed, message_stop) arrived."""

    def blocked_events(self, released: str, remainder: str, notice: str, ending: "Ending") -> list[bytes]:
        """The events that end a blocked answer: after the text that went out (`released`), the
        judged `remainder` that had not, then the `notice` and the API's closing events."""

    def error_event(self, message: str, code: str) -> bytes:
        """An in-stream error in the API's shape."""

    def usage(self) -> dict[str, int] | None:
        """The stream's token usage in chat's names (prompt/completion tokens), for the metrics."""

    def model(self) -> str | None:
        """The model that answered."""


@dataclass
class Ending:
    """What a blocked answer's closing events need besides its text: the last event that went out
    (its sequence number comes next), and usage for an answer the upstream had not yet reported its
    own for (it comes last, and waiting for it would pay for the rest of a blocked answer)."""

    last_released: bytes
    estimate: dict[str, Any]  # answers.estimated_usage, in chat's names


class TypedRelay:
    def __init__(self, gate: TextGate, dialect: Dialect) -> None:
        self.gate = gate
        self.dialect = dialect
        self.outcome = "ok"
        self.last_released = b""

    async def relay(self, response: httpx.Response) -> AsyncIterator[bytes]:
        splitter = sse.EventSplitter()
        gate = self.gate
        try:
            async for chunk in response.aiter_bytes():
                for event in splitter.feed(chunk):
                    out = await self._take(event)
                    if out:
                        yield b"".join(out)
                    if self.outcome != "ok":
                        return
            await gate.judge(final=True)
            if gate.blocked:
                yield b"".join(self._blocked())
                return
            rest = gate.release()
            if not self.dialect.ended:
                self.outcome = "cut"
                rest.append(self.dialect.error_event("The upstream ended the stream before it was complete.", "upstream_stream_cut"))
            if rest:
                yield b"".join(rest)
        except Exception as exc:
            self.outcome = "cut"
            if not isinstance(exc, httpx.HTTPError):
                log.error("stream %s failed unexpectedly", gate.ex.request_id, exc_info=exc)
            yield self.dialect.error_event(f"The upstream stream failed: {type(exc).__name__}.", "upstream_stream_cut")
        finally:
            await response.aclose()

    async def _take(self, event: sse.Event) -> list[bytes]:
        gate = self.gate
        obj = event.json()
        if not isinstance(obj, dict):
            if not event.data.strip():  # a comment or keep-alive: goes out in its turn
                gate.hold(event.raw)
                return gate.release()
            return self._broken(f"an event's data is not a JSON object: {event.data[:120]!r}")
        try:
            text, closes = self.dialect.read(obj)
        except (TypeError, ValueError, AttributeError) as exc:
            return self._broken(f"an event of an unexpected shape ({exc})")
        gate.hold(event.raw, text)
        await gate.judge(final=closes)
        if gate.blocked:
            return self._blocked()
        return self._released(gate.release())

    def _released(self, out: list[bytes]) -> list[bytes]:
        if out:
            self.last_released = out[-1]
        return out

    def _blocked(self) -> list[bytes]:
        self.outcome = "blocked"
        out = self._released(self.gate.release())
        remainder, notice = self.gate.ending()
        ending = Ending(self.last_released, estimated_usage(self.gate.ex, self.gate.text))
        return [*out, *self.dialect.blocked_events(self.gate.text[:self.gate.released], remainder, notice, ending)]

    def _broken(self, problem: str) -> list[bytes]:
        log.warning("stream %s from the upstream is broken: %s", self.gate.ex.request_id, problem)
        self.outcome = "cut"
        return [*self.gate.release(),
                self.dialect.error_event(f"The upstream sent a stream ctxwarden cannot read: {problem}", "upstream_invalid_stream")]
