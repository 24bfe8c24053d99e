"""SELECT: which of a user's memories bear on a request, scored and kept within a budget.

    score = relevance (calibrated cosine, 0-1) + recent_bonus if younger than recent_s
            + profile_bonus if its kind is one of profile_kinds
Kept: live, visible to the request's task (its own private memories and the user's shared ones),
not written from a message of this conversation (the model reads those already), score >= min_score,
relevance within `margin` of the most relevant kept candidate's, distinct (below), above its own
chance level (`min_background_z`, background.py), the best top_k, within max_tokens.

Distinct: a request that is about nothing the user said still has a nearest memory, and the more
memories a user has, the closer that nearest one sits by chance (on CRI's long conversation, 900
narrative sentences, almost every chit-chat turn had one at relevance 0.7). So once a user has
MIN_COHORT live memories, a memory must also stand out from them: its cosine, as a z-score over the
user's live memories, must reach
    min_distinct + sqrt(2 ln n)
where sqrt(2 ln n) is about where the largest of n unrelated cosines lands by chance. A user with
fewer memories has few chance matches, and too few cosines to tell chance from: min_score decides.
The fixed calibration memories were tried as a background for small users and rejected: they hold
the same everyday topics as the requests ("boutique hotels"), so they hid the user's own hotel memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Collection

import numpy as np

from .background import gate_on, standing
from .calibrate import Calibration
from .config import MemoryConfig
from .index import UserIndex
from .model import Memory

CANDIDATES = 64  # best-by-cosine memories scored in full (the bonuses are at most 0.25 together)
MIN_COHORT = 20  # live memories before the distinct gate applies (module docstring)


@dataclass(frozen=True)
class Selected:
    memory: Memory
    score: float
    relevance: float


def select(index: UserIndex, query: np.ndarray, task: str, config: MemoryConfig, calibration: Calibration,
           count_tokens: Callable[[str], int], exclude_messages: Collection[str] = (), now: float | None = None,
           held: dict[str, int] | None = None) -> list[Selected]:
    """The memories to inject, best first; `held` (when given) gets how many live memories relevant
    enough for min_score each chance gate held back: "distinct" and "background"."""
    sims, live = index.similarities(query)
    if not len(sims):
        return []
    now = time.time() if now is None else now
    relevant = live & (sims >= calibration.cosine_for(
        max(1e-6, min(1 - 1e-6, config.min_score - config.recent_bonus - config.profile_bonus))))
    eligible = np.flatnonzero(relevant & (sims >= distinct_floor(sims[live], config.min_distinct)))
    standing = _above_background(index, eligible, sims, calibration, config.min_background_z)
    if held is not None:
        held["distinct"], held["background"] = int(relevant.sum()) - len(eligible), len(eligible) - len(standing)
    eligible = standing
    if len(eligible) > CANDIDATES:
        eligible = eligible[np.argpartition(-sims[eligible], CANDIDATES)[:CANDIDATES]]
    relevance = calibration.relevance(sims[eligible])
    scored: list[Selected] = []
    for pos, rel in zip(eligible.tolist(), relevance.tolist()):
        memory = index.memories[pos]
        if not memory.visible_to(task) or memory.message_hash in exclude_messages:
            continue
        score = rel + (config.recent_bonus if now - memory.created_at < config.recent_s else 0.0)
        score += config.profile_bonus if memory.kind in config.profile_kinds else 0.0
        if score >= config.min_score:
            scored.append(Selected(memory, score, rel))
    scored.sort(key=lambda s: (-s.score, s.memory.created_at))
    if scored:  # nothing far below the best match: it is about another topic (config.margin)
        best = max(s.relevance for s in scored[: config.top_k])
        scored = [s for s in scored if s.relevance >= best - config.margin]
    kept: list[Selected] = []
    used = count_tokens("Relevant context:\n")
    for item in scored[: config.top_k]:
        cost = count_tokens(f"- {item.memory.text}\n")
        if used + cost > config.max_tokens:
            continue
        kept.append(item)
        used += cost
    return kept


def _above_background(index: UserIndex, positions: np.ndarray, sims: np.ndarray, calibration: Calibration,
                      min_z: float) -> np.ndarray:
    """The memories at `positions` whose cosine with the request stands out from their own background
    (background.py); all of them when there is no background or the gate is off (-10)."""
    if not gate_on(calibration.background, min_z):  # the memories' vectors need not be gathered
        return positions
    return positions[standing(index.vectors(positions), sims[positions], calibration.background, min_z)]


def distinct_floor(live_sims: np.ndarray, min_distinct: float) -> float:
    """The cosine a memory needs to stand out from the user's live memories (module docstring); -inf: no gate."""
    n = len(live_sims)
    if n < MIN_COHORT:
        return float("-inf")
    return float(live_sims.mean() + (min_distinct + np.sqrt(2 * np.log(n))) * live_sims.std())
