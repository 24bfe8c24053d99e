"""A live agent loop for bench/overhead.py: 60 steps, each with a new 300–4,000-token tool result
(made here, or with `real` LiveMCPBench's real results of 300 tokens or more).

Each step's request is the whole history so far, sent once, as an agent sends it: what the proxy
has seen before is the earlier steps, and the newest tool result is new to it.
"""

from __future__ import annotations

import functools
import json
import random
import statistics
import time

import httpx
from _load import HEADERS

WORDS = ("order invoice shipped refund account weather forecast museum ticket price schedule delayed confirmed "
         "customer reference room night breakfast flight hotel budget total status pending warehouse carrier "
         "region latency error retry timeout config deploy build test passed failed").split()
TOOLS = [{"type": "function", "function": {"name": f"tool_{i}", "description": f"Look up {w} records by query.",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}}
         for i, w in enumerate(WORDS[:12])]


CODE = ("def {f}(items, limit={n}):\n    \"\"\"{w} {v} by {u}.\"\"\"\n    out = []\n    for item in items:\n"
        "        if item.get('{w}') and item['{v}'] > limit:\n            out.append(item['{u}'])\n    return sorted(out)\n\n")


def tool_result(rng: random.Random, step: int) -> str:
    """300–4,000 tokens (~4 characters each) of what tools return: a JSON list of records, a log,
    source code or prose, in turn at random."""
    chars = 4 * rng.randint(300, 4000)
    kind = rng.choice(("json", "log", "code", "prose"))
    if kind == "json":
        items, size = [], 2
        while size < chars:
            items.append({"id": f"r{step}-{len(items)}", "status": rng.choice(WORDS), "amount": rng.randint(1, 9999),
                          "note": " ".join(rng.choices(WORDS, k=6))})
            size += len(json.dumps(items[-1])) + 2
        return json.dumps(items)
    parts: list[str] = []
    size = 0
    while size < chars:
        if kind == "log":
            part = (f"2026-11-24T10:{len(parts) % 60:02d}:{rng.randint(0, 59):02d} {rng.choice(['INFO', 'WARN', 'ERROR'])} "
                    + " ".join(rng.choices(WORDS, k=8)) + "\n")
        elif kind == "code":
            w, v, u = rng.sample(WORDS, 3)
            part = CODE.format(f=f"{w}_{v}_{step}_{len(parts)}", n=rng.randint(1, 999), w=w, v=v, u=u)
        else:
            part = " ".join(rng.choices(WORDS, k=rng.randint(8, 20))).capitalize() + ". "
        parts.append(part)
        size += len(part)
    return "".join(parts)


def real_results(seed: int, steps: int, min_tokens: int = 300) -> list[str]:
    """`steps` of LiveMCPBench's real tool results of at least `min_tokens` (bench/livemcp_workload.py):
    one fixed order, and runs of consecutive seeds take consecutive slices of it (319 results: four
    runs of 60 never share one, so no result's token count is already cached when it arrives)."""
    results = _real_pool(min_tokens)
    start = seed * steps % len(results)
    run = (results[start:] + results[:start])[:steps]
    return matched_windows(run, random.Random(seed), [range(2, 7), range(steps - 5, steps)]) if steps >= 12 else run


@functools.lru_cache(maxsize=2)
def _real_pool(min_tokens: int) -> list[str]:
    """The real results of at least `min_tokens`, in one fixed order: read and counted once a run of the bench."""
    from livemcp_workload import load

    from ctxwarden.policies.text.tokens import TiktokenCounter

    counter = TiktokenCounter()
    results = [s["result"] for t in load(min_tokens, lambda text: counter.count_text(text, "gpt-4o")) for s in t["steps"]]
    random.Random(0).shuffle(results)
    return results


def matched_windows(results: list[str], rng: random.Random, windows: list[range]) -> list[str]:
    """`results` with the texts of two equal windows (the steps around 5 and around 60 that the
    figure compares) dealt again in pairs of neighbours by size, one of each pair to each window: real
    results run from 300 to ~6,800 tokens, and without this the ratio reads which ones fell where."""
    early, late = windows
    texts = sorted((results[i] for i in [*early, *late]), key=len)
    out = list(results)
    for (a, b), i, j in zip(zip(texts[::2], texts[1::2]), early, late):
        first, second = (a, b) if rng.random() < 0.5 else (b, a)
        out[i], out[j] = first, second
    return out


def conversation(seed: int, steps: int, real: bool = False) -> list[list[dict]]:
    """The message list an agent sends at each step (step k: k tool results so far); `real`: each
    step's result is a real one (LiveMCPBench) instead of one made here."""
    rng = random.Random(seed)
    real_ones = real_results(seed, steps) if real else []
    messages = [{"role": "system", "content": "You are an operations agent. Use the tools; be concise."},
                {"role": "user", "content": f"Reconcile the open orders of region {seed} and report what is late."}]
    out = []
    for step in range(steps):
        call = {"id": f"call_{seed}_{step}", "type": "function",
                "function": {"name": TOOLS[step % len(TOOLS)]["function"]["name"], "arguments": json.dumps({"query": f"page {step}"})}}
        messages = [*messages, {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": call["id"], "content": real_ones[step % len(real_ones)] if real else tool_result(rng, step)}]
        out.append(messages)
    return out


def added_by_step(direct: str, proxied: str, runs: int = 4, steps: int = 60, real: bool = False) -> tuple[dict, dict]:
    """For every step, per run: the added ms (through the proxy minus direct, same body, back to
    back) and the proxy's own request-policy ms (its Server-Timing header). Once history is
    compacted the proxy forwards less than the client sent, so the upstream reads less and the
    end-to-end figure flatters the proxy; the policy time does not."""
    added: dict[int, list[float]] = {k: [] for k in range(1, steps + 1)}
    policy: dict[int, list[float]] = {k: [] for k in range(1, steps + 1)}
    with httpx.Client(timeout=120) as client:
        for run in range(runs):
            session = {**HEADERS, "x-ctxwarden-session": f"agent-loop-{run}"}
            for k, messages in enumerate(conversation(1000 + run, steps, real), start=1):
                raw = json.dumps({"model": "gpt-4o", "messages": messages, "tools": TOOLS}).encode()
                # The model answers with its next tool call, as an agent's model does mid-task (the
                # fake's default echoes the last user message, notes the proxy appended included:
                # an answer that grows with the history, which no agent gets back).
                call = {"id": f"call_next_{k}", "name": TOOLS[k % len(TOOLS)]["function"]["name"],
                        "arguments": json.dumps({"query": f"page {k}"})}
                client.post(f"{direct}/_script", json=[{"tool_calls": [call]}] * 2).raise_for_status()
                t0 = time.perf_counter()
                client.post(f"{direct}/v1/chat/completions", content=raw, headers=HEADERS).raise_for_status()
                t1 = time.perf_counter()
                response = client.post(f"{proxied}/v1/chat/completions", content=raw, headers=session)
                t2 = time.perf_counter()
                response.raise_for_status()
                added[k].append(((t2 - t1) - (t1 - t0)) * 1000)
                policy[k].append(float(response.headers["server-timing"].split("dur=")[1]))
    return added, policy


def around(added: dict[int, list[float]], step: int, half: int = 2) -> float:
    """Median added ms over the steps step±half of every run."""
    return statistics.median(v for k in range(step - half, step + half + 1) if k in added for v in added[k])
