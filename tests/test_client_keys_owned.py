"""A key bound to one tenant continues and reads the Responses and conversations its tenant made
through the proxy, and nobody else's: the provider keeps every tenant's objects under the proxy's
one provider key, so the proxy notes who made each (proxy/keys/owned.py). Through the real server,
with the official SDK as the client; before, such a key was refused every reference, its own too."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import openai
import pytest

from ctxwarden.proxy.keys.owned import FileOwners, NewObject
from tests.conftest import policies_off
from tests.test_client_keys import keyed, make_key  # noqa: F401 (the fixture)


def client(proxy, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0)


def refused(call) -> str:
    with pytest.raises(openai.PermissionDeniedError) as caught:
        call()
    return caught.value.body["code"]


def test_a_tenant_continues_and_reads_its_own_responses_and_no_other_tenants(keyed, fake):
    proxy = keyed(policies=policies_off())
    a, b = client(proxy, make_key(proxy, tenant="a")[0]), client(proxy, make_key(proxy, tenant="b")[0])
    every = client(proxy, make_key(proxy, tenant="ops", tenants=["*"])[0])
    first = a.responses.create(model="gpt-4o", input="Remember the number 7.")
    second = a.responses.create(model="gpt-4o", input="Which number?", previous_response_id=first.id)
    assert fake.responses_requests[-1]["previous_response_id"] == first.id
    streamed = [e for e in a.responses.create(model="gpt-4o", input="And now?", previous_response_id=second.id, stream=True)]
    made_in_stream = streamed[0].response.id  # response.created: noted before it reached the client
    assert a.responses.create(model="gpt-4o", input="Go on.", previous_response_id=made_in_stream).id
    assert a.responses.retrieve(first.id).id == first.id
    sent = len(fake.received)
    assert refused(lambda: b.responses.create(model="gpt-4o", input="x", previous_response_id=first.id)) == "shared_provider_state"
    assert refused(lambda: b.responses.retrieve(first.id)) == "shared_provider_state"
    assert refused(lambda: b.responses.delete(second.id)) == "shared_provider_state"
    assert refused(lambda: a.responses.retrieve("resp_made_elsewhere")) == "shared_provider_state"  # never seen made: nobody's
    assert len(fake.received) == sent  # none of the refused reached the provider
    assert every.responses.retrieve(first.id).id == first.id  # the operator's key for every tenant reads any
    a.responses.delete(second.id)
    assert second.id not in fake.stored
    unstored = a.responses.create(model="gpt-4o", input="Forget this.", store=False)  # nothing kept: nothing noted
    assert refused(lambda: a.responses.retrieve(unstored.id)) == "shared_provider_state"


def test_a_tenant_uses_the_conversations_it_made_and_no_other_tenants(keyed, fake):
    proxy = keyed(policies=policies_off())
    a, b = client(proxy, make_key(proxy, tenant="a")[0]), client(proxy, make_key(proxy, tenant="b")[0])
    conversation = a.conversations.create(metadata={"topic": "demo"})
    assert a.conversations.retrieve(conversation.id).id == conversation.id
    a.responses.create(model="gpt-4o", input="Hello.", conversation=conversation.id)
    assert fake.responses_requests[-1]["conversation"] == conversation.id
    assert refused(lambda: b.conversations.retrieve(conversation.id)) == "shared_provider_state"
    assert refused(lambda: b.responses.create(model="gpt-4o", input="x", conversation={"id": conversation.id})) \
        == "shared_provider_state"
    mine = b.conversations.create()
    assert b.conversations.retrieve(mine.id).id == mine.id


def test_who_made_what_is_kept_on_disk_for_every_process_on_the_storage_path(keyed, fake):
    """A second server on the same storage path (a replica, or this one restarted) knows the owners."""
    first_server = keyed(policies=policies_off())
    key_a, key_b = make_key(first_server, tenant="a")[0], make_key(first_server, tenant="b")[0]
    made = client(first_server, key_a).responses.create(model="gpt-4o", input="hi")
    first_server.stop()
    second_server = keyed(policies=policies_off())
    assert client(second_server, key_a).responses.retrieve(made.id).id == made.id
    assert refused(lambda: client(second_server, key_b).responses.retrieve(made.id)) == "shared_provider_state"


def test_the_new_objects_id_is_read_across_chunks_and_only_from_a_success(tmp_path):
    owners = FileOwners(tmp_path)

    async def answer(status: int, chunks: list[bytes], tenant: str = "a") -> None:
        watcher = NewObject(SimpleNamespace(owners=owners, tenant=tenant, stored=True))
        await watcher.see({"type": "http.response.start", "status": status})
        for n, chunk in enumerate(chunks):
            await watcher.see({"type": "http.response.body", "body": chunk, "more_body": n < len(chunks) - 1})

    async def scenario() -> list[str | None]:
        await answer(200, [b'event: response.created\ndata: {"type":"response.created","response":{"i', b'd": "resp_', b'x1", "model": "m"}}\n\n'])
        await answer(401, [b'{"error": {"id": "resp_x2"}}'])
        await answer(200, [b'{"object": "list", "data": []}'])  # no id: nothing noted
        await answer(200, [b" " * 20_000, b'{"id": "resp_x3"}'])  # past the bytes looked at
        return [await owners.owner(i) for i in ("resp_x1", "resp_x2", "resp_x3")]

    assert asyncio.run(scenario()) == ["a", None, None]


def test_openai_agents_chains_its_runs_by_previous_response_id_under_a_tenants_key(keyed, fake):
    agents = pytest.importorskip("agents")
    proxy = keyed(policies=policies_off())
    key_a, key_b = make_key(proxy, tenant="a")[0], make_key(proxy, tenant="b")[0]

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}."

    def run(key: str, text: str, previous: str | None = None):
        model = agents.OpenAIResponsesModel(model="gpt-4o", openai_client=openai.AsyncOpenAI(
            base_url=f"{proxy.url}/v1", api_key=key, max_retries=0))
        agent = agents.Agent(name="helper", instructions="Answer briefly.", tools=[get_weather], model=model)
        return asyncio.run(agents.Runner.run(agent, text, previous_response_id=previous,
                                             run_config=agents.RunConfig(tracing_disabled=True)))

    fake.reply(tool_calls=[{"name": "get_weather", "arguments": '{"city": "Paris"}'}])
    fake.reply(content="It is sunny in Paris.")
    first = run(key_a, "What's the weather in Paris?")
    fake.reply(content="Still sunny.")
    second = run(key_a, "And later?", previous=first.last_response_id)
    assert second.final_output == "Still sunny."
    assert fake.responses_requests[-1]["previous_response_id"] == first.last_response_id
    with pytest.raises(openai.PermissionDeniedError):
        run(key_b, "And later?", previous=first.last_response_id)
