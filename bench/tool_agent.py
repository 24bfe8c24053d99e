"""The multi-step agent workload of bench/tool_retrieval.py (data: bench/data/bfcl_agent).

Each BFCL multi-turn task (3-8 calls, over a 500-tool catalog from many servers) is replayed as
the agent that solved it would have sent it: every request carries the whole catalog; the user's
turns arrive in order; each ground-truth call is one step (the request whose answer makes that
call), followed by its real result, and each turn ends with one more step (the answer). What
the policy forwards at each step is checked against the tool that step needs:

- kept: the needed tool was forwarded at its step;
- available: kept, or found by one find_tools call whose query is the user's current turn
  (the agent asks for what the user asked; never the tool's own words);
- first request: share of a task's tools forwarded on its very first request;
- tools/step: tools in the forwarded list (find_tools included when offered);
- changes: steps whose forwarded list differs from the step before (the cached prefix breaks);
- latency: ToolsPolicy.on_request wall time per step, 500 tools, catalog warm.

Through each API (`api` = chat | responses | messages; `python bench/tool_agent.py --api …` runs the
default policy on the heldout tasks): the step's request is written in that API's shape
(bench/_api_wire.py), made into the Exchange by the API's own handler (`_exchange`, as the server
does), and what is forwarded is read from the body the handler would send (rendered back by the
API's adapter): the tool names in that API's tool list.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _api_wire import APIS, request_body  # noqa: E402

from ctxwarden.policies.base import Exchange  # noqa: E402
from ctxwarden.policies.tools.config import ToolsConfig  # noqa: E402
from ctxwarden.policies.tools.policy import ToolsPolicy  # noqa: E402
from ctxwarden.policies.tools.search import FIND_TOOLS  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "bfcl_agent"
SYSTEM = {"role": "system", "content": "You are an agent. Use the tools to do what the user asks, step by step."}


def load(split: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    catalog = json.loads((DATA / "tools.json").read_text())
    tasks = [json.loads(line) for line in (DATA / "tasks.jsonl").read_text().splitlines() if line.strip()]
    return catalog, [t for t in tasks if t["split"] == split]


@dataclass
class Tally:
    needed: int = 0
    kept: int = 0
    found: int = 0
    searches: int = 0
    steps: int = 0
    tools: int = 0
    changes: int = 0
    runs: int = 0
    full_runs: int = 0  # runs where every needed tool was available at its step
    first: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    def row(self) -> dict[str, float]:
        ordered = sorted(self.times) or [float("nan")]
        return {
            "kept": self.kept / self.needed, "available": (self.kept + self.found) / self.needed,
            "tasks_all": self.full_runs / self.runs, "first": statistics.mean(self.first),
            "tools_per_step": self.tools / self.steps, "changes_per_step": self.changes / self.steps,
            "changes_per_run": self.changes / self.runs, "searches_per_run": self.searches / self.runs,
            "p50": ordered[len(ordered) // 2], "p95": ordered[int(len(ordered) * 0.95)],
        }


class AgentRun:
    """One task replayed through the policy, one request per step."""

    def __init__(self, policy: ToolsPolicy, catalog: list[dict[str, Any]], task: dict[str, Any], label: str, tally: Tally,
                 api: str = "chat") -> None:
        self.policy, self.catalog, self.task, self.tally, self.api = policy, catalog, task, tally, api
        self.session = f"{label}:{task['id']}"
        self.messages: list[dict[str, Any]] = [SYSTEM]
        self.previous: list[str] | None = None
        self.missed = False

    async def step(self, needed: str | None, user_turn: str) -> None:
        if self.api == "chat":
            ex = Exchange(request_id="b", model="gpt-4o", messages=list(self.messages), tools=self.catalog,
                          body={"model": "gpt-4o", "messages": self.messages, "tools": self.catalog}, session_id=self.session)
        else:
            ex = api_exchange(self.api, {"model": "gpt-4o", "messages": self.messages, "tools": self.catalog}, self.session)
        start = time.perf_counter()
        await self.policy.on_request(ex)
        self.tally.times.append((time.perf_counter() - start) * 1000)
        if self.api == "chat":
            forwarded = [t["function"]["name"] for t in ex.outgoing_body().get("tools", [])]
        else:
            forwarded = api_forwarded_tools(self.api, ex)
        if self.previous is None:
            wanted = {c["tool"] for turn in self.task["turns"] for c in turn["calls"]}
            self.tally.first.append(len(wanted & set(forwarded)) / len(wanted))
        elif forwarded != self.previous:
            self.tally.changes += 1
        self.previous = forwarded
        self.tally.steps += 1
        self.tally.tools += len(forwarded)
        if needed is None:
            return
        self.tally.needed += 1
        if needed in forwarded:
            self.tally.kept += 1
        elif await self.search(ex, needed, user_turn):
            self.tally.found += 1
        else:
            self.missed = True

    async def search(self, ex: Exchange, needed: str, query: str) -> bool:
        tool = ex.proxy_tools.get(FIND_TOOLS)
        if tool is None:
            return False
        self.tally.searches += 1
        answer = await tool.handler(ex, json.dumps({"query": query}))
        return any(line.startswith(f"- {needed}:") for line in answer.splitlines())

    async def run(self) -> None:
        for t, turn in enumerate(self.task["turns"]):
            self.messages.append({"role": "user", "content": turn["user"]})
            for c, call in enumerate(turn["calls"]):
                await self.step(call["tool"], turn["user"])
                call_id = f"call_{t}_{c}"
                self.messages.append({"role": "assistant", "content": None, "tool_calls": [{
                    "id": call_id, "type": "function",
                    "function": {"name": call["tool"], "arguments": json.dumps(call["arguments"])}}]})
                self.messages.append({"role": "tool", "tool_call_id": call_id, "content": call["result"]})
            await self.step(None, turn["user"])
            self.messages.append({"role": "assistant", "content": "Done."})
        self.tally.runs += 1
        self.tally.full_runs += not self.missed


async def run_policy(policy: ToolsPolicy, catalog: list[dict[str, Any]], tasks: list[dict[str, Any]], label: str,
                     api: str = "chat") -> dict[str, float]:
    tally = Tally()
    for task in tasks:
        await AgentRun(policy, catalog, task, label, tally, api).run()
    return tally.row()


# ----------------------------------------------------------------------------- the other APIs


def _handler(api: str) -> Any:
    """The API's handler class and a stand-in for the few attributes its `_exchange` reads."""
    if api == "responses":
        from ctxwarden.proxy.responses_api import ResponsesHandler as cls
    else:
        from ctxwarden.proxy.messages_api import MessagesHandler as cls
    upstream = SimpleNamespace(request_headers=lambda headers: {}, base_url="http://bench.invalid/v1")
    stub = SimpleNamespace(models=SimpleNamespace(context_window=lambda model: None), upstream=upstream, anthropic=upstream,
                           api=cls.api)
    return cls, stub


