"""Non-OpenAI providers go through litellm; respx stands in for the provider's HTTP API."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from ctxwarden.proxy.errors import ProxyError
from ctxwarden.proxy.models import ModelInfo, uses_litellm
from ctxwarden.proxy.upstream.providers import litellm_response

ANTHROPIC_REPLY = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-sonnet-20240620",
    "content": [{"type": "text", "text": "Bonjour!"}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 3},
}


def test_only_foreign_provider_prefixes_use_litellm():
    assert uses_litellm("anthropic/claude-3-5-sonnet-20240620")
    assert not uses_litellm("gpt-4o")
    assert not uses_litellm("meta-llama/Llama-3.1-8B-Instruct")  # a vLLM model name is forwarded as it is


def test_context_windows_come_from_config_then_litellm_map():
    from ctxwarden.proxy.config import ModelConfig

    info = ModelInfo({"my-model": ModelConfig(context_window=4096)})
    assert info.context_window("my-model") == 4096
    assert info.context_window("gpt-4o") == 128000
    assert info.context_window("gpt-4") == 8192
    assert info.context_window("unknown-model-xyz") == 128000


async def test_anthropic_answer_is_translated_to_openai_shape(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post("https://api.anthropic.com/v1/messages").mock(return_value=httpx.Response(200, json=ANTHROPIC_REPLY))
        response = await litellm_response(
            {"model": "anthropic/claude-3-5-sonnet-20240620", "messages": [{"role": "user", "content": "Say hello in French"}],
             "max_tokens": 50}, stream=False)
    data = response.json()
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["message"]["content"] == "Bonjour!"
    assert data["usage"]["prompt_tokens"] == 12 and data["usage"]["completion_tokens"] == 3
    sent = json.loads(route.calls[0].request.content)
    assert sent["model"] == "claude-3-5-sonnet-20240620" and sent["max_tokens"] == 50
    assert sent["messages"][0]["role"] == "user" and "Say hello in French" in json.dumps(sent["messages"])
    assert route.calls[0].request.headers["x-api-key"] == "sk-ant-test"


async def test_provider_error_keeps_its_status(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with respx.mock:
        respx.post("https://api.anthropic.com/v1/messages").mock(return_value=httpx.Response(
            429, json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}))
        with pytest.raises(ProxyError) as info:
            await litellm_response({"model": "anthropic/claude-3-5-sonnet-20240620",
                                    "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "num_retries": 0},
                                   stream=False)
    assert info.value.status == 429
    assert "slow down" in info.value.message


async def test_a_proxy_tool_round_goes_to_the_same_provider_as_the_first(monkeypatch):
    """After the proxy answers context_recall for an anthropic/… model, the next round must go
    through litellm again, not to the OpenAI-compatible upstream."""
    from ctxwarden.policies.base import Exchange
    from ctxwarden.proxy import chat as chat_module
    from ctxwarden.proxy.chat_rounds import chat_rounds
    from ctxwarden.proxy.upstream import providers

    sent: list[tuple[dict, bool]] = []

    async def fake_litellm(body, stream):
        sent.append((body, stream))
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "ok"}}]})

    class NoOpenAIUpstream:
        async def send(self, *args, **kwargs):
            raise AssertionError("the OpenAI-compatible upstream must not be called for an anthropic/ model")

    monkeypatch.setattr(providers, "litellm_response", fake_litellm)
    handler = chat_module.ChatHandler.__new__(chat_module.ChatHandler)
    handler.upstream, handler.max_rounds = NoOpenAIUpstream(), 3
    ex = Exchange("r1", "anthropic/claude-3-5-sonnet-20240620", [{"role": "user", "content": "hi"}], None,
                  {"model": "anthropic/claude-3-5-sonnet-20240620", "messages": []})
    rounds = chat_rounds(handler, ex, stream=False)
    response = await rounds.continue_with({"role": "assistant", "content": "looking it up"}, [])
    assert response.json()["choices"][0]["message"]["content"] == "ok"
    assert sent and sent[0][0]["model"] == "anthropic/claude-3-5-sonnet-20240620" and sent[0][1] is False
