"""Memory under a long, varied load: does the proxy's RSS level off, and its store stay bounded?

    python bench/memory.py [--requests 20000] [--every 2000] [--concurrency 8] [--archive-max-items 20]
                           [--chroma-server] [--max-open-indexes N] [--arenas 2] [--trace DIR [--trace-frames N]] [--trim]

The proxy (the real app, every default policy on, run by LocalServer in a child process) sits in
front of the fake upstream (FakeUpstream, another child). This process sends varied requests:
many tenants (each with a small knowledge base) and sessions, 40 of 200 tools each, tool
results with fresh content of 100-1,200 words, half of them on a model with an 8k window (budget
pressure: history summaries, archived tool results in the scratchpad), a tenth streamed. Every
`--every` requests it prints the proxy's RSS and the size of its store on disk. archive.max_items
is lowered (default 20 a tenant) so the retention cap is reached within the run.

`--trace DIR` has the proxy write, at every line, what holds its memory (bench/memory_probe.py:
glibc heap figures, each live LRU's entries and estimated bytes, and with `--trace-frames N` a
tracemalloc snapshot to diff). `--trim` asks it to malloc_trim(0) at the end and prints RSS after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml
from _harness import launch, start_fake

from ctxwarden.proxy.local_server import free_port
from ctxwarden.proxy.processes import Process, rss_mb, start_chroma

ADMIN_KEY = "bench-memory-admin-key"
TENANTS, SESSIONS, KB_TENANTS = 50, 5000, 10
WORDS = ("order invoice shipment pallet customer refund Bergen Oslo Lisbon flight hotel budget ticket delayed "
         "confirmed warehouse account balance region forecast price quantity status reference carrier").split()
CITIES = ["Paris", "Lisbon", "Bergen", "Osaka", "Denver", "Nairobi", "Lima", "Hanoi"]


def serve(config_path: str, port: int) -> None:
    """The child: the real app under LocalServer, until killed."""
    from ctxwarden.proxy.app import create_app
    from ctxwarden.proxy.config import load_settings
    from ctxwarden.proxy.local_server import LocalServer

    if os.environ.get("CTXW_BENCH_TRACE"):
        from memory_probe import install

        install(os.environ["CTXW_BENCH_TRACE"], int(os.environ.get("CTXW_BENCH_TRACE_FRAMES", "0")))
    LocalServer(create_app(load_settings(config_path)), port=port, log_level="error").start()
    while True:
        time.sleep(3600)


def start_proxy(upstream: str, store: str, max_items: int, chroma_url: str | None = None,
                trace: dict | None = None, arenas: int = 2, max_open_indexes: int | None = None) -> Process:
    port = free_port()
    config = {"upstream": {"base_url": f"{upstream}/v1", "api_key_env": None, "retries": 0},
              "storage": {"path": store, "chroma_url": chroma_url,
                          **({"max_open_indexes": max_open_indexes} if max_open_indexes else {})},
              "models": {"bench-small": {"context_window": 8000}},
              "policies": {"archive": {"max_items": max_items}}}
    path = Path(store) / "bench-memory.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {"CTXWARDEN_ADMIN_KEY": ADMIN_KEY, **(trace or {})}
    if arenas:
        env["MALLOC_ARENA_MAX"] = str(arenas)  # 2, as the Docker image
    return launch([sys.executable, __file__, "--serve", str(path), str(port)], port, "/healthz", env, timeout_s=120)


def disk_mb(path: str) -> float:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 2**20


def tools_catalog(rng: random.Random) -> list[dict]:
    out = []
    for i in range(200):
        a, b = rng.sample(WORDS, 2)
        out.append({"type": "function", "function": {
            "name": f"{a}_{b}_{i}", "description": f"Look up the {a} and {b} records ({' '.join(rng.sample(WORDS, 6))}).",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}})
    return out


def tool_result(rng: random.Random, n: int) -> str:
    return " ".join(f"{rng.choice(WORDS)} {rng.randrange(10**6)}" if k % 7 == 0 else rng.choice(WORDS)
                    for k in range(n)) + "."


def make_request(rng: random.Random, i: int, catalog: list[dict]) -> tuple[dict, dict]:
    tenant = f"tenant-{rng.randrange(TENANTS)}"
    headers = {"x-ctxwarden-tenant": tenant, "x-ctxwarden-session": f"{tenant}-s{rng.randrange(SESSIONS)}"}
    tools = rng.sample(catalog, 40)
    city = rng.choice(CITIES)
    messages: list[dict] = [
        {"role": "system", "content": "You are an operations agent. Use the tools; be concise."},
        {"role": "user", "content": f"Task {i}: our budget is ${rng.randrange(1000, 9000)}; check order "
                                    f"{rng.randrange(10**6)} shipping to {city}."}]
    for c in range(rng.randrange(0, 4)):
        tool = rng.choice(tools)["function"]["name"]
        call_id = f"call_{i}_{c}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": tool, "arguments": f'{{"id": "{i}-{c}"}}'}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": tool_result(rng, rng.randrange(100, 1200))})
        messages.append({"role": "assistant", "content": f"Step {c} done for {city}."})
    messages.append({"role": "user", "content": f"Actually the budget is ${rng.randrange(1000, 9000)}. "
                                                f"What is the status of the {city} shipment?"})
    body = {"model": "bench-small" if rng.random() < 0.5 else "gpt-4o", "messages": messages, "tools": tools,
            "stream": rng.random() < 0.1}
    return headers, body


async def load_kbs(client: httpx.AsyncClient, url: str) -> None:
    for t in range(KB_TENANTS):
        docs = [{"id": f"fact{k}", "text": f"The {city} warehouse ships {k + t} pallets a day. It opened in {1990 + k}."}
                for k, city in enumerate(CITIES)]
        r = await client.post(f"{url}/admin/kb/documents", json={"tenant": f"tenant-{t}", "documents": docs},
                              headers={"authorization": f"Bearer {ADMIN_KEY}"})
        r.raise_for_status()


async def drive(url: str, fake: str, pid: int, store: str, n: int, every: int, concurrency: int,
                probe: bool = False) -> None:
    rng = random.Random(2024)
    catalog = tools_catalog(rng)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)
    done, failed, started = 0, 0, time.monotonic()
    async with httpx.AsyncClient(timeout=120) as client:
        await load_kbs(client, url)
        print(f"{'requests':>8} {'rss_mb':>8} {'store_mb':>9} {'req/s':>7} {'errors':>6}", flush=True)
        print(f"{0:>8} {rss_mb(pid):>8.1f} {disk_mb(store):>9.1f} {'-':>7} {0:>6}", flush=True)
        if probe:
            os.kill(pid, signal.SIGUSR1)

        async def worker() -> None:
            nonlocal done, failed
            while not queue.empty():
                i = queue.get_nowait()
                headers, body = make_request(random.Random(i), i, catalog)
                try:
                    async with client.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers) as r:
                        await r.aread()
                        failed += r.status_code >= 500
                except httpx.HTTPError:
                    failed += 1
                done += 1
                if done % every == 0:
                    count, rate = done, done / (time.monotonic() - started)
                    print(f"{count:>8} {rss_mb(pid):>8.1f} {disk_mb(store):>9.1f} {rate:>7.1f} {failed:>6}", flush=True)
                    if probe:
                        os.kill(pid, signal.SIGUSR1)
                    await client.post(f"{fake}/_reset")  # the fake records every request: keep it small

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        serve(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--every", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--archive-max-items", type=int, default=20)
    parser.add_argument("--chroma-server", action="store_true",
                        help="documents in a Chroma server (`chroma run`, storage.chroma_url) instead of embedded")
    parser.add_argument("--trace", metavar="DIR", help="the proxy writes what holds its memory to DIR at every line")
    parser.add_argument("--trace-frames", type=int, default=0, help="with --trace: tracemalloc with N frames")
    parser.add_argument("--max-open-indexes", type=int, help="storage.max_open_indexes (embedded Chroma)")
    parser.add_argument("--arenas", type=int, default=2, help="MALLOC_ARENA_MAX for the proxy (0: glibc's default)")
    parser.add_argument("--trim", action="store_true", help="at the end, malloc_trim(0) in the proxy; print RSS after")
    args = parser.parse_args()
    trace = {"CTXW_BENCH_TRACE": args.trace, "CTXW_BENCH_TRACE_FRAMES": str(args.trace_frames)} if args.trace else {}
    if args.trim and not args.trace:
        trace = {"CTXW_BENCH_TRACE": tempfile.mkdtemp(prefix="ctxw-bench-trace-")}
    store = tempfile.mkdtemp(prefix="ctxw-bench-memory-")
    fake, fake_url = start_fake()
    chroma = start_chroma(Path(store)) if args.chroma_server else None
    proxy = start_proxy(fake_url, store, args.archive_max_items, chroma.url if chroma else None, trace,
                        args.arenas, args.max_open_indexes)
    url = proxy.url
    print(f"proxy pid {proxy.proc.pid}, store {store}; {args.requests} requests, {TENANTS} tenants, "
          f"{SESSIONS} sessions per tenant, archive.max_items {args.archive_max_items}", flush=True)
    try:
        asyncio.run(drive(url, fake_url, proxy.proc.pid, store, args.requests, args.every, args.concurrency,
                          bool(args.trace)))
        if args.trim:
            time.sleep(5)  # let the last probe finish
            before = rss_mb(proxy.proc.pid)
            os.kill(proxy.proc.pid, signal.SIGUSR2)
            time.sleep(2)
            print(f"malloc_trim(0): rss {before:.1f} -> {rss_mb(proxy.proc.pid):.1f} MB", flush=True)
    finally:
        proxy.stop()
        fake.stop()
        if chroma:
            chroma.stop()


if __name__ == "__main__":
    main()
