"""`ctxwarden serve --workers N`: N processes on one port (uvicorn's supervisor).

Enabled policies keep session state (loop and retry counters, clash decisions, tool lists) and
documents (an embedded Chroma store that one process owns), and N workers behind one port each see
a part of every agent's traffic. So more than one worker needs what replicas need: a shared state
backend (`state.redis_url`) and a Chroma server (`storage.chroma_url`). Without them, more than one
worker is refused while any policy is enabled; the pure gateway (every policy off) scales anyway.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from .config import Settings, load_settings
from .metrics_share import ENV as METRICS_DIR_ENV

_ENV = "CTXWARDEN_WORKER_SETTINGS"  # how each worker process learns the config it was started with


def refusal(settings: Settings, workers: int) -> str | None:
    """Why `workers` processes cannot serve these settings (None: they can)."""
    enabled = [name for name, cfg in settings.policy_configs().items() if getattr(cfg, "enabled", True)]
    if workers <= 1 or not enabled or (settings.state.redis_url and settings.storage.chroma_url):
        return None
    return (f"--workers {workers} refused: the enabled policies ({', '.join(enabled)}) keep state that workers "
            "behind one port would split between them. Set state.redis_url and storage.chroma_url (shared by "
            "every worker, as replicas share them: README \"Scale out\"), or disable every policy for a pure gateway.")


def serve_workers(config_path: str | None, overrides: dict[str, Any], settings: Settings, workers: int,
                  **uvicorn_kwargs: Any) -> int:
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    if refusal(settings, workers):
        raise ValueError(refusal(settings, workers))
    os.environ[_ENV] = json.dumps({"config": config_path, "overrides": overrides})
    # /metrics sums every worker's figures, whichever worker a scrape reaches (metrics_share.py).
    os.environ.setdefault(METRICS_DIR_ENV, tempfile.mkdtemp(prefix="ctxwarden-metrics-"))
    # By import path: each worker process builds the app and its protocol class (with the server.*
    # limits) itself; neither could be pickled across to it.
    config = uvicorn.Config("ctxwarden.proxy.workers:worker_app", factory=True, workers=workers,
                            http="ctxwarden.proxy.workers:WorkerProtocol", host=settings.server.host,
                            port=settings.server.port, **uvicorn_kwargs)
    Multiprocess(config, sockets=[config.bind_socket()]).run()
    return 0


def _settings() -> Settings:
    spec = json.loads(os.environ[_ENV])
    return load_settings(spec["config"], spec["overrides"])


def worker_app() -> Any:
    """The app in one worker process, from the settings the supervisor was started with."""
    from .app import create_app

    return create_app(_settings())


def __getattr__(name: str) -> Any:
    if name == "WorkerProtocol":  # the limited protocol class, made in the worker from its settings
        from .server import Limits, limited_protocol

        return limited_protocol(Limits.of(_settings().server))
    raise AttributeError(name)
