"""Bad input on the Responses and Messages routes, through the real server: a field of the wrong
type is a 400 in the API's own shape naming it (it was forwarded: `"stream": "yes"` was streamed),
and an empty body is told what that API needs."""

from __future__ import annotations

import httpx
import pytest

RESPONSES = {"model": "gpt-4o", "input": "hi"}
MESSAGES = {"model": "claude-x", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def proxy(start_proxy, fake):
    return start_proxy({"upstream": {"anthropic": {"base_url": f"{fake.url}/v1", "api_key_env": None}}})


@pytest.mark.parametrize("field,value", [("stream", "yes"), ("store", "yes"), ("previous_response_id", 5), ("user", 5)])
def test_a_responses_field_of_the_wrong_type_is_a_400_naming_it(proxy, fake, field, value):
    r = httpx.post(f"{proxy.url}/v1/responses", json={**RESPONSES, field: value})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == field and field in r.json()["error"]["message"]
    assert fake.received == []


def test_a_messages_stream_that_is_no_boolean_is_a_400_in_anthropics_shape(proxy, fake):
    r = httpx.post(f"{proxy.url}/v1/messages", json={**MESSAGES, "stream": "yes"})
    assert r.status_code == 400
    assert r.json()["type"] == "error" and "stream" in r.json()["error"]["message"]
    assert fake.received == []


@pytest.mark.parametrize("path,needs", [("/v1/chat/completions", "`messages`"), ("/v1/responses", "`input`"),
                                        ("/v1/messages", "`max_tokens`")])
def test_an_empty_body_is_told_what_its_api_needs(proxy, path, needs):
    r = httpx.post(f"{proxy.url}{path}", content=b"", headers={"content-type": "application/json"})
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    assert "empty" in message and needs in message
