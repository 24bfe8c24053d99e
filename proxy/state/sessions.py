"""Carry the policies' per-session state through a shared backend, one request at a time.

Before the request policies run, the session's documents are loaded in one call and each
stateful policy's entry (`policy.session_states`, a SessionLRU) is hydrated from its document.
After the request policies, and again when the exchange completes (on_complete hooks and proxy
tools may change state), every document that differs from the stored one is written in one call.
A replica that serves the session's next request starts from what this one wrote.
"""

from __future__ import annotations

from typing import Any

from ctxwarden.policies.base import Exchange
from ctxwarden.policies.cache import stable_hash
from ctxwarden.policies.state import SessionLRU

from ..tenants import tenant_slug
from .backends import StateBackend


def session_scope(ex: Exchange) -> str:
    """The session's key in the backend: tenant (mapped injectively) → session."""
    return f"{tenant_slug(ex.tenant) if ex.tenant else '-'}:{stable_hash(ex.session_id)}"


class SessionSync:
    def __init__(self, backend: StateBackend, policies: list[Any]) -> None:
        self.backend = backend
        self.stores: list[tuple[str, SessionLRU]] = [
            (p.name, p.session_states) for p in policies if isinstance(getattr(p, "session_states", None), SessionLRU)
        ]
        self.active = backend is not None and backend.shared and bool(self.stores)

    async def load(self, ex: Exchange) -> None:
        docs = await self.backend.load_session(session_scope(ex))
        if docs is None:
            ex.record("state", "degraded", backend="redis")
            return
        for name, states in self.stores:
            states.hydrate(ex.session_key, docs.get(name))
        ex.notes.session_docs = docs

    async def save(self, ex: Exchange) -> None:
        stored = ex.notes.session_docs
        if stored is None:
            return  # degraded when the request began: its state stays in this process
        changed = {}
        for name, states in self.stores:
            doc = states.export(ex.session_key)
            if doc is not None and doc != stored.get(name):
                changed[name] = doc
        if changed and await self.backend.save_session(session_scope(ex), changed):
            stored.update(changed)
