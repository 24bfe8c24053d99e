"""Do no harm, loops (issue 41, item 3), through the real server and the fake upstream:

- a long agent run of distinct calls is never stopped with the default config (no count limit);
- a true loop (the same call, the same arguments, the same result) gets a note to the model first
  (the default, `action: inject`) and is stopped if it goes on; a stop says the proxy wrote it:
  finish_reason "content_filter", x-ctxwarden-actions loops.stop, text opening with "[ctxwarden]",
  body field ctxwarden.author == "proxy" (streamed too);
- `action: inject` forwards its note in a user turn, never as a late system/developer message.
"""

from __future__ import annotations

import json

import httpx

from tests.conftest import openai_client, policies_off
from tests.test_loops_detect import convo

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}]
SAME = ("read_file", {"path": "src/app.py"}, "def main():\n    return 1\n")  # one call, one result


def loops_only(**loops) -> dict:
    """Every other policy off; loops with its defaults, except what is given."""
    policies = policies_off("loops")
    policies["loops"] = {"enabled": True, **loops}
    return {"policies": policies}


def post(client: httpx.Client, messages: list[dict], **body) -> httpx.Response:
    return client.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": messages, "tools": TOOLS, **body})


def sse_events(response: httpx.Response) -> list[dict]:
    lines = [line.removeprefix("data: ") for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def agent_run(fake, proxy, steps: int) -> list[dict]:
    """`steps` requests of one agent turn, each a new call (another file) with a fresh result; every
    answer must come from the upstream. Returns the last conversation sent."""
    messages = convo(user="Refactor the project: read every module and report what each one does.")
    with httpx.Client(base_url=proxy.url, timeout=30) as client:
        for step in range(steps):
            answer = post(client, messages)
            assert answer.status_code == 200, answer.text
            actions = answer.headers["x-ctxwarden-actions"]
            assert "loops." not in actions, f"step {step}: {actions}"
            assert "ctxwarden" not in answer.json(), f"step {step}: answered by the proxy"
            assert len(fake.chat_requests) == step + 1, f"step {step} never reached the upstream"
            call_id = f"call_{step}"
            messages = [*messages,
                        {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
                            "name": "read_file", "arguments": json.dumps({"path": f"src/module_{step}.py"})}}]},
                        {"role": "tool", "tool_call_id": call_id, "content": f"# module {step}\nVALUE = {step}\n"}]
    return messages[:-2]


def test_a_200_step_run_of_distinct_calls_is_never_stopped_with_the_default_config(fake, start_proxy):
    agent_run(fake, start_proxy(), 200)  # every policy on, every default: what a new user meets


def test_a_200_step_run_passes_the_loops_policy_unchanged(fake, start_proxy):
    sent = agent_run(fake, start_proxy(loops_only()), 200)
    assert fake.chat_requests[-1]["messages"] == sent  # 199 rounds in, forwarded as sent


def test_a_true_loop_gets_a_note_first_and_is_stopped_if_it_goes_on(fake, start_proxy):
    proxy = start_proxy()  # the default config
    with httpx.Client(base_url=proxy.url, timeout=30) as client:
        assert "loops." not in post(client, convo(SAME, SAME)).headers["x-ctxwarden-actions"]  # twice: not yet a loop
        noted = post(client, convo(SAME, SAME, SAME))  # three times: the model is told, and answers
        assert "loops.inject" in noted.headers["x-ctxwarden-actions"].split(",") and "ctxwarden" not in noted.json()
        assert fake.chat_requests[-1]["messages"][-1]["content"].startswith("[ctxwarden] Loop guard")
        answer = post(client, convo(SAME, SAME, SAME, SAME))  # it called the same thing again
    assert answer.status_code == 200
    assert "after a note" in answer.json()["choices"][0]["message"]["content"]
    _assert_stopped_by_the_proxy(answer)
    assert len(fake.chat_requests) == 2  # the continued loop never reached the upstream


