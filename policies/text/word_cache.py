"""HF `tokenizers` models (BPE, Unigram) cache every text they split, up to 10,000 per thread, in
native memory outside any budget of ours. For models with no pre-tokenizer (wordllama's) the "word"
is the whole text under 256 bytes: each statement, clause, tool segment and query the policies embed.
Measured (24,000 short distinct texts through wordllama, 2 CPUs): +93 MB of native heap with the cache
on, +0.5 MB with it off, and 13 % faster off. In bench/fuzz.py's run (memray, bodies 1,000-3,000)
it was 8.5 MB of the growth, and it keeps growing to ~40 MB per thread. Every embedder's vectors are
already cached by text (`CachedEmbedder`), so this second cache buys nothing."""

from __future__ import annotations

from typing import Any


def without_word_cache(tokenizer: Any) -> Any:
    """`tokenizer` (a `tokenizers.Tokenizer`) with its model's per-thread text cache turned off;
    models without one (WordPiece, WordLevel) and older `tokenizers` releases are left as they are."""
    resize = getattr(getattr(tokenizer, "model", None), "_resize_cache", None)
    if resize is not None:
        resize(0)
    return tokenizer
