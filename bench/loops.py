"""Benchmark of the loops policy: false positives, detection rate, latency.

    .venv/bin/python bench/loops.py [--runs 2000] [--seed 7]

1. False positives: agent runs built from MetaTool queries and tools (bench/data/metatool):
   several user turns, each a multi-step run mixing varied calls, retries after errors that then
   succeed, offset and cursor pagination, polling that makes progress, parallel calls, searches
   with different queries that all come back empty, and search → open alternations with varied
   arguments. The detector is asked at EVERY point an agent would send a request (after each
   round's results), so a run counts as a false positive if any of its requests is flagged.
2. Detection: the same kind of runs, then a loop of period 1..7 (identical or empty results)
   repeated `max_repeats` times; period 7 is beyond the default `max_period` (6).
3. Latency of LoopsPolicy.on_request on 200-message conversations (fresh JSON-decoded messages
   each call, as the server sees them), p50/p95/max wall time over many calls. "warm": the
   calls' canonical forms are cached (the usual case: a conversation grows by one round per
   request); "cold": that cache is cleared before every call. Turns longer than 100 messages are
   checked in a worker thread, so their wall time includes the thread hop.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import logging
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctxwarden.policies.base import Exchange, Services  # noqa: E402
from ctxwarden.policies.loops.detect import call_key, find_loop, turn_start  # noqa: E402
from ctxwarden.policies.loops.policy import LoopsConfig, LoopsPolicy  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "metatool"
Call = tuple[str, dict[str, Any], str]  # (tool, arguments, result)


# ----------------------------------------------------------------------------- data


def load_metatool() -> tuple[list[str], dict[str, list[str]], list[tuple[str, list[str]]]]:
    tools = list(json.loads((DATA / "tools.json").read_text()))
    by_tool: dict[str, list[str]] = defaultdict(list)
    with open(DATA / "queries.csv", newline="") as f:
        for row in csv.DictReader(f):
            by_tool[row["Tool"]].append(row["Query"])
    multi = [(q["query"], q["tool"]) for q in json.loads((DATA / "multi_tool_queries.json").read_text())]
    return tools, by_tool, multi


def _args_json(args: dict[str, Any], rng: random.Random) -> str:
    """Arguments as a model might write them: key order and spacing vary."""
    items = list(args.items())
    rng.shuffle(items)
    return json.dumps(dict(items), indent=rng.choice([None, None, 2]))


def _fact(rng: random.Random, topic: str) -> str:
    return f"{topic}: {rng.randint(1, 10_000)} results, top id {rng.getrandbits(32):08x}, score {rng.random():.3f}"


# ----------------------------------------------------------------------------- run generator


class RunBuilder:
    """Builds one agent run (several turns of rounds) and notes where requests would be sent."""

    def __init__(self, rng: random.Random, tools: list[str], queries: dict[str, list[str]]) -> None:
        self.rng = rng
        self.tools = tools
        self.queries = queries
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an assistant with tools."}]
        self.request_points: list[int] = []  # len(messages) at each request the agent sends
        self.calls = 0
        self.rounds = 0
        self._ids = 0

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})
        self.request_points.append(len(self.messages))

    def round(self, calls: list[Call]) -> None:
        ids = []
        tool_calls = []
        for name, args, _ in calls:
            self._ids += 1
            ids.append(f"call_{self._ids}")
            tool_calls.append({"id": ids[-1], "type": "function",
                               "function": {"name": name, "arguments": _args_json(args, self.rng)}})
        self.messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        self.messages += [{"role": "tool", "tool_call_id": i, "content": r} for i, (_, _, r) in zip(ids, calls)]
        self.request_points.append(len(self.messages))
        self.calls += len(calls)
        self.rounds += 1

    def answer(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    # -- step patterns an agent really produces (none of them is a loop)

    def varied(self, tool: str, query: str) -> None:
        self.round([(tool, {"query": query, "limit": self.rng.choice([5, 10, 20])}, _fact(self.rng, tool))])

    def retry_then_success(self, tool: str, query: str) -> None:
        err = self.rng.choice(["Error 503: service unavailable, try again", "error: timeout after 30s", "429 Too Many Requests"])
        args = {"query": query}
        for _ in range(self.rng.choice([1, 1, 2])):
            self.round([(tool, args, err)])
        self.round([(tool, args, _fact(self.rng, tool))])

    def paginate(self, tool: str, query: str) -> None:
        pages = self.rng.randint(2, 6)
        for p in range(1, pages + 1):
            result = "[]" if p == pages and self.rng.random() < 0.5 else _fact(self.rng, f"{tool} page {p}")
            self.round([(tool, {"query": query, "page": p, "per_page": 20}, result)])

    def cursor(self, tool: str) -> None:
        cursor = None
        for _ in range(self.rng.randint(2, 5)):
            nxt = f"c{self.rng.getrandbits(24):06x}"
            self.round([(tool, {"cursor": cursor}, json.dumps({"items": _fact(self.rng, tool), "next": nxt}))])
            cursor = nxt

    def poll(self, tool: str) -> None:
        job = f"job-{self.rng.randint(100, 999)}"
        self.round([(tool, {"action": "start"}, json.dumps({"job": job}))])
        for pct in sorted(self.rng.sample(range(5, 100, 5), self.rng.randint(1, 4))):
            self.round([("job_status", {"job": job}, f"running: {pct}% done")])
        self.round([("job_status", {"job": job}, "done")])

    def poll_plain(self, tool: str) -> None:
        """Polling whose answer does not change until it is done (1-2 identical answers)."""
        job = f"job-{self.rng.randint(100, 999)}"
        self.round([(tool, {"action": "start"}, json.dumps({"job": job}))])
        for _ in range(self.rng.randint(1, 2)):
            self.round([("job_status", {"job": job}, "running")])
        self.round([("job_status", {"job": job}, "done: " + _fact(self.rng, tool))])

    def parallel(self, tools: list[str], query: str) -> None:
        self.round([(t, {"query": query}, _fact(self.rng, t)) for t in tools])

    def empty_searches(self, tool: str, query: str) -> None:
        words = query.split()
        for i in range(self.rng.randint(2, 4)):
            variant = " ".join(self.rng.sample(words, max(1, len(words) - i - 1)))
            self.round([(tool, {"query": variant}, "[]")])

    def search_open(self, tool: str, query: str) -> None:
        for i in range(self.rng.randint(2, 4)):
            self.round([(tool, {"query": query, "offset": i * 10}, _fact(self.rng, tool))])
            self.round([("open_result", {"id": f"{tool}-{i}"}, _fact(self.rng, "page"))])

    def double_check(self, tool: str, query: str) -> None:
        result = _fact(self.rng, tool)
        self.round([(tool, {"query": query}, result)])
        self.round([(tool, {"query": query}, result)])  # twice: below max_repeats


PATTERNS = ("varied", "varied", "retry_then_success", "paginate", "cursor", "poll", "poll_plain", "parallel",
            "empty_searches", "search_open", "double_check")


def build_run(rng: random.Random, tools: list[str], queries: dict[str, list[str]],
              multi: list[tuple[str, list[str]]], max_rounds_per_turn: int = 24) -> RunBuilder:
    run = RunBuilder(rng, tools, queries)
    for _ in range(rng.randint(1, 3)):
        query, needed = rng.choice(multi)
        extra = rng.sample(tools, 2)
        palette = [*needed, *extra]
        run.user(query)
        start = run.rounds
        for _ in range(rng.randint(2, 6)):
            if run.rounds - start >= max_rounds_per_turn - 8:
                break
            pattern = rng.choice(PATTERNS)
            tool = rng.choice(palette)
            q = rng.choice(queries.get(tool) or [query])
            step = getattr(run, pattern)
            if pattern in ("cursor", "poll", "poll_plain"):
                step(tool)
            elif pattern == "parallel":
                step(rng.sample(palette, 2), q)
            else:
                step(tool, q)
        run.answer("Here is what I found: " + query[:60])
    return run


# ----------------------------------------------------------------------------- measurements


def false_positives(n_runs: int, rng: random.Random, data: Any, cfg: LoopsConfig) -> None:
    tools, queries, multi = data
    runs_flagged, requests, flagged_requests, calls, rounds, turns, msgs = 0, 0, 0, 0, 0, 0, 0
    kinds: Counter[str] = Counter()
    example = None
    for _ in range(n_runs):
        run = build_run(rng, tools, queries, multi)
        calls += run.calls
        rounds += run.rounds
        msgs += len(run.messages)
        turns += sum(m["role"] == "user" for m in run.messages)
        hit = False
        for point in run.request_points:
            requests += 1
            loop = find_loop(run.messages[:point], max_repeats=cfg.max_repeats, max_period=cfg.max_period,
                             max_tool_rounds=cfg.max_tool_rounds)
            if loop:
                flagged_requests += 1
                kinds[loop.kind] += 1
                example = example or loop
                hit = True
        runs_flagged += hit
    print("== false positives on loop-free agent runs (MetaTool queries and tools) ==")
    print(f"runs: {n_runs}  user turns: {turns}  tool-call rounds: {rounds}  tool calls: {calls}  messages: {msgs}")
    print(f"requests checked (one per round + one per user turn): {requests}")
    print(f"runs flagged: {runs_flagged}/{n_runs} = {runs_flagged / n_runs:.2%}   "
          f"requests flagged: {flagged_requests}/{requests} = {flagged_requests / requests:.3%}   by kind: {dict(kinds) or '{}'}")
    if example:
        print(f"  example: {example.kind} {' → '.join(example.history)}")
    # The documented trade-off: a poll answered with the very same text max_repeats times is flagged.
    flagged = 0
    for _ in range(200):
        run = RunBuilder(rng, tools, queries)
        run.user("Convert this video and tell me when it is ready.")
        run.round([("convert", {"file": "a.mp4"}, json.dumps({"job": "job-1"}))])
        for _ in range(rng.randint(3, 5)):
            run.round([("job_status", {"job": "job-1"}, "running")])
        flagged += find_loop(run.messages, max_repeats=cfg.max_repeats, max_period=cfg.max_period) is not None
    print(f"trade-off (not counted above): polls answered 'running' 3-5 times identically: flagged {flagged}/200 "
          f"(no new information; raise max_repeats for agents that poll)")


def detection(trials: int, rng: random.Random, data: Any, cfg: LoopsConfig) -> None:
    tools, queries, multi = data
    print(f"\n== detection of injected loops (max_repeats={cfg.max_repeats}, max_period={cfg.max_period}) ==")
    for period in range(1, cfg.max_period + 2):
        found = exact = early = 0
        for _ in range(trials):
            run = build_run(rng, tools, queries, multi, max_rounds_per_turn=12)
            run.messages.pop()  # no final answer: the agent is still working on the last turn
            cycle = [(rng.choice(tools), {"query": f"q{rng.getrandbits(20)}", "step": i},
                      "" if rng.random() < 0.2 else _fact(rng, "same")) for i in range(period)]
            hits = []
            for rep in range(cfg.max_repeats):
                for call in cycle:
                    run.round([call])
                    hits.append(find_loop(run.messages, max_repeats=cfg.max_repeats, max_period=cfg.max_period,
                                          max_tool_rounds=None))
            first = next((i for i, h in enumerate(hits) if h), None)
            if hits[-1] and hits[-1].kind in ("repeat", "cycle") and period % hits[-1].period == 0:
                found += 1
                exact += hits[-1].period == period
            early += first is not None and first < len(hits) - 1
        label = f"period {period}" + (" (beyond max_period)" if period > cfg.max_period else "")
        print(f"{label:32s} detected {found}/{trials} = {found / trials:.1%}  (exact period {exact}/{trials}; "
              f"flagged before the {cfg.max_repeats}rd repetition completed: {early})")


class NullMetrics:
    def add(self, *a: Any, **k: Any) -> None: ...
    def record(self, *a: Any, **k: Any) -> None: ...
    def gauge(self, *a: Any, **k: Any) -> None: ...


def conversation_200(rng: random.Random, data: Any, single_turn: bool, loop: bool) -> list[dict[str, Any]]:
    tools, queries, multi = data
    run = RunBuilder(rng, tools, queries)
    while len(run.messages) < 200 - (6 if loop else 0):
        if not single_turn and (len(run.messages) < 3 or (rng.random() < 0.12 and len(run.messages) < 190)):
            if run.messages[-1]["role"] == "tool":
                run.answer("Done: " + "details " * 40)
            run.user(rng.choice(multi)[0])
        elif len(run.messages) < 3:
            run.user(rng.choice(multi)[0])
        tool = rng.choice(tools)
        run.round([(tool, {"query": rng.choice(queries.get(tool) or ["x"]), "page": rng.randint(1, 9)},
                    _fact(rng, tool) + " " + "lorem ipsum " * rng.randint(10, 120))])
    if loop:
        call = (tools[0], {"query": "same"}, "no results")
        for _ in range(3):
            run.round([call])
    assert len(run.messages) == 200, len(run.messages)
    return run.messages


async def time_policy(policy: LoopsPolicy, messages: list[dict[str, Any]], n: int, cold: bool) -> list[float]:
    raw = json.dumps(messages)
    samples = []
    for _ in range(n):
        msgs = json.loads(raw)  # fresh objects, as each request is parsed anew by the server
        ex = Exchange(request_id="r", model="m", messages=msgs, tools=None, body={"messages": msgs}, session_id="bench")
        if cold:
            call_key.cache_clear()
        start = time.perf_counter()
        await policy.on_request(ex)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def latency(rng: random.Random, data: Any, n: int) -> None:
    print(f"\n== LoopsPolicy.on_request latency on 200-message conversations ({n} calls each) ==")
    cases = [
        ("10+ user turns, no loop", dict(single_turn=False, loop=False), {}),
        ("one turn of 99 rounds, over a max_tool_rounds of 25 (stop)", dict(single_turn=True, loop=False),
         {"max_tool_rounds": 25}),
        ("one turn of 99 rounds, the default (no round limit), no loop", dict(single_turn=True, loop=False), {}),
        ("one turn ending in a period-1 loop (stop)", dict(single_turn=True, loop=True), {"max_tool_rounds": None}),
        ("inject mode, period-1 loop", dict(single_turn=True, loop=True), {"max_tool_rounds": None, "action": "inject"}),
    ]
    for label, shape, cfg in cases:
        msgs = conversation_200(rng, data, **shape)
        tail = len(msgs) - turn_start(msgs)
        for cold in (False, True):
            policy = LoopsPolicy(LoopsConfig(**cfg), Services(tokens=None, metrics=NullMetrics()))  # type: ignore[arg-type]
            samples = asyncio.run(time_policy(policy, msgs, n, cold))
            samples.sort()
            p95 = samples[int(0.95 * len(samples)) - 1]
            print(f"{label:52s} {'cold' if cold else 'warm'} cache: p50 {statistics.median(samples):.3f} ms  "
                  f"p95 {p95:.3f} ms  max {samples[-1]:.3f} ms  ({len(msgs)} messages, last turn {tail})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--latency-calls", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    logging.getLogger("ctxwarden.loops").setLevel(logging.ERROR)  # every trigger logs a warning
    rng = random.Random(args.seed)
    data = load_metatool()
    cfg = LoopsConfig()
    false_positives(args.runs, rng, data, cfg)
    detection(args.trials, rng, data, cfg)
    latency(rng, data, args.latency_calls)


if __name__ == "__main__":
    main()
