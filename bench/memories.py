"""The memory policy: extraction quality, selection quality, and the latency it adds to a request.

    python bench/memories.py                       # everything (about a minute on 2 CPUs)
    python bench/memories.py --memories 10000 --requests 400 --errors

Extraction (bench/data/memories/turns_{dev,heldout}.jsonl): a turn is predicted a memory when the
local extractor (policies/memory/extract.py) proposes at least one; precision and recall are over
the turns labelled `memory: true`; `kind` is the share of true positives given the labelled kind.
`dev` was used while building the extractor; `heldout` was not (targets: precision >= 0.9,
recall >= 0.8).

Selection (bench/data/memories/selection.json): one user's memories, written two days earlier,
and requests in many phrasings, each through the policy's on_request (the shipped embedder,
calibrated as in the proxy, the default thresholds). precision@5: of the memories injected (at
most 5), the share labelled as bearing on the request (standing answer-style instructions,
`always_ok`, are never wrong); recall@5: of the labelled memories, the share injected; unrelated:
the share of requests labelled with no memory that got a block anyway.

Ordinary requests (`--ordinary N`): the first human messages of N real ShareGPT conversations (the
`dev` rows of bench/data/no_harm/sharegpt.jsonl.gz, shuffled with a fixed seed), sent through
on_request as one user, each in a session of its own, as a client that names its user on every
request would send them: how many memories they wrote and how many requests got a block. They are
different people's unrelated requests, so nearly every block is one they have no use for: harm.
New users (`--new-users N`): the first N of three other shuffles, each sent as a user of its own, so
every request meets a user with few memories (below the distinct gate's 20). `--split blind` reads the
rows no setting was chosen on (measured once, at the end).

Latency: on_request for one user holding `--memories` memories (generated from templates, stored
through Chroma in a temporary directory and loaded as the proxy loads them), on requests that
write nothing (the common case: questions and tasks), then on turns that write a memory.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ctxwarden.policies.base import Exchange, Services  # noqa: E402
from ctxwarden.policies.memory.config import MemoryConfig  # noqa: E402
from ctxwarden.policies.memory.extract import candidates  # noqa: E402
from ctxwarden.policies.memory.model import Memory, memory_id  # noqa: E402
from ctxwarden.policies.memory.policy import MemoryPolicy  # noqa: E402
from ctxwarden.policies.text.tokens import TiktokenCounter  # noqa: E402
from ctxwarden.proxy.config import EmbedderChoice, StorageConfig  # noqa: E402
from ctxwarden.proxy.services import LazyEmbedder, NamedEmbedders  # noqa: E402
from ctxwarden.proxy.storage import ChromaStore  # noqa: E402

DATA = Path(__file__).parent / "data" / "memories"
SHAREGPT = Path(__file__).parent / "data" / "no_harm" / "sharegpt.jsonl.gz"
DAY = 86_400.0


class NullMetrics:
    def add(self, *a: Any, **k: Any) -> None: ...
    def record(self, *a: Any, **k: Any) -> None: ...
    def gauge(self, *a: Any, **k: Any) -> None: ...


# ----------------------------------------------------------------------------- extraction


def extraction(split: str, errors: bool) -> dict[str, float]:
    rows = [json.loads(line) for line in (DATA / f"turns_{split}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    tp = fp = fn = kinds = 0
    for row in rows:
        found = candidates(row["text"])
        if found and row["memory"]:
            tp += 1
            kinds += found[0].kind == row.get("kind")
        elif found:
            fp += 1
            if errors:
                print(f"    false memory: {row['text']!r} -> {found[0].kind}")
        elif row["memory"]:
            fn += 1
            if errors:
                print(f"    missed ({row.get('kind')}): {row['text']!r}")
    return {"turns": len(rows), "precision": tp / max(1, tp + fp), "recall": tp / max(1, tp + fn),
            "kind": kinds / max(1, tp)}


# ----------------------------------------------------------------------------- the policy


def make_policy(tmp: str, provider: str | None = None, min_distinct: float | None = None,
                min_background_z: float | None = None, confirm_with: str | None = None) -> MemoryPolicy:
    choice = EmbedderChoice(provider=provider) if provider else EmbedderChoice()
    embedder = LazyEmbedder(choice)
    store = ChromaStore(StorageConfig(path=f"{tmp}/store"))
    services = Services(tokens=TiktokenCounter(), metrics=NullMetrics(), embedder=embedder, store=store,  # type: ignore[arg-type]
                        embedder_named=NamedEmbedders(choice, embedder))  # as the proxy: one of each provider
    extra = {} if min_distinct is None else {"min_distinct": min_distinct}
    extra |= {} if min_background_z is None else {"min_background_z": min_background_z}
    extra |= {} if confirm_with is None else {"confirm_with": confirm_with}
    return MemoryPolicy(MemoryConfig(refresh_s=0, **extra), services)


def memories_of(user: str, texts: list[str], age_s: float, rng: random.Random) -> list[Memory]:
    now = time.time()
    out = []
    for text in texts:
        read = candidates(text)
        kind = read[0].kind if read else "fact"
        out.append(Memory(id=memory_id(None, user, "", "private", text), text=text, kind=kind, scope="private",
                          user=user, created_at=now - age_s * (1 + rng.random()), source="api",
                          slots=read[0].slots if read else ()))
    return out


def exchange(user: str, text: str, i: int) -> Exchange:
    messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": text}]
    return Exchange(request_id=str(i), model="gpt-4o", messages=messages, tools=None,
                    body={"model": "gpt-4o", "messages": messages, "user": user}, session_id=f"bench-{i}")


def selected_ids(ex: Exchange) -> list[str]:
    action = next((a for a in ex.actions if a.policy == "memory" and a.name == "select"), None)
    return list(action.detail["ids"]) if action else []


async def selection(policy: MemoryPolicy, errors: bool) -> dict[str, float]:
    data = json.loads((DATA / "selection.json").read_text(encoding="utf-8"))
    names = list(data["memories"])
    rows = memories_of("sel", [data["memories"][n] for n in names], 2 * DAY, random.Random(1))
    name_of = {m.id: n for m, n in zip(rows, names)}
    policy.store.put_many(None, "sel", rows, policy.store.embed([m.text for m in rows]))
    ok_always = set(data["always_ok"])
    precisions, recalls, unrelated, blocks = [], [], [], 0
    for i, query in enumerate(data["queries"]):
        ex = exchange("sel", query["text"], i)
        await policy.on_request(ex)
        for action in ex.actions:  # a request misread as a memory: it can be selected later (and is wrong then)
            if action.name == "write":
                name_of.update((mid, f"written from {query['text']!r}") for mid in action.detail["ids"])
        got = [name_of[mid] for mid in selected_ids(ex)]
        gold = set(query["gold"])
        blocks += bool(got)
        if not gold:
            unrelated.append(bool(set(got) - ok_always))
        else:
            recalls.append(len(gold & set(got)) / len(gold))
            if got:
                precisions.append(sum(g in gold or g in ok_always for g in got) / len(got))
        if errors and (set(got) - gold - ok_always or gold - set(got)):
            print(f"    {query['text']!r}: injected {got}, labelled {sorted(gold)}")
    return {"queries": len(data["queries"]), "memories": len(rows), "precision": statistics.mean(precisions),
            "recall": statistics.mean(recalls), "unrelated": statistics.mean(unrelated), "blocks": blocks}


# ----------------------------------------------------------------------------- ordinary requests


def first_messages(split: str, seed: int) -> list[str]:
    with gzip.open(SHAREGPT, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    texts = [r["text"] for r in rows if r["kind"] == "first" and r["split"] == split and r["text"].strip()]
    random.Random(seed).shuffle(texts)
    return texts


async def ordinary(policy: MemoryPolicy, n: int, split: str = "dev", seed: int = 5, user: str = "ordinary") -> dict[str, int]:
    texts = first_messages(split, seed)
    written = blocks = 0
    for i, text in enumerate(texts[:n]):
        ex = exchange(user, text, 20_000 + i)
        await policy.on_request(ex)
        written += sum(len(a.detail["ids"]) for a in ex.actions if a.policy == "memory" and a.name == "write")
        blocks += bool(selected_ids(ex))
    return {"requests": min(n, len(texts)), "written": written, "blocks": blocks}


async def new_users(policy: MemoryPolicy, split: str, seeds: tuple[int, ...] = (5, 6, 7), n: int = 60) -> dict[str, int]:
    """The first `n` messages of each seed's shuffle sent as a new user of their own: a user with few
    memories, before the distinct gate can measure chance (select.py), where background.py acts."""
    found = [await ordinary(policy, n, split, seed, user=f"new-{seed}") for seed in seeds]
    return {"requests": sum(f["requests"] for f in found), "blocks": sum(f["blocks"] for f in found)}


# ----------------------------------------------------------------------------- latency

THINGS = ("hotels", "flights", "trains", "restaurants", "cafes", "museums", "laptops", "phones", "books", "films",
          "podcasts", "wines", "teas", "bikes", "cars", "gyms", "parks", "concerts", "recipes", "games")
LIKES = ("I prefer {a} {t}.", "I like {t} that are {a}.", "I don't want {a} {t}.", "My favourite {t} are {a} ones.",
         "I usually pick {a} {t} in {c}.", "Never suggest {a} {t}.", "I live near {a} {t} in {c}.")
ADJ = ("quiet", "cheap", "expensive", "small", "modern", "old", "local", "famous", "organic", "fast", "slow", "family-run",
       "vintage", "electric", "spicy", "sweet", "dark", "light", "popular", "hidden")
CITIES = ("Paris", "Lisbon", "Berlin", "Osaka", "Denver", "Nairobi", "Lima", "Hanoi", "Oslo", "Porto", "Quito", "Seoul")
ASKS = ("Find me {t} in {c} for next week.", "What are good {t} near {c}?", "Compare the best {t} in {c}.",
        "Can you list three {t} around {c} and their prices?", "Which {t} would you recommend in {c} this month?")


def generated(n: int, rng: random.Random) -> list[str]:
    texts: set[str] = set()
    while len(texts) < n:
        t = rng.choice(LIKES).format(a=rng.choice(ADJ), t=rng.choice(THINGS), c=rng.choice(CITIES))
        texts.add(f"{t[:-1]} ({len(texts)}).")  # distinct texts, as a user's 10,000 memories would be
    return sorted(texts)


def spread(ms: list[float]) -> str:
    ms = sorted(ms)
    return f"p50 {ms[len(ms) // 2]:.2f} ms, p95 {ms[int(len(ms) * 0.95)]:.2f} ms"


async def latency(policy: MemoryPolicy, n: int, requests: int) -> None:
    rng = random.Random(7)
    started = time.perf_counter()
    rows = memories_of("big", generated(n, rng), 2 * DAY, rng)
    policy.store.put_many(None, "big", rows, policy.store.embed([m.text for m in rows]))
    policy.store._users.pop((None, "big"))  # load it back as the proxy does, from Chroma
    policy.store.index(None, "big")
    print(f"  {n} memories stored and loaded in {time.perf_counter() - started:.1f} s")
    asks = [rng.choice(ASKS).format(t=rng.choice(THINGS), c=rng.choice(CITIES)) + f" #{i}" for i in range(requests)]
    for i in range(20):  # warm-up: calibration, token counter, embedder
        await policy.on_request(exchange("big", asks[i], -i - 1))
    times, injected = [], 0
    for i, text in enumerate(asks):
        ex = exchange("big", text, i)
        t0 = time.perf_counter()
        await policy.on_request(ex)
        times.append((time.perf_counter() - t0) * 1e3)
        injected += bool(selected_ids(ex))
    print(f"  on_request, requests that write nothing: {spread(times)} ({requests} requests, "
          f"{injected} got a block)   target p50 <= 3 ms")
    index = policy.store.index(None, "big")
    query = np.asarray(policy.services.embedder.embed(["Find me quiet hotels in Paris"])[0], dtype=np.float32)
    sims = []
    for _ in range(200):
        t0 = time.perf_counter()
        index.similarities(query)
        sims.append((time.perf_counter() - t0) * 1e3)
    print(f"  of which the similarity of {n} vectors: {spread(sims)}")
    writes = []
    for i in range(30):
        text = f"I prefer {rng.choice(ADJ)} {rng.choice(THINGS)} with a view number {i}."
        ex = exchange("big", text, 10_000 + i)
        t0 = time.perf_counter()
        await policy.on_request(ex)
        writes.append((time.perf_counter() - t0) * 1e3)
    print(f"  on_request, turns that write a memory (Chroma upsert, supersede check): {spread(writes)}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--errors", action="store_true", help="print each misread turn and each imperfect selection")
    parser.add_argument("--embedder", default=None, help="the policy's embedder (e.g. minilm); default: the proxy's")
    parser.add_argument("--min-distinct", type=float, default=None, help="policies.memory.min_distinct (-10: no gate)")
    parser.add_argument("--min-background-z", type=float, default=None,
                        help="policies.memory.min_background_z (-10: no gate)")
    parser.add_argument("--confirm-with", default=None, help="policies.memory.confirm_with (none: not read again)")
    parser.add_argument("--ordinary", type=int, default=300, help="ShareGPT first messages sent as one user (0: skip)")
    parser.add_argument("--new-users", type=int, default=60,
                        help="ShareGPT first messages sent as each of 3 new users (0: skip)")
    parser.add_argument("--split", choices=("dev", "blind"), default="dev",
                        help="the ShareGPT rows of the ordinary and new-user figures (blind: once, at the end)")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    print("extraction (local), a turn predicted a memory when the extractor proposes one:")
    for split in ("dev", "heldout"):
        f = extraction(split, args.errors)
        print(f"  {split:8s} {f['turns']:3d} turns: precision {f['precision']:.2f}  recall {f['recall']:.2f}  "
              f"kind right {f['kind']:.2f}   targets 0.9 / 0.8")
    with tempfile.TemporaryDirectory() as tmp:
        policy = make_policy(tmp, args.embedder, args.min_distinct, args.min_background_z, args.confirm_with)
        s = await selection(policy, args.errors)
        print(f"selection ({policy.services.embedder.name}, min_score {policy.config.min_score}, min_distinct "
              f"{policy.config.min_distinct}, min_background_z {policy.config.min_background_z}, confirm_with "
              f"{policy.config.confirm_with}, top_k "
              f"{policy.config.top_k}): {s['queries']} requests, {s['memories']} memories")
        print(f"  precision@5 {s['precision']:.2f}  recall@5 {s['recall']:.2f}  "
              f"unrelated requests given a memory {s['unrelated']:.2f}  ({s['blocks']} blocks)")
        if args.ordinary:
            o = await ordinary(policy, args.ordinary, args.split)
            print(f"ordinary requests, one user: {o['requests']} ShareGPT first messages ({args.split}) wrote "
                  f"{o['written']} memories; {o['blocks']} requests ({o['blocks'] / max(o['requests'], 1):.0%}) got a block")
        if args.new_users:
            o = await new_users(policy, args.split, n=args.new_users)
            print(f"new users: 3 x {args.new_users} ShareGPT first messages ({args.split}), each run one new user: "
                  f"{o['blocks']} of {o['requests']} requests ({o['blocks'] / max(o['requests'], 1):.0%}) got a block")
        if args.memories and args.requests >= 20:  # the first 20 requests warm the policy up
            print(f"latency (one user, {args.memories} memories):")
            await latency(policy, args.memories, args.requests)


if __name__ == "__main__":
    asyncio.run(main())
