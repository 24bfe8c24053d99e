"""A policy's time budget for one request, and the client's leaving, as one thing to check.

CPU-heavy work runs in a worker thread (invariant 4), where asyncio cannot cancel it; the work
checks a `Deadline` between its steps instead, and stops with `OverBudget` when the budget is
spent or the client has gone. The policy then lets the request through as it was and reports
`<policy>.skipped_budget` (invariant 7): a check that cannot finish in time is no reason to delay
or change the request.

Background work (a catalog embedded after its request) has no budget, but it must stop when the
process exits: `UNTIL_EXIT` is the deadline that is spent then.
"""

from __future__ import annotations

import atexit
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

# Set as the interpreter starts to exit, before it waits for the threads that are not daemons (the hook
# concurrent.futures uses; atexit alone runs after that wait). Background work runs in such threads
# and checks this between its chunks: a daemon thread killed inside a native library (onnxruntime)
# aborts the process, and a thread that finished its whole work first would hold the exit.
_EXITING = threading.Event()
_register = getattr(threading, "_register_atexit", None)
if _register is not None:
    _register(_EXITING.set)
else:  # pragma: no cover - every CPython the project supports has it
    atexit.register(_EXITING.set)
UNTIL_EXIT = Deadline(None, _EXITING)
