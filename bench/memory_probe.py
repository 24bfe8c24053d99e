"""Opt-in probes inside bench/memory.py's proxy child (`--trace DIR`) or the proxy bench/fuzz.py starts
(`--probe DIR`, through bench/probe_site/sitecustomize.py): what holds the memory.

On SIGUSR1 the child writes DIR/probe-<n>.txt: RSS, glibc's heap figures (mallinfo2), resident memory
by kind of mapping (/proc/self/smaps), CPython's small-object allocator (its arenas, and how much of
them live blocks fill), every Python object the collector reaches, by type, every live
`LRU` (entries, bytes it counts, a deep size of a sample of its values), and — when tracemalloc
runs — a snapshot DIR/snap-<n>.pickle to diff (`python bench/memory_probe.py DIR/snap-1.pickle
DIR/snap-3.pickle`). On SIGUSR2 it calls malloc_trim(0) and notes RSS before and after. Bench
only: nothing here is imported by the proxy.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import os
import re
import signal
import sys
import tempfile
import threading
import tracemalloc
import types
from pathlib import Path

_state = {"n": 0}


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL("libc.so.6")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _mallinfo2() -> _MallInfo2 | None:
    try:
        fn = _libc().mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    return fn()


def heap_in_use_mb() -> float:
    """glibc's heap bytes in use (mallinfo2 uordblks), in MB; NaN where there is no mallinfo2."""
    m = _mallinfo2()
    return m.uordblks / 2**20 if m is not None else float("nan")


def mallinfo() -> str:
    m = _mallinfo2()
    if m is None:
        return "mallinfo2: n/a"
    return (f"malloc: arena {m.arena / 2**20:.1f} MB, mmapped {m.hblkhd / 2**20:.1f} MB, in use "
            f"{m.uordblks / 2**20:.1f} MB, free in heap {m.fordblks / 2**20:.1f} MB")


def arenas() -> list[str]:
    """glibc's own account per arena (malloc_info's XML): each arena's system bytes and what its bins
    hold free (what is neither in use nor in the bins is its top chunk: free() gives a thread arena's
    top back only past the trim threshold, and malloc_trim(0) does not touch it)."""
    libc = _libc()
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    fd, path = tempfile.mkstemp(suffix=".xml")
    os.close(fd)
    fp = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, fp)
    libc.fclose(fp)
    xml = Path(path).read_text()
    os.unlink(path)
    lines = []
    for nr, body in re.findall(r'<heap nr="(\d+)">(.*?)</heap>', xml, re.S):
        fast = sum(int(x) for x in re.findall(r'<total type="fast" count="\d+" size="(\d+)"', body))
        rest = sum(int(x) for x in re.findall(r'<total type="rest" count="\d+" size="(\d+)"', body))
        current = sum(int(x) for x in re.findall(r'<system type="current" size="(\d+)"', body))
        lines.append(f"arena {nr}: system {current / 2**20:.1f} MB, free in bins {(fast + rest) / 2**20:.1f} MB")
    return lines


_SHARED = ("ctxwarden.proxy.", "chromadb", "wordllama", "tiktoken", "threading", "concurrent", "asyncio", "logging")


def _shared(o: object) -> bool:
    """Services every entry points at (store, embedder, locks, executors): not an entry's own bytes."""
    return isinstance(o, (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType)) \
        or type(o).__module__.startswith(_SHARED)


def deep_size(obj: object, seen: set[int], limit: int = 500_000) -> int:
    """Bytes reachable from `obj` (sys.getsizeof over a walk of containers and __dict__/__slots__)."""
    total, stack = 0, [obj]
    while stack and len(seen) < limit:
        o = stack.pop()
        if id(o) in seen or _shared(o):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)  # a numpy array that owns its data counts it here already
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        else:
            if hasattr(o, "__dict__"):
                stack.append(vars(o))
            for slot in getattr(type(o), "__slots__", ()):
                if hasattr(o, slot):
                    stack.append(getattr(o, slot))
    return total


