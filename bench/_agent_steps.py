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
from dataclasses import dataclass
from typing import Callable

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
    results, tokens = _real_pool(min_tokens)
    start = seed * steps % len(results)
    run = (results[start:] + results[:start])[:steps]
    windows = [range(2, 7), range(steps - 5, steps)]
    return matched_windows(run, random.Random(seed), windows, tokens.__getitem__) if steps >= 12 else run


@functools.lru_cache(maxsize=2)
def _real_pool(min_tokens: int) -> tuple[list[str], dict[str, int]]:
    """The real results of at least `min_tokens`, in one fixed order, and each one's tokens: read and
    counted once a run of the bench."""
    from livemcp_workload import load

    from ctxwarden.policies.text.tokens import TiktokenCounter

    counter = TiktokenCounter()
    count = functools.lru_cache(maxsize=None)(lambda text: counter.count_text(text, "gpt-4o"))
    results = [s["result"] for t in load(min_tokens, count) for s in t["steps"]]
    random.Random(0).shuffle(results)
    return results, {text: count(text) for text in results}


def matched_windows(results: list[str], rng: random.Random, windows: list[range],
                    size: Callable[[str], int] = len) -> list[str]:
    """`results` with the texts of two equal windows (the steps around 5 and around 60 that the
    figure compares) dealt again so both windows read the same amount of new text: real results run
    from 300 to ~6,800 tokens, and without this the ratio reads which ones fell where. Taken in pairs
    of neighbours by size, largest first, the larger of a pair goes to the window with less so far;
    within a window the order is shuffled. `size`: tokens, where known."""
    early, late = windows
    texts = sorted((results[i] for i in [*early, *late]), key=size, reverse=True)
    dealt: tuple[list[str], list[str]] = ([], [])
    for a, b in zip(texts[::2], texts[1::2]):
        lighter = 0 if sum(map(size, dealt[0])) <= sum(map(size, dealt[1])) else 1
        dealt[lighter].append(a)
        dealt[1 - lighter].append(b)
    out = list(results)
    for window, texts_of in zip(windows, dealt):
        rng.shuffle(texts_of)
        for i, text in zip(window, texts_of):
            out[i] = text
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


@dataclass
class LoopTimes:
    """Per step (1..steps), one value a run: the added ms (through the proxy minus direct, same
    body, back to back), the proxy's own request-policy ms (its Server-Timing header), whether the
    proxy reported a compaction event on it (`history.compaction` in x-ctxwarden-actions: the step
    that rewrites the history and waits for its archive's commit, ~14 steps apart here), and the
    characters of the step's new tool result."""

    added: dict[int, list[float]]
    policy: dict[int, list[float]]
    events: dict[int, list[bool]]
    sizes: dict[int, list[int]]


def added_by_step(direct: str, proxied: str, runs: int = 4, steps: int = 60, real: bool = False) -> LoopTimes:
    """The `LoopTimes` of `runs` agent loops of `steps` steps. Once history is compacted the proxy
    forwards less than the client sent, so the upstream reads less and the end-to-end figure
    flatters the proxy; the policy time does not."""
    times = LoopTimes(*({k: [] for k in range(1, steps + 1)} for _ in range(4)))
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
                times.added[k].append(((t2 - t1) - (t1 - t0)) * 1000)
                times.policy[k].append(float(response.headers["server-timing"].split("dur=")[1]))
                times.events[k].append("history.compaction" in response.headers.get("x-ctxwarden-actions", "").split(","))
                times.sizes[k].append(len(messages[-1]["content"]))
    return times


def around(values: dict[int, list[float]], step: int, half: int = 2, events: dict[int, list[bool]] | None = None,
           event: bool = False) -> float:
    """Median of the values over the steps step±half of every run; with `events`, of only the steps
    that were (`event`) or were not a compaction event."""
    steps = [k for k in range(step - half, step + half + 1) if k in values]
    kept = [v for k in steps for i, v in enumerate(values[k]) if events is None or events[k][i] == event]
    return statistics.median(kept) if kept else float("nan")


def size_adjusted(times: LoopTimes, first: int = 3) -> tuple[float, float, dict[int, list[float]]]:
    """The policy time of the steps that are not compaction events (from step `first`: the session's
    first steps start its caches), with what the size of each step's new result explains taken out:
    a least-squares fit of ms = a + b × (characters of the new result) + c × step over those steps,
    and each value moved by b × (the mean size − its size). Real results run from ~1,200 to ~27,000
    characters and reading the new one is most of a step, so which sizes fell in a window of 20
    steps moves its median by more than the history does; the fit reads the history's share (c) from
    every step of every run. Returns (b in ms per 1,000 characters, c in µs per step, the values)."""
    import numpy as np

    rows = [(k, i) for k in times.policy if k >= first for i in range(len(times.policy[k])) if not times.events[k][i]]
    x = np.array([[1.0, times.sizes[k][i] / 1000, k] for k, i in rows])
    y = np.array([times.policy[k][i] for k, i in rows])
    (_, per_kchar, per_step), *_ = np.linalg.lstsq(x, y, rcond=None)
    mean = float(x[:, 1].mean())
    adjusted: dict[int, list[float]] = {k: [] for k in times.policy}
    for (k, i), value, size in zip(rows, y, x[:, 1]):
        adjusted[k].append(float(value + per_kchar * (mean - size)))
    return float(per_kchar), float(per_step) * 1000, adjusted
