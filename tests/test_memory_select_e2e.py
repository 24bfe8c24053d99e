"""SELECT prefers injecting nothing to injecting noise, end to end through the real server: a user
with many memories, none about most requests, still has a nearest one for every request, and by
chance it can pass min_score ("Find me a hotel in Rome for three nights." meets "I work as a nurse on
night shifts." on the shipped static embedder). The distinct gate (policies.memory.min_distinct)
keeps only a memory that stands out from the user's others."""

from __future__ import annotations

import httpx

from tests.conftest import openai_client, policies_off
from tests.test_memory_e2e import ADMIN

MEMORIES = (  # one user's varied life, written for this test
    "I prefer small family-run hotels to big chains.", "I play the cello in an amateur orchestra.",
    "My daughter starts school in September.", "I work as a nurse on night shifts.", "I grow tomatoes on my balcony.",
    "I'm learning Portuguese.", "I drive an old Volvo estate.", "My partner is allergic to cats.",
    "I run a book club on Thursdays.", "I support Celtic football club.", "I keep bees at my allotment.",
    "I'm saving for a sailing boat.", "I collect vinyl records from the seventies.", "My mother lives in Galway.",
    "I use Linux on every machine I own.", "I do my banking with a credit union.", "I take the ferry to work.",
    "I bake sourdough every weekend.", "I volunteer at the animal shelter.", "My brother is a pilot.",
    "I paint watercolours of birds.", "I'm training for a half marathon.", "I write poetry in the evenings.",
    "I fix old bicycles as a hobby.", "I brew my own cider.", "I knit jumpers for my nieces.",
    "I go birdwatching at the estuary.", "I have a season ticket for the opera.", "My flat has no lift.",
    "I play chess online most nights.",
)
UNRELATED = ("Find me a hotel in Rome for three nights.", "Tell me a joke about penguins.",
             "What is the capital of Australia?", "How many moons does Jupiter have?",
             "Explain the difference between TCP and UDP.", "Convert 30 degrees Celsius to Fahrenheit.")


def served(start_proxy, monkeypatch, **memory):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", "admin-test")
    proxy = start_proxy({"policies": {**policies_off("memory"), "memory": {"enabled": True, **memory}}})
    for text in MEMORIES:
        r = httpx.post(f"{proxy.url}/admin/memories", json={"user": "erin", "text": text}, headers=ADMIN, timeout=30)
        assert r.status_code in (200, 201), r.text
    return proxy


def block_for(proxy, fake, text: str) -> list[str]:
    openai_client(proxy).chat.completions.create(model="gpt-4o", user="erin",
                                                 messages=[{"role": "user", "content": text}])
    content = fake.chat_requests[-1]["messages"][-1]["content"]
    if not content.startswith("Relevant context:\n"):
        return []
    return [line[2:] for line in content.split("\n\n")[0].splitlines()[1:]]


def test_a_memory_that_stands_out_is_injected_and_chance_neighbours_are_not(start_proxy, fake, monkeypatch):
    proxy = served(start_proxy, monkeypatch)
    assert block_for(proxy, fake, "Can you recommend a good cello teacher?") == ["I play the cello in an amateur orchestra."]
    assert block_for(proxy, fake, "Suggest a training plan for my race.") == ["I'm training for a half marathon."]
    for text in UNRELATED:
        assert block_for(proxy, fake, text) == [], text


def test_without_the_gate_the_same_requests_get_chance_neighbours(start_proxy, fake, monkeypatch):
    proxy = served(start_proxy, monkeypatch, min_distinct=-10)
    noise = {text: block_for(proxy, fake, text) for text in UNRELATED}
    assert "I work as a nurse on night shifts." in noise["Find me a hotel in Rome for three nights."]
    assert block_for(proxy, fake, "Can you recommend a good cello teacher?")[0] == "I play the cello in an amateur orchestra."
