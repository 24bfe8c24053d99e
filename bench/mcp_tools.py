"""Tool discovery on a real MCP catalog with real trajectories, through the real server.

    .venv/bin/python bench/mcp_tools.py [--quick] [--tasks N] [--split dev|held-out|all] [--misses] [--config YAML]

Data (bench/data/mcp_catalog, from LiveMCPBench, Apache-2.0; see its README): 525 tools of 69 real
MCP servers, named as MCP clients name them (`server__tool`), and 95 tasks, each with Claude
Sonnet 4's trajectory: what it said, the queries it searched the catalog with (LiveMCPBench's
`route` tool) and the calls it made, with their real results.

The proxy runs as its own process (`ctxwarden serve`, default policies) in front of the scripted
fake upstream (bench/_harness.py). Each task is one session; every request carries the WHOLE
catalog (chat completions). Step k's request is the history so far; the fake model is scripted to
make the trajectory's k-th assistant turn: first one `find_tools` call per `route` query the agent
made before that turn (its own words, at most the proxy's `max_inner_rounds`; the proxy answers them
itself), then the turn's text and real calls. The client adds the real results and goes on; a last
step asks for the answer. Printed:

- needed tools available: share of calls whose tool was in the list of the upstream request that
  made the call (forwarded by the selection, or added by the step's find_tools calls); "forwarded"
  counts the first only (the selection alone);
- tasks with all their tools available (tasks with at least one call);
- tools forwarded per step (the first upstream request of each client request; the proxy's own
  find_tools and context_recall count, and are also left out in a second figure);
- non-append list changes per 5 steps: upstream requests of a session whose tool list does not
  start with the previous one's (the cached prompt prefix breaks), per 5 client requests;
- selection ms: the tools policy's on_request per request, read from the server's /metrics
  (ctxwarden_policy_duration_seconds, policy="tools"), p50 and p95; and as a ratio to a floor timed
  in the same run, right after each request, on the same host: serializing the request's tool list
  to JSON and hashing it (SHA-256), the least any proxy does to look at a tool list. On a shared
  host the ratio moves less with the load than the milliseconds do;
- find_tools recall, on probes (a fresh session: the task's question, then one find_tools call):
  with the agent's own `route` query, the tools it called next (first use) among the 5 found or
  already forwarded; with the user's question, each of the task's tools. A pair whose query holds
  the tool's name is left out (counted).

Split: every 4th task (the 4th, 8th, … of tasks.jsonl) is held out: settings were chosen on the
others (`--split dev`) and the held-out ones were run once, at the end (`--split held-out`).

Targets (issue 45): available >= 0.90, <= 12 tools per step, <= 1 non-append change per 5 steps,
selection p50 <= 3 ms. Figures only; nothing is asserted on time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import pct, start_fake, start_proxy
from _load import HEADERS

from ctxwarden.policies.tools.config import ToolsConfig
from ctxwarden.policies.tools.search import FIND_TOOLS

DATA = Path(__file__).resolve().parent / "data" / "mcp_catalog"
MODEL = "gpt-4o"
SYSTEM = ("You are an agent that helps users with daily tasks using the tools of many MCP servers. Use the tools to "
          "get accurate, up-to-date information and to work with files; answer once, completely.")
QUICK_TASKS = 8
HELD_OUT_EVERY = 4
_SELECTION = re.compile(r'^ctxwarden_policy_duration_seconds_(sum|count)\{([^}]*)\} (\S+)$', re.MULTILINE)


def load() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(the catalog as chat-completions tools, its servers, the tasks)."""
    servers = json.loads((DATA / "catalog.json").read_text())["servers"]
    tools = [{"type": "function", "function": {"name": t["call_name"], "description": t["description"],
                                               "parameters": t["input_schema"]}}
             for s in servers for t in s["tools"]]
    tasks = [json.loads(line) for line in (DATA / "tasks.jsonl").read_text().splitlines() if line.strip()]
    return tools, servers, tasks


