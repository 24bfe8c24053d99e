"""OpenTelemetry GenAI semantic conventions: the request's SERVER span (continuing the caller's
W3C `traceparent`) and a CLIENT span `chat {model}` per upstream call, with the
`gen_ai.client.operation.duration` and `gen_ai.client.token.usage` metrics.

Without a span receiver the tracer is a no-op; the metrics are kept either way.
"""

from __future__ import annotations

import json
import re
import time
from functools import lru_cache
from typing import Any, Mapping
from urllib.parse import urlparse

from opentelemetry.propagate import extract
from opentelemetry.trace import SpanKind, Status, StatusCode

from .telemetry import Telemetry

OPENAI_COMPATIBLE = "openai"  # what every upstream spoken to in OpenAI's protocol is reported as


def provider_name(model: str, through_litellm: bool) -> str:
    """`gen_ai.provider.name`: the litellm provider prefix (`anthropic/…` → anthropic), else openai."""
    if through_litellm and "/" in model:
        return model.split("/", 1)[0].lower()
    return OPENAI_COMPATIBLE


def server_span(telemetry: Telemetry, method: str, route: str, headers: Mapping[str, str]) -> Any:
    """The request's span: kind SERVER, a child of the caller's trace when it sent `traceparent`."""
    parent = extract(headers) if telemetry.exported else None
    return telemetry.tracer.start_as_current_span(
        f"{method} {route}", context=parent, kind=SpanKind.SERVER,
        attributes={"http.request.method": method, "http.route": route, "gen_ai.operation.name": "chat"})


def fail_span(span: Any, status: int, error_type: str) -> None:
    """A server-side failure (5xx): status ERROR with `error.type`, as the conventions ask."""
    if status >= 500 and span.is_recording():
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR, error_type))


@lru_cache(maxsize=64)
def _server_attributes(base_url: str) -> dict[str, Any]:
    url = urlparse(base_url)
    return {"server.address": url.hostname or "", "server.port": url.port or (443 if url.scheme == "https" else 80)}


class UpstreamCall:
    """One call to the upstream, from sending to the end of its answer (a stream's last chunk)."""

    def __init__(self, telemetry: Telemetry, model: str, provider: str, base_url: str,
                 tally: dict[str, int] | None = None) -> None:
        self.telemetry = telemetry
        self.tally = tally  # the request's running usage (RequestNotes.usage): what its client key is charged
        self.attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                           "gen_ai.request.model": model}
        span_attributes = {**self.attributes, **_server_attributes(base_url)}
        self.span = telemetry.tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=span_attributes)
        self.started = time.perf_counter()
        self.ended = False

    def finish(self, status: int | None = None, usage: Any = None, response_model: Any = None,
               error: str | None = None) -> None:
        """End the span and record the call's duration and token usage (idempotent)."""
        if self.ended:
            return
        self.ended = True
        error = error or (str(status) if status is not None and status >= 400 else None)
        span = self.span
        if span.is_recording():
            if status is not None:
                span.set_attribute("http.response.status_code", status)
            if isinstance(response_model, str):
                span.set_attribute("gen_ai.response.model", response_model)
            if error:
                span.set_attribute("error.type", error)
                span.set_status(Status(StatusCode.ERROR, error))
        metrics = self.telemetry.metrics
        extra = {"error.type": error} if error else {}
        metrics.record("gen_ai.client.operation.duration", time.perf_counter() - self.started, **self.attributes, **extra)
        if isinstance(usage, dict):
            for kind, key in (("input", "prompt_tokens"), ("output", "completion_tokens")):
                if isinstance(usage.get(key), int) and self.tally is not None:
                    self.tally[key] = self.tally.get(key, 0) + usage[key]
                if isinstance(usage.get(key), int):
                    if span.is_recording():
                        span.set_attribute(f"gen_ai.usage.{kind}_tokens", usage[key])
                    metrics.record("gen_ai.client.token.usage", usage[key], **self.attributes, **{"gen_ai.token.type": kind})
        span.end()


# Read from an OpenAI-shaped answer without parsing it: the usage and the model a call reports.
_DECODER = json.JSONDecoder()
_MODEL = re.compile(rb'"model"\s*:\s*"([^"\\]{1,200})"')


def usage_of(content: bytes) -> dict[str, Any] | None:
    """The usage object of a JSON answer or of the last SSE chunks, without parsing the rest (the
    Responses and Messages APIs nest objects in it, so it is decoded from its opening brace)."""
    tail = content[-4096:] if len(content) > 4096 else content
    at = tail.rfind(b'"usage"')
    if at < 0:
        return None
    start = tail.find(b"{", at, at + 32)
    if start < 0 or tail[at + 7:start].strip(b" \t\r\n:"):  # `"usage": null` and the like: no usage here
        return None
    try:
        usage, _ = _DECODER.raw_decode(tail[start:].decode("utf-8", "replace"))
    except ValueError:
        return None
    return usage if isinstance(usage, dict) else None


def model_of(content: bytes) -> str | None:
    """The answering model named in a JSON answer or an SSE chunk (gen_ai.response.model): a JSON
    answer names it at its start, before a content of any length; every chunk of a stream names it."""
    found = _MODEL.search(content, 0, 4096)
    return found.group(1).decode("utf-8", "replace") if found else None


def chat_usage(usage: Any) -> dict[str, int] | None:
    """Usage in input/output names (the Responses and Messages APIs) in chat's names (prompt/completion
    tokens), which `UpstreamCall.finish` records."""
    if not isinstance(usage, dict):
        return None
    out = {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens"),
           "total_tokens": usage.get("total_tokens")}
    return {k: v for k, v in out.items() if isinstance(v, int)}
