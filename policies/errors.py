"""The one root of every error ctxwarden raises on purpose, so callers can catch ours alone; and the
checks of the names that scope state (tenant, user, task), whose errors these are."""


class CtxwardenError(Exception):
    """Base class of ctxwarden's own errors (bad config, bad documents, failed judges, HTTP errors)."""


class HintError(CtxwardenError, ValueError):
    """A request hint (an x-ctxwarden-* header, or the admin API's field) that is not valid: an HTTP
    400 naming it (`param`)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


# ----------------------------------------------------------------------------- names that scope state and storage
# (here, beside their errors: base, state and the admin APIs all check them, and this module imports nothing)

# A tenant names a namespace of state and storage; one rule for the header and the admin API.
MAX_TENANT_LENGTH = 128


class TenantError(CtxwardenError, ValueError):
    """An invalid tenant name; the message names it and says why (an HTTP 400)."""

    def __init__(self, message: str, param: str = "x-ctxwarden-tenant") -> None:
        super().__init__(message)
        self.param = param


def check_tenant(name: str, param: str = "x-ctxwarden-tenant") -> str:
    """`name` unchanged when it is a valid tenant name; TenantError (saying which and why) if not."""
    if not isinstance(name, str):
        raise TenantError(f"{param}: the tenant must be a string, got {type(name).__name__}", param)
    if not name:
        raise TenantError(f"{param}: the tenant name is empty (omit it for the shared namespace)", param)
    if len(name) > MAX_TENANT_LENGTH:
        raise TenantError(f"{param}: the tenant name {name[:40]!r}… is {len(name)} characters long "
                          f"(at most {MAX_TENANT_LENGTH})", param)
    if not name.isprintable():
        raise TenantError(f"{param}: the tenant name {name!r} contains control or non-printable characters", param)
    return name


MAX_NAME_LENGTH = 256  # of a user or task name: whose request it is inside its tenant (memory, archive)


def check_name(value: object, param: str) -> str:
    """A user or task name: a printable string of 1-256 characters (HintError, an HTTP 400, if not)."""
    if not isinstance(value, str) or not value:
        raise HintError(f"{param} must be a non-empty string", param)
    if len(value) > MAX_NAME_LENGTH or not value.isprintable():
        raise HintError(f"{param} must be at most {MAX_NAME_LENGTH} printable characters", param)
    return value
