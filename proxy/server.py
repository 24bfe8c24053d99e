"""The uvicorn server the proxy runs under, with limits on what a client may make it wait for.

uvicorn's httptools protocol reads headers of any size and waits for slow clients forever, so
`uvicorn_config` plugs in a subclass of it that enforces `server.*`:

- max_header_kb: a request line plus headers larger than this gets 431, counted while the bytes
  arrive (a 1 MB header is refused after its first chunks, not read to the end);
- header_timeout_s: headers not complete this long after the request began (or after the
  connection opened) get 408; a connection that sent nothing is closed;
- body_timeout_s: a body not complete this long after its headers gets 408 (the handler waiting
  for it sees a disconnect).
Refusals are OpenAI-shaped JSON and close the connection.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .config import ServerConfig, Settings
from .errors import error_body


@dataclass(frozen=True)
class Limits:
    max_header_bytes: int = 64 * 1024
    header_timeout_s: float = 10
    body_timeout_s: float = 30

    @classmethod
    def of(cls, server: ServerConfig) -> "Limits":
        return cls(int(server.max_header_kb * 1024), server.header_timeout_s, server.body_timeout_s)


def uvicorn_config(app: Any, settings: Settings | None = None, **kwargs: Any) -> uvicorn.Config:
    """A uvicorn.Config for `app` with the limits of `settings.server` (defaults without settings);
    host and port come from settings unless given."""
    server = settings.server if settings is not None else ServerConfig()
    kwargs.setdefault("host", server.host)
    kwargs.setdefault("port", server.port)
    return uvicorn.Config(app, http=limited_protocol(Limits.of(server)), **kwargs)


def limited_protocol(limits: Limits) -> type[HttpToolsProtocol]:
    """The protocol class uvicorn instantiates per connection, bound to `limits`."""
    return type("LimitedHttpToolsProtocol", (LimitedHttpToolsProtocol,), {"limits": limits})


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    limits = Limits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = False  # a request began and its headers are not complete
        self._head_size = 0  # its request line and headers, as parsed so far
        self._head_received = 0  # bytes received since it began (an upper bound of its head)
        self._refused = False  # answered by the limits: ignore whatever else the client sends
        self._timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.limits.header_timeout_s, self._header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        if self._in_head and not self._refused:
            self._head_received += len(data)
            if self._head_received > self.limits.max_header_bytes:
                self._refused = True
        if self._refused and not self.transport.is_closing():
            self._refuse(431, "request_header_fields_too_large",
                         f"The request headers are larger than the proxy's limit of {self.limits.max_header_bytes // 1024} KB "
                         "(server.max_header_kb).")

    # ------------------------------------------------------------------ parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._head_size, self._head_received = True, 0, 0
        if self._timer is None:
            self._arm(self.limits.header_timeout_s, self._header_timeout)

    def on_url(self, url: bytes) -> None:
        self._head_size += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm()
        if self._head_size > self.limits.max_header_bytes:
            self._refused = True  # data_received answers once the parser returns
            return
        super().on_headers_complete()
        self._arm(self.limits.body_timeout_s, self._body_timeout)

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        self._disarm()
        super().on_message_complete()

    # ------------------------------------------------------------------ timeouts

    def _arm(self, delay: float, callback: Any) -> None:
        self._disarm()
        self._timer = self.loop.call_later(delay, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _header_timeout(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if not self._in_head:  # nothing sent on a new connection: just close it
            self.transport.close()
            return
        self._refuse(408, "request_timeout", f"The request headers did not arrive within {self.limits.header_timeout_s:g} s "
                     "(server.header_timeout_s).")

    def _body_timeout(self) -> None:
        self._timer = None
        cycle = self.cycle
        if cycle is None or not cycle.more_body or self.transport.is_closing():
            return
        if not cycle.response_started:
            self._refuse(408, "request_timeout", f"The request body did not arrive within {self.limits.body_timeout_s:g} s "
                         "(server.body_timeout_s).")
        # The handler still waiting for the body now reads a disconnect; anything it sends is dropped.
        cycle.disconnected = True
        cycle.message_event.set()
        self.transport.close()

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer `status` with an OpenAI-shaped error and close the connection."""
        self._refused = True
        body = json.dumps(error_body(message, code, status)).encode("utf-8")
        head = [STATUS_LINE[status]]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [b"content-type: application/json\r\n", b"content-length: %d\r\n" % len(body), b"connection: close\r\n\r\n"]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
