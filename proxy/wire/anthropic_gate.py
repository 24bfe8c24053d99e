"""What a Messages API stream means to the answer checker's gate (streaming/typed.py).

Text arrives in `content_block_delta` events whose delta is a `text_delta`; a block's
`content_block_stop`, `message_delta` and `message_stop` close it. A blocked answer ends as the
API ends a refused message: the notice as the text block's last delta, `content_block_stop`,
`message_delta` with `stop_reason: refusal` (marked `"ctxwarden": {"author": "proxy", "reason":
"answer_blocked"}`) and `message_stop`.
"""

from __future__ import annotations

from typing import Any

from .anthropic_answers import sse_event

CLOSING = {"content_block_stop", "message_delta", "message_stop"}


class MessagesDialect:
    def __init__(self) -> None:
        self.index = 0  # the content block the text is in
        self.message: dict[str, Any] = {}  # the message of `message_start`
        self.output_tokens = 0
        self.stopped = False

    @property
    def ended(self) -> bool:
        return self.stopped

    def read(self, event: dict[str, Any]) -> tuple[str, bool]:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            self.message = event["message"]
        elif kind == "message_delta":
            tokens = (event.get("usage") or {}).get("output_tokens")
            self.output_tokens = tokens if isinstance(tokens, int) else self.output_tokens
        elif kind == "message_stop":
            self.stopped = True
        if kind != "content_block_delta":
            return "", kind in CLOSING
        delta = event.get("delta") or {}
        if delta.get("type") != "text_delta":
            return "", False
        if not isinstance(delta.get("text"), str):
            raise TypeError("a text_delta whose text is not a string")
        self.index = event.get("index", 0)
        return delta["text"], False

    def blocked_events(self, released: str, remainder: str, notice: str, ending: Any) -> list[bytes]:
        mark: dict[str, Any] = {"author": "proxy", "reason": "answer_blocked"}
        if not self.output_tokens:  # Anthropic's count comes in the last message_delta: the proxy's estimate
            self.output_tokens = ending.estimate["completion_tokens"]
            mark["usage"] = "estimated"
        return [
            sse_event("content_block_delta", {"type": "content_block_delta", "index": self.index,
                                              "delta": {"type": "text_delta", "text": remainder + notice}}),
            sse_event("content_block_stop", {"type": "content_block_stop", "index": self.index}),
            sse_event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "refusal", "stop_sequence": None},
                                        "usage": {"output_tokens": self.output_tokens}, "ctxwarden": mark}),
            sse_event("message_stop", {"type": "message_stop"}),
        ]

    def error_event(self, message: str, code: str) -> bytes:
        kind = "overloaded_error" if code == "overloaded" else "api_error"
        return sse_event("error", {"type": "error", "error": {"type": kind, "message": message}})

    def usage(self) -> dict[str, int] | None:
        """In chat's names, for the GenAI metrics."""
        usage = self.message.get("usage") or {}
        out = {"completion_tokens": self.output_tokens} if self.output_tokens else {}
        if isinstance(usage.get("input_tokens"), int):
            out["prompt_tokens"] = usage["input_tokens"]
        return out or None

    def model(self) -> str | None:
        return self.message.get("model")
