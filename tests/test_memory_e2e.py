"""Memory end to end: the real server, the official openai SDK, a fake upstream that records what
it was sent."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import openai_client, policies_off

ADMIN = {"authorization": "Bearer admin-test"}


@pytest.fixture
def proxy(start_proxy, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    return start_proxy({"policies": policies_off("memory")})


def ask(proxy, text, user="alice", **headers):
    client = openai_client(proxy, default_headers={k.replace("_", "-"): v for k, v in headers.items()})
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", user=user, messages=[{"role": "system", "content": "You are a travel agent."},
                                             {"role": "user", "content": text}])
    return raw.headers.get("x-ctxwarden-actions", "")


def forwarded_user(fake) -> str:
    return fake.chat_requests[-1]["messages"][-1]["content"]


def test_a_preference_reaches_a_later_session_on_a_related_topic_only(proxy, fake):
    actions = ask(proxy, "I prefer budget hotels, nothing fancy.", x_ctxwarden_session="s1")
    assert "memory.write" in actions
    assert "Relevant context" not in forwarded_user(fake)  # said in this very message: not repeated

    actions = ask(proxy, "Find me a hotel in Rome for three nights.", x_ctxwarden_session="s2")
    sent = fake.chat_requests[-1]["messages"]
    assert "memory.select" in actions
    assert sent[-1]["content"].startswith("Relevant context:\n- I prefer budget hotels, nothing fancy.\n\n")
    assert sent[-1]["content"].endswith("Find me a hotel in Rome for three nights.")
    assert sent[0] == {"role": "system", "content": "You are a travel agent."}  # never the system prompt

    actions = ask(proxy, "Write a haiku about autumn leaves.", x_ctxwarden_session="s3")
    assert "memory.select" not in actions
    assert forwarded_user(fake) == "Write a haiku about autumn leaves."


def test_a_contradicting_preference_supersedes_the_older_one(proxy, fake):
    ask(proxy, "I prefer budget hotels.", x_ctxwarden_session="s1")
    actions = ask(proxy, "Actually I want luxury 5-star hotels now.", x_ctxwarden_session="s2")
    assert "memory.supersede" in actions
    ask(proxy, "Find me a hotel in Rome for three nights.", x_ctxwarden_session="s3")
    block = forwarded_user(fake).split("\n\n")[0]
    assert "luxury 5-star hotels" in block and "budget" not in block
    listed = httpx.get(f"{proxy.url}/admin/memories", params={"user": "alice", "history": "true"}, headers=ADMIN).json()
    older = next(m for m in listed["data"] if "budget" in m["text"])
    newer = next(m for m in listed["data"] if "luxury" in m["text"])
    assert older["superseded_by"] == newer["id"] and newer["superseded_by"] is None


def test_tasks_are_isolated_and_shared_scope_crosses_them(proxy, fake):
    ask(proxy, "I prefer boutique hotels near the old town.", x_ctxwarden_task="paris-trip")
    ask(proxy, "I am vegetarian.", x_ctxwarden_task="paris-trip", x_ctxwarden_scope="shared")
    ask(proxy, "Find a hotel and a vegetarian restaurant in London.", x_ctxwarden_task="london-dinner")
    block = forwarded_user(fake)
    assert "vegetarian" in block.split("\n\n")[0] and "boutique" not in block
    ask(proxy, "Find a hotel in Paris for Friday.", x_ctxwarden_task="paris-trip")
    assert "boutique hotels" in forwarded_user(fake).split("\n\n")[0]


def test_tenants_never_see_each_others_memories(proxy, fake):
    ask(proxy, "I prefer budget hotels.", x_ctxwarden_tenant="acme")
    ask(proxy, "Find me a hotel in Rome.", x_ctxwarden_tenant="globex")
    assert forwarded_user(fake) == "Find me a hotel in Rome."
    ask(proxy, "Find me a hotel in Rome.", x_ctxwarden_tenant="acme")
    assert forwarded_user(fake).startswith("Relevant context:")
    other = httpx.get(f"{proxy.url}/admin/memories", params={"user": "alice"},
                      headers={**ADMIN, "x-ctxwarden-tenant": "globex"}).json()
    assert other["data"] == []


def test_deletion_removes_a_memory_from_search_at_once(proxy, fake):
    ask(proxy, "I prefer budget hotels.", x_ctxwarden_session="s1")
    ask(proxy, "Find me a hotel in Rome.", x_ctxwarden_session="s2")
    assert forwarded_user(fake).startswith("Relevant context:")
    listed = httpx.get(f"{proxy.url}/admin/memories", params={"user": "alice"}, headers=ADMIN).json()["data"]
    gone = httpx.delete(f"{proxy.url}/admin/memories/{listed[0]['id']}", headers=ADMIN)
    assert gone.status_code == 200
    ask(proxy, "Find me a hotel in Rome.", x_ctxwarden_session="s2")  # the same session, same turn
    assert forwarded_user(fake) == "Find me a hotel in Rome."
    assert httpx.delete(f"{proxy.url}/admin/memories/{listed[0]['id']}", headers=ADMIN).status_code == 404


def test_memory_off_skips_writing_and_selecting(proxy, fake):
    actions = ask(proxy, "I prefer budget hotels.", x_ctxwarden_memory="off")
    assert "memory.write" not in actions
    ask(proxy, "I prefer budget hotels.")
    ask(proxy, "Find me a hotel in Rome.", x_ctxwarden_memory="off")
    assert forwarded_user(fake) == "Find me a hotel in Rome."


def test_a_request_without_a_user_is_forwarded_untouched(proxy, fake):
    body = b'{"model":"gpt-4o","messages":[{"role":"user","content":"I prefer budget hotels."}]}'
    r = httpx.post(f"{proxy.url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.headers["x-ctxwarden-actions"] == ""
    assert fake.received[-1].raw == body


def test_bad_hints_and_admin_input_are_400(proxy, fake):
    r = httpx.post(f"{proxy.url}/v1/chat/completions", headers={"x-ctxwarden-user": "a", "x-ctxwarden-scope": "public"},
                   json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "x-ctxwarden-scope"
    r = httpx.post(f"{proxy.url}/admin/memories", headers=ADMIN, json={"user": "alice", "text": "x", "kind": "mood"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "kind"
    assert httpx.get(f"{proxy.url}/admin/memories", headers=ADMIN).status_code == 400  # no user
    assert httpx.get(f"{proxy.url}/admin/memories", params={"user": "alice"}).status_code in (401, 403)


def test_admin_add_list_and_forget_a_user(proxy, fake):
    added = httpx.post(f"{proxy.url}/admin/memories", headers=ADMIN,
                       json={"user": "bob", "text": "Never book red-eye flights.", "scope": "shared"}).json()
    assert added["kind"] == "constraint" and added["scope"] == "shared"
    ask(proxy, "Search flights from Boston to Denver.", user="bob", x_ctxwarden_task="work-trip")
    assert "red-eye" in forwarded_user(fake).split("\n\n")[0]
    listed = httpx.get(f"{proxy.url}/admin/memories", params={"user": "bob", "q": "flights"}, headers=ADMIN).json()
    assert [m["id"] for m in listed["data"]] == [added["id"]] and listed["data"][0]["score"] > 0.5
    forgotten = httpx.delete(f"{proxy.url}/admin/memories", params={"user": "bob"}, headers=ADMIN).json()
    assert forgotten["deleted"] == 1
    assert httpx.get(f"{proxy.url}/admin/memories", params={"user": "bob"}, headers=ADMIN).json()["data"] == []
    ask(proxy, "Search flights from Boston to Denver.", user="bob", x_ctxwarden_task="work-trip",
        x_ctxwarden_session="after")
    assert forwarded_user(fake) == "Search flights from Boston to Denver."  # gone from search at once


@pytest.mark.parametrize("clash_on", [False, True])
def test_memory_supersedes_whether_or_not_the_clash_policy_is_on(start_proxy, fake, monkeypatch, clash_on):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    on = ("memory", "clash") if clash_on else ("memory",)
    proxy = start_proxy({"policies": policies_off(*on)})
    ask(proxy, "I prefer budget hotels.", x_ctxwarden_session="s1")
    client = openai_client(proxy, default_headers={"x-ctxwarden-session": "s2"})
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", user="alice", messages=[
        {"role": "user", "content": "I prefer budget hotels."}, {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Actually I want luxury 5-star hotels now."}])
    assert "memory.supersede" in raw.headers.get("x-ctxwarden-actions", "")
    listed = httpx.get(f"{proxy.url}/admin/memories", params={"user": "alice"}, headers=ADMIN).json()["data"]
    assert [m["text"] for m in listed] == ["Actually I want luxury 5-star hotels now."]


def test_admin_list_with_a_task_shows_its_private_and_the_shared_memories(proxy, fake):
    for text, task, scope in (("I prefer boutique hotels.", "paris", "private"), ("I never eat pork.", "paris", "shared"),
                              ("I prefer window seats.", "london", "private")):
        r = httpx.post(f"{proxy.url}/admin/memories", headers=ADMIN,
                       json={"user": "alice", "text": text, "task": task, "scope": scope})
        assert r.status_code == 200, r.text
    def texts(**params):
        data = httpx.get(f"{proxy.url}/admin/memories", params={"user": "alice", **params}, headers=ADMIN).json()["data"]
        assert all({"id", "text", "kind", "scope", "task", "created_at", "superseded_by"} <= set(m) for m in data)
        return sorted(m["text"] for m in data)
    assert texts(task="london") == ["I never eat pork.", "I prefer window seats."]
    assert texts(task="paris") == ["I never eat pork.", "I prefer boutique hotels."]
    assert texts(task="rome") == ["I never eat pork."]
    assert len(texts()) == 3


def test_a_later_turn_keeps_the_earlier_block_in_place_and_the_system_prompt_untouched(proxy, fake):
    ask(proxy, "I prefer budget hotels, nothing fancy.", x_ctxwarden_session="s1")
    first = [{"role": "system", "content": "You are a travel agent."},
             {"role": "user", "content": "Find me a hotel in Rome for three nights."}]
    client = openai_client(proxy, default_headers={"x-ctxwarden-session": "s2"})
    client.chat.completions.create(model="gpt-4o", user="alice", messages=first)
    sent_first = fake.chat_requests[-1]["messages"]
    assert sent_first[1]["content"].startswith("Relevant context:\n")
    client.chat.completions.create(model="gpt-4o", user="alice", messages=[
        *first, {"role": "assistant", "content": "Here are three."}, {"role": "user", "content": "Thanks, that is all."}])
    sent_second = fake.chat_requests[-1]["messages"]
    assert sent_second[:2] == sent_first  # the forwarded prefix is byte-for-byte the turn before
    assert sent_second[-1]["content"] == "Thanks, that is all."  # nothing relevant: the new turn is untouched


def test_memory_actions_are_span_events_of_the_memory_policy_span(start_proxy, fake, monkeypatch):
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    proxy = start_proxy({"policies": policies_off("memory")}, span_processors=[SimpleSpanProcessor(exporter)])
    ask(proxy, "I prefer budget hotels.", x_ctxwarden_session="s1")
    ask(proxy, "Actually I want luxury 5-star hotels now.", x_ctxwarden_session="s2")
    ask(proxy, "Find me a hotel in Rome for three nights.", x_ctxwarden_session="s3")
    events = [e for s in exporter.get_finished_spans() if s.name == "ctxwarden.policy memory" for e in s.events]
    names = [e.name for e in events]
    assert names.count("memory.write") == 2 and names.count("memory.supersede") == 1 and names.count("memory.select") == 1
    assert next(e for e in events if e.name == "memory.select").attributes["count"] == 1
