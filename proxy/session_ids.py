"""Which session a request belongs to: what every per-session store (history, loops, tools,
carried messages, prefix watch) is keyed by."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ctxwarden.policies.messages import content_text


def session_of(body: dict[str, Any], headers: Any) -> str:
    """x-ctxwarden-session, else the OpenAI `user` field, else a hash of the opening messages."""
    explicit = headers.get("x-ctxwarden-session")
    if explicit:
        return _bounded_id(explicit)
    if isinstance(body.get("user"), str) and body["user"]:
        return _bounded_id(f"user:{body['user']}")
    opening = [m for m in body["messages"][:4] if m.get("role") in ("system", "developer", "user")][:2]
    texts = json.dumps([content_text(m) for m in opening], ensure_ascii=False)
    digest = hashlib.sha256(texts.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return f"conv:{digest}"


MAX_SESSION_ID = 200


def _bounded_id(session: str) -> str:
    """A session id as sent, or a hash of it past MAX_SESSION_ID characters: every per-session store
    is keyed by it, and a client's `user` field may be megabytes (a fuzzed body's was 1.5 MB, held
    once per store for as long as the session was)."""
    if len(session) <= MAX_SESSION_ID:
        return session
    digest = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{session[:40]}…{digest}"
