"""bench/agent_loop.py on real agent steps (`--workload livemcp`, LiveMCPBench's calls and results):
the data, the planted facts, and a short loop at a tight window through the real server."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import agent_loop
import livemcp_workload
from agent_workload import Fact

from ctxwarden.policies.text.tokens import TiktokenCounter

COUNTER = TiktokenCounter()


def count(text: str) -> int:
    return COUNTER.count_text(text, agent_loop.MODEL)


def test_the_real_steps_load_with_their_results():
    tasks = livemcp_workload.load(0, count)
    steps = [s for t in tasks for s in t["steps"]]
    assert len(tasks) == 95 and len(steps) > 800
    assert {s["name"] for s in steps} == {"route", "execute-tool"}
    sizes = sorted(count(s["result"]) for s in steps)
    assert 100 < sizes[len(sizes) // 2] < 400 and sizes[-1] > 4000  # real results: mostly small, some big
    big = livemcp_workload.load(300, count)
    assert all(count(s["result"]) >= 300 for t in big for s in t["steps"]) and len(big) < len(tasks)


def test_a_planted_fact_is_one_sentence_at_a_break_and_the_rest_is_unchanged():
    rng = random.Random(3)
    text = "line one\nline two\nline three"
    fact = Fact.plant(rng, "record")
    planted = livemcp_workload.plant(rng, text, fact)
    sentence = f"Confirmation code for reference {fact.key}: {fact.answer}."
    assert sentence in planted and planted.replace("\n" + sentence, "", 1) == text
    one_line = livemcp_workload.plant(rng, "a b c", fact)
    assert one_line.replace(" " + sentence, "", 1) == "a b c"


def test_a_session_runs_the_tasks_in_order_with_their_questions_and_answers():
    workload = livemcp_workload.LiveMCPWorkload(livemcp_workload.load(0, count))
    first, steps = workload.session(random.Random(1), 0, [])
    taken = [next(steps) for _ in range(60)]
    finals = [s for s in taken if s.result is None]
    assert finals and all(s.user and "final" in s.call for s in finals)
    assert first != finals[0].user  # the next task's question follows the first task's answer
    calls = [s for s in taken if s.result is not None]
    assert all(s.call["name"] in ("route", "execute-tool") and isinstance(s.call["arguments"], dict) for s in calls)


def test_a_real_agent_loop_at_a_tight_window_keeps_its_prefix_and_every_fact():
    model = agent_loop.ScriptedModel()
    upstream = agent_loop.serve_model(model)
    proxy, url = agent_loop.start_proxy(upstream, agent_loop.proxy_config("chat", upstream, 32_000))
    try:
        workload = livemcp_workload.LiveMCPWorkload(livemcp_workload.load(300, count))
        r = agent_loop.run_once(url, model, random.Random(11), 40, COUNTER, 32_000, 0, "chat", workload)
    finally:
        proxy.stop()
    assert r["over"] == 0 and r["events"] >= 2  # the window filled and was compacted
    assert r["stable"] / r["pairs"] >= 0.85
    assert r["facts"] >= 10 and r["in_text"] + r["recalled"] == r["facts"] and r["recalled"] > 0
    assert r["newest_verbatim"] == r["newest"] > 0
