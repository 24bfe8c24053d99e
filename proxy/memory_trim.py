"""Give the heap's free pages back to the OS after big requests (glibc's `malloc_trim`).

A request body of a megabyte is parsed into many objects and long strings; once freed, glibc keeps
most of those pages in its heap, split by what is still live, so RSS stays near its high-water mark.
Measured with bench/fuzz.py's bodies through an in-process server (1,000 bodies): 486 MB RSS, of
which 102 MB free in the heap, and `malloc_trim(0)` returned 57 MB. A trim runs in a worker thread,
at most once every `MIN_INTERVAL_S`, after a request whose body was at least `BIG_BODY_BYTES` or once
the bodies since the last trim add up to `TRIM_AFTER_BYTES` (many 20-900 KB bodies fragment the heap
as one big one does), `DELAY_S` after that request's end: trimmed at once, the request's own copies
(its body, the rewritten messages, work it left running) were still live and their pages were kept.

At rest, too: once the bodies since the last trim add up to `IDLE_AFTER_BYTES` and no request has
ended for `IDLE_S`, the heap is trimmed, and once more `SETTLE_S` later if still nothing ended (the
archive and memory writes a request leaves running end after it). Chroma's writes are what this
is for: measured in isolation, 1,000 upserts of 0.5-1,500 KB documents left 145 MB free in the
heap (21 MB in use) and RSS at 245 MB; `malloc_trim(0)` brought it to 137 MB. In bench/fuzz.py those
writes follow the request that asked for them, after its own trim had run. A trim at rest costs a
few milliseconds of a worker thread, at most once every `MIN_IDLE_INTERVAL_S`.
Elsewhere than glibc (musl, macOS) there is no `malloc_trim` and this does nothing.

NumPy asks the kernel for transparent huge pages (`madvise(MADV_HUGEPAGE)`) on every array of 4 MiB
or more. Allocated from glibc's heap (which it is, once a freed big block has raised glibc's mmap
threshold), that advice stays on the heap's pages after the array is gone, and the kernel's
khugepaged then fills each 2 MiB range of them that holds a single live page: freed, trimmed heap
became resident again, minutes later (khugepaged's pace, so runs differ). Measured in bench/fuzz.py
(10,000 bodies, CPython's small-object allocator off): 26 MB of huge pages in the heap and its second
arena by the end, none in the heap at the 1,000 mark. `no_huge_page_advice` turns
NumPy's advice off for the process unless `NUMPY_MADVISE_HUGEPAGE` says otherwise; the proxy's arrays
are small (its largest, the embedder's 31 MB table, is read row by row).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import time
from typing import Any, Callable

log = logging.getLogger("ctxwarden.memory")

BIG_BODY_BYTES = 1_000_000
TRIM_AFTER_BYTES = 8_000_000
MIN_INTERVAL_S = 10.0
DELAY_S = 0.5
IDLE_S = 0.5
IDLE_AFTER_BYTES = 1_000_000
SETTLE_S = 3.0
MIN_IDLE_INTERVAL_S = 2.0


def no_huge_page_advice() -> bool:
    """Stop NumPy advising huge pages for its big arrays (see above); True if it was on. An operator's
    explicit `NUMPY_MADVISE_HUGEPAGE` is left as set."""
    if os.environ.get("NUMPY_MADVISE_HUGEPAGE"):
        return False
    try:
        from numpy._core import multiarray
    except ImportError:  # NumPy < 2: the same switch lives in numpy.core
        from numpy.core import multiarray  # type: ignore[no-redef]
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    return bool(setter(False)) if setter is not None else False  # returns the setting before


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


class HeapTrim:
    """A pipeline listener: after a big request, and at rest once bodies add up, trim the heap (off
    the event loop, rate-limited). Only one check at rest is pending at a time, and `received` is
    reset only by a trim, which ends a request first or is that check: so a check that finds no
    request ended since it was set still sees the bytes that set it."""

    def __init__(self, big_body_bytes: int = BIG_BODY_BYTES, min_interval_s: float = MIN_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, trim_after_bytes: int = TRIM_AFTER_BYTES,
                 delay_s: float = DELAY_S, idle_s: float = IDLE_S, idle_after_bytes: int = IDLE_AFTER_BYTES,
                 settle_s: float = SETTLE_S, min_idle_interval_s: float = MIN_IDLE_INTERVAL_S) -> None:
        self.trim = _malloc_trim()
        self.big_body_bytes = big_body_bytes
        self.trim_after_bytes = trim_after_bytes
        self.min_interval_s = min_interval_s
        self.delay_s = delay_s
        self.clock = clock
        self.last = -min_interval_s
        self.received = 0  # body bytes since the last trim
        self.trims = 0
        self.idle_s, self.idle_after_bytes, self.settle_s = idle_s, idle_after_bytes, settle_s
        self.min_idle_interval_s = min_idle_interval_s
        self.ended = 0  # requests ended so far (a check at rest is void if one ended since it was set)
        self.last_end = -idle_s
        self.idle_pending = False

    def after(self, ex: Any, outcome: str) -> None:
        if self.trim is None:
            return
        size = getattr(ex, "body_bytes", 0)
        self.received += size
        self.ended += 1
        self.last_end = now = self.clock()
        big = size >= self.big_body_bytes or self.received >= self.trim_after_bytes
        if big and now - self.last >= self.min_interval_s:
            self.last, self.received = now, 0
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no running loop (called outside a request): trim here
                self._run()
                return
            loop.call_later(self.delay_s, lambda: loop.run_in_executor(None, self._run))
            self._at_rest(self.settle_s, settle=True)
        elif self.received >= self.idle_after_bytes:
            self._at_rest(self.idle_s, settle=False)

    def _at_rest(self, delay: float, settle: bool) -> None:
        """Trim `delay` from now if no request ends before then (`settle`: the second, later check)."""
        if self.idle_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # outside a request's event loop: nothing to wait with
            return
        self.idle_pending = True
        ended = self.ended
        loop.call_later(delay, self._rest_check, loop, ended, settle)

    def _rest_check(self, loop: asyncio.AbstractEventLoop, ended: int, settle: bool) -> None:
        self.idle_pending = False
        now = self.clock()
        if self.ended != ended:  # a request ended meanwhile: wait for the rest after it
            if self.received >= self.idle_after_bytes:
                self._at_rest(max(0.0, self.last_end + self.idle_s - now), settle=False)
            return
        if now - self.last < self.min_idle_interval_s:
            self._at_rest(self.last + self.min_idle_interval_s - now, settle)
            return
        self.last, self.received = now, 0
        loop.run_in_executor(None, self._run)
        if not settle:
            self._at_rest(self.settle_s, settle=True)

    def _run(self) -> None:
        try:
            self.trim(0)  # type: ignore[misc]
            self.trims += 1
        except Exception:  # never let memory housekeeping fail a request
            log.debug("malloc_trim failed", exc_info=True)
