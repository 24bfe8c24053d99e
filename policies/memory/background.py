"""How close ordinary requests come to a memory: its chance level, measured per memory.

Some memories sit near many requests that are not about them: a pasted resume's "I have experience
dealing with the public" is close to anything about customers, service or staff, and a project
description is close to any coding question. Relevance (calibrate.py) reads such a cosine as a match.
So a memory must also stand out from its own background: its cosines with a fixed sample of ordinary
requests (BACKGROUND_FILE: 500 MetaTool user queries, everyday asks of every kind) give it a mean and a
spread, and the request's cosine with it, as a z-score over them, must reach `min_background_z`.

This is the memory-side counterpart of the distinct gate (select.py), which asks a memory to stand out
among the user's other memories for this request; this one asks the request to stand out among other
requests for this memory (the hub correction of cross-lingual retrieval, CSLS, scores a pair against
both neighbourhoods in the same way). It needs no history of the user, so it holds from the first
memory, where the distinct gate has too few memories to measure chance with.

Measured (README, memory; bench/memories.py): 3 x 100 ShareGPT first messages, each run sent as one new
user, gave 39 requests a block of memories written from the other prompts, 27 with the gate at 1.5; the
labelled selection kept every figure, with its 30 memories and with 5-15 of them (a new user).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..base import Embedder, embed_array

BACKGROUND_FILE = Path(__file__).with_name("background_requests.txt")
log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def background_requests() -> tuple[str, ...]:
    """The sample of ordinary requests, as shipped (lines starting with '#' say where it comes from)."""
    lines = BACKGROUND_FILE.read_text(encoding="utf-8").splitlines()
    return tuple(line for line in lines if line.strip() and not line.startswith("#"))


def embed_background(embedder: Embedder) -> np.ndarray | None:
    """The sample's unit vectors (n, dim), once per embedder (the policy keeps them with its calibration);
    None, said in the log, when the shipped file cannot be read (an install without the package's data):
    memory then selects without this gate rather than not at all."""
    try:
        requests = background_requests()
    except OSError as exc:
        log.error("memory: the background requests (%s) cannot be read, so min_background_z is not applied: %s",
                  BACKGROUND_FILE, exc)
        return None
    vectors = embed_array(embedder, requests)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def background_z(memory_vectors: np.ndarray, request_sims: np.ndarray, background: np.ndarray) -> np.ndarray:
    """For each memory (rows of `memory_vectors`, with its cosine with the request in `request_sims`): how
    many standard deviations that cosine lies above the memory's cosines with the background requests."""
    if not len(memory_vectors):
        return np.zeros(0, dtype=np.float32)
    against = background @ memory_vectors.T  # (background requests, memories)
    spread = against.std(axis=0)
    return (request_sims - against.mean(axis=0)) / np.where(spread > 1e-6, spread, 1e-6)


def gate_on(background: np.ndarray | None, min_z: float) -> bool:
    """Whether the background gate tests anything: off without a background or at `min_z` -10 (the config's
    "off"). A caller may skip gathering the memories' vectors when it is off."""
    return background is not None and min_z > -10


def standing(memory_vectors: np.ndarray, request_sims: np.ndarray, background: np.ndarray | None,
             min_z: float) -> np.ndarray:
    """Which memories stand out from their background for this request (z >= `min_z`): a bool per row;
    all of them when the gate is off (`gate_on`). SELECT's gate and the second reading (confirm.py) both
    ask this."""
    if not gate_on(background, min_z) or not len(memory_vectors):
        return np.ones(len(memory_vectors), dtype=bool)
    return background_z(memory_vectors, request_sims, background) >= min_z
