"""Admin routes of the poisoning policy (mounted under the admin key by the proxy).

    POST   /admin/kb/documents                {"documents": [{"id", "text", "metadata"}], "tenant"?}
    GET    /admin/kb/documents                ?tenant=&limit=&offset=
    GET    /admin/kb/documents/{id}           ?tenant=
    DELETE /admin/kb/documents/{id}           ?tenant=
    GET    /admin/quarantine                  ?status=pending|approved|rejected&tenant=&limit=&offset=
    GET    /admin/quarantine/{id}
    POST   /admin/quarantine/{id}/approve     {"note"?}  (adds the text to the KB with add_approved_to_kb)
    POST   /admin/quarantine/{id}/reject      {"note"?}
    GET    /admin/poisoning                   the poisoning rate window, totals by type, quarantine size
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Protocol

from ..errors import CtxwardenError, TenantError, check_tenant
from .kb import Document, DocumentError, KnowledgeBase, parse_documents
from .quarantine import APPROVED, REJECTED, STATUSES, QuarantineStore

Handler = Callable[[dict[str, Any], Any], Awaitable[tuple[int, Any]]]
Route = tuple[str, str, Handler]


class PoisoningAdmin(Protocol):
    """What the admin routes need of the poisoning policy (and nothing else of it)."""

    @property
    def quarantine(self) -> QuarantineStore: ...
    def kb(self, tenant: str | None = None) -> KnowledgeBase: ...
    def forget_verdicts(self) -> None: ...
    def adds_approved_to_kb(self) -> bool: ...
    def stats_snapshot(self) -> dict[str, Any]: ...
    async def refresh_quarantine_gauge(self) -> None: ...


def error(status: int, code: str, message: str, param: str | None = None) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": "invalid_request_error", "code": code, "param": param}}


def not_found(what: str, ident: str) -> tuple[int, dict[str, Any]]:
    return error(404, "not_found", f"no {what} with id {ident!r}", "id")


class BadRequest(CtxwardenError):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def tenant_param(value: Any, param: str = "tenant") -> str | None:
    """A `tenant` parameter: None when absent or empty (the shared namespace); else the tenant rule
    (errors.check_tenant), or BadRequest naming it."""
    if value is None or value == "":
        return None
    try:
        return check_tenant(value, param)
    except TenantError as exc:
        raise BadRequest(str(exc), param) from None


def _page(params: dict[str, Any]) -> tuple[int, int]:
    try:
        limit, offset = int(params.get("limit", 100)), int(params.get("offset", 0))
    except ValueError:
        raise BadRequest("limit and offset must be integers") from None
    if not (1 <= limit <= 1000) or offset < 0:
        raise BadRequest("limit must be 1-1000 and offset >= 0")
    return limit, offset


def _answering_bad_requests(handler: Handler) -> Handler:
    async def wrapped(params: dict[str, Any], body: Any) -> tuple[int, Any]:
        try:
            return await handler(params, body)
        except BadRequest as exc:
            return error(400, "invalid_request", str(exc), exc.param)
    return wrapped


class AdminRoutes:
    """The handlers, each `async (params, body) -> (status, json)`, over one `PoisoningAdmin`."""

    def __init__(self, policy: PoisoningAdmin) -> None:
        self.policy = policy

    def table(self) -> list[Route]:
        table: list[Route] = [
            ("/admin/kb/documents", "POST", self.add_documents),
            ("/admin/kb/documents", "GET", self.list_documents),
            ("/admin/kb/documents/{id}", "GET", self.get_document),
            ("/admin/kb/documents/{id}", "DELETE", self.delete_document),
            ("/admin/quarantine", "GET", self.list_quarantine),
            ("/admin/quarantine/{id}", "GET", self.get_item),
            ("/admin/quarantine/{id}/approve", "POST", self.reviewer(APPROVED)),
            ("/admin/quarantine/{id}/reject", "POST", self.reviewer(REJECTED)),
            ("/admin/poisoning", "GET", self.stats),
        ]
        return [(path, method, _answering_bad_requests(handler)) for path, method, handler in table]

    async def add_documents(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or "documents" not in body:
            return error(400, "invalid_request", 'expected {"documents": [{"id", "text", "metadata"}]}', "documents")
        try:
            docs = parse_documents(body["documents"])
        except DocumentError as exc:
            return error(400, "invalid_request", str(exc), "documents")
        kb = self.policy.kb(tenant_param(body.get("tenant") or params.get("tenant")))
        passages = await asyncio.to_thread(kb.add, docs)
        self.policy.forget_verdicts()
        return 200, {"object": "kb.documents.added", "ids": [d.id for d in docs], "documents": len(docs), "passages": passages}

    async def list_documents(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        limit, offset = _page(params)
        docs, total = await asyncio.to_thread(self.policy.kb(tenant_param(params.get("tenant"))).documents, limit, offset)
        return 200, {"object": "list", "data": [d.as_dict() for d in docs], "total": total}

    async def get_document(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        doc: Document | None = await asyncio.to_thread(self.policy.kb(tenant_param(params.get("tenant"))).document, params["id"])
        if doc is None:
            return not_found("knowledge-base document", params["id"])
        return 200, doc.as_dict()

    async def delete_document(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        found = await asyncio.to_thread(self.policy.kb(tenant_param(params.get("tenant"))).delete, params["id"])
        if not found:
            return not_found("knowledge-base document", params["id"])
        self.policy.forget_verdicts()
        return 200, {"id": params["id"], "deleted": True}

    async def list_quarantine(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        status = params.get("status")
        if status and status not in STATUSES:
            return error(400, "invalid_request", f"status must be one of {', '.join(STATUSES)}", "status")
        limit, offset = _page(params)
        tenant = tenant_param(params.get("tenant"))
        store = self.policy.quarantine
        items, total = await asyncio.to_thread(store.items, status, tenant, limit, offset)
        return 200, {"object": "list", "data": items, "total": total}

    async def get_item(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        item = await asyncio.to_thread(self.policy.quarantine.get, params["id"])
        if item is None:
            return not_found("quarantined item", params["id"])
        return 200, item

    def reviewer(self, status: str) -> Handler:
        async def review(params: dict[str, Any], body: Any) -> tuple[int, Any]:
            note = body.get("note", "") if isinstance(body, dict) else ""
            item = await asyncio.to_thread(self.policy.quarantine.review, params["id"], status, str(note or ""))
            if item is None:
                return not_found("quarantined item", params["id"])
            self.policy.forget_verdicts()
            if status == APPROVED and self.policy.adds_approved_to_kb():
                doc = Document(f"quarantine-{item['id']}", item["text"], {"source": "quarantine", "quarantine_id": item["id"]})
                await asyncio.to_thread(self.policy.kb(item.get("tenant") or None).add, [doc])
                item["added_to_kb"] = doc.id
            await self.policy.refresh_quarantine_gauge()
            return 200, item
        return review

    async def stats(self, params: dict[str, Any], body: Any) -> tuple[int, Any]:
        pending = await asyncio.to_thread(self.policy.quarantine.pending_by_type, True)
        return 200, {**self.policy.stats_snapshot(), "quarantine_pending_by_type": {k: v for k, v in pending.items() if v}}


def routes(policy: PoisoningAdmin) -> list[Route]:
    return AdminRoutes(policy).table()
