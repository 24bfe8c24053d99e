"""/metrics across `ctxwarden serve --workers N`: one figure for the whole server, whichever worker
answers the scrape.

Each worker keeps its measurements in process (metrics.py) and writes a snapshot of them to
`<CTXWARDEN_METRICS_DIR>/<pid>.json` every second (write to a temporary file, then rename: a
reader never sees half a file) and when it stops. A scrape merges the worker's live figures with
the others' snapshots: counters and histograms add up (a worker that exited still counts, as in
prometheus_client's multiprocess mode); gauges are per process, so each carries a `worker` label.
The supervisor sets the directory (workers.py); a single process never does any of this.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("ctxwarden.metrics")

ENV = "CTXWARDEN_METRICS_DIR"
WRITE_EVERY_S = 1.0


class SharedMetrics:
    def __init__(self, metrics: Any, directory: Path, pid: int | None = None) -> None:
        self.metrics = metrics
        self.directory = directory
        self.pid = pid or os.getpid()
        self._task: asyncio.Task | None = None
        metrics.peers = self.others

    def write(self) -> None:
        target = self.directory / f"{self.pid}.json"
        partial = self.directory / f".{self.pid}.json.tmp"
        partial.write_text(json.dumps(self.metrics.snapshot()), encoding="utf-8")
        os.replace(partial, target)

    def others(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """(worker pid, its last snapshot) for every other worker that wrote one."""
        found = []
        for path in self.directory.glob("*.json"):
            if path.stem == str(self.pid):
                continue
            try:
                found.append((path.stem, json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError):  # being replaced right now: its next snapshot counts
                continue
        return found

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(WRITE_EVERY_S)
            try:
                await asyncio.to_thread(self.write)
            except OSError as exc:
                log.warning("could not write this worker's metrics to %s: %s", self.directory, exc)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ctxwarden-metrics-share")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(OSError):
            self.write()


def from_environment(metrics: Any) -> SharedMetrics | None:
    directory = os.environ.get(ENV)
    return SharedMetrics(metrics, Path(directory)) if directory else None


def merge(own: list[dict[str, Any]], pid: str, others: list[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """One list of points: counters and histograms summed by name and labels; gauges per worker."""
    merged: dict[tuple, dict[str, Any]] = {}
    for worker, points in [(pid, own), *others]:
        for p in points:
            attributes = {**p["attributes"], "worker": worker} if p["kind"] == "gauge" else p["attributes"]
            key = (p["name"], p["kind"], tuple(sorted((k, str(v)) for k, v in attributes.items())))
            have = merged.get(key)
            if have is None:
                merged[key] = {**p, "attributes": attributes,
                               **({"buckets": list(p["buckets"])} if p["kind"] == "histogram" else {})}
            elif p["kind"] == "counter":
                have["value"] += p["value"]
            elif p["kind"] == "histogram" and have["bounds"] == p["bounds"]:
                have["buckets"] = [a + b for a, b in zip(have["buckets"], p["buckets"])]
                have["sum"] += p["sum"]
                have["count"] += p["count"]
    return list(merged.values())
