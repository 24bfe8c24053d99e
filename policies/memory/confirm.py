"""A second reading of SELECT's choice, by an embedder of another kind (`confirm_with`, MiniLM by default).

The policy's embedder (a static word-vector model by default) reads topic: a pasted resume's "I exceeded
high standards of customer service care" is near "Explain: Service Quality and SERVQUAL Model", a
project description near any coding question. A contextual model is wrong on other pairs than a static
one (it reads word order and sense, and misses other things), so where both find a memory relevant to
the request it is far more likely to be, and where only one does it is most often chance. Each memory
SELECT chose is therefore read again: the request's and the memory's vectors by the second embedder and
that embedder's own calibration (calibrate.py: the same pairs, the same 0-1 relevance), and the memory
is kept only when its relevance (with the bonuses SELECT gave it) reaches `min_score` there too. A
calibration that carries a background (background.py) is applied as well (`min_background_z`); the
policy fits the second one without: on the dev rows the background added nothing to the relevance
test (one user 6 and 6 blocks, new users 7 and 7) and costs ~6 s of MiniLM once per process.

Measured (README, memory; bench/memories.py): ShareGPT first messages of 300 people sent as one user,
requests given a block 13 -> 6 of 300 on the dev rows and 25 -> 3 on the blind ones; three new users
23 -> 8 and 46 -> 11 of 180; the labelled selection unchanged (precision@5 1.00, recall@5 0.18,
unrelated requests given a block 0.12).

Cost: only requests SELECT chose something for pay it (the others are not read again), one contextual
embedding of the request (its first QUERY_CHARS characters: ~6 ms short, ~30 ms at the cap on one core)
and of each chosen memory (cached by text, and read when written: policy.py); the calibration once per
process (~1 s with loading the model, in the background from the first memory written).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import Embedder, embed_array
from .background import standing
from .calibrate import Calibration
from .config import MemoryConfig
from .select import Selected

# The request is read by its head: a contextual model reads at most 256 tokens anyway, and its cost
# grows with length (~0.3 ms a token on one core here). On bench/memories.py 200, 300 and 600
# characters gave the same figures as 4,000 (one or two blocks of 480 apart).
QUERY_CHARS = 300
# A memory is read by at most this much (MiniLM reads ~256 tokens, ~1,000 characters of prose; a memory
# written from a paste can be one long "sentence"), the same head here and when read ahead, so the
# second embedder's cache, keyed by text, finds it.
MEMORY_CHARS = 1_000
# New memories are read ahead a few at a time: a batch pads to its longest text, and 32 memories of 256
# tokens hold ~100 MB of attention scores at once (the fuzz bench's transient RSS peaks).
READ_AHEAD_BATCH = 4


@dataclass(frozen=True)
class Confirmed:
    kept: list[Selected]
    dropped: list[Selected]


def confirm(embedder: Embedder, calibration: Calibration, request: str, chosen: list[Selected],
            config: MemoryConfig) -> Confirmed:
    """Keep the chosen memories the second embedder also finds relevant (module docstring). CPU-bound:
    run it in a worker thread."""
    if not chosen:
        return Confirmed([], [])
    vectors = embed_array(embedder, [request[:QUERY_CHARS], *(s.memory.text[:MEMORY_CHARS] for s in chosen)])
    vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    sims = vectors[1:] @ vectors[0]
    bonuses = np.array([s.score - s.relevance for s in chosen])  # recent / profile bonuses, as SELECT gave them
    passes = calibration.relevance(sims) + bonuses >= config.min_score
    passes &= standing(vectors[1:], sims, calibration.background, config.min_background_z)
    return Confirmed([s for s, ok in zip(chosen, passes) if ok], [s for s, ok in zip(chosen, passes) if not ok])


def read_ahead(embedder: Embedder, texts: list[str]) -> None:
    """Embed new memories with the second embedder when they are written (its cache keeps them by text),
    so that a request they are chosen for pays only for its own embedding."""
    heads = [text[:MEMORY_CHARS] for text in texts]
    for start in range(0, len(heads), READ_AHEAD_BATCH):
        embed_array(embedder, heads[start : start + READ_AHEAD_BATCH])
