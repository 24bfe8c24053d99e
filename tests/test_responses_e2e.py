"""POST /v1/responses through the real server and the official openai SDK: the same policies as
chat completions (issue 42), the client's bytes when nothing changed, the API's own shapes."""

from __future__ import annotations

import json

import pytest

from tests.conftest import openai_client, policies_off

TOOLS = [{"type": "function", "name": f"tool_{i}", "description": f"Does thing number {i} with files and records.",
          "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}} for i in range(45)]


def test_an_untouched_request_is_forwarded_as_the_clients_bytes(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    client = openai_client(proxy)
    raw = client.responses.with_raw_response.create(model="gpt-4o", input="What is the capital of France?",
                                                    instructions="Be brief.")
    answer = raw.parse()
    assert answer.output_text == "You said: What is the capital of France?"
    sent = fake.received[-1]
    assert sent.path == "/v1/responses" and json.loads(sent.raw) == {
        "model": "gpt-4o", "input": "What is the capital of France?", "instructions": "Be brief."}
    assert raw.headers["x-ctxwarden-request-id"] and raw.headers.get("x-ctxwarden-actions") == ""


def test_tools_are_filtered_and_hosted_tools_kept(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off("tools")})
    client = openai_client(proxy)
    raw = client.responses.with_raw_response.create(
        model="gpt-4o", input="Please run tool_7 on my records.",
        tools=[*TOOLS, {"type": "web_search"}])
    assert "tools.filter" in raw.headers["x-ctxwarden-actions"]
    forwarded = fake.responses_requests[-1]["tools"]
    assert {"type": "web_search"} in forwarded and len(forwarded) < 30
    assert all(t.get("type") in ("function", "web_search") for t in forwarded)


def test_a_loop_is_stopped_and_the_answer_says_the_proxy_wrote_it(fake, start_proxy):
    proxy = start_proxy({"policies": {**policies_off("loops"), "loops": {"enabled": True, "action": "stop"}}})
    items: list = [{"role": "user", "content": "Weather in Paris?"}]
    for i in range(3):
        items += [{"type": "function_call", "call_id": f"c{i}", "name": "get_weather", "arguments": '{"city":"Paris"}'},
                  {"type": "function_call_output", "call_id": f"c{i}", "output": "error: timeout"}]
    raw = openai_client(proxy).responses.with_raw_response.create(model="gpt-4o", input=items)
    answer = raw.parse()
    assert fake.responses_requests == []
    assert "loops.stop" in raw.headers["x-ctxwarden-actions"]
    assert answer.output_text.startswith("[ctxwarden] I stopped this agent run")
    assert json.loads(raw.content)["ctxwarden"] == {"author": "proxy", "reason": "loops.stop"}


def test_a_clash_note_follows_the_users_words(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off("clash")})
    items = [{"role": "user", "content": "I'm vegetarian, so no meat please."},
             {"role": "assistant", "content": "Noted."},
             {"role": "user", "content": "I'll have the steak tonight."}]
    raw = openai_client(proxy).responses.with_raw_response.create(model="gpt-4o", input=items)
    assert "clash.note" in raw.headers["x-ctxwarden-actions"]
    sent = fake.responses_requests[-1]["input"]
    assert sent[:2] == items[:2]
    last = sent[-1]["content"]
    text = last if isinstance(last, str) else " ".join(p["text"] for p in last)
    assert text.startswith("I'll have the steak tonight.") and "[ctxwarden note:" in text


def _kb_proxy(fake, start_proxy, monkeypatch):
    import httpx

    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    proxy = start_proxy({"policies": policies_off("poisoning")})
    httpx.post(f"{proxy.url}/admin/kb/documents", headers={"Authorization": "Bearer admin-test"},
               json={"documents": [{"id": "eiffel", "text": "The Eiffel Tower is located in Paris, France."}]}).raise_for_status()
    return proxy


def test_an_answer_contradicting_the_kb_is_blocked(fake, start_proxy, monkeypatch):
    proxy = _kb_proxy(fake, start_proxy, monkeypatch)
    fake.reply(content="The Eiffel Tower is located in London.")
    final = openai_client(proxy).responses.create(model="gpt-4o", input="Where is the Eiffel Tower?")
    assert final.output_text.startswith("[ctxwarden] Content rejected: hallucination detected")


def test_a_streamed_answer_is_blocked_mid_stream(fake, start_proxy, monkeypatch):
    """The stream is judged sentence by sentence as it arrives: the true sentence goes out, the false
    one and what follows it never do, and the answer ends with the notice in the API's own events."""
    proxy = _kb_proxy(fake, start_proxy, monkeypatch)
    fake.reply(content="Paris is lovely in spring. The Eiffel Tower is located in London. It opened in 1889.")
    with openai_client(proxy).responses.stream(model="gpt-4o", input="Where is the Eiffel Tower?") as events:
        seen = list(events)
        final = events.get_final_response()
        headers = events._response.headers  # the SDK's stream keeps its HTTP response here
    deltas = "".join(e.delta for e in seen if e.type == "response.output_text.delta")
    assert fake.responses_requests[-1]["stream"] is True  # the upstream streams; nothing is asked whole
    assert "proxy.stream_gated" in headers["x-ctxwarden-actions"]
    said = deltas.split("[ctxwarden]")[0]  # the model's words that went out (the notice quotes the false one)
    assert said.strip() == "Paris is lovely in spring." and "1889" not in deltas
    assert "[ctxwarden] Content rejected: hallucination detected" in deltas
    assert final.output_text == deltas and final.status == "completed"
    assert seen[-1].type == "response.completed" and seen[-1].response.ctxwarden == {"author": "proxy", "reason": "answer_blocked"}
    numbers = [e.sequence_number for e in seen]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)


