"""Issue 43, fault 3: two `ctxwarden serve` processes on one `storage.path` (embedded Chroma, no
Redis). A document replaced through one must be judged by its new text in the other within a
second: the writer rewrites the store's change signal (`<storage.path>/signals/…`), the reader reads
it every 0.5 s and reloads, embedding the passages whose stored vectors its own copy of Chroma's
vector index cannot see ("Error finding id"), instead of judging by the old text until refresh_s
and then failing the check."""

from __future__ import annotations

import time

import httpx

from ctxwarden.proxy.processes import start_replica
from tests.conftest import policies_off

ADMIN_KEY = "store-versions-admin-key"
AUTH = {"authorization": f"Bearer {ADMIN_KEY}"}
QUESTION = [{"role": "user", "content": "Where is Acme's head office?"}]
MUMBAI, BERLIN = "Acme's head office is in Mumbai.", "Acme's head office is in Berlin."
FRESH_WITHIN_S = 1.5  # the brief: seen within 1 s (signal read every 0.5 s, one reload), with slack for a busy host


def judged(fake, proxy, answer: str) -> tuple[str, list[str]]:
    """The answer's finish_reason through `proxy`, and its actions."""
    fake.reply(content=answer)
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": QUESTION}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["finish_reason"], [a for a in r.headers["x-ctxwarden-actions"].split(",") if a]


def replace(proxy, text: str) -> None:
    r = httpx.post(f"{proxy.url}/admin/kb/documents", headers=AUTH, json={"documents": [{"id": "hq", "text": text}]},
                   timeout=30)
    assert r.status_code == 200, r.text


def seconds_until_judged_by(fake, proxy, new: str, old: str) -> float:
    """After a replace (old → new): how long until `proxy` lets the new text pass and blocks the old one,
    both actually checked (no poisoning.unavailable)."""
    started = time.monotonic()
    while True:
        finish, actions = judged(fake, proxy, new)
        assert "poisoning.unavailable" not in actions, actions  # never "fresh" by skipping the check
        if finish == "stop":
            elapsed = time.monotonic() - started
            finish, actions = judged(fake, proxy, old)
            assert finish == "content_filter" and "poisoning.blocked" in actions, (finish, actions)
            return elapsed
        assert time.monotonic() - started < 10, "the replaced document was still judged by its old text after 10 s"
        time.sleep(0.05)


def test_a_document_replaced_through_one_process_is_judged_by_its_new_text_in_the_other(fake, tmp_path):
    config = {"upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None, "retries": 0},
              "storage": {"path": str(tmp_path / "store")}, "policies": policies_off("poisoning")}
    env = {"CTXWARDEN_ADMIN_KEY": ADMIN_KEY}
    a = start_replica(tmp_path, config, env=env)
    b = start_replica(tmp_path, config, env=env)
    try:
        replace(a, MUMBAI)
        for proxy in (a, b):  # both have loaded the index, with Mumbai
            assert judged(fake, proxy, BERLIN)[0] == "content_filter"

        replace(a, BERLIN)
        a_to_b = seconds_until_judged_by(fake, b, BERLIN, MUMBAI)
        # And back, written by the process that so far only read (its vector index was behind the store).
        replace(b, MUMBAI)
        b_to_a = seconds_until_judged_by(fake, a, MUMBAI, BERLIN)
        print(f"stale for {a_to_b * 1000:.0f} ms (A → B), {b_to_a * 1000:.0f} ms (B → A)")
        assert a_to_b < FRESH_WITHIN_S and b_to_a < FRESH_WITHIN_S, (a_to_b, b_to_a)
        for proxy in (a, b):
            ready = httpx.get(f"{proxy.url}/readyz").json()
            assert ready["status"] == "ready" and ready["kb"] == "ok", ready
    finally:
        a.stop()
        b.stop()
