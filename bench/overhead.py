"""What the proxy adds, side by side with what it is measured against, in one run.

    python bench/overhead.py [--n 1000] [--api-n 300] [--seconds 8] [--runs 4] [--quick] [--api-only | --agent-only]

Processes on 127.0.0.1: the fake upstream; a same-stack floor (bench/floors/passthrough.py:
starlette + uvicorn + one pooled httpx client, the least any proxy on this stack costs); an aiohttp
floor; ctxwarden with every policy off; ctxwarden with the default policies (also in auth.mode keys, with
a client key); LiteLLM Proxy when its
command is installed (`pip install 'litellm[proxy]'`, here or in another environment named by
CTXW_LITELLM). Requests go to every target in turn, so all see the same machine state; every time
is reported as a ratio to the floor measured in the same run, because absolute milliseconds swing
1–3× between runs on a shared machine.

Per API (chat completions, the Responses API, Anthropic's Messages API): the same one-message
request and the ~12k-token agent request (`agent_request()`), each written in the API's shape
(bench/_api_wire.py), through the floor, ctxwarden with policies off and with the default policies
(Messages forwarded natively: `upstream.anthropic` points at the fake upstream, which speaks all
three); added p50/p99 over the upstream, and each as a ratio to that API's floor. Every API and
target is sent in turn, so they all see the same machine state.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

import httpx
from _agent_steps import added_by_step, around, size_adjusted
from _api_wire import APIS, PATH, request_body
from _api_wire import HEADERS as API_HEADERS
from _harness import pct, start_fake, start_floor, start_litellm, start_proxy
from _load import HEADERS, interleaved, stream_firsts, throughput

from ctxwarden.proxy.keys.records import KeyRecord, hash_key
from ctxwarden.proxy.keys.store import FileKeyStore
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


KEYED = "ctxwarden, client keys"  # the default policies in auth.mode keys


def keyed_config(extra: dict) -> dict:
    """auth.mode keys, with a client key whose secret is the bench's bearer token (sk-bench)."""
    import tempfile

    store = tempfile.mkdtemp(prefix="ctxw-bench-keys-")
    FileKeyStore(store).add(KeyRecord(id="key_bench", key_hash=hash_key(HEADERS["authorization"].split()[1]),
                                      tenant="bench", created_at=time.time()))
    return {**extra, "auth": {"mode": "keys"}, "storage": {"path": store}}


def start_targets(fake_url: str, with_litellm: bool) -> tuple[dict[str, str], list]:
    procs, urls = [], {"upstream": fake_url}
    # /v1/messages natively to the fake upstream (it speaks the Messages API); chat is unaffected.
    anthropic = {"upstream": {"anthropic": {"base_url": f"{fake_url}/v1", "api_key_env": None}}}
    for name, start in ((FLOOR, lambda: start_floor("passthrough.py", fake_url)),
                        ("aiohttp floor", lambda: start_floor("aiohttp_passthrough.py", fake_url)),
                        ("ctxwarden, policies off", lambda: start_proxy(fake_url, {**POLICIES_OFF, **anthropic})),
                        ("ctxwarden, default policies", lambda: start_proxy(fake_url, anthropic)),
                        (KEYED, lambda: start_proxy(fake_url, keyed_config(anthropic)))):
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


PER_API_TARGETS = (FLOOR, "ctxwarden, policies off", "ctxwarden, default policies")