def split(tasks: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """dev: the tasks settings are chosen on; held-out: every HELD_OUT_EVERY-th, run once at the end."""
    if name == "all":
        return tasks
    held = [k % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 for k in range(len(tasks))]
    return [t for t, h in zip(tasks, held) if h == (name == "held-out")]


def agent_words(route_query: str) -> str:
    """A `route` query as the agent wrote it, less the Copilot's `server:` / `tool:` labels."""
    lines = [re.sub(r"^\s*(server|tool)\s*:\s*", "", line) for line in route_query.splitlines()]
    return ". ".join(line.strip() for line in lines if line.strip())


def holds_name(query: str, call_name: str) -> bool:
    """The query names the tool (its own name, with `_`/`-` as spaces or not)."""
    bare = call_name.split("__")[-1].lower()
    q = query.lower()
    return bare in q or bare.replace("_", " ").replace("-", " ") in q.replace("_", " ").replace("-", " ")


def tool_names(body: dict[str, Any]) -> list[str]:
    return [(t.get("function") or {}).get("name") for t in body.get("tools") or []]


def miss_line(where: str, tool: str, shown: set[str], searches: int, listed: set[str]) -> str:
    """A call whose tool was not available, and what the step knew: whether the session's list held
    it before (dropped since), the step's find_tools calls, whether its server was in the list."""
    before = "listed before" if tool in shown else "never listed"
    server = "in" if tool.split("__")[0] in {x.split("__")[0] for x in listed} else "not in"
    return f"{where}: {tool} ({before}; {searches} searches; its server {server} the list)"


def searched(body: dict[str, Any]) -> list[str]:
    """Tool names listed by the last find_tools answer in a request (its `- name: …` lines)."""
    for m in reversed(body.get("messages") or []):
        if m.get("role") == "tool":
            text = m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
            return [line[2:].split(":", 1)[0] for line in text.splitlines() if line.startswith("- ")]
    return []


def floor_ms(tools: list[dict[str, Any]]) -> float:
    """ms to serialize a tool list and hash it: the trivial same-run floor the selection time is compared with."""
    start = time.perf_counter()
    hashlib.sha256(json.dumps(tools).encode()).hexdigest()
    return (time.perf_counter() - start) * 1000


@dataclass
class Tally:
    needed: int = 0
    forwarded: int = 0
    available: int = 0
    tasks: int = 0  # tasks with at least one call
    tasks_all: int = 0
    steps: int = 0
    tools: list[int] = field(default_factory=list)
    catalog_tools: list[int] = field(default_factory=list)  # the same, the client's tools only
    upstream: int = 0
    changes: int = 0
    client_changes: int = 0  # the same, the proxy's own tools (find_tools, context_recall) left out of both lists
    searches: int = 0
    answered_by_proxy: int = 0  # client requests the proxy answered without a scripted upstream round
    calls_left_out: int = 0  # the calls of those requests (another policy answered: not a tools figure)
    cold_requests: int = 0  # warm-up requests before the selection first filtered the catalog
    cold_s: float = 0.0
    desync: int = 0  # client requests whose answer was not the trajectory's calls
    selection_ms: list[float] = field(default_factory=list)  # the replay's requests
    floor_ms: list[float] = field(default_factory=list)  # the floor, once after each of those requests
    probe_ms: list[float] = field(default_factory=list)  # the probes' (one request each, a new session)
    agent_pairs: int = 0
    agent_hits: int = 0
    agent_named: int = 0
    user_pairs: int = 0
    user_hits: int = 0
    user_named: int = 0
    misses: list[str] = field(default_factory=list)  # one line per call whose tool was not available (--misses)


class Bench:
    def __init__(self, proxy: str, fake: str, catalog: list[dict[str, Any]], client: httpx.Client,
                 max_searches: int) -> None:
        self.proxy, self.fake, self.catalog, self.client = proxy, fake, catalog, client
        # find_tools calls the proxy answers in one request (its max_inner_rounds): past them it stops
        # answering them, so the replay sends at most this many a step
        self.max_searches = max_searches
        self.tally = Tally()
        self.names = [t["function"]["name"] for t in catalog]
        self._seen_ms = (0.0, 0)

    # ------------------------------------------------------------------ plumbing

    def selection_ms(self) -> float | None:
        """ms the tools policy's on_request took since the last call (from /metrics), None if it did not run once."""
        text = self.client.get(f"{self.proxy}/metrics").text
        total, count = 0.0, 0
        for kind, labels, value in _SELECTION.findall(text):
            if 'policy="tools"' in labels and 'hook="on_request"' in labels:
                if kind == "sum":
                    total += float(value)
                else:
                    count += int(float(value))
        before_total, before_count = self._seen_ms
        self._seen_ms = (total, count)
        return (total - before_total) * 1000 if count - before_count == 1 else None

    def ask(self, session: str, messages: list[dict[str, Any]], script: list[dict[str, Any]]) -> tuple[dict, list[dict]]:
        """One client request through the proxy with the whole catalog; (its answer message, the upstream bodies)."""
        self.client.post(f"{self.fake}/_reset").raise_for_status()
        self.client.post(f"{self.fake}/_script", json=script).raise_for_status()
        body = {"model": MODEL, "messages": messages, "tools": self.catalog}
        response = self.client.post(f"{self.proxy}/v1/chat/completions", content=json.dumps(body).encode(),
                                    headers={**HEADERS, "x-ctxwarden-session": session})
        response.raise_for_status()
        upstream = [r["body"] for r in self.client.get(f"{self.fake}/_received").json() if r["path"].endswith("chat/completions")]
        ms = self.selection_ms()
        if ms is not None:
            self.tally.selection_ms.append(ms)
            self.tally.floor_ms.append(floor_ms(self.catalog))
        return response.json()["choices"][0]["message"], upstream

    # ------------------------------------------------------------------ the replay

    def replay(self, task: dict[str, Any]) -> None:
        t = self.tally
        session = f"mcp-bench:{task['id']}"
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task["question"]}]
        previous: list[str] | None = None
        own = set(self.names)
        pending: list[str] = []
        shown: set[str] = set()  # every tool the session's lists held so far
        missed = False
        calls_in_task = 0
        turns = [*task["turns"], None]  # None: the last step, the answer
        for n, turn in enumerate(turns):
            if turn is not None:
                pending += [agent_words(q) for q in turn["route"]]
                if not turn["calls"]:
                    continue  # a turn of searches only: its queries go with the next turn's calls
            queries = pending[-self.max_searches:] if turn is not None else []
            pending = []
            script = [{"tool_calls": [{"name": FIND_TOOLS, "arguments": json.dumps({"query": q})}]} for q in queries]
            if turn is None:
                script.append({"content": task.get("answer") or "Done."})
            else:
                script.append({"content": turn["say"] or None,
                               "tool_calls": [{"name": c["tool"], "arguments": json.dumps(c["arguments"])} for c in turn["calls"]]})
            answer, upstream = self.ask(session, messages, script)
            t.steps += 1
            t.searches += len(queries)
            if not upstream:
                t.answered_by_proxy += 1
            else:
                t.tools.append(len(tool_names(upstream[0])))
                t.catalog_tools.append(len([x for x in tool_names(upstream[0]) if x in own]))
            for body in upstream:
                names = tool_names(body)
                if previous is not None and names[: len(previous)] != previous:
                    t.changes += 1
                    theirs, before = [x for x in names if x in own], [x for x in previous if x in own]
                    t.client_changes += theirs[: len(before)] != before
                previous = names
                t.upstream += 1
            if turn is None:
                break
            first = set(tool_names(upstream[0])) if upstream else set()
            last = set(tool_names(upstream[-1])) if upstream else set()
            got = [c["function"]["name"] for c in answer.get("tool_calls") or []]
            if upstream and got != [c["tool"] for c in turn["calls"]]:
                t.desync += 1
            for c in turn["calls"] if upstream else ():
                calls_in_task += 1
                t.needed += 1
                t.forwarded += c["tool"] in first
                t.available += c["tool"] in last
                missed |= c["tool"] not in last
                if c["tool"] not in last:
                    t.misses.append(miss_line(f"{task['id'][:8]} step {n}", c["tool"], shown, len(queries), last))
            shown |= {x for body in upstream for x in tool_names(body)}
            # The history as the agent keeps it: its turn (the trajectory's calls) and their real results.
            ids = [f"call_{n}_{i}" for i in range(len(turn["calls"]))]
            messages = [*messages, {"role": "assistant", "content": turn["say"] or None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": c["tool"], "arguments": json.dumps(c["arguments"])}}
                for i, c in zip(ids, turn["calls"])]}]
            if not upstream:
                t.calls_left_out += len(turn["calls"])
            messages += [{"role": "tool", "tool_call_id": i, "content": c["result"] or "(no output)"} for i, c in zip(ids, turn["calls"])]
        if calls_in_task:
            t.tasks += 1
            t.tasks_all += not missed

    def warm_up(self, limit: int = 30) -> None:
        """Requests with the catalog (a session of their own, not counted) until the selection filters it:
        the first requests of a cold proxy embed the catalog within tools.budget_ms and forward every tool."""
        start = time.perf_counter()
        for k in range(limit):
            _, upstream = self.ask("mcp-bench:warm-up", [{"role": "system", "content": SYSTEM},
                                                          {"role": "user", "content": "What can you do?"}], [{"content": "ok"}])
            if upstream and len(tool_names(upstream[0])) < len(self.catalog):
                break
            self.tally.cold_requests += 1
        self.tally.cold_s = time.perf_counter() - start
        self.tally.selection_ms.clear()
        self.tally.floor_ms.clear()

    # ------------------------------------------------------------------ find_tools probes

    def probe(self, session: str, question: str, query: str) -> set[str]:
        """Tools the model has after one find_tools call with `query`: those forwarded plus those found."""
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        script = [{"tool_calls": [{"name": FIND_TOOLS, "arguments": json.dumps({"query": query})}]}, {"content": "ok"}]
        _, upstream = self.ask(session, messages, script)
        if not upstream:
            return set()
        return set(tool_names(upstream[0])) | set(searched(upstream[-1]))

    def probes(self, task: dict[str, Any]) -> None:
        t = self.tally
        used: set[str] = set()
        route: list[str] = []
        pairs: list[tuple[str, str]] = []  # (query, tool first called after it)
        for turn in task["turns"]:
            route += [agent_words(q) for q in turn["route"]]
            new = [c["tool"] for c in turn["calls"] if c["tool"] not in used]
            if route and new:
                pairs += [(route[-1], tool) for tool in dict.fromkeys(new)]
                route = []
            used |= {c["tool"] for c in turn["calls"]}
        for k, query in enumerate(dict.fromkeys(q for q, _ in pairs)):
            targets = [tool for q, tool in pairs if q == query]
            named = [tool for tool in targets if holds_name(query, tool)]
            t.agent_named += len(named)
            targets = [tool for tool in targets if tool not in named]
            if targets:
                have = self.probe(f"mcp-probe:{task['id']}:agent:{k}", task["question"], query)
                t.agent_pairs += len(targets)
                t.agent_hits += sum(tool in have for tool in targets)
        targets = list(used)
        named = [tool for tool in targets if holds_name(task["question"], tool)]
        t.user_named += len(named)
        targets = [tool for tool in targets if tool not in named]
        if targets:
            have = self.probe(f"mcp-probe:{task['id']}:user", task["question"], task["question"])
            t.user_pairs += len(targets)
            t.user_hits += sum(tool in have for tool in targets)


