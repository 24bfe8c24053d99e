"""Twins: one function offered by two servers (`filesystem__write_file`, `desktop-commander__write_file`).

Real catalogs hold several servers that do the same thing (file systems, fetchers, finance APIs).
An agent picks one of them for reasons no ranking sees (the one its search showed first, the one
it used before), so forwarding one twin and hiding the other is a miss half the time. Twins are
found from the tool set alone, once per set (cached on the index):

- their bare names (the part after the server) share informative words: the IDF-weighted Jaccard
  of the name words is at least NAME_MIN, and the shared words carry at least SHARED_MIN of IDF
  (`search` alone is in dozens of a catalog's names and says little; `write file` says more);
- and their definitions mean alike (the cosine of the definitions' vectors is at least COS_MIN),
  or are near-identical (COS_ALONE) whatever the names.

Each tool keeps at most MAX_TWINS, the closest first. Tools of one server are never twins (the
sibling boost ranks those). Without vectors (lexical only) there are no twins.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from .servers import NO_SERVER, bare_name

NAME_MIN = 0.6
SHARED_MIN = 4.0  # ~ one word in 1 of 50 names, or two commoner ones
COS_MIN = 0.35
COS_ALONE = 0.92
MAX_TWINS = 2
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


def name_words(name: str | None) -> frozenset[str]:
    """The words of a tool's own name, without its server: `getUserSubmissions` → {get, user, submissions}."""
    if not name:
        return frozenset()
    return frozenset(_WORD.findall(_CAMEL.sub(r"\1 \2", bare_name(name)).lower()))


def find_twins(names: Sequence[str | None], groups: np.ndarray, documents: np.ndarray | None) -> list[tuple[int, ...]]:
    """Per tool, its twins (indices, closest first)."""
    n = len(names)
    out: list[tuple[int, ...]] = [()] * n
    if documents is None or n < 2:
        return out
    words = [name_words(x) for x in names]
    vocab = sorted({w for ws in words for w in ws})
    if not vocab:
        return out
    column = {w: j for j, w in enumerate(vocab)}
    frequency = np.zeros(len(vocab))
    incidence = np.zeros((n, len(vocab)), dtype=np.float32)
    for i, ws in enumerate(words):
        for w in ws:
            incidence[i, column[w]] = 1.0
            frequency[column[w]] += 1
    idf = np.log(1 + n / frequency).astype(np.float32)
    shared = (incidence * idf) @ incidence.T  # IDF of the words two names share
    own = incidence @ idf
    union = own[:, None] + own[None, :] - shared
    jaccard = np.divide(shared, union, out=np.zeros_like(shared), where=union > 0)
    cosine = documents @ documents.T
    other_server = (groups[:, None] != groups[None, :]) & (groups[:, None] != NO_SERVER) & (groups[None, :] != NO_SERVER)
    named = (jaccard >= NAME_MIN) & (shared >= SHARED_MIN) & (cosine >= COS_MIN)
    twin = other_server & (named | (cosine >= COS_ALONE))
    np.fill_diagonal(twin, False)
    for i in np.nonzero(twin.any(axis=1))[0]:
        found = np.nonzero(twin[i])[0]
        closeness = jaccard[i, found] + cosine[i, found]
        out[int(i)] = tuple(int(j) for j in found[np.argsort(-closeness, kind="stable")][:MAX_TWINS])
    return out


def with_twins(picked: Sequence[int], twins: Sequence[tuple[int, ...]]) -> list[int]:
    """The picked tools, each followed by its twins (once each, order kept)."""
    out: list[int] = []
    seen: set[int] = set()
    for i in picked:
        for j in (i, *twins[i]):
            if j not in seen:
                seen.add(j)
                out.append(j)
    return out

