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
   Length-controlled: on HaluEval the answer's length alone separates right from hallucinated
   answers, so each answer also gets a continuous score, its surest finding's confidence (0 when
   none), per mode and split: ROC AUC (Mann-Whitney, ties = 1/2; hallucinated = positive) and
   detection at the lowest threshold whose FP rate is <= 5 %, next to the AUC of word count alone
   (the baseline to beat); then the same within word-length quartile bins (per split) and on a
   length-matched pool (per bin, equal right/hallucinated counts subsampled with a fixed seed).
   A subset goes through the real server (official SDK -> proxy -> fake upstream) as a cross-check.
2. Latency: on_response for 200-word answers against a 10,000-passage KB (p50/p95), per mode.
The LLM judge is not measured: it needs a model, and this bench runs offline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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
    words: int = 0  # the answer's length in words (whitespace-split), for the length control


async def judge_rows(policy: PoisoningPolicy, rows: list[dict]) -> dict[str, list[Judged]]:
    out: dict[str, list[Judged]] = {"right": [], "hallucinated": []}
    for n, row in enumerate(rows):
        for label, key in (("right", "right_response"), ("hallucinated", "hallucinated_response")):
            ex = exchange(n, dialogue(row["dialogue_history"]))
            verdict = await policy.on_response(ex, Answer(text=row[key]))
            checked = (ex.notes.validation or {}).get("checked", [])
            worst = max((c["confidence"] for c in checked if c["verdict"] in (CONTRADICTED, UNSUPPORTED)), default=0.0)
            out[label].append(Judged(type(verdict).__name__ if verdict else "pass", worst, len(row[key].split())))
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


# ----------------------------------------------------------------------------- length control

MAX_FP = 0.05
MATCH_SEED = 20240


def auc(neg, pos) -> float:
    """ROC AUC of a score (pos = hallucinated = 1, neg = right = 0) via Mann-Whitney U with
    average ranks, so ties count one half. nan when a class is empty."""
    neg, pos = np.asarray(neg, dtype=float), np.asarray(pos, dtype=float)
    if not len(neg) or not len(pos):
        return float("nan")
    scores = np.concatenate([pos, neg])
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    _, inverse = np.unique(scores, return_inverse=True)
    ranks = (np.bincount(inverse, weights=ranks) / np.bincount(inverse))[inverse]  # average rank of each tie group
    u = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2
    return float(u / (len(pos) * len(neg)))


def detection_at_fp(neg, pos, max_fp: float = MAX_FP) -> tuple[float, float, float]:
    """Flag a score >= t; over the thresholds whose false-positive rate is <= max_fp, the one that
    flags the most (the lowest such t). Returns (detection, FP, t); t = inf when only flagging
    nothing qualifies."""
    neg, pos = np.asarray(neg, dtype=float), np.asarray(pos, dtype=float)
    if not len(neg) or not len(pos):
        return float("nan"), float("nan"), float("nan")
    for t in np.unique(np.concatenate([neg, pos])):  # ascending: the first that qualifies flags the most
        fp = float((neg >= t).mean())
        if fp <= max_fp:
            return float((pos >= t).mean()), fp, float(t)
    return 0.0, 0.0, float("inf")


def _arrays(judged: dict[str, list[Judged]]) -> dict[str, np.ndarray]:
    return {f"{label}_{field}": np.array([getattr(j, field) for j in judged[label]], dtype=float)
            for label in ("right", "hallucinated") for field in ("worst", "words")}


def _fmt_auc(x: float) -> str:
    return "  n/a" if math.isnan(x) else f"{x:5.3f}"


def _fmt_det(det: float, fp: float, t: float, t_format: str = "4.2f") -> str:
    if math.isnan(det):
        return f"{'n/a':>6s}"
    return f"{det:6.1%} (t {'none' if t == float('inf') else format(t, t_format)}, FP {fp:4.1%})"