def api_times(urls: dict[str, str], bodies: dict[str, dict], n: int, warm: int = 20) -> dict[tuple[str, str, str], list[float]]:
    """ms per (request, API, target): `n` rounds, each sending every request in every API to every
    target (the upstream itself included) in turn, sequentially on kept-alive connections."""
    targets = {name: urls[name] for name in ("upstream", *PER_API_TARGETS)}
    raws = {(label, api): json.dumps(request_body(api, body)).encode() for label, body in bodies.items() for api in APIS}
    times: dict[tuple[str, str, str], list[float]] = {(label, api, name): [] for (label, api) in raws for name in targets}
    headers = {api: {**HEADERS, **API_HEADERS[api]} for api in APIS}
    notes: dict[tuple[str, str], str] = {}
    with httpx.Client(timeout=60) as client:
        for (label, api), raw in raws.items():
            for name, url in targets.items():
                for _ in range(warm):
                    response = client.post(f"{url}{PATH[api]}", content=raw, headers=headers[api])
                    response.raise_for_status()
                if name == "ctxwarden, default policies":
                    notes[(label, api)] = response.headers.get("x-ctxwarden-actions", "")
        for i in range(n):
            if i % 50 == 0:
                client.post(f"{urls['upstream']}/_reset").raise_for_status()  # the fake keeps every body it gets
            for (label, api), raw in raws.items():
                for name, url in targets.items():
                    t0 = time.perf_counter()
                    client.post(f"{url}{PATH[api]}", content=raw, headers=headers[api]).raise_for_status()
                    times[(label, api, name)].append((time.perf_counter() - t0) * 1000)
    for (label, api), actions in notes.items():
        if actions:
            print(f"  note: default policies on the {label} request ({api}): x-ctxwarden-actions {actions}")
    return times


def per_api_table(urls: dict[str, str], n: int) -> dict[tuple[str, str], dict[str, float]]:
    """Added p50/p99 over the upstream per API and target, each as a ratio to that API's floor."""
    bodies = {"one message": SMALL, "agent, ~12k tokens": agent_request()}
    print(f"\n[per API: {n} sequential requests per request × API × target, all interleaved; added over the upstream "
          "itself; × floor = added / the same-stack floor's added on the same API and request]")
    times = api_times(urls, bodies, n)
    out: dict[tuple[str, str], dict[str, float]] = {}
    print(f"  {'request':20} {'API':10} {'floor p50':>9} {'p99':>7} | {'policies off p50':>16} {'× fl':>5} {'p99 × fl':>8} | "
          f"{'default p50':>11} {'× fl':>5} {'p99 × fl':>8}")
    for label in bodies:
        for api in APIS:
            direct = times[(label, api, "upstream")]
            added = {name: (statistics.median(times[(label, api, name)]) - statistics.median(direct),
                            pct(times[(label, api, name)], 99) - pct(direct, 99)) for name in PER_API_TARGETS}
            f50, f99 = added[FLOOR]
            off, default = added["ctxwarden, policies off"], added["ctxwarden, default policies"]
            row = {"floor_p50": f50, "floor_p99": f99, "off_p50": off[0] / f50, "off_p99": off[1] / f99,
                   "default_p50": default[0] / f50, "default_p99": default[1] / f99}
            out[(label, api)] = row
            print(f"  {label:20} {api:10} {f50:9.3f} {f99:7.3f} | {off[0]:16.3f} {row['off_p50']:5.2f} {row['off_p99']:8.2f} | "
                  f"{default[0]:11.3f} {row['default_p50']:5.2f} {row['default_p99']:8.2f}")
    print("  (ms; floor = bench/floors/passthrough.py relaying the same API; Messages natively, not translated)")
    for label in bodies:
        chat = out[(label, "chat")]
        for api in APIS[1:]:
            row = out[(label, api)]
            print(f"  {label}, {api} − chat (p50 × floor): policies off {row['off_p50'] - chat['off_p50']:+.2f}, "
                  f"default {row['default_p50'] - chat['default_p50']:+.2f}  (done when ≤ +0.10)")
    return out


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


