"""What the upstream client costs per call: the proxy's Upstream on each client, beside bare aiohttp.

    python bench/upstream_client.py [--n 200] [--rounds 15]

One process, one pooled connection to the fake upstream (a separate process), sequential
non-streamed one-message calls, the clients interleaved round by round. Prints the median µs per
call of each and its ratio to bare aiohttp (the least a call can cost on this machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import aiohttp
from _harness import start_fake

from ctxwarden.proxy.config import UpstreamConfig
from ctxwarden.proxy.upstream.client import Upstream

BODY = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "What is the capital of France?"}]}).encode()
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}


async def measure(base: str, n: int, rounds: int) -> dict[str, float]:
    upstreams = {name: Upstream(UpstreamConfig(base_url=f"{base}/v1", http_client=name, api_key_env=None))
                 for name in ("aiohttp", "httpx")}
    bare = aiohttp.ClientSession()

    async def call_bare() -> None:
        async with bare.post(f"{base}/v1/chat/completions", data=BODY, headers=HEADERS) as r:
            await r.read()

    def via(upstream: Upstream):
        async def call() -> None:
            result = await upstream.send("POST", "chat/completions", BODY, HEADERS)
            assert result.response.status_code == 200 and result.response.content

        return call

    calls = {"bare aiohttp": call_bare, "Upstream, aiohttp (default)": via(upstreams["aiohttp"]),
             "Upstream, httpx": via(upstreams["httpx"])}
    times: dict[str, list[float]] = {name: [] for name in calls}
    try:
        for call in calls.values():
            for _ in range(50):
                await call()
        for _ in range(rounds):
            for name, call in calls.items():
                t0 = time.perf_counter()
                for _ in range(n):
                    await call()
                times[name].append((time.perf_counter() - t0) / n * 1e6)
    finally:
        await bare.close()
        for upstream in upstreams.values():
            await upstream.aclose()
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200, help="calls per round per client")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    fake, url = start_fake()
    try:
        medians = asyncio.run(measure(url, args.n, args.rounds))
    finally:
        fake.stop()
    floor = medians["bare aiohttp"]
    print(f"[one non-streamed call to the fake upstream: median of {args.rounds} rounds × {args.n} calls]")
    for name, us in medians.items():
        print(f"  {name:30} {us:7.0f} µs per call   × bare aiohttp {us / floor:5.2f}")


if __name__ == "__main__":
    main()
