"""The poisoning rate over a sliding time window, and the alert when it is too high (RF-006 sc. 5)."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque

log = logging.getLogger("ctxwarden.poisoning")


class PoisoningStats:
    def __init__(self, window_s: float, alert_rate: float, min_samples: int = 20) -> None:
        self.window_s = window_s
        self.alert_rate = alert_rate
        self.min_samples = min_samples
        self._events: deque[tuple[float, str | None]] = deque()  # (time, poisoning type or None when clean)
        self._totals: Counter[str] = Counter()
        self._alerting = False
        self._lock = threading.Lock()

    def observe(self, kind: str | None, now: float | None = None) -> tuple[float, bool]:
        """Count one checked item (kind = its poisoning type, None if clean).
        Returns the window's rate and True when this observation raised the alert."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._events.append((now, kind))
            self._totals["checked"] += 1
            if kind:
                self._totals[f"poisoned:{kind}"] += 1
            while self._events and self._events[0][0] < now - self.window_s:
                self._events.popleft()
            total = len(self._events)
            bad = sum(1 for _, k in self._events if k)
            rate = bad / total if total else 0.0
            raise_alert = total >= self.min_samples and rate > self.alert_rate and not self._alerting
            if raise_alert:
                log.warning("poisoning alert: %.1f%% of %d checked items in the last %.0f s were poisoned (alert_rate %.1f%%)",
                            rate * 100, total, self.window_s, self.alert_rate * 100)
            if raise_alert:
                self._alerting = True
            elif self._alerting and rate <= 0.8 * self.alert_rate:  # hysteresis: no flapping around the level
                self._alerting = False
            return rate, raise_alert

    def snapshot(self) -> dict:
        with self._lock:
            kinds = Counter(k for _, k in self._events if k)
            total = len(self._events)
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
