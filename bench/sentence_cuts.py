"""What cutting a huge text into claim-sized pieces costs (policies/text/sentences.bounded_sentences),
by size: 1, 4 and 16 MB of one long "sentence" (a log line or JSON result with no full stop), the
shape every reader of claims meets in a pasted file or a big tool result. Printed per size, with the
time of `str.split()` on the same text (a floor measured in the same run) and their ratio: a cost
linear in size keeps the ratio flat; cutting by copying each rest made it grow with the size
(16 MB: ~20 s)."""

from __future__ import annotations

import argparse
import statistics
import time

from ctxwarden.policies.poisoning.assess import MAX_CLAIM_CHARS
from ctxwarden.policies.text.sentences import bounded_sentences


def timed(fn, text: str, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn(text)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="1,4,16")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    unit = '{"id": 1041, "status": "shipped", "note": "left the warehouse on time"}, '
    print(f"{'size':>6} {'cut s':>8} {'split s':>8} {'ratio':>6} {'pieces':>8}")
    for mb in (int(s) for s in args.sizes_mb.split(",")):
        text = unit * (mb * 2**20 // len(unit))
        cut = timed(lambda t: bounded_sentences(t, MAX_CLAIM_CHARS), text, args.repeat)
        floor = timed(str.split, text, args.repeat)
        print(f"{mb:>4} MB {cut:>8.3f} {floor:>8.3f} {cut / floor:>6.1f} {len(bounded_sentences(text, MAX_CLAIM_CHARS)):>8}")


if __name__ == "__main__":
    main()