def report(t: Tally, servers: int, tools: int, tasks: int, seconds: float, misses: bool = False) -> None:
    ms = t.selection_ms or [float("nan")]
    floor = t.floor_ms or [float("nan")]
    per5 = t.changes / t.steps * 5 if t.steps else float("nan")
    rows = [
        ("needed tools available when needed (share of calls)", f"{t.available / t.needed:.3f}", ">= 0.90",
         t.available / t.needed >= 0.90),
        ("  of which forwarded by the selection alone", f"{t.forwarded / t.needed:.3f}", "", None),
        ("tasks with all their tools available", f"{t.tasks_all / t.tasks:.3f} ({t.tasks_all}/{t.tasks})", "", None),
        ("tools forwarded per step (mean; max)", f"{statistics.mean(t.tools):.2f}; {max(t.tools)}", "<= 12",
         statistics.mean(t.tools) <= 12),
        ("  the client's tools only (no find_tools, context_recall)", f"{statistics.mean(t.catalog_tools):.2f}", "", None),
        ("non-append list changes per 5 steps", f"{per5:.3f} ({t.changes} in {t.steps} steps)", "<= 1", per5 <= 1),
        ("  the same, the proxy's own tools left out of the lists", f"{t.client_changes / t.steps * 5:.3f} ({t.client_changes})",
         "", None),
        ("selection ms p50 (p95)", f"{statistics.median(ms):.2f} ({pct(ms, 95):.2f})", "<= 3", statistics.median(ms) <= 3),
        ("  p50 / the floor's p50 (JSON + SHA-256 of the tool list)",
         f"{statistics.median(ms) / statistics.median(floor):.1f}x ({statistics.median(floor):.2f} ms)", "", None),
        ("find_tools recall, agent's route query -> next new tool",
         f"{t.agent_hits / max(1, t.agent_pairs):.3f} ({t.agent_hits}/{t.agent_pairs}; {t.agent_named} named, left out)", "", None),
        ("find_tools recall, user's question -> each task tool",
         f"{t.user_hits / max(1, t.user_pairs):.3f} ({t.user_hits}/{t.user_pairs}; {t.user_named} named, left out)", "", None),
    ]
    print(f"\nMCP catalog (LiveMCPBench): {servers} servers, {tools} tools in every request; {tasks} tasks, "
          f"{t.steps} client steps, {t.needed} calls, {t.searches} find_tools calls in the replay, "
          f"{t.upstream} upstream requests; {seconds:.0f} s")
    print(f"{'figure':58s} {'value':>34s}  {'target':>8s}")
    for label, value, target, ok in rows:
        mark = "" if ok is None else ("  met" if ok else "  NOT met")
        print(f"{label:58s} {value:>34s}  {target:>8s}{mark}")
    print(f"load average (1, 5, 15 min) at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"cold start: {t.cold_requests} warm-up requests ({t.cold_s:.1f} s) forwarded all {tools} tools (tools.budget_ms) "
          f"before the catalog was embedded; the figures above are after it")
    print(f"steps answered by the proxy itself (another policy, e.g. loops): {t.answered_by_proxy}, their "
          f"{t.calls_left_out} calls left out of 'available'; answers not the trajectory's calls: {t.desync}")
    if misses:
        print(f"\nmisses ({len(t.misses)}):", *t.misses, sep="\n  ")
    if t.probe_ms:
        print(f"selection ms on the probes (a new session each): p50 {statistics.median(t.probe_ms):.2f}, "
              f"p95 {pct(t.probe_ms, 95):.2f}")


