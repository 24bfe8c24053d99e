"""Pasting a log, a report or a file is ordinary use (issue 41): with every policy on by default, a
1 MB or 5 MB user message of real text gets an answer, never a hang. The times are in
bench/message_size.py; here only that an answer comes, and which."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import pytest

SHAREGPT = Path(__file__).resolve().parents[1] / "bench" / "data" / "no_harm" / "sharegpt.jsonl.gz"


def real_text(size: int) -> str:
    """ShareGPT users' own messages, one after another, to `size` characters (numbers, dates, names,
    code and pasted documents: what the statement reader has most to read)."""
    texts = []
    with gzip.open(SHAREGPT, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts.append(row["text"] if row["kind"] == "first" else "\n".join(
                t["content"] for t in row["turns"] if t["role"] == "user"))
            if sum(map(len, texts)) > size:
                break
    return "\n\n".join(texts)[:size]


@pytest.mark.parametrize("size, window, status", [
    (1_000_000, 2_000_000, 200),  # the policies read it all the way through and it is forwarded
    (5_000_000, 128_000, 400),  # past the window: a clear context_length_exceeded
])
def test_a_huge_pasted_message_is_answered(fake, start_proxy, size, window, status):
    proxy = start_proxy({"models": {"gpt-4o": {"context_window": window}}})
    messages = [{"role": "user", "content": "I'm staying in Lisbon for 3 nights with a budget of $900."},
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": real_text(size) + "\n\nWhat does this say about the budget?"}]
    r = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}, timeout=120)
    assert r.status_code == status, r.text[:300]
    if status == 400:
        assert r.json()["error"]["code"] == "context_length_exceeded"
    else:
        assert len(fake.chat_requests) == 1
        assert fake.chat_requests[0]["messages"][-1]["content"].startswith(messages[-1]["content"])
