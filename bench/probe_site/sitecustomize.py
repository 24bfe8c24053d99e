"""Imported by every Python started with bench/probe_site on its PYTHONPATH (`bench/fuzz.py --probe DIR`
puts it there for the proxy it starts): in the `ctxwarden serve` process alone, install
bench/memory_probe.py's signal handlers, so the proxy run exactly as users run it can say what holds
its memory. Bench only: nothing in the package imports this."""

import os
import sys

if os.environ.get("CTXW_BENCH_TRACE") and "serve" in sys.argv:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import memory_probe

    memory_probe.install(os.environ["CTXW_BENCH_TRACE"], int(os.environ.get("CTXW_BENCH_TRACE_FRAMES", "0")))
