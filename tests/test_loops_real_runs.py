"""The loops policy's default on real agent runs: LiveMCPBench's 95 trajectories (Claude Sonnet 4
through an MCP agent: 814 real calls and results, bench/data/mcp_catalog/loop_steps.jsonl.gz),
each request of each run as the agent sent it. Nothing here was written for ctxwarden."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from ctxwarden.policies.base import Respond
from ctxwarden.policies.loops.policy import LoopsConfig
from tests.test_loops_policy import exchange, make_policy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from livemcp_workload import load  # noqa: E402


def requests_of(task: dict) -> list[list[dict]]:
    """The message list of each request the agent sent in this run: before each call, and after the last."""
    messages = [{"role": "system", "content": task["system"]}, {"role": "user", "content": task["question"]}]
    out = []
    for i, step in enumerate(task["steps"]):
        out.append(messages)
        call = {"id": f"call_{i}", "type": "function", "function": {"name": step["name"], "arguments": step["arguments"]}}
        messages = [*messages, {"role": "assistant", "content": step["say"] or None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": f"call_{i}", "content": step["result"]}]
    return [*out, messages]


def replay(policy, task: dict) -> list[tuple[int, list[str], object]]:
    """(request number, actions, verdict) of each request the policy acted on."""
    acted = []
    for n, messages in enumerate(requests_of(task)):
        ex = exchange(messages, session=task["id"])
        verdict = asyncio.run(policy.on_request(ex))
        if ex.action_labels() or verdict is not None:
            acted.append((n, ex.action_labels(), verdict))
    return acted


TASKS = load(0, len)  # every step (a result of any size)


def test_no_real_run_is_stopped_by_default_and_the_one_repetition_gets_a_note():
    assert LoopsConfig().action == "inject"
    policy, metrics = make_policy()
    acted = {task["id"][:8]: replay(policy, task) for task in TASKS}
    acted = {k: v for k, v in acted.items() if v}
    assert not any(isinstance(verdict, Respond) for runs in acted.values() for _, _, verdict in runs)
    # The one repetition in 95 runs: music-analysis `load` timed out three times in a row. The real
    # agent's next step was another approach (a file-info lookup), which a stop would have taken from it.
    assert list(acted) == ["99d7541a"] and [a for _, a, _ in acted["99d7541a"]] == [["loops.inject"]]
    n = acted["99d7541a"][0][0]
    task = next(t for t in TASKS if t["id"].startswith("99d7541a"))
    assert [s["result"] for s in task["steps"][n - 3:n]] == ["Tool call timed out."] * 3
    assert task["steps"][n]["name"] == "route"  # what the agent did next: it searched for something else
    assert metrics.total("ctxwarden.loops.injections") == 1 and metrics.total("ctxwarden.loops.stops") == 0


def test_had_that_agent_called_the_same_thing_again_after_the_note_it_would_be_stopped():
    task = next(t for t in TASKS if t["id"].startswith("99d7541a"))
    policy, _ = make_policy()
    requests = requests_of(task)
    noted = next(n for n, actions, _ in replay(policy, task) if actions == ["loops.inject"])
    stuck = requests[noted]
    last_call = stuck[-2]["tool_calls"][0]
    again = [*stuck, {"role": "assistant", "content": None, "tool_calls": [{**last_call, "id": "call_again"}]},
             {"role": "tool", "tool_call_id": "call_again", "content": "Tool call timed out."}]
    ex = exchange(again, session=task["id"])
    verdict = asyncio.run(policy.on_request(ex))
    assert isinstance(verdict, Respond) and verdict.reason == "loops.stop" and ex.action_labels() == ["loops.stop"]
    assert json.loads(last_call["function"]["arguments"])["tool_name"] == "load"


def test_with_action_stop_that_run_is_ended_where_its_agent_changed_course():
    task = next(t for t in TASKS if t["id"].startswith("99d7541a"))
    policy, _ = make_policy(action="stop")
    acted = replay(policy, task)
    assert len(acted) == 1 and isinstance(acted[0][2], Respond)