def api_exchange(api: str, chat: dict[str, Any], session: str) -> Exchange:
    """The Exchange the API's handler makes of this request in the API's shape."""
    cls, stub = _handler(api)
    body = request_body(api, json.loads(json.dumps(chat)))  # fresh dicts, as parsed from a body
    return cls._exchange(stub, "b", body, {"x-ctxwarden-session": session}, len(json.dumps(body)), time.perf_counter())


def api_forwarded_tools(api: str, ex: Exchange) -> list[str]:
    """The tool names in the body the handler forwards (rendered back by the API's adapter)."""
    body, parsed = ex.notes.wire
    tools = list(ex.tools or [])
    known = {(t.get("function") or {}).get("name") for t in tools}
    tools += [pt.definition for name, pt in ex.proxy_tools.items() if name not in known]
    if api == "responses":
        from ctxwarden.proxy.wire.responses import render_request
        out = body if not ex.changed and not ex.proxy_tools else render_request(body, parsed, ex.messages, tools if (tools or parsed.tools is not None) else None)
    else:
        from ctxwarden.proxy.wire.anthropic import render_request
        out = body if not ex.changed and not ex.proxy_tools else render_request(body, parsed, ex.messages, tools)
    return [t.get("name") for t in out.get("tools") or []]


def bm25_baseline(catalog: list[dict[str, Any]], tasks: list[dict[str, Any]], k: int) -> dict[str, float]:
    """Plain BM25 (bm25s) top-k over the latest user message, chosen afresh at every step."""
    import bm25s

    names = [t["function"]["name"] for t in catalog]
    corpus = [f"{t['function']['name']} {t['function'].get('description', '')}" for t in catalog]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
    tally = Tally()
    for task in tasks:
        previous, missed = None, False
        wanted = {c["tool"] for turn in task["turns"] for c in turn["calls"]}
        for turn in task["turns"]:
            docs, _ = retriever.retrieve(bm25s.tokenize([turn["user"]], stopwords="en", show_progress=False), k=k, show_progress=False)
            top = [names[int(j)] for j in docs[0]]
            for needed in [c["tool"] for c in turn["calls"]] + [None]:
                if previous is None:
                    tally.first.append(len(wanted & set(top)) / len(wanted))
                elif top != previous:
                    tally.changes += 1
                previous = top
                tally.steps += 1
                tally.tools += len(top)
                if needed is not None:
                    tally.needed += 1
                    tally.kept += needed in top
                    missed |= needed not in top
        tally.runs += 1
        tally.full_runs += not missed
    return tally.row()


