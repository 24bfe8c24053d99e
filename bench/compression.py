"""Compression figures for the `history` and `archive` policies (prints them; asserts nothing).

    .venv/bin/python bench/compression.py [--conversations 30] [--seed 7]

Conversations are generated from public data: MetaTool's multi-tool queries (two tools each) are
the user turns, MetaTool's tool descriptions feed verbose tool results, and a user profile (name,
company, budget, deadline, preference) plus decisions are stated early. Figures:
- token reduction and compression ratio (summarized span tokens / summary tokens);
- retention: the share of early facts (names, numbers, decisions) still present, verbatim, in the
  forwarded context (extractive mode; LLM mode needs a model, so it is not measured offline);
- policy latency p95 on a 200-message conversation (no LLM call), cold and steady state;
- scratchpad write/read p95 (request path: memory) and Chroma persist/read p95.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctxwarden.policies.base import BudgetNote, Exchange, Services  # noqa: E402
from ctxwarden.policies.history.archive import ArchiveConfig, ArchivePolicy  # noqa: E402
from ctxwarden.policies.history.blocks import summary_sections  # noqa: E402
from ctxwarden.policies.history.policy import HistoryConfig, HistoryPolicy  # noqa: E402
from ctxwarden.policies.history.scratchpad import Scratchpad  # noqa: E402
from ctxwarden.policies.messages import content_text  # noqa: E402
from ctxwarden.policies.text.tokens import TiktokenCounter  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "metatool"

FIRST = ["Priya", "Mateo", "Aiko", "Jonas", "Fatima", "Liam", "Chen", "Olga", "Kwame", "Sofia", "Rahul", "Ingrid"]
LAST = ["Raman", "Fernandez", "Tanaka", "Becker", "Haddad", "O'Neill", "Wei", "Petrova", "Mensah", "Rossi", "Iyer", "Lund"]
COMPANIES = ["Northwind Traders", "Contoso Labs", "Fabrikam Health", "Tailspin Toys", "Adventure Works", "Litware Media"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "September", "October", "November"]
PREFERENCES = ["bullet points", "metric units", "open-source tools", "European vendors", "weekly summaries", "no paid APIs"]
FILLER = [
    "This result was compiled from several sources and may be updated as new information becomes available.",
    "The provider notes that availability can vary by region and by the time of the request.",
    "Additional details are included for completeness and can be ignored if they are not relevant.",
    "Results are ranked by a relevance model that takes popularity and freshness into account.",
    "Please verify important figures against the original source before acting on them.",
]
ASSISTANT_FILLER = [
    "Sure, I can help with that.", "Great question!", "Let me look into this for you.",
    "I'll check the relevant tools now.", "Here is what I found.", "I hope this helps.",
    "Let me know if you need anything else.", "Happy to help with the next step.",
]


@dataclass
class Fact:
    text: str
    kind: str  # name | number | decision
    message: int  # index in the conversation where it is stated


def load_data() -> tuple[list[dict[str, Any]], dict[str, str]]:
    queries = json.loads((DATA / "multi_tool_queries.json").read_text())
    tools = json.loads((DATA / "tools.json").read_text())
    return queries, tools


def _tool_result(rng: random.Random, tool: str, description: str, query: str) -> tuple[str, str, str, str]:
    """A verbose JSON tool result; returns (json, top id, top value, the runner-up's value: a detail
    nobody restates, kept only if the summary keeps tool details)."""
    items = []
    for i in range(5):
        items.append({
            "id": f"{tool[:3].upper()}-{rng.randint(10000, 99999)}",
            "title": f"{tool} result {i + 1} for {' '.join(query.split()[:4])}",
            "snippet": f"{description} " + " ".join(rng.sample(FILLER, 3)),
            "score": round(rng.uniform(0.5, 0.99), 2),
            "value": round(rng.uniform(10, 5000), 2),
            "url": f"https://example.org/{tool.lower()}/{rng.randint(1000, 9999)}",
        })
    items.sort(key=lambda x: -x["score"])
    result = {"tool": tool, "query": query, "results": items, "total": len(items),
              "latency_ms": rng.randint(40, 900), "notes": " ".join(rng.sample(FILLER, 2))}
    return json.dumps(result), items[0]["id"], f"{items[0]['value']:,}", str(items[1]["value"])


PROFILE_TEMPLATES = [  # (sentence, fact kind); facts are stated once, early, in varied words
    ("My name is {name}.", "name"), ("Call me {first}, I'm at {company}.", "name"),
    ("I work for {company}.", "name"), ("We can spend at most {budget} on this.", "number"),
    ("Our budget is {budget}.", "number"), ("It has to be done by {deadline}.", "number"),
    ("The deadline is {deadline}.", "number"), ("{pref_cap} work best for me.", "decision"),
    ("I'd like {pref} where possible.", "decision"),
]
DECISION_TEMPLATES = [
    "Let's go with {a} and drop {b}.", "{a} looks right, use that one.", "Pick {a} please, not {b}.",
    "We'll take {b} instead of {a}.", "Skip {a}; {b} is the better fit.",
]


def _profile_messages(rng: random.Random) -> tuple[list[str], list[tuple[str, str]]]:
    """Two user messages stating the profile in varied words; returns the texts and (fact, kind) pairs."""
    first, last = rng.choice(FIRST), rng.choice(LAST)
    v = {"name": f"{first} {last}", "first": first, "company": rng.choice(COMPANIES),
         "budget": f"${rng.randint(2, 90)},{rng.randint(100, 999)}",
         "deadline": f"{rng.choice(MONTHS)} {rng.randint(2, 28)}", "pref": rng.choice(PREFERENCES)}
    v["pref_cap"] = v["pref"][0].upper() + v["pref"][1:]
    name_t = PROFILE_TEMPLATES[rng.choice([0, 1])]
    picked = [
        (name_t[0], [(v["name"] if "{name}" in name_t[0] else v["first"], "name")] + ([(v["company"], "name")] if "{company}" in name_t[0] else [])),
        (PROFILE_TEMPLATES[2][0], [(v["company"], "name")]),
        (PROFILE_TEMPLATES[rng.choice([3, 4])][0], [(v["budget"], "number")]),
        (PROFILE_TEMPLATES[rng.choice([5, 6])][0], [(v["deadline"], "number")]),
        (PROFILE_TEMPLATES[rng.choice([7, 8])][0], [(v["pref"], "decision")]),
    ]
    sentences = [t.format(**v) for t, _ in picked]
    facts = [f for _, fs in picked for f in fs]
    cut = rng.randint(2, 3)
    return ["Hi! " + " ".join(sentences[:cut]), " ".join(sentences[cut:]) + " Thanks in advance!"], facts


def build_conversation(rng: random.Random, queries: list, tools: dict[str, str], n_messages: int) -> tuple[list[dict], list[Fact]]:
    tool_desc = {k.lower(): v for k, v in tools.items()}
    msgs: list[dict] = [{"role": "system", "content": "You are a research agent. Use the tools to answer; be precise."}]
    facts: list[Fact] = []
    texts, profile = _profile_messages(rng)
    for i, text in enumerate(texts):
        msgs.append({"role": "user", "content": text})
        facts += [Fact(f, k, len(msgs) - 1) for f, k in profile if f.lower() in text.lower()]
        msgs.append({"role": "assistant", "content": "Thanks, noted. What else should I know?" if i == 0
                     else "Got it. " + rng.choice(ASSISTANT_FILLER[6:])})
    call = 0
    task = 0
    while len(msgs) < n_messages - 1:
        q = rng.choice(queries)
        query, pair = q["query"].strip('"'), q["tool"]
        msgs.append({"role": "user", "content": query})
        parallel = rng.random() < 0.5
        calls = [{"id": f"call_{call + i}", "type": "function",
                  "function": {"name": t, "arguments": json.dumps({"query": query[:80], "limit": 5})}} for i, t in enumerate(pair)]
        call += len(pair)
        intro = " ".join(rng.sample(ASSISTANT_FILLER[:4], 2)) + f" I'll use {pair[0]} and {pair[1]}."
        headlines = []
        if parallel:
            msgs.append({"role": "assistant", "content": intro, "tool_calls": calls})
            for c in calls:
                body, hid, hval, detail = _tool_result(rng, c["function"]["name"], tool_desc.get(c["function"]["name"].lower(), ""), query)
                msgs.append({"role": "tool", "tool_call_id": c["id"], "content": body})
                facts.append(Fact(detail, "tool detail", len(msgs) - 1))
                headlines.append((c["function"]["name"], hid, hval))
        else:
            for k, c in enumerate(calls):
                msgs.append({"role": "assistant", "content": intro if k == 0 else "Now the second tool.", "tool_calls": [c]})
                body, hid, hval, detail = _tool_result(rng, c["function"]["name"], tool_desc.get(c["function"]["name"].lower(), ""), query)
                msgs.append({"role": "tool", "tool_call_id": c["id"], "content": body})
                facts.append(Fact(detail, "tool detail", len(msgs) - 1))
                headlines.append((c["function"]["name"], hid, hval))
        (t1, id1, v1), (t2, id2, v2) = headlines
        answer = (f"{rng.choice(ASSISTANT_FILLER[4:6])} The top {t1} result is {id1} with a value of {v1}, "
                  f"and {t2} ranks {id2} first at {v2}. {rng.choice(ASSISTANT_FILLER[6:])}")
        msgs.append({"role": "assistant", "content": answer})
        at = len(msgs) - 1
        facts += [Fact(id1, "name", at), Fact(v1, "number", at)]
        if task % 2 == 0:
            decision = rng.choice(DECISION_TEMPLATES).format(a=id1, b=id2)
            msgs.append({"role": "user", "content": f"Thanks. {decision}"})
            facts.append(Fact(decision.rstrip("."), "decision", len(msgs) - 1))
            msgs.append({"role": "assistant", "content": "Noted, I'll proceed that way."})
        task += 1
    msgs.append({"role": "user", "content": "Summarize where we are and what is left to do."})
    return msgs, facts


# ---------------------------------------------------------------------------- harness


class Metrics:
    def add(self, *a: Any, **k: Any) -> None: ...
    def record(self, *a: Any, **k: Any) -> None: ...
    def gauge(self, *a: Any, **k: Any) -> None: ...


class Store:
    """Chroma, embedded in a temporary directory (what `storage.path` gives the proxy)."""

    def __init__(self, path: str) -> None:
        import chromadb
        from chromadb.config import Settings

        self.client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
        self.cols: dict[str, Any] = {}

    def collection(self, name: str, tenant: str | None = None) -> Any:
        full = f"ctxw_{name}__t_{tenant}" if tenant else f"ctxw_{name}"
        if full not in self.cols:
            self.cols[full] = self.client.get_or_create_collection(full, embedding_function=None, metadata={"hnsw:space": "cosine"})
        return self.cols[full]


def exchange(messages: list[dict], pressure: str = "none", target: int | None = None, tenant: str | None = None) -> Exchange:
    ex = Exchange("bench", "gpt-4o", messages, None, {"model": "gpt-4o", "messages": messages}, tenant=tenant)
    ex.pressure, ex.target_tokens = pressure, target  # type: ignore[assignment]
    if pressure != "none" and target is not None:  # the marks the budget policy would set, for a target of 0.6 × window
        window = int(target / 0.6)
        ex.notes.budget = BudgetNote(0, window=window, compress_at=int(0.8 * window), target_at=target,
                                     aggressive_at=int(0.9 * window) if pressure == "compress" else target)
    return ex


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def text_of(messages: list[dict]) -> str:
    return "\n".join(content_text(m) + " " + " ".join(json.dumps(c) for c in m.get("tool_calls") or []) for m in messages)


async def compression_figures(services: Services, convs: list[tuple[list[dict], list[Fact]]], pressure: str) -> dict[str, Any]:
    tokens = services.tokens
    policy = HistoryPolicy(HistoryConfig(archive_spans=False), services)
    before_total = after_total = span_tokens = summary_tokens = 0
    kept = total = kept_all = total_all = 0
    by_kind: dict[str, list[int]] = {}
    for messages, facts in convs:
        before = tokens.count_messages(messages, "gpt-4o")
        target = int(before * 0.15) if pressure != "none" else None
        ex = exchange(messages, pressure, target)
        await policy.on_request(ex)
        out = ex.messages
        before_total += before
        after_total += tokens.count_messages(out, "gpt-4o")
        verbatim = {id(m) for m in out}
        summarized = [i for i, m in enumerate(messages) if id(m) not in verbatim]
        summaries = [section for m in out for section in summary_sections(m)]  # inside user turns
        span_tokens += sum(tokens.count_message(messages[i], "gpt-4o") for i in summarized)
        summary_tokens += sum(tokens.count_text(section, "gpt-4o") for section in summaries)
        forwarded = text_of(out).lower()
        summarized_set = set(summarized)
        for fact in facts:
            hit = fact.text.lower() in forwarded
            if fact.message in summarized_set:
                by_kind.setdefault(fact.kind, [0, 0])
                by_kind[fact.kind][0] += hit
                by_kind[fact.kind][1] += 1
            if fact.kind == "tool detail":
                continue  # reported on its own: not a fact stated in the conversation
            total_all += 1
            kept_all += hit
            if fact.message in summarized_set:
                total += 1
                kept += hit
    return {
        "tokens_before": before_total, "tokens_after": after_total,
        "reduction": 1 - after_total / before_total,
        "request_ratio": before_total / max(1, after_total),
        "span_ratio": span_tokens / max(1, summary_tokens),
        "retention_summarized": kept / max(1, total), "facts_summarized": total,
        "retention_all": kept_all / max(1, total_all), "facts_all": total_all,
        "by_kind": {k: v[0] / max(1, v[1]) for k, v in by_kind.items()},
    }


async def latency_figures(services: Services, conv: list[dict], runs: int) -> dict[str, float]:
    cold, steady, archive_ms = [], [], []
    for _ in range(runs):  # cold: a fresh policy (no cached summary) summarizes ~190 messages
        policy = HistoryPolicy(HistoryConfig(archive_spans=False), services)
        t = time.perf_counter()
        await policy.on_request(exchange(conv))
        cold.append((time.perf_counter() - t) * 1000)
    policy = HistoryPolicy(HistoryConfig(archive_spans=False), services)
    await policy.on_request(exchange(conv))
    grown = list(conv)
    for i in range(runs):  # steady: the conversation grows by one turn per request
        grown = grown + [{"role": "assistant", "content": f"Answer {i}: the figure is {i * 7}."},
                         {"role": "user", "content": f"Follow-up question {i}?"}]
        t = time.perf_counter()
        await policy.on_request(exchange(grown))
        steady.append((time.perf_counter() - t) * 1000)
    archive_cold = []
    for _ in range(runs):  # cold: a fresh policy makes every gist and stub
        archive = ArchivePolicy(ArchiveConfig(min_tokens=300), services)
        t = time.perf_counter()
        await archive.on_request(exchange(conv))
        archive_cold.append((time.perf_counter() - t) * 1000)
    for _ in range(runs):  # steady: the same conversation again (stubs remembered by ref)
        t = time.perf_counter()
        await archive.on_request(exchange(conv))
        archive_ms.append((time.perf_counter() - t) * 1000)
    return {"cold_p95": p95(cold), "cold_p50": statistics.median(cold), "steady_p95": p95(steady),
            "steady_p50": statistics.median(steady), "archive_p95": p95(archive_ms), "archive_cold_p95": p95(archive_cold)}


async def scratchpad_figures(services: Services, runs: int) -> dict[str, float]:
    pad = Scratchpad(services)
    rng = random.Random(3)
    writes, reads, persist, store_reads = [], [], [], []
    texts = [" ".join(rng.sample(FILLER, 5)) * 8 + f" item {i}" for i in range(runs)]
    for i, text in enumerate(texts):
        t = time.perf_counter()
        pad.put("bench", f"ar_bench{i:06d}", text, kind="tool_result", gist=text[:80])
        writes.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        await pad.get("bench", f"ar_bench{i:06d}")
        reads.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        await pad.flush()  # one Chroma commit per write: the worst case of the write-behind
        persist.append((time.perf_counter() - t) * 1000)
    pad.memory.clear()
    for i in range(runs):
        t = time.perf_counter()
        found = await pad.get("bench", f"ar_bench{i:06d}")
        store_reads.append((time.perf_counter() - t) * 1000)
        assert found == texts[i]
    return {"write_p95": p95(writes), "read_p95": p95(reads), "persist_p95": p95(persist), "store_read_p95": p95(store_reads)}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=30)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    queries, tools = load_data()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        services = Services(tokens=TiktokenCounter(), metrics=Metrics(), store=Store(tmp))
        services.tokens.count_text("warm up", "gpt-4o")
        sizes = [60, 120, 200]
        convs = [build_conversation(rng, queries, tools, sizes[i % 3]) for i in range(args.conversations)]
        n_msgs = statistics.mean(len(c[0]) for c in convs)
        print(f"conversations: {len(convs)} (sizes {sizes}, mean {n_msgs:.0f} messages), MetaTool multi-tool queries, seed {args.seed}")
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
        for pressure in ("none", "compress", "aggressive"):
            f = await compression_figures(services, convs, pressure)
            label = {"none": "distraction (default config)", "compress": "budget compress, target 15% of the original",
                     "aggressive": "budget aggressive"}[pressure]
            print(f"\n[extractive, {label}]")
            print(f"  tokens {f['tokens_before']:,} -> {f['tokens_after']:,}: reduction {f['reduction']:.1%}, "
                  f"request ratio {f['request_ratio']:.2f}x, summarized-span ratio {f['span_ratio']:.2f}x")
            kinds = ", ".join(f"{k} {v:.1%}" for k, v in sorted(f["by_kind"].items()))
            print(f"  retention of facts stated in summarized spans (names, numbers, decisions): {f['retention_summarized']:.1%} "
                  f"of {f['facts_summarized']}; all stated facts: {f['retention_all']:.1%} of {f['facts_all']}")
            print(f"  by kind: {kinds}")
        print("\n[LLM summarizer] retention not measured: it needs a real model, and the bench runs offline.")
        long_conv, _ = build_conversation(random.Random(11), queries, tools, 200)
        lat = await latency_figures(services, long_conv, args.runs)
        print(f"\n[latency, {len(long_conv)}-message conversation, {args.runs} runs, no LLM call, load {os.getloadavg()[0]:.2f}]")
        print(f"  history cold (summarize all, extractive): p50 {lat['cold_p50']:.1f} ms, p95 {lat['cold_p95']:.1f} ms")
        print(f"  history steady state (cached summary, +1 turn): p50 {lat['steady_p50']:.1f} ms, p95 {lat['steady_p95']:.1f} ms (target <= 20 ms)")
        results = sum(1 for m in long_conv if m["role"] == "tool")
        print(f"  archive ({results} tool results, min_tokens 300): cold p95 {lat['archive_cold_p95']:.1f} ms, "
              f"steady state p95 {lat['archive_p95']:.1f} ms")
        sp = await scratchpad_figures(services, args.runs * 3)
        print(f"\n[scratchpad, {args.runs * 3} entries of ~1.5k tokens]")
        print(f"  request path: write p95 {sp['write_p95']:.3f} ms, read p95 {sp['read_p95']:.3f} ms (target <= 10 ms)")
        print(f"  Chroma (background): persist p95 {sp['persist_p95']:.1f} ms per single-entry commit, "
              f"read after memory eviction p95 {sp['store_read_p95']:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
