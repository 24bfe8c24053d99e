"""The Starlette application: routes, start-up wiring and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from typing import Any, AsyncIterator, Awaitable, Callable

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ctxwarden.policies.cache import set_cache_budget

from .admin import admin_routes, require_admin
from .chat import ChatHandler, read_body
from .upstream_answer import relay_error, relay_headers
from .config import Settings
from .dashboard import Dashboard
from .errors import ProxyError, error_body
from .keys.admin import key_routes
from .keys.gate import KeyGate
from .genai import usage_of
from .keys.middleware import ClientKeys, charge_of
from .keys.relayed import charge_relayed, check_relayed
from .memory_gauges import refresh_memory_gauges
from .memory_trim import HeapTrim, no_huge_page_advice
from .messages_api import MessagesHandler
from .metrics_share import from_environment
from .models import ModelInfo
from .pipeline import Pipeline
from .responses_api import ResponsesHandler
from .services import build_services
from .telemetry import Telemetry
from .upstream.client import AnthropicUpstream, Upstream
from .upstream.paths import relay_path

log = logging.getLogger("ctxwarden")

# Built-in policies that keep state in the store; a plugin says so with `uses_store = True`.
STORE_POLICIES = frozenset({"poisoning", "history", "archive", "tools"})
STORE_HEARTBEAT_TIMEOUT_S = 2.0


def create_app(
    settings: Settings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    span_processors: list[Any] | None = None,
) -> Starlette:
    gate = KeyGate.from_settings(settings)  # first: a proxy that must not start as configured stops here
    telemetry = Telemetry(settings.telemetry.service_name, settings.telemetry.otlp_endpoint, span_processors,
                          exporter=settings.telemetry.exporter_in_use())
    upstream = Upstream(settings.upstream, transport=transport)
    models = ModelInfo(settings.models)
    labels = {"model": models.metric_label, "gen_ai.request.model": models.metric_label,
              "gen_ai.response.model": models.metric_label}
    telemetry.metrics.bound_labels(**labels)
    set_cache_budget(int(settings.server.cache_mb * 2**20))  # before the policies make their caches
    telemetry.metrics.refresh_with(refresh_memory_gauges)
    services = build_services(settings, telemetry, upstream, models)
    pipeline = Pipeline(settings, services, telemetry)
    pipeline.listeners.append(HeapTrim().after)  # big bodies leave freed pages in the heap: give them back
    no_huge_page_advice()  # and NumPy's huge-page advice would make them resident again
    chat = ChatHandler(pipeline, upstream, telemetry, models, settings.server.max_body_mb)
    responses = ResponsesHandler(pipeline, upstream, telemetry, models, settings.server.max_body_mb)
    anthropic = AnthropicUpstream(settings.upstream, transport=transport) if settings.upstream.anthropic.base_url else None
    messages = MessagesHandler(pipeline, upstream, telemetry, models, settings.server.max_body_mb, anthropic=anthropic)
    dashboard = Dashboard(settings, pipeline, upstream, keys=gate)  # registers its pipeline listener
    routes = [
        Route("/v1/chat/completions", chat.handle, methods=["POST"]),
        Route("/chat/completions", chat.handle, methods=["POST"]),
        Route("/v1/responses", responses.handle, methods=["POST"]),  # its other routes (GET, cancel, …) are relayed
        Route("/v1/messages", messages.handle, methods=["POST"]),
        Route("/v1/messages/count_tokens", messages.count_tokens, methods=["POST"]),
        Route("/v1/messages/{path:path}", messages.relay, methods=["GET", "POST", "DELETE"]),  # batches: to Anthropic
        Route("/healthz", _healthz(upstream, pipeline), methods=["GET"]),
        Route("/readyz", _readyz(upstream, pipeline, services), methods=["GET"]),
        Route("/metrics", _metrics(telemetry), methods=["GET"]),
        *dashboard.routes(),
        *admin_routes(settings, pipeline, telemetry),
        *key_routes(gate, lambda request: require_admin(settings, request)),
        Route("/v1/{path:path}", _relay(upstream, settings.server.max_body_mb), methods=["GET", "POST", "DELETE"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=dashboard.lifespan(_lifespan(pipeline, upstream, telemetry, services.versions, anthropic)),
        # Client keys only in keys mode: the other modes pay nothing for them.
        middleware=[Middleware(AnswerErrors), *([Middleware(ClientKeys, gate=gate)] if gate.mode == "keys" else [])],
        exception_handlers={ProxyError: _proxy_error, HTTPException: _http_error},
    )
    app.state.settings = settings
    app.state.pipeline = pipeline
    app.state.telemetry = telemetry
    app.state.upstream = upstream
    app.state.services = services
    app.state.keys = gate
    return app


# ---------------------------------------------------------------------- endpoints

Endpoint = Callable[[Request], Awaitable[Response]]


def _healthz(upstream: Upstream, pipeline: Pipeline) -> Endpoint:
    async def healthz(request: Request) -> Response:
        """Liveness: 200 while the process answers; the breaker's state is shown, not judged (see /readyz)."""
        return JSONResponse(
            {"status": "ok", "upstream_circuit": upstream.breaker.state, "policies": [p.name for p in pipeline.policies]}
        )

    return healthz


