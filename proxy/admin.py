"""/admin/*: authenticated with `Authorization: Bearer <admin key>` (admin.api_key_env)."""

from __future__ import annotations

import hmac
import os
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .config import Settings
from .errors import ProxyError
from .pipeline import Pipeline
from .telemetry import Telemetry


def require_admin(settings: Settings, request: Request) -> None:
    key = os.environ.get(settings.admin.api_key_env or "")
    if not key:
        raise ProxyError(403, "admin_disabled", f"The admin API is off: set {settings.admin.api_key_env} to enable it.")
    given = request.headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
        raise ProxyError(401, "invalid_admin_key", "The admin API needs 'Authorization: Bearer <admin key>'.")


def admin_routes(settings: Settings, pipeline: Pipeline, telemetry: Telemetry) -> list[Route]:
    def guarded(handler):
        async def endpoint(request: Request) -> Response:
            require_admin(settings, request)
            return await handler(request)
        return endpoint

    async def metrics(request: Request) -> Response:
        return JSONResponse({"metrics": telemetry.snapshot()})

    routes: list[Route] = [Route("/admin/metrics", guarded(metrics), methods=["GET"])]
    for policy in pipeline.policies:
        for path, method, handler in policy.admin_routes():
            routes.append(Route(path, guarded(_json_handler(handler)), methods=[method]))
    return routes


def _json_handler(handler):
    """Policies contribute `(path, method, async fn(params, body) -> (status, json))` handlers."""

    async def endpoint(request: Request) -> Response:
        body: Any = None
        if request.method in ("POST", "PUT", "PATCH"):
            raw = await request.body()
            if raw.strip():
                import json

                try:
                    body = json.loads(raw)
                except ValueError as exc:
                    raise ProxyError(400, "invalid_request", f"The request body is not valid JSON: {exc}")
        params = {**request.query_params, **request.path_params}
        if "x-ctxwarden-tenant" in request.headers:  # the memory routes take their tenant from the header
            params.setdefault("x-ctxwarden-tenant", request.headers["x-ctxwarden-tenant"])
        status, data = await handler(params, body)
        return JSONResponse(data, status_code=status)

    return endpoint