def run(tasks: list[dict[str, Any]], catalog: list[dict[str, Any]], servers: int, config: dict | None = None,
        probes: bool = True) -> Tally:
    fake, fake_url = start_fake()
    proxy, proxy_url = None, None
    try:
        proxy, proxy_url = start_proxy(fake_url, config or {})
        with httpx.Client(timeout=300) as client:
            tools = ((config or {}).get("policies") or {}).get("tools") or {}
            bench = Bench(proxy_url, fake_url, catalog, client,
                          tools.get("max_inner_rounds", ToolsConfig().max_inner_rounds))
            bench.selection_ms()
            bench.warm_up()
            if probes:  # first: the replay's calls teach the usage statistics, which would flatter the probes
                for task in tasks:
                    bench.probes(task)
            probe_ms, bench.tally.selection_ms = bench.tally.selection_ms, []
            bench.tally.floor_ms = []  # the floor of the replay's requests only, like the figure it is compared with
            for task in tasks:
                bench.replay(task)
            bench.tally.probe_ms = probe_ms
            return bench.tally
    finally:
        if proxy is not None:
            proxy.stop()
        fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TASKS} tasks spread over the set")
    parser.add_argument("--tasks", type=int, default=0, help="first N tasks only (0: all)")
    parser.add_argument("--misses", action="store_true", help="list each call whose tool was not available, and why")
    parser.add_argument("--split", choices=["dev", "held-out", "all"], default="all",
                        help="dev: the tasks settings were chosen on; held-out: every 4th task, kept for the end")
    parser.add_argument("--config", default="", help="YAML or JSON the server's config is made from, e.g. "
                        "'{policies: {tools: {search_reader: none}}}' to try a setting")
    args = parser.parse_args()
    catalog, servers, tasks = load()
    tasks = split(tasks, args.split)
    if args.quick:
        tasks = tasks[:: max(1, len(tasks) // QUICK_TASKS)][:QUICK_TASKS]
    elif args.tasks:
        tasks = tasks[: args.tasks]
    start = time.perf_counter()
    tally = run(tasks, catalog, len(servers), yaml.safe_load(args.config) if args.config else None)
    report(tally, len(servers), len(catalog), len(tasks), time.perf_counter() - start, args.misses)


if __name__ == "__main__":
    main()
