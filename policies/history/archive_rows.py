"""How the archive's texts are kept as rows of the store (Chroma): the row's metadata and vector,
the batches they are written in, and the rows pruning finds by age without reading them."""

from __future__ import annotations

import math
import re
import zlib
from typing import Any, Protocol, TypeVar

# An archived text is kept in its row's metadata under this key, not as the row's document: embedded
# Chroma indexes documents for full-text search as it writes them, which nothing here uses (recall
# searches this conversation's texts in process), and it made a write ~4x slower (15 texts of 5 KB:
# ~45 ms → ~12 ms; one of 1 MB: ~180 ms → ~23 ms), through a commit that holds the GIL. Rows written
# before with a document are read as they are.
TEXT_KEY = "text"
VECTOR_DIM = 64
# Chroma holds the GIL through an upsert (~10-35 ms a commit): a write goes at once (another replica may
# read it next), but writes that came meanwhile are gathered (scratchpad.FLUSH_DELAY_S), in upserts of at
# most BATCH_ITEMS entries / BATCH_CHARS characters, so a request that archives hundreds of spans (a long
# history replayed) costs a few commits, not one each (25 s for 700).
BATCH_ITEMS, BATCH_CHARS = 256, 4 * 2**20


class _Texted(Protocol):
    text: str


K = TypeVar("K")
E = TypeVar("E", bound=_Texted)


def row_metadata(meta: dict[str, Any], text: str) -> dict[str, Any]:
    """What a row's metadata holds: the entry's scalar metadata and its text."""
    return {**{k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))}, TEXT_KEY: text}


def row_text(meta: dict[str, Any], documents: list[Any]) -> str | None:
    """A row's text: in its metadata, or its document for a row written before that."""
    text = meta.get(TEXT_KEY)
    return text if isinstance(text, str) else documents[0] if documents else None


def lexical_vector(text: str, dim: int = VECTOR_DIM) -> list[float]:
    """A small hashed bag-of-words vector of the text's opening. Entries are fetched by id; Chroma still
    needs a vector, and a local one keeps the collection independent of the configured embedder."""
    vec = [0.0] * dim
    for word in re.findall(r"\w+", text[:1000].lower()):
        vec[zlib.crc32(word.encode()) % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vec))
    return [v / norm for v in vec] if norm else [1.0] + [0.0] * (dim - 1)


def batches(pending: dict[K, E]) -> list[dict[K, E]]:
    """`pending` in upserts of at most BATCH_ITEMS entries and BATCH_CHARS characters (one bigger entry alone)."""
    out: list[dict[K, E]] = [{}]
    chars = 0
    for key, entry in pending.items():
        if out[-1] and (len(out[-1]) >= BATCH_ITEMS or chars + len(entry.text) > BATCH_CHARS):
            out.append({})
            chars = 0
        out[-1][key] = entry
        chars += len(entry.text)
    return out


def created_before(col: Any, at_least: int, low: float, high: float) -> list[str]:
    """The ids of the fewest oldest rows that number `at_least` (to within 0.1 s of their creation),
    found by their ids alone: a row's metadata holds its whole text (TEXT_KEY), which pruning must not
    read. `low`: no row is older (past the retention, deleted); `high`: none is newer."""
    older = lambda t: col.get(where={"created": {"$lt": t}}, include=[])["ids"]  # noqa: E731
    found = older(high)
    if len(found) < at_least:  # the excess is rows without a creation time (not the scratchpad's):
        return []  # the dated ones are not all deleted for them
    while high - low > 0.1:
        middle = (low + high) / 2
        ids = older(middle)
        if len(ids) >= at_least:
            high, found = middle, ids
        else:
            low = middle
    return found
