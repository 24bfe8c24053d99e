"""The policies on POST /v1/responses (issue 42, "Done when"), through the real server and the official
openai SDK (`client.responses.create` / `client.responses.stream`), asserting on what the fake upstream
received: history compaction with function_call / function_call_output pairs intact; find_tools
answered by the proxy (plain and streamed, the stream delivered whole); memory injected from `user`
or x-ctxwarden-user."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from ctxwarden.policies.tools.search import FIND_TOOLS
from tests.conftest import ALL_POLICIES, openai_client, policies_off
from tests.tools_fixtures import all_tools, tool

MODEL = "gpt-4o"
INSTRUCTIONS = "You are an operations agent for Northwind. Investigate, then report. " * 20
TASK = "Find why checkouts failed last week and report the order ids involved."


def config(policies=ALL_POLICIES, window: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"policies": policies_off(*policies)}
    if window:
        out["models"] = {MODEL: {"context_window": window}}
    return out


def actions_of(headers: Any) -> list[str]:
    return [a for a in headers.get("x-ctxwarden-actions", "").split(",") if a]


def responses_tool(chat_tool: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", **chat_tool["function"]}


def text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


# ----------------------------------------------------------------------------- an agent run


def bulky_output(rng: random.Random, step: int, size: int) -> str:
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


def step_items(rng: random.Random, step: int, size: int) -> list[dict[str, Any]]:
    """One agent step as openai-agents sends it: the model's function_call, then its output."""
    call_id = f"call_{step:03d}"
    name = "search_orders" if step % 2 == 0 else "read_logs"
    return [{"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps({"page": step})},
            {"type": "function_call_output", "call_id": call_id, "output": bulky_output(rng, step, size)}]


AGENT_TOOLS = [{"type": "function", "name": "search_orders", "description": "Search orders by page.",
                "parameters": {"type": "object", "properties": {"page": {"type": "integer"}}}},
               {"type": "function", "name": "read_logs", "description": "Read checkout service logs by page.",
                "parameters": {"type": "object", "properties": {"page": {"type": "integer"}}}}]


def assert_pairs_intact(items: list[dict[str, Any]]) -> None:
    """Every function_call_output follows its function_call (same call_id), and every function_call
    is answered by an output after it; no call_id twice."""
    calls: dict[str, int] = {}
    outputs: dict[str, int] = {}
    for k, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            assert item["call_id"] not in calls, f"input[{k}]: call {item['call_id']} twice"
            calls[item["call_id"]] = k
        elif kind == "function_call_output":
            assert item["call_id"] not in outputs, f"input[{k}]: output {item['call_id']} twice"
            assert item["call_id"] in calls, f"input[{k}]: output {item['call_id']} with no call before it"
            outputs[item["call_id"]] = k
    assert set(calls) == set(outputs), f"calls without outputs: {sorted(set(calls) - set(outputs))}"


# ----------------------------------------------------------------------------- 1. compaction


def test_a_long_agent_run_is_compacted_with_its_pairs_intact(fake, start_proxy):
    """A 32-step run with 2-3k-token outputs, step by step as the agent sends it, in a 32k window."""
    proxy = start_proxy(config(window=32000))
    client = openai_client(proxy, default_headers={"x-ctxwarden-session": "run-32"})
    rng = random.Random(7)
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    events: list[int] = []
    for step in range(32):
        items += step_items(rng, step, size=rng.randint(2000, 3000))
        raw = client.responses.with_raw_response.create(model=MODEL, instructions=INSTRUCTIONS, input=items,
                                                        tools=AGENT_TOOLS)
        assert raw.parse().output_text.startswith("You said:")
        if "history.compaction" in actions_of(raw.headers):
            events.append(step)
        body = fake.responses_requests[-1]
        sent = body["input"]
        assert body["instructions"] == INSTRUCTIONS and body["tools"][-2:] == AGENT_TOOLS
        assert [t["name"] for t in body["tools"][:-2]] in ([], ["context_recall"])  # the archive's own tool, first
        assert not [i for i in sent if i.get("role") in ("system", "developer")], "a system item after `instructions`"
        assert_pairs_intact(sent)
        assert sent[-2:] == items[-2:]  # the latest call and its output, verbatim
        assert sent[0].get("role") == "user" and text_of(sent[0]).startswith(TASK)
    assert events, "no compaction event in 32 steps of 2-3k tokens in a 32k window"
    assert len(sent) < len(items)
    summaries = [i for i in sent if "[ctxwarden: summary of" in json.dumps(i)]
    assert summaries and all(i.get("role") == "user" and i.get("type", "message") == "message" for i in summaries)
    assert "PaymentGatewayTimeout" in json.dumps(sent)  # the one error of a compacted log survived


# ----------------------------------------------------------------------------- 2. find_tools


TIDE = tool("get_tide_times", "Get high and low tide times for a beach.", ["beach"])
ASK = "Book me a taxi to Playa de la Concha for this afternoon."


def tide_tools() -> list[dict[str, Any]]:
    catalog = all_tools(44)
    tools = [responses_tool(t) for t in catalog[:5] + [TIDE] + catalog[5:]]  # early in the client's list
    assert len(tools) == 45
    return tools


def script_find_tools(fake) -> None:
    fake.reply(tool_calls=[{"name": FIND_TOOLS, "arguments": json.dumps({"query": "high and low tide times at a beach"}),
                            "id": "call_find"}])
    fake.reply(content="High tide at La Concha is at 14:12.")


def assert_found_by_the_proxy(fake, tools: list[dict[str, Any]]) -> None:
    first, inner = fake.responses_requests
    names_first = [t["name"] for t in first["tools"]]
    names_inner = [t["name"] for t in inner["tools"]]
    assert len(names_first) < 45 and "get_tide_times" not in names_first and names_first[0] == FIND_TOOLS
    # The second request: the first list, the found tool appended at the end (the proxy's tools come
    # first, so the list only grows at its end), as the client wrote it ...
    assert names_inner[: len(names_first)] == names_first
    assert "get_tide_times" in names_inner[len(names_first):]
    assert next(t for t in inner["tools"] if t["name"] == "get_tide_times") == responses_tool(TIDE)
    assert inner["stream"] is False and inner["model"] == MODEL
    # ... and the find_tools call with its output, in the Responses shape, after the first input.
    first_input = first["input"] if isinstance(first["input"], list) else [{"role": "user", "content": first["input"]}]
    assert inner["input"][: len(first_input)] == first_input
    call, output = inner["input"][len(first_input):]
    assert call["type"] == "function_call" and call["name"] == FIND_TOOLS and call["call_id"] == "call_find"
    assert output["type"] == "function_call_output" and output["call_id"] == "call_find"
    assert "get_tide_times" in output["output"]


def test_find_tools_is_answered_by_the_proxy(fake, start_proxy):
    proxy = start_proxy(config(["tools"]))
    tools = tide_tools()
    script_find_tools(fake)
    client = openai_client(proxy, default_headers={"x-ctxwarden-session": "tide"})
    raw = client.responses.with_raw_response.create(model=MODEL, tools=tools, input=ASK)
    answer = raw.parse()
    actions = actions_of(raw.headers)
    assert "tools.search" in actions and "tools.filter" in actions
    # The client never sees the search: only the answer.
    assert [i.type for i in answer.output] == ["message"] and answer.output_text == "High tide at La Concha is at 14:12."
    assert FIND_TOOLS not in raw.text  # not even in the Response's echo of `tools`
    assert_found_by_the_proxy(fake, tools)
    names_inner = [t["name"] for t in fake.responses_requests[-1]["tools"]]
    # The client's next step forwards the list the inner round ended with (appended to, never reordered).
    fake.reply(content="Booked for 13:30.")
    follow = [{"role": "user", "content": ASK}, {"role": "assistant", "content": answer.output_text},
              {"role": "user", "content": "Then book it."}]
    client.responses.create(model=MODEL, tools=tools, input=follow)
    assert [t["name"] for t in fake.responses_requests[-1]["tools"]][: len(names_inner)] == names_inner


def test_a_streamed_request_with_find_tools_gets_the_whole_answer_as_events(fake, start_proxy):
    proxy = start_proxy(config(["tools"]))
    tools = tide_tools()
    script_find_tools(fake)
    client = openai_client(proxy, default_headers={"x-ctxwarden-session": "tide-stream"})
    with client.responses.stream(model=MODEL, tools=tools, input=ASK) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds and "response.function_call_arguments.delta" not in kinds
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == final.output_text
    assert final.output_text == "High tide at La Concha is at 14:12."
    assert [i.type for i in final.output] == ["message"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert_found_by_the_proxy(fake, tools)


def test_a_streamed_request_with_find_tools_says_stream_whole(fake, start_proxy):
    """The headers of a streamed request the proxy had to answer whole, read from the raw response."""
    proxy = start_proxy(config(["tools"]))
    script_find_tools(fake)
    client = openai_client(proxy, default_headers={"x-ctxwarden-session": "tide-raw"})
    with client.responses.with_streaming_response.create(model=MODEL, tools=tide_tools(), input=ASK, stream=True) as raw:
        actions = actions_of(raw.headers)
        body = b"".join(raw.iter_bytes())
    assert "proxy.stream_whole" in actions and "tools.search" in actions and "tools.filter" in actions
    assert b"event: response.completed" in body and FIND_TOOLS.encode() not in body


# ----------------------------------------------------------------------------- 3. memory


@pytest.mark.parametrize("named_by", ["user", "header"])
def test_a_lasting_preference_is_injected_in_a_later_conversation(fake, start_proxy, named_by):
    proxy = start_proxy(config(["memory"]))

    def ask(text: str, session: str, stream: bool = False) -> list[str]:
        headers = {"x-ctxwarden-session": session}
        extra: dict[str, Any] = {}
        if named_by == "header":
            headers["x-ctxwarden-user"] = "alice"
        else:
            extra["user"] = "alice"
        client = openai_client(proxy, default_headers=headers)
        items = [{"role": "user", "content": text}]
        if stream:
            with client.responses.with_streaming_response.create(
                    model=MODEL, instructions="You are a travel agent.", input=items, stream=True, **extra) as raw:
                body = b"".join(raw.iter_bytes())
                assert b"event: response.completed" in body
                return actions_of(raw.headers)
        raw = client.responses.with_raw_response.create(model=MODEL, instructions="You are a travel agent.",
                                                        input=items, **extra)
        return actions_of(raw.headers)

    assert "memory.write" in ask("I prefer budget hotels, nothing fancy.", "s1")
    assert "Relevant context" not in json.dumps(fake.responses_requests[-1])

    for session, stream in (("s2", False), ("s3", True)):
        assert "memory.select" in ask("Find me a hotel in Rome for three nights.", session, stream)
        sent = fake.responses_requests[-1]
        assert sent.get("stream", False) is stream  # nothing to check: a stream still passes through
        last = [i for i in sent["input"] if i.get("role") == "user"][-1]
        text = text_of(last)
        assert text.startswith("Relevant context:\n- I prefer budget hotels, nothing fancy.\n\n")
        assert text.endswith("Find me a hotel in Rome for three nights.")
        assert sent["instructions"] == "You are a travel agent."  # never the instructions
        assert "Relevant context" not in json.dumps([i for i in sent["input"] if i.get("role") != "user"])

    assert "memory.select" not in ask("Write a haiku about autumn leaves.", "s4")
    assert fake.responses_requests[-1]["input"] == [{"role": "user", "content": "Write a haiku about autumn leaves."}]


def test_memory_with_a_string_input_keeps_it_one_user_turn(fake, start_proxy):
    proxy = start_proxy(config(["memory"]))
    client = openai_client(proxy)
    client.responses.create(model=MODEL, user="bob", input="I prefer budget hotels, nothing fancy.")
    raw = client.responses.with_raw_response.create(model=MODEL, user="bob", input="Find me a hotel in Rome for three nights.")
    assert "memory.select" in actions_of(raw.headers)
    sent = fake.responses_requests[-1]["input"]
    text = sent if isinstance(sent, str) else text_of(sent[-1])
    assert text.startswith("Relevant context:\n- I prefer budget hotels, nothing fancy.\n\n")
    assert text.endswith("Find me a hotel in Rome for three nights.")


# ----------------------------------------------------------------------------- 4. previous_response_id


@pytest.mark.parametrize("stream", [False, True])
def test_with_previous_response_id_an_output_whose_call_the_provider_holds_passes(fake, start_proxy, stream):
    """The provider holds the earlier turns: a request carrying only a function_call_output (its call
    is in the stored response) is no orphan to refuse or drop; every policy on, it goes as it came."""
    proxy = start_proxy(config())
    client = openai_client(proxy, default_headers={"x-ctxwarden-session": f"prev-{stream}"})
    items = [{"type": "function_call_output", "call_id": "call_1", "output": "24C and sunny in Paris."}]
    kwargs: dict[str, Any] = dict(model=MODEL, previous_response_id="resp_earlier", input=items, tools=AGENT_TOOLS)
    fake.reply(content="It is sunny in Paris.")
    if stream:
        with client.responses.stream(**kwargs) as events:
            final = events.get_final_response()
    else:
        final = client.responses.create(**kwargs)
    assert final.output_text == "It is sunny in Paris."
    sent = fake.received[-1]
    assert sent.body["input"] == items and sent.body["previous_response_id"] == "resp_earlier"
    assert sent.body["tools"][:2] == AGENT_TOOLS and sent.body.get("stream", False) is stream
