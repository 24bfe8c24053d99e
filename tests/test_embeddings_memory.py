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
