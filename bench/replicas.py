"""Replicas bench: what the shared state costs, and what a second replica adds.

    python bench/replicas.py [--seconds 8] [--requests 400]

Starts, each as its own process on 127.0.0.1: the fake upstream, a redis-server (Debian's
package), a Chroma server (`chroma run`), and ctxwarden with the default policies three ways:
state in the process (the default), and two replicas sharing Redis (`state.redis_url`) and the
Chroma server (`storage.chroma_url`). It prints:
- added latency p50/p95 over calling the upstream directly, sequential and interleaved (the same
  one-message chat in one session), for in-process state and for Redis, and their difference:
  what the Redis backend adds per request (target ≤ 0.5 ms p50);
- the same with a new session on every request (the worst case: the session is created and
  written to Redis each time);
- requests/s at 32 connections (wrk) for one replica, and for two replicas together (16 connections
  each, run at the same time), with Redis state. The machine's cores are shared by wrk, the
  upstream and Redis, so two replicas gain only what cores are left.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import pct, start_fake, start_proxy  # noqa: E402
from _load import HEADERS, throughput  # noqa: E402

from ctxwarden.proxy.processes import redis_command, start_chroma, start_redis  # noqa: E402

BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Where is the Eiffel Tower?"}]}


def sequential(targets: dict[str, str], n: int, new_session: bool) -> dict[str, list[float]]:
    """`n` rounds; each round sends one request to every target in turn. ms per request."""
    times: dict[str, list[float]] = {name: [] for name in targets}
    raw = json.dumps(BODY).encode()
    with httpx.Client(timeout=60) as client:
        for i in range(n + 30):
            for name, url in targets.items():
                headers = {**HEADERS, "x-ctxwarden-session": f"s{i}" if new_session else "bench"}
                t0 = time.perf_counter()
                client.post(f"{url}/v1/chat/completions", content=raw, headers=headers).raise_for_status()
                if i >= 30:  # warm-up rounds are not counted
                    times[name].append((time.perf_counter() - t0) * 1000)
    return times


def latency_rows(targets: dict[str, str], n: int, new_session: bool) -> None:
    times = sequential(targets, n, new_session)
    base = statistics.median(times["upstream"])
    added = {name: [t - base for t in values] for name, values in times.items() if name != "upstream"}
    for name, values in added.items():
        print(f"  {name:<22} added p50 {statistics.median(values):6.3f} ms  p95 {pct(values, 95):6.3f} ms")
    diff = statistics.median(added["redis state"]) - statistics.median(added["in-process state"])
    print(f"  Redis backend adds     {diff:+.3f} ms p50 (target ≤ 0.5)")


def two_at_once(urls: list[str], seconds: float) -> float:
    results: list[float] = []

    def run(url: str) -> None:
        results.append(throughput(url, BODY, seconds, connections=16)[0])

    threads = [threading.Thread(target=run, args=(url,)) for url in urls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()
    if redis_command() is None:
        sys.exit("redis-server is not installed (Debian: apt-get install -y redis-server)")
    work = Path(tempfile.mkdtemp(prefix="ctxw-replicas-"))
    fake, fake_url = start_fake()
    redis, chroma = start_redis(work), start_chroma(work)
    def shared(name: str) -> dict:
        return {"state": {"redis_url": f"redis://127.0.0.1:{redis.port}/0"},
                "storage": {"path": str(work / name), "chroma_url": chroma.url}}

    procs = [fake]
    try:
        local, local_url = start_proxy(fake_url, {})
        a, a_url = start_proxy(fake_url, shared("a"))
        b, b_url = start_proxy(fake_url, shared("b"))
        procs += [local, a, b]
        for proxy in (a_url, b_url):  # the replicas' documents on the Chroma server
            assert httpx.get(f"{proxy}/readyz").json()["state"] == "ok"
        targets = {"upstream": fake_url, "in-process state": local_url, "redis state": a_url}
        print(f"added latency, default policies, {args.requests} interleaved sequential requests each:")
        print(" one session (steady state: one Redis read per request)")
        latency_rows(targets, args.requests, new_session=False)
        print(" a new session every request (a read and a write)")
        latency_rows(targets, args.requests // 2, new_session=True)
        print(f"requests/s, default policies, Redis state, {args.seconds:g} s each:")
        one = throughput(a_url, BODY, args.seconds)[0]
        print(f"  1 replica,  32 connections     {one:8.0f}")
        two = two_at_once([a_url, b_url], args.seconds)
        print(f"  2 replicas, 2 × 16 connections {two:8.0f}  ({two / one:.2f}× one replica)")
        print(f"  in-process state, 1 replica    {throughput(local_url, BODY, args.seconds)[0]:8.0f}")
    finally:
        for proc in procs:
            proc.stop()
        chroma.stop()
        redis.stop()


if __name__ == "__main__":
    main()
