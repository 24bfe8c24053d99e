"""Load and timing for bench/overhead.py: interleaved sequential latency, wrk throughput, stream timing."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}


def interleaved(targets: dict[str, str], body: dict, n: int, warm: int = 30) -> dict[str, list[float]]:
    """`n` sequential requests to every target in turn (so all see the same machine state); ms each."""
    raw = json.dumps(body).encode()
    times: dict[str, list[float]] = {name: [] for name in targets}
    with httpx.Client(timeout=60) as client:
        for url in targets.values():
            for _ in range(warm):
                client.post(f"{url}/v1/chat/completions", content=raw, headers=HEADERS).raise_for_status()
        for _ in range(n):
            for name, url in targets.items():
                t0 = time.perf_counter()
                client.post(f"{url}/v1/chat/completions", content=raw, headers=HEADERS).raise_for_status()
                times[name].append((time.perf_counter() - t0) * 1000)
    return times


def throughput(url: str, body: dict, seconds: float = 8, connections: int = 32) -> tuple[float, str]:
    """Requests/s at `connections` concurrent connections: wrk when installed (Debian's package),
    else an async client in this process (which then limits what it can measure)."""
    if shutil.which("wrk"):
        script = Path(tempfile.mkdtemp(prefix="ctxw-wrk-")) / "post.lua"
        script.write_text('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                          f'wrk.headers["Authorization"] = "Bearer sk-bench"\nwrk.body = {json.dumps(json.dumps(body))}\n')
        out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", str(script),
                              f"{url}/v1/chat/completions"], capture_output=True, text=True, timeout=seconds + 60).stdout
        bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        if bad:
            raise RuntimeError(f"{url}: {bad.group(1)} error answers under load")
        return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), "wrk"
    return asyncio.run(_async_rps(url, body, seconds, connections)), "httpx (wrk not installed)"


async def _async_rps(url: str, body: dict, seconds: float, connections: int) -> float:
    raw = json.dumps(body).encode()
    done = 0
    deadline = time.perf_counter() + seconds
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=connections)) as client:
        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                (await client.post(f"{url}/v1/chat/completions", content=raw, headers=HEADERS)).raise_for_status()
                done += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        return done / (time.perf_counter() - t0)


def first_chunk_ms(fake: str, url: str, body: dict, chunk_delay_s: float = 0.02,
                   client: httpx.Client | None = None) -> float:
    """Time from sending a streamed request to its first content chunk at the client (on `client`'s
    kept-alive connection, as an SDK sends them, when given)."""
    httpx.post(f"{fake}/_script", json=[{"content": "one two three four five six seven eight nine ten",
                                         "chunk_delay_s": chunk_delay_s}])
    t0 = time.perf_counter()
    with (client or httpx).stream("POST", f"{url}/v1/chat/completions", json={**body, "stream": True}, headers=HEADERS,
                                  timeout=30) as response:
        for line in response.iter_lines():
            compact = line.replace(" ", "")
            if line.startswith("data: {") and '"content":"' in compact and '"content":""' not in compact:
                return (time.perf_counter() - t0) * 1000
    raise RuntimeError(f"{url}: no content chunk in the stream")


def stream_firsts(fake: str, targets: dict[str, str], body: dict, runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for name in targets}
    clients = {name: httpx.Client(timeout=30) for name in targets}  # one kept-alive connection per target
    try:
        for _ in range(runs):
            for name, url in targets.items():
                out[name].append(first_chunk_ms(fake, url, body, client=clients[name]))
    finally:
        for client in clients.values():
            client.close()
    return out
