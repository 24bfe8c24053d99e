"""Model facts: context windows (config first, then litellm's bundled model map) and which
models go through litellm because their provider does not speak OpenAI's API."""

from __future__ import annotations

import importlib.util
import json
import logging
from functools import lru_cache
from pathlib import Path

from .config import ModelConfig

log = logging.getLogger("ctxwarden.models")

DEFAULT_CONTEXT_WINDOW = 128_000
OTHER_MODEL = "other"  # the metric label of every model neither configured nor in litellm's map

# Provider prefixes ("anthropic/claude-…") whose APIs differ from OpenAI's: litellm adapts them.
# Any other model name, slashes included ("meta-llama/…" on vLLM), is forwarded as it is.
LITELLM_PROVIDERS = frozenset({
    "anthropic", "bedrock", "bedrock_converse", "vertex_ai", "vertex_ai_beta", "gemini", "cohere", "cohere_chat",
    "sagemaker", "huggingface", "replicate", "ollama", "ollama_chat", "watsonx", "cloudflare", "ai21",
    "azure", "azure_ai", "mistral", "groq", "together_ai", "fireworks_ai", "deepseek", "xai", "perplexity",
    "openrouter", "databricks", "predibase", "nlp_cloud", "aleph_alpha", "petals", "clarifai", "voyage",
})


@lru_cache(maxsize=1)
def _litellm_model_map() -> dict:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(list(spec.submodule_search_locations)[0]) / "model_prices_and_context_window_backup.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log.warning("litellm's bundled model map is unreadable; context windows default to %d", DEFAULT_CONTEXT_WINDOW)
        return {}


class ModelInfo:
    def __init__(self, configured: dict[str, ModelConfig]) -> None:
        self.configured = configured
        self._cache: dict[str, int] = {}

    def context_window(self, model: str) -> int:
        hit = self._cache.get(model)
        if hit is None:
            hit = self._lookup(model)
            if len(self._cache) < 4096:  # model names come from clients: do not cache them without bound
                self._cache[model] = hit
        return hit

    def known(self, model: str) -> bool:
        """Configured under `models:` or in litellm's bundled map (with or without a provider prefix)."""
        if model in self.configured:
            return True
        table = _litellm_model_map()
        return model in table or ("/" in model and model.split("/", 1)[1] in table)

    def metric_label(self, model: object) -> str:
        """The model as a metric label: its name when known, else "other" (client-chosen names
        would otherwise make one series each, and a hostile one could flood /metrics)."""
        return model if isinstance(model, str) and self.known(model) else OTHER_MODEL

    def _lookup(self, model: str) -> int:
        if model in self.configured:
            return self.configured[model].context_window
        table = _litellm_model_map()
        bare = model.split("/", 1)[1] if "/" in model else model
        for name in (model, bare):
            info = table.get(name) or {}
            window = info.get("max_input_tokens") or info.get("max_tokens")
            if isinstance(window, int) and window > 0:
                return window
        return DEFAULT_CONTEXT_WINDOW


def uses_litellm(model: str) -> bool:
    prefix, sep, _ = model.partition("/")
    return bool(sep) and prefix in LITELLM_PROVIDERS
