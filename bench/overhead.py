"""What the proxy adds: latency, throughput, streaming timing and memory.

    python bench/overhead.py [--n 2000] [--mem-requests 10000]

The fake upstream, the proxy and this client run as three processes on 127.0.0.1. Requests go
direct and through the proxy, interleaved, so both see the same machine state. Two set-ups:
(a) every policy and the budget off (the pure gateway); (b) the default policies on, with a
realistic agent request: 40 messages with tool calls, 50 tools, about 12k tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from pathlib import Path

import httpx
from _harness import pct, start_fake, start_proxy, summary

TOOLS = Path(__file__).resolve().parent / "data" / "metatool" / "tools.json"

ADMIN_KEY = "bench-admin-key"
os.environ["CTXWARDEN_ADMIN_KEY"] = ADMIN_KEY  # the proxies started below inherit it (KB loading)
POLICIES_OFF = {"budget": {"enabled": False},
                "policies": {p: {"enabled": False} for p in ("loops", "poisoning", "clash", "history", "archive", "tools")}}
SMALL = {"model": "gpt-4o", "messages": [{"role": "user", "content": "What is the capital of France?"}]}


def agent_request(seed: int = 7) -> dict:
    """40 messages (system, user, 19 tool-call rounds), 50 tools from MetaTool, ~12k tokens."""
    rng = random.Random(seed)
    catalog = json.loads(TOOLS.read_text())
    names = rng.sample(sorted(catalog), 50)
    tools = [{"type": "function", "function": {
        "name": n, "description": catalog[n][:300],
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "what to look up"}},
                       "required": ["query"]}}} for n in names]
    words = "flight hotel Paris budget invoice order shipped refund account weather forecast museum ticket price " \
            "schedule delayed confirmed customer reference number available room night breakfast".split()
    messages = [{"role": "system", "content": "You are a travel and shopping agent. Use the tools; be concise."},
                {"role": "user", "content": "Plan my trip to Paris next week and check my open orders."}]
    for i in range(19):
        tool = names[i % 50]
        call_id = f"call_{i}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps({"query": f"step {i}"})}}]})
        result = " ".join(rng.choice(words) + (f" {rng.randint(1, 9999)}" if rng.random() < 0.2 else "") for _ in range(420))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return {"model": "gpt-4o", "messages": messages, "tools": tools}


def sequential(direct: str, proxied: str, body: dict, n: int) -> dict[str, list[float]]:
    raw = json.dumps(body).encode()
    times: dict[str, list[float]] = {"direct": [], "proxy": []}
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    with httpx.Client(timeout=30) as client:
        for url in (direct, proxied):  # warm connections and caches
            for _ in range(20):
                client.post(f"{url}/v1/chat/completions", content=raw, headers=headers).raise_for_status()
        for _ in range(n):
            for name, url in (("direct", direct), ("proxy", proxied)):
                t0 = time.perf_counter()
                client.post(f"{url}/v1/chat/completions", content=raw, headers=headers).raise_for_status()
                times[name].append((time.perf_counter() - t0) * 1000)
    return times


async def throughput(url: str, body: dict, total: int, concurrency: int = 32) -> float:
    raw = json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    remaining = total
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=concurrency)) as client:
        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                (await client.post(f"{url}/v1/chat/completions", content=raw, headers=headers)).raise_for_status()

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return total / (time.perf_counter() - t0)


async def post_all(url: str, bodies: list[dict], concurrency: int) -> None:
    queue = list(bodies)
    async with httpx.AsyncClient(timeout=120) as client:
        async def worker() -> None:
            while queue:
                (await client.post(f"{url}/v1/chat/completions", json=queue.pop())).raise_for_status()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def stream_timing(fake: str, url: str, chunk_delay_s: float = 0.02) -> tuple[float, list[float]]:
    """Time to the first content chunk, and the gaps between content chunks, at the client."""
    httpx.post(f"{fake}/_script", json=[{"content": "one two three four five six seven eight nine ten",
                                         "chunk_delay_s": chunk_delay_s}])
    body = {**SMALL, "stream": True}
    arrivals: list[float] = []
    t0 = time.perf_counter()
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and '"content":"' in line.replace(" ", "") and '"content":""' not in line.replace(" ", ""):
                arrivals.append(time.perf_counter())
    first = (arrivals[0] - t0) * 1000
    gaps = [(b - a) * 1000 for a, b in zip(arrivals, arrivals[1:])]
    return first, gaps


def report_stream_flow(fake: str, proxy: str, setup: str, runs: int = 20) -> None:
    """First content of a one-sentence answer with nothing checkable (10 chunks, 20 ms apart): with
    poisoning on, it must flow as it arrives, not wait for the sentence's end (~200 ms)."""
    direct = [stream_timing(fake, fake)[0] for _ in range(runs)]
    proxied = [stream_timing(fake, proxy)[0] for _ in range(runs)]
    print(f"\n[streaming, {setup}: time to first content ms, {runs} runs]")
    print(f"  direct {statistics.median(direct):.1f}, proxy {statistics.median(proxied):.1f}, "
          f"added {statistics.median(proxied) - statistics.median(direct):.1f} (the whole sentence takes ~200 ms)")


