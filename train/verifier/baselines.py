"""The evaluation every learned verifier must beat: the sets, the baselines, the table.

    python bench/verifier.py                          # the baselines (same as: python train/verifier/baselines.py)
    python bench/verifier.py --model build/model-onnx # ... and a verifier exported by export.py
    python bench/verifier.py --skip-rules             # length and word overlap only (seconds)

Sets (wrong = positive; nothing here is ever trained on):
- HaluEval QA rows 5,000-9,999 (the test half), length-matched: the rows whose right and
  hallucinated answers are within one word of each other (284 rows, 568 answers), each answer
  judged against its row's passage and question;
- synthetic swaps of test passages: sentences of rows 5,000-9,999 kept or reworded (supported) or
  with one fact changed (a number, date, entity, negation, roles: contradicted), made by the same
  code as the training data (data.Builder.passage) from rows it never reads for training, sampled
  to equal label shares per (length, count of words absent from the passage) bin;
- natural phrasings (bench/data/poisoning_natural.jsonl, written blind): 140 answers to questions
  about 20 passages written like real documents; `dev` (odd ids, may be read and selected on) and
  `held-out` (even ids, never read); wrong kinds must be caught, paraphrases and answers about
  what no passage covers must pass (their premise, for the scorers that take one, is the passage
  sharing the most content words with question and answer);
- natural pairs (train/verifier/natural_pairs.jsonl): 20 hand-made (evidence, claim) pairs in new
  wording (unit paraphrases, aliases, negations), 10 right and 10 wrong: a test set only.

Scorers (higher = more likely wrong):
- length: the answer's word count;
- word overlap: the share of the answer's words absent from its passage;
- rules: the current local checker (policies/poisoning/checkers/local.py) called exactly as
  bench/poisoning.py calls it: every passage of the set in one knowledge base (a Chroma store in a
  temp dir, the wordllama embedder; natural sets with MetaTool's 199 tool descriptions beside them
  as distractors), retrieve(answer, kb, question) for the top-4 evidence, check_now, and the
  answer's score is its surest contradiction's confidence (0 when none);
- model (--model DIR): an ONNX verifier from export.py, P(contradicted) on (passage, question +
  answer) with the gold passage as premise; its single-label verdicts are what the proxy would use.

Printed per set and scorer: ROC AUC and detection at <= 5 % false positives (the threshold is the
lowest score whose false-positive rate on the right answers is <= 5 %); for the rules, also the
policy's defaults (blocked >= 0.8, flagged >= 0.5).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import halueval  # noqa: E402
import textops as tx  # noqa: E402

BENCH_DATA = ROOT / "bench" / "data"
NATURAL_PAIRS = HERE / "natural_pairs.jsonl"
SWAP_ROWS = 1000  # test-half rows the synthetic swaps are drawn from (seeded)
SEED = 5000


@dataclass(frozen=True)
class Item:
    premise: str  # the gold passage
    question: str
    answer: str
    wrong: int  # 1 = hallucinated / contradicted, 0 = right / supported
    kind: str = ""


@dataclass
class EvalSet:
    name: str
    items: list[Item]
    kb_docs: list[str]  # every passage of the set (the rules' knowledge base)
    distractors: bool = False  # add MetaTool's tool descriptions to the rules' knowledge base


# ---- metrics -----------------------------------------------------------------------------------


def auc(neg: list[float], pos: list[float]) -> float:
    n, p = np.asarray(neg, dtype=float), np.asarray(pos, dtype=float)
    if not len(n) or not len(p):
        return float("nan")
    return float(((p[:, None] > n[None, :]).sum() + 0.5 * (p[:, None] == n[None, :]).sum()) / (len(n) * len(p)))


def threshold_at_fp(neg: list[float], fp: float = 0.05) -> float:
    """The lowest threshold t (flag when score > t) whose false-positive rate is <= fp."""
    for t in sorted(set(neg)):
        if np.mean([n > t for n in neg]) <= fp:
            return t
    return max(neg)


def detection_at_fp(neg: list[float], pos: list[float], fp: float = 0.05) -> float:
    t = threshold_at_fp(neg, fp)
    return float(np.mean([p > t for p in pos]))


# ---- sets --------------------------------------------------------------------------------------


def halueval_matched(path: Path | None = None) -> EvalSet:
    items, docs = [], []
    for _, r in halueval.test_rows(path):
        right, halu = r["right_answer"].strip(), r["hallucinated_answer"].strip()
        passage = tx.clean(r["knowledge"])
        docs.append(passage)  # every test passage in the rules' knowledge base, as bench/poisoning.py does
        if abs(len(right.split()) - len(halu.split())) > 1:
            continue
        items.append(Item(passage, r["question"].strip(), right, 0, "right"))
        items.append(Item(passage, r["question"].strip(), halu, 1, "hallucinated"))
    return EvalSet("HaluEval QA 5,000-9,999, length-matched", items, docs)


def synthetic_swaps(path: Path | None = None, n_rows: int = SWAP_ROWS) -> EvalSet:
    import random

    import data  # the training data's own generator, run on test rows: evaluation only

    rows = halueval.test_rows(path)
    rows = sorted(random.Random(SEED).sample(rows, n_rows))
    builder = data.Builder(rows, seed=SEED, evaluation=True)
    for idx, row in rows:
        builder.passage(idx, row)
    pairs = [p for p in builder.pairs if p["label"] in ("supported", "contradicted")]
    # as in the training data: the same share of each label in every (length, word overlap) bin
    def key(p: dict) -> tuple:  # length, and the count of claim words the passage lacks (exactly)
        premise = set(tx.words(p["premise"]))
        return data.length_bin(len(tx.words(p["claim"]))), min(8, sum(w not in premise for w in tx.words(p["claim"])))

    pairs = data.balance(pairs, SEED, {"supported": 0.5, "contradicted": 0.5}, key=key)
    items = [Item(p["premise"], "", p["claim"], int(p["label"] == "contradicted"), p["kind"]) for p in pairs]
    docs = sorted({i.premise for i in items})
    return EvalSet(f"synthetic swaps, {n_rows} test passages", items, docs)


def natural_answers(split: str) -> EvalSet:
    rows = [json.loads(line) for line in (BENCH_DATA / "poisoning_natural.jsonl").open(encoding="utf-8")]
    docs = {r["id"]: r["text"] for r in rows if r["type"] == "doc"}
    items = []
    for r in rows:
        if r["type"] != "answer":
            continue
        odd = int(r["id"][1:]) % 2 == 1
        if (split == "dev") != odd:
            continue
        premise = docs[r["doc"]] if r["doc"] else nearest(docs.values(), f"{r['question']} {r['answer']}")
        items.append(Item(premise, r["question"], r["answer"], int(r["label"] == "wrong"), r["kind"]))
    return EvalSet(f"natural phrasings, {split}", items, list(docs.values()), distractors=True)


def nearest(passages, text: str) -> str:
    """The passage sharing the most content words with `text`: the premise of an answer no passage
    was written for ("uncovered": it must pass), as a retriever would hand it over."""
    want = set(tx.words(text)) - tx.STOP
    return max(sorted(passages), key=lambda p: len(want & set(tx.words(p))))


def natural_pairs() -> EvalSet:
    rows = [json.loads(line) for line in NATURAL_PAIRS.open(encoding="utf-8") if line.strip()]
    items = [Item(r["evidence"], "", r["claim"], int(r["label"] == "wrong"), r["kind"]) for r in rows]
    return EvalSet("natural pairs (20, hand-made)", items, sorted({r["evidence"] for r in rows}), distractors=True)


# ---- scorers -----------------------------------------------------------------------------------


def length_score(item: Item) -> float:
    return float(len(tx.words(item.answer)))


def overlap_score(item: Item) -> float:
    words = tx.words(item.answer)
    if not words:
        return 0.0
    passage = set(tx.words(item.premise))
    return sum(w not in passage for w in words) / len(words)


class KBScorers:
    """Checkers as the policy runs them, called as bench/poisoning.py calls the rules: every passage
    of the set in one KB, retrieve(answer, kb, question) for the top-4 evidence, one score per answer.

    - rules: the local checker's surest contradiction's confidence (0 when none);
    - nli (--nli DIR): a model folder as `checker: nli` loads it (export.py writes one), on the same
      claims and evidence: per claim, P(contradiction) of the evidence it is surest about (what its
      verdict reads: contradicted when >= 0.5 and above P(entailment)), the answer's score the
      highest over its claims;
    - rules + nli: the higher of the two (a union: flagged when either flags).
    """

    def __init__(self, nli: Path | None, windows: int = 0) -> None:
        self.windows = windows  # judge each claim on its first N evidence windows only (0: all the policy reads)
        sys.path.insert(0, str(ROOT / "bench"))
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        from ctxwarden.policies.poisoning.checkers.local import LocalChecker
        from ctxwarden.proxy.embeddings import WordLlamaEmbedder

        self.embedder = WordLlamaEmbedder()
        self.rules = LocalChecker()
        self.nli = None
        if nli:
            from ctxwarden.policies.poisoning.checkers.nli import NLIChecker
            from ctxwarden.policies.poisoning.config import NLIConfig

            self.nli = NLIChecker(NLIConfig(model_path=str(nli)))

    def nli_score(self, claims) -> float:
        from ctxwarden.policies.poisoning.checkers.nli import hypothesis

        if self.windows:
            from dataclasses import replace

            claims = [replace(c, evidence=c.evidence[:self.windows]) for c in claims]
        todo = [c for c in claims if c.evidence]
        pairs = [(ev.window or ev.sentence, hypothesis(c)) for c in todo for ev in c.evidence]
        if not pairs:
            return 0.0
        probs = self.nli.model.probabilities(pairs)
        best, row = 0.0, 0
        for c in todo:  # the evidence the checker's verdict reads, per claim
            best = max(best, self.nli.surest(probs[row:row + len(c.evidence)])[1])
            row += len(c.evidence)
        return best

    def score(self, s: EvalSet) -> dict[str, list[float]]:
        import poisoning  # bench/poisoning.py: make_kb and judge, the bench's own calls

        from ctxwarden.policies.poisoning.kb import Document

        docs = [Document(f"p{n}", text, {}) for n, text in enumerate(s.kb_docs)]
        if s.distractors:
            tools = json.loads((BENCH_DATA / "metatool" / "tools.json").read_text())
            docs += [Document(f"tool-{n}", f"{name}: {text}", {}) for n, (name, text) in enumerate(tools.items())]
        out: dict[str, list[float]] = {"rules (local checker)": []}
        if self.nli:
            out.update({"nli model (via the KB)": [], "rules + nli model": []})
        with tempfile.TemporaryDirectory() as tmp:
            kb = poisoning.make_kb(self.embedder, docs, tmp)
            for item in s.items:
                rule, _, claims = poisoning.judge(kb, self.rules, item.question, item.answer)
                out["rules (local checker)"].append(rule)
                if self.nli:
                    nli = self.nli_score(claims)
                    out["nli model (via the KB)"].append(nli)
                    out["rules + nli model"].append(max(rule, nli))
        return out


class OnnxScorer:
    """A verifier exported by export.py: P(contradicted) of (premise, [question] answer)."""

    def __init__(self, model_dir: Path, max_len: int = 256, batch: int = 16) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model = model_dir / "model.onnx"  # the int8 model (export.py); model.fp32.onnx beside it
        self.name = f"model ({model.name})"
        self.session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.enable_truncation(max_length=max_len, strategy="longest_first")
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self.labels = json.loads((model_dir / "labels.json").read_text())
        self.batch = batch

    def probs(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        out = []
        for start in range(0, len(pairs), self.batch):
            enc = self.tok.encode_batch(pairs[start:start + self.batch])
            feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
            logits = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            out.append(e / e.sum(axis=1, keepdims=True))
        return np.concatenate(out) if out else np.zeros((0, len(self.labels)))

    def score(self, s: EvalSet) -> list[float]:
        pairs = [(i.premise, f"{i.question} {i.answer}".strip()) for i in s.items]
        return [float(p[self.labels.index("contradicted")]) for p in self.probs(pairs)]


# ---- the table ---------------------------------------------------------------------------------


def evaluate(sets: list[EvalSet], rules: bool, model: Path | None, nli: Path | None = None,
             nli_windows: int = 0) -> list[dict]:
    results = []
    kb_scorers = KBScorers(nli, nli_windows) if rules or nli else None
    model_scorer = OnnxScorer(model) if model else None
    for s in sets:
        scorers: list[tuple[str, list[float]]] = [
            ("length", [length_score(i) for i in s.items]),
            ("word overlap", [overlap_score(i) for i in s.items]),
        ]
        if kb_scorers:
            started = time.perf_counter()
            scorers += list(kb_scorers.score(s).items())
            print(f"  [{s.name}: checkers via the KB took {time.perf_counter() - started:.0f} s]", file=sys.stderr)
        if model_scorer:
            scorers.append((model_scorer.name, model_scorer.score(s)))
        for name, scores in scorers:
            neg = [x for x, i in zip(scores, s.items) if not i.wrong]
            pos = [x for x, i in zip(scores, s.items) if i.wrong]
            row = {"set": s.name, "right": len(neg), "wrong": len(pos), "scorer": name,
                   "auc": auc(neg, pos), "det5": detection_at_fp(neg, pos)}
            if name.startswith(("rules", "nli")):
                row["blocked"] = float(np.mean([p >= 0.8 for p in pos]))
                row["blocked_right"] = float(np.mean([n >= 0.8 for n in neg]))
                row["flagged"] = float(np.mean([p >= 0.5 for p in pos]))
                row["flagged_right"] = float(np.mean([n >= 0.5 for n in neg]))
                # the threshold a deployment would choose on this set: right answers blocked <= 3 %
                row["thr3"] = threshold_at_fp(neg, 0.03)
                row["blocked_at_thr3"] = detection_at_fp(neg, pos, 0.03)
                row["blocked_right_at_thr3"] = float(np.mean([n > row["thr3"] for n in neg]))
            results.append(row)
    return results


def table(results: list[dict]) -> str:
    lines = [f"{'set':44} {'right/wrong':>11}  {'scorer':24} {'AUC':>6} {'det@5%FP':>9}  policy defaults (checkers)",
             "-" * 128]
    last = None
    for r in results:
        name = r["set"] if r["set"] != last else ""
        counts = f"{r['right']}/{r['wrong']}" if name else ""
        extra = ""
        if "blocked" in r:
            extra = (f"blocked >=0.8: {r['blocked']:.1%} of wrong, {r['blocked_right']:.1%} of right; "
                     f"flagged >=0.5: {r['flagged']:.1%} / {r['flagged_right']:.1%}; "
                     f"> {r['thr3']:.3f}: {r['blocked_at_thr3']:.1%} / {r['blocked_right_at_thr3']:.1%}")
        lines.append(f"{name:44} {counts:>11}  {r['scorer']:24} {r['auc']:6.3f} {r['det5']:9.1%}  {extra}")
        last = r["set"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a folder from export.py (model.onnx, tokenizer.json, labels.json)")
    parser.add_argument("--skip-rules", action="store_true", help="only length and word overlap")
    parser.add_argument("--nli", type=Path, metavar="DIR",
                        help="also a model folder as `checker: nli` runs it, via the KB, alone and with the rules")
    parser.add_argument("--sets", default="halueval,swaps,natural,pairs",
                        help="comma-separated: halueval, swaps, natural (dev and held-out), natural-dev (dev only), pairs")
    parser.add_argument("--nli-windows", type=int, default=0, help="--nli on each claim's first N windows (0: all)")
    parser.add_argument("--swap-rows", type=int, default=SWAP_ROWS)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    wanted = set(args.sets.split(","))
    sets: list[EvalSet] = []
    if "halueval" in wanted:
        sets.append(halueval_matched())
    if "swaps" in wanted:
        sets.append(synthetic_swaps(n_rows=args.swap_rows))
    if "natural" in wanted:
        sets += [natural_answers("dev"), natural_answers("held-out")]
    elif "natural-dev" in wanted:  # selection and thresholds: the held-out half is not read
        sets.append(natural_answers("dev"))
    if "pairs" in wanted:
        sets.append(natural_pairs())
    results = evaluate(sets, rules=not args.skip_rules, model=args.model, nli=args.nli, nli_windows=args.nli_windows)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
