"""The Starlette application: routes, start-up wiring and shutdown."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, AsyncIterator, Awaitable, Callable

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from .admin import admin_routes
from .chat import ChatHandler, read_body, relay_error, relay_headers
from .config import Settings
from .errors import ProxyError, error_body
from .models import ModelInfo
from .pipeline import Pipeline
from .services import build_services
from .telemetry import Telemetry
from .upstream.client import Upstream

log = logging.getLogger("ctxwarden")


def create_app(
    settings: Settings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    span_processors: list[Any] | None = None,
) -> Starlette:
    telemetry = Telemetry(settings.telemetry.service_name, settings.telemetry.otlp_endpoint, span_processors)
    upstream = Upstream(settings.upstream, transport=transport)
    models = ModelInfo(settings.models)
    services = build_services(settings, telemetry, upstream, models)
    pipeline = Pipeline(settings, services, telemetry)
    chat = ChatHandler(pipeline, upstream, telemetry, models, settings.server.max_body_mb)
    routes = [
        Route("/v1/chat/completions", chat.handle, methods=["POST"]),
        Route("/chat/completions", chat.handle, methods=["POST"]),
        Route("/healthz", _healthz(upstream, pipeline), methods=["GET"]),
        Route("/metrics", _metrics(telemetry), methods=["GET"]),
        *admin_routes(settings, pipeline, telemetry),
        Route("/v1/{path:path}", _relay(upstream, settings.server.max_body_mb), methods=["GET", "POST", "DELETE"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=_lifespan(pipeline, upstream, telemetry),
        exception_handlers={ProxyError: _proxy_error, HTTPException: _http_error, Exception: _server_error},
    )
    app.state.settings = settings
    app.state.pipeline = pipeline
    app.state.telemetry = telemetry
    app.state.upstream = upstream
    app.state.services = services
    return app


# ---------------------------------------------------------------------- endpoints

Endpoint = Callable[[Request], Awaitable[Response]]


def _healthz(upstream: Upstream, pipeline: Pipeline) -> Endpoint:
    async def healthz(request: Request) -> Response:
        breaker = upstream.breaker.state
        ok = breaker != "open"
        return JSONResponse(
            {"status": "ok" if ok else "degraded", "upstream_circuit": breaker, "policies": [p.name for p in pipeline.policies]},
            status_code=200 if ok else 503,
        )

    return healthz


def _metrics(telemetry: Telemetry) -> Endpoint:
    async def metrics(request: Request) -> Response:
        return PlainTextResponse(telemetry.prometheus_text(), media_type="text/plain; version=0.0.4")

    return metrics


def _relay(upstream: Upstream, max_body_mb: float) -> Endpoint:
    async def relay(request: Request) -> Response:
        """Every other /v1 endpoint (models, embeddings, …) is relayed as it is."""
        path = request.url.path.removeprefix("/v1/").removeprefix("/")
        if request.url.query:
            path = f"{path}?{request.url.query}"
        body = await read_body(request, max_body_mb) if request.method not in ("GET", "HEAD") else None
        result = await upstream.send(request.method, path, body, upstream.request_headers(request.headers))
        response = result.response
        if response.status_code >= 400:
            return await relay_error(response)
        return Response(response.content, status_code=response.status_code, headers=relay_headers(response))

    return relay


def _lifespan(pipeline: Pipeline, upstream: Upstream, telemetry: Telemetry) -> Callable[[Starlette], Any]:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await pipeline.aclose()
        await upstream.aclose()
        telemetry.shutdown()

    return lifespan


# ---------------------------------------------------------------------- errors, OpenAI-shaped

async def _proxy_error(request: Request, exc: ProxyError) -> Response:
    return exc.response()


async def _http_error(request: Request, exc: HTTPException) -> Response:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    message = f"{request.method} {request.url.path}: {exc.detail}"
    return JSONResponse(error_body(message, code, exc.status_code), status_code=exc.status_code)


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse(error_body(f"ctxwarden failed unexpectedly: {type(exc).__name__}. This is a bug.", "internal_error", 500), status_code=500)