def report_latency(title: str, times: dict[str, list[float]]) -> None:
    d, p = times["direct"], times["proxy"]
    paired = [b - a for a, b in zip(d, p)]
    print(f"\n[{title}] {len(d)} sequential requests, interleaved")
    print(f"  direct ms        {summary(d)}")
    print(f"  through proxy ms {summary(p)}")
    print(f"  added ms: median {statistics.median(p) - statistics.median(d):.3f}  "
          f"p99 {pct(p, 99) - pct(d, 99):.3f}  (paired differences: median {statistics.median(paired):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--mem-requests", type=int, default=10_000)
    parser.add_argument("--varied", type=int, default=2000, help="different agent conversations for the memory check")
    args = parser.parse_args()

    fake, fake_url = start_fake()
    try:
        proxy, proxy_url = start_proxy(fake_url, POLICIES_OFF)
        print(f"proxy RSS after start: {proxy.rss_mb():.1f} MB (policies off)")
        report_latency("a: policies off, small request", sequential(fake_url, proxy_url, SMALL, args.n))
        rps_direct = asyncio.run(throughput(fake_url, SMALL, 3000))
        rps_proxy = asyncio.run(throughput(proxy_url, SMALL, 3000))
        print(f"  requests/s at concurrency 32: direct {rps_direct:.0f}, through proxy {rps_proxy:.0f}")

        firsts_d, firsts_p, gaps_d, gaps_p = [], [], [], []
        for _ in range(30):
            f, g = stream_timing(fake_url, fake_url)
            firsts_d.append(f)
            gaps_d += g
            f, g = stream_timing(fake_url, proxy_url)
            firsts_p.append(f)
            gaps_p += g
        print("\n[streaming: 10 chunks 20 ms apart, 30 runs]")
        print(f"  time to first chunk ms: direct {statistics.median(firsts_d):.3f}, proxy {statistics.median(firsts_p):.3f}, "
              f"added {statistics.median(firsts_p) - statistics.median(firsts_d):.3f}")
        print(f"  inter-chunk gap ms: direct median {statistics.median(gaps_d):.2f} max {max(gaps_d):.2f}; "
              f"proxy median {statistics.median(gaps_p):.2f} max {max(gaps_p):.2f} (chunks are not held)")

        marks = []
        per = args.mem_requests // 4
        for _ in range(4):
            asyncio.run(throughput(proxy_url, SMALL, per))
            marks.append(proxy.rss_mb())
        print(f"\n[memory] proxy RSS over {args.mem_requests} requests: "
              + " → ".join(f"{m:.1f}" for m in marks) + " MB")
        proxy.stop()

        proxy, proxy_url = start_proxy(fake_url, {})
        print(f"\nproxy RSS after start: {proxy.rss_mb():.1f} MB (default policies)")
        body = agent_request()
        actions = httpx.post(f"{proxy_url}/v1/chat/completions", json=body, timeout=60).headers.get("x-ctxwarden-actions")
        print(f"  agent request actions: {actions}")
        report_latency("b: default policies, agent request (40 messages, 50 tools)", sequential(fake_url, proxy_url, body, max(200, args.n // 10)))
        print(f"  proxy RSS after: {proxy.rss_mb():.1f} MB")
        report_stream_flow(fake_url, proxy_url, "default policies (poisoning on), empty knowledge base")
        httpx.post(f"{proxy_url}/admin/kb/documents", headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=60,
                   json={"documents": [{"id": "eiffel", "text": "The Eiffel Tower is located in Paris, France."}]})
        report_stream_flow(fake_url, proxy_url, "default policies (poisoning on), a knowledge base loaded")
        marks = []
        per = args.varied // 4
        for quarter in range(4):
            bodies = [agent_request(seed=1000 + quarter * per + i) for i in range(per)]
            asyncio.run(post_all(proxy_url, bodies, concurrency=8))
            marks.append(proxy.rss_mb())
        print(f"\n[memory, default policies] RSS over {args.varied} different agent conversations: "
              + " → ".join(f"{m:.1f}" for m in marks) + " MB")
        proxy.stop()
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
