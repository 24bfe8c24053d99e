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
    proxy = start_proxy({"policies": policies_off("loops")})
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


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_contradicting_the_kb_is_blocked(fake, start_proxy, monkeypatch, stream):
    import httpx

    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    proxy = start_proxy({"policies": policies_off("poisoning")})
    httpx.post(f"{proxy.url}/admin/kb/documents", headers={"Authorization": "Bearer admin-test"},
               json={"documents": [{"id": "eiffel", "text": "The Eiffel Tower is located in Paris, France."}]}).raise_for_status()
    fake.reply(content="The Eiffel Tower is located in London.")
    client = openai_client(proxy)
    if stream:
        with client.responses.stream(model="gpt-4o", input="Where is the Eiffel Tower?") as events:
            kinds = [e.type for e in events]
            final = events.get_final_response()
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert fake.responses_requests[-1]["stream"] is False  # the whole answer is judged first
    else:
        final = client.responses.create(model="gpt-4o", input="Where is the Eiffel Tower?")
    assert final.output_text.startswith("[ctxwarden] Content rejected: hallucination detected")


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
