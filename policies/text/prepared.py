"""Something costly a policy prepares once per process (a second embedder: loading it takes ~1 s).

Prepared in a thread under a lock, not in a task of one event loop: whichever loop or thread asks
first, every caller waits for the same preparation, and a failure is remembered as `None` (the
preparing function says why; an exception it lets out is logged here) rather than retried on every
request.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger("ctxwarden.policies")


class PreparedOnce(Generic[T]):
    def __init__(self, prepare: Callable[[], T | None], thread_name: str) -> None:
        self._prepare = prepare
        self._thread_name = thread_name
        self._value: T | None = None
        self._ready = False
        self._started = False
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def value(self) -> T | None:
        """What was prepared; None while it is not ready or when there was none to be had."""
        return self._value

    def get(self) -> T | None:
        """Prepare it now if no one has (blocking: call it from a worker thread) and return it."""
        with self._lock:
            if not self._ready:
                try:
                    self._value = self._prepare()
                except Exception:  # noqa: BLE001 - whatever went wrong, the policy goes on without it
                    log.exception("%s: preparation failed; going on without it", self._thread_name)
                    self._value = None
                self._ready = True
        return self._value

    def start(self) -> None:
        """Prepare it in the background, once; callers that need it meanwhile wait in `get`."""
        if self._ready or self._started:
            return
        self._started = True
        # Not a daemon: a process that exits while a native library (onnxruntime) is loading in this thread
        # was aborted ("terminate called without an active exception", SIGABRT); exit waits for it instead.
        threading.Thread(target=self.get, name=self._thread_name, daemon=False).start()


def other_embedder(services: Any, wanted: str) -> Any:
    """The embedder a policy's second reader names (`Services.embedder_named`; typed loosely, since text/
    sits below policies.base), or None: named "none", no way to ask for one, or the policy's own (the same
    reader twice adds nothing). Raises when its model cannot load (`name` loads a lazy embedder's model):
    the caller says so and goes on without it."""
    named = services.embedder_named
    if wanted == "none" or named is None:
        return None
    embedder = named(wanted)
    if embedder is None or embedder.name == getattr(services.embedder, "name", None):
        return None
    return embedder
