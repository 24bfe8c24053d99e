"""Poisoning bench: the local checker on HaluEval QA and dialogue, length-controlled, and its latency.

    python bench/poisoning.py [--embedder wordllama|minilm] [--fit] [--latency-answers N] [--fresh | --natural]

Data (bench/data, MIT, see its README): HaluEval QA (500 questions, each with its knowledge, the
right answer and two hallucinated answers: the one-turn and the multi-turn generation sets) and
1,000 HaluEval dialogue rows. Every row's knowledge goes into one knowledge base (a real Chroma
store in a temp dir, the proxy's embedder); each answer is judged exactly as the policy judges it
(assess.retrieve: question + claim, BM25 + embeddings fused by rank; the local checker). The
answer's score is its surest contradiction's confidence (0 when none).

Rows are split by index: the first half is dev (the feature weights were fitted there, --fit
prints a refit), the second half is held out. Printed per split:
- retrieval: the share of answers whose own row's knowledge is among the top-4 passages;
- ROC AUC (hallucinated = positive) and detection at the threshold with <= 5 % false positives,
  next to the AUC of the answer's word count alone (the baseline to beat: on HaluEval QA the
  right answers are short spans);
- length control: detection and false positives per word-count bin at that threshold, and the
  AUC on a length-matched pool (per bin, equal right/hallucinated counts, fixed seed);
- at the policy's defaults: flagged (>= 0.5: quarantined or blocked) and blocked (>= 0.8).
--fresh: instead, 500 further HaluEval QA questions (halueval-qa-fresh.jsonl: rows 500-999 of
HaluEval's final qa_data.json, one hallucinated answer each) that were added after the checker was
built and never used to change it, reported as one split.
--natural: instead, answers in natural phrasings against passages written like real documents
(poisoning_natural.jsonl, written blind), per kind: wrong place/quantity/date/person, negated fact
(should be blocked), paraphrase and uncovered (should pass).
--quoting: harm only. The KB is ShareGPT's assistant answers (bench/data/no_harm/sharegpt.jsonl.gz,
real conversations nobody here wrote: code, instructions with numbered steps, lists of figures), and
each answer judged is a paragraph of one of those very documents, with its conversation's question:
an answer that quotes the KB cannot contradict it, so every block is a false block (a paragraph
read against another sentence of its own document: "Step 4" against "Step 3", "45 degrees" against
"3 lifts").
Then latency: retrieve + verdict per answer against a 10,000-passage KB (p50/p95).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctxwarden.policies.poisoning.assess import FENCE, outside_code, retrieve  # noqa: E402
from ctxwarden.policies.poisoning.checkers.base import CONTRADICTED  # noqa: E402
from ctxwarden.policies.poisoning.checkers.features import WEIGHTS, features_of  # noqa: E402
from ctxwarden.policies.poisoning.checkers.local import LocalChecker  # noqa: E402
from ctxwarden.policies.poisoning.kb import Document, KnowledgeBase  # noqa: E402
from ctxwarden.proxy.config import StorageConfig  # noqa: E402
from ctxwarden.proxy.embeddings import MiniLMEmbedder, WordLlamaEmbedder  # noqa: E402
from ctxwarden.proxy.storage import ChromaStore  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
BINS = ((1, 2), (3, 5), (6, 9), (10, 999))


def clean(knowledge: str) -> str:
    """HaluEval joins Wikipedia paragraphs without a space ("...century.First for Women is")."""
    return re.sub(r'(?<=[a-z0-9)\]"])\.(?=[A-Z])', ". ", knowledge)


def load_fresh() -> list[dict]:
    """500 further HaluEval QA questions (rows 500-999 of its final qa_data.json: one hallucinated
    answer each), added after the checker was built and never used to change it."""
    rows = [json.loads(line) for line in (DATA / "halueval-qa-fresh.jsonl").open()]
    return [{"id": f"fresh{i}", "knowledge": clean(r["knowledge"]), "question": r["question"],
             "answers": [(0, r["right_answer"]), (1, r["hallucinated_answer"])]} for i, r in enumerate(rows)]


def load_rows() -> dict[str, list[dict]]:
    one = [json.loads(line) for line in (DATA / "halueval-qa-one-turn.jsonl").open()]
    multi = [json.loads(line) for line in (DATA / "halueval-qa-multi-turn.jsonl").open()]
    qa = [{"id": f"qa{i}", "knowledge": clean(a["knowledge"]), "question": a["question"],
           "answers": [(0, a["right_answer"]), (1, a["hallucinated_answer"]), (1, b["hallucinated_answer"])]}
          for i, (a, b) in enumerate(zip(one, multi))]
    dialogue = []
    for i, line in enumerate((DATA / "halueval-dialogue-dev.jsonl").open()):
        r = json.loads(line)
        turns = [t.split(":", 1)[-1].strip() for t in re.split(r"\[(?:Human|Assistant)\]", r["dialogue_history"]) if t.strip()]
        dialogue.append({"id": f"dl{i}", "knowledge": r["knowledge"], "question": turns[-1] if turns else "",
                         "answers": [(0, r["right_response"]), (1, r["hallucinated_response"])]})
    return {"qa": qa, "dialogue": dialogue}


def make_kb(embedder, docs: list[Document], tmp: str) -> KnowledgeBase:
    store = ChromaStore(StorageConfig(path=tmp))
    kb = KnowledgeBase(store, embedder, None, refresh_s=3600)
    for start in range(0, len(docs), 500):
        kb.add(docs[start:start + 500])
    return kb


def judge(kb: KnowledgeBase, checker: LocalChecker, question: str, answer: str, in_code: bool = False):
    """As the policy judges an answer (its prose: assess.outside_code), with the checker's verdicts."""
    answer = outside_code(answer, in_code)
    claims = retrieve(answer, kb, question, "", 4) if answer.strip() else []
    verdicts = checker.check_now(claims)
    bad = [v.confidence for v in verdicts if v.label == CONTRADICTED]
    scores = [features_of(c).contradiction_score() if c.evidence else 0.0 for c in claims]
    return max(bad, default=0.0), max(scores, default=0.0), claims


