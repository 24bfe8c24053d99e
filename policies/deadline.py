"""A policy's time budget for one request, and the client's leaving, as one thing to check.

CPU-heavy work runs in a worker thread (invariant 4), where asyncio cannot cancel it; the work
checks a `Deadline` between its steps instead, and stops with `OverBudget` when the budget is
spent or the client has gone. The policy then lets the request through as it was and reports
`<policy>.skipped_budget` (invariant 7): a check that cannot finish in time is no reason to delay
or change the request.
"""

from __future__ import annotations

import threading
import time

from .errors import CtxwardenError


class OverBudget(CtxwardenError):
    """The work ran past its time budget, or the client left: stop, and change nothing."""


class Deadline:
    """`seconds` from now (None: no time limit), or sooner when `cancelled` is set (the proxy sets
    it when the client disconnects). `check()` is cheap: call it once per unit of work."""

    def __init__(self, seconds: float | None, cancelled: threading.Event | None = None) -> None:
        self.at = None if seconds is None else time.monotonic() + seconds
        self.cancelled = cancelled

    def spent(self) -> bool:
        if self.cancelled is not None and self.cancelled.is_set():
            return True
        return self.at is not None and time.monotonic() >= self.at

    def check(self) -> None:
        if self.spent():
            raise OverBudget("cancelled" if self.cancelled is not None and self.cancelled.is_set() else "time budget spent")


NO_DEADLINE = Deadline(None)
