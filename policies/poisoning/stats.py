"""The poisoning rate over a sliding time window, and the alert when it is too high."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque

log = logging.getLogger("ctxwarden.poisoning")


class PoisoningStats:
    """Counts per one-second bucket with running window totals: O(1) per observation and memory
    bounded by the window's length in seconds, whatever the traffic."""

    def __init__(self, window_s: float, alert_rate: float, min_samples: int = 20) -> None:
        self.window_s = window_s
        self.alert_rate = alert_rate
        self.min_samples = min_samples
        self._buckets: deque[tuple[int, Counter[str]]] = deque()  # (second, {"checked": n, kind: n})
        self._window: Counter[str] = Counter()  # the sum of the buckets still in the window
        self._totals: Counter[str] = Counter()
        self._alerting = False
        self._lock = threading.Lock()

    def observe(self, kind: str | None, now: float | None = None) -> tuple[float, bool]:
        """Count one checked item (kind = its poisoning type, None if clean).
        Returns the window's rate and True when this observation raised the alert."""
        now = time.monotonic() if now is None else now
        second = int(now)
        with self._lock:
            if not self._buckets or self._buckets[-1][0] != second:
                self._buckets.append((second, Counter()))
            bucket = self._buckets[-1][1]
            for counter in (bucket, self._window):
                counter["checked"] += 1
                if kind:
                    counter[f"poisoned:{kind}"] += 1
            self._totals["checked"] += 1
            if kind:
                self._totals[f"poisoned:{kind}"] += 1
            while self._buckets and self._buckets[0][0] < now - self.window_s:
                self._window.subtract(self._buckets.popleft()[1])
            total = self._window["checked"]
            bad = sum(v for k, v in self._window.items() if k.startswith("poisoned:"))
            rate = bad / total if total else 0.0
            raise_alert = total >= self.min_samples and rate > self.alert_rate and not self._alerting
            if raise_alert:
                log.warning("poisoning alert: %.1f%% of %d checked items in the last %.0f s were poisoned (alert_rate %.1f%%)",
                            rate * 100, total, self.window_s, self.alert_rate * 100)
                self._alerting = True
            elif self._alerting and rate <= 0.8 * self.alert_rate:  # hysteresis: no flapping around the level
                self._alerting = False
            return rate, raise_alert

    def snapshot(self) -> dict:
        with self._lock:
            kinds = Counter({k.split(":", 1)[1]: v for k, v in self._window.items() if k.startswith("poisoned:") and v > 0})
            total = self._window["checked"]
            return {
                "window_s": self.window_s,
                "checked_in_window": total,
                "poisoned_in_window": sum(kinds.values()),
                "poisoning_rate": round(sum(kinds.values()) / total, 4) if total else 0.0,
                "alert_rate": self.alert_rate,
                "alerting": self._alerting,
                "by_type_in_window": dict(kinds),
                "checked_total": self._totals["checked"],
                "poisoned_total_by_type": {k.split(":", 1)[1]: v for k, v in self._totals.items() if k.startswith("poisoned:")},
            }
