"""bench/_agent_steps.py, which bench/overhead.py's per-step figure rests on: the two compared windows
read the same amount of new text, and the history's share of a step is read apart from the new
result's size and from the compaction events."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from _agent_steps import LoopTimes, around, matched_windows, size_adjusted  # noqa: E402


def test_the_two_windows_get_results_of_matched_sizes_and_the_rest_is_untouched():
    rng = random.Random(3)
    results = ["x" * rng.randint(1_200, 27_000) for _ in range(60)]
    windows = [range(2, 7), range(55, 60)]
    dealt = matched_windows(results, random.Random(1), windows)
    early, late = (sum(len(dealt[i]) for i in w) for w in windows)
    before = [sum(len(results[i]) for i in w) for w in windows]
    assert abs(early - late) <= max(len(results[i]) for w in windows for i in w) - min(len(results[i]) for w in windows for i in w)
    assert abs(early - late) <= abs(before[0] - before[1]) or before[0] == before[1]
    assert sorted(dealt[i] for w in windows for i in w) == sorted(results[i] for w in windows for i in w)
    assert [dealt[i] for i in range(60) if not any(i in w for w in windows)] == \
           [results[i] for i in range(60) if not any(i in w for w in windows)]


def test_size_adjusted_reads_the_history_s_share_apart_from_the_new_result_and_the_events():
    """Made-up times: 1 ms + 0.2 ms per 1,000 characters of the new result + 10 µs per step, an event
    (100 ms) every 14 steps, and sizes that grow late in the run: the raw windows read a growth the
    history did not make; the fit finds 0.2 ms and 10 µs, and the adjusted late/early is the history's."""
    rng = random.Random(5)
    steps = range(1, 61)
    times = LoopTimes({k: [] for k in steps}, {k: [] for k in steps}, {k: [] for k in steps}, {k: [] for k in steps})
    for _ in range(4):
        for k in steps:
            size = rng.randint(1_200, 6_000) * (3 if k > 50 else 1)
            event = k % 14 == 3
            times.sizes[k].append(size)
            times.events[k].append(event)
            times.policy[k].append(100.0 if event else 1.0 + 0.2 * size / 1000 + 0.01 * k)
            times.added[k].append(times.policy[k][-1])
    per_kchar, per_step, adjusted = size_adjusted(times)
    assert abs(per_kchar - 0.2) < 1e-6 and abs(per_step - 10) < 1e-3
    raw = around(times.policy, 58, events=times.events) / around(times.policy, 5, events=times.events)
    history = around(adjusted, 58) / around(adjusted, 5)
    assert raw > 1.5 and abs(history - (1 + 0.2 * 3.6 + 0.58) / (1 + 0.2 * 3.6 + 0.05)) < 0.05
    assert around(times.policy, 58, events=times.events, event=True) == 100.0  # step 59's events, apart