def print_length_controlled(judged_by_mode: dict[str, dict[str, dict[str, list[Judged]]]]) -> None:
    """Score = the surest finding's confidence. Length in words as a rival score, then quartile
    bins of length (per split, over both labels) and a length-matched pooled set."""
    modes = list(judged_by_mode)
    splits = list(judged_by_mode[modes[0]])
    print(f"\nlength-controlled  (score = surest finding's confidence, 0 when none; AUC with hallucinated = 1, "
          f"0.5 = chance; det@{MAX_FP:.0%}FP = detection at the lowest t whose FP <= {MAX_FP:.0%}, with that t and FP)")
    print(f"  {'split':5s} {'score':36s}   AUC  det@{MAX_FP:.0%}FP")
    for name in splits:
        first = _arrays(judged_by_mode[modes[0]][name])
        neg, pos = first["right_words"], first["hallucinated_words"]
        print(f"  {name:5s} {'answer length in words alone':36s} {_fmt_auc(auc(neg, pos))}  {_fmt_det(*detection_at_fp(neg, pos), 'g')}")
        for mode in modes:
            a = _arrays(judged_by_mode[mode][name])
            neg, pos = a["right_worst"], a["hallucinated_worst"]
            print(f"  {name:5s} {'checker, grounding ' + mode:36s} {_fmt_auc(auc(neg, pos))}  {_fmt_det(*detection_at_fp(neg, pos))}")
    for name in splits:
        rng = np.random.default_rng(MATCH_SEED)
        arrays = {mode: _arrays(judged_by_mode[mode][name]) for mode in modes}
        words_r, words_h = arrays[modes[0]]["right_words"], arrays[modes[0]]["hallucinated_words"]
        edges = np.unique(np.quantile(np.concatenate([words_r, words_h]), [0.25, 0.5, 0.75]))
        bin_r, bin_h = np.searchsorted(edges, words_r, side="right"), np.searchsorted(edges, words_h, side="right")
        print(f"  {name}: length bins (quartiles of all {len(words_r) + len(words_h)} answers' word counts); "
              f"matched = per bin, equal right/hallucinated counts drawn with seed {MATCH_SEED}, pooled")
        print((f"    {'':29s}" + "".join(f"   {'grounding ' + mode:36s}" for mode in modes)).rstrip())
        print((f"    {'words':9s} {'right':>5s} {'hall':>5s} {'len AUC':>7s}"
               + "".join(f"   {'AUC':>5s}  {'det@' + f'{MAX_FP:.0%}FP':29s}" for _ in modes)).rstrip())
        keep_r, keep_h = [], []
        for b in range(len(edges) + 1):
            ir, ih = np.flatnonzero(bin_r == b), np.flatnonzero(bin_h == b)
            k = min(len(ir), len(ih))
            keep_r += list(rng.choice(ir, k, replace=False)) if k else []
            keep_h += list(rng.choice(ih, k, replace=False)) if k else []
            span = np.concatenate([words_r[ir], words_h[ih]])
            label = f"{int(span.min())}-{int(span.max())}" if len(span) else "-"
            line = f"    {label:9s} {len(ir):5d} {len(ih):5d}   {_fmt_auc(auc(words_r[ir], words_h[ih]))}"
            for mode in modes:
                neg, pos = arrays[mode]["right_worst"][ir], arrays[mode]["hallucinated_worst"][ih]
                line += f"   {_fmt_auc(auc(neg, pos))}  {_fmt_det(*detection_at_fp(neg, pos)):29s}"
            print(line.rstrip())
        kr, kh = np.array(keep_r, dtype=int), np.array(keep_h, dtype=int)
        line = f"    {'matched':9s} {len(kr):5d} {len(kh):5d}   {_fmt_auc(auc(words_r[kr], words_h[kh]))}"
        for mode in modes:
            neg, pos = arrays[mode]["right_worst"][kr], arrays[mode]["hallucinated_worst"][kh]
            line += f"   {_fmt_auc(auc(neg, pos))}  {_fmt_det(*detection_at_fp(neg, pos)):29s}"
        print(line.rstrip())


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
        judged_by_mode: dict[str, dict[str, dict[str, list[Judged]]]] = {}
        for mode, policy in policies.items():
            started = time.perf_counter()
            judged = await judge_rows(policy, rows)
            elapsed = time.perf_counter() - started
            parts = {"dev": {k: v[:dev_rows] for k, v in judged.items()}, "test": {k: v[dev_rows:] for k, v in judged.items()}}
            judged_by_mode[mode] = {name: part for name, part in parts.items() if part["right"]}
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
        print_length_controlled(judged_by_mode)
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