def _readyz(upstream: Upstream, pipeline: Pipeline, services: Any) -> Endpoint:
    uses_store = any(getattr(p, "uses_store", p.name in STORE_POLICIES) for p in pipeline.policies)

    async def readyz(request: Request) -> Response:
        """Readiness: 503 while the upstream circuit is open, a store some enabled policy uses is down,
        or a policy's own check says it cannot do its work (`readiness()`: the poisoning policy while
        a knowledge base cannot be read, `"kb": "unavailable"`). A store no enabled policy uses is
        reported "unused" and neither checked nor counted."""
        breaker = upstream.breaker.state
        store = ("ok" if await _store_alive(services.store) else "down") if uses_store else "unused"
        ready = breaker != "open" and store != "down"  # a degraded state backend still serves: ready
        fields: dict[str, Any] = {}
        for policy in pipeline.policies:
            check = getattr(policy, "readiness", None)
            if check is not None:
                try:
                    ok, said = await check()
                except Exception as exc:
                    ok, said = False, {policy.name: f"unavailable ({type(exc).__name__})"}
                ready, fields = ready and ok, {**fields, **said}
        return JSONResponse(
            {"status": "ready" if ready else "not_ready", "upstream_circuit": breaker, "store": store,
             "state": services.versions.status, **fields,
             "policies": [p.name for p in pipeline.policies]},
            status_code=200 if ready else 503,
        )

    return readyz


async def _store_alive(store: Any) -> bool:
    """store.healthy() where the store has it, else store.heartbeat(); sync (run off the event loop)
    or async, within a bound; False, an exception or no answer in time is down."""
    check = getattr(store, "healthy", None) or store.heartbeat
    try:
        if inspect.iscoroutinefunction(check):
            result = await asyncio.wait_for(check(), STORE_HEARTBEAT_TIMEOUT_S)
        else:
            result = await asyncio.wait_for(asyncio.to_thread(check), STORE_HEARTBEAT_TIMEOUT_S)
    except Exception as exc:
        log.warning("store heartbeat failed: %s: %s", type(exc).__name__, exc)
        return False
    return result is not False


def _metrics(telemetry: Telemetry) -> Endpoint:
    async def metrics(request: Request) -> Response:
        return PlainTextResponse(telemetry.prometheus_text(), media_type="text/plain; version=0.0.4")

    return metrics


def _relay(upstream: Upstream, max_body_mb: float) -> Endpoint:
    async def relay(request: Request) -> Response:
        """Every other /v1 endpoint (models, embeddings, …) is relayed as it is; never a path outside /v1."""
        path = relay_path(request.path_params["path"], request.method)
        if request.url.query:
            path = f"{path}?{request.url.query}"
        body = await read_body(request, max_body_mb) if request.method not in ("GET", "HEAD") else None
        charge = charge_of(request.scope)
        await check_relayed(charge, request.method, path, body, request.headers.get("content-type", ""))
        result = await upstream.send(request.method, path, body, upstream.request_headers(request.headers), stream=True)
        response = result.response
        if response.status_code >= 400:
            return await relay_error(response)
        return StreamingResponse(_relayed_body(response, charge), status_code=response.status_code,
                                 headers=relay_headers(response))

    return relay


async def _relayed_body(response: httpx.Response, charge: Any) -> AsyncIterator[bytes]:
    """A relayed answer as it comes: a file's content or a big batch of embeddings is never held whole
    (nor bounded by upstream.max_response_mb, which is for the answers the proxy reads). The usage it
    reports, at its end, is charged to the client key before the last byte goes out."""
    tail = b""
    try:
        async for chunk in response.aiter_bytes():
            tail = (tail + chunk)[-4096:]
            yield chunk
        charge_relayed(charge, usage_of(tail))
    finally:
        await response.aclose()


def _lifespan(pipeline: Pipeline, upstream: Upstream, telemetry: Telemetry, state: Any,
              anthropic: Upstream | None = None) -> Callable[[Starlette], Any]:
    shared_metrics = from_environment(telemetry.metrics)  # under `serve --workers N` only

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await state.start()
        if shared_metrics:
            shared_metrics.start()
        yield
        if shared_metrics:
            await shared_metrics.stop()
        await state.aclose()
        await pipeline.aclose()
        await upstream.aclose()
        if anthropic is not None:
            await anthropic.aclose()
        telemetry.shutdown()

    return lifespan


# ---------------------------------------------------------------------- errors, OpenAI-shaped

async def _proxy_error(request: Request, exc: ProxyError) -> Response:
    return exc.response()


async def _http_error(request: Request, exc: HTTPException) -> Response:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    message = f"{request.method} {request.url.path}: {exc.detail}"
    return JSONResponse(error_body(message, code, exc.status_code), status_code=exc.status_code)


class AnswerErrors:
    """ASGI layer around the routes: an exception no handler took becomes an ordinary OpenAI-shaped
    500, and nothing is re-raised, so the server keeps the keep-alive connection usable (Starlette's
    own error layer re-raises after answering, and the server then drops the connection unannounced).
    Once a response has started it cannot be answered: the exception goes on and the server drops
    the connection, which the client sees as a cut response, as it should."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = {"start": False, "end": False}

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start":
                sent["start"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                sent["end"] = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            if sent["end"]:
                return  # the answer is complete: the connection stays usable
            if sent["start"]:
                raise
            body = error_body(f"ctxwarden failed unexpectedly: {type(exc).__name__}. This is a bug.", "internal_error", 500)
            await JSONResponse(body, status_code=500)(scope, receive, send)