def test_a_true_loop_is_stopped_at_once_with_action_stop(fake, start_proxy):
    proxy = start_proxy(loops_only(action="stop"))
    with httpx.Client(base_url=proxy.url, timeout=30) as client:
        assert "loops." not in post(client, convo(SAME, SAME)).headers["x-ctxwarden-actions"]  # twice: not yet a loop
        answer = post(client, convo(SAME, SAME, SAME))
    _assert_stopped_by_the_proxy(answer)
    assert len(fake.chat_requests) == 1  # only the request before the loop reached the upstream


def _assert_stopped_by_the_proxy(answer: httpx.Response) -> None:
    assert answer.status_code == 200
    assert "loops.stop" in answer.headers["x-ctxwarden-actions"].split(",")
    body = answer.json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "content_filter"
    assert choice["message"]["content"].startswith("[ctxwarden] I stopped this agent run")
    assert "read_file(" in choice["message"]["content"]
    assert body["ctxwarden"] == {"author": "proxy", "reason": "loops.stop"}


def test_a_true_loop_is_stopped_while_streaming(fake, start_proxy):
    proxy = start_proxy(loops_only(action="stop"))
    with httpx.Client(base_url=proxy.url, timeout=30) as client:
        answer = post(client, convo(SAME, SAME, SAME), stream=True, stream_options={"include_usage": True})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    assert "loops.stop" in answer.headers["x-ctxwarden-actions"].split(",")
    events = sse_events(answer)
    assert events[0]["ctxwarden"] == {"author": "proxy", "reason": "loops.stop"}
    text = "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])
    assert text.startswith("[ctxwarden] I stopped this agent run")
    assert [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]] == ["content_filter"]
    assert events[-1]["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert fake.chat_requests == []


def test_the_stop_reads_as_the_proxys_in_the_openai_sdk(fake, start_proxy):
    client = openai_client(start_proxy(loops_only(action="stop")))
    answer = client.chat.completions.create(model="gpt-4o", messages=convo(SAME, SAME, SAME), tools=TOOLS)
    assert answer.choices[0].finish_reason == "content_filter"
    assert answer.model_extra["ctxwarden"]["author"] == "proxy"


def test_an_answer_from_the_model_carries_no_proxy_mark(fake, start_proxy):
    proxy = start_proxy(loops_only())
    with httpx.Client(base_url=proxy.url, timeout=30) as client:
        plain = post(client, convo())
        streamed = post(client, convo(), stream=True)
    assert "ctxwarden" not in plain.json() and plain.json()["choices"][0]["finish_reason"] == "stop"
    assert all("ctxwarden" not in e for e in sse_events(streamed))


def test_inject_forwards_no_late_system_message(fake, start_proxy):
    proxy = start_proxy(loops_only(action="inject"))
    for first_role in ("system", "developer"):
        fake.reset()
        looping = convo(SAME, SAME, SAME)
        looping[0] = {"role": first_role, "content": "You are a coding agent."}
        with httpx.Client(base_url=proxy.url, timeout=30) as client:
            first = post(client, looping, user=f"note-{first_role}")
            again = post(client, looping, user=f"note-{first_role}")  # the same request again: the same bytes
        assert first.headers["x-ctxwarden-actions"] == again.headers["x-ctxwarden-actions"] == "loops.inject"
        assert "ctxwarden" not in first.json()  # the model answered
        forwarded = fake.chat_requests[0]["messages"]
        assert forwarded[0]["role"] == first_role
        assert [m["role"] for m in forwarded[1:] if m["role"] in ("system", "developer")] == []
        assert forwarded[:-1] == looping  # the client's conversation is an unchanged prefix
        note = forwarded[-1]
        assert note["role"] == "user" and note["content"].startswith("[ctxwarden] Loop guard") and "read_file(" in note["content"]
        assert fake.received[1].raw == fake.received[0].raw

