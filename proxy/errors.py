"""OpenAI-shaped errors: {"error": {"message", "type", "code", "param"}}."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from ctxwarden.policies.errors import CtxwardenError


def error_type_for(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 404:
        return "not_found_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def error_body(message: str, code: str, status: int = 400, param: str | None = None, type: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type or error_type_for(status), "code": code, "param": param}}


class ProxyError(CtxwardenError):
    """An error the client should see, with its HTTP status and OpenAI error code."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        param: str | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
        relayed: dict[str, Any] | None = None,
    ) -> None:
        """`relayed`: the upstream's own error body, answered as it is (an error in a later round of
        the proxy's tool rounds is relayed as the first round's would be)."""
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.type = type
        self.headers = headers or {}
        self.relayed = relayed

    def body(self) -> dict[str, Any]:
        return self.relayed or error_body(self.message, self.code, self.status, self.param, self.type)

    def response(self, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers={**self.headers, **(headers or {})})


def invalid(message: str, param: str | None = None) -> ProxyError:
    return ProxyError(400, "invalid_request", message, param=param)