def lru_report() -> list[str]:
    """Every live LRU, grouped by owner and value type: entries, estimated bytes, bytes counted."""
    from ctxwarden.policies.cache import LRU

    groups: dict[tuple[str, str], list[float]] = {}
    for obj in gc.get_objects():
        if not isinstance(obj, LRU) or len(obj) == 0:
            continue
        items = obj.items()
        sample = items[-200:]
        seen: set[int] = set()
        size = sum(deep_size(k, seen) + deep_size(v, seen) for k, v in sample)
        g = groups.setdefault((_owner(obj), type(sample[-1][1]).__name__), [0, 0, 0, 0, 0, 0])
        g[0] += 1
        g[1] += len(items)
        g[2] += obj.max_entries
        g[3] += size / len(sample) * len(items)
        g[4] += obj.bytes
        g[5] += obj.max_bytes or 0
    rows = sorted(groups.items(), key=lambda kv: -kv[1][3])
    out = []
    for (owner, kind), (lrus, n, cap, est, b, mb) in rows:
        full = est / max(n, 1) * cap if not mb else min(mb * est / max(b, 1), est / max(n, 1) * cap)
        out.append(f"{est / 2**20:8.1f} MB est ({full / 2**20:7.1f} at cap)  {n:>7}/{cap:<7} entries  ({lrus} LRUs)  "
                   f"counted {b / 2**20:6.1f}/{mb / 2**20:6.1f} MB  {est / max(n, 1) / 1024:7.2f} KB/entry  {kind}  {owner}")
    return out


def _owner(lru: object) -> str:
    for ref in gc.get_referrers(lru):
        if isinstance(ref, types.FrameType):
            continue
        attrs = getattr(ref, "__dict__", None) if not isinstance(ref, dict) else None
        if isinstance(attrs, dict):  # 3.11+: an instance with inline attributes refers to the LRU itself
            attr = next((k for k, v in attrs.items() if v is lru), "?")
            return f"{type(ref).__module__}.{type(ref).__name__}.{attr}"
        if isinstance(ref, dict):
            attr = next((k for k, v in ref.items() if v is lru), "?")
            holder = next((h for h in gc.get_referrers(ref) if getattr(h, "__dict__", None) is ref), None)
            where = f"{type(holder).__module__}.{type(holder).__name__}" if holder is not None else ref.get("__name__", "dict")
            return f"{where}.{attr}"
    return "?"


def lru_cache_report() -> list[str]:
    rows = []
    for obj in gc.get_objects():
        if isinstance(obj, functools._lru_cache_wrapper):
            ci = obj.cache_info()
            if ci.currsize:
                rows.append(f"  functools {ci.currsize:>7}/{ci.maxsize}  {getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)}")
    return rows


def probe(directory: Path) -> None:
    try:
        _probe(directory)
    except Exception:  # a probe must never stop the server
        import traceback

        (directory / "errors.txt").open("a").write(traceback.format_exc())


def _probe(directory: Path) -> None:
    _state["n"] += 1
    n = _state["n"]
    (directory / f"smaps-{n}.txt").write_text(Path("/proc/self/smaps").read_text())  # first: before the probe's own work
    lines = [f"rss {rss_mb():.1f} MB", mallinfo(), f"threads {threading.active_count()}",
             f"gc objects {len(gc.get_objects())}"]
    if tracemalloc.is_tracing():
        current, peak = tracemalloc.get_traced_memory()
        lines.append(f"tracemalloc: current {current / 2**20:.1f} MB, peak {peak / 2**20:.1f} MB")
        tracemalloc.take_snapshot().dump(str(directory / f"snap-{n}.pickle"))
    lines += arenas() + smaps() + pymalloc() + census()
    lines += ["LRUs (largest first):", *lru_report(), "functools.lru_cache:", *lru_cache_report()]
    (directory / f"probe-{n}.txt").write_text("\n".join(lines) + "\n")


def trim(directory: Path) -> None:
    """A full collection (cyclic garbage a big request left, e.g. an exception's frames holding its
    body, waits for the collector's oldest generation), then malloc_trim(0); RSS after each."""
    before = rss_mb()
    found = gc.collect()
    collected = rss_mb()
    _libc().malloc_trim(0)
    with open(directory / "trim.txt", "a") as out:
        out.write(f"gc.collect: {found} objects, rss {before:.1f} -> {collected:.1f} MB; malloc_trim: -> {rss_mb():.1f} MB\n")


