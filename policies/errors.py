"""The one root of every error ctxwarden raises on purpose, so callers can catch ours alone."""


class CtxwardenError(Exception):
    """Base class of ctxwarden's own errors (bad config, bad documents, failed judges, HTTP errors)."""


class HintError(CtxwardenError, ValueError):
    """A request hint (an x-ctxwarden-* header, or the admin API's field) that is not valid: an HTTP
    400 naming it (`param`)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param
