"""One user's memories in process: their records and a matrix of their vectors, searched with
one matrix product (10,000 memories of 256 dimensions: a fraction of a millisecond)."""

from __future__ import annotations

import time

import numpy as np

from .model import Memory


class UserIndex:
    """The memories of one (tenant, user), live and superseded, with a vector per memory."""

    def __init__(self, dim: int = 0) -> None:
        self.memories: list[Memory] = []
        self.positions: dict[str, int] = {}
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._live = np.zeros(0, dtype=bool)
        self.loaded_at = time.monotonic()
        self.version: object = None  # the store's version token when loaded
        self.published = 0  # the tenant's Services.versions version when loaded or last checked
        self.checking = False  # a refresh check is under way

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def nbytes(self) -> int:
        """About: the vectors, ~600 bytes a memory record and its text."""
        return 500 + self._vectors.nbytes + sum(600 + 2 * len(m.text) for m in self.memories)

    def get(self, mid: str) -> Memory | None:
        pos = self.positions.get(mid)
        return None if pos is None else self.memories[pos]

    def put(self, memory: Memory, vector: np.ndarray) -> None:
        """Add a memory, or replace the one with its id."""
        pos = self.positions.get(memory.id)
        if pos is not None:
            self.memories[pos] = memory
            self._vectors[pos] = vector
            self._live[pos] = memory.live
            return
        n = len(self.memories)
        if n == len(self._vectors):
            capacity = max(16, 2 * n)
            grown = np.zeros((capacity, vector.shape[0]), dtype=np.float32)
            grown[:n] = self._vectors[:n]
            self._vectors = grown
            self._live = np.concatenate([self._live, np.zeros(capacity - len(self._live), dtype=bool)])
        self.memories.append(memory)
        self._vectors[n] = vector
        self._live[n] = memory.live
        self.positions[memory.id] = n

    def update(self, memory: Memory) -> None:
        """Replace a memory's record (its vector stays): e.g. when it was superseded."""
        pos = self.positions[memory.id]
        self.memories[pos] = memory
        self._live[pos] = memory.live

    def remove(self, mid: str) -> Memory | None:
        pos = self.positions.pop(mid, None)
        if pos is None:
            return None
        removed = self.memories[pos]
        last = len(self.memories) - 1
        if pos != last:  # move the last row into the hole
            moved = self.memories[last]
            self.memories[pos] = moved
            self._vectors[pos] = self._vectors[last]
            self._live[pos] = self._live[last]
            self.positions[moved.id] = pos
        self.memories.pop()
        self._live[last] = False
        return removed

    def similarities(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cosine of every memory with `query` (unit vectors), and which memories are live."""
        n = len(self.memories)
        if n == 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=bool)
        return self._vectors[:n] @ query, self._live[:n]

    def vectors(self, positions: np.ndarray) -> np.ndarray:
        """The vectors of the memories at `positions` (rows, a copy)."""
        return self._vectors[positions]

    def nearest_live(self, vector: np.ndarray, task: str | None, k: int) -> list[Memory]:
        """The `k` live memories `task` sees that are closest to `vector`, oldest first: a new memory
        contradicts or repeats one about the same thing, so comparing with these is enough and the
        cost of a write stays flat however many memories the user has."""
        sims, live = self.similarities(vector)
        order = np.argsort(-np.where(live, sims, -np.inf), kind="stable")
        near = [self.memories[i] for i in order[: int(live.sum())] if task is None or self.memories[i].visible_to(task)]
        return sorted(near[:k], key=lambda m: m.created_at)

    def live(self, task: str | None = None) -> list[Memory]:
        """Live memories, in the order they were written; with `task`, the ones that task sees."""
        out = [m for m in self.memories if m.live and (task is None or m.visible_to(task))]
        return sorted(out, key=lambda m: m.created_at)
