"""Carry the policies' per-session state through a shared backend, one request at a time.

Before the request policies run, the session's documents are loaded in one call and each
stateful policy's entry (`policy.session_states`, a SessionLRU) is hydrated from its document.
After the request policies, and again when the exchange completes (on_complete hooks and proxy
tools may change state), every document that differs from the stored one is written in one call.
A replica that serves the session's next request starts from what this one wrote.

Writes are compare-and-set against what the request loaded: when another replica wrote the same
document meanwhile, the backend returns the stored one, the policy's SessionLRU merges it with
this replica's state (`SessionLRU.reconcile`) and the merge is written, up to `MAX_ATTEMPTS`
times. A request that merged reports `state.merged`; one that still lost reports `state.conflict`.

While the backend is degraded, policies keep their state here. The sessions whose state changed
then are remembered (at most `MAX_PENDING`, with the documents they started the outage from): on
their first load after recovery, the local state is merged with the stored one instead of being
replaced by it, so what was done during the outage survives.
"""

from __future__ import annotations

import logging
from typing import Any

from ctxwarden.policies.base import Exchange
from ctxwarden.policies.cache import LRU, stable_hash
from ctxwarden.policies.state import SessionLRU

from ..tenants import tenant_slug
from .backends import StateBackend

log = logging.getLogger("ctxwarden.state")

MAX_ATTEMPTS = 3  # compare-and-set writes per save (the first, then after each merge)
MAX_PENDING = 10_000  # sessions changed while degraded, merged on their first load after recovery
MAX_PENDING_BYTES = 32 * 2**20  # …and their documents' size

Docs = dict[str, str | None]  # policy → document (None: none)


def session_scope(ex: Exchange) -> str:
    """The session's key in the backend: tenant (mapped injectively) → session."""
    return f"{tenant_slug(ex.tenant) if ex.tenant else '-'}:{stable_hash(ex.session_id)}"


class SessionSync:
    def __init__(self, backend: StateBackend, policies: list[Any]) -> None:
        self.backend = backend
        self.stores: dict[str, SessionLRU] = {
            p.name: p.session_states for p in policies if isinstance(getattr(p, "session_states", None), SessionLRU)
        }
        self.active = backend is not None and backend.shared and bool(self.stores)
        # scope → the documents the session had here when its degraded stretch began (the merge base)
        self.pending: LRU[str, Docs] = LRU(MAX_PENDING, max_bytes=MAX_PENDING_BYTES, sizeof=_docs_size, budgeted=False)

    def remeasure(self, ex: Exchange) -> None:
        """The request is over: each policy's state of its session is sized again (policies change
        their states in place), so the byte bound of every SessionLRU holds."""
        for name, states in self.stores.items():
            try:
                states.remeasure(ex.session_key)
            except Exception:  # a state changed by a concurrent request of the session: sized next time
                log.debug("session state of %s not sized", name, exc_info=True)

    def _exports(self, ex: Exchange) -> Docs:
        return {name: states.export(ex.session_key) for name, states in self.stores.items()}

    async def load(self, ex: Exchange) -> None:
        scope = session_scope(ex)
        docs = await self.backend.load_session(scope)
        if docs is None:
            ex.record("state", "degraded", backend="redis")
            if self.pending.get(scope) is None:
                self.pending.put(scope, self._exports(ex))
            return
        base = self.pending.pop(scope)
        for name, states in self.stores.items():
            if base is None:
                states.hydrate(ex.session_key, docs.get(name))
            else:
                self._recover(ex, states, base.get(name), docs.get(name))
        ex.notes.session_docs = docs

    @staticmethod
    def _recover(ex: Exchange, states: SessionLRU, base: str | None, theirs: str | None) -> None:
        """First load after an outage that changed the session here: merge, don't replace."""
        mine = states.export(ex.session_key)
        if mine is None or mine == base:  # nothing here, or unchanged here: the stored state is newer
            states.hydrate(ex.session_key, theirs)  # (no stored state: the local one stays)
        elif theirs is not None and mine != theirs:
            states.reconcile(ex.session_key, base, theirs)

    async def save(self, ex: Exchange) -> None:
        stored = ex.notes.session_docs
        scope = session_scope(ex)
        if stored is None:
            self._degraded_save(ex, scope)  # degraded when the request began: its state stays in this process
            return
        changed = {name: doc for name, doc in self._exports(ex).items() if doc is not None and doc != stored.get(name)}
        merged: list[str] = []
        for _ in range(MAX_ATTEMPTS):
            if not changed:
                break
            conflicts = await self.backend.save_session(scope, changed, {n: stored.get(n) for n in changed})
            if conflicts is None:  # the backend failed now: keep the state here, merge it after recovery
                self.pending.put(scope, {name: stored.get(name) for name in self.stores})
                return
            stored.update({name: doc for name, doc in changed.items() if name not in conflicts})
            changed = self._merge(ex, stored, conflicts)
            merged += [name for name in conflicts if name not in merged]
        if changed:
            ex.record("state", "conflict", policies=sorted(changed), attempts=MAX_ATTEMPTS)
            log.warning("session %s: state of %s still conflicted after %d attempts; another replica's stands",
                        ex.session_id, ", ".join(sorted(changed)), MAX_ATTEMPTS)
        elif merged:
            ex.record("state", "merged", policies=sorted(merged))

    def _merge(self, ex: Exchange, stored: dict[str, str], conflicts: Docs) -> dict[str, str]:
        """Merge each conflicting policy's state with the stored one; what must still be written."""
        again = {}
        for name, theirs in conflicts.items():
            states = self.stores[name]
            if theirs is not None:
                states.reconcile(ex.session_key, stored.get(name), theirs)
                stored[name] = theirs
            else:
                stored.pop(name, None)  # the stored document is gone (expired): mine is written as new
            doc = states.export(ex.session_key)
            if doc is not None and doc != theirs:
                again[name] = doc
        return again

    def _degraded_save(self, ex: Exchange, scope: str) -> None:
        """Forget the session's pending mark when nothing changed since the outage began."""
        base = self.pending.get(scope)
        if base is not None and self._exports(ex) == base:
            self.pending.pop(scope)


def _docs_size(scope: str, docs: Docs) -> int:
    return 200 + len(scope) + sum(100 + len(name) + len(doc or "") for name, doc in docs.items())