def install(directory: str, frames: int = 0) -> None:
    """In the proxy child: start tracemalloc (`frames` > 0) and answer SIGUSR1/SIGUSR2 on a thread."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    if frames:
        tracemalloc.start(frames)
    signal.signal(signal.SIGUSR1, lambda *_: probe(path))  # the main thread only sleeps: run here
    signal.signal(signal.SIGUSR2, lambda *_: trim(path))


def diff(before: str, after: str, top: int = 40) -> None:
    old, new = tracemalloc.Snapshot.load(before), tracemalloc.Snapshot.load(after)
    for key in ("filename", "traceback"):
        print(f"== top growth by {key}")
        for stat in new.compare_to(old, key)[:top if key == "filename" else 15]:
            print(stat)
            if key == "traceback":
                for line in stat.traceback.format()[-12:]:
                    print("     ", line)



def census(top: int = 25) -> list[str]:
    """Every Python object the collector can reach, by type: gc-tracked containers and the strings,
    bytes and numbers they hold (not tracked themselves), each counted once (a numpy array with the
    buffer it owns). Compare two probes: growth here is Python's, growth only in mallinfo is native."""
    seen: set[int] = set()
    by_type: dict[str, list[int]] = {}

    def count(o: object) -> None:
        if id(o) in seen:
            return
        seen.add(id(o))
        size = sys.getsizeof(o)  # a numpy array that owns its data counts it here already
        row = by_type.setdefault(type(o).__qualname__, [0, 0])
        row[0] += 1
        row[1] += size

    for obj in gc.get_objects():
        count(obj)
        stack = [ref for ref in gc.get_referents(obj) if not gc.is_tracked(ref)]
        while stack:  # untracked containers (a tuple or dict of atomic values) hold more of them
            ref = stack.pop()
            if id(ref) not in seen:
                count(ref)
                stack.extend(r for r in gc.get_referents(ref) if not gc.is_tracked(r))
    total = sum(row[1] for row in by_type.values())
    rows = sorted(by_type.items(), key=lambda kv: -kv[1][1])[:top]
    return [f"python objects: {len(seen)} objects, {total / 2**20:.1f} MB"] + \
        [f"  {size / 2**20:8.2f} MB {n:>9}  {name}" for name, (n, size) in rows]


def smaps() -> list[str]:
    """Resident memory by kind of mapping: glibc's main heap ([heap]), anonymous mappings that start at
    a 64 MiB boundary (glibc's other arenas), anonymous ones of exactly 1 MiB (CPython's small-object
    arenas; the kernel merges neighbouring ones into "anon other", so most of them are counted there),
    other anonymous ones (big blocks, CPython's arenas, thread stacks) and files (code, data files)."""
    kinds: dict[str, list[float]] = {}
    name, size = "", 0
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
            start, end = (int(x, 16) for x in head[0].split("-"))
            size, name = end - start, (head[5] if len(head) > 5 else "")
        elif head[0] == "Rss:":
            if name == "[heap]":
                kind = "[heap]"
            elif name.startswith("["):
                kind = name
            elif name:
                kind = "file"
            elif size == 2**20:
                kind = "anon 1 MiB (a CPython arena alone)"
            elif start % 2**26 == 0:
                kind = "anon at 64 MiB boundary (glibc arenas)"
            else:
                kind = "anon other"
            row = kinds.setdefault(kind, [0, 0])
            row[0] += 1
            row[1] += int(head[1]) / 1024
    return [f"smaps: {kind}: {mb:.1f} MB resident in {n} mappings" for kind, (n, mb) in sorted(kinds.items(), key=lambda kv: -kv[1][1])
            if mb >= 0.1]


def pymalloc() -> list[str]:
    """CPython's small-object allocator (sys._debugmallocstats, written to stderr): the arenas it
    holds and how much of them live blocks fill; the rest is held by pools a live object pins."""
    with tempfile.TemporaryFile("w+") as out:
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()
    keep = ("arenas allocated current", "arenas highwater", "bytes in allocated blocks", "bytes in available blocks",
            "unused pools", "bytes lost to", "Total")
    return ["pymalloc: " + " ".join(line.split()) for line in text.splitlines() if any(k in line for k in keep)][:9]


if __name__ == "__main__":
    diff(sys.argv[1], sys.argv[2])
