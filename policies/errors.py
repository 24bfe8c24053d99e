"""The one root of every error ctxwarden raises on purpose, so callers can catch ours alone."""


class CtxwardenError(Exception):
    """Base class of ctxwarden's own errors (bad config, bad documents, failed judges, HTTP errors)."""
