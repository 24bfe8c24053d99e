"""OpenAI's custom tools (`{"type": "custom", "custom": {"name", "input"}}` calls, free-text input)
through the chat route: a follow-up turn after such a call is valid, and the policies read the call's
name and input as they read a function call's name and arguments (before, every custom call looked
the same to them: one name-less call without arguments)."""

from __future__ import annotations

from ctxwarden.policies.loops.detect import find_loop
from ctxwarden.policies.text.tokens import TiktokenCounter
from tests.conftest import openai_client

PATCH_TOOL = {"type": "custom", "custom": {"name": "apply_patch", "description": "Apply a patch to the repository"}}


def custom_call(i: int, patch: str) -> dict:
    return {"id": f"call_{i}", "type": "custom", "custom": {"name": "apply_patch", "input": patch}}


def patching_run(patches: list[str], result: str = "Done.") -> list[dict]:
    """A user turn, then one custom call a round, each answered with `result`."""
    messages: list[dict] = [{"role": "user", "content": "Fix the failing tests in the parser module."}]
    for i, patch in enumerate(patches):
        messages += [{"role": "assistant", "content": None, "tool_calls": [custom_call(i, patch)]},
                     {"role": "tool", "tool_call_id": f"call_{i}", "content": result}]
    return messages


PATCHES = [f"*** Begin Patch\n*** Update File: src/parser_{i}.py\n@@\n-    return None\n+    return parse_{i}(text)\n*** End Patch"
           for i in range(8)]


def test_a_turn_after_a_custom_tool_call_is_forwarded_as_sent(fake, start_proxy):
    proxy = start_proxy()  # the default policies
    messages = patching_run(PATCHES[:1])
    reply = openai_client(proxy).chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, tools=[PATCH_TOOL])
    assert reply.http_response.status_code == 200
    sent = fake.chat_requests[-1]
    assert sent["messages"][1]["tool_calls"] == [custom_call(0, PATCHES[0])]
    assert sent["tools"] == [PATCH_TOOL]


def test_distinct_patches_are_no_loop_and_the_same_patch_again_is_one(fake, start_proxy):
    proxy = start_proxy()
    client = openai_client(proxy)
    working = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=patching_run(PATCHES), tools=[PATCH_TOOL])
    assert working.headers["x-ctxwarden-actions"] == ""  # eight different patches: an agent at work
    assert len(fake.chat_requests) == 1
    stuck = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=patching_run(PATCHES[:1] * 4), tools=[PATCH_TOOL])
    assert "loops.inject" in stuck.headers["x-ctxwarden-actions"]  # the same patch four times, the same answer:
    assert fake.chat_requests[-1]["messages"][-1]["content"].startswith("[ctxwarden] Loop guard")  # the model is told


def test_the_detector_reads_a_custom_calls_input():
    assert find_loop(patching_run(PATCHES), max_repeats=3, max_period=6) is None
    assert find_loop(patching_run(PATCHES[:1] * 4), max_repeats=3, max_period=6) is not None


def test_a_custom_calls_input_is_counted_as_tokens():
    counter = TiktokenCounter()
    short, long = (patching_run([p])[1] for p in ("*** Begin Patch\n*** End Patch", PATCHES[0] * 20))
    assert counter.count_message(long, "gpt-4o") - counter.count_message(short, "gpt-4o") > 200
