"""Admin routes of the memory policy (mounted under the admin key by the proxy). The tenant is
`x-ctxwarden-tenant` (or `?tenant=`); absent: the shared namespace.

    GET    /admin/memories?user=U[&task=T][&q=text][&history=true]
           live memories of U (with task: that task's private ones plus U's shared ones; with q: the
           ones relevant to q, best first, with their score; with history: superseded ones too)
    POST   /admin/memories        {"user", "text", "kind"?, "scope"?, "task"?}
    DELETE /admin/memories/{id}   forget one memory, at once
    DELETE /admin/memories?user=U forget every memory of U (the right to be forgotten)
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import numpy as np

from ..errors import TenantError, check_name, check_tenant
from ..text.statements.extract import extract
from .calibrate import Calibration
from .config import KINDS, MemoryConfig
from .extract import Candidate, candidates
from .hints import HintError, Owner, check_scope
from .store import MemoryStore
from .writer import Provenance, write


class MemoryHost(Protocol):
    """What the admin routes need of the memory policy (and nothing else of it)."""

    config: MemoryConfig
    services: Any

    @property
    def store(self) -> MemoryStore: ...
    async def calibration(self) -> Calibration: ...

MAX_TEXT = 2000


def error(status: int, code: str, message: str, param: str | None = None) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": "invalid_request_error", "code": code, "param": param}}


def _tenant(params: dict[str, Any], body: Any = None) -> str | None:
    value = (body.get("tenant") if isinstance(body, dict) else None) or params.get("tenant") \
        or params.get("x-ctxwarden-tenant")
    return check_tenant(value, "tenant") if value else None


def _answering_bad_input(handler: Any) -> Any:
    async def wrapped(params: dict[str, Any], body: Any) -> tuple[int, Any]:
        try:
            return await handler(params, body)
        except (HintError, TenantError) as exc:
            return error(400, "invalid_request", str(exc), exc.param)
    return wrapped


class MemoryAdmin:
    def __init__(self, policy: MemoryHost) -> None:
        self.policy = policy

    def routes(self) -> list[tuple[str, str, Any]]:
        table = [("/admin/memories", "GET", self.list), ("/admin/memories", "POST", self.add),
                 ("/admin/memories", "DELETE", self.forget_user), ("/admin/memories/{id}", "DELETE", self.delete)]
        return [(path, method, _answering_bad_input(handler)) for path, method, handler in table]

    async def list(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        tenant = _tenant(params)
        user = check_name(params.get("user"), "user")
        task = check_name(params["task"], "task") if params.get("task") else None
        index = await asyncio.to_thread(self.policy.store.index, tenant, user)
        history = str(params.get("history", "")).lower() in ("1", "true", "yes")
        rows = [m for m in index.memories if (history or m.live) and (task is None or m.visible_to(task))]
        rows.sort(key=lambda m: m.created_at)
        data = [m.public() for m in rows]
        query = params.get("q")
        if query and rows:
            calibration = await self.policy.calibration()
            # the vectors SELECT ranks (a memory's is read with its turn: writer.in_context), not its text alone
            vector = np.asarray(self.policy.services.embedder.embed([query])[0], dtype=np.float32)
            sims, _ = index.similarities(vector)
            scores = calibration.relevance(sims[[index.positions[m.id] for m in rows]])
            data = [{**d, "score": round(float(s), 4)} for d, s in zip(data, scores)]
            data.sort(key=lambda d: -d["score"])
        return 200, {"object": "list", "data": data}

    async def add(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict):
            return error(400, "invalid_request", 'expected {"user", "text", "kind"?, "scope"?, "task"?}')
        text = body.get("text")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
            return error(400, "invalid_request", f"text must be a non-empty string of at most {MAX_TEXT} characters", "text")
        kind = body.get("kind")
        if kind is not None and kind not in KINDS:
            return error(400, "invalid_request", f"kind must be one of {', '.join(KINDS)}", "kind")
        task = check_name(body["task"], "task") if body.get("task") else ""
        owner = Owner(_tenant(params, body), check_name(body.get("user"), "user"), task,
                      check_scope(body.get("scope") or "private", "scope"))
        text = " ".join(text.split())
        read = candidates(text)
        candidate = Candidate(text, kind or (read[0].kind if read else "fact"), 1.0, extract(text))
        report = await asyncio.to_thread(write, self.policy.store, owner, [candidate], self.policy.config.strategy,
                                         Provenance(source="api"), None, kind)
        memory = (report.written or report.merged)[0]
        return 200, {**memory.public(), "superseded": [older.id for older, _ in report.superseded],
                     "merged": not report.written}

    async def delete(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        memory = await asyncio.to_thread(self.policy.store.delete, _tenant(params), params["id"])
        if memory is None:
            return error(404, "not_found", f"no memory with id {params['id']!r}", "id")
        return 200, {"id": memory.id, "deleted": True}

    async def forget_user(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        user = check_name(params.get("user"), "user")
        count = await asyncio.to_thread(self.policy.store.delete_user, _tenant(params), user)
        return 200, {"user": user, "deleted": count}
