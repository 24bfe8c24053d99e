"""Clash detection quality and policy latency.

    .venv/bin/python bench/clash.py                 # every figure (dev, held-out, latency)
    .venv/bin/python bench/clash.py --split dev     # only the split being tuned on
    .venv/bin/python bench/clash.py --errors        # also list every misclassified pair

Quality: bench/data/clash_pairs.jsonl holds hand-written conversation pairs, each labelled
`contradiction` (with its type), `compatible` or `duplicate`. Each pair becomes a conversation
(system prompt, first user turn, an assistant reply, second user turn; or one user message for
simultaneous statements). A pair is detected as a contradiction when the detector reports a
non-duplicate clash; precision and recall are over contradictions (a duplicate flagged as a
contradiction is a false positive). Splits: `dev` (tuned on); `heldout` (written before the
detector existed and never used to change it, though its items were read while designing the rule
vocabulary); `heldout_c` (written after the rules, in deliberately varied styles, and run once).
The `hb-*` items in dev were a held-out split too, until their first run showed misses that were
then fixed: they count as dev now.

Latency: the clash policy's on_request on a 50-message conversation (user/assistant turns with
tool calls, two clashes), cold (nothing cached) and warm (the conversation grew by one turn).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctxwarden.policies.base import Exchange, Services  # noqa: E402
from ctxwarden.policies.clash.detect import Located, local_clashes, text_keys  # noqa: E402
from ctxwarden.policies.clash.policy import ClashConfig, ClashPolicy, user_texts  # noqa: E402
from ctxwarden.policies.text.statements.extract import extract  # noqa: E402

DATA = Path(__file__).parent / "data" / "clash_pairs.jsonl"


# ----------------------------------------------------------------------------- quality


def conversation(turns: list[str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful travel assistant."}]
    for i, turn in enumerate(turns):
        if i:
            messages.append({"role": "assistant", "content": "Noted, thanks. Anything else?"})
        messages.append({"role": "user", "content": turn})
    return messages


def detect(messages: list[dict[str, Any]]):
    texts = user_texts(messages)
    keys = text_keys(texts)
    found = [Located(m, p, keys[(m, p)], st) for (m, p), text in sorted(texts.items()) for st in extract(text)]
    return local_clashes(found)


def evaluate(rows: list[dict[str, Any]], show_errors: bool) -> dict[str, Any]:
    tp = fp = fn = tn = 0
    type_ok = type_total = 0
    dup_tp = dup_total = dup_flagged = 0
    errors: list[str] = []
    for row in rows:
        clashes = detect(conversation(row["turns"]))
        real = [c for c in clashes if not c.duplicate]
        dups = [c for c in clashes if c.duplicate]
        predicted = bool(real)
        if row["label"] == "contradiction":
            if predicted:
                tp += 1
                type_total += 1
                type_ok += real[-1].type == row["type"]
                if real[-1].type != row["type"]:
                    errors.append(f"TYPE {row['id']}: got {real[-1].type}, want {row['type']}")
            else:
                fn += 1
                errors.append(f"MISS {row['id']}: {row['turns']}")
        else:
            if predicted:
                fp += 1
                errors.append(f"FALSE {row['id']} ({row['label']}): {[(c.slot, c.older.st.value, c.newer.st.value) for c in real]}")
            else:
                tn += 1
        if row["label"] == "duplicate":
            dup_total += 1
            dup_tp += bool(dups) and not predicted
            if not dups:
                errors.append(f"DUP-MISS {row['id']}: {row['turns']}")
        elif dups:
            dup_flagged += 1
    if show_errors:
        for line in errors:
            print("   ", line)
    return {
        "pairs": len(rows),
        "contradictions": tp + fn,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "type_accuracy": type_ok / type_total if type_total else 1.0,
        "duplicates_found": f"{dup_tp}/{dup_total}",
        "duplicates_on_non_duplicates": dup_flagged,
    }


def print_quality(name: str, r: dict[str, Any]) -> None:
    print(f"{name:10} pairs={r['pairs']:3}  contradictions={r['contradictions']:3}  precision={r['precision']:.3f}  "
          f"recall={r['recall']:.3f}  (tp={r['tp']} fp={r['fp']} fn={r['fn']} tn={r['tn']})  "
          f"type_accuracy={r['type_accuracy']:.3f}  duplicates_found={r['duplicates_found']}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", choices=["dev", "heldout", "heldout_c", "all"], default="all")
    parser.add_argument("--errors", action="store_true")
    parser.add_argument("--no-latency", action="store_true")
    args = parser.parse_args()
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    splits = ["dev", "heldout", "heldout_c"] if args.split == "all" else [args.split]
    print(f"clash detection (local detector) on {DATA.name}")
    for split in splits:
        part = [r for r in rows if r["split"] == split]
        print_quality(split, evaluate(part, args.errors))
    if args.split == "all":
        print_quality("held-out", evaluate([r for r in rows if r["split"] != "dev"], False))
        print_quality("all", evaluate(rows, False))
    if not args.no_latency and args.split == "all":
        latency()


# ----------------------------------------------------------------------------- latency

USER_LINES = [
    "Hi! I'm planning a trip to Portugal with my partner in June. We are 2 adults.",
    "I'm looking for budget hotels under $50 a night, ideally near the old town.",
    "Can you check flights from Boston? I'd like a window seat and a vegetarian meal.",
    "I'm in Boston right now, but I'll be in New York next week for work.",
    "What's the weather usually like in Lisbon in June? I love long walks by the sea.",
    "We'd like to stay 4 nights in Lisbon and 3 nights in Porto.",
    "Please keep your answers short, bullet points are fine.",
    "Could you compare the train and the bus between Lisbon and Porto?",
    "My budget for the whole trip is $3,000 in total, flights included.",
    "Are there any good seafood restaurants near the river? I like seafood a lot.",
    "I'm departing on June 12 and returning on June 20.",
    "How far is Sintra from Lisbon, and is it worth a day trip?",
]


def long_conversation(final: str) -> list[dict[str, Any]]:
    """System + 49 messages: user turns, assistant answers and tool-call pairs; two clashes with the end."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful travel assistant. " * 8}]
    i = 0
    while len(messages) < 46:
        messages.append({"role": "user", "content": USER_LINES[i % len(USER_LINES)] + f" (note {i})"})
        if i % 3 == 1:
            call = {"id": f"call_{i}", "type": "function", "function": {"name": "search", "arguments": json.dumps({"q": i})}}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": json.dumps({"results": ["a" * 80] * 5})})
        messages.append({"role": "assistant", "content": "Here is what I found. " * 12})
        i += 1
    messages += [
        {"role": "user", "content": "Actually, forget budget: we want a luxury 5-star hotel in Lisbon."},
        {"role": "assistant", "content": "Understood, switching to luxury hotels."},
        {"role": "user", "content": "Also, I'm in Chicago now, not Boston."},
    ]
    messages.append({"role": "user", "content": final})
    return messages[:50]


