"""Benchmark of the tools policy: single-query retrieval (MetaTool) and multi-step agents (BFCL).

    .venv/bin/python bench/tool_retrieval.py [--split report|tune] [--workloads metatool,agent]
                                             [--queries 2000] [--embedders wordllama,minilm,minilm+wordllama] [--grid]

MetaTool (bench/data/metatool): each query becomes a chat request carrying 120 tools, the right
one(s) plus others drawn at random from the 199 (seeded), every tool an OpenAI function
definition with one `query` parameter. The request goes through ToolsPolicy.on_request (top_k 5,
max_tools 30, default weights) exactly as the proxy calls it, with a real Chroma store and token
counter; what the policy forwards is checked:

- Recall@5: the right tool is among the forwarded ones; Recall@1: it is the best-scored one.
- Side by side, plain BM25 (the bm25s library) over the same 120 candidates' names+descriptions.
- multi-tool: the 497 queries that need two tools; a hit needs both forwarded.
- adaptive: the default config (k between min_k and max_k) instead of top_k 5: recall and tools out.
- latency: on_request wall time with 120 tools, catalog warm. "same tool set": an agent's fixed
  tool list, a new user request each time (the usual case); "new tool set": a different random
  120 of the already-embedded tools per request (the tool-set index is rebuilt each time).
- tokens saved: tool-definition tokens forwarded vs sent, over the report workload.

Agent (bench/data/bfcl_agent, see bench/tool_agent.py): BFCL multi-turn tasks of 3-8 calls
replayed step by step over a 500-tool catalog from 225 servers, with the default embedder
(wordllama): needed tools kept and available (forwarded, or found by one find_tools call), tools
forwarded per step, tool-list changes, selection latency. "cold": the usage statistics (usage.py)
start empty and learn online during the run; "warm": they first saw the other split's traffic.

Honest tuning: the MetaTool queries are split once (seeded) into a tuning part (1,500) and a report
part (--queries, disjoint); the agent tasks into `dev` and `heldout` (bench/data/bfcl_agent/build.py).
The settings in config/ctxwarden.yaml were chosen with `--split tune` (MetaTool tune + agent dev);
the figures to quote come from the default `--split report` (MetaTool report + agent heldout).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tool_agent  # noqa: E402  (bench/tool_agent.py, next to this file)

from ctxwarden.policies.base import Exchange, Services  # noqa: E402
from ctxwarden.policies.text.tokens import TiktokenCounter  # noqa: E402
from ctxwarden.policies.tools.policy import ToolsConfig, ToolsPolicy  # noqa: E402
from ctxwarden.proxy.config import EmbedderChoice, EmbeddingsConfig, StorageConfig  # noqa: E402
from ctxwarden.proxy.embeddings import build_embedder  # noqa: E402
from ctxwarden.proxy.services import LazyEmbedder, NamedEmbedders  # noqa: E402
from ctxwarden.proxy.storage import ChromaStore  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "metatool"
CANDIDATES = 120
TOP_K = 5
TUNE_SIZE = 1500
SPLIT_SEED = 2024


class NullMetrics:
    def add(self, *a: Any, **k: Any) -> None: ...
    def record(self, *a: Any, **k: Any) -> None: ...
    def gauge(self, *a: Any, **k: Any) -> None: ...


@dataclass
class Case:
    query: str
    gold: list[str]
    candidates: list[str]


def load(data: Path) -> tuple[dict[str, str], list[tuple[str, str]], list[tuple[str, list[str]]]]:
    tools = json.loads((data / "tools.json").read_text())
    by_lower = {name.lower(): name for name in tools}
    with (data / "queries.csv").open() as f:
        single = [(r["Query"], by_lower[r["Tool"].lower()]) for r in csv.DictReader(f)]
    multi = [(m["query"], [by_lower[t.lower()] for t in m["tool"]]) for m in json.loads((data / "multi_tool_queries.json").read_text())]
    return tools, single, multi


def definition(name: str, description: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {"query": {"type": "string", "description": "What to ask the tool."}},
        "required": ["query"]}}}


def split(single: list[tuple[str, str]], report_size: int) -> tuple[list[int], list[int]]:
    """Disjoint (tune, report) query indices, fixed by SPLIT_SEED."""
    order = list(range(len(single)))
    random.Random(SPLIT_SEED).shuffle(order)
    return order[:TUNE_SIZE], order[TUNE_SIZE : TUNE_SIZE + report_size]


def cases(queries: list[tuple[str, list[str]]], names: list[str], seed: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for query, gold in queries:
        others = rng.sample([n for n in names if n not in gold], CANDIDATES - len(gold))
        candidates = gold + others
        rng.shuffle(candidates)
        out.append(Case(query, gold, candidates))
    return out


# ----------------------------------------------------------------------------- the policy


def make_policy(embedder: Any, store: Any, weights: dict[str, float] | None = None, **settings: Any) -> ToolsPolicy:
    # budget_ms off: on a busy host the first request's embedding of the catalog can pass it, and then
    # nothing is ranked (every tool forwarded); this bench measures the ranking, latency is timed warm.
    settings = {"top_k": TOP_K, "budget_ms": None, **settings}
    config = ToolsConfig(**{"max_tools": 30, **settings}, **({"weights": weights} if weights else {}))
    services = Services(tokens=TiktokenCounter(), metrics=NullMetrics(), embedder=embedder, store=store,
                        embedder_named=NAMED_EMBEDDERS)  # find_tools' second reader, as the server has it
    return ToolsPolicy(config, services)


# One embedder per provider for the whole run (MiniLM loaded once), as the server has them.
NAMED_EMBEDDERS = NamedEmbedders(EmbedderChoice(), LazyEmbedder(EmbedderChoice()))


def exchange(case: Case, defs: dict[str, dict[str, Any]], i: int) -> Exchange:
    tools = [json.loads(json.dumps(defs[n])) for n in case.candidates]  # fresh dicts, as parsed from a body
    messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": case.query}]
    body = {"model": "gpt-4o", "messages": messages, "tools": tools}
    return Exchange(request_id=str(i), model="gpt-4o", messages=messages, tools=tools, body=body, session_id=f"bench-{i}")


async def run_policy(policy: ToolsPolicy, work: list[Case], defs: dict[str, dict[str, Any]]) -> dict[str, float]:
    hits1 = hits5 = saved = sent = 0
    out_sizes = []
    for i, case in enumerate(work):
        ex = exchange(case, defs, i)
        await policy.on_request(ex)
        forwarded = {t["function"]["name"] for t in ex.tools}
        action = next(a for a in ex.actions if a.name == "filter")
        relevance = json.loads(action.detail["relevance"])
        best = max(relevance, key=relevance.get) if relevance else None
        hits5 += all(g in forwarded for g in case.gold)
        hits1 += best in case.gold
        saved += action.detail["tokens_saved"]
        sent += action.detail["tokens_before"]
        out_sizes.append(len(ex.tools))
    n = len(work)
    return {"r1": hits1 / n, "r5": hits5 / n, "saved": saved / sent, "out": statistics.mean(out_sizes)}


def bm25_baseline(work: list[Case], tools: dict[str, str]) -> dict[str, float]:
    import bm25s

    hits1 = hits5 = 0
    for case in work:
        corpus = [f"{name} {tools[name]}" for name in case.candidates]
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
        docs, _ = retriever.retrieve(bm25s.tokenize([case.query], stopwords="en", show_progress=False), k=TOP_K, show_progress=False)
        top = [case.candidates[int(j)] for j in docs[0]]
        hits1 += top[0] in case.gold
        hits5 += all(g in top for g in case.gold)
    return {"r1": hits1 / len(work), "r5": hits5 / len(work)}


async def latency(policy: ToolsPolicy, fresh: list[Case], defs: dict[str, dict[str, Any]], mode: str) -> tuple[float, float]:
    """on_request wall time (ms, p50/p95) with 120 known tools and queries never embedded before.

    same-set: one fixed tool list, a new user request each time (query embedding + ranking);
    new-set: a new mix of known tools each time (also rebuilds the tool-set index);
    loop-turn: the agent's next turn on an unchanged request (the session's selection is reused).
    """
    fixed = fresh[0].candidates
    times = []
    for i, case in enumerate(fresh):
        ex = exchange(Case(case.query, case.gold, case.candidates if mode == "new-set" else fixed), defs, 10**6 + i)
        if mode == "loop-turn":
            await policy.on_request(ex)
            called = ex.tools[0]["function"]["name"]
            ex = exchange(Case(case.query, case.gold, fixed), defs, 10**6 + i)
            ex.messages = ex.messages + [
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": called, "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "result"},
            ]
        start = time.perf_counter()
        await policy.on_request(ex)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.95)]


# ----------------------------------------------------------------------------- main


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=2000, help="report queries (single-tool), disjoint from the tuning split")
    parser.add_argument("--split", choices=("report", "tune"), default="report",
                        help="report: MetaTool report queries + agent heldout tasks; tune: MetaTool tuning queries + agent dev tasks")
    parser.add_argument("--workloads", default="metatool,agent")
    parser.add_argument("--embedders", default="wordllama,minilm,minilm+wordllama", help="for MetaTool; the agent workload uses wordllama")
    parser.add_argument("--grid", action="store_true", help="try weight combinations (use with --split tune)")
    parser.add_argument("--latency-runs", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxw-tools-bench-") as tmp:
        if "metatool" in args.workloads:
            await metatool(args, tmp)
        if "agent" in args.workloads:
            await agent(args, tmp)


async def metatool(args: argparse.Namespace, tmp: str) -> None:
    tools, single, multi = load(DATA)
    names = list(tools)
    defs = {n: definition(n, d) for n, d in tools.items()}
    tune_idx, report_idx = split(single, args.queries)
    used = {single[i][0] for i in tune_idx + report_idx}
    unseen = [(q, [t]) for q, t in single if q not in used]
    fresh = cases(random.Random(3).sample(unseen, 3 * args.latency_runs), names, seed=3)
    chosen = tune_idx if args.split == "tune" else report_idx
    work = cases([(single[i][0], [single[i][1]]) for i in chosen], names, seed=1)
    multi_work = cases(multi, names, seed=2) if args.split == "report" else []
    print(f"MetaTool: {len(names)} tools; {len(work)} {args.split} queries (+{len(multi_work)} multi-tool); "
          f"{CANDIDATES} tools per request, top_k {TOP_K}")

    base = bm25_baseline(work, tools)
    multi_base = bm25_baseline(multi_work, tools) if multi_work else None
    rows = [("plain BM25 (bm25s)", base, multi_base, {})]
    for n, provider in enumerate(args.embedders.split(",")):
        embedder = build_embedder(EmbeddingsConfig(provider=provider))
        store = ChromaStore(StorageConfig(path=f"{tmp}/{provider.replace('+', '_')}"))
        for weights in grid() if args.grid else [None]:
            policy = make_policy(embedder, store, weights)
            label = f"policy, {provider}" + (f" {weights}" if weights else "")
            quality = await run_policy(policy, work, defs)
            multi_q = await run_policy(policy, multi_work, defs) if multi_work else None
            lat = {}
            if not args.grid:
                for k, mode in enumerate(("same-set", "new-set", "loop-turn")):
                    lat[mode] = await latency(policy, fresh[k * args.latency_runs : (k + 1) * args.latency_runs], defs, mode)
            rows.append((label, quality, multi_q, lat))
        if n == 0 and not args.grid:  # the default config: k adapts between min_k and max_k
            adaptive = make_policy(embedder, store, top_k=None)
            rows.append((f"policy, {provider}, adaptive k (default)", await run_policy(adaptive, work, defs),
                         await run_policy(adaptive, multi_work, defs) if multi_work else None, {}))
    print_table(rows)


async def agent(args: argparse.Namespace, tmp: str) -> None:
    split_name = "heldout" if args.split == "report" else "dev"
    catalog, tasks = tool_agent.load(split_name)
    _, other = tool_agent.load("dev" if split_name == "heldout" else "heldout")
    steps = sum(len(t["turns"]) + sum(len(turn["calls"]) for turn in t["turns"]) for t in tasks)
    print(f"\nAgent (BFCL multi-turn): {len(catalog)} tools in every request; {len(tasks)} {split_name} tasks, {steps} steps")
    embedder = build_embedder(EmbeddingsConfig(provider="wordllama"))
    store = ChromaStore(StorageConfig(path=f"{tmp}/agent"))
    rows = [("plain BM25 (bm25s), top 10 per step", tool_agent.bm25_baseline(catalog, tasks, 10))]
    variants: list[tuple[str, dict[str, Any]]] = [
        ("policy, top_k 5, new list per request, no search", {"top_k": 5, "stable_list": False, "search_tool": False,
                                                            "sibling_boost": 0, "usage_boost": 0}),
        ("policy, default, no search tool", {"top_k": None, "search_tool": False}),
        ("policy, default (cold)", {"top_k": None}),
    ]
    for label, settings in variants:
        policy = make_policy(embedder, store, **settings)
        rows.append((label, await tool_agent.run_policy(policy, catalog, tasks, label)))
    if split_name == "heldout":  # steady state: usage statistics learned from the dev split's traffic first
        policy = make_policy(embedder, store, top_k=None)
        await tool_agent.run_policy(policy, catalog, other, "warm-up")
        rows.append(("policy, default (warm: usage seen on dev)", await tool_agent.run_policy(policy, catalog, tasks, "warm")))
    tool_agent.print_rows(rows)


def grid() -> list[dict[str, float]]:
    return [{"description": 1.0, "segments": s, "lexical": w} for s in (0.0, 0.3, 0.5, 1.0) for w in (0.0, 0.05, 0.1, 0.2)]


def print_table(rows: list[tuple]) -> None:
    modes = ("same-set", "new-set", "loop-turn")
    print()
    print(f"{'ranker':48s} {'R@1':>6s} {'R@5':>6s} {'multi R@5':>9s} {'tools out':>9s} {'tokens saved':>12s}  "
          + "  ".join(f"{m + ' p50/p95 ms':>22s}" for m in modes))
    for label, q, mq, lat in rows:
        multi_cell = f"{mq['r5']:.3f}" if mq else "-"
        out = f"{q['out']:.2f}" if "out" in q else "-"
        saved = f"{q['saved'] * 100:.1f}%" if "saved" in q else "-"
        cells = "  ".join(f"{lat[m][0]:>11.2f} / {lat[m][1]:<8.2f}" if m in lat else f"{'-':>22s}" for m in modes)
        print(f"{label:48s} {q['r1']:6.3f} {q['r5']:6.3f} {multi_cell:>9s} {out:>9s} {saved:>12s}  {cells}")
    print("\nlatency: ToolsPolicy.on_request wall time, 120 tools, catalog warm, queries never embedded before;"
          " same-set = fixed tool list, new user request; new-set = new mix of known tools;"
          " loop-turn = next agent turn on an unchanged request (selection reused)")


if __name__ == "__main__":
    asyncio.run(main())