def agent_loop_table(fake_url: str, url: str, floor_p50: float, runs: int, real: bool = False) -> None:
    times = added_by_step(fake_url, url, runs=runs, real=real)
    added, policy, events = times.added, times.policy, times.events
    what = "a real tool result of 300 tokens or more (LiveMCPBench)" if real else \
        "a new 300–4,000-token tool result (JSON, logs, code or prose)"
    print(f"\n[default policies in a 60-step agent loop: {what} each step, {runs} runs, "
          "each request sent once; policies = the proxy's own request-policy time (server-timing)]")
    for step in (1, 5, 10, 20, 30, 40, 50, 60):
        print(f"  step {step:2}: added median {statistics.median(added[step]):7.2f} ms, "
              f"policies {statistics.median(policy[step]):6.2f} ms")
    for label, series in (("added", added), ("policies", policy)):
        at5, at60 = around(series, 5), around(series, 58)
        print(f"  {label:8}: steps 3–7 {at5:.2f} ms, steps 56–60 {at60:.2f} ms, late/early {at60 / at5:.2f}, "
              f"late × one-message floor {at60 / floor_p50:.2f}")
    # A compaction event (the history rewritten, its archive committed) comes every ~14 steps at a
    # rate the history's length does not change; which steps of a window hold one is where the
    # events fall. So the growth is also read on the steps that are not events, in both windows (and
    # at equal new-result size: size_adjusted), and the events apart: how many, what each costs.
    at5, at60 = around(policy, 5, events=events), around(policy, 58, events=events)
    print(f"  policies, steps that are not a compaction event: steps 3–7 {at5:.2f} ms, steps 56–60 {at60:.2f} ms, "
          f"late/early {at60 / at5:.2f}, late × one-message floor {at60 / floor_p50:.2f}")
    per_kchar, per_step, adjusted = size_adjusted(times)
    at5, at60 = around(adjusted, 5), around(adjusted, 58)
    print(f"  the same at equal new-result size ({per_kchar:.3f} ms per 1,000 characters of the new result, "
          f"{per_step:.1f} µs per step of history, by least squares over every such step): steps 3–7 {at5:.2f} ms, "
          f"steps 56–60 {at60:.2f} ms, late/early {at60 / at5:.2f}, late × one-message floor {at60 / floor_p50:.2f}")
    at = sorted(k for k in events if any(events[k]))
    if at:
        def cost(steps: list[int]) -> list[float]:  # the policy ms of the events at these steps, every run
            return [v for k in steps for v, e in zip(policy[k], events[k]) if e]

        half = len(at) // 2
        early, late = cost(at[:half]) or cost(at), cost(at[half:])
        print(f"  compaction events: {len(cost(at))} in {runs} runs (at steps {', '.join(map(str, at))}), policies median "
              f"{statistics.median(cost(at)):.1f} ms; the earlier half {statistics.median(early):.1f}, "
              f"the later half {statistics.median(late):.1f}")
    else:
        print("  compaction events: none")


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
    parser.add_argument("--api-n", type=int, default=300, help="sequential requests per request × API × target")
    parser.add_argument("--seconds", type=float, default=8, help="length of each throughput run")
    parser.add_argument("--runs", type=int, default=4, help="runs of the 60-step agent loop")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--no-litellm", action="store_true")
    parser.add_argument("--quick", action="store_true", help="small numbers, to try the bench itself")
    parser.add_argument("--api-only", action="store_true", help="the per-API table alone")
    parser.add_argument("--real-results", action="store_true",
                        help="the agent loop's tool results are LiveMCPBench's real ones (300 tokens or more)")
    parser.add_argument("--agent-only", action="store_true",
                        help="the one-message floor and the 60-step agent loop alone (issue 45's figures)")
    args = parser.parse_args()
    if args.quick:
        args.n, args.seconds, args.runs, args.sessions, args.api_n = 100, 2, 1, 100, 50
    fake, fake_url = start_fake()
    procs: list = []
    try:
        urls, procs = start_targets(fake_url, not args.no_litellm)
        if args.api_only:
            per_api_table(urls, args.api_n)
            return
        if args.agent_only:  # the floor measured in the same run, interleaved as in the latency table
            times = interleaved({k: urls[k] for k in ("upstream", FLOOR)}, SMALL, args.n)
            floor_p50 = statistics.median(times[FLOOR]) - statistics.median(times["upstream"])
            print(f"one-message floor: added p50 {floor_p50:.3f} ms ({args.n} requests)")
            agent_loop_table(fake_url, urls["ctxwarden, default policies"], floor_p50, args.runs, args.real_results)
            return
        rows = latency_table(urls, args.n, args.seconds)
        per_api_table(urls, args.api_n)
        stream_table(fake_url, urls, max(20, args.n // 16))  # medians of fewer runs swing ±30 %
        agent_loop_table(fake_url, urls["ctxwarden, default policies"], rows[FLOOR]["p50"], args.runs, args.real_results)
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
