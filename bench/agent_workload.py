"""Tool results for bench/agent_loop.py: JSON records, logs, code files and prose, with planted facts.

Seeded and synthetic (nothing here is read by the proxy or tuned against): each generator makes
a result of about the requested size in the shape real agent tools return, and can plant one fact
(an id and a value only that result holds) at a random place inside it. Questions name the key
(order id, worker, constant, cluster) in ordinary words, as an agent asking later would.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass
from itertools import count
from typing import Any, Callable, Iterator

# Characters per token (tiktoken, measured on each generator's output), so a result asked for N tokens has about N.
CHARS_PER_TOKEN = {"search_orders": 2.42, "read_logs": 2.45, "read_file": 3.7, "fetch_doc": 5.5}


def _tool(name: str, description: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}


TOOLS = [
    _tool("search_orders", "Search the order database; returns matching order records as JSON."),
    _tool("read_logs", "Read the checkout service logs for a time range."),
    _tool("read_file", "Read a source file from the checkout repository."),
    _tool("fetch_doc", "Fetch a runbook or design document page."),
]


def _code(rng: random.Random, n: int = 6) -> str:
    return "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(n))


@dataclass
class Fact:
    kind: str  # the tool whose result holds it
    key: str  # what names it (an order id, a worker, a constant, a cluster)
    question: str
    answer: str

    @classmethod
    def plant(cls, rng: random.Random, kind: str) -> "Fact":
        answer = f"{_code(rng, 3)}-{_code(rng, 4)}"
        if kind == "search_orders":
            key = f"ORD-{rng.randint(100000, 999999)}"
            return cls(kind, key, f"What is the tracking code of order {key}?", answer)
        if kind == "record":  # planted in a real result (bench/livemcp_workload.py)
            key = f"REF-{rng.randint(100000, 999999)}"
            return cls(kind, key, f"What is the confirmation code for reference {key}?", answer)
        if kind == "read_logs":
            key = f"worker-{rng.randint(100, 999)}"
            return cls(kind, key, f"Which error code did {key} report in the checkout logs?", answer)
        if kind == "read_file":
            key = f"{rng.choice(['RETRY', 'GATEWAY', 'LEDGER', 'FRAUD', 'CART'])}_{rng.choice(['SALT', 'TOKEN', 'SEED', 'KEY'])}_{rng.randint(10, 99)}"
            return cls(kind, key, f"What value is the constant {key} set to in the code?", answer)
        key = f"cluster {rng.choice(['atlas', 'borealis', 'cygnus', 'draco', 'eridani'])}-{rng.randint(10, 99)}"
        return cls(kind, key, f"What is the maintenance ticket for {key} according to the runbook?", answer)


@dataclass
class Step:
    """What the scripted model does at one step of bench/agent_loop.py, and what the client sends back."""

    call: dict[str, Any]  # ScriptedModel.next_call: a tool call, or {"final": text} for a text answer
    # The tool result, given the run's rng and whether to plant a fact in it: (the fact or None, the text).
    result: Callable[[random.Random, bool], tuple[Fact | None, str]] | None = None
    user: str | None = None  # after a text answer: the next user message


SYSTEM = "You are an operations agent. Use the tools to investigate; cite ids and values exactly."
TASK = "Investigate last week's checkout failures across orders, logs, code and runbooks, and report what you find."


class SyntheticWorkload:
    """One task, a tool call every step, results of 300-4,000 tokens of the four kinds above."""

    system, tools = SYSTEM, TOOLS

    def session(self, rng: random.Random, run: int, facts: list[Fact]) -> tuple[str, Iterator[Step]]:
        return TASK, self._steps(rng, run, facts)

    @staticmethod
    def _steps(rng: random.Random, run: int, facts: list[Fact]) -> Iterator[Step]:
        for step in count():
            name = TOOLS[rng.randrange(len(TOOLS))]["function"]["name"]
            say = rng.choice(["Checking the next source.", "Let me look at this.", ""])
            if facts and rng.random() < 0.3:  # agents name what they look at: a later message mentions a planted id
                say = f"Following up on {facts[-1].key} from earlier."
            call = {"id": f"call_{run}_{step}", "name": name, "arguments": {"query": f"step {step}"}, "say": say}
            yield Step(call, result=lambda rng, with_fact, name=name: _synthetic(rng, name, with_fact))


def _synthetic(rng: random.Random, kind: str, with_fact: bool) -> tuple[Fact | None, str]:
    tokens = rng.randint(300, 4000)
    fact = Fact.plant(rng, kind) if with_fact else None
    return fact, make_result(rng, kind, tokens, fact)


def make_result(rng: random.Random, kind: str, tokens: int, fact: Fact | None) -> str:
    chars = int(tokens * CHARS_PER_TOKEN[kind])
    return {"search_orders": _orders, "read_logs": _logs, "read_file": _source, "fetch_doc": _prose}[kind](rng, chars, fact)


STATUSES = ["shipped", "pending", "cancelled", "refunded", "delivered", "on_hold"]
CITIES = ["Lyon", "Osaka", "Denver", "Porto", "Gdansk", "Leeds", "Austin", "Turin", "Busan", "Quito"]


def _orders(rng: random.Random, chars: int, fact: Fact | None) -> str:
    records = []
    size = 0
    while size < chars:
        record = {"id": f"ORD-{rng.randint(100000, 999999)}", "customer": f"CUST-{rng.randint(1000, 9999)}",
                  "status": rng.choice(STATUSES), "amount": round(rng.uniform(5, 900), 2), "currency": "EUR",
                  "city": rng.choice(CITIES), "tracking": f"{_code(rng, 3)}-{_code(rng, 4)}",
                  "created": f"2026-0{rng.randint(1, 9)}-{rng.randint(10, 28)}T{rng.randint(10, 23)}:{rng.randint(10, 59)}:00Z"}
        records.append(record)
        size += len(json.dumps(record)) + 2
    if fact:
        spot = records[rng.randrange(3, len(records))] if len(records) > 3 else records[-1]
        spot["id"], spot["tracking"] = fact.key, fact.answer
    return json.dumps({"total": len(records), "page": 1, "results": records}, indent=1)


LOG_LINES = [
    "INFO  http GET /api/health 200 in {n} ms",
    "INFO  http POST /api/cart/{n}/items 201 in {n} ms",
    "DEBUG pool connections active={n} idle={n}",
    "INFO  scheduler tick {n} jobs queued",
]


def _logs(rng: random.Random, chars: int, fact: Fact | None) -> str:
    lines = []
    size = 0
    while size < chars:
        stamp = f"2026-11-1{rng.randint(0, 9)}T{rng.randint(10, 23)}:{rng.randint(10, 59)}:{rng.randint(10, 59)}Z"
        if rng.random() < 0.03:
            line = f"{stamp} WARN  worker-{rng.randint(100, 999)} slow response from payments in {rng.randint(900, 3000)} ms"
        else:
            line = f"{stamp} " + rng.choice(LOG_LINES).replace("{n}", str(rng.randint(1, 99)))
        lines.append(line)
        size += len(line) + 1
    if fact:
        stamp = f"2026-11-1{rng.randint(0, 9)}T{rng.randint(10, 23)}:{rng.randint(10, 59)}:00Z"
        lines.insert(rng.randrange(len(lines)), f"{stamp} ERROR {fact.key} checkout failed: payment declined, error code {fact.answer}")
    return "\n".join(lines)


def _source(rng: random.Random, chars: int, fact: Fact | None) -> str:
    parts = ["import logging\nimport time\nfrom decimal import Decimal\n\nlog = logging.getLogger(__name__)\n"]
    size = len(parts[0])
    i = 0
    while size < chars:
        name = f"{rng.choice(['compute', 'apply', 'load', 'check', 'render'])}_{rng.choice(['cart', 'tax', 'fee', 'quote', 'line'])}_{i}"
        body = (f"\n\ndef {name}(order, rate=Decimal(\"0.{rng.randint(10, 99)}\")):\n"
                f"    \"\"\"{rng.choice(['Apply the rate.', 'Check the limits.', 'Load the record.'])}\"\"\"\n"
                f"    total = sum(line.amount for line in order.lines)\n"
                f"    if total > {rng.randint(100, 999)}:\n        log.info(\"large order %s\", order.id)\n"
                f"    return total * rate\n")
        parts.append(body)
        size += len(body)
        i += 1
    if fact:
        parts.insert(rng.randrange(1, len(parts)), f"\n\n{fact.key} = \"{fact.answer}\"  # rotated by ops\n")
    return "".join(parts)


SENTENCES = [
    "The checkout service runs in three regions behind a shared load balancer.",
    "Deployments happen twice a week after the integration suite passes.",
    "On-call engineers should check the payment provider status page first.",
    "Database failover is automatic but takes up to ninety seconds.",
    "Caches are warmed from the previous day's traffic before each release.",
    "Rollbacks use the previous container image and keep the schema unchanged.",
    "Alerts fire when the error rate passes two percent for five minutes.",
    "Customer support escalations go through the incident channel.",
]


def _prose(rng: random.Random, chars: int, fact: Fact | None) -> str:
    sentences = []
    size = 0
    while size < chars:
        s = rng.choice(SENTENCES)
        sentences.append(s)
        size += len(s) + 1
    if fact:
        sentences.insert(rng.randrange(len(sentences)), f"Maintenance for {fact.key} is tracked under ticket {fact.answer}.")
    paragraphs = [" ".join(sentences[i:i + 5]) for i in range(0, len(sentences), 5)]
    return "\n\n".join(paragraphs)
