"""The ONNX embedder must not keep the buffers of the largest batch it ever ran.

Before the arena was switched off, one batch of 32 long texts left the process 650 MB bigger for
good (onnxruntime's CPU arena keeps what it grew to), and a server that embedded varied batches
grew toward 2 GB.
"""
from ctxwarden.proxy.embeddings import MiniLMEmbedder


def _rss_mb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 // 2**20


def test_a_large_batch_leaves_no_lasting_memory_behind():
    embedder = MiniLMEmbedder()
    embedder.embed(["warm up"])
    before = _rss_mb()
    long_texts = [" ".join(f"word{i * 7 + j}" for j in range(300)) for i in range(MiniLMEmbedder.BATCH)]
    vectors = embedder.embed(long_texts)
    assert len(vectors) == MiniLMEmbedder.BATCH
    embedder.embed(["a short text afterwards"])
    assert _rss_mb() - before < 150, "the embedder kept its largest batch's buffers"


def _wordllama_reference():
    import os

    import wordllama
    from wordllama import WordLlama

    return WordLlama.load(cache_dir=os.path.dirname(wordllama.__file__), disable_download=True, dim=256)


def test_wordllama_vectors_are_the_models_own_mean_of_its_rows():
    """The pooling the proxy does itself gives wordllama's `embed(norm=True)` vectors: the same for
    texts of ordinary length, and to float rounding for a long one (summed in pieces)."""
    import warnings

    import numpy as np

    from ctxwarden.proxy.embeddings import WordLlamaEmbedder

    texts = ["", "hi", "The Eiffel Tower is in Paris.", "café ☕ 中文", "x" * 3000] + \
        [f"tool {i} fetches the weather for city {i * 7}" for i in range(150)] + \
        [" ".join(f"line {i}: status {200 + i % 3}" for i in range(8000))]  # ~50,000 tokens: in pieces
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the empty text: a zero vector normed, NaN, in both
        expected = _wordllama_reference().embed(texts, norm=True)
    got = WordLlamaEmbedder()._embed_uncached(texts)
    assert got.shape == expected.shape and got.dtype == np.float32
    assert np.isnan(got[0]).all() and np.isnan(expected[0]).all()
    np.testing.assert_array_equal(got[1:-1], expected[1:-1])
    np.testing.assert_allclose(got[-1], expected[-1], atol=1e-4)


def test_one_long_text_in_a_batch_costs_its_own_tokens_not_the_batch_padded_to_it():
    """wordllama's `embed` pads a batch of 64 to its longest text and gathers every row at once: 63
    short texts and one of 1 MB would be a (64, ~220,000, 256) float32 array, 14 GB (the process
    was killed). Pooled here in bounded groups: a few tens of MB at the peak."""
    import tracemalloc

    from ctxwarden.proxy.embeddings import WordLlamaEmbedder

    embedder = WordLlamaEmbedder()
    texts = [f"tool {i} fetches the weather for city {i * 7}" for i in range(63)] + \
        [" ".join(f"word{i % 5000}" for i in range(150_000))]
    tracemalloc.start()
    try:
        vectors = embedder._embed_uncached(texts)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert vectors.shape == (64, 256)
    assert peak < 64 * 2**20, f"pooling peaked at {peak / 2**20:.0f} MB"