class NullMetrics:
    def add(self, *a: Any, **k: Any) -> None: ...
    def record(self, *a: Any, **k: Any) -> None: ...
    def gauge(self, *a: Any, **k: Any) -> None: ...


def _policy() -> ClashPolicy:
    return ClashPolicy(ClashConfig(strategy="prefer_recent"), Services(tokens=None, metrics=NullMetrics()))  # type: ignore[arg-type]


def _exchange(messages: list[dict[str, Any]], session: str) -> Exchange:
    return Exchange(request_id="bench", model="gpt-4o", messages=messages, tools=None,
                    body={"model": "gpt-4o", "messages": messages}, session_id=session)


async def _timings(runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"cold": [], "warm": []}
    for i in range(runs):  # cold: a fresh policy, nothing cached, no session memory
        from ctxwarden.policies.text.statements.extract import extract as cached_extract

        cached_extract.cache_clear()
        policy = _policy()
        ex = _exchange(long_conversation(f"Which hotels do you suggest? (turn {i})"), f"cold-{i}")
        t0 = time.perf_counter()
        await policy.on_request(ex)
        out["cold"].append((time.perf_counter() - t0) * 1000)
    policy = _policy()
    await policy.on_request(_exchange(long_conversation("Which hotels do you suggest?"), "warm"))
    for i in range(runs):  # warm: the same session grew by one new user message
        ex = _exchange(long_conversation(f"Which hotels do you suggest? Please include breakfast, turn {i}."), "warm")
        t0 = time.perf_counter()
        await policy.on_request(ex)
        out["warm"].append((time.perf_counter() - t0) * 1000)
    assert ex.messages is not ex.original_messages, "the latency conversation should contain clashes"
    return out


def latency(runs: int = 300) -> None:
    timings = asyncio.run(_timings(runs))
    sample = long_conversation("x")
    users = sum(1 for m in sample if m["role"] == "user")
    print(f"policy latency, 50-message conversation ({users} user messages, tool calls, 2 clashes), {runs} runs each:")
    for name, values in timings.items():
        values = sorted(values)
        p95 = values[int(0.95 * (len(values) - 1))]
        print(f"  {name:4}  p50={statistics.median(values):6.2f} ms  p95={p95:6.2f} ms  max={values[-1]:6.2f} ms")
    print("  (cold: nothing cached, new session; warm: statements cached per message hash, one new user message)")


if __name__ == "__main__":
    main()