def test_a_true_streamed_answer_passes_the_gate_word_by_word(fake, start_proxy, monkeypatch):
    proxy = _kb_proxy(fake, start_proxy, monkeypatch)
    fake.reply(content="The Eiffel Tower is located in Paris. It is made of iron.")
    with openai_client(proxy).responses.stream(model="gpt-4o", input="Where is the Eiffel Tower?") as events:
        deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
        final = events.get_final_response()
    assert len(deltas) > 5 and "".join(deltas) == final.output_text == "The Eiffel Tower is located in Paris. It is made of iron."


def test_a_garbled_upstream_event_ends_the_gated_stream_with_an_error_event(fake, start_proxy, monkeypatch):
    import httpx

    proxy = _kb_proxy(fake, start_proxy, monkeypatch)
    fake.script.append({"content": "The Eiffel Tower is located in Paris. It is made of iron.", "garble_after": 5})
    with httpx.stream("POST", f"{proxy.url}/v1/responses", json={"model": "gpt-4o", "input": "Where?", "stream": True}) as r:
        body = r.read().decode()
    assert "data: {this is not json" not in body  # relayed only quoted inside the error event
    last = [line for line in body.splitlines() if line.startswith("data:")][-1]
    assert json.loads(last[5:])["type"] == "error" and json.loads(last[5:])["code"] == "upstream_invalid_stream"


def test_a_stream_with_nothing_to_check_passes_event_by_event(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off()})
    with openai_client(proxy).responses.stream(model="gpt-4o", input="Say hello") as events:
        deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
        final = events.get_final_response()
    assert "".join(deltas) == final.output_text == "You said: Say hello"
    assert fake.responses_requests[-1]["stream"] is True


