"""Build the services policies use: token counter, metrics, embedder, store, and `complete()`."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from typing import Any

from ctxwarden.policies.base import Exchange, Services
from ctxwarden.policies.text.tokens import TiktokenCounter

from .config import EmbedderChoice, Settings
from .embeddings import build_embedder
from .errors import ProxyError
from .models import ModelInfo
from .state import build_state
from .storage import ChromaStore
from .telemetry import Telemetry
from .upstream.client import Upstream, completion_json

log = logging.getLogger("ctxwarden.services")


class LazyEmbedder:
    """Loads the embedding model on first use, so start-up stays fast when no policy embeds."""

    def __init__(self, choice: EmbedderChoice) -> None:
        self._config = choice
        self._impl: Any = None
        self._lock = threading.Lock()  # two policies' threads asking at once build one model, not two

    def _get(self) -> Any:
        if self._impl is None:
            with self._lock:
                if self._impl is None:
                    self._impl = build_embedder(self._config)
        return self._impl

    @property
    def name(self) -> str:
        return self._get().name

    @property
    def dim(self) -> int:
        return self._get().dim

    def embed(self, texts):
        return self._get().embed(texts)

    def embed_array(self, texts):
        return self._get().embed_array(texts)


class NamedEmbedders:
    """Embedders by provider name (Services.embedder_named), each loaded on first use and shared by every
    policy that asks for it: one MiniLM session per process, however many policies read with it."""

    def __init__(self, main: EmbedderChoice, main_embedder: LazyEmbedder) -> None:
        self._built: dict[str, LazyEmbedder] = {main.provider: main_embedder} if main.model is None else {}
        self._lock = threading.Lock()

    def __call__(self, provider: str) -> LazyEmbedder:
        with self._lock:  # asked from the policies' preparing threads
            if provider not in self._built:
                self._built[provider] = LazyEmbedder(EmbedderChoice(provider=provider))  # type: ignore[arg-type]
            return self._built[provider]


def make_complete_raw(upstream: Upstream):
    async def complete_raw(model: str, messages: list[dict[str, Any]], exchange: Exchange | None = None,
                           **kwargs: Any) -> dict[str, Any]:
        """One non-streamed completion through the upstream: its response JSON. Raises on failure."""
        headers = dict(exchange.notes.upstream_headers) if exchange else upstream.request_headers({})
        headers["content-type"] = "application/json"
        body = json.dumps({"model": model, "messages": messages, **kwargs}).encode()
        result = await upstream.send("POST", "chat/completions", body, headers)
        response = result.response
        if response.status_code >= 400:
            raise ProxyError(response.status_code, "upstream_error", f"completion for {model} failed with {response.status_code}")
        return completion_json(response)

    return complete_raw


def make_complete(upstream: Upstream, complete_raw=None):
    complete_raw = complete_raw or make_complete_raw(upstream)

    async def complete(model: str, messages: list[dict[str, Any]], exchange: Exchange | None = None, **kwargs: Any) -> str:
        """One non-streamed completion through the upstream (summaries, judges): its text. Raises on failure."""
        data = await complete_raw(model, messages, exchange=exchange, **kwargs)
        return (data.get("choices") or [{}])[0].get("message", {}).get("content") or ""

    return complete


def build_services(settings: Settings, telemetry: Telemetry, upstream: Upstream, models: ModelInfo) -> Services:
    complete_raw = make_complete_raw(upstream)
    embedder = LazyEmbedder(settings.embeddings)
    return Services(
        versions=build_state(settings.state, telemetry.metrics),
        tokens=TiktokenCounter(),
        metrics=telemetry.metrics,
        embedder=embedder,
        embedder_named=NamedEmbedders(settings.embeddings, embedder),
        store=ChromaStore(settings.storage),
        complete=make_complete(upstream, complete_raw),
        complete_raw=complete_raw,
        context_window=models.context_window,
    )


def services_for(policy_name: str, settings: Settings, services: Services) -> Services:
    """A policy's services: the shared ones, with its own embedder if `embeddings.per_policy` names one."""
    choice = settings.embeddings.per_policy.get(policy_name)
    if choice is None:
        return services
    shared = services.embedder_named is not None and choice.model is None  # the process's one of that provider
    return dataclasses.replace(services, embedder=services.embedder_named(choice.provider) if shared else LazyEmbedder(choice))
