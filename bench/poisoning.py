"""Poisoning bench: HaluEval dialogue detection / false positives per mode, and validation latency.

    .venv/bin/python bench/poisoning.py [--rows N] [--dev N] [--server-rows N] [--latency-answers N]

1. Every row's knowledge of bench/data/halueval-dialogue-dev.jsonl goes into one knowledge
   base (Chroma in a temp dir, wordllama vectors). Each row's right and hallucinated responses
   are judged as answers by the policy's on_response (the row's dialogue as the conversation),
   once per mode (`grounding: off`, the default, and `grounding: covered_subjects`), with the
   default thresholds (block >= 0.8, quarantine 0.5-0.8): detection = hallucinated answers blocked
   or quarantined, false positives = right answers blocked or quarantined. Rows are split: the
   first --dev rows (500) were used to design and tune the checkers, the rest are held out (test);
   both are reported. Then the trade-off over thresholds (an answer is flagged when its surest
   contradiction, or unsupported claim, >= t), and the false positives on the right answers whose
   every name/number already occurs in their own row's knowledge or dialogue (a proxy for a
   closed domain, where the KB covers what a correct answer says).
   A subset goes through the real server (official SDK -> proxy -> fake upstream) as a cross-check.
2. Latency: on_response for 200-word answers against a 10,000-passage KB (p50/p95), per mode.
The LLM judge is not measured: it needs a model, and this bench runs offline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctxwarden.policies.base import Answer, Exchange, Services  # noqa: E402
from ctxwarden.policies.poisoning.assess import assess_local  # noqa: E402
from ctxwarden.policies.poisoning.check import CONTRADICTED, UNSUPPORTED  # noqa: E402
from ctxwarden.policies.poisoning.kb import Document  # noqa: E402
from ctxwarden.policies.poisoning.policy import PoisoningConfig, PoisoningPolicy  # noqa: E402
from ctxwarden.policies.text.claims import find_mentions, normalize  # noqa: E402
from ctxwarden.proxy.config import StorageConfig  # noqa: E402
from ctxwarden.proxy.embeddings import WordLlamaEmbedder  # noqa: E402
from ctxwarden.proxy.storage import ChromaStore  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "halueval-dialogue-dev.jsonl"
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


class NoMetrics:
    def add(self, *a, **k): ...
    def record(self, *a, **k): ...
    def gauge(self, *a, **k): ...


class NoTokens:
    def count_text(self, text, model): return len(text) // 4
    def count_message(self, message, model): return 4
    def count_messages(self, messages, model): return 4 * len(messages)
    def count_tools(self, tools, model): return 0


def unglue(knowledge: str) -> list[str]:
    """HaluEval glues KG triples together ("…Sharp ObjectsSharp Objects has…"): split where the
    next triple repeats the entity the previous one ended with."""
    parts, start = [], 0
    for m in re.finditer(r"(?<=[a-z0-9)\]'’.])(?=[A-Z0-9])", knowledge):
        i = m.start()
        for size in range(min(160, i, len(knowledge) - i), 2, -1):
            if knowledge[i - size : i] == knowledge[i : i + size]:
                parts.append(knowledge[start:i])
                start = i
                break
    parts.append(knowledge[start:])
    return [p.strip() for p in parts if p.strip()]


def dialogue(history: str) -> list[dict]:
    turns = re.split(r"\[(Human|Assistant)\]:", history)
    messages = [{"role": "user" if who == "Human" else "assistant", "content": text.strip()}
                for who, text in zip(turns[1::2], turns[2::2]) if text.strip()]
    return messages or [{"role": "user", "content": "Hi"}]


MODES = ("off", "covered_subjects")


def make_services(path: str) -> Services:
    return Services(tokens=NoTokens(), metrics=NoMetrics(), embedder=WordLlamaEmbedder(),
                    store=ChromaStore(StorageConfig(path=path)))


def make_policy(path: str | Services, **config) -> PoisoningPolicy:
    services = path if isinstance(path, Services) else make_services(path)
    return PoisoningPolicy(PoisoningConfig(**config), services)


def exchange(n: int, messages: list[dict]) -> Exchange:
    return Exchange(request_id=f"bench{n}", model="bench", messages=messages, tools=None, body={"messages": messages})


# ----------------------------------------------------------------------------- HaluEval


@dataclass
class Judged:
    """One answer's fate: the policy's verdict and the confidence of its surest finding."""

    outcome: str  # "pass" | "Block" | "Reject"
    worst: float  # surest CONTRADICTED / UNSUPPORTED confidence (0 when none)


async def judge_rows(policy: PoisoningPolicy, rows: list[dict]) -> dict[str, list[Judged]]:
    out: dict[str, list[Judged]] = {"right": [], "hallucinated": []}
    for n, row in enumerate(rows):
        for label, key in (("right", "right_response"), ("hallucinated", "hallucinated_response")):
            ex = exchange(n, dialogue(row["dialogue_history"]))
            verdict = await policy.on_response(ex, Answer(text=row[key]))
            checked = (ex.notes.validation or {}).get("checked", [])
            worst = max((c["confidence"] for c in checked if c["verdict"] in (CONTRADICTED, UNSUPPORTED)), default=0.0)
            out[label].append(Judged(type(verdict).__name__ if verdict else "pass", worst))
    return out


def grounded_in_row(row: dict) -> bool:
    """Does the right answer name something, and does every name/number it has occur in its own
    row's knowledge or dialogue? (A plain substring test, independent of the checker: the rows
    where the KB covers what a correct answer says, as in a closed domain.)"""
    source = f" {normalize(row['knowledge'] + ' ' + row['dialogue_history'])} "
    mentions = find_mentions(row["right_response"])
    return bool(mentions) and all(f" {normalize(m.text)} " in source for m in mentions)


def _rate(items: list[Judged], flagged) -> str:
    return f"{sum(1 for j in items if flagged(j)) / max(1, len(items)):6.1%}"


def print_split(name: str, rows: list[dict], judged: dict[str, list[Judged]]) -> None:
    total = len(rows)
    low, high = PoisoningConfig().quarantine_band
    h, r = judged["hallucinated"], judged["right"]
    print(f"  {name}: {total} rows")
    for label, items in (("detection", h), ("false positives", r)):
        flagged = sum(1 for j in items if j.outcome != "pass")
        blocked = sum(1 for j in items if j.outcome != "pass" and j.worst >= high)
        print(f"    {label:16s} {flagged / total:6.1%}  (blocked {blocked / total:.1%}, quarantined {(flagged - blocked) / total:.1%})")
    closed = [j for j, row in zip(r, rows) if grounded_in_row(row)]
    print(f"    false positives on the {len(closed)} right answers that name things, all found in their own row: "
          f"{_rate(closed, lambda j: j.outcome != 'pass').strip()}")


def print_tradeoff(splits: list[tuple[str, dict[str, list[Judged]]]]) -> None:
    print("    trade-off: flag an answer when its surest finding >= t")
    print("       t  " + "".join(f"  {name + ' detection':>15s} {'FP':>6s} {'precision':>9s}" for name, _ in splits))
    for t in THRESHOLDS:
        line = f"    {t:4.2f}  "
        for _, judged in splits:
            d = sum(1 for j in judged["hallucinated"] if j.worst >= t)
            f = sum(1 for j in judged["right"] if j.worst >= t)
            n = len(judged["right"])
            line += f"  {d / n:15.1%} {f / n:6.1%} {d / max(1, d + f):9.1%}"
        print(line)


async def halueval(rows: list[dict], dev_rows: int, server_rows: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        services = make_services(tmp)
        policies = {mode: make_policy(services, grounding=mode) for mode in MODES}
        kb = policies["off"].kb()
        started = time.perf_counter()
        docs = [Document(f"row{n}", "\n".join(unglue(r["knowledge"])), {}) for n, r in enumerate(rows)]
        passages = kb.add(docs)
        print(f"knowledge base: {len(docs)} documents, {passages} passages, loaded in {time.perf_counter() - started:.1f} s")
        dev, test = rows[:dev_rows], rows[dev_rows:]
        summary = []
        for mode, policy in policies.items():
            started = time.perf_counter()
            judged = await judge_rows(policy, rows)
            elapsed = time.perf_counter() - started
            parts = {"dev": {k: v[:dev_rows] for k, v in judged.items()}, "test": {k: v[dev_rows:] for k, v in judged.items()}}
            print(f"\npoisoning.grounding: {mode}  (local checker, block >= 0.8, quarantine 0.5-0.8; "
                  f"{2 * len(rows)} answers in {elapsed:.1f} s)")
            print_split(f"dev  (rows 0-{dev_rows - 1}, used for design and tuning)", dev, parts["dev"])
            if test:
                print_split(f"test (rows {dev_rows}-{len(rows) - 1}, held out)", test, parts["test"])
            print_tradeoff([(name, part) for name, part in parts.items() if part["right"]])
            for name, part in parts.items():
                if part["right"]:
                    n = len(part["right"])
                    summary.append((mode, name, sum(j.outcome != "pass" for j in part["hallucinated"]) / n,
                                    sum(j.outcome != "pass" for j in part["right"]) / n))
        print("\nsummary (default thresholds: flagged = blocked or quarantined)")
        print("  mode               split   detection   false positives")
        for mode, name, d, f in summary:
            print(f"  {mode:18s} {name:5s}    {d:6.1%}        {f:6.1%}")
        covered = sum(1 for r in rows if any(c.checkable for c in _claims(kb, r["hallucinated_response"])))
        print(f"\nhallucinated answers with at least one checkable claim: {covered / len(rows):.1%}")
        print("LLM judge: not measured (needs a model; this bench runs offline).")
        if server_rows:
            for mode, policy in policies.items():
                expected = await judge_rows(policy, rows[:server_rows])
                await through_server(rows[:server_rows], docs, expected, mode)


def _claims(kb, text):
    from ctxwarden.policies.text.claims import split_claims

    return split_claims(text, kb.index.lexicon)


async def through_server(rows: list[dict], docs: list[Document], expected: dict[str, list[Judged]], mode: str) -> None:
    """The same answers through the real proxy (SDK → proxy → fake upstream): same verdicts?"""
    import os

    import httpx
    import openai

    from ctxwarden.proxy.app import create_app
    from ctxwarden.proxy.config import load_settings
    from ctxwarden.proxy.fake_upstream import FakeUpstream
    from ctxwarden.proxy.local_server import LocalServer

    os.environ["CTXWARDEN_ADMIN_KEY"] = "bench"
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    fake = FakeUpstream()
    upstream = LocalServer(fake.app()).start()
    with tempfile.TemporaryDirectory() as tmp:
        policies: dict = {n: {"enabled": n == "poisoning"} for n in ("loops", "poisoning", "clash", "history", "archive", "tools")}
        policies["poisoning"]["grounding"] = mode
        settings = load_settings(None, {"upstream": {"base_url": f"{upstream.url}/v1", "api_key_env": None, "retries": 0},
                                        "storage": {"path": tmp}, "policies": policies})
        proxy = LocalServer(create_app(settings)).start()
        r = httpx.post(f"{proxy.url}/admin/kb/documents", headers={"authorization": "Bearer bench"},
                       json={"documents": [d.as_dict() for d in docs]}, timeout=120)
        r.raise_for_status()
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-bench", max_retries=0)
        agree, latencies = 0, []
        for n, row in enumerate(rows):
            for label, key in (("right", "right_response"), ("hallucinated", "hallucinated_response")):
                fake.reply(content=row[key])
                started = time.perf_counter()
                answer = client.chat.completions.create(model="gpt-4o", messages=dialogue(row["dialogue_history"]))
                latencies.append((time.perf_counter() - started) * 1000)
                flagged = answer.choices[0].finish_reason == "content_filter"
                agree += flagged == (expected[label][n].outcome != "pass")
        proxy.stop()
    upstream.stop()
    print(f"\nthrough the real server, grounding {mode} ({len(rows)} rows, {2 * len(rows)} answers): verdicts agree with on_response "
          f"for {agree}/{2 * len(rows)}; request p50 {statistics.median(latencies):.1f} ms")


# ----------------------------------------------------------------------------- latency

FIRST = "Alice Bob Carla Dmitri Elena Farid Greta Hiro Ines Jonas Kofi Lena Mateo Nadia Omar Priya Quinn Rosa Sven Tara".split()
LAST = "Almeida Brandt Chen Dubois Eriksen Fischer Garcia Haddad Ito Jensen Kowalski Lopez Moreau Novak Okafor Petrov".split()
PLACES = "Lisbon Oslo Nairobi Lima Hanoi Quito Porto Tunis Dakar Riga Sofia Perth Osaka Bergen Cusco Vigo".split()
WORKS = "Garden Mirror River Lantern Harbor Winter Orchard Signal Compass Meadow Falcon Ember".split()


def synthetic_passages(count: int, rng: random.Random) -> list[str]:
    """Fact-shaped sentences with many distinct subjects (the KB grows to `count` passages)."""
    out = []
    for n in range(count):
        person = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        work = f"The {rng.choice(WORKS)} of {rng.choice(PLACES)} {n}"
        template = n % 4
        if template == 0:
            out.append(f"{work} is written by {person}.")
        elif template == 1:
            out.append(f"{work} was released {1950 + n % 70}.")
        elif template == 2:
            out.append(f"{person} {n} was born in {rng.choice(PLACES)}.")
        else:
            out.append(f"{work} is located in {rng.choice(PLACES)}.")
    return out


async def latency(rows: list[dict], answers: int, kb_size: int = 10_000) -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        services = make_services(tmp)
        policies = {mode: make_policy(services, grounding=mode) for mode in MODES}
        kb = policies["off"].kb()
        kb.add([Document(f"row{n}", "\n".join(unglue(r["knowledge"])), {}) for n, r in enumerate(rows)])
        synthetic = synthetic_passages(kb_size - len(kb.index), rng)  # one sentence each: one passage each
        kb.add([Document(f"synthetic{n}", text, {}) for n, text in enumerate(synthetic)])
        print(f"\nlatency: {len(kb.index)} passages in the KB")
        pool = [s for r in rows for s in (r["right_response"], r["hallucinated_response"])]
        texts = []
        for _ in range(answers):
            words: list[str] = []
            while len(words) < 200:
                words += rng.choice(pool).split()
            texts.append((" ".join(words[:200]), dialogue(rng.choice(rows)["dialogue_history"])))
        for mode, policy in policies.items():
            policy.kb().index  # loaded before timing, as in a running proxy
            checks, hooks, flagged = [], [], 0
            for n, (text, conversation) in enumerate(texts):
                context = [m["content"] for m in conversation] if policy.grounder else [conversation[-1]["content"]]
                started = time.perf_counter()
                assess_local(text, policy.kb(), policy.checker, "", 4, context, policy.grounder)  # claims → KB lookups → verdicts
                checks.append((time.perf_counter() - started) * 1000)
                ex = exchange(n, conversation)
                started = time.perf_counter()
                verdict = await policy.on_response(ex, Answer(text=text))  # + thread hop, decision, quarantine write, quality scores
                hooks.append((time.perf_counter() - started) * 1000)
                flagged += verdict is not None
            print(f"grounding {mode}: 200-word answers ({answers}, {flagged} blocked or quarantined), local checker:")
            for label, timings in (("check (assess_local)", checks), ("on_response, end to end", hooks)):
                timings.sort()
                p95 = timings[int(0.95 * (len(timings) - 1))]
                print(f"  {label:25s} p50 {statistics.median(timings):5.1f} ms   p95 {p95:5.1f} ms   max {timings[-1]:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--dev", type=int, default=500, help="the first N rows are the dev split, the rest the test split")
    parser.add_argument("--server-rows", type=int, default=100)
    parser.add_argument("--latency-answers", type=int, default=200)
    args = parser.parse_args()
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()][: args.rows]
    asyncio.run(halueval(rows, min(args.dev, len(rows)), args.server_rows))
    asyncio.run(latency(rows, args.latency_answers))


if __name__ == "__main__":
    main()
