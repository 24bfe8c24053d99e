"""Embedders: wordllama (static, offline, shipped in its wheel) and remote ones through litellm.
Vectors are unit length and cached per text hash, so a text seen before costs a dict lookup."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Sequence

from .config import EmbeddingsConfig


class CachedEmbedder:
    """Wraps an embedding function with an LRU cache keyed by the text's hash."""

    def __init__(self, name: str, dim: int, cache_size: int = 100_000) -> None:
        self.name = name
        self.dim = dim
        self._cache: OrderedDict[bytes, list[float]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def _embed_uncached(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts]
        out: list[list[float] | None] = [None] * len(texts)
        missing: dict[bytes, list[int]] = {}
        with self._lock:
            for i, key in enumerate(keys):
                hit = self._cache.get(key)
                if hit is None:
                    missing.setdefault(key, []).append(i)
                else:
                    self._cache.move_to_end(key)
                    out[i] = hit
        if missing:
            fresh = self._embed_uncached([texts[idx[0]] for idx in missing.values()])
            with self._lock:
                for (key, idxs), vec in zip(missing.items(), fresh):
                    self._cache[key] = vec
                    for i in idxs:
                        out[i] = vec
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return out  # type: ignore[return-value]


class WordLlamaEmbedder(CachedEmbedder):
    def __init__(self, dim: int = 256) -> None:
        super().__init__("wordllama-l2_supercat", dim)
        import wordllama
        from wordllama import WordLlama

        self._model = WordLlama.load(cache_dir=os.path.dirname(wordllama.__file__), disable_download=True, dim=dim)

    def _embed_uncached(self, texts: list[str]) -> list[list[float]]:
        return self._model.embed(texts, norm=True).tolist()


class LiteLLMEmbedder(CachedEmbedder):
    """Remote embeddings (OpenAI, Cohere, Bedrock, …) through litellm's embedding API."""

    def __init__(self, model: str) -> None:
        super().__init__(f"litellm-{model}", 0)
        self.model = model

    def _embed_uncached(self, texts: list[str]) -> list[list[float]]:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        result = litellm.embedding(model=self.model, input=texts)
        vectors = [item["embedding"] for item in result.data]
        self.dim = len(vectors[0]) if vectors else self.dim
        return [_unit(v) for v in vectors]


def _unit(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5 or 1.0
    return [x / norm for x in vector]


def build_embedder(config: EmbeddingsConfig) -> CachedEmbedder:
    if config.provider == "wordllama":
        return WordLlamaEmbedder()
    if config.provider == "litellm":
        if not config.model:
            raise ValueError("embeddings.model must name a model when embeddings.provider is litellm")
        return LiteLLMEmbedder(config.model)
    raise ValueError(f"embeddings.provider: unknown provider {config.provider!r} (known: wordllama, litellm)")