def print_rows(rows: list[tuple[str, dict[str, float]]]) -> None:
    print(f"\n{'agent workload':52s} {'kept':>6s} {'avail':>6s} {'tasks':>6s} {'1st req':>7s} {'tools/step':>10s} "
          f"{'chg/step':>8s} {'chg/run':>7s} {'search/run':>10s} {'p50 ms':>7s} {'p95 ms':>7s}")
    for label, r in rows:
        p50 = f"{r['p50']:7.2f}" if r["p50"] == r["p50"] else f"{'-':>7s}"
        p95 = f"{r['p95']:7.2f}" if r["p95"] == r["p95"] else f"{'-':>7s}"
        print(f"{label:52s} {r['kept']:6.3f} {r['available']:6.3f} {r['tasks_all']:6.3f} {r['first']:7.3f} "
              f"{r['tools_per_step']:10.2f} {r['changes_per_step']:8.3f} {r['changes_per_run']:7.2f} "
              f"{r['searches_per_run']:10.2f} {p50} {p95}")
    print("kept: needed tool forwarded at its step; avail: kept, or found by one find_tools call (query = the user's"
          " turn); tasks: runs with every needed tool available; 1st req: share of a task's tools on its first request;"
          " tools/step counts find_tools when offered; chg: steps whose tool list differs from the step before")


async def main() -> None:
    """The default tools policy (cold, then warm on the other split) on one split, through one API."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", choices=APIS, default="chat")
    parser.add_argument("--split", choices=("heldout", "dev"), default="heldout")
    parser.add_argument("--tasks", type=int, default=0, help="first N tasks only (0: all)")
    parser.add_argument("--search-reader", choices=("minilm", "none"), default="minilm",
                        help="find_tools' second reader (policies.tools.search_reader)")
    parser.add_argument("--search-weight", type=float, default=ToolsConfig().search_reader_weight,
                        help="policies.tools.search_reader_weight")
    args = parser.parse_args()
    from tool_retrieval import make_policy

    from ctxwarden.proxy.config import EmbeddingsConfig, StorageConfig
    from ctxwarden.proxy.embeddings import build_embedder
    from ctxwarden.proxy.storage import ChromaStore

    catalog, tasks = load(args.split)
    _, other = load("dev" if args.split == "heldout" else "heldout")
    if args.tasks:
        tasks, other = tasks[: args.tasks], other[: args.tasks]
    print(f"Agent (BFCL multi-turn) through the {args.api} API: {len(catalog)} tools in every request; "
          f"{len(tasks)} {args.split} tasks")
    embedder = build_embedder(EmbeddingsConfig(provider="wordllama"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="ctxw-tool-agent-") as tmp:
        store = ChromaStore(StorageConfig(path=f"{tmp}/agent"))
        policy = make_policy(embedder, store, top_k=None, search_reader=args.search_reader,
                             search_reader_weight=args.search_weight)
        rows.append((f"{args.api}: policy, default (cold)", await run_policy(policy, catalog, tasks, "cold", args.api)))
        policy = make_policy(embedder, store, top_k=None, search_reader=args.search_reader,
                             search_reader_weight=args.search_weight)
        await run_policy(policy, catalog, other, "warm-up", args.api)
        rows.append((f"{args.api}: policy, default (warm: usage seen on the other split)",
                     await run_policy(policy, catalog, tasks, "warm", args.api)))
    print_rows(rows)


if __name__ == "__main__":
    asyncio.run(main())
