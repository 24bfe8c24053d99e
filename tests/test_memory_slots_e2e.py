"""Supersede is keyed on the slot of the same thing, end to end through the real server: an updated
budget replaces the old one; a budget for another thing stands beside it. And task isolation: a
task's private memory never reaches a request of another task (x-ctxwarden-task)."""

from __future__ import annotations

import httpx

from tests.conftest import openai_client
from tests.test_memory_e2e import ADMIN, proxy  # noqa: F401  (the fixture: the real server, memory alone on)


def ask(proxy, text, user="dana", **headers):
    client = openai_client(proxy, default_headers={k.replace("_", "-"): v for k, v in headers.items()})
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", user=user, messages=[{"role": "user", "content": text}])
    return raw.headers.get("x-ctxwarden-actions", "")


def listed(proxy, user="dana"):
    return httpx.get(f"{proxy.url}/admin/memories", params={"user": user, "history": "true"}, headers=ADMIN).json()["data"]


def block(fake) -> str:
    content = fake.chat_requests[-1]["messages"][-1]["content"]
    return content.split("\n\n")[0] if content.startswith("Relevant context:") else ""


def test_an_updated_budget_supersedes_and_a_budget_for_another_thing_does_not(proxy, fake):
    assert "memory.write" in ask(proxy, "My budget for the wedding is 20,000 euros.", x_ctxwarden_session="s1")
    actions = ask(proxy, "My budget for the new laptop is 1,500 euros.", x_ctxwarden_session="s2")
    assert "memory.write" in actions and "memory.supersede" not in actions  # another thing: both live
    assert sorted(m["text"] for m in listed(proxy) if not m["superseded_by"]) == [
        "My budget for the new laptop is 1,500 euros.", "My budget for the wedding is 20,000 euros."]

    actions = ask(proxy, "My budget for the wedding is now 25,000 euros.", x_ctxwarden_session="s3")
    assert "memory.supersede" in actions
    memories = {m["text"]: m for m in listed(proxy)}
    old, new = memories["My budget for the wedding is 20,000 euros."], memories["My budget for the wedding is now 25,000 euros."]
    assert old["superseded_by"] == new["id"] and new["superseded_by"] is None
    assert memories["My budget for the new laptop is 1,500 euros."]["superseded_by"] is None  # untouched

    ask(proxy, "How much can I spend on the wedding venue?", x_ctxwarden_session="s4")
    assert "25,000" in block(fake) and "20,000" not in block(fake)  # only the live one reaches the model


def test_a_task_private_memory_stays_out_of_other_tasks(proxy, fake):
    ask(proxy, "My budget for the wedding is 20,000 euros.", x_ctxwarden_task="wedding", x_ctxwarden_session="w1")
    ask(proxy, "How much can I spend on the wedding venue?", x_ctxwarden_task="office-move", x_ctxwarden_session="o1")
    assert block(fake) == ""  # the same topic, another task: nothing
    ask(proxy, "How much can I spend on the wedding venue?", x_ctxwarden_task="wedding", x_ctxwarden_session="w2")
    assert "20,000 euros" in block(fake)
    ask(proxy, "How much can I spend on the wedding venue?", x_ctxwarden_session="d1")  # no task: the default one
    assert block(fake) == ""
