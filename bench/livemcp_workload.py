"""Real agent steps for `bench/agent_loop.py --workload livemcp`: calls and tool results nobody here wrote.

The steps come from LiveMCPBench's trajectories (Claude Sonnet 4 working 95 tasks through the
benchmark's MCP Copilot agent, Apache-2.0; bench/data/mcp_catalog/, extracted by build_loop.py): the
agent's two tools (`route` searches a catalog of 525 MCP tools, `execute-tool` runs one), what it
said, its calls with their real arguments, and the results it got back, as they were: catalog
matches in YAML, web pages, search results, file listings, API JSON, error messages. Results are
replayed unchanged except the 30 that carry a planted fact (one sentence inserted at a line or
word break), so the bench can ask about them afterwards.

One run is one long session: the tasks in a seeded order, each opened by its question as a user
message, its tool steps in their real order, and closed by the agent's real final answer; then the
next task. `min_tokens` keeps only the steps whose result is at least that many tokens (the issue's
stress range starts at 300; the real mix has a median of ~200).
"""

from __future__ import annotations

import gzip
import json
import random
from itertools import count
from pathlib import Path
from typing import Any, Callable, Iterator

from agent_workload import Fact, Step

DATA = Path(__file__).resolve().parent / "data" / "mcp_catalog" / "loop_steps.jsonl.gz"


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


# MCP Copilot's two tools, as its system prompt describes them (the trajectories do not carry their schemas).
TOOLS = [
    _tool("route", "Search a large toolset for tools relevant to a need; returns matching servers and tools with their input schemas.",
          {"query": {"type": "string", "description": "<tool_assistant>server: ...\\ntool: ...</tool_assistant>"}}, ["query"]),
    _tool("execute-tool", "Invoke a tool found with route, on its server, with its parameters.",
          {"server_name": {"type": "string"}, "tool_name": {"type": "string"}, "params": {"type": "object"}},
          ["server_name", "tool_name"]),
]


def load(min_tokens: int, tokens_of: Callable[[str], int]) -> list[dict[str, Any]]:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        tasks = [json.loads(line) for line in f if line.strip()]
    for task in tasks:
        task["steps"] = [s for s in task["steps"] if tokens_of(s["result"]) >= min_tokens]
    return [t for t in tasks if t["steps"]]


def plant(rng: random.Random, text: str, fact: Fact) -> str:
    """The fact's sentence inserted at a line break (or, in a one-line result, a word break)."""
    sentence = f"Confirmation code for reference {fact.key}: {fact.answer}."
    breaks = [i for i, ch in enumerate(text) if ch == "\n"] or [i for i, ch in enumerate(text) if ch == " "] or [len(text)]
    at = rng.choice(breaks)
    sep = "\n" if text[at:at + 1] == "\n" else " "
    return f"{text[:at]}{sep}{sentence}{text[at:]}"


class LiveMCPWorkload:
    def __init__(self, tasks: list[dict[str, Any]]) -> None:
        self.tasks = tasks
        self.system = tasks[0]["system"]
        self.tools = TOOLS

    def session(self, rng: random.Random, run: int, facts: list[Fact]) -> tuple[str, Iterator[Step]]:
        """The first user message, and the steps after it (endless: the task order wraps around)."""
        order = list(self.tasks)
        rng.shuffle(order)
        return order[0]["question"], self._steps(order, run)

    def _steps(self, order: list[dict[str, Any]], run: int) -> Iterator[Step]:
        n = 0
        for i in count():
            task, following = order[i % len(order)], order[(i + 1) % len(order)]
            for s in task["steps"]:
                n += 1
                try:
                    arguments = json.loads(s["arguments"])
                except ValueError:
                    arguments = {"raw": s["arguments"]}
                call = {"id": f"call_{run}_{n}", "name": s["name"], "arguments": arguments, "say": s["say"]}
                yield Step(call, result=lambda rng, with_fact, text=s["result"]: _result(rng, text, with_fact))
            yield Step({"final": task["answer"] or "Done."}, user=following["question"])


def _result(rng: random.Random, text: str, with_fact: bool) -> tuple[Fact | None, str]:
    if not with_fact:
        return None, text
    fact = Fact.plant(rng, "record")
    return fact, plant(rng, text, fact)
