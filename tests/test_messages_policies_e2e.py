"""The policies on POST /v1/messages (issue 42, "Done when"), through the real server and the official
anthropic SDK, asserting on what the fake upstream received: history compaction with tool_use /
tool_result pairs intact and the system breakpoint byte for byte; a 60-step agent loop whose prefix
up to the moving breakpoint holds between compaction events; find_tools answered by the proxy on the
native route; memory injected from metadata.user_id; the translated route streamed."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from ctxwarden.policies.tools.search import FIND_TOOLS
from tests.conftest import ALL_POLICIES, policies_off
from tests.tools_fixtures import all_tools, tool

anthropic = pytest.importorskip("anthropic")

MODEL = "claude-test-model"
SYSTEM = [{"type": "text", "text": "You are an operations agent for Northwind. Investigate, then report. " * 20,
           "cache_control": {"type": "ephemeral"}}]
TASK = "Find why checkouts failed last week and report the order ids involved."


def native(fake, policies=ALL_POLICIES, window: int | None = None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"upstream": {"anthropic": {"base_url": f"{fake.url}/v1", "api_key_env": None}},
                              "policies": policies_off(*policies), **extra}
    if window:
        config["models"] = {MODEL: {"context_window": window}}
    return config


def client(proxy, **kwargs: Any):
    return anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-client", max_retries=0, **kwargs)


def anthropic_tool(chat_tool: dict[str, Any]) -> dict[str, Any]:
    fn = chat_tool["function"]
    return {"name": fn["name"], "description": fn["description"], "input_schema": fn["parameters"]}


# ----------------------------------------------------------------------------- an agent run


def bulky_result(rng: random.Random, step: int, size: int) -> str:
    """A JSON search result or a service log of about `size` tokens; step 3's log holds one error."""
    if step % 2 == 0:
        records = [{"id": f"ORD-{rng.randint(100000, 999999)}", "status": rng.choice(["shipped", "pending", "failed"]),
                    "amount": round(rng.uniform(5, 900), 2), "region": rng.choice(["eu-west", "us-east", "ap-south"])}
                   for _ in range(size // 28)]
        return json.dumps({"page": step, "total": len(records), "results": records})
    lines = [f"2024-03-{10 + step % 9:02d}T12:{i % 60:02d}:{(i * 7) % 60:02d}Z INFO checkout-svc worker={i % 8} "
             f"handled request id=req-{rng.randint(10**6, 10**7)} in {rng.randint(3, 900)}ms" for i in range(size // 30)]
    if step == 3:
        lines.insert(len(lines) // 2, "2024-03-13T12:30:00Z ERROR checkout-svc PaymentGatewayTimeout: acquirer did not answer")
    return "\n".join(lines)


def step_turns(rng: random.Random, step: int, size: int) -> list[dict[str, Any]]:
    """One agent step: the assistant's tool_use, then the user's tool_result."""
    tool_id = f"toolu_{step:03d}"
    name = "search_orders" if step % 2 == 0 else "read_logs"
    return [{"role": "assistant", "content": [{"type": "text", "text": f"Checking {name} page {step}."},
                                              {"type": "tool_use", "id": tool_id, "name": name, "input": {"page": step}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                          "content": bulky_result(rng, step, size)}]}]


AGENT_TOOLS = [{"name": "search_orders", "description": "Search orders by page.", "input_schema": {"type": "object"}},
               {"name": "read_logs", "description": "Read checkout service logs by page.", "input_schema": {"type": "object"}}]


def assert_alternating_with_pairs(messages: list[dict[str, Any]]) -> None:
    """Roles alternate from a user turn; every tool_use is answered in the next user turn, and every
    tool_result there answers a tool_use of the assistant turn before it."""
    assert messages and messages[0]["role"] == "user"
    for k, message in enumerate(messages):
        assert message["role"] == ("user" if k % 2 == 0 else "assistant"), f"messages[{k}] breaks the alternation"
    for k, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        results = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
        if message["role"] == "user":
            before = messages[k - 1]["content"] if k else []
            uses = {b["id"] for b in before if isinstance(b, dict) and b.get("type") == "tool_use"} if isinstance(before, list) else set()
            assert results == uses, f"messages[{k}]: results {sorted(results)} answer calls {sorted(uses)}"
    last = messages[-1]
    assert last["role"] == "user"


def actions_of(raw: Any) -> list[str]:
    return [a for a in raw.headers.get("x-ctxwarden-actions", "").split(",") if a]


# ----------------------------------------------------------------------------- 1. compaction


def test_a_long_agent_run_is_compacted_with_its_pairs_and_breakpoint_intact(fake, start_proxy):
    """A 32-step run with 2-3k-token results, step by step, as the agent sends it, in a 32k window."""
    proxy = start_proxy(native(fake, window=32000))
    c = client(proxy, default_headers={"x-ctxwarden-session": "run-32"})
    rng = random.Random(7)
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    events: list[int] = []
    for step in range(32):
        messages += step_turns(rng, step, size=rng.randint(2000, 3000))
        raw = c.messages.with_raw_response.create(model=MODEL, max_tokens=500, system=SYSTEM, messages=messages,
                                                  tools=AGENT_TOOLS)
        assert raw.parse().content[0].text.startswith("You said:")
        if "history.compaction" in actions_of(raw):
            events.append(step)
        sent = fake.received[-1]
        body = sent.body
        assert_alternating_with_pairs(body["messages"])
        # The system block with its breakpoint, byte for byte (as the client's SDK serialized it).
        assert body["system"] == SYSTEM and json.dumps(SYSTEM[0]["text"]).encode() in sent.raw
        assert b'"cache_control":{"type":"ephemeral"}' in sent.raw or b'"cache_control": {"type": "ephemeral"}' in sent.raw
        # The latest step verbatim (its tool_use and its tool_result).
        assert body["messages"][-2:] == messages[-2:]
        first = body["messages"][0]["content"]
        first_text = first if isinstance(first, str) else "".join(b.get("text", "") for b in first if b.get("type") == "text")
        assert first_text.startswith(TASK)
    assert events, "no compaction event in 32 steps of 2-3k tokens in a 32k window"
    assert len(body["messages"]) < len(messages)
    assert "[ctxwarden: summary of" in json.dumps(body["messages"])
    assert "PaymentGatewayTimeout" in json.dumps(body["messages"])  # the one error of a compacted log survived


# ----------------------------------------------------------------------------- 2. a 60-step loop


def without_breakpoints(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(messages)
    for message in out:
        if isinstance(message["content"], list):
            for block in message["content"]:
                block.pop("cache_control", None)
    return out


def with_moving_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As coding agents send it: cache_control on the last block of the latest user turn only."""
    out = without_breakpoints(messages)
    last = out[-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return out


def dumped(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def test_a_60_step_loop_keeps_the_prefix_up_to_the_last_breakpoint_between_events(fake, start_proxy):
    proxy = start_proxy(native(fake, window=48000))
    c = client(proxy, default_headers={"x-ctxwarden-session": "loop-60"})
    rng = random.Random(11)
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": TASK}]}]
    previous: dict[str, Any] | None = None
    events: list[int] = []
    kept = 0
    for step in range(60):
        if step:
            history += step_turns(rng, step - 1, size=rng.randint(300, 700))
        messages = with_moving_breakpoint(history)
        raw = c.messages.with_raw_response.create(model=MODEL, max_tokens=300, system=SYSTEM, messages=messages,
                                                  tools=AGENT_TOOLS)
        actions = actions_of(raw)
        assert "loops.stop" not in actions and raw.http_response.status_code == 200
        sent = fake.messages_requests[-1]
        assert_alternating_with_pairs(sent["messages"])
        assert sent["system"] == SYSTEM  # the system breakpoint never moves
        assert sent["messages"][-1] == messages[-1]  # the moving breakpoint reaches the upstream
        is_event = "history.compaction" in actions
        if is_event:
            events.append(step)
        elif previous is not None:
            before = previous["messages"]
            # Every message before the previous request's breakpoint turn is the same bytes ...
            assert [dumped(m) for m in sent["messages"][: len(before) - 1]] == [dumped(m) for m in before[:-1]], step
            # ... and that turn itself differs only by the breakpoint the client moved on.
            assert without_breakpoints([sent["messages"][len(before) - 1]]) == without_breakpoints([before[-1]]), step
            assert dumped(sent["system"]) == dumped(previous["system"])
            assert raw.headers["x-ctxwarden-prefix"] == "extends", step
            kept += 1
        previous = sent
    # Rare events (distraction events every 14 exchanges with the default history settings: 4 in 60 steps).
    assert 1 <= len(events) <= 4, f"compaction events at steps {events}"
    assert all(b - a >= 10 for a, b in zip(events, events[1:])), f"compaction events at steps {events}"
    assert kept == 59 - len(events)


# ----------------------------------------------------------------------------- 3. find_tools


TIDE = tool("get_tide_times", "Get high and low tide times for a beach.", ["beach"])


def test_find_tools_is_answered_by_the_proxy_on_the_native_route(fake, start_proxy):
    proxy = start_proxy(native(fake, ["tools"]))
    catalog = all_tools(44)
    tools = [anthropic_tool(t) for t in catalog[:5] + [TIDE] + catalog[5:]]  # early in the client's list
    assert len(tools) == 45
    fake.reply(tool_calls=[{"name": FIND_TOOLS, "arguments": json.dumps({"query": "high and low tide times at a beach"}),
                            "id": "toolu_find"}])
    fake.reply(content="High tide at La Concha is at 14:12.")
    ask = [{"role": "user", "content": "Book me a taxi to Playa de la Concha for this afternoon."}]
    raw = client(proxy, default_headers={"x-ctxwarden-session": "tide"}).messages.with_raw_response.create(
        model=MODEL, max_tokens=300, tools=tools, messages=ask)
    answer = raw.parse()
    assert "tools.search" in actions_of(raw) and "tools.filter" in actions_of(raw)
    # The client never sees the search: only the answer.
    assert [b.type for b in answer.content] == ["text"] and answer.stop_reason == "end_turn"
    assert answer.content[0].text == "High tide at La Concha is at 14:12."
    first, inner = fake.messages_requests
    names_first = [t["name"] for t in first["tools"]]
    names_inner = [t["name"] for t in inner["tools"]]
    assert len(names_first) < 45 and "get_tide_times" not in names_first and names_first[0] == FIND_TOOLS
    # The second request: the same list, the found tool appended at its end (find_tools stays first) ...
    assert names_inner[: len(names_first)] == names_first  # the found tool appended at the end: the prefix holds
    assert "get_tide_times" in names_inner[len(names_first):]
    assert next(t for t in inner["tools"] if t["name"] == "get_tide_times") == anthropic_tool(TIDE)  # as the client sent it
    # ... and the find_tools call with its tool_result, in Anthropic's shape.
    assert inner["messages"][:-2] == first["messages"]
    call, result = inner["messages"][-2:]
    assert call["role"] == "assistant" and call["content"][-1]["type"] == "tool_use" and call["content"][-1]["name"] == FIND_TOOLS
    assert result["role"] == "user" and result["content"][0]["type"] == "tool_result"
    assert result["content"][0]["tool_use_id"] == "toolu_find" and "get_tide_times" in json.dumps(result["content"][0])
    # The client's next step forwards the list the inner round ended with (appended to, never reordered).
    fake.reply(content="Booked for 13:30.")
    follow = [*ask, {"role": "assistant", "content": answer.content[0].text}, {"role": "user", "content": "Then book it."}]
    client(proxy, default_headers={"x-ctxwarden-session": "tide"}).messages.create(
        model=MODEL, max_tokens=300, tools=tools, messages=follow)
    assert [t["name"] for t in fake.messages_requests[-1]["tools"]][: len(names_inner)] == names_inner


# ----------------------------------------------------------------------------- 4. memory


@pytest.mark.parametrize("named_by", ["metadata", "header"])
def test_a_lasting_preference_is_injected_in_a_later_conversation(fake, start_proxy, named_by):
    proxy = start_proxy(native(fake, ["memory"]))

    def ask(text: str, session: str) -> list[str]:
        headers = {"x-ctxwarden-session": session}
        extra: dict[str, Any] = {}
        if named_by == "header":
            headers["x-ctxwarden-user"] = "alice"
        else:
            extra["metadata"] = {"user_id": "alice"}
        raw = client(proxy, default_headers=headers).messages.with_raw_response.create(
            model=MODEL, max_tokens=100, system="You are a travel agent.", messages=[{"role": "user", "content": text}], **extra)
        return actions_of(raw)

    assert "memory.write" in ask("I prefer budget hotels, nothing fancy.", "s1")
    assert "Relevant context" not in json.dumps(fake.messages_requests[-1]["messages"])

    assert "memory.select" in ask("Find me a hotel in Rome for three nights.", "s2")
    sent = fake.messages_requests[-1]
    last = sent["messages"][-1]["content"]
    text = last if isinstance(last, str) else "".join(b["text"] for b in last if b["type"] == "text")
    assert text.startswith("Relevant context:\n- I prefer budget hotels, nothing fancy.\n\n")
    assert text.endswith("Find me a hotel in Rome for three nights.")
    assert sent["system"] == "You are a travel agent."  # never the system prompt

    assert "memory.select" not in ask("Write a haiku about autumn leaves.", "s3")
    assert fake.messages_requests[-1]["messages"][-1]["content"] == "Write a haiku about autumn leaves."


# ----------------------------------------------------------------------------- 5. translated, streamed


def translated(**extra: Any) -> dict[str, Any]:
    return {"upstream": {"anthropic": {"base_url": None}}, "policies": policies_off(), **extra}


def test_a_translated_stream_yields_the_final_message(fake, start_proxy):
    proxy = start_proxy(translated())
    fake.reply(content="Paris is sunny, 24 degrees.")
    with client(proxy).messages.stream(model="gpt-4o", max_tokens=50, system="Be brief.",
                                       messages=[{"role": "user", "content": "Weather in Paris?"}]) as stream:
        deltas = [e.delta.text for e in stream if e.type == "content_block_delta" and e.delta.type == "text_delta"]
        final = stream.get_final_message()
        headers = stream.response.headers
    assert "".join(deltas) == final.content[0].text == "Paris is sunny, 24 degrees."
    assert final.stop_reason == "end_turn" and final.role == "assistant"
    assert "proxy.stream_whole" in headers["x-ctxwarden-actions"]
    sent = fake.chat_requests[-1]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
    assert not sent.get("stream")


def test_a_translated_stream_carries_tool_use_blocks(fake, start_proxy):
    proxy = start_proxy(translated())
    fake.reply(content="Let me look.", tool_calls=[{"name": "get_weather", "arguments": '{"city": "Paris"}'},
                                                   {"name": "get_weather", "arguments": '{"city": "Lyon"}'}])
    tools = [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object",
                                                                                "properties": {"city": {"type": "string"}}}}]
    with client(proxy).messages.stream(model="gpt-4o", max_tokens=50, tools=tools,
                                       messages=[{"role": "user", "content": "Weather in Paris and Lyon?"}]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [b.type for b in final.content] == ["text", "tool_use", "tool_use"]
    assert final.content[0].text == "Let me look."
    assert [(b.name, b.input) for b in final.content[1:]] == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})]
    assert final.content[1].id != final.content[2].id
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and "input_json" in kinds
    # The next step: the tool_use ids come back with their results, translated to chat.
    follow = [{"role": "user", "content": "Weather in Paris and Lyon?"},
              {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": final.content[1].id, "content": "24C sunny"},
                                           {"type": "tool_result", "tool_use_id": final.content[2].id, "content": "19C rain"}]}]
    fake.reply(content="Paris 24C, Lyon 19C.")
    with client(proxy).messages.stream(model="gpt-4o", max_tokens=50, tools=tools, messages=follow) as stream:
        assert stream.get_final_text() == "Paris 24C, Lyon 19C."
    sent = fake.chat_requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == [final.content[1].id, final.content[2].id]
    assert [m["tool_call_id"] for m in sent[2:]] == [final.content[1].id, final.content[2].id]


def test_a_translated_request_leaves_anthropics_own_blocks_behind(fake, start_proxy):
    """Thinking blocks (extended thinking on) have no chat form: the chat upstream gets the text only."""
    proxy = start_proxy(translated())
    messages = [{"role": "user", "content": [{"type": "text", "text": "Plan the trip.", "cache_control": {"type": "ephemeral"}}]},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "Two cities.", "signature": "sig-1=="},
                                                  {"type": "text", "text": "Rome, then Florence."}]},
                {"role": "user", "content": "And the trains?"}]
    with client(proxy).messages.stream(model="gpt-4o", max_tokens=50, messages=messages,
                                       thinking={"type": "enabled", "budget_tokens": 1024}) as stream:
        assert stream.get_final_text() == "You said: And the trains?"
    sent = fake.chat_requests[-1]
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Plan the trip."}]},
                                {"role": "assistant", "content": "Rome, then Florence."},
                                {"role": "user", "content": "And the trains?"}]
    assert "thinking" not in sent
