"""The upstream circuit breaker: fail fast while the upstream keeps failing, then try one request."""

from __future__ import annotations

import logging
import time

from ..errors import ProxyError

log = logging.getLogger("ctxwarden.upstream")


class CircuitBreaker:
    """closed → open after `threshold` consecutive failures → half-open after `cooldown_s`."""

    def __init__(self, threshold: int, cooldown_s: float, clock=time.monotonic) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.failures = 0
        self.opened_at: float | None = None
        self._trial_running = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half_open" if self.clock() - self.opened_at >= self.cooldown_s else "open"

    def before_call(self) -> bool:
        """Raise while open; True when this call is the half-open trial: end it with `end_trial`."""
        state = self.state
        if state == "open" or (state == "half_open" and self._trial_running):
            wait = max(0.0, self.cooldown_s - (self.clock() - (self.opened_at or 0)))
            raise ProxyError(
                503,
                "upstream_unavailable",
                f"The upstream failed {self.failures} times in a row; ctxwarden's circuit breaker is open "
                f"and fails fast for {wait:.0f} more seconds before trying again.",
                headers={"retry-after": str(max(1, round(wait)))},
            )
        if state == "half_open":
            self._trial_running = True
            return True
        return False

    def end_trial(self) -> None:
        """The trial is over, however it ended (an unforeseen exception, a cancelled request):
        the next call may try. `success`/`failure` have already settled the state if they ran."""
        self._trial_running = False

    def success(self) -> None:
        self.failures = 0
        self.opened_at = None
        self._trial_running = False

    def failure(self) -> None:
        self.failures += 1
        self._trial_running = False
        if self.opened_at is not None or self.failures >= self.threshold:
            self.opened_at = self.clock()
            log.warning("circuit breaker open after %d consecutive upstream failures", self.failures)
