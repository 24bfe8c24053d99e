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
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from .knowledge import Document, DocumentError, parse_documents
from .quarantine import APPROVED, REJECTED, STATUSES

if TYPE_CHECKING:
    from .poisoning import PoisoningPolicy

Handler = Callable[[dict[str, Any], Any], Awaitable[tuple[int, Any]]]


def error(status: int, code: str, message: str, param: str | None = None) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": "invalid_request_error", "code": code, "param": param}}


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


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


def routes(policy: "PoisoningPolicy") -> list[tuple[str, str, Handler]]:
    async def add_documents(params: dict[str, Any], body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or "documents" not in body:
            return error(400, "invalid_request", 'expected {"documents": [{"id", "text", "metadata"}]}', "documents")
        try:
            docs = parse_documents(body["documents"])
        except DocumentError as exc:
            return error(400, "invalid_request", str(exc), "documents")
        tenant = body.get("tenant") or params.get("tenant")
        kb = policy.kb(tenant)
        passages = await asyncio.to_thread(kb.add, docs)
        policy.forget_verdicts()
        return 200, {"object": "kb.documents.added", "ids": [d.id for d in docs], "documents": len(docs), "passages": passages}

    async def list_documents(params: dict[str, Any], body: Any) -> tuple[int, Any]:
        limit, offset = _page(params)
        docs, total = await asyncio.to_thread(policy.kb(params.get("tenant")).documents, limit, offset)
        return 200, {"object": "list", "data": [d.as_dict() for d in docs], "total": total}

    async def get_document(params: dict[str, Any], body: Any) -> tuple[int, Any]:
        doc: Document | None = await asyncio.to_thread(policy.kb(params.get("tenant")).document, params["id"])
        if doc is None:
            return error(404, "not_found", f"no knowledge-base document with id {params['id']!r}", "id")
        return 200, doc.as_dict()

    async def delete_document(params: dict[str, Any], body: Any) -> tuple[int, Any]:
        found = await asyncio.to_thread(policy.kb(params.get("tenant")).delete, params["id"])
        if not found:
            return error(404, "not_found", f"no knowledge-base document with id {params['id']!r}", "id")
        policy.forget_verdicts()
        return 200, {"id": params["id"], "deleted": True}

    async def list_quarantine(params: dict[str, Any], body: Any) -> tuple[int, Any]:
        status = params.get("status")
        if status and status not in STATUSES:
            return error(400, "invalid_request", f"status must be one of {', '.join(STATUSES)}", "status")
        limit, offset = _page(params)
        items, total = await asyncio.to_thread(policy.quarantine.items, status, params.get("tenant"), limit, offset)
        return 200, {"object": "list", "data": items, "total": total}

    async def get_item(params: dict[str, Any], body: Any) -> tuple[int, Any]:
        item = await asyncio.to_thread(policy.quarantine.get, params["id"])
        if item is None:
            return error(404, "not_found", f"no quarantined item with id {params['id']!r}", "id")
        return 200, item

    def review(status: str) -> Handler:
        async def handler(params: dict[str, Any], body: Any) -> tuple[int, Any]:
            note = body.get("note", "") if isinstance(body, dict) else ""
            item = await asyncio.to_thread(policy.quarantine.review, params["id"], status, str(note or ""))
            if item is None:
                return error(404, "not_found", f"no quarantined item with id {params['id']!r}", "id")
            policy.forget_verdicts()
            if status == APPROVED and policy.config.add_approved_to_kb:
                doc = Document(f"quarantine-{item['id']}", item["text"], {"source": "quarantine", "quarantine_id": item["id"]})
                await asyncio.to_thread(policy.kb(item.get("tenant") or None).add, [doc])
                item["added_to_kb"] = doc.id
            await policy._update_quarantine_gauge()
            return 200, item
        return handler

    async def stats(params: dict[str, Any], body: Any) -> tuple[int, Any]:
        pending = await asyncio.to_thread(policy.quarantine.pending_by_type, True)
        return 200, {**policy.stats.snapshot(), "quarantine_pending_by_type": {k: v for k, v in pending.items() if v}}

    table = [
        ("/admin/kb/documents", "POST", add_documents),
        ("/admin/kb/documents", "GET", list_documents),
        ("/admin/kb/documents/{id}", "GET", get_document),
        ("/admin/kb/documents/{id}", "DELETE", delete_document),
        ("/admin/quarantine", "GET", list_quarantine),
        ("/admin/quarantine/{id}", "GET", get_item),
        ("/admin/quarantine/{id}/approve", "POST", review(APPROVED)),
        ("/admin/quarantine/{id}/reject", "POST", review(REJECTED)),
        ("/admin/poisoning", "GET", stats),
    ]
    return [(path, method, _answering_bad_requests(handler)) for path, method, handler in table]
