"""Probe sentences and latency of exported verifiers, as `checker: nli` loads them.

    python train/verifier/probe.py DIR [DIR ...]            # the probes: P(supported / contradicted / not_covered)
    python train/verifier/probe.py DIR --latency 1,2        # ... and 10 claims x N windows a call, N = 1, 2
    python train/verifier/probe.py DIR --json out.json

The probes are the sentences iteration 1's review wrote after its run (README, "What it shows"):
a verbatim true claim, a negated true claim, a negated false one, a unit paraphrase and a wrong
height. They are not a test set and nothing was trained or selected on them; the expectation
column is what a correct verifier says. Latency: one call of the model's `probabilities` on
10 claims x N windows (a claim and its first N retrieved windows, as the checker batches them),
windows of three sentences from the natural dev passages (bench/data/poisoning_natural.jsonl,
odd ids); median and p95 of 20 calls after 3 warm-up calls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

EIFFEL = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
          "It was completed in 1889 as the entrance arch to the World's Fair.")
EVEREST = "Mount Everest's summit stands 8,849 metres above sea level, the height agreed in 2020."
PROBES = [  # (premise, claim, what a correct verifier says)
    (EIFFEL, "The Eiffel Tower was completed in 1889.", "supported"),
    (EIFFEL, "The Eiffel Tower is located in Paris.", "supported"),
    (EIFFEL, "The Eiffel Tower was completed in 1925.", "contradicted"),
    (EIFFEL, "The tower was not completed in 1889.", "contradicted"),
    (EIFFEL, "The tower was not completed in 1925.", "supported"),
    (EIFFEL, "The Eiffel Tower is located in London.", "contradicted"),
    (EVEREST, "Everest is about 8.8 kilometres high.", "supported"),
    (EVEREST, "Everest is 7,200 metres high.", "contradicted"),
    (EVEREST, "Everest is not 8,849 metres high.", "contradicted"),
    (EVEREST, "Everest is not 7,200 metres high.", "supported"),
]
NAMES = {"entailment": "supported", "contradiction": "contradicted", "neutral": "not_covered"}


def checker(directory: Path):
    try:
        from ctxwarden.policies.poisoning.checkers.nli import NLIChecker
        from ctxwarden.policies.poisoning.config import NLIConfig
    except ImportError:  # pragma: no cover
        raise SystemExit("run with the project's environment (.venv/bin/python)")
    return NLIChecker(NLIConfig(model_path=str(directory)))


def probes(nli) -> list[dict]:
    probs = nli.model.probabilities([(p, c) for p, c, _ in PROBES])
    out = []
    for (_, claim, want), row in zip(PROBES, probs):
        scores = {NAMES.get(lab, lab): round(float(v), 3) for lab, v in zip(nli.labels, row)}
        out.append({"claim": claim, "expected": want, **scores, "argmax": max(scores, key=scores.get)})
    return out


def windows(n_claims: int = 10) -> list[tuple[list[str], str]]:
    """(windows of the claim's passage, claim) for the first natural dev answers."""
    import baselines
    import textops as tx

    out = []
    for item in baselines.natural_answers("dev").items[:n_claims]:
        sents = tx.sentences(item.premise)
        wins = [" ".join(sents[i:i + 3]) for i in range(0, max(1, len(sents)), 2)] or [item.premise]
        out.append((wins, f"{item.question} {item.answer}".strip()))
    return out


def latency(nli, n_windows: int, calls: int = 20) -> dict:
    claims = windows()
    pairs = [(w[k % len(w)], c) for w, c in claims for k in range(n_windows)]
    for _ in range(3):
        nli.model.probabilities(pairs)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        nli.model.probabilities(pairs)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"windows": n_windows, "pairs": len(pairs), "median_ms": round(statistics.median(times), 1),
            "p95_ms": round(times[int(0.95 * (len(times) - 1) + 0.5)], 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", type=Path, nargs="+", help="folders written by export.py")
    parser.add_argument("--latency", default="", help="comma-separated window counts, e.g. 1,2")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    report = {}
    for directory in args.models:
        nli = checker(directory)
        rows = probes(nli)
        print(f"\n{directory.name}")
        print(f"  {'claim':42} {'expected':13} {'sup':>6} {'con':>6} {'n/c':>6}")
        for r in rows:
            mark = "" if r["argmax"] == r["expected"] else "  <- wrong"
            print(f"  {r['claim']:42} {r['expected']:13} {r['supported']:6.3f} {r['contradicted']:6.3f} "
                  f"{r['not_covered']:6.3f}{mark}")
        lat = [latency(nli, int(n)) for n in args.latency.split(",") if n.strip()]
        for x in lat:
            print(f"  latency, 10 claims x {x['windows']} windows ({x['pairs']} pairs): median {x['median_ms']} ms, "
                  f"p95 {x['p95_ms']} ms")
        report[directory.name] = {"probes": rows, "latency": lat}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