def auc(neg: list[float], pos: list[float]) -> float:
    n, p = np.asarray(neg), np.asarray(pos)
    if not len(n) or not len(p):
        return float("nan")
    return float(((p[:, None] > n[None, :]).sum() + 0.5 * (p[:, None] == n[None, :]).sum()) / (len(n) * len(p)))


def threshold_at_fp(neg: list[float], fp: float = 0.05) -> float:
    """The lowest threshold t (flag when score > t) whose false-positive rate is <= fp."""
    for t in sorted(set(neg)):
        if np.mean([n > t for n in neg]) <= fp:
            return t
    return max(neg)


def report(name: str, scored: list[tuple], splits: tuple[str, ...] = ("dev", "test")) -> None:
    for split in splits:
        rows = [r for r in scored if r[0] == split]
        neg = [r[3] for r in rows if r[1] == 0]
        pos = [r[3] for r in rows if r[1] == 1]
        t = threshold_at_fp(neg)
        hit = np.mean([r[5] for r in rows])
        length_auc = auc([r[4] for r in rows if r[1] == 0], [r[4] for r in rows if r[1] == 1])
        print(f"\n{name} {split}: {len(neg)} right, {len(pos)} hallucinated answers; gold passage in top 4: {hit:.1%}")
        print(f"  AUC {auc(neg, pos):.3f} (word count alone: {length_auc:.3f}); at <= 5% FP (score > {t:.2f}): "
              f"detection {np.mean([p > t for p in pos]):.1%}, FP {np.mean([n > t for n in neg]):.1%}")
        print(f"  defaults: flagged (>= 0.5) {np.mean([p >= 0.5 for p in pos]):.1%} of hallucinated, "
              f"{np.mean([n >= 0.5 for n in neg]):.1%} of right; blocked (>= 0.8) {np.mean([p >= 0.8 for p in pos]):.1%} / "
              f"{np.mean([n >= 0.8 for n in neg]):.1%}")
        matched_neg, matched_pos, rng = [], [], random.Random(7)
        for lo, hi in BINS:
            bn = [r[3] for r in rows if r[1] == 0 and lo <= r[4] <= hi]
            bp = [r[3] for r in rows if r[1] == 1 and lo <= r[4] <= hi]
            det = f"{np.mean([p > t for p in bp]):.1%}" if bp else "-"
            fp = f"{np.mean([n > t for n in bn]):.1%}" if bn else "-"
            print(f"  {lo:>2}-{hi:<3} words: {len(bn):4d} right, {len(bp):4d} hallucinated; detection {det}, FP {fp}")
            m = min(len(bn), len(bp))
            matched_neg += rng.sample(bn, m)
            matched_pos += rng.sample(bp, m)
        print(f"  length-matched pool ({len(matched_neg)} + {len(matched_pos)}): AUC {auc(matched_neg, matched_pos):.3f}; "
              f"detection at <= 5% FP {np.mean([p > threshold_at_fp(matched_neg) for p in matched_pos]):.1%}")


