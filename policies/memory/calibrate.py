"""Relevance in 0-1 whatever the embedder: a logistic fit of "about the same topic" on cosine.

Raw cosines mean different things per embedder (the shipped static embedder puts related request /
memory pairs at 0.1-0.5, MiniLM at 0.2-0.6, remote ones elsewhere), so a threshold such as
`min_score: 0.7` cannot be applied to them directly. Once per embedder, the calibration pairs
(calibration_pairs.py) are embedded; a request and the memory written for it are related, a request
and a memory of another topic are not; a logistic curve is fitted to the cosines, both classes
weighted equally (Platt scaling). relevance(cos) is then the fitted probability that a memory at that
cosine is about the request's topic: 0.5 where the two classes are equally likely, 0.7 where related
pairs are clearly more likely. Embedding the ~90 texts costs a few ms (static) to ~0.3 s (MiniLM),
once per process; the 500 background requests (background.py), embedded with them, ~20 ms to ~2 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..base import Embedder
from .background import embed_background
from .calibration_pairs import PAIRS

NEWTON_STEPS = 50
RIDGE = 1e-3


@dataclass(frozen=True)
class Calibration:
    slope: float
    intercept: float
    embedder: str = ""
    # The background requests' vectors for this embedder (background.py); None: no background gate.
    background: np.ndarray | None = field(default=None, compare=False, repr=False)

    def relevance(self, cosine: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(self.slope * cosine + self.intercept)))

    def cosine_for(self, relevance: float) -> float:
        """The cosine at which relevance reaches `relevance` (for reports)."""
        return (np.log(relevance / (1 - relevance)) - self.intercept) / self.slope


def pair_cosines(embedder: Embedder) -> tuple[np.ndarray, np.ndarray]:
    """Cosines of the related pairs, and of every cross-topic pair."""
    requests = np.asarray(embedder.embed([p[1] for p in PAIRS]), dtype=np.float32)
    memories = np.asarray(embedder.embed([p[2] for p in PAIRS]), dtype=np.float32)
    sims = requests @ memories.T
    topics = np.array([p[0] for p in PAIRS])
    related = np.diag(sims)
    unrelated = sims[topics[:, None] != topics[None, :]]
    return related, unrelated


def fit(embedder: Embedder, background: bool = True) -> Calibration:
    """The calibration of `embedder`; with the background requests' vectors (background.py) unless
    `background` is False (confirm.py's second reading: ~0.3 s with MiniLM instead of ~6 s)."""
    related, unrelated = pair_cosines(embedder)
    x = np.concatenate([related, unrelated]).astype(np.float64)
    y = np.concatenate([np.ones(len(related)), np.zeros(len(unrelated))])
    w = np.where(y == 1, 0.5 / len(related), 0.5 / len(unrelated))  # equal weight to each class
    slope, intercept = logistic(x, y, w)
    return Calibration(slope, intercept, embedder.name, embed_background(embedder) if background else None)


def logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """Weighted one-feature logistic regression by Newton's method (a small ridge keeps it finite)."""
    X = np.stack([x, np.ones_like(x)], axis=1)
    beta = np.zeros(2)
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(X @ beta)))
        grad = X.T @ (w * (p - y)) + RIDGE * beta
        hess = (X * (w * p * (1 - p))[:, None]).T @ X + RIDGE * np.eye(2)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    return float(beta[0]), float(beta[1])
