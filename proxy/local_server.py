"""Run an ASGI app with uvicorn on 127.0.0.1 in a background thread (demo, tests, benchmarks)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from .config import Settings
from .server import uvicorn_config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    def __init__(self, app: Any, port: int | None = None, host: str = "127.0.0.1", log_level: str = "warning",
                 settings: Settings | None = None) -> None:
        """`settings`: its server.* limits (header size, read timeouts) apply; the defaults without it.
        Host and port are the arguments here, never the settings'."""
        self.host = host
        self.port = port or free_port()
        config = uvicorn_config(app, settings, host=host, port=self.port, log_level=log_level, lifespan="on",
                                access_log=False, timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 20) -> "LocalServer":
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