def fit(claim_features: list[tuple[str, int, list[dict]]]) -> None:
    """Refit the logistic weights on dev (class-balanced, max-pooled over an answer's claims)."""
    keys = [k for k in WEIGHTS if k != "bias"]
    dev = [(y, np.max([[v[k] for k in keys] for v in vs], axis=0)) for split, y, vs in claim_features if split == "dev" and vs]
    x = np.array([v for _, v in dev])
    y = np.array([y for y, _ in dev], dtype=float)
    w, b = np.zeros(len(keys)), 0.0
    weight = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    for _ in range(20000):
        g = (1 / (1 + np.exp(-(x @ w + b))) - y) * weight
        w -= 0.05 * (x.T @ g / len(y) + 1e-3 * w)
        b -= 0.05 * g.mean()
    print("\nrefit on dev:", {"bias": round(b, 2), **{k: round(float(v), 2) for k, v in zip(keys, w)}})


def run_quality(args, embedder) -> None:
    data = {"qa fresh": load_fresh()} if args.fresh else load_rows()
    checker = LocalChecker()
    for name, rows in data.items():
        with tempfile.TemporaryDirectory() as tmp:
            kb = make_kb(embedder, [Document(r["id"], r["knowledge"], {}) for r in rows], tmp)
            scored, feats = [], []
            for i, r in enumerate(rows):
                split = "fresh" if args.fresh else "dev" if i < len(rows) // 2 else "test"
                for label, answer in r["answers"]:
                    verdict, score, claims = judge(kb, checker, r["question"], answer)
                    hit = any(e.doc_id == r["id"] for e in (claims[0].evidence if claims else ()))
                    scored.append((split, label, verdict, score, len(answer.split()), hit))
                    feats.append((split, label, [features_of(c).vector() for c in claims if c.evidence]))
        report(f"HaluEval {name}", scored, ("fresh",) if args.fresh else ("dev", "test"))
        if args.fit:
            fit(feats)


def run_natural(embedder, errors: bool = False) -> None:
    """Natural phrasings (bench/data/poisoning_natural.jsonl, written blind: its author never read the
    checker): 20 passages written like real documents, with MetaTool's 199 tool descriptions beside
    them as distractors (HaluEval's Wikipedia passages would cover the "uncovered" answers' subjects); answers phrased unlike the passage, each judged with its question.
    Wrong kinds should be blocked (>= the block threshold, 0.8); paraphrases and answers about
    what no passage covers should pass (< the quarantine band, 0.5). Split by answer number: odd
    rows are dev (their errors may be read: --errors), even rows are held out (never read)."""
    rows = [json.loads(line) for line in (DATA / "poisoning_natural.jsonl").open()]
    docs = [Document(r["id"], r["text"], {}) for r in rows if r["type"] == "doc"]
    tools = json.loads((DATA / "metatool" / "tools.json").read_text())  # distractors about other things
    docs += [Document(f"tool-{n}", f"{name}: {text}", {}) for n, (name, text) in enumerate(tools.items())]
    checker = LocalChecker()
    scored: dict[str, dict[tuple[str, str], list[float]]] = {"dev": {}, "held-out": {}}
    with tempfile.TemporaryDirectory() as tmp:
        kb = make_kb(embedder, docs, tmp)
        for r in (r for r in rows if r["type"] == "answer"):
            split = "dev" if int(r["id"][1:]) % 2 else "held-out"
            verdict, _, _ = judge(kb, checker, r["question"], r["answer"])
            scored[split].setdefault((r["label"], r["kind"]), []).append(verdict)
            if errors and split == "dev" and (verdict >= 0.5) != (r["label"] == "wrong"):
                print(f"  {r['kind']:14} {verdict:.2f} {r['doc']}: {r['question']} -> {r['answer']}")
    for split, by_kind in scored.items():
        print(f"\nnatural phrasings, {split} ({len(docs)} passages): share blocked (>= 0.8) / flagged (>= 0.5)")
        for (label, kind), scores in sorted(by_kind.items()):
            print(f"  {label:5} {kind:15} {len(scores):3d}: blocked {np.mean([v >= 0.8 for v in scores]):6.1%}, "
                  f"flagged {np.mean([v >= 0.5 for v in scores]):6.1%}")
        wrong = [v for (label, _), vs in by_kind.items() if label == "wrong" for v in vs]
        right = [v for (label, _), vs in by_kind.items() if label == "right" for v in vs]
        print(f"  wrong answers blocked {np.mean([v >= 0.8 for v in wrong]):.1%} (flagged {np.mean([v >= 0.5 for v in wrong]):.1%}); "
              f"right answers flagged {np.mean([v >= 0.5 for v in right]):.1%}; AUC {auc(right, wrong):.3f}")


