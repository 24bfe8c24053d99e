"""Dashboard: the pipeline listener, the routes and the background flush, for one app."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import logging
import time
from html import escape
from pathlib import Path
from typing import Any, AsyncIterator, Callable
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from ..config import Settings
from ..memory_gauges import memory_figures
from ..models import ModelInfo
from . import auth, live
from .collector import Collector
from .prices import input_price
from .redis_store import RedisMinuteStore
from .stats import WINDOWS, build, window_range
from .store import MinuteStore

log = logging.getLogger("ctxwarden.dashboard")

FLUSH_S = 2.0
DB_FILE = "dashboard.sqlite3"
STATIC = {"dashboard.js": "text/javascript", "dashboard.css": "text/css", "favicon.svg": "image/svg+xml"}
PAGE_HEADERS = {
    "content-security-policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
}
QUARANTINE_SHOWN = 50


def _static(name: str) -> str:
    return importlib.resources.files("ctxwarden.proxy.dashboard").joinpath("static", name).read_text(encoding="utf-8")


class Dashboard:
    def __init__(self, settings: Settings, pipeline: Any, upstream: Any, keys: Any = None) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.upstream = upstream
        self.keys = keys  # the client-key gate (proxy/keys/gate.py): each key's usage
        cfg = settings.dashboard
        # With Redis (replicas), every replica adds into one set of series; else a file under storage.path.
        self.store: Any = (RedisMinuteStore(settings.state.redis_url, cfg.retention_days) if settings.state.redis_url
                           else MinuteStore(Path(settings.storage.path) / DB_FILE, cfg.retention_days))
        self.collector = Collector(self.store, cfg.show_content, ModelInfo(settings.models).metric_label)
        pipeline.listeners.append(self.collector.observe)
        self.flushes = live.Flushes()

    # ------------------------------------------------------------------ wiring

    def routes(self) -> list[Route]:
        return [
            Route("/dashboard", self.page, methods=["GET"]),
            Route("/dashboard/login", self.login, methods=["POST"]),
            Route("/dashboard/logout", self.logout, methods=["POST"]),
            Route("/dashboard/static/{name}", self.static, methods=["GET"]),
            Route("/dashboard/quarantine/{id}/{decision}", self.review, methods=["POST"]),
            Route("/admin/stats", self.stats, methods=["GET"]),
            Route("/admin/stats/stream", self.stream, methods=["GET"]),
        ]

    def lifespan(self, inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Wraps the app's lifespan: flushes every FLUSH_S in the background and once more at shutdown."""

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            task = asyncio.create_task(self._flusher())
            async with inner(app):
                try:
                    yield
                finally:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                    await asyncio.to_thread(self._last_flush)

        return lifespan

    async def _flusher(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            try:
                await asyncio.to_thread(self.collector.flush)
            except Exception:
                log.exception("could not write the dashboard's aggregates to %s; kept for the next try", self.store.path)
            else:
                await self.flushes.notify()

    def _last_flush(self) -> None:
        try:
            self.collector.flush()
        except Exception:
            log.exception("could not write the dashboard's last aggregates to %s", self.store.path)
        self.store.close()

    # ------------------------------------------------------------------ pages

    def _key(self) -> str | None:
        return auth.admin_key(self.settings.admin.api_key_env)

    def _login_page(self, status: int, message: str) -> Response:
        html = _static("login.html").replace("{message}", escape(message))
        return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)

    def _refusal(self, state: str) -> Response:
        if state == "disabled":
            return self._login_page(403, f"The admin API is off: set {self.settings.admin.api_key_env} to enable it.")
        if state == "wrong":
            return self._login_page(401, "Wrong admin key.")
        return self._login_page(401, "The dashboard needs the admin key.")

    async def page(self, request: Request) -> Response:
        state = auth.check(request, self._key())
        if state != "ok":
            return self._refusal(state)
        return HTMLResponse(_static("dashboard.html"), headers=PAGE_HEADERS)

    async def login(self, request: Request) -> Response:
        key = self._key()
        if not key:
            return self._refusal("disabled")
        form = parse_qs((await request.body())[:4096].decode("utf-8", "replace"))
        if not auth.key_matches((form.get("key") or [""])[0], key):
            return self._refusal("wrong")
        response = RedirectResponse("/dashboard", status_code=303, headers={"cache-control": "no-store"})
        response.set_cookie(auth.COOKIE, auth.cookie_token(key), max_age=auth.COOKIE_MAX_AGE_S, path="/",
                            httponly=True, samesite="strict", secure=request.url.scheme == "https")
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse("/dashboard", status_code=303)
        response.delete_cookie(auth.COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(_static(name), media_type=STATIC[name],
                        headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"})

    # ------------------------------------------------------------------ data

    def _denied(self, request: Request) -> JSONResponse | None:
        state = auth.check(request, self._key())
        if state == "ok":
            return None
        status, code = (403, "admin_disabled") if state == "disabled" else (401, "invalid_admin_key")
        message = ("The admin API is off." if state == "disabled"
                   else "The admin API needs 'Authorization: Bearer <admin key>' or the dashboard's login cookie.")
        return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": code, "param": None}},
                            status_code=status)

    def _window(self, request: Request) -> tuple[str, JSONResponse | None]:
        window = request.query_params.get("window", "1h")
        if window in WINDOWS:
            return window, None
        return window, JSONResponse({"error": {"message": f"window must be one of {', '.join(WINDOWS)}",
                                               "type": "invalid_request_error", "code": "invalid_request",
                                               "param": "window"}}, status_code=400)

    async def stats(self, request: Request) -> Response:
        denied = self._denied(request)
        if denied:
            return denied
        window, bad = self._window(request)
        return bad or JSONResponse(await self.figures(window), headers={"cache-control": "no-store"})

    async def stream(self, request: Request) -> Response:
        """GET /admin/stats/stream: the same figures as server-sent events (see live.py)."""
        denied = self._denied(request)
        if denied:
            return denied
        window, bad = self._window(request)
        if bad:
            return bad
        body = live.events(lambda: self.figures(window), self.flushes,
                           allowed=lambda: auth.check(request, self._key()) == "ok")
        return StreamingResponse(body, media_type="text/event-stream", headers=live.HEADERS)

    async def figures(self, window: str) -> dict[str, Any]:
        now = time.time()
        first, step, _ = window_range(window, now)
        rows = await asyncio.to_thread(self.collector.rows, first, step)
        poisoning = self.pipeline.policy("poisoning")
        cfg = getattr(poisoning, "config", None)
        data = build(rows, window, alert_rate=getattr(cfg, "alert_rate", None),
                     min_samples=getattr(cfg, "alert_min_samples", 1), now=now, price=input_price)
        data["breaker"] = self.upstream.breaker.state
        data["quarantine"] = await self._quarantine(poisoning)
        data["recent"] = self.collector.recent_requests()
        data["client_keys"] = await self._client_keys()
        data["memory"] = memory_figures()  # this process's, not the replicas'
        data["show_content"] = self.settings.dashboard.show_content
        data["generated_at"] = round(time.time(), 3)
        return data

    async def _client_keys(self) -> dict[str, Any]:
        """Each client key's requests, tokens and last use (no secret, no hash)."""
        if self.keys is None:
            return {"mode": None, "keys": []}
        try:
            listed = await self.keys.listing()
        except Exception as exc:
            log.warning("could not read the client keys: %s: %s", type(exc).__name__, exc)
            return {"mode": self.keys.mode, "keys": [], "error": type(exc).__name__}
        keep = ("id", "name", "hint", "tenant", "usage", "revoked_at")
        return {"mode": self.keys.mode, "keys": [{k: row.get(k) for k in keep} for row in listed]}

    async def _quarantine(self, poisoning: Any) -> dict[str, Any]:
        if poisoning is None:
            return {"enabled": False, "pending": [], "total": 0}
        try:
            items, total = await asyncio.to_thread(poisoning.quarantine.items, "pending", None, QUARANTINE_SHOWN, 0)
        except Exception as exc:
            log.warning("could not read the quarantine: %s: %s", type(exc).__name__, exc)
            return {"enabled": True, "pending": [], "total": 0, "error": type(exc).__name__}
        keep = ("id", "claim", "evidence", "type", "tenant", "source", "confidence", "created_at", "model", "request_id")
        shown = [{k: item.get(k) for k in keep if k in item} for item in items]
        if self.settings.dashboard.show_content:
            for out, item in zip(shown, items):
                out["text"] = item.get("text")
        return {"enabled": True, "pending": shown, "total": total}

    async def review(self, request: Request) -> Response:
        """Approve / Reject from the page: the poisoning policy's own admin handler, behind the cookie.
        A custom header is required, which a cross-site form cannot send (with SameSite=Strict: CSRF)."""
        denied = self._denied(request)
        if denied:
            return denied
        decision = request.path_params["decision"]
        if request.headers.get("x-ctxwarden-dashboard") != "1" or decision not in ("approve", "reject"):
            return JSONResponse({"error": {"message": "not a dashboard action", "type": "invalid_request_error",
                                           "code": "invalid_request", "param": None}}, status_code=400)
        poisoning = self.pipeline.policy("poisoning")
        path = f"/admin/quarantine/{{id}}/{decision}"
        handler = next((h for p, m, h in (poisoning.admin_routes() if poisoning else []) if p == path and m == "POST"), None)
        if handler is None:
            return JSONResponse({"error": {"message": "the poisoning policy is off", "type": "invalid_request_error",
                                           "code": "not_found", "param": None}}, status_code=404)
        status, data = await handler({"id": request.path_params["id"]}, {"note": "dashboard"})
        return JSONResponse(data, status_code=status)
