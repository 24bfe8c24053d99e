"""Shared fixtures: a local fake upstream and the real proxy, both under uvicorn on 127.0.0.1."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Awaitable, Callable, Iterator

import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from ctxwarden.policies.cache import set_cache_budget
from ctxwarden.proxy.app import create_app
from ctxwarden.proxy.config import load_settings, merge_config
from ctxwarden.proxy.fake_upstream import FakeUpstream
from ctxwarden.proxy.local_server import LocalServer
from ctxwarden.proxy.registry import policy_names

ALL_POLICIES = tuple(policy_names())  # the built-ins, as pyproject.toml registers them


@pytest.fixture(autouse=True)
def _caches_at_their_own_bounds() -> Iterator[None]:
    """An app made in this process scales every cache's byte bound (server.cache_mb, a process-wide
    setting): each test starts from the bounds as written, whatever app an earlier test made."""
    set_cache_budget(None)
    yield


def policies_off(*except_: str) -> dict[str, Any]:
    """Config overrides that switch every policy off except the named ones."""
    return {name: {"enabled": name in except_} for name in ALL_POLICIES}


@contextlib.contextmanager
def running_fake() -> Iterator[FakeUpstream]:
    """A fake upstream under uvicorn on 127.0.0.1 (its address in `.url`), stopped on exit."""
    upstream = FakeUpstream()
    server = LocalServer(upstream.app()).start()
    upstream.url = server.url  # type: ignore[attr-defined]
    try:
        yield upstream
    finally:
        server.stop()


@pytest.fixture
def fake() -> Iterator[FakeUpstream]:
    with running_fake() as upstream:
        yield upstream


@pytest.fixture
def start_proxy(fake: FakeUpstream, tmp_path) -> Callable[..., LocalServer]:
    """start_proxy(overrides) → a running proxy in front of `fake`; stopped after the test."""
    servers: list[LocalServer] = []

    def start(overrides: dict[str, Any] | None = None, **kwargs: Any) -> LocalServer:
        base = {
            "upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None, "retries": 0, "backoff_s": 0.01},
            "storage": {"path": str(tmp_path / "store")},
        }
        settings = load_settings(None, merge_config(base, overrides or {}))
        app = create_app(settings, **kwargs)
        server = LocalServer(app, settings=settings).start()
        server.app = app  # type: ignore[attr-defined]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def openai_client(server: LocalServer, **kwargs: Any):
    import openai

    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=kwargs.pop("api_key", "sk-test"), max_retries=0, **kwargs)


Handler = Callable[[Any], Awaitable[Any]]  # a starlette endpoint: Request → Response


def start_upstream(handler: Handler, servers: list[LocalServer]) -> LocalServer:
    """A running upstream whose every /v1/… request goes to `handler` (added to `servers`, to stop)."""
    app = Starlette(routes=[Route("/v1/{path:path}", handler, methods=["GET", "POST"])])
    server = LocalServer(app).start()
    servers.append(server)
    return server


@pytest.fixture
def hostile():
    """hostile(handler) → a running upstream whose every /v1/… request goes to `handler`."""
    servers: list[LocalServer] = []
    yield lambda handler: start_upstream(handler, servers)
    for server in servers:
        server.stop()


def clear_of_minute_edge(margin_s: float = 10.0) -> None:
    """Wait, if need be, until the current UTC minute has `margin_s` seconds left: a key's request
    rate is counted per calendar minute, so a burst that crosses one starts counting again."""
    left = 60 - time.time() % 60
    if left < margin_s:
        time.sleep(left + 0.05)
