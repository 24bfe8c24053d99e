"""kill -9 of `ctxwarden serve` while it writes memories, archives tool results and compacts
history into Chroma, three times, each kill at a random moment of a stream of such requests: the
store it leaves must open again, every memory read back must be whole, and writing must go on
(the knowledge base has its own kill loop: tests/test_kb_durability.py)."""

from __future__ import annotations

import random
import threading
import time

import httpx

from ctxwarden.proxy.processes import start_replica

ADMIN = {"authorization": "Bearer admin-k"}
ENV = {"CTXWARDEN_ADMIN_KEY": "admin-k"}
CITIES = ["Lisbon", "Oslo", "Kyoto", "Quito", "Perth", "Tallinn", "Dakar", "Hanoi"]


def config(fake, path) -> dict:
    return {"upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None, "retries": 0},
            "storage": {"path": str(path)}, "models": {"small": {"context_window": 6000}},
            "policies": {"clash": {"enabled": False}, "loops": {"enabled": False}}}


def body(user: str, n: int) -> dict:
    """A preference worth remembering, after three tool results too big for the small window."""
    city = CITIES[n % len(CITIES)]
    turns = [{"role": "user", "content": f"Plan my trip to {city}."}]
    for k in range(3):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "search", "arguments": f'{{"q": "{city} {k}"}}'}}
        rows = "\n".join(f"{city} hotel {i}: {40 + i} euros, {i % 5 + 1} stars, room {i * 7}" for i in range(300))
        turns += [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": f"c{k}", "content": rows}]
    turns.append({"role": "user", "content": f"I prefer small hotels near the station, my budget is {50 + n} euros a night."})
    return {"model": "small", "user": user, "messages": turns}


def keep_writing(url: str, user: str, stop: threading.Event, answered: list[int]) -> None:
    n = 0
    while not stop.is_set():
        try:
            r = httpx.post(f"{url}/v1/chat/completions", json=body(user, n), timeout=10,
                           headers={"x-ctxwarden-session": f"{user}-{n}"})
            answered.append(r.status_code)
        except httpx.HTTPError:  # killed under it
            return
        n += 1


def memories(url: str, user: str) -> list[dict]:
    r = httpx.get(f"{url}/admin/memories", params={"user": user}, headers=ADMIN, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_kill_dash_nine_during_memory_and_archive_writes_leaves_a_store_that_opens_and_writes(fake, tmp_path):
    rng = random.Random(3)
    path = tmp_path / "store"
    users: list[str] = []
    for kill in range(3):
        proxy = start_replica(tmp_path, config(fake, path), env=ENV)
        assert httpx.get(f"{proxy.url}/readyz", timeout=10).status_code == 200
        for user in users:  # what earlier processes wrote before they were killed
            assert all(m["text"].strip() for m in memories(proxy.url, user)), user
        users.append(f"traveller{kill}")
        stop, answered = threading.Event(), []
        writer = threading.Thread(target=keep_writing, args=(proxy.url, users[-1], stop, answered))
        writer.start()
        time.sleep(rng.uniform(1.5, 4.0))
        proxy.kill()
        stop.set()
        writer.join(timeout=20)
        assert answered and set(answered) == {200}, answered  # it was writing when killed

    proxy = start_replica(tmp_path, config(fake, path), env=ENV)
    try:
        assert httpx.get(f"{proxy.url}/readyz", timeout=10).status_code == 200
        r = httpx.post(f"{proxy.url}/v1/chat/completions", json=body("after", 7), timeout=30)
        assert r.status_code == 200
        actions = r.headers["x-ctxwarden-actions"].split(",")
        assert "memory.write" in actions and "history.summarize" in actions  # both still write
        assert any("budget" in m["text"] for m in memories(proxy.url, "after"))
        for user in users:  # each killed process answered 10+ requests: their memories were written, and are whole
            found = memories(proxy.url, user)
            assert found and all(m["text"].strip() for m in found), user
    finally:
        proxy.stop()