def run_quoting(embedder, documents: int = 400) -> None:
    """Paragraphs of the KB's own documents, judged as answers: every block is a false block."""
    import gzip

    with gzip.open(DATA / "no_harm" / "sharegpt.jsonl.gz", "rt", encoding="utf-8") as f:
        chats = [json.loads(line) for line in f if '"multi"' in line]
    pairs = [(t["content"], chat["turns"][i - 1]["content"]) for chat in chats for i, t in enumerate(chat["turns"])
             if i and t["role"] == "assistant" and chat["turns"][i - 1]["role"] == "user"][:documents]
    checker = LocalChecker()
    blocked = flagged = judged = 0
    with tempfile.TemporaryDirectory() as tmp:
        kb = make_kb(embedder, [Document(f"sg-{n}", text, {}) for n, (text, _) in enumerate(pairs)], tmp)
        for text, question in pairs:
            fences = 0  # a paragraph may start inside a code block: as a stream's piece would
            for paragraph in (p.strip() for p in text.split("\n\n")):
                in_code, fences = fences % 2 == 1, fences + paragraph.count(FENCE)
                if len(paragraph) < 40:
                    continue
                verdict, _, _ = judge(kb, checker, question[-2000:], paragraph, in_code)
                judged += 1
                blocked += verdict >= 0.8
                flagged += verdict >= 0.5
    print(f"\nquoting the KB ({len(pairs)} ShareGPT answers, {len(kb.index)} passages): {judged} paragraphs judged; "
          f"false blocks {blocked} ({blocked / max(judged, 1):.1%}), flagged {flagged} ({flagged / max(judged, 1):.1%})")


def run_latency(args, embedder) -> None:
    data = load_rows()
    docs = [Document(r["id"], r["knowledge"], {}) for rows in data.values() for r in rows]
    tools = json.loads((DATA / "metatool" / "tools.json").read_text())
    docs += [Document(f"tool-{n}", f"{name}: {text}", {}) for n, (name, text) in enumerate(tools.items())]
    queries = (DATA / "metatool" / "queries.csv").read_text().splitlines()[1:]
    with tempfile.TemporaryDirectory() as tmp:
        kb = make_kb(embedder, docs, tmp)
        filler = 10_000 - len(kb.index)
        kb.add([Document(f"q-{n}", q.rsplit(",", 1)[0].strip('"'), {}) for n, q in enumerate(queries[:max(0, filler)])])
        print(f"\nlatency: {len(kb.index)} passages in the KB; retrieve + local verdict per answer")
        checker = LocalChecker()
        rows = data["qa"][: args.latency_answers]
        times = []
        for r in rows:
            answer = r["answers"][1][1]
            started = time.perf_counter()
            checker.check_now(retrieve(answer, kb, r["question"], "", 4))
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        print(f"  {len(times)} answers: p50 {statistics.median(times):.1f} ms, p95 {times[int(0.95 * len(times)) - 1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", choices=("wordllama", "minilm"), default="wordllama")
    parser.add_argument("--fit", action="store_true", help="print the weights refitted on the dev split")
    parser.add_argument("--latency-answers", type=int, default=200)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--natural", action="store_true", help="only the natural-phrasing set (poisoning_natural.jsonl)")
    parser.add_argument("--errors", action="store_true", help="with --natural: print the dev rows judged wrongly")
    parser.add_argument("--fresh", action="store_true",
                        help="only the 500 fresh HaluEval QA questions (bench/data/halueval-qa-fresh.jsonl), one split")
    parser.add_argument("--quoting", action="store_true", help="only the harm check: answers quoting the KB's own documents")
    args = parser.parse_args()
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    embedder = MiniLMEmbedder() if args.embedder == "minilm" else WordLlamaEmbedder()
    print(f"embedder: {embedder.name}; checker: local")
    if args.natural:
        run_natural(embedder, args.errors)
        return
    if args.quoting:
        run_quoting(embedder)
        return
    run_quality(args, embedder)
    if not args.skip_latency:
        run_latency(args, embedder)


if __name__ == "__main__":
    main()