def test_a_bad_body_gets_a_clear_400(fake, start_proxy):
    import httpx

    proxy = start_proxy()
    r = httpx.post(f"{proxy.url}/v1/responses", json={"model": "gpt-4o", "input": 42})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"
    r = httpx.post(f"{proxy.url}/v1/responses", json={"input": "hi"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"


def test_openai_agents_with_its_default_model_goes_through_the_policies(fake, start_proxy):
    """openai-agents' default model speaks the Responses API: its tool loop runs through the proxy."""
    agents = pytest.importorskip("agents")
    import asyncio

    from openai import AsyncOpenAI

    proxy = start_proxy({"policies": policies_off("loops", "clash", "tools")})
    calls = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"Sunny in {city}."

    fake.reply(tool_calls=[{"name": "get_weather", "arguments": '{"city": "Paris"}'}])
    fake.reply(content="It is sunny in Paris.")
    client = AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test", max_retries=0)
    agent = agents.Agent(name="helper", instructions="Answer briefly.", tools=[get_weather],
                         model=agents.OpenAIResponsesModel(model="gpt-4o", openai_client=client))
    result = asyncio.run(agents.Runner.run(agent, "What's the weather in Paris?",
                                           run_config=agents.RunConfig(tracing_disabled=True)))
    assert result.final_output == "It is sunny in Paris." and calls == ["Paris"]
    first, second = fake.responses_requests
    assert first["instructions"] == "Answer briefly." and any(t.get("name") == "get_weather" for t in first["tools"])
    kinds = [item.get("type", "message") for item in second["input"]]
    assert "function_call" in kinds and "function_call_output" in kinds  # the pair reached the model whole


def test_langchain_with_the_responses_api_goes_through_the_policies(fake, start_proxy):
    """LangChain's ChatOpenAI(use_responses_api=True): its tools are filtered and a tool round trip
    reaches the model with its pair intact, plain and streamed."""
    langchain_openai = pytest.importorskip("langchain_openai")
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    proxy = start_proxy({"policies": policies_off("tools")})

    def make(i: int):
        @tool(f"tool_{i}")
        def run(x: str) -> str:
            """Does a thing with files and records."""
            return x
        run.description = f"Does thing number {i} with files and records."
        return run

    model = langchain_openai.ChatOpenAI(model="gpt-4o", base_url=f"{proxy.url}/v1", api_key="sk-test",
                                        use_responses_api=True, max_retries=0).bind_tools([make(i) for i in range(45)])
    fake.reply(tool_calls=[{"id": "call_7", "name": "tool_7", "arguments": '{"x": "records"}'}])
    first = model.invoke([HumanMessage("Please run tool_7 on my records.")])
    assert first.tool_calls[0]["name"] == "tool_7"
    sent = fake.responses_requests[-1]
    assert len(sent["tools"]) < 30 and any(t.get("name") == "tool_7" for t in sent["tools"])
    fake.reply(content="Done: tool_7 ran on your records.")
    history = [HumanMessage("Please run tool_7 on my records."), first,
               ToolMessage("3 records processed.", tool_call_id=first.tool_calls[0]["id"])]
    text = "".join(chunk.text if isinstance(chunk.text, str) else chunk.text() for chunk in model.stream(history))
    assert text == "Done: tool_7 ran on your records."
    items = fake.responses_requests[-1]["input"]
    call = next(i for i in items if i.get("type") == "function_call")
    output = next(i for i in items if i.get("type") == "function_call_output")
    assert call["call_id"] == output["call_id"] and output["output"] == "3 records processed."


def test_a_garbled_upstream_event_ends_a_passthrough_stream_with_an_error_event(fake, start_proxy):
    import httpx

    proxy = start_proxy({"policies": policies_off()})
    fake.script.append({"content": "Hello there, how are you today?", "garble_after": 4})
    with httpx.stream("POST", f"{proxy.url}/v1/responses", json={"model": "gpt-4o", "input": "Hi", "stream": True}) as r:
        body = r.read().decode()
    assert "data: {this is not json" not in body and "response.completed" not in body
    last = json.loads([line for line in body.splitlines() if line.startswith("data:")][-1][5:])
    assert last["type"] == "error" and last["code"] == "upstream_invalid_stream"
