"""/admin/keys: create, list and revoke client keys (the admin key required, as on all of /admin).

POST /admin/keys {"tenant", "name"?, "tenants"?, "user"?, "models"?, "tokens_per_day"?,
"requests_per_minute"?} → 201 with the key, shown this once; GET /admin/keys → every key (no
secrets, no hashes) with its usage; DELETE /admin/keys/{id} → the revoked record (404 if unknown).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import ProxyError
from .gate import KeyGate
from .records import make_key

FIELDS = ("name", "tenants", "user", "models", "tokens_per_day", "requests_per_minute")


def key_routes(gate: KeyGate, require_admin: Any) -> list[Route]:
    async def listing(request: Request) -> Response:
        require_admin(request)
        return JSONResponse({"mode": gate.mode, "store": getattr(gate.store, "where", None), "keys": await gate.listing()})

    async def create(request: Request) -> Response:
        require_admin(request)
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError as exc:
            raise ProxyError(400, "invalid_request", f"The request body is not valid JSON: {exc}") from exc
        if not isinstance(body, dict) or not isinstance(body.get("tenant"), str):
            raise ProxyError(400, "invalid_request", "A JSON object with a `tenant` is required.", param="tenant")
        unknown = set(body) - {"tenant", *FIELDS}
        if unknown:
            raise ProxyError(400, "invalid_request", f"Unknown fields: {', '.join(sorted(unknown))}.")
        try:
            secret, record = make_key(body["tenant"], **{k: body[k] for k in FIELDS if body.get(k) is not None})
        except (ValueError, TypeError) as exc:
            raise ProxyError(400, "invalid_request", str(exc)) from exc
        assert gate.store is not None
        await asyncio.to_thread(gate.store.add, record)
        await gate.reload()
        return JSONResponse({"key": secret, **record.public(),
                             "note": "The key is shown this once; the proxy keeps only its hash."}, status_code=201)

    async def revoke(request: Request) -> Response:
        require_admin(request)
        assert gate.store is not None
        record = await asyncio.to_thread(gate.store.revoke, request.path_params["key_id"])
        await gate.reload()
        if record is None:
            raise ProxyError(404, "not_found", f"No key {request.path_params['key_id']!r}.")
        return JSONResponse(record.public())

    return [Route("/admin/keys", listing, methods=["GET"]), Route("/admin/keys", create, methods=["POST"]),
            Route("/admin/keys/{key_id}", revoke, methods=["DELETE"])]
