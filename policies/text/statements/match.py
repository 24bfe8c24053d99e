"""Whether two statements are about the same thing: the same subject, in the same scope.
(Shared by the clash and memory policies.)

Statements on one slot ("v.date", "amount.budget.total.max.usd") are compared only when they are
about the same thing. Subjects match when they share a word, or, where the policy has an
embedder (services.embedder), when their phrases are close in meaning ("headcount" / "number of
guests"); without an embedder, shared words decide alone. Scopes differ when each subject has
its own qualifier of what they share ("Q3 infrastructure budget" / "training budget", "staging
cluster" / "production cluster"), unless the embedder finds the qualifiers to be synonyms.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ...base import Embedder, embed_array
from .model import Statement
from .subject import different_scope, words

SUBJECT_SIMILARITY = 0.8  # cosine above which two subjects with no word in common are one subject
QUALIFIER_SIMILARITY = 0.9  # cosine above which two qualifiers name the same scope


class Matcher:
    def __init__(self, embedder: Embedder | None = None) -> None:
        self.embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}

    def prepare(self, statements: Iterable[Statement]) -> None:
        """Embed every phrase the comparisons may need, in one call."""
        if self.embedder is None:
            return
        phrases = set()
        for st in statements:
            if st.subject:
                phrases.add(_phrase(words(st.subject), st.subject))
        missing = sorted(p for p in phrases if p and p not in self._vectors)
        if missing:
            vectors = embed_array(self.embedder, missing)
            self._vectors.update(zip(missing, vectors))

    def phrase_cosine(self, a: str, b: str) -> float | None:
        """The cosine of two phrases' embeddings; None without an embedder."""
        if self.embedder is None:
            return None
        self.prepare_phrases([a, b])
        return float(np.dot(self._vectors[a], self._vectors[b]))

    def prepare_phrases(self, phrases: Sequence[str]) -> None:
        missing = [p for p in dict.fromkeys(phrases) if p not in self._vectors]
        if missing and self.embedder is not None:
            self._vectors.update(zip(missing, embed_array(self.embedder, missing)))

    def same_subject(self, a: Statement, b: Statement) -> bool:
        wa, wb = words(a.subject), words(b.subject)
        if wa & wb:
            return True
        if not wa or not wb:  # "Correction: it's 4 nights", "make it 7:30pm instead", "forget TypeScript"
            return b.correction or b.changes or a.negated != b.negated
        if _measured(a.slot) and _measured(b.slot) and (wa & b.context or wb & a.context):
            return True  # "the kitchen backsplash, the area's 30 sq ft" … "my 45 sq ft backsplash"
        cosine = self.phrase_cosine(_phrase(wa, a.subject), _phrase(wb, b.subject))
        return cosine is not None and cosine >= SUBJECT_SIMILARITY

    def same_scope(self, a: Statement, b: Statement) -> bool:
        apart = different_scope(a.subject, b.subject)
        if apart is None:
            return True
        qa, qb = apart
        marked = {w.lstrip("^") for w in a.subject + b.subject if w.startswith("^")}
        if (qa | qb) & marked:
            return False  # names and codes ("Paris", "Q3") name different things
        cosine = self.phrase_cosine(" ".join(sorted(qa)), " ".join(sorted(qb)))
        return cosine is not None and cosine >= QUALIFIER_SIMILARITY


def two_of_a_series(a: Statement, b: Statement) -> bool:
    """Each sentence names which one of a series it is about, and they name different ones:
    "first drill: 20 min" … "for the second half, 15 min"."""
    return bool(a.series and b.series and not a.series & b.series)


def _measured(slot: str) -> bool:
    """A measurement, an amount of money or a calendar date: a value specific enough that the
    sentence around it, not only its clause, says what it is about. Bare numbers and names recur
    across topics too often for that."""
    return slot.startswith(("v.qty:", "v.money:", "v.date", "date.", "amount."))


def _phrase(bare: set[str], subject: tuple[str, ...] = ()) -> str:
    ordered = [w.lstrip("^") for w in subject if w.lstrip("^") in bare] or sorted(bare)
    return " ".join(dict.fromkeys(ordered))
