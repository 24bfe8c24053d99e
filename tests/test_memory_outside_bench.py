"""bench/memory_outside.py: the outside benchmark's data loads, and a short run goes end to end
through the real server (the proxy and the fake upstream as child processes)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import memory_outside

SHA256 = {  # as extracted from cri-benchmark 0.1.2 (bench/data/memory_outside/README.md)
    "conversations.jsonl": "26cb1b0de860dd2f63e169ec14fa9d4733478ecf75541aceaff4b4f94cc4201b",
    "ground_truth.json": "9e6d669b989ea42e97a1b66c1012186c41af0dcc4246458dff92946b42d417f3",
}


def test_the_data_is_the_package_s_and_loads():
    for name, digest in SHA256.items():
        assert hashlib.sha256((memory_outside.DATA / name).read_bytes()).hexdigest() == digest
    assert (memory_outside.DATA / "LICENSE").read_text().startswith("MIT License")
    messages, truth = memory_outside.load()
    assert len(messages) == 2862 and sum(m["role"] == "user" for m in messages) == 1431
    assert len(memory_outside.sessions_in_order(messages)) == 665
    qs = memory_outside.questions(truth)
    assert [sum(q.kind == k for q in qs) for k in ("change", "conflict", "relevance")] == [7, 8, 20]
    by_id = {m["message_id"]: m for m in messages}
    assert all(by_id[i]["role"] == "user" for q in qs for i in q.evidence)  # every evidence turn is the user's
    # a change asked while still current: before the next change of the same topic begins
    located = [q for q in qs if q.text == "What is my current location?"]
    assert located[0].ask_before == 2461 and located[1].ask_before is None
    assert len(memory_outside.signal_turns(messages, truth)) == 18
    assert len(memory_outside.signal_turns(messages, truth, "noise_examples")) == 20


def test_block_lines_reads_the_injected_block_only():
    assert memory_outside.block_lines("Relevant context:\n- I am vegan.\n- I live in Austin.\n\nWhat is my diet?") == [
        "I am vegan.", "I live in Austin."]
    assert memory_outside.block_lines("What is my diet?") == []


def test_a_short_run_goes_through_the_real_server():
    lines: list[str] = []
    figures = memory_outside.run(sessions_limit=8, out=lines.append)
    # every user turn of the 8 sessions and the 20 phrase-labelled questions (no turn-labelled one is due yet)
    assert figures["requests"] == figures["user_turns"] + 20 and figures["user_turns"] > 10
    assert figures["memories"] > 0 and figures["unmatched_lines"] == 0
    assert figures["relevance_questions"] == 20 and figures["questions"] == 0
    assert any(line.startswith("extraction recall") for line in lines)
