"""What the proxy adds, side by side with what it is measured against, in one run.

    python bench/overhead.py [--n 1000] [--seconds 8] [--runs 4] [--quick]

Processes on 127.0.0.1: the fake upstream; a same-stack floor (bench/floors/passthrough.py:
starlette + uvicorn + one pooled httpx client, the least any proxy on this stack costs); an aiohttp
floor; ctxwarden with every policy off; ctxwarden with the default policies; LiteLLM Proxy when its
command is installed (`pip install 'litellm[proxy]'`, here or in another environment named by
CTXW_LITELLM). Requests go to every target in turn, so all see the same machine state; every time
is reported as a ratio to the floor measured in the same run, because absolute milliseconds swing
1–3× between runs on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
from pathlib import Path

import httpx
from _agent_steps import added_by_step, around
from _harness import pct, start_fake, start_floor, start_litellm, start_proxy
from _load import interleaved, stream_firsts, throughput

from ctxwarden.proxy.registry import policy_names

TOOLS = Path(__file__).resolve().parent / "data" / "metatool" / "tools.json"
ADMIN_KEY = "bench-admin-key"
os.environ["CTXWARDEN_ADMIN_KEY"] = ADMIN_KEY  # the proxies started below inherit it
POLICIES_OFF = {"budget": {"enabled": False}, "policies": {p: {"enabled": False} for p in policy_names()}}
SMALL = {"model": "gpt-4o", "messages": [{"role": "user", "content": "What is the capital of France?"}]}
FLOOR = "floor"


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
        call_id = f"call_{i}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": names[i % 50], "arguments": json.dumps({"query": f"step {i}"})}}]})
        result = " ".join(rng.choice(words) + (f" {rng.randint(1, 9999)}" if rng.random() < 0.2 else "") for _ in range(420))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return {"model": "gpt-4o", "messages": messages, "tools": tools}


def start_targets(fake_url: str, with_litellm: bool) -> tuple[dict[str, str], list]:
    procs, urls = [], {"upstream": fake_url}
    for name, start in ((FLOOR, lambda: start_floor("passthrough.py", fake_url)),
                        ("aiohttp floor", lambda: start_floor("aiohttp_passthrough.py", fake_url)),
                        ("ctxwarden, policies off", lambda: start_proxy(fake_url, POLICIES_OFF)),
                        ("ctxwarden, default policies", lambda: start_proxy(fake_url, {}))):
        proc, url = start()
        procs.append(proc)
        urls[name] = url
    litellm = start_litellm(fake_url) if with_litellm else None
    if litellm is None:
        print("LiteLLM Proxy: not installed, skipped (pip install 'litellm[proxy]', or CTXW_LITELLM=<its litellm command>)")
    else:
        procs.append(litellm[0])
        urls["LiteLLM Proxy"] = litellm[1]
    return urls, procs


def latency_table(urls: dict[str, str], n: int, seconds: float) -> dict[str, dict[str, float]]:
    """Added p50/p99 over the upstream itself and req/s at 32 connections, each as a ratio to the floor."""
    times = interleaved(urls, SMALL, n)
    direct = times.pop("upstream")
    rows: dict[str, dict[str, float]] = {}
    for name, t in times.items():
        rows[name] = {"p50": statistics.median(t) - statistics.median(direct), "p99": pct(t, 99) - pct(direct, 99)}
    tool = ""
    for name, url in urls.items():
        rps, tool = throughput(url, SMALL, seconds)
        rows.setdefault(name, {})["rps"] = rps
    floor = rows[FLOOR]
    print(f"\n[one-message chat completion: {n} sequential requests per target, interleaved; "
          f"req/s with {tool}, 32 connections, {seconds:g} s]")
    print(f"  {'':30} {'added p50 ms':>12} {'× floor':>8} {'added p99 ms':>12} {'req/s':>8} {'× floor':>8}")
    for name, row in rows.items():
        if name == "upstream":
            print(f"  {name:30} {'':>12} {'':>8} {'':>12} {row['rps']:8.0f}")
            continue
        print(f"  {name:30} {row['p50']:12.3f} {row['p50'] / floor['p50']:8.2f} {row['p99']:12.3f} "
              f"{row['rps']:8.0f} {row['rps'] / floor['rps']:8.2f}")
    return rows


def stream_table(fake_url: str, urls: dict[str, str], runs: int) -> None:
    firsts = stream_firsts(fake_url, urls, SMALL, runs)
    direct = statistics.median(firsts.pop("upstream"))
    floor = statistics.median(firsts[FLOOR]) - direct
    print(f"\n[streaming: time to the first content chunk, added over the upstream; {runs} runs each; "
          "a one-sentence answer with nothing checkable]")
    for name, values in firsts.items():
        added = statistics.median(values) - direct
        print(f"  {name:30} added {added:7.3f} ms   × floor {added / floor:5.2f}")
    default = urls["ctxwarden, default policies"]
    httpx.post(f"{default}/admin/kb/documents", headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=60,
               json={"documents": [{"id": "eiffel", "text": "The Eiffel Tower is located in Paris, France."}]}).raise_for_status()
    again = stream_firsts(fake_url, {"upstream": urls["upstream"], "default": default}, SMALL, runs)
    added = statistics.median(again["default"]) - statistics.median(again["upstream"])
    print(f"  {'default policies, KB loaded':30} added {added:7.3f} ms   × floor {added / floor:5.2f}")


def agent_loop_table(fake_url: str, url: str, floor_p50: float, runs: int) -> None:
    added, policy = added_by_step(fake_url, url, runs=runs)
    print(f"\n[default policies in a 60-step agent loop: a new 1–4k-token tool result each step, {runs} runs, "
          "each request sent once; policies = the proxy's own request-policy time (server-timing)]")
    for step in (1, 5, 10, 20, 30, 40, 50, 60):
        print(f"  step {step:2}: added median {statistics.median(added[step]):7.2f} ms, "
              f"policies {statistics.median(policy[step]):6.2f} ms")
    for label, series in (("added", added), ("policies", policy)):
        at5, at60 = around(series, 5), around(series, 58)
        print(f"  {label:8}: steps 3–7 {at5:.2f} ms, steps 56–60 {at60:.2f} ms, late/early {at60 / at5:.2f}, "
              f"late × one-message floor {at60 / floor_p50:.2f}")


def workers_table(fake_url: str, seconds: float) -> None:
    print(f"\n[policies off, req/s at 32 connections by worker processes; {os.cpu_count()} CPUs]")
    for workers in (1, 2):
        proc, url = start_proxy(fake_url, POLICIES_OFF, workers=workers)
        try:
            print(f"  --workers {workers}: {throughput(url, SMALL, seconds)[0]:.0f} req/s")
        finally:
            proc.stop()


def memory_after_sessions(fake_url: str, sessions: int) -> None:
    proc, url = start_proxy(fake_url, {})
    try:
        start = proc.rss_mb()
        with httpx.Client(timeout=60) as client:
            for i in range(sessions):
                body = {"model": "gpt-4o", "messages": [
                    {"role": "system", "content": "You are a helpful agent."},
                    {"role": "user", "content": f"Session {i}: what is the status of order {i * 7919 % 100000}?"}]}
                client.post(f"{url}/v1/chat/completions", json=body,
                            headers={"x-ctxwarden-session": f"s-{i}"}).raise_for_status()
        print(f"\n[memory, default policies] RSS {start:.1f} MB at start → {proc.rss_mb():.1f} MB after {sessions} sessions")
    finally:
        proc.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000, help="sequential requests per target")
    parser.add_argument("--seconds", type=float, default=8, help="length of each throughput run")
    parser.add_argument("--runs", type=int, default=4, help="runs of the 60-step agent loop")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--no-litellm", action="store_true")
    parser.add_argument("--quick", action="store_true", help="small numbers, to try the bench itself")
    args = parser.parse_args()
    if args.quick:
        args.n, args.seconds, args.runs, args.sessions = 100, 2, 1, 100
    fake, fake_url = start_fake()
    procs: list = []
    try:
        urls, procs = start_targets(fake_url, not args.no_litellm)
        rows = latency_table(urls, args.n, args.seconds)
        stream_table(fake_url, urls, max(20, args.n // 16))  # medians of fewer runs swing ±30 %
        agent_loop_table(fake_url, urls["ctxwarden, default policies"], rows[FLOOR]["p50"], args.runs)
        for proc in procs:
            proc.stop()
        procs = []
        workers_table(fake_url, args.seconds)
        memory_after_sessions(fake_url, args.sessions)
    finally:
        for proc in procs:
            proc.stop()
        fake.stop()


if __name__ == "__main__":
    main()
