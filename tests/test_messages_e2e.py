"""POST /v1/messages through the real server and the official anthropic SDK (issue 42): the same
policies as chat completions, cache_control and thinking signatures byte for byte, keys never
crossing providers, Anthropic's shapes for answers and errors."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import policies_off

anthropic = pytest.importorskip("anthropic")


def native(fake, policies=None, **extra):
    return {"upstream": {"anthropic": {"base_url": f"{fake.url}/v1", "api_key_env": "CTXW_TEST_ANTHROPIC_KEY"}},
            "policies": policies_off(*(policies or ())), **extra}


def client(proxy, key="sk-ant-client"):
    return anthropic.Anthropic(base_url=proxy.url, api_key=key, max_retries=0)


SYSTEM = [{"type": "text", "text": "You are a travel agent. " * 50, "cache_control": {"type": "ephemeral"}}]


def test_an_untouched_request_is_the_clients_bytes_and_the_proxys_key(fake, start_proxy, monkeypatch):
    monkeypatch.setenv("CTXW_TEST_ANTHROPIC_KEY", "sk-ant-proxy")
    proxy = start_proxy(native(fake))
    answer = client(proxy).messages.create(model="claude-test-model", max_tokens=100, system=SYSTEM,
                                           messages=[{"role": "user", "content": "Hello"}])
    assert answer.content[0].text == "You said: Hello"
    sent = fake.received[-1]
    assert sent.path == "/v1/messages" and sent.body["system"] == SYSTEM  # cache_control kept
    assert sent.headers["x-api-key"] == "sk-ant-proxy" and "authorization" not in sent.headers
    assert sent.headers["anthropic-version"]


def test_without_a_key_of_its_own_the_clients_key_passes_to_anthropic_only(fake, start_proxy, monkeypatch):
    monkeypatch.delenv("CTXW_TEST_ANTHROPIC_KEY", raising=False)
    monkeypatch.setenv("CTXW_TEST_OPENAI_KEY", "sk-openai-proxy")
    proxy = start_proxy({**native(fake), "upstream": {"api_key_env": "CTXW_TEST_OPENAI_KEY",
                                                      "anthropic": native(fake)["upstream"]["anthropic"]}})
    client(proxy, key="sk-ant-client").messages.create(model="claude-test-model", max_tokens=50,
                                                       messages=[{"role": "user", "content": "Hi"}])
    headers = fake.received[-1].headers
    # the client's own credential (the SDK sends it as x-api-key or a bearer token), never the OpenAI key
    assert "sk-ant-client" in json.dumps(headers) and "sk-openai-proxy" not in json.dumps(headers)


def test_thinking_signatures_and_breakpoints_arrive_byte_identical_when_a_note_is_added(fake, start_proxy):
    proxy = start_proxy(native(fake, ["clash"]))
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "I'm vegetarian, so no meat please.",
                                      "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "The user is vegetarian.", "signature": "sig-ABC=="},
                                          {"type": "text", "text": "Noted."}]},
        {"role": "user", "content": "I'll have the steak tonight."},
    ]
    raw = client(proxy).messages.with_raw_response.create(model="claude-test-model", max_tokens=50, messages=messages)
    assert "clash.note" in raw.headers["x-ctxwarden-actions"]
    sent = fake.messages_requests[-1]["messages"]
    assert sent[:2] == messages[:2]  # the breakpoint and the thinking signature, as sent
    last = sent[2]["content"]
    text = last if isinstance(last, str) else " ".join(b["text"] for b in last)
    assert text.startswith("I'll have the steak tonight.") and "[ctxwarden note:" in text


def test_a_loop_is_stopped_in_the_messages_shape(fake, start_proxy):
    config = native(fake, ["loops"])
    config["policies"]["loops"]["action"] = "stop"  # at once (the default notes the model first)
    proxy = start_proxy(config)
    messages: list = [{"role": "user", "content": "Weather in Paris?"}]
    for i in range(3):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "get_weather",
                                                        "input": {"city": "Paris"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "error: timeout"}]}]
    raw = client(proxy).messages.with_raw_response.create(
        model="claude-test-model", max_tokens=50, messages=messages,
        tools=[{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}])
    answer = raw.parse()
    assert fake.messages_requests == [] and "loops.stop" in raw.headers["x-ctxwarden-actions"]
    assert answer.content[0].text.startswith("[ctxwarden] I stopped this agent run")
    assert json.loads(raw.http_response.content)["ctxwarden"]["author"] == "proxy"


def _kb_proxy(fake, start_proxy, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    proxy = start_proxy(native(fake, ["poisoning"]))
    httpx.post(f"{proxy.url}/admin/kb/documents", headers={"Authorization": "Bearer admin-test"},
               json={"documents": [{"id": "eiffel", "text": "The Eiffel Tower is located in Paris, France."}]}).raise_for_status()
    return proxy


ASK = dict(model="claude-test-model", max_tokens=50, messages=[{"role": "user", "content": "Where is the Eiffel Tower?"}])


def test_an_answer_contradicting_the_kb_is_blocked(fake, start_proxy, monkeypatch):
    proxy = _kb_proxy(fake, start_proxy, monkeypatch)
    fake.reply(content="The Eiffel Tower is located in London.")
    text = client(proxy).messages.create(**ASK).content[0].text
    assert text.startswith("[ctxwarden] Content rejected: hallucination detected")


def test_a_streamed_answer_is_blocked_mid_stream(fake, start_proxy, monkeypatch):
    """Judged sentence by sentence as it streams: the true sentence goes out, the false one and what
    follows never do; the message ends with the notice and stop_reason refusal."""
    proxy = _kb_proxy(fake, start_proxy, monkeypatch)
    fake.reply(content="Paris is lovely in spring. The Eiffel Tower is located in London. It opened in 1889.")
    with client(proxy).messages.stream(**ASK) as events:
        seen = list(events)
        final = events.get_final_message()
        headers = events.response.headers
    deltas = "".join(e.delta.text for e in seen if e.type == "content_block_delta" and e.delta.type == "text_delta")
    assert fake.messages_requests[-1]["stream"] is True
    assert "proxy.stream_gated" in headers["x-ctxwarden-actions"]
    said = deltas.split("[ctxwarden]")[0]  # the model's words that went out (the notice quotes the false one)
    assert said.strip() == "Paris is lovely in spring." and "1889" not in deltas
    assert "[ctxwarden] Content rejected: hallucination detected" in deltas
    assert final.content[0].text == deltas and final.stop_reason == "refusal"


def test_a_true_streamed_answer_passes_the_gate_word_by_word(fake, start_proxy, monkeypatch):
    proxy = _kb_proxy(fake, start_proxy, monkeypatch)
    fake.reply(content="The Eiffel Tower is located in Paris. It is made of iron.")
    with client(proxy).messages.stream(**ASK) as events:
        deltas = [e.delta.text for e in events if e.type == "content_block_delta"]
        final = events.get_final_message()
    assert len(deltas) > 5 and "".join(deltas) == final.content[0].text
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0


def test_a_garbled_upstream_event_ends_the_gated_stream_with_an_error_event(fake, start_proxy, monkeypatch):
    proxy = _kb_proxy(fake, start_proxy, monkeypatch)
    fake.script.append({"content": "The Eiffel Tower is located in Paris. It is made of iron.", "garble_after": 4})
    with httpx.stream("POST", f"{proxy.url}/v1/messages", json={**ASK, "stream": True}) as r:
        body = r.read().decode()
    assert "data: {this is not json" not in body  # relayed only quoted inside the error event
    assert body.rstrip().splitlines()[-2] == "event: error"
    assert json.loads(body.rstrip().splitlines()[-1][5:])["error"]["type"] == "api_error"


def test_a_stream_with_nothing_to_check_passes_event_by_event(fake, start_proxy):
    proxy = start_proxy(native(fake))
    with client(proxy).messages.stream(model="claude-test-model", max_tokens=50,
                                       messages=[{"role": "user", "content": "Say hi"}]) as events:
        deltas = [e.delta.text for e in events if e.type == "content_block_delta"]
        final = events.get_final_message()
    assert "".join(deltas) == final.content[0].text == "You said: Say hi"
    assert fake.messages_requests[-1]["stream"] is True


def test_translated_to_chat_completions_when_there_is_no_anthropic_upstream(fake, start_proxy):
    proxy = start_proxy({"upstream": {"anthropic": {"base_url": None}}, "policies": policies_off()})
    fake.reply(tool_calls=[{"name": "get_weather", "arguments": '{"city": "Paris"}'}])
    answer = client(proxy).messages.create(
        model="gpt-4o", max_tokens=50, system="Be brief.", messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}])
    assert answer.stop_reason == "tool_use" and answer.content[0].name == "get_weather"
    assert answer.content[0].input == {"city": "Paris"}
    sent = fake.chat_requests[-1]
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."} and sent["max_tokens"] == 50
    assert sent["tools"][0]["function"]["name"] == "get_weather"


def test_errors_are_in_anthropics_shape(fake, start_proxy):
    proxy = start_proxy(native(fake))
    r = httpx.post(f"{proxy.url}/v1/messages", json={"model": "claude-test-model", "messages": []})
    assert r.status_code == 400 and r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"
    fake.reply(status=429, json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
               headers={"retry-after": "3"})
    r = httpx.post(f"{proxy.url}/v1/messages", json={"model": "claude-test-model", "max_tokens": 5,
                                                     "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_error" and r.headers["retry-after"] == "3"


def test_count_tokens_answers_without_an_anthropic_upstream(fake, start_proxy):
    proxy = start_proxy({"upstream": {"anthropic": {"base_url": None}}})
    count = client(proxy).messages.count_tokens(model="claude-test-model",
                                                messages=[{"role": "user", "content": "Hello there, how are you?"}])
    assert 5 <= count.input_tokens <= 30


def test_other_messages_routes_go_to_anthropic_with_anthropics_key_only(fake, start_proxy, monkeypatch):
    monkeypatch.setenv("CTXW_TEST_ANTHROPIC_KEY", "sk-ant-proxy")
    monkeypatch.setenv("CTXW_TEST_OPENAI_KEY", "sk-openai-proxy")
    proxy = start_proxy({"upstream": {"api_key_env": "CTXW_TEST_OPENAI_KEY", "anthropic": native(fake)["upstream"]["anthropic"]}})
    r = httpx.get(f"{proxy.url}/v1/messages/batches/b1", headers={"x-api-key": "sk-ant-client"})
    sent = fake.received[-1]
    assert r.status_code == 404 and sent.path == "/v1/messages/batches/b1"  # the fake has no batches: relayed as is
    assert sent.headers["x-api-key"] == "sk-ant-proxy" and "sk-openai-proxy" not in json.dumps(sent.headers)
    translated = start_proxy({"upstream": {"anthropic": {"base_url": None}}})
    r = httpx.get(f"{translated.url}/v1/messages/batches/b1")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"


def test_translated_with_a_provider_prefixed_model_goes_through_litellm(fake, start_proxy, monkeypatch):
    """Translated mode, model `anthropic/…`: litellm calls the provider (respx stands in for it), as on chat;
    the OpenAI-compatible upstream is never asked."""
    import respx

    from tests.test_providers_litellm import ANTHROPIC_REPLY

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    proxy = start_proxy({"upstream": {"anthropic": {"base_url": None}}, "policies": policies_off()})
    with respx.mock(assert_all_called=False) as mock:
        mock.route(host="127.0.0.1").pass_through()  # the test's own calls to the proxy
        provider = mock.post("https://api.anthropic.com/v1/messages").mock(return_value=httpx.Response(200, json=ANTHROPIC_REPLY))
        answer = client(proxy).messages.create(model="anthropic/claude-3-5-sonnet-20240620", max_tokens=50,
                                               messages=[{"role": "user", "content": "Say hello in French"}])
    assert answer.content[0].text == "Bonjour!" and answer.usage.output_tokens == 3
    assert provider.called and fake.received == []


def test_a_garbled_upstream_event_ends_a_passthrough_stream_with_an_error_event(fake, start_proxy):
    proxy = start_proxy(native(fake))
    fake.script.append({"content": "Hello there, how are you today?", "garble_after": 4})
    with httpx.stream("POST", f"{proxy.url}/v1/messages", json={**ASK, "stream": True}) as r:
        body = r.read().decode()
    assert "data: {this is not json" not in body and "message_stop" not in body
    lines = body.rstrip().splitlines()
    assert lines[-2] == "event: error" and json.loads(lines[-1][5:])["error"]["type"] == "api_error"
